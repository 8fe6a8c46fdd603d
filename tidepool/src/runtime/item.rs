//! A work item's cell: one heap allocation that holds a spawned closure,
//! then its output, for `spawn_fn` and a scope's tasks.
//!
//! Futures live in `async-task` cells (`runtime::task`). A closure needs
//! far less of a cell: it runs once, to its end, is never woken, and never
//! registers a waker of its own. Run through an `async-task` cell, a tiny
//! item paid for what it did not use: a waker clone and drop per item for
//! the spawner's free ring, a compare-and-swap loop to detach the handle,
//! the poll's state machine, and a 120-byte allocation that, with two
//! captured `Arc`s, outgrew glibc's fast bins. `perf record` of
//! `spawn_profile inside` (two workers, one profile) put 56% of the spawning thread's
//! samples on that cell's life (docs/measurements.md has the figures
//! before and after).
//!
//! # The layout
//!
//! A 40-byte header (state, vtable, metadata, queue stamp, and a pointer
//! to the handle's waker, made only if the handle ever waits), then one
//! slot that holds the closure until it runs and the output after: a
//! closure that captures a pointer or two and returns nothing makes a
//! 56-byte cell, one 64-byte block of glibc's. The worker that runs it
//! pulls one or two cache lines across from the spawner's core, not two or
//! three, and a backlog of queued items takes 64 bytes an item, not 112
//! (docs/measurements.md, "A 56-byte cell").
//!
//! # The protocol
//!
//! A cell is shared by up to three references, each one bit of its
//! `state` word, each held by one owner:
//!
//! * `QUEUED`: the [`ItemRunnable`] in a queue, until a worker runs it or
//!   it is dropped unrun (its handle cancelled it, or the pool stopped);
//! * `HANDLE`: the [`ItemHandle`] inside the user's `JoinHandle` (an
//!   item run by `Pool::execute` is born without it, as if its handle
//!   had been dropped at once: [`spawn_detached`]);
//! * `KEPT`: the spawning thread's free ring ([`ItemKept`]), which frees
//!   the cell on the thread that allocated it (see
//!   `runtime::free_rings`).
//!
//! Whoever clears the last reference bit frees the cell. Two more bits:
//!
//! * `DONE`: set once, by the runnable's owner, after it stored the output
//!   (or, for an item dropped unrun, none). From then on the output is the
//!   handle's: the handle takes it, or drops it when it lets go (and what a
//!   handle leaves, `STORED` says, is dropped by the free). Before it, only
//!   the runnable's owner touches the slot.
//! * `AWAITING`: the handle put a waker in its awaiter (published in the
//!   header before this bit) and wants a wake-up at `DONE`.
//! * `STORED`: set with `DONE` when an output was stored for the handle,
//!   cleared by the owner that emptied the slot, as it lets go.
//!
//! Invariants a reviewer can check against the code:
//!
//! 1. A reference bit is cleared once, by its owner, with an `AcqRel`
//!    read-modify-write; the owner that sees itself last frees, so every
//!    other owner's writes to the cell happen before the free.
//! 2. The slot holds the closure until the runnable's owner takes it out
//!    (to run it, or to drop it unrun), once; before `DONE` nobody else
//!    touches the slot.
//! 3. An output is written into the slot only by the runnable's owner,
//!    after it took the closure and before `DONE`, and read or dropped
//!    only by the handle after it saw `DONE` (acquire) with `STORED`, or
//!    by the runnable's owner when `HANDLE` was already clear (no handle
//!    will ever look), or by the free.
//! 4. `DONE` and `AWAITING` are both set with read-modify-writes of the one
//!    word, so of a handle starting to wait and the item finishing, one
//!    sees the other: the handle finds `DONE` and does not wait, or the
//!    finisher finds `AWAITING` and wakes the waker stored before it.
//! 5. When the last reference goes, the closure is gone (the runnable's
//!    owner took it and set `DONE` before it let go), and the slot holds
//!    nothing unless `STORED` is still set: an output is taken by
//!    the handle when it sees `DONE` (polled, or dropped: it clears
//!    `STORED` as it lets go), or by the runnable's owner if the handle
//!    left before its `DONE` (it finds `HANDLE` clear, and clears `STORED`
//!    as it lets go). A handle that looked just before `DONE` and let go
//!    just after leaves the output, with `STORED`, to the free (loom found
//!    that order). So a free drops nothing but an output `STORED` says is
//!    there and the awaiter of a handle that ever waited.
//! 6. A reference that finds itself the only one left (an acquire load of
//!    the state shows no other reference bit) frees without clearing its
//!    bit: no other owner exists to race with, and none can appear.
//!
//! `loom_models::item` checks these against every interleaving of a
//! worker, a handle (waiting, or dropped) and the free ring, and of a
//! detached item's worker and ring.
//!
//! Accounting is the same as a future's (`task::Wrapped`): the start
//! latency is recorded when the closure starts, a panic is caught, and the
//! end is counted once (completed, panicked, or cancelled if dropped
//! unrun) before the handle can see the output. A panicking destructor of
//! the closure or the output is caught (`task::drop_caught`).

use super::start_sampler;
use super::task::{drop_caught, PanicPayload, TaskMeta};
use crate::metrics::Outcome;
use crate::sync::{lock, AtomicPtr, AtomicUsize, Mutex, Ordering};
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::AssertUnwindSafe;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

/// The queued runnable's reference.
const QUEUED: usize = 1 << 0;
/// The join handle's reference.
const HANDLE: usize = 1 << 1;
/// The spawning thread's free ring's reference.
const KEPT: usize = 1 << 2;
/// Every reference bit.
const REFERENCES: usize = QUEUED | HANDLE | KEPT;
/// The runnable's owner is done with the cell: the output (if any) is
/// stored.
const DONE: usize = 1 << 3;
/// A waker waits in `awaiter` for `DONE`.
const AWAITING: usize = 1 << 4;
/// The output slot may hold an output: set with `DONE` when one was
/// stored, cleared by the owner that empties the slot, as it lets go.
const STORED: usize = 1 << 5;

/// What every cell starts with, whatever its closure: all that the
/// type-erased owners (the runnable in a queue, the free ring) read. Forty
/// bytes, so a cell whose closure captures a pointer or two and returns
/// nothing is 56 bytes, a 64-byte block of glibc's: the worker that runs
/// the item pulls one or two cache lines from the spawner's core, not two
/// or three (docs/measurements.md, "A 56-byte cell").
#[repr(C)]
struct Header {
    state: AtomicUsize,
    vtable: &'static VTable,
    /// What the scheduler needs to know without running it.
    meta: TaskMeta,
    /// When the item was queued (`start_sampler::stamp`), read once when
    /// it starts.
    queued_at: u64,
    /// The handle's waker, once it waited: null until then. Made and
    /// published by the handle the first time it waits, before it sets
    /// `AWAITING`; read by the finisher only after it saw `AWAITING`;
    /// freed with the cell. Out of line because few handles ever wait (a
    /// detached item's never does), and inline it made every cell 16
    /// bytes longer. A lock inside, not a lock-free slot: only a waiting
    /// handle and the finisher of the item it waits for take it.
    awaiter: AtomicPtr<Awaiter>,
    /// Under loom, a cell never freed (or freed twice) fails the model.
    #[cfg(tidepool_loom)]
    _tracked: loom::alloc::Track<()>,
}

/// A waiting handle's waker.
type Awaiter = Mutex<Option<Waker>>;

/// The functions of one closure type, for the owners that do not know it.
struct VTable {
    /// Runs the closure (the runnable's owner, once).
    run: unsafe fn(NonNull<Header>),
    /// Drops the closure unrun (the runnable's owner, once, instead).
    drop_unrun: unsafe fn(NonNull<Header>),
    /// Frees the cell (the last reference).
    free: unsafe fn(NonNull<Header>),
    /// How far the slot is from the header's start: it depends on the
    /// closure's alignment as well as the output's, and the handle knows
    /// only the output's type.
    slot_offset: usize,
}

/// The closure until the runnable's owner takes it, then the output, if
/// one was stored (`STORED`): never both, so one place holds either.
#[repr(C)]
union Slot<F, R> {
    closure: ManuallyDrop<F>,
    output: ManuallyDrop<Result<R, PanicPayload>>,
}

/// A whole cell.
#[repr(C)]
struct Cell<F, R> {
    header: Header,
    slot: UnsafeCell<Slot<F, R>>,
}

/// Where the output slot of the cell at `header` is, for a reader that
/// knows the output's type `R`.
///
/// # Safety
///
/// `header` is the header of a live `Cell<F, R>` for this `R`.
unsafe fn output_slot<R>(header: NonNull<Header>) -> *mut Result<R, PanicPayload> {
    // SAFETY: the caller's cell is alive, so its vtable is readable.
    let offset = unsafe { header.as_ref().vtable.slot_offset };
    // SAFETY: `slot_offset` is the offset of the cell's slot (`repr(C)`,
    // see `Cell::SLOT_OFFSET`), inside the allocation `header` points
    // into; a union's fields all start where it does.
    unsafe { header.as_ptr().cast::<u8>().add(offset).cast() }
}

impl<F, R> Cell<F, R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    const VTABLE: VTable = VTable {
        run: Self::run,
        drop_unrun: Self::drop_unrun,
        free: Self::free,
        slot_offset: Self::SLOT_OFFSET,
    };

    /// The slot's offset in a `repr(C)` cell: the header's size rounded up
    /// to the slot's alignment (checked against the real field in debug
    /// builds, in `spawn`).
    const SLOT_OFFSET: usize = {
        let align = std::mem::align_of::<Slot<F, R>>();
        std::mem::size_of::<Header>().div_ceil(align) * align
    };

    /// The closure, taken out of the slot by the runnable's owner.
    ///
    /// # Safety
    ///
    /// The caller owns the `QUEUED` reference of this live cell and has not
    /// taken the closure yet (it does so once: `run` or `drop_unrun`).
    unsafe fn take_closure(&self) -> F {
        // SAFETY: invariant 2: the slot holds the closure until its owner,
        // the caller, takes it, once.
        unsafe { ManuallyDrop::take(&mut (*self.slot.get()).closure) }
    }

    /// Runs the closure, stores its output, and lets the runnable's
    /// reference go.
    ///
    /// # Safety
    ///
    /// `header` is the header of a live `Cell<F, R>` whose `QUEUED`
    /// reference the caller owns and gives up by this call.
    unsafe fn run(header: NonNull<Header>) {
        // SAFETY: the caller's reference keeps the cell alive, and a
        // `Cell` starts with its header (`repr(C)`), so the pointer is the
        // cell's.
        let cell = unsafe { header.cast::<Self>().as_ref() };
        let queued_at = cell.header.queued_at;
        if queued_at != start_sampler::NOT_SAMPLED {
            let latency = crate::sys::ticks().saturating_sub(queued_at);
            super::context::record_start(latency);
        }
        // SAFETY: the caller owns `QUEUED`, and `run` is its one use.
        let closure = unsafe { cell.take_closure() };
        let result = std::panic::catch_unwind(AssertUnwindSafe(closure));
        // Counted before the handle can see the output (a caller that
        // joins it sees its end counted, and a presumed task's verdict).
        super::context::count_task_end(match result {
            Ok(_) => Outcome::Completed,
            Err(_) => Outcome::Panicked,
        });
        // SAFETY: as above; the owner's reference is given up here.
        unsafe { Self::finish(header, Some(result)) }
    }

    /// Drops the closure unrun (counted as cancelled), and lets the
    /// runnable's reference go: the handle resolves to `Cancelled`.
    ///
    /// # Safety
    ///
    /// As for [`Cell::run`].
    unsafe fn drop_unrun(header: NonNull<Header>) {
        // SAFETY: as in `run`.
        let cell = unsafe { header.cast::<Self>().as_ref() };
        // SAFETY: the caller owns `QUEUED`, and `drop_unrun` is its one use.
        let closure = unsafe { cell.take_closure() };
        drop_caught(move || drop(closure));
        super::context::count_task_end(Outcome::Cancelled);
        // SAFETY: as in `run`.
        unsafe { Self::finish(header, None) }
    }

    /// Stores `output` for the handle (or drops it if the handle is gone),
    /// sets `DONE`, wakes a waiting handle and lets the runnable's
    /// reference go.
    ///
    /// # Safety
    ///
    /// As for [`Cell::run`].
    unsafe fn finish(header: NonNull<Header>, output: Option<Result<R, PanicPayload>>) {
        // SAFETY: as in `run`.
        let cell = unsafe { header.cast::<Self>().as_ref() };
        let state = &cell.header.state;
        if state.load(Ordering::Relaxed) & HANDLE == 0 {
            // Detached (the usual fire-and-forget item): nobody will take
            // the output, and nobody waits. `HANDLE` is never set again, so
            // `DONE` and the reference go in one step.
            drop_caught(move || drop(output));
            // `DONE` is clear and `QUEUED` set (both this owner's), so the
            // addition sets the one and clears the other.
            let before = state.fetch_add(DONE.wrapping_sub(QUEUED), Ordering::AcqRel);
            if before & REFERENCES == QUEUED {
                // SAFETY: invariant 1: the last reference frees.
                unsafe { (cell.header.vtable.free)(header) };
            }
            return;
        }
        let stored = match output {
            Some(output) => {
                // SAFETY: invariant 3: before `DONE`, the output slot is
                // this owner's (and empty: the closure was taken).
                unsafe { (*cell.slot.get()).output = ManuallyDrop::new(output) };
                STORED
            }
            None => 0,
        };
        let before = state.fetch_or(DONE | stored, Ordering::AcqRel);
        let mut letting_go = QUEUED;
        if before & HANDLE == 0 && stored != 0 {
            // The handle went between the two looks, before `DONE`: it
            // left the output here, and will never look again.
            // SAFETY: invariant 3 (`HANDLE` was clear); stored just above.
            let output = unsafe { ManuallyDrop::take(&mut (*cell.slot.get()).output) };
            drop_caught(move || drop(output));
            letting_go |= stored;
        }
        let waker = if before & AWAITING != 0 {
            let awaiter = cell.header.awaiter.load(Ordering::Acquire);
            // SAFETY: `AWAITING` is set only after the handle published
            // its awaiter (the read-modify-writes order the two), which
            // lives as long as the cell, kept alive by this reference.
            lock(unsafe { &*awaiter }).take()
        } else {
            None
        };
        // SAFETY: this owner's reference (and `STORED`, set, if it emptied
        // the slot), given up once.
        unsafe { release(header, letting_go) };
        // Woken last: the waker is the user's code, and the cell may be
        // freed by now (the waker is not in it any more).
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Frees the cell.
    ///
    /// By invariant 5 there is nothing left in it to drop but an output
    /// nobody took (`STORED`) and the handle's waker if it ever waited (a
    /// non-null `awaiter`): the usual free reads two words of the header
    /// and drops nothing (the ring frees a cell it has not touched for
    /// thousands of spawns).
    ///
    /// # Safety
    ///
    /// `header` is the header of a `Cell<F, R>` made by [`spawn`], and the
    /// caller cleared its last reference bit (or saw only its own left).
    unsafe fn free(header: NonNull<Header>) {
        let cell = header.cast::<Self>();
        // SAFETY: invariant 1: the cell is alive and no other reference
        // remains, so nothing writes to it any more.
        let head = unsafe { &cell.as_ref().header };
        let state = head.state.load(Ordering::Relaxed);
        // Invariant 5: the runnable's owner took the closure before it set
        // `DONE` and let go.
        debug_assert!(state & DONE != 0, "a freed item's closure was taken");
        if state & STORED != 0 {
            // SAFETY: `STORED` says the slot holds an output nobody took;
            // the cell is this function's alone (above).
            let output = unsafe { ManuallyDrop::take(&mut (*cell.as_ref().slot.get()).output) };
            drop_caught(move || drop(output));
        }
        let awaiter = head.awaiter.load(Ordering::Relaxed);
        if !awaiter.is_null() {
            // SAFETY: the handle made it with `Box::new` and leaked it
            // into `awaiter`, once; the cell is this function's alone.
            let awaiter = unsafe { Box::from_raw(awaiter) };
            drop_caught(move || drop(awaiter));
        }
        // SAFETY: `spawn` made the cell with `Box::new` and leaked it; no
        // other reference remains, and nothing in it needs dropping any
        // more (a union and atomics), so this only deallocates (and, under
        // loom, drops the tracker).
        drop(unsafe { Box::from_raw(cell.as_ptr()) });
    }
}

/// Clears `bits` (the caller's reference bit, and `STORED` if the caller
/// emptied the output slot) and frees the cell if that reference was the
/// last.
///
/// # Safety
///
/// The caller owns the reference bit in `bits` of the live cell at
/// `header`, and gives it up; every bit in `bits` is set.
unsafe fn release(header: NonNull<Header>, bits: usize) {
    // SAFETY: the caller's reference keeps the cell alive until this
    // clears it.
    let head = unsafe { header.as_ref() };
    // A subtraction clears the bits (they are set), in one locked
    // instruction; `fetch_and` is a compare-and-swap loop on x86.
    let before = head.state.fetch_sub(bits, Ordering::AcqRel);
    debug_assert_eq!(before & bits, bits, "each bit is cleared once");
    let reference = bits & REFERENCES;
    if before & REFERENCES == reference {
        let free = head.vtable.free;
        // SAFETY: invariant 1: this was the last reference, to a cell of
        // the type `free` was made for.
        unsafe { free(header) };
    }
}

/// Makes a cell for `work` with `meta`, holding all three references.
/// `meta` must have no gate (groups and pairs run futures).
pub(crate) fn spawn<F, R>(meta: TaskMeta, work: F) -> (ItemRunnable, ItemHandle<R>, ItemKept)
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let header = make_cell::<F, R>(meta, work, QUEUED | HANDLE | KEPT);
    (
        ItemRunnable { header },
        ItemHandle {
            header,
            taken: false,
            _output: PhantomData,
        },
        ItemKept { header },
    )
}

/// The bytes of the cell of a closure `F` returning `R`: what the free
/// ring holds on to for each item it keeps.
pub(crate) const fn cell_bytes<F, R>() -> usize {
    std::mem::size_of::<Cell<F, R>>()
}

/// Makes a cell for `work` with `meta` that no handle will ever look at
/// (`Pool::execute`): born as a cell whose handle was dropped at once,
/// without the handle's making and its locked release. Its owners are the
/// queued runnable and the free ring.
pub(crate) fn spawn_detached<F>(meta: TaskMeta, work: F) -> (ItemRunnable, ItemKept)
where
    F: FnOnce() + Send + 'static,
{
    let header = make_cell::<F, ()>(meta, work, QUEUED | KEPT);
    (ItemRunnable { header }, ItemKept { header })
}

/// Allocates a cell for `work` with `meta`, whose state starts at
/// `references` (reference bits only).
fn make_cell<F, R>(meta: TaskMeta, work: F, references: usize) -> NonNull<Header>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    debug_assert_eq!(references & !REFERENCES, 0, "reference bits only");
    let cell = Box::new(Cell::<F, R> {
        header: Header {
            state: AtomicUsize::new(references),
            vtable: &Cell::<F, R>::VTABLE,
            meta,
            queued_at: start_sampler::stamp(),
            awaiter: AtomicPtr::new(std::ptr::null_mut()),
            #[cfg(tidepool_loom)]
            _tracked: loom::alloc::Track::new(()),
        },
        slot: UnsafeCell::new(Slot {
            closure: ManuallyDrop::new(work),
        }),
    });
    debug_assert_eq!(
        std::ptr::addr_of!(cell.slot) as usize - std::ptr::addr_of!(cell.header) as usize,
        Cell::<F, R>::SLOT_OFFSET,
        "the vtable's slot offset is the slot's"
    );
    NonNull::from(Box::leak(cell)).cast::<Header>()
}

/// The queued side of a work item: run it once, or drop it (unrun: its
/// handle resolves to `Cancelled`).
pub(crate) struct ItemRunnable {
    header: NonNull<Header>,
}

// SAFETY: an `ItemRunnable` gives its owner the closure (`Send`, required
// by `spawn`) and the metadata (`Sync`), on whatever thread runs it.
unsafe impl Send for ItemRunnable {}
// SAFETY: `&ItemRunnable` reaches only the metadata, which is `Sync`.
unsafe impl Sync for ItemRunnable {}

impl ItemRunnable {
    fn header(&self) -> &Header {
        // SAFETY: `self` owns the `QUEUED` reference, which keeps the cell
        // alive.
        unsafe { self.header.as_ref() }
    }

    /// The item's metadata.
    #[inline]
    pub(crate) fn metadata(&self) -> &TaskMeta {
        &self.header().meta
    }

    /// Runs the closure (see `Cell::run`): the caller claimed it
    /// (`Claim::start`).
    pub(crate) fn run(self) {
        let header = self.header;
        let run = self.header().vtable.run;
        std::mem::forget(self);
        // SAFETY: `self` owned the `QUEUED` reference of a live cell of
        // the type `run` was made for; forgotten, it is given up here.
        unsafe { run(header) }
    }

    /// The cell's address, for a queue (`runtime::work::Queued`); back
    /// with [`ItemRunnable::from_raw`].
    pub(crate) fn into_raw(self) -> NonNull<()> {
        let header = self.header;
        std::mem::forget(self);
        header.cast()
    }

    /// The runnable [`ItemRunnable::into_raw`] gave `raw` for.
    ///
    /// # Safety
    ///
    /// `raw` came from `into_raw`, and this is its one way back.
    pub(crate) unsafe fn from_raw(raw: NonNull<()>) -> ItemRunnable {
        ItemRunnable { header: raw.cast() }
    }
}

impl Drop for ItemRunnable {
    fn drop(&mut self) {
        let drop_unrun = self.header().vtable.drop_unrun;
        // SAFETY: `self` owns the `QUEUED` reference of a live cell of the
        // type `drop_unrun` was made for, and gives it up here.
        unsafe { drop_unrun(self.header) }
    }
}

impl std::fmt::Debug for ItemRunnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemRunnable")
            .field("meta", self.metadata())
            .finish()
    }
}

/// The join side of a work item: its output once it finished.
pub(crate) struct ItemHandle<R> {
    header: NonNull<Header>,
    /// The handle took the output out of the slot.
    taken: bool,
    _output: PhantomData<R>,
}

// SAFETY: the handle takes the output (`R: Send`) on its own thread and
// otherwise reads only atomics and the metadata (`Sync`).
unsafe impl<R: Send> Send for ItemHandle<R> {}
// SAFETY: through `&ItemHandle` only atomics and the metadata are read.
unsafe impl<R> Sync for ItemHandle<R> {}

// A pointer to the cell: nothing in the handle itself is pinned.
impl<R> Unpin for ItemHandle<R> {}

impl<R> ItemHandle<R> {
    fn header(&self) -> &Header {
        // SAFETY: `self` owns the `HANDLE` reference, which keeps the cell
        // alive.
        unsafe { self.header.as_ref() }
    }

    /// The item's metadata (for its claim).
    pub(crate) fn metadata(&self) -> &TaskMeta {
        &self.header().meta
    }

    /// Whether the item finished (ran, or was dropped unrun).
    pub(crate) fn is_finished(&self) -> bool {
        self.header().state.load(Ordering::Acquire) & DONE != 0
    }

    /// The output once the item finished: `Some` with the closure's
    /// result or its panic, `None` if it was dropped unrun (or the output
    /// was taken already).
    pub(crate) fn poll_output(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<R, PanicPayload>>> {
        let header = self.header();
        let mut state = header.state.load(Ordering::Acquire);
        if state & DONE == 0 {
            let mut awaiter = header.awaiter.load(Ordering::Acquire);
            if awaiter.is_null() {
                // Only the handle writes the pointer, once; published by
                // the `AWAITING` read-modify-write below (and released
                // here too).
                awaiter = Box::into_raw(Box::new(Mutex::new(None)));
                header.awaiter.store(awaiter, Ordering::Release);
            }
            {
                // SAFETY: made above or by an earlier wait of this handle;
                // it lives as long as the cell.
                let mut awaiter = lock(unsafe { &*awaiter });
                match &mut *awaiter {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
            }
            // Invariant 4: the lock's release orders the store before this.
            state = header.state.fetch_or(AWAITING, Ordering::AcqRel);
            if state & DONE == 0 {
                return Poll::Pending;
            }
        }
        Poll::Ready(self.take_output(state))
    }

    /// The output, once: `state` is a reading of the cell's state that
    /// showed `DONE` (acquire), and with it whether an output was stored.
    fn take_output(&mut self, state: usize) -> Option<Result<R, PanicPayload>> {
        if self.taken || state & STORED == 0 {
            return None;
        }
        self.taken = true;
        // SAFETY: invariant 3: the caller saw `DONE`, so the output slot is
        // the handle's, and `STORED` (set with `DONE`) says it holds an
        // output of this `R`, not taken yet (`taken`); `&mut self` makes
        // this the one access.
        Some(unsafe { output_slot::<R>(self.header).read() })
    }
}

impl<R> Drop for ItemHandle<R> {
    fn drop(&mut self) {
        // A finished item's output is dropped now, not when the cell is
        // freed (the free ring may keep the cell a while).
        let state = self.header().state.load(Ordering::Acquire);
        let mut letting_go = HANDLE;
        if state & DONE != 0 {
            let output = self.take_output(state);
            drop_caught(move || drop(output));
            // Set with `DONE`, so seen with it: the slot is empty now.
            letting_go |= state & STORED;
        }
        // SAFETY: `self` owns the `HANDLE` reference and gives it up (and
        // `STORED`, set, if it emptied the slot).
        unsafe { release(self.header, letting_go) };
    }
}

/// The free ring's reference to a work item it spawned.
pub(crate) struct ItemKept {
    header: NonNull<Header>,
}

// SAFETY: reads atomics and the metadata (`Sync`) only; its drop may free
// the cell, which drops the closure or output (`Send`) on that thread.
unsafe impl Send for ItemKept {}

impl ItemKept {
    fn header(&self) -> &Header {
        // SAFETY: `self` owns the `KEPT` reference, which keeps the cell
        // alive.
        unsafe { self.header.as_ref() }
    }

    /// Whether the item's runnable is gone (run or dropped): letting this
    /// go then frees the cell here, unless its handle still holds it.
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.header().state.load(Ordering::Acquire) & QUEUED == 0
    }

    /// The item's metadata (for its claim).
    #[inline]
    pub(crate) fn metadata(&self) -> &TaskMeta {
        &self.header().meta
    }

    /// The cell's address, for a prefetch.
    pub(crate) fn address(&self) -> *const u8 {
        self.header.as_ptr().cast()
    }
}

impl Drop for ItemKept {
    fn drop(&mut self) {
        let head = self.header();
        // The ring usually outlives the item's runnable and handle: then
        // it frees without a locked instruction on the cold cell
        // (invariant 6).
        if head.state.load(Ordering::Acquire) & REFERENCES == KEPT {
            let free = head.vtable.free;
            // SAFETY: invariant 6: `KEPT` is the last reference.
            unsafe { free(self.header) };
            return;
        }
        // SAFETY: `self` owns the `KEPT` reference and gives it up.
        unsafe { release(self.header, KEPT) };
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::spawn;
    use crate::runtime::task::TaskMeta;
    use crate::sync::counting;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    /// Counts its drops.
    struct Tracked(Arc<AtomicUsize>);
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_detached_item_drops_its_closure_once_whether_it_runs_or_not() {
        for run in [true, false] {
            let drops = Arc::new(AtomicUsize::new(0));
            let ran = Arc::new(AtomicUsize::new(0));
            let captured = Tracked(Arc::clone(&drops));
            let counted = Arc::clone(&ran);
            let (runnable, kept) = super::spawn_detached(TaskMeta::for_tests(true), move || {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(captured);
            });
            assert!(!kept.is_done());
            if run {
                runnable.run();
            } else {
                drop(runnable);
            }
            assert!(kept.is_done(), "the runnable let go");
            assert_eq!(ran.load(Ordering::SeqCst), usize::from(run));
            assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure dropped once");
            // The ring's reference is the last: this frees the cell (Miri
            // checks the free, and that nothing else is left to drop).
            drop(kept);
        }
    }

    #[test]
    fn the_handle_takes_the_output_once_the_item_ran() {
        let (runnable, mut handle, kept) = spawn(TaskMeta::for_tests(true), || 7);
        let (wakes, waker) = counting::waker();
        let mut cx = Context::from_waker(&waker);
        assert!(handle.poll_output(&mut cx).is_pending());
        assert!(!handle.is_finished());
        runnable.run();
        assert_eq!(wakes.get(), 1, "the waiting handle is woken");
        assert!(handle.is_finished());
        assert!(matches!(
            handle.poll_output(&mut cx),
            Poll::Ready(Some(Ok(7)))
        ));
        drop((handle, kept));
    }

    #[test]
    fn the_output_is_found_past_a_closure_more_aligned_than_the_header() {
        // The slot sits at 64, not 40: the handle, which knows only the
        // output's type, finds it through the vtable.
        #[repr(align(64))]
        struct Aligned(u8);
        let aligned = Aligned(5);
        let (runnable, mut handle, kept) = spawn(TaskMeta::for_tests(true), move || {
            u16::from(aligned.0) * 1000
        });
        runnable.run();
        let (_, waker) = counting::waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(
            handle.poll_output(&mut cx),
            Poll::Ready(Some(Ok(5000)))
        ));
        assert!(
            matches!(handle.poll_output(&mut cx), Poll::Ready(None)),
            "the output is taken once"
        );
        drop((handle, kept));
    }

    #[test]
    fn a_handle_that_waited_and_left_before_the_run_leaves_nothing_behind() {
        let drops = Arc::new(AtomicUsize::new(0));
        let (runnable, mut handle, kept) = {
            let drops = Arc::clone(&drops);
            spawn(TaskMeta::for_tests(true), move || Tracked(drops))
        };
        let (wakes, waker) = counting::waker();
        let mut cx = Context::from_waker(&waker);
        assert!(handle.poll_output(&mut cx).is_pending());
        drop(handle);
        runnable.run();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped by the runner");
        assert_eq!(wakes.get(), 0, "nobody waits any more");
        // `wakes`, `waker`, and the clone in the cell's awaiter.
        assert_eq!(Arc::strong_count(&wakes), 3, "the awaiter keeps the waker");
        drop(kept);
        assert_eq!(
            Arc::strong_count(&wakes),
            2,
            "the free drops the awaiter and its waker"
        );
    }

    #[test]
    fn a_panic_reaches_the_handle() {
        let (runnable, mut handle, kept) =
            spawn(TaskMeta::for_tests(true), || -> u8 { panic!("boom") });
        runnable.run();
        let (_, waker) = counting::waker();
        let mut cx = Context::from_waker(&waker);
        match handle.poll_output(&mut cx) {
            Poll::Ready(Some(Err(payload))) => {
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
            }
            _ => panic!("the panic is the output"),
        }
        drop((handle, kept));
    }

    #[test]
    fn an_item_dropped_unrun_drops_its_closure_and_resolves_to_none() {
        let drops = Arc::new(AtomicUsize::new(0));
        let tracked = Tracked(Arc::clone(&drops));
        let (runnable, mut handle, kept) = spawn(TaskMeta::for_tests(true), move || {
            drop(tracked);
            1
        });
        drop(runnable);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure is dropped");
        let (_, waker) = counting::waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(handle.poll_output(&mut cx), Poll::Ready(None)));
        drop((handle, kept));
    }

    #[test]
    fn an_output_nobody_takes_is_dropped_when_the_handle_goes() {
        // Detached before the run: dropped by the runner at once.
        let drops = Arc::new(AtomicUsize::new(0));
        let (runnable, handle, kept) = {
            let drops = Arc::clone(&drops);
            spawn(TaskMeta::for_tests(true), move || Tracked(drops))
        };
        drop(handle);
        runnable.run();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped by the runner");
        drop(kept);
        // Detached after the run: dropped by the handle, though the ring
        // still keeps the cell.
        let (runnable, handle, kept) = {
            let drops = Arc::clone(&drops);
            spawn(TaskMeta::for_tests(true), move || Tracked(drops))
        };
        runnable.run();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "stored for the handle");
        drop(handle);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "dropped with the handle");
        drop(kept);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "once");
    }

    #[test]
    // `drop_caught` leaks a caught panic's payload on purpose (its own
    // destructor might panic), which Miri reports as a leak.
    #[cfg_attr(miri, ignore)]
    fn a_panicking_destructor_is_caught() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("a destructor panics");
            }
        }
        let bomb = Bomb;
        let (runnable, handle, kept) = spawn(TaskMeta::for_tests(true), move || {
            let _captured = &bomb;
        });
        drop(runnable);
        let (runnable, handle2, kept2) = spawn(TaskMeta::for_tests(true), || Bomb);
        runnable.run();
        // Neither the unrun closure nor the output's drop unwinds here.
        drop((handle, kept, handle2, kept2));
    }

    #[test]
    fn the_last_reference_frees_the_cell_in_any_order() {
        let drops = Arc::new(AtomicUsize::new(0));
        for order in 0..6 {
            let tracked = Tracked(Arc::clone(&drops));
            let (runnable, handle, kept) = spawn(TaskMeta::for_tests(true), move || drop(tracked));
            let runnable = Some(runnable);
            let (mut runnable, mut handle, mut kept) = (runnable, Some(handle), Some(kept));
            let mut steps: Vec<Box<dyn FnMut()>> = vec![
                Box::new(|| runnable.take().unwrap().run()),
                Box::new(|| drop(handle.take())),
                Box::new(|| drop(kept.take())),
            ];
            steps.rotate_left(order % 3);
            if order >= 3 {
                steps.swap(1, 2);
            }
            for step in &mut steps {
                step();
            }
        }
        assert_eq!(drops.load(Ordering::SeqCst), 6, "every closure ran once");
    }
}
