//! The `fork-join` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::time::{Duration, Instant};

mod workloads;

use super::{metric_bars, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::probe::{self, ThreadSampler};
use crate::report::summary::{count, median, ms, times};
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, shutdown_pool, TidepoolConfig};
use std::fmt::Write as _;
use workloads::*;

/// What the experiment shows.
const ABOUT: &str = "Divide and conquer: a recursive Fibonacci with a sequential cutoff, the \
same with a fork at every call (so the fork itself is the work), and an in-place quicksort of \
random integers that splits at the median. Each runs on tidepool's join and scope (which \
borrow from the caller's stack, and whose waits help rather than block), on rayon::join, and \
the old way, spawn_fn and JoinHandle::join, whose closures must be 'static: the quicksort \
then moves each half out as an owned Vec and copies it back. A sequential run of each gives \
the time on one thread. Then four workloads of parallel iterators, one code for both \
libraries (only `use tidepool::prelude::*` or `use rayon::prelude::*` differs): a sum of squares \
over a Vec<u64>, a filter collected into a Vec, par_sort_unstable of u64s, and a word count \
that maps text chunks to counts and reduces them.";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "fork-join",
    about: ABOUT,
    summary: "Recursive divide and conquer: tidepool's join and scope beside rayon::join.",
    question: "Are tidepool's join and parallel iterators as fast as rayon's, and how many threads does join use?",
    verdict,
    scale: describe_scale,
    headline: "wall_ms",
    baseline: FIB_RAYON,
    baselines: &[
        ("fine-join", FINE_RAYON),
        ("fine-scope", FINE_RAYON),
        ("fine-spawn", FINE_RAYON),
        (FINE_RAYON, FINE_RAYON),
        ("fine-sequential", FINE_RAYON),
        ("sort-join", SORT_RAYON),
        ("sort-scope", SORT_RAYON),
        ("sort-spawn", SORT_RAYON),
        (SORT_RAYON, SORT_RAYON),
        ("sort-sequential", SORT_RAYON),
        ("sumsq-iter", "sumsq-rayon"),
        ("sumsq-rayon", "sumsq-rayon"),
        ("filter-iter", "filter-rayon"),
        ("filter-rayon", "filter-rayon"),
        ("psort-iter", "psort-rayon"),
        ("psort-rayon", "psort-rayon"),
        ("words-iter", "words-rayon"),
        ("words-rayon", "words-rayon"),
    ],
    headlines: &[],
    runs: &[
        RunSpec {
            id: "fib-join",
            system: "tidepool",
            description: "Fibonacci with Pool::join, then tidepool::join at every level above the cutoff.",
            execute: |ctx| run(ctx, Work::Fib, Via::Join),
        },
        RunSpec {
            id: "fib-scope",
            system: "tidepool",
            description: "Fibonacci with tidepool::scope: fib(n-1) spawned in the scope, fib(n-2) run by its owner.",
            execute: |ctx| run(ctx, Work::Fib, Via::Scope),
        },
        RunSpec {
            id: "fib-spawn",
            system: "tidepool",
            description: "Fibonacci with tidepool::spawn_fn(fib(n-1)), fib(n-2) here, then JoinHandle::join (which helps on a worker).",
            execute: |ctx| run(ctx, Work::Fib, Via::Spawn),
        },
        RunSpec {
            id: FIB_RAYON,
            system: "rayon",
            description: "Fibonacci with rayon::join inside ThreadPool::install, one thread per core.",
            execute: |ctx| run(ctx, Work::Fib, Via::Rayon),
        },
        RunSpec {
            id: "fib-sequential",
            system: "sequential",
            description: "Fibonacci on the lab's own thread, no pool.",
            execute: |ctx| run(ctx, Work::Fib, Via::Sequential),
        },
        RunSpec {
            id: "fine-join",
            system: "tidepool",
            description: "Fibonacci with a fork at every call (no cutoff), tidepool::join.",
            execute: |ctx| run(ctx, Work::Fine, Via::Join),
        },
        RunSpec {
            id: "fine-scope",
            system: "tidepool",
            description: "Fibonacci with a fork at every call (no cutoff), tidepool::scope.",
            execute: |ctx| run(ctx, Work::Fine, Via::Scope),
        },
        RunSpec {
            id: "fine-spawn",
            system: "tidepool",
            description: "Fibonacci with a fork at every call (no cutoff), spawn_fn and JoinHandle::join.",
            execute: |ctx| run(ctx, Work::Fine, Via::Spawn),
        },
        RunSpec {
            id: FINE_RAYON,
            system: "rayon",
            description: "Fibonacci with a fork at every call (no cutoff), rayon::join.",
            execute: |ctx| run(ctx, Work::Fine, Via::Rayon),
        },
        RunSpec {
            id: "fine-sequential",
            system: "sequential",
            description: "Fibonacci without forks on the lab's own thread: what the forks cost on top.",
            execute: |ctx| run(ctx, Work::Fine, Via::Sequential),
        },
        RunSpec {
            id: "sort-join",
            system: "tidepool",
            description: "Quicksort of borrowed halves (split_at_mut) with Pool::join, then tidepool::join.",
            execute: |ctx| run(ctx, Work::Sort, Via::Join),
        },
        RunSpec {
            id: "sort-scope",
            system: "tidepool",
            description: "Quicksort of borrowed halves with tidepool::scope: one half spawned, the other sorted by the owner.",
            execute: |ctx| run(ctx, Work::Sort, Via::Scope),
        },
        RunSpec {
            id: "sort-spawn",
            system: "tidepool",
            description: "Quicksort with spawn_fn and JoinHandle::join: each right half is moved out as an owned Vec ('static) and copied back after the join.",
            execute: |ctx| run(ctx, Work::Sort, Via::Spawn),
        },
        RunSpec {
            id: SORT_RAYON,
            system: "rayon",
            description: "Quicksort of borrowed halves with rayon::join inside ThreadPool::install.",
            execute: |ctx| run(ctx, Work::Sort, Via::Rayon),
        },
        RunSpec {
            id: "sort-sequential",
            system: "sequential",
            description: "slice::sort_unstable on the lab's own thread.",
            execute: |ctx| run(ctx, Work::Sort, Via::Sequential),
        },
        RunSpec {
            id: "sumsq-iter",
            system: "tidepool",
            description: "Sum of squares, values.par_iter().map(|v| v * v).sum(), with tidepool::prelude inside Pool::scope.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::SumOfSquares), Via::Iter),
        },
        RunSpec {
            id: "sumsq-rayon",
            system: "rayon",
            description: "Sum of squares, the same code with rayon::prelude inside ThreadPool::install.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::SumOfSquares), Via::Rayon),
        },
        RunSpec {
            id: "filter-iter",
            system: "tidepool",
            description: "values.par_iter().copied().filter(multiple of 3).collect::<Vec<u64>>(), with tidepool::prelude inside Pool::scope.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::FilterCollect), Via::Iter),
        },
        RunSpec {
            id: "filter-rayon",
            system: "rayon",
            description: "The same filter and collect with rayon::prelude inside ThreadPool::install.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::FilterCollect), Via::Rayon),
        },
        RunSpec {
            id: "psort-iter",
            system: "tidepool",
            description: "values.par_sort_unstable() of u64s, with tidepool::prelude inside Pool::scope.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::ParSort), Via::Iter),
        },
        RunSpec {
            id: "psort-rayon",
            system: "rayon",
            description: "values.par_sort_unstable() of the same u64s with rayon::prelude inside ThreadPool::install.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::ParSort), Via::Rayon),
        },
        RunSpec {
            id: "words-iter",
            system: "tidepool",
            description: "Word count: text chunks mapped to HashMaps of counts and reduced by merging, with tidepool::prelude inside Pool::scope.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::WordCount), Via::Iter),
        },
        RunSpec {
            id: "words-rayon",
            system: "rayon",
            description: "The same word count with rayon::prelude inside ThreadPool::install.",
            execute: |ctx| run(ctx, Work::Iter(IterWork::WordCount), Via::Rayon),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 5,
    rotate: false,
};

/// rayon on the Fibonacci with a cutoff: the baseline of the `fib-` runs.
const FIB_RAYON: &str = "fib-rayon";
/// rayon on the Fibonacci without a cutoff.
const FINE_RAYON: &str = "fine-rayon";
/// rayon on the quicksort.
const SORT_RAYON: &str = "sort-rayon";

/// The workloads, by the prefix of their run ids.
const WORKLOADS: [&str; 7] = ["fib", "fine", "sort", "sumsq", "filter", "psort", "words"];

/// The workloads of recursive joins: tidepool's `-join` run against `-rayon`.
const JOIN_WORKLOADS: [&str; 3] = ["fib", "fine", "sort"];

/// The workloads of parallel iterators: tidepool's `-iter` run against `-rayon`.
const ITER_WORKLOADS: [&str; 4] = ["sumsq", "filter", "psort", "words"];

/// Counts at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// fib(n) with a cutoff...
    fib_n: u32,
    /// ...below which it runs sequentially.
    fib_cutoff: u32,
    /// fib(n) with a fork at every call.
    fine_n: u32,
    /// Integers to sort (before `--items`).
    sort_len: usize,
    /// u64s summed, squared, and filtered (before `--items`).
    iter_len: usize,
    /// u64s sorted by `par_sort_unstable` (before `--items`).
    psort_len: usize,
    /// Words counted (before `--items`).
    words: usize,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        fib_n: 40,
        fib_cutoff: 20,
        fine_n: 30,
        sort_len: 10_000_000,
        iter_len: 10_000_000,
        psort_len: 10_000_000,
        words: 10_000_000,
    },
    quick: Params {
        fib_n: 36,
        fib_cutoff: 18,
        fine_n: 26,
        sort_len: 2_000_000,
        iter_len: 2_000_000,
        psort_len: 2_000_000,
        words: 2_000_000,
    },
    tiny: Params {
        fib_n: 24,
        fib_cutoff: 12,
        fine_n: 16,
        sort_len: 50_000,
        iter_len: 50_000,
        psort_len: 50_000,
        words: 50_000,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "fib({}) sequential below fib({}), fib({}) with a fork per call, quicksort of {} integers; \
         parallel iterators over {} u64s (sum of squares, filter), par_sort_unstable of {} u64s, \
         a word count of {} words",
        p.fib_n,
        p.fib_cutoff,
        p.fine_n,
        group_digits(p.sort_len as f64),
        group_digits(p.iter_len as f64),
        group_digits(p.psort_len as f64),
        group_digits(p.words as f64)
    )
}

/// A workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// Fibonacci with a sequential cutoff.
    Fib,
    /// Fibonacci with a fork at every call.
    Fine,
    /// Quicksort.
    Sort,
    /// Parallel iterators.
    Iter(IterWork),
}

/// A workload of parallel iterators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IterWork {
    /// The sum of the squares of u64s.
    SumOfSquares,
    /// The multiples of 3 among u64s, collected into a Vec.
    FilterCollect,
    /// `par_sort_unstable` of u64s.
    ParSort,
    /// A word count: text chunks mapped to counts, reduced by merging.
    WordCount,
}

/// How the halves are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `Pool::join`, then `tidepool::join`.
    Join,
    /// `tidepool::scope`.
    Scope,
    /// `spawn_fn` and `JoinHandle::join`.
    Spawn,
    /// `rayon::join`, or rayon's parallel iterators.
    Rayon,
    /// tidepool's parallel iterators (`tidepool::prelude`).
    Iter,
    /// No pool.
    Sequential,
}

/// The pool a run uses.
enum Runner {
    Tidepool(tidepool::Pool),
    Rayon(rayon::ThreadPool),
    None,
}

/// Runs one workload one way.
///
/// # Errors
///
/// When the pool cannot be built, a task panics, or the result is wrong.
fn run(ctx: &RunCtx, work: Work, via: Via) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    // The input is made before the pool and the clock.
    let input = match work {
        Work::Sort => random_integers(ctx.items_or(p.sort_len), 0x2545_f491_4f6c_dd1d),
        Work::Fib | Work::Fine | Work::Iter(_) => Vec::new(),
    };
    let numbers = match work {
        // Below 2^16, so no sum of squares overflows.
        Work::Iter(IterWork::SumOfSquares | IterWork::FilterCollect) => {
            random_u64s(ctx.items_or(p.iter_len), 0x9e37_79b9_7f4a_7c15)
                .into_iter()
                .map(|v| v >> 48)
                .collect()
        }
        Work::Iter(IterWork::ParSort) => {
            random_u64s(ctx.items_or(p.psort_len), 0xd1b5_4a32_d192_ed03)
        }
        _ => Vec::new(),
    };
    // par_sort_unstable sorts in place: its copy is made before the clock too.
    let mut to_sort = match work {
        Work::Iter(IterWork::ParSort) => numbers.clone(),
        _ => Vec::new(),
    };
    let text = match work {
        Work::Iter(IterWork::WordCount) => make_text(ctx.items_or(p.words), 0x2545_f491_4f6c_dd1d),
        _ => String::new(),
    };
    let chunks = text_chunks(&text, CHUNK_BYTES);
    let (n, cutoff) = match work {
        Work::Fib => (p.fib_n, p.fib_cutoff),
        Work::Fine => (p.fine_n, 1),
        Work::Sort | Work::Iter(_) => (0, 0),
    };
    let baseline = thread_baseline();
    let sampler = ThreadSampler::start(Duration::from_millis(5), baseline, false);
    let built = match via {
        Via::Join | Via::Scope | Via::Spawn | Via::Iter => {
            TidepoolConfig::default_pool().build().map(Runner::Tidepool)
        }
        Via::Rayon => rayon_pool(None).map(Runner::Rayon),
        Via::Sequential => Ok(Runner::None),
    };
    let pool = match built {
        Ok(runner) => runner,
        Err(e) => {
            sampler.finish();
            return Err(e);
        }
    };
    ctx.bar.phase("running");
    let t0 = Instant::now();
    let outcome = match work {
        Work::Fib | Work::Fine => fib_on(&pool, via, n, cutoff).map(Output::Fib),
        Work::Sort => sort_on(&pool, via, input.clone()).map(Output::Sorted),
        Work::Iter(kind) => iter_on(&pool, via, kind, &numbers, &mut to_sort, &chunks),
    };
    let wall = t0.elapsed();
    // A run shorter than the sampler's interval may end before its second
    // sample: count the threads once more while the pool is still up (the
    // sampler is one of them).
    let now = probe::thread_count().map_or(0, |t| t.saturating_sub(baseline + 1));
    let observed = sampler.finish();
    let (own_peak, concurrency) = match &pool {
        Runner::Tidepool(p) => (Some(p.metrics().peak_threads), p.concurrency()),
        Runner::Rayon(p) => (None, p.current_num_threads()),
        Runner::None => (None, 1),
    };
    ctx.bar.phase("shutting down");
    match pool {
        Runner::Tidepool(p) => shutdown_pool(&p),
        Runner::Rayon(p) => drop(p),
        Runner::None => {}
    }
    settle(baseline);

    let mut m = Measured::default();
    match outcome? {
        Output::Fib(got) => {
            let want = fib_iter(n);
            if got != want {
                return Err(format!("fib({n}) came out as {got}, expected {want}"));
            }
            m.put("wall_ms", wall.as_secs_f64() * 1e3);
            if via != Via::Sequential {
                m.put("forks", fib_forks(n, cutoff) as f64);
            }
        }
        Output::Sorted(sorted) => {
            check_sorted(&input, &sorted)?;
            m.put("wall_ms", wall.as_secs_f64() * 1e3);
            if via != Via::Sequential {
                m.put("forks", sort_forks(input.len()) as f64);
            }
            m.put("items", input.len() as f64);
        }
        Output::Sum(got) => {
            let want: u64 = numbers.iter().map(|v| v * v).sum();
            if got != want {
                return Err(format!(
                    "the sum of squares came out as {got}, expected {want}"
                ));
            }
            m.put("wall_ms", wall.as_secs_f64() * 1e3);
            m.put("items", numbers.len() as f64);
        }
        Output::Filtered(got) => {
            let want: Vec<u64> = numbers.iter().copied().filter(|v| v % 3 == 0).collect();
            if got != want {
                return Err(format!(
                    "the filter kept {} values, expected {} (in order)",
                    got.len(),
                    want.len()
                ));
            }
            m.put("wall_ms", wall.as_secs_f64() * 1e3);
            m.put("items", numbers.len() as f64);
        }
        Output::SortedInPlace => {
            check_sorted(&numbers, &to_sort)?;
            m.put("wall_ms", wall.as_secs_f64() * 1e3);
            m.put("items", numbers.len() as f64);
        }
        Output::Counts(got) => {
            let want = count_chunk(&text);
            if got != want {
                return Err(format!(
                    "the word count found {} distinct words, expected {}, or other counts",
                    got.len(),
                    want.len()
                ));
            }
            m.put("wall_ms", wall.as_secs_f64() * 1e3);
            m.put("items", want.values().sum::<u64>() as f64);
        }
    }
    let peak = own_peak.unwrap_or_else(|| probe::peak_threads(&observed).max(now));
    m.put("peak_threads", peak as f64);
    m.put("concurrency", concurrency as f64);
    m.note = Some(match work {
        Work::Fib => format!("fib({n}), sequential at fib({cutoff}) and below."),
        Work::Fine => format!("fib({n}), a fork per call down to fib(1)."),
        Work::Sort => format!(
            "{} integers, sort_unstable below {} (the run checks the result is sorted and the same integers).",
            group_digits(input.len() as f64),
            group_digits(SORT_CUTOFF as f64)
        ),
        Work::Iter(IterWork::SumOfSquares) => format!(
            "{} u64s below 65,536 (the run checks the sum against a sequential one).",
            group_digits(numbers.len() as f64)
        ),
        Work::Iter(IterWork::FilterCollect) => format!(
            "{} u64s below 65,536, a third kept (the run checks the Vec against a sequential filter, order included).",
            group_digits(numbers.len() as f64)
        ),
        Work::Iter(IterWork::ParSort) => format!(
            "{} random u64s (the run checks the result is sorted and the same integers).",
            group_digits(numbers.len() as f64)
        ),
        Work::Iter(IterWork::WordCount) => format!(
            "{} words of {} distinct at most, in {} chunks of about {} KiB (the run checks the counts against a sequential count).",
            group_digits(ctx.items_or(p.words) as f64),
            group_digits(f64::from(VOCABULARY)),
            group_digits(chunks.len() as f64),
            CHUNK_BYTES / 1024
        ),
    });
    Ok(m)
}

// ---- Report ----------------------------------------------------------------

/// Wall time, a bar chart per workload.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let captions = [
        "Fibonacci with a cutoff: the forks are few, so the ways of forking should differ little; on an idle machine each approaches the sequential time divided by the cores.",
        "A fork at every call: the cost of a fork itself. join and rayon::join fork on the stack; scope and spawn_fn allocate per fork.",
        "Quicksort: the same splits everywhere; sort-spawn also copies each half out and back, the price of 'static closures.",
        "Sum of squares with parallel iterators, the same code on tidepool's and rayon's: the splitting and the joins around a loop bound by memory.",
        "A filter collected into a Vec, order kept: each library's splitting and its way of joining the pieces' results.",
        "par_sort_unstable: each library's parallel sort (tidepool's cuts at the median, whose search is sequential).",
        "A word count, text chunks mapped to HashMaps and reduced by merging: few, long items.",
    ];
    WORKLOADS
        .iter()
        .zip(captions)
        .filter_map(|(prefix, caption)| {
            let mine: Vec<RunResult> = runs
                .iter()
                .filter(|r| r.spec.id.starts_with(&format!("{prefix}-")))
                .cloned()
                .collect();
            let bars = metric_bars(&mine, "wall_ms");
            (!bars.is_empty()).then(|| {
                Plot::bars(
                    &format!("fork-join-{prefix}"),
                    (&format!("Wall time, {prefix} (lower is better)"), caption),
                    "wall time, ms",
                    bars,
                )
            })
        })
        .collect()
}

/// The goal for the threads a fork-join uses: the pool's concurrency and
/// two more.
const SPARE_THREADS: f64 = 2.0;
/// The goal for tidepool's join: within this factor of rayon::join.
const WITHIN: f64 = 1.2;

/// The summary's answer: the joins' part, then the parallel iterators'.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    match (join_verdict(exp), iter_verdict(exp)) {
        (Some(joins), Some(iterators)) => Some(format!("{joins} {iterators}")),
        (joins, iterators) => joins.or(iterators),
    }
}

/// Per workload of parallel iterators, tidepool's against rayon's, and
/// whether the worst is within the goal.
fn iter_verdict(exp: &ExperimentResult) -> Option<String> {
    let wall = |id: &str| median(exp, id, "wall_ms");
    let mut s = String::from("Parallel iterators: ");
    let mut worst: Option<(f64, &str)> = None;
    for prefix in ITER_WORKLOADS {
        let (Some(ours), Some(rayon)) = (
            wall(&format!("{prefix}-iter")),
            wall(&format!("{prefix}-rayon")),
        ) else {
            continue;
        };
        let x = ours / rayon;
        if worst.is_some() {
            s.push_str("; ");
        }
        if worst.is_none_or(|(w, _)| x > w) {
            worst = Some((x, prefix));
        }
        let _ = write!(
            s,
            "{prefix} {} vs rayon's {} ({})",
            ms(ours),
            ms(rayon),
            times(ours, rayon)
        );
    }
    let (x, prefix) = worst?;
    if x <= WITHIN {
        let _ = write!(s, ". Within {WITHIN}x of rayon's on every workload.");
    } else {
        let _ = write!(
            s,
            ". {} rayon's on {prefix}, outside the {WITHIN}x goal.",
            times(x, 1.0)
        );
    }
    Some(s)
}

/// Per workload of joins, tidepool's join against rayon's, the other ways
/// in passing, and the threads join used.
fn join_verdict(exp: &ExperimentResult) -> Option<String> {
    let wall = |id: &str| median(exp, id, "wall_ms");
    let mut s = String::new();
    let mut worst: Option<(f64, &str)> = None;
    let mut threads: Option<(f64, f64)> = None;
    for prefix in JOIN_WORKLOADS {
        let (Some(ours), Some(rayon)) = (
            wall(&format!("{prefix}-join")),
            wall(&format!("{prefix}-rayon")),
        ) else {
            continue;
        };
        let x = ours / rayon;
        if worst.is_none_or(|(w, _)| x > w) {
            worst = Some((x, prefix));
        }
        if !s.is_empty() {
            s.push_str("; ");
        }
        let _ = write!(
            s,
            "{prefix}: join {} vs rayon::join {} ({})",
            ms(ours),
            ms(rayon),
            times(ours, rayon)
        );
        for (way, label) in [("scope", "scope"), ("spawn", "spawn_fn+join")] {
            if let Some(v) = wall(&format!("{prefix}-{way}")) {
                let _ = write!(s, ", {label} {}", times(v, rayon));
            }
        }
        if let Some(seq) = wall(&format!("{prefix}-sequential")) {
            let _ = write!(s, ", one thread {}", ms(seq));
        }
        let id = format!("{prefix}-join");
        if let (Some(t), Some(c)) = (
            median(exp, &id, "peak_threads"),
            median(exp, &id, "concurrency"),
        ) {
            if threads.is_none_or(|(most, _)| t > most) {
                threads = Some((t, c));
            }
        }
    }
    let (x, prefix) = worst?;
    let _ = write!(s, ". Verdict: tidepool's join is ");
    if x <= WITHIN {
        let _ = write!(s, "within {WITHIN}x of rayon::join on every workload");
    } else {
        let _ = write!(
            s,
            "{} rayon::join on {prefix}, outside the {WITHIN}x goal",
            times(x, 1.0)
        );
    }
    match threads {
        Some((t, c)) => {
            let goal = c + SPARE_THREADS;
            let _ = write!(
                s,
                ", with at most {} for a concurrency of {c:.0} ({} the goal of {goal:.0}).",
                count(t, "thread", "threads"),
                if t <= goal { "within" } else { "above" }
            );
        }
        None => s.push('.'),
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::testing::{done_run, result_of};
    use std::collections::HashMap;

    /// Row `id`, finished in `ms` of wall time.
    fn done(id: &str, ms: f64) -> RunResult {
        done_run(&EXPERIMENT, id, &[("wall_ms", ms)])
    }

    #[test]
    fn the_sequential_pieces_are_right() {
        assert_eq!(fib_seq(20), fib_iter(20));
        assert_eq!(fib_iter(40), 102_334_155);
        // fib(3) forks at 3 and 2 with a cutoff of 1.
        assert_eq!(fib_forks(3, 1), 2);
        assert_eq!(fib_forks(5, 5), 0);
        assert_eq!(sort_forks(SORT_CUTOFF), 0);
        assert_eq!(sort_forks(SORT_CUTOFF * 2 + 1), 1);
        let v = random_integers(1000, 7);
        let mut s = v.clone();
        s.sort_unstable();
        assert!(check_sorted(&v, &s).is_ok());
        assert!(check_sorted(&v, &v).is_err());
    }

    #[test]
    fn each_workload_is_compared_with_its_own_rayon_run() {
        use crate::report::table::{ratio_header, table};
        let exp = result_of(
            &EXPERIMENT,
            vec![
                done("fib-join", 100.0),
                done(FIB_RAYON, 50.0),
                done("sort-join", 30.0),
                done(SORT_RAYON, 30.0),
            ],
        );
        let t = table(&exp);
        let ratio = t
            .header
            .iter()
            .position(|h| *h == ratio_header(&exp))
            .unwrap();
        let cells: Vec<&str> = t.rows.iter().map(|r| r[ratio].as_str()).collect();
        assert_eq!(cells, ["2.00x slower", "baseline", "same", "baseline"]);
        assert!(ratio_header(&exp).contains("lower is better"));
        let line = verdict(&exp).unwrap();
        assert!(
            line.contains("2.0x rayon::join on fib, outside the 1.2x goal"),
            "{line}"
        );
    }

    #[test]
    fn the_word_count_pieces_add_up() {
        let text = make_text(10_000, 7);
        assert_eq!(text.split_ascii_whitespace().count(), 10_000);
        let chunks = text_chunks(&text, 1_000);
        assert!(chunks.len() > 10);
        assert_eq!(chunks.concat(), text, "the chunks are the text");
        // No word is cut in two: each chunk but the first starts at a space.
        assert!(chunks[1..].iter().all(|c| c.starts_with([' ', '\n'])));
        let merged = chunks
            .iter()
            .map(|c| count_chunk(c))
            .fold(HashMap::new(), merge_counts);
        assert_eq!(merged, count_chunk(&text));
        assert_eq!(merged.values().sum::<u64>(), 10_000);
    }

    #[test]
    fn both_libraries_compute_the_same_iterator_workloads() {
        let numbers: Vec<u64> = random_u64s(20_000, 3)
            .into_iter()
            .map(|v| v >> 48)
            .collect();
        let text = make_text(20_000, 5);
        let chunks = text_chunks(&text, 4_096);
        for work in [
            IterWork::SumOfSquares,
            IterWork::FilterCollect,
            IterWork::ParSort,
            IterWork::WordCount,
        ] {
            let (mut ours, mut theirs) = (numbers.clone(), numbers.clone());
            let a = iter_on_tidepool::run(work, &numbers, &mut ours, &chunks);
            let b = iter_on_rayon::run(work, &numbers, &mut theirs, &chunks);
            match (a, b) {
                (Output::Sum(a), Output::Sum(b)) => assert_eq!(a, b),
                (Output::Filtered(a), Output::Filtered(b)) => assert_eq!(a, b),
                (Output::SortedInPlace, Output::SortedInPlace) => {
                    assert_eq!(ours, theirs);
                    assert!(check_sorted(&numbers, &ours).is_ok());
                }
                (Output::Counts(a), Output::Counts(b)) => assert_eq!(a, b),
                _ => panic!("{work:?}: different outputs"),
            }
        }
    }

    #[test]
    fn the_iterators_are_compared_with_rayons() {
        let exp = result_of(
            &EXPERIMENT,
            vec![
                done("sumsq-iter", 11.0),
                done("sumsq-rayon", 10.0),
                done("psort-iter", 30.0),
                done("psort-rayon", 20.0),
            ],
        );
        let line = verdict(&exp).unwrap();
        assert!(line.starts_with("Parallel iterators: sumsq"), "{line}");
        assert!(
            line.contains("1.5x rayon's on psort, outside the 1.2x goal"),
            "{line}"
        );
    }

    #[test]
    fn every_run_has_a_workload_and_its_baseline() {
        for r in EXPERIMENT.runs {
            let prefix = WORKLOADS
                .iter()
                .find(|p| r.id.starts_with(&format!("{p}-")))
                .unwrap_or_else(|| panic!("{} has no workload", r.id));
            assert_eq!(EXPERIMENT.baseline_of(r.id), format!("{prefix}-rayon"));
        }
    }
}
