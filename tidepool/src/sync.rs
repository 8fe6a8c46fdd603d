//! The one door through which the hand-written protocols reach their
//! synchronisation primitives.
//!
//! Normally these are `std`'s; under `--cfg tidepool_loom` they are loom's, so
//! the loom models in `loom_models/` explore every interleaving of the real
//! protocol code (slot accounting in `control::slots`, parking in
//! `runtime::park`, the shutdown latch in `runtime::lifecycle`, the monitor's
//! idle sleep in `control::signal`). Modules that are not a
//! protocol (queues, metrics) may use `std` directly.

#[cfg(not(tidepool_loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

#[cfg(tidepool_loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

/// Reference counting is not part of any protocol a model checks; `std`'s
/// `Arc` in both builds keeps `self: &Arc<Self>` methods available.
pub(crate) use std::sync::Arc;

/// Locks a `std` mutex, in both builds, ignoring poisoning (see [`lock`]):
/// for the locks no loom model checks, and those in `static`s (loom's
/// `Mutex::new` is not `const`, and a static would outlive a model's
/// executions).
pub(crate) fn lock_std<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Locks a mutex, ignoring poisoning: every critical section in tidepool leaves
/// its data consistent before anything that can panic, so a poisoned lock still
/// guards valid data, and a pool must keep serving after a panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Locks a mutex if nobody holds it now, ignoring poisoning (see
/// [`lock`]); `None` if it is held. Never waits, so a signal handler may
/// call it (`runtime::hold`): the interrupted thread may hold the lock.
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Waits on `cv`, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match cv.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Waits on `cv` for at most `timeout`, ignoring poisoning (see [`lock`]).
/// Returns the guard and whether the time ran out.
pub(crate) fn wait_timeout<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> (MutexGuard<'a, T>, bool) {
    let (guard, result) = match cv.wait_timeout(guard, timeout) {
        Ok(pair) => pair,
        Err(poisoned) => poisoned.into_inner(),
    };
    (guard, result.timed_out())
}

/// Marks the middle of one side of a Dekker pair built from SeqCst accesses
/// only (a SeqCst write, then a SeqCst read of another location).
///
/// In the real build this is nothing: SeqCst operations already form a single
/// total order consistent with program order (C++20 [atomics.order]), which is
/// all the pair needs, and it sits on the spawn path. Loom models SeqCst
/// *accesses* as AcqRel (its documented limitation) and would report such a
/// pair as broken; it does model SeqCst *fences*, so under loom this is one.
#[inline(always)]
pub(crate) fn seqcst_pair() {
    #[cfg(tidepool_loom)]
    fence(Ordering::SeqCst);
}

/// A waker that counts its wake-ups, on the facade's atomics, for unit
/// tests and loom models (`runtime::waiting`, `reactor::timers`).
#[cfg(test)]
pub(crate) mod counting {
    use super::{Arc, AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    /// How many times the waker was woken.
    pub(crate) struct Count(AtomicUsize);

    impl Count {
        pub(crate) fn get(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A fresh counter and a waker that bumps it.
    pub(crate) fn waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&count), Waker::from(Arc::clone(&count)))
    }
}
