//! The pool's global queues: one FIFO lane per [`Priority`].
//!
//! Workers' own deques live in their entries (`threads::Entry`); these lanes
//! take what arrives from outside a worker, every high- and low-priority
//! task, the admitted tasks of groups and pairs, and fork-join jobs queued
//! from outside the pool.

use super::task::Runnable;
use super::work::Work;
use crossbeam_deque::{Injector, Steal, Worker};

/// The scheduling lane of a task: higher lanes are served first.
///
/// The default is [`Priority::Normal`]. Lower lanes never starve: see
/// [`TaskBuilder::priority`](crate::TaskBuilder::priority) for the bound.
///
/// ```
/// use tidepool::{Pool, Priority};
/// let pool = Pool::builder().concurrency(1).build().unwrap();
/// let urgent = pool.task().priority(Priority::High).spawn_fn(|| "now");
/// assert_eq!(urgent.join().unwrap(), "now");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Served before everything else.
    High,
    /// The default lane.
    #[default]
    Normal,
    /// Served when nothing else waits, and at a bounded rate when it does.
    Low,
}

impl Priority {
    /// The lane's position in per-lane arrays: 0 is served first.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The global lanes of one pool.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    /// Indexed by [`Priority::index`].
    lanes: [Injector<Work>; 3],
}

impl Lanes {
    /// Queues `runnable` at the back of `lane`.
    pub(crate) fn push(&self, lane: Priority, runnable: Runnable) {
        self.lanes[lane.index()].push(Work::Task(runnable));
    }

    /// Queues any work at the back of `lane`.
    pub(crate) fn push_work(&self, lane: Priority, work: Work) {
        self.lanes[lane.index()].push(work);
    }

    /// Takes one task from `lane`; for the normal lane, moves a batch into
    /// `local` too (the high lane is never batched, so an urgent task is
    /// never stuck behind a worker's local work; the low lane is served at a
    /// bounded rate, one at a time).
    pub(crate) fn pop(&self, lane: Priority, local: &Worker<Work>) -> Option<Work> {
        let injector = &self.lanes[lane.index()];
        loop {
            let steal = if lane == Priority::Normal {
                injector.steal_batch_and_pop(local)
            } else {
                injector.steal()
            };
            match steal {
                Steal::Success(task) => return Some(task),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// True if `lane` holds tasks.
    pub(crate) fn has_work(&self, lane: Priority) -> bool {
        !self.lanes[lane.index()].is_empty()
    }

    /// True if any lane holds tasks.
    pub(crate) fn any_work(&self) -> bool {
        self.lanes.iter().any(|lane| !lane.is_empty())
    }

    /// Tasks in all lanes.
    pub(crate) fn len(&self) -> usize {
        self.lanes.iter().map(Injector::len).sum()
    }

    /// Takes every queued item out of every lane, for the caller to drop.
    pub(crate) fn drain(&self, mut each: impl FnMut(Work)) {
        for lane in &self.lanes {
            loop {
                match lane.steal() {
                    Steal::Success(task) => each(task),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
    }
}
