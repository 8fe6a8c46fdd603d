//! A task's *kind* and the table a pool keeps per kind: the kind is the
//! type of the task's future (one per closure, so one per `spawn_fn` call
//! site, in effect), a fork-join job's that of the task or job that forked
//! it (a join from outside the pool, a scope's task: its call site,
//! [`Kind::at`]). What the pool learns about a kind (whether it blocks,
//! computes, or waits on the pool; how many of its tasks may be presumed
//! blocking at once) and every rule that changes it are pure decisions in
//! `control::presumption`; this file only stores the records and applies
//! those decisions ([`KindTable`]), and keeps which task holds one of its
//! kind's presumed places ([`Presumption`]).
//!
//! # The table
//!
//! One [`KindTable`] per pool (`Shared::kinds`): what a kind does is
//! learned by the pool that runs it, so a pool (and a test) starts with
//! nothing learned. A fixed table of [`KINDS`] words, indexed by a hash of
//! the type's id and tagged with 16 more bits of it. A word whose tag is
//! not the kind's says nothing about the kind: a collision *forgets* the
//! older kind's history (the newer writer takes the word over, if what it
//! reports teaches: `presumption::Seen::takes_over`), it never lends it.
//! Borrowed histories did harm: a test's closure that hashed onto an entry
//! another test had taught to block was handed a thread of its own, in one
//! checkout and not another (a type's id depends on the crate's path).

use crate::control::presumption::{decide, Act, Ended, Learned, Record, Seen};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// Bits of the hash that index the table.
const INDEX_BITS: u32 = 12;
/// Entries in the table: enough that the call sites of a large program
/// rarely collide, 32 KiB per pool.
const KINDS: usize = 1 << INDEX_BITS;

/// A word: the tag in bits 48-63, then the kind's record
/// (`presumption::Record`, 48 bits).
const TAG_SHIFT: u32 = 48;
const RECORD_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// A kind of task or fork-join job: a table index and a tag; tag 0 is no
/// kind (a worker's entry before its first task), which learns nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kind {
    index: u16,
    tag: u16,
}

impl Kind {
    /// No kind (tag 0): reads say nothing, writes are ignored.
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) const NONE: Kind = Kind { index: 0, tag: 0 };

    /// The kind of tasks whose future is a `T`: its `TypeId`, folded into
    /// an index and a tag. (Not the type's name: closures defined in one
    /// function share a name, and so would every `spawn_fn` of a module.)
    /// The id is a constant per type, so this costs a few instructions.
    pub(crate) fn of<T: ?Sized + 'static>() -> Kind {
        let mut fold = Fold(0);
        std::any::TypeId::of::<T>().hash(&mut fold);
        Kind::from_hash(fold.0)
    }

    /// The kind of work started at `site` (a `join`'s or a scope task's
    /// call site): closures that borrow have no `TypeId`, and their type
    /// names do not tell the closures of one function apart. A few
    /// instructions: the site's file name is told apart by its address.
    pub(crate) fn at(site: &'static std::panic::Location<'static>) -> Kind {
        let mut fold = Fold(0);
        fold.write_u64(site.file().as_ptr() as u64);
        fold.write_u64(u64::from(site.line()) << 32 | u64::from(site.column()));
        Kind::from_hash(fold.0)
    }

    /// A kind from the folded hash of its type.
    #[inline]
    fn from_hash(folded: u64) -> Kind {
        // Fibonacci hashing: the top bits of the product mix every input bit.
        let hash = folded.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let index = (hash >> (64 - INDEX_BITS)) as u16;
        // Tag 0 is no kind's: a real kind's tag is never 0.
        let tag = ((hash >> 16) as u16).max(1);
        Kind { index, tag }
    }

    /// The kind as one word, to publish in an atomic.
    pub(crate) fn to_bits(self) -> u32 {
        u32::from(self.tag) << 16 | u32::from(self.index)
    }

    /// The kind published as `bits`.
    pub(crate) fn from_bits(bits: u32) -> Kind {
        Kind {
            index: (bits & (KINDS as u32 - 1)) as u16,
            tag: (bits >> 16) as u16,
        }
    }
}

/// What one pool has learned per kind (see the module docs): the records'
/// storage. Every change is a `control::presumption::decide`, applied in a
/// CAS loop on the kind's word.
pub(crate) struct KindTable {
    words: Box<[AtomicU64]>,
}

impl std::fmt::Debug for KindTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KindTable")
    }
}

impl Default for KindTable {
    fn default() -> Self {
        KindTable {
            words: (0..KINDS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl KindTable {
    /// `kind`'s record if the table's word is this kind's; an empty one if
    /// it is another kind's or this is no kind. Relaxed: a hint, read by
    /// other threads whenever it arrives; no other memory is published
    /// with it.
    fn read(&self, kind: Kind) -> Record {
        if kind.tag == 0 {
            return Record::default();
        }
        let word = self.words[usize::from(kind.index)].load(Ordering::Relaxed);
        if word >> TAG_SHIFT == u64::from(kind.tag) {
            Record::unpack(word & RECORD_MASK)
        } else {
            Record::default()
        }
    }

    /// Applies what was `seen` of `kind` (`presumption::decide`) to its
    /// record, and returns what to do. Takes the word over from another
    /// kind only if `seen` teaches (`Seen::takes_over`); writes nothing
    /// when the record does not change. No kind (tag 0) learns nothing.
    fn apply(&self, kind: Kind, seen: Seen) -> Act {
        self.apply_to(kind, seen).1
    }

    /// [`KindTable::apply`], also returning the record `seen` was applied
    /// to (the kind's, or a default one if the word is another kind's).
    fn apply_to(&self, kind: Kind, seen: Seen) -> (Record, Act) {
        if kind.tag == 0 {
            return (Record::default(), decide(Record::default(), seen).1);
        }
        let ours = u64::from(kind.tag) << TAG_SHIFT;
        let mut applied = (Record::default(), Act::Nothing);
        let _ = self.words[usize::from(kind.index)].fetch_update(
            Ordering::Relaxed,
            Ordering::Relaxed,
            |word| {
                let old = if word & !RECORD_MASK == ours {
                    Record::unpack(word & RECORD_MASK)
                } else if seen.takes_over() {
                    Record::default()
                } else {
                    applied = (Record::default(), decide(Record::default(), seen).1);
                    return None;
                };
                let (new, then) = decide(old, seen);
                applied = (old, then);
                let word_now = ours | new.pack();
                (word_now != word).then_some(word_now)
            },
        );
        applied
    }

    /// The monitor found a task of `kind` blocked (`Seen::Blocked`).
    pub(crate) fn saw_blocking(&self, kind: Kind) {
        self.apply(kind, Seen::Blocked);
    }

    /// A task of `kind` declared a block that outlasted its grace
    /// (`Seen::Declared`).
    pub(crate) fn declared_blocking(&self, kind: Kind) {
        self.apply(kind, Seen::Declared);
    }

    /// A task of `kind` entered a helping wait (`Seen::PoolWait`): never
    /// presumed. Costs a load once the kind is marked, so a fork-join's
    /// every join does not write a shared word.
    pub(crate) fn saw_pool_wait(&self, kind: Kind) {
        if !self.read(kind).waits_on_pool() {
            self.apply(kind, Seen::PoolWait);
        }
    }

    /// The monitor found a task of `kind` computing for a whole quantum
    /// (`Seen::ComputedForQuantum`).
    pub(crate) fn saw_computing(&self, kind: Kind) {
        self.apply(kind, Seen::ComputedForQuantum);
    }

    /// Starts a presumption (`Seen::Presume`): true, and one more presumed
    /// task of `kind` in flight, if the kind is presumed blocking and has
    /// room under its cap. Every `true` must be matched by one
    /// [`KindTable::presumption_over`] (or, for a task that did not run
    /// presumed, [`KindTable::presumption_given_back`]). Reads first: most kinds are never
    /// presumed, and a refusal must not write the shared word.
    pub(crate) fn try_presume(&self, kind: Kind) -> bool {
        self.read(kind).has_room() && self.apply(kind, Seen::Presume) == Act::Presume
    }

    /// Ends a presumption [`KindTable::try_presume`] started, of a task
    /// that ran presumed: what it did, if judged at its end (`None`: the
    /// monitor judged it while it ran). Counted among the kind's ends for
    /// the growth climb ([`KindTable::take_ends`]).
    pub(crate) fn presumption_over(&self, kind: Kind, what: Option<Ended>) {
        self.apply(kind, Seen::Ended(what));
    }

    /// Gives back a presumption [`KindTable::try_presume`] started, of a
    /// task that did not run presumed (`Seen::GivenBack`).
    pub(crate) fn presumption_given_back(&self, kind: Kind) {
        self.apply(kind, Seen::GivenBack);
    }

    /// The growth climb takes the count of `kind`'s presumed ends
    /// (`Seen::TakeEnds`): returns the record as it was, count included
    /// (`control::growth`).
    pub(crate) fn take_ends(&self, kind: Kind) -> Record {
        self.apply_to(kind, Seen::TakeEnds).0
    }

    /// The monitor judged a presumed task of `kind` computing while it
    /// runs: the kind stops being presumed at once.
    pub(crate) fn computed_while_presumed(&self, kind: Kind) {
        self.apply(kind, Seen::ComputingWhileRunning);
    }

    /// One monitor look at `kind`'s presumed tasks: `seen` running,
    /// `asleep` of them asleep; the cap it sets is at most `limit` (the
    /// growth climb's level, `control::growth`). True if the cap grew and
    /// the kind has room (`Act::MoreRoom`).
    pub(crate) fn looked(&self, kind: Kind, seen: u32, asleep: u32, limit: u32) -> bool {
        let look = Seen::Look {
            seen,
            asleep,
            limit,
        };
        self.apply(kind, look) == Act::MoreRoom
    }

    /// True if a task of `kind` would be presumed blocking now (see
    /// [`KindTable::try_presume`], which this only reads): a load, for the
    /// checks that cost more to come after it.
    pub(crate) fn likely_blocks(&self, kind: Kind) -> bool {
        self.read(kind).has_room()
    }

    /// True if `kind` is still presumed blocking, room aside: for a task
    /// that already holds one of its places (its kind may have been judged
    /// computing since).
    pub(crate) fn still_presumed(&self, kind: Kind) -> bool {
        self.read(kind).may_presume()
    }

    /// True if tasks of `kind` were seen computing for a quantum and never
    /// seen blocking: a lent slot would only add a CPU-bound thread.
    pub(crate) fn likely_computes(&self, kind: Kind) -> bool {
        self.read(kind).likely_computes()
    }

    /// What the table says about `kind` now, for reports
    /// (`Metrics::kinds`): a load.
    pub(crate) fn learned(&self, kind: Kind) -> Learned {
        self.read(kind).learned()
    }

    /// Presumed tasks of `kind` in flight (tests).
    #[cfg(all(test, not(tidepool_loom)))]
    fn in_flight(&self, kind: Kind) -> u32 {
        self.read(kind).in_flight()
    }
}

/// Whether a task holds one of its kind's presumptions (a place among the
/// presumed tasks in flight: [`KindTable::try_presume`]). Kept with the
/// task, so a task handed on (to a parked worker, then to its deque) is
/// presumed at most once, and whoever ends its journey (runs it, queues it
/// for a slot, drops it at a stop) gives the place back exactly once: a
/// place kept by mistake lowers the kind's room for good (a worker that
/// put a handed task on its deque and took a second place for it made a
/// short-blocking run's kind unpresumable: p50 start 0.76 ms instead of
/// 0.0074).
///
/// Relaxed: a task is owned by one thread at a time, and queues and
/// hand-offs order its owners.
#[derive(Debug, Default)]
pub(crate) struct Presumption(AtomicBool);

impl Presumption {
    /// Holds one of `kind`'s presumptions: true if it already does and the
    /// kind is still presumed (a place held for a kind judged computing
    /// since is given back: the task takes the ordinary path), or if
    /// [`KindTable::try_presume`] gives it one.
    pub(crate) fn take(&self, table: &KindTable, kind: Kind) -> bool {
        if self.0.load(Ordering::Relaxed) {
            if table.still_presumed(kind) {
                return true;
            }
            self.give_back(table, kind);
            return false;
        }
        let taken = table.try_presume(kind);
        if taken {
            self.0.store(true, Ordering::Relaxed);
        }
        taken
    }

    /// True if [`Presumption::take`] may succeed: the task holds one, or
    /// its kind has room (a load; `take` checks again as it takes).
    pub(crate) fn may_take(&self, table: &KindTable, kind: Kind) -> bool {
        self.0.load(Ordering::Relaxed) || table.likely_blocks(kind)
    }

    /// Lets go of the presumption, if held; true if it was. The caller then
    /// ends it ([`KindTable::presumption_over`]) when it knows what the
    /// task did (or gives it back, [`Presumption::give_back`]).
    pub(crate) fn let_go(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }

    /// Ends the presumption, if held, for a task that did not run presumed.
    pub(crate) fn give_back(&self, table: &KindTable, kind: Kind) {
        if self.let_go() {
            table.presumption_given_back(kind);
        }
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::control::presumption::{FRESH_CAP, MAX_CAP};

    fn kind_of_value<T: 'static>(_: &T) -> Kind {
        Kind::of::<T>()
    }

    #[track_caller]
    fn kind_here() -> Kind {
        Kind::at(std::panic::Location::caller())
    }

    #[test]
    fn a_call_site_is_one_kind_and_two_sites_are_two() {
        let table = KindTable::default();
        let sites: Vec<Kind> = (0..2).map(|_| kind_here()).collect();
        assert_eq!(sites[0], sites[1], "one site, one kind");
        let (a, b) = (kind_here(), kind_here());
        assert_ne!(a, b, "two sites on one line, two kinds");
        assert_ne!(a.tag, 0, "a site is a kind, not no kind");
        // What one site learns, the other does not (unless they share a
        // table word, which is legal and leaves nothing to check).
        if a.index != b.index {
            table.declared_blocking(a);
            assert!(table.likely_blocks(a));
            assert!(!table.likely_blocks(b));
        }
    }

    #[test]
    fn kinds_of_distinct_types_keep_their_own_history() {
        let table = KindTable::default();
        // Two closures of one function: one name, two types.
        let (first, second) = (|| 1, || 2);
        assert_eq!(
            kind_of_value(&first),
            kind_of_value(&first),
            "one type, one kind"
        );
        let (a, b) = (kind_of_value(&first), kind_of_value(&second));
        assert_eq!(Kind::from_bits(a.to_bits()), a);
        if a.index == b.index {
            return; // a shared word is legal, and leaves nothing to check
        }
        table.saw_computing(a);
        assert!(table.likely_computes(a));
        assert!(!table.likely_computes(b));
        table.declared_blocking(a);
        assert!(
            !table.likely_computes(a),
            "blocking once clears the suspicion"
        );
    }

    #[test]
    fn each_table_learns_for_itself() {
        let (one, two) = (KindTable::default(), KindTable::default());
        let kind = kind_of_value(&|| 3);
        one.declared_blocking(kind);
        assert!(one.likely_blocks(kind));
        assert!(!two.likely_blocks(kind), "another pool learned nothing");
    }

    #[test]
    fn a_task_holds_at_most_one_presumption_and_gives_it_back_once() {
        let table = KindTable::default();
        let kind = kind_of_value(&|| 10);
        table.declared_blocking(kind);
        let task = Presumption::default();
        assert!(task.take(&table, kind));
        assert!(task.take(&table, kind), "held already");
        assert_eq!(table.in_flight(kind), 1, "one place, however often taken");
        task.give_back(&table, kind);
        task.give_back(&table, kind);
        assert_eq!(table.in_flight(kind), 0, "given back once");
        assert!(!task.let_go());
    }

    #[test]
    fn a_held_place_of_a_kind_judged_computing_since_is_given_back() {
        let table = KindTable::default();
        let kind = kind_of_value(&|| 12);
        table.declared_blocking(kind);
        let (handed, running) = (Presumption::default(), Presumption::default());
        assert!(handed.take(&table, kind));
        assert!(running.take(&table, kind));
        assert_eq!(table.in_flight(kind), FRESH_CAP);
        // The monitor finds the running one computing: the handed one,
        // not started yet, takes the ordinary path.
        table.computed_while_presumed(kind);
        assert!(!handed.take(&table, kind));
        assert!(!handed.let_go(), "its place was given back");
        assert_eq!(table.in_flight(kind), 1);
        assert!(running.let_go());
        table.presumption_over(kind, None);
        assert_eq!(table.in_flight(kind), 0);
    }

    #[test]
    fn presumed_tasks_in_flight_are_capped() {
        let table = KindTable::default();
        let kind = kind_of_value(&|| 8);
        table.declared_blocking(kind);
        for _ in 0..FRESH_CAP {
            assert!(table.try_presume(kind));
        }
        assert!(!table.try_presume(kind), "the fresh cap in flight: no more");
        // A look finds them asleep: room for as many more.
        assert!(table.looked(kind, FRESH_CAP, FRESH_CAP, MAX_CAP));
        for _ in 0..FRESH_CAP {
            assert!(table.try_presume(kind));
        }
        assert!(!table.try_presume(kind));
        for _ in 0..2 * FRESH_CAP - 1 {
            table.presumption_over(kind, None);
        }
        table.presumption_given_back(kind);
        assert_eq!(table.in_flight(kind), 0, "every presumption ended");
        // The ends that ran, counted for the growth climb, taken once.
        assert_eq!(table.take_ends(kind).ends(), 2 * FRESH_CAP - 1);
        assert_eq!(table.take_ends(kind).ends(), 0);
        // The climb's limit holds a look's cap.
        for _ in 0..FRESH_CAP {
            assert!(table.try_presume(kind));
        }
        assert!(!table.looked(kind, FRESH_CAP, FRESH_CAP, FRESH_CAP), "held");
        assert!(table.looked(kind, FRESH_CAP, FRESH_CAP, MAX_CAP));
    }

    #[test]
    fn a_presumption_never_takes_another_kinds_word() {
        let table = KindTable::default();
        let owner = Kind { index: 9, tag: 100 };
        let other = Kind { index: 9, tag: 200 };
        table.declared_blocking(owner);
        assert!(!table.try_presume(other));
        table.presumption_over(other, None);
        assert!(!table.looked(other, 4, 4, MAX_CAP));
        assert_eq!(table.take_ends(other), Record::default());
        table.computed_while_presumed(other);
        assert!(
            table.likely_blocks(owner),
            "the owner's record is untouched"
        );
    }

    #[test]
    fn a_colliding_kind_forgets_the_older_history_and_never_borrows_it() {
        let table = KindTable::default();
        let owner = Kind { index: 7, tag: 100 };
        let other = Kind { index: 7, tag: 200 };
        table.declared_blocking(owner);
        assert!(table.likely_blocks(owner));
        assert!(
            !table.likely_blocks(other),
            "another kind's history is not ours"
        );
        table.saw_computing(other);
        assert!(table.likely_computes(other));
        assert!(
            !table.likely_blocks(owner),
            "the word was taken over: forgotten"
        );
    }

    #[test]
    fn a_kind_that_waits_on_the_pool_is_never_presumed() {
        let table = KindTable::default();
        let kind = kind_of_value(&|| 6);
        table.declared_blocking(kind);
        assert!(table.likely_blocks(kind));
        assert!(table.learned(kind).presumed);
        table.saw_pool_wait(kind);
        assert!(!table.likely_blocks(kind), "a join needs a slot to help");
        let learned = table.learned(kind);
        assert!(learned.waits_on_pool && !learned.presumed);
    }

    #[test]
    fn no_kind_learns_nothing() {
        let table = KindTable::default();
        table.declared_blocking(Kind::NONE);
        assert!(!table.likely_blocks(Kind::NONE));
        assert!(!table.try_presume(Kind::NONE));
        assert_eq!(Kind::from_bits(0), Kind::NONE);
    }
}
