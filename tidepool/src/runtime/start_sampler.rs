//! Which spawns get a queue-to-start measurement.
//!
//! Reading the time-stamp counter at spawn and at first poll, and recording
//! the difference, cost ~75 ns of a ~250 ns tiny task on the project machine
//! (benches/tools/spawn_parts.rs). So each spawning thread measures every spawn
//! while its spawns are spread out, and one in `RUSH_EVERY` while it
//! spawns in a rush (less than `RUSH_GAP_TICKS` apart on average). The
//! summary stays exact for the latency-sensitive trickle and statistically
//! sound for floods, whose tasks share the same queue wait.

use std::cell::Cell;

/// The stamp of a spawn that is not measured.
pub(crate) const NOT_SAMPLED: u64 = 0;

/// In a rush, one spawn in this many is measured.
const RUSH_EVERY: u32 = 8;

/// Spawns closer than this on average (in ticks: ~5-10 µs at 2-4 GHz)
/// form a rush.
const RUSH_GAP_TICKS: u64 = 20_000;

thread_local! {
    /// (spawns left until the next measured one, current interval,
    /// stamp of the last measured spawn)
    static STATE: Cell<(u32, u32, u64)> = const { Cell::new((0, 1, 0)) };
}

/// True if this thread's recent spawns came in a rush (closer than
/// `RUSH_GAP_TICKS` apart on average, as of the last measured one).
#[inline]
pub(super) fn in_rush() -> bool {
    STATE
        .try_with(|state| state.get().1 == RUSH_EVERY)
        .unwrap_or(false)
}

/// A stamp to measure this spawn's start latency from, or [`NOT_SAMPLED`].
#[inline]
pub(crate) fn stamp() -> u64 {
    STATE
        .try_with(|state| {
            let (next, stamp) = advance(state.get(), crate::sys::ticks);
            state.set(next);
            stamp
        })
        .unwrap_or(NOT_SAMPLED)
}

/// One spawn's step: the sampler's next state and the spawn's stamp.
/// `now` (the time-stamp counter) is read only for a measured spawn.
fn advance(
    (left, every, last): (u32, u32, u64),
    now: impl FnOnce() -> u64,
) -> ((u32, u32, u64), u64) {
    if left > 1 {
        return ((left - 1, every, last), NOT_SAMPLED);
    }
    let now = now().max(1);
    // The mean gap below `RUSH_GAP_TICKS`, without a division.
    let rush = now.saturating_sub(last) < RUSH_GAP_TICKS * u64::from(every);
    let every = if rush { RUSH_EVERY } else { 1 };
    ((every, every, now), now)
}

/// Puts this thread's sampler in a rush or out of one (for tests
/// that must not depend on how fast the machine runs them).
#[cfg(all(test, not(tidepool_loom)))]
pub(super) fn set_in_rush(rush: bool) {
    let every = if rush { RUSH_EVERY } else { 1 };
    STATE.with(|state| state.set((every, every, 1)));
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    /// Runs `spawns` spawns `gap` ticks apart through [`advance`] and
    /// returns the state after them and how many were measured.
    fn run(
        mut state: (u32, u32, u64),
        clock: &mut u64,
        spawns: usize,
        gap: u64,
    ) -> ((u32, u32, u64), usize) {
        let mut measured = 0;
        for _ in 0..spawns {
            *clock += gap;
            let (next, stamp) = advance(state, || *clock);
            state = next;
            measured += usize::from(stamp != NOT_SAMPLED);
        }
        (state, measured)
    }

    #[test]
    fn close_spawns_are_a_rush_measured_one_in_eight() {
        let mut clock = 1_000_000;
        let (state, _) = run((0, 1, 0), &mut clock, 16, 10);
        assert_eq!(state.1, RUSH_EVERY, "in a rush");
        let (_, measured) = run(state, &mut clock, 8 * 100, 10);
        assert_eq!(measured, 100);
    }

    #[test]
    fn spread_out_spawns_are_each_measured() {
        let mut clock = 1_000_000;
        let (rush, _) = run((0, 1, 0), &mut clock, 16, 10);
        // The rush ends: the first measured spawn after the gap sees it.
        let (state, measured) = run(rush, &mut clock, 100, 2 * RUSH_GAP_TICKS);
        assert_eq!(state.1, 1, "out of the rush");
        assert!(measured >= 100 - RUSH_EVERY as usize);
    }
}
