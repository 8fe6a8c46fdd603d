//! The "waiting work" scenario at a small scale: items arrive one every
//! 10 ms and each blocks for 500 ms in `thread::sleep`. Prints queue-to-start
//! latencies and peak threads. The lab (`tidepool-lab waiting`) runs the full
//! experiment beside the peers; this is the quick loop for tuning.
//!
//! `cargo run --release --example waiting -- [items]`

use std::sync::mpsc;
use std::time::{Duration, Instant};

fn main() {
    let items: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let pool = tidepool::Pool::builder().build().expect("default pool");
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    for i in 0..items {
        let due = start + Duration::from_millis(10 * i as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let queued = Instant::now();
        let tx = tx.clone();
        drop(pool.spawn_fn(move || {
            let started = queued.elapsed();
            std::thread::sleep(Duration::from_millis(500));
            tx.send(started).unwrap();
        }));
    }
    drop(tx);
    let mut latencies: Vec<Duration> = rx.iter().collect();
    latencies.sort();
    let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
    let m = pool.metrics();
    println!(
        "items {items} mean {:.3} ms p50 {:.3} ms p99 {:.3} ms max {:.3} ms peak threads {} detections {} started {}",
        mean.as_secs_f64() * 1e3,
        latencies[latencies.len() / 2].as_secs_f64() * 1e3,
        latencies[latencies.len() * 99 / 100].as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3,
        m.peak_threads,
        m.blocked_detections,
        m.threads_started,
    );
}
