//! `spawn_many`: one million tiny tasks (each bumps an atomic; the last one
//! signals completion) on tidepool and its peers, in the same run.
//!
//! Two variants: spawned from a thread outside the pool, and spawned from
//! inside one of the pool's own tasks. tidepool's jobs are closures
//! (`spawn_fn`, its handle dropped), closures with no handle
//! (`tidepool-execute`: `Pool::execute`, as rayon's `spawn` and the
//! threadpool crate's `execute` run them), and `async` blocks
//! (`tidepool-async`), the jobs tokio and async-executor run. Run with `cargo bench --bench
//! spawn_many`; docs/measurements.md quotes the medians and ratios.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Tasks per iteration. Override with `SPAWN_MANY_TASKS` for a quick look.
fn task_count() -> usize {
    std::env::var("SPAWN_MANY_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Counts tasks down and tells the waiter when the last one ran.
///
/// Each task captures a `&'static Countdown`: one pointer, as a real task
/// captures a reference to its data. So every pool has a closure of the same
/// size to store (threadpool and rayon box it; a zero-sized closure would let
/// them skip the allocation that no real task skips), and no harness
/// reference count is bumped per task (an `Arc` clone per task would measure
/// cache-line contention of the harness, not the pools).
struct Countdown {
    left: AtomicUsize,
    done: Mutex<bool>,
    done_cv: Condvar,
}

static COUNTDOWN: Countdown = Countdown {
    left: AtomicUsize::new(0),
    done: Mutex::new(false),
    done_cv: Condvar::new(),
};

/// What a task captures: a reference to the round's countdown.
type Counter = &'static Countdown;

impl Countdown {
    /// Arms the countdown for one round of `n` tasks (one round at a time).
    fn start(n: usize) -> Counter {
        *COUNTDOWN.done.lock().unwrap() = false;
        COUNTDOWN.left.store(n, Ordering::SeqCst);
        &COUNTDOWN
    }

    /// The task body: one atomic decrement; the last one signals.
    fn tick(&self) {
        if self.left.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self.done.lock().unwrap() = true;
            self.done_cv.notify_one();
        }
    }

    fn wait(&self, limit: Duration) {
        let guard = self.done.lock().unwrap();
        let (guard, timeout) = self
            .done_cv
            .wait_timeout_while(guard, limit, |done| !*done)
            .unwrap();
        assert!(*guard && !timeout.timed_out(), "every task ran");
    }
}

/// A pool under test: how to spawn a tiny job from outside, and how to run a
/// closure inside the pool that spawns the jobs itself.
trait System: Sync {
    fn name(&self) -> &'static str;
    /// Spawns `n` jobs from the calling (outside) thread.
    fn outside(&self, n: usize, c: Counter);
    /// Spawns one job that spawns the `n` jobs.
    fn inside(&self, n: usize, c: Counter);
}

/// tidepool with a name: the default (`Adaptive`) pool, `Fixed(cores)` to
/// show what the monitor costs on tiny tasks, and the default pool again.
struct Tidepool(&'static str, tidepool::Pool);
impl System for Tidepool {
    fn name(&self) -> &'static str {
        self.0
    }
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            drop(self.1.spawn_fn(move || c.tick()));
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        let pool = self.1.clone();
        drop(self.1.spawn_fn(move || {
            for _ in 0..n {
                drop(pool.spawn_fn(move || c.tick()));
            }
        }));
    }
}

/// tidepool's closures with no handle (`Pool::execute`).
struct TidepoolExecute(tidepool::Pool);
impl System for TidepoolExecute {
    fn name(&self) -> &'static str {
        "tidepool-execute"
    }
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            self.0.execute(move || c.tick()).expect("the pool runs");
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        let pool = self.0.clone();
        self.0
            .execute(move || {
                for _ in 0..n {
                    pool.execute(move || c.tick()).expect("the pool runs");
                }
            })
            .expect("the pool runs");
    }
}

/// tidepool's async tasks (`Pool::spawn` of an `async` block), the same
/// jobs as tokio's and async-executor's below.
struct TidepoolAsync(tidepool::Pool);
impl System for TidepoolAsync {
    fn name(&self) -> &'static str {
        "tidepool-async"
    }
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            drop(self.0.spawn(async move { c.tick() }));
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        let pool = self.0.clone();
        drop(self.0.spawn(async move {
            for _ in 0..n {
                drop(pool.spawn(async move { c.tick() }));
            }
        }));
    }
}

struct Tokio(tokio::runtime::Runtime);
impl System for Tokio {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            drop(self.0.spawn(async move { c.tick() }));
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        drop(self.0.spawn(async move {
            for _ in 0..n {
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
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            self.ex.spawn(async move { c.tick() }).detach();
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        let ex = self.ex.clone();
        self.ex
            .spawn(async move {
                for _ in 0..n {
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
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            self.0.spawn(move || c.tick());
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        self.0.spawn(move || {
            for _ in 0..n {
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
    fn outside(&self, n: usize, c: Counter) {
        for _ in 0..n {
            self.0.execute(move || c.tick());
        }
    }
    fn inside(&self, n: usize, c: Counter) {
        let pool = self.0.clone();
        self.0.execute(move || {
            for _ in 0..n {
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
            "tidepool",
            tidepool::Pool::builder().build().expect("tidepool pool"),
        )),
        Box::new(Tidepool(
            "tidepool-fixed",
            tidepool::Pool::builder()
                .concurrency(cores)
                .controller(tidepool::Controller::Fixed)
                .build()
                .expect("tidepool fixed pool"),
        )),
        Box::new(TidepoolExecute(
            tidepool::Pool::builder().build().expect("tidepool pool"),
        )),
        Box::new(TidepoolAsync(
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
        // The default pool once more, measured last: how far two identical
        // pools differ in one run is this machine's noise floor, the yardstick
        // for the Adaptive-vs-Fixed comparison.
        Box::new(Tidepool(
            "tidepool-again",
            tidepool::Pool::builder().build().expect("tidepool pool"),
        )),
    ]
}

/// Times `iters` rounds of `n` jobs spawned by `spawn`.
fn time_rounds(iters: u64, n: usize, spawn: impl Fn(usize, Counter)) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let countdown = Countdown::start(n);
        let start = Instant::now();
        spawn(n, countdown);
        countdown.wait(Duration::from_secs(120));
        total += start.elapsed();
    }
    total
}

fn spawn_many(c: &mut Criterion) {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let n = task_count();
    let systems = systems(cores);
    // One untimed round per system first, so every system meets an allocator
    // that has already grown its heap: without it, whichever system runs
    // first pays for that (measured: ~25% on the first system).
    for system in &systems {
        time_rounds(1, n, |n, countdown| system.outside(n, countdown));
        time_rounds(1, n, |n, countdown| system.inside(n, countdown));
    }
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
