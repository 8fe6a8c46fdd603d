//! The pool under real OS limits (issue 16): each test re-runs this test
//! binary in a child process with a limit set by `prlimit` (util-linux),
//! as the unprivileged user 65534 (`setpriv`), since `RLIMIT_NPROC` does
//! not apply to root. The child runs the scenario named in
//! `TIDEPOOL_LIMITS_SCENARIO`; the parent checks it exited cleanly.
//!
//! Where the tools or the privileges are missing the test prints why and
//! passes without running the scenario.
//!
//! Two scenarios take away what blocking detection reads instead of threads:
//! every file descriptor (so no worker can open its `/proc` files), and
//! `/proc` itself (a private mount namespace with an empty tmpfs over it,
//! which needs root and `unshare`).

mod common;

use common::{eventually, within, HANG};
use std::fs::File;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;
use tidepool::{BuildError, Detection, Pool, ShutdownError, SpawnError};

const SCENARIO: &str = "TIDEPOOL_LIMITS_SCENARIO";

/// Runs test `name` of this binary in a child as user 65534 with
/// `limit` (a `prlimit` option such as `--nproc=4:4`). Returns false (and
/// says why) if it cannot be arranged here.
fn run_child(name: &str, limit: &str, wrapper: &[&str]) -> bool {
    // SAFETY-free check for root: `id -u`.
    let uid = Command::new("id").arg("-u").output();
    let root = matches!(&uid, Ok(out) if String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !root {
        println!("SKIPPED {name}: needs root to drop to an unprivileged user (RLIMIT_NPROC does not bind root, and a user's own processes would count)");
        return false;
    }
    for tool in ["setpriv", "prlimit"] {
        let found = Command::new(tool).arg("--version").output().is_ok();
        if !found {
            println!("SKIPPED {name}: `{tool}` (util-linux) not found");
            return false;
        }
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    cmd.args(wrapper);
    cmd.args(["prlimit", limit, "--"]);
    run_scenario(name, limit, cmd)
}

/// Runs `cmd` (a wrapper command line ending where the test binary's path
/// goes) on test `name` of this binary, and checks the child passed. Returns
/// false (and says why) if the child found the scenario unavailable.
fn run_scenario(name: &str, limit: &str, mut cmd: Command) -> bool {
    // One child at a time: every child is the same user, and the limit
    // counts all of that user's threads.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let exe = std::env::current_exe().unwrap();
    cmd.arg(&exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(SCENARIO, name);
    let out = within(HANG, move || cmd.output().unwrap());
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if text.contains("SCENARIO-UNAVAILABLE") {
        println!("SKIPPED {name}: {text}");
        return false;
    }
    assert!(
        out.status.success() && text.contains("SCENARIO-PASSED"),
        "child {name} under {limit} failed ({:?}):\n{text}",
        out.status
    );
    true
}

fn in_child() -> bool {
    std::env::var_os(SCENARIO).is_some()
}

/// In the child: lowers this process's own soft `RLIMIT_NPROC` so that
/// exactly `extra` more threads can start (the user has no other process,
/// so its count is this process's threads), with the `prlimit` tool.
/// The threads the `tokio` feature's shared runtime adds: its workers
/// (`available_parallelism` places and 16 spares, `src/interop/mod.rs`)
/// and its watcher; none without the feature.
fn tokio_threads() -> usize {
    if cfg!(feature = "tokio") {
        std::thread::available_parallelism().map_or(1, usize::from) + 16 + 1
    } else {
        0
    }
}

fn allow_more_threads(extra: usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let threads: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let limit = format!("--nproc={}:{}", threads + extra, 64);
    let pid = std::process::id().to_string();
    let ok = Command::new("prlimit")
        .args(["--pid", &pid, &limit])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "prlimit --pid {pid} {limit} failed");
}

/// Starts a thread that holds one of the user's threads until the sender is
/// dropped; retries while the limit is still taken by a thread on its way
/// out. Returns `None` if none could start within the patience.
fn hog() -> Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)> {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let (tx, rx) = mpsc::channel::<()>();
        match std::thread::Builder::new().spawn(move || {
            let _ = rx.recv();
        }) {
            Ok(handle) => return Some((tx, handle)),
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return None,
        }
    }
}

/// Under a thread limit that leaves no room for a worker: spawns are
/// refused with `NoThreads`, a queued task runs once a thread is freed
/// (the monitor retries by itself), and shutdown returns instead of
/// hanging when the queue can never run.
#[test]
fn no_worker_can_start() {
    if !in_child() {
        run_child("no_worker_can_start", "--nproc=64:64", &[]);
        return;
    }
    // Room for the monitor and the async-io driver (and the tokio feature's
    // runtime threads), none for a worker.
    allow_more_threads(2 + tokio_threads());
    {
        let pool = Pool::builder()
            .concurrency(1)
            .idle_timeout(Duration::from_millis(20))
            .build()
            .unwrap();
        let err = pool.try_spawn_fn(|| 1).unwrap_err();
        assert!(
            matches!(err, SpawnError::NoThreads { .. }),
            "{err:?}: {}",
            err
        );
        assert!(err.to_string().contains("RLIMIT_NPROC"), "{err}");
        assert!(pool.spawn_fn(|| 1).join().unwrap_err().is_cancelled());
        let m = pool.metrics();
        assert!(m.thread_start_failures >= 1, "{m:?}");
        assert_eq!(m.no_thread_refusals, 2, "{m:?}");
        // shutdown of a pool with nothing to run returns.
        pool.shutdown().unwrap();
    }
    println!("SCENARIO-PASSED");
}

/// Under a thread limit with room for one worker: a task woken while the
/// room is taken (all workers retired) runs, without another spawn, once it
/// is freed, because the monitor retries; and a shutdown whose remaining
/// work no thread can run returns `NoThreads` instead of hanging.
#[test]
fn woken_work_runs_once_a_thread_is_freed() {
    if !in_child() {
        run_child(
            "woken_work_runs_once_a_thread_is_freed",
            "--nproc=64:64",
            &[],
        );
        return;
    }
    // Room for the monitor, the async-io driver (and the tokio feature's
    // runtime threads) and one more: a worker or the hog.
    allow_more_threads(3 + tokio_threads());
    let pool = Pool::builder()
        .concurrency(1)
        .min_threads(0)
        .idle_timeout(Duration::from_millis(20))
        .build()
        .unwrap();
    let run_after = |delay| {
        pool.spawn(async move {
            tidepool::sleep(Duration::from_millis(delay)).await;
            delay
        })
    };
    // The task starts, awaits its timer holding no thread; the worker
    // retires, and a hog takes its room before the timer fires.
    let woken = run_after(300);
    assert!(eventually(HANG, || pool.metrics().threads == 0));
    let Some((release, hog_thread)) = hog() else {
        println!("SCENARIO-UNAVAILABLE: the retired worker's thread never left");
        return;
    };
    assert!(eventually(HANG, || pool.metrics().thread_start_failures >= 1));
    // Freed: the monitor's retry starts a worker; no new spawn needed.
    drop(release);
    hog_thread.join().unwrap();
    assert_eq!(woken.join().unwrap(), 300);

    // Again, and shut down meanwhile: the woken task can never run.
    let stuck = run_after(300);
    assert!(eventually(HANG, || pool.metrics().threads == 0));
    let Some((release, hog_thread)) = hog() else {
        println!("SCENARIO-UNAVAILABLE: the retired worker's thread never left");
        return;
    };
    // On this thread (no room for one to watch it): the parent's timeout
    // catches a hang.
    assert_eq!(
        pool.shutdown(),
        Err(ShutdownError::NoThreads { abandoned: 1 })
    );
    assert!(stuck.join().unwrap_err().is_cancelled());
    let m = pool.metrics();
    assert_eq!((m.completed, m.cancelled), (1, 1), "{m:?}");
    drop(release);
    hog_thread.join().unwrap();
    println!("SCENARIO-PASSED");
}

/// Under a limit that leaves no thread at all: building a pool is an error
/// naming the cause, and the free functions panic with it; nothing aborts
/// (the async-io driver used to panic twice and abort in `block_on`).
#[test]
fn no_thread_at_all() {
    if !in_child() {
        run_child("no_thread_at_all", "--nproc=64:64", &[]);
        return;
    }
    allow_more_threads(0);
    let err = Pool::builder().build().unwrap_err();
    // With the tokio feature its runtime thread is the first refused.
    if cfg!(feature = "tokio") && err.to_string().contains("tokio runtime") {
        println!("SCENARIO-PASSED");
        return;
    }
    assert!(
        matches!(err, BuildError::HelperThreadStart { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("ulimit -u"), "{err}");
    let caught = std::panic::catch_unwind(|| {
        tidepool::block_on(tidepool::sleep(Duration::from_millis(1)));
    });
    assert!(caught.is_err());
    println!("SCENARIO-PASSED");
}

/// The blocking scenario of issue 16: 20 items that sleep 200 ms each on a
/// pool with one running slot. With blocking detected, each sleeper's slot
/// goes to another worker; without, they run one after another.
fn twenty_sleepers_are_compensated(pool: &Pool) -> tidepool::Metrics {
    let sleepers: Vec<_> = (0..20)
        .map(|i| {
            pool.spawn_fn(move || {
                std::thread::sleep(Duration::from_millis(200));
                i
            })
        })
        .collect();
    for (i, sleeper) in sleepers.into_iter().enumerate() {
        assert_eq!(sleeper.join().unwrap(), i);
    }
    let m = pool.metrics();
    assert!(
        m.blocked_detections > 0,
        "never compensated: detection {:?}, fallbacks {}, threads started {}",
        m.detection,
        m.detection_fallbacks,
        m.threads_started
    );
    m
}

/// Out of file descriptors (a small `RLIMIT_NOFILE`, and the rest taken
/// after the pool is built): no worker can open its `/proc` files, and
/// blocking is still detected, by the thread CPU clock.
#[test]
fn detection_without_descriptors_falls_back_to_the_cpu_clock() {
    let name = "detection_without_descriptors_falls_back_to_the_cpu_clock";
    if !in_child() {
        run_child(name, "--nofile=64:64", &[]);
        return;
    }
    // Workers start on demand: none has opened its probe yet.
    let pool = Pool::builder().concurrency(1).build().unwrap();
    let mut held = Vec::new();
    while let Ok(file) = File::open("/dev/null") {
        held.push(file);
    }
    if File::open("/proc/self/stat").is_ok() {
        println!("SCENARIO-UNAVAILABLE: /proc still opens with every descriptor taken");
        return;
    }
    let m = twenty_sleepers_are_compensated(&pool);
    drop(held);
    assert_eq!(m.detection, Detection::CpuClock, "{m:?}");
    // Every thread started after the descriptors ran out fell back; those
    // started at build (the slot and the spare) may have opened /proc.
    assert!(
        m.detection_fallbacks >= m.threads_started - m.threads_started_floor
            && m.detection_fallbacks <= m.threads_started,
        "{m:?}"
    );
    println!("SCENARIO-PASSED");
}

/// Without `/proc` (an empty tmpfs mounted over it in a private mount
/// namespace): blocking is still detected, by the thread CPU clock.
#[test]
fn detection_without_proc_falls_back_to_the_cpu_clock() {
    let name = "detection_without_proc_falls_back_to_the_cpu_clock";
    if !in_child() {
        let uid = Command::new("id").arg("-u").output();
        let root = matches!(&uid, Ok(out) if String::from_utf8_lossy(&out.stdout).trim() == "0");
        let private_mounts = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "true"])
            .status()
            .is_ok_and(|s| s.success());
        if !root || !private_mounts {
            println!("SKIPPED {name}: needs root and `unshare --mount` (util-linux) to hide /proc");
            return;
        }
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"]);
        cmd.arg(
            "mount -t tmpfs none /proc || { echo 'SCENARIO-UNAVAILABLE: cannot mount over /proc'; exit 0; }; exec \"$@\"",
        );
        cmd.arg("sh");
        run_scenario(name, "no /proc", cmd);
        return;
    }
    if File::open("/proc/self/stat").is_ok() {
        println!("SCENARIO-UNAVAILABLE: /proc is still there");
        return;
    }
    let pool = Pool::builder().concurrency(1).build().unwrap();
    let m = twenty_sleepers_are_compensated(&pool);
    assert_eq!(m.detection, Detection::CpuClock, "{m:?}");
    // Every thread started after the descriptors ran out fell back; those
    // started at build (the slot and the spare) may have opened /proc.
    assert!(
        m.detection_fallbacks >= m.threads_started - m.threads_started_floor
            && m.detection_fallbacks <= m.threads_started,
        "{m:?}"
    );
    println!("SCENARIO-PASSED");
}
