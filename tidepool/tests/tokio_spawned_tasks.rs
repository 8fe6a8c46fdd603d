//! Tasks that `tokio::spawn` puts on the shared tokio runtime (feature
//! `tokio`), as libraries do (`axum::serve` spawns every connection so):
//! at most `available_parallelism` of them compute at once, and one that
//! blocks gives its place to another, is counted in `Metrics` and does not
//! stop the others. Alone in its binary: the shared runtime is
//! process-wide, and these tests count its places.

#![cfg(feature = "tokio")]

mod common;

use common::{within, Peak, HANG};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One test at a time: the shared runtime is the process's, and one test's
/// workers back from a block would compute beside the other's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn places() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn spin(for_how_long: Duration) {
    let start = Instant::now();
    while start.elapsed() < for_how_long {
        std::hint::spin_loop();
    }
}

#[test]
fn blocking_tokio_tasks_give_their_place_away_and_computing_ones_stay_within_the_cores() {
    let _turn = one_at_a_time();
    within(HANG, || {
        let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
        let tasks = places() + 6;

        // Tasks that block: more than `places` of them block at once, as
        // each found blocked lets another worker in.
        let asleep = Arc::new(Peak::default());
        pool.block_on(async {
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let asleep = asleep.clone();
                    tokio::spawn(async move {
                        asleep.inside(|| std::thread::sleep(Duration::from_millis(200)));
                    })
                })
                .collect();
            for handle in handles {
                handle.await.unwrap();
            }
        });
        let most_asleep = asleep.most();
        assert!(
            most_asleep > places(),
            "{most_asleep} blocked at once with {} places: a block must give its place away",
            places()
        );
        let m = pool.metrics();
        assert!(m.tokio_blocked >= 1, "the blocks are counted: {m:?}");

        // Let the workers of the blocked tasks park: one that went on to a
        // computing task before it parked runs without its place until the
        // watcher counts it again (the next test), a moment over quota.
        std::thread::sleep(Duration::from_millis(50));
        // Tasks that compute: never more than `places` at once.
        let computing = Arc::new(Peak::default());
        pool.block_on(async {
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let computing = computing.clone();
                    tokio::spawn(async move {
                        computing.inside(|| spin(Duration::from_millis(30)));
                    })
                })
                .collect();
            for handle in handles {
                handle.await.unwrap();
            }
        });
        let most_computing = computing.most();
        assert!(
            most_computing <= places(),
            "{most_computing} computed at once on {} places",
            places()
        );
        pool.shutdown().unwrap();
    });
}

#[test]
fn a_tokio_task_back_from_its_block_is_counted_again() {
    let _turn = one_at_a_time();
    within(HANG, || {
        let pool = tidepool::Pool::builder().concurrency(2).build().unwrap();
        // Each blocks, then computes: once back, it takes a place again,
        // so the computing stays within the places after the blocks.
        let computing = Arc::new(Peak::default());
        let tasks = places() + 4;
        pool.block_on(async {
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let computing = computing.clone();
                    tokio::spawn(async move {
                        std::thread::sleep(Duration::from_millis(20));
                        computing.inside(|| spin(Duration::from_millis(150)));
                    })
                })
                .collect();
            for handle in handles {
                handle.await.unwrap();
            }
        });
        let m = pool.metrics();
        assert!(m.tokio_blocked >= 1, "the sleeps were found");
        assert!(
            m.tokio_counted_again >= 1,
            "and the computing after them counted"
        );
        pool.shutdown().unwrap();
    });
}
