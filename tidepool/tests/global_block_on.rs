//! The free `block_on` off any pool (its own test binary: the global pool
//! is process-wide state, and this checks when it is built).

use std::time::Duration;
use tidepool::Pool;

/// One test, so its steps run in order: nothing else in this binary may
/// build the global pool first.
#[test]
fn block_on_off_any_pool_builds_no_pool_until_the_future_spawns() {
    // No spawn: the future runs here, timers included, and no pool is built.
    let slept = tidepool::block_on(async {
        tidepool::sleep(Duration::from_millis(5)).await;
        "slept"
    });
    assert_eq!(slept, "slept");

    // With the `tokio` feature, tokio's timers work there too: the thread
    // holds a lease on the shared tokio runtime, as no pool exists yet to
    // lend its context. (A test of its own could run after the global pool
    // exists, whose `block_on` enters its context, and pass without it.)
    #[cfg(feature = "tokio")]
    {
        let slept = tidepool::block_on(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            "slept on tokio's timer"
        });
        assert_eq!(slept, "slept on tokio's timer");
    }

    // So the global pool can still be configured (before the fix, the
    // `block_on` above had built it with the defaults: AlreadyBuilt).
    Pool::builder()
        .concurrency(1)
        .thread_name("after-block-on")
        .build_global()
        .expect("block_on built no global pool");
    assert_eq!(tidepool::global().concurrency(), 1);

    // Now a spawn inside `block_on` goes to that global pool.
    let name = tidepool::block_on(async {
        tidepool::spawn_fn(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap()
    });
    let name = name.expect("worker threads are named");
    assert!(name.starts_with("after-block-on-"), "{name}");

    // Nested in another pool's `block_on`, the free `block_on` keeps that
    // pool as the current one (it went to the global pool before).
    let outer = Pool::builder().thread_name("outer").build().unwrap();
    let name = outer.block_on(async {
        tidepool::block_on(async {
            tidepool::spawn_fn(|| std::thread::current().name().map(str::to_owned))
                .await
                .unwrap()
        })
    });
    let name = name.expect("worker threads are named");
    assert!(name.starts_with("outer-"), "{name}");
}
