//! Loom model of the CPU sentinels' arming (`control::signal`, "The CPU
//! sentinels' arming"): a sentinel that found the pool calm and goes to
//! wait (`MonitorSignal::sentinel_wait`) and a thread that saturates the
//! pool and arms them (`MonitorSignal::arm_sentinels`) never miss each
//! other; and a stop ends the wait.

use crate::control::signal::MonitorSignal;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;

struct Pool {
    /// Stands in for "every slot taken and work queued".
    saturated: AtomicBool,
    signal: MonitorSignal,
}

/// One look of a sentinel (`monitor::sentinel::watch`): waits while the
/// pool is calm; true once it watches (armed, or saturated at its look).
fn sentinel_look(pool: &Pool) -> bool {
    if pool.saturated.load(Ordering::SeqCst) {
        return true;
    }
    pool.signal
        .sentinel_wait(|| !pool.saturated.load(Ordering::SeqCst))
}

fn calm_pool() -> Arc<Pool> {
    let pool = Arc::new(Pool {
        saturated: AtomicBool::new(false),
        signal: MonitorSignal::default(),
    });
    // Armed once already: a flag left up by an earlier saturation is the
    // case where an arm is a no-op.
    pool.signal.arm_sentinels();
    pool
}

#[test]
fn a_sentinel_going_to_wait_is_never_left_behind_by_an_arm() {
    loom::model(|| {
        let pool = calm_pool();
        let sentinel = {
            let pool = pool.clone();
            loom::thread::spawn(move || sentinel_look(&pool))
        };
        // A spawn that found no free slot (`worker::notify_for`).
        pool.saturated.store(true, Ordering::SeqCst);
        pool.signal.arm_sentinels();
        // A lost arm shows up as a loom deadlock on this join.
        assert!(
            sentinel.join().unwrap(),
            "it watches: nobody stopped the pool"
        );
    });
}

#[test]
fn a_stop_ends_a_sentinels_wait() {
    loom::model(|| {
        let pool = calm_pool();
        let sentinel = {
            let pool = pool.clone();
            loom::thread::spawn(move || sentinel_look(&pool))
        };
        pool.signal.stop();
        assert!(
            !sentinel.join().unwrap(),
            "the pool stopped, never saturated"
        );
    });
}
