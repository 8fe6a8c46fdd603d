//! Threads that hold no slot: when one may start (a presumed task's own
//! thread, or a spare), and when the pool keeps a spare parked. Pure
//! decisions; `worker/presumed.rs` starts the threads and the monitor
//! serves the request for a spare in its sleep (`control::signal`).
//!
//! # Design note
//!
//! **The last `concurrency` threads are the slots'.** A task presumed
//! blocking runs on a thread of its own, without a slot. If such threads
//! could take every thread up to `max_threads`, each of them might be
//! waiting on work queued behind it, with nobody left to run that work. So
//! a thread without a slot starts only while `alive + concurrency <
//! max_threads`.
//!
//! **A spare.** A presumed task is handed to a parked worker when there is
//! one (a wake-up: tens of microseconds) or waits for a thread started for
//! it (hundreds: in the lab's `waiting`, every item of the ramp to 50
//! threads in flight paid that). So when a hand takes the last parked
//! worker, the monitor starts one more that parks at once, unless one is
//! parked by then, the pool stops, there is no room (above), or every task
//! at work at the monitor's last look is of a kind its growth climb holds
//! (a lock convoy: its next presumed task starts as one ends, on the
//! thread that ended it, and spares started anyway were up to 4 of a
//! taught convoy's 10 threads). At most one spare per hand that emptied
//! the stack; an unused spare retires after `idle_timeout` like any idle
//! worker. The `spare` switch turns it off (the lab's ablation).

/// Whether a thread that holds no slot may start, with `alive` threads,
/// `concurrency` slots and at most `max_threads` threads.
pub(crate) fn room_for_unslotted_thread(
    alive: usize,
    concurrency: usize,
    max_threads: usize,
) -> bool {
    alive + concurrency < max_threads
}

/// What the monitor knows when a spare is asked for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpareAsk {
    /// Workers parked now.
    pub(crate) parked: usize,
    /// Whether a thread without a slot may start
    /// ([`room_for_unslotted_thread`]).
    pub(crate) room: bool,
    /// The pool is stopping.
    pub(crate) stopped: bool,
    /// Every task at work at the last look is of a kind its growth climb
    /// holds (`control::growth`).
    pub(crate) convoy_held: bool,
}

/// Whether a spare starts.
pub(crate) fn starts_spare(ask: SpareAsk) -> bool {
    ask.parked == 0 && ask.room && !ask.stopped && !ask.convoy_held
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_concurrency_threads_are_the_slots() {
        // 2 slots, at most 10 threads: unslotted threads up to 7 alive.
        assert!(room_for_unslotted_thread(7, 2, 10));
        assert!(!room_for_unslotted_thread(8, 2, 10));
        assert!(!room_for_unslotted_thread(9, 2, 10));
        // A pool whose threads are all slots has none to give.
        assert!(!room_for_unslotted_thread(0, 4, 4));
    }

    const ASK: SpareAsk = SpareAsk {
        parked: 0,
        room: true,
        stopped: false,
        convoy_held: false,
    };

    #[test]
    fn a_spare_starts_when_the_last_parked_worker_went() {
        assert!(starts_spare(ASK));
    }

    #[test]
    fn no_spare_when_one_is_parked_or_nothing_allows_it() {
        assert!(!starts_spare(SpareAsk { parked: 1, ..ASK }));
        assert!(!starts_spare(SpareAsk { room: false, ..ASK }));
        assert!(!starts_spare(SpareAsk {
            stopped: true,
            ..ASK
        }));
        assert!(!starts_spare(SpareAsk {
            convoy_held: true,
            ..ASK
        }));
    }
}
