//! Presumed blocking on real threads: a closure of a kind the pool has seen
//! blocking is handed a thread of its own as it is spawned (a parked
//! worker, or a new thread), or starts without a slot when a worker finds it
//! queued, so queued work keeps the slots instead of waiting for the
//! monitor's next look; a kind that computes when presumed blocking is not
//! presumed again (judged while it runs: a burst of CPU-bound items of a
//! kind that blocked before gets at most two wrong guesses), one whose
//! items turn out short stops being presumed, and one that truly blocks
//! gets about a thread per item within a few monitor looks.
//!
//! What a pool learns about kinds is its own (a table per pool, keyed by
//! the closure's type), so each test teaches the pool it tests, and counts
//! what happened after the lesson (`Metrics` before and after).

mod common;

use common::{within, Peak, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tidepool::{Metrics, Pool};

/// `parties` tasks meet here; each waits until all arrived, or gives up.
struct Rendezvous {
    arrived: Mutex<usize>,
    all_here: Condvar,
    parties: usize,
}

impl Rendezvous {
    fn new(parties: usize) -> Arc<Self> {
        Arc::new(Rendezvous {
            arrived: Mutex::new(0),
            all_here: Condvar::new(),
            parties,
        })
    }

    /// Arrives and waits for the others for up to `patience`; true if all
    /// of them came.
    fn meet(&self, patience: Duration) -> bool {
        self.wait_for_all(patience)
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
    /// whose monitor looks (`teach_by_declaring`): the hand-over
    /// teaches the kind that it blocks.
    Declare,
}

/// Runs the calling test alone in this binary: each test here builds a
/// pool of up to hundreds of threads and asserts what the monitor's looks
/// found, and a neighbour's threads on the same 2 cores made those looks
/// late (the second burst of `a_kind_that_truly_blocks_...` was found
/// blocked one by one, 67 of 200 presumed, once in CI).
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The kind of item of test `TEST`: every call with the same `TEST` returns
/// the same closure type, so the pool's record of its kind carries from one
/// call to the next, and the tests keep separate records.
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

/// Teaches `pool` that items of test `TEST` block: its monitor finds them
/// blocked in their rendezvous (four items on one slot, queued behind a
/// task that holds it) and replaces them. Returns the metrics after.
fn learn_that_items_block<const TEST: usize>(pool: &Pool) -> Metrics {
    let met = run_batch::<TEST>(pool, Mode::Meet, 4, HANG);
    assert!(met.iter().all(|&m| m), "the pool runs them all at once");
    let m = pool.metrics();
    assert!(m.blocked_detections >= 1, "{m:?}");
    assert!(learned_to_presume(pool, "item"), "{:?}", m.kinds);
    m
}

/// Runs `teach` (a `Mode::Declare` item) on `pool`: its declared section
/// is handed over once the monitor has seen it for an interval, and the
/// kind learns that it blocks. Returns the metrics after.
fn teach_by_declaring(pool: &Pool, teach: impl FnOnce() -> bool + Send + 'static) -> Metrics {
    assert!(pool.spawn_fn(teach).join().unwrap());
    let m = pool.metrics();
    assert!(
        m.declared_blocking >= 1,
        "the section was handed over: {m:?}"
    );
    m
}

/// Whether `pool` presumes closures of the kind whose name contains
/// `name` now.
fn learned_to_presume(pool: &Pool, name: &str) -> bool {
    pool.metrics()
        .kinds
        .iter()
        .any(|k| k.name.contains(name) && k.presumed_now)
}

/// A pool of one slot whose monitor looks every millisecond (the default).
fn one_slot_pool() -> Pool {
    one_slot_pool_with(0)
}

/// [`one_slot_pool`] with `min_threads` threads started at build.
fn one_slot_pool_with(min_threads: usize) -> Pool {
    Pool::builder()
        .concurrency(1)
        .min_threads(min_threads)
        .build()
        .unwrap()
}

/// Waits (within `HANG`) until at least `n` of `pool`'s threads are parked.
fn wait_until_parked(pool: &Pool, n: usize) {
    let deadline = Instant::now() + HANG;
    while pool.metrics().idle_threads < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What happened between two snapshots of a pool's metrics.
#[derive(Debug)]
struct Since {
    presumed: u64,
    failed: u64,
    handed: u64,
    started_presumed: u64,
    detections: u64,
}

fn since(before: &Metrics, after: &Metrics) -> Since {
    Since {
        presumed: after.presumed_blocking - before.presumed_blocking,
        failed: after.presumptions_failed - before.presumptions_failed,
        handed: after.presumed_handed - before.presumed_handed,
        started_presumed: after.threads_started_presumed - before.threads_started_presumed,
        detections: after.blocked_detections - before.blocked_detections,
    }
}

#[test]
fn a_kind_seen_blocking_starts_without_a_slot_while_work_waits() {
    let _alone = alone();
    let (met, d, m) = within(HANG, || {
        let pool = one_slot_pool();
        let before = learn_that_items_block::<1>(&pool);
        // Eight items that each wait for all eight, on one slot: they can
        // only all meet if they run without it (presumed, or found blocked
        // and replaced).
        let met: Vec<bool> = run_batch::<1>(&pool, Mode::Meet, 8, HANG);
        let m = pool.metrics();
        (met, since(&before, &m), m)
    });
    assert!(met.iter().all(|&m| m), "all eight ran at once: {m:?}");
    // Two at their spawn (the fresh cap), more as the monitor finds them
    // asleep.
    assert!(d.presumed >= 2, "{d:?} {m:?}");
    assert!(d.handed + d.started_presumed >= 2, "{d:?} {m:?}");
    assert_eq!(d.failed, 0, "{d:?} {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_that_computes_when_presumed_blocking_is_not_presumed_again() {
    let _alone = alone();
    let (first, second, m) = within(HANG, || {
        let pool = one_slot_pool();
        let before = learn_that_items_block::<2>(&pool);
        // Presumed blocking, they compute: wrong guesses end the kind's
        // presumption.
        let done = run_batch::<2>(&pool, Mode::Compute, 3, HANG);
        assert!(done.iter().all(|&d| d));
        // A presumed task judged at its end is judged on its worker after
        // its handle completes: wait for the verdict to be counted (the
        // monitor may also have judged it while it ran).
        common::eventually(HANG, || {
            pool.metrics().presumptions_failed > before.presumptions_failed
        });
        let after_first = pool.metrics();
        // The next batch starts each with a slot, like any other work.
        let done = run_batch::<2>(&pool, Mode::Compute, 3, HANG);
        assert!(done.iter().all(|&d| d));
        let m = pool.metrics();
        (since(&before, &after_first), since(&after_first, &m), m)
    });
    assert!(first.presumed >= 1, "{first:?} {m:?}");
    assert!(first.failed >= 1, "{first:?} {m:?}");
    assert!(first.failed <= 2, "at most the fresh cap: {first:?} {m:?}");
    assert_eq!(second.presumed, 0, "{second:?} {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_seen_blocking_gets_a_thread_as_it_is_spawned_when_no_slot_is_free() {
    let _alone = alone();
    let (met, d, m) = within(HANG, || {
        // One thread, one slot.
        let pool = one_slot_pool_with(1);
        let before = learn_that_items_block::<3>(&pool);
        let patience = HANG;
        let rendezvous = Rendezvous::new(4);
        // A task of an unknown kind takes the only slot and waits for the
        // three items: the first two get a thread each as they are
        // spawned (the fresh cap), the third once the monitor finds them
        // asleep (or finds the slot's task blocked).
        let holder = {
            let rendezvous = rendezvous.clone();
            pool.spawn_fn(move || rendezvous.meet(patience))
        };
        let items: Vec<_> = (0..3)
            .map(|_| pool.spawn_fn(item::<3>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        let mut met = vec![holder.join().unwrap()];
        met.extend(items.into_iter().map(|i| i.join().unwrap()));
        let m = pool.metrics();
        (met, since(&before, &m), m)
    });
    assert!(met.iter().all(|&m| m), "all four ran at once: {m:?}");
    assert!(d.presumed >= 2, "{d:?} {m:?}");
    assert!(d.handed + d.started_presumed >= 2, "{d:?} {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_seen_blocking_is_handed_to_a_parked_worker_as_it_is_spawned() {
    let _alone = alone();
    let (met, d, m) = within(HANG, || {
        let pool = one_slot_pool_with(4);
        let before = learn_that_items_block::<4>(&pool);
        // Wait until the four threads started at build are parked.
        wait_until_parked(&pool, 4);
        let patience = HANG;
        let rendezvous = Rendezvous::new(3);
        let items: Vec<_> = (0..3)
            .map(|_| pool.spawn_fn(item::<4>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        let met: Vec<bool> = items.into_iter().map(|i| i.join().unwrap()).collect();
        let m = pool.metrics();
        (met, since(&before, &m), m)
    });
    // Three at once on one slot: two had a thread of their own as they
    // were spawned (the fresh cap), the third took the slot.
    assert!(met.iter().all(|&m| m), "all three ran at once: {m:?}");
    assert!(d.handed >= 2, "{d:?} {m:?}");
    assert_eq!(
        d.started_presumed, 0,
        "parked workers took them: {d:?} {m:?}"
    );
    common::assert_counters_add_up(&m);
}

#[test]
fn a_presumed_task_that_takes_the_last_parked_worker_leaves_a_spare_for_the_next() {
    let _alone = alone();
    // Within the fresh cap: each is presumed as it is spawned.
    const ITEMS: usize = 2;
    let (met, d, spares, m) = within(HANG, || {
        // One thread kept; the threads the lesson starts retire soon.
        let pool = Pool::builder()
            .concurrency(1)
            .min_threads(1)
            .idle_timeout(Duration::from_millis(20))
            .build()
            .unwrap();
        let before = learn_that_items_block::<10>(&pool);
        // Back to the one thread, parked.
        let deadline = Instant::now() + HANG;
        while pool.metrics().threads > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        wait_until_parked(&pool, 1);
        let spares_before = pool.metrics().threads_started_spare;
        let patience = HANG;
        let rendezvous = Rendezvous::new(ITEMS);
        let mut items = Vec::new();
        for _ in 0..ITEMS {
            // Spawned one at a time, each once a parked thread is there
            // for it: the one the pool kept, then a spare.
            wait_until_parked(&pool, 1);
            items.push(pool.spawn_fn(item::<10>(Mode::Meet, rendezvous.clone(), patience)));
        }
        let met: Vec<bool> = items.into_iter().map(|i| i.join().unwrap()).collect();
        let m = pool.metrics();
        (
            met,
            since(&before, &m),
            m.threads_started_spare - spares_before,
            m,
        )
    });
    assert!(met.iter().all(|&m| m), "all ran at once: {m:?}");
    assert_eq!(d.handed, ITEMS as u64, "each was handed on: {d:?} {m:?}");
    assert_eq!(
        d.started_presumed, 0,
        "none waited for a thread to start: {d:?} {m:?}"
    );
    // Each hand took the last parked thread; the first asked for a spare
    // (its kind had room for the second, which needed it), the last took
    // the kind's last place under its fresh cap and asks for none (or, if
    // the first ended first, had room and its spare found the items
    // ended and parked).
    assert!(
        (ITEMS as u64 - 1..=ITEMS as u64).contains(&spares),
        "{spares} spares: {m:?}"
    );
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_whose_presumed_items_end_at_once_stops_being_presumed() {
    let _alone = alone();
    let (early, late, m) = within(HANG, || {
        let pool = one_slot_pool();
        // One declared block: the kind blocks.
        let teach = item::<5>(Mode::Declare, Rendezvous::new(1), Duration::ZERO);
        let before = teach_by_declaring(&pool, teach);
        let run = |count| {
            for _ in 0..count {
                let never_met = Rendezvous::new(2);
                let item = item::<5>(Mode::Quick, never_met, Duration::ZERO);
                assert!(pool.spawn_fn(item).join().unwrap());
            }
            pool.metrics().presumed_blocking - before.presumed_blocking
        };
        let early = run(30);
        let late = run(10);
        (early, late, pool.metrics())
    });
    // Each short item counts against the kind; eight pause it. An item
    // preempted past an eighth of an interval ends neither short nor
    // waited (`control::presumption::judge_end`: no evidence), so on a
    // loaded machine a few more are presumed before eight count (9 seen
    // in CI): what matters is that it stops, and stays stopped.
    assert!((1..=16).contains(&early), "{early} presumed: {m:?}");
    assert_eq!(late, early, "paused, no more presumed: {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn queued_items_presumed_blocking_are_handed_on_when_their_kind_gets_room() {
    let _alone = alone();
    let (met, d, m) = within(HANG, || {
        // No quantum: a slot lent to the queued items (the holder computes
        // for longer than a quantum) would start them too.
        let pool = Pool::builder()
            .concurrency(1)
            .min_threads(8)
            .quantum(None)
            .build()
            .unwrap();
        learn_that_items_block::<6>(&pool);
        // The lesson's burst may have raised the slots: back to one, and
        // every worker parked (none holds a slot beyond the target, not
        // even searching).
        assert!(common::eventually(HANG, || {
            let m = pool.metrics();
            m.concurrency_target == 1 && m.idle_threads == m.threads
        }));
        let before = pool.metrics();
        // The only slot is held (by a task that computes until the end)
        // while six items of a kind known to block are spawned: two are
        // handed parked workers (the fresh cap), four are queued, where no
        // worker with a slot takes them. Once the monitor finds the two
        // asleep, the kind has room: the monitor hands a queued one a
        // thread, which fans out, and so on.
        let (started, release) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let holder = {
            let (started, release) = (started.clone(), release.clone());
            pool.spawn_fn(move || {
                started.store(true, Ordering::Release);
                let deadline = Instant::now() + HANG;
                while !release.load(Ordering::Acquire) && Instant::now() < deadline {
                    std::thread::yield_now();
                }
            })
        };
        assert!(common::eventually(HANG, || started.load(Ordering::Acquire)));
        let patience = HANG;
        let rendezvous = Rendezvous::new(6);
        let items: Vec<_> = (0..6)
            .map(|_| pool.spawn_fn(item::<6>(Mode::Meet, rendezvous.clone(), patience)))
            .collect();
        let met: Vec<bool> = items.into_iter().map(|i| i.join().unwrap()).collect();
        release.store(true, Ordering::Release);
        holder.join().unwrap();
        let m = pool.metrics();
        (met, since(&before, &m), m)
    });
    assert!(met.iter().all(|&m| m), "all six ran at once: {m:?}");
    // All six presumed, or five if the monitor took the holder (its thread
    // starved of a core on a loaded machine) for blocked and one took its
    // slot. Most are handed threads; one may be started presumed by a
    // worker that took it with a slot the policy added for the queued
    // work, and gave that slot on (CI saw 5 handed and 1 so, 2026-11-28).
    let on_the_slot = d.detections.min(1);
    assert!(d.presumed + on_the_slot >= 6, "{d:?} {m:?}");
    // The two spawned while workers were parked (the fresh cap).
    assert!(d.handed + d.started_presumed >= 2, "{d:?} {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_presumed_task_that_takes_a_slot_in_a_helping_wait_keeps_it_for_the_pool() {
    let _alone = alone();
    let (d, m) = within(HANG, || {
        let pool = one_slot_pool();
        let before = learn_that_items_block::<7>(&pool);
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
        let m = pool.metrics();
        (since(&before, &m), m)
    });
    assert!(d.presumed >= 1, "nothing was presumed: {d:?} {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_seen_computing_once_is_presumed_once_seen_blocking_twice() {
    let _alone = alone();
    let (met, d, m) = within(HANG, || {
        // A task of a kind new to the pool computes for ten quanta: the
        // monitor finds it runnable, using a core, past the quantum, and
        // marks the kind as computing.
        let pool = one_slot_pool();
        let long = item::<11>(Mode::ComputeLong, Rendezvous::new(1), Duration::ZERO);
        assert!(pool.spawn_fn(long).join().unwrap());
        assert_eq!(pool.metrics().presumed_blocking, 0, "a kind new to it");
        // Then its items are found blocked (at least three detections for
        // four items on one slot), which outweighs the one computing
        // sighting: presumed again. A computing mark kept for good left
        // the kind never presumed again.
        let before = learn_that_items_block::<11>(&pool);
        let met: Vec<bool> = run_batch::<11>(&pool, Mode::Meet, 8, HANG);
        let m = pool.metrics();
        (met, since(&before, &m), m)
    });
    assert!(met.iter().all(|&m| m), "all eight ran at once: {m:?}");
    assert!(d.presumed >= 2, "{d:?} {m:?}");
    common::assert_counters_add_up(&m);
}

#[test]
fn what_a_thread_does_before_its_presumed_task_is_not_charged_to_the_task() {
    let _alone = alone();
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
        teach_by_declaring(&pool, teach);
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
    common::assert_counters_add_up(&m);
}

/// Items computing at once: the most, and (reported, never asserted: a
/// wall-time figure) how long more than `limit` were.
struct Computing {
    peak: Peak,
    now: std::sync::atomic::AtomicUsize,
    limit: usize,
    over: Mutex<(Option<Instant>, Duration)>,
}

impl Computing {
    fn new(limit: usize) -> Arc<Self> {
        Arc::new(Computing {
            peak: Peak::default(),
            now: Default::default(),
            limit,
            over: Mutex::new((None, Duration::ZERO)),
        })
    }

    fn inside<R>(&self, f: impl FnOnce() -> R) -> R {
        self.peak.inside(|| {
            if self.now.fetch_add(1, Ordering::SeqCst) == self.limit {
                self.over.lock().unwrap().0 = Some(Instant::now());
            }
            let out = f();
            if self.now.fetch_sub(1, Ordering::SeqCst) == self.limit + 1 {
                let mut over = self.over.lock().unwrap();
                if let Some(since) = over.0.take() {
                    over.1 += since.elapsed();
                }
            }
            out
        })
    }

    fn most(&self) -> usize {
        self.peak.most()
    }

    fn time_over(&self) -> Duration {
        self.over.lock().unwrap().1
    }
}

/// What a counted item does.
#[derive(Clone, Copy)]
enum Work {
    /// Sleeps this long.
    Sleep(Duration),
    /// Computes this long, counted in the burst's [`Peak`].
    Compute(Duration),
    /// Sleeps 20 ms or computes 50 ms (counted), as the bit says.
    Mixed(bool),
}

/// An item of test `TEST` (one closure type per test, whatever it does)
/// that does `work`, its computing counted in `computing`.
fn counted<const TEST: usize>(work: Work, computing: Arc<Computing>) -> impl FnOnce() -> bool {
    move || match work {
        Work::Sleep(time) => {
            std::thread::sleep(time);
            true
        }
        Work::Mixed(false) => {
            std::thread::sleep(Duration::from_millis(20));
            true
        }
        Work::Compute(time) => computing.inside(|| compute_for(time)),
        Work::Mixed(true) => computing.inside(|| compute_for(Duration::from_millis(50))),
    }
}

/// Spawns `items` items of `work` at once on `pool` and joins them.
fn burst<const TEST: usize>(pool: &Pool, items: usize, work: Work, computing: &Arc<Computing>) {
    let handles: Vec<_> = (0..items)
        .map(|_| pool.spawn_fn(counted::<TEST>(work, computing.clone())))
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

/// A kind that blocked (100 items that sleep 5 ms), then computes in one
/// burst of `items` (issue #41: a burst of 60 ran 60 at once on 2 cores,
/// 60 of 60 presumptions wrong; one of 300 ran 268 at once): at most two
/// wrong guesses (the fresh cap), and never more than `concurrency + 2`
/// computing at once. Returns the peak and what happened in the burst.
fn blocked_then_computes<const TEST: usize>(items: usize, compute: Duration) -> (usize, Since) {
    within(HANG, move || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let unused = Computing::new(usize::MAX - 1);
        burst::<TEST>(&pool, 100, Work::Sleep(Duration::from_millis(5)), &unused);
        assert!(learned_to_presume(&pool, "counted"));
        // The lesson's blocked items may have raised the slots (burst
        // growth, `control::policy`): back to two, every worker parked
        // (none searching on a slot beyond them), before the burst, so the
        // count below is of what presumption adds.
        assert!(common::eventually(HANG, || {
            let m = pool.metrics();
            m.concurrency_target == 2 && m.idle_threads == m.threads
        }));
        let before = pool.metrics();
        assert!(before.blocked_detections >= 1, "{before:?}");
        let computing = Computing::new(4);
        burst::<TEST>(&pool, items, Work::Compute(compute), &computing);
        let m = pool.metrics();
        common::assert_counters_add_up(&m);
        (computing.most(), since(&before, &m))
    })
}

// (Not `presumed <= 2`: on a loaded machine an item that computes for
// 10 ms of wall time may get less than a monitor interval of CPU, which is
// no verdict, and the next is presumed in its place; never more than two
// at once. At most `concurrency + 2` computing, and one more: the quantum
// rule lends a slot once both slots computed for a quantum, if two starved
// presumed items were not judged yet.)

#[test]
fn a_kind_that_blocked_then_computes_in_a_burst_of_60_gets_at_most_two_wrong_guesses() {
    let _alone = alone();
    let (most, d) = blocked_then_computes::<20>(60, Duration::from_millis(20));
    assert!(d.failed <= 2, "{d:?}");
    assert!(most <= 2 + 2 + 1, "{most} computing at once: {d:?}");
}

#[test]
fn a_kind_that_blocked_then_computes_in_a_burst_of_300_gets_at_most_two_wrong_guesses() {
    let _alone = alone();
    let (most, d) = blocked_then_computes::<21>(300, Duration::from_millis(10));
    assert!(d.failed <= 2, "{d:?}");
    assert!(most <= 2 + 2 + 1, "{most} computing at once: {d:?}");
}

#[test]
fn a_kind_that_half_blocks_and_half_computes_is_soon_not_presumed() {
    let _alone = alone();
    let (most, over, d, m) = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let computing = Computing::new(4);
        // A fixed pseudo-random half of 200 items compute (issue #41: 5-8
        // computed at once on 2 slots).
        let mut bits = 0x2545_f491_4f6c_dd1du64;
        let mut half = || {
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            bits & 1 == 1
        };
        let before = pool.metrics();
        for _ in 0..4 {
            let handles: Vec<_> = (0..50)
                .map(|_| pool.spawn_fn(counted::<22>(Work::Mixed(half()), computing.clone())))
                .collect();
            for h in handles {
                assert!(h.join().unwrap());
            }
        }
        let m = pool.metrics();
        let over = computing.time_over();
        (computing.most(), over, since(&before, &m), m)
    });
    // Each wrong guess pauses the kind until it is seen blocking twice
    // again, and a second one ends its presumption: a few wrong guesses in
    // all, not one per computing item. (Not the peak: the monitor's burst
    // growth, which replaces blocked workers, may run more at once.)
    assert!(
        d.failed <= 6,
        "{d:?}; {most} computing at once, more than 4 for {over:?}: {m:?}"
    );
    common::assert_counters_add_up(&m);
}

#[test]
fn a_kind_that_truly_blocks_gets_a_thread_per_item_within_a_few_looks() {
    let _alone = alone();
    const ITEMS: usize = 200;
    let (met, first, second) = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let start = pool.metrics();
        let run = || {
            // Each item waits (asleep) until all of them are running.
            let rendezvous = Rendezvous::new(ITEMS);
            let items: Vec<_> = (0..ITEMS)
                .map(|_| pool.spawn_fn(item::<23>(Mode::Meet, rendezvous.clone(), HANG)))
                .collect();
            items
                .into_iter()
                .map(|i| i.join().unwrap())
                .collect::<Vec<bool>>()
        };
        let mut met = run();
        let learned = pool.metrics();
        met.extend(run());
        let m = pool.metrics();
        common::assert_counters_add_up(&m);
        (met, since(&start, &learned), since(&learned, &m))
    });
    assert!(
        met.iter().all(|&m| m),
        "all ran at once: {first:?} {second:?}"
    );
    println!("first burst {first:?}, second {second:?}");
    assert_eq!(second.failed, 0, "{second:?}");
    // Once learned, the cap doubles at each look while they all wait:
    // much of the second burst is presumed, not found blocked one by one
    // (which presumes none). How much depends on how soon the monitor's
    // looks come on 2 busy cores: 69-181 of 200 in runs alone, 67 and 94
    // while the rest of the suite ran beside it, so the bar is a quarter.
    assert!(second.presumed >= ITEMS as u64 / 4, "{first:?} {second:?}");
}
