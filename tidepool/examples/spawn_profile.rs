//! Spawns batches of tiny tasks from outside the pool (or inside with
//! `inside` as the first argument) for profiling under `perf` or callgrind:
//! `cargo run --release --example spawn_profile -- outside 1000000 5`.
//! Each task decrements a static counter, as in `benches/spawn_many.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::Instant;

static LEFT: AtomicUsize = AtomicUsize::new(0);
static DONE: Mutex<bool> = Mutex::new(false);
static DONE_CV: Condvar = Condvar::new();

/// The task body: one decrement; the last task wakes the waiter. Nobody reads
/// the counter meanwhile, so its cache line stays with the workers.
fn tick() {
    if LEFT.fetch_sub(1, Ordering::Relaxed) == 1 {
        *DONE.lock().unwrap() = true;
        DONE_CV.notify_one();
    }
}

fn wait_done() {
    let mut done = DONE.lock().unwrap();
    while !*done {
        done = DONE_CV.wait(done).unwrap();
    }
    *done = false;
}

fn main() {
    let mut args = std::env::args().skip(1);
    let inside = args.next().as_deref() == Some("inside");
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let slots: usize = std::env::var("SLOTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let pool = tidepool::Pool::builder()
        .concurrency(slots)
        .build()
        .expect("pool");
    for _ in 0..rounds {
        LEFT.store(n, Ordering::SeqCst);
        let (tx, rx) = mpsc::sync_channel::<()>(1);
        let start = Instant::now();
        let spawn_all = {
            let pool = pool.clone();
            move || {
                for _ in 0..n {
                    drop(pool.spawn_fn(tick));
                }
            }
        };
        if inside {
            drop(pool.spawn_fn(spawn_all));
        } else {
            spawn_all();
        }
        wait_done();
        drop((tx, rx));
        let elapsed = start.elapsed();
        println!(
            "{n} tasks: {elapsed:?} ({:.0} ns/task)",
            elapsed.as_nanos() as f64 / n as f64
        );
    }
}
