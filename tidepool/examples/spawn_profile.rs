//! Spawns batches of tiny tasks from outside the pool (or inside with
//! `inside` as the first argument) for profiling under `perf` or callgrind:
//! `cargo run --release --example spawn_profile -- outside 1000000 5`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let inside = args.next().as_deref() == Some("inside");
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let pool = tidepool::Pool::builder().build().expect("default pool");
    for _ in 0..rounds {
        let left = Arc::new(AtomicUsize::new(n));
        let (tx, rx) = mpsc::sync_channel(1);
        let start = Instant::now();
        let spawn_all = {
            let pool = pool.clone();
            move || {
                for _ in 0..n {
                    let left = left.clone();
                    let tx = tx.clone();
                    drop(pool.spawn_fn(move || {
                        if left.fetch_sub(1, Ordering::Relaxed) == 1 {
                            let _ = tx.send(());
                        }
                    }));
                }
            }
        };
        if inside {
            drop(pool.spawn_fn(spawn_all));
        } else {
            spawn_all();
        }
        rx.recv().expect("all tasks ran");
        let elapsed = start.elapsed();
        println!(
            "{n} tasks: {elapsed:?} ({:.0} ns/task)",
            elapsed.as_nanos() as f64 / n as f64
        );
    }
}
