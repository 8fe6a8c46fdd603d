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
