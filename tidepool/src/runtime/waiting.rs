//! The async tasks of a pool that are waiting (went `Pending` and have not
//! ended), so that a pool that stops can cancel them.
//!
//! # Why
//!
//! A task that waits is held only by whoever holds its waker: a socket, a
//! timer, a channel, or nobody at all (`std::future::pending`). When a
//! shutdown times out, queued tasks are dropped from the queues, but a
//! waiting task is in no queue: without this registry it stayed alive
//! after the pool stopped, its `JoinHandle` never resolved and what it
//! captured (a listening socket, a connection) stayed open, until some
//! event happened to wake it.
//!
//! # The protocol
//!
//! A task registers a clone of its waker the first time it returns
//! `Pending` ([`WaitingTasks::register`]) and deregisters when its future
//! ends or is dropped ([`WaitingTasks::deregister`]). The pool, as it
//! stops, closes every shard and wakes what was registered
//! ([`WaitingTasks::cancel_all`]); a woken task is scheduled on a stopped
//! pool, which drops it (cancelled). The race between a registration and
//! the stop is settled by each shard's lock and its `closed` flag: a
//! registration either lands before the close (and is woken by it) or
//! finds the shard closed and is refused, and the task then wakes itself.
//! A closed shard takes no new entry, so a key is never reused after the
//! stop took its entry, and a late deregistration cannot remove someone
//! else's. The loom model `loom_models/waiting.rs` checks both races.
//!
//! # A pool nobody holds
//!
//! Once the last `Pool` handle (and group, and pair) is gone, nobody can
//! stop the pool and so nobody needs the registry's wakers to cancel
//! anything, but they still keep their tasks alive. A task whose waker
//! only the registry holds (it waits on `std::future::pending`, or on a
//! channel whose other end dropped its waker without waking) can never be
//! woken; held by the registry it never ended, and the closing pool, which
//! runs what it has to its end, kept its threads for good. So the pool is
//! *abandoned* ([`WaitingTasks::abandon`]) when its last handle goes: the
//! registry drops the wakers it holds (keeping their entries, so no key is
//! reused and a late deregistration still removes only its own). A task
//! that nothing else can wake loses its last reference there, and
//! async-task, finding it unfinished with no handle, closes it and queues
//! it one last time: a worker drops its future (its destructors run, and
//! it counts as cancelled), and the pool can stop. A task whose waker a
//! timer, a socket or a channel holds runs on. A task that first waits
//! after the abandon registers as before, and the registry drops its waker
//! the next time a worker runs out of work
//! ([`WaitingTasks::release_if_abandoned`]), after the task's poll has
//! returned: dropped inside that poll, the waker would not be the last
//! reference (the worker's runnable is), and async-task would free the
//! task without dropping its future when the runnable goes. The wakers
//! that spawning threads keep to free cells where they were allocated
//! (`runtime::free_rings`, "Async tasks") are let go of at the same time, for
//! the same reason.
//!
//! # Cost
//!
//! Only tasks that wait pay: one waker clone and one lock for the first
//! wait, one lock at the end. Closures never return `Pending` and never
//! register. Shards, picked by the registering worker, keep workers from
//! contending for one lock.

use crate::sync::{lock, AtomicBool, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use slab::Slab;
use std::task::Waker;

/// Where a waiting task's waker is registered, packed in a non-zero `u32`
/// (the task's wrapper keeps it in a word that was padding, so the cell of
/// every task, closures included, stays the size it was): the shard in the
/// low [`SHARD_BITS`] bits, the slot above them, plus one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WaitingKey(std::num::NonZeroU32);

/// Bits of a key that name the shard: at most 64 shards.
const SHARD_BITS: u32 = 6;
/// Shards at most.
pub(crate) const MAX_SHARDS: usize = 1 << SHARD_BITS;

impl WaitingKey {
    /// `None` if `slot` does not fit (tens of millions of tasks waiting in
    /// one shard): such a task is not registered, as before the registry.
    fn new(shard: usize, slot: usize) -> Option<Self> {
        let packed = u32::try_from(slot).ok()?.checked_shl(SHARD_BITS)?;
        if packed >> SHARD_BITS != slot as u32 {
            return None;
        }
        let packed = (packed | shard as u32).checked_add(1)?;
        std::num::NonZeroU32::new(packed).map(WaitingKey)
    }

    fn shard(self) -> usize {
        ((self.0.get() - 1) & (MAX_SHARDS as u32 - 1)) as usize
    }

    fn slot(self) -> usize {
        ((self.0.get() - 1) >> SHARD_BITS) as usize
    }

    /// The key as a `u32` (never 0), for a wrapper's compact field.
    pub(crate) fn to_bits(self) -> u32 {
        self.0.get()
    }

    /// The key [`to_bits`](Self::to_bits) gave; `None` for 0.
    pub(crate) fn from_bits(bits: u32) -> Option<Self> {
        std::num::NonZeroU32::new(bits).map(WaitingKey)
    }
}

/// What [`WaitingTasks::register`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Registered {
    /// Registered: deregister with this key when the task ends.
    Yes(WaitingKey),
    /// The pool has stopped: the caller wakes its task, which the stopped
    /// pool then drops (cancelled).
    PoolStopped,
    /// No room for the key: not registered (the task is not cancelled by
    /// a stop, as before the registry).
    NoRoom,
}

/// One shard: the registered wakers, and whether the pool stopped. An
/// entry's waker is `None` once an abandoned pool dropped it; the entry
/// stays until its task ends.
#[derive(Debug, Default)]
struct Shard {
    closed: bool,
    wakers: Slab<Option<Waker>>,
    /// The slots registered since the pool was abandoned, so a worker's
    /// look drops their wakers without a pass over every entry (an
    /// abandoned server may hold thousands).
    fresh: Vec<usize>,
}

/// The registry of one pool's waiting tasks (module docs).
#[derive(Debug)]
pub(crate) struct WaitingTasks {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    /// Set when the pool's last handle went (module docs, "A pool nobody
    /// holds").
    abandoned: AtomicBool,
}

impl WaitingTasks {
    /// A registry of `shards` shards (at least one, at most [`MAX_SHARDS`]).
    pub(crate) fn new(shards: usize) -> Self {
        WaitingTasks {
            shards: (0..shards.clamp(1, MAX_SHARDS))
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
            abandoned: AtomicBool::new(false),
        }
    }

    /// Registers `waker`, of a task that just returned `Pending`, in the
    /// shard `hint` picks.
    pub(crate) fn register(&self, hint: usize, waker: &Waker) -> Registered {
        let shard = hint % self.shards.len();
        let mut guard = lock(&self.shards[shard]);
        if guard.closed {
            return Registered::PoolStopped;
        }
        let entry = guard.wakers.vacant_entry();
        let slot = entry.key();
        match WaitingKey::new(shard, slot) {
            Some(key) => {
                entry.insert(Some(waker.clone()));
                // Relaxed, under the lock: a registration that `abandon`'s
                // pass missed locked the shard after the pass did, and so
                // sees the flag stored before it. One the pass did see may
                // be noted too; its later take finds `None`.
                if self.abandoned.load(Ordering::Relaxed) {
                    guard.fresh.push(slot);
                }
                Registered::Yes(key)
            }
            None => Registered::NoRoom,
        }
    }

    /// Removes the entry `key` names (its task ended). Nothing if the pool
    /// stopped meanwhile: the stop took the entry and woke it.
    pub(crate) fn deregister(&self, key: WaitingKey) {
        let removed = {
            let mut guard = lock(&self.shards[key.shard()]);
            if guard.closed {
                return;
            }
            guard.wakers.try_remove(key.slot())
        };
        // Dropped outside the lock: it may be the task's last reference.
        drop(removed);
    }

    /// Closes every shard and wakes every task registered, so that the
    /// stopped pool drops them. Returns how many it woke.
    pub(crate) fn cancel_all(&self) -> usize {
        let mut woken = 0;
        for shard in self.shards.iter() {
            let wakers = {
                let mut guard = lock(shard);
                guard.closed = true;
                std::mem::take(&mut guard.wakers)
            };
            // Woken outside the lock: waking schedules the task, and a
            // stopped pool drops it there, running its destructors.
            for waker in wakers.into_iter().filter_map(|(_, waker)| waker) {
                waker.wake();
                woken += 1;
            }
        }
        woken
    }

    /// For the pool whose last handle just went: marks it abandoned and
    /// drops the wakers held (module docs, "A pool nobody holds"). Returns
    /// how many it dropped.
    pub(crate) fn abandon(&self) -> usize {
        self.abandoned.store(true, Ordering::SeqCst);
        self.release(|shard| {
            let held = shard.wakers.iter_mut().filter_map(|(_, w)| w.take());
            held.collect()
        })
    }

    /// For a worker that ran out of work: if the pool is abandoned, drops
    /// the wakers registered since the last look (tasks that first waited
    /// after the abandon). One load otherwise.
    ///
    /// Relaxed is enough: a registration that [`abandon`](Self::abandon)'s
    /// pass over the shards missed took its shard's lock after that pass
    /// did, so it happens after the flag was set, and so does this load
    /// made after it by the worker that polled the task (the loom model
    /// `a_task_that_first_waits_as_its_pool_is_abandoned_is_released`).
    pub(crate) fn release_if_abandoned(&self) -> usize {
        if !self.abandoned.load(Ordering::Relaxed) {
            return 0;
        }
        self.release(|shard| {
            let Shard { wakers, fresh, .. } = shard;
            // A slot whose task ended may have been taken again by a later
            // registration, noted again: its second take finds `None`.
            let held = fresh
                .drain(..)
                .filter_map(|slot| wakers.get_mut(slot)?.take());
            held.collect()
        })
    }

    /// Drops the wakers `take` takes out of each shard (under its lock),
    /// keeping the entries. Returns how many.
    fn release(&self, mut take: impl FnMut(&mut Shard) -> Vec<Waker>) -> usize {
        let mut released = 0;
        for shard in self.shards.iter() {
            let wakers = take(&mut lock(shard));
            released += wakers.len();
            // Dropped outside the lock: for a task nothing else can wake it
            // is the last reference, and async-task queues the task (to
            // drop its future) from inside the drop.
            drop(wakers);
        }
        released
    }

    /// How many entries still hold a waker (for tests).
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn holding(&self) -> usize {
        self.shards
            .iter()
            .map(|s| lock(s).wakers.iter().filter(|(_, w)| w.is_some()).count())
            .sum()
    }

    /// How many tasks are registered (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).wakers.len()).sum()
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::sync::counting::waker as counting_waker;
    use crate::sync::Arc;

    #[test]
    fn a_task_that_ended_is_not_woken_by_the_stop() {
        let tasks = WaitingTasks::new(4);
        let (ended, ended_waker) = counting_waker();
        let (waiting, waiting_waker) = counting_waker();
        let Registered::Yes(key) = tasks.register(0, &ended_waker) else {
            panic!("registered")
        };
        assert!(matches!(
            tasks.register(5, &waiting_waker),
            Registered::Yes(_)
        ));
        tasks.deregister(key);
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks.cancel_all(), 1);
        assert_eq!(ended.get(), 0);
        assert_eq!(waiting.get(), 1);
        assert_eq!(tasks.len(), 0);
    }

    #[test]
    fn a_stopped_registry_refuses_and_ignores_late_ends() {
        let tasks = WaitingTasks::new(2);
        let (_, waker) = counting_waker();
        let Registered::Yes(key) = tasks.register(1, &waker) else {
            panic!("registered")
        };
        tasks.cancel_all();
        assert_eq!(tasks.register(1, &waker), Registered::PoolStopped);
        // The stop took the entry: the end finds nothing to remove.
        tasks.deregister(key);
        assert_eq!(tasks.len(), 0);
    }

    #[test]
    fn an_abandoned_registry_drops_its_wakers_unwoken_and_keeps_the_keys() {
        let tasks = WaitingTasks::new(2);
        let (early, early_waker) = counting_waker();
        let Registered::Yes(early_key) = tasks.register(0, &early_waker) else {
            panic!("registered")
        };
        drop(early_waker);
        // Not abandoned: a worker's look drops nothing.
        assert_eq!(tasks.release_if_abandoned(), 0);
        assert_eq!(tasks.abandon(), 1);
        assert_eq!((tasks.len(), tasks.holding()), (1, 0));
        assert_eq!(early.get(), 0, "dropped, not woken");
        assert_eq!(Arc::strong_count(&early), 1, "the registry let go");
        // A task that first waits after the abandon registers, and the
        // next look of a worker out of work lets go of it.
        let (late, late_waker) = counting_waker();
        let Registered::Yes(late_key) = tasks.register(0, &late_waker) else {
            panic!("an abandoned pool still runs its tasks")
        };
        assert_ne!(late_key, early_key, "the early entry's key is not reused");
        drop(late_waker);
        assert_eq!(tasks.release_if_abandoned(), 1);
        assert_eq!(Arc::strong_count(&late), 1);
        assert_eq!(tasks.release_if_abandoned(), 0);
        // One that ended before the look: nothing left to let go of.
        let (_, gone_waker) = counting_waker();
        let Registered::Yes(gone_key) = tasks.register(1, &gone_waker) else {
            panic!("registered")
        };
        tasks.deregister(gone_key);
        assert_eq!(tasks.release_if_abandoned(), 0);
        // Each end removes its own entry; a stop then wakes nobody.
        tasks.deregister(early_key);
        assert_eq!(tasks.len(), 1);
        tasks.deregister(late_key);
        assert_eq!(tasks.len(), 0);
        assert_eq!(tasks.cancel_all(), 0);
        assert_eq!((early.get(), late.get()), (0, 0));
    }

    #[test]
    fn keys_pack_shard_and_slot_and_refuse_what_does_not_fit() {
        for (shard, slot) in [(0, 0), (63, 0), (5, 12_345), (62, (1 << 26) - 1)] {
            let key = WaitingKey::new(shard, slot).unwrap();
            assert_eq!((key.shard(), key.slot()), (shard, slot));
            assert_eq!(WaitingKey::from_bits(key.to_bits()), Some(key));
        }
        assert_eq!(WaitingKey::new(0, 1 << 26), None);
        assert_eq!(WaitingKey::from_bits(0), None);
    }
}
