//! Frees a work item's task cell on the thread that allocated it.
//!
//! Every task is a cell the spawning thread allocates. Freed by the worker
//! that ran it — another core — the allocator's free lists bounce between the
//! cores: with glibc, a spawner and two workers ran tiny work items at ~400 ns
//! each, against ~310 ns (from outside the pool) and ~220 ns (from inside)
//! when the spawning thread frees the cells itself (benches/tools/spawn_profile.rs,
//! two workers). So the spawning thread keeps a reference to each work
//! item's cell (`runtime::item`'s `KEPT`) in a short ring, and lets the
//! oldest go as new ones come: by then the item has usually run, and the
//! cell is freed here, into this thread's allocator cache.
//!
//! A closure runs once, so the kept reference never keeps an unfinished
//! item alive for long. If the item has not run by eviction, letting it go
//! is an ordinary reference drop and the worker frees the cell as before.
//! Async tasks have a ring of their own (see "Async tasks" below).
//!
//! # How long the ring is
//!
//! Long enough to cover the backlog of a rush: a cell evicted before its
//! item ran is freed by the worker after all. A spawner that floods the
//! pool runs ahead of the workers by tens of thousands of items, so the
//! ring holds up to [`KEPT_IN_RUSH`] items while this thread spawns in a
//! rush (as `start_sampler` sees it) and [`KEPT_IN_TRICKLE`] otherwise,
//! shrinking by up to [`TRIM_STEP`] per spawn when a rush ends. Measured
//! with `tidepool-lab thread-per-task --repeat 5` (1M closures from one
//! thread; ns per task, tidepool / the threadpool crate in the same run,
//! three runs each): a ring of 256: 1.23, 1.06, 1.77; 16,384: 0.79, 0.79,
//! 1.25; 65,536: 0.82, 0.68, 0.73.
//!
//! The ring never evicts an item a worker has not let go of (the cell's
//! state says so, and its claim whether it started): that would leave the
//! cell's last reference, and so its free, to the worker. Eviction stops at the oldest item still queued until it
//! starts, and at one running until it returns or has been found running
//! [`RUNNING_LOOKS`] times (then it is kept
//! apart, and looked at once every as many spawns: a closure that loops
//! for the pool's life must not hold the front), so the
//! ring also covers a backlog longer than its length: a worker that
//! fans out pushes onto its own deque, which one other worker drains while
//! it spawns, and one spawning a million items held ~55,000 still queued
//! near the end. Measured with `spawn_profile inside 1000000 5` (two
//! workers), six processes of each build in turn, each process's median
//! round: see docs/measurements.md, "Checks of the changes 076df8d..".
//! Until the "returned" mark, the ring stopped only at items not yet
//! *started*: once the spawner ran that far ahead it evicted the items
//! the workers were running, and the workers freed them after all
//! (through glibc's arena lock, contended with the spawner's mallocs);
//! see docs/measurements.md, "The free ring waits for the closure's
//! return".
//!
//! The cost is memory, bounded in bytes: a rush's ring holds at most
//! [`RING_BYTES`] of cells
//! ([`rush_length`]: 65,536 finished cells of a
//! closure capturing a pointer, 64-byte blocks whose closures and outputs
//! are gone; fewer of larger ones; none above
//! [`ITEM_KEPT_MAX_BYTES`]) beyond the
//! queued ones, and the ring itself (8 bytes an item), about
//! 4.5 MiB per thread that spawned a large rush (4.0 MiB counted in
//! tests/memory.rs for a rush of tiny closures), until it spawns again
//! or exits (the ring is freed). glibc would keep most of that memory in
//! its free lists anyway. An item that never starts (dropped unrun by a
//! stopped pool) stays until the ring holds
//! [`KEPT_AT_MOST`].
//!
//! # Letting go when idle
//!
//! Memory follows live work: once a rush's work has finished, what the
//! rings keep of it goes as soon as the thread or the pool is idle, not
//! only as the thread spawns on.
//!
//! * A worker that parks lets go of every finished item its own ring
//!   keeps ([`let_go_here`]): the frees run on
//!   the thread that allocated the cells, as eviction's would have. (Its
//!   ring of futures is the monitor's business, below.)
//! * A pool whose monitor finds it idle (nothing running, nothing queued)
//!   tells every ring ([`pool_went_idle`]).
//!   The rings of futures are behind a lock (see below), so the monitor
//!   lets go of that pool's tasks in each of them at once, unless the
//!   ring's thread last kept a task of that pool, since the monitor's last
//!   look: that thread
//!   may be spawning a rush that the workers keep up with (the pool then
//!   goes idle between its spawns), and its ring would lose what it is
//!   for. Its ring is looked at again an interval later, and let go of
//!   once its thread has stopped. An items' ring is a thread-local without
//!   a lock (a lock is one more atomic read-modify-write on every spawn),
//!   and a thread outside the pool cannot be called back: so the monitor
//!   bumps a count ([`IDLE_EPOCH`]), and the ring
//!   lets go of the finished items at its front over its thread's next
//!   spawns outside a rush, [`IDLE_STEP`] a spawn,
//!   not [`TRIM_STEP`]. A
//!   thread that never spawns again keeps at most its ring's bytes (above),
//!   until it exits.
//!
//! Measured with tests/memory.rs (a counting allocator): 16 threads that
//! each spawned 65,536 tiny futures and then waited held 145 MB after the
//! tasks had ended (a ring of 65,536 whatever its cells' size); with the
//! byte bound 64 MB (4 MiB a thread) while the pool stays busy, and 38 KiB
//! once it went idle. The same with tiny closures: 64 MB while the threads
//! wait (their rings cannot be reached), 187 KiB once they spawned again.
//!
//! # Async tasks
//!
//! A future's cell is `async-task`'s, freed by whoever lets go of its last
//! reference: for a detached task, the worker that ran it to its end. So a
//! thread spawning tiny futures paid the same cross-core free: `FUTURES=1
//! spawn_profile outside` ran at 170.5 ns a task (156-187, sixteen
//! processes) where closures ran at 64.0 (62-81, six), and one profile put 18.7% of
//! all samples in the spawning thread's `malloc` (refilled from glibc's
//! arena, as its own cache never got a cell back). So while a thread spawns small futures (at most
//! [`FUTURE_KEPT_MAX_BYTES`], and
//! their outputs too) in a rush, it keeps a waker of each, the one
//! reference `async-task` lets anyone hold, and lets the oldest go beyond
//! [`KEPT_IN_RUSH`]: by then the task has
//! usually ended, and the drop frees its cell here. Out of a rush, each
//! spawn of a future lets go of up to [`TRIM_STEP`]
//! more, until none is kept. docs/measurements.md ("Async tasks freed
//! where they were spawned") has the figures.
//!
//! A waker, unlike an item's reference, is let go of whether or not its
//! task ended (nothing outside the cell says which), and it keeps the task
//! alive while held. That matters for a task nothing else will ever wake:
//! the pool's registry of waiting tasks lets go of such a task's waker
//! when the pool's last handle goes, so that the task is dropped and the
//! pool can stop (`runtime::waiting`, "A pool nobody holds"). So that a
//! ring's waker does not keep it, each thread's ring sits behind a lock
//! (uncontended: its owner takes it on every spawn, anyone else only
//! then), and the abandoning thread lets go of that pool's tasks in every
//! thread's ring ([`let_go_of_kept_futures`]).
//! The cost is memory, bounded in bytes as for items: a rush's ring of
//! futures keeps [`RING_BYTES`] of cells and
//! entries together
//! ([`future_rush_length_of`]: 29,127
//! tasks of an `async` block capturing an `Arc`, 112-byte cells and
//! 32-byte entries), until the pool goes idle (above), the thread spawns
//! futures again, or it exits; and each pool's shared state lives until
//! the last of its tasks' cells goes.
//! Futures are not kept out of a rush: a thread that spawns now and then
//! (an accept loop, say) gains little, and would hold its long-lived
//! tasks' cells for nothing.

use super::item::ItemKept;
use super::task::{FutureMeta, MaybeGate, PanicPayload, Phase, TaskOutput, Wrapped};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::task::Waker;
// `std`'s locks in both builds: the rings are in `static`s and
// thread-locals, which outlive a loom model's executions (and
// `keeps_future` keeps nothing under loom).
use crate::sync::lock_std as lock;

/// Items kept while this thread spawns in a rush, at the most.
pub(crate) const KEPT_IN_RUSH: usize = 65_536;
/// The bytes of cells a rush's ring may hold: the ring of a rush of
/// items of `n`-byte cells keeps `RING_BYTES / n` of them, between
/// [`KEPT_IN_TRICKLE`] and [`KEPT_IN_RUSH`] ([`rush_length`]). The
/// tiny closures the ring is for make 56-byte cells, so their ring is
/// [`KEPT_IN_RUSH`] long as before; a closure that captured 8 KiB kept
/// 65,536 cells of it, 420 MB resident after the rush had finished.
/// A rush's ring of futures holds as many bytes of cells and entries
/// together ([`future_rush_length_of`]).
pub(crate) const RING_BYTES: usize = 4 << 20;
/// Cells larger than this are not kept at all: the allocator's own
/// caches do not hold such blocks long, and their free on the worker
/// costs little beside their size.
pub(crate) const ITEM_KEPT_MAX_BYTES: usize = 1024;

/// How many items of `cell_bytes`-byte cells a rush's ring keeps (see
/// [`RING_BYTES`]); 0 for cells too large to keep.
pub(crate) const fn rush_length(cell_bytes: usize) -> usize {
    if cell_bytes > ITEM_KEPT_MAX_BYTES {
        return 0;
    }
    let length = RING_BYTES / if cell_bytes == 0 { 1 } else { cell_bytes };
    if length < KEPT_IN_TRICKLE {
        KEPT_IN_TRICKLE
    } else if length > KEPT_IN_RUSH {
        KEPT_IN_RUSH
    } else {
        length
    }
}
/// Items kept while its spawns are spread out: ~25 KiB of cells, long
/// enough that the item has usually run by the time it is evicted.
pub(crate) const KEPT_IN_TRICKLE: usize = 256;
/// How many more than one a spawn evicts when the ring is over its
/// length (a rush ended): a few microseconds of frees per spawn at the
/// most, and a full ring shrinks within ~2,000 spawns.
pub(crate) const TRIM_STEP: usize = 32;
/// How many finished items a spawn outside a rush evicts once a pool
/// went idle ([`IDLE_EPOCH`]): a rush's full ring (65,536 tiny cells)
/// goes within 32 spawns, ~40 µs of frees each. All at once, the next
/// rush's first spawn freed them while the workers waited for work:
/// `spawn_many outside/tidepool` (a rush after each idle moment) lost
/// ~3% to that pause.
pub(crate) const IDLE_STEP: usize = 2048;
/// An item found running at the ring's front this many times (at as
/// many spawns) has run for a while, and may run for good: the ring
/// moves it to its back instead of waiting on it. Fewer looks would
/// move the tiny items the workers are finishing, each move one more
/// look at a cold cell later.
pub(crate) const RUNNING_LOOKS: u8 = 64;
/// Each spawn prefetches the claim of the item this far from the
/// ring's front, which a spawn about as many spawns later looks at and
/// usually frees. The ring's front is a cell finished up to 65,536
/// spawns ago, out of the cache: `perf record` of `spawn_profile
/// inside` put 80% of `keep`'s samples (12% of all) on the load of its
/// claim; prefetched 32 spawns ahead (a few µs at ~100 ns a spawn),
/// `keep` fell to 6% of all.
/// `cargo bench --bench spawn_many -- inside/tidepool`, six processes of
/// each build in turn: the default pool 124.5 ns per task (115-142)
/// against 133.5 (115-169), lower in 5 of 6 pairs, `Fixed` 124.5 against
/// 141.5 (5 of 6), the second default pool 133 against 138.5 (4 of 6).
/// Two ahead gained nothing measurable; 12 was inside the noise.
const PREFETCH_AHEAD: usize = 32;
/// Past this many, the oldest is evicted whether its item started or
/// not: an item dropped unrun by a stopped pool never starts, and
/// would hold the ring's front (and the finished cells behind it,
/// ~26 MiB at this length) until then.
pub(crate) const KEPT_AT_MOST: usize = 262_144;
/// The largest future, or output, whose task is kept (bytes): the
/// tiny tasks whose cost the allocator dominates (see "Async tasks" in
/// the module docs).
pub(crate) const FUTURE_KEPT_MAX_BYTES: usize = 256;

/// How many async tasks of `cell_bytes`-byte cells a rush's ring of
/// futures keeps: [`RING_BYTES`] of cells and of the ring's own entries
/// together, at most [`KEPT_IN_RUSH`]. A tiny future (an `async` block
/// that captures an `Arc`) makes a 112-byte cell and a 32-byte entry:
/// 29,127 of them. Unbounded in bytes, the ring kept 65,536 whatever
/// their size: 16 threads that had spawned such a rush each and then
/// waited held 145 MB (tests/memory.rs).
pub(crate) const fn future_rush_length_of(cell_bytes: usize) -> usize {
    let length = RING_BYTES / (cell_bytes + std::mem::size_of::<KeptFuture>());
    if length > KEPT_IN_RUSH {
        KEPT_IN_RUSH
    } else {
        length
    }
}

/// The ring's length in a rush for an async task of future `F` and
/// gate `G` spawned now ([`future_rush_length_of`]), or 0 if the task
/// is not kept: a future (or output) too large, or a spawn outside a
/// rush.
#[inline]
pub(crate) fn future_rush_length<F: Future, G: MaybeGate>() -> usize {
    // Not under loom: the rings outlive a model's executions.
    if cfg!(tidepool_loom)
        || std::mem::size_of::<F>() > FUTURE_KEPT_MAX_BYTES
        || std::mem::size_of::<F::Output>() > FUTURE_KEPT_MAX_BYTES
        || !super::start_sampler::in_rush()
    {
        return 0;
    }
    future_rush_length_of(future_cell_bytes::<F, G>())
}

/// The bytes of an `async-task` cell around `wrap(F, G)`, as async-task
/// 4.7 lays it out (`RawTask::eval_task_layout`): its header (a state
/// word, the awaiter's `Option<Waker>`, the vtable, the metadata, a
/// `bool`), the scheduler (which captures the pool's `Arc`), then the
/// future or its result, whichever is larger. An estimate of another
/// crate's layout, for a bound: tests/memory.rs counts the bytes a
/// rush really holds.
pub(crate) const fn future_cell_bytes<F: Future, G: MaybeGate>() -> usize {
    use std::mem::size_of;
    let header = size_of::<usize>()
        + size_of::<Option<std::task::Waker>>()
        + size_of::<usize>()
        + size_of::<FutureMeta>()
        + size_of::<usize>();
    let scheduler = size_of::<usize>();
    let future = size_of::<Wrapped<F, G>>();
    let result = size_of::<Result<TaskOutput<F::Output>, PanicPayload>>();
    header + scheduler + if future > result { future } else { result }
}

/// Bumped each time a pool goes idle ([`pool_went_idle`]). A ring
/// spawned into outside a rush compares it with the count it saw last
/// and, if it moved, lets go of the finished items at its front,
/// [`IDLE_STEP`] a spawn (a thread outside the pool cannot be called
/// back: it finds out at its next spawn). `std`'s atomic in both builds, like the rings.
///
/// A rush's spawns do not read it: they evict as they go, and the
/// hot path stays as it was. A trickle's spawn reads it once, relaxed:
/// a line every core holds shared, written only when some pool goes
/// idle (at most once a monitor interval per pool), so the load hits
/// the cache. Its value orders nothing: a stale read lets go one spawn
/// later.
static IDLE_EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The pool whose shared state is at `pool` went idle (its monitor
/// found nothing running or queued): tells every ring. Each thread's
/// ring of futures lets go of that pool's tasks now if its thread kept
/// none since the previous call (a thread that did may be spawning a
/// rush that the workers keep up with: its ring is left alone, as it
/// would be while the pool is busy); the items' rings let go at their
/// next spawn ([`IDLE_EPOCH`]). Returns false if some ring was left
/// for the next call, which the caller then makes a while later.
pub(crate) fn pool_went_idle(pool: *const ()) -> bool {
    IDLE_EPOCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut all = true;
    for ring in future_rings() {
        let of_pool = lock(&ring).take_if_quiet(pool);
        all &= of_pool.is_some();
        // Dropped outside every lock (see `keep_future`).
        drop(of_pool);
    }
    all
}

/// This thread is about to wait for work (a worker parking): lets go of
/// every finished item its ring keeps. The frees happen here, on the
/// thread that allocated the cells, as eviction would have done them.
///
/// Its async tasks stay: a waker may be a task's last reference, and
/// its drop would schedule the task once more, onto the deque of a
/// worker on its way to sleep. The idle pool's monitor lets go of them
/// ([`pool_went_idle`]), from a thread whose wakes go to the lanes.
pub(crate) fn let_go_here() {
    // A worker parks often and seldom spawned: one load decides.
    if !MAY_KEEP.get() {
        return;
    }
    let _ = RING.try_with(|ring| {
        let_go_of_finished(ring);
        let ring = ring.borrow();
        MAY_KEEP.set(!(ring.kept.is_empty() && ring.long_running.is_empty()));
    });
}

thread_local! {
    /// This thread's ring may keep items: set by each [`keep`], cleared
    /// when [`let_go_here`] leaves the ring empty. A constant
    /// initialiser with no destructor, so that reading it is one load:
    /// `RING`'s access, a check of its registered destructor and a
    /// borrow, before every park of a worker that never spawned cost
    /// `spawn_many outside/tidepool` a measurable share (a worker parks
    /// once per batch it drains).
    static MAY_KEEP: Cell<bool> = const { Cell::new(false) };
}

/// A kept item: the reference that keeps its cell alive. Eight bytes, so
/// that a ring of [`KEPT_IN_RUSH`] is 512 KiB (see [`Ring`]).
pub(crate) struct Kept(ItemKept);

impl Kept {
    /// The ring's entry for `item`.
    #[inline]
    pub(crate) fn of(item: ItemKept) -> Kept {
        Kept(item)
    }

    /// The item's phase. Evicting an item queued or running would
    /// leave its last reference, and so the free, to the worker that
    /// runs it.
    fn phase(&self) -> Phase {
        if self.0.is_done() {
            Phase::Done
        } else {
            self.0.metadata().claim.phase()
        }
    }
}

/// This thread's kept items, oldest first, and how many times in a row
/// the oldest was found running; apart, the items found running for
/// long. Only the front is ever looked at, so the count is the ring's,
/// not each entry's: entries of 16 bytes (a pointer and a count) made a
/// rush's ring 1 MiB, twice the cache lines to read at its front and
/// write at its back on every spawn.
struct Ring {
    kept: VecDeque<Kept>,
    front_running_looks: u8,
    /// Items found running [`RUNNING_LOOKS`] times at the ring's front,
    /// maybe for good (a closure that loops for the pool's life): kept
    /// here so that they never hold the front again, and looked at one
    /// at a time every [`RUNNING_LOOKS`] spawns (freed once done).
    long_running: VecDeque<Kept>,
    /// Spawns until the next look at `long_running`.
    until_long_look: u8,
    /// [`IDLE_EPOCH`] as this ring last saw it.
    idle_epoch: u64,
    /// A pool went idle since the ring was last over a trickle's
    /// length: its spawns outside a rush evict [`IDLE_STEP`] each.
    draining: bool,
}

impl Ring {
    /// Items kept, in the ring and apart.
    fn len(&self) -> usize {
        self.kept.len() + self.long_running.len()
    }

    /// Every [`RUNNING_LOOKS`] spawns, takes the longest-kept of the
    /// items found running for long if it is done (for the caller to
    /// drop), else moves it behind the others.
    fn take_long_runner_if_done(&mut self) -> Option<Kept> {
        if self.long_running.is_empty() {
            return None;
        }
        if self.until_long_look > 0 {
            self.until_long_look -= 1;
            return None;
        }
        self.until_long_look = RUNNING_LOOKS;
        let oldest = self.long_running.pop_front()?;
        if oldest.phase() == Phase::Done {
            return Some(oldest);
        }
        self.long_running.push_back(oldest);
        None
    }
}

thread_local! {
    static RING: RefCell<Ring> = const {
        RefCell::new(Ring {
            kept: VecDeque::new(),
            front_running_looks: 0,
            long_running: VecDeque::new(),
            until_long_look: 0,
            idle_epoch: 0,
            draining: false,
        })
    };
}

/// Keeps `kept` (of a work item just spawned) and evicts the oldest
/// kept beyond the ring's length, up to the first whose item has not
/// started yet (see the module docs).
///
/// `in_rush` is the ring's length in a rush for this item's cell
/// ([`rush_length`]); 0 keeps nothing (a cell too large: its
/// reference is let go of at once, and the worker frees it).
#[inline]
pub(crate) fn keep(kept: Kept, in_rush: usize) {
    if in_rush == 0 {
        return;
    }
    let rush = super::start_sampler::in_rush();
    let length = if rush { in_rush } else { KEPT_IN_TRICKLE };
    let _ = RING.try_with(|ring| {
        MAY_KEEP.set(true);
        let (over, done) = {
            let mut ring = ring.borrow_mut();
            ring.kept.push_back(kept);
            // The claim a later spawn looks at before it frees the cell:
            // by then long out of the cache (see `PREFETCH_AHEAD`).
            if let Some(ahead) = ring.kept.get(PREFETCH_AHEAD) {
                crate::sys::prefetch(ahead.0.address());
            }
            let done = ring.take_long_runner_if_done();
            let mut over = ring.len().saturating_sub(length).min(TRIM_STEP + 1);
            if !rush {
                // A pool went idle since this ring last looked: the
                // finished items at its front go `IDLE_STEP` a spawn,
                // not `TRIM_STEP` (see `IDLE_EPOCH`).
                let epoch = IDLE_EPOCH.load(std::sync::atomic::Ordering::Relaxed);
                if epoch != ring.idle_epoch {
                    ring.idle_epoch = epoch;
                    ring.draining = true;
                }
                if ring.draining {
                    if ring.len() <= KEPT_IN_TRICKLE {
                        ring.draining = false;
                    } else {
                        over = over.max(IDLE_STEP);
                    }
                }
            }
            (over, done)
        };
        // Dropped outside the borrow (see `evict_oldest`).
        drop(done);
        if over > 0 {
            evict_oldest(ring, over);
            if !rush {
                shrink(ring);
            }
        }
    });
}

/// Gives back the buffer of a ring that a rush grew and that is back
/// to a trickle's length (a rush's is 512 KiB).
#[cold]
fn shrink_now(ring: &RefCell<Ring>) {
    let mut ring = ring.borrow_mut();
    ring.kept.shrink_to(2 * KEPT_IN_TRICKLE);
    ring.long_running.shrink_to_fit();
}

/// [`shrink_now`] if the ring is back to a trickle's length.
#[inline]
fn shrink(ring: &RefCell<Ring>) {
    let grown = {
        let ring = ring.borrow();
        ring.kept.capacity() > 8 * KEPT_IN_TRICKLE && ring.kept.len() <= KEPT_IN_TRICKLE
    };
    if grown {
        shrink_now(ring);
    }
}

/// Lets go of every finished item the ring keeps, wherever it is, and
/// of the buffers (see [`let_go_here`]).
#[cold]
#[inline(never)]
fn let_go_of_finished(ring: &RefCell<Ring>) {
    let (kept, long_running) = {
        let mut ring = ring.borrow_mut();
        ring.front_running_looks = 0;
        (
            std::mem::take(&mut ring.kept),
            std::mem::take(&mut ring.long_running),
        )
    };
    // Dropped outside the borrow (see `evict_oldest`), one at a time.
    let unfinished = |all: VecDeque<Kept>| -> VecDeque<Kept> {
        let mut left = VecDeque::new();
        for kept in all {
            if kept.phase() == Phase::Done {
                drop(kept);
            } else {
                left.push_back(kept);
            }
        }
        left
    };
    let mut kept = unfinished(kept);
    let mut long_running = unfinished(long_running);
    let mut ring = ring.borrow_mut();
    // Kept meanwhile (a destructor that spawned) go behind.
    kept.extend(ring.kept.drain(..));
    long_running.extend(ring.long_running.drain(..));
    ring.kept = kept;
    ring.long_running = long_running;
}

/// One thread's kept async tasks. Behind a lock, unlike the items'
/// ring, so that [`let_go_of_kept_futures`] can empty it from the
/// thread that abandons a pool, and [`pool_went_idle`] from an idle
/// pool's monitor, its only users besides its owner: the lock is
/// uncontended but then.
type FutureRing = Mutex<FutureKeeper>;

/// What a [`FutureRing`] guards.
#[derive(Default)]
pub(crate) struct FutureKeeper {
    /// The kept tasks, oldest first.
    kept: VecDeque<KeptFuture>,
    /// The owner kept a task since [`pool_went_idle`] last looked on
    /// behalf of [`FutureKeeper::last_pool`] (plain stores under the
    /// lock the owner holds anyway).
    kept_since_look: bool,
    /// The pool of the task kept last.
    last_pool: usize,
}

impl FutureKeeper {
    /// Keeps `entry` (the owner, in a rush whose ring is `length`
    /// long).
    #[inline]
    pub(crate) fn push(&mut self, entry: KeptFuture, length: usize) {
        self.kept_since_look = true;
        self.last_pool = entry.pool;
        let kept = &mut self.kept;
        if kept.len() == kept.capacity() && kept.len() < length {
            // Grown by doubling, but not past the length: the buffer
            // counts in the ring's bytes.
            let grown = (2 * kept.len()).max(16).min(length);
            kept.reserve_exact(grown - kept.len());
        }
        kept.push_back(entry);
    }

    /// For the look of the idle pool at `pool` ([`pool_went_idle`]):
    /// takes that pool's tasks out, for the caller to drop outside the
    /// lock, or `None` if the owner kept one of that pool's tasks last
    /// and since the pool's last look (it may be spawning a rush the
    /// workers keep up with: left for the next look). A thread that
    /// went on to spawn into another pool is not spawning into this
    /// one: its tasks of this pool go, and the look leaves the other
    /// pool's mark alone (the owner holds one mark, for its last pool:
    /// an idle pool does not keep looking while a thread floods
    /// another).
    pub(crate) fn take_if_quiet(&mut self, pool: *const ()) -> Option<VecDeque<KeptFuture>> {
        let pool = pool as usize;
        if self.kept_since_look && self.last_pool == pool {
            self.kept_since_look = false;
            if !self.kept.is_empty() {
                return None;
            }
        }
        Some(take_pools(&mut self.kept, pool))
    }
}

/// A kept async task: a waker, the reference `async-task` lets one
/// hold, the pool it was spawned on (its shared state's address: the
/// task's cell holds that state alive, so the address names no other
/// pool while the entry lives), and where its cell's metadata is, to
/// prefetch.
pub(crate) struct KeptFuture {
    /// Held for its drop: the reference that keeps the cell alive.
    _waker: Waker,
    pool: usize,
    metadata: usize,
}

impl KeptFuture {
    /// The ring's entry for the task `waker` wakes, of the pool whose
    /// shared state is at `pool`, with its metadata at `metadata` (a
    /// `Runnable::metadata`, inside the cell's header).
    pub(crate) fn new<M>(waker: Waker, pool: *const (), metadata: &M) -> Self {
        KeptFuture {
            _waker: waker,
            pool: pool as usize,
            metadata: metadata as *const M as usize,
        }
    }

    /// Prefetches the line of the task's metadata, in its cell
    /// ([`PREFETCH_AHEAD`] spawns before the waker's drop updates the
    /// cell). Only the address async-task makes public
    /// (`Runnable::metadata`): a second prefetch 32 bytes before it,
    /// where async-task 4.7 keeps its private header, measured no
    /// faster without and went (docs/measurements.md, "The futures
    /// ring's prefetch").
    fn prefetch(&self) {
        crate::sys::prefetch(self.metadata as *const u8);
    }
}

/// Every thread's [`FutureRing`], for [`let_go_of_kept_futures`].
static FUTURE_RINGS: Mutex<Vec<Weak<FutureRing>>> = Mutex::new(Vec::new());

/// This thread's [`FutureRing`], registered in [`FUTURE_RINGS`] on
/// first use, emptied as the thread exits.
struct ThisThreadsFutures(Arc<FutureRing>);

impl ThisThreadsFutures {
    fn register() -> Self {
        let ring = Arc::new(Mutex::new(FutureKeeper::default()));
        let mut rings = lock(&FUTURE_RINGS);
        rings.retain(|ring| ring.strong_count() > 0);
        rings.push(Arc::downgrade(&ring));
        ThisThreadsFutures(ring)
    }
}

impl Drop for ThisThreadsFutures {
    fn drop(&mut self) {
        // Taken out before the drop (see `keep_future`); dropped here,
        // on the exiting thread, not left to `let_go_of_kept_futures`.
        let kept = std::mem::take(&mut lock(&self.0).kept);
        drop(kept);
    }
}

thread_local! {
    static FUTURES: ThisThreadsFutures = ThisThreadsFutures::register();
    /// Whether this thread's [`FutureRing`] may hold a waker: spawns
    /// outside a rush look at the ring only then.
    static MAYBE_KEEPS: Cell<bool> = const { Cell::new(false) };
}

/// Keeps `entry` (an async task just spawned, if
/// [`future_rush_length`] gave its ring a `length`) and lets the
/// oldest kept ones go beyond `length`; once this thread's futures stop
/// coming in a rush (`entry` is `None`), up to [`TRIM_STEP`] more per
/// spawn, until none is kept.
#[inline]
pub(crate) fn keep_future(entry: Option<KeptFuture>, length: usize) {
    let keeping = entry.is_some();
    if !keeping && !MAYBE_KEEPS.try_with(Cell::get).unwrap_or(false) {
        return; // nothing kept here: no lock
    }
    let length = if keeping { length } else { 0 };
    let _ = FUTURES.try_with(|ring| {
        // The oldest over the length is taken out under the same lock
        // (a rush's steady state: one in, one out, one lock).
        let (oldest, mut more, left) = {
            let mut keeper = lock(&ring.0);
            // Over the length counting the new entry, taken out before
            // it goes in: a ring at its length that grew its buffer
            // for one more entry would double it.
            let over = (keeper.kept.len() + usize::from(keeping))
                .saturating_sub(length)
                .min(TRIM_STEP + 1);
            let oldest = if over > 0 {
                keeper.kept.pop_front()
            } else {
                None
            };
            if let Some(entry) = entry {
                keeper.push(entry, length);
            }
            let kept = &keeper.kept;
            // As for items (see `PREFETCH_AHEAD`): the cell a spawn
            // about as many spawns later lets go of, out of the cache
            // by now. `perf annotate` of `spawn_many`'s
            // `outside/tidepool-async` (one profile) put 98% of the
            // waker drop's samples, 14% of all, on its locked
            // decrement.
            if let Some(ahead) = kept.get(PREFETCH_AHEAD) {
                ahead.prefetch();
            }
            let more = over.saturating_sub(1);
            (oldest, more, kept.len().saturating_sub(more))
        };
        // Wrong only in saying "maybe" after another thread emptied the
        // ring (`let_go_of_kept_futures`): then one more lock finds it
        // empty.
        let _ = MAYBE_KEEPS.try_with(|maybe| maybe.set(left > 0));
        // Dropped outside the lock, one at a time: the last reference
        // to a task that has not ended schedules it once more
        // (`async-task` closes it, and a worker drops its future).
        drop(oldest);
        while more > 0 {
            let oldest = lock(&ring.0).kept.pop_front();
            drop(oldest);
            more -= 1;
        }
        if left == 0 {
            // Trimmed to nothing: its buffer goes too (a rush's is
            // up to 1 MiB). Empty, it drops no task.
            let mut keeper = lock(&ring.0);
            if keeper.kept.is_empty() {
                keeper.kept = VecDeque::new();
            }
        }
    });
}

/// Every thread's ring of futures (those whose thread lives).
fn future_rings() -> Vec<Arc<FutureRing>> {
    lock(&FUTURE_RINGS)
        .iter()
        .filter_map(Weak::upgrade)
        .collect()
}

/// Takes the entries of the pool at `pool` out of `kept`, for the
/// caller to drop outside the ring's lock.
fn take_pools(kept: &mut VecDeque<KeptFuture>, pool: usize) -> VecDeque<KeptFuture> {
    if kept.iter().all(|entry| entry.pool == pool) {
        // The usual case, one pool: the whole ring, buffer and all.
        return std::mem::take(kept);
    }
    let (of_pool, others) = std::mem::take(kept)
        .into_iter()
        .partition(|entry| entry.pool == pool);
    *kept = others;
    of_pool
}

/// Lets go of every task of the pool whose shared state is at `pool`
/// that any thread keeps, for a pool whose last handle went
/// (`runtime::waiting`, "A pool nobody holds"): a task nothing else
/// can wake must lose its last reference, so that the pool drops it
/// and stops. Other pools' tasks stay. Reads every ring through: a
/// pool is abandoned once.
pub(crate) fn let_go_of_kept_futures(pool: *const ()) {
    let pool = pool as usize;
    for ring in future_rings() {
        let of_pool = take_pools(&mut lock(&ring).kept, pool);
        // Dropped outside every lock (see `keep_future`).
        drop(of_pool);
    }
}

/// Drops up to `over` of the ring's oldest items (see [`keep`]).
#[inline(never)]
fn evict_oldest(ring: &RefCell<Ring>, over: usize) {
    // Dropped outside the borrow, one at a time: freeing a cell
    // runs no user code for a finished task, but a task's last
    // reference may run its destructor, which may spawn.
    for _ in 0..over {
        let evicted = {
            let mut ring = ring.borrow_mut();
            let Some(oldest) = ring.kept.pop_front() else {
                break;
            };
            match oldest.phase() {
                Phase::Done => {
                    ring.front_running_looks = 0;
                    oldest
                }
                _ if ring.len() >= KEPT_AT_MOST => {
                    ring.front_running_looks = 0;
                    oldest
                }
                Phase::Running if ring.front_running_looks >= RUNNING_LOOKS => {
                    // A worker has been inside it for a while, maybe
                    // for good (a closure that loops for the pool's
                    // life): it goes apart, so it does not hold the
                    // front, and the next one is looked at.
                    ring.front_running_looks = 0;
                    ring.long_running.push_back(oldest);
                    continue;
                }
                Phase::Running => {
                    // Most likely a tiny item about to return (the
                    // spawner has caught up with the workers): look
                    // again at the next spawn.
                    ring.front_running_looks += 1;
                    ring.kept.push_front(oldest);
                    break;
                }
                Phase::Queued => {
                    // Still queued, and so (mostly) are the ones
                    // after it: stop here. Looking further would
                    // touch a cold cell per look on every spawn of
                    // a long backlog.
                    ring.kept.push_front(oldest);
                    break;
                }
            }
        };
        drop(evicted);
    }
}

/// How many items this thread keeps (for tests).
#[cfg(all(test, not(tidepool_loom)))]
pub(crate) fn kept() -> usize {
    RING.try_with(|ring| ring.borrow().len()).unwrap_or(0)
}

/// The length of this thread's items' ring's buffer (for tests).
#[cfg(all(test, not(tidepool_loom)))]
pub(crate) fn ring_capacity() -> usize {
    RING.try_with(|ring| ring.borrow().kept.capacity())
        .unwrap_or(0)
}

/// How many async tasks this thread keeps (for tests).
#[cfg(all(test, not(tidepool_loom)))]
pub(crate) fn futures_kept() -> usize {
    FUTURES
        .try_with(|ring| lock(&ring.0).kept.len())
        .unwrap_or(0)
}

/// Whether this thread keeps the item whose claim this is (for
/// tests).
#[cfg(all(test, not(tidepool_loom)))]
pub(crate) fn holds(claim: &super::task::Claim) -> bool {
    RING.try_with(|ring| {
        let ring = ring.borrow();
        ring.kept
            .iter()
            .chain(&ring.long_running)
            .any(|kept| std::ptr::eq(&kept.0.metadata().claim, claim))
    })
    .unwrap_or(false)
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::super::item::{self, ItemHandle, ItemRunnable};
    use super::super::start_sampler;
    use super::super::task::{NoGate, TaskMeta};
    use crate::runtime::free_rings;

    #[test]
    fn a_rushs_ring_is_bounded_in_bytes_and_tiny_cells_keep_its_full_length() {
        // A closure capturing a pointer: its ring is as long as ever.
        let tiny = item::cell_bytes::<Box<u8>, ()>();
        assert_eq!(free_rings::rush_length(tiny), free_rings::KEPT_IN_RUSH);
        // 512-byte cells: RING_BYTES of them.
        assert_eq!(free_rings::rush_length(512), free_rings::RING_BYTES / 512);
        // A closure capturing 8 KiB is not kept at all.
        assert_eq!(
            free_rings::rush_length(item::cell_bytes::<[u8; 8192], ()>()),
            0
        );
    }

    /// A closure's cell as `worker::spawn_item` makes it, kept by this
    /// thread's ring (in a rush or not: set, not timed, since a spawn's
    /// stamp moves the sampler), with its runnable and handle.
    fn item(rush: bool) -> (ItemRunnable, ItemHandle<()>) {
        let (runnable, handle, kept) = item::spawn(TaskMeta::for_tests(true), || ());
        start_sampler::set_in_rush(rush);
        free_rings::keep(free_rings::Kept::of(kept), free_rings::KEPT_IN_RUSH);
        (runnable, handle)
    }

    /// Keeps `n` items whose workers have run them.
    fn keep_finished(n: usize, rush: bool) {
        for _ in 0..n {
            let (runnable, handle) = item(rush);
            assert!(runnable.metadata().claim.start());
            runnable.run();
            drop(handle);
        }
    }

    #[test]
    fn the_free_ring_grows_in_a_rush_and_shrinks_in_a_trickle() {
        // The sampler's state is set, not timed: how close the spawns of
        // a test come depends on the machine's load (a timed version
        // failed in CI with 991 of 1,024 kept).
        let rush = 4 * free_rings::KEPT_IN_TRICKLE;
        keep_finished(rush, true);
        assert_eq!(free_rings::kept(), rush, "a rush keeps every item");
        keep_finished(200, false);
        // At most: a pool of another test going idle lets this ring go
        // further (`IDLE_EPOCH`).
        assert!(
            free_rings::kept() <= free_rings::KEPT_IN_TRICKLE,
            "trimmed back"
        );
    }

    #[test]
    fn the_free_ring_keeps_an_item_not_run_yet() {
        let (queued, queued_handle) = item(false);
        // Far more than the ring's length after it, all run: none evicted
        // while the oldest has not started...
        keep_finished(4 * free_rings::KEPT_IN_TRICKLE, false);
        assert_eq!(free_rings::kept(), 4 * free_rings::KEPT_IN_TRICKLE + 1);
        assert!(
            free_rings::holds(&queued.metadata().claim),
            "the queued item is kept"
        );
        // ... nor while it runs (evicted then, its worker would free it);
        // but running, it no longer holds the others back.
        assert!(queued.metadata().claim.start());
        keep_finished(4 * free_rings::KEPT_IN_TRICKLE, false);
        assert!(
            free_rings::holds(&queued.metadata().claim),
            "the running item is kept"
        );
        // (At most: see `the_free_ring_grows_in_a_rush_and_shrinks_in_a_trickle`.)
        assert!(
            free_rings::kept() <= free_rings::KEPT_IN_TRICKLE,
            "a running item does not hold the ring's front"
        );
        // Once its worker let it go, it goes like the rest.
        queued.run();
        assert!(queued_handle.is_finished());
        drop(queued_handle);
        keep_finished(4 * free_rings::KEPT_IN_TRICKLE, false);
        assert!(free_rings::kept() <= free_rings::KEPT_IN_TRICKLE);
    }

    #[test]
    fn a_ring_lets_go_of_its_finished_items_within_a_few_spawns_once_a_pool_went_idle() {
        static POOL: FakePool = 8;
        let rush = 16 * free_rings::IDLE_STEP;
        keep_finished(rush, true);
        assert!(free_rings::kept() >= rush);
        free_rings::pool_went_idle(fake(&POOL));
        // The next spawns outside a rush: `IDLE_STEP` finished items go
        // with each, not all with the first (a pause the workers would
        // wait through), nor `TRIM_STEP` (the rush's ring would stay).
        let (first, first_handle) = item(false);
        let after_one = free_rings::kept();
        assert!(
            after_one < rush && after_one + free_rings::IDLE_STEP + 1 >= rush,
            "{after_one} kept of {rush} after one spawn"
        );
        let spawned: Vec<_> = (0..16).map(|_| item(false)).collect();
        assert_eq!(
            free_rings::kept(),
            1 + spawned.len(),
            "only the items spawned since, which have not run"
        );
        assert!(free_rings::ring_capacity() <= 2 * free_rings::KEPT_IN_TRICKLE);
        for (queued, handle) in std::iter::once((first, first_handle)).chain(spawned) {
            assert!(queued.metadata().claim.start());
            queued.run();
            drop(handle);
        }
    }

    #[test]
    fn a_thread_going_idle_lets_go_of_its_finished_items() {
        keep_finished(free_rings::KEPT_IN_TRICKLE, false);
        let (queued, queued_handle) = item(false);
        keep_finished(free_rings::KEPT_IN_TRICKLE, false);
        free_rings::let_go_here();
        assert_eq!(free_rings::kept(), 1);
        assert!(
            free_rings::holds(&queued.metadata().claim),
            "kept until it ran"
        );
        assert!(queued.metadata().claim.start());
        queued.run();
        drop(queued_handle);
        free_rings::let_go_here();
        assert_eq!(free_rings::kept(), 0);
    }

    #[test]
    fn an_idle_pool_lets_go_of_its_tasks_kept_by_a_thread_that_stopped_spawning() {
        static POOL: FakePool = 10;
        static OTHER_POOL: FakePool = 11;
        trim_futures();
        let (ours, ours_freed) = task_that_says_where_it_was_freed();
        let (other, other_freed) = task_that_says_where_it_was_freed();
        free_rings::keep_future(Some(kept(&ours, &POOL)), free_rings::KEPT_IN_RUSH);
        free_rings::keep_future(Some(kept(&other, &OTHER_POOL)), free_rings::KEPT_IN_RUSH);
        ours.run();
        other.run();
        // The first look finds this thread spawning into the pool (it
        // kept one of its tasks last, since the last look): the ring is
        // left for the next look, which lets go.
        free_rings::pool_went_idle(fake(&POOL));
        free_rings::pool_went_idle(fake(&POOL));
        assert_eq!(
            *ours_freed.lock().unwrap(),
            Some(std::thread::current().id()),
            "let go of by the idle pool's look (here)"
        );
        assert_eq!(*other_freed.lock().unwrap(), None, "another pool's kept");
        assert_eq!(free_rings::futures_kept(), 1);
        trim_futures();
    }

    #[test]
    fn a_ring_of_futures_in_use_is_left_to_the_next_look() {
        static POOL: FakePool = 12;
        static OTHER_POOL: FakePool = 13;
        let (task, freed) = task_that_says_where_it_was_freed();
        let mut keeper = free_rings::FutureKeeper::default();
        keeper.push(kept(&task, &POOL), free_rings::KEPT_IN_RUSH);
        task.run();
        // Another pool's look takes none of it, and leaves the mark.
        assert!(keeper
            .take_if_quiet(fake(&OTHER_POOL))
            .is_some_and(|none| none.is_empty()));
        assert!(
            keeper.take_if_quiet(fake(&POOL)).is_none(),
            "kept one since the last look"
        );
        let let_go = keeper.take_if_quiet(fake(&POOL)).expect("quiet since");
        assert_eq!(let_go.len(), 1);
        drop(let_go);
        assert!(freed.lock().unwrap().is_some());
    }

    /// Records which thread dropped it.
    struct DroppedOn(FreedOn);

    impl Drop for DroppedOn {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(std::thread::current().id());
        }
    }

    /// A stand-in for a pool: a `static` of its own per test (a distinct
    /// address), so that a test letting go of its "pool's" tasks lets go
    /// of none of a test running beside it, nor does a real pool dropped
    /// by another test.
    type FakePool = u8;

    /// A ring's entry for `runnable`'s task, of `pool`.
    fn kept<M>(
        runnable: &async_task::Runnable<M>,
        pool: &'static FakePool,
    ) -> free_rings::KeptFuture {
        free_rings::KeptFuture::new(runnable.waker(), fake(pool), runnable.metadata())
    }

    /// `pool`'s address, as `let_go_of_kept_futures` takes it.
    fn fake(pool: &'static FakePool) -> *const () {
        (pool as *const FakePool).cast()
    }

    /// Lets go of every async task this thread keeps, as spawns outside a
    /// rush do.
    fn trim_futures() {
        while free_rings::futures_kept() > 0 {
            free_rings::keep_future(None, 0);
        }
    }

    /// How long a rush's ring of futures is for futures of type `F`
    /// spawned now.
    fn future_ring<F: std::future::Future>() -> usize {
        free_rings::future_rush_length::<F, NoGate>()
    }

    #[test]
    fn small_futures_are_kept_in_a_rush_only() {
        start_sampler::set_in_rush(true);
        assert!(future_ring::<std::future::Ready<u64>>() > 0);
        assert_eq!(
            future_ring::<std::future::Ready<[u8; 1024]>>(),
            0,
            "a large future's cell would hold memory for little gain"
        );
        start_sampler::set_in_rush(false);
        assert_eq!(future_ring::<std::future::Ready<u64>>(), 0);
    }

    #[test]
    fn a_rushs_ring_of_futures_is_bounded_in_bytes() {
        start_sampler::set_in_rush(true);
        let entry = std::mem::size_of::<free_rings::KeptFuture>();
        for cell in [
            free_rings::future_cell_bytes::<std::future::Ready<u64>, NoGate>(),
            free_rings::future_cell_bytes::<std::future::Ready<[u8; 256]>, NoGate>(),
            200,
        ] {
            let length = free_rings::future_rush_length_of(cell);
            assert!(length * (cell + entry) <= free_rings::RING_BYTES, "{cell}");
            assert!(length <= free_rings::KEPT_IN_RUSH);
            assert!(
                length > free_rings::KEPT_IN_TRICKLE,
                "{cell}: still a rush's ring"
            );
        }
        assert_eq!(
            future_ring::<std::future::Ready<u64>>(),
            free_rings::future_rush_length_of(free_rings::future_cell_bytes::<
                std::future::Ready<u64>,
                NoGate,
            >())
        );
        // Kept past its length, the ring lets the oldest go.
        static POOL: FakePool = 6;
        trim_futures();
        let tasks: Vec<_> = (0..8)
            .map(|_| task_that_says_where_it_was_freed())
            .collect();
        for (runnable, _) in &tasks {
            free_rings::keep_future(Some(kept(runnable, &POOL)), 5);
        }
        assert_eq!(free_rings::futures_kept(), 5);
        trim_futures();
    }

    /// Which thread freed a cell, once one did.
    type FreedOn = std::sync::Arc<std::sync::Mutex<Option<std::thread::ThreadId>>>;

    /// A detached async task whose cell records which thread freed it
    /// (its scheduler, which the free drops, holds a [`DroppedOn`]).
    fn task_that_says_where_it_was_freed() -> (async_task::Runnable, FreedOn) {
        let freed_on = FreedOn::default();
        let dropped = DroppedOn(freed_on.clone());
        let (runnable, task) = async_task::spawn(async { 7 }, move |_| {
            let _ = &dropped;
        });
        task.detach();
        (runnable, freed_on)
    }

    #[test]
    fn a_kept_async_task_is_freed_by_the_thread_that_spawned_it() {
        static POOL: FakePool = 1;
        let (runnable, freed_on) = task_that_says_where_it_was_freed();
        free_rings::keep_future(Some(kept(&runnable, &POOL)), free_rings::KEPT_IN_RUSH);
        // A worker runs it to its end and lets go of its reference.
        std::thread::spawn(move || runnable.run()).join().unwrap();
        assert_eq!(*freed_on.lock().unwrap(), None, "the ring keeps the cell");
        trim_futures();
        assert_eq!(
            *freed_on.lock().unwrap(),
            Some(std::thread::current().id()),
            "freed here, when the ring let go"
        );
    }

    #[test]
    fn a_kept_async_task_nothing_else_holds_is_dropped_when_let_go() {
        static POOL: FakePool = 2;
        // A future that waits for good, with no waker anywhere but the
        // ring's: letting go closes it, and the executor drops its future.
        let future_dropped = std::sync::Arc::new(std::sync::Mutex::new(None));
        let dropped = DroppedOn(future_dropped.clone());
        let rescheduled = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let queue = rescheduled.clone();
        let (runnable, task) = async_task::spawn(
            async move {
                let _dropped = dropped;
                std::future::pending::<()>().await
            },
            move |runnable| queue.lock().unwrap().push(runnable),
        );
        free_rings::keep_future(Some(kept(&runnable, &POOL)), free_rings::KEPT_IN_RUSH);
        task.detach();
        runnable.run();
        assert_eq!(*future_dropped.lock().unwrap(), None, "still waiting");
        trim_futures();
        let again: Vec<_> = std::mem::take(&mut *rescheduled.lock().unwrap());
        assert_eq!(again.len(), 1, "scheduled once more, closed");
        for runnable in again {
            runnable.run();
        }
        assert!(
            future_dropped.lock().unwrap().is_some(),
            "its future dropped"
        );
    }

    #[test]
    fn an_abandoned_pool_has_every_thread_let_go_of_the_tasks_it_keeps() {
        static POOL: FakePool = 3;
        let (runnable, freed) = task_that_says_where_it_was_freed();
        // Another thread keeps it, then waits (spawns nothing more).
        let (kept_tx, kept_rx) = std::sync::mpsc::channel();
        let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
        let keeper = std::thread::spawn(move || {
            free_rings::keep_future(Some(kept(&runnable, &POOL)), free_rings::KEPT_IN_RUSH);
            kept_tx.send(runnable).unwrap();
            let _ = exit_rx.recv();
        });
        kept_rx.recv().unwrap().run();
        assert_eq!(*freed.lock().unwrap(), None, "the keeper holds it");
        free_rings::let_go_of_kept_futures(fake(&POOL));
        assert_eq!(
            *freed.lock().unwrap(),
            Some(std::thread::current().id()),
            "let go of here, while its keeper waits"
        );
        drop(exit_tx);
        keeper.join().unwrap();
    }

    #[test]
    fn an_abandoned_pool_leaves_the_other_pools_tasks_kept() {
        static POOL: FakePool = 4;
        static OTHER_POOL: FakePool = 5;
        let (ours, ours_freed) = task_that_says_where_it_was_freed();
        let (other, other_freed) = task_that_says_where_it_was_freed();
        trim_futures();
        free_rings::keep_future(Some(kept(&ours, &POOL)), free_rings::KEPT_IN_RUSH);
        free_rings::keep_future(Some(kept(&other, &OTHER_POOL)), free_rings::KEPT_IN_RUSH);
        ours.run();
        other.run();
        free_rings::let_go_of_kept_futures(fake(&POOL));
        assert!(
            ours_freed.lock().unwrap().is_some(),
            "its pool's task let go"
        );
        assert_eq!(*other_freed.lock().unwrap(), None, "another pool's kept");
        assert_eq!(free_rings::futures_kept(), 1);
        trim_futures();
        assert!(other_freed.lock().unwrap().is_some());
    }

    #[test]
    // A pool's reactor makes a timerfd, a foreign call Miri cannot run.
    #[cfg_attr(miri, ignore)]
    fn a_pool_keeps_the_small_futures_a_thread_spawns_in_a_rush() {
        let pool = crate::Pool::builder().concurrency(1).build().unwrap();
        trim_futures();
        start_sampler::set_in_rush(true);
        let handle = pool.spawn(async { 7 });
        assert_eq!(free_rings::futures_kept(), 1);
        assert_eq!(handle.join().unwrap(), 7);
        start_sampler::set_in_rush(false);
        let handle = pool.spawn(async { 8 });
        assert_eq!(free_rings::futures_kept(), 0, "let go outside a rush");
        assert_eq!(handle.join().unwrap(), 8);
    }
}
