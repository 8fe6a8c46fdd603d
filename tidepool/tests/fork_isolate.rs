//! A lock held across a wait on the pool (rayon's issue #592), and
//! `tidepool::isolate`, whose waits run only the work they wait for.
//!
//! # The hazard
//!
//! A helping wait (`join`, `scope`, `block_on`, `JoinHandle::join` on a
//! worker) runs queued work while what it waits for is unfinished. Every
//! test below builds the same situation: a task holds a `std::sync::Mutex`
//! and waits on the pool for work that a *thief* (another worker) has
//! taken, while a task that takes the same mutex (`X`) is queued on the
//! waiter's own deque. A plain wait pops `X` and runs it on the waiter's
//! thread, on top of the frame that holds the mutex: `X` blocks on it (a
//! `std::sync::Mutex` locked twice on one thread deadlocks, or panics), and
//! the frame beneath never resumes to release it. A deadlock.
//!
//! The tests never run that deadlock: the plain wait's test
//! (`a_plain_join_runs_queued_work_on_the_lock_holders_thread`) has `X`
//! *try* the lock, and shows that it ran on the holder's thread and found
//! the mutex taken, where `lock()` would have hung. The isolated waits
//! take it for real and must finish; each is bounded by a generous hang
//! timeout (`within(HANG, ..)`), so a regression fails instead of hanging.
//!
//! Waits spin (with `yield_now`) rather than sleep, so the monitor never
//! takes a waiting test task for a blocked one and moves its slot: the
//! plain wait's test needs every slot held.

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::{self, ThreadId};
use std::time::Instant;
use tidepool::{Controller, JoinHandle, Pool};

/// Spins until `flag` is set; panics, naming `what`, after [`HANG`].
fn spin_until(flag: &AtomicBool, what: &str) {
    let deadline = Instant::now() + HANG;
    while !flag.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "{what}: not within {HANG:?}");
        std::hint::spin_loop();
        thread::yield_now();
    }
}

/// The pool of every test but one: two slots, and no quantum (no slot lent
/// to queued work while both are held), so the only way queued work runs
/// on a thread other than the two slot holders' is a wait that gives its
/// slot away, as an isolated wait does, while a plain wait runs it itself.
fn two_slots() -> Pool {
    Pool::builder()
        .concurrency(2)
        .quantum(None)
        .build()
        .unwrap()
}

/// The shared state of one run: the mutex the waiter holds, and what the
/// thief's half and `X` tell each other.
#[derive(Default)]
struct Run {
    mutex: Mutex<()>,
    /// Set by the awaited half (or task) once a thief runs it.
    stolen: AtomicBool,
    /// Set by `X` as it starts, before it takes the mutex.
    x_started: AtomicBool,
    /// The thread `X` ran on.
    x_thread: Mutex<Option<ThreadId>>,
}

impl Run {
    /// Queues `X` (on the current worker's deque): it notes its thread,
    /// then takes the mutex for real.
    fn spawn_x(self: &Arc<Self>) -> JoinHandle<()> {
        let run = Arc::clone(self);
        tidepool::spawn_fn(move || {
            *run.x_thread.lock().unwrap() = Some(thread::current().id());
            run.x_started.store(true, Ordering::SeqCst);
            drop(run.mutex.lock().unwrap());
        })
    }

    /// The awaited task `Y` of a handle's wait: queued (below `X`, if `X`
    /// is spawned next), it ends only once `X` has started, as
    /// [`Run::awaited_half`] does.
    fn spawn_y(self: &Arc<Self>) -> JoinHandle<u32> {
        let run = Arc::clone(self);
        tidepool::spawn_fn(move || {
            run.awaited_half();
            42
        })
    }

    /// The awaited half: runs on a thief, and ends only once `X` has
    /// started (on a thread other than the waiter's, when the wait is
    /// isolated), so the waiter is still waiting when it finds `X` queued.
    fn awaited_half(&self) {
        self.stolen.store(true, Ordering::SeqCst);
        spin_until(&self.x_started, "X started");
    }

    /// After the wait: `X` ran on another thread than `waiter`.
    fn assert_x_ran_elsewhere(&self, waiter: ThreadId) {
        let x_thread = self.x_thread.lock().unwrap().expect("X ran");
        assert_ne!(x_thread, waiter, "X ran on the thread that held the mutex");
    }
}

/// What a task that held the run's mutex across a wait saw.
struct Held<X, T> {
    run: Arc<Run>,
    /// What `X` returned.
    x: X,
    /// What the wait returned beside `X`'s handle.
    value: T,
    /// The thread of the task that held the mutex.
    waiter: ThreadId,
}

/// The set-up of the tests below: on `pool`, a task takes the run's mutex,
/// calls `wait` (which queues `X` and waits on the pool, and returns `X`'s
/// handle beside anything else it wants to check), releases the mutex, and
/// only then joins `X`. Bounded by [`HANG`], so a deadlock fails the test.
fn hold_the_mutex_across<X, T>(
    pool: Pool,
    wait: impl FnOnce(&Arc<Run>) -> (JoinHandle<X>, T) + Send + 'static,
) -> Held<X, T>
where
    X: Send + 'static,
    T: Send + 'static,
{
    within(HANG, move || {
        let run = Arc::new(Run::default());
        let task = {
            let run = Arc::clone(&run);
            pool.spawn_fn(move || {
                let held = run.mutex.lock().unwrap();
                let (x, value) = wait(&run);
                drop(held);
                (x.join().unwrap(), value, thread::current().id())
            })
        };
        let (x, value, waiter) = task.join().unwrap();
        Held {
            run,
            x,
            value,
            waiter,
        }
    })
}

/// A task that holds the mutex across `join(a, b)`, isolated: `a` waits
/// until a thief took `b`, then queues `X` above where `b` was. Plain, the
/// join would pop `X` and run it here, under the held mutex: a deadlock.
/// Isolated, the waiter blocks and gives its slot away; another worker runs
/// `X`, which waits on the mutex until the join returns and the task
/// releases it.
#[test]
fn a_mutex_held_across_an_isolated_join_is_taken_by_queued_work_on_another_thread() {
    let held = hold_the_mutex_across(two_slots(), |run| {
        tidepool::isolate(|| {
            tidepool::join(
                || {
                    spin_until(&run.stolen, "b taken by a thief");
                    run.spawn_x()
                },
                || run.awaited_half(),
            )
        })
    });
    held.run.assert_x_ran_elsewhere(held.waiter);
}

/// The same from outside the pool: the thread that holds the mutex calls
/// `Pool::join`, which runs on a worker; that worker's wait is isolated
/// too (the join's job carries the isolation to it), so `X` (queued on
/// that worker's deque) runs on a third thread.
#[test]
fn a_mutex_held_outside_the_pool_across_an_isolated_pool_join_does_not_deadlock() {
    within(HANG, || {
        let pool = two_slots();
        let run = Arc::new(Run::default());
        let held = run.mutex.lock().unwrap();
        let ((x, joiner), ()) = tidepool::isolate(|| {
            pool.join(
                || {
                    spin_until(&run.stolen, "b taken by a thief");
                    (run.spawn_x(), thread::current().id())
                },
                || run.awaited_half(),
            )
        });
        drop(held);
        x.join().unwrap();
        run.assert_x_ran_elsewhere(joiner);
    });
}

/// The hazard itself, without the deadlock: the same join, plain. On two
/// slots, both held (the waiter's, the thief's) and no quantum lending
/// one, the only thread that can run `X` is the waiter's, and its helping
/// wait does. `X` here only *tries* the mutex: it finds it taken, on the
/// thread that holds it. With `lock()`, as in the tests above, it would
/// have waited for itself forever.
#[test]
fn a_plain_join_runs_queued_work_on_the_lock_holders_thread() {
    let held = hold_the_mutex_across(two_slots(), |run| {
        tidepool::join(
            || {
                spin_until(&run.stolen, "b taken by a thief");
                let run = Arc::clone(run);
                tidepool::spawn_fn(move || {
                    *run.x_thread.lock().unwrap() = Some(thread::current().id());
                    run.x_started.store(true, Ordering::SeqCst);
                    matches!(run.mutex.try_lock(), Err(TryLockError::WouldBlock))
                })
            },
            || run.awaited_half(),
        )
    });
    let x_thread = held.run.x_thread.lock().unwrap().expect("X ran");
    assert_eq!(
        x_thread, held.waiter,
        "the plain join's wait ran X on the thread that held the mutex"
    );
    assert!(held.x, "X found the mutex taken, by its own thread");
}

/// A scope's end, isolated: its task taken by a thief, `X` queued above it
/// on the owner's deque. The owner runs none of it and waits.
#[test]
fn a_mutex_held_across_an_isolated_scope_is_taken_by_queued_work_on_another_thread() {
    let held = hold_the_mutex_across(two_slots(), |run| {
        let x = tidepool::isolate(|| {
            tidepool::scope(|s| {
                s.spawn(|_| run.awaited_half());
                spin_until(&run.stolen, "the scope's task taken by a thief");
                run.spawn_x()
            })
        });
        (x, ())
    });
    held.run.assert_x_ran_elsewhere(held.waiter);
}

/// `JoinHandle::join`, isolated: the awaited task `Y` was spawned first, `X`
/// after it, so `X` is on top of the waiter's deque, and `Y` (on a thief)
/// ends only once `X` has started. A plain join would pop `X` and run it
/// here. Isolated, the waiter gives its slot away, and another worker runs
/// `X`.
#[test]
fn a_mutex_held_across_an_isolated_handle_join_does_not_deadlock() {
    let held = hold_the_mutex_across(two_slots(), |run| {
        let y = run.spawn_y();
        let x = run.spawn_x();
        (x, tidepool::isolate(|| y.join().unwrap()))
    });
    assert_eq!(held.value, 42);
    held.run.assert_x_ran_elsewhere(held.waiter);
}

/// `block_on` on a worker, isolated, likewise (awaiting `Y`'s handle).
#[test]
fn a_mutex_held_across_an_isolated_block_on_does_not_deadlock() {
    let held = hold_the_mutex_across(two_slots(), |run| {
        let y = run.spawn_y();
        let x = run.spawn_x();
        (x, tidepool::isolate(|| tidepool::block_on(y).unwrap()))
    });
    assert_eq!(held.value, 42);
    held.run.assert_x_ran_elsewhere(held.waiter);
}

/// A pool of one thread that never adds any: nobody can steal `b`, and
/// `a` left `X` queued above it. A plain join pops `X` and runs it here
/// (the deadlock); an isolated one must not wait for a thread that will
/// never come either: it digs `b` out from under `X`, runs it, and leaves
/// `X` queued, to run once the task has released the mutex.
#[test]
fn an_isolated_join_on_a_pool_of_one_runs_its_own_half_from_under_queued_work() {
    let pool = Pool::builder()
        .concurrency(1)
        .max_threads(1)
        .controller(Controller::Fixed)
        .build()
        .unwrap();
    let held = hold_the_mutex_across(pool, |run| {
        let (x, b_ran_on) =
            tidepool::isolate(|| tidepool::join(|| run.spawn_x(), || thread::current().id()));
        assert!(
            !run.x_started.load(Ordering::SeqCst),
            "X ran during the isolated join"
        );
        (x, b_ran_on)
    });
    assert_eq!(held.value, held.waiter, "b ran on the pool's only thread");
}

/// The thief's side: a half stolen from an isolated join runs isolated
/// too. The thief's half spawns `Z` then `X` (the mutex) on the thief's
/// own deque and joins `Z`'s handle; `Z` ends only once `X` has started.
/// Were the thief's wait a plain one, it would pop `X` and run it under the
/// stolen half, whose waiter holds the mutex and waits for that half: a
/// deadlock across two threads.
#[test]
fn a_half_stolen_from_an_isolated_join_waits_isolated_on_the_thief() {
    let held = hold_the_mutex_across(two_slots(), |run| {
        let ((), x_and_thief) = tidepool::isolate(|| {
            tidepool::join(
                || spin_until(&run.stolen, "b taken by a thief"),
                || {
                    run.stolen.store(true, Ordering::SeqCst);
                    let z = {
                        let run = Arc::clone(run);
                        tidepool::spawn_fn(move || {
                            spin_until(&run.x_started, "X started");
                            7
                        })
                    };
                    let x = run.spawn_x();
                    assert_eq!(z.join().unwrap(), 7);
                    (x, thread::current().id())
                },
            )
        });
        x_and_thief
    });
    let thief = held.value;
    assert_ne!(thief, held.waiter, "b was stolen");
    held.run.assert_x_ran_elsewhere(thief);
}
