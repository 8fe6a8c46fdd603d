//! Loom model of the admission state machine of groups and pairs
//! (`src/fair/admission.rs`), driven exactly as the pool drives it: a task is
//! scheduled (spawn or wake), a worker that was handed its runnable starts the
//! poll, the task ends (completes, panics, or is dropped as cancelled) or is
//! woken during its own poll, and the worker reports the run over.
//!
//! Checked over every interleaving: limits are never exceeded, an exclusive
//! run never overlaps its pair, every task ends exactly once, and at the end
//! every permit and token is back (none leaked, none duplicated) and nothing
//! is left queued (no lost admission).

use crate::fair::admission::{Arbiter, Side, Ticket, Ticketed, UnitConfig, UnitCounts, UnitId};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::collections::VecDeque;
use std::sync::Arc;

/// How a modelled task behaves when run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// One poll, then it completes.
    Finish,
    /// One poll that panics: to the gate this is an end like any other.
    Panic,
    /// Cancelled while queued: its run drops the future without a poll.
    Cancel,
    /// Wakes itself during its first poll (a yield), completes in the second.
    Yield,
}

struct Task {
    ticket: Ticket,
    outcome: Outcome,
    polls: AtomicUsize,
    ends: AtomicUsize,
}

struct Item(Arc<Task>);

impl Ticketed for Item {
    fn ticket(&self) -> &Ticket {
        &self.0.ticket
    }
}

/// What every modelled worker shares.
struct World {
    arbiter: Arbiter<Item>,
    unit: UnitId,
    max_running: usize,
    /// Runs in progress: +1 per concurrent/group run, +1000 per exclusive.
    running: AtomicUsize,
    violations: AtomicUsize,
}

impl World {
    fn new(budget: usize, config: UnitConfig) -> Arc<World> {
        let arbiter = Arbiter::new(budget);
        let unit = arbiter.add_unit(config);
        Arc::new(World {
            arbiter,
            unit,
            max_running: config.max_running,
            running: AtomicUsize::new(0),
            violations: AtomicUsize::new(0),
        })
    }

    fn task(side: Side, outcome: Outcome) -> Arc<Task> {
        Arc::new(Task {
            ticket: Ticket::new(side),
            outcome,
            polls: AtomicUsize::new(0),
            ends: AtomicUsize::new(0),
        })
    }

    /// One poll of `task`, checking the limits while it "runs".
    fn poll(&self, task: &Task) {
        let add = if task.ticket.side() == Side::Exclusive {
            1000
        } else {
            1
        };
        let before = self.running.fetch_add(add, Ordering::SeqCst);
        let bad = if add == 1000 {
            before != 0
        } else {
            before >= 1000 || before + 1 > self.max_running
        };
        if bad {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        task.polls.fetch_add(1, Ordering::SeqCst);
        self.running.fetch_sub(add, Ordering::SeqCst);
    }

    /// A worker running one admitted item; what it admits in turn goes to
    /// `work` (the worker's own queue).
    fn run(&self, item: Item, work: &mut VecDeque<Item>) {
        let task = Arc::clone(&item.0);
        drop(item);
        let (id, t) = (self.unit, &task.ticket);
        let mut admitted = Vec::new();
        match task.outcome {
            Outcome::Cancel => {
                // The future is dropped inside the run, without a poll.
                task.ends.fetch_add(1, Ordering::SeqCst);
                admitted.extend(self.arbiter.ended(id, t));
            }
            Outcome::Finish | Outcome::Panic => {
                admitted.extend(self.arbiter.poll_started(id, t));
                self.poll(&task);
                task.ends.fetch_add(1, Ordering::SeqCst);
                admitted.extend(self.arbiter.ended(id, t));
            }
            Outcome::Yield => {
                admitted.extend(self.arbiter.poll_started(id, t));
                self.poll(&task);
                if task.polls.load(Ordering::SeqCst) == 1 {
                    // Woken during its poll: scheduled again before after_run.
                    admitted.extend(self.arbiter.schedule(id, Item(Arc::clone(&task))));
                } else {
                    task.ends.fetch_add(1, Ordering::SeqCst);
                    admitted.extend(self.arbiter.ended(id, t));
                }
            }
        }
        admitted.extend(self.arbiter.after_run(id, t));
        work.extend(admitted);
    }

    /// A thread that spawns `task` and runs whatever it is handed.
    fn spawn_and_work(self: &Arc<Self>, task: Arc<Task>) {
        let mut work: VecDeque<Item> = self
            .arbiter
            .schedule(self.unit, Item(task))
            .into_iter()
            .collect();
        while let Some(item) = work.pop_front() {
            self.run(item, &mut work);
        }
    }

    fn check_end(&self, tasks: &[Arc<Task>]) {
        assert_eq!(
            self.violations.load(Ordering::SeqCst),
            0,
            "a limit was exceeded"
        );
        for task in tasks {
            assert_eq!(
                task.ends.load(Ordering::SeqCst),
                1,
                "{:?} task ended wrongly",
                task.outcome
            );
        }
        assert_eq!(
            self.arbiter.counts(self.unit),
            UnitCounts::default(),
            "permits leaked"
        );
        assert_eq!(self.arbiter.free_tokens()[1], 1, "token leaked");
    }
}

fn group(max_running: usize, max_in_flight: usize) -> UnitConfig {
    UnitConfig {
        max_running,
        max_in_flight,
        weight: 1,
        lane: 1,
    }
}

/// Two tasks of a group with one run and one in-flight permit, spawned from
/// two threads, for every pair of outcomes.
fn two_tasks(a: Outcome, b: Outcome, side_a: Side, side_b: Side, config: UnitConfig) {
    loom::model(move || {
        let world = World::new(1, config);
        let tasks = [World::task(side_a, a), World::task(side_b, b)];
        let other = {
            let (world, task) = (Arc::clone(&world), Arc::clone(&tasks[1]));
            thread::spawn(move || world.spawn_and_work(task))
        };
        world.spawn_and_work(Arc::clone(&tasks[0]));
        other.join().unwrap();
        world.check_end(&tasks);
    });
}

#[test]
fn group_finish_and_panic() {
    two_tasks(
        Outcome::Finish,
        Outcome::Panic,
        Side::Group,
        Side::Group,
        group(1, 1),
    );
}

#[test]
fn group_finish_and_cancel() {
    two_tasks(
        Outcome::Cancel,
        Outcome::Finish,
        Side::Group,
        Side::Group,
        group(1, 1),
    );
}

#[test]
fn group_yield_and_finish() {
    two_tasks(
        Outcome::Yield,
        Outcome::Finish,
        Side::Group,
        Side::Group,
        group(1, 1),
    );
}

#[test]
fn group_yield_and_yield_two_permits() {
    two_tasks(
        Outcome::Yield,
        Outcome::Yield,
        Side::Group,
        Side::Group,
        group(2, 2),
    );
}

#[test]
fn pair_exclusive_and_concurrent() {
    two_tasks(
        Outcome::Yield,
        Outcome::Finish,
        Side::Exclusive,
        Side::Concurrent,
        group(2, usize::MAX),
    );
}

#[test]
fn pair_two_exclusive() {
    two_tasks(
        Outcome::Finish,
        Outcome::Cancel,
        Side::Exclusive,
        Side::Exclusive,
        group(2, usize::MAX),
    );
}

/// Three tasks from three threads: two concurrent and one exclusive.
#[test]
fn pair_three_threads() {
    loom::model(|| {
        let world = World::new(2, group(2, usize::MAX));
        let tasks = [
            World::task(Side::Concurrent, Outcome::Finish),
            World::task(Side::Exclusive, Outcome::Finish),
            World::task(Side::Concurrent, Outcome::Finish),
        ];
        let threads: Vec<_> = tasks[1..]
            .iter()
            .map(|task| {
                let (world, task) = (Arc::clone(&world), Arc::clone(task));
                thread::spawn(move || world.spawn_and_work(task))
            })
            .collect();
        world.spawn_and_work(Arc::clone(&tasks[0]));
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(world.violations.load(Ordering::SeqCst), 0);
        for task in &tasks {
            assert_eq!(task.ends.load(Ordering::SeqCst), 1);
        }
        assert_eq!(world.arbiter.counts(world.unit), UnitCounts::default());
        assert_eq!(world.arbiter.free_tokens()[1], 2);
    });
}
