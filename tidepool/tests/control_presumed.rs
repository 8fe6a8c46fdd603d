//! Presumed blocking on real threads: a closure of a kind the pool has seen
//! blocking is handed a thread of its own as it is spawned (a parked
//! worker, or a new thread), or starts without a slot when a worker finds it
//! queued, so queued work keeps the slots instead of waiting for the
//! monitor's next look; a kind that computes when presumed blocking is not
//! presumed again, and one whose items turn out short stops being presumed.
//!
//! What a pool learns about kinds is shared by the process (a table keyed by
//! the closure's type), so these tests live in their own binary: no other
//! test's closures can share a table entry with theirs.

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tidepool::{Metrics, Pool};

/// `parties` tasks meet here; each waits until all arrived, or gives up.
struct Rendezvous {
    arrived: Mutex<usize>,
    all_here: Condvar,
    parties: usize,
    /// Parties waiting now, and the most ever waiting at once.
    present: Mutex<(usize, usize)>,
}

impl Rendezvous {
    fn new(parties: usize) -> Arc<Self> {
        Arc::new(Rendezvous {
            arrived: Mutex::new(0),
            all_here: Condvar::new(),
            parties,
            present: Mutex::new((0, 0)),
        })
    }

    /// Arrives and waits for the others for up to `patience`; true if all
    /// of them came.
    fn meet(&self, patience: Duration) -> bool {
        {
            let mut present = self.present.lock().unwrap();
            present.0 += 1;
            present.1 = present.1.max(present.0);
        }
        let met = self.wait_for_all(patience);
        self.present.lock().unwrap().0 -= 1;
        met
    }

    /// The most parties that were ever waiting at once.
    fn most_at_once(&self) -> usize {
        self.present.lock().unwrap().1
    }

    fn wait_for_all(&self, patience: Duration) -> bool {
        let mut arrived = self.arrived.lock().unwrap();
        *arrived += 1;
        self.all_here.notify_all();
        let (arrived, _) = self
            .all_here
            .wait_timeout_while(arrived, patience, |n| *n < self.parties)
            .unwrap();
        *arrived >= self.parties
    }
}

/// What an item does this time.
#[derive(Clone, Copy)]
enum Mode {
    /// Meets the others: blocks until every party of its rendezvous came.
    Meet,
    /// Computes for about 20 ms.
    Compute,
    /// Computes for about 100 ms: ten default quanta.
    ComputeLong,
    /// Returns at once.
    Quick,
    /// Sleeps 5 ms.
    Sleep,
    /// Waits 20 ms for a timer in `tidepool::block_on`: a helping wait,
    /// which takes a free slot to help with.
    WaitOnPool,
    /// Declares a block (`tidepool::blocking`) that lasts until the grace
    /// of a declared section (one monitor interval) is over, on a pool
    /// whose monitor looks (`teach_on_a_looking_pool`): the hand-over
    /// teaches the kind that it blocks, with a fresh credit.
    Declare,
}

/// The kind of item of test `TEST`: every call with the same `TEST` returns
/// the same closure type, so the pool's record of its kind carries from one
/// call to the next, and the tests (run at once) keep separate records.
fn item<const TEST: usize>(
    mode: Mode,
    rendezvous: Arc<Rendezvous>,
    patience: Duration,
) -> impl FnOnce() -> bool {
    move || match mode {
        Mode::Meet => rendezvous.meet(patience),
        Mode::Compute => compute_for(Duration::from_millis(20)),
        Mode::ComputeLong => compute_for(Duration::from_millis(100)),
        Mode::Quick => true,
        Mode::Sleep => {
            std::thread::sleep(Duration::from_millis(5));
            true
        }
        // Waits, declared, until its section is handed over, then ends:
        // a blocked task that waits on earns its kind more credit.
        Mode::Declare => tidepool::blocking(|| {
            let pool = Pool::current().expect("a teaching item runs on a pool");
            while pool.metrics().declared_blocking == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
            true
        }),
        Mode::WaitOnPool => {
            tidepool::block_on(tidepool::Timer::after(Duration::from_millis(20)));
            true
        }
    }
}

/// Keeps a core busy for `time`; true (a value the optimiser must keep).
fn compute_for(time: Duration) -> bool {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < time {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x != 0
}

/// Runs `parties` items of `mode` on `pool`, queued behind a task that holds
/// the pool's only slot until they are all spawned (so each starts with
/// others waiting). Returns whether each item returned true.
fn run_batch<const TEST: usize>(
    pool: &Pool,
    mode: Mode,
    parties: usize,
    patience: Duration,
) -> Vec<bool> {
    let spawned = Arc::new(AtomicBool::new(false));
    let gate = {
        let spawned = spawned.clone();
        pool.spawn_fn(move || {
            let deadline = Instant::now() + HANG;
            // Runnable (never taken for blocked) but yielding: presumed
            // items handed threads as they are spawned compete with it for
            // the cores, and a computing one must still get the CPU share
            // that tells it computes (a quarter of its wall time) on a
            // loaded machine.
            while !spawned.load(Ordering::Acquire) && Instant::now() < deadline {
                std::thread::yield_now();
            }
        })
    };
    let rendezvous = Rendezvous::new(parties);
    let items: Vec<_> = (0..parties)
        .map(|_| pool.spawn_fn(item::<TEST>(mode, rendezvous.clone(), patience)))
        .collect();
    spawned.store(true, Ordering::Release);
    gate.join().unwrap();
    items.into_iter().map(|i| i.join().unwrap()).collect()
}

/// Teaches the process that items block: a default pool's monitor finds
/// them blocked in their rendezvous and replaces them.
fn learn_that_items_block<const TEST: usize>() {
    let teacher = Pool::builder().concurrency(1).build().unwrap();
    let met = run_batch::<TEST>(&teacher, Mode::Meet, 4, HANG);
    assert!(
        met.iter().all(|&m| m),
        "the default pool runs them all at once"
    );
    let m = teacher.metrics();
    assert!(m.blocked_detections >= 1, "{m:?}");
}

/// A pool whose monitor looks only every 10 s: any replacement within a
/// test is presumed, not detected.
fn slow_monitor_pool() -> Pool {
    slow_monitor_pool_with(0)
}

/// [`slow_monitor_pool`] with `min_threads` threads started at build.
fn slow_monitor_pool_with(min_threads: usize) -> Pool {
    Pool::builder()
        .concurrency(1)
        .min_threads(min_threads)
        .monitor_interval(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Runs `teach` (a `Mode::Declare` item) on a pool of its own whose monitor
/// looks every millisecond, so its declared section is handed over and the
/// kind learns that it blocks (kinds are process-wide); the pools under
/// test have a slow monitor that would take seconds to look.
fn teach_on_a_looking_pool(teach: impl FnOnce() -> bool + Send + 'static) {
    let teacher = Pool::builder().concurrency(1).build().unwrap();
    assert!(teacher.spawn_fn(teach).join().unwrap());
    let m = teacher.metrics();
    assert!(
        m.declared_blocking >= 1,
        "the section was handed over: {m:?}"
    );
    teacher.shutdown().unwrap();
}

/// Waits (within `HANG`) until at least `n` of `pool`'s threads are parked.
fn wait_until_parked(pool: &Pool, n: usize) {
    let deadline = Instant::now() + HANG;
    while pool.metrics().idle_threads < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_kind_seen_blocking_starts_without_a_slot_while_work_waits() {
    let (met, m): (Vec<bool>, Metrics) = within(HANG, || {
        learn_that_items_block::<1>();
        let pool = slow_monitor_pool();
        // Eight items that each wait (up to 5 s, half the monitor's
        // interval) for all eight: on one slot they can only all meet if
        // every one but the last gave its slot on as it started.
        let met = run_batch::<1>(&pool, Mode::Meet, 8, Duration::from_secs(5));
        (met, pool.metrics())
    });
    assert!(met.iter().all(|&m| m), "all eight ran at once: {m:?}");
    assert_eq!(m.blocked_detections, 0, "the monitor found none: {m:?}");
    assert!(m.presumed_blocking >= 7, "{m:?}");
    assert_eq!(m.presumptions_failed, 0, "{m:?}");
    assert!(m.threads_started_presumed >= 1, "{m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_that_computes_when_presumed_blocking_is_not_presumed_again() {
    let m = within(HANG, || {
        learn_that_items_block::<2>();
        let pool = Pool::builder().concurrency(1).build().unwrap();
        // Presumed blocking, they compute: the first one marks the kind.
        let done = run_batch::<2>(&pool, Mode::Compute, 3, HANG);
        assert!(done.iter().all(|&d| d));
        let first = pool.metrics();
        assert!(first.presumed_blocking >= 1, "{first:?}");
        assert!(first.presumptions_failed >= 1, "{first:?}");
        // The next batch starts each with a slot, like any other work.
        let done = run_batch::<2>(&pool, Mode::Compute, 3, HANG);
        assert!(done.iter().all(|&d| d));
        let second = pool.metrics();
        assert_eq!(second.presumed_blocking, first.presumed_blocking);
        second
    });
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_seen_blocking_gets_a_thread_as_it_is_spawned_when_no_slot_is_free() {
    let (met, m): (Vec<bool>, Metrics) = within(HANG, || {
        learn_that_items_block::<3>();
        // One thread, one slot, and a monitor that looks every 10 s.
        let pool = slow_monitor_pool_with(1);
        let patience = Duration::from_secs(5);
        let rendezvous = Rendezvous::new(4);
        // A task of an unknown kind takes the only slot and waits for the
        // three items: they can only come if each got a thread of its own
        // as it was spawned.
        let holder = {
            let rendezvous = rendezvous.clone();
            pool.spawn_fn(move || rendezvous.meet(patience))
        };
        let items: Vec<_> = (0..3)
            .map(|_| pool.spawn_fn(item::<3>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        let mut met = vec![holder.join().unwrap()];
        met.extend(items.into_iter().map(|i| i.join().unwrap()));
        (met, pool.metrics())
    });
    assert!(met.iter().all(|&m| m), "all four ran at once: {m:?}");
    assert_eq!(m.blocked_detections, 0, "the monitor found none: {m:?}");
    assert_eq!(m.threads_started_presumed, 3, "{m:?}");
    assert_eq!(m.presumed_blocking, 3, "{m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_seen_blocking_is_handed_to_a_parked_worker_as_it_is_spawned() {
    let (met, m): (Vec<bool>, Metrics) = within(HANG, || {
        learn_that_items_block::<4>();
        let pool = slow_monitor_pool_with(4);
        // Wait until the four threads started at build are parked.
        wait_until_parked(&pool, 4);
        let patience = Duration::from_secs(5);
        let rendezvous = Rendezvous::new(3);
        let items: Vec<_> = (0..3)
            .map(|_| pool.spawn_fn(item::<4>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        let met = items.into_iter().map(|i| i.join().unwrap()).collect();
        (met, pool.metrics())
    });
    // Three at once on one slot: each had a thread of its own.
    assert!(met.iter().all(|&m| m), "all three ran at once: {m:?}");
    assert_eq!(m.presumed_handed, 3, "{m:?}");
    assert_eq!(
        m.threads_started_presumed, 0,
        "parked workers took them: {m:?}"
    );
    assert_eq!(m.blocked_detections, 0, "the monitor found none: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_presumed_task_that_takes_the_last_parked_worker_leaves_a_spare_for_the_next() {
    const ITEMS: usize = 4;
    let (met, m): (Vec<bool>, Metrics) = within(HANG, || {
        learn_that_items_block::<10>();
        // One thread parked at build; the monitor would look only every
        // 10 s, so every spare comes from a request, not from a tick.
        let pool = slow_monitor_pool_with(1);
        let patience = Duration::from_secs(5);
        let rendezvous = Rendezvous::new(ITEMS);
        let mut items = Vec::new();
        for _ in 0..ITEMS {
            // Spawned one at a time, each once a parked thread is there
            // for it: the one the pool built with, then the spares.
            wait_until_parked(&pool, 1);
            items.push(pool.spawn_fn(item::<10>(Mode::Meet, rendezvous.clone(), patience)));
        }
        let met = items.into_iter().map(|i| i.join().unwrap()).collect();
        (met, pool.metrics())
    });
    assert!(met.iter().all(|&m| m), "all ran at once: {m:?}");
    assert_eq!(m.presumed_handed, ITEMS as u64, "each was handed on: {m:?}");
    assert_eq!(
        m.threads_started_presumed, 0,
        "none waited for a thread to start: {m:?}"
    );
    // Each hand took the last parked thread and asked for a spare; the
    // first three were needed (their items were still waiting), the last
    // one is not started if the items ended and parked first.
    let spares = m.threads_started_spare;
    assert!(
        (ITEMS as u64 - 1..=ITEMS as u64).contains(&spares),
        "{spares} spares: {m:?}"
    );
    assert_eq!(m.blocked_detections, 0, "the monitor found none: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_whose_presumed_items_end_at_once_stops_being_presumed() {
    let (early, late, m) = within(HANG, || {
        let pool = slow_monitor_pool();
        // One declared block: the kind blocks, with a fresh credit of 8.
        let teach = item::<5>(Mode::Declare, Rendezvous::new(1), Duration::ZERO);
        teach_on_a_looking_pool(teach);
        let run = |count| {
            for _ in 0..count {
                let never_met = Rendezvous::new(2);
                let item = item::<5>(Mode::Quick, never_met, Duration::ZERO);
                assert!(pool.spawn_fn(item).join().unwrap());
            }
            pool.metrics().presumed_blocking
        };
        let early = run(30);
        let late = run(10);
        (early, late, pool.metrics())
    });
    // Each short item costs the kind one credit, and a fresh kind has 8.
    // (Taught by a monitor instead, the credit depends on how long the
    // teaching items were seen waiting.)
    assert!((1..=8).contains(&early), "{early} presumed: {m:?}");
    assert_eq!(late, early, "out of credit, no more presumed: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_worker_that_finds_queued_items_presumed_blocking_hands_more_of_them_on() {
    let (met, m): (Vec<bool>, Metrics) = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .min_threads(8)
            .monitor_interval(Duration::from_secs(10))
            .build()
            .unwrap();
        let deadline = Instant::now() + HANG;
        while pool.metrics().idle_threads < 8 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The only slot is held while six items of a kind not yet known to
        // block are queued; then the process learns that the kind blocks
        // (another pool's monitor), and the slot is let go.
        let release = Arc::new(AtomicBool::new(false));
        let holder = {
            let release = release.clone();
            pool.spawn_fn(move || {
                let deadline = Instant::now() + HANG;
                while !release.load(Ordering::Acquire) && Instant::now() < deadline {
                    std::thread::yield_now();
                }
            })
        };
        let patience = Duration::from_secs(5);
        let rendezvous = Rendezvous::new(6);
        let items: Vec<_> = (0..6)
            .map(|_| pool.spawn_fn(item::<6>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        learn_that_items_block::<6>();
        release.store(true, Ordering::Release);
        holder.join().unwrap();
        let met = items.into_iter().map(|i| i.join().unwrap()).collect();
        (met, pool.metrics())
    });
    assert!(met.iter().all(|&m| m), "all six ran at once: {m:?}");
    assert_eq!(m.blocked_detections, 0, "the monitor found none: {m:?}");
    // Found queued, the first hands queued ones straight to parked workers
    // (fan-out); a chain of slot hand-offs alone hands none.
    assert!(m.presumed_handed >= 1, "{m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_presumed_task_that_takes_a_slot_in_a_helping_wait_keeps_it_for_the_pool() {
    let m = within(HANG, || {
        learn_that_items_block::<7>();
        let pool = slow_monitor_pool();
        // Presumed, the item starts without a slot; its `block_on` takes
        // the free one to help with, and holds it when the item ends. A
        // worker that forgot it held it leaked the pool's only slot, and
        // the plain tasks after it were never run.
        let patience = Duration::ZERO;
        let waited = pool
            .spawn_fn(item::<7>(Mode::WaitOnPool, Rendezvous::new(1), patience))
            .join()
            .unwrap();
        assert!(waited);
        let sum: usize = (0..20)
            .map(|i| pool.spawn_fn(move || i).join().unwrap())
            .sum();
        assert_eq!(sum, 190);
        pool.metrics()
    });
    assert!(m.presumed_blocking >= 1, "nothing was presumed: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn presumed_items_of_a_kind_new_to_blocking_start_a_few_at_a_time() {
    let (most, m) = within(HANG, || {
        let pool = slow_monitor_pool();
        // One declared block: the kind blocks, with a fresh credit of 8.
        let teach = item::<9>(Mode::Declare, Rendezvous::new(1), Duration::ZERO);
        teach_on_a_looking_pool(teach);
        // 40 items that each wait (50 ms at most) for all 40. Presumed
        // without a cap, each was handed a thread as it was spawned, all 40
        // at once: a lock convoy's items, once caught asleep, got 433.
        let rendezvous = Rendezvous::new(40);
        let patience = Duration::from_millis(50);
        let items: Vec<_> = (0..40)
            .map(|_| pool.spawn_fn(item::<9>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        for i in items {
            i.join().unwrap();
        }
        (rendezvous.most_at_once(), pool.metrics())
    });
    // The kind's credit in presumed threads, plus the slot's worker.
    assert!(most <= 8 + 1, "{most} at once: {m:?}");
    assert!(m.presumed_blocking >= 8, "{m:?}");
    assert!(most >= 8, "{most} at once: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_seen_computing_once_is_presumed_once_seen_blocking_twice() {
    let m = within(HANG, || {
        // A task of a kind new to the pool computes for ten quanta on a
        // default pool: the monitor finds it runnable, using a core, past
        // the quantum, and marks the kind as computing.
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let long = item::<11>(Mode::ComputeLong, Rendezvous::new(1), Duration::ZERO);
        assert!(pool.spawn_fn(long).join().unwrap());
        assert_eq!(pool.metrics().presumed_blocking, 0, "a kind new to it");
        // Then its items are found blocked (at least three detections for
        // four items on one slot), which outweighs the one computing
        // sighting: presumed, all eight meet on one slot. A computing mark
        // kept for good left the kind never presumed again.
        learn_that_items_block::<11>();
        let slow = slow_monitor_pool();
        let met = run_batch::<11>(&slow, Mode::Meet, 8, Duration::from_secs(5));
        assert!(met.iter().all(|&m| m), "all eight ran at once: {met:?}");
        slow.metrics()
    });
    assert!(m.presumed_blocking >= 7, "{m:?}");
    assert_eq!(m.blocked_detections, 0, "the monitor found none: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn what_a_thread_does_before_its_presumed_task_is_not_charged_to_the_task() {
    let m = within(HANG, || {
        // A pool whose threads each compute for 20 ms as they start (a
        // hook that sets up a cache, say), with one slot.
        let pool = Pool::builder()
            .concurrency(1)
            .on_thread_start(|| {
                compute_for(Duration::from_millis(20));
            })
            .build()
            .unwrap();
        let teach = item::<12>(Mode::Declare, Rendezvous::new(1), Duration::ZERO);
        teach_on_a_looking_pool(teach);
        // Items that sleep 5 ms, spawned while the only slot is held: each
        // is presumed and handed a thread of its own, which may be a new
        // one that computes in its hook before the item sleeps. Charged to
        // the item, those 20 ms of CPU read as an item that computed, and
        // the kind was never presumed again.
        for _ in 0..3 {
            let slept = run_batch::<12>(&pool, Mode::Sleep, 4, Duration::ZERO);
            assert!(slept.iter().all(|&s| s));
        }
        pool.metrics()
    });
    assert!(m.threads_started_presumed >= 1, "{m:?}");
    assert_eq!(m.presumptions_failed, 0, "{m:?}");
    assert_eq!(m.blocked_detections, 0, "{m:?}");
    common::assert_counters_add_up(&m);
}
