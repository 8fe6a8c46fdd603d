//! The `short-blocking` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::latency::{finish, rename, spread, threads_plot};
use super::paced::{measure, ItemProbe, Pace};
use super::per_item_plot;
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{count, median, ms, times};
use crate::report::table::group_digits;
use crate::systems::{tokio_runtime, System, TidepoolConfig};
use std::fmt::Write as _;

/// What the experiment shows.
const ABOUT: &str = "2,000 items that each block 2-5 ms, half in thread::sleep and half \
waiting on a std Mutex that another thread holds for that long, arrive at twice the rate \
one thread per core could serve (an item every 0.875 ms on 2 cores). A pool that keeps one \
thread per core falls behind and takes twice as long; a pool that notices the short blocks \
keeps up, if its monitor reacts within a few milliseconds; that monitor's CPU time should \
stay under 2% of a core.";

/// tidepool's default pool, the baseline.
pub(crate) const TIDEPOOL: &str = "tidepool";
/// tidepool's fixed pool with one thread per core.
pub(crate) const TIDEPOOL_FIXED: &str = "tidepool-fixed";
/// tokio's spawn_blocking.
pub(crate) const TOKIO: &str = "tokio-spawn-blocking";
/// The threadpool crate with 16 threads.
pub(crate) const THREADPOOL16: &str = "threadpool16";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "short-blocking",
    about: ABOUT,
    summary: "Items that block 2-5 ms, arriving faster than the cores serve them.",
    question: "Does a pool keep up with items that block only a few milliseconds?",
    verdict,
    scale: describe_scale,
    headline: "wall_ms",
    baseline: TIDEPOOL,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: TIDEPOOL,
            system: "tidepool",
            description: "The default pool (Adaptive), Pool::execute.",
            execute: |ctx| run(ctx, |_| TidepoolConfig::default_pool().build().map(System::Tidepool)),
        },
        RunSpec {
            id: TIDEPOOL_FIXED,
            system: "tidepool",
            description: "Controller::Fixed with concurrency = cores: one thread per core, no compensation.",
            execute: |ctx| run(ctx, |cores| TidepoolConfig::fixed(cores).build().map(System::Tidepool)),
        },
        RunSpec {
            id: TOKIO,
            system: "tokio",
            description: "tokio's spawn_blocking on a default multi-thread runtime (up to 512 blocking threads).",
            execute: |ctx| run(ctx, |_| tokio_runtime().map(System::TokioBlocking)),
        },
        RunSpec {
            id: THREADPOOL16,
            system: "threadpool",
            description: "threadpool::ThreadPool::execute with 16 threads.",
            execute: |ctx| run(ctx, |_| Ok(System::ThreadPool(threadpool::ThreadPool::new(16)))),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 5,
    rotate: false,
};

/// Shortest block of an item.
const BLOCK_MIN: Duration = Duration::from_millis(2);
/// Longest block of an item.
const BLOCK_MAX: Duration = Duration::from_millis(5);

/// Items at each scale (before `--items`).
const SCALES: ScaleTable<usize> = ScaleTable {
    full: 2000,
    quick: 500,
    tiny: 40,
};

fn describe_scale(scale: Scale) -> String {
    format!(
        "{} items of 2-5 ms at 2x the cores' rate",
        group_digits(SCALES.at(scale) as f64)
    )
}

/// Time between arrivals: twice the rate at which `cores` threads serve
/// items of the mean block (3.5 ms), so one thread per core falls behind.
fn interval(cores: usize) -> Duration {
    let mean = (BLOCK_MIN + BLOCK_MAX) / 2;
    mean / u32::try_from(2 * cores.max(1)).unwrap_or(u32::MAX)
}

/// Runs the items on the system `make` builds (given the cores).
///
/// Even items sleep, odd items wait on a held mutex, each for its own
/// 2-5 ms. The lock holder is started before the system, so its thread is
/// not counted as one of the system's.
///
/// # Errors
///
/// When the system cannot be built or items do not finish.
fn run(ctx: &RunCtx, make: fn(usize) -> Result<System, String>) -> Result<Measured, String> {
    let items = ctx.items_or(SCALES.at(ctx.scale));
    let every = interval(ctx.cores);
    let holder = LockHolder::start(items);
    let pace = Pace {
        items,
        interval: every,
        // Worst case: one thread for every item in turn.
        limit: BLOCK_MAX * u32::try_from(items).unwrap_or(u32::MAX) + Duration::from_secs(60),
    };
    let cores = ctx.cores;
    let result = measure(
        ctx,
        pace,
        || make(cores),
        |s: &System, probe: ItemProbe| {
            let i = probe.index();
            let block = spread(i, BLOCK_MIN, BLOCK_MAX);
            let lock = holder.client();
            s.spawn_fn(move || {
                probe.start();
                if i.is_multiple_of(2) {
                    thread::sleep(block);
                } else {
                    lock.wait(i, block);
                }
                probe.end();
            })
        },
        finish,
    );
    holder.stop();
    let mut m = result?;
    rename(&mut m, "wall_s", "wall_ms", 1e3);
    if let (Some(busy), Some(wall)) = (m.get("monitor_busy_ms"), m.get("wall_ms")) {
        if wall > 0.0 {
            m.put("monitor_cpu_pct", 100.0 * busy / wall);
        }
    }
    m.note = Some(format!(
        "{items} items, one every {:.3} ms ({cores} cores), each blocking 2-5 ms: even items in thread::sleep, odd ones on a std Mutex held by a separate thread. monitor_cpu_pct is tidepool's monitor_busy over the wall time.",
        every.as_secs_f64() * 1e3
    ));
    Ok(m)
}

/// A thread that holds mutexes on the items' behalf: an item asks it to
/// hold the item's own mutex until a deadline, waits for it to be taken,
/// then blocks in `lock()` until the holder lets go. One holder serves
/// every item, and each item has its own mutex, so items never wait for
/// each other, only for their own 2-5 ms.
struct LockHolder {
    client: LockClient,
    handle: thread::JoinHandle<()>,
}

/// What an item needs to wait on its mutex.
#[derive(Clone)]
struct LockClient {
    requests: mpsc::Sender<Hold>,
    locks: Arc<[Mutex<()>]>,
}

/// A request to hold mutex `index` until `until`; `taken` hears when it is.
struct Hold {
    index: usize,
    until: Instant,
    taken: mpsc::SyncSender<()>,
}

impl LockHolder {
    /// Starts the holder with one mutex per item.
    fn start(items: usize) -> LockHolder {
        let locks: Arc<[Mutex<()>]> = (0..items).map(|_| Mutex::new(())).collect();
        let (tx, rx) = mpsc::channel::<Hold>();
        let mine = locks.clone();
        let handle = thread::Builder::new()
            .name("lab-lock-holder".into())
            .spawn(move || hold_loop(&mine, &rx))
            .expect("cannot start the lab's lock holder thread");
        LockHolder {
            client: LockClient {
                requests: tx,
                locks,
            },
            handle,
        }
    }

    fn client(&self) -> LockClient {
        self.client.clone()
    }

    /// Stops the holder once every client is gone. Waits a few seconds at
    /// most: after a failed run an item may still hold a client, and the
    /// holder then ends with it.
    fn stop(self) {
        drop(self.client);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.handle.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        if self.handle.is_finished() {
            let _ = self.handle.join();
        }
    }
}

/// The holder's loop: take requested mutexes, let each go at its deadline.
/// Ends when every client has dropped its sender (and lets go of anything
/// still held).
fn hold_loop(locks: &[Mutex<()>], requests: &mpsc::Receiver<Hold>) {
    let mut held: Vec<(Instant, MutexGuard<'_, ()>)> = Vec::new();
    loop {
        let now = Instant::now();
        held.retain(|(until, _)| *until > now);
        let next = held.iter().map(|(until, _)| *until).min();
        let request = match next {
            Some(t) => requests.recv_timeout(t.saturating_duration_since(now)),
            None => requests
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match request {
            Ok(h) => {
                let guard = locks[h.index].lock().unwrap_or_else(|e| e.into_inner());
                held.push((h.until, guard));
                let _ = h.taken.send(());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

impl LockClient {
    /// Blocks about `block` in `Mutex::lock` on item `index`'s mutex.
    fn wait(&self, index: usize, block: Duration) {
        let until = Instant::now() + block;
        let (taken, is_taken) = mpsc::sync_channel(1);
        let asked = self.requests.send(Hold {
            index,
            until,
            taken,
        });
        if asked.is_err() || is_taken.recv().is_err() {
            // No holder (it cannot happen while the run lasts): wait anyway.
            thread::sleep(until.saturating_duration_since(Instant::now()));
            return;
        }
        drop(self.locks[index].lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Start latency by item and threads over time.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let ids = [TIDEPOOL, TIDEPOOL_FIXED, TOKIO, THREADPOOL16];
    let mut out = Vec::new();
    out.extend(per_item_plot(
        runs,
        &ids,
        "short-blocking-start-latency",
        (
            "Start latency by item: items that block 2-5 ms, at twice the cores' rate",
            "A line that climbs item after item means the pool served the items with too few threads and its queue grew; a flat line near the bottom means each item found a thread in time.",
        ),
        "item (arrival order)",
        "submit-to-start latency, ms (log)",
        true,
    ));
    out.extend(threads_plot(
        runs,
        &ids,
        "short-blocking-threads",
        (
            "Threads over time: items that block 2-5 ms",
            "How many threads each pool kept for the short blocks (the fixed pool stays at one per core, threadpool16 at 16).",
        ),
    ));
    out
}

/// The summary's answer: tidepool's wall time against spawn_blocking's and
/// the fixed pool's, and what its monitor cost.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let wall = |id| median(exp, id, "wall_ms");
    let ours = wall(TIDEPOOL)?;
    let items = median(exp, TIDEPOOL, "items").unwrap_or(0.0);
    let mut s = format!(
        "{} items that block 2-5 ms take {} on tidepool's default",
        group_digits(items),
        ms(ours)
    );
    let tokio = wall(TOKIO);
    if let Some(t) = tokio {
        let _ = write!(
            s,
            ", {} on tokio's spawn_blocking (tidepool {} of it)",
            ms(t),
            times(ours, t)
        );
    }
    for (id, what) in [
        (TIDEPOOL_FIXED, "a fixed pool of one thread per core"),
        (THREADPOOL16, "threadpool with 16 threads"),
    ] {
        if let Some(v) = wall(id) {
            let _ = write!(s, ", {} on {what}", ms(v));
        }
    }
    if let Some(p50) = median(exp, TIDEPOOL, "p50_start_ms") {
        let _ = write!(s, "; tidepool's median item starts after {}", ms(p50));
    }
    let cpu = median(exp, TIDEPOOL, "monitor_cpu_pct");
    if let Some(c) = cpu {
        let _ = write!(s, "; its monitor used {c:.2}% of a core");
    }
    if let Some(d) = median(exp, TIDEPOOL, "blocked_detections") {
        let _ = write!(
            s,
            " and found {}",
            count(d, "blocked item", "blocked items")
        );
    }
    s.push_str(". Verdict: ");
    let mut verdicts = Vec::new();
    match tokio {
        Some(t) if ours <= t * 1.1 => {
            verdicts.push("tidepool keeps up with spawn_blocking (within 10%)".to_string())
        }
        Some(t) => verdicts.push(format!(
            "tidepool takes {} as long as spawn_blocking: short blocks leave it behind",
            times(ours, t)
        )),
        None => {}
    }
    match cpu {
        Some(c) if c < 2.0 => verdicts.push("its monitor stays under 2% of a core".to_string()),
        Some(c) => verdicts.push(format!(
            "its monitor costs {c:.1}% of a core, over the 2% goal"
        )),
        None => {}
    }
    if verdicts.is_empty() {
        verdicts.push("compare with tokio-spawn-blocking for a verdict".into());
    }
    s.push_str(&verdicts.join("; "));
    s.push('.');
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twice_the_cores_rate() {
        assert_eq!(interval(2), Duration::from_micros(875));
        assert_eq!(interval(1), Duration::from_micros(1750));
    }

    #[test]
    fn an_item_waits_on_its_held_mutex() {
        let holder = LockHolder::start(2);
        let lock = holder.client();
        let t = Instant::now();
        lock.wait(1, Duration::from_millis(20));
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(19), "{waited:?}");
        drop(lock);
        holder.stop();
    }
}
