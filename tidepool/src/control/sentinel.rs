//! When a CPU sentinel looks, and when there are sentinels at all: pure
//! decisions for `monitor/sentinel.rs`, which runs the threads.
//!
//! # Design note
//!
//! The monitor finds a blocked slot holder at its next tick, a quarter to
//! a whole interval after the block. Meanwhile the core the holder left is
//! idle whenever every other pool thread waits for a slot: in the lab's
//! `overload` (30% of the arrivals compute 1 ms, then sleep 5 ms) the
//! cores idled 18% of the time with work queued, 0% on tokio with
//! `spawn_blocking`. The kernel knows at once that a core has nothing to
//! run; a thread under `SCHED_IDLE` pinned to the core is how a program
//! hears it, since the kernel runs such a thread only when the core has
//! nothing else (a normal thread's wake preempts it at once, and on a busy
//! core it gets a tiny share).
//!
//! - **Who has sentinels**: a pool whose policy detects blocking, with a
//!   slot per CPU it may run on or more ([`wanted`]). With fewer slots
//!   than CPUs, an idle CPU says nothing about the slots.
//! - **When they watch**: armed while every slot is taken and work waits
//!   (by the monitor's tick, and by a spawn that found no free slot);
//!   disarmed, they wait on a condition variable, so an idle pool, or a
//!   busy one with free slots, never wakes them.
//! - **What a look does**: a sentinel that runs reads the state of the
//!   workers holding a slot in a task. One asleep outside the process (a
//!   socket, a timer, a disk; not a futex, whose waiter the monitor
//!   leaves for its interval however soon it looks: in a lock convoy the
//!   waiters take turns asleep, and a poke for each took convoys to 512
//!   threads): its core is idle because of it, and the sentinel pokes the
//!   monitor, whose tick then
//!   marks it after [`IDLE_CORE_GRACE`](super::policy::IDLE_CORE_GRACE)
//!   rather than the interval (`control::policy`, rule 1), and moves the
//!   worker it wakes onto the idle core. None asleep: the kernel gave the
//!   sentinel its share of a busy core, or the core idles for a reason the
//!   monitor cannot mend; the sentinel looks less often ([`next_poll`]),
//!   and so it does while the same holder sleeps on after a poke (its
//!   grace may not have passed yet).

use std::time::Duration;

/// A sentinel's sleep between looks after a look that found a slot
/// holder asleep: the delay before an idle core is seen, at most.
pub(crate) const POLL: Duration = Duration::from_micros(50);

/// Whether a pool gets CPU sentinels: its policy replaces blocked
/// workers (`detects_blocking`), and it has at least one slot per CPU
/// it may run on (`cpus`: how many; `None` if unknown).
pub(crate) fn wanted(detects_blocking: bool, concurrency: usize, cpus: Option<usize>) -> bool {
    detects_blocking && cpus.is_some_and(|cpus| cpus > 0 && concurrency >= cpus)
}

/// What a sentinel's look found among the workers holding a slot in a
/// task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// One asleep outside the process that the last look did not find
    /// (another worker, or another task): the monitor is poked.
    New,
    /// The one the last look found, still asleep in the same task: poked
    /// again, since its grace may have passed, but the monitor left it
    /// (it had not been in its task for the grace yet).
    Same,
    /// None asleep outside the process.
    Nobody,
}

/// The sleep after a look: [`POLL`] after one that found a new sleeper,
/// else twice the last, up to the monitor's `interval` (never less than
/// `POLL`). A sleeper the monitor leaves alone thus costs a few pokes,
/// not one every poll.
pub(crate) fn next_poll(last: Duration, look: Look, interval: Duration) -> Duration {
    match look {
        Look::New => POLL,
        Look::Same | Look::Nobody => (last * 2).clamp(POLL, interval.max(POLL)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(1);

    #[test]
    fn a_new_sleeper_brings_the_next_look_soon_and_others_back_off_to_the_interval() {
        for look in [Look::Same, Look::Nobody] {
            let mut sleep = POLL;
            let mut sleeps = Vec::new();
            for _ in 0..7 {
                sleep = next_poll(sleep, look, INTERVAL);
                sleeps.push(sleep.as_micros());
            }
            assert_eq!(sleeps, [100, 200, 400, 800, 1000, 1000, 1000], "{look:?}");
            assert_eq!(next_poll(sleep, Look::New, INTERVAL), POLL);
        }
        // An interval shorter than the poll: the poll.
        let short = Duration::from_micros(10);
        assert_eq!(next_poll(POLL, Look::Nobody, short), POLL);
    }

    #[test]
    fn only_pools_that_detect_blocking_with_a_slot_per_cpu_have_sentinels() {
        assert!(wanted(true, 2, Some(2)));
        assert!(wanted(true, 8, Some(2)));
        assert!(!wanted(true, 2, Some(4)), "fewer slots than CPUs");
        assert!(!wanted(false, 2, Some(2)), "a fixed pool");
        assert!(!wanted(true, 2, None), "CPUs unknown");
        assert!(!wanted(true, 2, Some(0)));
    }
}
