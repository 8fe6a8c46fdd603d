//! `join`: recursive Fibonacci with a fork at every level above a sequential
//! cutoff, on tidepool's `join` beside `rayon::join`, in the same run.
//!
//! `cargo bench --bench join`. Both pools have one thread per core and are
//! warmed by one untimed round first.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use std::time::Duration;

/// Below this `n`, compute sequentially: a fork per call of fib(10) or more
/// (about 180 additions), the grain a real divide and conquer would pick.
const CUTOFF: u32 = 10;

fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    fib_seq(n - 1) + fib_seq(n - 2)
}

fn fib_tidepool(n: u32) -> u64 {
    if n <= CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = tidepool::join(|| fib_tidepool(n - 1), || fib_tidepool(n - 2));
    a + b
}

fn fib_rayon(n: u32) -> u64 {
    if n <= CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn join(c: &mut Criterion) {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let pool = tidepool::Pool::builder()
        .concurrency(cores)
        .build()
        .unwrap();
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(cores)
        .build()
        .unwrap();
    let mut group = c.benchmark_group("join_fib");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for n in [20u32, 25] {
        let expected = fib_seq(n);
        group.bench_with_input(BenchmarkId::new("tidepool", n), &n, |b, &n| {
            b.iter(|| assert_eq!(pool.join(|| fib_tidepool(black_box(n)), || 0).0, expected))
        });
        group.bench_with_input(BenchmarkId::new("rayon", n), &n, |b, &n| {
            b.iter(|| assert_eq!(rayon.install(|| fib_rayon(black_box(n))), expected))
        });
        group.bench_with_input(BenchmarkId::new("sequential", n), &n, |b, &n| {
            b.iter(|| assert_eq!(fib_seq(black_box(n)), expected))
        });
    }
    group.finish();
}

criterion_group!(benches, join);
criterion_main!(benches);
