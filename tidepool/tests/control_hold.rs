//! Holding a worker back from its block until a slot is its own
//! (`control::hold`), on real threads: items that wait, then compute
//! (fetch, then process) run about `concurrency` at a time once their
//! waits end, instead of all at once.
//!
//! What is measured is each item's own CPU time, not the wall clock: when
//! the first item finishes its computation, items held meanwhile have done
//! little of theirs. Without holding, all of them share the cores and are
//! all nearly done by then.

#![cfg(target_os = "linux")]

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidepool::Pool;

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes the live `timespec` it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

const ITEMS: usize = 16;
const WAIT: Duration = Duration::from_millis(20);
const COMPUTE: Duration = Duration::from_millis(30);

/// One batch at a time in this binary: the tests run in parallel, and a
/// batch that computes beyond the slots (holding off) starved the other's
/// slot holders, so that no task ended within the pool's patience and it
/// let every held worker go (seen once in CI).
static ONE_BATCH_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `ITEMS` items that wait, then compute, on `pool`; returns each
/// item's share of its computation done when the first item finished
/// (seen at its next step after that), and the pool's metrics.
fn fetch_then_process(pool: &Pool) -> (Vec<f64>, tidepool::Metrics) {
    fetch_then_process_n(pool, ITEMS)
}

/// [`fetch_then_process`] with `items` items.
fn fetch_then_process_n(pool: &Pool, items: usize) -> (Vec<f64>, tidepool::Metrics) {
    let _alone = ONE_BATCH_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let first_done = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Mutex::new(Vec::new()));
    let ended = Arc::new(AtomicUsize::new(0));
    for _ in 0..items {
        let (first_done, progress, ended) = (first_done.clone(), progress.clone(), ended.clone());
        pool.execute(move || {
            std::thread::sleep(WAIT);
            let start = thread_cpu();
            let mut recorded = false;
            loop {
                let done = thread_cpu() - start;
                if done >= COMPUTE {
                    break;
                }
                if !recorded && first_done.load(Ordering::Acquire) {
                    recorded = true;
                    let share = done.as_secs_f64() / COMPUTE.as_secs_f64();
                    progress.lock().unwrap().push(share);
                }
            }
            first_done.store(true, Ordering::Release);
            ended.fetch_add(1, Ordering::Release);
        })
        .unwrap();
    }
    assert!(common::eventually(HANG, || ended.load(Ordering::Acquire) == items));
    let progress = progress.lock().unwrap().clone();
    (progress, pool.metrics())
}

#[test]
fn items_back_from_their_waits_compute_about_concurrency_at_a_time() {
    let (progress, m) = within(HANG, || {
        fetch_then_process(&Pool::builder().concurrency(2).build().unwrap())
    });
    assert!(m.holds_workers, "{m:?}");
    // Held, most had done less than half of theirs when the first was
    // done; sharing the cores, all would have been past half.
    assert_held_behind(&progress, &m, ITEMS / 2);
}

/// Asserts that workers were held, and that at least `at_least` items
/// were under half of their computation when the first finished.
fn assert_held_behind(progress: &[f64], m: &tidepool::Metrics, at_least: usize) {
    assert!(m.workers_held >= 1, "nobody was held: {m:?}");
    let behind = progress.iter().filter(|&&share| share < 0.5).count();
    assert!(
        behind >= at_least,
        "{behind} of {} items under half-way when the first finished \
         ({progress:?}): {m:?}",
        progress.len()
    );
    common::assert_counters_add_up(m);
}

/// `Builder::hold_signal(false)`: nothing is held (no signal is sent), and
/// a worker back from its block is still counted against the slots.
#[test]
fn with_holding_off_workers_back_from_their_waits_are_counted_not_held() {
    let (_, m) = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .hold_signal(false)
            .build()
            .unwrap();
        fetch_then_process(&pool)
    });
    assert!(!m.holds_workers, "{m:?}");
    assert_eq!(m.workers_held, 0, "{m:?}");
    assert!(m.workers_counted_again >= 1, "{m:?}");
    common::assert_counters_add_up(&m);
}

/// A crowd back from their waits: 64 items computing at once share the
/// cores with the monitor, whose looks then come late (on 2 cores its
/// naps of a quarter millisecond took 5-40 ms, and 47-54 of 63 items were
/// under half-way when the first was done). Each worker's own CPU timer
/// holds it instead (`control::hold::on_timer`: more workers compute
/// without a slot than there are slots): 61-62 of 63.
#[test]
fn a_crowd_back_from_their_waits_is_held_without_waiting_for_the_monitor() {
    const CROWD: usize = 64;
    let (progress, m) = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        fetch_then_process_n(&pool, CROWD)
    });
    assert_held_behind(&progress, &m, CROWD * 9 / 10);
}

/// The patience (`control::hold::let_go`): a slot holder that spins on
/// what a held worker would do next waits for it without ever blocking,
/// so no task ends; the held worker is let go after a patience, and both
/// finish. Without the patience this would hang.
#[test]
fn a_holder_spinning_on_a_held_worker_is_not_stuck() {
    let m = within(HANG, || {
        let _alone = ONE_BATCH_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicUsize::new(0));
        {
            let (done, ended) = (done.clone(), ended.clone());
            // Blocks (its slot goes to the spinner), then computes long
            // enough to be held, then sets what the spinner waits for.
            pool.execute(move || {
                std::thread::sleep(WAIT);
                let start = thread_cpu();
                while thread_cpu() - start < COMPUTE {}
                done.store(true, Ordering::Release);
                ended.fetch_add(1, Ordering::Release);
            })
            .unwrap();
        }
        {
            let (done, ended) = (done.clone(), ended.clone());
            // Takes the slot while the first sleeps, and spins.
            pool.execute(move || {
                while !done.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                ended.fetch_add(1, Ordering::Release);
            })
            .unwrap();
        }
        assert!(common::eventually(HANG, || ended.load(Ordering::Acquire) == 2));
        pool.metrics()
    });
    assert!(m.workers_held >= 1, "nobody was held: {m:?}");
    common::assert_counters_add_up(&m);
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
fn own_cpus() -> Vec<usize> {
    // SAFETY: a `cpu_set_t` is plain bits; all zeroes is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes into
    // the live `set`.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0, "sched_getaffinity failed");
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below `CPU_SETSIZE`, within `set`'s bits.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Fetch, then process, with the fetch declared (`tidepool::blocking`):
/// as the call returns, its worker takes a slot back before the task runs
/// on, as a goroutine reacquires a P after a system call, also in a task
/// started presumed blocking (once the kind has handed its slots over, the
/// rest of the batch starts presumed, without slots). So at most
/// `concurrency` items process at once; before, every presumed item
/// processed beside the slots' holders (16 at once on 2 slots) until its
/// CPU timer held it. And a held worker woken on the core of the worker
/// that handed it its slot (`runtime::hold::let_go_here`) has its own CPUs
/// back before its task runs on.
#[test]
fn a_declared_wait_takes_a_slot_back_before_the_task_runs_on() {
    let m = declared_waits_then_compute(Pool::builder());
    assert!(m.holds_workers, "{m:?}");
}

/// The wait after a declared section is in the worker's own code, not in
/// the hold signal's handler: a pool built with `hold_signal(false)` still
/// takes the slot back before the task computes on (before, it counted the
/// worker beyond the slots and let it compute beside them).
#[test]
fn a_declared_wait_takes_a_slot_back_without_the_hold_signal() {
    let m = declared_waits_then_compute(Pool::builder().hold_signal(false));
    assert!(!m.holds_workers, "{m:?}");
}

/// `ITEMS` items on `builder` at concurrency 2 that each wait in
/// `tidepool::blocking`, then compute `COMPUTE` of their own CPU time:
/// asserts that no more than the slots (and one let go by the pool's
/// patience) computed at once, that somebody was held, and that every
/// task ran on with its thread's own CPUs; returns the pool's metrics.
fn declared_waits_then_compute(builder: tidepool::Builder) -> tidepool::Metrics {
    const CONCURRENCY: usize = 2;
    let (peak, cpus_seen, m) = within(HANG, move || {
        let _alone = ONE_BATCH_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pool = builder.concurrency(CONCURRENCY).build().unwrap();
        let peak = Arc::new(common::Peak::default());
        let cpus_seen = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(AtomicUsize::new(0));
        for _ in 0..ITEMS {
            let (peak, cpus_seen, ended) = (peak.clone(), cpus_seen.clone(), ended.clone());
            pool.execute(move || {
                tidepool::blocking(|| std::thread::sleep(WAIT));
                cpus_seen.lock().unwrap().push(own_cpus());
                peak.inside(|| {
                    let start = thread_cpu();
                    while thread_cpu() - start < COMPUTE {}
                });
                ended.fetch_add(1, Ordering::Release);
            })
            .unwrap();
        }
        assert!(common::eventually(HANG, || ended.load(Ordering::Acquire) == ITEMS));
        let cpus_seen = cpus_seen.lock().unwrap().clone();
        (peak.most(), cpus_seen, pool.metrics())
    });
    assert!(m.workers_held >= 1, "nobody was held: {m:?}");
    // The pool's patience may let one go beyond the slots if a slot
    // holder, preempted on a loaded machine, ends nothing for 100 ms.
    assert!(
        peak <= CONCURRENCY + 1,
        "{peak} items processed at once on {CONCURRENCY} slots: {m:?}"
    );
    let mine = own_cpus();
    assert!(
        cpus_seen.iter().all(|cpus| *cpus == mine),
        "a task ran on with CPUs other than its thread's ({mine:?}): {cpus_seen:?}"
    );
    common::assert_counters_add_up(&m);
    m
}
