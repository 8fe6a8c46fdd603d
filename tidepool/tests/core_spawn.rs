//! Spawning: every task runs exactly once, from outside or inside the pool,
//! as a closure or a future; awaits hold no thread; sockets work.

mod common;

use common::{assert_counters_add_up, within, HANG};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidepool::{Async, Pool};

const MILLION: usize = 1_000_000;

/// One flag per task: a task that ran twice, or not at all, is caught.
struct Flags {
    ran: Vec<AtomicBool>,
    count: AtomicUsize,
}

impl Flags {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Flags {
            ran: (0..n).map(|_| AtomicBool::new(false)).collect(),
            count: AtomicUsize::new(0),
        })
    }

    fn run(&self, i: usize) {
        assert!(
            !self.ran[i].swap(true, Ordering::Relaxed),
            "task {i} ran twice"
        );
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn assert_all_ran(&self) {
        assert_eq!(self.count.load(Ordering::Relaxed), self.ran.len());
        assert!(self.ran.iter().all(|f| f.load(Ordering::Relaxed)));
    }
}

#[test]
fn a_million_tasks_from_outside_each_run_once() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let flags = Flags::new(MILLION);
        for i in 0..MILLION {
            let flags = flags.clone();
            // Dropped handles detach: the tasks must still run.
            drop(pool.spawn_fn(move || flags.run(i)));
        }
        pool.shutdown().unwrap();
        flags.assert_all_ran();
        let m = pool.metrics();
        assert_eq!(m.spawned, MILLION as u64);
        assert_eq!(m.completed, MILLION as u64);
        assert_counters_add_up(&m);
    });
}

#[test]
fn a_million_tasks_from_inside_each_run_once() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let flags = Flags::new(MILLION);
        let inner_pool = pool.clone();
        let inner_flags = flags.clone();
        // Half closures, half futures, spawned by a task on the pool.
        pool.spawn(async move {
            for i in 0..MILLION {
                let flags = inner_flags.clone();
                if i % 2 == 0 {
                    drop(inner_pool.spawn_fn(move || flags.run(i)));
                } else {
                    drop(inner_pool.spawn(async move { flags.run(i) }));
                }
            }
        })
        .join()
        .unwrap();
        pool.shutdown().unwrap();
        flags.assert_all_ran();
        assert_eq!(pool.metrics().completed, MILLION as u64 + 1);
    });
}

#[test]
fn a_thousand_sleeping_tasks_share_one_slot() {
    // 1,000 x 500 ms would take 500 s on a pool that blocks a thread per wait;
    // awaiting a timer holds no thread, so they all overlap.
    let threads = within(Duration::from_secs(5), || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(1)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..1000)
            .map(|i| {
                pool.spawn(async move {
                    tidepool::sleep(Duration::from_millis(500)).await;
                    i
                })
            })
            .collect();
        let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 999 * 1000 / 2);
        pool.metrics().peak_threads
    });
    assert_eq!(threads, 1, "awaits must not need more threads");
}

#[test]
fn tcp_echo_over_async_sockets() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let server = pool.spawn(async move {
            use futures_lite::{AsyncReadExt, AsyncWriteExt};
            for _ in 0..10 {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 64];
                let n = stream.read(&mut buf).await.unwrap();
                stream.write_all(&buf[..n]).await.unwrap();
            }
        });
        let clients: Vec<_> = (0..10)
            .map(|i| {
                pool.spawn(async move {
                    use futures_lite::{AsyncReadExt, AsyncWriteExt};
                    let mut stream = Async::<TcpStream>::connect(addr).await.unwrap();
                    let message = format!("hello {i}");
                    stream.write_all(message.as_bytes()).await.unwrap();
                    let mut reply = vec![0u8; message.len()];
                    stream.read_exact(&mut reply).await.unwrap();
                    assert_eq!(reply, message.as_bytes());
                    i
                })
            })
            .collect();
        for (i, client) in clients.into_iter().enumerate() {
            assert_eq!(client.join().unwrap(), i);
        }
        server.join().unwrap();
    });
}

#[test]
fn blocking_std_client_inside_a_work_item() {
    within(HANG, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        let pool = Pool::builder().build().unwrap();
        let reply = pool
            .spawn_fn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"hello").unwrap();
                let mut buf = [0u8; 5];
                s.read_exact(&mut buf).unwrap();
                buf
            })
            .join()
            .unwrap();
        assert_eq!(&reply, b"hello");
        server.join().unwrap();
    });
}

#[test]
fn join_handle_is_a_future_and_tasks_spawn_tasks() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let inner = pool.clone();
        let total = pool.block_on(async move {
            let mut handles = Vec::new();
            for i in 0..100u64 {
                handles.push(inner.spawn(async move { i * 2 }));
            }
            let mut total = 0;
            for h in handles {
                total += h.await.unwrap();
            }
            total
        });
        assert_eq!(total, 9900);
    });
}

#[test]
fn start_latency_measures_every_trickled_start_and_samples_bursts() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        // A trickle: spawns 2 ms apart are all measured.
        for _ in 0..20 {
            pool.spawn_fn(|| ()).join().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        // Every start is in the snapshot as soon as the task has run.
        let trickle = pool.metrics().start_latency;
        assert_eq!(trickle.count, 20);
        assert!(trickle.p50 <= trickle.p99 && trickle.p99 <= trickle.max);
        assert!(trickle.max > Duration::ZERO);
        // A burst of 80,000 from one thread: about one in eight.
        let handles: Vec<_> = (0..80_000).map(|_| pool.spawn_fn(|| ())).collect();
        for h in handles {
            h.join().unwrap();
        }
        pool.shutdown().unwrap();
        let burst = pool.metrics().start_latency.count - trickle.count;
        assert!(
            (5_000..=80_000).contains(&burst),
            "measured {burst} of 80000"
        );
        assert!(
            burst < 40_000,
            "a burst should be sampled, measured {burst}"
        );
    });
}

#[test]
fn a_detached_work_items_output_is_dropped_when_it_finishes() {
    // The spawning thread keeps a reference to recent work items' cells (so
    // it can free them itself); that must not keep their outputs alive.
    struct Signal(std::sync::mpsc::Sender<()>);
    impl Drop for Signal {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        drop(pool.spawn_fn(move || Signal(tx)));
        rx.recv_timeout(HANG).expect("the output was never dropped");
    });
}

/// Starts measured on a worker that never stops to park are in the next
/// snapshot: twenty trickled child tasks run back to back on one worker,
/// and the snapshot is read while that worker is still inside the last one
/// (the one spawned first: a worker runs its newest local task first).
#[test]
fn start_latency_snapshots_include_a_busy_workers_starts() {
    within(HANG, || {
        // Fixed: the parent's sleeps must not get it replaced by a second
        // worker, which would steal the children out of order.
        let pool = one_fixed_slot();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let (inside_tx, inside_rx) = std::sync::mpsc::channel::<()>();
        let p = pool.clone();
        drop(pool.spawn_fn(move || {
            drop(p.spawn_fn(move || {
                inside_tx.send(()).unwrap();
                release_rx.recv_timeout(HANG).unwrap();
            }));
            // Spawned from the worker, 50 µs apart: a trickle, each measured.
            for _ in 0..19 {
                std::thread::sleep(Duration::from_micros(50));
                drop(p.spawn_fn(|| ()));
            }
        }));
        inside_rx.recv_timeout(HANG).unwrap();
        // The parent and its 20 children have started; the worker is still
        // running the last child.
        let count = pool.metrics().start_latency.count;
        release_tx.send(()).unwrap();
        assert!(count >= 21, "only {count} of 21 starts in the snapshot");
    });
}

/// A pool of one slot and one worker (`Fixed`): what runs next is decided
/// by the queues alone.
fn one_fixed_slot() -> Pool {
    Pool::builder()
        .concurrency(1)
        .controller(tidepool::Controller::Fixed)
        .build()
        .unwrap()
}

/// A task that yields goes behind the work that waits, not back on top of
/// its worker's (LIFO) deque: on one slot, its sibling runs at its first
/// yield.
#[test]
fn a_yielding_task_lets_its_sibling_run_at_once() {
    let yields = within(HANG, || {
        let pool = one_fixed_slot();
        let p = pool.clone();
        let spinner = pool.spawn(async move {
            let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let set = flag.clone();
            drop(p.spawn_fn(move || set.store(true, Ordering::SeqCst)));
            let mut yields = 0u32;
            while !flag.load(Ordering::SeqCst) {
                futures_lite::future::yield_now().await;
                yields += 1;
            }
            yields
        });
        spinner.join().unwrap()
    });
    // One yield; two if the fairness pick came up in between.
    assert!(yields <= 2, "the sibling waited {yields} yields");
}

/// A snapshot taken while tasks spawned on one worker end on another still
/// adds up, and never shows more ended than spawned. (Read shard by shard
/// in one pass, about one live snapshot in 2,000 showed an end without
/// its spawn.)
#[test]
fn live_snapshots_add_up_while_tasks_move_between_workers() {
    // A snapshot merges every worker's latency histogram: ~10 µs in an
    // optimised build, 0.7-3 ms in a debug one, where 50,000 snapshots took
    // 36-60 s and once ran past `HANG` in CI. The debug run takes fewer;
    // the optimised run (also in CI) keeps the full count.
    within(HANG, || {
        let snapshots = if cfg!(debug_assertions) {
            5_000
        } else {
            50_000
        };
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let driver = {
            let (pool, stop) = (pool.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let inner = pool.clone();
                    // Children spawned on one worker, stolen and ended by
                    // the other.
                    pool.spawn_fn(move || {
                        let children: Vec<_> = (0..64).map(|_| inner.spawn_fn(|| ())).collect();
                        children.into_iter().for_each(|c| c.join().unwrap());
                    })
                    .join()
                    .unwrap();
                }
            })
        };
        for _ in 0..snapshots {
            let m = pool.metrics();
            assert_counters_add_up(&m);
            assert!(m.completed <= m.spawned, "more ended than spawned: {m:?}");
        }
        stop.store(true, Ordering::Relaxed);
        driver.join().unwrap();
        assert_counters_add_up(&pool.metrics());
    });
}

/// A closure spawned by a task goes on its worker's own deque, not on the
/// pool's lane: on one slot, the last spawned runs first (the deque is
/// LIFO, the lane FIFO). Fails if the spawn path took the worker for a
/// thread outside the pool.
#[test]
fn closures_spawned_by_a_task_go_on_its_workers_deque() {
    let order = within(HANG, || {
        let pool = one_fixed_slot();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (p, o) = (pool.clone(), order.clone());
        let children = pool
            .spawn_fn(move || {
                (0..3)
                    .map(|id| {
                        let o = o.clone();
                        p.spawn_fn(move || o.lock().unwrap().push(id))
                    })
                    .collect::<Vec<_>>()
            })
            .join()
            .unwrap();
        for child in children {
            child.join().unwrap();
        }
        let order = order.lock().unwrap().clone();
        order
    });
    assert_eq!(order, [2, 1, 0], "run in LIFO order, from the deque");
}

/// Futures spawned by a task keep their arrival order: the first goes on
/// its worker's empty deque (a one-task shortcut), the later ones on the
/// lane behind it, FIFO (`control::spawn_order`). On one slot they run in
/// the order they were spawned. Fails if futures went on the worker's LIFO
/// deque as closures do (the newest first: 3, 2, 1, 0).
#[test]
fn futures_spawned_by_a_task_run_in_arrival_order() {
    let order = within(HANG, || {
        let pool = one_fixed_slot();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (p, o) = (pool.clone(), order.clone());
        let children = pool
            .spawn(async move {
                (0..4)
                    .map(|id| {
                        let o = o.clone();
                        p.spawn(async move { o.lock().unwrap().push(id) })
                    })
                    .collect::<Vec<_>>()
            })
            .join()
            .unwrap();
        for child in children {
            child.join().unwrap();
        }
        let order = order.lock().unwrap().clone();
        order
    });
    assert_eq!(order, [0, 1, 2, 3], "run in the order spawned");
}
