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
//! Past the grace, what the thread does decides:
//!
//! - **Waiting** (the kernel says it sleeps, `S` or `D`): the slot goes to
//!   another worker at once. This is what the section was declared for.
//! - **Computing** (the kernel says it runs or is runnable): the slot
//!   stays. The call uses the core its slot stands for; handing the slot
//!   over would run one more thread than there are slots, and a wrapped
//!   call that computes for a few milliseconds (a query planner, a
//!   compression) would start a thread per call. Seen waiting at a later
//!   look, it hands over then.
//! - **Unknown** (no thread state: not Linux, or `/proc` unreadable): the
//!   grace alone decides, as the section says it blocks.
//!
//! Measured (docs/measurements.md, "A declared section that computes keeps
//! its slot"): 2,000 async tasks on 2 slots, each wrapping 3 ms of CPU in
//! `blocking`, ran on 20-21 threads with 5% more CPU than the same calls
//! inline before this rule.

use std::time::Duration;

/// What the monitor saw of a worker inside a declared section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SectionLook {
    /// The kernel says the thread sleeps (`S` or `D`).
    Waiting,
    /// The kernel says the thread runs, or waits for a CPU.
    Computing,
    /// The pool cannot read the thread's state here.
    Unknown,
}

/// Whether a section seen at this look gives its slot away. `seen_for` is
/// the time since the monitor first saw this section; `grace` the monitor
/// interval. The first sighting is never a hand-over: a call that returns
/// within the grace costs what it costs.
pub(crate) fn hands_over(seen_for: Duration, grace: Duration, look: SectionLook) -> bool {
    match look {
        // Seen asleep at a second look: the grace has passed by then.
        SectionLook::Waiting => true,
        SectionLook::Computing => false,
        SectionLook::Unknown => seen_for >= grace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(1);

    #[test]
    fn a_waiting_section_hands_over_at_its_second_look_whatever_the_time() {
        assert!(hands_over(Duration::ZERO, GRACE, SectionLook::Waiting));
        assert!(hands_over(GRACE * 10, GRACE, SectionLook::Waiting));
    }

    #[test]
    fn a_computing_section_keeps_its_slot_however_long_it_runs() {
        for seen_for in [Duration::ZERO, GRACE, Duration::from_secs(60)] {
            assert!(!hands_over(seen_for, GRACE, SectionLook::Computing));
        }
    }

    #[test]
    fn without_thread_states_the_grace_decides() {
        assert!(!hands_over(GRACE / 2, GRACE, SectionLook::Unknown));
        assert!(hands_over(GRACE, GRACE, SectionLook::Unknown));
        assert!(hands_over(GRACE * 3, GRACE, SectionLook::Unknown));
    }
}
