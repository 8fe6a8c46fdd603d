//! What tidepool's timers cost beside tokio's, in one process, repetitions
//! interleaved (tidepool, tokio, tidepool, ...), medians with (min-max):
//!
//! * `yield`: ns per `yield_now().await` in a loop, one task: the floor.
//! * `timeout`: ns per `timeout(1 s, yield_now()).await`: the yield plus a
//!   timer registered and dropped unfired, the common life of a timeout;
//!   `timeout cpu`: the process's CPU time per iteration meanwhile (a
//!   reactor thread woken for each new timer shows here, not above).
//! * `4 timeouts`: the same loop in 4 tasks at once (every worker busy),
//!   wall ns per iteration of all of them.
//! * `sleep 100us` / `sleep 1ms`: how late a `sleep` wakes, in µs past its
//!   duration (median of 200 sleeps in a row, one task), on an idle pool.
//! * `sleepers`: 1,000 tasks each sleep 1 ms 20 times, at once: the CPU
//!   time of the whole process per sleep (user + system, ns), what firing
//!   and waking dense timers costs.
//!
//! `cargo run --release --example timer_cost [repetitions]` (default 5)

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

const LOOPS: u32 = 200_000;
const SLEEPS: usize = 200;
const SLEEPERS: usize = 1_000;
const SLEEPS_EACH: u32 = 20;
const BUSY_TASKS: u32 = 4;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What the measurements need from a system.
struct System {
    name: &'static str,
    /// Runs the futures as tasks, at once, and waits for all of them.
    run_all: Box<dyn Fn(Vec<Boxed<()>>)>,
    sleep: fn(Duration) -> Boxed<()>,
    yield_now: fn() -> Boxed<()>,
    /// `timeout(duration, yield_now())`.
    timeout_yield: fn(Duration) -> Boxed<()>,
}

/// Wall and process CPU time of `f`, per `per`, in ns.
fn timed(per: f64, f: impl FnOnce()) -> (f64, f64) {
    let (start, cpu) = (Instant::now(), process_cpu());
    f();
    let wall = start.elapsed().as_nanos() as f64 / per;
    (wall, (process_cpu() - cpu).as_nanos() as f64 / per)
}

/// CPU time of the whole process so far (user + system).
fn process_cpu() -> Duration {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed local we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One repetition's figures, in the order of `NAMES`.
fn measure(system: &System) -> Vec<f64> {
    let (yield_now, timeout_yield) = (system.yield_now, system.timeout_yield);
    let (yield_ns, _) = timed(f64::from(LOOPS), || {
        (system.run_all)(vec![Box::pin(async move {
            for _ in 0..LOOPS {
                yield_now().await;
            }
        })]);
    });
    let loop_of = move |n: u32| -> Boxed<()> {
        Box::pin(async move {
            for _ in 0..n {
                timeout_yield(Duration::from_secs(1)).await;
            }
        })
    };
    let (timeout_ns, timeout_cpu_ns) =
        timed(f64::from(LOOPS), || (system.run_all)(vec![loop_of(LOOPS)]));
    let (busy_ns, _) = timed(f64::from(LOOPS), || {
        (system.run_all)(
            (0..BUSY_TASKS)
                .map(|_| loop_of(LOOPS / BUSY_TASKS))
                .collect(),
        );
    });
    let lateness = |duration: Duration| {
        let sleep = system.sleep;
        let late = std::sync::Arc::new(std::sync::Mutex::new(Vec::with_capacity(SLEEPS)));
        let record = std::sync::Arc::clone(&late);
        (system.run_all)(vec![Box::pin(async move {
            for _ in 0..SLEEPS {
                let start = Instant::now();
                sleep(duration).await;
                let past = start.elapsed() - duration;
                record.lock().unwrap().push(past.as_secs_f64() * 1e6);
            }
        })]);
        let mut late = late.lock().unwrap();
        median(&mut late)
    };
    let late_100us = lateness(Duration::from_micros(100));
    let late_1ms = lateness(Duration::from_millis(1));
    let sleep = system.sleep;
    let (_, sleepers_cpu_ns) = timed(SLEEPERS as f64 * f64::from(SLEEPS_EACH), || {
        (system.run_all)(
            (0..SLEEPERS)
                .map(|_| -> Boxed<()> {
                    Box::pin(async move {
                        for _ in 0..SLEEPS_EACH {
                            sleep(Duration::from_millis(1)).await;
                        }
                    })
                })
                .collect(),
        );
    });
    vec![
        yield_ns,
        timeout_ns,
        timeout_cpu_ns,
        busy_ns,
        late_100us,
        late_1ms,
        sleepers_cpu_ns,
    ]
}

const NAMES: [&str; 7] = [
    "yield ns",
    "timeout ns",
    "timeout cpu ns",
    "4 timeouts ns",
    "sleep 100us late us",
    "sleep 1ms late us",
    "sleepers cpu ns/sleep",
];

fn main() {
    let repetitions: usize = std::env::args()
        .nth(1)
        .map_or(5, |n| n.parse().expect("repetitions: a whole number"));
    let pool = tidepool::Pool::builder().build().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let systems = [
        System {
            name: "tidepool",
            run_all: Box::new(move |futures| {
                let tasks: Vec<_> = futures.into_iter().map(|f| pool.spawn(f)).collect();
                tasks.into_iter().for_each(|task| task.join().unwrap());
            }),
            sleep: |d| {
                Box::pin(async move {
                    tidepool::sleep(d).await;
                })
            },
            yield_now: || Box::pin(tidepool::yield_now()),
            timeout_yield: |d| {
                Box::pin(async move {
                    let _ = tidepool::timeout(d, tidepool::yield_now()).await;
                })
            },
        },
        System {
            name: "tokio",
            run_all: Box::new(move |futures| {
                let tasks: Vec<_> = futures.into_iter().map(|f| runtime.spawn(f)).collect();
                for task in tasks {
                    runtime.block_on(task).unwrap();
                }
            }),
            sleep: |d| Box::pin(tokio::time::sleep(d)),
            yield_now: || Box::pin(tokio::task::yield_now()),
            timeout_yield: |d| {
                Box::pin(async move {
                    let _ = tokio::time::timeout(d, tokio::task::yield_now()).await;
                })
            },
        },
    ];
    let mut figures: Vec<Vec<Vec<f64>>> = vec![Vec::new(); systems.len()];
    for _ in 0..repetitions {
        for (system, runs) in systems.iter().zip(&mut figures) {
            runs.push(measure(system));
        }
    }
    for (system, runs) in systems.iter().zip(&figures) {
        let columns: Vec<String> = NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut values: Vec<f64> = runs.iter().map(|run| run[i]).collect();
                let m = median(&mut values);
                format!(
                    "{name} {m:.1} ({:.1}-{:.1})",
                    values[0],
                    values[values.len() - 1]
                )
            })
            .collect();
        println!("{:<9} {}", system.name, columns.join("   "));
    }
}
