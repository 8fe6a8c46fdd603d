//! What the pool's queues hold: [`Work`], a task (an `async-task` runnable)
//! or a job (a fork-join closure, usually living on a waiting thread's
//! stack, reached through a [`JobRef`]), packed into one word ([`Queued`])
//! while it sits in a deque or lane.
//!
//! Jobs exist so that `join` allocates nothing: the half it offers to other
//! workers stays in the joiner's frame, and only a pointer to it is queued.
//! This module has the one `unsafe` dereference of such a pointer; the
//! contract that makes it sound is on [`JobRef::new`], and the jobs that
//! meet it are in `fork::job`.
//!
//! # Why one word
//!
//! A queue slot of two words (a task, or a job's fat pointer) was written
//! as two 8-byte stores into a temporary and then copied into the deque's
//! buffer with one 16-byte load: a load the CPU cannot forward from the two
//! pending stores, so every push waited for them to reach the cache. `perf`
//! put half of a join's time on that copy (fib(30) with a join per call).
//! A [`Queued`] is one pointer, tagged in its two lowest bits.

use super::item::ItemRunnable;
use super::kinds::Kind;
use super::task::{FutureRunnable, Runnable};
use std::cell::UnsafeCell;
use std::ptr::NonNull;

/// One item of a deque or lane, unpacked: what the scheduler works with.
#[derive(Debug)]
pub(crate) enum Work {
    /// A spawned task.
    Task(Runnable),
    /// A fork-join job.
    Job(JobRef),
}

/// A [`Work`] as the queues store it: one pointer, tagged in its two
/// lowest bits with what it points to: a future's task cell
/// (`async_task::Runnable::into_raw`, [`FUTURE_TAG`]), a job's
/// [`JobSlot`] ([`JOB_TAG`]) or a work item's cell
/// (`ItemRunnable::into_raw`, [`ITEM_TAG`]). Dropping it drops the work (a
/// task is cancelled, a job abandoned).
pub(crate) struct Queued(NonNull<u8>);

/// A future's task cell: the pointer as it is.
const FUTURE_TAG: usize = 0;
/// A job's slot.
const JOB_TAG: usize = 1;
/// A work item's cell.
const ITEM_TAG: usize = 2;
/// The bits a tag takes: every pointee is aligned to 8 or more (a cell's
/// header and a job slot start with a pointer-sized field; `tagged`
/// checks it in debug builds).
const TAG_BITS: usize = 3;

/// `pointer` with `tag` in its low bits.
#[inline]
fn tagged(pointer: NonNull<u8>, tag: usize) -> Queued {
    debug_assert_eq!(
        pointer.as_ptr() as usize & TAG_BITS,
        0,
        "a queued pointee is aligned"
    );
    // `wrapping_add` keeps the pointer's provenance (the tag is taken off
    // the same way in `into_work`).
    let tagged = pointer.as_ptr().wrapping_add(tag);
    // SAFETY: a non-null pointer with zero low bits, plus a tag below the
    // alignment, is not null.
    Queued(unsafe { NonNull::new_unchecked(tagged) })
}

// SAFETY: a `Queued` owns what it points to exactly as the `Work` it was
// made from did (a `Runnable` or a `JobRef`, both `Send`), and gives it
// back only by value (`into_work`, or its drop).
unsafe impl Send for Queued {}

impl From<Work> for Queued {
    #[inline]
    fn from(work: Work) -> Queued {
        match work {
            Work::Task(Runnable::Future(runnable)) => {
                tagged(runnable.into_raw().cast(), FUTURE_TAG)
            }
            Work::Task(Runnable::Item(item)) => tagged(item.into_raw().cast(), ITEM_TAG),
            Work::Job(job) => {
                let slot = job.slot.cast::<u8>();
                std::mem::forget(job);
                tagged(slot, JOB_TAG)
            }
        }
    }
}

impl From<Runnable> for Queued {
    #[inline]
    fn from(task: Runnable) -> Queued {
        Queued::from(Work::Task(task))
    }
}

impl Queued {
    /// The work this was made from.
    #[inline]
    pub(crate) fn into_work(self) -> Work {
        let raw = self.0;
        std::mem::forget(self);
        let tag = raw.as_ptr() as usize & TAG_BITS;
        // SAFETY: untagged, this is the non-null pointer `from` was given.
        let pointer = unsafe { NonNull::new_unchecked(raw.as_ptr().wrapping_sub(tag)) };
        match tag {
            // SAFETY: the pointer `into_raw` gave `from`, and this is its
            // one way back (`self` is forgotten).
            FUTURE_TAG => Work::Task(Runnable::Future(unsafe {
                FutureRunnable::from_raw(pointer.cast())
            })),
            // SAFETY: as above, for an item's `into_raw`.
            ITEM_TAG => Work::Task(Runnable::Item(unsafe {
                ItemRunnable::from_raw(pointer.cast())
            })),
            // The `JobRef` it came from was forgotten in `from`, so this
            // is the one entry for the job again.
            _ => Work::Job(JobRef {
                slot: pointer.cast::<JobSlot>(),
            }),
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        drop(Queued(self.0).into_work());
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.0.as_ptr() as usize & TAG_BITS {
            FUTURE_TAG => "future",
            ITEM_TAG => "item",
            _ => "job",
        };
        f.debug_tuple("Queued").field(&kind).field(&self.0).finish()
    }
}

/// What a queued job can do. Exactly one of the two is called, once, for
/// each [`JobRef`] made for it.
pub(crate) trait Job: Sync {
    /// Runs the job. It must not unwind: jobs catch their closures' panics.
    fn run(&self);
    /// The job's queue entry was dropped unrun (its pool stopped with it
    /// queued). The job must still end: it tells its waiter, or runs.
    fn abandon(&self);
    /// The job's kind (the type of its closure): what the monitor learns
    /// about while a worker runs it, and what the quantum rule asks before
    /// it lends a slot to it (`control::presumption`).
    fn kind(&self) -> Kind;
}

/// Where a job keeps the pointer to itself that its queue entry goes
/// through: a field of the job, so that the entry is one thin pointer (see
/// "Why one word"). Written when the entry is made ([`JobRef::new`]).
#[derive(Default)]
pub(crate) struct JobSlot(UnsafeCell<Option<NonNull<dyn Job>>>);

// SAFETY: the cell is written once, by the job's owner in `JobRef::new`,
// before the entry exists (so before any other thread can reach the slot),
// and only read through that entry afterwards, on the thread that took it
// out of a queue: the queue's push (Release) and take (Acquire) order the
// write before every read. The pointer read is to a `dyn Job`, which is
// `Sync`.
unsafe impl Sync for JobSlot {}

/// A queued job: a pointer to the [`JobSlot`] of a [`Job`] that someone
/// keeps alive until it has run or been abandoned. Dropping it abandons the
/// job.
pub(crate) struct JobRef {
    slot: NonNull<JobSlot>,
}

// SAFETY: a `JobRef` only ever gives access to `&dyn Job` (shared), and
// `Job: Sync`, so using it from another thread is sound; whoever made it
// keeps the job alive until `run` or `abandon` has returned (`JobRef::new`).
unsafe impl Send for JobRef {}

impl std::fmt::Debug for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JobRef").field(&self.slot).finish()
    }
}

impl JobRef {
    /// A queue entry for `job`, whose slot is `slot`.
    ///
    /// # Safety
    ///
    /// 1. `job` must stay valid, at the same address, until the returned
    ///    `JobRef` (or the one it is moved into, or the [`Queued`] made of
    ///    it) has been run, abandoned or forgotten with
    ///    [`JobRef::take_back`], and until that call has returned:
    ///    `Job::run` and `Job::abandon` must not let the job's owner free it
    ///    before their last access to it.
    /// 2. `slot` is a field of `job` (it lives as long), and no other
    ///    `JobRef` is made for the same job while this one lives.
    pub(crate) unsafe fn new<'a>(job: &'a (dyn Job + 'a), slot: &'a JobSlot) -> JobRef {
        let job: NonNull<dyn Job + 'a> = NonNull::from(job);
        // SAFETY: only the trait object's lifetime bound changes, not the
        // layout of the fat pointer. Extending it is what the caller's
        // contract (1) allows: the pointer is never dereferenced after the
        // job is gone.
        let job = unsafe { std::mem::transmute::<NonNull<dyn Job + 'a>, NonNull<dyn Job>>(job) };
        // SAFETY: contract (2): no entry for the job exists yet, so nobody
        // else reads or writes the slot (see `JobSlot`'s `Sync`).
        unsafe { *slot.0.get() = Some(job) };
        JobRef {
            slot: NonNull::from(slot),
        }
    }

    /// The pointer to the job in its slot.
    fn job_pointer(&self) -> NonNull<dyn Job> {
        // SAFETY: contract (2) of `new`: the slot is alive while this entry
        // is, and it was written before the entry existed (`JobSlot`'s
        // `Sync` says why that write is seen here).
        match unsafe { *self.slot.as_ref().0.get() } {
            Some(job) => job,
            None => unreachable!("a job's slot is written before its entry exists"),
        }
    }

    /// The job.
    fn job(&self) -> &dyn Job {
        // SAFETY: contract (1) of `new`: the job is alive while this entry
        // is; only a shared reference is made.
        unsafe { self.job_pointer().as_ref() }
    }

    /// True if this entry is for the job whose slot is `slot`.
    pub(crate) fn is(&self, slot: &JobSlot) -> bool {
        std::ptr::eq(self.slot.as_ptr(), slot)
    }

    /// Runs the job.
    pub(crate) fn run(self) {
        let job = self.job_pointer();
        std::mem::forget(self);
        // SAFETY: contract (1) of `new`: the job is alive until this call
        // returns; `forget` made sure it is not abandoned as well.
        unsafe { job.as_ref() }.run();
    }

    /// The job's kind ([`Job::kind`]).
    pub(crate) fn kind(&self) -> Kind {
        self.job().kind()
    }

    /// For the job's owner, which popped its own entry back: forgets the
    /// entry without running or abandoning the job (the owner runs it).
    pub(crate) fn take_back(self) {
        std::mem::forget(self);
    }
}

impl Drop for JobRef {
    fn drop(&mut self) {
        // Contract (1) of `new`: an entry dropped unrun still points to a
        // live job, which stays alive until `abandon` returns.
        self.job().abandon();
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::runtime::task::TaskMeta;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A job that counts its runs and abandons.
    #[derive(Default)]
    struct Counting {
        runs: AtomicUsize,
        abandons: AtomicUsize,
        slot: JobSlot,
    }

    impl Job for Counting {
        fn run(&self) {
            self.runs.fetch_add(1, Ordering::Relaxed);
        }
        fn abandon(&self) {
            self.abandons.fetch_add(1, Ordering::Relaxed);
        }
        fn kind(&self) -> Kind {
            Kind::of::<Counting>()
        }
    }

    fn entry(job: &Counting) -> JobRef {
        // SAFETY: `job` outlives every entry made in these tests, its slot
        // is its own field, and each test makes one entry at a time.
        unsafe { JobRef::new(job, &job.slot) }
    }

    /// A task whose future records that it ran, and its runnable.
    fn task(ran: &std::sync::Arc<AtomicUsize>) -> Runnable {
        let ran = std::sync::Arc::clone(ran);
        let meta = TaskMeta::future_for_tests();
        let (runnable, cell) = async_task::Builder::new().metadata(meta).spawn(
            move |_| async move {
                ran.fetch_add(1, Ordering::Relaxed);
            },
            |_| {},
        );
        cell.detach();
        Runnable::Future(runnable)
    }

    #[test]
    fn a_queued_job_is_one_word_and_comes_back_as_the_same_job() {
        assert_eq!(std::mem::size_of::<Queued>(), std::mem::size_of::<usize>());
        assert_eq!(
            std::mem::size_of::<Option<Queued>>(),
            std::mem::size_of::<usize>()
        );
        let job = Counting::default();
        let queued = Queued::from(Work::Job(entry(&job)));
        match queued.into_work() {
            Work::Job(back) => {
                assert!(back.is(&job.slot));
                assert_eq!(back.kind(), Kind::of::<Counting>());
                back.run();
            }
            Work::Task(_) => panic!("a job came back as a task"),
        }
        assert_eq!(job.runs.load(Ordering::Relaxed), 1);
        assert_eq!(job.abandons.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_queued_job_dropped_unrun_is_abandoned_once() {
        let job = Counting::default();
        drop(Queued::from(Work::Job(entry(&job))));
        assert_eq!(job.runs.load(Ordering::Relaxed), 0);
        assert_eq!(job.abandons.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_queued_task_comes_back_runnable_or_is_dropped_unrun() {
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        match Queued::from(Work::Task(task(&ran))).into_work() {
            Work::Task(runnable) => {
                runnable.run();
            }
            Work::Job(_) => panic!("a task came back as a job"),
        }
        assert_eq!(ran.load(Ordering::Relaxed), 1);
        drop(Queued::from(Work::Task(task(&ran))));
        assert_eq!(ran.load(Ordering::Relaxed), 1, "a dropped task never runs");
        assert_eq!(
            std::sync::Arc::strong_count(&ran),
            1,
            "and its future is freed"
        );
    }

    #[test]
    fn a_queued_item_comes_back_as_an_item_or_is_dropped_unrun() {
        use super::super::item;
        use super::super::task::TaskMeta;
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        let spawn = |ran: &std::sync::Arc<AtomicUsize>| {
            let ran = std::sync::Arc::clone(ran);
            item::spawn(TaskMeta::for_tests(true), move || {
                ran.fetch_add(1, Ordering::Relaxed);
            })
        };
        let (runnable, handle, kept) = spawn(&ran);
        match Queued::from(Runnable::Item(runnable)).into_work() {
            Work::Task(Runnable::Item(runnable)) => runnable.run(),
            other => panic!("an item came back as {other:?}"),
        }
        assert_eq!(ran.load(Ordering::Relaxed), 1);
        assert!(handle.is_finished());
        drop((handle, kept));
        let (runnable, handle, kept) = spawn(&ran);
        drop(Queued::from(Runnable::Item(runnable)));
        assert_eq!(ran.load(Ordering::Relaxed), 1, "a dropped item never runs");
        assert!(handle.is_finished(), "its handle sees it end");
        drop((handle, kept));
        assert_eq!(
            std::sync::Arc::strong_count(&ran),
            1,
            "and both closures are freed"
        );
    }
}
