//! The monitor thread: finds blocked workers and applies the policy.
//!
//! # What it does each tick
//!
//! 1. [`Monitor::observe`]: reads every worker's status word (an atomic load
//!    each: cheap) and keeps, per worker, since when it has seen the *same*
//!    task running.
//! 2. [`ask_kernel`], for suspects only — workers holding a slot whose
//!    task has run at least the monitor interval: asks the kernel
//!    (`sys::ThreadProbe`: one `pread` of `/proc/self/task/<tid>/stat` and one
//!    CPU-clock read). A suspect found runnable is asked again less and less
//!    often (doubling, up to [`MAX_PROBE_BACKOFF`](kernel::MAX_PROBE_BACKOFF) ticks) until it changes
//!    task, and does not keep the monitor ticking fast meanwhile. Where the
//!    kernel cannot say (no `/proc` file: no `/proc`, out of descriptors,
//!    not Linux) the suspect is judged by its CPU clock, or by time alone if
//!    it has no clock either (`control::policy`, "When the kernel cannot
//!    answer"; the pool's mode is `Metrics::detection`).
//! 3. [`Monitor::apply`]: hands the [`Sample`] to the policy and carries out
//!    its decision: marks blocked workers (their slot goes back to the pool),
//!    changes the number of slots, wakes or starts workers for queued work;
//!    then what its looks at tasks presumed blocking found
//!    ([`Monitor::judge_presumed`], the rules in `control::presumption`).
//! 4. Watches for a stuck pool (`control::stuck`): every thread up to
//!    `max_threads` blocked while work waits, reported once per episode.
//! 5. Records one point of the thread-count series.
//!
//! # How long it sleeps
//!
//! Like a system monitor, it ticks at the monitor interval only while some
//! worker runs a task it may have to look at within an interval (a task not
//! already found computing again and again), doubles its sleep up to
//! `control::pace::MAX_SLEEP` while there are none (the pace is
//! `control::pace`'s pure decision),
//! and sleeps until woken while the pool is idle (no worker holds a slot or
//! runs a task, and nothing is queued). The protocol that makes sure a task
//! started on an idle pool wakes it is in `control::signal`. The worker wakes
//! it rather than the spawning thread so that a task spawned onto an idle
//! pool gets the idle core, not the monitor; and once woken, the monitor
//! sleeps one interval before it ticks, so its first look does not run
//! beside the task's start either (`Monitor::let_the_task_start`).
//!
//! The monitor holds only a `Weak` reference to the pool between ticks, so a
//! pool whose handles are gone is never kept alive by it.

mod held;
mod kernel;
mod presumed_looks;
pub(crate) mod sentinel;

use crate::control::ablation::Mechanism;
use crate::control::back_from_block::Look;
use crate::control::declared;
use crate::control::growth::{policy_max_threads, Climb};
use crate::control::pace::{Pace, Tick};
use crate::control::policy::{Decision, Limits, Policy, Sample, WorkerView};
use crate::control::slots::{Phase, StatusWord};
use crate::control::stuck::{Change, StuckWatch};
use crate::control::StartReason;
use crate::metrics::{ThreadCounters, ThreadSample};
use crate::runtime::kinds::Kind;
use crate::runtime::{Blocked, Hook, Shared};
use crate::sync::{lock, Arc, Ordering};
use crate::sys::WaitsFor;
use crate::trace;
use held::HeldProgress;
use kernel::{ask_kernel, back_from_block, cpu_since, used_a_core, Reading};
use presumed_looks::{look_at_presumed, PresumedLooks, ASKS_SAVED};
use std::sync::Weak;
use std::time::{Duration, Instant};

/// Starts the monitor thread of `shared`, or says why the system refused.
///
/// A pool without its monitor would not replace blocked workers, nor retry
/// refused thread starts while work waits: a pool that could hang silently.
/// So the build fails instead (`BuildError::HelperThreadStart`).
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let weak = Arc::downgrade(shared);
    let pace = Pace::new(
        shared.config.monitor_interval,
        shared.config.switches.on(Mechanism::QuickPace),
    );
    let name = format!("{}-monitor", shared.config.thread_name);
    let hooks = (
        shared.config.on_thread_start.clone(),
        shared.config.on_thread_stop.clone(),
    );
    std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(move || {
            // The hooks are counted through the pool while it is alive; the
            // stop hook may run after the pool is gone (nobody to count).
            let run_hook = |hook: Option<Hook>, which| match weak.upgrade() {
                Some(shared) => shared.run_hook(hook.as_ref(), which),
                None => {
                    let _ = hook.map(|hook| hook.run());
                }
            };
            run_hook(hooks.0, "on_thread_start");
            if let Some(shared) = weak.upgrade() {
                let cpus = crate::sys::thread_cpus(0).unwrap_or(0);
                shared
                    .monitor
                    .set_monitor_thread(crate::sys::current_tid(), cpus);
            }
            Monitor::new(weak.clone(), pace).run();
            run_hook(hooks.1, "on_thread_stop");
        })
        .map(drop)
}

/// What the monitor remembers about one worker entry.
#[derive(Clone, Copy, Debug)]
struct Track {
    /// The status word last seen.
    seen: StatusWord,
    /// When that word was first seen.
    since: Instant,
    /// The thread's CPU time when first seen in this task.
    cpu_at_since: Option<Duration>,
    /// When the thread was last asked about in this task (or first seen),
    /// and its CPU time then: the window [`recent_cpu_share`](kernel::recent_cpu_share) judges.
    last_look: Option<(Instant, Duration)>,
    /// The thread's run delay (time runnable but not running) at the last probe.
    run_delay: Option<Duration>,
    /// The first probe in this task that found the thread runnable and
    /// read both its CPU clock and its run delay: from it, how much the task
    /// computed of the time it could run (see [`computed_when_it_could`](kernel::computed_when_it_could)).
    runnable_first: Option<Reading>,
    /// [`computed_when_it_could`](kernel::computed_when_it_could) said yes for this task: not asked (nor
    /// its run delay read) again.
    known_computing: bool,
    /// The declared blocking section (`worker::DeclaredSection`, the
    /// entry's odd section count) seen at the last look in this task, and
    /// when it was first seen.
    declared_seen: Option<(u64, Instant)>,
    /// The last look at a worker whose slot was given away, for
    /// `control::back_from_block`.
    back_look: Option<Look>,
    /// Since when it has been seen computing again at every look
    /// (`control::hold` holds it once that is long enough).
    running_again_since: Option<Instant>,
    /// A probe found the thread runnable in this task.
    seen_runnable: bool,
    /// The last probe in this task found it runnable.
    runnable_at_last_probe: bool,
    /// Ticks to wait before the next kernel probe, and the current backoff.
    probe_wait: u32,
    backoff: u32,
    /// What the thread waited for when first found asleep in this task
    /// ([`Track::waits_outside`]).
    waits_for: Option<WaitsFor>,
}

impl Track {
    fn new(seen: StatusWord, now: Instant) -> Self {
        Track {
            seen,
            since: now,
            cpu_at_since: None,
            last_look: None,
            run_delay: None,
            runnable_first: None,
            known_computing: false,
            declared_seen: None,
            back_look: None,
            running_again_since: None,
            seen_runnable: false,
            runnable_at_last_probe: false,
            probe_wait: 0,
            backoff: 1,
            waits_for: None,
        }
    }
}

struct Monitor {
    pool: Weak<Shared>,
    tracks: Vec<Option<Track>>,
    policy: Option<Policy>,
    /// Whether the pool is stuck (every thread blocked, work waiting).
    stuck: StuckWatch,
    /// How long it sleeps between ticks.
    pace: Pace,
    /// Workers whose slot was given away seen computing again: counted
    /// against the slots again (`control::back_from_block`).
    counted_again: Vec<(usize, StatusWord, Duration)>,
    /// The CPU whose sentinel asked for this tick (`control::sentinel`).
    poked: Option<usize>,
    /// The pool's progress while workers are held (`control::hold`'s
    /// patience).
    held_progress: HeldProgress,
    /// Workers running a presumed task seen computing: judged, their kind
    /// no longer presumed, counted against the slots again
    /// (`Monitor::judge_presumed`).
    presumed_computing: Vec<(usize, StatusWord)>,
    /// Workers running a presumed task whose CPU timer is not armed yet:
    /// armed by `Monitor::judge_presumed` (`control::hold`).
    presumed_unarmed: Vec<(usize, StatusWord)>,
    /// The presumed tasks seen this tick, per kind.
    presumed_looks: PresumedLooks,
    /// How many asleep presumed tasks the kernel may still be asked about
    /// (`Track::waits_for`), and when the allowance last grew
    /// ([`Monitor::asks_allowed`]).
    asks: (u32, Duration),
    /// The growth climb of each kind with presumed tasks: how far a look
    /// may raise its cap (`control::growth`), dropped once not looked at
    /// for a while.
    climbs: Vec<(Kind, Climb)>,
    /// The task each worker ran at the last tick (its status tick, kind,
    /// and when the monitor first saw it), unless presumed: one that is
    /// gone by this tick ended, and counts toward its kind's `slot_ends`.
    last_tasks: Vec<Option<(u64, Kind, Duration)>>,
    /// Kinds with a growth climb whose tasks were seen to end on slots
    /// since the last look, and when the latest-begun of those was first
    /// seen: evidence for the climb that the kind's tasks end
    /// (`control::growth`).
    slot_ends: Vec<(Kind, Duration)>,
    /// Every task at work at the last look was of a kind its growth climb
    /// holds (`control::growth::policy_max_threads`).
    all_held: bool,
    /// The kinds of the tasks found runnable at this tick an interval or
    /// more into their run (a presumed task looked at, or a slot holder
    /// whose last probe found it so), each once: a sibling that runs, for
    /// the kind's growth climb (`control::growth`, "A sibling runs").
    /// Empty with that mechanism switched off.
    runnable: Vec<Kind>,
    /// Kinds whose queued tasks were handed threads at the last look:
    /// looked for again at the next while the kind has room
    /// (`Monitor::judge_presumed`).
    presume_again: Vec<Kind>,
    /// Ticks left with the monitor's thread on a short scheduler slice
    /// ([`Monitor::keep_up_with_holds`]); 0: the default slice.
    short_slice_ticks: u32,
    /// Workers found in the same declared blocking section at two looks,
    /// with the task each was seen in: their slots go to other workers.
    declared_overdue: Vec<(usize, StatusWord)>,
    /// When the metrics were last published, and whether that was at the
    /// start of an idle sleep (the `metrics` feature).
    #[cfg(feature = "metrics")]
    published: Option<(Instant, bool)>,
}

impl Monitor {
    fn new(pool: Weak<Shared>, pace: Pace) -> Self {
        Monitor {
            pool,
            tracks: Vec::new(),
            policy: None,
            stuck: StuckWatch::default(),
            pace,
            declared_overdue: Vec::new(),
            counted_again: Vec::new(),
            poked: None,
            held_progress: HeldProgress::default(),
            presumed_computing: Vec::new(),
            presumed_unarmed: Vec::new(),
            presumed_looks: PresumedLooks::default(),
            asks: (ASKS_SAVED, Duration::ZERO),
            climbs: Vec::new(),
            last_tasks: Vec::new(),
            slot_ends: Vec::new(),
            all_held: false,
            runnable: Vec::new(),
            presume_again: Vec::new(),
            short_slice_ticks: 0,
            #[cfg(feature = "metrics")]
            published: None,
        }
    }

    /// Publishes the pool's metrics once a second while it ticks, and once
    /// as it goes idle (`Pool::publish_metrics`).
    #[cfg(feature = "metrics")]
    fn publish(&mut self, shared: &Shared, tick: Tick) {
        let idle = tick == Tick::Idle;
        let due = match self.published {
            None => true,
            Some((_, true)) if idle => false,
            Some((at, _)) => idle || at.elapsed() >= crate::metrics::PUBLISH_EVERY,
        };
        if due {
            shared.metrics().publish(&shared.config.thread_name);
            self.published = Some((Instant::now(), idle));
        }
    }

    fn run(mut self) {
        loop {
            let Some(shared) = self.pool.upgrade() else {
                return;
            };
            if shared.is_stopped() {
                return;
            }
            let started = Instant::now();
            self.poked = shared.monitor.take_poked_cpu();
            let tick = self.tick(&shared);
            if tick != Tick::Idle {
                // Its CPU may idle while it sleeps (`control::placement`).
                shared.pull_a_worker_here(None);
                if sentinel::saturated(&shared) {
                    shared.monitor.arm_sentinels();
                }
            }
            #[cfg(feature = "metrics")]
            self.publish(&shared, tick);
            let timeout = self.next_sleep(&shared, tick);
            shared.monitor.record(started.elapsed(), None);
            let serve_spare = self.spare_server(&shared);
            let interval = Some(shared.config.monitor_interval);
            if !shared
                .monitor
                .sleep_nudged_after(timeout, interval, serve_spare)
            {
                return;
            }
            if timeout.is_none() && !self.let_the_task_start(&shared) {
                return;
            }
        }
    }

    /// Woken from the idle sleep: a worker is starting a task on a pool
    /// that was idle. Sleeps one interval before the next tick instead of
    /// ticking now: a tick now has nothing to judge (no task has run for
    /// the threshold yet, and the policy judges by `in_task_for`), and on a
    /// small machine it runs beside the starting task, often on its core.
    /// Ticking at once, a task spawned every 2 ms onto an idle 2-slot pool
    /// started after p50 33 µs, p90 81 µs; one interval later, 27 and 39,
    /// level with tokio's 30 and 44 in the same runs (medians of 15 rounds
    /// in 5 runs of `benches/tools/wake_latency.rs`; docs/measurements.md,
    /// "Waking an idle pool"). Blocking is detected no later: after the old
    /// immediate tick the monitor slept two intervals. Returns false if the
    /// monitor should exit.
    fn let_the_task_start(&self, shared: &Arc<Shared>) -> bool {
        let serve_spare = self.spare_server(shared);
        shared
            .monitor
            .sleep(Some(shared.config.monitor_interval), serve_spare)
    }

    /// Whether every task at work at the last look was of a kind its
    /// growth climb holds (a lock convoy), and the pool acts on it
    /// (`control::ablation::Mechanism::ConvoyHold`).
    fn convoy_held(&self, shared: &Shared) -> bool {
        self.all_held && shared.config.switches.on(Mechanism::ConvoyHold)
    }

    /// What the monitor does when a worker asks for a spare parked thread:
    /// `worker::start_spare`, deciding by `control::spare` (no spare for a
    /// lock convoy).
    fn spare_server<'a>(&self, shared: &'a Arc<Shared>) -> impl Fn() + 'a {
        let held = self.convoy_held(shared);
        move || crate::worker::start_spare(shared, held)
    }

    /// How long to sleep after `tick`; `None` is "until woken"
    /// (`control::pace`).
    fn next_sleep(&mut self, shared: &Shared, tick: Tick) -> Option<Duration> {
        // An idle pool lets go of what spawning threads keep of its tasks,
        // and sleeps until woken once it could say it is idle; a thread
        // that spawned since the last look keeps its part until the next,
        // an interval later.
        let still_idle = || shared.slots.counts().active == 0 && !shared.has_work();
        let idle_announced =
            tick == Tick::Idle && shared.went_idle() && shared.monitor.announce_idle(still_idle);
        self.pace.next_sleep(tick, idle_announced)
    }

    /// One tick: observe, probe, decide, apply, record.
    fn tick(&mut self, shared: &Arc<Shared>) -> Tick {
        let config = &shared.config;
        // Sentinels see an idle core at once; the quick pace is for pools
        // without them (`control::pace`).
        self.pace.sentinels_watch(shared.monitor.sentinels_watch());
        let limits = Limits {
            concurrency: config.concurrency,
            max_threads: config.max_threads,
            threshold: config.monitor_interval,
            quantum: config.quantum,
            switches: config.switches,
        };
        let mut policy = self
            .policy
            .take()
            .unwrap_or_else(|| Policy::new(config.controller));
        let (sample, mut any_suspect) = self.observe(shared, &policy, &limits);
        // While every task at work is of a kind whose growth climb holds
        // it (more threads did not raise its completions: a lock convoy),
        // the policy replaces blocked workers and grows bursts only up to
        // a few threads (`control::growth`); the stuck watch below keeps
        // the real `max_threads`.
        let held = Limits {
            max_threads: policy_max_threads(
                limits.max_threads,
                limits.concurrency,
                self.convoy_held(shared),
            ),
            ..limits
        };
        let decision = policy.decide(&held, &sample);
        self.policy = Some(policy);
        // Declared sections first: the worker said it blocks, which is
        // what the kernel's look in `apply` would find too.
        for (index, seen) in std::mem::take(&mut self.declared_overdue) {
            if crate::worker::hand_over_declared(shared, index, seen) {
                self.tracks[index] = None;
            }
        }
        if !decision.mark_blocked.is_empty() {
            self.pace.found_blocking();
        }
        self.apply(shared, &sample, &decision);
        let back = std::mem::take(&mut self.counted_again);
        if !back.is_empty() {
            // One back from its block and computing: the others blocked
            // beside it (a batch that fetched, then processes) are likely
            // back too. Looked at soon, each is held before it has
            // computed long beside the slot holders, instead of one at a
            // time as their backed-off probes come round.
            for track in self.tracks.iter_mut().flatten() {
                if track.seen.phase() == Phase::Blocked {
                    track.probe_wait = 0;
                    track.backoff = 1;
                }
            }
            self.pace.found_blocking();
            // Those not yet held (`control::hold::HOLD_AFTER`) are looked
            // at again soon, not at the busy pace.
            any_suspect = true;
        }
        self.keep_up_with_holds(!back.is_empty() || shared.holds.any());
        for (index, seen, computing_for) in back {
            shared.back_from_block(index, seen, computing_for);
        }
        any_suspect |= self.look_at_held(shared, sample.ended, sample.now);
        if self.judge_presumed(shared, sample.now, sample.ended) {
            // A kind's presumed tasks were (mostly) found asleep and it
            // has more room, or its growth climb gathers evidence: look
            // again soon, so they double within a few intervals
            // (`control::presumption`, `control::growth`).
            self.pace.found_blocking();
            any_suspect = true;
        }
        self.watch_stuck(shared, &limits, &sample);

        // Idle also needs the policy at rest: a raised target must first be
        // given back, which takes ticks.
        let idle = sample.in_task.is_empty()
            && sample.blocked == 0
            && sample.queued == 0
            && sample.slots.active == 0
            && shared.slots.target() == config.concurrency;
        let point = (!idle).then(|| ThreadSample {
            at: sample.now,
            running: sample.slots.active,
            blocked: sample.blocked + decision.mark_blocked.len(),
            idle: sample.parked,
        });
        shared.monitor.record(Duration::ZERO, point);
        match (idle, any_suspect) {
            (true, _) => Tick::Idle,
            (false, true) => Tick::Suspects,
            (false, false) => Tick::Busy,
        }
    }

    /// Steps 1 and 2: a sample of the pool, with a kernel view of each
    /// suspect due for a probe. Also returns whether any suspect is due for
    /// a probe next tick.
    fn observe(&mut self, shared: &Shared, policy: &Policy, limits: &Limits) -> (Sample, bool) {
        let now = Instant::now();
        let entries = shared.threads.used();
        if self.tracks.len() < entries.len() {
            self.tracks.resize(entries.len(), None);
        }
        if self.last_tasks.len() < entries.len() {
            self.last_tasks.resize(entries.len(), None);
        }
        let mut sample = Sample {
            now: now.duration_since(shared.built_at),
            ..Sample::default()
        };
        let mut any_suspect = false;
        // Presumed tasks whose wait the kernel may be asked about this
        // tick (`Track::waits_for`): a sample decides a kind's waits.
        let mut classify = if shared.config.switches.on(Mechanism::WaitClasses) {
            self.asks_allowed(sample.now)
        } else {
            0
        };
        // Whether every task at work is of a kind its climb holds.
        let mut all_held = None;
        self.runnable.clear();
        let note_runnable = shared.config.switches.on(Mechanism::SiblingRuns);
        for (index, entry) in entries.iter().enumerate() {
            let seen = entry.status.load();
            self.saw_task_end(entry, index, seen, sample.now);
            let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
            let kind_held = seen.phase() != Phase::Idle
                && self.climbs.iter().any(|(k, c)| *k == kind && c.holds());
            if seen.phase() != Phase::Idle && all_held != Some(false) {
                all_held = Some(kind_held);
            }
            // Asleep, a task of a held kind waits for a sibling while the
            // whole pool is at such work (the last look's verdict): its
            // slot is not handed on (`control::growth`).
            let sibling_wait = kind_held && self.convoy_held(shared);
            let track = &mut self.tracks[index];
            match seen.phase() {
                Phase::Idle => {
                    *track = None;
                    continue;
                }
                Phase::Blocked if entry.hold.is_asked() => {
                    // Held for a slot (`control::hold`): it waits for the
                    // pool, not for the world, and is no block to replace.
                    continue;
                }
                Phase::Blocked => {
                    sample.blocked += 1;
                    // A task presumed blocking, not judged yet
                    // (`runtime::presumed`).
                    let presumed = entry.presumed.load(Ordering::Relaxed) == seen.tick();
                    let t = match track {
                        Some(t) if t.seen == seen => t,
                        _ => {
                            entry.saw_task(seen.tick(), now);
                            let mut fresh = Track::new(seen, now);
                            // Just marked: its first look two ticks on, so
                            // a burst of blocked workers is not probed at
                            // once. A presumed task is looked at at once:
                            // what it does counts toward its kind's cap.
                            fresh.probe_wait = if presumed { 0 } else { 2 };
                            track.insert(fresh)
                        }
                    };
                    if presumed {
                        let look = look_at_presumed(entry, t, now, limits.threshold, &mut classify);
                        self.asks.0 = classify;
                        self.presumed_looks.tally(entry, look);
                        if look.runs && note_runnable && !self.runnable.contains(&kind) {
                            self.runnable.push(kind);
                        }
                        if look.computes {
                            self.presumed_computing.push((index, seen));
                        }
                        if shared.holds.in_handler && !entry.hold.armed_for(seen.tick()) {
                            self.presumed_unarmed.push((index, seen));
                        }
                        // Runnable: judged within the next looks, at the
                        // interval's pace.
                        any_suspect |= !look.asleep;
                    } else if shared.config.switches.on(Mechanism::CountAgain)
                        && !entry.hold.armed_for(seen.tick())
                    {
                        // Looked at only where no CPU timer of its own
                        // judges it (`control::hold`: the timer fires on
                        // the thread once it computes, and takes a slot,
                        // holds it or counts it): these looks are 3 reads
                        // of `/proc` and its clock each, and with the
                        // timers they bought nothing the lab could see
                        // (the ablation at 1101e0b, docs/measurements.md).
                        if let Some(computing_for) = back_from_block(entry, t, now) {
                            self.counted_again.push((index, seen, computing_for));
                        }
                    }
                    continue;
                }
                Phase::InTask => {}
            }
            let fresh = !matches!(track, Some(t) if t.seen == seen);
            let t = track.get_or_insert_with(|| Track::new(seen, now));
            if fresh {
                *t = Track::new(seen, now);
                entry.saw_task(seen.tick(), now);
            }
            // A declared blocking section seen for an interval, or seen
            // asleep sooner: its slot is handed over (`hand_over_declared`,
            // deciding by `control::declared`). A call that returns within
            // the grace without sleeping costs what the call costs.
            let section = entry.declared_sections.load(Ordering::Relaxed);
            if section % 2 == 1 {
                match t.declared_seen {
                    Some((seen_section, since)) if seen_section == section => {
                        let asleep = || {
                            lock(&entry.probe)
                                .as_ref()
                                .is_some_and(|probe| probe.state().is_waiting())
                        };
                        if declared::hands_over(now.duration_since(since), limits.threshold, asleep)
                        {
                            self.declared_overdue.push((index, seen));
                        }
                    }
                    _ => t.declared_seen = Some((section, now)),
                }
                any_suspect = true;
            }
            let mut view = WorkerView {
                index,
                seen,
                in_task_for: now.duration_since(t.since),
                kernel: None,
                fallback: None,
                computed: false,
                sibling_wait,
            };
            let probe = policy
                .detects_blocking()
                .then(|| lock(&entry.probe).clone())
                .flatten();
            if let Some(probe) = &probe {
                if fresh {
                    t.cpu_at_since = probe.cpu_time();
                    t.last_look = t.cpu_at_since.map(|cpu| (now, cpu));
                } else if policy.is_suspect(limits, &view, self.poked.is_some()) {
                    if self.poked.is_some() {
                        // A core idles: every suspect is read now, not at
                        // its backed-off turn.
                        t.probe_wait = 0;
                    }
                    (view.kernel, view.fallback) =
                        ask_kernel(shared, probe, t, view.in_task_for, limits.threshold);
                }
                if t.runnable_at_last_probe
                    && view.in_task_for >= limits.threshold
                    && note_runnable
                    && !self.runnable.contains(&kind)
                {
                    self.runnable.push(kind);
                }
                // Tick at the interval while some task is, or will be within
                // an interval, a suspect due for a look: a block of 2-5 ms is
                // then seen after 1-2 ms, not after the backed-off sleep (up
                // to 10 ms). A task found runnable again and again
                // (CPU-bound) is probed less and less often and lets the
                // monitor slow down, so it does not take a thousand wake-ups
                // a second from the busy cores.
                any_suspect |= t.probe_wait == 0;
            }
            // A probe found it runnable in this task, and its CPU time says
            // it computed.
            view.computed = t.seen_runnable
                && limits.quantum.is_some_and(|q| view.in_task_for >= q)
                && (used_a_core(cpu_since(probe.as_deref(), t), view.in_task_for)
                    || t.computed_when_it_could(probe.as_deref()));
            if view.computed {
                // What the quantum rule learns: this kind of task computes.
                // (Its lend counts the same evidence: `policy::WorkerView`.)
                shared
                    .kinds
                    .saw_computing(Kind::from_bits(entry.kind.load(Ordering::Relaxed)));
            }
            sample.in_task.push(view);
        }
        self.all_held = all_held == Some(true);
        sample.queued = shared.queued();
        sample.slots = shared.slots.counts();
        sample.target = shared.slots.target();
        sample.threads = shared.threads.alive();
        sample.parked = shared.sleepers.parked();
        sample.ended = shared.task_totals();
        sample.presumed = shared
            .threads
            .counters
            .presumed_blocking
            .load(Ordering::Relaxed);
        sample.lent = shared.quantum_lent();
        sample.lend_refused = shared.take_quantum_refusal();
        sample.core_idle = self.poked.is_some();
        (sample, any_suspect)
    }

    /// Notes whether the task the worker at `index` ran at the last tick
    /// ended by this one (`seen` is its status word `now`), for the growth
    /// climb of its kind, if it has one (`Monitor::slot_ends`). Presumed
    /// tasks are counted exactly where their end is recorded instead.
    fn saw_task_end(
        &mut self,
        entry: &crate::runtime::Entry,
        index: usize,
        seen: StatusWord,
        now: Duration,
    ) {
        let running = (seen.phase() != Phase::Idle).then(|| seen.tick());
        let last = self.last_tasks[index];
        if let Some((tick, kind, first)) = last {
            if running != Some(tick) && self.climbs.iter().any(|(k, _)| *k == kind) {
                match self.slot_ends.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, latest)) => *latest = (*latest).max(first),
                    None => self.slot_ends.push((kind, first)),
                }
            }
        }
        self.last_tasks[index] = running
            .filter(|&tick| entry.presumed.load(Ordering::Relaxed) != tick)
            .map(|tick| match last {
                Some((t, kind, first)) if t == tick => (tick, kind, first),
                _ => (
                    tick,
                    Kind::from_bits(entry.kind.load(Ordering::Relaxed)),
                    now,
                ),
            });
    }

    /// Reports the start and the end of a stuck episode (`control::stuck`).
    fn watch_stuck(&mut self, shared: &Shared, limits: &Limits, sample: &Sample) {
        let counters = &shared.threads.counters;
        let pool = &shared.config.thread_name;
        match self.stuck.observe(limits, sample) {
            Some(Change::Began) => {
                ThreadCounters::bump(&counters.stuck_episodes);
                counters.stuck.store(1, Ordering::Relaxed);
                trace::pool_stuck(
                    pool,
                    sample.threads,
                    sample.blocked,
                    sample.queued,
                    limits.max_threads,
                );
            }
            Some(Change::Ended) => {
                counters.stuck.store(0, Ordering::Relaxed);
                trace::pool_unstuck(pool);
            }
            None => {}
        }
    }

    /// Step 3: carries out the policy's decision.
    fn apply(&mut self, shared: &Arc<Shared>, sample: &Sample, decision: &Decision) {
        let counters = &shared.threads.counters;
        for &(index, seen) in &decision.mark_blocked {
            let entry = shared.threads.entry(index);
            if entry.status.try_mark_blocked(seen) {
                shared.give_up_slot(false);
                if shared.holds.in_handler {
                    // Back from its block and computing on without a slot,
                    // its thread holds itself (`Shared::hold_self`).
                    entry
                        .hold
                        .arm(seen.tick(), crate::control::hold::FIRST_LOOK);
                }
                let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
                shared.kinds.saw_blocking(kind);
                ThreadCounters::bump(&counters.blocked_detections);
                shared.worker_blocked(index, kind, Blocked::Detected);
                self.tracks[index] = None;
            }
        }
        match decision.lend {
            Some(true) => shared.lend_for_quantum(),
            Some(false) => shared.end_quantum_lend(),
            None => {}
        }
        if let Some(target) = decision.set_target {
            shared.set_target(target);
        }
        // One replacement per blocked worker; beyond that, burst growth,
        // a quantum lend or a policy's new slots; else work nobody was
        // woken for.
        let grown = if decision.burst {
            StartReason::Burst
        } else if decision.lend == Some(true) {
            StartReason::Quantum
        } else if decision.set_target.is_some_and(|t| t > sample.target) {
            StartReason::Policy
        } else {
            StartReason::Demand
        };
        for n in 0..decision.wake {
            if !shared.slots.try_acquire(true) {
                break;
            }
            let reason = if n < decision.mark_blocked.len() {
                StartReason::Compensation
            } else {
                grown
            };
            // At a tick a CPU sentinel asked for, the first worker woken
            // is kept to the sentinel's idle CPU for its wake-up: woken by
            // the monitor, whose CPU is busy meanwhile, the kernel placed
            // it by its last CPU, often behind a worker on the busy core
            // while the idle one stayed idle. It takes its own CPUs back
            // as it wakes.
            let mut idle_cpu = if n == 0 { self.poked } else { None };
            crate::worker::wake_or_start_with(shared, reason, |index| {
                if let Some(cpu) = idle_cpu.take() {
                    let entry = shared.threads.entry(index);
                    let tid = lock(&entry.probe).as_ref().map(|probe| probe.tid());
                    if let Some(tid) = tid {
                        entry.hold.keep_to_cpu(tid, cpu);
                    }
                }
            });
        }
    }
}
