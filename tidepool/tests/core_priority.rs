//! The reserve slot: a high-priority task on a saturated pool starts at once
//! instead of after a running task, and the pool gives the slot back.

mod common;

use common::{eventually, within, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tidepool::{Pool, Priority};

/// One slot and no quantum: on a loaded machine the monitor may lend a
/// slot to queued work once a spinner has computed for a quantum, which is
/// another rule than the reserve slot tested here.
fn one_slot_pool() -> Pool {
    Pool::builder()
        .concurrency(1)
        .quantum(None)
        .build()
        .unwrap()
}

#[test]
fn an_urgent_task_borrows_the_reserve_slot_while_every_slot_computes() {
    within(HANG, || {
        let pool = one_slot_pool();
        let urgent_ran = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        // A CPU-bound task holds the only slot until the urgent task has run
        // (or a hang bound passes): without the reserve slot the urgent task
        // could only start after it, so the spinner would hit the bound.
        let (ran, go) = (urgent_ran.clone(), started.clone());
        let spinner = pool.spawn_fn(move || {
            go.store(true, Ordering::SeqCst);
            let start = Instant::now();
            let mut x = 0u64;
            while !ran.load(Ordering::SeqCst) && start.elapsed() < HANG / 2 {
                x = x.wrapping_add(1);
            }
            ran.load(Ordering::SeqCst)
        });
        assert!(eventually(HANG, || started.load(Ordering::SeqCst)));
        let ran = urgent_ran.clone();
        let urgent = pool
            .task()
            .priority(Priority::High)
            .spawn_fn(move || ran.store(true, Ordering::SeqCst));
        urgent.join().unwrap();
        assert!(
            spinner.join().unwrap(),
            "the urgent task waited for the spinner"
        );
        let m = pool.metrics();
        assert!(m.reserve_slot_lends >= 1, "{m:?}");
        // The lent slot comes back: no more running workers than slots.
        assert!(eventually(HANG, || pool.metrics().running_threads <= 1));
    });
}

#[test]
fn normal_tasks_do_not_borrow_the_reserve_slot() {
    within(HANG, || {
        let pool = one_slot_pool();
        let release = Arc::new(AtomicBool::new(false));
        let r = release.clone();
        let spinner = pool.spawn_fn(move || {
            while !r.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        });
        let normal = pool.spawn_fn(|| ());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!normal.is_finished(), "a normal task jumped the busy slot");
        release.store(true, Ordering::SeqCst);
        spinner.join().unwrap();
        normal.join().unwrap();
        assert_eq!(pool.metrics().reserve_slot_lends, 0);
    });
}
