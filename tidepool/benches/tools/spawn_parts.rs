//! Splits the cost of a tiny task into its spawn side and its run side: spawns
//! a million tasks while the pool's only worker is held, then releases it.
//! `cargo run --release --example spawn_parts`

use std::sync::mpsc;
use std::time::Instant;

#[path = "countdown.rs"]
mod countdown;
use countdown::{tick, wait_done};

fn main() {
    let n = 1_000_000;
    let pool = tidepool::Pool::builder()
        .concurrency(1)
        .controller(tidepool::Controller::Fixed)
        .build()
        .expect("pool");
    for _ in 0..5 {
        countdown::arm(n);
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        let (held_tx, held_rx) = mpsc::channel::<()>();
        drop(pool.spawn_fn(move || {
            held_tx.send(()).unwrap();
            hold_rx.recv().unwrap();
        }));
        held_rx.recv().unwrap();
        let start = Instant::now();
        for _ in 0..n {
            drop(pool.spawn_fn(tick));
        }
        let spawned = start.elapsed();
        let start = Instant::now();
        hold_tx.send(()).unwrap();
        wait_done();
        let ran = start.elapsed();
        println!(
            "spawn {:.0} ns/task, run {:.0} ns/task",
            spawned.as_nanos() as f64 / n as f64,
            ran.as_nanos() as f64 / n as f64
        );
    }
}
