//! What the lab reads from the operating system: CPU time, thread counts and
//! states, and a description of the machine.
//!
//! The lab is `#![forbid(unsafe_code)]`, so everything comes from `/proc`
//! (Linux), except the calling thread's CPU clock, which `rustix` reads
//! safely. Where `/proc` is missing the readers return `None` and the
//! metrics that need them are left out of the results, never guessed.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// User and system CPU time consumed by this process so far (all threads,
/// including ones that have exited).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    /// User-mode CPU time, in milliseconds.
    pub user_ms: f64,
    /// Kernel-mode CPU time, in milliseconds.
    pub sys_ms: f64,
}

impl CpuTimes {
    /// Reads `/proc/self/stat`. Resolution is one clock tick (usually 10 ms).
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::read("/proc/self/stat")
    }

    /// The same for another process (`/proc/<pid>/stat`): the lab's
    /// measure of a server process it started.
    pub fn of_process(pid: u32) -> Option<CpuTimes> {
        CpuTimes::read(&format!("/proc/{pid}/stat"))
    }

    fn read(path: &str) -> Option<CpuTimes> {
        let stat = fs::read_to_string(path).ok()?;
        let (utime, stime) = parse_stat_times(&stat)?;
        let tick_ms = 1000.0 / clock_ticks_per_second();
        Some(CpuTimes {
            user_ms: utime as f64 * tick_ms,
            sys_ms: stime as f64 * tick_ms,
        })
    }

    /// The CPU time spent between `earlier` and `self`.
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_ms: self.user_ms - earlier.user_ms,
            sys_ms: self.sys_ms - earlier.sys_ms,
        }
    }
}

/// The CPU time the calling thread has used so far, user and system,
/// to the nanosecond (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`): what a
/// task that computes a fixed amount of its own CPU time watches.
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// `utime` and `stime` (fields 14 and 15, in clock ticks) of a
/// `/proc/<pid>/stat` line. The command name (field 2) is in parentheses
/// and may itself contain spaces and parentheses, so parsing starts after
/// the last `)`.
pub fn parse_stat_times(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is index 0, so field 14 is index 11.
    let mut fields = rest.split_whitespace().skip(11);
    let utime = fields.next()?.parse().ok()?;
    let stime = fields.next()?.parse().ok()?;
    Some((utime, stime))
}

/// The scheduler state letter (field 3) of a `/proc/<pid>/task/<tid>/stat`
/// line: `R` runnable, `S` sleeping, `D` uninterruptible, and so on.
pub fn parse_stat_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Clock ticks per second for `/proc` times: `getconf CLK_TCK`, read once,
/// or 100 (the value on every mainstream Linux) if that fails.
fn clock_ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// Number of threads in this process now (`Threads:` in `/proc/self/status`).
pub fn thread_count() -> Option<usize> {
    threads_in("/proc/self/status")
}

/// Number of threads in process `pid` now (`/proc/<pid>/status`).
pub fn thread_count_of(pid: u32) -> Option<usize> {
    threads_in(&format!("/proc/{pid}/status"))
}

fn threads_in(path: &str) -> Option<usize> {
    let status = fs::read_to_string(path).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits (up to `limit`) until the process has at most `target` threads, so
/// that threads of a pool torn down in the background (rayon's, for one) do
/// not count in the next run. Returns whether it got there.
pub fn wait_for_threads_at_most(target: usize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        match thread_count() {
            None => return true,
            Some(n) if n <= target => return true,
            Some(_) if Instant::now() >= deadline => return false,
            Some(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// The task id of the calling thread, from the `/proc/thread-self` link.
fn own_tid() -> Option<String> {
    let link = fs::read_link("/proc/thread-self").ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// The task id of the calling thread, as a number.
pub fn own_tid_number() -> Option<u32> {
    own_tid()?.parse().ok()
}

/// Whether thread `tid` of this process is asleep now (state `S` or `D`);
/// false if it cannot be read.
pub fn thread_asleep(tid: u32) -> bool {
    fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|stat| parse_stat_state(&stat))
        .is_some_and(|state| state == 'S' || state == 'D')
}

/// Whether thread `tid` (named `comm`) is one of the lab's own rather than
/// the system's under test: the main thread (which submits and waits) and
/// the helper threads, all named `lab-...` (sampler, progress, lock holder).
fn is_lab_thread(tid: u32, comm: &str) -> bool {
    tid == std::process::id() || comm.starts_with("lab-")
}

/// Ids of the runnable (state `R`) threads in this process, not counting
/// `except` (the caller's own thread id) nor the lab's own threads, sorted.
fn runnable_threads(except: Option<&str>) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc/self/task").ok()? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if Some(name.as_ref()) == except {
            continue;
        }
        // A thread may exit between listing and reading: skip it.
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if parse_stat_state(&stat) == Some('R') {
            if let Ok(tid) = name.parse() {
                let comm = fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                if !is_lab_thread(tid, comm.trim_end()) {
                    out.push(tid);
                }
            }
        }
    }
    out.sort_unstable();
    Some(out)
}

/// Ids of this process's threads whose name (`comm`, at most 15 bytes)
/// satisfies `named`, sorted.
pub fn thread_ids_named(named: impl Fn(&str) -> bool) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return out;
    };
    for entry in dir.flatten() {
        let comm = fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if named(comm.trim_end()) {
            if let Ok(tid) = entry.file_name().to_string_lossy().parse() {
                out.push(tid);
            }
        }
    }
    out.sort_unstable();
    out
}

/// `obs` with the threads in `left_out` removed from the runnable sets.
pub fn without_threads(obs: &[ThreadObservation], left_out: &[u32]) -> Vec<ThreadObservation> {
    obs.iter()
        .map(|o| ThreadObservation {
            runnable: o.runnable.as_ref().map(|r| {
                r.iter()
                    .copied()
                    .filter(|t| !left_out.contains(t))
                    .collect()
            }),
            ..o.clone()
        })
        .collect()
}

/// One observation of the process's threads.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadObservation {
    /// Time since the sampler started, in seconds.
    pub at_s: f64,
    /// Threads above the count when the sampler started.
    pub threads: usize,
    /// Ids of the runnable threads, not counting the lab's own (when asked
    /// for), sorted.
    pub runnable: Option<Vec<u32>>,
}

/// A background thread that samples the process's thread count (and, on
/// request, how many threads are runnable) at a fixed interval.
#[derive(Debug)]
pub struct ThreadSampler {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Vec<ThreadObservation>>,
}

impl ThreadSampler {
    /// Starts sampling every `interval`. The thread count is relative to
    /// `baseline` (the count before the system under test was created).
    pub fn start(interval: Duration, baseline: usize, runnable: bool) -> ThreadSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::Builder::new()
            .name("lab-sampler".into())
            .spawn(move || {
                let me = own_tid();
                let start = Instant::now();
                let mut out = Vec::new();
                // Relaxed: the flag carries no data; the join publishes `out`.
                while !flag.load(Ordering::Relaxed) {
                    // The sampler itself is one thread above the baseline.
                    let threads = thread_count().map_or(0, |n| n.saturating_sub(baseline + 1));
                    let runnable = if runnable {
                        runnable_threads(me.as_deref())
                    } else {
                        None
                    };
                    out.push(ThreadObservation {
                        at_s: start.elapsed().as_secs_f64(),
                        threads,
                        runnable,
                    });
                    thread::sleep(interval);
                }
                out
            })
            .expect("cannot start the lab's sampler thread");
        ThreadSampler { stop, handle }
    }

    /// Stops the sampler and returns what it saw.
    pub fn finish(self) -> Vec<ThreadObservation> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Highest thread count observed.
pub fn peak_threads(obs: &[ThreadObservation]) -> usize {
    obs.iter().map(|o| o.threads).max().unwrap_or(0)
}

/// The highest number of threads that were runnable in two consecutive
/// samples (the same threads in both): a thread that is runnable for an
/// instant (a progress tick, a wake-up) does not count, one running or
/// waiting for a CPU for a whole interval does.
pub fn sustained_peak_runnable(obs: &[ThreadObservation]) -> Option<usize> {
    let r: Vec<&Vec<u32>> = obs.iter().filter_map(|o| o.runnable.as_ref()).collect();
    match r.len() {
        0 => None,
        1 => Some(r[0].len()),
        _ => r
            .windows(2)
            .map(|w| {
                w[0].iter()
                    .filter(|t| w[1].binary_search(t).is_ok())
                    .count()
            })
            .max(),
    }
}

/// The commit the lab was built from (`build.rs`: `git rev-parse --short
/// HEAD` at build time, with `-dirty` if tracked files differed from it),
/// or `unknown` if it was built outside a git checkout.
pub fn git_commit() -> String {
    env!("TIDEPOOL_LAB_COMMIT").to_string()
}

/// The machine the lab ran on, for the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// Logical cores available to this process.
    pub cores: usize,
    /// Operating system and kernel.
    pub os: String,
    /// CPU model.
    pub cpu: String,
}

impl Machine {
    /// Describes this machine from `/proc` and `/etc/os-release`.
    pub fn detect() -> Machine {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let distro = fs::read_to_string("/etc/os-release").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string());
        let os = match (distro, kernel) {
            (Some(d), Some(k)) => format!("{d}, Linux {k}"),
            (None, Some(k)) => format!("Linux {k}"),
            (Some(d), None) => d,
            (None, None) => std::env::consts::OS.to_string(),
        };
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        Machine { cores, os, cpu }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_is_the_checkout_s_at_build_time() {
        let commit = git_commit();
        let hash = commit.strip_suffix("-dirty").unwrap_or(&commit);
        let is_hash = hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit());
        assert!(is_hash || commit == "unknown", "{commit:?}");
        // The tests are built in this repository's checkout.
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        if let Some(head) = head {
            assert!(head.starts_with(hash), "built from {hash}, HEAD is {head}");
        }
    }

    const STAT: &str = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 \
        1000 0 0 0 731 52 0 0 20 0 3 0 100 1000000 200 18446744073709551615";

    #[test]
    fn stat_times_after_odd_names() {
        assert_eq!(parse_stat_times(STAT), Some((731, 52)));
        assert_eq!(parse_stat_state(STAT), Some('S'));
        assert_eq!(parse_stat_times("garbage"), None);
        assert_eq!(parse_stat_times("1 (x) R 1 2"), None);
    }

    #[test]
    fn live_readings() {
        let c = CpuTimes::now().expect("/proc/self/stat");
        assert!(c.user_ms >= 0.0 && c.sys_ms >= 0.0);
        assert!(thread_count().unwrap() >= 1);
        assert_eq!(
            thread_count_of(std::process::id()).map(|n| n >= 1),
            Some(true)
        );
        assert!(CpuTimes::of_process(std::process::id()).is_some());
        assert!(Machine::detect().cores >= 1);
    }

    #[test]
    fn the_thread_cpu_clock_counts_this_thread_s_work_only() {
        // The wall clock starts first and is read last, so it spans every
        // nanosecond the thread clock can count; the two clocks tick from
        // different sources, so a little slack (far below a second thread's
        // 5 ms) keeps the check about *which* thread is counted.
        let wall = Instant::now();
        let before = thread_cpu_time();
        let mut x = 0_u64;
        while wall.elapsed() < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let used = thread_cpu_time() - before;
        let spanned = wall.elapsed();
        let slack = Duration::from_millis(1);
        assert!(
            used > Duration::ZERO && used <= spanned + slack,
            "{used:?} > {spanned:?}"
        );
        // A sleep uses none of it.
        let before = thread_cpu_time();
        thread::sleep(Duration::from_millis(20));
        assert!(thread_cpu_time() - before < Duration::from_millis(10));
    }

    #[test]
    fn a_sleeping_thread_reads_asleep_and_this_one_does_not() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = thread::spawn(move || {
            tx.send(own_tid_number()).unwrap();
            // Asleep in a channel's wait until told to go.
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap().expect("a tid under /proc");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !thread_asleep(tid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert!(thread_asleep(tid), "the waiting thread reads asleep");
        assert!(!thread_asleep(own_tid_number().unwrap()), "this one runs");
        done_tx.send(()).unwrap();
        sleeper.join().unwrap();
    }

    #[test]
    fn lab_threads_are_not_the_systems() {
        let main = std::process::id();
        let other = main.wrapping_add(1);
        assert!(is_lab_thread(main, "tidepool-lab"));
        assert!(is_lab_thread(other, "lab-progress"));
        assert!(!is_lab_thread(other, "tidepool-0"));
        // Unnamed threads take their creator's name: still the system's.
        assert!(!is_lab_thread(other, "tidepool-lab"));
    }

    #[test]
    fn sustained_peak_ignores_blips() {
        let o = |r: &[u32]| ThreadObservation {
            at_s: 0.0,
            threads: 0,
            runnable: Some(r.to_vec()),
        };
        // 9 threads at once for one sample; 3 (other) threads in a row once.
        let obs = [
            o(&[1, 2]),
            o(&[1, 2, 3, 4, 5, 6, 7, 8, 9]),
            o(&[1]),
            o(&[10, 11, 12]),
            o(&[10, 11, 12]),
            o(&[1, 2, 3, 4]),
        ];
        assert_eq!(sustained_peak_runnable(&obs), Some(3));
        assert_eq!(
            sustained_peak_runnable(&without_threads(&obs, &[10])),
            Some(2)
        );
        assert_eq!(sustained_peak_runnable(&obs[..1]), Some(2));
        assert_eq!(sustained_peak_runnable(&[]), None);
    }
}
