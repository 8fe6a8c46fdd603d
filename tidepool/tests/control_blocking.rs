//! Concurrency control on real threads: workers blocked in a sleep, on a
//! lock or on a pipe are detected and replaced; CPU-bound workers never are.
//!
//! Each blocking test uses a pool with one running slot: a task `A` blocks
//! until a task `B`, spawned after it, has run. Without compensation `B`
//! could only run after `A` — which waits for `B` — so the test would hang
//! (caught by the generous `within` bound, never by a tight timing).

mod common;

use common::{within, HANG};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tidepool::{Controller, Pool, Priority};

fn one_slot_pool() -> Pool {
    Pool::builder().concurrency(1).build().unwrap()
}

/// Spawns `B`, which tells `ran_b`, and waits for it.
fn b_runs_while_a_blocks(pool: &Pool) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    drop(pool.spawn_fn(move || tx.send(()).unwrap()));
    rx
}

/// `A` blocks on a channel that the test feeds only after `B` ran. Each
/// `K` is a kind of its own: what the pool learns about one (`A` blocks, so
/// the next `A` starts presumed blocking, without the monitor) does not
/// carry to another, so each call with a new `K` tests the monitor.
fn a_waits_on_a_channel_until_b_ran<const K: usize>(pool: &Pool) {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let a = pool.spawn_fn(move || release_rx.recv_timeout(HANG).is_ok());
    b_runs_while_a_blocks(pool).recv().unwrap();
    release_tx.send(()).unwrap();
    assert!(a.join().unwrap(), "A was released by the test");
}

#[test]
fn a_worker_asleep_is_replaced() {
    within(HANG, || {
        // Without the quantum rule, whose lent slot would also let `B` run
        // (after a quantum) when `A`, woken from each short sleep onto
        // cores other processes hold, is caught runnable: then `B` ran
        // without a blocked detection (1 of 25 runs beside two CPU
        // spinners). Here only the monitor's detection can run `B`.
        let pool = Pool::builder()
            .concurrency(1)
            .quantum(None)
            .build()
            .unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let r = release.clone();
        let a = pool.spawn_fn(move || {
            let start = Instant::now();
            while !r.load(Ordering::SeqCst) && start.elapsed() < HANG {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        b_runs_while_a_blocks(&pool).recv().unwrap();
        release.store(true, Ordering::SeqCst);
        a.join().unwrap();
        let m = pool.metrics();
        assert!(m.blocked_detections >= 1, "{m:?}");
        assert!(m.peak_threads >= 2, "{m:?}");
    });
}

/// The monitor sleeps until woken while the pool is idle; the worker that
/// starts the next task must wake it, or a blocked task on a pool that was
/// idle would never be noticed. Each round lets the pool go idle first.
#[test]
fn a_blocked_task_on_a_pool_that_was_idle_is_replaced() {
    within(HANG, || {
        let pool = one_slot_pool();
        let rounds: [fn(&Pool); 3] = [
            a_waits_on_a_channel_until_b_ran::<1>,
            a_waits_on_a_channel_until_b_ran::<2>,
            a_waits_on_a_channel_until_b_ran::<3>,
        ];
        for (round, a_waits_until_b_ran) in (1..).zip(rounds) {
            // Long enough for the workers to park and the monitor to find the
            // pool idle (it checks every few ms at most when nothing runs).
            std::thread::sleep(Duration::from_millis(100));
            a_waits_until_b_ran(&pool);
            let m = pool.metrics();
            assert!(m.blocked_detections >= round, "round {round}: {m:?}");
        }
    });
}

/// A monitor interval above the monitor's longest idle-free sleep (10 ms) is
/// valid input; the monitor once panicked on it and blocked workers were
/// never replaced.
#[test]
fn a_long_monitor_interval_still_replaces_blocked_workers() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .monitor_interval(Duration::from_millis(50))
            .build()
            .unwrap();
        a_waits_on_a_channel_until_b_ran::<4>(&pool);
        let m = pool.metrics();
        assert!(m.blocked_detections >= 1, "{m:?}");
    });
}

#[test]
fn a_worker_waiting_on_a_mutex_is_replaced() {
    within(HANG, || {
        let pool = one_slot_pool();
        let lock = Arc::new(Mutex::new(0u32));
        let held = lock.lock().unwrap();
        let l = lock.clone();
        let a = pool.spawn_fn(move || *l.lock().unwrap() += 1);
        b_runs_while_a_blocks(&pool).recv().unwrap();
        drop(held);
        a.join().unwrap();
        assert_eq!(*lock.lock().unwrap(), 1);
        assert!(pool.metrics().blocked_detections >= 1);
    });
}

#[test]
fn a_worker_reading_a_pipe_is_replaced() {
    within(HANG, || {
        let pool = one_slot_pool();
        let (mut writer, mut reader) = UnixStream::pair().unwrap();
        let a = pool.spawn_fn(move || {
            let mut byte = [0u8; 1];
            reader.read_exact(&mut byte).unwrap();
            byte[0]
        });
        b_runs_while_a_blocks(&pool).recv().unwrap();
        writer.write_all(&[42]).unwrap();
        assert_eq!(a.join().unwrap(), 42);
        assert!(pool.metrics().blocked_detections >= 1);
    });
}

#[test]
fn a_declared_section_still_inside_after_its_grace_hands_its_slot_over() {
    within(HANG, || {
        let pool = one_slot_pool();
        // The section spins: the kernel sees a thread that computes and
        // would never call it blocked. Only the declaration can free the
        // slot, once the section outlasts its grace.
        let (go, went) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let a = pool.spawn_fn({
            let go = go.clone();
            move || {
                tidepool::blocking(|| {
                    while !go.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                })
            }
        });
        let b = pool.spawn_fn({
            let went = went.clone();
            move || went.store(true, Ordering::SeqCst)
        });
        b.join().unwrap();
        assert!(went.load(Ordering::SeqCst));
        go.store(true, Ordering::SeqCst);
        a.join().unwrap();
        let m = pool.metrics();
        assert!(m.declared_blocking >= 1, "{m:?}");
    });
}

#[test]
fn a_declared_section_that_returns_after_its_hand_over_takes_a_slot_again_at_once() {
    within(HANG, || {
        let pool = one_slot_pool();
        let (ran_b, b_ran) = mpsc::channel::<()>();
        let a = pool.spawn_fn({
            let pool = pool.clone();
            move || {
                // Asleep in the section until `B` ran, which it can only
                // once the monitor handed `A`'s slot over.
                tidepool::blocking(|| b_ran.recv_timeout(HANG).is_ok());
                // Read before anything else: the monitor would count a
                // worker that computes again only at a later look. It took
                // the free slot, or (B still running) waited, held, until
                // B's end handed it B's.
                let m = pool.metrics();
                m.workers_counted_again + m.workers_held
            }
        });
        drop(pool.spawn_fn(move || ran_b.send(()).unwrap()));
        let took_a_slot = a.join().unwrap();
        let m = pool.metrics();
        assert!(m.declared_blocking >= 1, "{m:?}");
        assert!(
            took_a_slot >= 1,
            "the section's end took no slot back (counted or held): {m:?}"
        );
    });
}

#[test]
fn quick_declared_sections_move_no_slot_and_start_no_thread() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let before = pool.metrics();
        let items: Vec<_> = (0..2_000u64)
            .map(|i| pool.spawn_fn(move || tidepool::blocking(|| std::hint::black_box(i) + 1)))
            .collect();
        for (i, item) in items.into_iter().enumerate() {
            assert_eq!(item.join().unwrap(), i as u64 + 1);
        }
        let m = pool.metrics();
        // Each section ends long before the monitor's second look. Slack
        // for a worker the scheduler took off its core inside a section
        // for a whole interval (a shared CI machine).
        assert!(
            m.declared_blocking <= 3,
            "quick sections handed their slots over: {m:?}"
        );
        assert!(
            m.threads_started - before.threads_started <= 3,
            "quick sections started threads: {m:?}"
        );
    });
}

#[test]
fn nested_joins_do_not_deadlock_a_small_pool() {
    // Each of 200 tasks joins a task spawned after it. On a fixed pool of two
    // threads this deadlocks; here each join gives its slot up.
    fn chain(pool: Pool, depth: usize) -> usize {
        if depth == 0 {
            return 0;
        }
        let inner = pool.clone();
        pool.spawn_fn(move || chain(inner, depth - 1))
            .join()
            .unwrap()
            + 1
    }
    let depth = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let p = pool.clone();
        pool.spawn_fn(move || chain(p, 200)).join().unwrap()
    });
    assert_eq!(depth, 200);
}

#[test]
fn a_cpu_bound_worker_is_never_counted_blocked() {
    within(HANG, || {
        let pool = one_slot_pool();
        let spins = Arc::new(AtomicUsize::new(0));
        let s = spins.clone();
        let spinner = pool.spawn_fn(move || {
            // ~200 ms of pure computation: hundreds of monitor intervals.
            let start = Instant::now();
            let mut x = 1u64;
            while start.elapsed() < Duration::from_millis(200) {
                for _ in 0..10_000 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                s.fetch_add(1, Ordering::Relaxed);
            }
            x
        });
        // Work is queued the whole time, so a false "blocked" would add a thread.
        let queued = pool.spawn_fn(|| ());
        spinner.join().unwrap();
        queued.join().unwrap();
        let m = pool.metrics();
        assert!(spins.load(Ordering::Relaxed) > 0);
        assert_eq!(m.blocked_detections, 0, "{m:?}");
        // No thread beyond those started at build (the slots and one spare).
        assert_eq!(m.threads_started, m.threads_started_floor, "{m:?}");
    });
}

#[test]
fn running_workers_never_exceed_the_slots_under_cpu_load() {
    within(HANG, || {
        // The default quantum: once the jobs have held both slots for a
        // quantum, a slot is lent to the queued jobs, and the worker that
        // takes it finds a job of a kind known to compute and gives it back
        // without running it.
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..6)
            .map(|_| {
                let (running, most) = (running.clone(), most.clone());
                pool.spawn_fn(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let start = Instant::now();
                    let mut x = 0u64;
                    while start.elapsed() < Duration::from_millis(50) {
                        x = x.wrapping_add(1);
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    x
                })
            })
            .collect();
        for job in jobs {
            job.join().unwrap();
        }
        let m = pool.metrics();
        assert!(most.load(Ordering::SeqCst) <= 2, "{m:?}");
        assert_eq!(m.blocked_detections, 0, "{m:?}");
        assert_eq!(m.threads_started, m.threads_started_floor, "{m:?}");
        // The lent slot counts as running while its worker (woken on a
        // busy machine: it waits for a core) has not yet given it back: 4
        // of 30 runs sampled that moment (control_blocking's quantum-off
        // test checks the slots alone).
        assert!(
            m.thread_series.iter().all(|s| s.running <= 3),
            "{:?}",
            m.thread_series
        );
    });
}

#[test]
fn a_fixed_pool_never_adds_a_thread() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .controller(Controller::Fixed)
            .build()
            .unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let a = pool.spawn_fn(move || {
            std::thread::sleep(Duration::from_millis(100));
            o.lock().unwrap().push("a");
        });
        let o = order.clone();
        let b = pool.spawn_fn(move || o.lock().unwrap().push("b"));
        a.join().unwrap();
        b.join().unwrap();
        // B had to wait for A: nobody replaced the sleeping worker.
        assert_eq!(*order.lock().unwrap(), vec!["a", "b"]);
        let m = pool.metrics();
        assert_eq!(m.peak_threads, 1);
        assert_eq!(m.blocked_detections, 0);
    });
}

#[test]
fn a_returning_blocked_worker_gives_way_when_slots_are_full() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .idle_timeout(Duration::from_millis(20))
            .min_threads(1)
            .build()
            .unwrap();
        // Block several workers at once, with work queued, then release them:
        // the pool is over its one slot and must shrink back.
        let release = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let r = release.clone();
                pool.spawn_fn(move || {
                    while !r.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                })
            })
            .collect();
        assert!(common::eventually(HANG, || pool.metrics().peak_threads >= 4));
        release.store(true, Ordering::SeqCst);
        for h in handles {
            h.join().unwrap();
        }
        assert!(
            common::eventually(HANG, || pool.metrics().threads == 1),
            "{:?}",
            pool.metrics()
        );
        let m = pool.metrics();
        assert!(m.running_threads <= 1, "{m:?}");
    });
}

#[test]
fn a_burst_of_blocking_work_grows_in_proportion() {
    const ITEMS: usize = 200;
    const SLOTS: usize = 4;
    let (peak_in_flight, m) = within(HANG, || {
        // 200 items submitted at once on 4 slots, each blocked until all
        // 200 are in flight (or 30 s: then the peak assertion fails). One
        // replacement per blocked worker and tick adds at most a thread per
        // slot per tick; growing in proportion (doubling while every new
        // worker blocks, or presumed-blocking hand-offs) adds more. Judged
        // by the monitor's own ticks, not by how many items were in flight
        // after 500 ms (the items used to sleep 500 ms each): on a loaded
        // machine threads start late, the first items could end before the
        // last started, and the peak fell short of 150 in about 3 of 8
        // loaded runs whatever the policy did.
        let pool = Pool::builder().concurrency(SLOTS).build().unwrap();
        let in_flight = Arc::new((Mutex::new(0usize), std::sync::Condvar::new()));
        let peak = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..ITEMS)
            .map(|_| {
                let (in_flight, peak) = (in_flight.clone(), peak.clone());
                pool.spawn_fn(move || {
                    let (count, all_in) = &*in_flight;
                    let mut now = count.lock().unwrap();
                    *now += 1;
                    peak.fetch_max(*now, Ordering::SeqCst);
                    all_in.notify_all();
                    let (mut now, _) = all_in
                        .wait_timeout_while(now, Duration::from_secs(30), |n| *n < ITEMS)
                        .unwrap();
                    *now -= 1;
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        (peak.load(Ordering::SeqCst), pool.metrics())
    });
    assert_eq!(peak_in_flight, ITEMS, "{m:?}");
    // In proportion: at some tick the monitor counted more workers blocked
    // than at the tick before plus one per slot, which one replacement per
    // blocked worker and tick cannot do (only workers holding a slot are
    // found blocked and replaced, and a tick finds each once).
    let most_added = m
        .thread_series
        .windows(2)
        .map(|w| w[1].blocked.saturating_sub(w[0].blocked))
        .max();
    assert!(
        most_added.is_some_and(|added| added > SLOTS),
        "blocked workers grew by {most_added:?} per tick at most: {m:?}"
    );
    // The growth: burst starts from the monitor, or, once it found the
    // first items blocked, presumed-blocking hand-offs from the workers
    // (the kind is then known to block).
    assert!(
        m.threads_started_burst + m.threads_started_presumed > 0,
        "{m:?}"
    );
    // No runaway growth: about one thread per item in flight, plus the
    // slots' workers. Now that every item stays in flight until all are,
    // threads are never freed by items that ended, and a few started in
    // the same moment for the same queued items by the burst and by
    // presumed-blocking hand-offs (the burst stands aside only from the
    // tick after) stay alive too. Locally 200-203 (70 runs, debug, some
    // with the cores loaded), 208 in 1 of 20 loaded release runs; CI (2
    // cores, debug, a neighbouring test) once went past 209, so the bound
    // is a tenth over the items. A burst that started threads for work
    // already taken (25 idle of 225 before it stood aside for presumed
    // hand-offs) still fails it.
    assert!(
        m.peak_threads <= ITEMS + ITEMS / 10,
        "{} threads for {ITEMS} items: {m:?}",
        m.peak_threads
    );
    assert_eq!(
        m.threads_started,
        m.threads_started_demand
            + m.threads_started_compensation
            + m.threads_started_policy
            + m.threads_started_burst
            + m.threads_started_floor
            + m.threads_started_quantum
            + m.threads_started_presumed
            + m.threads_started_spare
    );
}

#[test]
fn a_cpu_bound_burst_never_starts_threads_beyond_concurrency() {
    let m = within(HANG, || {
        // No quantum: its lent slot counts as running until the worker
        // woken for it runs and gives it back (see the test above), and
        // this one checks that nothing else ever runs a third worker.
        let pool = Pool::builder()
            .concurrency(2)
            .quantum(None)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..40)
            .map(|_| {
                pool.spawn_fn(|| {
                    // About 20 ms of computation each.
                    let start = Instant::now();
                    let mut x = 1u64;
                    while start.elapsed() < Duration::from_millis(20) {
                        for _ in 0..1_000 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        }
                    }
                    x
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        pool.metrics()
    });
    assert_eq!(m.threads_started_burst, 0, "{m:?}");
    assert_eq!(m.threads_started_compensation, 0, "{m:?}");
    // No thread beyond those started at build (the slots and one spare),
    // and never more than the slots running.
    assert_eq!(m.threads_started, m.threads_started_floor, "{m:?}");
    assert!(m.thread_series.iter().all(|s| s.running <= 2), "{m:?}");
}

/// Every thread up to `max_threads` blocked while work waits: the pool says
/// it is stuck, once, and says so no more when a blocked task returns.
#[test]
fn a_pool_with_every_thread_blocked_says_it_is_stuck() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(2)
            .build()
            .unwrap();
        let blockers: Vec<_> = (0..2)
            .map(|_| {
                let (release, released) = mpsc::channel::<()>();
                let task = pool.spawn_fn(move || released.recv_timeout(HANG).is_ok());
                (release, task)
            })
            .collect();
        // Both blocked (the second on the thread started to replace the
        // first), then the work that has no thread left to run it.
        assert!(common::eventually(HANG, || pool.metrics().blocked_threads == 2));
        let queued = pool.spawn_fn(|| 3);
        let stuck = common::eventually(HANG, || {
            let m = pool.metrics();
            m.stuck && m.stuck_episodes == 1
        });
        let m = pool.metrics();
        assert!(stuck, "{m:?}");
        assert_eq!((m.threads, m.blocked_threads, m.queued), (2, 2, 1), "{m:?}");
        assert!(!queued.is_finished());

        for (release, task) in blockers {
            release.send(()).unwrap();
            assert!(task.join().unwrap(), "released by the test");
        }
        assert_eq!(queued.join().unwrap(), 3);
        assert!(common::eventually(HANG, || !pool.metrics().stuck));
        assert_eq!(pool.metrics().stuck_episodes, 1);
    });
}

/// Blocked workers below `max_threads`, or a pool at `max_threads` with
/// nothing queued, are not stuck.
#[test]
fn a_pool_with_room_to_grow_is_not_stuck() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(3)
            .build()
            .unwrap();
        let (release, released) = mpsc::channel::<()>();
        let blocker = pool.spawn_fn(move || released.recv_timeout(HANG).is_ok());
        // Work keeps coming while the blocker blocks: it runs.
        for i in 0..20 {
            assert_eq!(pool.spawn_fn(move || i).join().unwrap(), i);
            std::thread::sleep(Duration::from_millis(2));
        }
        release.send(()).unwrap();
        assert!(blocker.join().unwrap());
        let m = pool.metrics();
        assert!(m.blocked_detections >= 1, "{m:?}");
        assert_eq!((m.stuck, m.stuck_episodes), (false, 0), "{m:?}");
    });
}

/// Spins for up to `limit`, or until `stop()`; returns whether `stop()` did it.
fn compute_until(limit: Duration, stop: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < limit {
        for _ in 0..1_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        if stop() {
            return true;
        }
    }
    false
}

/// How the items of [`items_behind_computing_tasks`] are spawned.
#[derive(Clone, Copy)]
enum Items {
    /// `Pool::spawn_fn`: the normal lane.
    Plain,
    /// With `Priority::Low`: the low lane.
    Low,
    /// Through a group: the normal lane's admitted FIFO.
    Grouped,
}

/// When the items of [`items_behind_computing_tasks`] are spawned.
#[derive(Clone, Copy)]
enum Spawn {
    /// Once every CPU task runs: queued behind them.
    BehindRunningTasks,
    /// Once a lend was offered and is over (refused: only computing tasks
    /// were queued then), so that the items need a lend offered again.
    AfterARefusedLend,
}

/// The time of the monitor's latest look, its last point of the thread
/// series (the monitor records one at the end of each tick while the
/// pool is busy).
fn last_look(pool: &Pool) -> Option<Duration> {
    pool.metrics().thread_series.last().map(|point| point.at)
}

/// Waits until the monitor has ended a tick it began after this call: what
/// it decided in the tick under way when called is then all carried out.
fn a_whole_monitor_tick(pool: &Pool) -> bool {
    let before = last_look(pool);
    // Two new points: the first may end the tick already under way.
    let after_one = common::eventually(HANG, || last_look(pool) > before);
    let one = last_look(pool);
    after_one && common::eventually(HANG, || last_look(pool) > one)
}

/// Waits until the quantum rule has lent a slot and every lend so far is
/// over; returns how many there were, or `None` after `HANG`. A lend is
/// counted before its tick raises the target, so one snapshot with the
/// target at the slots does not say the lend is over: the target must still
/// be there a whole tick later, with no lend counted since.
fn lends_offered_and_over(pool: &Pool) -> Option<u64> {
    let deadline = Instant::now() + HANG;
    while Instant::now() < deadline {
        let first = pool.metrics();
        if first.quantum_lends >= 1 && first.concurrency_target == first.concurrency {
            if !a_whole_monitor_tick(pool) {
                return None;
            }
            let then = pool.metrics();
            if then.quantum_lends == first.quantum_lends
                && then.concurrency_target == then.concurrency
            {
                return Some(then.quantum_lends);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

/// On a 2-slot pool, `hogs` CPU-bound tasks that run until the items are
/// done (a lent slot ran them) or for 20 s (the items waited for them);
/// spawned `when` says, `items` items spawned as `how` says that each
/// sleep `item_sleep`. Returns whether every CPU task was ended by the
/// items, and the pool's metrics.
///
/// Each `K` makes the items a kind of their own: items of a kind another
/// test's items taught to block (10 ms sleeps) are presumed blocking and
/// start on a thread of their own, with no lend at all (seen once the test
/// checked which lend ran them: `presumed_blocking: 3`, `quantum_lends: 1`).
fn items_behind_computing_tasks<const K: usize>(
    hogs: usize,
    when: Spawn,
    items: usize,
    item_sleep: Duration,
    how: Items,
) -> (bool, tidepool::Metrics) {
    within(HANG, move || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let items_done = Arc::new(AtomicUsize::new(0));
        let hogs_running = Arc::new(AtomicUsize::new(0));
        let hogs: Vec<_> = (0..hogs)
            .map(|_| {
                let (items_done, hogs_running) = (items_done.clone(), hogs_running.clone());
                pool.spawn_fn(move || {
                    hogs_running.fetch_add(1, Ordering::SeqCst);
                    compute_until(Duration::from_secs(20), || {
                        items_done.load(Ordering::SeqCst) == items
                    })
                })
            })
            .collect();
        // Events, not a settling sleep: on a loaded machine the monitor may
        // find the CPU tasks computing for a quantum only after a fixed
        // sleep (100 ms) is over, and a first lend that finds the items
        // queued is not refused, so no lend is offered again.
        let lends_before_items = match when {
            Spawn::BehindRunningTasks => {
                let running = hogs.len().min(2);
                let ready =
                    common::eventually(HANG, || hogs_running.load(Ordering::SeqCst) == running);
                assert!(ready, "{:?}", pool.metrics());
                None
            }
            Spawn::AfterARefusedLend => {
                let lends = lends_offered_and_over(&pool);
                assert!(lends.is_some(), "no lend over: {:?}", pool.metrics());
                lends
            }
        };
        let group = pool.group().build().unwrap();
        let items: Vec<_> = (0..items)
            .map(|_| {
                let items_done = items_done.clone();
                let item = move || {
                    std::thread::sleep(item_sleep);
                    items_done.fetch_add(1, Ordering::SeqCst);
                };
                match how {
                    Items::Plain => pool.spawn_fn(item),
                    Items::Low => pool.task().priority(Priority::Low).spawn_fn(item),
                    Items::Grouped => group.spawn_fn(item),
                }
            })
            .collect();
        for item in items {
            item.join().unwrap();
        }
        // CPU tasks queued behind the items see them done at once.
        let ended: Vec<bool> = hogs.into_iter().map(|h| h.join().unwrap()).collect();
        let m = pool.metrics();
        if let Some(before) = lends_before_items {
            assert!(
                m.quantum_lends > before,
                "the items' lend is one offered after the others were over: {m:?}"
            );
        }
        (ended.iter().all(|e| *e), m)
    })
}

/// The quantum rule: CPU-bound tasks hold every slot, and blocking items
/// queued behind them start anyway (a slot is lent), long before the CPU
/// tasks end. Without the quantum they would wait for a CPU task to end.
#[test]
fn queued_work_starts_behind_computing_tasks_after_the_quantum() {
    let (ended_by_items, m) = items_behind_computing_tasks::<1>(
        2,
        Spawn::BehindRunningTasks,
        5,
        Duration::from_millis(10),
        Items::Plain,
    );
    assert!(ended_by_items, "the items waited for the CPU tasks: {m:?}");
    assert!(m.quantum_lends >= 1, "{m:?}");
}

/// More CPU-bound tasks than slots: those queued are of a kind seen
/// computing, so the lent slot refuses them, and must look past them for
/// the items queued behind. The items are spawned once a lend was offered
/// and is over (refused: only computing tasks were queued then), so a
/// refused lend must be offered again. Before both fixes the items waited
/// for the CPU tasks to end (20 s here). Low-priority items and a group's
/// items too, in FIFOs of their own (a first fix looked through the normal
/// lane only).
#[test]
fn work_queued_behind_more_computing_tasks_than_slots_starts_after_the_quantum() {
    for how in [Items::Plain, Items::Low, Items::Grouped] {
        let (ended_by_items, m) =
            items_behind_computing_tasks::<2>(5, Spawn::AfterARefusedLend, 3, Duration::ZERO, how);
        assert!(ended_by_items, "the items waited for the CPU tasks: {m:?}");
        assert!(m.quantum_lends >= 2, "offered again after a refusal: {m:?}");
        assert_eq!(m.presumed_blocking, 0, "a lend ran the items: {m:?}");
        assert_eq!(m.completed, 8, "{m:?}");
    }
}

/// Looking past computing jobs keeps their order: the lent slot runs the
/// item queued behind them, and the jobs then start in the order they were
/// spawned (a pass that moved each to the back as it was seen would have
/// turned them around). The jobs are spawned once job 0 runs, so all of
/// them wait in the pool's lane (none in a worker's deque, whose items no
/// pass looks at), and start once the lend is over: the order a pass keeps
/// is the lane's, and workers taking from the lane meanwhile may start
/// jobs out of it, as any two workers may (the pool's FIFO order is only
/// as strict as its batches).
#[test]
fn the_lent_slot_keeps_computing_jobs_in_their_order() {
    let (order, m) = within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let item_done = Arc::new(AtomicUsize::new(0));
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (running_tx, running_rx) = std::sync::mpsc::channel();
        // One closure type, so one kind: job 0 says it runs and computes
        // until the item has run and the lend is over (the lent worker
        // refused the next job: target back at one slot), so that the jobs
        // then start one at a time, from the lane; the others record when
        // they start.
        let job = |id: usize| {
            let (item_done, order) = (item_done.clone(), order.clone());
            let running = running_tx.clone();
            let pool = pool.clone();
            move || {
                if id == 0 {
                    running.send(()).unwrap();
                    compute_until(Duration::from_secs(20), || {
                        item_done.load(Ordering::SeqCst) == 1
                            && pool.metrics().concurrency_target == 1
                    });
                } else {
                    order.lock().unwrap().push(id);
                }
            }
        };
        let mut jobs = vec![pool.spawn_fn(job(0))];
        running_rx.recv().unwrap();
        // The item among the jobs: the lent worker takes a batch from the
        // lane, which may hold the item, and the jobs it put back before
        // it must not end up behind the rest.
        jobs.extend((1..3).map(|id| pool.spawn_fn(job(id))));
        let done = item_done.clone();
        let item = pool.spawn_fn(move || {
            done.fetch_add(1, Ordering::SeqCst);
        });
        jobs.extend((3..9).map(|id| pool.spawn_fn(job(id))));
        item.join().unwrap();
        for job in jobs {
            job.join().unwrap();
        }
        let order = order.lock().unwrap().clone();
        (order, pool.metrics())
    });
    assert_eq!(order, [1, 2, 3, 4, 5, 6, 7, 8], "{m:?}");
    assert!(m.quantum_lends >= 1, "{m:?}");
}

/// With the quantum on (the default), CPU-bound jobs of one kind still run
/// `concurrency` at a time: the lent slot is refused for a kind seen
/// computing for a quantum.
#[test]
fn computing_jobs_never_get_the_lent_slot() {
    let (most, m) = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..8)
            .map(|_| {
                let (running, most) = (running.clone(), most.clone());
                pool.spawn_fn(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    compute_until(Duration::from_millis(60), || false);
                    running.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for job in jobs {
            job.join().unwrap();
        }
        (most.load(Ordering::SeqCst), pool.metrics())
    });
    assert!(most <= 2, "{most} jobs ran at once: {m:?}");
    assert_eq!(m.blocked_detections, 0, "{m:?}");
}

/// Keeps the worker that runs it busy with local work: each link spawns
/// the next (onto this worker's own deque) until `stop` is set, so the
/// worker never runs out of work and never steals.
fn busy_chain(stop: Arc<AtomicBool>) {
    if !stop.load(Ordering::SeqCst) {
        drop(tidepool::spawn_fn(move || busy_chain(stop)));
    }
}

#[test]
fn what_a_worker_queued_runs_after_it_gives_its_slot_away() {
    within(HANG, || {
        let pool = one_slot_pool();
        let stop = Arc::new(AtomicBool::new(false));
        let (started_tx, started) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        let blocker = pool.spawn_fn({
            let stop = stop.clone();
            move || {
                // Queued on this worker's own deque.
                drop(tidepool::spawn_fn(move || {
                    stop.store(true, Ordering::SeqCst)
                }));
                started_tx.send(()).unwrap();
                // Blocks: its slot goes to another worker.
                released.recv_timeout(HANG).unwrap();
            }
        });
        started.recv().unwrap();
        // The worker that takes the slot finds this on the lane, and keeps
        // busy with local work until the child ran: it never steals.
        let chain = pool.spawn_fn({
            let stop = stop.clone();
            move || busy_chain(stop)
        });
        // Let the monitor find the blocker and hand its slot over, then
        // end the block: its worker finds no free slot and gives way. The
        // child must not stay on its deque, where no busy worker looks.
        while pool.metrics().blocked_detections == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        release.send(()).unwrap();
        blocker.join().unwrap();
        chain.join().unwrap();
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// Keeps a core busy for `time`.
fn spin_for(time: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

#[test]
fn a_worker_back_from_its_block_counts_against_the_slots_again() {
    // Within `HANG`, so that a step that never comes fails its assertion.
    const WAIT: Duration = Duration::from_secs(20);
    within(HANG, || {
        // No quantum: its lends to queued work behind long computations
        // would start C on purpose.
        let pool = Pool::builder()
            .concurrency(1)
            .quantum(None)
            .build()
            .unwrap();
        let (a_done, b_done) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (a_started_tx, a_started) = mpsc::channel::<()>();
        let (b_started_tx, b_started) = mpsc::channel::<()>();
        // A blocks until B runs (only the monitor's detection can give B
        // A's slot), then computes: back from its block, it is counted
        // again, so when B ends no new task starts beside A on the pool's
        // one slot. Each step waits for the one before, not for a sleep to
        // be long enough: with A asleep 30 ms and B computing 300 ms, the
        // monitor, probing a sleeper less and less often and starved of a
        // core, had not always counted A again when B ended.
        let a = pool.spawn_fn({
            let (a_done, b_done) = (a_done.clone(), b_done.clone());
            move || {
                a_started_tx.send(()).unwrap();
                let b_ran = b_started.recv_timeout(WAIT).is_ok();
                compute_until(WAIT, || b_done.load(Ordering::SeqCst));
                // The time in which C, were A not counted, would start on
                // B's worker beside A (it does at once): how long the test
                // watches, not a bound on the pool's speed.
                spin_for(Duration::from_millis(300));
                a_done.store(true, Ordering::SeqCst);
                b_ran
            }
        });
        a_started.recv().unwrap();
        let b = pool.spawn_fn({
            let (pool, b_done) = (pool.clone(), b_done.clone());
            move || {
                b_started_tx.send(()).unwrap();
                // Computes (asleep, B would be found blocked and its slot
                // handed to C) until the monitor counted A again, and until
                // its next point of the thread series: the tick that
                // counted A again has then also raised the flag that makes
                // B's worker give its slot back at B's end (the count is
                // bumped first, the point recorded last).
                let counted = compute_until(WAIT, || pool.metrics().workers_counted_again >= 1);
                let seen = last_look(&pool);
                let ticked = compute_until(WAIT, || last_look(&pool) > seen);
                b_done.store(true, Ordering::SeqCst);
                counted && ticked
            }
        });
        let c = pool.spawn_fn({
            let a_done = a_done.clone();
            move || a_done.load(Ordering::SeqCst)
        });
        assert!(a.join().unwrap(), "B ran while A blocked");
        assert!(
            b.join().unwrap(),
            "A was counted again while B ran: {:?}",
            pool.metrics()
        );
        let c_started_after_a = c.join().unwrap();
        let m = pool.metrics();
        assert!(m.workers_counted_again >= 1, "{m:?}");
        assert!(
            c_started_after_a,
            "C started beside A, which had come back from its block: {m:?}"
        );
    });
}
