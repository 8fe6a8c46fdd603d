//! Spawns batches of tiny tasks from outside the pool (or inside with
//! `inside` as the first argument) for profiling under `perf` or callgrind:
//! `cargo run --release --example spawn_profile -- outside 1000000 5`.
//! Each task decrements a static counter, as in `benches/spawn_many.rs`;
//! with `FUTURES=1` each task is an `async` block instead of a closure,
//! and with `EXECUTE=1` a closure run by `Pool::execute` (no handle).

use std::time::Instant;

#[path = "countdown.rs"]
mod countdown;
use countdown::{tick, wait_done};

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
    // `FIXED=1`: `Controller::Fixed` (no spare thread), as the bench's
    // `tidepool-fixed`.
    let mut builder = tidepool::Pool::builder().concurrency(slots);
    if std::env::var_os("FIXED").is_some() {
        builder = builder.controller(tidepool::Controller::Fixed);
    }
    let pool = builder.build().expect("pool");
    // `FUTURES=1`: each task is an `async` block (`Pool::spawn`), not a
    // closure (`Pool::spawn_fn`).
    let futures = std::env::var_os("FUTURES").is_some();
    // `EXECUTE=1`: each closure is run by `Pool::execute`, with no handle.
    let execute = std::env::var_os("EXECUTE").is_some();
    for _ in 0..rounds {
        countdown::arm(n);
        let start = Instant::now();
        let spawn_all = {
            let pool = pool.clone();
            move || {
                for _ in 0..n {
                    if futures {
                        drop(pool.spawn(async { tick() }));
                    } else if execute {
                        pool.execute(tick).expect("the pool runs");
                    } else {
                        drop(pool.spawn_fn(tick));
                    }
                }
            }
        };
        if inside {
            drop(pool.spawn_fn(spawn_all));
        } else {
            spawn_all();
        }
        wait_done();
        let elapsed = start.elapsed();
        println!(
            "{n} tasks: {elapsed:?} ({:.0} ns/task)",
            elapsed.as_nanos() as f64 / n as f64
        );
    }
    let m = pool.metrics();
    eprintln!(
        "threads started {} (demand {}, compensation {}, policy {}; peak {}), blocked detections {}, declared {}, reserve lends {}, oversubscribed {}, monitor busy {:?}",
        m.threads_started,
        m.threads_started_demand,
        m.threads_started_compensation,
        m.threads_started_policy,
        m.peak_threads,
        m.blocked_detections,
        m.declared_blocking,
        m.reserve_slot_lends,
        m.oversubscribed_observations,
        m.monitor_busy
    );
}
