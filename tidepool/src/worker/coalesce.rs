//! How long a searcher that just ran dry waits before looking again.
//!
//! # Why wait at all
//!
//! When tasks arrive about as fast as the workers run them (a thread spawning
//! a stream of small tasks), a worker that looks again at once finds each task
//! the moment it is queued: it takes them one at a time, in lockstep with the
//! spawner. Every task then moves between cores while the spawner is still
//! writing around it: the queue's tail, the slot that holds it and the task's
//! own cell (whose state the spawner updates again when it drops the handle)
//! bounce back and forth, and two searchers race each other for every task.
//! On the `spawn_many` benchmark from outside the pool this lockstep cost more
//! than half the throughput (see the README's figures).
//!
//! Waiting a few microseconds before the next look lets tasks pile up so the
//! worker takes them in batches, after the spawner is done with their cells.
//!
//! # When to wait
//!
//! Only while the stream is dense, so work that trickles in keeps its start
//! latency. [`Coalescer`] learns this from what the searcher's looks find:
//!
//! * a task found at the *first* look after running dry, without waiting,
//!   means tasks keep coming faster than the searcher looks (lockstep): the
//!   wait starts at [`FIRST_WAIT_NANOS`];
//! * after a wait, a first look that finds a batch (two tasks or more) means
//!   the stream is still dense: the wait doubles, up to [`MAX_WAIT_NANOS`];
//! * a single task after a wait, or a task found only after several looks,
//!   means the stream is thinning: the wait halves (and drops to zero below
//!   [`FIRST_WAIT_NANOS`]);
//! * finding nothing at all (the worker goes idle) ends the stream: the wait
//!   goes back to zero, so the first task after a pause is never delayed.
//!
//! The wait is bounded and stops early for high-priority work and shutdown
//! (see `RunLoop::wait_for_batch`), so the cost is at most
//! [`MAX_WAIT_NANOS`] of start latency for normal and low-priority tasks
//! during a dense stream, the case where throughput is what matters.

/// The longest a searcher waits before looking again (nanoseconds). Long
/// enough for tens of tasks to arrive at the rates where lockstep hurts
/// (a task every 100-300 ns), short against the 5-50 µs a parked worker
/// takes to wake. Measured on `examples/spawn_profile.rs` (outside, 2 slots):
/// a cap of 2 µs gave ~225 ns/task, 4 µs ~190, 8 µs ~160, 16 µs ~145,
/// without the wait ~300.
pub(crate) const MAX_WAIT_NANOS: u32 = 8_000;

/// The first non-zero wait (nanoseconds): the wait grows from here.
pub(crate) const FIRST_WAIT_NANOS: u32 = 250;

/// One worker's current wait, adapted from what its looks find. Pure state:
/// the run loop does the waiting.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coalescer {
    wait_nanos: u32,
}

impl Coalescer {
    /// How long to wait before the first look after running dry.
    pub(crate) fn wait_nanos(self) -> u32 {
        self.wait_nanos
    }

    /// A look found `batch` tasks (the one to run and those moved to the
    /// worker's deque with it); `looks` is how many looks it took since the
    /// searcher ran dry (1 = the first one).
    pub(crate) fn found(&mut self, looks: u32, batch: usize) {
        let dense = looks <= 1 && (self.wait_nanos == 0 || batch >= 2);
        self.wait_nanos = if dense {
            (self.wait_nanos * 2).clamp(FIRST_WAIT_NANOS, MAX_WAIT_NANOS)
        } else if self.wait_nanos / 2 < FIRST_WAIT_NANOS {
            0
        } else {
            self.wait_nanos / 2
        };
    }

    /// The searcher found nothing and goes idle: the stream has ended.
    pub(crate) fn ran_out(&mut self) {
        self.wait_nanos = 0;
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_new_worker_looks_again_at_once() {
        assert_eq!(Coalescer::default().wait_nanos(), 0);
    }

    #[test]
    fn a_dense_stream_grows_the_wait_to_the_cap() {
        let mut c = Coalescer::default();
        c.found(1, 1);
        assert_eq!(c.wait_nanos(), FIRST_WAIT_NANOS);
        c.found(1, 5);
        assert_eq!(c.wait_nanos(), 2 * FIRST_WAIT_NANOS);
        for _ in 0..20 {
            c.found(1, 32);
        }
        assert_eq!(c.wait_nanos(), MAX_WAIT_NANOS);
    }

    #[test]
    fn a_thinning_stream_shrinks_the_wait_to_zero() {
        let mut c = dense();
        c.found(3, 1);
        assert_eq!(c.wait_nanos(), MAX_WAIT_NANOS / 2);
        for _ in 0..10 {
            c.found(3, 1);
        }
        assert_eq!(c.wait_nanos(), 0);
    }

    #[test]
    fn one_task_after_a_wait_means_the_stream_thinned() {
        let mut c = dense();
        c.found(1, 1);
        assert_eq!(c.wait_nanos(), MAX_WAIT_NANOS / 2);
    }

    /// A coalescer that has seen a dense stream.
    fn dense() -> Coalescer {
        let mut c = Coalescer::default();
        c.found(1, 1);
        for _ in 0..20 {
            c.found(1, 32);
        }
        assert_eq!(c.wait_nanos(), MAX_WAIT_NANOS);
        c
    }

    #[test]
    fn running_out_of_work_resets_the_wait() {
        let mut c = dense();
        c.ran_out();
        assert_eq!(c.wait_nanos(), 0);
    }
}
