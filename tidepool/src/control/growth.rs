//! The growth gate: when the threads presumption hands a kind may keep
//! doubling, and when a kind's waits look like a lock convoy's (issue #41,
//! "lock convoys stay small").
//!
//! # The problem
//!
//! Tiny items that all take one mutex form a convoy: the lock lets one of
//! them run at a time, and the others sleep in a futex. Asleep, they look
//! like waits to the monitor. A kind known to block (`control::presumption`)
//! has its presumed tasks' cap doubled at every look that finds them
//! mostly asleep, and a convoy's waiters are asleep: each thread added
//! joins the queue on the lock, so each item waits longer and the next
//! look finds more of them asleep. 10,000 items holding one mutex for
//! 100 µs, of a kind taught to block, reached 512 threads (`max_threads`)
//! on 2 slots with presumption alone (`tests/control_convoy.rs`,
//! `convoy_sources`, at c895626). Waiting for a sibling that holds the lock
//! is not evidence that a thread helps: the lock's rate is the pool's
//! rate, whatever the thread count.
//!
//! # The rule
//!
//! One owner decides how many presumed tasks of a kind may be in flight:
//! its cap in `control::presumption`. This module only bounds how far a
//! look may raise that cap ([`ceiling`]), on the kind's own evidence about
//! how long its waits are, recorded as its presumed tasks end:
//!
//! * **A kind known to wait long is not gated.** Each presumed task's wall
//!   time is recorded at its end into its kind's [`WaitHistory`] (two bits
//!   in the kind's record): a wait of [`LONG_WAIT_INTERVALS`] monitor
//!   intervals or more (16 ms at the default 1 ms) is long, anything
//!   shorter is short (a task judged computing counts as short). When the
//!   kind's last two presumed tasks to end both waited long, that is
//!   evidence that more threads help, at once: a second burst of 500
//!   items that sleep 200 ms gets its cap doubled at every look, as fast
//!   as presumption allows, from its first look (the first burst's ends
//!   taught it).
//! * **One short end gates it** (the convoy's signature: waits that end
//!   within a few intervals). A convoy on std's mutex, which is unfair,
//!   ends items both ways at any size: waiters that starve behind the
//!   threads that barge in wait long, the ones that barge in end within
//!   microseconds. Gated, the cap stops at [`GATED_CAP`] presumed tasks in
//!   flight.
//! * **A long end in a crowd changes nothing**: with more than
//!   [`GATED_CAP`] of the kind in flight, a long wait may be a wait for
//!   the crowd itself (a convoy's waiters queue behind each other), and a
//!   stream of true long waits keeps the history it has.
//! * **A kind with no presumed task ended yet is gated.** Its first burst
//!   gets its threads from the policy's replacements and bursts
//!   (`control::policy`), as before, and from presumption once two of its
//!   presumed tasks end after long waits.
//!
//! **A stalled pool is not gated**: with work queued and no task of the
//! pool ended for [`STALL_INTERVALS`] monitor intervals, both limits
//! lift ([`stalled`]). A convoy completes at its lock's rate; tasks that
//! wait for each other (a barrier of eight on a pool the gate held to
//! seven threads hung) complete nothing, and only threads end that.
//!
//! The policy's own replacements and bursts are held too, by the same
//! evidence ([`policy_max_threads`]): while every task at work is of a kind
//! whose recent presumed ends were short, to `concurrency +`
//! [`CONVOY_EXTRA_THREADS`]. A kind never presumed, or known to wait long,
//! is not held. On 2 slots a convoy then has 2 slot holders, 2
//! replacements, 4 presumed tasks and a spare or two: `concurrency + 8`.
//!
//! Why ends and a threshold of 16 intervals: the ends of a convoy held to
//! a few threads are short on a quiet machine whatever the threshold, but
//! on a loaded one the lock's holder is kept off the cores for
//! milliseconds now and then, and each stall makes the waiters behind it
//! wait that long. With a threshold of 4 intervals, with one long end
//! freeing a kind, or with the ages of presumed tasks still running
//! counting for a kind with no ends yet, a convoy beside another process
//! starting 500 threads grew to 50-500 threads in about half the runs
//! (`tests/control_convoy.rs`, two copies at once); with these rules, 1
//! run in 10 peaked at 13 threads (`concurrency + 11`), the others within
//! the bar.
//!
//! Why a kind's own end times and not completions per second: the rate
//! rises for long waits only when their first tasks end (200 ms after a
//! burst starts), so a gate that waits for the rate to rise holds a burst
//! of true waits at its allowance for that long (the earlier gate on
//! branch `h-convoy` started a warm burst at 20.6 ms p50 against 0.142 ms
//! without it).
//!
//! What this does not do (yet):
//!
//! * add threads beyond the gate for a kind of short waits whose
//!   completions per second do rise with threads (true waits of 1-15 ms
//!   each, a database round trip): such a kind is held like a convoy
//!   whenever one of its presumed tasks ends short. Hill climbing on the
//!   rate (the `h-convoy` gate's) for that case is not built here.
//! * tell a convoy whose holder stalls twice in a row for 16 ms (two long
//!   ends with few in flight) from long waits: the kind is freed until its
//!   next short end.
//!
//! Pure: the monitor and the workers report what they see; the tests below
//! script it with a fake clock.

use super::presumption::MAX_CAP;
use std::time::Duration;

/// A presumed task that waited this many monitor intervals or more waited
/// long (16 ms at the default 1 ms): a convoy held to a few threads waits
/// a few holds, a fraction of an interval each, and a stall of its holder
/// on a loaded machine rarely lasts this long (see the module docs).
pub(crate) const LONG_WAIT_INTERVALS: u32 = 16;

/// The most presumed tasks in flight of a kind whose waits are not known
/// to be long.
pub(crate) const GATED_CAP: u32 = 4;

/// Threads beyond `concurrency` the policy may have for blocked work
/// while every task at work is of a kind whose waits are short
/// ([`policy_max_threads`]).
pub(crate) const CONVOY_EXTRA_THREADS: usize = 2;

/// The `max_threads` the policy's replacements of blocked workers and its
/// bursts (`control::policy`) work within: `concurrency +`
/// [`CONVOY_EXTRA_THREADS`] (at most `max_threads`) while every task at
/// work is of a kind whose recent presumed ends were short
/// (`all_short`: known, not long: the convoy's signature), `max_threads`
/// otherwise. A kind never presumed, or one known to wait long, is not
/// held: its blocked workers are replaced as before.
pub(crate) fn policy_max_threads(max_threads: usize, concurrency: usize, all_short: bool) -> usize {
    if all_short {
        (concurrency + CONVOY_EXTRA_THREADS).min(max_threads)
    } else {
        max_threads
    }
}

/// What a kind's presumed tasks' recent ends say about its waits, in two
/// bits (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitHistory(u8);

/// No presumed task of the kind ended yet.
const UNKNOWN: u8 = 0;
/// The last end was short.
const SHORT: u8 = 1;
/// The last end was long, the one before it short (or there was none).
const LONG_ONCE: u8 = 2;
/// The last two ends were long.
const LONG: u8 = 3;

impl WaitHistory {
    /// The history in two bits (for the kind's packed record).
    pub(crate) fn to_bits(self) -> u32 {
        u32::from(self.0)
    }

    /// The history packed in the two low bits of `bits`.
    pub(crate) fn from_bits(bits: u32) -> Self {
        WaitHistory((bits & 3) as u8)
    }

    /// Whether the kind's last two presumed tasks to end waited long.
    pub(crate) fn is_long(self) -> bool {
        self.0 == LONG
    }

    /// Whether a presumed task of the kind ever ended.
    pub(crate) fn is_known(self) -> bool {
        self.0 != UNKNOWN
    }

    /// The history after a presumed task of the kind ended (`None`: how
    /// long it waited is not known; nothing changes), with `in_flight`
    /// presumed tasks of the kind in flight, itself among them: long once
    /// two long ends in a row came, short at the first short end. A long
    /// end in a crowd (more than [`GATED_CAP`] in flight) changes nothing:
    /// it may have waited for the crowd itself, as a convoy's waiters
    /// queue behind each other.
    pub(crate) fn after(self, wait: Option<Wait>, in_flight: u32) -> Self {
        let Some(wait) = wait else {
            return self;
        };
        WaitHistory(match (self.0, wait) {
            (_, Wait::Short) => SHORT,
            (now, Wait::Long) if in_flight > GATED_CAP => now,
            (LONG_ONCE | LONG, Wait::Long) => LONG,
            (_, Wait::Long) => LONG_ONCE,
        })
    }
}

/// How long a presumed task waited, judged at its end ([`wait_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// [`LONG_WAIT_INTERVALS`] monitor intervals or more, not computing.
    Long,
    /// Less, or it computed.
    Short,
}

/// How long a presumed task that ended after `wall` waited, `computed` if
/// it was judged computing, with monitor interval `interval`.
pub(crate) fn wait_of(wall: Duration, computed: bool, interval: Duration) -> Wait {
    if !computed && wall >= interval * LONG_WAIT_INTERVALS {
        Wait::Long
    } else {
        Wait::Short
    }
}

/// No task of the pool ended for this many monitor intervals while work
/// was queued: the gate gives way ([`stalled`]).
pub(crate) const STALL_INTERVALS: u32 = 64;

/// Whether the pool is stalled: work queued and no task ended for
/// [`STALL_INTERVALS`] (`since_last_end`). A convoy completes at its
/// lock's rate; tasks that wait for each other (a barrier of more tasks
/// than the gate lets run, a producer waiting on a queued consumer)
/// complete nothing, and only more threads end the wait. Stalled, the gate
/// lifts ([`ceiling`], [`policy_max_threads`]'s caller).
pub(crate) fn stalled(queued: bool, since_last_end: Duration, interval: Duration) -> bool {
    queued && since_last_end >= interval * STALL_INTERVALS
}

/// The most presumed tasks of a kind a look may allow in flight: no gate
/// ([`MAX_CAP`]) if its waits are known to be long, or the pool is
/// [`stalled`]; else [`GATED_CAP`].
pub(crate) fn ceiling(history: WaitHistory, stalled: bool) -> u32 {
    if history.is_long() || stalled {
        MAX_CAP
    } else {
        GATED_CAP
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::control::presumption::{decide, Act, Record, Seen};
    use std::collections::VecDeque;

    const INTERVAL: Duration = Duration::from_millis(1);
    /// The monitor's quick pace while a cap grows: four looks an interval.
    const LOOK: Duration = Duration::from_micros(250);
    const CONCURRENCY: usize = 2;

    fn see(record: &mut Record, seen: Seen) -> Act {
        let (new, act) = decide(*record, seen);
        assert_eq!(Record::unpack(new.pack()), new, "packs losslessly");
        *record = new;
        act
    }

    #[test]
    fn long_ends_raise_the_history_and_two_short_ones_take_it_back() {
        let long = Some(wait_of(INTERVAL * LONG_WAIT_INTERVALS, false, INTERVAL));
        let short = Some(wait_of(
            INTERVAL * LONG_WAIT_INTERVALS - Duration::from_nanos(1),
            false,
            INTERVAL,
        ));
        assert_eq!(long, Some(Wait::Long));
        assert_eq!(short, Some(Wait::Short));
        assert_eq!(
            wait_of(INTERVAL * 100, true, INTERVAL),
            Wait::Short,
            "a task that computed did not wait"
        );
        let h = WaitHistory::default();
        assert!(!h.is_known() && !h.is_long());
        assert_eq!(h.after(None, 1), h, "no time: nothing");
        let h = h.after(long, 1);
        assert!(!h.is_long(), "one long end may be a stalled lock holder");
        let h = h.after(long, 1);
        assert!(h.is_long(), "two in a row");
        let h = h.after(long, 1).after(short, 1);
        assert!(!h.is_long() && h.is_known(), "a short end gates it again");
        assert!(!h.after(long, 1).is_long(), "one long end among short ones");
        let crowd = GATED_CAP + 1;
        assert_eq!(
            h.after(long, crowd).after(long, crowd),
            h,
            "long in a crowd"
        );
        assert_eq!(
            WaitHistory(LONG).after(long, crowd),
            WaitHistory(LONG),
            "a stream of long waits stays long"
        );
        assert!(
            !WaitHistory(LONG).after(short, crowd).is_long(),
            "short in a crowd"
        );
        assert!(!WaitHistory(UNKNOWN).after(long, crowd).is_known());
        for bits in 0..4 {
            assert_eq!(WaitHistory::from_bits(bits).to_bits(), bits);
        }
    }

    #[test]
    fn the_policy_is_held_only_while_every_kind_at_work_waits_briefly() {
        assert_eq!(policy_max_threads(512, 2, true), 2 + CONVOY_EXTRA_THREADS);
        assert_eq!(policy_max_threads(512, 2, false), 512);
        assert_eq!(policy_max_threads(3, 2, true), 3, "never past max_threads");
    }

    #[test]
    fn the_ceiling_is_lifted_by_long_waits_that_ended_or_a_stall() {
        assert_eq!(ceiling(WaitHistory(LONG), false), MAX_CAP);
        assert_eq!(ceiling(WaitHistory(LONG_ONCE), false), GATED_CAP);
        assert_eq!(ceiling(WaitHistory(SHORT), false), GATED_CAP);
        assert_eq!(
            ceiling(WaitHistory(UNKNOWN), false),
            GATED_CAP,
            "nothing ended yet"
        );
        assert_eq!(ceiling(WaitHistory(SHORT), true), MAX_CAP, "stalled");
    }

    #[test]
    fn a_pool_where_nothing_ends_while_work_waits_is_stalled() {
        let gap = INTERVAL * STALL_INTERVALS;
        assert!(stalled(true, gap, INTERVAL));
        assert!(
            !stalled(true, gap - INTERVAL, INTERVAL),
            "a convoy completes"
        );
        assert!(!stalled(false, gap * 10, INTERVAL), "nothing queued");
    }

    /// A fake-clock model of one kind's presumed tasks on a pool of
    /// [`CONCURRENCY`] slots: `items` queued tasks of the kind, each a
    /// wait of `wait(in_flight)` once started presumed (a lock's waiters
    /// wait for those queued ahead; a sleep waits its own time). The
    /// monitor looks every [`LOOK`]; between looks, queued tasks are
    /// presumed while the kind has room (the workers' fan-out). Returns
    /// the most presumed in flight at once and the time each task
    /// started.
    struct Model {
        record: Record,
        now: Duration,
        /// Presumed tasks in flight: when each started and when it ends.
        running: VecDeque<(Duration, Duration)>,
        most: usize,
        starts: Vec<Duration>,
    }

    impl Model {
        fn new(record: Record) -> Self {
            Model {
                record,
                now: Duration::ZERO,
                running: VecDeque::new(),
                most: 0,
                starts: Vec::new(),
            }
        }

        fn run(&mut self, items: usize, wait: impl Fn(usize) -> Duration) {
            let mut queued = items;
            self.starts.clear();
            self.most = 0;
            while queued > 0 || !self.running.is_empty() {
                // Ends due by now, each recorded with its wall time.
                let now = self.now;
                let (due, left): (Vec<_>, Vec<_>) =
                    self.running.iter().partition(|&&(_, end)| end <= now);
                self.running = left.into_iter().collect();
                for (start, end) in due {
                    let wait = wait_of(end - start, false, INTERVAL);
                    see(&mut self.record, Seen::Ended(None, Some(wait)));
                }
                // Queued tasks presumed while there is room.
                while queued > 0 && see(&mut self.record, Seen::Presume) == Act::Presume {
                    queued -= 1;
                    let end = now + wait(self.running.len() + 1);
                    self.running.push_back((now, end));
                    self.starts.push(now);
                }
                self.most = self.most.max(self.running.len());
                // A look: all asleep (a lock's waiters and sleepers alike).
                let seen = self.running.len() as u32;
                see(
                    &mut self.record,
                    Seen::Look {
                        seen,
                        asleep: seen,
                        stalled: false,
                    },
                );
                self.now += LOOK;
            }
        }

        /// The `n`th start (0-based) after sorting, as a share of the run.
        fn start_p50(&self) -> Duration {
            let mut s = self.starts.clone();
            s.sort();
            s[s.len() / 2] - s[0]
        }
    }

    /// A kind the pool learned blocks (its record), with `history`.
    fn learned(history: WaitHistory) -> Record {
        let mut r = Record::default();
        see(&mut r, Seen::Declared);
        let wait = |long| Some(if long { Wait::Long } else { Wait::Short });
        match history.0 {
            UNKNOWN => {}
            SHORT => drop(see(&mut r, Seen::Ended(None, wait(false)))),
            _ => {
                see(&mut r, Seen::Ended(None, wait(true)));
                see(&mut r, Seen::Ended(None, wait(true)));
            }
        }
        assert_eq!(r.history(), history);
        r
    }

    #[test]
    fn a_convoy_of_20_us_holds_stays_within_concurrency_plus_8() {
        // Every presumed item waits for those ahead of it on the lock, 20 µs
        // each: a queue of n waits n holds. Taught to block, and even taught
        // that it waits long (its first tasks slept 200 ms): its first two
        // short ends gate it.
        for history in [WaitHistory(UNKNOWN), WaitHistory(SHORT), WaitHistory(LONG)] {
            let mut m = Model::new(learned(history));
            m.run(10_000, |queue| Duration::from_micros(20) * queue as u32);
            // Presumed threads beside the slots, plus a spare or two.
            assert!(
                CONCURRENCY + m.most + 2 <= CONCURRENCY + 8,
                "{history:?}: {} presumed at once",
                m.most
            );
            assert!(!m.record.history().is_long(), "{:?}", m.record);
        }
    }

    #[test]
    fn a_kind_known_to_sleep_200_ms_gets_a_burst_of_500_as_fast_as_presumption_allows() {
        let sleep = |_| Duration::from_millis(200);
        // A first burst, cold: presumption holds it at the gated cap until
        // its first two end, long (in a pool, the policy's burst gives the
        // rest threads meanwhile: not modelled here), then doubles.
        let mut m = Model::new(learned(WaitHistory::default()));
        m.run(500, sleep);
        assert!(m.most >= 500 - GATED_CAP as usize, "{}", m.most);
        assert!(m.record.history().is_long());
        let cold = m.start_p50();
        // The second burst: the same as with no gate at all.
        m.run(500, sleep);
        assert_eq!(m.most, 500);
        let warm = m.start_p50();
        let mut ungated = Model::new(learned(WaitHistory(LONG)));
        ungated.run(500, sleep);
        assert_eq!(warm, ungated.start_p50(), "the gate held a known sleeper");
        assert!(warm < cold, "warm {warm:?}, cold {cold:?}");
        assert!(
            warm <= LOOK * 10,
            "{warm:?}: doubling from 2 at four looks an interval reaches 500 in 8 looks"
        );
    }

    #[test]
    fn a_kind_whose_sleepers_turn_into_a_convoy_is_gated_after_two_ends() {
        let mut m = Model::new(learned(WaitHistory::default()));
        m.run(200, |_| Duration::from_millis(200));
        assert!(m.record.history().is_long());
        m.run(10_000, |queue| Duration::from_micros(100) * queue as u32);
        assert!(m.most <= 6, "{} presumed at once", m.most);
    }
}
