//! The watcher of the shared tokio runtime's workers: one thread that, while
//! any of them holds a place in the gate (`interop::gate`), looks at each
//! such worker every [`INTERVAL`], asks the kernel what it does, and
//! carries out `control::back_from_block::judge`'s verdict: a blocked
//! worker's place goes to another worker, a worker back from its block is
//! counted again. While no worker holds a place it sleeps until one enters.
//!
//! Workers register at their first entry into the gate (tokio's unpark
//! hook runs on workers only, never on its `spawn_blocking` threads).

use super::gate::Gate;
use crate::control::back_from_block::{judge, Look, Verdict};
use crate::control::slots::{Phase, StatusWord, TaskStatus};
use crate::sync::lock_std;
use crate::sys::ThreadProbe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often the watcher looks while a worker holds a place, and how long
/// a worker must hold one before a sleep counts as a block: the pool's
/// default `monitor_interval`.
pub(crate) const INTERVAL: Duration = Duration::from_millis(1);

/// The longest the watcher sleeps while no worker holds a place: a safety
/// net only (an entering worker wakes it).
const IDLE_SLEEP: Duration = Duration::from_millis(100);

/// At most one warning per this long; the rest are counted into the next.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// One worker of the shared runtime.
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) status: TaskStatus,
    probe: ThreadProbe,
}

/// What the gate, the hooks and the watcher share.
#[derive(Debug)]
pub(crate) struct Watched {
    pub(crate) gate: Gate,
    workers: Mutex<Vec<Arc<Worker>>>,
    /// The watcher sleeps on it while no worker holds a place.
    asleep: AtomicBool,
    sleep_lock: Mutex<bool>,
    wake: Condvar,
    /// Blocks found, and workers counted again after one.
    pub(crate) blocked: AtomicU64,
    pub(crate) counted_again: AtomicU64,
}

thread_local! {
    /// This thread's entry, once it has entered the gate.
    static ME: std::cell::OnceCell<Arc<Worker>> = const { std::cell::OnceCell::new() };
}

impl Watched {
    /// A gate of `places` places and nobody registered yet.
    pub(crate) fn new(places: usize) -> Watched {
        Watched {
            gate: Gate::new(places),
            workers: Mutex::new(Vec::new()),
            asleep: AtomicBool::new(false),
            sleep_lock: Mutex::new(false),
            wake: Condvar::new(),
            blocked: AtomicU64::new(0),
            counted_again: AtomicU64::new(0),
        }
    }

    /// tokio's unpark hook: this worker wakes for work; waits for a place.
    pub(crate) fn enter(&self) {
        let me = ME.with(|me| {
            me.get_or_init(|| {
                let worker = Arc::new(Worker {
                    status: TaskStatus::default(),
                    probe: ThreadProbe::for_current_thread(),
                });
                lock_std(&self.workers).push(worker.clone());
                worker
            })
            .clone()
        });
        self.gate.enter(&me.status);
        // Pairs with the watcher's store of `asleep` and its look at the
        // words: either it sees this word, or this sees it asleep.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) {
            let _held = lock_std(&self.sleep_lock);
            self.wake.notify_one();
        }
    }

    /// tokio's park hook: gives the place back (unless it was taken).
    pub(crate) fn leave(&self) {
        ME.with(|me| {
            if let Some(me) = me.get() {
                self.gate.leave(&me.status);
            }
        });
    }

    /// Stops the watcher and lets every waiting worker through.
    pub(crate) fn stop(&self) {
        self.gate.close();
        *lock_std(&self.sleep_lock) = true;
        self.wake.notify_all();
    }
}

/// What the watcher remembers of one worker.
#[derive(Clone, Copy, Debug)]
struct Track {
    seen: StatusWord,
    since: Instant,
    last: Option<Look>,
}

/// Starts the watcher thread.
pub(crate) fn start(watched: Arc<Watched>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("tidepool-tokio-watch".to_owned())
        .spawn(move || run(&watched))
        .map(drop)
}

fn run(watched: &Watched) {
    let mut tracks: Vec<Option<Track>> = Vec::new();
    let mut warned_at: Option<Instant> = None;
    let mut unwarned = 0u64;
    loop {
        let workers: Vec<Arc<Worker>> = lock_std(&watched.workers).clone();
        tracks.resize(workers.len(), None);
        let anyone_in = workers
            .iter()
            .any(|w| w.status.load().phase() != Phase::Idle);
        if anyone_in {
            if *lock_std(&watched.sleep_lock) {
                return;
            }
            std::thread::sleep(INTERVAL);
        } else {
            let mut stopped = lock_std(&watched.sleep_lock);
            watched.asleep.store(true, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::SeqCst);
            let still_idle = workers
                .iter()
                .all(|w| w.status.load().phase() == Phase::Idle);
            if still_idle && !*stopped {
                stopped = watched
                    .wake
                    .wait_timeout(stopped, IDLE_SLEEP)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            watched.asleep.store(false, Ordering::Relaxed);
            if *stopped {
                return;
            }
            continue;
        }
        let now = Instant::now();
        for (worker, track) in workers.iter().zip(tracks.iter_mut()) {
            let seen = worker.status.load();
            if seen.phase() == Phase::Idle {
                *track = None;
                continue;
            }
            let track = match track {
                Some(track) if track.seen == seen => track,
                _ => track.insert(Track {
                    seen,
                    since: now,
                    last: None,
                }),
            };
            let look = Look {
                at: now,
                asleep: worker.probe.state().is_waiting(),
                cpu: worker.probe.cpu_time(),
                run_delay: worker.probe.run_delay(),
            };
            let holds_place = seen.phase() == Phase::InTask;
            let verdict = judge(
                holds_place,
                now.saturating_duration_since(track.since),
                INTERVAL,
                track.last,
                look,
            );
            track.last = Some(look);
            match verdict {
                Verdict::Leave => {}
                Verdict::Blocked => {
                    if watched.gate.take(&worker.status, seen) {
                        watched.blocked.fetch_add(1, Ordering::Relaxed);
                        unwarned += 1;
                        if warned_at.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
                            crate::trace::tokio_worker_blocked(worker.probe.tid(), unwarned);
                            warned_at = Some(now);
                            unwarned = 0;
                        }
                    }
                }
                Verdict::RunningAgain => {
                    if watched.gate.count_again(&worker.status, seen) {
                        watched.counted_again.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}
