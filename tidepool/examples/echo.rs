//! An echo server and its clients on 127.0.0.1, all tidepool tasks over
//! `tidepool::Async` sockets. Each connection is a task that holds no
//! thread while it waits for bytes.
//!
//! ```sh
//! cargo run --release -p tidepool --example echo            # 100 clients
//! cargo run --release -p tidepool --example echo -- 1000    # 1,000 clients
//! ```

use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use tidepool::io::{AsyncReadExt, AsyncWriteExt};
use tidepool::Async;

/// Round trips each client makes.
const ROUND_TRIPS: usize = 100;

fn main() -> std::io::Result<()> {
    let clients: usize = match std::env::args().nth(1) {
        Some(n) => n.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("clients ({n:?}) must be a whole number, e.g. 100"),
            )
        })?,
        None => 100,
    };

    // The server: accept connections and echo each on its own task.
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    let addr = listener.get_ref().local_addr()?;
    let server = tidepool::spawn(async move {
        loop {
            let Ok((stream, _peer)) = listener.accept().await else {
                continue;
            };
            // Dropping the handle detaches the task.
            drop(tidepool::spawn(async move {
                // Copies what the client sends back to it until it closes.
                let _ = tidepool::io::copy(&stream, &mut &stream).await;
            }));
        }
    });

    // The clients: each sends a message, reads the echo, and repeats.
    let started = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|client| {
            tidepool::spawn(async move {
                let mut stream = Async::<TcpStream>::connect(addr).await?;
                let message = format!("hello from client {client:>6}\n");
                let mut echo = vec![0u8; message.len()];
                for _ in 0..ROUND_TRIPS {
                    stream.write_all(message.as_bytes()).await?;
                    stream.read_exact(&mut echo).await?;
                    assert_eq!(echo, message.as_bytes());
                }
                Ok::<_, std::io::Error>(())
            })
        })
        .collect();
    for handle in handles {
        tidepool::block_on(handle).expect("the client task ran")?;
    }
    let elapsed = started.elapsed();
    let total = clients * ROUND_TRIPS;
    println!(
        "{clients} clients, {total} round trips in {elapsed:.2?}: {:.0} round trips/s",
        total as f64 / elapsed.as_secs_f64()
    );
    drop(server); // detached; it ends with the process
    Ok(())
}
