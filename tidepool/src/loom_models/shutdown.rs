//! Loom model of the shutdown latch (`runtime::lifecycle`) over the real sharded task
//! counters (`metrics::TaskCounters`): a spawn racing a close and the end of
//! the last task never strands a task and never stops the pool twice or
//! while a task is live.

use crate::metrics::{Outcome, TaskCounters};
use crate::runtime::Latch;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;

struct Pool {
    latch: Latch,
    /// Shard 0: outside threads; shard 1: a worker.
    shards: [TaskCounters; 2],
    stops: AtomicUsize,
}

impl Pool {
    fn live(&self) -> usize {
        let live: i64 = self.shards.iter().map(TaskCounters::live_part).sum();
        usize::try_from(live).unwrap_or(0)
    }
    fn check(&self) {
        if self.latch.stop_if_drained(|| self.live()) {
            self.stops.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn last_operation_stops_exactly_once() {
    loom::model(|| {
        let pool = Arc::new(Pool {
            latch: Latch::default(),
            shards: [TaskCounters::default(), TaskCounters::default()],
            stops: AtomicUsize::new(0),
        });
        // One task already accepted from outside; it will end on the worker.
        pool.shards[0].spawned();

        let ender = {
            let pool = pool.clone();
            loom::thread::spawn(move || {
                pool.shards[1].ended(Outcome::Completed);
                pool.check();
            })
        };
        let spawner = {
            let pool = pool.clone();
            loom::thread::spawn(move || {
                pool.shards[0].spawned();
                if pool.latch.accepts() {
                    true // accepted: stays live (never ends in this model)
                } else {
                    pool.shards[0].refused();
                    pool.check();
                    false
                }
            })
        };
        if pool.latch.close() {
            pool.check();
        }
        ender.join().unwrap();
        let accepted = spawner.join().unwrap();

        let stops = pool.stops.load(Ordering::SeqCst);
        if accepted {
            assert_eq!(pool.live(), 1);
            assert_eq!(stops, 0, "stopped with a task live");
        } else {
            assert_eq!(pool.live(), 0);
            assert_eq!(stops, 1, "drained and closed, so stopped exactly once");
        }
    });
}
