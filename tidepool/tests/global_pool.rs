//! The process-wide pool (its own test binary: it is global state).

use std::time::Duration;

#[test]
fn global_functions_use_one_lazily_built_pool() {
    let a = tidepool::spawn_fn(|| std::thread::current().name().map(str::to_owned));
    let name = a.join().unwrap().unwrap();
    assert!(name.starts_with("tidepool-global-"), "{name}");
    let b = tidepool::spawn(async {
        tidepool::sleep(Duration::from_millis(5)).await;
        3
    });
    assert_eq!(tidepool::block_on(b).unwrap(), 3);
    assert!(std::ptr::eq(tidepool::global(), tidepool::global()));
    let m = tidepool::global().metrics();
    assert_eq!(m.spawned, 2);
    assert_eq!(m.completed, 2);
}

#[test]
fn build_global_after_first_use_is_refused_and_changes_nothing() {
    let before = tidepool::global().concurrency();
    let err = tidepool::Pool::builder()
        .concurrency(before + 1)
        .build_global()
        .unwrap_err();
    assert_eq!(err, tidepool::GlobalPoolError::AlreadyBuilt);
    assert_eq!(tidepool::global().concurrency(), before);
}
