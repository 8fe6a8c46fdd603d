//! Helpers shared by the integration tests.

#![allow(dead_code, unreachable_pub)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A generous bound that only catches hangs; no test asserts on speed.
pub const HANG: Duration = Duration::from_secs(60);

/// Runs `f` on its own thread and panics if it has not returned within
/// `limit` (a hang), returning its value otherwise.
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let body = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        // The body panicked (an assertion failed): report that panic.
        Err(mpsc::RecvTimeoutError::Disconnected) => match body.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the body sends before it returns"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("did not finish within {limit:?}: hung"),
    }
}

/// Polls `condition` every millisecond until it holds or `limit` passes.
/// Returns whether it held.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    condition()
}

/// The `/proc/self/task` folders of this process's threads whose name
/// (`comm`, cut to 15 bytes) starts with `prefix`, for tests that read a
/// pool's own threads rather than the whole test binary, whose other
/// tests run in parallel. A thread may end between the listing and the
/// caller's reads: callers skip files they cannot read.
#[cfg(target_os = "linux")]
pub fn threads_named(prefix: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|entry| {
            let dir = entry.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            comm.starts_with(prefix).then_some(dir)
        })
        .collect()
}

/// Asserts that a pool's task counters add up.
pub fn assert_counters_add_up(m: &tidepool::Metrics) {
    assert_eq!(
        m.spawned,
        m.completed + m.panicked + m.cancelled + m.in_flight,
        "counters do not add up: {m:?}"
    );
}

/// Counts how many are inside a section at once, and the most seen.
#[derive(Default)]
pub struct Peak {
    now: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl Peak {
    /// Runs `f` inside the section.
    pub fn inside<R>(&self, f: impl FnOnce() -> R) -> R {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        let out = f();
        self.now.fetch_sub(1, SeqCst);
        out
    }

    /// The most that were inside at once.
    pub fn most(&self) -> usize {
        self.most.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Threads that each ran a body and now stay alive, parked, until
/// [`Parked::release`]: for tests of what a thread leaves behind (its
/// thread-locals, what it spawned) while it lives.
pub struct Parked {
    release: mpsc::Sender<()>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Starts `threads` threads; thread `i` runs `body(i)`, then parks until
/// the returned [`Parked`] is released. Returns at once: a caller that
/// must know the bodies are done has them meet it at a barrier.
pub fn park_after(threads: usize, body: impl Fn(usize) + Send + Sync + 'static) -> Parked {
    let body = std::sync::Arc::new(body);
    let (release, parked) = mpsc::channel::<()>();
    let parked = std::sync::Arc::new(std::sync::Mutex::new(parked));
    let threads = (0..threads)
        .map(|i| {
            let (body, parked) = (body.clone(), parked.clone());
            std::thread::spawn(move || {
                body(i);
                // Parked: alive, doing nothing more, until released.
                let _ = parked.lock().unwrap().recv();
            })
        })
        .collect();
    Parked { release, threads }
}

impl Parked {
    /// Lets the threads end, and joins them (a body's panic fails here).
    pub fn release(self) {
        drop(self.release);
        for thread in self.threads {
            thread.join().unwrap();
        }
    }
}

/// A `tracing` event's or span's fields as text, by name (`message`
/// included), and the visitor that records them: for the tests that
/// collect the pool's events with a subscriber of their own.
#[cfg(feature = "tracing")]
pub mod fields {
    use std::collections::BTreeMap;
    use std::fmt::Debug;
    use tracing::field::{Field, Visit};

    /// Fields by name, as text.
    pub type Fields = BTreeMap<String, String>;

    /// Records every field it visits into its map.
    pub struct Visitor<'a>(pub &'a mut Fields);

    impl Visit for Visitor<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
    }
}
