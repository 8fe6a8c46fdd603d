//! Loom model of a task's claim (`runtime::task::Claim`): a worker about to
//! run a closure races its handle's `cancel`. Exactly one wins, so
//! `cancel()` says true only for a closure that will never run, whatever
//! gate it went through (a group's or a pair's closure has the same claim).

use crate::runtime::task::Claim;
use loom::sync::Arc;

#[test]
fn a_closure_is_started_or_cancelled_never_both() {
    loom::model(|| {
        let claim = Arc::new(Claim::new(true));
        let handle = {
            let claim = claim.clone();
            loom::thread::spawn(move || claim.cancel())
        };
        let started = claim.start();
        let cancelled = handle.join().unwrap();
        assert!(
            started != cancelled,
            "started {started}, cancelled {cancelled}"
        );
        // Later looks agree with the winner.
        assert_eq!(claim.start(), started);
        assert_eq!(claim.cancel(), cancelled);
    });
}

#[test]
fn an_async_tasks_claim_lets_both_through() {
    loom::model(|| {
        let claim = Arc::new(Claim::new(false));
        let handle = {
            let claim = claim.clone();
            loom::thread::spawn(move || claim.cancel())
        };
        // An async task is polled whatever its handle does; its cancel
        // drops it at its next `.await`.
        assert!(claim.start());
        assert!(handle.join().unwrap());
    });
}
