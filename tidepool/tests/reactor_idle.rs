//! An idle pool uses no CPU, reactor included: after a burst of socket
//! traffic (during which the reactor's thread stands aside and workers
//! poll), the last worker to park calls the thread back to `epoll_wait`,
//! where it sleeps without waking; with a timer pending, it sleeps until
//! that timer's deadline. Its own binary: the reactor is one per
//! process, and other tests' sockets would wake it.
#![cfg(target_os = "linux")]

mod common;

use common::{eventually, within, HANG};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;
use tidepool::io::{AsyncReadExt, AsyncWriteExt};
use tidepool::{Async, Pool};

/// Voluntary context switches of this process's threads whose name starts
/// with `prefix` (each wake-up from a sleep is one).
fn wakeups_of(prefix: &str) -> u64 {
    let mut total = 0;
    for dir in common::threads_named(prefix) {
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        for line in status.lines() {
            if let Some(count) = line.strip_prefix("voluntary_ctxt_switches:") {
                total += count.trim().parse::<u64>().unwrap();
            }
        }
    }
    total
}

#[test]
fn the_reactor_sleeps_without_waking_once_the_pool_is_idle() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        const CONNECTIONS: usize = 100;
        let server = pool.spawn(async move {
            for _ in 0..CONNECTIONS {
                let (mut stream, _) = listener.accept().await.unwrap();
                drop(tidepool::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n @ 1..) = stream.read(&mut buf).await {
                        stream.write_all(&buf[..n]).await.unwrap();
                    }
                }));
            }
        });
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|_| {
                pool.spawn(async move {
                    let mut stream = Async::<TcpStream>::connect(addr).await.unwrap();
                    let mut back = [0u8; 8];
                    for _ in 0..300 {
                        stream.write_all(b"12345678").await.unwrap();
                        stream.read_exact(&mut back).await.unwrap();
                    }
                })
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
        server.join().unwrap();
        assert!(eventually(HANG, || {
            let m = pool.metrics();
            m.in_flight == 0 && m.idle_threads == m.threads
        }));
        // Let the last worker park and the thread settle in epoll_wait.
        std::thread::sleep(Duration::from_millis(100));
        // comm is cut to 15 bytes.
        let before = wakeups_of("tidepool-reacto");
        std::thread::sleep(Duration::from_millis(500));
        let woke = wakeups_of("tidepool-reacto") - before;
        // Left aside, it would look every millisecond: about 500 here.
        assert!(woke < 50, "the reactor thread woke {woke} times while idle");

        // Timers too: after a burst of short sleeps and timeouts, with one
        // long timer still pending, the thread sleeps until that one.
        let mut long = pool.spawn(tidepool::sleep(Duration::from_secs(3600)));
        let short: Vec<_> = (0..1_000u64)
            .map(|i| {
                pool.spawn(async move {
                    tidepool::sleep(Duration::from_micros(i * 10)).await;
                    tidepool::timeout(Duration::from_millis(5), tidepool::yield_now()).await
                })
            })
            .collect();
        for task in short {
            assert_eq!(task.join().unwrap(), Ok(()));
        }
        assert!(eventually(HANG, || pool.metrics().idle_threads
            == pool.metrics().threads));
        // The dropped timeouts' deadlines pass (one spurious turn at most).
        std::thread::sleep(Duration::from_millis(100));
        let before = wakeups_of("tidepool-reacto");
        std::thread::sleep(Duration::from_millis(500));
        let woke = wakeups_of("tidepool-reacto") - before;
        assert!(
            woke < 50,
            "the reactor thread woke {woke} times with one long timer"
        );
        assert!(long.cancel());
    });
}
