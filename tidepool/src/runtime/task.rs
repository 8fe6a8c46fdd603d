//! The task cell: what the runtime wraps around every spawned future, the
//! metadata it keeps beside it, and the hook through which groups and pairs
//! take part (the [`Gate`] trait).
//!
//! Task cells, waking and join come from `async-task`. Closures run as tasks
//! too (a future that calls the closure in its first poll), so there is one
//! code path and one wrapper ([`wrap`]). The wrapper adds what async-task
//! does not do: it catches panics, records the queue-to-first-poll latency,
//! tells the task's gate (if any) when a poll starts and ends, and counts the
//! task's end exactly once, in the pool's counters and in its gate: a future
//! dropped before it finished counts as cancelled, so
//! spawned = completed + panicked + cancelled + live.

use crate::metrics::Outcome;
use crate::sync::Arc;
use futures_lite::future::CatchUnwind;
use futures_lite::FutureExt;
use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::queues::Priority;
use super::waiting::{Registered, WaitingKey};

/// The payload of a panic caught in a task, as `std::panic::catch_unwind`
/// returns it.
pub type PanicPayload = Box<dyn Any + Send + 'static>;

/// What a task's future resolves to inside its cell: its output or the
/// payload of its panic, in an [`Output`] whose drop cannot panic out.
pub(crate) type TaskOutput<T> = Output<T>;

/// A task's result as its cell stores it. `async-task` drops a result nobody
/// will take (the handle was detached, or cancelled while the task ran) under
/// an abort guard, so a value whose destructor panics — the output, or a
/// panic payload — aborted the process. This wrapper drops it inside
/// `catch_unwind` instead, and counts the panic (`Metrics::dropped_panics`).
pub(crate) struct Output<T>(Option<Result<T, PanicPayload>>);

impl<T> Output<T> {
    /// The output or the panic payload, for the join side.
    pub(crate) fn into_inner(mut self) -> Result<T, PanicPayload> {
        match self.0.take() {
            Some(result) => result,
            // Only `into_inner` and `drop` take it, and each runs once.
            None => unreachable!("a task's output is taken once"),
        }
    }
}

impl<T> Drop for Output<T> {
    fn drop(&mut self) {
        if let Some(result) = self.0.take() {
            drop_caught(move || drop(result));
        }
    }
}

/// Runs `drop_it` (a drop of a task's user value: its future, its output, a
/// panic payload), catching a panic out of it: counted in the pool whose
/// task this is (`Metrics::dropped_panics`) and otherwise left to the panic
/// hook, which has already reported it like any panic. The payload of the
/// caught panic is leaked, not dropped: its own destructor might panic too.
pub(crate) fn drop_caught(drop_it: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(drop_it)) {
        std::mem::forget(payload);
        super::context::with_task_pool(|shared, _| shared.dropped_panic());
    }
}

/// A runnable task of a tidepool pool.
pub(crate) type Runnable = async_task::Runnable<TaskMeta>;

/// The join side of a task cell.
pub(crate) type TaskCell<T> = async_task::Task<TaskOutput<T>, TaskMeta>;

/// [`TaskCell`] after `fallible()`: resolves to `None` if cancelled.
pub(crate) type FallibleCell<T> = async_task::FallibleTask<TaskOutput<T>, TaskMeta>;

/// The join side of a task cell once its handle has been polled: a
/// [`FallibleCell`] (a cancelled [`TaskCell`] panics when polled; this one
/// resolves to `None`), with the task's [`Claim`] still in reach.
/// `FallibleTask` hides the metadata, and without the claim a handle that
/// was polled (in a `select`, say) could not refuse to cancel a closure a
/// worker has started: `cancel` said true while the closure ran on.
pub(crate) struct PolledCell<T> {
    task: FallibleCell<T>,
    /// The claim in `task`'s metadata (see [`PolledCell::claim`]).
    claim: std::ptr::NonNull<Claim>,
}

// SAFETY: `claim` is, in all but name, a shared reference into the cell
// that `task` keeps alive (see `PolledCell::claim`), and `Claim` is `Sync`
// (an atomic): sending or sharing a `PolledCell` is sound exactly when
// sending or sharing its `task` is.
unsafe impl<T> Send for PolledCell<T> where FallibleCell<T>: Send {}
// SAFETY: as for `Send` above.
unsafe impl<T> Sync for PolledCell<T> where FallibleCell<T>: Sync {}

impl<T> PolledCell<T> {
    /// Makes `task` fallible, keeping a pointer to its claim.
    pub(crate) fn new(task: TaskCell<T>) -> Self {
        let claim = std::ptr::NonNull::from(&task.metadata().claim);
        PolledCell {
            task: task.fallible(),
            claim,
        }
    }

    /// The task's claim (for `JoinHandle::cancel`).
    pub(crate) fn claim(&self) -> &Claim {
        // SAFETY: the pointer is valid for as long as `self` is borrowed:
        // 1. async-task keeps a task's metadata in the task's one heap
        //    allocation (its header), at one address from spawn until the
        //    last reference to the task (runnable, waker or handle) is
        //    dropped; a `Task` and the `FallibleTask` made of it are
        //    pointers to that allocation, so `fallible()` moved a pointer,
        //    not the metadata the claim was taken from.
        // 2. `self.task` is such a reference and lives as long as `self`,
        //    so the allocation outlives the borrow returned here.
        // 3. async-task only ever hands out shared references to the
        //    metadata, and this is one more: no `&mut` aliases it.
        unsafe { self.claim.as_ref() }
    }

    /// The fallible cell, to poll or detach.
    pub(crate) fn task(&mut self) -> &mut FallibleCell<T> {
        &mut self.task
    }

    /// Whether the task has finished (`FallibleTask::is_finished`).
    pub(crate) fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Detaches the task: it runs on, its output is dropped.
    pub(crate) fn detach(self) {
        self.task.detach();
    }
}

/// What the scheduler needs to know about a task without polling it.
#[derive(Debug)]
pub(crate) struct TaskMeta {
    pub(crate) priority: Priority,
    /// The admission gate of a group's or pair's task; `None` for plain
    /// tasks, which therefore pay one branch for groups, nothing more.
    pub(crate) gate: Option<Arc<dyn Gate>>,
    /// Who won a closure: the worker starting it or a `cancel` (see
    /// [`Claim`]). Not a loom-modelled protocol: `std`'s atomic.
    pub(crate) claim: Claim,
    /// The task's kind (the type of its future), for the quantum rule and
    /// presumed blocking.
    pub(crate) kind: super::kinds::Kind,
    /// Whether it holds one of its kind's presumed places.
    pub(crate) presumption: super::kinds::Presumption,
}

impl TaskMeta {
    /// The metadata of a plain task of normal priority and no kind worth
    /// learning about, a closure's or an async task's, for tests that make
    /// cells by hand.
    #[cfg(test)]
    pub(crate) fn for_tests(closure: bool) -> TaskMeta {
        TaskMeta {
            kind: super::kinds::Kind::of::<()>(),
            priority: Priority::Normal,
            gate: None,
            claim: Claim::new(closure),
            presumption: Default::default(),
        }
    }

    /// Takes one of its kind's presumed places, or says it holds one
    /// (`kinds::Presumption::take`).
    pub(crate) fn take_presumption(&self) -> bool {
        self.presumption.take(self.kind)
    }

    /// Whether [`TaskMeta::take_presumption`] may succeed (a load or two).
    pub(crate) fn may_take_presumption(&self) -> bool {
        self.presumption.may_take(self.kind)
    }

    /// Gives its presumed place back, if it holds one, for a task that will
    /// not run presumed (queued for a slot, or dropped at a stop).
    pub(crate) fn give_back_presumption(&self) {
        self.presumption.give_back(self.kind);
    }
}

/// Decides, for a closure, between a worker starting it and its handle
/// cancelling it, so `cancel()` says true only for a closure that will not
/// run. `async-task` cannot tell: a closure cancelled while it ran ran to its
/// end, its output was dropped, and the handle said `Cancelled`.
///
/// An async task has no claim (`NOT_CLOSURE`): cancelled, it is dropped at
/// its next `.await`, which is "will not run to completion" already.
#[derive(Debug)]
pub(crate) struct Claim(std::sync::atomic::AtomicU8);

const OPEN: u8 = 0;
const STARTED: u8 = 1;
const CANCELLED: u8 = 2;
const NOT_CLOSURE: u8 = 3;
/// The closure returned (or panicked): only its cell's epilogue is left.
const FINISHED: u8 = 4;

impl Claim {
    /// The claim of a new task.
    pub(crate) fn new(closure: bool) -> Self {
        Claim(std::sync::atomic::AtomicU8::new(if closure {
            OPEN
        } else {
            NOT_CLOSURE
        }))
    }

    /// Where the closure is in its life, for the free ring (`local_free`).
    /// An async task reads as [`Phase::Running`]: it may be polled again.
    pub(crate) fn phase(&self) -> Phase {
        use std::sync::atomic::Ordering;
        match self.0.load(Ordering::Relaxed) {
            OPEN => Phase::Queued,
            FINISHED | CANCELLED => Phase::Done,
            _ => Phase::Running,
        }
    }

    /// For the worker whose closure just returned (inside its poll, so the
    /// cell is alive): marks it [`FINISHED`]. A plain store: the worker
    /// owns the claim's line since its `start`, and nothing but the free
    /// ring's choice of who frees the cell depends on it.
    pub(crate) fn finished(&self) {
        use std::sync::atomic::Ordering;
        self.0.store(FINISHED, Ordering::Relaxed);
    }

    /// True for a work item's closure (it runs to its end in one poll),
    /// false for an async task.
    pub(crate) fn is_closure(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.0.load(Ordering::Relaxed) != NOT_CLOSURE
    }

    /// For the worker about to run the task: false if its handle cancelled
    /// it first (the worker drops it unrun). An async task pays one Relaxed
    /// load; a closure a swap on the cell's header line, which the worker
    /// has just taken to run it.
    #[inline]
    pub(crate) fn start(&self) -> bool {
        use std::sync::atomic::Ordering;
        let now = self.0.load(Ordering::Relaxed);
        if now != OPEN {
            // An async task (or an async task's later poll), or a closure
            // its handle already cancelled.
            return now != CANCELLED;
        }
        // AcqRel pairs with the compare_exchange in `cancel`: exactly one of
        // the two sees the other's value.
        self.0.swap(STARTED, Ordering::AcqRel) != CANCELLED
    }

    /// For the handle: true if the task may be cancelled (an async task, or
    /// a closure no worker has started; it then never will).
    pub(crate) fn cancel(&self) -> bool {
        use std::sync::atomic::Ordering;
        match self
            .0
            .compare_exchange(OPEN, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(now) => now == NOT_CLOSURE || now == CANCELLED,
        }
    }
}

/// A closure's phase, as its [`Claim`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No worker has started it, and its handle has not cancelled it.
    Queued,
    /// A worker is inside it (or it is an async task).
    Running,
    /// It returned or panicked, or its handle cancelled it (it never
    /// runs): no worker is inside it.
    Done,
}

/// The hook through which groups and pairs (the `fair` layer) take part in a
/// task's life. The runtime calls it at five points:
///
/// * [`Gate::admit`]: every time the task is scheduled (first spawn and every
///   wake). The gate returns the runnable to let it into the pool's queues
///   now, or keeps it (returns `None`) and queues it later itself.
/// * [`Gate::poll_started`] / [`Gate::poll_ended`]: around every poll, from
///   inside the task's wrapper.
/// * [`Gate::after_run`]: by the worker right after every run of the task
///   (a poll, or the drop of a cancelled future), panicking or not.
/// * [`Gate::ended`]: once, when the task ends, however it ends.
pub(crate) trait Gate: Send + Sync + std::fmt::Debug {
    /// See the trait docs. Takes the gate by `Arc` so it can keep itself
    /// beside the runnable while the task waits for admission.
    fn admit(self: Arc<Self>, runnable: Runnable) -> Option<Runnable>;
    /// See the trait docs.
    fn poll_started(&self);
    /// See the trait docs.
    fn poll_ended(&self);
    /// See the trait docs.
    fn after_run(&self);
    /// See the trait docs.
    fn ended(&self, outcome: Outcome);
}

/// The gate of a task as its wrapper holds it: [`NoGate`] (zero-sized) for
/// plain tasks, so they store and call nothing for groups, or the gate's
/// `Arc` for a group's or pair's task.
pub(crate) trait MaybeGate: Send + Sync + 'static {
    /// The gate, if there is one.
    fn get(&self) -> Option<&dyn Gate>;
    /// The gate for the task's metadata, if there is one.
    fn to_meta(&self) -> Option<Arc<dyn Gate>>;
}

/// The [`MaybeGate`] of a plain task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoGate;

impl MaybeGate for NoGate {
    #[inline(always)]
    fn get(&self) -> Option<&dyn Gate> {
        None
    }

    fn to_meta(&self) -> Option<Arc<dyn Gate>> {
        None
    }
}

impl MaybeGate for Arc<dyn Gate> {
    #[inline]
    fn get(&self) -> Option<&dyn Gate> {
        Some(&**self)
    }

    fn to_meta(&self) -> Option<Arc<dyn Gate>> {
        Some(Arc::clone(self))
    }
}

pin_project_lite::pin_project! {
    /// The one wrapper around every task's future. See the module docs.
    ///
    /// A hand-written future rather than an `async` block: the cell of a
    /// tiny work item is the product's hottest allocation, and this keeps it
    /// to the future, the guard, one stamp and, for a closure, its claim's
    /// address (`ClaimOfCell`: see `local_free`) (an `async` block with a poll
    /// hook stored a pinned pointer and a gate reference besides, 40 bytes
    /// more, and cost ~13% more instructions per task; callgrind, SLOTS=1
    /// spawn_profile inside).
    ///
    /// The wrapper holds no reference to the pool (one shared reference
    /// count touched by two cores per task costs more than the rest of the
    /// wrapper): a task's future is only ever polled or dropped by its own
    /// pool's workers, or by its pool draining its queues, and both tell
    /// `context::with_task_pool` which pool that is.
    ///
    /// The future is an `Option` so the wrapper's own drop can drop it in
    /// place inside `catch_unwind` (`Pin::set(None)`): `async-task` drops a
    /// cancelled or drained task's future under an abort guard, and a
    /// captured value whose destructor panicked aborted the process.
    pub(crate) struct Wrapped<F, G: MaybeGate> {
        #[pin]
        future: Option<CatchUnwind<AssertUnwindSafe<F>>>,
        guard: EndGuard<G>,
        // When the task was queued, in `sys::ticks`, until its first poll
        // records the latency; `NOT_SAMPLED` after that or if not measured.
        queued_at: u64,
        // A closure's claim, marked finished when it returns (for the free
        // ring: see `local_free`); `None` for an async task.
        claim: Option<ClaimOfCell>,
    }

    impl<F, G: MaybeGate> PinnedDrop for Wrapped<F, G> {
        fn drop(this: Pin<&mut Self>) {
            let mut future = this.project().future;
            if future.is_some() {
                // If the drop panics, `set` still leaves `None` in place (an
                // assignment whose drop unwinds still stores the new value),
                // so the field is not dropped twice.
                drop_caught(|| future.set(None));
            }
            // The guard (a field) drops after this: it counts the end.
        }
    }
}

/// The claim in the metadata of the cell whose future holds this: how a
/// closure's wrapper reaches its claim without a reference count.
pub(crate) struct ClaimOfCell(std::ptr::NonNull<Claim>);

// SAFETY: a `ClaimOfCell` is a shared reference to a `Claim` (an atomic,
// so `Sync`) that lives as long as the holder (see `ClaimOfCell::get`).
unsafe impl Send for ClaimOfCell {}
// SAFETY: as for `Send` above.
unsafe impl Sync for ClaimOfCell {}

impl ClaimOfCell {
    /// The claim of the cell that will hold the future built with this:
    /// only to be called in the closure async-task gives the metadata to
    /// when it builds a cell's future (`Builder::spawn`).
    pub(crate) fn new(claim: &Claim) -> Self {
        ClaimOfCell(std::ptr::NonNull::from(claim))
    }

    fn get(&self) -> &Claim {
        // SAFETY: the claim outlives `self`:
        // 1. `self` is built from the metadata of the cell whose future
        //    holds it (`ClaimOfCell::new`), and stays inside that future;
        // 2. async-task keeps a cell's metadata in its one heap allocation
        //    at one address until the allocation is freed, and drops the
        //    future (with `self`) before that (see `PolledCell::claim`);
        // 3. only shared references to the metadata are ever made.
        unsafe { self.0.as_ref() }
    }
}

/// Wraps `future` for a task whose gate is `gate` ([`NoGate`] for a plain
/// task); `claim` is a closure's (see the module docs).
pub(crate) fn wrap<F: Future, G: MaybeGate>(
    future: F,
    gate: G,
    claim: Option<ClaimOfCell>,
) -> Wrapped<F, G> {
    Wrapped {
        future: Some(AssertUnwindSafe(future).catch_unwind()),
        // Created with the cell, so it counts the task as cancelled even if
        // the future is dropped before its first poll.
        guard: EndGuard {
            ended: false,
            waiting: 0,
            gate,
        },
        queued_at: start_sampler::stamp(),
        claim,
    }
}

impl<F: Future, G: MaybeGate> Future for Wrapped<F, G> {
    type Output = TaskOutput<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if *this.queued_at != start_sampler::NOT_SAMPLED {
            let latency = crate::sys::ticks().saturating_sub(*this.queued_at);
            super::context::record_start(latency);
            *this.queued_at = start_sampler::NOT_SAMPLED;
        }
        let gate = this.guard.gate.get();
        if let Some(gate) = gate {
            gate.poll_started();
        }
        // Panics are caught inside, so the hooks always pair up.
        let poll = match this.future.as_pin_mut() {
            Some(future) => future.poll(cx),
            // Polled after it finished: async-task never does.
            None => Poll::Pending,
        };
        if let Some(gate) = gate {
            gate.poll_ended();
        }
        if poll.is_pending() && this.guard.waiting == 0 {
            this.guard.wait_registered(cx.waker());
        }
        poll.map(|output| {
            if let Some(claim) = this.claim {
                claim.get().finished();
            }
            // Counted before the output is handed to the join side.
            this.guard.end(match output {
                Ok(_) => Outcome::Completed,
                Err(_) => Outcome::Panicked,
            });
            Output(Some(output))
        })
    }
}

/// Counts a task's end exactly once: in [`EndGuard::end`] when the future
/// finishes, or on drop (as cancelled) if it never did — a cancelled handle,
/// or a stopping pool dropping it unrun.
struct EndGuard<G: MaybeGate> {
    ended: bool,
    /// The task's entry among its pool's waiting tasks
    /// (`runtime::waiting`), from its first `Pending` to its end: a
    /// `WaitingKey` as bits, 0 for none (beside `ended`, in what was
    /// padding).
    waiting: u32,
    gate: G,
}

impl<G: MaybeGate> EndGuard<G> {
    /// Registers the task, which just returned `Pending` for the first
    /// time, among its pool's waiting tasks, so a pool that stops can
    /// cancel it. If the pool has stopped already, wakes it instead: the
    /// stopped pool then drops it.
    #[cold]
    fn wait_registered(&mut self, waker: &Waker) {
        match super::context::register_waiting(waker) {
            Some(Registered::Yes(key)) => self.waiting = key.to_bits(),
            Some(Registered::PoolStopped) => waker.wake_by_ref(),
            Some(Registered::NoRoom) | None => {}
        }
    }

    fn end(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        if let Some(key) = WaitingKey::from_bits(std::mem::take(&mut self.waiting)) {
            // Before the end is counted: that count may stop the pool,
            // which would wake the entry for nothing.
            super::context::deregister_waiting(key);
        }
        // The gate first: it gives the task's permits back before the pool
        // counts the end, which may be the one that lets the pool stop.
        if let Some(gate) = self.gate.get() {
            gate.ended(outcome);
        }
        super::context::count_task_end(outcome);
    }
}

impl<G: MaybeGate> Drop for EndGuard<G> {
    fn drop(&mut self) {
        self.end(Outcome::Cancelled);
    }
}

/// Frees a work item's task cell on the thread that allocated it.
///
/// Every task is a cell the spawning thread allocates. Freed by the worker
/// that ran it — another core — the allocator's free lists bounce between the
/// cores: with glibc, a spawner and two workers ran tiny work items at ~400 ns
/// each, against ~310 ns (from outside the pool) and ~220 ns (from inside)
/// when the spawning thread frees the cells itself (benches/tools/spawn_profile.rs,
/// two workers). So the spawning thread keeps a waker of each work item it
/// spawns — a reference that keeps the cell alive — in a short ring, and drops
/// the oldest as new ones come: by then the item has usually run, and the
/// cell is freed here, into this thread's allocator cache.
///
/// Only for closures: a closure's future finishes in its first poll, so the
/// kept waker never keeps an unfinished task alive (an async task whose only
/// reference were this waker would otherwise linger until evicted). A kept
/// waker is never woken; if the item has not run by eviction, dropping it is
/// an ordinary reference drop and the worker frees the cell as before.
///
/// # How long the ring is
///
/// Long enough to cover the backlog of a burst: a cell evicted before its
/// item ran is freed by the worker after all. A spawner that floods the
/// pool runs ahead of the workers by tens of thousands of items, so the
/// ring holds up to [`KEPT_IN_BURST`](local_free::KEPT_IN_BURST) wakers while this thread spawns in a
/// burst (as `start_sampler` sees it) and [`KEPT_IN_TRICKLE`](local_free::KEPT_IN_TRICKLE) otherwise,
/// shrinking by up to [`TRIM_STEP`](local_free::TRIM_STEP) per spawn when a burst ends. Measured
/// with `tidepool-lab thread-per-task --repeat 5` (1M closures from one
/// thread; ns per task, tidepool / the threadpool crate in the same run,
/// three runs each): a ring of 256: 1.23, 1.06, 1.77; 16,384: 0.79, 0.79,
/// 1.25; 65,536: 0.82, 0.68, 0.73.
///
/// The ring never evicts the waker of an item a worker has not finished
/// with (each item's claim says whether its closure returned; the wrapper
/// marks it): that would leave the cell's last reference, and so its free,
/// to the worker. Eviction stops at the oldest item still queued until it
/// starts, and at one running until it returns or has been found running
/// [`RUNNING_LOOKS`](local_free::RUNNING_LOOKS) times (then it goes to the
/// ring's back: a closure that loops for the pool's life must not hold the
/// front), so the
/// ring also covers a backlog longer than its length: a worker that
/// fans out pushes onto its own deque, which one other worker drains while
/// it spawns, and one spawning a million items held ~55,000 still queued
/// near the end. Measured with `spawn_profile inside 1000000 5` (two
/// workers), six processes of each build in turn, each process's median
/// round: see docs/measurements.md, "Checks of the changes 076df8d..".
/// Until the "returned" mark, the ring stopped only at items not yet
/// *started*: once the spawner ran that far ahead it evicted the items
/// the workers were running, and the workers freed them after all
/// (through glibc's arena lock, contended with the spawner's mallocs);
/// see docs/measurements.md, "The free ring waits for the closure's
/// return".
///
/// The cost is memory: up to 65,536 finished cells (~100 bytes each: their
/// closures and outputs are gone) beyond the queued ones, and the ring
/// itself (24 bytes a waker), about 8 MiB per thread that spawned a large
/// burst, until it spawns again (the ring then shrinks) or exits (the ring
/// is freed). glibc would keep most of that memory in its free lists
/// anyway. An item that never starts (dropped unrun by a stopped pool)
/// stays until the ring holds [`KEPT_AT_MOST`](local_free::KEPT_AT_MOST).
pub(crate) mod local_free {
    use super::{Claim, Phase, Runnable};
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::ptr::NonNull;
    use std::task::Waker;

    /// Wakers kept while this thread spawns in a burst.
    pub(crate) const KEPT_IN_BURST: usize = 65_536;
    /// Wakers kept while its spawns are spread out: ~25 KiB of cells, long
    /// enough that the item has usually run by the time it is evicted.
    pub(crate) const KEPT_IN_TRICKLE: usize = 256;
    /// How many more than one a spawn evicts when the ring is over its
    /// length (a burst ended): a few microseconds of frees per spawn at the
    /// most, and a full ring shrinks within ~2,000 spawns.
    pub(crate) const TRIM_STEP: usize = 32;
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

    /// A kept waker, with the claim of its item so the ring can tell
    /// whether a worker has finished with it.
    pub(crate) struct Kept {
        /// Held, never woken: the reference that keeps the cell alive.
        _reference: Waker,
        /// The claim in the metadata of the task `_reference` references.
        claim: NonNull<Claim>,
        /// How many times the ring found the item running at its front.
        running_looks: u8,
    }

    impl Kept {
        /// A waker of `runnable`'s task and a pointer to its claim.
        #[inline]
        pub(crate) fn of(runnable: &Runnable) -> Kept {
            Kept {
                _reference: runnable.waker(),
                claim: NonNull::from(&runnable.metadata().claim),
                running_looks: 0,
            }
        }

        /// The item's phase. Evicting the waker of an item queued or
        /// running would leave its last reference, and so the free, to the
        /// worker that runs it.
        fn phase(&self) -> Phase {
            // SAFETY: the pointer is valid while `self` lives:
            // 1. `self._reference` is a reference to the task, so the task's
            //    one heap allocation stays alive until it is dropped,
            //    which happens only with `self`;
            // 2. async-task keeps the metadata (and the claim in it) in
            //    that allocation, at one address from spawn until the
            //    last reference is gone (see `PolledCell::claim`);
            // 3. only shared references to the metadata are ever made.
            unsafe { self.claim.as_ref() }.phase()
        }
    }

    thread_local! {
        static RING: RefCell<VecDeque<Kept>> = const { RefCell::new(VecDeque::new()) };
    }

    /// Keeps `kept` (of a work item just spawned) and evicts the oldest
    /// kept beyond the ring's length, up to the first whose item has not
    /// started yet (see the module docs).
    #[inline]
    pub(crate) fn keep(kept: Kept) {
        let length = if super::start_sampler::in_burst() {
            KEPT_IN_BURST
        } else {
            KEPT_IN_TRICKLE
        };
        let _ = RING.try_with(|ring| {
            let over = {
                let mut ring = ring.borrow_mut();
                ring.push_back(kept);
                // The claim a later spawn looks at before it frees the cell:
                // by then long out of the cache (see `PREFETCH_AHEAD`).
                if let Some(ahead) = ring.get(PREFETCH_AHEAD) {
                    crate::sys::prefetch(ahead.claim.as_ptr());
                }
                ring.len().saturating_sub(length).min(TRIM_STEP + 1)
            };
            if over > 0 {
                evict_oldest(ring, over);
            }
        });
    }

    /// Drops up to `over` of the ring's oldest wakers (see [`keep`]).
    #[inline(never)]
    fn evict_oldest(ring: &RefCell<VecDeque<Kept>>, over: usize) {
        // Dropped outside the borrow, one at a time: freeing a cell
        // runs no user code for a finished task, but a task's last
        // reference may run its destructor, which may spawn.
        for _ in 0..over {
            let evicted = {
                let mut ring = ring.borrow_mut();
                let Some(mut oldest) = ring.pop_front() else {
                    break;
                };
                match oldest.phase() {
                    Phase::Done => oldest,
                    _ if ring.len() >= KEPT_AT_MOST => oldest,
                    Phase::Running if oldest.running_looks >= RUNNING_LOOKS => {
                        // A worker has been inside it for a while, maybe
                        // for good (a closure that loops for the pool's
                        // life): it goes behind the rest, so it does not
                        // hold the front, and the next one is looked at.
                        ring.push_back(oldest);
                        continue;
                    }
                    Phase::Running => {
                        // Most likely a tiny item about to return (the
                        // spawner has caught up with the workers): look
                        // again at the next spawn.
                        oldest.running_looks += 1;
                        ring.push_front(oldest);
                        break;
                    }
                    Phase::Queued => {
                        // Still queued, and so (mostly) are the ones
                        // after it: stop here. Looking further would
                        // touch a cold cell per look on every spawn of
                        // a long backlog.
                        ring.push_front(oldest);
                        break;
                    }
                }
            };
            drop(evicted);
        }
    }

    /// How many wakers this thread keeps (for tests).
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn kept() -> usize {
        RING.try_with(|ring| ring.borrow().len()).unwrap_or(0)
    }

    /// Whether this thread keeps a waker of the item whose claim this is
    /// (for tests).
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn holds(claim: &Claim) -> bool {
        RING.try_with(|ring| {
            ring.borrow()
                .iter()
                .any(|kept| std::ptr::eq(kept.claim.as_ptr(), claim))
        })
        .unwrap_or(false)
    }
}

/// Which spawns get a queue-to-start measurement.
///
/// Reading the time-stamp counter at spawn and at first poll, and recording
/// the difference, cost ~75 ns of a ~250 ns tiny task on the project machine
/// (benches/tools/spawn_parts.rs). So each spawning thread measures every spawn
/// while its spawns are spread out, and one in `BURST_EVERY` while it
/// spawns in a burst (less than `BURST_GAP_TICKS` apart on average). The
/// summary stays exact for the latency-sensitive trickle and statistically
/// sound for floods, whose tasks share the same queue wait.
pub(crate) mod start_sampler {
    use std::cell::Cell;

    /// The stamp of a spawn that is not measured.
    pub(super) const NOT_SAMPLED: u64 = 0;

    /// In a burst, one spawn in this many is measured.
    const BURST_EVERY: u32 = 8;

    /// Spawns closer than this on average (in ticks: ~5-10 µs at 2-4 GHz)
    /// form a burst.
    const BURST_GAP_TICKS: u64 = 20_000;

    thread_local! {
        /// (spawns left until the next measured one, current interval,
        /// stamp of the last measured spawn)
        static STATE: Cell<(u32, u32, u64)> = const { Cell::new((0, 1, 0)) };
    }

    /// True if this thread's recent spawns came in a burst (closer than
    /// `BURST_GAP_TICKS` apart on average, as of the last measured one).
    #[inline]
    pub(super) fn in_burst() -> bool {
        STATE
            .try_with(|state| state.get().1 == BURST_EVERY)
            .unwrap_or(false)
    }

    /// A stamp to measure this spawn's start latency from, or [`NOT_SAMPLED`].
    #[inline]
    pub(super) fn stamp() -> u64 {
        STATE
            .try_with(|state| {
                let (next, stamp) = advance(state.get(), crate::sys::ticks);
                state.set(next);
                stamp
            })
            .unwrap_or(NOT_SAMPLED)
    }

    /// One spawn's step: the sampler's next state and the spawn's stamp.
    /// `now` (the time-stamp counter) is read only for a measured spawn.
    fn advance(
        (left, every, last): (u32, u32, u64),
        now: impl FnOnce() -> u64,
    ) -> ((u32, u32, u64), u64) {
        if left > 1 {
            return ((left - 1, every, last), NOT_SAMPLED);
        }
        let now = now().max(1);
        let mean_gap = now.saturating_sub(last) / u64::from(every);
        let every = if mean_gap < BURST_GAP_TICKS {
            BURST_EVERY
        } else {
            1
        };
        ((every, every, now), now)
    }

    /// Puts this thread's sampler in a burst or out of one (for tests
    /// that must not depend on how fast the machine runs them).
    #[cfg(all(test, not(tidepool_loom)))]
    pub(super) fn set_in_burst(burst: bool) {
        let every = if burst { BURST_EVERY } else { 1 };
        STATE.with(|state| state.set((every, every, 1)));
    }

    #[cfg(all(test, not(tidepool_loom)))]
    mod tests {
        use super::*;

        /// Runs `spawns` spawns `gap` ticks apart through [`advance`] and
        /// returns the state after them and how many were measured.
        fn run(
            mut state: (u32, u32, u64),
            clock: &mut u64,
            spawns: usize,
            gap: u64,
        ) -> ((u32, u32, u64), usize) {
            let mut measured = 0;
            for _ in 0..spawns {
                *clock += gap;
                let (next, stamp) = advance(state, || *clock);
                state = next;
                measured += usize::from(stamp != NOT_SAMPLED);
            }
            (state, measured)
        }

        #[test]
        fn close_spawns_are_a_burst_measured_one_in_eight() {
            let mut clock = 1_000_000;
            let (state, _) = run((0, 1, 0), &mut clock, 16, 10);
            assert_eq!(state.1, BURST_EVERY, "in a burst");
            let (_, measured) = run(state, &mut clock, 8 * 100, 10);
            assert_eq!(measured, 100);
        }

        #[test]
        fn spread_out_spawns_are_each_measured() {
            let mut clock = 1_000_000;
            let (burst, _) = run((0, 1, 0), &mut clock, 16, 10);
            // The burst ends: the first measured spawn after the gap sees it.
            let (state, measured) = run(burst, &mut clock, 100, 2 * BURST_GAP_TICKS);
            assert_eq!(state.1, 1, "out of the burst");
            assert!(measured >= 100 - BURST_EVERY as usize);
        }
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::{local_free, start_sampler, Runnable, TaskMeta};

    /// A closure's runnable as `worker::spawn` makes it (its scheduler
    /// drops what it is given: these are never scheduled), with its handle.
    fn item() -> (Runnable, async_task::Task<(), TaskMeta>) {
        async_task::Builder::new()
            .metadata(TaskMeta::for_tests(true))
            .spawn(|_| async {}, |runnable: Runnable| drop(runnable))
    }

    /// Keeps `n` items whose workers have run them.
    fn keep_finished(n: usize) {
        for _ in 0..n {
            let (runnable, task) = item();
            assert!(runnable.metadata().claim.start());
            runnable.metadata().claim.finished();
            local_free::keep(local_free::Kept::of(&runnable));
            task.detach();
        }
    }

    #[test]
    fn the_free_ring_grows_in_a_burst_and_shrinks_in_a_trickle() {
        // The sampler's state is set, not timed: how close the spawns of
        // a test come depends on the machine's load (a timed version
        // failed in CI with 991 of 1,024 kept).
        start_sampler::set_in_burst(true);
        let burst = 4 * local_free::KEPT_IN_TRICKLE;
        keep_finished(burst);
        assert_eq!(local_free::kept(), burst, "a burst keeps every waker");
        start_sampler::set_in_burst(false);
        keep_finished(200);
        assert_eq!(
            local_free::kept(),
            local_free::KEPT_IN_TRICKLE,
            "trimmed back"
        );
    }

    #[test]
    fn the_free_ring_keeps_the_waker_of_an_item_not_run_yet() {
        start_sampler::set_in_burst(false);
        let (queued, queued_task) = item();
        local_free::keep(local_free::Kept::of(&queued));
        // Far more than the ring's length after it, all run: none evicted
        // while the oldest has not started...
        keep_finished(4 * local_free::KEPT_IN_TRICKLE);
        assert_eq!(local_free::kept(), 4 * local_free::KEPT_IN_TRICKLE + 1);
        assert!(
            local_free::holds(&queued.metadata().claim),
            "the queued item's waker is kept"
        );
        // ... nor while it runs (evicted then, its worker would free it);
        // but running, it no longer holds the others back.
        assert!(queued.metadata().claim.start());
        keep_finished(4 * local_free::KEPT_IN_TRICKLE);
        assert!(
            local_free::holds(&queued.metadata().claim),
            "the running item's waker is kept"
        );
        assert_eq!(
            local_free::kept(),
            local_free::KEPT_IN_TRICKLE,
            "a running item does not hold the ring's front"
        );
        // Once it has returned, it goes like the rest.
        queued.metadata().claim.finished();
        keep_finished(4 * local_free::KEPT_IN_TRICKLE);
        assert!(!local_free::holds(&queued.metadata().claim));
        assert_eq!(local_free::kept(), local_free::KEPT_IN_TRICKLE);
        drop((queued, queued_task));
    }
}
