//! A recursion of `spawn_fn` and `JoinHandle::join` on a worker: the join
//! helps instead of blocking, so such a fork-join does not need more threads
//! than the pool's `concurrency`, whatever its depth. With a fork at every
//! call, helping waits nest other workers' subtrees; a fixed limit of 64
//! nested waits then made waits block and the pool start 12-17 threads (found
//! by tidepool-lab's `fork-join` experiment, `fine-spawn`). The limit is now
//! the worker's stack use.

use tidepool::Pool;

fn fib(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let first = tidepool::spawn_fn(move || fib(n - 1));
    let second = fib(n - 2);
    first.join().unwrap() + second
}

#[test]
fn spawn_fn_and_join_recursion_stays_near_concurrency() {
    // Helping waits nest on the worker's stack, and a debug build's frames
    // are several times a release build's: 8 MiB keeps this test about the
    // pool, not about debug frame sizes (2 MiB was enough in release).
    let pool = Pool::builder()
        .concurrency(2)
        .stack_size(8 << 20)
        .build()
        .unwrap();
    let got = pool.spawn_fn(|| fib(26)).join().unwrap();
    assert_eq!(got, 121_393);
    let m = pool.metrics();
    pool.shutdown().unwrap();
    // The slots and the spare parked at build: no join blocked, nothing
    // started on demand. The monitor may still replace a worker it found
    // asleep (on a busy machine, on a lock whose holder was preempted:
    // 1 or 2 replacements in 7 of 40 runs beside a busy loop); helping
    // joins themselves start nothing (12-17 threads when they blocked).
    let started = m.threads_started - m.threads_started_floor;
    assert!(
        m.declared_blocking == 0
            && m.threads_started_demand == 0
            && started == m.threads_started_compensation + m.threads_started_burst,
        "fib(26) with spawn_fn and join at every call started {} threads for a concurrency of 2 \
         (declared blocking {}, blocked detections {}, started for compensation {}, on demand {})",
        m.peak_threads,
        m.declared_blocking,
        m.blocked_detections,
        m.threads_started_compensation,
        m.threads_started_demand,
    );
}
