//! Thread accounting: the table of worker entries, which of them have a
//! thread, and how many threads are alive.
//!
//! An *entry* is everything the pool keeps for one worker index, whether or
//! not a thread has it now: its deque (so tasks left behind by a retiring
//! thread stay stealable), its task status (read by the monitor), its counter
//! shard and latency recorder, and the probe the monitor asks the kernel
//! through. There are `max_threads` entries; a starting thread takes a free
//! one and gives it back when it exits.

use super::work::Queued;
use crate::control::slots::TaskStatus;
use crate::metrics::{Detection, LatencyRecorder, TaskCounters, ThreadCounters};
use crate::sync::{lock, Arc, AtomicBool, AtomicUsize, Mutex, Ordering};
use crate::sys::ThreadProbe;
use crossbeam_deque::{Stealer, Worker};
use crossbeam_utils::CachePadded;
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Instant;

/// What the pool keeps for each worker index, whether or not a thread has it.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    /// Phase and task tick, read by the monitor.
    pub(crate) status: TaskStatus,
    /// The stealing end of this entry's deque, created with the first worker.
    stealer: OnceLock<Stealer<Queued>>,
    /// The owning end, held by the thread while it runs; kept here between
    /// threads so tasks left behind stay stealable.
    deque: Mutex<Option<Worker<Queued>>>,
    /// This worker's shard of the task counters.
    pub(crate) counters: CachePadded<TaskCounters>,
    /// Start latencies of the tasks this worker started.
    pub(crate) latency: LatencyRecorder,
    /// How the monitor asks the kernel about this worker's thread; `None`
    /// while no thread has the entry.
    pub(crate) probe: Mutex<Option<Arc<ThreadProbe>>>,
    /// The kind of the task the worker runs (`kinds::Kind::to_bits`), for
    /// the monitor's record of what blocks and what computes.
    pub(crate) kind: std::sync::atomic::AtomicU32,
    /// The status tick of the task presumed blocking that the worker runs
    /// now, while nobody has judged it (`runtime::presumed`); 0 otherwise.
    /// The monitor judges a presumed task only while its tick is here, and
    /// takes it (compare-and-swap to 0) to judge it; the task's end takes
    /// it otherwise. Relaxed: written before the status word that makes the
    /// monitor look (a release store), and each side's judgement is
    /// decided by this word alone.
    pub(crate) presumed: std::sync::atomic::AtomicU64,
    /// The worker's thread was given a short scheduler slice to start an
    /// urgent task at once (`worker::urgent`, `sys::set_urgent_slice`);
    /// the worker gives it back after its next task, or as it parks.
    pub(crate) urgent_slice: std::sync::atomic::AtomicBool,
    /// Declared blocking sections (`tidepool::blocking`) entered and left
    /// by the worker's thread: odd while it is inside one. The monitor hands
    /// the slot over when it finds the same section at two looks in a row
    /// (`worker::DeclaredSection`).
    pub(crate) declared_sections: std::sync::atomic::AtomicU64,
    /// What the worker's thread waits on while it is held for a slot
    /// (`runtime::hold`).
    pub(crate) hold: super::hold::HoldWord,
    /// The thread that has the entry, to wake it from a helping wait (a
    /// stolen fork-join job it waits for is done); `None` between threads.
    pub(crate) thread: Mutex<Option<Thread>>,
    /// Times a task on this entry gave its slot away (found blocked,
    /// declared, presumed), for `Metrics::workers`: written on those rare
    /// paths only.
    pub(crate) blocked: std::sync::atomic::AtomicU64,
    /// The task the monitor first saw here (its status tick) and when, for
    /// `Pool::running` (`Entry::saw_task`). Written by the monitor once per
    /// task it looks at, read by `Pool::running`.
    task_seen: Mutex<Option<(u64, Instant)>>,
}

impl Entry {
    /// The stealing end of this entry's deque, if it ever had one.
    pub(crate) fn stealer(&self) -> Option<&Stealer<Queued>> {
        self.stealer.get()
    }

    /// For the thread taking this entry: the owning end of its deque.
    pub(crate) fn take_deque(&self) -> Worker<Queued> {
        let mut slot = lock(&self.deque);
        match slot.take() {
            Some(deque) => deque,
            None => {
                // LIFO for the owner (the newest task first: a fork-join's
                // stack discipline, and cache-warm), FIFO for thieves (the
                // oldest, usually the biggest piece of a split). See
                // `worker` for what bounds the wait of the oldest.
                let deque = Worker::new_lifo();
                let _ = self.stealer.set(deque.stealer());
                deque
            }
        }
    }

    /// Wakes the entry's thread if it parks in a helping wait (or makes its
    /// next park return at once).
    pub(crate) fn unpark(&self) {
        if let Some(thread) = &*lock(&self.thread) {
            thread.unpark();
        }
    }

    /// The monitor sees the task of status tick `tick` on this entry at
    /// `at`: kept if it is the first sighting of that task (a task first
    /// seen running and later blocked keeps its first sighting).
    pub(crate) fn saw_task(&self, tick: u64, at: Instant) {
        let mut seen = lock(&self.task_seen);
        if !matches!(*seen, Some((seen_tick, _)) if seen_tick == tick) {
            *seen = Some((tick, at));
        }
    }

    /// When the monitor first saw the task of status tick `tick` on this
    /// entry, if it has.
    pub(crate) fn task_seen_at(&self, tick: u64) -> Option<Instant> {
        match *lock(&self.task_seen) {
            Some((seen_tick, at)) if seen_tick == tick => Some(at),
            _ => None,
        }
    }

    /// For the thread leaving this entry: puts the deque back.
    pub(crate) fn return_deque(&self, deque: Worker<Queued>) {
        *lock(&self.deque) = Some(deque);
    }
}

/// Why the OS refused the last worker thread a pool tried to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StartFailure {
    /// The error's kind.
    pub(crate) kind: std::io::ErrorKind,
    /// The OS error number (`EAGAIN` is 11 on Linux), if there was one.
    pub(crate) os_error: Option<i32>,
}

impl StartFailure {
    /// The failure `error` describes.
    pub(crate) fn of(error: &std::io::Error) -> Self {
        StartFailure {
            kind: error.kind(),
            os_error: error.raw_os_error(),
        }
    }
}

/// The entries and the thread counts of one pool.
#[derive(Debug)]
pub(crate) struct Threads {
    /// One entry per possible worker (`max_threads` of them).
    entries: Box<[Entry]>,
    /// Entries at or above this index have never had a worker: scans of
    /// every entry stop here.
    high_water: AtomicUsize,
    /// Entries without a worker thread now, lowest index last.
    free: Mutex<Vec<usize>>,
    /// Worker threads alive (counted before a thread starts, uncounted when
    /// it retires or exits).
    alive: AtomicUsize,
    /// Thread starts, retirements and blocking, by reason.
    pub(crate) counters: ThreadCounters,
    /// Set when a thread start fails, cleared when one succeeds: while it is
    /// set and no thread is alive, nothing can run the pool's work.
    failing: AtomicBool,
    /// Why the last failed start failed.
    last_failure: Mutex<Option<StartFailure>>,
}

impl Threads {
    /// `capacity` entries (the pool's `max_threads`), none with a thread.
    pub(crate) fn new(capacity: usize) -> Self {
        Threads {
            entries: (0..capacity).map(|_| Entry::default()).collect(),
            high_water: AtomicUsize::new(0),
            free: Mutex::new((0..capacity).rev().collect()),
            alive: AtomicUsize::new(0),
            counters: ThreadCounters::default(),
            failing: AtomicBool::new(false),
            last_failure: Mutex::new(None),
        }
    }

    /// Entry `index`.
    pub(crate) fn entry(&self, index: usize) -> &Entry {
        &self.entries[index]
    }

    /// Every entry that ever had a thread.
    pub(crate) fn used(&self) -> &[Entry] {
        // Acquire: pairs with the AcqRel `fetch_max` in `take_entry`, so the
        // entry's stealer set before it was published is visible.
        &self.entries[..self.high_water.load(Ordering::Acquire)]
    }

    /// [`Threads::used`] with a SeqCst read of the high-water mark, for the
    /// shutdown latch's sum of live tasks (its accesses are all SeqCst: see
    /// `lifecycle`).
    pub(crate) fn used_seqcst(&self) -> &[Entry] {
        &self.entries[..self.high_water.load(Ordering::SeqCst)]
    }

    /// Worker threads alive now.
    pub(crate) fn alive(&self) -> usize {
        self.alive.load(Ordering::Acquire)
    }

    /// Counts a thread about to start, unless `max` are alive. Returns the
    /// count before it, or `None` at the limit.
    pub(crate) fn count_start(&self, max: usize) -> Option<usize> {
        let mut alive = self.alive.load(Ordering::Relaxed);
        loop {
            if alive >= max {
                return None;
            }
            match self.alive.compare_exchange_weak(
                alive,
                alive + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(alive),
                Err(actual) => alive = actual,
            }
        }
    }

    /// Takes one thread off the count if more than `floor` are alive (a
    /// parked worker retiring). Returns whether it did.
    pub(crate) fn count_retire(&self, floor: usize) -> bool {
        let mut alive = self.alive.load(Ordering::Relaxed);
        while alive > floor {
            match self.alive.compare_exchange_weak(
                alive,
                alive - 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => alive = actual,
            }
        }
        false
    }

    /// Undoes [`Threads::count_start`] (the start failed) or counts an exit.
    pub(crate) fn count_exit(&self) {
        self.alive.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes a free entry for a starting thread and publishes it to scans.
    /// `None` only while a retiring thread (already off the count) has not
    /// handed its entry back yet.
    pub(crate) fn take_entry(&self) -> Option<usize> {
        let index = lock(&self.free).pop()?;
        self.high_water.fetch_max(index + 1, Ordering::AcqRel);
        Some(index)
    }

    /// Records a refused thread start.
    pub(crate) fn start_failed(&self, failure: StartFailure) {
        *lock(&self.last_failure) = Some(failure);
        // Relaxed: a hint read by spawns (`failing`); the failure itself is
        // read under the lock.
        self.failing.store(true, Ordering::Relaxed);
    }

    /// Records a thread start that worked.
    pub(crate) fn start_worked(&self) {
        // Read first so the common case writes nothing shared.
        if self.failing.load(Ordering::Relaxed) {
            self.failing.store(false, Ordering::Relaxed);
        }
    }

    /// True if the last thread start failed. One Relaxed load: spawns read it.
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// Why the last failed start failed.
    pub(crate) fn last_failure(&self) -> StartFailure {
        lock(&self.last_failure).unwrap_or(StartFailure {
            kind: std::io::ErrorKind::Other,
            os_error: None,
        })
    }

    /// Records the probe a worker opened for itself: its detection mode,
    /// and whether it fell back from the kernel's view. Returns the mode if
    /// this is the pool's first fallback (to be reported once).
    pub(crate) fn probe_opened(&self, probe: &ThreadProbe) -> Option<Detection> {
        let mode = Detection::of(probe);
        // `code + 1`: zero is "no probe opened yet" (see `detection`).
        self.counters
            .last_detection
            .store(mode.code() + 1, Ordering::Relaxed);
        if mode == Detection::Kernel {
            return None;
        }
        let before = self
            .counters
            .detection_fallbacks
            .fetch_add(1, Ordering::Relaxed);
        (before == 0).then_some(mode)
    }

    /// The pool's detection mode now: the weakest of the workers alive (the
    /// last one opened if none is, what the platform offers if no worker
    /// ever started).
    pub(crate) fn detection(&self) -> Detection {
        let alive = self
            .used()
            .iter()
            .filter_map(|entry| lock(&entry.probe).as_deref().map(Detection::of))
            .max();
        alive.unwrap_or_else(
            || match self.counters.last_detection.load(Ordering::Relaxed) {
                0 => Detection::best(),
                code => Detection::from_code(code - 1),
            },
        )
    }

    /// Gives an entry back (its thread exited, or never started).
    pub(crate) fn give_back_entry(&self, index: usize) {
        lock(&self.free).push(index);
    }
}
