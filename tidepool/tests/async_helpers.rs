//! `yield_now` and `timeout`.

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidepool::{Controller, Pool};

fn one_thread() -> Pool {
    Pool::builder()
        .concurrency(1)
        .controller(Controller::Fixed)
        .build()
        .unwrap()
}

#[test]
fn yield_now_lets_another_task_run_on_the_only_worker() {
    within(HANG, || {
        let pool = one_thread();
        let flag = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&flag);
        // Without yielding, this would hold the only thread forever.
        let waiter = pool.spawn(async move {
            let mut yields = 0u64;
            while !seen.load(Ordering::SeqCst) {
                tidepool::yield_now().await;
                yields += 1;
            }
            yields
        });
        let setter = pool.spawn_fn(move || flag.store(true, Ordering::SeqCst));
        setter.join().unwrap();
        assert!(waiter.join().unwrap() >= 1);
    });
}

#[test]
fn timeout_returns_the_output_or_elapsed() {
    within(HANG, || {
        let pool = one_thread();
        let ok = pool.block_on(tidepool::timeout(Duration::from_secs(30), async { 5 }));
        assert_eq!(ok, Ok(5));
        // A ready future wins even with no time at all.
        let ready = pool.block_on(tidepool::timeout(Duration::ZERO, async { 6 }));
        assert_eq!(ready, Ok(6));
        let slow = tidepool::timeout(Duration::from_millis(20), async {
            tidepool::sleep(Duration::from_secs(30)).await;
        });
        let err = pool.block_on(slow).unwrap_err();
        assert_eq!(err.duration(), Duration::from_millis(20));
        assert!(err.to_string().contains("timed out after 20ms"));
    });
}

#[test]
fn a_task_waiting_for_its_timeout_holds_no_thread() {
    within(HANG, || {
        let pool = one_thread();
        // Far longer than the hang bound: if the wait held the only thread,
        // the closure below could not run and the test would hang.
        let mut waiting = pool.spawn(tidepool::timeout(HANG * 10, std::future::pending::<()>()));
        assert_eq!(pool.spawn_fn(|| 7).join().unwrap(), 7);
        assert!(waiting.cancel());
        assert!(waiting.join().unwrap_err().is_cancelled());
    });
}
