//! Loom model of the monitor's idle sleep (`control::monitor`, with the real
//! `control::slots`): a monitor that decides the pool is idle and a worker
//! that starts a task with a freshly taken slot never miss each other, so a
//! running task is always watched.
//!
//! The monitor's and the worker's steps are replicas of `Monitor::run` and
//! `MonitorSignal::wake` (the monitor's module needs the whole pool); the slot
//! counters are the real ones.
//!
//! Run: `RUSTFLAGS="--cfg tidepool_loom" cargo test -p tidepool --test loom_monitor_idle --release`

#![cfg(tidepool_loom)]
#![allow(dead_code, unreachable_pub, missing_docs)]

#[path = "loom_support/mod.rs"]
mod loom_support;
use loom_support::sync;

#[path = "../src/control/slots.rs"]
mod slots;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use slots::Slots;

struct Pool {
    slots: Slots,
    /// Stands in for the task queues.
    work: AtomicBool,
    /// `MonitorSignal::idle_sleep`.
    idle_sleep: AtomicBool,
    /// `SignalState::woken`, and the monitor's condition variable.
    woken: Mutex<bool>,
    cv: Condvar,
}

/// `MonitorSignal::wake`, called by a worker about to run a task with a slot
/// taken since the pool may have been idle.
fn wake_monitor(pool: &Pool) {
    sync::seqcst_pair();
    if pool.idle_sleep.load(Ordering::SeqCst) {
        *sync::lock(&pool.woken) = true;
        pool.cv.notify_one();
    }
}

/// One idle decision of `Monitor::run`: announce the idle sleep, look again,
/// and sleep until woken if still idle. Returns true if it slept.
fn monitor_idle_tick(pool: &Pool) -> bool {
    pool.idle_sleep.store(true, Ordering::SeqCst);
    sync::fence(Ordering::SeqCst);
    let idle = pool.slots.counts().active == 0 && !pool.work.load(Ordering::SeqCst);
    if idle {
        let mut woken = sync::lock(&pool.woken);
        while !*woken {
            woken = pool.cv.wait(woken).unwrap();
        }
        *woken = false;
    }
    pool.idle_sleep.store(false, Ordering::SeqCst);
    idle
}

/// A pool with one slot, nothing queued and nothing running, and its monitor
/// making one idle decision on another thread.
fn idle_pool_with_monitor() -> (Arc<Pool>, loom::thread::JoinHandle<bool>) {
    let pool = Arc::new(Pool {
        slots: Slots::new(1),
        work: AtomicBool::new(false),
        idle_sleep: AtomicBool::new(false),
        woken: Mutex::new(false),
        cv: Condvar::new(),
    });
    let monitor = {
        let pool = pool.clone();
        loom::thread::spawn(move || monitor_idle_tick(&pool))
    };
    (pool, monitor)
}

#[test]
fn a_task_started_on_an_idle_pool_wakes_the_monitor() {
    loom::model(|| {
        let (pool, monitor) = idle_pool_with_monitor();

        // A spawn onto the idle pool (`Shared::notify`): queue the task, take
        // a slot for a worker and hand it over (here: by starting the thread).
        pool.work.store(true, Ordering::SeqCst);
        sync::fence(Ordering::SeqCst);
        assert!(pool.slots.try_reserve_searcher());
        let worker = {
            let pool = pool.clone();
            loom::thread::spawn(move || {
                // `RunLoop::run`: found the task, about to run it.
                wake_monitor(&pool);
                pool.slots.stop_searching();
            })
        };
        worker.join().unwrap();

        // A monitor that went to sleep was woken by the worker; one that
        // missed the worker's slot saw the queued work or the slot and stayed
        // up. A lost wake-up shows up as a loom deadlock on this join.
        monitor.join().unwrap();
        assert_eq!(pool.slots.counts().active, 1);
    });
}

#[test]
fn a_worker_taking_a_slot_itself_wakes_the_monitor() {
    loom::model(|| {
        let (pool, monitor) = idle_pool_with_monitor();

        // `RunLoop::go_idle` found work on its way to sleep (pushed before
        // the monitor looked, so only the slot can tell the monitor) and
        // takes a slot itself, then finds the task and is about to run it.
        if pool.slots.try_acquire(true) {
            wake_monitor(&pool);
            pool.slots.stop_searching();
        }

        monitor.join().unwrap();
        assert_eq!(pool.slots.counts().active, 1);
    });
}
