//! Holding a worker back from its block until a slot is its own
//! (`control::hold` decides when): the word the held thread waits on, the
//! queue of held workers in the order they were held, and the two ways a
//! held worker gets its slot.
//!
//! # The protocol
//!
//! A held worker's task status stays `Blocked` (it holds no slot) while it
//! waits; it gets a slot the way any worker back from a block is counted
//! again, by the swap [`TaskStatus::try_count_again`] of the status word it
//! was held in:
//!
//! - **Handed** ([`Holds::hand_slot`]): a worker that ends a task with its
//!   slot gives that slot to the oldest held worker. The count does not
//!   change; the slot changes owner when the swap wins, and the giver then
//!   holds none (it gives way). If the swap fails (the held task ended:
//!   its thread stopped waiting, see patience), the giver keeps its slot
//!   and tries the next.
//! - **Free** ([`Holds::count_free`], the monitor): a slot free within the
//!   target is taken for the oldest held worker, as
//!   `control::slots::count_worker_again` takes one.
//!
//! Either way the worker's [`HoldWord`] then goes from `ASKED` to `LET_GO`
//! and its thread is woken: the status word settles the slot, the hold
//! word only ends the wait. So a thread that stopped waiting on its own
//! (its patience ran out, `sys::hold_signal`) and is handed a slot later
//! runs with it, counted: the count is right either way.
//!
//! Who asks, two ways:
//!
//! - **The thread itself** ([`Holds::hold_self`], from the signal's
//!   handler when the CPU timer armed at its block fires, or a worker that
//!   found a crowd computing without slots signalled it, and
//!   `control::hold::on_timer` says hold): it takes a free slot, or asks
//!   and queues itself (a lock it only tries: the interrupted task never
//!   holds it, and a taken lock means "try again a little later"), then
//!   looks at the slots once more: a slot given back by a worker that
//!   parked between its first look and its queueing would otherwise be
//!   missed by both (the parking worker passes a fence between giving its
//!   slot back and looking at the queue, `Shared::look_at_held`; the
//!   thread one between queueing itself and looking again).
//! - **The thread back from a declared section**
//!   ([`Holds::hold_after_section`], `tidepool::blocking` returned without
//!   a slot): the same steps on its own thread outside any handler (the
//!   queue's lock is waited for), at every section's end; it then waits
//!   the same way ([`wait_while_the_pool_runs`]).
//! - **The monitor** ([`HoldWord::ask`]: `FREE` to `ASKED`), for a thread
//!   whose timer could not be armed: it asks before it queues the worker
//!   and signals its thread.
//!
//! Asked by itself or by the monitor, the thread, in the signal's handler,
//! waits while the word says `ASKED` ([`wait_in_handler`]) and leaves it
//! `FREE`. A worker that lets it go and then parks or blocks first keeps
//! it to its own CPU ([`let_go_here`]), and the thread gives itself its
//! CPUs back as its wait ends. A let-go that
//! comes before the signal is handled leaves `LET_GO`, and the handler
//! returns at once. The loom model
//! `loom_models::hold` checks that a handed slot is counted exactly once,
//! that the waiter always ends, and that a thread holding itself is never
//! left waiting beside a slot given back as it queued.

use crate::control::hold::{on_timer, OnTimer, FIRST_LOOK};
use crate::control::slots::{count_worker_again, Phase, Slots, StatusWord, TaskStatus};
use crate::sync::{fence, lock, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::sys::hold_signal::CpuTimer;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;

/// Nobody asked the thread to wait.
const FREE: u32 = 0;
/// The monitor asked the thread to wait for a slot.
const ASKED: u32 = 1;
/// The wait is over (a slot was counted for it, or its patience ended).
const LET_GO: u32 = 2;

/// The word a held worker's thread waits on, the task it was last held
/// in, and the timer that holds it without the monitor: one per worker
/// entry.
#[derive(Debug, Default)]
pub(crate) struct HoldWord {
    /// `FREE`, `ASKED` or `LET_GO`: what the thread waits on.
    word: AtomicU32,
    /// The status tick of the task the worker was last asked to wait in.
    asked_in: AtomicU64,
    /// The timer on the thread's CPU clock (`sys::hold_signal::CpuTimer`),
    /// while a thread has the entry and the pool holds.
    timer: Mutex<Option<CpuTimer>>,
    /// The status tick of the task whose block armed the timer; 0 when it
    /// is not armed.
    armed_for: AtomicU64,
    /// The status tick of the task whose timer fired (its worker counts in
    /// [`Holds::computing`] until it is held or the task ends); 0 if none.
    fired_for: AtomicU64,
    /// The thread's id (for the signal) while it has a timer; 0 otherwise.
    tid: AtomicU32,
    /// The thread's CPU clock id (`sys::cpu_clock_time`), as bits.
    clock: AtomicU32,
    /// The thread's CPU time when the timer was armed, in nanoseconds.
    cpu_at_arm: AtomicU64,
    /// The CPUs the thread may run on as it set itself up (a bitmap,
    /// `sys::thread_cpus`, read after the start hook); 0 if unknown. What
    /// every temporary move gives back: read from the thread instead, a
    /// move could take another's temporary CPU for the thread's own.
    own_cpus: AtomicU64,
    /// A worker that let it go kept it to its own CPU
    /// ([`move_to_this_cpu`](Self::move_to_this_cpu)) and nobody gave it
    /// its CPUs back yet.
    moved: AtomicBool,
}

impl HoldWord {
    /// Whether the worker was held in the task of status tick `tick`
    /// already (`control::hold`: once a task).
    pub(crate) fn held_in(&self, tick: u64) -> bool {
        self.asked_in.load(Ordering::Relaxed) == tick
    }

    /// Asks the thread to wait in the task of tick `tick`; false if it was
    /// asked already (or its last let-go is not yet seen by it).
    pub(crate) fn ask(&self, tick: u64) -> bool {
        let asked = self
            .word
            .compare_exchange(FREE, ASKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if asked {
            // Only the monitor asks: nobody else writes the tick.
            self.asked_in.store(tick, Ordering::Relaxed);
        }
        asked
    }

    /// Takes the ask back before the thread was signalled (the signal could
    /// not be sent).
    pub(crate) fn withdraw(&self) {
        let _ = self
            .word
            .compare_exchange(ASKED, FREE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Takes back an ask the thread made of itself that could not be
    /// queued: as if never asked in this task, so it may ask again.
    fn take_back(&self) {
        self.asked_in.store(0, Ordering::Relaxed);
        self.withdraw();
    }

    /// Ends the wait. True if the thread was asked (the caller wakes it).
    pub(crate) fn let_go(&self) -> bool {
        self.word
            .compare_exchange(ASKED, LET_GO, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A new thread takes the entry: nothing is asked of it.
    pub(crate) fn reset(&self) {
        self.word.store(FREE, Ordering::Release);
    }

    /// The entry's thread sets its CPU timer as it starts, with its id and
    /// its CPU clock's (`None` as it exits: the old one is deleted).
    pub(crate) fn set_timer(&self, timer: Option<CpuTimer>, tid: i32, clock: Option<i32>) {
        self.armed_for.store(0, Ordering::Relaxed);
        let (tid, clock) = match (&timer, clock) {
            (Some(_), Some(clock)) => (tid as u32, clock as u32),
            _ => (0, 0),
        };
        self.clock.store(clock, Ordering::Relaxed);
        self.tid.store(tid, Ordering::Relaxed);
        *lock(&self.timer) = timer;
    }

    /// The thread's CPU time now, if it has a timer (and a clock).
    fn cpu_now(&self) -> Option<std::time::Duration> {
        if self.tid.load(Ordering::Relaxed) == 0 {
            return None;
        }
        crate::sys::cpu_clock_time(self.clock.load(Ordering::Relaxed) as i32)
    }

    /// The CPU time the thread used since its timer was armed.
    fn computed_since_arm(&self) -> std::time::Duration {
        let at_arm = std::time::Duration::from_nanos(self.cpu_at_arm.load(Ordering::Relaxed));
        self.cpu_now()
            .map_or(std::time::Duration::ZERO, |now| now.saturating_sub(at_arm))
    }

    /// The worker's slot was given away in the task of tick `tick`: its
    /// thread is signalled once it has computed `after` of CPU time from
    /// now, unless the timer is disarmed first (see [`Holds::hold_self`]).
    pub(crate) fn arm(&self, tick: u64, after: std::time::Duration) {
        let timer = lock(&self.timer);
        if let Some(timer) = timer.as_ref() {
            let cpu = self.cpu_now().unwrap_or_default();
            self.cpu_at_arm
                .store(cpu.as_nanos() as u64, Ordering::Relaxed);
            self.armed_for.store(tick, Ordering::Relaxed);
            timer.arm(after);
        }
    }

    /// At a task end: the timer, if a block armed it, is disarmed (a
    /// signal already on its way finds the task over and does nothing),
    /// and the worker no longer counts among those computing without a
    /// slot (`holds`).
    pub(crate) fn disarm(&self, holds: &Holds) {
        // Every task end passes here: one load when no block armed the
        // timer (a fire needs an armed timer, so nothing counts either).
        if self.armed_for.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.stop_computing(holds);
        self.armed_for.store(0, Ordering::Relaxed);
        if let Some(timer) = lock(&self.timer).as_ref() {
            timer.disarm();
        }
    }

    /// On a worker about to give its slot to this held thread and park:
    /// keeps the thread to the caller's CPU until it runs again
    /// ([`move_back`](Self::move_back)), so the kernel wakes it where a
    /// core is about to be free. Woken by a futex, the thread was placed
    /// on the other, busy core while this one idled: two threads shared
    /// one core, the other idle, until the kernel's balancing moved one,
    /// often 5-11 ms later (`perf sched` in fetch-process). Only a thread
    /// allowed on this CPU and on others. True if it was kept here.
    #[cfg(not(tidepool_loom))]
    fn move_to_this_cpu(&self) -> bool {
        let tid = self.tid.load(Ordering::Relaxed) as i32;
        if tid == 0 {
            return false;
        }
        let Some(cpu) = crate::sys::current_cpu() else {
            return false;
        };
        self.keep_to_cpu(tid, cpu)
    }

    /// Gives the thread back its own CPUs after
    /// [`move_to_this_cpu`](Self::move_to_this_cpu), if it was moved and
    /// nobody gave them back yet: the thread itself once it runs (`tid`
    /// 0), or the mover if it could not let the thread go after all.
    #[cfg(not(tidepool_loom))]
    fn move_back(&self, tid: i32) {
        if self.moved.swap(false, Ordering::Relaxed) {
            crate::sys::set_thread_cpus(tid, self.own_cpus.load(Ordering::Relaxed));
        }
    }

    /// Keeps thread `tid` to CPU `cpu` alone, marked as moved so that
    /// [`move_back`](Self::move_back) or
    /// [`give_cpus_back`](Self::give_cpus_back) restores its own CPUs.
    /// For [`move_to_this_cpu`](Self::move_to_this_cpu), and for the
    /// monitor at a tick a CPU sentinel of that idle CPU asked for
    /// (`monitor::sentinel`): the parked worker it wakes is kept there for
    /// the wake-up, so the kernel wakes it there, and gives itself its own
    /// CPUs back as its park returns, before it runs any task. True if it
    /// was kept; false, and nothing changed, if `cpu` is not one of its
    /// own or is its only one.
    pub(crate) fn keep_to_cpu(&self, tid: i32, cpu: usize) -> bool {
        let cpus = self.own_cpus.load(Ordering::Relaxed);
        let there = 1u64.checked_shl(cpu as u32).unwrap_or(0);
        if cpus & there == 0 || cpus == there {
            return false;
        }
        self.moved.store(true, Ordering::Relaxed);
        if crate::sys::set_thread_cpus(tid, there) {
            true
        } else {
            self.moved.store(false, Ordering::Relaxed);
            false
        }
    }

    /// The thread's own CPUs back if a waker kept it to one
    /// ([`keep_to_cpu`](Self::keep_to_cpu)); called by
    /// the thread itself as its park returns.
    pub(crate) fn give_cpus_back(&self) {
        #[cfg(not(tidepool_loom))]
        self.move_back(0);
    }

    /// The worker's thread, as it starts (after the start hook, which may
    /// pin it), says which CPUs are its own (`sys::thread_cpus`; 0 if
    /// unknown: then nobody moves it).
    pub(crate) fn set_own_cpus(&self, cpus: u64) {
        self.own_cpus.store(cpus, Ordering::Relaxed);
    }

    /// The CPUs the thread set itself up with; 0 if unknown.
    pub(crate) fn own_cpus(&self) -> u64 {
        self.own_cpus.load(Ordering::Relaxed)
    }

    /// Whether the timer was armed by a block in the task of tick `tick`
    /// (then the timer judges the worker back from its block, and the
    /// monitor need not look).
    pub(crate) fn armed_for(&self, tick: u64) -> bool {
        self.armed_for.load(Ordering::Relaxed) == tick
    }

    /// In the handler: the timer fired in the task of tick `tick`. Returns
    /// how many workers compute without a slot now (this one counted once
    /// a task).
    fn fired(&self, tick: u64, holds: &Holds) -> usize {
        if self.fired_for.swap(tick, Ordering::Relaxed) == tick {
            holds.computing.load(Ordering::Relaxed)
        } else {
            holds.computing.fetch_add(1, Ordering::Relaxed) + 1
        }
    }

    /// The worker stops counting among those computing without a slot.
    fn stop_computing(&self, holds: &Holds) {
        if self.fired_for.swap(0, Ordering::Relaxed) != 0 {
            holds.computing.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// In the handler: the timer fires again after `cpu` more CPU time.
    /// Skipped if the timer's lock is taken now (the thread may have been
    /// interrupted holding it): the monitor's looks remain.
    fn rearm(&self, cpu: std::time::Duration) {
        if let Some(timer) = crate::sync::try_lock(&self.timer) {
            if let Some(timer) = timer.as_ref() {
                timer.arm(cpu);
            }
        }
    }

    /// Whether the thread is asked to wait now (the monitor does not count
    /// a held worker as blocked: it waits for a slot, not for the world).
    pub(crate) fn is_asked(&self) -> bool {
        self.word.load(Ordering::Acquire) == ASKED
    }

    /// On the held thread (the loom model's view of the handler's wait,
    /// [`wait_in_handler`]): waits while the word says `ASKED`. `park(word,
    /// ASKED)` sleeps while the word holds `ASKED` (it may return early);
    /// it returns false once the thread's patience is over, and the thread
    /// then stops waiting. Leaves the word `FREE`.
    #[cfg(tidepool_loom)]
    pub(crate) fn wait(&self, park: impl FnMut(&AtomicU32, u32) -> bool) {
        wait_on(&self.word, park);
    }
}

/// The held thread's wait on its word (`HoldWord::wait` in the loom
/// model, [`wait_in_handler`] in the signal's handler).
fn wait_on(word: &AtomicU32, mut park: impl FnMut(&AtomicU32, u32) -> bool) {
    while word.load(Ordering::Acquire) == ASKED {
        if !park(word, ASKED) {
            break;
        }
    }
    // `ASKED` (patience over) or `LET_GO`: either way, done.
    word.store(FREE, Ordering::Release);
}

/// Where a worker's thread is held: its pool and its entry's index. The
/// worker gives a pointer to one (alive on its stack while it runs) to
/// `sys::hold_signal::enter`, and the signal's handler reads it.
#[derive(Debug)]
pub(crate) struct HoldSite<'a> {
    /// The worker's pool.
    pub(crate) shared: &'a super::Shared,
    /// The worker's entry.
    pub(crate) index: usize,
}

/// What the hold signal's handler does on a worker's thread (`site` is
/// its [`HoldSite`], given to `sys::hold_signal::enter`):
///
/// - **Asked by the monitor** (the word is not `FREE`): if the thread is
///   still in the task it was asked to wait in (the signal may come after
///   that task ended: the thread then runs on at once), waits on its hold
///   word until let go, or for `sys::hold_signal`'s longest wait.
/// - **Its CPU timer fired** (the word is `FREE`): the thread computed
///   [`control::hold::HOLD_AFTER`](crate::control::hold::HOLD_AFTER) since
///   its slot was given away in this task. It holds itself
///   (`Shared::hold_self`: a free slot, or the queue) and waits the same
///   way, for as long as the pool runs: the monitor's patience lets it go
///   if nothing ends.
///
/// While the thread is in this handler its task cannot end, so the check
/// holds until a let-go: only the hand-off of a slot (which also lets it
/// go) moves its status word on.
#[cfg(not(tidepool_loom))]
fn wait_in_handler(site: *const ()) {
    // SAFETY: `site` is the `HoldSite` the worker thread running this
    // handler gave `sys::hold_signal::enter` (`worker::run`), which stays
    // alive on that thread's stack (and holds its pool) until the thread
    // calls `leave`; the handler runs on the same thread, between the two.
    let site = unsafe { &*site.cast::<HoldSite<'_>>() };
    let entry = site.shared.threads.entry(site.index);
    let hold = &entry.hold;
    let seen = entry.status.load();
    if hold.word.load(Ordering::Acquire) == FREE {
        if seen.phase() != Phase::Blocked || !hold.armed_for(seen.tick()) {
            return;
        }
        let computed = hold.computed_since_arm();
        if computed < FIRST_LOOK / 2 {
            // Signalled by another worker's look (below) while it had not
            // computed since its slot went: asleep still, or just woken.
            return;
        }
        let shared = site.shared;
        let computing = hold.fired(seen.tick(), &shared.holds);
        match on_timer(computed, computing, shared.config.concurrency) {
            OnTimer::RunOn(more) => hold.rearm(more),
            OnTimer::Hold => {
                if computing > shared.config.concurrency {
                    look_for_the_crowd(shared, site.index);
                }
                match shared.hold_self(site.index, seen) {
                    HeldSelf::Held => wait_while_the_pool_runs(hold, shared),
                    HeldSelf::Busy => hold.rearm(FIRST_LOOK),
                    HeldSelf::Counted | HeldSelf::Not => {}
                }
                hold.stop_computing(&shared.holds);
            }
        }
        return;
    }
    let asked_in = hold.asked_in.load(Ordering::Relaxed);
    if seen.phase() != Phase::Blocked || seen.tick() != asked_in {
        hold.withdraw();
        return;
    }
    wait_while_the_pool_runs(hold, site.shared);
}

/// In the handler of a worker that found more workers computing without a
/// slot than there are slots: the others that computed since their slot
/// went are signalled now, at most once a millisecond for the pool. A CPU
/// timer fires only at a scheduler tick that finds its thread on a core
/// (4 ms apart at 250 Hz), so each of a crowd of 64 computed 3-4 ms before
/// its own fired, and the crowd took 70-100 ms to hold. Only workers whose
/// CPU clock moved by [`FIRST_LOOK`] are signalled, so a worker still
/// asleep in its block is not interrupted; each decides in its own
/// handler, as if its timer had fired.
#[cfg(not(tidepool_loom))]
fn look_for_the_crowd(shared: &super::Shared, me: usize) {
    let now = crate::sys::monotonic_nanos();
    let last = shared.holds.crowd_looked_at.load(Ordering::Relaxed);
    if now.saturating_sub(last) < CROWD_LOOK_EVERY.as_nanos() as u64
        || shared
            .holds
            .crowd_looked_at
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    for (index, entry) in shared.threads.used().iter().enumerate() {
        let hold = &entry.hold;
        let armed = hold.armed_for.load(Ordering::Relaxed);
        if index == me
            || armed == 0
            || hold.fired_for.load(Ordering::Relaxed) == armed
            || hold.word.load(Ordering::Relaxed) != FREE
        {
            continue;
        }
        let seen = entry.status.load();
        if seen.phase() == Phase::Blocked
            && seen.tick() == armed
            && hold.computed_since_arm() >= FIRST_LOOK
        {
            crate::sys::hold_signal::send(hold.tid.load(Ordering::Relaxed) as i32);
        }
    }
}

/// How often a worker's handler may look for the crowd
/// ([`look_for_the_crowd`]).
#[cfg(not(tidepool_loom))]
const CROWD_LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// The held thread's wait, in the handler or after a declared section
/// (`Shared::take_slot_back`): until let go, or its pool stops; then it
/// gives itself its CPUs back (`HoldWord::move_back`). Each sleep is bounded (`sys::hold_signal`'s longest wait), and
/// a wait that outlasts it goes on while the pool runs: a batch held two
/// at a time may take seconds, and it is the monitor's patience
/// (`control::hold::PATIENCE`) that lets a held thread go when nothing
/// ends, not the length of its wait.
#[cfg(not(tidepool_loom))]
pub(crate) fn wait_while_the_pool_runs(hold: &HoldWord, shared: &super::Shared) {
    let mut deadline = crate::sys::hold_signal::wait_deadline();
    wait_on(&hold.word, |word, expected| {
        if crate::sys::hold_signal::wait_until(word, expected, deadline) {
            return true;
        }
        deadline = crate::sys::hold_signal::wait_deadline();
        !shared.is_stopped()
    });
    hold.move_back(0);
}

/// Installs the process's hold signal (`sys::hold_signal`), once, for a
/// pool that asked to hold (named `pool` in the `tracing` event); false if
/// none could be had (nothing is held then). On Linux that is said once
/// per pool (`hold signal unavailable`), since the pool then runs workers
/// back from their blocks beyond the slots; off Linux nothing can be held,
/// as documented, and nothing is said.
pub(crate) fn install_signal(pool: &str) -> bool {
    #[cfg(not(tidepool_loom))]
    let installed = crate::sys::hold_signal::install(wait_in_handler).is_some();
    #[cfg(tidepool_loom)]
    let installed = false;
    if !installed && cfg!(all(target_os = "linux", not(tidepool_loom), not(miri))) {
        crate::trace::hold_signal_unavailable(pool);
    }
    installed
}

/// Lets the held thread of `word` go, if it waits, from a worker that
/// gives it its slot and is about to park or search: the thread is woken
/// on this CPU ([`HoldWord::move_to_this_cpu`]). True if it was let go.
#[cfg(not(tidepool_loom))]
pub(crate) fn let_go_here(word: &HoldWord) -> bool {
    if !word.is_asked() {
        return false;
    }
    let moved = word.move_to_this_cpu();
    if word.let_go() {
        wake(word);
        true
    } else {
        if moved {
            word.move_back(word.tid.load(Ordering::Relaxed) as i32);
        }
        false
    }
}

/// Wakes the held thread waiting on `word` (after a let-go).
pub(crate) fn wake(word: &HoldWord) {
    #[cfg(not(tidepool_loom))]
    crate::sys::hold_signal::wake(&word.word);
    #[cfg(tidepool_loom)]
    let _ = word;
}

/// What [`Holds::hold_self`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeldSelf {
    /// It took a free slot: counted again, it runs on.
    Counted,
    /// It is queued and asked to wait.
    Held,
    /// The queue was taken or full: it runs on, to try again a little
    /// later.
    Busy,
    /// Neither: it runs on as it was.
    Not,
}

/// A held worker: its entry's index and the status word it was held in.
pub(crate) type Held = (usize, StatusWord);

/// The pool's held workers, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    queue: Mutex<VecDeque<Held>>,
    /// The queue's length, for the cheap check at every task end: on a
    /// line of its own, written only when workers are held or let go.
    len: CachePadded<AtomicUsize>,
    /// Whether this pool's workers hold themselves in the hold signal's
    /// handler (`control::hold`: the signal is installed, blocked workers
    /// are replaced, the switch is on).
    pub(crate) in_handler: bool,
    /// Whether a declared section that returns without a slot waits, held,
    /// for one ([`hold_after_section`](Self::hold_after_section)): blocked
    /// workers are replaced and the switch is on. It needs no signal.
    pub(crate) after_sections: bool,
    /// Workers computing without a slot whose CPU timer fired in their
    /// task (`control::hold::on_timer`), until held or their task ends.
    computing: AtomicUsize,
    /// When a handler last looked for the crowd (`look_for_the_crowd`),
    /// in `sys::monotonic_nanos`.
    crowd_looked_at: AtomicU64,
}

impl Holds {
    /// The held workers of a pool that holds them `in_handler` and/or
    /// `after_sections`, with room for `threads` of them when in the
    /// handler (a thread's handler queues itself without allocating:
    /// [`try_push`](Self::try_push)).
    pub(crate) fn new(in_handler: bool, after_sections: bool, threads: usize) -> Holds {
        Holds {
            in_handler,
            after_sections,
            queue: Mutex::new(VecDeque::with_capacity(if in_handler {
                threads
            } else {
                0
            })),
            ..Holds::default()
        }
    }

    /// Whether any worker is held (one load of a line written only when
    /// workers are held or let go).
    pub(crate) fn any(&self) -> bool {
        self.len.load(Ordering::Relaxed) > 0
    }

    /// How many are held.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Queues a worker the monitor asked to wait.
    pub(crate) fn push(&self, held: Held) {
        let mut queue = lock(&self.queue);
        queue.push_back(held);
        self.len.store(queue.len(), Ordering::Relaxed);
    }

    /// A worker whose slot was given away in the task seen as `held.1`
    /// holds itself (on its own thread, in the hold signal's handler,
    /// after its CPU timer fired): it takes a free slot (`Counted`), or
    /// asks its `word` and queues itself (`Held`: the caller waits), or
    /// finds the queue taken or full (`Busy`), or neither (`Not`: held
    /// once this task already, or asked by the monitor). Atomics, a lock never waited for, no
    /// allocation: a signal handler may run this.
    ///
    /// A slot given back between its first look at the slots and its
    /// queueing would be missed by both sides (the giver saw nobody
    /// queued): so after queueing it looks again, through the fence that
    /// pairs with the one a parking worker passes between giving its slot
    /// back and looking at the queue (`Shared::look_at_held`), and counts
    /// the oldest held worker (perhaps itself) on a slot found free.
    pub(crate) fn hold_self<'a>(
        &self,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        word: &HoldWord,
        held: Held,
        let_go: impl FnMut(usize),
    ) -> HeldSelf {
        if word.held_in(held.1.tick()) {
            return HeldSelf::Not;
        }
        self.queue_self(
            slots,
            status,
            word,
            held,
            |held| self.try_push(held),
            let_go,
        )
    }

    /// A worker whose declared section (`tidepool::blocking`) returned
    /// after its slot was given away in the task seen as `held.1` takes a
    /// slot back, on its own thread outside any handler (as a goroutine
    /// reacquires a P when its system call returns): a free slot
    /// (`Counted`), or it asks its `word` and queues itself (`Held`: the
    /// caller waits), or `Not` (asked by the monitor already: its signal's
    /// handler waits). Unlike [`hold_self`](Self::hold_self), at every
    /// section's end, not once a task: a task that fetches and processes
    /// in a loop takes a slot back after each fetch.
    pub(crate) fn hold_after_section<'a>(
        &self,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        word: &HoldWord,
        held: Held,
        let_go: impl FnMut(usize),
    ) -> HeldSelf {
        let push = |held| {
            self.push(held);
            true
        };
        self.queue_self(slots, status, word, held, push, let_go)
    }

    /// [`hold_self`](Self::hold_self) and
    /// [`hold_after_section`](Self::hold_after_section) past their first
    /// check: a free slot, or ask, queue (`push`; false: `Busy`) and look
    /// again.
    fn queue_self<'a>(
        &self,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        word: &HoldWord,
        held: Held,
        push: impl FnOnce(Held) -> bool,
        let_go: impl FnMut(usize),
    ) -> HeldSelf {
        let (index, seen) = held;
        if slots.try_acquire(false) {
            if status(index).try_count_again(seen) {
                return HeldSelf::Counted;
            }
            slots.release();
            return HeldSelf::Not;
        }
        if !word.ask(seen.tick()) {
            return HeldSelf::Not;
        }
        if !push(held) {
            word.take_back();
            return HeldSelf::Busy;
        }
        fence(Ordering::SeqCst);
        // `count_free` takes the queue's lock and may wait for it, which a
        // handler may do here: `push` just took and released it, so
        // the interrupted code does not hold it (and cannot take it while
        // its handler runs); another thread holds it only for a moment.
        self.count_free(slots, status, let_go);
        HeldSelf::Held
    }

    /// Queues a worker that holds itself, from its thread's signal
    /// handler: only if the queue is free now (the thread may have been
    /// interrupted holding it) and has room without allocating. False if
    /// it was not queued.
    pub(crate) fn try_push(&self, held: Held) -> bool {
        let Some(mut queue) = crate::sync::try_lock(&self.queue) else {
            return false;
        };
        if queue.len() == queue.capacity() {
            return false;
        }
        queue.push_back(held);
        self.len.store(queue.len(), Ordering::Relaxed);
        true
    }

    fn pop(&self) -> Option<Held> {
        let mut queue = lock(&self.queue);
        let held = queue.pop_front();
        self.len.store(queue.len(), Ordering::Relaxed);
        held
    }

    /// Gives the caller's slot to the oldest held worker whose swap wins
    /// (`status(index)` is its task status); `let_go(index)` then ends its
    /// wait. True if the slot went (the caller holds none now).
    pub(crate) fn hand_slot<'a>(
        &self,
        status: impl Fn(usize) -> &'a TaskStatus,
        mut let_go: impl FnMut(usize),
    ) -> bool {
        while let Some((index, seen)) = self.pop() {
            if status(index).try_count_again(seen) {
                let_go(index);
                return true;
            }
        }
        false
    }

    /// Counts held workers on free slots within the target, oldest first,
    /// and `let_go`s each; stops at the first slot not free. Returns how
    /// many were counted.
    pub(crate) fn count_free<'a>(
        &self,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        mut let_go: impl FnMut(usize),
    ) -> usize {
        let mut counted = 0;
        while self.any() {
            if !slots.try_acquire(false) {
                break;
            }
            let Some((index, seen)) = self.pop() else {
                slots.release();
                break;
            };
            if status(index).try_count_again(seen) {
                let_go(index);
                counted += 1;
            } else {
                slots.release();
            }
        }
        counted
    }

    /// Lets the `n` oldest held workers go, each counted beyond the slots
    /// (`count_worker_again`: the caller raises the pool's `shrink` flag):
    /// nothing ended for a patience (`control::hold::let_go`). Returns how
    /// many were counted.
    pub(crate) fn let_oldest_go<'a>(
        &self,
        n: usize,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        mut let_go: impl FnMut(usize),
    ) -> usize {
        let mut went = 0;
        for _ in 0..n {
            let Some((index, seen)) = self.pop() else {
                break;
            };
            if count_worker_again(slots, status(index), seen) {
                went += 1;
            }
            let_go(index);
        }
        went
    }
}
