//! How much CPU an idle pool uses: builds a default pool, gives it some work
//! (so its threads and monitor exist), then measures the CPU time of every
//! other thread of the process (the pool's workers, its monitor, async-io's
//! reactor) over 5 s of idleness.
//!
//! `cargo run --release --example idle_cpu`

use std::time::{Duration, Instant};

/// CPU time of every thread of this process except the calling one, in
/// nanoseconds: the first field of `/proc/self/task/<tid>/schedstat`
/// (nanosecond resolution, unlike getrusage's 10 ms ticks).
fn pool_cpu_nanos() -> u64 {
    let me = std::fs::read_link("/proc/thread-self").expect("Linux /proc");
    let me = me.file_name().expect("a tid").to_owned();
    std::fs::read_dir("/proc/self/task")
        .expect("Linux /proc")
        .filter_map(Result::ok)
        .filter(|task| task.file_name() != me)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn main() {
    let pool = tidepool::Pool::builder().build().expect("default pool");
    let handles: Vec<_> = (0..1000)
        .map(|_| pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(2))))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let before = pool_cpu_nanos();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let used = Duration::from_nanos(pool_cpu_nanos() - before);
    let share = used.as_secs_f64() / start.elapsed().as_secs_f64() * 100.0;
    let m = pool.metrics();
    println!(
        "idle for {:?}: {:?} of CPU ({share:.2}% of one core); threads {} (idle {}), monitor busy {:?} in total",
        start.elapsed(),
        used,
        m.threads,
        m.idle_threads,
        m.monitor_busy
    );
}
