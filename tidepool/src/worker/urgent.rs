//! Urgent work on a busy pool: the worker woken for it on the urgent
//! reserve slot is asked a short scheduler slice, given back after its task.

use super::start::start_thread;
use crate::control::StartReason;
use crate::runtime::park;
use crate::runtime::Shared;
use crate::sync::{Arc, Ordering};

/// [`wake_or_start_with`](super::wake_or_start_with) for the urgent reserve slot. Every slot is busy, so
/// the woken worker must take a core from a running one: the kernel does
/// that at once only for a thread whose deadline comes first, and a
/// thread's deadline is its slice away. So the parked worker popped is
/// asked a short slice (`sys::set_urgent_slice`) before it is woken, and
/// gives it back after its next task (`give_back_urgent_slice`). A thread
/// started instead (nobody parked) starts with the default slice.
pub(super) fn wake_for_urgent(shared: &Arc<Shared>) {
    let ask_short_slice = |worker: usize| {
        let entry = shared.threads.entry(worker);
        let tid = crate::sync::lock(&entry.probe).as_ref().map(|p| p.tid());
        if tid.is_some_and(|tid| crate::sys::set_urgent_slice(tid, true)) {
            entry.urgent_slice.store(true, Ordering::Relaxed);
        }
    };
    park::hand_over_with(&shared.sleepers, &shared.slots, ask_short_slice, || {
        start_thread(shared, StartReason::Demand)
    });
}

/// Gives back the short scheduler slice [`wake_for_urgent`] asked for this
/// worker's thread, if it did: a short slice means more context switches
/// whenever threads share a core. A load for every other task.
#[inline]
pub(super) fn give_back_urgent_slice(ctx: &crate::runtime::context::WorkerContext) {
    let entry = ctx.shared.threads.entry(ctx.index);
    if entry.urgent_slice.load(Ordering::Relaxed) {
        reset_slice(ctx, &entry.urgent_slice);
    }
}

/// The rare half of [`give_back_urgent_slice`], out of the task path.
#[cold]
#[inline(never)]
fn reset_slice(ctx: &crate::runtime::context::WorkerContext, flag: &std::sync::atomic::AtomicBool) {
    if flag.swap(false, Ordering::Relaxed) {
        crate::sys::set_urgent_slice(ctx.probe.tid(), false);
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use crate::sys::{current_tid, scheduler_slice};
    use crate::{Pool, Priority};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const HANG: Duration = Duration::from_secs(30);

    fn eventually(mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + HANG;
        while !done() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[test]
    fn a_worker_woken_for_urgent_work_runs_it_on_a_short_slice_then_gives_it_back() {
        let Some(default) = scheduler_slice(current_tid()) else {
            return; // Off Linux: no slices.
        };
        if default.is_zero() {
            return; // A kernel before 6.12 has no custom slices.
        }
        let pool = Pool::builder().concurrency(1).build().unwrap();
        // The spare thread the pool starts at build is parked.
        assert!(eventually(|| pool.metrics().idle_threads >= 1));
        let (started, release) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let holder = {
            let (started, release) = (started.clone(), release.clone());
            pool.spawn_fn(move || {
                started.store(true, Ordering::SeqCst);
                let deadline = Instant::now() + HANG;
                while !release.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::thread::yield_now();
                }
            })
        };
        assert!(eventually(|| started.load(Ordering::SeqCst)));
        // Every slot busy: the urgent task borrows the reserve slot, and the
        // parked worker woken for it is asked a short slice first.
        let urgent = pool.task().priority(Priority::High).spawn_fn(|| {
            let tid = current_tid();
            (tid, scheduler_slice(tid))
        });
        let (tid, slice) = urgent.join().unwrap();
        release.store(true, Ordering::SeqCst);
        holder.join().unwrap();
        assert_eq!(slice, Some(Duration::from_micros(100)));
        assert!(
            eventually(|| scheduler_slice(tid) == Some(default)),
            "the default slice again after the task: {:?}",
            scheduler_slice(tid)
        );
        let m = pool.metrics();
        assert!(m.reserve_slot_lends >= 1, "{m:?}");
    }
}
