//! The quantum rule's guard on a lent slot (see `Builder::quantum`): a
//! worker on a slot the monitor lent does not run work known to compute on
//! it, and looks past such work for work that does not.

use super::notify;
use super::RunLoop;
use crate::runtime::{Priority, Shared, Work};
use crate::sync::Arc;

impl RunLoop<'_> {
    /// The quantum rule's guard (see `Builder::quantum`): while a slot is
    /// lent, a task whose kind is known to compute is not run on it (the
    /// pool would only run more CPU-bound threads than cores). The lend
    /// exists for the work queued behind the computing tasks, so the worker
    /// that picks one looks past it ([`RunLoop::look_past_computing_work`]);
    /// finding only computing work, it ends the lend and gives its slot up,
    /// and returns `None` (the caller gives way). Costs other picks one load
    /// of a line written only when a slot is lent.
    pub(super) fn keep_lent_slot_from_computing_work(&mut self, work: Work) -> Option<Work> {
        if !computes_on_lent_slot(self.shared(), &work) {
            return Some(work);
        }
        if let Some(found) = self.look_past_computing_work(work) {
            return Some(found);
        }
        let ctx = self.ctx;
        let shared = &ctx.shared;
        // If the monitor ended the lend meanwhile, it lowered the target
        // itself. Either way the target is back at `concurrency`, and this
        // worker's slot is the surplus one.
        shared.refuse_quantum_lend();
        if self.searching {
            self.searching = false;
            shared.slots.stop_searching();
        }
        shared.slots.release();
        notify(shared);
        None
    }

    /// One pass over `first` (computing work just picked), this worker's
    /// deque (the rest of the batch it came with) and then the FIFOs a
    /// worker serves after its deque and the high lane, in their serving
    /// order (the normal lane, its admitted tasks, the low lane, its
    /// admitted tasks), each in queue order: the first item that does not
    /// compute is returned, to run on the lent slot. Every other item goes
    /// to the back of its FIFO in the order it was taken, and a FIFO is
    /// passed over whole (as long as it was before anything was put back),
    /// so it ends in its old order: computing jobs keep their FIFO turn
    /// though a lend looks past them every quantum. Once an item is found,
    /// only the FIFOs that items were put back into are passed over (to
    /// restore their order). A FIFO longer than [`LOOK_PAST_AT_MOST`] is
    /// skipped: its pass would cost more than the lend is worth.
    fn look_past_computing_work(&mut self, first: Work) -> Option<Work> {
        /// The FIFOs of the pass, in serving order: (lane, admitted).
        const FIFOS: [(Priority, bool); 4] = [
            (Priority::Normal, false),
            (Priority::Normal, true),
            (Priority::Low, false),
            (Priority::Low, true),
        ];
        let shared = Arc::clone(self.shared());
        let lanes = &shared.lanes;
        // Their lengths before anything is put back: a pass over more
        // would take the items put back again, out of their order.
        let lengths = FIFOS.map(|(lane, admitted)| lanes.fifo_len(lane, admitted));
        let mut found = None;
        let mut put_back_into = [false; 4];
        let consider = |work: Work, found: &mut Option<Work>, put_back_into: &mut [bool; 4]| {
            if found.is_none() && !computes_on_lent_slot(&shared, &work) {
                *found = Some(work);
                return;
            }
            let fifo = match &work {
                Work::Task(task) => (task.metadata().priority, task.gate().is_some()),
                Work::Job(_) => (Priority::Normal, false),
            };
            if let Some(index) = FIFOS.iter().position(|f| *f == fifo) {
                put_back_into[index] = true;
            }
            match work {
                // Back to its own FIFO: plain or admitted, by its lane.
                Work::Task(task) => lanes.requeue(task),
                job => lanes.push_work(Priority::Normal, job),
            }
        };
        consider(first, &mut found, &mut put_back_into);
        // In the order this worker would run them: its own `pop`. The
        // thieves' end is not the oldest of a batch taken from a lane (the
        // batch is written into the LIFO deque newest first, so that `pop`
        // serves it in lane order): taken from there, a batch's jobs went
        // back to the lane turned around (`[1, 4, 3, 2, 5, ...]` in
        // `tests/control_blocking.rs`, whenever no second pass happened to
        // turn them around again).
        while let Some(work) = self.ctx.local.pop() {
            consider(work.into_work(), &mut found, &mut put_back_into);
        }
        for (index, (lane, admitted)) in FIFOS.into_iter().enumerate() {
            let queued = lengths[index];
            if queued > LOOK_PAST_AT_MOST || (found.is_some() && !put_back_into[index]) {
                continue;
            }
            for _ in 0..queued {
                let next = if admitted {
                    lanes.pop_admitted(lane)
                } else {
                    lanes.pop_one(lane)
                };
                match next {
                    Some(work) => consider(work, &mut found, &mut put_back_into),
                    None => break,
                }
            }
        }
        found
    }
}

/// The longest FIFO (a lane, or its admitted tasks) a worker on a slot lent
/// by the quantum rule looks through for work that does not compute (see
/// `RunLoop::look_past_computing_work`): each item of the pass is taken and
/// queued again (an injector pop and push, as a spawn's queueing), so a
/// pass costs at most a few thousand of those, once per lend (the monitor
/// offers one every quantum while computing work holds every slot). Not
/// measured by itself.
const LOOK_PAST_AT_MOST: usize = 1024;

/// Whether `work` is a task of a kind known to compute picked while a slot
/// is lent under the quantum rule (see
/// `RunLoop::keep_lent_slot_from_computing_work`).
fn computes_on_lent_slot(shared: &Shared, work: &Work) -> bool {
    match work {
        Work::Task(task) => {
            shared.quantum_lent() && shared.kinds.likely_computes(task.metadata().kind)
        }
        Work::Job(job) => shared.quantum_lent() && shared.kinds.likely_computes(job.kind()),
    }
}
