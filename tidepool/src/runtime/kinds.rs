//! What the pool has learned about kinds of task: a task's *kind* is the
//! type of its future (one per `spawn_fn` call site, in effect), and the
//! monitor records whether tasks of a kind were seen blocking or computing
//! for a whole quantum. The quantum rule (`control::policy`) uses it to lend
//! a slot only to work that is not known to compute.
//!
//! A small table of flags indexed by a hash of the type's name, shared by
//! every pool of the process: a collision only mixes two kinds' histories,
//! which costs a lend or a missed one, never correctness.

use std::sync::atomic::{AtomicU8, Ordering};

/// Entries in the table: enough that the call sites of a program rarely
/// collide, small enough to stay in a few cache lines' worth of memory.
const KINDS: usize = 1024;

/// Tasks of the kind were seen blocking.
const BLOCKS: u8 = 1;
/// Tasks of the kind were seen computing for a whole quantum.
const COMPUTES: u8 = 2;

// A `const` item to repeat: the array-repeat form that works on the
// crate's minimum Rust version (an inline `const {}` block needs 1.79).
#[allow(clippy::declare_interior_mutable_const)]
const NOTHING_SEEN: AtomicU8 = AtomicU8::new(0);
static FLAGS: [AtomicU8; KINDS] = [NOTHING_SEEN; KINDS];

/// A kind of task: an index into the table; 0 for work of no known kind
/// (fork-join jobs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kind(u16);

impl Kind {
    /// The kind of tasks whose future is a `T`. The name's address is a
    /// constant per type, so this costs a few instructions at spawn.
    pub(crate) fn of<T: ?Sized>() -> Kind {
        let address = std::any::type_name::<T>().as_ptr() as usize;
        // Fibonacci hashing of the address; the low bits of a string's
        // address are alignment, the high bits the same for every type.
        let hash = address.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize);
        Kind((hash >> (usize::BITS - 10)) as u16)
    }

    /// The raw index, to publish in an atomic.
    pub(crate) fn index(self) -> u16 {
        self.0
    }

    /// The kind published as `index`.
    pub(crate) fn from_index(index: u16) -> Kind {
        Kind(index % KINDS as u16)
    }

    /// Records that a task of this kind blocked.
    pub(crate) fn saw_blocking(self) {
        FLAGS[usize::from(self.0)].fetch_or(BLOCKS, Ordering::Relaxed);
    }

    /// Records that a task of this kind computed for a whole quantum.
    pub(crate) fn saw_computing(self) {
        FLAGS[usize::from(self.0)].fetch_or(COMPUTES, Ordering::Relaxed);
    }

    /// True if tasks of this kind were seen computing for a quantum and
    /// never seen blocking: a lent slot would only add a CPU-bound thread.
    pub(crate) fn likely_computes(self) -> bool {
        FLAGS[usize::from(self.0)].load(Ordering::Relaxed) == COMPUTES
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    struct A;
    struct B;

    #[test]
    fn kinds_of_distinct_types_keep_their_own_history() {
        let (a, b) = (Kind::of::<A>(), Kind::of::<B>());
        assert_eq!(a, Kind::of::<A>(), "one type, one kind");
        if a == b {
            return; // a collision: legal, and nothing more to check
        }
        a.saw_computing();
        assert!(a.likely_computes());
        assert!(!b.likely_computes());
        a.saw_blocking();
        assert!(!a.likely_computes(), "blocking once clears the suspicion");
        assert_eq!(Kind::from_index(a.index()), a);
    }
}
