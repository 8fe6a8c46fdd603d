//! Loom model of the park/wake protocol (`worker::park` with `control::slots`):
//! a worker going idle and a notifier publishing work can never both miss
//! each other (the lost wake-up), and a wake token is never lost or doubled.
//!
//! Run: `RUSTFLAGS="--cfg tidepool_loom" cargo test -p tidepool --test loom_park --release`

#![cfg(tidepool_loom)]
#![allow(dead_code, unreachable_pub, missing_docs)]

#[path = "loom_support/mod.rs"]
mod loom_support;
use loom_support::sync;

#[path = "../src/worker/park.rs"]
mod park;
#[path = "../src/control/slots.rs"]
mod slots;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use park::{Sleepers, Wake};
use slots::Slots;

struct Pool {
    slots: Slots,
    sleepers: Sleepers,
    /// Stands in for the task queues.
    work: AtomicBool,
}

/// The worker side of `RunLoop::go_idle` (steps 1-4 of the protocol).
/// Returns true if it ended up holding a searching slot (it will find the
/// work), false if it parked and was told to stop.
fn go_idle(pool: &Pool) -> bool {
    pool.sleepers.push(0);
    pool.slots.release_searching();
    if pool.work.load(Ordering::SeqCst) && pool.slots.try_acquire(true) {
        if !pool.sleepers.remove(0) {
            pool.slots.release_searching();
        }
        return true;
    }
    matches!(pool.sleepers.park(0, None, || false), Wake::Woken)
}

/// The notifier side of `Shared::notify` + `wake_or_start`. Returns true if
/// it would start a new thread with its reservation (nobody was parked).
fn notify(pool: &Pool) -> bool {
    pool.work.store(true, Ordering::SeqCst);
    sync::fence(Ordering::SeqCst);
    if pool.slots.try_reserve_searcher() {
        return !pool.sleepers.wake_one();
    }
    false
}

#[test]
fn no_lost_wakeup() {
    loom::model(|| {
        let pool = Arc::new(Pool {
            slots: Slots::new(1),
            sleepers: Sleepers::new(1),
            work: AtomicBool::new(false),
        });
        // The worker starts as a searcher holding the only slot.
        assert!(pool.slots.try_reserve_searcher());

        let worker = {
            let pool = pool.clone();
            loom::thread::spawn(move || go_idle(&pool))
        };
        let started_thread = notify(&pool);
        if started_thread {
            // The notifier found nobody parked and would start a new thread
            // with its reservation; that thread takes the work, so the old
            // worker may rightly sleep. Release it to end the model.
            pool.sleepers.stop_all();
        }

        // Otherwise, if the worker parked, only the notifier can have woken
        // it: a lost wake-up shows up as a loom deadlock here.
        let worker_searches = worker.join().unwrap();

        // Somebody with a slot goes after the work: the old worker, or a new
        // thread started with the notifier's reservation...
        assert!(worker_searches || started_thread);
        // ...and never a new thread: the worker is on the stack whenever its
        // slot is free (it takes a slot before leaving, and stays when it
        // cannot), so the notifier always finds it there.
        assert!(!started_thread, "a thread started while a worker was idle");
        // Never both: the slot and its searching mark are held once.
        let counts = pool.slots.counts();
        assert_eq!(counts.active, 1, "{counts:?}");
        assert_eq!(counts.searching, 1, "{counts:?}");
        assert_eq!(pool.sleepers.parked(), 0);
    });
}

#[test]
fn stop_wakes_a_parked_worker() {
    loom::model(|| {
        let sleepers = Arc::new(Sleepers::new(2));
        let parked = {
            let sleepers = sleepers.clone();
            loom::thread::spawn(move || {
                sleepers.push(1);
                sleepers.park(1, None, || false)
            })
        };
        sleepers.stop_all();
        assert_eq!(parked.join().unwrap(), Wake::Stop);
        assert_eq!(sleepers.parked(), 0);
    });
}

#[test]
fn two_notifiers_wake_one_sleeper_once() {
    loom::model(|| {
        let sleepers = Arc::new(Sleepers::new(1));
        sleepers.push(0);
        let waker = {
            let sleepers = sleepers.clone();
            loom::thread::spawn(move || sleepers.wake_one())
        };
        let second = sleepers.wake_one();
        let first = waker.join().unwrap();
        assert!(first ^ second, "exactly one notifier pops the sleeper");
        // The token is consumed exactly once, by park.
        assert_eq!(sleepers.park(0, None, || false), Wake::Woken);
    });
}
