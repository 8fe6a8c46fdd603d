//! Groups: limits, metrics, closing, errors, cancellation and shutdown.
//! No timing thresholds: only generous hang timeouts.

mod common;
use common::within;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tidepool::{GroupError, JoinError, Pool, Priority, SpawnError};

/// Live/peak counter measured inside tasks.
#[derive(Default)]
struct HighWater {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl HighWater {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// The group's metrics once the last run permit is back: it comes back just
/// after the handle sees the output.
fn settled(group: &tidepool::Group) -> tidepool::GroupMetrics {
    loop {
        let m = group.metrics();
        if m.admitted == 0 && m.running == 0 {
            return m;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn max_concurrency_bounds_running_closures_and_polls() {
    within(Duration::from_secs(60), || {
        let pool = Pool::builder().concurrency(4).build().unwrap();
        let group = pool.group().max_concurrency(2).build().unwrap();
        let running = Arc::new(HighWater::default());
        let mut handles = Vec::new();
        for i in 0..200 {
            let running = Arc::clone(&running);
            if i % 2 == 0 {
                handles.push(group.spawn_fn(move || {
                    running.enter();
                    std::thread::sleep(Duration::from_micros(200));
                    running.leave();
                }));
            } else {
                handles.push(group.spawn(async move {
                    for _ in 0..3 {
                        running.enter();
                        std::thread::sleep(Duration::from_micros(100));
                        running.leave();
                        // Awaiting: holds no run permit.
                        tidepool::sleep(Duration::from_micros(200)).await;
                    }
                }));
            }
        }
        for handle in handles {
            handle.join().unwrap();
        }
        assert!(running.peak() <= 2, "peak {}", running.peak());
        assert!(running.peak() >= 1);
        let m = settled(&group);
        assert_eq!(
            (m.spawned, m.completed, m.queued, m.in_flight),
            (200, 200, 0, 0)
        );
    });
}

#[test]
fn awaiting_tasks_do_not_count_against_max_concurrency() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        // 50 tasks that all await at once: with one run permit they still all
        // get to their await, because awaiting holds no permit.
        let (tx, rx) = async_channel_like();
        let handles: Vec<_> = (0..50)
            .map(|_| {
                let started = Arc::clone(&started);
                let rx = rx.clone();
                group.spawn(async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    rx.wait().await;
                })
            })
            .collect();
        while started.load(Ordering::SeqCst) < 50 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(group.metrics().in_flight, 50);
        tx.open();
        for handle in handles {
            handle.join().unwrap();
        }
    });
}

#[test]
fn max_in_flight_bounds_started_tasks_end_to_end() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(4).build().unwrap();
        let group = pool.group().max_in_flight(3).build().unwrap();
        let in_flight = Arc::new(HighWater::default());
        let handles: Vec<_> = (0..60)
            .map(|_| {
                let in_flight = Arc::clone(&in_flight);
                group.spawn(async move {
                    in_flight.enter();
                    tidepool::sleep(Duration::from_micros(300)).await;
                    futures_lite::future::yield_now().await;
                    in_flight.leave();
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert!(in_flight.peak() <= 3, "peak {}", in_flight.peak());
        assert_eq!(group.metrics().completed, 60);
    });
}

#[test]
fn max_in_flight_one_with_self_waking_tasks_does_not_deadlock() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool
            .group()
            .max_in_flight(1)
            .max_concurrency(1)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..20)
            .map(|i| {
                group.spawn(async move {
                    for _ in 0..5 {
                        futures_lite::future::yield_now().await;
                    }
                    i
                })
            })
            .collect();
        let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..20).sum());
    });
}

#[test]
fn a_group_admits_in_fifo_order() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let order = Arc::clone(&order);
                group.spawn_fn(move || order.lock().unwrap().push(i))
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..50).collect::<Vec<_>>());
    });
}

#[test]
fn panics_and_cancellations_are_counted_and_release_permits() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool
            .group()
            .max_concurrency(1)
            .max_in_flight(1)
            .build()
            .unwrap();
        let gate = Arc::new(std::sync::Barrier::new(2));
        let g = Arc::clone(&gate);
        let blocker = group.spawn_fn(move || {
            g.wait();
        });
        // These wait in the group's FIFO behind the blocker.
        let mut cancelled = group.spawn_fn(|| unreachable!("cancelled before it ran"));
        let panicking = group.spawn_fn(|| panic!("boom"));
        let mut pending = group.spawn(std::future::pending::<()>());
        let last = group.spawn(async { 7 });
        assert!(cancelled.cancel());
        gate.wait();
        blocker.join().unwrap();
        assert!(panicking.join().unwrap_err().is_panic());
        // `pending` holds the only in-flight permit until cancelled.
        while group.metrics().in_flight == 0 || group.metrics().running > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!last.is_finished());
        assert!(pending.cancel());
        assert_eq!(last.join().unwrap(), 7);
        assert!(matches!(cancelled.join(), Err(JoinError::Cancelled)));
        let m = settled(&group);
        assert_eq!(m.spawned, 5);
        assert_eq!((m.completed, m.panicked, m.cancelled), (2, 1, 2));
        assert_eq!((m.queued, m.admitted, m.in_flight), (0, 0, 0));
        // The pool keeps serving.
        assert_eq!(group.spawn_fn(|| 1).join().unwrap(), 1);
    });
}

#[test]
fn closing_a_group_refuses_new_work_and_runs_queued_work() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let queued: Vec<_> = (0..10)
            .map(|i| {
                group.spawn_fn(move || {
                    std::thread::sleep(Duration::from_millis(1));
                    i
                })
            })
            .collect();
        let clone = group.clone();
        clone.close();
        assert!(group.is_closed());
        assert_eq!(group.try_spawn_fn(|| 0).unwrap_err(), SpawnError::ShutDown);
        assert_eq!(group.try_spawn(async {}).unwrap_err(), SpawnError::ShutDown);
        assert!(group.spawn(async {}).join().unwrap_err().is_cancelled());
        let sum: i32 = queued.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 45);
        assert_eq!(group.metrics().spawned, 10);
        // Other groups and the pool are unaffected.
        assert_eq!(
            pool.group().build().unwrap().spawn_fn(|| 3).join().unwrap(),
            3
        );
    });
}

#[test]
fn shutdown_runs_tasks_queued_in_groups() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..100)
            .map(|_| {
                let ran = Arc::clone(&ran);
                group.spawn_fn(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        pool.shutdown().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 100);
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(group.try_spawn_fn(|| ()).unwrap_err(), SpawnError::ShutDown);
        assert!(group.spawn_fn(|| ()).join().unwrap_err().is_cancelled());
        let m = group.metrics();
        assert_eq!((m.spawned, m.completed), (100, 100));
    });
}

#[test]
fn a_stopped_pool_cancels_tasks_waiting_in_a_group() {
    within(Duration::from_secs(30), || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let blocker = group.spawn_fn(|| std::thread::sleep(Duration::from_millis(300)));
        let waiting: Vec<_> = (0..20).map(|i| group.spawn_fn(move || i)).collect();
        assert!(pool.shutdown_timeout(Duration::from_millis(20)).is_err());
        // The blocker finishes on its thread; nothing else may run, and every
        // waiting handle must say it was cancelled (not hang).
        blocker.join().unwrap();
        for handle in waiting {
            assert!(handle.join().unwrap_err().is_cancelled());
        }
        let m = group.metrics();
        assert_eq!((m.spawned, m.completed, m.cancelled), (21, 1, 20));
        assert_eq!(m.queued, 0);
    });
}

#[test]
fn groups_carry_their_priority() {
    within(Duration::from_secs(30), || {
        // Fixed: the holder's wait must not be compensated, or the normal
        // items could run on another worker before the urgent one arrives.
        let pool = Pool::builder()
            .concurrency(1)
            .controller(tidepool::Controller::Fixed)
            .build()
            .unwrap();
        let urgent = pool.group().priority(Priority::High).build().unwrap();
        let (tx, rx) = mpsc::channel();
        // Occupy the only slot, queue normal work, then urgent group work.
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        let holder = pool.spawn_fn(move || hold_rx.recv().unwrap());
        std::thread::sleep(Duration::from_millis(20));
        let normal: Vec<_> = (0..10)
            .map(|i| {
                let tx = tx.clone();
                pool.spawn_fn(move || tx.send(("normal", i)).unwrap())
            })
            .collect();
        let tx2 = tx.clone();
        let high = urgent.spawn_fn(move || tx2.send(("high", 0)).unwrap());
        hold_tx.send(()).unwrap();
        holder.join().unwrap();
        high.join().unwrap();
        for h in normal {
            h.join().unwrap();
        }
        drop(tx);
        let order: Vec<_> = rx.iter().collect();
        assert_eq!(order[0], ("high", 0), "{order:?}");
    });
}

#[test]
fn build_errors_name_the_value_and_the_fix() {
    let pool = Pool::builder().concurrency(1).build().unwrap();
    let cases = [
        (
            pool.group().max_concurrency(0).build().unwrap_err(),
            GroupError::ZeroMaxConcurrency,
            "max_concurrency (0)",
            "omit it",
        ),
        (
            pool.group().max_in_flight(0).build().unwrap_err(),
            GroupError::ZeroMaxInFlight,
            "max_in_flight (0)",
            "omit it",
        ),
        (
            pool.group().weight(0).build().unwrap_err(),
            GroupError::ZeroWeight,
            "weight (0)",
            "omit it",
        ),
        (
            // A pair has no limit to omit: the message names the argument
            // of `concurrent_exclusive` and asks for 1 or more.
            pool.concurrent_exclusive(0).unwrap_err(),
            GroupError::ZeroPairConcurrency,
            "max_concurrency (0) of concurrent_exclusive",
            "pass 1 or more",
        ),
    ];
    for (err, expected, names, fix) in cases {
        assert_eq!(err, expected);
        let text = err.to_string();
        assert!(text.contains(names), "{text}");
        assert!(text.contains(fix), "{text} should say how to fix it");
        assert!(!format!("{err:?}").is_empty());
    }
}

#[test]
fn a_group_keeps_its_pool_open_and_metrics_add_up() {
    within(Duration::from_secs(30), || {
        let group = {
            let pool = Pool::builder().concurrency(2).build().unwrap();
            pool.group()
                .name("orphan")
                .max_concurrency(3)
                .build()
                .unwrap()
        };
        assert_eq!(group.name(), Some("orphan"));
        let handles: Vec<_> = (0..30).map(|i| group.spawn_fn(move || i)).collect();
        let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..30).sum());
        let m = group.metrics();
        assert_eq!(m.spawned, m.completed + m.panicked + m.cancelled);
        assert!(format!("{group:?}").contains("orphan"));
    });
}

/// A one-shot latch tasks can await (no extra dependency).
fn async_channel_like() -> (Latch, Latch) {
    let latch = Latch(Arc::new((std::sync::Mutex::new((false, Vec::new())), ())));
    (latch.clone(), latch)
}

#[derive(Clone)]
#[allow(clippy::type_complexity)]
struct Latch(Arc<(std::sync::Mutex<(bool, Vec<std::task::Waker>)>, ())>);

impl Latch {
    fn open(&self) {
        let wakers = {
            let mut state = self.0 .0.lock().unwrap();
            state.0 = true;
            std::mem::take(&mut state.1)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    async fn wait(&self) {
        futures_lite::future::poll_fn(|cx| {
            let mut state = self.0 .0.lock().unwrap();
            if state.0 {
                std::task::Poll::Ready(())
            } else {
                state.1.push(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
        .await
    }
}

/// A group's snapshot taken while its tasks end never shows more ended than
/// spawned (it read `spawned` first, so tasks spawned and ended between the
/// two reads showed as ended only).
#[test]
fn a_live_group_snapshot_never_shows_more_ended_than_spawned() {
    within(Duration::from_secs(120), || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool.group().build().unwrap();
        let driver = {
            let group = group.clone();
            std::thread::spawn(move || {
                for _ in 0..2_000 {
                    let batch: Vec<_> = (0..64).map(|_| group.spawn_fn(|| ())).collect();
                    batch.into_iter().for_each(|h| h.join().unwrap());
                }
            })
        };
        while !driver.is_finished() {
            let m = group.metrics();
            assert!(
                m.completed + m.panicked + m.cancelled <= m.spawned,
                "more ended than spawned: {m:?}"
            );
        }
        driver.join().unwrap();
        let m = group.metrics();
        assert_eq!(m.spawned, m.completed);
    });
}
