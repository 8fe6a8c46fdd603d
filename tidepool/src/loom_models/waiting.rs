//! Loom models of the pool's waiting tasks (`runtime::waiting`) and of a
//! live metrics snapshot (`metrics::add_task_counters`).
//!
//! * A task registering its waker as the pool stops is woken exactly once:
//!   by the stop, or by itself when the stop closed the registry first.
//! * A task ending as the pool stops leaves no waker behind and is never
//!   woken twice.
//! * A task that first waits as its pool is abandoned (its last handle
//!   dropped) leaves no waker behind once its worker runs out of work:
//!   the abandon's pass or the worker's look lets go of it, never wakes it.
//! * A snapshot taken while a task spawned on one shard ends on another
//!   never shows the end without the spawn.

use crate::metrics::{add_task_counters, Metrics, Outcome, TaskCounters};
use crate::runtime::waiting::{Registered, WaitingTasks};
use crate::sync::counting::waker as counting_waker;
use loom::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn a_task_that_first_waits_as_the_pool_stops_is_woken_exactly_once() {
    loom::model(|| {
        let tasks = Arc::new(WaitingTasks::new(2));
        let (count, waker) = counting_waker();
        let task = {
            let tasks = Arc::clone(&tasks);
            loom::thread::spawn(move || match tasks.register(1, &waker) {
                Registered::Yes(_) => {}
                // What the task's wrapper does (`EndGuard::wait_registered`).
                Registered::PoolStopped => waker.wake_by_ref(),
                Registered::NoRoom => unreachable!("one entry fits"),
            })
        };
        tasks.cancel_all();
        task.join().unwrap();
        assert_eq!(count.get(), 1, "woken exactly once");
        assert_eq!(tasks.len(), 0, "nothing left registered");
    });
}

#[test]
fn a_task_that_ends_as_the_pool_stops_leaves_no_waker_behind() {
    loom::model(|| {
        let tasks = Arc::new(WaitingTasks::new(1));
        let (count, waker) = counting_waker();
        let Registered::Yes(key) = tasks.register(0, &waker) else {
            unreachable!("the pool runs")
        };
        drop(waker);
        let task = {
            let tasks = Arc::clone(&tasks);
            loom::thread::spawn(move || tasks.deregister(key))
        };
        tasks.cancel_all();
        task.join().unwrap();
        assert!(count.get() <= 1, "woken at most once");
        assert_eq!(tasks.len(), 0);
        // Only the model's own reference is left: no waker kept.
        assert_eq!(Arc::strong_count(&count), 1);
    });
}

#[test]
fn a_task_that_first_waits_as_its_pool_is_abandoned_is_released() {
    loom::model(|| {
        let tasks = Arc::new(WaitingTasks::new(1));
        let (count, waker) = counting_waker();
        let worker = {
            let tasks = Arc::clone(&tasks);
            loom::thread::spawn(move || {
                // The task's poll returns `Pending` and registers it...
                let Registered::Yes(_) = tasks.register(0, &waker) else {
                    unreachable!("nobody stops the pool here")
                };
                drop(waker);
                // ...then its worker finds no more work (`RunLoop::run`).
                tasks.release_if_abandoned();
            })
        };
        // The pool's last handle goes (`OpenHandle::drop`).
        tasks.abandon();
        worker.join().unwrap();
        assert_eq!(count.get(), 0, "let go of, never woken");
        assert_eq!(Arc::strong_count(&count), 1, "no waker left behind");
        assert_eq!(tasks.len(), 1, "the entry stays until the task ends");
    });
}

#[test]
fn a_live_snapshot_never_shows_an_end_without_its_spawn() {
    loom::model(|| {
        // Shard 0: the spawning thread's; shard 1: the worker's.
        let shards = Arc::new([TaskCounters::default(), TaskCounters::default()]);
        let handed = Arc::new(AtomicBool::new(false));
        let spawner = {
            let (shards, handed) = (Arc::clone(&shards), Arc::clone(&handed));
            loom::thread::spawn(move || {
                shards[0].spawned();
                // The queue the task goes through.
                handed.store(true, Ordering::Release);
            })
        };
        let worker = {
            let (shards, handed) = (Arc::clone(&shards), Arc::clone(&handed));
            loom::thread::spawn(move || {
                if handed.load(Ordering::Acquire) {
                    shards[1].ended(Outcome::Completed);
                }
            })
        };
        let mut m = Metrics::default();
        add_task_counters(|| shards.iter(), &mut m);
        assert!(m.completed <= m.spawned, "an end without its spawn: {m:?}");
        assert_eq!(m.spawned, m.completed + m.in_flight);
        spawner.join().unwrap();
        worker.join().unwrap();
    });
}
