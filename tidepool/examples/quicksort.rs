//! A parallel in-place quicksort with `tidepool::join`: put the median in
//! the middle of the slice, then sort the two sides at the same time. Both
//! sides are borrowed from the one slice (`split_at_mut`), so nothing is
//! copied, and nothing needs `'static`, `Arc` or a channel.
//!
//! `cargo run --release --example quicksort -- [count]` (default 10,000,000)

use std::time::{Duration, Instant};

/// Below this many elements a sequential sort beats forking.
const CUTOFF: usize = 8 * 1024;

/// Sorts `v` in parallel on the current pool (the global pool here).
fn quicksort<T: Ord + Send>(v: &mut [T]) {
    if v.len() <= CUTOFF {
        v.sort_unstable();
        return;
    }
    // The median goes to `mid`, everything smaller before it, everything
    // larger after it: two halves that can be sorted independently.
    let mid = v.len() / 2;
    v.select_nth_unstable(mid);
    let (left, right) = v.split_at_mut(mid);
    tidepool::join(|| quicksort(left), || quicksort(&mut right[1..]));
}

/// `count` pseudo-random numbers (xorshift64: no dependency needed).
fn random_numbers(count: usize, mut seed: u64) -> Vec<u64> {
    (0..count)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        })
        .collect()
}

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let input = random_numbers(count, 0x2545_f491_4f6c_dd1d);

    let mut expected = input.clone();
    let sequential = timed(|| expected.sort_unstable());

    // The global pool starts on first use; start it before timing.
    tidepool::join(|| (), || ());
    let mut values = input;
    let parallel = timed(|| quicksort(&mut values));

    assert!(values.windows(2).all(|w| w[0] <= w[1]), "not sorted");
    assert_eq!(values, expected, "not the same numbers");
    println!(
        "{count} numbers: sort_unstable {:.0} ms, quicksort with tidepool::join {:.0} ms \
         ({:.2}x) on {} cores",
        sequential.as_secs_f64() * 1e3,
        parallel.as_secs_f64() * 1e3,
        sequential.as_secs_f64() / parallel.as_secs_f64(),
        tidepool::global().concurrency(),
    );
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}
