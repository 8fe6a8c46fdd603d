//! The countdown the profiling examples share: tasks decrement a static
//! counter and the last one wakes the waiter. Nobody reads the counter in the
//! meantime, so its cache line stays with the workers (a waiter that polled
//! it would add a cache miss to every task).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

static LEFT: AtomicUsize = AtomicUsize::new(0);
static DONE: Mutex<bool> = Mutex::new(false);
static DONE_CV: Condvar = Condvar::new();

/// Arms the countdown for `n` tasks.
pub(crate) fn arm(n: usize) {
    *DONE.lock().unwrap() = false;
    LEFT.store(n, Ordering::SeqCst);
}

/// The task body: one decrement; the last task wakes the waiter.
pub(crate) fn tick() {
    if LEFT.fetch_sub(1, Ordering::Relaxed) == 1 {
        *DONE.lock().unwrap() = true;
        DONE_CV.notify_one();
    }
}

/// Waits until the armed number of tasks have ticked.
pub(crate) fn wait_done() {
    let mut done = DONE.lock().unwrap();
    while !*done {
        done = DONE_CV.wait(done).unwrap();
    }
}
