//! Panics, cancellation, shutdown and build errors.

mod common;

use common::{assert_counters_add_up, eventually, within, HANG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;
use tidepool::{BuildError, Controller, JoinError, Pool, ShutdownError, SpawnError};

#[test]
fn a_panic_is_reported_and_the_pool_keeps_serving() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(1)
            .build()
            .unwrap();
        let err = pool
            .spawn_fn(|| -> u32 { panic!("boom") })
            .join()
            .unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.to_string(), "task panicked: boom");
        let payload = err.into_panic().unwrap();
        assert_eq!(*payload.downcast_ref::<&str>().unwrap(), "boom");

        let async_err = pool
            .spawn(async { panic!("{}", String::from("async boom")) })
            .join()
            .unwrap_err();
        assert!(matches!(&async_err, JoinError::Panicked(_)));
        assert_eq!(async_err.to_string(), "task panicked: async boom");

        // The single worker survived both panics.
        let results: Vec<_> = (0..100).map(|i| pool.spawn_fn(move || i)).collect();
        for (i, h) in results.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i);
        }
        let m = pool.metrics();
        assert_eq!(m.panicked, 2);
        assert_eq!(m.completed, 100);
        assert_eq!(
            m.threads, 1,
            "the panicking worker was not replaced: it never died"
        );
        assert_counters_add_up(&m);
    });
}

#[test]
fn cancel_before_start_means_it_never_runs() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(1)
            .build()
            .unwrap();
        let gate = Arc::new(Barrier::new(2));
        let g = gate.clone();
        // Occupy the only worker so the next task stays queued.
        let blocker = pool.spawn_fn(move || {
            g.wait();
        });
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let mut queued = pool.spawn_fn(move || r.store(true, Ordering::SeqCst));
        assert!(queued.cancel(), "not started, so cancelled");
        assert!(queued.is_finished());
        gate.wait();
        blocker.join().unwrap();
        assert!(matches!(queued.join(), Err(JoinError::Cancelled)));
        pool.shutdown().unwrap();
        assert!(!ran.load(Ordering::SeqCst), "a cancelled task ran");
        let m = pool.metrics();
        assert_eq!(m.cancelled, 1);
        assert_counters_add_up(&m);
    });
}

#[test]
fn cancel_during_an_await_drops_the_future() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (started_tx, started_rx) = mpsc::channel();
        let dropped = Arc::new(AtomicBool::new(false));
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let guard = SetOnDrop(dropped.clone());
        let mut handle = pool.spawn(async move {
            let _guard = guard;
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
        started_rx.recv().unwrap();
        assert!(handle.cancel());
        assert!(eventually(HANG, || dropped.load(Ordering::SeqCst)));
        assert!(handle.join().unwrap_err().is_cancelled());
        let m = pool.metrics();
        assert_eq!(m.cancelled, 1);
        assert_counters_add_up(&m);
    });
}

#[test]
fn cancel_after_finishing_keeps_the_output() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let mut handle = pool.spawn_fn(|| 7);
        assert!(eventually(HANG, || handle.is_finished()));
        assert!(!handle.cancel(), "already finished");
        assert_eq!(handle.join().unwrap(), 7);
    });
}

#[test]
fn detached_tasks_still_run() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..1000 {
            let c = count.clone();
            drop(pool.spawn(async move {
                tidepool::sleep(Duration::from_millis(1)).await;
                c.fetch_add(1, Ordering::SeqCst);
            }));
        }
        pool.shutdown().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 1000);
    });
}

#[test]
fn shutdown_runs_everything_queued() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(1)
            .build()
            .unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..10_000 {
            let c = count.clone();
            drop(pool.spawn_fn(move || {
                c.fetch_add(1, Ordering::SeqCst);
            }));
        }
        pool.shutdown().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 10_000);
        let m = pool.metrics();
        assert_eq!(m.threads, 0, "shutdown waits for the threads");
        assert_eq!(m.completed, 10_000);
        assert_counters_add_up(&m);
    });
}

#[test]
fn spawn_after_shutdown_is_refused() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        pool.shutdown().unwrap();
        let err = pool.spawn_fn(|| 1).join().unwrap_err();
        assert!(matches!(err, JoinError::ShutDown), "{err:?}");
        assert!(err.is_cancelled(), "a refused task did not run");
        assert!(err.to_string().contains(
            "closed (shut down, or its last Pool handle dropped) before this task was spawned"
        ));
        assert!(format!("{err:?}").contains("spawn on a running pool"));
        assert!(pool.spawn(async { 1 }).join().unwrap_err().is_cancelled());
        assert_eq!(pool.try_spawn_fn(|| 1).unwrap_err(), SpawnError::ShutDown);
        assert_eq!(
            pool.try_spawn(async { 1 }).unwrap_err(),
            SpawnError::ShutDown
        );
        let m = pool.metrics();
        assert_eq!(m.rejected, 4);
        assert_eq!(m.spawned, 0);
        assert_counters_add_up(&m);
    });
}

#[test]
fn shutdown_timeout_reports_a_task_that_never_ends() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let done = pool.spawn_fn(|| 1);
        let mut never = pool.spawn(std::future::pending::<()>());
        assert_eq!(done.join().unwrap(), 1);
        let err = pool
            .shutdown_timeout(Duration::from_millis(100))
            .unwrap_err();
        assert_eq!(err, ShutdownError::TimedOut { abandoned: 1 });
        assert!(err
            .to_string()
            .contains("1 task unfinished; it was abandoned"));
        // The abandoned task is dropped, not leaked: its handle says so.
        assert!(!never.cancel() || never.is_finished());
        assert!(never.join().unwrap_err().is_cancelled());
    });
}

/// A task waiting for a wake that never comes is in no queue; when a
/// shutdown times out, the stopped pool still drops it: its handle says
/// cancelled and what it captured is released (a listening socket, a
/// connection). Before, it stayed alive, its handle never resolved and
/// the socket stayed open.
#[test]
fn shutdown_timeout_cancels_tasks_that_wait_for_nothing() {
    struct Released(mpsc::Sender<&'static str>);
    impl Drop for Released {
        fn drop(&mut self) {
            let _ = self.0.send("released");
        }
    }
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (tx, rx) = mpsc::channel();
        let (started_tx, started_rx) = mpsc::channel();
        let waiting: Vec<_> = (0..3)
            .map(|_| {
                let held = Released(tx.clone());
                let started = started_tx.clone();
                pool.spawn(async move {
                    let _held = held;
                    started.send(()).unwrap();
                    std::future::pending::<()>().await
                })
            })
            .collect();
        // Each has run (and waits, in no queue).
        for _ in 0..3 {
            started_rx.recv_timeout(HANG).unwrap();
        }
        let err = pool
            .shutdown_timeout(Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(err, ShutdownError::TimedOut { abandoned: 3 });
        for handle in waiting {
            assert!(handle.join().unwrap_err().is_cancelled());
        }
        for _ in 0..3 {
            assert_eq!(rx.recv_timeout(HANG), Ok("released"));
        }
        let m = pool.metrics();
        assert_eq!((m.cancelled, m.in_flight), (3, 0));
        assert_counters_add_up(&m);
    });
}

/// A task that first waits after its pool has stopped (it was running,
/// abandoned, when the shutdown gave up) is dropped too.
#[test]
fn a_task_that_first_waits_after_the_stop_is_cancelled() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (started_tx, started_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let late = pool.spawn(async move {
            started_tx.send(()).unwrap();
            // Blocks its worker past the shutdown's timeout, then waits.
            let _ = go_rx.recv();
            std::future::pending::<()>().await
        });
        started_rx.recv().unwrap();
        let err = pool
            .shutdown_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(err, ShutdownError::TimedOut { abandoned: 1 });
        go_tx.send(()).unwrap();
        assert!(late.join().unwrap_err().is_cancelled());
    });
}

/// A task still running when its pool's last handle is dropped: the pool
/// is closing, so a spawn from the task is refused with an error that says
/// why (it said "shut down" though nobody called shutdown), while `join`
/// still runs and the task itself finishes.
#[test]
fn a_task_of_a_closing_pool_is_told_why_its_spawn_is_refused() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (out_tx, out_rx) = mpsc::channel();
        drop(pool.spawn_fn(move || {
            go_rx.recv().unwrap();
            let current = Pool::current().is_some();
            let refused = tidepool::spawn_fn(|| 1).join().unwrap_err();
            let joined = tidepool::join(|| 1, || 2);
            out_tx.send((current, refused, joined)).unwrap();
        }));
        drop(pool);
        go_tx.send(()).unwrap();
        let (current, refused, joined) = out_rx.recv_timeout(HANG).unwrap();
        assert!(!current, "a closing pool is no current pool");
        assert!(matches!(refused, JoinError::ShutDown), "{refused:?}");
        assert!(refused.to_string().contains("last Pool handle dropped"));
        assert_eq!(joined, (1, 2));
    });
}

#[test]
fn dropping_the_last_handle_drains_in_the_background() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            drop(pool.spawn(async move {
                tidepool::sleep(Duration::from_millis(20)).await;
                tx.send(i).unwrap();
            }));
        }
        drop(tx);
        drop(pool); // does not block, does not lose the tasks
        let mut got: Vec<i32> = rx.iter().collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    });
}

/// A waiting task that nothing can wake (nobody but the pool held its
/// waker) does not keep a pool whose last handle is gone: the pool drops it
/// (its captured values too) and its threads exit, while a task a timer
/// will wake still runs to its end. (Until the registry let go of the
/// wakers of an abandoned pool, the orphan kept every thread for good.)
#[test]
fn a_dropped_pool_lets_go_of_a_task_nothing_can_wake() {
    struct OnDrop(mpsc::Sender<&'static str>, &'static str);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            let _ = self.0.send(self.1);
        }
    }
    within(HANG, || {
        let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let pool = {
            let (started, stopped) = (Arc::clone(&started), Arc::clone(&stopped));
            Pool::builder()
                .concurrency(2)
                .on_thread_start(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                })
                .on_thread_stop(move || {
                    stopped.fetch_add(1, Ordering::SeqCst);
                })
                .build()
                .unwrap()
        };
        let (tx, rx) = mpsc::channel();
        let (orphan_tx, held_tx, timer_tx) = (tx.clone(), tx.clone(), tx);
        // Detached; waits for nothing: only the pool holds its waker.
        drop(pool.spawn(async move {
            let guard = OnDrop(orphan_tx.clone(), "orphan dropped");
            orphan_tx.send("orphan waits").unwrap();
            std::future::pending::<()>().await;
            drop(guard);
        }));
        // The same, but its handle is held: it goes when the handle does.
        let held = pool.spawn(async move {
            let guard = OnDrop(held_tx.clone(), "held orphan dropped");
            held_tx.send("held orphan waits").unwrap();
            std::future::pending::<()>().await;
            drop(guard);
        });
        // Detached too, but a timer holds its waker: it must run on.
        drop(pool.spawn(async move {
            tidepool::sleep(Duration::from_millis(50)).await;
            timer_tx.send("timer task finished").unwrap();
        }));
        let mut seen: Vec<_> = rx.iter().take(2).collect();
        seen.sort_unstable();
        assert_eq!(seen, ["held orphan waits", "orphan waits"]);
        drop(pool);
        let mut seen: Vec<_> = rx.iter().take(2).collect();
        seen.sort_unstable();
        assert_eq!(seen, ["orphan dropped", "timer task finished"]);
        drop(held);
        assert_eq!(rx.recv().unwrap(), "held orphan dropped");
        // Every thread the pool started exits (the monitor included).
        assert!(
            eventually(HANG, || stopped.load(Ordering::SeqCst)
                == started.load(Ordering::SeqCst)),
            "{} of {} threads exited",
            stopped.load(Ordering::SeqCst),
            started.load(Ordering::SeqCst)
        );
    });
}

#[test]
fn shutdown_from_inside_the_pool_is_an_error_not_a_deadlock() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let inner = pool.clone();
        let result = pool.spawn_fn(move || inner.shutdown()).join().unwrap();
        assert_eq!(result, Err(ShutdownError::OnWorkerThread));
        pool.shutdown().unwrap();
    });
}

#[test]
fn build_errors_name_the_field_the_value_and_the_fix() {
    let cases: Vec<(tidepool::Builder, BuildError, &str)> = vec![
        (
            Pool::builder().concurrency(0),
            BuildError::ZeroConcurrency,
            "concurrency (0) must be at least 1",
        ),
        (
            Pool::builder().concurrency(2).min_threads(8).max_threads(4),
            BuildError::MinAboveMax {
                min_threads: 8,
                max_threads: 4,
            },
            "max_threads (4) must be >= min_threads (8)",
        ),
        (
            Pool::builder().concurrency(8).max_threads(4),
            BuildError::MaxBelowConcurrency {
                max_threads: 4,
                concurrency: 8,
            },
            "max_threads (4) must be >= concurrency (8)",
        ),
        (
            Pool::builder().max_threads(1 << 20),
            BuildError::TooManyThreads {
                max_threads: 1 << 20,
            },
            "max_threads (1048576) must be <= 32768",
        ),
        (
            Pool::builder().stack_size(1024),
            BuildError::StackTooSmall { bytes: 1024 },
            "stack_size (1024 bytes) is too small",
        ),
        (
            Pool::builder().monitor_interval(Duration::from_micros(10)),
            BuildError::MonitorInterval {
                interval: Duration::from_micros(10),
            },
            "monitor_interval (10µs) must be between 100µs and 10s",
        ),
        (
            Pool::builder().controller(Controller::Gradual {
                interval: Duration::ZERO,
            }),
            BuildError::ZeroGradualInterval,
            "Controller::Gradual interval (0ns) must be positive",
        ),
        (
            Pool::builder().concurrency(usize::MAX / 32),
            BuildError::TooMuchConcurrency {
                concurrency: usize::MAX / 32,
            },
            "concurrency (576460752303423487) must be <= 32768",
        ),
        (
            Pool::builder().thread_name("io\0pool"),
            BuildError::ThreadNameNul {
                name: "io\0pool".to_owned(),
            },
            "thread_name (\"io\\0pool\") must not contain a NUL byte",
        ),
        (
            // Once accepted: the threads were named "-0", "-1".
            Pool::builder().thread_name(""),
            BuildError::EmptyThreadName,
            "thread_name (\"\") must not be empty",
        ),
    ];
    for (builder, expected, message) in cases {
        let err = builder.build().unwrap_err();
        assert_eq!(err, expected);
        assert!(
            err.to_string().starts_with(message),
            "{err} should start with {message}"
        );
    }
    // A stack the system cannot give is refused at build, not discovered as
    // tasks that never start.
    let err = Pool::builder().stack_size(usize::MAX).build().unwrap_err();
    assert!(
        matches!(
            err,
            BuildError::ThreadStart {
                bytes: usize::MAX,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("stack_size ({} bytes)", usize::MAX)),
        "{err}"
    );
    // The default max_threads stays valid on machines with many cores.
    let big = Pool::builder().concurrency(600).build().unwrap();
    assert_eq!(big.concurrency(), 600);
    // And the settings that are fine build.
    assert!(Pool::builder()
        .concurrency(1)
        .stack_size(tidepool::MIN_STACK_SIZE)
        .build()
        .is_ok());
    let fixed = Pool::builder()
        .concurrency(3)
        .controller(Controller::Fixed)
        .build()
        .unwrap();
    assert_eq!(fixed.concurrency(), 3);
}

#[test]
fn idle_threads_retire_down_to_min_threads() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .min_threads(1)
            .idle_timeout(Duration::from_millis(50))
            .build()
            .unwrap();
        let handles: Vec<_> = (0..8)
            .map(|_| pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(30))))
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(pool.metrics().peak_threads >= 2);
        assert!(
            eventually(HANG, || pool.metrics().threads == 1),
            "{:?}",
            pool.metrics()
        );
        let m = pool.metrics();
        assert!(m.threads_retired_idle >= 1);
        // The survivor still serves.
        assert_eq!(pool.spawn_fn(|| 5).join().unwrap(), 5);
    });
}

/// `Duration::MAX` means "never" for both timeouts: a worker parking with it
/// once overflowed `Instant` and died, stranding the next task.
#[test]
fn the_longest_timeouts_mean_never() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .min_threads(0)
            .idle_timeout(Duration::MAX)
            .build()
            .unwrap();
        assert_eq!(pool.spawn_fn(|| 1).join().unwrap(), 1);
        // Let the worker run dry and park with its idle timeout.
        assert!(eventually(HANG, || pool.metrics().idle_threads == 1));
        assert_eq!(pool.spawn_fn(|| 2).join().unwrap(), 2);
        assert_eq!(pool.metrics().threads, 1, "the worker never retires");
        drop(pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(20))));
        assert_eq!(pool.shutdown_timeout(Duration::MAX), Ok(()));
        assert_counters_add_up(&pool.metrics());
    });
}

/// CPU ticks (utime + stime) used so far by this process's threads whose
/// name starts with `prefix`: a pool's own threads, not the whole test
/// binary, whose other tests run in parallel and spend CPU of their own (the
/// whole-process figure made this test fail 4 runs in 9).
fn threads_cpu_ticks(prefix: &str) -> u64 {
    let mut ticks = 0;
    for dir in common::threads_named(prefix) {
        // The thread may have ended since the listing: skip it.
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // Fields after the command name (which may contain spaces) start at ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    ticks
}

/// A worker kept for `min_threads` waits without a timeout once its idle
/// timeout has passed: with a tiny timeout it used to wake up, fail to
/// retire and park again in a loop, burning a core while the pool was idle.
#[test]
#[cfg(target_os = "linux")]
fn a_tiny_idle_timeout_does_not_spin_an_idle_pool() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .min_threads(1)
            .idle_timeout(Duration::from_nanos(1))
            .thread_name("spincheck")
            .build()
            .unwrap();
        assert_eq!(pool.spawn_fn(|| 7).join().unwrap(), 7);
        assert!(eventually(HANG, || pool.metrics().idle_threads == 1));
        // Its worker and its monitor; comm is cut to 15 bytes, so a short name.
        let before = threads_cpu_ticks("spincheck");
        std::thread::sleep(Duration::from_millis(500));
        let used = threads_cpu_ticks("spincheck") - before;
        // A spinning worker uses the whole 500 ms (about 50 ticks at the
        // usual 100 per second); an idle pool about none.
        assert!(used < 20, "{used} ticks of CPU while idle");
        // It still serves.
        assert_eq!(pool.spawn_fn(|| 8).join().unwrap(), 8);
        assert_eq!(pool.metrics().threads, 1);
    });
}

/// A task that wakes an idle pool's monitor does not make it look at once:
/// its first look comes a monitor interval later (a look at once has
/// nothing to judge yet, and on a small machine it competes with the
/// task's start for a core). Seen through `monitor_busy`, which every look
/// adds to.
#[test]
fn a_task_that_wakes_an_idle_pool_is_first_looked_at_an_interval_later() {
    within(HANG, || {
        let interval = Duration::from_secs(2);
        let pool = Pool::builder()
            .concurrency(1)
            .monitor_interval(interval)
            .build()
            .unwrap();
        // Asleep until woken once no look adds to its busy time for
        // longer than its longest timed sleep (an interval here).
        let mut last = pool.metrics().monitor_busy;
        let mut quiet_since = std::time::Instant::now();
        while quiet_since.elapsed() <= interval + interval / 4 {
            std::thread::sleep(Duration::from_millis(50));
            let now = pool.metrics().monitor_busy;
            if now != last {
                (last, quiet_since) = (now, std::time::Instant::now());
            }
        }
        assert_eq!(pool.spawn_fn(|| 7).join().unwrap(), 7);
        // Well within the interval after the wake.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            pool.metrics().monitor_busy,
            last,
            "the monitor looked at the pool right after the task woke it"
        );
    });
}
