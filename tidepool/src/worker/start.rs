//! Thread starts: a worker thread started for demand, a policy, the floor,
//! a presumed task or a spare, and whether a spawn can run at all.

use super::{run, Begin};
use crate::control::StartReason;
use crate::metrics::ThreadCounters;
use crate::runtime::park;
use crate::runtime::task::Runnable;
use crate::runtime::{Shared, StartFailure};
use crate::sync::{Arc, Ordering};
use crate::trace;
use std::time::{Duration, Instant};

/// Starts `shared.config.min_threads` workers at build, so the threads a
/// pool keeps anyway are there before the first task (a burst wakes them
/// instead of starting them). Each starts as a searcher with a slot, finds
/// nothing and parks by the ordinary protocol (`runtime::park`), so no
/// wake-up can be lost meanwhile; with more threads than slots, a start
/// waits for an earlier one to park (within a bound, past which the rest is
/// left to demand, as is a refused start).
pub(crate) fn start_floor(shared: &Arc<Shared>) {
    let deadline = Instant::now() + FLOOR_START_BOUND;
    for _ in 0..shared.config.min_threads {
        while !shared.slots.try_acquire(true) {
            if Instant::now() >= deadline {
                return;
            }
            std::thread::yield_now();
        }
        if !start_thread(shared, StartReason::Floor) {
            shared.slots.release_searching();
            return;
        }
    }
}

/// How long `start_floor` waits for slots in all: starting a thread and
/// seeing it park takes tens of microseconds, so even thousands of
/// `min_threads` start well within it.
const FLOOR_START_BOUND: Duration = Duration::from_secs(1);

/// Starts a worker thread that begins as a searcher, using the caller's
/// reservation. Returns false if `max_threads` are running or the OS
/// refused the thread.
pub(super) fn start_thread(shared: &Arc<Shared>, reason: StartReason) -> bool {
    start_thread_for(shared, reason, Start::Searching)
}

/// A task handed to a thread being started, in a cell the starter can take
/// it back from if the start is refused (`std` drops the thread's closure,
/// and a `Runnable` dropped unrun would cancel its task).
type FirstTask = Arc<crate::sync::Mutex<Option<Runnable>>>;

/// How a thread [`start_thread_for`] starts begins: the starter's side of
/// [`Begin`], with the presumed task in a cell it can take back.
pub(super) enum Start {
    /// With the searching slot the starter reserved.
    Searching,
    /// Without a slot, running this task first, presumed blocking (see
    /// [`start_presumed`](super::presumed::start_presumed)).
    Presumed(FirstTask),
    /// Without a slot, parked (see [`start_spare`](super::presumed::start_spare)).
    Spare,
}

/// [`start_thread`], with the thread begun as `start` says.
pub(super) fn start_thread_for(shared: &Arc<Shared>, reason: StartReason, start: Start) -> bool {
    let threads = &shared.threads;
    let config = &shared.config;
    let Some(before) = threads.count_start(config.max_threads) else {
        return false;
    };
    let Some(index) = threads.take_entry() else {
        threads.count_exit();
        return false;
    };
    let mut builder = std::thread::Builder::new().name(shared.worker_name(index));
    if let Some(size) = config.stack_size {
        builder = builder.stack_size(size);
    }
    let owned = Arc::clone(shared);
    let counters = &threads.counters;
    let spawned = builder.spawn(move || {
        // The tokio context (feature `tokio`), entered for the thread's life.
        let tokio = owned.config.tokio.clone();
        let _entered = tokio.enter();
        let begin = match start {
            Start::Searching => Begin::Searching,
            // The starter takes the task back only when the start failed,
            // and then this closure never runs.
            Start::Presumed(cell) => match crate::sync::lock(&cell).take() {
                Some(task) => Begin::Presumed(task),
                None => Begin::Spare,
            },
            Start::Spare => Begin::Spare,
        };
        run(owned, index, begin)
    });
    match spawned {
        Ok(_) => {
            trace::thread_started(
                &config.thread_name,
                index,
                reason.as_str(),
                config.settings(),
            );
            threads.start_worked();
            ThreadCounters::bump(&counters.started);
            ThreadCounters::bump(match reason {
                StartReason::Demand => &counters.started_demand,
                StartReason::Compensation => &counters.started_compensation,
                StartReason::Policy => &counters.started_policy,
                StartReason::Burst => &counters.started_burst,
                StartReason::Floor => &counters.started_floor,
                StartReason::Quantum => &counters.started_quantum,
                StartReason::Presumed => &counters.started_presumed,
                StartReason::Spare => &counters.started_spare,
            });
            counters
                .peak_threads
                .fetch_max(before as u64 + 1, Ordering::Relaxed);
            true
        }
        Err(error) => {
            trace::thread_start_failed(&config.thread_name, reason.as_str(), &error);
            // EAGAIN or out of memory: keep running on the threads we have,
            // and make sure the monitor retries while work waits (asleep on
            // an idle pool, it is only woken by a worker starting a task,
            // and there may be none: see `control::signal` for the pairing,
            // the work was queued before this).
            ThreadCounters::bump(&counters.start_failures);
            threads.start_failed(StartFailure::of(&error));
            threads.give_back_entry(index);
            threads.count_exit();
            shared.monitor.wake();
            false
        }
    }
}

/// Whether the pool can run work, for a spawn about to be accepted: `Err`
/// with the system's error if no worker thread is alive and starting one
/// here fails. With a thread alive (the common case) it costs one load of
/// the thread count, a line written only when threads start and exit. With
/// none, the thread started here begins as a searcher, so the spawn's own
/// notify finds it and starts no other.
pub(crate) fn can_run(shared: &Arc<Shared>) -> Result<(), StartFailure> {
    let threads = &shared.threads;
    if threads.alive() > 0 {
        return Ok(());
    }
    if shared.slots.try_reserve_searcher() {
        park::hand_over(&shared.sleepers, &shared.slots, || {
            start_thread(shared, StartReason::Demand)
        });
    }
    if threads.alive() > 0 || !threads.failing() {
        Ok(())
    } else {
        Err(threads.last_failure())
    }
}
