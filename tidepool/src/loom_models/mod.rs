//! Loom models of every hand-written protocol, run on the code that ships:
//! each model drives the library's own functions, compiled against loom's
//! primitives through the `sync` facade. Built only for
//! `cargo test --lib` under `--cfg tidepool_loom` (see `.ci/run`).
//!
//! * `slots`: slot accounting against the monitor's "mark blocked".
//! * `park`: park/wake (no lost wake-up, no wasted thread start).
//! * `monitor_idle`: the monitor's idle sleep against a worker starting.
//! * `shutdown`: the shutdown latch over the sharded task counters.
//! * `admission`: the admission state machine of groups and pairs.
//! * `reactor`: readiness and waiters of a socket, and who polls the
//!   reactor (its thread or the workers).
//! * `waiting`: the waiting tasks a stopping pool cancels, and a live
//!   metrics snapshot.
//! * `timers`: the reactor's thread never sleeps past a timer registered
//!   as it goes to sleep.
//! * `item`: a work item's cell between its worker, its handle and the
//!   spawner's free ring.
//! * `claim`: a closure's start against its handle's cancel (exactly one
//!   wins; an async task's cancel always goes through).
//! * `tokio_gate`: the places of the shared tokio runtime's workers between
//!   a worker that parks and the watcher that takes its place or counts it
//!   again.
//! * `hold`: a worker held for a slot between the worker that hands it one
//!   and its own patience.
//! * `sentinel`: the CPU sentinels' arming against a spawn that saturates
//!   the pool, and a stop.

mod admission;
mod claim;
mod hold;
mod item;
mod monitor_idle;
mod park;
#[cfg(unix)]
mod reactor;
mod sentinel;
mod shutdown;
mod slots;
#[cfg(unix)]
mod timers;
mod tokio_gate;
mod waiting;
