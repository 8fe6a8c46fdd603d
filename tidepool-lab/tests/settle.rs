//! Between runs the lab waits for the process's thread count to fall back
//! to the count before the run (`experiments::settle`, up to five
//! seconds). tidepool's reactor thread outlives every pool, so the first
//! tidepool run of a process never got back there, and waited the whole
//! five seconds, unless the lab starts that thread before any run.
//!
//! Its own test binary: the first pool of the process must be this test's.

use std::time::Duration;
use tidepool_lab::experiments::start_process_wide_threads;
use tidepool_lab::probe;

#[test]
fn a_first_tidepool_run_leaves_no_thread_behind_once_the_lab_started_the_reactor() {
    start_process_wide_threads();
    let baseline = probe::thread_count().expect("this test reads /proc/self/status");
    let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
    let answer = pool.spawn_fn(|| 6 * 7).join().unwrap();
    assert_eq!(answer, 42);
    drop(pool);
    assert!(
        // A timeout that only catches a thread that never goes.
        probe::wait_for_threads_at_most(baseline, Duration::from_secs(60)),
        "threads stayed after the pool was dropped: {:?} against a baseline of {baseline}",
        probe::thread_count()
    );
}
