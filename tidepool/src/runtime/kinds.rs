//! What the pool has learned about kinds of task: a task's *kind* is the
//! type of its future (one per closure, so one per `spawn_fn` call site, in
//! effect), and the
//! monitor records whether tasks of a kind were seen blocking or computing
//! for a whole quantum. Two rules use it:
//!
//! * the quantum rule (`control::policy`) lends a slot only to work that is
//!   not known to compute;
//! * a worker starts a closure of a kind known to block, while other work
//!   waits, without a slot (`worker`, "presumed blocking"): the slot goes on
//!   to the queued work at once instead of after the monitor's next look. A
//!   presumed task that computes instead marks its kind, which is never
//!   presumed again.
//!
//! A small table of flags indexed by a hash of the type's id, shared by
//! every pool of the process: a collision only mixes two kinds' histories,
//! which costs a lend or a missed one, never correctness.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};

/// Folds what a `TypeId` hashes into one word: no need for a keyed hash,
/// only for distinct ids to land apart.
struct Fold(u64);

impl Hasher for Fold {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(29) ^ n;
    }

    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64);
        self.write_u64((n >> 64) as u64);
    }
}

/// Entries in the table: enough that the call sites of a program rarely
/// collide, small enough to stay in a few cache lines' worth of memory.
const KINDS: usize = 1024;

/// Tasks of the kind were seen blocking.
const BLOCKS: u8 = 1;
/// Tasks of the kind were seen computing for a whole quantum.
const COMPUTES: u8 = 2;
/// A task of the kind, started presumed blocking, computed instead.
const OVERRAN: u8 = 4;

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
    /// The kind of tasks whose future is a `T`: its `TypeId`, folded into
    /// the table's index. (Not the type's name: closures defined in one
    /// function share a name, and so would every `spawn_fn` of a module.)
    /// The id is a constant per type, so this costs a few instructions.
    pub(crate) fn of<T: ?Sized + 'static>() -> Kind {
        let mut fold = Fold(0);
        std::any::TypeId::of::<T>().hash(&mut fold);
        // Fibonacci hashing: the top bits of the product mix every input bit.
        let hash = fold.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Kind((hash >> (64 - 10)) as u16)
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

    /// Records that a task of this kind, started presumed blocking, used
    /// the CPU for much of its run: its kind is not presumed again.
    pub(crate) fn saw_presumption_fail(self) {
        FLAGS[usize::from(self.0)].fetch_or(OVERRAN, Ordering::Relaxed);
    }

    /// True if tasks of this kind were seen blocking, and neither computing
    /// for a quantum nor computing when presumed blocking: the next one will
    /// likely block too.
    pub(crate) fn likely_blocks(self) -> bool {
        FLAGS[usize::from(self.0)].load(Ordering::Relaxed) == BLOCKS
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

    fn kind_of_value<T: 'static>(_: &T) -> Kind {
        Kind::of::<T>()
    }

    #[test]
    fn kinds_of_distinct_types_keep_their_own_history() {
        // Two closures of one function: one name, two types.
        let (first, second) = (|| 1, || 2);
        let (a, b) = (kind_of_value(&first), kind_of_value(&second));
        assert_eq!(a, kind_of_value(&first), "one type, one kind");
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

    #[test]
    fn a_kind_is_presumed_blocking_until_it_computes() {
        let (first, second) = (|| 3, || 4);
        let (a, b) = (kind_of_value(&first), kind_of_value(&second));
        if a == b {
            return; // a collision: legal, and nothing more to check
        }
        assert!(!a.likely_blocks(), "nothing seen yet");
        a.saw_blocking();
        assert!(a.likely_blocks());
        assert!(!b.likely_blocks());
        a.saw_presumption_fail();
        assert!(!a.likely_blocks(), "computed when presumed: never again");
        b.saw_blocking();
        b.saw_computing();
        assert!(!b.likely_blocks(), "a kind that computes is not presumed");
    }
}
