//! `spawn_many`: one million tiny tasks (each bumps an atomic; the last one
//! signals completion) on tidepool and its peers, in the same run.
//!
//! Two variants: spawned from a thread outside the pool, and spawned from
//! inside one of the pool's own tasks. Run with `cargo bench --bench
//! spawn_many`; the README quotes the medians and ratios.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Tasks per iteration. Override with `SPAWN_MANY_TASKS` for a quick look.
fn task_count() -> usize {
    std::env::var("SPAWN_MANY_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Counts tasks and tells the waiter when the last one ran.
#[derive(Clone)]
struct Countdown {
    left: Arc<AtomicUsize>,
    done: mpsc::SyncSender<()>,
}

impl Countdown {
    fn new(n: usize) -> (Self, mpsc::Receiver<()>) {
        let (done, rx) = mpsc::sync_channel(1);
        (
            Countdown {
                left: Arc::new(AtomicUsize::new(n)),
                done,
            },
            rx,
        )
    }

    fn tick(&self) {
        if self.left.fetch_sub(1, Ordering::Relaxed) == 1 {
            let _ = self.done.send(());
        }
    }
}

/// A pool under test: how to spawn a tiny job from outside, and how to run a
/// closure inside the pool that spawns the jobs itself.
trait System: Sync {
    fn name(&self) -> &'static str;
    /// Spawns `n` jobs from the calling (outside) thread.
    fn outside(&self, n: usize, c: &Countdown);
    /// Spawns one job that spawns the `n` jobs.
    fn inside(&self, n: usize, c: &Countdown);
}

struct Tidepool(tidepool::Pool);
impl System for Tidepool {
    fn name(&self) -> &'static str {
        "tidepool"
    }
    fn outside(&self, n: usize, c: &Countdown) {
        for _ in 0..n {
            let c = c.clone();
            drop(self.0.spawn_fn(move || c.tick()));
        }
    }
    fn inside(&self, n: usize, c: &Countdown) {
        let pool = self.0.clone();
        let c = c.clone();
        drop(self.0.spawn_fn(move || {
            for _ in 0..n {
                let c = c.clone();
                drop(pool.spawn_fn(move || c.tick()));
            }
        }));
    }
}

struct Tokio(tokio::runtime::Runtime);
impl System for Tokio {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn outside(&self, n: usize, c: &Countdown) {
        for _ in 0..n {
            let c = c.clone();
            drop(self.0.spawn(async move { c.tick() }));
        }
    }
    fn inside(&self, n: usize, c: &Countdown) {
        let c = c.clone();
        drop(self.0.spawn(async move {
            for _ in 0..n {
                let c = c.clone();
                drop(tokio::spawn(async move { c.tick() }));
            }
        }));
    }
}

struct AsyncExecutor {
    ex: Arc<async_executor::Executor<'static>>,
    _stop: async_channel_like::Stop,
}
/// A tiny stop signal for the executor threads, built on std only.
mod async_channel_like {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    pub(crate) struct Stop(pub(crate) Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}
impl AsyncExecutor {
    fn new(threads: usize) -> Self {
        let ex = Arc::new(async_executor::Executor::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for _ in 0..threads {
            let ex = ex.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                futures_lite::future::block_on(ex.run(async move {
                    while !stop.load(Ordering::Relaxed) {
                        async_io::Timer::after(Duration::from_millis(50)).await;
                    }
                }))
            });
        }
        AsyncExecutor {
            ex,
            _stop: async_channel_like::Stop(stop),
        }
    }
}
impl System for AsyncExecutor {
    fn name(&self) -> &'static str {
        "async-executor"
    }
    fn outside(&self, n: usize, c: &Countdown) {
        for _ in 0..n {
            let c = c.clone();
            self.ex.spawn(async move { c.tick() }).detach();
        }
    }
    fn inside(&self, n: usize, c: &Countdown) {
        let ex = self.ex.clone();
        let c = c.clone();
        self.ex
            .spawn(async move {
                for _ in 0..n {
                    let c = c.clone();
                    ex.spawn(async move { c.tick() }).detach();
                }
            })
            .detach();
    }
}

struct Rayon(rayon::ThreadPool);
impl System for Rayon {
    fn name(&self) -> &'static str {
        "rayon"
    }
    fn outside(&self, n: usize, c: &Countdown) {
        for _ in 0..n {
            let c = c.clone();
            self.0.spawn(move || c.tick());
        }
    }
    fn inside(&self, n: usize, c: &Countdown) {
        let c = c.clone();
        self.0.spawn(move || {
            for _ in 0..n {
                let c = c.clone();
                rayon::spawn(move || c.tick());
            }
        });
    }
}

struct ThreadPoolCrate(threadpool::ThreadPool);
impl System for ThreadPoolCrate {
    fn name(&self) -> &'static str {
        "threadpool"
    }
    fn outside(&self, n: usize, c: &Countdown) {
        for _ in 0..n {
            let c = c.clone();
            self.0.execute(move || c.tick());
        }
    }
    fn inside(&self, n: usize, c: &Countdown) {
        let pool = self.0.clone();
        let c = c.clone();
        self.0.execute(move || {
            for _ in 0..n {
                let c = c.clone();
                pool.execute(move || c.tick());
            }
        });
    }
}

fn systems(cores: usize) -> Vec<Box<dyn System>> {
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(cores)
        .build()
        .expect("rayon pool");
    vec![
        Box::new(Tidepool(
            tidepool::Pool::builder().build().expect("tidepool pool"),
        )),
        Box::new(Tokio(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores)
                .build()
                .expect("tokio runtime"),
        )),
        Box::new(AsyncExecutor::new(2)),
        Box::new(Rayon(rayon)),
        Box::new(ThreadPoolCrate(threadpool::ThreadPool::new(cores))),
    ]
}

/// Times `iters` rounds of `n` jobs spawned by `spawn`.
fn time_rounds(iters: u64, n: usize, spawn: impl Fn(usize, &Countdown)) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let (countdown, done) = Countdown::new(n);
        let start = Instant::now();
        spawn(n, &countdown);
        done.recv_timeout(Duration::from_secs(120))
            .expect("every task ran");
        total += start.elapsed();
    }
    total
}

fn spawn_many(c: &mut Criterion) {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let n = task_count();
    let systems = systems(cores);
    for (variant, inside) in [("outside", false), ("inside", true)] {
        let mut group = c.benchmark_group(format!("spawn_many/{variant}"));
        group.throughput(Throughput::Elements(n as u64));
        group.sample_size(10);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(5));
        for system in &systems {
            group.bench_function(BenchmarkId::from_parameter(system.name()), |b| {
                b.iter_custom(|iters| {
                    time_rounds(iters, n, |n, countdown| {
                        if inside {
                            system.inside(n, countdown)
                        } else {
                            system.outside(n, countdown)
                        }
                    })
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, spawn_many);
criterion_main!(benches);
