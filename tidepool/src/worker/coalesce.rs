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
//! (see `worker::wait_for_batch`), so the cost is at most
//! [`MAX_WAIT_NANOS`] of start latency for normal and low-priority tasks
//! during a dense stream, the case where throughput is what matters.
//!
//! # Stealing from a worker that spawns
//!
//! The waits above come after a look that found nothing. A worker that
//! spawns a stream from inside the pool pushes onto its own deque, and a
//! thief that runs faster than it spawns found its deque short but seldom
//! empty: each first look after running dry stole half of a few tasks, so
//! it never waited, and took the stream a few tasks at a time, its steals
//! pulling the spawner's deque and cells across for every couple of
//! tasks. So the first look after running dry also goes through the wait
//! when it steals from another worker's deque ([`Coalescer::stole`]): a
//! batch short of [`FULL_STEAL`] grows the wait as a dense first look
//! does; a full one says the thief is behind, and waiting would only delay
//! it, so the wait halves. Work found on the pool's lanes is taken at once,
//! as before, and a worker whose work came from a lane does not wait
//! before a steal (two workers draining a lane that a thread outside the
//! pool fills steal from each other now and then: sharing a batch, not
//! lockstep; made to wait, they ran `spawn_profile outside` 1.37x slower).
//! `spawn_many` from inside, six processes of each build in turn: 77.4 ns
//! per task (72.3-89.7) against 96.7 (85.5-123.5), lower in all six
//! (docs/measurements.md, "Stealing in batches from a worker that
//! spawns").

/// The longest a searcher waits before looking again (nanoseconds). Long
/// enough for tens of tasks to arrive at the rates where lockstep hurts
/// (a task every 100-300 ns), short against the 5-50 µs a parked worker
/// takes to wake. Measured on `examples/spawn_profile.rs` (outside, 2 slots):
/// a cap of 2 µs gave ~225 ns/task, 4 µs ~190, 8 µs ~160, 16 µs ~145,
/// without the wait ~300.
pub(crate) const MAX_WAIT_NANOS: u32 = 8_000;

/// The first non-zero wait (nanoseconds): the wait grows from here.
pub(crate) const FIRST_WAIT_NANOS: u32 = 250;

/// The most tasks one steal from a worker's deque takes, the popped task
/// included: the limit the steal passes to crossbeam-deque's
/// `steal_batch_with_limit_and_pop`. A steal takes about half of what the
/// deque holds (crossbeam's documented aim), so a full batch means the
/// deque held about twice as many. 32 is also crossbeam's own default
/// batch, so naming it changed no steal.
pub(crate) const FULL_STEAL: usize = 32;

/// One worker's current wait, adapted from what its looks find. Pure state:
/// the run loop does the waiting.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coalescer {
    wait_nanos: u32,
    /// The last first look after running dry stole from another worker's
    /// deque (not a lane): the stream comes from a worker that spawns.
    fed_by_steals: bool,
}

impl Coalescer {
    /// How long to wait before the first look after running dry.
    pub(crate) fn wait_nanos(self) -> u32 {
        self.wait_nanos
    }

    /// How long the first look after running dry waits before it steals
    /// from another worker's deque: the wait while the worker's work came
    /// that way, none while it came from the lanes (two workers draining a
    /// lane a spawner outside the pool fills steal from each other now and
    /// then: that is sharing a batch, not lockstep with a spawner).
    pub(crate) fn steal_wait_nanos(self) -> u32 {
        if self.fed_by_steals {
            self.wait_nanos
        } else {
            0
        }
    }

    /// A look found `batch` tasks (the one to run and those moved to the
    /// worker's deque with it); `looks` is how many looks it took since the
    /// searcher ran dry (1 = the first one).
    pub(crate) fn found(&mut self, looks: u32, batch: usize) {
        let dense = looks <= 1 && (self.wait_nanos == 0 || batch >= 2);
        self.wait_nanos = if dense {
            (self.wait_nanos * 2).clamp(FIRST_WAIT_NANOS, MAX_WAIT_NANOS)
        } else {
            self.halved()
        };
    }

    /// Half the wait, or none below [`FIRST_WAIT_NANOS`].
    fn halved(self) -> u32 {
        if self.wait_nanos / 2 < FIRST_WAIT_NANOS {
            0
        } else {
            self.wait_nanos / 2
        }
    }

    /// The first look after running dry stole `batch` tasks from another
    /// worker's deque (the one to run and those moved to this worker's
    /// deque with it). A short batch is a dense first look (see
    /// [`Coalescer::found`]); a full one ([`FULL_STEAL`]) says this worker is
    /// behind the spawner: the wait halves.
    pub(crate) fn stole(&mut self, batch: usize) {
        self.fed_by_steals = true;
        if batch >= FULL_STEAL {
            self.wait_nanos = self.halved();
        } else {
            self.found(1, batch);
        }
    }

    /// The first look after running dry found work on a lane.
    pub(crate) fn took_from_lanes(&mut self) {
        self.fed_by_steals = false;
    }

    /// The searcher found nothing and goes idle: the stream has ended.
    pub(crate) fn ran_out(&mut self) {
        self.wait_nanos = 0;
        self.fed_by_steals = false;
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

    #[test]
    fn short_steals_grow_the_wait_and_full_ones_shrink_it() {
        let mut c = Coalescer::default();
        c.stole(3);
        assert_eq!(c.wait_nanos(), FIRST_WAIT_NANOS, "lockstep with a spawner");
        c.stole(FULL_STEAL - 1);
        assert_eq!(c.wait_nanos(), 2 * FIRST_WAIT_NANOS, "still short");
        let mut c = dense();
        c.stole(FULL_STEAL);
        assert_eq!(c.wait_nanos(), MAX_WAIT_NANOS / 2, "behind: wait less");
        for _ in 0..10 {
            c.stole(FULL_STEAL);
        }
        assert_eq!(c.wait_nanos(), 0, "far behind: no wait at all");
        let mut c = dense();
        c.stole(1);
        assert_eq!(c.wait_nanos(), MAX_WAIT_NANOS / 2, "one task: thinning");
    }

    #[test]
    fn only_a_worker_fed_by_steals_waits_before_stealing() {
        let mut c = dense();
        assert_eq!(c.steal_wait_nanos(), 0, "fed by a lane");
        c.stole(3);
        assert_eq!(c.steal_wait_nanos(), c.wait_nanos());
        assert!(c.steal_wait_nanos() > 0);
        c.took_from_lanes();
        assert_eq!(c.steal_wait_nanos(), 0, "a lane fed it again");
        c.stole(3);
        c.ran_out();
        assert_eq!(c.steal_wait_nanos(), 0, "the stream ended");
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
