//! How long the monitor sleeps between its ticks: a pure decision on what
//! the last tick found. The monitor (`monitor/mod.rs`) reports each tick's
//! [`Tick`] and sleeps for what [`Pace::next_sleep`] says.
//!
//! # Design note
//!
//! The monitor's cost is its wake-ups, and its worth is how soon it sees a
//! worker block. So it sleeps:
//!
//! - **one monitor interval** while some worker is due for a look (a task
//!   running past the threshold, a declared section, a presumed task):
//!   a block is found within an interval or two;
//! - **a quarter of the interval**, for [`QUICK_PACE_TICKS`] ticks after
//!   it found blocking or a worker back from its block: blocks come in
//!   batches (a burst of requests that all call the database), and the
//!   rest of the batch is found in a quarter of the time (the `quick-pace`
//!   switch turns this off, for the lab's ablation). Only while no CPU
//!   sentinel watches (`control::sentinel`): a sentinel has the monitor
//!   look the moment a core would idle beside a sleeping slot holder,
//!   which is what the quick ticks were for, and each quick tick costs
//!   reads of every suspect's `/proc` files. With sentinels, the quick
//!   pace cost the lab's overloaded `service` 7% of its throughput (the
//!   ablation at 1101e0b: off better in 6 of 7 rounds,
//!   docs/measurements.md, "What each mechanism buys");
//! - **twice as long as the last sleep**, from the interval up to
//!   [`MAX_SLEEP`] (or the interval, if longer), while the pool is busy and
//!   nobody is due for a look: a pool of long computations costs the
//!   monitor well under 0.1% of a core, and a worker that blocks nudges it
//!   awake anyway (`control::signal`);
//! - **until woken** once the pool has gone idle and said so (nothing
//!   runs, waits or is queued): an idle pool never spins. If it could not
//!   say so yet (a thread spawned since its last look), one interval.

use std::time::Duration;

/// The longest sleep between ticks while the pool is busy. 10 ms keeps the
/// monitor under 0.1% of a core and still notices a new blocker quickly once
/// the first tick after it sets the pace back to the interval.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(10);

/// While blocking is being found, the monitor ticks this many times faster
/// than the interval, for [`QUICK_PACE_TICKS`] ticks after each find.
pub(crate) const QUICK_PACE_DIVISOR: u32 = 4;

/// See [`QUICK_PACE_DIVISOR`].
pub(crate) const QUICK_PACE_TICKS: u32 = 16;

/// What one tick found, for choosing the next sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// A worker is due for a look: tick again at the interval.
    Suspects,
    /// Busy, but nobody to look at soon: back off.
    Busy,
    /// Nothing runs, waits or is queued.
    Idle,
}

/// The monitor's pace: its last sleep and the quick ticks left.
#[derive(Debug)]
pub(crate) struct Pace {
    /// The monitor interval (`Builder::monitor_interval`).
    interval: Duration,
    /// Whether the quick pace is on (the `quick-pace` switch).
    quick_pace: bool,
    /// Whether a CPU sentinel watches the pool's cores, which makes the
    /// quick pace needless ([`Pace::sentinels_watch`]).
    sentinels_watch: bool,
    /// The last sleep, which a busy tick doubles.
    sleep: Duration,
    /// Ticks left at the quick pace.
    quick_ticks: u32,
}

impl Pace {
    /// The pace of a monitor with this interval.
    pub(crate) fn new(interval: Duration, quick_pace: bool) -> Pace {
        Pace {
            interval,
            quick_pace,
            sentinels_watch: false,
            // The first busy tick sleeps the interval, then the back-off.
            sleep: Duration::ZERO,
            quick_ticks: 0,
        }
    }

    /// Whether a CPU sentinel watches the pool's cores now: while one
    /// does, finds do not quicken the pace (module docs).
    pub(crate) fn sentinels_watch(&mut self, watch: bool) {
        self.sentinels_watch = watch;
        if watch {
            self.quick_ticks = 0;
        }
    }

    /// Blocking (or a worker back from its block) was found: the next
    /// [`QUICK_PACE_TICKS`] ticks with suspects come quickly, unless a
    /// CPU sentinel watches.
    pub(crate) fn found_blocking(&mut self) {
        if self.sentinels_watch {
            return;
        }
        self.quick_ticks = QUICK_PACE_TICKS;
    }

    /// How long to sleep after a tick that found `tick`; `None`: until
    /// woken. `idle_announced`: the pool has gone idle and told the
    /// workers so (read only for an idle tick).
    pub(crate) fn next_sleep(&mut self, tick: Tick, idle_announced: bool) -> Option<Duration> {
        let interval = self.interval;
        let timeout = match tick {
            Tick::Idle if idle_announced => None,
            Tick::Idle => Some(interval),
            Tick::Suspects if self.quick_ticks > 0 && self.quick_pace => {
                self.quick_ticks -= 1;
                Some(interval / QUICK_PACE_DIVISOR)
            }
            Tick::Suspects => Some(interval),
            // `max`: an interval longer than MAX_SLEEP (the builder accepts
            // up to 10 s) is itself the longest sleep.
            Tick::Busy => Some((self.sleep * 2).clamp(interval, MAX_SLEEP.max(interval))),
        };
        self.sleep = timeout.unwrap_or(interval);
        timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(1);

    #[test]
    fn suspects_are_looked_at_every_interval() {
        let mut pace = Pace::new(INTERVAL, true);
        for _ in 0..100 {
            assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(INTERVAL));
        }
    }

    #[test]
    fn a_busy_pool_backs_off_doubling_up_to_the_longest_sleep() {
        let mut pace = Pace::new(INTERVAL, true);
        let sleeps: Vec<_> = (0..6)
            .map(|_| pace.next_sleep(Tick::Busy, false).unwrap())
            .collect();
        let ms = Duration::from_millis;
        assert_eq!(sleeps, [ms(1), ms(2), ms(4), ms(8), ms(10), ms(10)]);
        // A suspect brings the pace back to the interval at once, and the
        // back-off starts again from there.
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(INTERVAL));
        assert_eq!(pace.next_sleep(Tick::Busy, false), Some(ms(2)));
    }

    #[test]
    fn an_interval_longer_than_the_longest_sleep_is_the_longest_sleep() {
        let long = Duration::from_secs(1);
        let mut pace = Pace::new(long, true);
        assert_eq!(pace.next_sleep(Tick::Busy, false), Some(long));
        assert_eq!(pace.next_sleep(Tick::Busy, false), Some(long));
    }

    #[test]
    fn found_blocking_quickens_the_next_ticks_with_suspects_only() {
        let mut pace = Pace::new(INTERVAL, true);
        pace.found_blocking();
        let quick = INTERVAL / QUICK_PACE_DIVISOR;
        // A busy tick neither uses nor spends a quick tick.
        assert_eq!(pace.next_sleep(Tick::Busy, false), Some(INTERVAL));
        for _ in 0..QUICK_PACE_TICKS {
            assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(quick));
        }
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(INTERVAL));
        // Found again: quick again, for the whole count.
        pace.found_blocking();
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(quick));
    }

    #[test]
    fn without_the_quick_pace_finds_change_nothing() {
        let mut pace = Pace::new(INTERVAL, false);
        pace.found_blocking();
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(INTERVAL));
    }

    #[test]
    fn while_sentinels_watch_finds_change_nothing() {
        let mut pace = Pace::new(INTERVAL, true);
        pace.found_blocking();
        // A sentinel starts watching: the quick ticks left are dropped.
        pace.sentinels_watch(true);
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(INTERVAL));
        pace.found_blocking();
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(INTERVAL));
        // No sentinel any more (the system refused them, or they exited):
        // finds quicken the pace again.
        pace.sentinels_watch(false);
        pace.found_blocking();
        let quick = INTERVAL / QUICK_PACE_DIVISOR;
        assert_eq!(pace.next_sleep(Tick::Suspects, false), Some(quick));
    }

    #[test]
    fn an_idle_pool_sleeps_until_woken_once_it_said_so() {
        let mut pace = Pace::new(INTERVAL, true);
        assert_eq!(pace.next_sleep(Tick::Idle, false), Some(INTERVAL));
        assert_eq!(pace.next_sleep(Tick::Idle, true), None);
        // Woken busy, the back-off starts from the interval.
        assert_eq!(pace.next_sleep(Tick::Busy, false), Some(INTERVAL * 2));
    }
}
