//! No silent failure (issue 16): counters and messages that tell the truth,
//! destructors that panic, cancel that tells the truth, shutdown from a
//! pool's own thread.

mod common;

use common::{assert_counters_add_up, eventually, within, HANG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tidepool::{Pool, ShutdownError};

#[test]
fn no_thread_counts_as_running_after_shutdown() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let handles: Vec<_> = (0..50).map(|i| pool.spawn_fn(move || i)).collect();
        for handle in handles {
            handle.join().unwrap();
        }
        pool.shutdown().unwrap();
        let m = pool.metrics();
        assert_eq!(m.threads, 0, "{m:?}");
        assert_eq!(m.running_threads, 0, "{m:?}");
        assert_eq!(m.blocked_threads, 0, "{m:?}");
        assert_counters_add_up(&m);
    });
}

#[test]
fn a_zero_timeout_shutdown_of_an_idle_pool_abandons_nothing_and_is_ok() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        // Threads exist and are parked: the pool is idle, not empty.
        pool.spawn_fn(|| ()).join().unwrap();
        assert!(pool.metrics().threads >= 1);
        assert_eq!(pool.shutdown_timeout(Duration::ZERO), Ok(()));
        // Still shut down: nothing new is accepted.
        assert!(pool.try_spawn_fn(|| ()).is_err());
    });
}

#[test]
fn a_zero_timeout_shutdown_with_unfinished_work_still_times_out() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let _forever = pool.spawn(std::future::pending::<()>());
        assert_eq!(
            pool.shutdown_timeout(Duration::ZERO),
            Err(ShutdownError::TimedOut { abandoned: 1 })
        );
    });
}

/// A value whose destructor panics (unless the thread is already unwinding,
/// which would abort by the language's rules, not tidepool's).
struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{} panics on drop", self.0);
        }
    }
}

/// A pool of one running slot, kept busy by a task that waits until the
/// returned sender is dropped or sent to.
fn busy_pool() -> (Pool, mpsc::Sender<()>) {
    let pool = Pool::builder()
        .concurrency(1)
        .max_threads(1)
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let (started_tx, started) = mpsc::channel();
    drop(pool.spawn_fn(move || {
        started_tx.send(()).unwrap();
        let _ = wait.recv();
    }));
    started.recv().unwrap();
    (pool, release)
}

#[test]
fn an_output_whose_drop_panics_does_not_abort_a_detached_task() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (go, wait) = mpsc::channel::<()>();
        let handle = pool.spawn_fn(move || {
            let _ = wait.recv();
            PanicOnDrop("output")
        });
        drop(handle); // detached before it finished: the cell drops the output
        go.send(()).unwrap();
        assert!(eventually(HANG, || pool.metrics().dropped_panics == 1));
        assert_eq!(pool.spawn_fn(|| 7).join().unwrap(), 7);
        let m = pool.metrics();
        assert_eq!(m.completed, 2, "{m:?}");
        assert_counters_add_up(&m);
    });
}

#[test]
fn a_panic_payload_whose_drop_panics_does_not_abort_a_detached_task() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (go, wait) = mpsc::channel::<()>();
        let handle = pool.spawn_fn(move || {
            let _ = wait.recv();
            std::panic::panic_any(PanicOnDrop("payload"));
        });
        drop(handle);
        go.send(()).unwrap();
        assert!(eventually(HANG, || pool.metrics().dropped_panics == 1));
        assert_eq!(pool.spawn_fn(|| 7).join().unwrap(), 7);
        let m = pool.metrics();
        assert_eq!((m.panicked, m.completed), (1, 1), "{m:?}");
        assert_counters_add_up(&m);
    });
}

#[test]
fn cancelling_a_queued_task_whose_capture_panics_on_drop_does_not_abort() {
    within(HANG, || {
        let (pool, release) = busy_pool();
        let capture = PanicOnDrop("queued capture");
        let mut queued = pool.spawn_fn(move || drop(capture));
        assert!(queued.cancel());
        drop(release);
        assert!(eventually(HANG, || pool.metrics().dropped_panics == 1));
        assert!(queued.join().unwrap_err().is_cancelled());
        assert_eq!(pool.spawn_fn(|| 7).join().unwrap(), 7);
        let m = pool.metrics();
        assert_eq!(m.cancelled, 1, "{m:?}");
        assert_counters_add_up(&m);
    });
}

#[test]
fn cancelling_a_started_task_whose_capture_panics_on_drop_does_not_abort() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (started_tx, started) = mpsc::channel();
        let capture = PanicOnDrop("started capture");
        let mut task = pool.spawn(async move {
            let _keep = capture;
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
        started.recv().unwrap();
        assert!(task.cancel());
        assert!(eventually(HANG, || pool.metrics().dropped_panics == 1));
        assert!(task.join().unwrap_err().is_cancelled());
        let m = pool.metrics();
        assert_eq!(m.cancelled, 1, "{m:?}");
        assert_counters_add_up(&m);
    });
}

#[test]
fn a_shutdown_that_drains_tasks_whose_captures_panic_on_drop_does_not_abort() {
    within(HANG, || {
        let (pool, release) = busy_pool();
        let handles: Vec<_> = (0..5)
            .map(|_| {
                let capture = PanicOnDrop("drained capture");
                pool.spawn_fn(move || drop(capture))
            })
            .collect();
        let err = pool
            .shutdown_timeout(Duration::from_millis(10))
            .unwrap_err();
        assert_eq!(err, ShutdownError::TimedOut { abandoned: 6 });
        for handle in handles {
            assert!(handle.join().unwrap_err().is_cancelled());
        }
        assert_eq!(pool.metrics().dropped_panics, 5);
        drop(release);
    });
}

/// A value whose destructor shuts its pool down (and ignores the answer).
struct ShutdownOnDrop(Pool, mpsc::Sender<Result<(), ShutdownError>>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        let _ = self.1.send(self.0.shutdown());
    }
}

#[test]
fn a_destructor_run_by_the_pools_own_drain_does_not_wait_for_itself() {
    within(HANG, || {
        let (pool, release) = busy_pool();
        let (said_tx, said) = mpsc::channel();
        let value = ShutdownOnDrop(pool.clone(), said_tx);
        let queued = pool.spawn_fn(move || drop(value));
        // The drain drops the queued task here, on this thread, and its
        // destructor calls shutdown() on the pool being stopped: it must not
        // wait (for the busy worker, or for this very call).
        let err = pool
            .shutdown_timeout(Duration::from_millis(10))
            .unwrap_err();
        assert_eq!(err, ShutdownError::TimedOut { abandoned: 2 });
        assert_eq!(said.recv().unwrap(), Err(ShutdownError::OnWorkerThread));
        assert!(queued.join().unwrap_err().is_cancelled());
        drop(release);
    });
}

#[test]
fn a_destructor_run_by_a_worker_does_not_wait_for_itself() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (said_tx, said) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        let inner = pool.clone();
        // The output is dropped by the worker that finished the task (the
        // handle is detached): its destructor shuts the pool down.
        drop(pool.spawn_fn(move || {
            let _ = wait.recv();
            ShutdownOnDrop(inner, said_tx)
        }));
        go.send(()).unwrap();
        assert_eq!(said.recv().unwrap(), Err(ShutdownError::OnWorkerThread));
        pool.shutdown().unwrap();
    });
}

/// Polls `handle` once without waiting, as a `select` would: from then on
/// the handle holds the task's fallible form. True if it was ready.
fn poll_once<T>(handle: &mut tidepool::JoinHandle<T>) -> bool {
    futures_lite::future::block_on(futures_lite::future::poll_once(handle)).is_some()
}

/// `cancel` on a closure a worker is running: refused, and the handle
/// yields the output; `polled_first` polls the handle once before.
fn cancel_of_a_running_closure(polled_first: bool) {
    within(HANG, move || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (started_tx, started) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&ran);
        let mut handle = pool.spawn_fn(move || {
            started_tx.send(()).unwrap();
            let _ = wait.recv();
            counted.fetch_add(1, Ordering::SeqCst);
            "ran to its end"
        });
        started.recv().unwrap();
        if polled_first {
            assert!(!poll_once(&mut handle), "the closure is still running");
        }
        assert!(!handle.cancel(), "the closure is running: it will finish");
        assert!(!handle.cancel());
        go.send(()).unwrap();
        assert_eq!(handle.join().unwrap(), "ran to its end");
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        let m = pool.metrics();
        assert_eq!((m.completed, m.cancelled), (1, 0), "{m:?}");
    });
}

#[test]
fn cancel_says_false_for_a_running_closure_and_the_handle_yields_its_output() {
    cancel_of_a_running_closure(false);
}

#[test]
fn cancel_says_false_for_a_running_closure_whose_handle_was_polled() {
    cancel_of_a_running_closure(true);
}

/// `cancel` on a closure still queued: it never runs; `polled_first`
/// polls the handle once before.
fn cancel_of_a_queued_closure(polled_first: bool) {
    within(HANG, move || {
        let (pool, release) = busy_pool();
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&ran);
        let mut handle = pool.spawn_fn(move || counted.fetch_add(1, Ordering::SeqCst));
        if polled_first {
            assert!(!poll_once(&mut handle), "queued behind the busy slot");
        }
        assert!(handle.cancel());
        drop(release);
        assert!(handle.join().unwrap_err().is_cancelled());
        pool.shutdown().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        let m = pool.metrics();
        assert_eq!((m.completed, m.cancelled), (1, 1), "{m:?}");
    });
}

#[test]
fn cancel_says_true_for_a_queued_closure_and_it_never_runs() {
    cancel_of_a_queued_closure(false);
}

#[test]
fn cancel_says_true_for_a_queued_closure_whose_handle_was_polled() {
    cancel_of_a_queued_closure(true);
}
