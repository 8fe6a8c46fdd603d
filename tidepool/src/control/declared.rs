//! When a declared blocking section (`tidepool::blocking`) gives its
//! worker's slot away: a pure decision on what the monitor saw at a look.
//! The monitor (`monitor/mod.rs`) looks; `worker::hand_over_declared`
//! carries the decision out.
//!
//! # Design note
//!
//! A section costs what its call costs when the call returns quickly: no
//! slot moves and no thread wakes until the monitor has seen the same
//! section at two looks (the grace: one monitor interval at the least, as
//! Go's runtime retakes a P from a system call only at its sysmon's tick).
//! At the second look the slot goes to another worker if the section has
//! been seen for the whole interval, or if the kernel says its thread
//! sleeps (`S` or `D`) sooner: the section said it blocks, so the pool
//! does not wait for proof.
//!
//! A section that computes past its grace is handed over, and that has a
//! cost: 2,000 async tasks on 2 slots each wrapping 3 ms of CPU in
//! `blocking` run on about 19 threads with 5% more CPU than the calls
//! inline (`benches/tools/declared_cost.rs`). Keeping the slot while the
//! kernel says the thread runs, and handing it over only once seen asleep,
//! was built and measured (docs/measurements.md, "A declared section that
//! computes: handed over at the grace, measured both ways"): it removed
//! that cost, and cost the `service` experiment's overloaded throughput
//! with the database call in `blocking` about 15% in 11 of 14 paired
//! rounds: a query that computes, then waits, was handed over a look
//! later, its slot idle meanwhile. Telling the two apart needs what the
//! section's kind did before (its sections waited, or computed through),
//! which this rule does not have yet.
//!
//! Such a section goes back and forth: handed over, counted against the
//! slots again once seen computing (`control::back_from_block`), handed
//! over again an interval later (about two hand-overs per 3 ms call).
//! Handing a section over a second time only once seen asleep halved the
//! hand-overs (21 threads down to 13) but made the same run 10% longer
//! (3.5 s against 3.2, inline 3.05): the counted-again worker is held for
//! a slot mid-call (`control::hold`) while a core idles. Not kept.

use std::time::Duration;

/// Whether a section seen at a second look gives its slot away.
/// `seen_for`: the time since the monitor first saw this section; `grace`:
/// the monitor interval; `asleep`: asks the kernel whether the thread
/// sleeps (asked only within the grace).
pub(crate) fn hands_over(
    seen_for: Duration,
    grace: Duration,
    asleep: impl FnOnce() -> bool,
) -> bool {
    seen_for >= grace || asleep()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(1);

    #[test]
    fn a_section_seen_for_its_grace_hands_over_whatever_it_does() {
        assert!(hands_over(GRACE, GRACE, || false));
        assert!(hands_over(GRACE * 10, GRACE, || false));
    }

    #[test]
    fn within_its_grace_only_a_sleeping_section_hands_over() {
        assert!(hands_over(GRACE / 2, GRACE, || true));
        assert!(!hands_over(GRACE / 2, GRACE, || false));
    }

    #[test]
    fn past_its_grace_the_kernel_is_not_asked() {
        let asked = || unreachable!("asked the kernel");
        assert!(hands_over(GRACE, GRACE, asked));
    }
}
