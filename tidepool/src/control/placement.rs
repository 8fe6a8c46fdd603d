//! Which runnable worker to pull onto a CPU about to idle: a pure
//! decision on what the kernel says of the workers at work.
//!
//! # Design note
//!
//! The pool counts slots; the kernel places threads. With the cores busy
//! and a worker or two beyond the slots (back from their blocks, computing
//! on), two of the pool's workers often take turns on one core while the
//! other core idles: a thread woken or preempted while both cores were
//! busy waits in its core's queue, and when the other core empties the
//! kernel does not pull a thread that ran there within its migration cost
//! (0.5 ms), which threads taking turns always have. In the service
//! experiment overloaded, the cores idled 14% of the time, and for more
//! than half of it a worker preempted on the other core was waiting
//! (docs/measurements.md, "Where the service's overload loses").
//!
//! So a pool thread about to leave its CPU idle (the monitor going back
//! to sleep, a worker about to park) looks at the workers at work, and if
//! none is runnable on its own CPU while two or more are on another, it
//! pulls one of those here: the kernel moves a thread at once when its
//! allowed CPUs leave out the one it is on, and the mechanism
//! (`runtime::placement`) gives it its CPUs back straight after, so the
//! kernel stays free to place it from then on.
//!
//! **Not where CPU sentinels watch** (`control::sentinel`). Each look
//! reads the `stat` of up to eight workers, and it runs at every park
//! while the pool is saturated: 4,900 reads in 2 s of the overloaded
//! service, the largest of the pool's reads of `/proc`. Measured before
//! the sentinels it bought that service 12% of its throughput; with them
//! (3d09178) it bought nothing: the ablation found the service better off
//! without it in 6 of 7 rounds (424 against 412 requests/s), and 4 ABBA
//! rounds after it 416 against 419, p99 669 against 683 ms
//! (docs/measurements.md, "What each mechanism buys"). So it stands in
//! for the sentinels where a pool has none (fewer slots than CPUs, or
//! `SCHED_IDLE` refused).
//!
//! [`to_pull`] decides from the readings alone, so its tests need no
//! threads.

/// One worker at work as the kernel sees it: its thread, and the CPU it
/// runs on or waits for (the `processor` field of its `stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Runnable {
    /// The worker's thread id.
    pub(crate) tid: i32,
    /// The CPU it runs on, or whose queue it waits in.
    pub(crate) cpu: usize,
}

/// The worker to pull onto CPU `here`, among the workers found runnable
/// (the caller's own thread left out): none if one of them is on `here`
/// already (the CPU will not idle) or no CPU has two of them (nobody
/// waits behind another of ours); otherwise the later-found of the first
/// two sharing a CPU.
///
/// ```text
/// here 1, runnable [a on 0, b on 0]  -> b
/// here 1, runnable [a on 0, b on 1]  -> none (b keeps CPU 1 busy)
/// here 1, runnable [a on 0, b on 2]  -> none (nobody waits)
/// ```
pub(crate) fn to_pull(here: usize, runnable: &[Runnable]) -> Option<i32> {
    if runnable.iter().any(|r| r.cpu == here) {
        return None;
    }
    runnable.iter().enumerate().find_map(|(i, r)| {
        runnable[..i]
            .iter()
            .any(|earlier| earlier.cpu == r.cpu)
            .then_some(r.tid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(tid: i32, cpu: usize) -> Runnable {
        Runnable { tid, cpu }
    }

    #[test]
    fn two_on_another_cpu_and_none_here_pulls_the_second() {
        assert_eq!(to_pull(1, &[on(10, 0), on(11, 0)]), Some(11));
        assert_eq!(to_pull(3, &[on(10, 0), on(11, 2), on(12, 2)]), Some(12));
    }

    #[test]
    fn one_runnable_here_pulls_nobody() {
        assert_eq!(to_pull(1, &[on(10, 0), on(11, 0), on(12, 1)]), None);
    }

    #[test]
    fn nobody_waiting_behind_another_pulls_nobody() {
        assert_eq!(to_pull(1, &[on(10, 0), on(11, 2)]), None);
        assert_eq!(to_pull(1, &[on(10, 0)]), None);
        assert_eq!(to_pull(1, &[]), None);
    }
}
