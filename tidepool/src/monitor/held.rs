//! The monitor's care of held workers (`control::hold`): the pool's
//! progress while workers are held, letting them go when it stalls, and
//! the short scheduler slice the monitor takes while workers come back
//! from their blocks.

use super::Monitor;
use crate::runtime::Shared;
use crate::sync::Ordering;
use std::time::Duration;

/// Ticks the monitor keeps its short slice after the last worker back from
/// its block or held ([`Monitor::keep_up_with_holds`]).
pub(super) const SHORT_SLICE_TICKS: u32 = 64;

/// The pool's ended tasks and holds at the last look while workers were
/// held, and since when neither has moved: a task's end or a new hold is
/// progress; `control::hold::PATIENCE` without any lets held threads go
/// (`control::hold::let_go`), as many as went since the last end
/// (`let_go_since_end`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HeldProgress {
    ended: u64,
    held: u64,
    since: Duration,
    let_go_since_end: usize,
}

impl Monitor {
    /// While workers come back from their blocks computing (or are held),
    /// the monitor's thread runs with a short scheduler slice
    /// (`sys::set_urgent_slice`), and for [`SHORT_SLICE_TICKS`] ticks
    /// after. Those threads oversubscribe the cores until held, and a
    /// waking monitor waited a slice of each runnable one: with 64 back
    /// at once its looks came 7-8 ms apart, and holding them took over
    /// 100 ms (fetch-process of 16 items: 2.4x the slot-bound schedule
    /// without the short slice, 1.2x with it). Only then: the looks of
    /// other pools' monitors keep the default slice, and their timing.
    pub(super) fn keep_up_with_holds(&mut self, needed: bool) {
        if needed {
            if self.short_slice_ticks == 0 {
                crate::sys::set_urgent_slice(crate::sys::current_tid(), true);
            }
            self.short_slice_ticks = SHORT_SLICE_TICKS;
        } else if self.short_slice_ticks > 0 {
            self.short_slice_ticks -= 1;
            if self.short_slice_ticks == 0 {
                crate::sys::set_urgent_slice(crate::sys::current_tid(), false);
            }
        }
    }

    /// The held workers at this look (`control::hold`): counted on slots
    /// found free, or let go (the oldest, one then doubling) when neither
    /// a task of the pool has ended nor a worker been held for a patience
    /// (while workers are still being held, the slot holders' tasks run on
    /// shared cores and end late). `ended` is the pool's total of ended
    /// tasks. True while workers are held (the next look should come at
    /// the interval).
    pub(super) fn look_at_held(&mut self, shared: &Shared, ended: u64, now: Duration) -> bool {
        use crate::control::hold::{let_go, PATIENCE};
        let held = shared.threads.counters.held.load(Ordering::Relaxed);
        let then = self.held_progress;
        let mut moved = HeldProgress {
            ended,
            held,
            since: now,
            let_go_since_end: then.let_go_since_end,
        };
        if !shared.holds.any() || ended != then.ended {
            moved.let_go_since_end = 0;
        }
        if !shared.holds.any() || ended != then.ended || held != then.held {
            self.held_progress = moved;
        }
        if !shared.holds.any() {
            return false;
        }
        let still_for = now.saturating_sub(self.held_progress.since);
        let go = let_go(
            shared.holds.len(),
            still_for,
            PATIENCE,
            self.held_progress.let_go_since_end,
        );
        shared.look_at_held(go, false);
        if go > 0 {
            self.held_progress = HeldProgress {
                let_go_since_end: self.held_progress.let_go_since_end + go,
                ..moved
            };
        }
        shared.holds.any()
    }
}
