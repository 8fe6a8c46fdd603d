//! `Builder::build_global` (its own test binary: it is global state).

use tidepool::{GlobalPoolError, Pool};

#[test]
fn build_global_configures_the_global_pool_once() {
    Pool::builder()
        .concurrency(3)
        .thread_name("configured-global")
        .build_global()
        .unwrap();
    assert_eq!(tidepool::global().concurrency(), 3);
    let name = tidepool::spawn_fn(|| std::thread::current().name().map(str::to_owned));
    let name = name.join().unwrap().unwrap();
    assert!(name.starts_with("configured-global-"), "{name}");

    let again = Pool::builder().concurrency(1).build_global().unwrap_err();
    assert_eq!(again, GlobalPoolError::AlreadyBuilt);
    assert!(again.to_string().contains("call build_global once"));
    assert!(format!("{again:?}").starts_with("GlobalPoolError::AlreadyBuilt: "));
    // The first settings stand.
    assert_eq!(tidepool::global().concurrency(), 3);
}
