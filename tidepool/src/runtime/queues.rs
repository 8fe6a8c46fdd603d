//! The pool's global queues: per [`Priority`], a lane of plain tasks and a
//! FIFO of tasks a gate admitted.
//!
//! Workers' own deques live in their entries (`threads::Entry`); these
//! queues take what arrives from outside a worker: every high- and
//! low-priority task, fork-join jobs queued from outside the pool, and
//! every task of a group or pair once its gate admits it.
//!
//! Admitted tasks have FIFOs of their own so that a plain task is never
//! queued behind them: a throttled flood keeps up to its lane's budget of
//! items admitted and queued at all times, and in a shared lane an urgent
//! plain task queued after them (and, through the normal lane's batch
//! steal, after those moved into a worker's deque) waited for all of them.
//! Workers serve a lane's plain tasks first and its admitted tasks one at a
//! time, never batched into a deque; a bounded turn keeps admitted tasks
//! from starving (see `worker`'s lookup order).

use super::task::Runnable;
use super::work::{Queued, Work};
use crossbeam_deque::{Injector, Steal, Worker};

/// The scheduling lane of a task: higher lanes are served first.
///
/// The default is [`Priority::Normal`]. Lower lanes never starve: see
/// [`TaskBuilder::priority`](crate::TaskBuilder::priority) for the bound.
///
/// Within a lane, tasks start in about the order they arrive: a task
/// queued behind N others starts after about N tasks' worth of work,
/// whatever arrives after it. Two exceptions, both for locality: a future
/// spawned or woken on a worker whose own queue is empty runs next there,
/// and closures spawned by a task running on a worker (`spawn_fn`,
/// `scope`) go on that worker's own queue, newest first, as fork-join
/// wants (other workers take the oldest). A worker serves the shared
/// lanes at least once every 61 picks however busy its own queue is.
///
/// ```
/// use tidepool::{Pool, Priority};
/// let pool = Pool::builder().concurrency(1).build().unwrap();
/// let urgent = pool.task().priority(Priority::High).spawn_fn(|| "now");
/// assert_eq!(urgent.join().unwrap(), "now");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Served before everything else. While every slot is busy, a high
    /// task borrows a reserve slot and wakes a parked worker for itself,
    /// asking the kernel (Linux 6.12+) to run that worker at once rather
    /// than after a busy worker's scheduler slice.
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

/// The global queues of one pool.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    /// Plain tasks and jobs, indexed by [`Priority::index`].
    lanes: [Injector<Queued>; 3],
    /// Tasks a gate (group or pair) admitted, indexed by [`Priority::index`]:
    /// kept apart so plain tasks of a lane can be served before them.
    admitted: [Injector<Runnable>; 3],
    /// Normal-lane work a worker that lost its slot handed on from its
    /// deque ([`Lanes::hand_off`]): continuations of work already under
    /// way, served before the normal lane's new arrivals. At the back of
    /// the lane, a service's request that a blocked worker had queued (the
    /// outbound call it had just made) waited behind every request that
    /// arrived meanwhile, once per block: under overload its p99 was twice
    /// tokio's.
    handed_off: Injector<Queued>,
    /// Handed-off work goes to the back of the normal lane instead: the
    /// handed-off FIFO switched off (`control::ablation`, for the lab).
    hand_off_to_back: bool,
}

impl Lanes {
    /// Empty lanes; with `handed_off_fifo` false, handed-off work goes to
    /// the back of the normal lane (`control::ablation`).
    pub(crate) fn new(handed_off_fifo: bool) -> Self {
        Lanes {
            hand_off_to_back: !handed_off_fifo,
            ..Lanes::default()
        }
    }

    /// Queues a plain `runnable` at the back of `lane`.
    pub(crate) fn push(&self, lane: Priority, runnable: Runnable) {
        self.lanes[lane.index()].push(Queued::from(runnable));
    }

    /// Queues any work at the back of `lane`.
    pub(crate) fn push_work(&self, lane: Priority, work: Work) {
        self.lanes[lane.index()].push(Queued::from(work));
    }

    /// Queues a task its gate admitted at the back of its lane's admitted
    /// FIFO.
    pub(crate) fn push_admitted(&self, runnable: Runnable) {
        self.admitted[runnable.metadata().priority.index()].push(runnable);
    }

    /// Puts a task taken from these queues or a deque back at the back of
    /// its lane: in the admitted FIFO if it has a gate (a gated task in the
    /// pool's queues was admitted), else with the plain tasks.
    pub(crate) fn requeue(&self, runnable: Runnable) {
        if runnable.gate().is_some() {
            self.push_admitted(runnable);
        } else {
            self.push(runnable.metadata().priority, runnable);
        }
    }

    /// Queues work taken from the deque of a worker that lost its slot:
    /// a normal task or a job before the normal lane's new arrivals (see
    /// `handed_off`), anything else at the back of its own FIFO.
    pub(crate) fn hand_off(&self, work: Work) {
        match work {
            Work::Task(task)
                if task.gate().is_some() || task.metadata().priority != Priority::Normal =>
            {
                self.requeue(task)
            }
            work if self.hand_off_to_back => self.push_work(Priority::Normal, work),
            work => self.handed_off.push(Queued::from(work)),
        }
    }

    /// Takes one plain task from `lane`; for the normal lane, the oldest
    /// handed-off work first (one at a time), else a batch moved into
    /// `local` too (the high lane is never batched, so an urgent task is
    /// never stuck behind a worker's local work; the low lane is served at a
    /// bounded rate, one at a time).
    pub(crate) fn pop(&self, lane: Priority, local: &Worker<Queued>) -> Option<Work> {
        if lane == Priority::Normal && !self.handed_off.is_empty() {
            if let Some(work) = retry_until_settled(|| self.handed_off.steal()) {
                return Some(work.into_work());
            }
        }
        let injector = &self.lanes[lane.index()];
        retry_until_settled(|| {
            if lane == Priority::Normal {
                injector.steal_batch_and_pop(local)
            } else {
                injector.steal()
            }
        })
        .map(Queued::into_work)
    }

    /// Takes one plain task from `lane`, never a batch: for a worker that
    /// is about to block and hands what it takes on (`worker::presumed::fan_out`);
    /// a batch would sit in its deque while it blocks.
    pub(crate) fn pop_one(&self, lane: Priority) -> Option<Work> {
        if lane == Priority::Normal && !self.handed_off.is_empty() {
            if let Some(work) = retry_until_settled(|| self.handed_off.steal()) {
                return Some(work.into_work());
            }
        }
        retry_until_settled(|| self.lanes[lane.index()].steal()).map(Queued::into_work)
    }

    /// Takes one admitted task from `lane`. Never a batch: in a worker's
    /// deque it would be served before the plain tasks queued here later.
    pub(crate) fn pop_admitted(&self, lane: Priority) -> Option<Work> {
        retry_until_settled(|| self.admitted[lane.index()].steal()).map(Work::Task)
    }

    /// Takes one admitted task from the first lane that has one, looking at
    /// `first` and then at the lanes after it, wrapping around (the
    /// fairness turn of admitted tasks: see `worker`).
    pub(crate) fn pop_any_admitted(&self, first: Priority) -> Option<Work> {
        (0..3).find_map(|offset| {
            let lane = PRIORITIES[(first.index() + offset) % 3];
            self.pop_admitted(lane)
        })
    }

    /// True if `lane` holds tasks, plain or admitted.
    pub(crate) fn has_work(&self, lane: Priority) -> bool {
        !self.lanes[lane.index()].is_empty()
            || !self.admitted[lane.index()].is_empty()
            || (lane == Priority::Normal && !self.handed_off.is_empty())
    }

    /// True if any lane holds tasks, plain or admitted.
    pub(crate) fn any_work(&self) -> bool {
        self.lanes.iter().any(|lane| !lane.is_empty())
            || self.admitted.iter().any(|fifo| !fifo.is_empty())
            || !self.handed_off.is_empty()
    }

    /// Items in `lane`'s admitted FIFO if `admitted`, else its plain tasks
    /// and jobs.
    pub(crate) fn fifo_len(&self, lane: Priority, admitted: bool) -> usize {
        if admitted {
            self.admitted[lane.index()].len()
        } else if lane == Priority::Normal {
            self.lanes[lane.index()].len() + self.handed_off.len()
        } else {
            self.lanes[lane.index()].len()
        }
    }

    /// Tasks in all lanes, plain and admitted.
    pub(crate) fn len(&self) -> usize {
        self.lanes.iter().map(Injector::len).sum::<usize>()
            + self.admitted.iter().map(Injector::len).sum::<usize>()
            + self.handed_off.len()
    }

    /// Takes every queued item out of every lane, plain and admitted, for
    /// the caller to drop.
    pub(crate) fn drain(&self, mut each: impl FnMut(Work)) {
        for lane in &self.lanes {
            drain_one(lane, &mut |item: Queued| each(item.into_work()));
        }
        for fifo in &self.admitted {
            drain_one(fifo, &mut |task| each(Work::Task(task)));
        }
        drain_one(&self.handed_off, &mut |item: Queued| each(item.into_work()));
    }
}

/// The lanes in [`Priority::index`] order.
const PRIORITIES: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

/// Takes every item out of `injector`, for `each`.
fn drain_one<T>(injector: &Injector<T>, each: &mut impl FnMut(T)) {
    while let Some(item) = retry_until_settled(|| injector.steal()) {
        each(item);
    }
}

/// Repeats `steal` while it says to retry (it lost a race with another
/// thief); the item, or `None` once the queue is empty.
pub(crate) fn retry_until_settled<T>(mut steal: impl FnMut() -> Steal<T>) -> Option<T> {
    loop {
        match steal() {
            Steal::Success(item) => return Some(item),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Outcome;
    use crate::runtime::task::{FutureMeta, Gate, TaskMeta};
    use std::sync::{Arc, Mutex};

    /// A gate that admits everything: marks a task as a gated one.
    #[derive(Debug)]
    struct Open;

    impl Gate for Open {
        fn admit(self: Arc<Self>, runnable: Runnable) -> Option<Runnable> {
            Some(runnable)
        }
        fn poll_started(&self) {}
        fn poll_ended(&self) {}
        fn after_run(&self) {}
        fn ended(&self, _: Outcome) {}
    }

    /// A runnable of `lane`, gated or not, that records `id` when run.
    fn task(lane: Priority, gated: bool, id: usize, ran: &Arc<Mutex<Vec<usize>>>) -> Runnable {
        let ran = Arc::clone(ran);
        let meta = FutureMeta {
            gate: gated.then(|| Arc::new(Open) as Arc<dyn Gate>),
            task: TaskMeta {
                priority: lane,
                ..TaskMeta::for_tests(false)
            },
        };
        let (runnable, cell) = async_task::Builder::new()
            .metadata(meta)
            .spawn(move |_| async move { ran.lock().unwrap().push(id) }, |_| {});
        cell.detach();
        Runnable::Future(runnable)
    }

    fn run(work: Option<Work>) {
        match work {
            Some(Work::Task(task)) => {
                task.run();
            }
            other => panic!("expected a task, got {other:?}"),
        }
    }

    #[test]
    fn handed_off_work_goes_before_new_arrivals_one_at_a_time() {
        let lanes = Lanes::default();
        let ran = Arc::new(Mutex::new(Vec::new()));
        for id in 10..13 {
            lanes.push(Priority::Normal, task(Priority::Normal, false, id, &ran));
        }
        // A worker that lost its slot hands on what its deque held.
        for id in 0..2 {
            lanes.hand_off(Work::Task(task(Priority::Normal, false, id, &ran)));
        }
        // Gated and other lanes' tasks go back to their own FIFOs.
        lanes.hand_off(Work::Task(task(Priority::Normal, true, 20, &ran)));
        lanes.hand_off(Work::Task(task(Priority::Low, false, 30, &ran)));
        assert_eq!(lanes.len(), 7);
        assert_eq!(lanes.fifo_len(Priority::Normal, false), 5);
        let local = Worker::new_lifo();
        // The handed-off work first, oldest first, and never as a batch.
        run(lanes.pop(Priority::Normal, &local));
        assert!(local.is_empty());
        run(lanes.pop_one(Priority::Normal));
        assert!(local.is_empty());
        assert_eq!(ran.lock().unwrap()[..], [0, 1]);
        // Then the lane's own arrivals.
        while let Some(work) = lanes.pop(Priority::Normal, &local) {
            run(Some(work));
            while let Some(work) = local.pop() {
                run(Some(work.into_work()));
            }
        }
        run(lanes.pop_admitted(Priority::Normal));
        run(lanes.pop(Priority::Low, &local));
        assert!(!lanes.any_work());
        let ran = ran.lock().unwrap();
        let mut arrivals = ran[2..5].to_vec();
        arrivals.sort_unstable();
        assert_eq!(arrivals, [10, 11, 12]);
        assert_eq!(ran[5..], [20, 30]);
    }

    #[test]
    fn plain_tasks_go_first_and_admitted_ones_are_never_batched() {
        let lanes = Lanes::default();
        let ran = Arc::new(Mutex::new(Vec::new()));
        for id in 0..3 {
            lanes.push_admitted(task(Priority::Normal, true, id, &ran));
        }
        for id in 10..13 {
            lanes.push(Priority::Normal, task(Priority::Normal, false, id, &ran));
        }
        assert_eq!(lanes.len(), 6);
        let local = Worker::new_lifo();
        // Batches take plain tasks only.
        while let Some(work) = lanes.pop(Priority::Normal, &local) {
            run(Some(work));
            while let Some(work) = local.pop() {
                run(Some(work.into_work()));
            }
        }
        assert_eq!(lanes.len(), 3);
        assert!(lanes.has_work(Priority::Normal) && lanes.any_work());
        // Admitted tasks one at a time, in order.
        run(lanes.pop_admitted(Priority::Normal));
        assert_eq!(lanes.len(), 2);
        run(lanes.pop_any_admitted(Priority::Low));
        run(lanes.pop_admitted(Priority::Normal));
        assert!(lanes.pop_admitted(Priority::Normal).is_none());
        assert!(!lanes.any_work() && !lanes.has_work(Priority::Normal));
        let ran = ran.lock().unwrap();
        assert_eq!(ran[3..], [0, 1, 2]);
        let mut plain = ran[..3].to_vec();
        plain.sort_unstable();
        assert_eq!(plain, [10, 11, 12]);
    }

    #[test]
    fn requeue_and_drain_see_both_kinds() {
        let lanes = Lanes::default();
        let ran = Arc::new(Mutex::new(Vec::new()));
        lanes.requeue(task(Priority::High, true, 1, &ran));
        lanes.requeue(task(Priority::Low, false, 2, &ran));
        assert!(lanes.has_work(Priority::High) && lanes.has_work(Priority::Low));
        assert!(lanes.pop(Priority::High, &Worker::new_lifo()).is_none());
        assert!(lanes.pop_admitted(Priority::Low).is_none());
        lanes.requeue(task(Priority::Normal, true, 3, &ran));
        let mut drained = 0;
        lanes.drain(|_| drained += 1);
        assert_eq!(drained, 3);
        assert!(!lanes.any_work());
        assert_eq!(lanes.len(), 0);
    }
}
