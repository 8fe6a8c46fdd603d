//! Loom model of the park/wake protocol (`runtime::park`): a worker going
//! idle (`park::go_idle`, then `Sleepers::park`) and a notifier publishing
//! work (`park::notify`) — the very functions the worker layer calls — can
//! never both miss each other (the lost wake-up), a wake token is never
//! lost or doubled, and a task handed to a parked worker (`Sleepers::hand`)
//! is taken exactly once.

use crate::control::slots::Slots;
use crate::runtime::park::{self, Idle, Sleepers, Wake};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;

struct Pool {
    slots: Slots,
    /// Handed tasks are numbers here.
    sleepers: Sleepers<u8>,
    /// Stands in for the task queues.
    work: AtomicBool,
}

/// A searching worker that found nothing, as `RunLoop::go_idle` runs it.
/// Returns true if it ended up holding a searching slot (it will find the
/// work), false if it parked and was told to stop.
fn worker_goes_idle(pool: &Pool) -> bool {
    let work = || pool.work.load(Ordering::SeqCst);
    match park::go_idle(&pool.sleepers, &pool.slots, 0, work) {
        Idle::Search(_) => true,
        Idle::Park => matches!(pool.sleepers.park(0, None, || false), Wake::Woken),
    }
}

/// A spawn, as `worker::schedule` runs it: queue, then notify. Returns true
/// if the notifier would start a new thread with its reservation (nobody was
/// parked).
fn spawner_queues_work(pool: &Pool) -> bool {
    pool.work.store(true, Ordering::Relaxed);
    let mut started = false;
    park::notify(
        &pool.sleepers,
        &pool.slots,
        || false,
        || {
            started = true;
            true
        },
    );
    started
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
            loom::thread::spawn(move || worker_goes_idle(&pool))
        };
        let started_thread = spawner_queues_work(&pool);
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
        let sleepers = Arc::new(Sleepers::<u8>::new(2));
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
        let sleepers = Arc::new(Sleepers::<u8>::new(1));
        sleepers.push(0);
        let waker = {
            let sleepers = sleepers.clone();
            loom::thread::spawn(move || sleepers.wake_one_with(|_| {}))
        };
        let second = sleepers.wake_one_with(|_| {});
        let first = waker.join().unwrap();
        assert!(first ^ second, "exactly one notifier pops the sleeper");
        // The token is consumed exactly once, by park.
        assert_eq!(sleepers.park(0, None, || false), Wake::Woken);
    });
}

/// A searching worker that found nothing goes idle (`go_idle`, then
/// `park`) while a spawner hands a task to whoever is parked
/// (`Sleepers::hand`, as `worker::presumed::hand_or_start` calls it).
/// Returns what the worker ended up with.
fn worker_idles_while_a_task_is_handed(work_queued: bool) {
    let pool = Arc::new(Pool {
        slots: Slots::new(1),
        sleepers: Sleepers::new(1),
        work: AtomicBool::new(work_queued),
    });
    assert!(pool.slots.try_reserve_searcher());
    let worker = {
        let pool = pool.clone();
        loom::thread::spawn(move || {
            let work = || pool.work.load(Ordering::SeqCst);
            match park::go_idle(&pool.sleepers, &pool.slots, 0, work) {
                // Holds a searching slot, maybe with the task.
                Idle::Search(task) => task,
                Idle::Park => match pool.sleepers.park(0, None, || false) {
                    Wake::Handed(task) => Some(task),
                    Wake::Stop => None,
                    other => panic!("nobody reserved a slot for it: {other:?}"),
                },
            }
        })
    };
    let given_back = pool.sleepers.hand(7).err();
    if given_back.is_some() {
        // Nobody was parked to take it (the spawner would start a thread):
        // release the worker if it parks after all, to end the model.
        pool.sleepers.stop_all();
    }
    let taken = worker.join().unwrap();
    assert!(
        taken.is_some() ^ given_back.is_some(),
        "taken {taken:?}, given back {given_back:?}: exactly one must have it"
    );
    assert_eq!(pool.sleepers.parked(), 0);
}

#[test]
fn a_handed_task_is_taken_exactly_once() {
    loom::model(|| worker_idles_while_a_task_is_handed(false));
}

#[test]
fn a_task_handed_to_a_worker_leaving_the_stack_is_taken_exactly_once() {
    // Work is queued, so the worker takes a slot and leaves the stack:
    // `remove` then either finds it there or consumes the task token.
    loom::model(|| worker_idles_while_a_task_is_handed(true));
}
