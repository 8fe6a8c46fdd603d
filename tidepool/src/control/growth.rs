//! The growth climb: how far a monitor look may raise the cap on a kind's
//! presumed tasks (`control::presumption`), from whether the kind's
//! completions per second rise as its cap does (issue #41, "lock convoys
//! stay small").
//!
//! # Design note
//!
//! ## The problem
//!
//! Tiny items that all take one mutex form a convoy: the lock lets one of
//! them run at a time, and the others sleep in a futex. Asleep, they look
//! like waits to the monitor. A kind known to block has its presumed
//! tasks' cap doubled at every look that finds them mostly asleep, and a
//! convoy's waiters are asleep: each thread added joins the queue on the
//! lock, so each item waits longer and the next look finds more of them
//! asleep. 10,000 items holding one mutex for 100 µs, of a kind taught to
//! block first, reached 512 threads (`max_threads`) on 2 slots at
//! c895626. Waiting for a sibling that holds the lock is not evidence that
//! a thread helps: the lock's rate is the kind's rate, whatever the count.
//!
//! ## The rule
//!
//! Little's law: `L` presumed tasks in flight, each waiting `W`, complete
//! `L / W` per second. A task that waits for something outside the pool
//! (a sleep, a socket, a peer) waits as long however many wait beside it:
//! doubling `L` doubles the completions. A convoy's item waits for the
//! items ahead of it on the lock, `W = L × hold`: its completions stay at
//! one per hold whatever `L`. So a kind's cap may rise only while its
//! completions per second rise with it: a hill climb on the rate.
//!
//! The monitor keeps one [`Climb`] per kind with presumed tasks. Its
//! *level* is the most the kind's cap may be after a look (the look's
//! `limit`); presumption sets the cap below it as it always did. A look
//! that would raise the cap above the level (`presumption::look_cap`:
//! twice those asleep, when most are) asks the climb to step up, and the
//! climb answers from the presumed tasks' ends, counted in the kind's
//! record as they end and taken at each look ([`Step`]):
//!
//! * **Waits outside the process: no climb.** A look at which more than a
//!   quarter of the kind's asleep presumed tasks the kernel was asked
//!   about sleep in a system call other than a futex (`sys::WaitsFor`,
//!   from `/proc/self/task/<tid>/syscall`: a timer, a socket, a pipe, a
//!   disk) lets the level follow the look up at once and does not hold the
//!   kind ([`Climb::waits_outside`]): such a wait ends on its own however
//!   many wait beside it, which is all the rate below would find out, a
//!   few intervals later. A convoy's waiters all sleep in the lock's futex
//!   (std's and parking_lot's mutexes, condvars, channels, `thread::park`),
//!   bar its holder if it holds the lock across a wait of its own. Waits
//!   that a thread of the process ends for an outside event sleep in a
//!   futex too (a mutex a thread outside the pool holds, a blocking
//!   client's reply): a kind of only those is judged by its rate. A
//!   quarter, not a half: the lab's short-blocking kind half sleeps, half
//!   waits on mutexes another thread holds, and judged by its rate it was
//!   found blocked on slots three times as often as on main (about a
//!   millisecond more at its slowest starts). The monitor asks about each
//!   task once, at most 250 a second ([`Climb::waited_outside`] says what
//!   a look with no answer goes by: the last look's verdict, if recent);
//!   asking about every task doubled short-blocking's monitor time.
//!   Without this rule a burst of 500 sleeps of 200 ms started at 16 ms p50
//!   against 13 cold, and 13 against 7.8 warm (the free phase below
//!   delayed its doubling); with it, cold level with main (10.4-11.9
//!   against 10.4-14.0), warm 8.3-9.7 against 7.3-7.9 beside the cold
//!   rows and 7.1-7.8 against 6.6-7.3 alone (3 rounds of 5 each).
//! * **Nothing ended yet: up once an interval, after a few.** While
//!   no task of the kind has ended since the climb began (neither a
//!   presumed one nor, as far as the monitor saw, one on a slot), and it
//!   began at least [`FREE_AFTER_INTERVALS`] monitor intervals ago, the
//!   level follows the look up, at most once a monitor interval: a kind
//!   whose tasks all wait longer than that in the process (a rendezvous,
//!   a condvar) doubles once an interval from its first burst (waits
//!   outside the process, a sleep or a socket, follow every look as
//!   presumption alone would: the first rule). Not at every look: a
//!   convoy whose lock holder is kept off the cores ends nothing for a
//!   few intervals, and doubling at each of the four looks an interval
//!   took a taught convoy to 512 threads once in 7 lab rounds. A
//!   convoy's items end within a few holds, well inside that time, and go
//!   on to be measured. The ends on slots matter: std's mutex is unfair,
//!   the slot holders that release it and take it again for their next
//!   item barge in, and the presumed waiters asleep in the futex saw no
//!   end for 10 ms and more while the kind ended items all the time
//!   (counting presumed ends alone, an untaught convoy of 10,000 x 100 µs
//!   reached 97-252 threads in 2 runs of 5). The monitor sees a slot's
//!   task end when the worker's task at its last tick is gone at this one
//!   (`Monitor::saw_task_end`, at most one per worker and tick): evidence
//!   that tasks end, never counted in a rate, and only for a task it first
//!   saw since the climb began (a rendezvous's second burst, starting as
//!   the first one's tasks ended, took their ends for its own and had 74
//!   of 200 presumed).
//! * **Then the rate decides, probing up and stepping back down.** Once
//!   tasks end, the climb measures the ends per second while the kind
//!   presses against its level (a window that starts when the level
//!   changes, or after a lull: a kind that has not pressed for
//!   [`LULL_INTERVALS`]; shorter lulls are an arrival-limited kind's
//!   between arrivals, and a window that restarted at each of them never
//!   filled: short-blocking's kind sat at 2 for 1,100 looks), and judges
//!   once the window holds [`MIN_ENDS`] ends. A window with no probe under
//!   way is a *base*: the level steps up (a probe, at most a doubling),
//!   and the probe's window opens once the tasks in flight at the step
//!   could have ended ([`Rate::turnover`], Little's law), so its rate is
//!   the new level's. A probe is kept if its rate rose over the base by at
//!   least half as much as the level did ([`Rate::rose_over`]: 1.5 times
//!   for a doubling; waits outside the pool give twice), and, while every
//!   task at work is of a held kind, if the pool's completions rose by a
//!   quarter as much too (a convoy's presumed waiters take a larger share
//!   of the lock as there are more of them, std's mutex letting the slot
//!   holders barge in, so their own rate rose while the lock's did not: a
//!   taught convoy climbed to 20 on that before); a kept probe's rate is
//!   the next base, and the level probes on. A probe that did not rise is
//!   *refuted*: the level goes back DOWN to the level that earned the base
//!   ([`Step::Down`]), settles there one window, measures a fresh base in
//!   the next ([`PROBE_AGAIN_WINDOWS`]), and probes again. So a convoy
//!   pays a brief doubling every few windows, never a ratchet (a fresh
//!   kind: 2, a probe to 4, back to 2), and an arrival-limited kind of true
//!   short waits, whose probe was refuted only because nothing more
//!   arrived, is given more threads at its next probe once work queues
//!   (this rule held such a kind at its level for good before: the lab's
//!   short-blocking started items at 43.8 ms p50 against main's 0.005).
//! * **Nothing ends for long: up again.** A refuted kind that sees no end
//!   at all (presumed or on a slot) for [`STALE_INTERVALS`] intervals while
//!   it presses
//!   (tasks that now wait long, or wait for each other: a rendezvous of 8
//!   held at 4 would never end) starts climbing as if nothing had ended
//!   yet. A convoy's lock holder kept off the cores for 64 ms by other
//!   load is rare.
//! * **A sibling runs: no step up unmeasured.** Neither of the two rules
//!   above steps up while a task of the kind was found runnable (state
//!   `R`) an interval or more into its run, at this look: a presumed task
//!   the monitor looked at, or a slot holder whose last probe found it so
//!   ([`Step::SiblingRuns`]); nor does a stale climb lose its hold then.
//!   Nothing ending while a task of the kind can run is a stall, not a
//!   wait: a convoy whose lock holder other load keeps off the cores, its
//!   waiters asleep on the lock behind it; a thread added joins them.
//!   Without this rule, beside six busy threads on 2 cores a taught
//!   convoy of 10,000 x 100 µs reached 512 threads in 3 runs of 8 and
//!   70-400 in others (its holder preempted for tens of milliseconds:
//!   once an interval, a stall of k intervals doubled the level k times);
//!   with it, at most 15 at work in 40. A rendezvous's tasks or a
//!   blocking client's all sleep, none runnable, and climb as before; a
//!   kind one of whose tasks computes for long while the others wait in
//!   futexes waits for it to end or sleep before its cap grows
//!   unmeasured (a kind that computes for an interval is not presumed
//!   long anyway: `presumption`'s judged-while-it-runs rule).
//! * **The policy's burst climbs too.** `control::burst`'s burst (more
//!   replacements per blocked worker while every worker blocks) raises
//!   the slot target only as its own climb allows, on the pool's
//!   completions: a convoy's slot holders found asleep on the lock
//!   started 460 of the 512 threads of a taught convoy once presumption
//!   was held. A burst of true waits completes nothing until its waits
//!   end, and grows at every tick after the first 4 intervals; its factor
//!   doubles only with a raise.
//!   Its climb holds a refuted level instead of stepping down
//!   ([`Climb::holding`]): the policy does not give back the threads a
//!   raise started, so probing again from the held level would raise the
//!   target at every probe (a flat convoy reached 872 in the unit test).
//! * **Its blocked workers are not replaced either.** While every task at
//!   work is of a kind whose tasks end (a climb past its free phase:
//!   [`Climb::holds`]), the policy's replacements of blocked workers and
//!   its bursts work within `concurrency +` [`HELD_EXTRA_THREADS`] threads
//!   ([`policy_max_threads`]): the kind's threads are presumption's to
//!   give, as its rate earns them, and a slot holder of a convoy found
//!   asleep on the lock waits for a sibling: its replacement only joins
//!   the queue. (Held only once refuted, the climb of an untaught convoy
//!   whose presumed waiters starved never got its 16 ends to judge, and
//!   replacements took it to 12-58 threads.) Nor is such a worker marked
//!   blocked at all (`policy::WorkerView::sibling_wait`, from the last
//!   look's verdict that the whole pool is at held work): its slot handed
//!   on, threads started for the freed slot (`demand`) joined the wait,
//!   about 300 detections a run, and a taught convoy of 10,000 x 100 µs
//!   peaked at 12-21 threads; not marked, 6 in 8 runs (the teaching's
//!   own 6), with about 10 detections.
//! * **Alive while its kind ends on slots.** A climb is dropped after
//!   [`FORGET_INTERVALS`] with neither a look nor a task of its kind seen
//!   ending on a slot ([`Climb::slot_look`]), not after that many without
//!   a look: a taught convoy's presumed items end within microseconds,
//!   presumption pauses on them (`presumption::SHORTS_TO_PAUSE`), and the
//!   convoy runs on slots, where the climb's hold is what keeps its slot
//!   holders asleep on the lock from being replaced. Dropped, a convoy
//!   went from 6-10 threads at work to 18-44 in 3 runs of 20 (and failed
//!   a CI run): one replacement a tick, each joining the lock's queue.
//! * **The crowd left: start over.** When the kind's cap has fallen below
//!   half the level (its presumed tasks ended, so presumption's own rule
//!   brought the cap down to twice those still in flight) and it has not
//!   pressed for [`LULL_INTERVALS`], the climb starts over from the cap:
//!   a level is evidence about the crowd that earned it, not credit (a
//!   kind taught by a burst of sleeps that then convoys starts from 2, not
//!   from the sleeps' 512). A kind one of whose probes was kept (its rate
//!   rose with its threads) starts over one doubling above its cap: an
//!   arrival-limited kind's cap dips between arrivals, and each start
//!   from the bare cap left it short for a window or two. A climb not
//!   looked at for [`FORGET_INTERVALS`] intervals is dropped
//!   (`monitor/mod.rs`).
//!
//! Only presumed tasks' ends count in a rate (a count in the kind's
//! record, bumped where a presumed task's end is recorded anyway): the
//! ends of the kind's tasks that ran on a slot are only sampled, as
//! evidence that tasks end, since counting every task's end per kind
//! would put a shared write on every task's path, and a sample's count
//! depends on the monitor's pace (four looks an interval while a cap
//! grows, one otherwise), which would read as a rate that rose or fell.
//! In a convoy the presumed share of the lock's rate does grow with the
//! presumed count (2 of 4 threads on the lock, then 4 of 6: 1.33 times
//! for a doubling), which is why a step needs 1.5 times.
//!
//! Why not only the rate: a kind whose tasks wait 200 ms shows no rate
//! for 200 ms, and a gate that waits for the rate to rise holds a burst of
//! true waits for that long (the gate on branch `h-convoy` started a warm
//! burst at 20.6 ms p50 against 0.142 ms without it). Why not a kind's
//! end times (branch `h-convoy2`: unbounded once its last two presumed
//! tasks waited 16 ms or more, else 4): a kind with no ends yet was held
//! at 4, so a rendezvous of 200 taught to block had 72 presumed, and a
//! rendezvous's last arrivals end at once, short, which held its next
//! burst too.
//!
//! Measured on 2 shared cores (release, `tests/control_convoy.rs`,
//! 10,000 items x 100 µs taught first): 6-10 peak threads in 14 runs with
//! the climb on presumption and the burst (one at 12: replacements of
//! slot holders found asleep, and spares), 6-9 in 14 with the held
//! kind's replacements held and spares only for room, on a quiet
//! machine; later, with the machine's other load changed, the same code
//! gave 14-56, and 6 in 8 runs once a held kind's workers were neither
//! replaced nor marked blocked (512 at c895626). How a convoy fares
//! depends on how often its waiters are found asleep for an interval,
//! which the machine's other load decides.
//! A free phase of one interval took a convoy to 41 threads when nothing
//! at all ended for 2.2 ms (the lock's holder preempted), hence 4.
//!
//! Measured (lab, 2 shared cores, 3 repetitions, at 7f3d188 against main
//! at c84d337; docs/measurements.md, "The growth climb for lock
//! convoys"): convoys peak at 3-8 threads untaught (main: 512 on three
//! of five rows), 2-10 at work taught, walls 0.98-1.11x the fixed pool's;
//! burst, mixed, fetch-process, learned-then-computes, mixed-kind and
//! service as on main within the machine's spread; short-blocking's
//! slowest start 1.2-1.5x main's.
//!
//! What this does not do: probe *down* below a base that was earned (a
//! level falls only to the base of a refuted probe, or with the cap when
//! the crowd leaves); count the kind's ends on slots exactly (the pool's
//! ends stand in for them only while all work is held);
//! tell a convoy from a backend that slows down as it is given more
//! concurrent requests (both are held, which is the point).
//!
//! Pure: the monitor takes the counts and carries out the answers; the
//! tests below script a lock and sleeps with a fake clock.

use super::presumption::{FRESH_CAP, MAX_CAP};
use std::time::Duration;

/// Monitor intervals in which no task of a kind may end, from its climb's
/// first look, before the level follows each look up: a convoy's items end
/// within a few holds, but on a loaded machine the whole convoy stalls
/// now and then, its lock's holder preempted (2.2 ms with nothing ending
/// seen beside another process on 2 cores; at 1 interval, a stall like it
/// took a convoy to 41 threads).
pub(crate) const FREE_AFTER_INTERVALS: u32 = 4;
/// Ends a window must hold before its rate is judged: fewer are noise (a
/// rate of 2 ends against 3 is 1.5 times).
pub(crate) const MIN_ENDS: u32 = 16;
/// Monitor intervals a pressing window of a refuted kind may see no end
/// before the kind climbs as if nothing had ended.
pub(crate) const STALE_INTERVALS: u32 = 64;
/// Monitor intervals without a look after which a kind's climb is
/// dropped ([`Climb::forgotten`]).
pub(crate) const FORGET_INTERVALS: u32 = 64;
/// Full windows a kind measures at the level it stepped back down to, after
/// a refuted probe, before it probes again: the first lets the cap settle
/// at the lower level, the last is the fresh base the probe is judged
/// against.
pub(crate) const PROBE_AGAIN_WINDOWS: u32 = 2;
/// Monitor intervals a kind may go without pressing against its level
/// before its window starts again (the window measures a kind that
/// presses) and, if its cap fell below half the level meanwhile, before
/// the climb starts over (the crowd that earned the level left). Shorter
/// lulls are an arrival-limited kind's between arrivals.
pub(crate) const LULL_INTERVALS: u32 = 4;

/// Threads beyond `concurrency` the policy's replacements of blocked
/// workers and its bursts may have while every task at work is of a kind
/// its climb holds ([`policy_max_threads`], [`Climb::holds`]).
pub(crate) const HELD_EXTRA_THREADS: usize = 2;

/// The `max_threads` the policy's replacements and bursts
/// (`control::policy`) work within: `concurrency +`
/// [`HELD_EXTRA_THREADS`] (at most `max_threads`) while every task at work
/// is of a kind whose climb holds it (`all_held`: its tasks end, so more
/// threads must be earned by its rate, through presumption; a worker of
/// it found asleep, waiting for a sibling, is not replaced by a new
/// thread), `max_threads` otherwise. The hold lifts when nothing of the
/// kind ends for [`STALE_INTERVALS`].
pub(crate) fn policy_max_threads(max_threads: usize, concurrency: usize, all_held: bool) -> usize {
    if all_held {
        (concurrency + HELD_EXTRA_THREADS).min(max_threads)
    } else {
        max_threads
    }
}

/// Ends counted over a time, at a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    ends: u32,
    over: Duration,
    level: u32,
    /// The pool's ends over the same time, if known throughout.
    pool: Option<u32>,
}

impl Rate {
    /// How long a task waited on average, by Little's law: the level over
    /// the ends per second.
    pub(crate) fn turnover(self) -> Duration {
        let ends = u128::from(self.ends.max(1));
        let nanos = self.over.as_nanos() * u128::from(self.level) / ends;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Whether this rate rose over `base` (measured at a lower level) by at
    /// least half as much as the level did: `ends / over >= base's × (1 +
    /// (level / base level - 1) / 2)`. Waits outside the pool rise in
    /// proportion to the level; a convoy's do not rise at all.
    ///
    /// And if both know the pool's ends, the pool's rate rose too, by at
    /// least a quarter as much as the level (1.25 times for a doubling):
    /// a lock convoy's presumed waiters take a larger share of the lock as
    /// there are more of them (std's mutex lets the slot holders barge in,
    /// and a few presumed waiters starve), so their own rate may rise while
    /// the kind's, the lock's, stays flat; while the pool runs only such
    /// work, its rate is the kind's. True waits beside the 2 slots raise
    /// it `(2L + 2) / (L + 2)` times for a doubling from `L`: 1.5 from 2.
    pub(crate) fn rose_over(self, base: Rate) -> bool {
        let rose = |e: u32, b: u32, part: u128| {
            let (e, b) = (u128::from(e), u128::from(b));
            let (over, base_over) = (self.over.as_nanos(), base.over.as_nanos());
            let (level, base_level) = (u128::from(self.level), u128::from(base.level.max(1)));
            e * base_over * part * base_level >= b * over * ((part - 1) * base_level + level)
        };
        let pool = match (self.pool, base.pool) {
            (Some(e), Some(b)) => rose(e, b, 4),
            _ => true,
        };
        rose(self.ends, base.ends, 2) && pool
    }
}

/// What a look's climb said ([`Climb::look`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The look asks for no more than the level: nothing to judge.
    Within,
    /// The level rose to what the look asked for.
    Up,
    /// Held for the climb's first interval, while nothing ended: look
    /// again soon (a look after it steps up if still nothing ended).
    Gathering,
    /// Held while a window gathers its [`MIN_ENDS`] ends, before any
    /// refutation (the ends are counted as they come: no need to look
    /// sooner).
    Measuring,
    /// Held at the level a refuted probe stepped back down to, while the
    /// windows before the next probe fill ([`PROBE_AGAIN_WINDOWS`]).
    Held,
    /// Back down to the level that earned the base rate: the probe above
    /// it did not raise the rate (a convoy, or work that arrives no faster).
    Down,
    /// Held where a step up would have no rate to go by (nothing of the
    /// kind ended yet, or nothing for long), because a task of the kind
    /// was found runnable an interval or more into its run: its asleep
    /// siblings may wait for it (see "A sibling runs" in the module docs).
    SiblingRuns,
}

/// One kind's growth climb (see the module docs), kept by the monitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Climb {
    /// The most the kind's cap may be after a look.
    level: u32,
    /// When the climb began, or began again.
    began: Duration,
    /// Whether a presumed task of the kind ended since it began.
    ended: bool,
    /// The last look that counted an end (or when it began).
    last_end: Duration,
    /// The last look that pressed against the level (or when it began).
    pressed: Duration,
    /// When a probe's window may open: until then each look begins it
    /// again.
    opens: Duration,
    /// When the current window began, and the ends counted in it.
    window: Duration,
    window_ends: u32,
    /// The pool's ends (of every kind) in the window, while every look in
    /// it was given them ([`Climb::look_in_pool`]), and the pool's total at
    /// the last look that gave it.
    window_pool: Option<u32>,
    pool_seen: Option<u64>,
    /// The rate measured at the level below, that a probe's window at this
    /// level is judged against: `None` while no probe is under way.
    base: Option<Rate>,
    /// Full windows still to measure at this level before the next probe
    /// (after a refuted one: [`PROBE_AGAIN_WINDOWS`]).
    settle: u32,
    /// The last probe was refuted, and no step up came since.
    refuted: bool,
    /// A probe's rate rose over its base since the climb began.
    kept: bool,
    /// A refuted probe steps back down ([`Climb::new`]), or holds the
    /// level ([`Climb::holding`]).
    steps_down: bool,
    /// The last look that judged the kind was [`Climb::waits_outside`]'s
    /// (at `began`).
    outside: bool,
    /// The last look.
    looked: Duration,
    /// The last step up with nothing ended ([`Climb::up_unmeasured`]).
    unmeasured_up: Option<Duration>,
}

impl Climb {
    /// A climb beginning `now` for a kind whose cap is `cap`: its level is
    /// the cap (at least [`FRESH_CAP`]), and nothing ended yet.
    pub(crate) fn new(now: Duration, cap: u32) -> Climb {
        Climb {
            level: cap.clamp(FRESH_CAP, MAX_CAP),
            began: now,
            ended: false,
            last_end: now,
            pressed: now,
            opens: now,
            window: now,
            window_ends: 0,
            window_pool: Some(0),
            pool_seen: None,
            base: None,
            settle: 0,
            refuted: false,
            kept: false,
            steps_down: true,
            outside: false,
            looked: now,
            unmeasured_up: None,
        }
    }

    /// A climb for a level its owner cannot step back down: the policy's
    /// burst (`control::policy`) starts threads for a raise and does not
    /// give them back when the climb says so. A refuted probe holds the
    /// level there, and only a rate that rises over the same base lifts
    /// it: probing again from the held level would raise the target at
    /// every probe, a ratchet.
    pub(crate) fn holding(now: Duration, cap: u32) -> Climb {
        Climb {
            steps_down: false,
            ..Climb::new(now, cap)
        }
    }

    /// The most the kind's cap may be after a look: the look's `limit`.
    pub(crate) fn level(&self) -> u32 {
        self.level
    }

    /// Whether the kind's threads are the climb's to earn: tasks of the
    /// kind end, so each step must show its rate rising (measuring, held,
    /// or stepping on a rise), and the policy's replacements must not add
    /// threads around it. Not while nothing of the kind ends (the first
    /// intervals, or a stale climb): those waits are long, and a blocked
    /// worker of the kind is replaced as any other.
    pub(crate) fn holds(&self) -> bool {
        self.ended
    }

    /// Whether the climb was not looked at for [`FORGET_INTERVALS`]
    /// monitor `interval`s by `now`: the kind's next look begins anew.
    pub(crate) fn forgotten(&self, now: Duration, interval: Duration) -> bool {
        now.saturating_sub(self.looked) >= interval * FORGET_INTERVALS
    }

    /// One look at the kind, `now`: `ends` of its presumed tasks ended
    /// since the last look (taken from its record; 0 at a climb's first
    /// look, whose count is older than the climb), and the monitor saw
    /// tasks of the kind that ran on a slot end, the latest of them first
    /// seen at `on_slots` (evidence that tasks of the kind end, never
    /// counted in a rate; only a task first seen since the climb began
    /// counts: a burst's own tasks, not the last burst's ending as it
    /// starts); its cap is `cap`, and the look would set the cap to `wants`
    /// (`presumption::look_cap`). Moves the level ([`Climb::level`]) and
    /// says why.
    pub(crate) fn look(
        &mut self,
        now: Duration,
        ends: (u32, Option<Duration>),
        cap: u32,
        wants: u32,
        interval: Duration,
    ) -> Step {
        self.look_in_pool(now, ends, None, false, cap, wants, interval)
    }

    /// [`Climb::look`], given the pool's total of ended tasks (of every
    /// kind) `pool_total` while every task at work is of a kind a climb
    /// holds (a probe is kept only if the pool's rate rose with it too:
    /// [`Rate::rose_over`]), and whether a task of the kind was found
    /// runnable an interval or more into its run (`sibling_runs`: no step
    /// up unmeasured meanwhile, [`Step::SiblingRuns`]).
    #[allow(clippy::too_many_arguments)] // Each is one piece of the look's evidence.
    pub(crate) fn look_in_pool(
        &mut self,
        now: Duration,
        (ends, on_slots): (u32, Option<Duration>),
        pool_total: Option<u64>,
        sibling_runs: bool,
        cap: u32,
        wants: u32,
        interval: Duration,
    ) -> Step {
        self.looked = now;
        self.outside = false;
        let pool = match (pool_total, self.pool_seen) {
            (Some(total), Some(seen)) => {
                Some(u32::try_from(total.saturating_sub(seen)).unwrap_or(u32::MAX))
            }
            _ => None,
        };
        self.pool_seen = pool_total;
        self.window_pool = self.window_pool.zip(pool).map(|(w, p)| w.saturating_add(p));
        let waited = |since: Duration| now.saturating_sub(since);
        let lull = waited(self.pressed) >= interval * LULL_INTERVALS;
        if cap < self.level / 2 && lull {
            // The crowd that earned the level left: its ends are its own,
            // and the level is the cap (one doubling above it for a kind
            // a probe's rising rate showed to need threads), to be earned
            // again above that.
            let old = *self;
            *self = Climb {
                pressed: old.pressed,
                kept: old.kept,
                pool_seen: old.pool_seen,
                steps_down: old.steps_down,
                ..Climb::new(now, cap.saturating_mul(if old.kept { 2 } else { 1 }))
            };
        } else if ends > 0 || on_slots.is_some_and(|first| first >= self.began) {
            self.ended = true;
            self.last_end = now;
            self.window_ends = self.window_ends.saturating_add(ends);
        }
        if now < self.opens {
            // A probe's window opens at the first look after the tasks in
            // flight at the step could have ended.
            self.restart(now);
        }
        if wants <= self.level {
            // Not pressing: the window measures the level only while the
            // kind presses against it, lulls between arrivals aside.
            if waited(self.pressed) >= interval * LULL_INTERVALS {
                self.restart(now);
            }
            return Step::Within;
        }
        self.pressed = now;
        if !self.ended {
            return if sibling_runs {
                Step::SiblingRuns
            } else if waited(self.began) >= interval * FREE_AFTER_INTERVALS {
                self.up_unmeasured(now, wants, interval)
            } else {
                Step::Gathering
            };
        }
        let measuring = if self.refuted {
            Step::Held
        } else {
            Step::Measuring
        };
        if waited(self.last_end.max(self.window)) >= interval * STALE_INTERVALS {
            if sibling_runs {
                // A stall, not a change: the kind's tasks wait for the
                // one that runs, as they did while they ended.
                return Step::SiblingRuns;
            }
            // Tasks that wait long now: climb as if nothing had ended.
            self.ended = false;
            self.base = None;
            self.settle = 0;
            return self.up_unmeasured(now, wants, interval);
        }
        if self.window_ends < MIN_ENDS || waited(self.window).is_zero() {
            return measuring;
        }
        let rate = Rate {
            ends: self.window_ends,
            over: waited(self.window),
            level: self.level,
            pool: self.window_pool,
        };
        match self.base {
            // Held where the level cannot step down: the window starts
            // again, and only a rate that rises over the same base lifts it.
            Some(base) if !rate.rose_over(base) && !self.steps_down => {
                self.refuted = true;
                self.restart(now);
                Step::Held
            }
            // A probe that did not raise the rate: back to the level that
            // earned the base, to measure a fresh base there before the
            // next probe.
            Some(base) if !rate.rose_over(base) => {
                self.level = base.level.max(FRESH_CAP);
                self.base = None;
                self.settle = PROBE_AGAIN_WINDOWS - 1;
                self.refuted = true;
                self.restart(now);
                Step::Down
            }
            // Settling at the level a refuted probe came back to.
            None if self.settle > 0 => {
                self.settle -= 1;
                self.restart(now);
                Step::Held
            }
            // A kept probe, or a fresh base: its rate is the base, and
            // the level probes up from it.
            base => {
                self.kept |= base.is_some();
                self.base = Some(rate);
                let step = self.up(now, wants);
                // The probe's window opens once the tasks in flight at the
                // step could have ended (Little's law: the level over the
                // rate): until then their ends are the lower level's.
                self.opens = now + rate.turnover().min(interval * STALE_INTERVALS / 4);
                step
            }
        }
    }

    /// A tick, `now`, at which the kind had no presumed task to look at
    /// (its presumption paused, or every task of it on a slot), and tasks
    /// of it that ran on slots ended, the latest first seen at `on_slots`
    /// (as in [`Climb::look`]): the climb lives on, and holds, while its
    /// tasks end on slots. Nothing ended for [`STALE_INTERVALS`] lifts the
    /// hold, as at a look, unless a task of the kind runs (`sibling_runs`,
    /// as in [`Climb::look_in_pool`]); nothing looked at or ended for
    /// [`FORGET_INTERVALS`] forgets the climb. A climb looked at this tick
    /// took its evidence there: nothing to do.
    ///
    /// Why: a taught convoy's presumed items end within a few
    /// microseconds, so presumption pauses (`presumption::SHORTS_TO_PAUSE`)
    /// and the convoy runs on slots. Forgotten once no presumed task was
    /// looked at for 64 intervals, the climb's hold lifted while the convoy
    /// went on, and its slot holders found asleep on the lock were marked
    /// blocked and replaced one a tick: 18-44 threads in 3 runs of 20 of
    /// `tests/control_convoy.rs` (and a CI failure), against 6-10.
    pub(crate) fn slot_look(
        &mut self,
        now: Duration,
        on_slots: Option<Duration>,
        sibling_runs: bool,
        interval: Duration,
    ) {
        if self.looked == now {
            return;
        }
        if on_slots.is_some_and(|first| first >= self.began) {
            self.ended = true;
            self.last_end = now;
            self.looked = now;
        } else if now.saturating_sub(self.last_end) >= interval * STALE_INTERVALS && !sibling_runs {
            self.ended = false;
        }
    }

    /// A look that found most of the kind's asleep tasks waiting outside
    /// the process (`sys::WaitsFor::Outside`: a timer, a socket, a disk):
    /// such waits do not lengthen as more tasks wait beside them, so the
    /// level follows the look up unjudged, as presumption alone would, and
    /// the kind is not held ([`Climb::holds`]). The climb begins again at
    /// the level: a later look that finds the kind's tasks in futexes
    /// judges it from there, after the free phase.
    pub(crate) fn waits_outside(&mut self, now: Duration, wants: u32) -> Step {
        let level = self.level.max(wants.min(MAX_CAP));
        let step = if level > self.level {
            Step::Up
        } else {
            Step::Within
        };
        *self = Climb {
            kept: self.kept,
            pool_seen: self.pool_seen,
            steps_down: self.steps_down,
            outside: true,
            ..Climb::new(now, level)
        };
        step
    }

    /// Whether the kind's tasks were found waiting outside the process
    /// at the last look that judged it ([`Climb::waits_outside`], not
    /// [`Climb::look`]), within [`LULL_INTERVALS`] monitor `interval`s of
    /// `now`: what a look goes by when the kernel was asked about none of
    /// its asleep tasks (between waits its tasks are awake, and each task
    /// is asked about once). Older evidence is another crowd's: a kind
    /// taught by sleeps that then convoys went by its sleeps' for its
    /// first looks, and 10 of its threads were at work on 2 slots.
    pub(crate) fn waited_outside(&self, now: Duration, interval: Duration) -> bool {
        self.outside && now.saturating_sub(self.began) < interval * LULL_INTERVALS
    }

    /// Steps the level up to `wants`, and begins a window there.
    /// Steps up with no rate to go by (nothing ended yet, or nothing for
    /// long): at most once an interval, not at every look. A convoy whose
    /// lock holder is kept off the cores for a few intervals ends nothing
    /// meanwhile, and stepping up at every look (four an interval at the
    /// monitor's quick pace) took a taught convoy from 6 threads to 512
    /// within a few milliseconds, once in 7 lab rounds beside compiles;
    /// once an interval, a stall of k intervals costs at most 2^k. Waits
    /// outside the process never come here ([`Climb::waits_outside`]), so
    /// sleeps and sockets still double at every look; a rendezvous in a
    /// futex doubles once an interval.
    fn up_unmeasured(&mut self, now: Duration, wants: u32, interval: Duration) -> Step {
        if self
            .unmeasured_up
            .is_some_and(|at| now.saturating_sub(at) < interval)
        {
            return Step::Gathering;
        }
        self.unmeasured_up = Some(now);
        self.up(now, wants)
    }

    fn up(&mut self, now: Duration, wants: u32) -> Step {
        self.level = wants.min(MAX_CAP);
        self.restart(now);
        self.refuted = false;
        Step::Up
    }

    /// Begins a window `now`.
    fn restart(&mut self, now: Duration) {
        self.window = now;
        self.window_ends = 0;
        self.window_pool = Some(0);
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::control::presumption::{decide, look_cap, Act, Record, Seen};
    use std::collections::VecDeque;

    const INTERVAL: Duration = Duration::from_millis(1);
    /// The monitor's quick pace while a cap grows: four looks an interval.
    const LOOK: Duration = Duration::from_micros(250);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn the_policy_is_held_only_while_every_kind_at_work_is_held() {
        assert_eq!(policy_max_threads(512, 2, true), 2 + HELD_EXTRA_THREADS);
        assert_eq!(policy_max_threads(512, 2, false), 512);
        assert_eq!(policy_max_threads(3, 2, true), 3, "never past max_threads");
        // A climb holds once tasks of its kind end, and lets go when
        // nothing ends for long.
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        assert!(!c.holds(), "nothing ended yet");
        let mut now = LOOK;
        c.look(now, (0, None), 2, 4, INTERVAL);
        assert!(!c.holds());
        now += LOOK;
        c.look(now, (1, None), 2, 4, INTERVAL);
        assert!(c.holds(), "measuring");
        now += INTERVAL * STALE_INTERVALS;
        assert_eq!(c.look(now, (0, None), 2, 4, INTERVAL), Step::Up);
        assert!(!c.holds(), "stale: climbing as if nothing ended");
    }

    #[test]
    fn a_rate_rose_if_it_rose_by_half_as_much_as_the_level() {
        let base = Rate {
            ends: 20,
            over: us(1000),
            level: 4,
            pool: None,
        };
        let at = |ends, over, level| Rate {
            ends,
            over,
            level,
            pool: None,
        };
        assert!(at(40, us(1000), 8).rose_over(base), "doubled with it");
        assert!(at(30, us(1000), 8).rose_over(base), "1.5 times");
        assert!(!at(29, us(1000), 8).rose_over(base), "a convoy's 1.33");
        assert!(at(15, us(500), 8).rose_over(base), "per second");
        assert!(
            at(25, us(1000), 6).rose_over(base),
            "1.25 for 1.5 times the level"
        );
        assert!(!at(20, us(1000), 8).rose_over(base), "flat");
        // The pool's rate, when both know it, must rise too.
        let pooled = Rate {
            pool: Some(100),
            ..base
        };
        let with_pool = |ends, pool| Rate {
            pool: Some(pool),
            ..at(ends, us(1000), 8)
        };
        assert!(
            !with_pool(40, 100).rose_over(pooled),
            "a convoy's presumed share rose, the lock's rate did not"
        );
        assert!(
            with_pool(40, 125).rose_over(pooled),
            "1.25 times the pool's"
        );
        assert!(!with_pool(40, 124).rose_over(pooled));
        assert!(with_pool(40, 100).rose_over(base), "the base knew no pool");
    }

    #[test]
    fn with_nothing_ended_the_level_follows_the_looks_up_once_an_interval_after_a_few() {
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = Duration::ZERO;
        let mut level = FRESH_CAP;
        // The first intervals gather: a convoy's items end within them.
        while now < INTERVAL * FREE_AFTER_INTERVALS {
            assert_eq!(
                c.look(now, (0, None), level, 2 * level, INTERVAL),
                Step::Gathering
            );
            now += LOOK;
        }
        // Then it doubles once an interval, as presumption asks: the looks
        // between wait (a convoy's stalled holder ends nothing for a few).
        for _ in 0..9 {
            assert_eq!(c.look(now, (0, None), level, 2 * level, INTERVAL), Step::Up);
            level *= 2;
            assert_eq!(c.level(), level);
            for _ in 1..INTERVAL.as_micros() / LOOK.as_micros() {
                now += LOOK;
                assert_eq!(
                    c.look(now, (0, None), level, 2 * level, INTERVAL),
                    Step::Gathering
                );
                assert_eq!(c.level(), level);
            }
            now += LOOK;
        }
        assert_eq!(level, 1024);
        assert_eq!(
            c.look(now, (0, None), level, 2 * level, INTERVAL),
            Step::Up,
            "at most MAX_CAP"
        );
        assert_eq!(c.level(), MAX_CAP);
        // Asked for less: nothing to judge.
        assert_eq!(c.look(now, (3, None), level, 10, INTERVAL), Step::Within);
        assert_eq!(c.level(), MAX_CAP);
    }

    #[test]
    fn waits_outside_the_process_follow_each_look_up_at_once_and_are_not_held() {
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        // A convoy's evidence first: its tasks end, so it is held.
        assert_eq!(
            c.look(LOOK, (4, None), FRESH_CAP, 4, INTERVAL),
            Step::Measuring
        );
        assert!(c.holds());
        // Then the kernel finds the kind's tasks asleep in a timer or a
        // socket: no free phase, no window; doubling at every look.
        let mut level = FRESH_CAP;
        for look in 2..6 {
            assert_eq!(c.waits_outside(LOOK * look, 2 * level), Step::Up);
            level *= 2;
            assert_eq!(c.level(), level);
            assert!(!c.holds(), "not a convoy: the policy is not held");
        }
        assert_eq!(c.waits_outside(LOOK * 6, level / 2), Step::Within);
        assert_eq!(c.level(), level, "never lowered by a look that asks less");
        assert!(
            c.waited_outside(LOOK * 6, INTERVAL),
            "what a look with none asleep goes by"
        );
        assert!(
            !c.waited_outside(LOOK * 6 + INTERVAL * LULL_INTERVALS, INTERVAL),
            "another crowd's"
        );
        // Back in futexes (say, a lock): judged again, after the free
        // phase, from the level it reached.
        assert_eq!(
            c.look(LOOK * 7, (0, None), level, 2 * level, INTERVAL),
            Step::Gathering
        );
        assert_eq!(c.level(), level);
        assert!(!c.waited_outside(LOOK * 7, INTERVAL));
    }

    #[test]
    fn a_refuted_probe_steps_back_down_and_probes_again_from_a_fresh_base() {
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = LOOK;
        let mut look = |c: &mut Climb, ends, level| {
            let step = c.look(now, (ends, None), level, 2 * level, INTERVAL);
            now += LOOK;
            step
        };
        // Ends at once: measuring until a window holds MIN_ENDS.
        for _ in 0..3 {
            assert_eq!(look(&mut c, 4, 2), Step::Measuring);
        }
        // The fourth look brings the window to 16: the base, and a probe.
        assert_eq!(look(&mut c, 4, 2), Step::Up);
        assert_eq!(c.level(), 4);
        // At 4 the rate is flat (a convoy, or arrivals that did not
        // grow): back down to the level that earned the base.
        for _ in 0..3 {
            assert_eq!(look(&mut c, 4, 4), Step::Measuring);
        }
        assert_eq!(look(&mut c, 4, 4), Step::Down);
        assert_eq!(c.level(), 2);
        // A window to settle there, then a fresh base, and a probe again.
        for _ in 0..7 {
            assert_eq!(look(&mut c, 4, 2), Step::Held);
        }
        assert_eq!(look(&mut c, 4, 2), Step::Up);
        assert_eq!(c.level(), 4);
        // The arrivals grew: at 4 twice the ends per second of the fresh
        // base. Kept, and up again.
        assert_eq!(look(&mut c, 8, 4), Step::Measuring);
        assert_eq!(look(&mut c, 8, 4), Step::Up);
        assert_eq!(c.level(), 8);
    }

    #[test]
    fn a_window_outlasts_an_arrival_limited_kinds_short_lulls() {
        // Between arrivals the kind's presumed tasks fall below its level
        // (a look that does not press) and rise to it again: the window
        // goes on counting.
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = LOOK;
        for _ in 0..7 {
            assert_eq!(c.look(now, (1, None), 2, 4, INTERVAL), Step::Measuring);
            now += LOOK;
            assert_eq!(c.look(now, (1, None), 2, 2, INTERVAL), Step::Within);
            now += LOOK;
        }
        assert_eq!(c.look(now, (2, None), 2, 4, INTERVAL), Step::Up);
        // A lull of LULL_INTERVALS: the window starts again.
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        assert_eq!(c.look(LOOK, (8, None), 2, 4, INTERVAL), Step::Measuring);
        let now = LOOK + INTERVAL * LULL_INTERVALS;
        assert_eq!(c.look(now, (4, None), 2, 2, INTERVAL), Step::Within);
        assert_eq!(
            c.look(now + LOOK, (4, None), 2, 4, INTERVAL),
            Step::Measuring
        );
    }

    /// A look at the kind with `sibling_runs` as given, nothing ended.
    fn look_running(c: &mut Climb, now: Duration, level: u32, sibling_runs: bool) -> Step {
        c.look_in_pool(
            now,
            (0, None),
            None,
            sibling_runs,
            level,
            2 * level,
            INTERVAL,
        )
    }

    #[test]
    fn nothing_ended_while_a_sibling_runs_is_a_stall_not_a_wait() {
        // A taught convoy whose lock holder other load keeps off the
        // cores: its waiters asleep, nothing ends, and the holder is
        // runnable. Long past the free phase, the level stays.
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = Duration::ZERO;
        while now < INTERVAL * (FREE_AFTER_INTERVALS + 40) {
            assert_eq!(look_running(&mut c, now, 2, true), Step::SiblingRuns);
            assert_eq!(c.level(), FRESH_CAP);
            now += LOOK;
        }
        assert!(!c.holds(), "nothing ended: not the climb's to hold yet");
        // The holder falls asleep too (a rendezvous, a blocking client's
        // reply): nothing can run, so the waits are long ones, and the
        // level follows the look up once an interval as before.
        assert_eq!(look_running(&mut c, now, 2, false), Step::Up);
        assert_eq!(c.level(), 4);
        now += LOOK;
        assert_eq!(look_running(&mut c, now, 4, false), Step::Gathering);
        now += INTERVAL;
        assert_eq!(look_running(&mut c, now, 4, true), Step::SiblingRuns);
        assert_eq!(c.level(), 4, "a runner again: held again");
        assert_eq!(look_running(&mut c, now + LOOK, 4, false), Step::Up);
        assert_eq!(c.level(), 8);
    }

    #[test]
    fn a_stale_climb_with_a_sibling_that_runs_keeps_its_hold() {
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = LOOK;
        assert_eq!(c.look(now, (4, None), 2, 4, INTERVAL), Step::Measuring);
        assert!(c.holds());
        // No end for longer than STALE_INTERVALS while a task of the kind
        // is runnable: a stall; the hold on the policy stays, the level too.
        let stale = now + INTERVAL * (STALE_INTERVALS + 8);
        while now < stale {
            now += LOOK;
            let step = look_running(&mut c, now, 2, true);
            assert!(
                matches!(step, Step::Measuring | Step::SiblingRuns),
                "{step:?}"
            );
            assert!(c.holds());
            assert_eq!(c.level(), FRESH_CAP);
        }
        // Nothing runnable either: tasks that wait long now.
        assert_eq!(look_running(&mut c, now + LOOK, 2, false), Step::Up);
        assert!(!c.holds());
    }

    #[test]
    fn a_refuted_kind_that_stops_ending_climbs_again() {
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = LOOK;
        for level in [2, 2, 2, 2, 4, 4, 4] {
            c.look(now, (4, None), level, 2 * level, INTERVAL);
            now += LOOK;
        }
        assert_eq!(c.look(now, (4, None), 4, 8, INTERVAL), Step::Down);
        assert_eq!(c.level(), 2);
        // Nothing ends (a rendezvous bigger than the level): up once no
        // end came for STALE_INTERVALS, then once an interval.
        let stale = now + INTERVAL * STALE_INTERVALS;
        while now + LOOK < stale {
            now += LOOK;
            assert_eq!(c.look(now, (0, None), 2, 4, INTERVAL), Step::Held);
        }
        now += LOOK;
        assert_eq!(c.look(now, (0, None), 2, 4, INTERVAL), Step::Up);
        now += LOOK;
        assert_eq!(c.look(now, (0, None), 4, 8, INTERVAL), Step::Gathering);
        assert_eq!(c.level(), 4);
        now += INTERVAL;
        assert_eq!(c.look(now, (0, None), 4, 8, INTERVAL), Step::Up);
        assert_eq!(c.level(), 8);
    }

    #[test]
    fn presumed_waiters_starved_by_a_lock_while_its_tasks_on_slots_end_are_no_long_wait() {
        // std's mutex is unfair: the slot holders that release it and take
        // it again for their next item barge in, and the presumed waiters,
        // asleep in the futex, may see no end for 10 ms and more. The kind
        // ends tasks all the while, on the slots: not a wait that threads
        // help, so no free step, and too few presumed ends to judge.
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = Duration::ZERO;
        while now < INTERVAL * 2 * STALE_INTERVALS {
            now += LOOK;
            let step = c.look(now, (0, Some(now)), FRESH_CAP, 2 * FRESH_CAP, INTERVAL);
            assert_eq!(step, Step::Measuring, "{now:?}");
        }
        assert_eq!(c.level(), FRESH_CAP);
        // Tasks first seen before the climb began (the last burst's,
        // ending as a new burst starts) are no evidence.
        let began = now;
        let mut c = Climb::new(began, FRESH_CAP);
        let before = Some(began - LOOK);
        while now + LOOK < began + INTERVAL * FREE_AFTER_INTERVALS {
            now += LOOK;
            let step = c.look(now, (0, before), FRESH_CAP, 2 * FRESH_CAP, INTERVAL);
            assert_eq!(step, Step::Gathering, "{now:?}");
        }
        now += LOOK;
        assert_eq!(c.look(now, (0, before), 2, 4, INTERVAL), Step::Up);
    }

    #[test]
    fn a_climb_starts_over_when_its_crowd_left_and_is_forgotten_unlooked() {
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = INTERVAL * FREE_AFTER_INTERVALS;
        let mut level = FRESH_CAP;
        while level < 512 {
            c.look(now, (0, None), level, 2 * level, INTERVAL);
            level *= 2;
            // Nothing ended: up once an interval.
            now += INTERVAL;
        }
        assert_eq!(c.level(), 512);
        // They end; the cap falls with them. A lull shorter than
        // LULL_INTERVALS is an arrival-limited kind's between arrivals.
        assert_eq!(c.look(now, (255, None), 2, 2, INTERVAL), Step::Within);
        assert_eq!(c.level(), 512);
        // Past it, the next look begins anew, from the cap (no probe of
        // the kind's ever raised its rate), and its ends were the old
        // crowd's.
        now += INTERVAL * LULL_INTERVALS;
        assert_eq!(c.look(now, (3, None), 2, 4, INTERVAL), Step::Gathering);
        assert_eq!(c.level(), 2);
        assert!(!c.holds(), "nothing of the new crowd ended yet");
        // A kind a probe's rising rate has shown to need threads keeps one
        // doubling of room above its cap.
        let mut c = Climb::new(Duration::ZERO, FRESH_CAP);
        let mut now = LOOK;
        for (ends, cap) in [(4, 2), (4, 2), (4, 2), (4, 2), (8, 4), (8, 4)] {
            c.look(now, (ends, None), cap, 2 * cap, INTERVAL);
            now += LOOK;
        }
        assert_eq!(c.level(), 8, "a kept probe");
        now += INTERVAL * LULL_INTERVALS;
        assert_eq!(c.look(now, (0, None), 2, 2, INTERVAL), Step::Within);
        assert_eq!(c.level(), 4);
        // Within half the level: not a new crowd.
        let mut c = Climb::new(Duration::ZERO, 8);
        assert_eq!(c.look(now, (1, None), 4, 4, INTERVAL), Step::Within);
        assert_eq!(c.level(), 8);
        assert!(!c.forgotten(now + INTERVAL * (FORGET_INTERVALS - 1), INTERVAL));
        assert!(c.forgotten(now + INTERVAL * FORGET_INTERVALS, INTERVAL));
    }

    /// A fake-clock pool of one kind on [`SLOTS`] slots: `items` queued
    /// tasks of the kind, presumed while it has room (the workers'
    /// fan-out), the rest run on the slots. Each task either holds one
    /// lock for `hold` (a FIFO lock: slot holders and presumed tasks queue
    /// on it alike; each slot holder takes the next item when its own is
    /// served) or sleeps `sleep` (the slot holders too). The monitor looks
    /// every [`LOOK`] with the climb, as `monitor/mod.rs` does, and all
    /// presumed tasks are asleep at a look (a lock's waiters and sleepers
    /// alike).
    struct Model {
        record: Record,
        climb: Option<Climb>,
        now: Duration,
        /// Most presumed in flight at once, and when the last item ended.
        most: u32,
        done_at: Duration,
        waited: Duration,
        /// Sleeps last their `Work::Sleep` and up to this much more.
        spread: Duration,
    }

    const SLOTS: usize = 2;

    #[derive(Clone, Copy)]
    enum Work {
        Lock(Duration),
        Sleep(Duration),
    }

    impl Model {
        fn taught() -> Model {
            let mut record = Record::default();
            see(&mut record, Seen::Declared);
            Model {
                record,
                climb: None,
                now: Duration::ZERO,
                most: 0,
                done_at: Duration::ZERO,
                waited: Duration::ZERO,
                spread: Duration::ZERO,
            }
        }

        fn run(&mut self, items: usize, work: Work) {
            self.run_paced(items, work, |_| Duration::ZERO);
        }

        /// [`Model::run`] with item `i` arriving `arrives(i)` after the
        /// start (sleeps only: a lock's slot holders take the next item
        /// only as their own is served); `waited` sums how long the items
        /// sat queued.
        fn run_paced(&mut self, items: usize, work: Work, arrives: impl Fn(usize) -> Duration) {
            let start = self.now;
            self.most = 0;
            self.waited = Duration::ZERO;
            let mut arrived = 0;
            let mut queued = 0;
            let mut arrive = |now: Duration, queued: &mut usize| {
                while arrived < items && start + arrives(arrived) <= now {
                    arrived += 1;
                    *queued += 1;
                }
            };
            arrive(self.now, &mut queued);
            assert!(
                matches!(work, Work::Sleep(_)) || queued == items,
                "a lock's items arrive at once"
            );
            // Presumed tasks in flight: when each ends (sleeps), or a FIFO
            // of who waits for the lock (`true`: presumed).
            let mut sleeping: Vec<Duration> = Vec::new();
            let mut lock: VecDeque<bool> = VecDeque::new();
            let mut lock_free = self.now;
            let mut slot_sleeps: Vec<Duration> = Vec::new();
            let idle = Duration::MAX;
            let mut started = 0;
            let step = us(5);
            let mut next_look = self.now;
            let mut ended = 0;
            // The slots take the first items.
            for _ in 0..SLOTS.min(queued) {
                queued -= 1;
                match work {
                    Work::Lock(_) => lock.push_back(false),
                    Work::Sleep(d) => slot_sleeps.push(self.now + d + self.spread_of(&mut started)),
                }
            }
            slot_sleeps.resize(SLOTS, idle);
            while ended < items {
                arrive(self.now, &mut queued);
                // Ends due by now.
                match work {
                    Work::Lock(hold) => {
                        while self.now >= lock_free + hold && !lock.is_empty() {
                            lock_free += hold;
                            let presumed = lock.pop_front().unwrap();
                            ended += 1;
                            if presumed {
                                see(&mut self.record, Seen::Ended(None));
                            } else if queued > 0 {
                                queued -= 1;
                                lock.push_back(false);
                            }
                        }
                        if lock.is_empty() {
                            lock_free = self.now;
                        }
                    }
                    Work::Sleep(_) => {
                        let now = self.now;
                        let before = sleeping.len();
                        sleeping.retain(|&end| end > now);
                        for _ in sleeping.len()..before {
                            ended += 1;
                            see(&mut self.record, Seen::Ended(None));
                        }
                        for end in &mut slot_sleeps {
                            if *end <= now && *end != idle {
                                ended += 1;
                                *end = idle;
                            }
                            if *end == idle && queued > 0 {
                                queued -= 1;
                                let Work::Sleep(d) = work else { unreachable!() };
                                *end = now + d + self.spread_of(&mut started);
                            }
                        }
                    }
                }
                // Queued tasks presumed while there is room.
                while queued > 0 && see(&mut self.record, Seen::Presume) == Act::Presume {
                    queued -= 1;
                    match work {
                        Work::Lock(_) => lock.push_back(true),
                        Work::Sleep(d) => {
                            sleeping.push(self.now + d + self.spread_of(&mut started));
                        }
                    }
                }
                let in_flight = match work {
                    Work::Lock(_) => lock.iter().filter(|&&p| p).count(),
                    Work::Sleep(_) => sleeping.len(),
                } as u32;
                self.most = self.most.max(in_flight);
                if self.now >= next_look && in_flight > 0 {
                    self.look(in_flight);
                    next_look = self.now + LOOK;
                }
                self.waited += step * u32::try_from(queued).unwrap();
                self.now += step;
            }
            self.done_at = self.now - start;
        }

        /// The part of [`Model::spread`] the next sleep (the `started`th)
        /// adds to its own, spread evenly over the items.
        fn spread_of(&self, started: &mut u32) -> Duration {
            let i = *started;
            *started += 1;
            self.spread * (i.wrapping_mul(7919) % 1000) / 1000
        }

        /// A monitor look at `seen` presumed tasks, all asleep, as
        /// `Monitor::judge_presumed` carries it out.
        fn look(&mut self, seen: u32) {
            let now = self.now;
            let (record, _) = decide(self.record, Seen::TakeEnds);
            let old = self.record;
            self.record = record;
            let mut ends = old.ends();
            if self.climb.is_none_or(|c| c.forgotten(now, INTERVAL)) {
                self.climb = Some(Climb::new(now, old.cap()));
                ends = 0;
            }
            let climb = self.climb.as_mut().unwrap();
            let wants = look_cap(old, seen, seen);
            climb.look(now, (ends, None), old.cap(), wants, INTERVAL);
            let look = Seen::Look {
                seen,
                asleep: seen,
                limit: climb.level(),
            };
            see(&mut self.record, look);
        }
    }

    fn see(record: &mut Record, seen: Seen) -> Act {
        let (new, act) = decide(*record, seen);
        assert_eq!(Record::unpack(new.pack()), new, "packs losslessly");
        *record = new;
        act
    }

    #[test]
    fn a_convoy_of_a_kind_known_to_block_stays_within_a_probe_of_its_fresh_cap() {
        for hold in [20, 100] {
            let mut m = Model::taught();
            m.run(10_000, Work::Lock(us(hold)));
            assert!(m.most <= 2 * FRESH_CAP, "{hold} µs: {} presumed", m.most);
            let level = m.climb.unwrap().level();
            assert!(level <= 2 * FRESH_CAP, "{hold} µs: level {level}");
        }
    }

    #[test]
    fn a_kind_taught_by_sleeps_that_then_convoys_starts_over() {
        let mut m = Model::taught();
        m.run(200, Work::Sleep(Duration::from_millis(20)));
        assert!(m.most >= 190, "the sleeps: {} presumed at once", m.most);
        m.run(10_000, Work::Lock(us(100)));
        assert!(m.most <= 2 * FRESH_CAP, "the convoy: {} presumed", m.most);
    }

    #[test]
    fn long_waits_in_the_process_double_once_an_interval_from_the_first_burst() {
        // 500 waits of 200 ms judged by the climb (in a futex: a sleep
        // outside the process skips it, `Climb::waits_outside`): all
        // presumed within the first FREE_AFTER_INTERVALS intervals and
        // nine more, and the burst takes one wait (plus those intervals),
        // not 500 / 4 waits.
        let mut m = Model::taught();
        m.run(500, Work::Sleep(Duration::from_millis(200)));
        assert!(m.most >= 490, "{} presumed at once", m.most);
        assert!(
            m.done_at <= Duration::from_millis(200) + INTERVAL * (FREE_AFTER_INTERVALS + 10),
            "{:?}",
            m.done_at
        );
    }

    #[test]
    fn short_true_waits_keep_climbing_on_their_rising_rate() {
        // 2 ms waits outside the pool: ends come from the first interval
        // on, so the rate decides, and it rises with the level.
        let mut m = Model::taught();
        m.run(4_000, Work::Sleep(Duration::from_millis(2)));
        assert!(m.most >= 64, "{} presumed at once", m.most);
        // Held at 4 the burst would take 4,000 / 6 × 2 ms = 1.3 s.
        assert!(m.done_at <= Duration::from_millis(300), "{:?}", m.done_at);
    }

    #[test]
    fn short_true_waits_arriving_faster_get_the_threads_their_load_needs() {
        // Items of 2-5 ms sleep (slot holders too) arriving one every
        // 1.75 ms (2 in flight: the slots nearly keep up), then 2,000 one
        // every 0.7 ms (5 in flight: 3 presumed beside the slots). Held at
        // a level of 2 the queue grows by 0.29 an ms, and items wait
        // hundreds of ms.
        let mut m = Model::taught();
        m.spread = us(3000);
        let d = us(2000);
        m.run_paced(200, Work::Sleep(d), |i| {
            us(1750) * u32::try_from(i).unwrap()
        });
        m.run_paced(2000, Work::Sleep(d), |i| {
            us(700) * u32::try_from(i).unwrap()
        });
        let mean = m.waited / 2000;
        assert!(mean < Duration::from_millis(1), "mean wait {mean:?}");
        assert!(m.most >= 3, "{} presumed at once", m.most);
    }
}
