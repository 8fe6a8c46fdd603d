//! A pool's life: the shutdown latch (`open → closed → stopped`) and the
//! signal shutdown waits on ([`Exits`]).
//!
//! * `closed`: no new task is accepted; accepted tasks still run to their end.
//! * `stopped`: workers leave after their current task; what is still queued
//!   is dropped (and counted as cancelled).
//!
//! The pool moves to `stopped` when it is closed and no task is live. "Live"
//! is derived from the sharded task counters (`metrics::TaskCounters`:
//! spawned − refused − ended), so there is no single counter whose reaching
//! zero could be watched. Instead every operation that can make the last
//! difference checks after it has counted itself:
//!
//! | operation                    | counts first            | then checks          |
//! |------------------------------|-------------------------|----------------------|
//! | spawn                        | `spawned += 1`          | `closed`: if set, `refused += 1`, then as below |
//! | task end, refusal            | `ended` / `refused += 1`| `closed`, then `live == 0` |
//! | close                        | `closed = true`         | `live == 0`          |
//!
//! Everything is SeqCst, so these operations have one total order; the last
//! one that lowers `live` (or the close, if it comes after them) sees every
//! count before it and therefore `live == 0`, and stops the pool. A spawn
//! that slips in before `closed` is set has counted itself before the close's
//! check, so the close sees it live and does not stop. The loom model in
//! `loom_models/shutdown.rs` checks this with the real latch and counters.

use crate::sync::{lock, seqcst_pair, wait, wait_timeout, AtomicBool, Condvar, Mutex, Ordering};
use std::time::Instant;

/// The shutdown states of one pool. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Latch {
    closed: AtomicBool,
    stopped: AtomicBool,
}

impl Latch {
    /// For a spawn that has already counted itself: true if the pool still
    /// accepts tasks. If false, the caller counts a refusal and calls
    /// [`Latch::stop_if_drained`].
    pub(crate) fn accepts(&self) -> bool {
        seqcst_pair();
        !self.closed.load(Ordering::SeqCst)
    }

    /// Closes the latch. Returns true for the call that closed it; that
    /// caller then calls [`Latch::stop_if_drained`].
    pub(crate) fn close(&self) -> bool {
        let first = !self.closed.swap(true, Ordering::SeqCst);
        seqcst_pair();
        first
    }

    /// After a count that lowers `live` (or after closing): stops if closed
    /// and nothing is live. Returns true for the one call that stopped it.
    pub(crate) fn stop_if_drained(&self, live: impl FnOnce() -> usize) -> bool {
        seqcst_pair();
        self.is_closed() && live() == 0 && self.stop()
    }

    /// Stops, drained or not (a shutdown that timed out). Returns true for
    /// the one call that stopped it.
    pub(crate) fn stop(&self) -> bool {
        !self.stopped.swap(true, Ordering::SeqCst)
    }

    /// True once closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// True once stopped.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

/// Wakes whoever waits for the pool to stop (`Pool::shutdown`): signalled
/// when a worker thread exits and when the pool stops.
#[derive(Debug, Default)]
pub(crate) struct Exits {
    lock: Mutex<()>,
    cv: Condvar,
}

impl Exits {
    /// Wakes every waiter to look at its condition again.
    pub(crate) fn signal(&self) {
        let _guard = lock(&self.lock);
        self.cv.notify_all();
    }

    /// Runs `change` (which makes a waiter's condition true) under the lock,
    /// then wakes the waiters: a waiter cannot check between the change and
    /// the wake-up and miss both.
    pub(crate) fn signal_after(&self, change: impl FnOnce()) {
        let _guard = lock(&self.lock);
        change();
        self.cv.notify_all();
    }

    /// Waits until `done` holds or `deadline` passes (`None`: no deadline).
    /// Returns whether `done` held.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>, done: impl Fn() -> bool) -> bool {
        let mut guard = lock(&self.lock);
        loop {
            if done() {
                return true;
            }
            match deadline {
                None => guard = wait(&self.cv, guard),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    guard = wait_timeout(&self.cv, guard, deadline - now).0;
                }
            }
        }
    }
}
