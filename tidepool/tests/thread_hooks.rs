//! Thread hooks (`on_thread_start`, `on_thread_stop`, `thread_name_fn`): they
//! run on every worker, replacement and monitor thread, and a panic in one
//! is counted, not fatal.

mod common;

use common::{eventually, within, HANG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidepool::Pool;

/// The names of the threads a hook ran on.
fn recorder() -> (Arc<Mutex<Vec<String>>>, impl Fn() + Send + Sync + 'static) {
    let names = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&names);
    let hook = move || {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        out.lock().unwrap().push(name);
    };
    (names, hook)
}

fn workers(names: &Mutex<Vec<String>>) -> Vec<String> {
    let names = names.lock().unwrap();
    names
        .iter()
        .filter(|n| !n.ends_with("-monitor"))
        .cloned()
        .collect()
}

#[test]
fn start_and_stop_hooks_run_on_workers_and_the_monitor() {
    within(HANG, || {
        let (started, on_start) = recorder();
        let (stopped, on_stop) = recorder();
        let pool = Pool::builder()
            .concurrency(2)
            .thread_name("hooked")
            .on_thread_start(on_start)
            .on_thread_stop(on_stop)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..20).map(|i| pool.spawn_fn(move || i)).collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert!(eventually(HANG, || started
            .lock()
            .unwrap()
            .iter()
            .any(|n| n == "hooked-monitor")));
        pool.shutdown().unwrap();
        // Every worker's stop hook ran before shutdown returned (read the
        // start list only now: a thread started last may still have been
        // in its start hook before).
        let started_workers = workers(&started);
        assert!(!started_workers.is_empty());
        assert!(started_workers.iter().all(|n| n.starts_with("hooked-")));
        let mut stopped_workers = workers(&stopped);
        let mut expected = started_workers;
        stopped_workers.sort();
        expected.sort();
        assert_eq!(stopped_workers, expected);
        // The monitor leaves at its next tick.
        assert!(eventually(HANG, || stopped
            .lock()
            .unwrap()
            .iter()
            .any(|n| n == "hooked-monitor")));
        assert_eq!(pool.metrics().hook_panics, 0);
    });
}

#[test]
fn the_start_hook_runs_on_a_thread_that_replaces_a_blocked_worker() {
    within(HANG, || {
        let (started, on_start) = recorder();
        let pool = Pool::builder()
            .concurrency(1)
            .on_thread_start(on_start)
            .build()
            .unwrap();
        let sleeper = pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(200)));
        let second = pool.spawn_fn(|| 2);
        assert_eq!(second.join().unwrap(), 2);
        sleeper.join().unwrap();
        let m = pool.metrics();
        assert!(
            m.blocked_detections + m.declared_blocking >= 1,
            "the sleeper was seen blocked: {m:?}"
        );
        let names = workers(&started);
        assert!(
            names.len() >= 2,
            "a replacement thread ran the hook: {names:?}"
        );
    });
}

#[test]
fn panicking_hooks_are_counted_and_the_pool_keeps_working() {
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .on_thread_start(|| panic!("start hook"))
            .on_thread_stop(|| panic!("stop hook"))
            .thread_name_fn(|_| panic!("name hook"))
            .thread_name("fallback")
            .build()
            .unwrap();
        let name = pool.spawn_fn(|| std::thread::current().name().map(str::to_owned));
        // The pool's slot and its spare started at build: either ran it.
        let name = name.join().unwrap().unwrap();
        assert!(name == "fallback-0" || name == "fallback-1", "{name}");
        // The name function and the worker's and the monitor's start hooks.
        assert!(eventually(HANG, || pool.metrics().hook_panics >= 3));
        pool.shutdown().unwrap();
        // And the worker's stop hook, before shutdown returned.
        assert!(pool.metrics().hook_panics >= 4, "{:?}", pool.metrics());
    });
}

#[test]
fn thread_name_fn_names_workers_and_nul_bytes_are_removed() {
    within(HANG, || {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let pool = Pool::builder()
            .concurrency(1)
            .thread_name_fn(move |index| {
                counted.fetch_add(1, Ordering::SeqCst);
                format!("io\0-{index}")
            })
            .build()
            .unwrap();
        let name = pool.spawn_fn(|| std::thread::current().name().map(str::to_owned));
        // The pool's slot and its spare started at build: either ran it.
        let name = name.join().unwrap().unwrap();
        assert!(name == "io-0" || name == "io-1", "{name}");
        assert!(calls.load(Ordering::SeqCst) >= 1);
        assert_eq!(pool.metrics().hook_panics, 0);
    });
}
