//! Start latency of a stream of tiny tasks spawned from outside the pool at a
//! fixed spacing, as the pool's own metrics see it (queue to first poll):
//! `cargo run --release --example stream_latency`.
//!
//! This is the cost side of the searchers' batching wait (see
//! `worker/coalesce.rs`): a dense stream may wait a few microseconds longer
//! to start, a thin one should not.

use std::time::{Duration, Instant};

#[path = "countdown.rs"]
mod countdown;
use countdown::{tick, wait_done};

fn main() {
    let spacings_ns = [0u64, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000];
    println!("spacing_ns  tasks  wall_ns_per_task  mean_us  p50_us  p99_us");
    for spacing in spacings_ns {
        // About 100 ms of stream per spacing, at least 2,000 tasks.
        let n = (100_000_000 / spacing.max(100)).max(2_000) as usize;
        let pool = tidepool::Pool::builder()
            .concurrency(2)
            .build()
            .expect("pool");
        countdown::arm(n);
        let start = Instant::now();
        let mut next = Instant::now();
        for _ in 0..n {
            if spacing > 0 {
                next += Duration::from_nanos(spacing);
                while Instant::now() < next {
                    std::hint::spin_loop();
                }
            }
            drop(pool.spawn_fn(tick));
        }
        wait_done();
        let wall = start.elapsed();
        pool.shutdown().expect("shutdown");
        let latency = pool.metrics().start_latency;
        println!(
            "{spacing:>10}  {n:>5}  {:>16.0}  {:>7.1}  {:>6.1}  {:>6.1}",
            wall.as_nanos() as f64 / n as f64,
            latency.mean.as_secs_f64() * 1e6,
            latency.p50.as_secs_f64() * 1e6,
            latency.p99.as_secs_f64() * 1e6,
        );
    }
}
