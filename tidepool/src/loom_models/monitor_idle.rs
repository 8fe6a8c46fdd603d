//! Loom model of the monitor's idle sleep (`control::signal`, with the real
//! `control::slots`): a monitor that decides the pool is idle
//! (`MonitorSignal::announce_idle`, then `sleep`) and a worker that starts a
//! task with a freshly taken slot (`MonitorSignal::wake`) never miss each
//! other, so a running task is always watched; and a request for a spare
//! worker (`MonitorSignal::want_spare`) neither is lost nor makes the
//! monitor miss that wake.

use crate::control::signal::MonitorSignal;
use crate::control::slots::Slots;
use crate::runtime::park;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;

struct Pool {
    slots: Slots,
    /// Stands in for the task queues.
    work: AtomicBool,
    signal: MonitorSignal,
}

/// One idle decision of `Monitor::run`: returns true if it slept until woken.
fn monitor_idle_tick(pool: &Pool) -> bool {
    let still_idle = || pool.slots.counts().active == 0 && !pool.work.load(Ordering::Relaxed);
    if pool.signal.announce_idle(still_idle) {
        assert!(pool.signal.sleep(None, || {}), "nobody stops this monitor");
        return true;
    }
    false
}

/// A pool with one slot, nothing queued and nothing running, and its monitor
/// making one idle decision on another thread.
fn idle_pool_with_monitor() -> (Arc<Pool>, loom::thread::JoinHandle<bool>) {
    let pool = Arc::new(Pool {
        slots: Slots::new(1),
        work: AtomicBool::new(false),
        signal: MonitorSignal::default(),
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

        // A spawn onto the idle pool (`worker::notify`): queue the task, take
        // a slot for a worker and hand it over (here: by starting a thread).
        pool.work.store(true, Ordering::Relaxed);
        let mut started = None;
        park::notify(
            &park::Sleepers::<u8>::new(1),
            &pool.slots,
            || false,
            || {
                let pool = pool.clone();
                started = Some(loom::thread::spawn(move || {
                    // `RunLoop::run`: found the task, about to run it.
                    pool.signal.wake();
                    pool.slots.stop_searching();
                }));
                true
            },
        );
        started.expect("the slot was free").join().unwrap();

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

        // `park::go_idle` found work on its way to sleep (pushed before the
        // monitor looked, so only the slot can tell the monitor) and takes a
        // slot itself, then finds the task and is about to run it.
        if pool.slots.try_acquire(true) {
            pool.signal.wake();
            pool.slots.stop_searching();
        }

        monitor.join().unwrap();
        assert_eq!(pool.slots.counts().active, 1);
    });
}

#[test]
fn a_spare_asked_for_during_an_idle_sleep_is_served_and_the_wake_still_lands() {
    loom::model(|| {
        let pool = Arc::new(Pool {
            slots: Slots::new(1),
            work: AtomicBool::new(false),
            signal: MonitorSignal::default(),
        });
        let served = Arc::new(AtomicUsize::new(0));
        let monitor = {
            let pool = pool.clone();
            let served = served.clone();
            loom::thread::spawn(move || {
                let still_idle =
                    || pool.slots.counts().active == 0 && !pool.work.load(Ordering::Relaxed);
                if pool.signal.announce_idle(still_idle) {
                    let serve = || {
                        served.fetch_add(1, Ordering::Relaxed);
                    };
                    assert!(pool.signal.sleep(None, serve), "nobody stops this monitor");
                }
            })
        };

        // `worker::presumed::hand_or_start` handed a presumed task the last parked
        // worker; then a spawn takes the free slot and its worker starts.
        pool.signal.want_spare();
        pool.work.store(true, Ordering::Relaxed);
        if pool.slots.try_acquire(true) {
            pool.signal.wake();
            pool.slots.stop_searching();
        }

        // A lost wake shows up as a loom deadlock on this join.
        monitor.join().unwrap();
        // Served in that sleep, or still pending for the next one.
        let served = served.load(Ordering::Relaxed);
        assert_eq!(served + usize::from(pool.signal.spare_pending()), 1);
    });
}
