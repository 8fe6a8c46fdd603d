//! `Controller::Gradual` adds running slots one interval at a time while the
//! backlog does not shrink, on real threads.

mod common;

use common::{eventually, within, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidepool::{Controller, Pool};

#[test]
fn gradual_grows_one_slot_per_interval_under_a_blocked_backlog() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(4)
            .controller(Controller::Gradual {
                interval: Duration::from_millis(20),
            })
            .build()
            .unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let r = release.clone();
                pool.spawn_fn(move || {
                    while !r.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        // It grows, but never past max_threads, and not by blocking detection.
        assert!(
            eventually(HANG, || pool.metrics().threads == 4),
            "{:?}",
            pool.metrics()
        );
        std::thread::sleep(Duration::from_millis(100));
        let m = pool.metrics();
        assert_eq!(m.threads, 4);
        assert_eq!(m.concurrency_target, 4);
        assert_eq!(m.blocked_detections, 0);
        release.store(true, Ordering::SeqCst);
        for h in handles {
            h.join().unwrap();
        }
        // With the backlog gone the slots are given back.
        assert!(eventually(HANG, || pool.metrics().concurrency_target == 1));
    });
}
