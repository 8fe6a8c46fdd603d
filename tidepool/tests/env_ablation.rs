//! `TIDEPOOL_ABLATE`, the lab's switch for turning one of the pool's
//! mechanisms off (`tidepool-lab ablation`, docs/ablation.md): a name that
//! is no mechanism's is a build error that names it and the known ones,
//! and a mechanism named there is off in every pool built while it is set
//! (here: presumption, so a kind that blocked is never presumed, and its
//! work is still served by the monitor's replacements). Alone in its
//! binary, one test: the environment is the process's.

mod common;

use common::{within, HANG};
use std::sync::{Arc, Barrier};
use tidepool::{BuildError, Pool};

/// Runs `parties` items of one closure type on a one-slot pool, each
/// waiting at a barrier for all the others: they can only all arrive if
/// the pool runs them without the slot (presumed, or found blocked and
/// replaced). Returns how many were presumed blocking.
fn meet(pool: &Pool, parties: usize) -> u64 {
    let before = pool.metrics().presumed_blocking;
    let barrier = Arc::new(Barrier::new(parties));
    let handles: Vec<_> = (0..parties)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            pool.spawn_fn(move || {
                barrier.wait();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    pool.metrics().presumed_blocking - before
}

/// On a fresh one-slot pool, 4 items meet (found blocked: the kind
/// learns that it blocks), then 8 more: how many of those were presumed.
fn presumed_after_a_lesson() -> u64 {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        meet(&pool, 4);
        let presumed = meet(&pool, 8);
        pool.shutdown().unwrap();
        presumed
    })
}

#[test]
fn a_mechanism_named_in_tidepool_ablate_is_off_and_a_bad_name_is_refused() {
    std::env::set_var("TIDEPOOL_ABLATE", "spare,sparse");
    let err = Pool::builder().build().unwrap_err();
    assert!(
        matches!(&err, BuildError::Ablation { name } if name == "sparse"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("\"sparse\""), "{message}");
    assert!(message.contains("presumption"), "{message}");
    assert!(message.contains("unset it"), "{message}");

    // Presumption off: the kind learns that it blocks (4 meet, found
    // blocked), but the next 8 are never presumed; they still all meet.
    std::env::set_var("TIDEPOOL_ABLATE", "presumption");
    let presumed = presumed_after_a_lesson();
    assert_eq!(presumed, 0, "switched off, nothing is presumed");

    // On again (unset): the same lesson makes the next 8 presumed.
    std::env::remove_var("TIDEPOOL_ABLATE");
    let presumed = presumed_after_a_lesson();
    assert!(
        presumed >= 2,
        "on, a kind that blocked is presumed: {presumed}"
    );
}
