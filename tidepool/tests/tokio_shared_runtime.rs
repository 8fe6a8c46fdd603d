//! The shared tokio runtime (feature `tokio`) lives as long as the pools
//! that use it: its thread is gone once the last pool is, and the next pool
//! starts a new one. Alone in its binary: it counts the process's threads.

#![cfg(feature = "tokio")]

mod common;

use common::{eventually, within, HANG};
use std::time::Duration;

/// Threads of this process named `tidepool-tokio` (Linux; `None` elsewhere).
fn runtime_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim_end() == "tidepool-tokio")
            .count(),
    )
}

#[test]
fn the_shared_runtime_stops_with_the_last_pool_and_starts_again() {
    within(HANG, || {
        let Some(before) = runtime_threads() else {
            return; // no /proc: nothing to count
        };
        assert_eq!(before, 0);
        let sleep_once = |pool: &tidepool::Pool| {
            pool.spawn(async { tokio::time::sleep(Duration::from_millis(1)).await })
                .join()
                .unwrap();
        };
        let first = tidepool::Pool::builder().concurrency(1).build().unwrap();
        let second = tidepool::Pool::builder().concurrency(1).build().unwrap();
        sleep_once(&first);
        sleep_once(&second);
        let threads = runtime_threads().unwrap();
        assert!(threads > 0, "the runtime started");
        first.shutdown().unwrap();
        drop(first);
        sleep_once(&second);
        second.shutdown().unwrap();
        drop(second);
        assert!(
            eventually(HANG, || runtime_threads() == Some(0)),
            "the runtime's thread stops with the last pool"
        );
        let third = tidepool::Pool::builder().concurrency(1).build().unwrap();
        sleep_once(&third);
        assert_eq!(runtime_threads(), Some(threads), "one runtime again");
        third.shutdown().unwrap();
    });
}
