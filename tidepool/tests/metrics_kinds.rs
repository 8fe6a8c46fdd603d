//! The pool names the work that blocked: `Metrics::kinds` lists the kind
//! (the closure's type name and where it was first spawned) with its
//! blocking counts, `Metrics::workers` each worker's figures, and
//! `Pool::running` the tasks running now with their kind's name.

mod common;

use common::{eventually, within, HANG};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tidepool::{Pool, WorkerState};

/// A closure that sleeps in short naps until `release` is set: blocked, as
/// the monitor sees it. Made here, so its type's name is this function's.
fn naps_until(release: Arc<AtomicBool>) -> impl FnOnce() + Send + 'static {
    move || {
        let start = Instant::now();
        while !release.load(Ordering::SeqCst) && start.elapsed() < HANG {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A closure that waits on a channel until released (or dropped); named
/// after this function.
fn waits_for(released: mpsc::Receiver<()>) -> impl FnOnce() -> bool + Send + 'static {
    move || released.recv_timeout(HANG).is_ok()
}

/// A pool of one slot where only the monitor's detection can let a second
/// task run beside a blocked one (no quantum rule lending a slot).
fn one_slot_pool() -> Pool {
    Pool::builder()
        .concurrency(1)
        .quantum(None)
        .build()
        .unwrap()
}

#[test]
fn a_blocking_closure_is_named_in_the_kind_table_with_its_blocks() {
    within(HANG, || {
        let pool = one_slot_pool();
        let release = Arc::new(AtomicBool::new(false));
        let site = Location::caller();
        let blocker = pool.spawn_fn(naps_until(release.clone()));
        // One slot: this runs only once the blocked worker's slot was
        // given away.
        assert_eq!(pool.spawn_fn(|| 2).join().unwrap(), 2);
        release.store(true, Ordering::SeqCst);
        blocker.join().unwrap();

        let m = pool.metrics();
        assert!(m.blocked_detections >= 1, "{m:?}");
        let kind = m
            .kinds
            .iter()
            .find(|k| k.name.contains("naps_until"))
            .unwrap_or_else(|| panic!("the blocking closure is in the table: {:?}", m.kinds));
        assert!(kind.name.ends_with("{{closure}}"), "{kind:?}");
        assert!(kind.blocked_detections >= 1, "{kind:?}");
        assert!(kind.blocking() >= 1, "{kind:?}");
        // Where it was first spawned: the `spawn_fn` line above.
        let spawned_at = kind.site.expect("spawn_fn tracks its caller");
        assert_eq!(spawned_at.file(), site.file());
        assert_eq!(spawned_at.line(), site.line() + 1);
        // The quick closure never blocked: not in the table.
        assert!(
            m.kinds
                .iter()
                .all(|k| !k.name.contains("a_blocking_closure")),
            "{m:?}"
        );
        assert_eq!(m.kinds_untracked, 0);
        // The worker it ran on counts the block, and every task's end.
        assert!(m.workers.iter().any(|w| w.blocked >= 1), "{:?}", m.workers);
        assert_eq!(m.workers.iter().map(|w| w.tasks_ended).sum::<u64>(), 2);
        assert!(m.workers.windows(2).all(|w| w[0].index < w[1].index));
    });
}

#[test]
fn the_running_snapshot_shows_a_long_task_while_it_runs_and_not_after() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let (release, released) = mpsc::channel();
        let site = Location::caller();
        let waiting = pool.spawn_fn(waits_for(released));
        let ours = |pool: &Pool| {
            pool.running()
                .into_iter()
                .find(|task| task.name.contains("waits_for"))
        };
        assert!(
            eventually(HANG, || ours(&pool).is_some()),
            "{:?}",
            pool.running()
        );
        let task = ours(&pool).unwrap();
        assert_eq!(task.site.map(|s| s.line()), Some(site.line() + 1));
        // The monitor looks at a task that runs on: from then on it has a
        // time.
        assert!(
            eventually(HANG, || ours(&pool)
                .is_some_and(|t| !t.running_for.is_zero())),
            "{:?}",
            pool.running()
        );
        let state = pool.metrics().workers[task.worker].state;
        assert!(
            matches!(state, WorkerState::Running | WorkerState::Blocked),
            "{state:?}"
        );

        release.send(()).unwrap();
        assert!(waiting.join().unwrap());
        assert!(
            eventually(HANG, || ours(&pool).is_none()),
            "{:?}",
            pool.running()
        );
        assert!(eventually(HANG, || pool.running().is_empty()));
        assert!(eventually(HANG, || pool.metrics().workers.iter().all(
            |w| matches!(w.state, WorkerState::Idle | WorkerState::NoThread)
        )));
    });
}

#[test]
fn a_groups_closure_is_named_after_the_closure_not_the_groups_future() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let (release, released) = mpsc::channel();
        let waiting = group.spawn_fn(waits_for(released));
        assert!(
            eventually(HANG, || pool
                .running()
                .iter()
                .any(|task| task.name.contains("waits_for"))),
            "{:?}",
            pool.running()
        );
        release.send(()).unwrap();
        assert!(waiting.join().unwrap());
    });
}

#[test]
fn a_kind_presumed_blocking_is_counted_as_presumed() {
    within(HANG, || {
        let pool = one_slot_pool();
        // Declared blocking, past its grace: the kind blocks from then on,
        // and later closures of the kind start presumed blocking.
        fn declares() -> impl FnOnce() + Send + 'static {
            || tidepool::blocking(|| std::thread::sleep(Duration::from_millis(50)))
        }
        let presumed = || {
            pool.metrics()
                .kinds
                .iter()
                .find(|k| k.name.contains("declares"))
                .is_some_and(|k| k.presumed_blocking >= 1)
        };
        // Each round a declared section, then one more of the kind, which
        // is presumed once the first was handed over.
        assert!(eventually(HANG, || {
            pool.spawn_fn(declares()).join().unwrap();
            presumed()
        }));
        let m = pool.metrics();
        let kind = m
            .kinds
            .iter()
            .find(|k| k.name.contains("declares"))
            .unwrap();
        assert!(kind.declared_blocking >= 1, "{kind:?}");
        assert!(kind.presumed_now, "{kind:?}");
        assert!(m.workers.iter().any(|w| w.blocked >= 1), "{:?}", m.workers);
    });
}
