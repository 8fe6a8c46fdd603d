//! What `tidepool::blocking` costs around a call, against the same call
//! inline (issue #40: "`blocking` costs what the call costs"). 2,000 async
//! tasks in flight on `concurrency(2)`, each making one call:
//!
//! - `cpu-1ms`, `cpu-3ms`: the call computes 1 or 3 ms of its own thread's
//!   CPU time (a call that is mostly CPU: a query on a warm cache);
//! - `sleep-50ms`: the call sleeps 50 ms.
//!
//! Each repetition runs in a process of its own (the tool runs itself), the
//! declared and inline rows alternating. It prints, per row, the median and
//! the spread (min-max) of: wall time, process CPU time, the pool's peak
//! threads, slots handed over by declared sections, and the mean start
//! latency of the tasks (from the spawn to the task's first poll).
//!
//! `cargo run --release --example declared_cost -- 5` (5 repetitions).

use std::time::{Duration, Instant};

/// Tasks in flight.
const TASKS: usize = 2_000;

/// The calls measured, by name.
const CALLS: [&str; 3] = ["cpu-1ms", "cpu-3ms", "sleep-50ms"];

fn main() {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("--one") => {
            let call = args.next().expect("a call");
            let declared = args.next().as_deref() == Some("declared");
            println!("{}", one(&call, declared));
        }
        other => {
            let reps: usize = other.and_then(|a| a.parse().ok()).unwrap_or(5);
            for call in CALLS {
                let mut rows = [Vec::new(), Vec::new()];
                for _ in 0..reps {
                    for (row, way) in rows.iter_mut().zip(["declared", "inline"]) {
                        row.push(in_child(call, way));
                    }
                }
                for (row, way) in rows.iter().zip(["declared", "inline"]) {
                    println!("{call} {way}: {}", summary(row));
                }
            }
        }
    }
}

/// One repetition in a fresh process: its figures, space-separated.
fn in_child(call: &str, way: &str) -> Vec<f64> {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--one", call, way])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect()
}

/// Median (min-max) of each figure over the repetitions.
fn summary(runs: &[Vec<f64>]) -> String {
    let names = [
        "wall ms",
        "cpu ms",
        "peak threads",
        "handed over",
        "mean start ms",
    ];
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
            v.sort_by(f64::total_cmp);
            format!(
                "{name} {:.1} ({:.1}-{:.1})",
                v[v.len() / 2],
                v[0],
                v[v.len() - 1]
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs the tasks; returns wall ms, CPU ms, peak threads, hand-overs and
/// mean start ms.
fn one(call: &str, declared: bool) -> String {
    let work: fn() = match call {
        "cpu-1ms" => || burn(Duration::from_millis(1)),
        "cpu-3ms" => || burn(Duration::from_millis(3)),
        "sleep-50ms" => || std::thread::sleep(Duration::from_millis(50)),
        other => panic!("unknown call {other}"),
    };
    let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
    let cpu = process_cpu();
    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let spawned = Instant::now();
            pool.spawn(async move {
                let waited = spawned.elapsed();
                if declared {
                    tidepool::blocking(work);
                } else {
                    work();
                }
                waited
            })
        })
        .collect();
    let waited: Duration = tasks.into_iter().map(|t| pool.block_on(t).unwrap()).sum();
    let wall = start.elapsed();
    let cpu = process_cpu() - cpu;
    let m = pool.metrics();
    format!(
        "{} {} {} {} {}",
        wall.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3,
        m.peak_threads,
        m.declared_blocking,
        waited.as_secs_f64() * 1e3 / TASKS as f64
    )
}

/// Computes until this thread has used `cpu` of CPU time.
fn burn(cpu: Duration) {
    let start = clock(libc::CLOCK_THREAD_CPUTIME_ID);
    while clock(libc::CLOCK_THREAD_CPUTIME_ID) - start < cpu {
        std::hint::black_box(0u64);
    }
}

/// The process's CPU time so far.
fn process_cpu() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// One of the kernel's CPU clocks.
fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration,
    // and both clock ids used here exist on every Unix this crate builds on.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({id})");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
