//! CPU sentinels: a `SCHED_IDLE` thread per CPU that runs when its CPU
//! would idle while the pool is saturated, and has the monitor look at
//! once. Who has them and how often they look are `control::sentinel`'s
//! decisions (its design note says why); this module runs the threads.
//!
//! A sentinel's loop: while the pool is not saturated (a free slot, or
//! nothing queued), wait to be armed (`MonitorSignal::sentinel_wait`).
//! Armed, look: if a worker holding a slot in a task is asleep outside the
//! process (not in a futex), poke the
//! monitor with this CPU (`MonitorSignal::poke`) and move the monitor
//! here; its tick marks the sleeper and wakes a worker onto this CPU
//! (pull-here, `Shared::pull_a_worker_here`, stands aside while sentinels
//! watch: `control::placement`). A sentinel moves no
//! worker itself: under `SCHED_IDLE`, preempted by the worker it moved, it
//! would give that worker its CPUs back only once its CPU idles again.
//! Then sleep for what `control::sentinel::next_poll` says. The sentinel holds the pool only
//! while it looks or waits to be armed (the pool's stop wakes that wait),
//! so it never keeps a dropped pool alive.

use crate::control::ablation::Mechanism;
use crate::control::policy::Policy;
use crate::control::sentinel::{next_poll, wanted, Look, POLL};
use crate::control::slots::{Phase, StatusWord};
use crate::runtime::Shared;
use crate::sync::{lock, Arc};
use crate::sys::WaitsFor;
use std::sync::Weak;

/// Starts a sentinel on each CPU this process may run on, if the pool
/// wants them (`control::sentinel::wanted`, and the `cpu-sentinel`
/// switch). A sentinel the system refuses (no thread, or no `SCHED_IDLE`)
/// exits at once: the monitor's ticks still find every block.
pub(crate) fn start(shared: &Arc<Shared>) {
    let config = &shared.config;
    let cpus = crate::sys::thread_cpus(0);
    let detects = Policy::new(config.controller).detects_blocking();
    if !config.switches.on(Mechanism::CpuSentinel)
        || !wanted(
            detects,
            config.concurrency,
            cpus.map(|c| c.count_ones() as usize),
        )
    {
        return;
    }
    let cpus = cpus.unwrap_or(0);
    for cpu in (0..64).filter(|cpu| cpus & (1 << cpu) != 0) {
        let pool = Arc::downgrade(shared);
        let name = format!("{}-sentinel-{cpu}", config.thread_name);
        let _ = std::thread::Builder::new()
            .name(name)
            .stack_size(64 * 1024)
            .spawn(move || {
                if crate::sys::become_cpu_sentinel(cpu) {
                    let Some(shared) = pool.upgrade() else {
                        return;
                    };
                    shared.monitor.sentinel_watches(true);
                    drop(shared);
                    watch(&pool, cpu);
                    if let Some(shared) = pool.upgrade() {
                        shared.monitor.sentinel_watches(false);
                    }
                }
            });
    }
}

/// Every slot taken and work queued: when the sentinels watch.
pub(crate) fn saturated(shared: &Shared) -> bool {
    shared.slots.counts().active >= shared.slots.target() && shared.has_work()
}

/// The first worker holding a slot in a task that is asleep outside the
/// process now (a socket, a timer, a disk), as its index and status word:
/// one `stat` read per such worker, 2-3 µs each, and a `syscall` read for
/// a sleeper. A futex waiter is not one: the monitor leaves a lock's
/// waiter for its interval however soon it looks (`control::policy`, rule
/// 1), so a poke would only add ticks, and in a lock convoy, whose waiters
/// take turns asleep, a tick every poll; that took convoys to 512 threads.
fn a_sleeping_slot_holder(shared: &Shared) -> Option<(usize, StatusWord)> {
    if !shared.config.switches.on(Mechanism::WaitClasses) {
        // Without the wait classes no sleep gets the idle core's grace.
        return None;
    }
    shared
        .threads
        .used()
        .iter()
        .enumerate()
        .find_map(|(index, entry)| {
            let seen = entry.status.load();
            let asleep = seen.phase() == Phase::InTask
                && !entry.hold.is_asked()
                && lock(&entry.probe).as_ref().is_some_and(|probe| {
                    probe.state().is_waiting() && probe.waits_for() == WaitsFor::Outside
                });
            asleep.then_some((index, seen))
        })
}

/// The sentinel of CPU `cpu`, on that CPU under `SCHED_IDLE`.
fn watch(pool: &Weak<Shared>, cpu: usize) {
    let mut sleep = POLL;
    let mut last_sleeper = None;
    loop {
        let Some(shared) = pool.upgrade() else {
            return;
        };
        if shared.is_stopped() {
            return;
        }
        if !saturated(&shared) {
            if !shared.monitor.sentinel_wait(|| !saturated(&shared)) {
                return;
            }
            (sleep, last_sleeper) = (POLL, None);
            continue;
        }
        // Running now: this CPU had nothing else to run, or the kernel
        // gave this thread its share of a busy CPU. A slot holder asleep
        // tells the first.
        let sleeper = a_sleeping_slot_holder(&shared);
        let look = match sleeper {
            None => Look::Nobody,
            Some(_) if sleeper == last_sleeper => Look::Same,
            Some(_) => Look::New,
        };
        if sleeper.is_some() {
            shared.monitor.poke(cpu);
            // Woken by a thread on an idle CPU, the monitor was often
            // queued behind a worker on the busy one (its last CPU). Its
            // CPUs come back when this thread next runs, at the latest
            // once the monitor's tick ends and this CPU idles again; a
            // thread it starts meanwhile takes the pool's CPUs itself.
            if let Some((tid, own)) = shared.monitor.monitor_thread() {
                crate::sys::pull_to_this_cpu(tid, cpu, own);
            }
        }
        last_sleeper = sleeper;
        sleep = next_poll(sleep, look, shared.config.monitor_interval);
        drop(shared);
        std::thread::sleep(sleep);
    }
}
