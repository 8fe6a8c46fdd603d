//! How soon queued work runs after a task of a kind the pool has never
//! seen blocks its only slot, while the monitor has been watching a stream
//! of short tasks (each of its looks finds a new task): the latency of
//! first-time blocking detection, which presumption (`runtime::kinds`)
//! cannot help with. `cargo run --release --example first_block -- 20`
//! runs 20 rounds, each with a new kind that sleeps 100 ms, and prints the
//! median, min and max of the time from the blocking spawn to the start of
//! an item queued right behind it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Kinds the rounds can use: one closure type each.
const KINDS: usize = 30;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20)
        .min(KINDS);
    let pool = tidepool::Pool::builder().concurrency(1).build().unwrap();
    let mut waits = Vec::new();
    for round in 0..rounds {
        keep_busy_with_short_tasks(&pool, Duration::from_millis(50));
        let spawned = Instant::now();
        spawn_new_kind_that_blocks(&pool, round);
        let behind = pool.spawn_fn(move || spawned.elapsed());
        waits.push(behind.join().unwrap().as_secs_f64() * 1e3);
        // Let the blocked task end and the pool settle.
        std::thread::sleep(Duration::from_millis(120));
    }
    waits.sort_by(f64::total_cmp);
    println!(
        "queued item started {:.2} ms after a new kind blocked (median of {rounds}; min {:.2}, max {:.2})",
        waits[waits.len() / 2],
        waits[0],
        waits[waits.len() - 1]
    );
}

/// Feeds the pool short tasks from another thread for `time`.
fn keep_busy_with_short_tasks(pool: &tidepool::Pool, time: Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let pool = pool.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let batch: Vec<_> = (0..64)
                    .map(|_| pool.spawn_fn(|| std::hint::black_box((0..200u64).sum::<u64>())))
                    .collect();
                for handle in batch {
                    let _ = handle.join();
                }
            }
        })
    };
    std::thread::sleep(time);
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
}

/// A closure type of its own per `N`: a kind the pool has not seen block.
fn block<const N: u64>(pool: &tidepool::Pool) {
    drop(pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(100 + N))));
}

fn spawn_new_kind_that_blocks(pool: &tidepool::Pool, round: usize) {
    macro_rules! kinds {
        ($($n:literal)*) => {
            match round {
                $($n => block::<$n>(pool),)*
                _ => unreachable!("at most KINDS rounds"),
            }
        };
    }
    kinds!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29)
}
