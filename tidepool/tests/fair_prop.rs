//! Property tests: random mixes of priorities, groups, pairs, limits,
//! closures and async tasks that yield and sleep. Checked inside the tasks
//! with atomic high-water marks: no group exceeds `max_concurrency` or
//! `max_in_flight`, no exclusive run overlaps any run of its pair, and every
//! task runs exactly once.

use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tidepool::{Pool, Priority};

#[derive(Clone, Debug)]
struct GroupSpec {
    max_concurrency: Option<usize>,
    max_in_flight: Option<usize>,
    weight: u32,
    priority: Priority,
}

#[derive(Clone, Debug)]
enum Body {
    /// A closure spinning for about this many microseconds.
    Closure(u64),
    /// An async task: per step, a yield (0) or a short sleep (microseconds),
    /// with a little work between steps.
    Async(Vec<u64>),
}

#[derive(Clone, Debug)]
enum Target {
    Group(usize),
    Concurrent,
    Exclusive,
}

#[derive(Clone, Debug)]
struct Case {
    concurrency: usize,
    groups: Vec<GroupSpec>,
    pair_max: usize,
    tasks: Vec<(Target, Body)>,
}

fn priority() -> impl Strategy<Value = Priority> {
    prop_oneof![
        Just(Priority::High),
        Just(Priority::Normal),
        Just(Priority::Low)
    ]
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        (0..200u64).prop_map(Body::Closure),
        prop::collection::vec(prop_oneof![Just(0u64), 50..400u64], 1..4).prop_map(Body::Async),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let group = (
        prop::option::of(1..4usize),
        prop::option::of(1..5usize),
        1..4u32,
        priority(),
    )
        .prop_map(
            |(max_concurrency, max_in_flight, weight, priority)| GroupSpec {
                max_concurrency,
                max_in_flight,
                weight,
                priority,
            },
        );
    (1..4usize, prop::collection::vec(group, 1..4), 1..4usize).prop_flat_map(
        |(concurrency, groups, pair_max)| {
            let n = groups.len();
            let target = prop_oneof![
                6 => (0..n).prop_map(Target::Group),
                2 => Just(Target::Concurrent),
                1 => Just(Target::Exclusive),
            ];
            prop::collection::vec((target, body()), 1..120).prop_map(move |tasks| Case {
                concurrency,
                groups: groups.clone(),
                pair_max,
                tasks,
            })
        },
    )
}

/// Now/peak counters for one limit.
#[derive(Default)]
struct Mark {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Mark {
    fn enter(&self) -> usize {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        now
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a task checks around each of its runs.
#[derive(Clone)]
struct Probe {
    running: Arc<Mark>,
    in_flight: Arc<Mark>,
    /// The pair's runs: concurrent ones count 1, exclusive ones 1000.
    pair: Option<(Arc<AtomicUsize>, bool)>,
    overlaps: Arc<AtomicUsize>,
}

impl Probe {
    fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        self.running.enter();
        if let Some((pair, exclusive)) = &self.pair {
            let add = if *exclusive { 1000 } else { 1 };
            let before = pair.fetch_add(add, Ordering::SeqCst);
            if (*exclusive && before != 0) || (!*exclusive && before >= 1000) {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            let r = f();
            pair.fetch_sub(add, Ordering::SeqCst);
            self.running.leave();
            r
        } else {
            let r = f();
            self.running.leave();
            r
        }
    }
}

fn spin(micros: u64) {
    let end = std::time::Instant::now() + Duration::from_micros(micros);
    while std::time::Instant::now() < end {
        std::hint::spin_loop();
    }
}

fn check(case: Case) -> Result<(), TestCaseError> {
    let pool = Pool::builder()
        .concurrency(case.concurrency)
        .build()
        .unwrap();
    let groups: Vec<_> = case
        .groups
        .iter()
        .map(|spec| {
            let mut b = pool.group().weight(spec.weight).priority(spec.priority);
            if let Some(n) = spec.max_concurrency {
                b = b.max_concurrency(n);
            }
            if let Some(n) = spec.max_in_flight {
                b = b.max_in_flight(n);
            }
            (
                b.build().unwrap(),
                Arc::new(Mark::default()),
                Arc::new(Mark::default()),
            )
        })
        .collect();
    let (concurrent, exclusive) = pool.concurrent_exclusive(case.pair_max).unwrap();
    let pair_running = Arc::new(Mark::default());
    let pair_in_flight = Arc::new(Mark::default());
    let pair_state = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let runs: Arc<Vec<AtomicUsize>> =
        Arc::new((0..case.tasks.len()).map(|_| AtomicUsize::new(0)).collect());

    let mut handles = Vec::new();
    for (index, (target, body)) in case.tasks.iter().cloned().enumerate() {
        let probe = match &target {
            Target::Group(g) => Probe {
                running: Arc::clone(&groups[*g].1),
                in_flight: Arc::clone(&groups[*g].2),
                pair: None,
                overlaps: Arc::clone(&overlaps),
            },
            Target::Concurrent | Target::Exclusive => Probe {
                running: Arc::clone(&pair_running),
                in_flight: Arc::clone(&pair_in_flight),
                pair: Some((Arc::clone(&pair_state), matches!(target, Target::Exclusive))),
                overlaps: Arc::clone(&overlaps),
            },
        };
        let runs = Arc::clone(&runs);
        let handle = match body {
            Body::Closure(micros) => {
                let work = move || {
                    probe.in_flight.enter();
                    probe.run(|| spin(micros));
                    probe.in_flight.leave();
                    runs[index].fetch_add(1, Ordering::SeqCst);
                };
                match target {
                    Target::Group(g) => groups[g].0.spawn_fn(work),
                    Target::Concurrent => concurrent.spawn_fn(work),
                    Target::Exclusive => exclusive.spawn_fn(work),
                }
            }
            Body::Async(steps) => {
                let future = async move {
                    // The first poll starts here: count in-flight from it.
                    probe.run(|| probe.in_flight.enter());
                    for step in steps {
                        if step == 0 {
                            futures_lite::future::yield_now().await;
                        } else {
                            tidepool::sleep(Duration::from_micros(step)).await;
                        }
                        probe.run(|| spin(20));
                    }
                    probe.run(|| {
                        probe.in_flight.leave();
                        runs[index].fetch_add(1, Ordering::SeqCst);
                    });
                };
                match target {
                    Target::Group(g) => groups[g].0.spawn(future),
                    Target::Concurrent => concurrent.spawn(future),
                    Target::Exclusive => exclusive.spawn(future),
                }
            }
        };
        handles.push(handle);
    }
    for handle in handles {
        handle.join().unwrap();
    }
    for (i, r) in runs.iter().enumerate() {
        prop_assert_eq!(
            r.load(Ordering::SeqCst),
            1,
            "task {} ran a wrong number of times",
            i
        );
    }
    prop_assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "an exclusive run overlapped its pair"
    );
    for (spec, (group, running, in_flight)) in case.groups.iter().zip(&groups) {
        let peak_running = running.peak.load(Ordering::SeqCst);
        let peak_in_flight = in_flight.peak.load(Ordering::SeqCst);
        if let Some(max) = spec.max_concurrency {
            prop_assert!(
                peak_running <= max,
                "running peak {} > {}",
                peak_running,
                max
            );
        }
        if let Some(max) = spec.max_in_flight {
            prop_assert!(
                peak_in_flight <= max,
                "in-flight peak {} > {}",
                peak_in_flight,
                max
            );
        }
        let m = group.metrics();
        prop_assert_eq!(m.spawned, m.completed);
    }
    prop_assert!(pair_running.peak.load(Ordering::SeqCst) <= case.pair_max);
    pool.shutdown().unwrap();
    Ok(())
}

#[test]
fn groups_and_pairs_keep_their_limits() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let config = ProptestConfig {
            cases: 96,
            // Shrinking replays whole pools; keep a failure report quick.
            max_shrink_iters: 64,
            ..ProptestConfig::default()
        };
        let result = proptest::test_runner::TestRunner::new(config).run(&case(), check);
        let _ = tx.send(result.map_err(|e| e.to_string()));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(result) => result.unwrap(),
        Err(_) => panic!("property test hung past the hang timeout"),
    }
}
