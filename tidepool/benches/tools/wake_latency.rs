//! Start latency of a task spawned onto an idle pool, beside the peers: one
//! tiny task every 2 ms from outside the pool, so the workers park between
//! tasks and every spawn has to wake one. Measured from the spawn call to the
//! task's first instruction, on the task's own clock reading. `tp presumed`
//! is a closure of a kind known to block (presumed blocking: handed to a
//! parked worker as it is spawned), beside tokio's `spawn_blocking`. The last row,
//! `bare park`, is the floor under every pool that parks idle threads: one
//! thread woken with `Thread::unpark`.
//!
//! `cargo run --release --example wake_latency`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Spawns measured tasks with `spawn` and prints the latency percentiles.
fn measure(name: &str, spawn: &dyn Fn(Box<dyn FnOnce() + Send>)) {
    const TASKS: usize = 300;
    let started: &'static [AtomicU64] = Box::leak((0..TASKS).map(|_| AtomicU64::new(0)).collect());
    let origin = Instant::now();
    let mut spawned = Vec::with_capacity(TASKS);
    for slot in started {
        std::thread::sleep(Duration::from_millis(2));
        spawned.push(origin.elapsed().as_nanos() as u64);
        spawn(Box::new(move || {
            slot.store(origin.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }));
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut latencies: Vec<u64> = started
        .iter()
        .zip(&spawned)
        .map(|(start, spawn)| start.load(Ordering::Relaxed).saturating_sub(*spawn))
        .collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((TASKS as f64 * q) as usize).min(TASKS - 1)] as f64 / 1e3;
    println!(
        "{name:<14} p50 {:>6.1} us   p90 {:>6.1} us   p99 {:>6.1} us",
        at(0.5),
        at(0.9),
        at(0.99)
    );
}

/// The floor under every pool that parks its idle threads: one thread,
/// parked with `std::thread::park` (a futex wait), handed each closure
/// through a mutex and woken with `unpark`. No pool can start a task on a
/// parked thread sooner than this wake-up takes.
fn bare_park() -> impl Fn(Box<dyn FnOnce() + Send>) {
    use std::sync::{Arc, Mutex};
    type Slot = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;
    let slot: Slot = Arc::new(Mutex::new(None));
    let thread = {
        let slot = Arc::clone(&slot);
        std::thread::spawn(move || loop {
            let next = slot.lock().unwrap().take();
            match next {
                Some(f) => f(),
                None => std::thread::park(),
            }
        })
    };
    move |f| {
        *slot.lock().unwrap() = Some(f);
        thread.thread().unpark();
    }
}

fn main() {
    for round in 1..=3 {
        println!("round {round}");
        let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
        // A closure of its own type: a kind never taught to block.
        #[allow(clippy::redundant_closure)]
        measure("tidepool", &|f| drop(pool.spawn_fn(move || f())));
        // The same closure type (so the same kind), taught that it blocks:
        // each is presumed blocking and handed to a parked worker.
        let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
        let spawn_boxed = |f: Box<dyn FnOnce() + Send>| pool.spawn_fn(f);
        spawn_boxed(Box::new(|| tidepool::blocking(|| ())))
            .join()
            .unwrap();
        measure("tp presumed", &|f| drop(spawn_boxed(f)));
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        measure("tokio", &|f| drop(tokio.spawn(async move { f() })));
        measure("tokio blocking", &|f| drop(tokio.spawn_blocking(f)));
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        measure("rayon", &|f| rayon.spawn(f));
        let threadpool = threadpool::ThreadPool::new(2);
        measure("threadpool", &|f| threadpool.execute(f));
        measure("bare park", &bare_park());
    }
}
