//! What the loom models share: a `sync` facade mapped to loom, so the real
//! protocol sources (included with `#[path]`) compile against loom's
//! primitives and every interleaving of them is explored.

#![allow(dead_code, unreachable_pub)]

pub mod sync {
    pub use loom::sync::{
        atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Condvar, Mutex, MutexGuard,
    };
    pub use std::sync::Arc;

    /// Same as the library's (`tidepool/src/sync.rs`): a SeqCst fence under
    /// loom, which models SeqCst accesses only as AcqRel.
    pub fn seqcst_pair() {
        fence(Ordering::SeqCst);
    }

    /// Same as the library's: ignore poisoning.
    pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        match mutex.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
