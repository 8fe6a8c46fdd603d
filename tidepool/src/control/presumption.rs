//! Presumed blocking, decided: what a pool has learned about one kind of
//! task (a [`Record`]) and what it does next, as pure functions of the
//! record and what was seen. The table of records (`runtime::kinds`,
//! one per pool) only stores them and applies [`decide`] in a CAS loop;
//! the monitor (`monitor/mod.rs`) and the workers report what they see.
//!
//! # Design note
//!
//! A task's *kind* is the type of its closure or future (`runtime::kinds`).
//! Two rules read what the pool learned about a kind:
//!
//! * the quantum rule (`control::policy`) lends a slot only to work that is
//!   not known to compute ([`Record::likely_computes`]);
//! * a closure of a kind known to block is *presumed blocking* (`worker`):
//!   handed a thread of its own as it is spawned, or started without a slot
//!   by the worker that finds it, as tokio's `spawn_blocking` would run it,
//!   without being told.
//!
//! A presumption is a guess, so it is bounded three ways, each on evidence
//! gathered *now*, never on credit earned earlier:
//!
//! * **The cap.** No more presumed tasks of a kind are in flight than its
//!   cap. A kind that blocks starts with [`FRESH_CAP`] (two: a wrong guess
//!   costs at most two CPU-bound tasks beside the slots). At each monitor
//!   look ([`Seen::Look`]) the cap becomes twice the kind's presumed tasks
//!   the monitor finds asleep, if most of those it sees are
//!   ([`MOSTLY_ASLEEP`]): presumed tasks that all wait double at every look
//!   (2, 4, 8, ... 512 in eight looks, an interval apart while CPU
//!   sentinels watch, a quarter of one otherwise: `control::pace`; each
//!   look that gives room hands a queued task a thread, whose fan-out
//!   fills the room). If fewer are asleep, the cap
//!   falls to the number asleep. And as presumed tasks end, the cap falls
//!   to twice those still in flight ([`Seen::Ended`]): a kind whose burst
//!   ended has [`FRESH_CAP`] again, so its next burst, if it computes, gets
//!   two wrong guesses, not a thousand. (Before: a credit that every wait
//!   earned, up to 1,024, let 268 of a burst of 300 CPU-bound items of a
//!   kind that had blocked compute at once on 2 cores.) How far a look may
//!   raise the cap is the growth climb's to say (`control::growth`: only
//!   while the kind's completions per second rise with it, so a lock
//!   convoy's items, asleep on the lock, do not double it): the look
//!   carries its `limit`, and presumed tasks' ends are counted in the
//!   record for the climb to take ([`Seen::TakeEnds`]).
//! * **Judged while it runs.** The monitor looks at each presumed task
//!   ([`computes_while_running`]): one that computed at least a monitor
//!   interval of CPU, a quarter of its time so far and of the time since
//!   the previous look (or of the time it could run, on a loaded machine),
//!   and is runnable now, is a wrong guess *now*
//!   ([`Seen::ComputingWhileRunning`]): the kind stops being presumed at
//!   once (its presumed tasks handed out but not started take the ordinary
//!   path, waiting for a slot) and the task's worker is counted against
//!   the slots again (`control::back_from_block`'s rule). A task judged at
//!   its end instead ([`judge_end`]) counts the same way.
//! * **Pauses and ends.** A wrong guess pauses the kind: presumed again
//!   only once the monitor finds two of its tasks blocked (one sighting may
//!   be an accident). A second wrong guess before [`WAITS_TO_FORGIVE`]
//!   presumed tasks of the kind waited ends presumption for good: a kind
//!   whose tasks half block and half compute gets two rounds of guesses,
//!   not one per pause; a kind that truly blocks, once taken for computing
//!   by noise (a stalled VM's time counted as a task's CPU), is forgiven.
//!   Presumed tasks that end within an eighth of a monitor interval
//!   ([`Ended::Short`]: a lock convoy's items caught asleep, cache hits)
//!   count against the kind; [`SHORTS_TO_PAUSE`] more of them than of
//!   tasks that waited pause it until it is seen blocking again, so a
//!   convoy costs a few threads, not one per item.
//!
//! What teaches a kind that it blocks is its tasks' own behaviour: the
//! monitor finding one asleep twice ([`Seen::Blocked`]), or one declared
//! block (`tidepool::blocking`, [`Seen::Declared`]). A kind whose tasks
//! wait on the pool's own work ([`Seen::PoolWait`]: a join, `block_on`, a
//! scope's end) is never presumed: a presumed task holds no slot, so its
//! wait cannot help run what it waits for (a recursive fork-join taught
//! to block got a thread per spawn, each waiting on queued children, and
//! hung). A kind seen computing for a quantum ([`Seen::ComputedForQuantum`])
//! is not presumed until two of its tasks are found blocked again.
//!
//! Everything here is a function of its arguments (no clock, no atomic):
//! the tests below script what was seen and when.

use super::back_from_block::Look;
use super::policy::BUSY_CPU_SHARE;
use std::time::Duration;

/// The cap of a kind just known to block, and the least cap of a kind
/// that blocks: at most this many of its tasks are presumed at once before
/// the monitor has seen any of them asleep.
pub(crate) const FRESH_CAP: u32 = 2;
/// The largest cap: as many as a pool's default `max_threads`.
pub(crate) const MAX_CAP: u32 = 1024;
/// At a look, presumed tasks count as mostly asleep when at least this
/// share of those seen is (three quarters: a few of a burst caught as they
/// wake to end do not stop the doubling).
pub(crate) const MOSTLY_ASLEEP: (u32, u32) = (3, 4);
/// Short presumed tasks beyond those that waited that pause the kind.
pub(crate) const SHORTS_TO_PAUSE: u32 = 8;
/// Presumed tasks that waited after a wrong guess that forgive it: a
/// second wrong guess before that many ends presumption for good.
pub(crate) const WAITS_TO_FORGIVE: u32 = 8;
/// The most presumed ends a record counts between two takes of the
/// count ([`Seen::TakeEnds`]): the growth climb takes it at each look at
/// the kind, and judges a rate once it has a few (`control::growth`).
pub(crate) const MAX_ENDS: u32 = 0xff;
/// A presumed task that ends within this share of a monitor interval
/// (125 µs at the default 1 ms) is [`Ended::Short`]: the items of a lock
/// convoy take microseconds, while blocking worth a thread of its own takes
/// a good part of an interval.
const SHORT_SHARE: u32 = 8;

/// Tasks of the kind were seen blocking: twice by the monitor, or once
/// declared by the task itself.
const BLOCKS: u32 = 1;
/// Tasks of the kind were seen computing for a whole quantum, or a presumed
/// one computed (a pause): not presumed until seen blocking twice again.
const COMPUTES: u32 = 2;
/// Presumed tasks of the kind computed twice (without enough waits in
/// between to forgive the first): never presumed again.
const OVERRAN: u32 = 4;
/// The monitor found a task of the kind blocked once (not yet `BLOCKS`).
const BLOCKED_ONCE: u32 = 8;
/// A task of the kind waited for the pool's own work: never presumed.
const WAITS_ON_POOL: u32 = 16;
/// A presumed task of the kind computed, not forgiven yet.
const OVERRAN_ONCE: u32 = 32;
/// The flags that decide whether a kind is presumed blocking.
const VERDICT_FLAGS: u32 = BLOCKS | COMPUTES | OVERRAN | WAITS_ON_POOL;

/// What a pool knows about one kind, packed into 48 bits of a table word
/// (the other 16 are the kind's tag: `runtime::kinds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Record {
    flags: u32,
    /// How many presumed tasks may be in flight at once, at most
    /// [`MAX_CAP`]; 0 until the kind blocks.
    cap: u32,
    /// Presumed tasks of the kind started and not ended yet.
    in_flight: u32,
    /// Short presumed ends not yet balanced by waits, up to
    /// [`SHORTS_TO_PAUSE`].
    shorts: u32,
    /// Presumed tasks that waited since the last wrong guess, up to
    /// [`WAITS_TO_FORGIVE`].
    waits: u32,
    /// Presumed tasks of the kind that ran and ended since the growth
    /// climb last took the count ([`Seen::TakeEnds`]), up to [`MAX_ENDS`].
    ends: u32,
}

impl Record {
    /// The record packed in `bits` (the low 48 of a table word): the
    /// flags in 8 bits, the cap and the tasks in flight in 12 each (both
    /// at most [`MAX_CAP`]: a task is presumed only below the cap), the
    /// short ends and the waits in 4 each, the ends in 8.
    pub(crate) fn unpack(bits: u64) -> Record {
        Record {
            flags: (bits & 0xff) as u32,
            cap: (bits >> 8 & 0xfff) as u32,
            in_flight: (bits >> 20 & 0xfff) as u32,
            shorts: (bits >> 32 & 0xf) as u32,
            waits: (bits >> 36 & 0xf) as u32,
            ends: (bits >> 40 & 0xff) as u32,
        }
    }

    /// The record in 48 bits.
    pub(crate) fn pack(self) -> u64 {
        u64::from(self.flags & 0xff)
            | u64::from(self.cap.min(0xfff)) << 8
            | u64::from(self.in_flight.min(0xfff)) << 20
            | u64::from(self.shorts.min(0xf)) << 32
            | u64::from(self.waits.min(0xf)) << 36
            | u64::from(self.ends.min(MAX_ENDS)) << 40
    }

    /// The most presumed tasks of the kind in flight at once now.
    pub(crate) fn cap(self) -> u32 {
        self.cap
    }

    /// Presumed tasks of the kind that ran and ended since the growth
    /// climb last took the count ([`Seen::TakeEnds`]).
    pub(crate) fn ends(self) -> u32 {
        self.ends
    }

    /// Whether the kind's closures are presumed blocking now (room aside):
    /// seen blocking, neither computing since nor waiting on the pool, and
    /// not paused by short tasks.
    pub(crate) fn may_presume(self) -> bool {
        self.flags & VERDICT_FLAGS == BLOCKS && self.shorts < SHORTS_TO_PAUSE
    }

    /// Whether one more task of the kind would be presumed now.
    pub(crate) fn has_room(self) -> bool {
        self.may_presume() && self.in_flight < self.cap
    }

    /// Whether tasks of the kind were seen computing for a quantum and
    /// never blocking: a lent slot would only add a CPU-bound thread.
    pub(crate) fn likely_computes(self) -> bool {
        // Whether it waits on the pool says nothing about its computing.
        self.flags & (VERDICT_FLAGS & !WAITS_ON_POOL) == COMPUTES
    }

    /// Whether tasks of the kind waited for the pool's own work.
    pub(crate) fn waits_on_pool(self) -> bool {
        self.flags & WAITS_ON_POOL != 0
    }

    /// Presumed tasks of the kind in flight.
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn in_flight(self) -> u32 {
        self.in_flight
    }

    /// What the record says, as reports show it.
    pub(crate) fn learned(self) -> Learned {
        Learned {
            presumed: self.may_presume(),
            computes: self.likely_computes(),
            waits_on_pool: self.waits_on_pool(),
        }
    }

    /// Seen blocking: the kind blocks, with at least a fresh cap; the
    /// blocking outweighs an earlier sighting of a task computing for a
    /// quantum, or a paused wrong guess (not two: `OVERRAN` stays), and
    /// clears the short ends held against it.
    fn blocks(self) -> Record {
        Record {
            flags: (self.flags | BLOCKS) & !COMPUTES,
            cap: self.cap.max(FRESH_CAP),
            shorts: 0,
            ..self
        }
    }

    /// A presumed task computed: the kind is paused (a second time before
    /// it is forgiven: never presumed again).
    fn overran(self) -> Record {
        if self.flags & OVERRAN_ONCE != 0 {
            return Record {
                flags: self.flags | OVERRAN,
                ..self
            };
        }
        Record {
            flags: (self.flags | OVERRAN_ONCE | COMPUTES) & !BLOCKED_ONCE,
            waits: 0,
            ..self
        }
    }
}

/// What the pool has learned about a kind, as reports show it
/// (`Metrics::kinds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Learned {
    /// Its closures are presumed blocking: handed a thread of their own as
    /// they are spawned, within its cap.
    pub(crate) presumed: bool,
    /// Its tasks were seen computing for a quantum, and not blocking since.
    pub(crate) computes: bool,
    /// Its tasks wait for the pool's own work: never presumed.
    pub(crate) waits_on_pool: bool,
}

/// What a presumed task turned out to do, judged at its end ([`judge_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It waited past a monitor interval without computing: right guess.
    Waited,
    /// It ended within a small part of a monitor interval: a thread spent
    /// for little.
    Short,
    /// It kept a core busy: a wrong guess.
    Computed,
}

/// What was seen of a kind (and by whom), for [`decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The monitor found a task of the kind blocked and gave its slot
    /// away. The second time (for a kind not known to block yet) the kind
    /// blocks: one sighting may be an accident, like an item of a lock
    /// convoy caught asleep while the lock's holder was preempted (one
    /// such sighting in 100,000 items handed the items after it 44
    /// threads).
    Blocked,
    /// A task of the kind declared a block that outlasted its grace
    /// (`tidepool::blocking`): the kind blocks, from the first time.
    Declared,
    /// A task of the kind entered a helping wait: never presumed.
    PoolWait,
    /// The monitor found a task of the kind computing for a whole quantum
    /// (at a CPU share a blocked task never reaches).
    ComputedForQuantum,
    /// A task of the kind asks to be presumed blocking: one more in
    /// flight, if there is room.
    Presume,
    /// A presumed task of the kind ran and ended, having done what it
    /// says (`None`: not judged here, because the monitor judged it while
    /// it ran): one more end for the growth climb to count.
    Ended(Option<Ended>),
    /// A task that held one of the kind's presumed places gives it back
    /// without having run presumed.
    GivenBack,
    /// The growth climb takes the count of the kind's presumed ends
    /// (`Record::ends`, read from the record this is applied to): the
    /// count starts again from nothing.
    TakeEnds,
    /// The monitor judged a presumed task of the kind computing while it
    /// runs ([`computes_while_running`]).
    ComputingWhileRunning,
    /// One monitor look at the kind's presumed tasks running now: `seen`
    /// of them, `asleep` of those asleep. The cap it sets is at most
    /// `limit`, the growth climb's level for the kind (`control::growth`;
    /// the climb asks [`look_cap`] what the look would set).
    Look {
        /// Presumed tasks of the kind the monitor saw running.
        seen: u32,
        /// Of those, how many the kernel said sleep.
        asleep: u32,
        /// The most the cap may be after the look.
        limit: u32,
    },
}

impl Seen {
    /// Whether this may take over a table word another kind holds (whose
    /// history is then forgotten): what teaches a kind does; what only
    /// follows up on a presumption (its end, a look, a verdict) has nothing
    /// to teach a kind that lost its word, and leaves the word alone.
    pub(crate) fn takes_over(self) -> bool {
        matches!(
            self,
            Seen::Blocked | Seen::Declared | Seen::PoolWait | Seen::ComputedForQuantum
        )
    }
}

/// What to do after [`decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    /// Nothing more.
    Nothing,
    /// [`Seen::Presume`]: start the task presumed blocking (it holds one
    /// place among the kind's in flight; give it back with
    /// [`Seen::Ended`]).
    Presume,
    /// [`Seen::Presume`]: run it the ordinary way, with a slot.
    Refuse,
    /// [`Seen::Look`] grew the cap and the kind has room: queued tasks of
    /// the kind may be handed threads now, and the next look should come
    /// soon.
    MoreRoom,
}

/// The new record of a kind whose record is `old`, after `seen`, and what
/// to do.
pub(crate) fn decide(old: Record, seen: Seen) -> (Record, Act) {
    match seen {
        Seen::Blocked => {
            let known = old.flags & BLOCKS != 0 && old.flags & COMPUTES == 0;
            let new = if !known && old.flags & BLOCKED_ONCE == 0 {
                Record {
                    flags: old.flags | BLOCKED_ONCE,
                    ..old
                }
            } else {
                old.blocks()
            };
            (new, Act::Nothing)
        }
        Seen::Declared => (old.blocks(), Act::Nothing),
        Seen::PoolWait => (
            Record {
                flags: old.flags | WAITS_ON_POOL,
                ..old
            },
            Act::Nothing,
        ),
        Seen::ComputedForQuantum => (
            Record {
                flags: (old.flags | COMPUTES) & !BLOCKED_ONCE,
                ..old
            },
            Act::Nothing,
        ),
        Seen::Presume if old.has_room() => (
            Record {
                in_flight: old.in_flight + 1,
                ..old
            },
            Act::Presume,
        ),
        Seen::Presume => (old, Act::Refuse),
        Seen::Ended(what) => (
            Record {
                ends: (old.ends + 1).min(MAX_ENDS),
                ..ended(old, what)
            },
            Act::Nothing,
        ),
        Seen::GivenBack => (ended(old, None), Act::Nothing),
        Seen::TakeEnds => (Record { ends: 0, ..old }, Act::Nothing),
        Seen::ComputingWhileRunning => (old.overran(), Act::Nothing),
        Seen::Look {
            seen,
            asleep,
            limit,
        } => look(old, seen, asleep, limit),
    }
}

/// A presumed task ended ([`Seen::Ended`]): its place is given back, and
/// the cap falls to twice the places still held (never below
/// [`FRESH_CAP`]): room earned by tasks that waited goes with them.
fn ended(old: Record, what: Option<Ended>) -> Record {
    let in_flight = old.in_flight.saturating_sub(1);
    let mut new = Record {
        in_flight,
        cap: old.cap.min((2 * in_flight).max(FRESH_CAP)),
        ..old
    };
    match what {
        Some(Ended::Waited) => {
            new.shorts = old.shorts.saturating_sub(1);
            if old.flags & OVERRAN_ONCE != 0 {
                new.waits = old.waits + 1;
                if new.waits >= WAITS_TO_FORGIVE {
                    new.flags &= !OVERRAN_ONCE;
                    new.waits = 0;
                }
            }
        }
        Some(Ended::Short) => new.shorts = (old.shorts + 1).min(SHORTS_TO_PAUSE),
        Some(Ended::Computed) => new = new.overran(),
        None => {}
    }
    new
}

/// The cap a look at `seen` of the kind's presumed tasks, `asleep` of
/// them asleep, would set on `old` before the growth climb's limit
/// ([`Seen::Look`]): twice those asleep while most are, else the number
/// asleep (never below [`FRESH_CAP`], never above [`MAX_CAP`]); the cap
/// as it is if the look saw none (the ends bring the cap down) or the kind
/// is not known to block.
pub(crate) fn look_cap(old: Record, seen: u32, asleep: u32) -> u32 {
    if seen == 0 || old.flags & BLOCKS == 0 {
        return old.cap;
    }
    // Only tasks still in flight are evidence: a look taken before some of
    // them ended, applied after, would give room for tasks that are gone
    // (a burst's last look, applied after its last end, gave the next
    // burst of the kind, which computed, room for 16).
    let asleep = asleep.min(seen).min(old.in_flight);
    let (part, whole) = MOSTLY_ASLEEP;
    if asleep > 0 && asleep * whole >= seen * part {
        2 * asleep
    } else {
        asleep
    }
    .clamp(FRESH_CAP, MAX_CAP)
}

/// One look at the kind's presumed tasks ([`Seen::Look`]): the cap becomes
/// [`look_cap`]'s, at most `limit` (the growth climb's level) and never
/// below [`FRESH_CAP`].
fn look(old: Record, seen: u32, asleep: u32, limit: u32) -> (Record, Act) {
    if seen == 0 || old.flags & BLOCKS == 0 {
        return (old, Act::Nothing);
    }
    let cap = look_cap(old, seen, asleep).min(limit).max(FRESH_CAP);
    let new = Record { cap, ..old };
    let act = if cap > old.cap && new.has_room() {
        Act::MoreRoom
    } else {
        Act::Nothing
    };
    (new, act)
}

/// Judges a presumed task that just ended, after `wall` of which it used
/// `cpu` (`None`: no CPU clock): it computed if it used at least a monitor
/// `interval` of CPU, at a CPU share a blocked task never reaches
/// ([`BUSY_CPU_SHARE`]) of its wall time, or of the time it could run (its
/// wall time less what `waited_for_core` says it spent runnable waiting
/// for a core: asked only when the wall time's share falls short). It was
/// short if it ended within an eighth of an interval, and it waited if it
/// lasted an interval or more. In between (a wait of a few hundred
/// microseconds): no evidence either way.
///
/// Without the discount, on a loaded machine a computing task got less
/// than the share of its wall time, was taken for blocking, and was
/// presumed again: more CPU-bound threads where the cores were already
/// short (`tests/control_presumed.rs` failed 1 run in 20 on it).
pub(crate) fn judge_end(
    cpu: Option<Duration>,
    wall: Duration,
    interval: Duration,
    waited_for_core: impl FnOnce() -> Option<Duration>,
) -> Option<Ended> {
    match cpu {
        Some(cpu) if computed(cpu, wall, interval, waited_for_core) => Some(Ended::Computed),
        _ if wall < interval / SHORT_SHARE => Some(Ended::Short),
        _ if wall >= interval => Some(Ended::Waited),
        _ => None,
    }
}

/// Whether `cpu` over `wall` is a task that computed (see [`judge_end`]).
fn computed(
    cpu: Duration,
    wall: Duration,
    interval: Duration,
    waited_for_core: impl FnOnce() -> Option<Duration>,
) -> bool {
    if cpu < interval {
        return false;
    }
    busy_share(cpu, wall)
        || waited_for_core().is_some_and(|waited| busy_share(cpu, wall.saturating_sub(waited)))
}

/// Whether `cpu` is at least [`BUSY_CPU_SHARE`] of `wall` (and `wall` is
/// not zero).
fn busy_share(cpu: Duration, wall: Duration) -> bool {
    !wall.is_zero() && cpu.as_secs_f64() >= wall.as_secs_f64() * BUSY_CPU_SHARE
}

/// Whether a presumed task that is still running computes, judged by the
/// monitor at a look: `first` is its first look at the task (when it was
/// first seen, presumed), `previous` the look before this one, `now` this
/// one. It computes when it is runnable now, used at least a monitor
/// `interval` of CPU since it was first seen, and used a core
/// ([`BUSY_CPU_SHARE`]) over that time *and* since the previous look, or,
/// on a loaded machine, over the time it could run
/// (`computed_when_it_could`: the monitor's reading of its run delay,
/// asked only when the CPU shares fall short). A short task, or one
/// preempted a moment, is no verdict; a task that computed first and then
/// blocks is judged at a look that finds it asleep: not computing. Without
/// a CPU clock there is no verdict.
pub(crate) fn computes_while_running(
    first: Look,
    previous: Option<Look>,
    now: Look,
    interval: Duration,
    computed_when_it_could: impl FnOnce() -> bool,
) -> bool {
    if now.asleep {
        return false;
    }
    let (Some(cpu_first), Some(cpu_now)) = (first.cpu, now.cpu) else {
        return false;
    };
    let cpu = cpu_now.saturating_sub(cpu_first);
    if cpu < interval {
        return false;
    }
    let so_far = busy_share(cpu, now.at.saturating_duration_since(first.at));
    let recently = previous.is_some_and(|p| {
        p.cpu.is_some_and(|before| {
            busy_share(
                cpu_now.saturating_sub(before),
                now.at.saturating_duration_since(p.at),
            )
        })
    });
    (so_far && recently) || computed_when_it_could()
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use std::time::Instant;

    const INTERVAL: Duration = Duration::from_millis(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Applies `seen` to `record` in place; returns what to do.
    fn see(record: &mut Record, seen: Seen) -> Act {
        let (new, act) = decide(*record, seen);
        assert_eq!(Record::unpack(new.pack()), new, "packs losslessly");
        *record = new;
        act
    }

    /// A look that saw `seen` presumed tasks, `asleep` of them asleep.
    fn seen(seen: u32, asleep: u32) -> Seen {
        Seen::Look {
            seen,
            asleep,
            limit: MAX_CAP,
        }
    }

    /// A record of a kind known to block (declared once).
    fn blocking() -> Record {
        let mut r = Record::default();
        see(&mut r, Seen::Declared);
        r
    }

    /// Presumes as many as there is room for; returns how many.
    fn fill(record: &mut Record) -> u32 {
        let mut n = 0;
        while see(record, Seen::Presume) == Act::Presume {
            n += 1;
        }
        n
    }

    #[test]
    fn a_kind_is_presumed_once_seen_blocking_twice_or_declared_once() {
        let mut r = Record::default();
        assert!(!r.has_room(), "nothing seen yet");
        assert_eq!(see(&mut r, Seen::Presume), Act::Refuse);
        see(&mut r, Seen::Blocked);
        assert!(!r.has_room(), "one sighting may be an accident");
        see(&mut r, Seen::Blocked);
        assert!(r.has_room(), "seen twice");
        assert!(blocking().has_room(), "declared: known from the first time");
        assert!(r.learned().presumed);
    }

    #[test]
    fn a_kind_new_to_blocking_gets_a_fresh_cap_of_two() {
        let mut r = blocking();
        assert_eq!(fill(&mut r), FRESH_CAP);
        assert_eq!(r.in_flight(), FRESH_CAP);
        see(&mut r, Seen::Ended(None));
        assert_eq!(fill(&mut r), 1, "a place given back is room for one");
    }

    #[test]
    fn the_cap_doubles_at_each_look_that_finds_them_asleep() {
        let mut r = blocking();
        // 2, 4, 8, ... 512: hundreds within a few intervals at the quick
        // pace of four looks per interval.
        for _ in 0..8 {
            fill(&mut r);
            let n = r.in_flight();
            assert_eq!(see(&mut r, seen(n, n)), Act::MoreRoom);
        }
        fill(&mut r);
        assert_eq!(r.in_flight(), 512, "{r:?}");
        for _ in 0..2 {
            let n = r.in_flight();
            see(&mut r, seen(n, n));
            fill(&mut r);
        }
        assert_eq!(r.cap, MAX_CAP, "{r:?}");
        assert_eq!(r.in_flight(), MAX_CAP, "{r:?}");
    }

    #[test]
    fn a_look_that_finds_most_asleep_still_doubles_and_one_that_does_not_falls_back() {
        let mut r = blocking();
        fill(&mut r);
        see(&mut r, seen(2, 2));
        fill(&mut r);
        see(&mut r, seen(4, 4));
        assert_eq!(fill(&mut r), 4);
        // Seen 8, 7 asleep (one caught as it wakes to end).
        see(&mut r, seen(8, 7));
        assert_eq!(r.cap, 14, "most asleep: twice those asleep");
        fill(&mut r);
        // Then half of them compute: the cap falls to those asleep, and no
        // more start until the in flight fall below it.
        see(&mut r, seen(14, 7));
        assert_eq!(r.cap, 7);
        assert_eq!(see(&mut r, Seen::Presume), Act::Refuse);
        // None asleep: back to the fresh cap.
        see(&mut r, seen(14, 0));
        assert_eq!(r.cap, FRESH_CAP);
    }

    #[test]
    fn a_look_counts_only_tasks_still_in_flight() {
        let mut r = blocking();
        fill(&mut r);
        see(&mut r, seen(2, 2));
        fill(&mut r);
        assert_eq!(r.in_flight(), 4);
        // Seen asleep, then they end before the look is applied.
        for _ in 0..4 {
            see(&mut r, Seen::Ended(Some(Ended::Waited)));
        }
        assert_eq!(see(&mut r, seen(4, 4)), Act::Nothing);
        assert_eq!(r.cap, FRESH_CAP, "no room for tasks that are gone");
        fill(&mut r);
        see(&mut r, Seen::Ended(None));
        see(&mut r, seen(2, 2));
        assert_eq!(r.cap, FRESH_CAP, "twice the one still in flight");
    }

    #[test]
    fn a_look_at_none_changes_nothing() {
        let mut r = blocking();
        fill(&mut r);
        let before = r;
        assert_eq!(see(&mut r, seen(0, 0)), Act::Nothing);
        assert_eq!(r, before);
        // Asleep is never more than seen.
        see(&mut r, seen(1, 9));
        assert_eq!(r.cap, FRESH_CAP);
    }

    #[test]
    fn room_earned_by_a_burst_that_ended_is_gone_for_the_next_burst() {
        // A burst of 500 that block: the cap grows to 512.
        let mut r = blocking();
        for _ in 0..8 {
            fill(&mut r);
            let n = r.in_flight();
            see(&mut r, seen(n, n));
        }
        fill(&mut r);
        assert!(r.cap >= 500, "{r:?}");
        // They all end, having waited.
        while r.in_flight() > 0 {
            see(&mut r, Seen::Ended(Some(Ended::Waited)));
        }
        assert_eq!(r.cap, FRESH_CAP, "{r:?}");
        // The next burst computes: two are presumed, not hundreds.
        assert_eq!(fill(&mut r), FRESH_CAP);
    }

    #[test]
    fn a_presumed_task_computing_while_it_runs_pauses_the_kind_at_once() {
        let mut r = blocking();
        assert_eq!(fill(&mut r), 2);
        see(&mut r, Seen::ComputingWhileRunning);
        assert!(!r.may_presume(), "paused");
        assert_eq!(see(&mut r, Seen::Presume), Act::Refuse);
        // The other one computed too: never presumed again.
        see(&mut r, Seen::Ended(Some(Ended::Computed)));
        see(&mut r, Seen::Ended(None));
        assert_eq!(r.in_flight(), 0);
        for _ in 0..4 {
            see(&mut r, Seen::Blocked);
            see(&mut r, Seen::Declared);
        }
        assert!(!r.may_presume(), "two wrong guesses: for good");
    }

    #[test]
    fn a_paused_kind_is_presumed_again_once_seen_blocking_twice() {
        let mut r = blocking();
        fill(&mut r);
        see(&mut r, Seen::Ended(Some(Ended::Computed)));
        assert!(!r.may_presume());
        see(&mut r, Seen::Blocked);
        assert!(!r.may_presume(), "one sighting may be an accident");
        see(&mut r, Seen::Blocked);
        assert!(r.may_presume(), "seen blocking twice since");
        // Forgiven after enough waits: one more wrong guess only pauses.
        for _ in 0..WAITS_TO_FORGIVE {
            see(&mut r, Seen::Ended(Some(Ended::Waited)));
        }
        see(&mut r, Seen::ComputingWhileRunning);
        see(&mut r, Seen::Blocked);
        see(&mut r, Seen::Blocked);
        assert!(r.may_presume(), "the first wrong guess was forgiven");
        // Not forgiven: a second wrong guess ends it.
        see(&mut r, Seen::Ended(Some(Ended::Waited)));
        see(&mut r, Seen::ComputingWhileRunning);
        see(&mut r, Seen::Blocked);
        see(&mut r, Seen::Blocked);
        assert!(!r.may_presume(), "two wrong guesses, one wait between");
    }

    #[test]
    fn short_presumed_tasks_pause_the_kind_until_it_is_seen_blocking_again() {
        let mut r = blocking();
        for _ in 0..SHORTS_TO_PAUSE - 1 {
            assert_eq!(see(&mut r, Seen::Presume), Act::Presume);
            see(&mut r, Seen::Ended(Some(Ended::Short)));
        }
        assert!(r.has_room(), "one short end left");
        see(&mut r, Seen::Presume);
        see(&mut r, Seen::Ended(Some(Ended::Waited)));
        for _ in 0..2 {
            see(&mut r, Seen::Presume);
            see(&mut r, Seen::Ended(Some(Ended::Short)));
        }
        assert!(!r.has_room(), "paused by short ends");
        see(&mut r, Seen::Blocked);
        assert!(r.has_room(), "seen blocking again");
    }

    #[test]
    fn ends_are_counted_for_the_growth_climb_and_a_look_stays_within_its_limit() {
        let mut r = blocking();
        fill(&mut r);
        see(&mut r, Seen::Ended(Some(Ended::Waited)));
        see(&mut r, Seen::Ended(None));
        assert_eq!(r.ends(), 2, "both ran");
        see(&mut r, Seen::Presume);
        see(&mut r, Seen::GivenBack);
        assert_eq!(r.ends(), 2, "a place given back unrun is no end");
        assert_eq!(r.in_flight(), 0);
        see(&mut r, Seen::TakeEnds);
        assert_eq!(r.ends(), 0, "taken");
        for _ in 0..MAX_ENDS + 10 {
            see(&mut r, Seen::Ended(None));
        }
        assert_eq!(r.ends(), MAX_ENDS, "saturates");
        // A look asks for twice those asleep; the climb's limit bounds it.
        fill(&mut r);
        assert_eq!(look_cap(r, 2, 2), 4);
        let limited = Seen::Look {
            seen: 2,
            asleep: 2,
            limit: FRESH_CAP,
        };
        assert_eq!(see(&mut r, limited), Act::Nothing);
        assert_eq!(r.cap(), FRESH_CAP, "held at the limit");
        assert_eq!(see(&mut r, seen(2, 2)), Act::MoreRoom);
        assert_eq!(r.cap(), 4);
        assert_eq!(look_cap(r, 0, 0), 4, "a look that saw none");
        assert_eq!(look_cap(Record::default(), 2, 2), 0, "not known to block");
    }

    #[test]
    fn a_kind_seen_computing_for_a_quantum_needs_two_blocked_sightings_again() {
        let mut r = Record::default();
        see(&mut r, Seen::Blocked);
        see(&mut r, Seen::Blocked);
        see(&mut r, Seen::ComputedForQuantum);
        assert!(!r.may_presume());
        assert!(!r.likely_computes(), "it was seen blocking too");
        see(&mut r, Seen::Blocked);
        see(&mut r, Seen::ComputedForQuantum);
        see(&mut r, Seen::Blocked);
        assert!(!r.may_presume(), "computing in between: count again");
        see(&mut r, Seen::Blocked);
        assert!(r.may_presume());
        let mut c = Record::default();
        see(&mut c, Seen::ComputedForQuantum);
        assert!(c.likely_computes() && c.learned().computes);
    }

    #[test]
    fn a_kind_that_waits_on_the_pool_is_never_presumed() {
        let mut r = blocking();
        see(&mut r, Seen::PoolWait);
        assert!(!r.may_presume());
        see(&mut r, Seen::Declared);
        see(&mut r, Seen::Blocked);
        assert!(!r.may_presume(), "for good");
        assert!(r.learned().waits_on_pool);
    }

    #[test]
    fn only_what_teaches_takes_a_word_over() {
        assert!(Seen::Blocked.takes_over());
        assert!(Seen::ComputedForQuantum.takes_over());
        assert!(!Seen::Presume.takes_over());
        assert!(!Seen::Ended(None).takes_over());
        assert!(!Seen::GivenBack.takes_over());
        assert!(!Seen::TakeEnds.takes_over());
        assert!(!seen(1, 1).takes_over());
        assert!(!Seen::ComputingWhileRunning.takes_over());
    }

    #[test]
    fn a_task_judged_at_its_end() {
        let unasked = || -> Option<Duration> { panic!("the CPU share decided") };
        assert_eq!(
            judge_end(Some(ms(5)), ms(20), INTERVAL, unasked),
            Some(Ended::Computed)
        );
        assert_eq!(
            judge_end(Some(Duration::from_micros(900)), ms(1), INTERVAL, unasked),
            Some(Ended::Waited),
            "under an interval of CPU: not computing"
        );
        assert_eq!(
            judge_end(
                Some(Duration::ZERO),
                Duration::from_micros(50),
                INTERVAL,
                || None
            ),
            Some(Ended::Short)
        );
        assert_eq!(
            judge_end(None, Duration::from_micros(500), INTERVAL, || None),
            None,
            "in between: no evidence"
        );
        // 3 ms of CPU in 20 ms, 16 of them runnable on a loaded machine:
        // it computed whenever it could; asleep instead, it waited.
        assert_eq!(
            judge_end(Some(ms(3)), ms(20), INTERVAL, || Some(ms(16))),
            Some(Ended::Computed)
        );
        assert_eq!(
            judge_end(Some(ms(3)), ms(20), INTERVAL, || Some(Duration::ZERO)),
            Some(Ended::Waited)
        );
    }

    /// A look `at_ms` after `t0`, with `cpu_us` of CPU.
    fn at(t0: Instant, at_ms: u64, asleep: bool, cpu_us: Option<u64>) -> Look {
        Look {
            at: t0 + ms(at_ms),
            asleep,
            cpu: cpu_us.map(Duration::from_micros),
            run_delay: None,
        }
    }

    #[test]
    fn a_running_task_that_computes_is_judged_within_a_couple_of_looks() {
        let t0 = Instant::now();
        let unasked = || panic!("the CPU shares decided");
        let first = at(t0, 0, false, Some(0));
        // One look later: 900 µs of CPU, under an interval: no verdict yet.
        let one = at(t0, 1, false, Some(900));
        assert!(!computes_while_running(
            first,
            Some(first),
            one,
            INTERVAL,
            || false
        ));
        // Two looks later: 1.8 ms of 2, and 0.9 of the last 1.
        let two = at(t0, 2, false, Some(1_800));
        assert!(computes_while_running(
            first,
            Some(one),
            two,
            INTERVAL,
            unasked
        ));
    }

    #[test]
    fn a_running_task_asleep_now_or_without_a_clock_is_no_verdict() {
        let t0 = Instant::now();
        let first = at(t0, 0, false, Some(0));
        let prev = at(t0, 4, false, Some(3_000));
        // Computed 3 ms, then fell asleep: a fetch after a computation.
        let asleep = at(t0, 5, true, Some(3_000));
        assert!(!computes_while_running(
            first,
            Some(prev),
            asleep,
            INTERVAL,
            || true
        ));
        let no_clock = at(t0, 5, false, None);
        assert!(!computes_while_running(
            first,
            Some(prev),
            no_clock,
            INTERVAL,
            || true
        ));
    }

    #[test]
    fn a_running_task_that_computed_then_slept_and_woke_is_judged_by_both_windows() {
        let t0 = Instant::now();
        let first = at(t0, 0, false, Some(0));
        // 3 ms of CPU in 10 ms so far (30%), but only 100 µs of the last 2:
        // runnable, just woken, not computing now.
        let prev = at(t0, 8, true, Some(2_900));
        let now = at(t0, 10, false, Some(3_000));
        assert!(!computes_while_running(
            first,
            Some(prev),
            now,
            INTERVAL,
            || false
        ));
        // On a loaded machine the monitor's run-delay reading decides.
        assert!(computes_while_running(
            first,
            Some(prev),
            now,
            INTERVAL,
            || true
        ));
    }
}
