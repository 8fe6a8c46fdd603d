//! Sums a `Vec` in parallel with `tidepool::join`: split the slice in two,
//! sum both halves at the same time, add. The halves are borrowed, so the
//! data is neither copied nor wrapped in an `Arc`.
//!
//! `cargo run --release --example parallel_sum -- [count]` (default 20,000,000)

use std::time::Instant;

/// Below this many numbers, a plain loop beats forking.
const CUTOFF: usize = 64 * 1024;

fn sum(values: &[u64]) -> u64 {
    if values.len() <= CUTOFF {
        return values.iter().sum();
    }
    let (left, right) = values.split_at(values.len() / 2);
    let (a, b) = tidepool::join(|| sum(left), || sum(right));
    a + b
}

fn main() {
    let count: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let values: Vec<u64> = (0..count).collect();

    let start = Instant::now();
    let total = sum(&values);
    let took = start.elapsed();

    assert_eq!(total, count * count.saturating_sub(1) / 2);
    println!(
        "sum of 0..{count} = {total} in {:.1} ms",
        took.as_secs_f64() * 1e3
    );
}
