//! tokio-based code inside tidepool tasks: with the `tokio` feature it works
//! unchanged (tokio::net, tokio::time, a hyper client); without it, it fails
//! at once with tokio's message as `JoinError::Panicked`, never a hang.
//! Network use: a handful of connections to servers on 127.0.0.1.

mod common;

use common::{within, HANG};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

/// A server on 127.0.0.1 that answers `connections` connections on its own
/// thread, each with `answer(stream)`.
fn loopback_server(
    connections: usize,
    answer: fn(std::net::TcpStream),
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            answer(stream.unwrap());
        }
    });
    (addr, thread)
}

/// Echoes until the peer closes.
fn echo(mut stream: std::net::TcpStream) {
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(feature = "tokio")]
mod with_feature {
    use super::*;
    use std::time::Duration;
    use tidepool::Pool;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pool() -> Pool {
        Pool::builder().concurrency(2).build().unwrap()
    }

    #[test]
    fn tokio_sockets_and_timers_work_in_tasks() {
        within(HANG, || {
            let (addr, server) = loopback_server(1, echo);
            let pool = pool();
            let task = pool.spawn(async move {
                let mut stream = tokio::net::TcpStream::connect(addr).await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
                stream.write_all(b"ping over tokio").await?;
                let mut back = [0u8; 15];
                stream.read_exact(&mut back).await?;
                let timed_out =
                    tokio::time::timeout(Duration::from_millis(5), std::future::pending::<()>())
                        .await
                        .is_err();
                Ok::<_, std::io::Error>((back, timed_out))
            });
            let (back, timed_out) = task.join().unwrap().unwrap();
            assert_eq!(&back, b"ping over tokio");
            assert!(timed_out, "tokio::time::timeout fired");
            server.join().unwrap();
            pool.shutdown().unwrap();
        });
    }

    /// A hand-written HTTP/1.1 responder: reads the head, answers "hello".
    fn http_hello(mut stream: std::net::TcpStream) {
        let mut head = Vec::new();
        let mut buf = [0u8; 512];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    }

    #[test]
    fn a_hyper_client_runs_in_a_task() {
        use http_body_util::{BodyExt, Empty};
        use hyper::body::Bytes;
        use hyper_util::rt::TokioIo;

        within(HANG, || {
            let (addr, server) = loopback_server(1, http_hello);
            let pool = pool();
            let task = pool.spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .unwrap();
                // Where hyper's examples say `tokio::spawn`, spawn on the pool.
                let connection = tidepool::spawn(connection);
                let request = hyper::Request::get(format!("http://{addr}/"))
                    .header("host", addr.to_string())
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                let status = response.status();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                drop(sender);
                connection.await.unwrap().unwrap();
                (status, body)
            });
            let (status, body) = task.join().unwrap();
            assert_eq!(status, 200);
            assert_eq!(&body[..], b"hello");
            server.join().unwrap();
            pool.shutdown().unwrap();
        });
    }

    #[test]
    fn block_on_outside_the_pool_enters_the_context_too() {
        within(HANG, || {
            let pool = pool();
            // The sleep is created inside block_on, in the context it enters.
            pool.block_on(async { tokio::time::sleep(Duration::from_millis(1)).await });
            pool.shutdown().unwrap();
        });
    }

    #[test]
    fn tokio_handle_puts_the_pool_on_the_users_runtime() {
        within(HANG, || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("users-runtime")
                .enable_all()
                .build()
                .unwrap();
            let pool = Pool::builder()
                .concurrency(1)
                .tokio_handle(runtime.handle().clone())
                .build()
                .unwrap();
            // What `tokio::spawn` inside a task runs on: the user's
            // runtime's workers, or the shared runtime's.
            let spawned_on = |pool: &Pool| {
                pool.spawn(async {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    tokio::spawn(async { std::thread::current().name().map(str::to_owned) })
                        .await
                        .unwrap()
                })
                .join()
                .unwrap()
            };
            assert_eq!(spawned_on(&pool).as_deref(), Some("users-runtime"));
            let shared = super::with_feature::pool();
            assert_eq!(spawned_on(&shared).as_deref(), Some("tidepool-tokio"));
            pool.shutdown().unwrap();
            shared.shutdown().unwrap();
        });
    }

    /// What the crate docs say about tokio's own task functions, checked.
    #[test]
    fn tokio_spawn_and_spawn_blocking_run_outside_the_pool_and_block_in_place_runs_in_place() {
        within(HANG, || {
            let pool = pool();
            let names = pool.spawn(async {
                let current = || std::thread::current().name().map(str::to_owned);
                let spawned = tokio::spawn(async move { current() }).await.unwrap();
                let blocking = tokio::task::spawn_blocking(current).await.unwrap();
                (spawned, blocking)
            });
            let (spawned, blocking) = names.join().unwrap();
            // The shared runtime's workers and its blocking threads.
            assert_eq!(spawned.as_deref(), Some("tidepool-tokio"));
            assert_eq!(blocking.as_deref(), Some("tidepool-tokio"));

            // No tokio worker here: block_in_place just runs the closure.
            let in_place = pool.spawn(async { tokio::task::block_in_place(|| 1) });
            assert_eq!(in_place.join().unwrap(), 1);
            pool.shutdown().unwrap();
        });
    }
}

#[cfg(not(feature = "tokio"))]
mod without_feature {
    use super::*;
    use std::time::Duration;
    use tidepool::{JoinError, Pool};

    const NO_REACTOR: &str =
        "there is no reactor running, must be called from the context of a Tokio 1.x runtime";

    fn panic_message(err: JoinError) -> String {
        match err {
            JoinError::Panicked(panic) => panic.message().unwrap_or_default().to_owned(),
            other => panic!("expected JoinError::Panicked, got {other:?}"),
        }
    }

    #[test]
    fn tokio_code_panics_with_tokios_message_instead_of_hanging() {
        within(HANG, || {
            let pool = Pool::builder().concurrency(1).build().unwrap();
            let sleep = pool.spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
            });
            assert_eq!(panic_message(sleep.join().unwrap_err()), NO_REACTOR);

            let (addr, server) = loopback_server(1, echo);
            let connect = pool.spawn(async move {
                let _ = tokio::net::TcpStream::connect(addr).await;
            });
            assert_eq!(panic_message(connect.join().unwrap_err()), NO_REACTOR);
            server.join().unwrap();
            pool.shutdown().unwrap();
        });
    }
}
