//! `cancel()` tells the truth through every gate: a closure spawned through
//! a group or either side of a concurrent/exclusive pair is cancelled only
//! if it will not run; once running, `cancel` says false, the handle gives
//! its output, and the counters say it completed.

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use tidepool::{JoinHandle, Pool};

/// The gates a closure can be spawned through.
#[derive(Clone, Copy, Debug)]
enum Through {
    Group,
    Concurrent,
    Exclusive,
    Plain,
}

const ALL: [Through; 4] = [
    Through::Group,
    Through::Concurrent,
    Through::Exclusive,
    Through::Plain,
];

/// A pool and a spawner for `through`, kept alive together.
struct Spawner {
    pool: Pool,
    group: tidepool::Group,
    pair: (tidepool::ConcurrentSpawner, tidepool::ExclusiveSpawner),
    through: Through,
}

impl Spawner {
    fn new(through: Through) -> Spawner {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool.group().max_concurrency(2).build().unwrap();
        let pair = pool.concurrent_exclusive(2).unwrap();
        Spawner {
            pool,
            group,
            pair,
            through,
        }
    }

    fn spawn_fn<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> JoinHandle<R> {
        match self.through {
            Through::Group => self.group.spawn_fn(f),
            Through::Concurrent => self.pair.0.spawn_fn(f),
            Through::Exclusive => self.pair.1.spawn_fn(f),
            Through::Plain => self.pool.spawn_fn(f),
        }
    }

    /// (completed, cancelled) as the gate's and the pool's counters say.
    fn ended(&self) -> (u64, u64) {
        let m = self.pool.metrics();
        common::assert_counters_add_up(&m);
        (m.completed, m.cancelled)
    }
}

#[test]
fn a_running_gated_closure_cannot_be_cancelled_and_gives_its_output() {
    within(HANG, || {
        for through in ALL {
            let spawner = Spawner::new(through);
            let (started_tx, started) = mpsc::channel();
            let (release, released) = mpsc::channel::<()>();
            let effect = Arc::new(AtomicBool::new(false));
            let mut handle = spawner.spawn_fn({
                let effect = effect.clone();
                move || {
                    started_tx.send(()).unwrap();
                    released.recv().unwrap();
                    effect.store(true, Ordering::SeqCst);
                    7
                }
            });
            started.recv().unwrap();
            assert!(
                !handle.cancel(),
                "{through:?}: cancel of a running closure said true"
            );
            release.send(()).unwrap();
            assert_eq!(handle.join().unwrap(), 7, "{through:?}");
            assert!(effect.load(Ordering::SeqCst));
            spawner.pool.shutdown().unwrap();
            assert_eq!(spawner.ended(), (1, 0), "{through:?}: counted completed");
        }
    });
}

#[test]
fn a_queued_gated_closure_cancelled_never_runs() {
    within(HANG, || {
        for through in ALL {
            let spawner = Spawner::new(through);
            // Hold what the gate admits (two slots, two admissions, one
            // exclusive run) so the next closure waits.
            let (release, released) = mpsc::channel::<()>();
            let released = Arc::new(std::sync::Mutex::new(released));
            let (started_tx, started) = mpsc::channel();
            let holders: Vec<_> = (0..2)
                .map(|_| {
                    let (released, started_tx) = (released.clone(), started_tx.clone());
                    spawner.spawn_fn(move || {
                        started_tx.send(()).unwrap();
                        let _ = released.lock().unwrap().recv();
                    })
                })
                .collect();
            started.recv().unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            let mut queued = spawner.spawn_fn({
                let ran = ran.clone();
                move || ran.fetch_add(1, Ordering::SeqCst)
            });
            // It may have started on a free slot: then cancel says false and
            // it gives its output; if cancel says true, it never runs.
            let cancelled = queued.cancel();
            drop(release);
            for holder in holders {
                holder.join().unwrap();
            }
            match queued.join() {
                Err(e) => {
                    assert!(cancelled && e.is_cancelled(), "{through:?}: {e:?}");
                }
                Ok(_) => assert!(!cancelled, "{through:?}: cancelled, yet joined"),
            }
            spawner.pool.shutdown().unwrap();
            assert_eq!(
                ran.load(Ordering::SeqCst),
                usize::from(!cancelled),
                "{through:?}: cancel said {cancelled}"
            );
            let (completed, cancelled_count) = spawner.ended();
            assert_eq!(cancelled_count, u64::from(cancelled), "{through:?}");
            assert_eq!(completed, 3 - u64::from(cancelled), "{through:?}");
        }
    });
}

#[test]
fn cancel_racing_the_start_is_true_only_for_closures_that_did_not_run() {
    within(HANG, || {
        for through in ALL {
            let spawner = Spawner::new(through);
            let ran = Arc::new(AtomicUsize::new(0));
            let mut said_true = 0;
            for _ in 0..2_000 {
                let mut handle = spawner.spawn_fn({
                    let ran = ran.clone();
                    move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    }
                });
                if handle.cancel() {
                    said_true += 1;
                    assert!(handle.join().unwrap_err().is_cancelled());
                } else {
                    handle.join().unwrap();
                }
            }
            spawner.pool.shutdown().unwrap();
            assert_eq!(
                ran.load(Ordering::SeqCst) + said_true,
                2_000,
                "{through:?}: a closure ran although its cancel said true, or neither"
            );
            let (completed, cancelled) = spawner.ended();
            assert_eq!(cancelled, said_true as u64, "{through:?}");
            assert_eq!(completed + cancelled, 2_000, "{through:?}");
        }
    });
}
