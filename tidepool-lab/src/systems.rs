//! The systems under test behind one small interface: tidepool and the
//! pools a user would use instead (tokio, rayon, the threadpool crate, and a
//! plain thread per item).
//!
//! Every adapter runs the same closure; completion is tracked by the
//! closure itself (a [`Latch`](crate::measure::Latch)), never by the pool's
//! own join machinery, so no system pays for bookkeeping the others skip.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tidepool::{Controller, Pool};

/// How a tidepool pool is configured for a run.
#[derive(Debug, Clone)]
pub struct TidepoolConfig {
    /// Running slots; `None` keeps the default (the number of cores).
    pub concurrency: Option<usize>,
    /// Controller; `None` keeps the default (`Adaptive`).
    pub controller: Option<Controller>,
    /// Thread cap; `None` keeps the default.
    pub max_threads: Option<usize>,
}

impl TidepoolConfig {
    /// The default pool, as a user gets it from `Pool::builder().build()`.
    pub fn default_pool() -> TidepoolConfig {
        TidepoolConfig {
            concurrency: None,
            controller: None,
            max_threads: None,
        }
    }

    /// A classic capped pool: exactly `n` threads that never grow.
    pub fn fixed(n: usize) -> TidepoolConfig {
        TidepoolConfig {
            concurrency: Some(n),
            controller: Some(Controller::Fixed),
            max_threads: Some(n),
        }
    }

    /// Builds the pool.
    ///
    /// # Errors
    ///
    /// The library's build error, as text.
    pub fn build(&self) -> Result<Pool, String> {
        let mut b = Pool::builder();
        if let Some(n) = self.concurrency {
            b = b.concurrency(n);
        }
        if let Some(n) = self.max_threads {
            b = b.max_threads(n);
        }
        if let Some(c) = self.controller {
            b = b.controller(c);
        }
        b.build().map_err(|e| format!("tidepool build failed: {e}"))
    }
}

/// A system that runs closures (work items).
#[derive(Debug)]
pub enum System {
    /// A tidepool pool; items go through `Pool::execute` (no handle).
    Tidepool(Pool),
    /// A tidepool pool; each item runs inside a `Pool::spawn`ed async
    /// task, as on tokio's runtime ([`System::Tokio`]).
    TidepoolAsync(Pool),
    /// tokio's multi-thread runtime; each item runs inside a `spawn`ed task.
    Tokio(tokio::runtime::Runtime),
    /// tokio's multi-thread runtime; items go through `spawn_blocking`.
    TokioBlocking(tokio::runtime::Runtime),
    /// A rayon thread pool; items go through `ThreadPool::spawn`.
    Rayon(rayon::ThreadPool),
    /// The threadpool crate; items go through `ThreadPool::execute`.
    ThreadPool(threadpool::ThreadPool),
    /// A new OS thread per item (`std::thread::spawn`, detached).
    ThreadPerItem,
}

/// A tokio multi-thread runtime with its defaults (one worker per core).
///
/// # Errors
///
/// The runtime's build error, as text.
pub fn tokio_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// A tokio multi-thread runtime with `workers` workers (its blocking pool
/// at its defaults).
///
/// # Errors
///
/// The runtime's build error, as text.
pub fn tokio_runtime_with(workers: usize) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// A rayon pool of `threads` threads (`None`: rayon's default, one per core).
///
/// # Errors
///
/// rayon's build error, as text.
pub fn rayon_pool(threads: Option<usize>) -> Result<rayon::ThreadPool, String> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        b = b.num_threads(n);
    }
    b.build().map_err(|e| format!("rayon pool: {e}"))
}

impl System {
    /// The system's name as it appears in the results.
    pub fn name(&self) -> &'static str {
        match self {
            System::Tidepool(_) | System::TidepoolAsync(_) => "tidepool",
            System::Tokio(_) | System::TokioBlocking(_) => "tokio",
            System::Rayon(_) => "rayon",
            System::ThreadPool(_) => "threadpool",
            System::ThreadPerItem => "std::thread",
        }
    }

    /// Hands `f` to the system.
    pub fn spawn_fn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        match self {
            // Fire and forget, as rayon's `spawn` and the threadpool
            // crate's `execute`: no handle to make and drop.
            System::Tidepool(p) => {
                if let Err(error) = p.execute(f) {
                    // The run's wait for the item then fails, and says so.
                    eprintln!("tidepool refused a work item: {error}");
                }
            }
            System::TidepoolAsync(p) => drop(p.spawn(async move { f() })),
            System::Tokio(rt) => drop(rt.spawn(async move { f() })),
            System::TokioBlocking(rt) => drop(rt.spawn_blocking(f)),
            System::Rayon(p) => p.spawn(f),
            System::ThreadPool(p) => p.execute(f),
            System::ThreadPerItem => spawn_thread(f),
        }
    }

    /// Peak thread count the system reports about itself, if it keeps one.
    pub fn own_peak_threads(&self) -> Option<usize> {
        self.tidepool_metrics().map(|m| m.peak_threads)
    }

    /// tidepool's own metrics, for a tidepool system.
    pub fn tidepool_metrics(&self) -> Option<tidepool::Metrics> {
        match self {
            System::Tidepool(p) | System::TidepoolAsync(p) => Some(p.metrics()),
            _ => None,
        }
    }

    /// Shuts the system down and waits for its threads where it can.
    pub fn finish(self) {
        match self {
            System::Tidepool(p) | System::TidepoolAsync(p) => shutdown_pool(&p),
            System::Tokio(rt) | System::TokioBlocking(rt) => {
                rt.shutdown_timeout(Duration::from_secs(10))
            }
            // rayon's threads exit in the background after the drop; the
            // lab waits for the process's thread count to settle instead.
            System::Rayon(p) => drop(p),
            System::ThreadPool(p) => p.join(),
            System::ThreadPerItem => {}
        }
    }
}

/// Shuts a tidepool pool down (draining it). A failure cannot change what
/// was measured, but it is printed, never swallowed.
pub fn shutdown_pool(pool: &Pool) {
    if let Err(e) = pool.shutdown() {
        eprintln!("tidepool shutdown failed: {e}");
    }
}

/// Starts a detached thread for `f`. When the system is out of threads for
/// a moment (EAGAIN), it waits a little and tries again rather than fail the
/// whole run.
///
/// # Panics
///
/// If no thread could be started for about a second.
fn spawn_thread<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    // A failed spawn drops its closure, so the job sits in a slot both sides
    // share and survives a failed attempt.
    let slot = Arc::new(Mutex::new(Some(f)));
    for _ in 0..1000 {
        let theirs = slot.clone();
        let started = thread::Builder::new().spawn(move || {
            let job = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(job) = job {
                job();
            }
        });
        if started.is_ok() {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("could not start a thread for one second (out of threads?)");
}
