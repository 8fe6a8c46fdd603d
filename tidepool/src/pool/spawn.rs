//! The one spawn path under [`Pool`](super::Pool), [`TaskBuilder`](super::TaskBuilder)
//! and the free functions: refusing a spawn nothing could run, naming the
//! task's kind, handing it to the workers; and waiting for a future on the
//! calling thread.

use crate::runtime::kind_names;
use crate::runtime::kinds::Kind;
use crate::runtime::task::NoGate;
use crate::runtime::{Priority, Shared};
use crate::sync::Arc;
use crate::task::{JoinHandle, SpawnError};
use crate::worker;
use std::future::Future;
use std::panic::Location;

/// Blocks this thread until `future` completes. Timers and sockets are
/// served by the reactor's thread meanwhile (on Unix, tidepool's own;
/// elsewhere async-io's, which this thread may drive itself). For
/// [`Pool::block_on`](super::Pool::block_on) and the free `block_on` off any pool.
pub(crate) fn wait_here<F: Future>(future: F) -> F::Output {
    #[cfg(unix)]
    return futures_lite::future::block_on(future);
    #[cfg(not(unix))]
    return async_io::block_on(future);
}

/// Spawns a plain future on `shared`'s pool: the one spawn path of
/// `Pool`, `TaskBuilder` and the free functions for futures
/// ([`spawn_fn_in`] is closures'). `site` is the caller's call site
/// (`#[track_caller]`), kept as where the first task of its kind was
/// spawned (`runtime::kind_names`: a load and a branch once the kind is
/// named).
pub(crate) fn spawn_in<F>(
    shared: &Arc<Shared>,
    future: F,
    priority: Priority,
    site: &'static Location<'static>,
) -> Result<JoinHandle<F::Output>, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    check_threads(shared)?;
    // Named before it can run, so a block as it starts is named too.
    kind_names::register::<F>(Kind::of::<F>(), Some(site));
    worker::spawn(shared, future, priority, NoGate)
        .map(JoinHandle::new)
        .ok_or(SpawnError::ShutDown)
}

/// Spawns `work` as a work item on `shared`'s pool: [`spawn_in`] for a
/// closure, which gets a cell made for running once (`runtime::item`).
pub(crate) fn spawn_fn_in<F, R>(
    shared: &Arc<Shared>,
    work: F,
    priority: Priority,
    site: &'static Location<'static>,
) -> Result<JoinHandle<R>, SpawnError>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    check_threads(shared)?;
    let kind = kind_names::kind_of::<F>(Some(site));
    worker::spawn_item(shared, work, kind, priority)
        .map(JoinHandle::from_item)
        .ok_or(SpawnError::ShutDown)
}

/// Runs `work` on the pool of `shared` with `priority`, with no handle.
pub(crate) fn execute_in<F>(
    shared: &Arc<Shared>,
    work: F,
    priority: Priority,
    site: &'static Location<'static>,
) -> Result<(), SpawnError>
where
    F: FnOnce() + Send + 'static,
{
    check_threads(shared)?;
    let kind = kind_names::kind_of::<F>(Some(site));
    if worker::spawn_detached_item(shared, work, kind, priority) {
        Ok(())
    } else {
        Err(SpawnError::ShutDown)
    }
}

/// Refuses a spawn on an open pool that has no thread and cannot start
/// one (nothing would run the task).
fn check_threads(shared: &Arc<Shared>) -> Result<(), SpawnError> {
    if let Err(failure) = worker::can_run(shared) {
        if !shared.is_closed() {
            shared.no_thread_refusal();
            return Err(SpawnError::no_threads(failure));
        }
    }
    Ok(())
}
