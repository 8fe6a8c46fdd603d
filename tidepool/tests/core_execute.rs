//! `execute`: fire-and-forget closures, with no handle. Each runs exactly
//! once, on the pool it was given to, in its lane; a panic is caught and
//! counted; a refused or never-run closure is dropped, and the counters
//! add up.

mod common;

use common::{assert_counters_add_up, within, HANG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use tidepool::{Pool, Priority, SpawnError};

/// Counts its drops.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A pool of one slot whose only worker is kept busy computing until
/// `release` is set, with no quantum lend (which could run queued work
/// beside it): what is executed meanwhile stays queued.
fn one_busy_slot(release: &Arc<AtomicBool>) -> Pool {
    let pool = Pool::builder()
        .concurrency(1)
        .quantum(None)
        .build()
        .unwrap();
    let (started, running) = mpsc::channel();
    let release = Arc::clone(release);
    pool.execute(move || {
        started.send(()).unwrap();
        while !release.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
    })
    .unwrap();
    running.recv().unwrap();
    pool
}

#[test]
fn executed_closures_from_outside_each_run_once() {
    const N: usize = 100_000;
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        let ran: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
        for i in 0..N {
            let ran = Arc::clone(&ran);
            pool.execute(move || {
                ran[i].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        pool.shutdown().unwrap();
        assert!(
            ran.iter().all(|count| count.load(Ordering::Relaxed) == 1),
            "every closure ran exactly once"
        );
        let m = pool.metrics();
        assert_eq!(m.spawned, N as u64);
        assert_eq!(m.completed, N as u64);
        assert_counters_add_up(&m);
    });
}

#[test]
fn the_free_function_inside_a_task_executes_on_that_tasks_pool() {
    within(HANG, || {
        let pool = Pool::builder().thread_name("executor").build().unwrap();
        let (names, received) = mpsc::channel();
        pool.spawn_fn(move || {
            for _ in 0..100 {
                let names = names.clone();
                tidepool::execute(move || {
                    let name = std::thread::current().name().map(str::to_owned);
                    names.send(name).unwrap();
                })
                .unwrap();
            }
        })
        .join()
        .unwrap();
        for _ in 0..100 {
            let name = received.recv_timeout(HANG).unwrap().unwrap();
            assert!(name.starts_with("executor-"), "ran on {name}");
        }
        pool.shutdown().unwrap();
        assert_eq!(pool.metrics().completed, 101);
    });
}

#[test]
fn a_panicking_executed_closure_is_counted_and_the_pool_keeps_serving() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        pool.execute(|| panic!("boom, on purpose")).unwrap();
        let (done, finished) = mpsc::channel();
        pool.execute(move || done.send(42).unwrap()).unwrap();
        assert_eq!(finished.recv_timeout(HANG).unwrap(), 42);
        pool.shutdown().unwrap();
        let m = pool.metrics();
        assert_eq!(m.panicked, 1);
        assert_eq!(m.completed, 1);
        assert_counters_add_up(&m);
    });
}

#[test]
fn execute_on_a_shut_down_pool_is_refused_and_drops_the_closure() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        pool.shutdown().unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let captured = Dropped(Arc::clone(&drops));
        let refused = pool.execute(move || drop(captured));
        assert!(matches!(refused, Err(SpawnError::ShutDown)), "{refused:?}");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure was dropped");
        let m = pool.metrics();
        assert_eq!(m.rejected, 1);
        assert_eq!(m.spawned, 0, "a refused closure is not counted spawned");
        assert_counters_add_up(&m);
    });
}

#[test]
fn executed_closures_a_shutdown_abandons_are_dropped_unrun_and_counted_cancelled() {
    within(HANG, || {
        let release = Arc::new(AtomicBool::new(false));
        let pool = one_busy_slot(&release);
        let (drops, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for _ in 0..10 {
            let captured = Dropped(Arc::clone(&drops));
            let ran = Arc::clone(&ran);
            pool.execute(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                drop(captured);
            })
            .unwrap();
        }
        let timed_out = pool.shutdown_timeout(Duration::from_millis(50));
        assert!(timed_out.is_err(), "the busy slot outlasts the timeout");
        release.store(true, Ordering::SeqCst);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "none of them ran");
        assert_eq!(drops.load(Ordering::SeqCst), 10, "each was dropped once");
        let m = pool.metrics();
        assert_eq!(m.cancelled, 10);
    });
}

#[test]
fn an_executed_closures_priority_picks_its_lane() {
    within(HANG, || {
        let release = Arc::new(AtomicBool::new(false));
        let pool = one_busy_slot(&release);
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..5 {
            let order = Arc::clone(&order);
            pool.execute(move || order.lock().unwrap().push(format!("normal {i}")))
                .unwrap();
        }
        let urgent = Arc::clone(&order);
        pool.task()
            .priority(Priority::High)
            .execute(move || urgent.lock().unwrap().push("high".to_owned()))
            .unwrap();
        release.store(true, Ordering::SeqCst);
        pool.shutdown().unwrap();
        let order = order.lock().unwrap();
        assert_eq!(order.len(), 6);
        assert_eq!(order[0], "high", "the high lane is served first: {order:?}");
    });
}
