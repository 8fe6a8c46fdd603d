//! The pool under real OS limits (issue 16): each test re-runs this test
//! binary in a child process with a limit set by `prlimit` (util-linux),
//! as the unprivileged user 65534 (`setpriv`), since `RLIMIT_NPROC` does
//! not apply to root. The child runs the scenario named in
//! `TIDEPOOL_LIMITS_SCENARIO`; the parent checks it exited cleanly.
//!
//! Where the tools or the privileges are missing the test prints why and
//! passes without running the scenario.

mod common;

use common::{eventually, within, HANG};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;
use tidepool::{BuildError, Pool, ShutdownError, SpawnError};

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
    // One child at a time: every child is the same user, and the limit
    // counts all of that user's threads.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    cmd.args(wrapper);
    cmd.args(["prlimit", limit, "--"]);
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
    // Room for the monitor and the async-io driver, none for a worker.
    allow_more_threads(2);
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
    // Room for the monitor, the async-io driver and one more: a worker or
    // the hog.
    allow_more_threads(3);
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
