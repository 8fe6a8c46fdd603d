//! A process whose real-time signals are all taken (each has a handler)
//! before its first pool: the pool cannot hold a worker back from its
//! block (`control::hold` needs a free signal), says so
//! (`Metrics::holds_workers`), and still runs everything. A binary of its
//! own: the signal is chosen once per process.

#![cfg(target_os = "linux")]

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidepool::Pool;

#[test]
fn with_every_signal_taken_nothing_is_held_and_the_work_still_runs() {
    // The signals the pool may choose from (`sys::hold_signal`), all
    // given a disposition other than the default.
    for signal in libc::SIGRTMIN() + 4..=libc::SIGRTMAX() - 1 {
        // SAFETY: setting a real-time signal's disposition to "ignore";
        // nothing in this test process sends it.
        let previous = unsafe { libc::signal(signal, libc::SIG_IGN) };
        assert_ne!(previous, libc::SIG_ERR, "signal {signal}");
    }
    let m = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let ended = Arc::new(AtomicUsize::new(0));
        // Items that wait, then compute: with a free signal some would be
        // held (`control_hold`).
        for _ in 0..16 {
            let ended = ended.clone();
            pool.execute(move || {
                std::thread::sleep(Duration::from_millis(20));
                let until = Instant::now() + Duration::from_millis(30);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                ended.fetch_add(1, Ordering::Release);
            })
            .unwrap();
        }
        assert!(common::eventually(HANG, || ended.load(Ordering::Acquire) == 16));
        pool.metrics()
    });
    assert!(!m.holds_workers, "{m:?}");
    assert_eq!(m.workers_held, 0, "{m:?}");
    assert_eq!(m.completed, 16, "{m:?}");
    common::assert_counters_add_up(&m);
}
