//! The auto traits users rely on: handles and errors cross threads, and
//! every error fits `Box<dyn Error + Send + Sync>` (and so `anyhow::Error`).
//! These are compile-time checks: the test fails to build if one is lost.

use std::error::Error;
use tidepool::{
    BuildError, Builder, ConcurrentSpawner, ExclusiveSpawner, Group, GroupError, GroupMetrics,
    JoinError, JoinHandle, Metrics, Pool, ShutdownError, SpawnError, TaskPanic,
};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}
fn assert_error<T: Error + Send + Sync + 'static>() {}

#[test]
fn public_types_are_send_and_sync() {
    assert_send_sync::<Pool>();
    assert_send_sync::<Builder>();
    assert_send_sync::<Group>();
    assert_send_sync::<ConcurrentSpawner>();
    assert_send_sync::<ExclusiveSpawner>();
    assert_send_sync::<Metrics>();
    assert_send_sync::<GroupMetrics>();
    assert_send_sync::<TaskPanic>();
    // A handle is Send when its output is (it is awaited on another thread).
    assert_send::<JoinHandle<String>>();
}

#[test]
fn errors_are_send_sync_static_errors() {
    assert_error::<JoinError>();
    assert_error::<SpawnError>();
    assert_error::<BuildError>();
    assert_error::<GroupError>();
    assert_error::<ShutdownError>();
}

#[test]
fn question_mark_carries_a_join_error_into_a_boxed_send_sync_error() {
    fn run() -> Result<(), Box<dyn Error + Send + Sync>> {
        let pool = Pool::builder().concurrency(1).build()?;
        pool.spawn_fn(|| panic!("boom")).join()?;
        Ok(())
    }
    let err = run().unwrap_err();
    assert_eq!(err.to_string(), "task panicked: boom");
    // The original payload survives the trip for resume_unwind.
    let join = err.downcast::<JoinError>().unwrap();
    let payload = join.into_panic().unwrap();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
}
