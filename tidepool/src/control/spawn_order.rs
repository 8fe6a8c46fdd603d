//! Where a task spawned or woken on a worker goes: the worker's own deque
//! or the normal lane. A pure decision; `runtime::context::push_local`
//! carries it out.
//!
//! # Design note
//!
//! A worker's deque is LIFO for its owner: the newest first, which is what
//! fork-join wants (depth first, cache-warm, a `join`'s second half popped
//! back at once), and what closures spawned by closures are in practice
//! (`spawn_fn` and `scope` recursions: the lab's `fork-join` rows). Async
//! tasks are another shape: requests and their continuations, where
//! arrival order is what users expect. Every future spawned or woken on a
//! worker going on its deque meant that later ones ran first: in the lab's
//! connect burst (2,000 tasks spawned from a task on one slot, an accept
//! loop and its echo tasks on the same pool), echo tasks spawned after the
//! burst ran before the clients still waiting for their first poll, and
//! the mean start was 1.49x tokio's current-thread runtime's.
//!
//! So a future goes on the worker's deque only while the deque is empty
//! (a one-task shortcut, like tokio's LIFO slot: a task woken by the one
//! running is likely to touch the same data, and runs next); otherwise on
//! the normal lane, FIFO, behind what arrived before it. A run of tasks
//! that keeps taking the shortcut (two tasks waking each other) still
//! gives the lane a pick every 61 (`control::fairness`). Closures keep the
//! deque: sent to the lane too, the fork-join rows that spawn closures ran
//! 1.3x to 4x slower (the global queue's contention, and breadth first).
//! Measured: docs/measurements.md, "The connect burst: later spawns
//! first".

/// Whether a task spawned or woken on a worker goes on the worker's own
/// deque: a closure always, a future only while the deque is empty
/// (`deque_is_empty`, asked only for a future: spawns of closures pay no
/// look at the deque).
pub(crate) fn to_own_deque(is_future: bool, deque_is_empty: impl FnOnce() -> bool) -> bool {
    !is_future || deque_is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_always_go_on_the_workers_deque() {
        for empty in [true, false] {
            assert!(to_own_deque(false, || empty));
        }
        assert!(to_own_deque(false, || unreachable!("looked at the deque")));
    }

    #[test]
    fn a_future_takes_the_shortcut_only_while_the_deque_is_empty() {
        assert!(to_own_deque(true, || true));
        assert!(!to_own_deque(true, || false));
    }
}
