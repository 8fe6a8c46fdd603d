//! When a thread that ran a task without a slot (or a place) has blocked,
//! and when one whose slot was given away in a block runs again: the
//! decision, a pure function of what was seen. Two users carry it out: the
//! watcher of the shared tokio runtime's workers (`interop::watch`: both
//! verdicts) and the pool's monitor (`monitor/kernel.rs`: a worker back from its
//! block is counted again, where no CPU timer of its own judges it:
//! `control::hold`).
//!
//! # Design note
//!
//! A worker found blocked gives its slot to another worker. When its call
//! returns it runs on, without a slot, until its task ends: with tasks
//! that block and then compute (fetch, then process) every such worker
//! computed beside the ones that replaced it. An I/O completion port
//! counts a thread that wakes from a wait as active again and releases no
//! new work until the active count falls; Go's runtime makes a goroutine
//! back from a system call reacquire a P. Here a thread whose slot was
//! given away, seen runnable and using at least [`BUSY_CPU_SHARE`] of the
//! time since the last look on a CPU, is counted again: the pool's slots
//! (or the tokio gate's places) count it, so no new task starts until the
//! count falls back to `concurrency` (a worker over the count gives its
//! slot back at its next task boundary).
//!
//! For the shared tokio runtime's workers, which tokio schedules and which
//! tell nothing about task boundaries, the watcher also decides that a
//! worker holding a place has **blocked**: it has held its place for at
//! least the watch interval and the kernel said it sleeps (S or D) at this
//! look and the one before. A thread that holds a place never parks (the
//! place is given back before tokio parks it), so a sleep there is a sleep
//! inside a task. (The pool's own workers are judged by the monitor's
//! policy, `control::policy`.)
//!
//! A short sleep (a contended lock for a few microseconds) is seldom
//! caught at two looks in a row; if it is, one worker is let through
//! early, and the next looks count it again once it computes.

use super::policy::BUSY_CPU_SHARE;
use std::time::{Duration, Instant};

/// One look at a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Look {
    /// When it was taken.
    pub(crate) at: Instant,
    /// The kernel said the thread sleeps (S or D).
    pub(crate) asleep: bool,
    /// The thread's CPU time, if its clock could be read.
    pub(crate) cpu: Option<Duration>,
    /// The thread's run delay (time runnable, waiting for a core), if it
    /// could be read.
    pub(crate) run_delay: Option<Duration>,
}

/// What the watcher does about a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing now.
    Leave,
    /// It holds a place and blocked: give its place to another worker.
    Blocked,
    /// Its place was given away and it computes again: count it again.
    RunningAgain,
}

/// What the watcher does about a thread that holds a place in the gate
/// (`holds_place`) or had its place given away (`!holds_place`), has been
/// in that state for `for_how_long`, was last looked at in `previous` (in
/// this state) and is seen as `now`.
pub(crate) fn judge(
    holds_place: bool,
    for_how_long: Duration,
    interval: Duration,
    previous: Option<Look>,
    now: Look,
) -> Verdict {
    if holds_place {
        // Asleep at two looks in a row: a futex wait of a few microseconds
        // (tokio's own locks, a contended mutex) caught by one look let a
        // worker through early, and three computed at once on two places.
        let asleep_before = previous.is_some_and(|p| p.asleep);
        if for_how_long >= interval && now.asleep && asleep_before {
            return Verdict::Blocked;
        }
        return Verdict::Leave;
    }
    if now.asleep {
        return Verdict::Leave;
    }
    let Some(previous) = previous else {
        // Runnable once is not computing: look again.
        return Verdict::Leave;
    };
    let computed = match (previous.cpu, now.cpu) {
        (Some(before), Some(after)) => {
            // Of the time it could run: the time it waited for a core does
            // not count. Sixteen threads back from their blocks on two
            // cores each got an eighth of a core, under the share, and
            // none was counted again while all of them computed.
            let wall = now.at.saturating_duration_since(previous.at);
            let waited = match (previous.run_delay, now.run_delay) {
                (Some(before), Some(after)) => after.saturating_sub(before),
                _ => Duration::ZERO,
            };
            let could_run = wall.saturating_sub(waited);
            let cpu = after.saturating_sub(before);
            !could_run.is_zero()
                && !cpu.is_zero()
                && cpu.as_secs_f64() >= could_run.as_secs_f64() * BUSY_CPU_SHARE
        }
        // Without a CPU clock, runnable at two looks in a row.
        _ => !previous.asleep,
    };
    if computed {
        Verdict::RunningAgain
    } else {
        Verdict::Leave
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(1);

    fn look(at: Instant, ms: u64, asleep: bool, cpu_us: Option<u64>) -> Look {
        Look {
            at: at + Duration::from_millis(ms),
            asleep,
            cpu: cpu_us.map(Duration::from_micros),
            run_delay: None,
        }
    }

    #[test]
    fn a_thread_that_computes_on_oversubscribed_cores_is_counted_again() {
        let t0 = Instant::now();
        // 120 µs of CPU in 1 ms (an eighth of a core: 16 threads on 2),
        // 880 µs of it waiting for a core.
        let before = Look {
            run_delay: Some(Duration::from_micros(5_000)),
            ..look(t0, 0, false, Some(1_000))
        };
        let now = Look {
            run_delay: Some(Duration::from_micros(5_880)),
            ..look(t0, 1, false, Some(1_120))
        };
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, Some(before), now),
            Verdict::RunningAgain
        );
        // The same CPU without the waits read: a share of the wall time.
        let (before, now) = (
            Look {
                run_delay: None,
                ..before
            },
            Look {
                run_delay: None,
                ..now
            },
        );
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, Some(before), now),
            Verdict::Leave
        );
    }

    #[test]
    fn a_place_held_asleep_at_two_looks_for_an_interval_is_a_block() {
        let t0 = Instant::now();
        let before = look(t0, 0, true, Some(10));
        let now = look(t0, 1, true, Some(10));
        assert_eq!(
            judge(true, INTERVAL, INTERVAL, Some(before), now),
            Verdict::Blocked
        );
    }

    #[test]
    fn a_place_held_asleep_at_one_look_only_is_left_alone() {
        let t0 = Instant::now();
        let now = look(t0, 1, true, Some(10));
        assert_eq!(judge(true, INTERVAL, INTERVAL, None, now), Verdict::Leave);
        let runnable_before = look(t0, 0, false, Some(10));
        assert_eq!(
            judge(true, INTERVAL, INTERVAL, Some(runnable_before), now),
            Verdict::Leave
        );
    }

    #[test]
    fn a_place_held_for_less_than_an_interval_is_left_alone() {
        let t0 = Instant::now();
        let now = look(t0, 0, true, Some(10));
        let short = Duration::from_micros(400);
        assert_eq!(judge(true, short, INTERVAL, None, now), Verdict::Leave);
    }

    #[test]
    fn a_place_held_by_a_runnable_thread_is_left_alone() {
        let t0 = Instant::now();
        let now = look(t0, 50, false, Some(50_000));
        let long = Duration::from_millis(50);
        assert_eq!(judge(true, long, INTERVAL, None, now), Verdict::Leave);
    }

    #[test]
    fn a_thread_back_from_its_block_that_computes_is_counted_again() {
        let t0 = Instant::now();
        let before = look(t0, 0, false, Some(1_000));
        // 800 µs of CPU in 1 ms.
        let now = look(t0, 1, false, Some(1_800));
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, Some(before), now),
            Verdict::RunningAgain
        );
    }

    #[test]
    fn a_thread_runnable_but_waiting_for_a_core_is_not_counted_again() {
        let t0 = Instant::now();
        let before = look(t0, 0, false, Some(1_000));
        // 50 µs of CPU in 1 ms: woken, queued for a core.
        let now = look(t0, 1, false, Some(1_050));
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, Some(before), now),
            Verdict::Leave
        );
    }

    #[test]
    fn a_thread_still_blocked_or_seen_once_is_left_alone() {
        let t0 = Instant::now();
        let asleep = look(t0, 1, true, Some(1_000));
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, None, asleep),
            Verdict::Leave
        );
        let runnable = look(t0, 1, false, Some(1_000));
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, None, runnable),
            Verdict::Leave
        );
    }

    #[test]
    fn without_a_cpu_clock_two_runnable_looks_count_it_again() {
        let t0 = Instant::now();
        let before = look(t0, 0, false, None);
        let now = look(t0, 1, false, None);
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, Some(before), now),
            Verdict::RunningAgain
        );
        let asleep_before = look(t0, 0, true, None);
        assert_eq!(
            judge(false, INTERVAL, INTERVAL, Some(asleep_before), now),
            Verdict::Leave
        );
    }
}
