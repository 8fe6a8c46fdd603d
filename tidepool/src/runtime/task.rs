//! The task cell: what the runtime wraps around every spawned future, the
//! metadata it keeps beside it, and the hook through which groups and pairs
//! take part (the [`Gate`] trait).
//!
//! A future's cell, its waking and its join come from `async-task`; a
//! closure (`spawn_fn`, a scope's task) has a cell of its own, made for
//! running once (`runtime::item`). Both are a [`Runnable`] to the queues
//! and workers. The one wrapper of a future ([`wrap`]) adds what async-task
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
use super::start_sampler;
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

/// A future's runnable, as async-task makes it.
pub(crate) type FutureRunnable = async_task::Runnable<FutureMeta>;

/// A runnable task of a tidepool pool: a future's (an async-task cell) or
/// a work item's (`runtime::item`). What the queues hold and the workers
/// run.
#[derive(Debug)]
pub(crate) enum Runnable {
    /// A future's task.
    Future(FutureRunnable),
    /// A closure's.
    Item(super::item::ItemRunnable),
}

impl Runnable {
    /// What the scheduler needs to know about it.
    #[inline]
    pub(crate) fn metadata(&self) -> &TaskMeta {
        match self {
            Runnable::Future(runnable) => &runnable.metadata().task,
            Runnable::Item(item) => item.metadata(),
        }
    }

    /// The admission gate of a group's or pair's task (always a future's:
    /// a work item has none).
    #[inline]
    pub(crate) fn gate(&self) -> Option<&Arc<dyn Gate>> {
        match self {
            Runnable::Future(runnable) => runnable.metadata().gate.as_ref(),
            Runnable::Item(_) => None,
        }
    }

    /// Runs it: polls the future, or calls the closure. The caller has
    /// claimed it ([`Claim::start`]).
    #[inline]
    pub(crate) fn run(self) {
        match self {
            Runnable::Future(runnable) => {
                runnable.run();
            }
            Runnable::Item(item) => item.run(),
        }
    }
}

/// The join side of a future's task cell.
pub(crate) type TaskCell<T> = async_task::Task<TaskOutput<T>, FutureMeta>;

/// [`TaskCell`] after `fallible()`: resolves to `None` if cancelled.
pub(crate) type FallibleCell<T> = async_task::FallibleTask<TaskOutput<T>, FutureMeta>;

/// A future's metadata in its async-task cell: a gate as well, which no
/// work item has (so an item's cell is 16 bytes shorter).
#[derive(Debug)]
pub(crate) struct FutureMeta {
    /// The admission gate of a group's or pair's task; `None` for plain
    /// tasks, which therefore pay one branch for groups, nothing more.
    pub(crate) gate: Option<Arc<dyn Gate>>,
    /// What every task has.
    pub(crate) task: TaskMeta,
}

/// What the scheduler needs to know about a task without polling it: eight
/// bytes, in the first line of a work item's cell.
#[derive(Debug)]
pub(crate) struct TaskMeta {
    pub(crate) priority: Priority,
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
            claim: Claim::new(closure),
            presumption: Default::default(),
        }
    }

    /// A future's metadata with no gate and [`TaskMeta::for_tests`]'s, for
    /// tests that make async-task cells by hand.
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn future_for_tests() -> FutureMeta {
        FutureMeta {
            gate: None,
            task: TaskMeta::for_tests(false),
        }
    }

    /// Takes one of its kind's presumed places in `kinds` (its pool's
    /// table), or says it holds one and its kind is still presumed
    /// (`kinds::Presumption::take`).
    pub(crate) fn take_presumption(&self, kinds: &super::kinds::KindTable) -> bool {
        self.presumption.take(kinds, self.kind)
    }

    /// Whether [`TaskMeta::take_presumption`] may succeed (a load or two).
    pub(crate) fn may_take_presumption(&self, kinds: &super::kinds::KindTable) -> bool {
        self.presumption.may_take(kinds, self.kind)
    }

    /// Gives its presumed place back, if it holds one, for a task that will
    /// not run presumed (queued for a slot, or dropped at a stop).
    pub(crate) fn give_back_presumption(&self, kinds: &super::kinds::KindTable) {
        self.presumption.give_back(kinds, self.kind);
    }
}

/// Decides, for a closure, between a worker starting it and its handle
/// cancelling it, so `cancel()` says true only for a closure that will not
/// run. `async-task` cannot tell: a closure cancelled while it ran ran to its
/// end, its output was dropped, and the handle said `Cancelled`.
///
/// An async task has no claim (`NOT_CLOSURE`): cancelled, it is dropped at
/// its next `.await`, which is "will not run to completion" already. A
/// group's or a pair's closure, a future to their gate, has a closure's
/// claim. The loom model `loom_models/claim.rs` races the two sides.
#[derive(Debug)]
pub(crate) struct Claim(crate::sync::AtomicU8);

const OPEN: u8 = 0;
const STARTED: u8 = 1;
const CANCELLED: u8 = 2;
const NOT_CLOSURE: u8 = 3;

impl Claim {
    /// The claim of a new task.
    pub(crate) fn new(closure: bool) -> Self {
        Claim(crate::sync::AtomicU8::new(if closure {
            OPEN
        } else {
            NOT_CLOSURE
        }))
    }

    /// Where the closure is in its life, for the free ring (`runtime::free_rings`),
    /// which asks only about an item whose worker has not let it go yet
    /// (`ItemKept::is_done`): started, it is running. An async task reads
    /// as [`Phase::Running`].
    pub(crate) fn phase(&self) -> Phase {
        use std::sync::atomic::Ordering;
        match self.0.load(Ordering::Relaxed) {
            OPEN => Phase::Queued,
            CANCELLED => Phase::Done,
            _ => Phase::Running,
        }
    }

    /// True for a work item's closure (it runs once, to its end), false
    /// for an async task.
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
        // the two sees the other's value. A compare-exchange, not a swap:
        // a swap that lost to the cancel wrote STARTED over CANCELLED, and
        // the claim then read as running, and as started to a later look
        // (the loom model `claim` found it).
        self.0
            .compare_exchange(OPEN, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
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

/// A closure's phase, as the free ring sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No worker has started it, and its handle has not cancelled it.
    Queued,
    /// A worker is inside it, or has not let it go yet (or it is an async
    /// task).
    Running,
    /// Its worker let it go (it ran, or was dropped unrun), or its handle
    /// cancelled it (it never runs).
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
    /// to the future, the guard and one stamp (an `async` block with a poll
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

/// Wraps `future` for a task whose gate is `gate` ([`NoGate`] for a plain
/// task).
pub(crate) fn wrap<F: Future, G: MaybeGate>(future: F, gate: G) -> Wrapped<F, G> {
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
