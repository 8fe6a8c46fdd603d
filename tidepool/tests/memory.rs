//! Memory follows live work: a thread that spawned a burst of closures
//! capturing a lot holds at most a few MB once they have finished (the
//! spawner's free ring is bounded in bytes: `runtime::task::local_free`).
//! Alone in its binary: it reads the process's resident memory.

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The process's resident memory in bytes (Linux; `None` elsewhere).
fn resident() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[test]
fn a_finished_burst_of_large_closures_leaves_little_resident() {
    within(HANG, || {
        let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
        // Warm the pool, so its threads' stacks are counted before.
        pool.spawn_fn(|| ()).join().unwrap();
        let Some(before) = resident() else {
            return; // no /proc: nothing to read
        };
        const ITEMS: usize = 65_536;
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..ITEMS {
            // 8 KiB captured, touched so that its pages are resident.
            let mut captured = [0u8; 8192];
            captured[i % 8192] = 1;
            let done = done.clone();
            pool.execute(move || {
                std::hint::black_box(&captured);
                done.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        while done.load(Ordering::Relaxed) < ITEMS {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let after = resident().unwrap();
        let grown = after.saturating_sub(before);
        assert!(
            grown <= 32 << 20,
            "{} MB still resident after {ITEMS} finished closures of 8 KiB ({} MB before)",
            grown >> 20,
            before >> 20
        );
        pool.shutdown().unwrap();
    });
}
