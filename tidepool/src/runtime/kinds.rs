//! What the pool has learned about kinds of task: a task's *kind* is the
//! type of its future (one per closure, so one per `spawn_fn` call site, in
//! effect), a fork-join job's that of the task or job that forked it (a
//! join from outside the pool, a scope's task: its call site,
//! [`Kind::at`]), and the monitor records whether tasks of a kind were
//! seen blocking or computing for a whole quantum. Two rules use it:
//!
//! * the quantum rule (`control::policy`) lends a slot only to work that is
//!   not known to compute;
//! * a closure of a kind known to block is *presumed blocking* (`worker`):
//!   it is handed a thread of its own when spawned, or started without a
//!   slot by the worker that finds it, so a burst of such items starts a
//!   thread per item at once (as tokio's `spawn_blocking` does, without
//!   being told) instead of a wave per monitor look.
//!
//! # Why a presumption ends
//!
//! A guess that a kind blocks is undone, or kept small, in these ways, so
//! a wrong guess costs a bounded number of threads, never a thread per
//! task for good:
//!
//! * two presumed tasks in a row that *computed* (a monitor interval of
//!   CPU, at least a quarter of the task's wall time) mark the kind, never
//!   presumed again; one that waited in between restarts the count, since
//!   one may be noise (a stalled VM's time counted as a task's CPU);
//! * a kind is known to block once the monitor found two of its tasks
//!   blocked (one sighting may be an accident: see [`Kind::saw_blocking`])
//!   or one declared it (`tidepool::blocking`);
//! * every kind has a *credit*: seen blocking, it gets [`FRESH_CREDIT`];
//!   a presumed task that ends within an eighth of a monitor interval (a
//!   lock-convoy item caught asleep once, a cache hit) costs one; one that
//!   waited an interval or longer earns one back, up to [`MAX_CREDIT`]. At
//!   zero the kind is not presumed until the monitor sees it block again.
//!   No more presumed tasks of a kind are in flight at once than its
//!   credit, so a kind newly taught to block gets a handful of threads
//!   until its tasks show they wait (each blocked task of the kind still
//!   waiting at a monitor look earns one: presumed tasks that all wait
//!   double every interval), and a kind with a history of long waits gets
//!   a thread per item;
//! * a kind seen computing for a whole quantum (at a CPU share a blocked
//!   task never reaches: a task runnable but starved of a core does not
//!   count) is not presumed until the monitor finds two of its tasks
//!   blocked again: one sighting either way is not a verdict for the life
//!   of the process, and a presumed task that computes still ends
//!   presumption for good;
//! * a kind whose tasks wait for the pool's own work (a join, `block_on`,
//!   a scope's end) is never presumed: a presumed task holds no slot, so
//!   its wait cannot help run what it waits for, and a recursive fork-join
//!   taught to block once got a thread per spawn, each waiting on queued
//!   children, up to `max_threads` (a hang).
//!
//! # The table
//!
//! A fixed table of [`KINDS`] words shared by every pool of the process
//! (what a kind does does not depend on the pool), indexed by a hash of
//! the type's id and tagged with 16 more bits of it. A word whose tag is
//! not the kind's says nothing about the kind: a collision *forgets* the
//! older kind's history (the newer writer takes the word over), it never
//! lends it. Borrowed histories did harm: a test's closure that hashed onto
//! an entry another test had taught to block was handed a thread of its
//! own, in one checkout and not another (a type's id depends on the
//! crate's path).

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
/// rarely collide, 16 KiB in all.
const KINDS: usize = 1 << INDEX_BITS;

/// Tasks of the kind were seen blocking: twice by the monitor, or once
/// declared by the task itself.
const BLOCKS: u32 = 1;
/// Tasks of the kind were seen computing for a whole quantum.
const COMPUTES: u32 = 2;
/// A task of the kind, started presumed blocking, computed instead.
const OVERRAN: u32 = 4;
/// The monitor found a task of the kind blocked once (not yet `BLOCKS`).
const BLOCKED_ONCE: u32 = 8;
/// A task of the kind waited for the pool's own work (a join, `block_on`,
/// a scope's end): never presumed, see [`Kind::saw_pool_wait`].
const WAITS_ON_POOL: u32 = 16;
/// A presumed task of the kind computed, and none has waited since (not
/// yet `OVERRAN`).
const OVERRAN_ONCE: u32 = 32;
/// The flags that decide whether a kind is presumed blocking.
const VERDICT_FLAGS: u32 = BLOCKS | COMPUTES | OVERRAN | WAITS_ON_POOL;

/// A word: the tag in bits 48-63, then (`Record`) the presumed tasks in
/// flight in bits 24-39, the credit in bits 8-23 and the flags in 0-7.
const TAG_SHIFT: u32 = 48;
const RECORD_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// The credit of a kind just seen blocking: that many presumed tasks may
/// be in flight at once, and that many may end short before the kind
/// stops being presumed. Small, so a kind that the monitor caught asleep
/// on a lock (a convoy of tiny items) costs a handful of extra threads,
/// not one per item.
pub(crate) const FRESH_CREDIT: u32 = 8;
/// The most credit a kind can earn (a presumed task that waited earns
/// one): enough for a burst of a kind known to block to start a thread per
/// item at once, as many as a pool's default `max_threads`.
pub(crate) const MAX_CREDIT: u32 = 1024;

static TABLE: [AtomicU64; KINDS] = [const { AtomicU64::new(0) }; KINDS];

/// What the table says about one kind, unpacked from its word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Record {
    flags: u32,
    /// How many presumed tasks may be in flight at once (see the module
    /// docs), at most [`MAX_CREDIT`].
    credit: u32,
    /// Presumed tasks of the kind started and not ended yet.
    in_flight: u32,
}

impl Record {
    fn unpack(bits: u64) -> Record {
        Record {
            flags: (bits & 0xff) as u32,
            credit: (bits >> 8 & 0xffff) as u32,
            in_flight: (bits >> 24 & 0xffff) as u32,
        }
    }

    fn pack(self) -> u64 {
        u64::from(self.flags & 0xff)
            | u64::from(self.credit.min(0xffff)) << 8
            | u64::from(self.in_flight.min(0xffff)) << 24
    }

    /// Seen blocking: the kind blocks, with at least a fresh credit; the
    /// blocking outweighs an earlier sighting of a task computing for a
    /// quantum (not a presumed task computing: `OVERRAN` stays).
    fn blocks(self) -> Record {
        Record {
            flags: (self.flags | BLOCKS) & !COMPUTES,
            credit: self.credit.max(FRESH_CREDIT),
            ..self
        }
    }

    fn may_presume(self) -> bool {
        self.flags & VERDICT_FLAGS == BLOCKS && self.credit > 0
    }
}

/// A kind of task or fork-join job: a table index and a tag; tag 0 is no
/// kind (a worker's entry before its first task), which learns nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kind {
    index: u16,
    tag: u16,
}

/// What a presumed task turned out to do, for [`Kind::presumption_over`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presumed {
    /// It waited past a monitor interval without computing: right guess.
    Waited,
    /// It ended within a small part of a monitor interval: a thread spent
    /// for little.
    Short,
    /// It kept a core busy: a wrong guess (twice in a row: never presumed
    /// again).
    Computed,
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

    /// This kind's record if the table's word is this kind's; an empty
    /// one if it is another kind's or this is no kind.
    fn read(self) -> Record {
        if self.tag == 0 {
            return Record::default();
        }
        let word = TABLE[usize::from(self.index)].load(Ordering::Relaxed);
        if word >> TAG_SHIFT == u64::from(self.tag) {
            Record::unpack(word & RECORD_MASK)
        } else {
            Record::default()
        }
    }

    /// Replaces this kind's record by `change(old)` (`None`: leaves it as
    /// it is); with `take_over`, takes the word over from another kind if
    /// it holds one (whose history is then forgotten), else leaves another
    /// kind's word alone. Returns whether the record was replaced. Relaxed:
    /// a hint, read by other threads whenever it arrives; no other memory
    /// is published with it.
    fn update(self, take_over: bool, change: impl Fn(Record) -> Option<Record>) -> bool {
        if self.tag == 0 {
            return false;
        }
        let ours = u64::from(self.tag) << TAG_SHIFT;
        TABLE[usize::from(self.index)]
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let old = if word & !RECORD_MASK == ours {
                    Record::unpack(word & RECORD_MASK)
                } else if take_over {
                    Record::default()
                } else {
                    return None;
                };
                change(old).map(|new| ours | new.pack())
            })
            .is_ok()
    }

    /// Records that the monitor found a task of this kind blocked. The
    /// second time (for a kind not known to block yet) the kind blocks: one
    /// sighting may be an accident, like an item of a lock convoy that
    /// tiny items form, caught asleep while the lock's holder was
    /// preempted (one such sighting in 100,000 items handed the items
    /// after it 44 threads). Its credit is at least [`FRESH_CREDIT`] again.
    ///
    /// A kind seen computing for a quantum since it last blocked needs two
    /// sightings again: then the blocking clears the computing, so a kind
    /// whose task was once caught runnable for a quantum (starved of a core
    /// on a loaded machine, say) is not kept from presumption for good.
    pub(crate) fn saw_blocking(self) {
        self.update(true, |old| {
            let known = old.flags & BLOCKS != 0 && old.flags & COMPUTES == 0;
            Some(if !known && old.flags & BLOCKED_ONCE == 0 {
                Record {
                    flags: old.flags | BLOCKED_ONCE,
                    ..old
                }
            } else {
                old.blocks()
            })
        });
    }

    /// Records that a task of this kind declared that it blocks
    /// (`tidepool::blocking`): the kind blocks, from the first time.
    pub(crate) fn declared_blocking(self) {
        self.update(true, |old| Some(old.blocks()));
    }

    /// Records that a task of this kind waits for the pool's own work (it
    /// entered a helping wait): the kind is never presumed blocking, since
    /// a task without a slot cannot help run what it waits for. Costs a
    /// load once the kind is marked, so a fork-join's every join does not
    /// write a shared word.
    pub(crate) fn saw_pool_wait(self) {
        if self.read().flags & WAITS_ON_POOL == 0 {
            self.set_flag(WAITS_ON_POOL);
        }
    }

    /// Records that a task of this kind computed for a whole quantum: not
    /// presumed until two of its tasks are found blocked again (a blocked
    /// sighting before this one no longer counts).
    pub(crate) fn saw_computing(self) {
        self.update(true, |old| {
            Some(Record {
                flags: (old.flags | COMPUTES) & !BLOCKED_ONCE,
                ..old
            })
        });
    }

    fn set_flag(self, flag: u32) {
        self.update(true, |old| {
            Some(Record {
                flags: old.flags | flag,
                ..old
            })
        });
    }

    /// Records that a task of this kind, blocked (presumed, found or
    /// declared), was still waiting a monitor interval later: one more
    /// credit, up to [`MAX_CREDIT`], so one more presumed task may be in
    /// flight. Read first: once at the cap it costs a load.
    pub(crate) fn waited_an_interval(self) {
        let now = self.read();
        if now.flags & BLOCKS == 0 || now.credit >= MAX_CREDIT {
            return;
        }
        self.update(false, |old| {
            (old.credit < MAX_CREDIT).then_some(Record {
                credit: old.credit + 1,
                ..old
            })
        });
    }

    /// Starts a presumption: true, and one more presumed task of the kind
    /// in flight, if tasks of this kind were seen blocking, neither
    /// computing for a quantum, nor computing when presumed blocking, nor
    /// waiting on the pool, and fewer presumed tasks of the kind are in
    /// flight than its credit. Every `true` must be matched by one
    /// [`Kind::presumption_over`]. The cap is what keeps a wrong guess
    /// cheap: a lock convoy's items, caught asleep twice, were handed 433
    /// threads in a row (100,000 items spawned in a burst) before the
    /// first few ended short and used the credit up.
    pub(crate) fn try_presume(self) -> bool {
        // Read first: most kinds are never presumed, and a failed check
        // must not write the shared word.
        let now = self.read();
        if !now.may_presume() || now.in_flight >= now.credit {
            return false;
        }
        self.update(false, |old| {
            (old.may_presume() && old.in_flight < old.credit).then_some(Record {
                in_flight: old.in_flight + 1,
                ..old
            })
        })
    }

    /// Ends a presumption [`Kind::try_presume`] started: `what` the task
    /// did, if it ran (`None` if it never ran: it was queued instead, or
    /// dropped by a shutdown). A waited task earns the kind one credit
    /// (up to [`MAX_CREDIT`]), a short one costs one; the second in a row
    /// that computed marks the kind, never presumed again.
    pub(crate) fn presumption_over(self, what: Option<Presumed>) {
        self.update(false, |old| {
            let mut new = Record {
                in_flight: old.in_flight.saturating_sub(1),
                ..old
            };
            match what {
                Some(Presumed::Waited) => {
                    new.credit = (old.credit + 1).min(MAX_CREDIT);
                    new.flags &= !OVERRAN_ONCE;
                }
                Some(Presumed::Short) => new.credit = old.credit.saturating_sub(1),
                Some(Presumed::Computed) if old.flags & OVERRAN_ONCE != 0 => {
                    new.flags |= OVERRAN;
                }
                Some(Presumed::Computed) => new.flags |= OVERRAN_ONCE,
                None => {}
            }
            Some(new)
        });
    }

    /// True if a task of this kind would be presumed blocking now (see
    /// [`Kind::try_presume`], which this only reads): a load, for the
    /// checks that cost more to come after it.
    pub(crate) fn likely_blocks(self) -> bool {
        let now = self.read();
        now.may_presume() && now.in_flight < now.credit
    }

    /// True if tasks of this kind were seen computing for a quantum and
    /// never seen blocking: a lent slot would only add a CPU-bound thread.
    pub(crate) fn likely_computes(self) -> bool {
        // Whether it waits on the pool says nothing about its computing.
        self.read().flags & (VERDICT_FLAGS & !WAITS_ON_POOL) == COMPUTES
    }

    /// What the table says about this kind now, for reports
    /// (`Metrics::kinds`): a load.
    pub(crate) fn learned(self) -> Learned {
        let now = self.read();
        Learned {
            presumed: now.may_presume(),
            computes: now.flags & (VERDICT_FLAGS & !WAITS_ON_POOL) == COMPUTES,
            waits_on_pool: now.flags & WAITS_ON_POOL != 0,
        }
    }
}

/// What the pool has learned about a kind, as reports show it
/// ([`Kind::learned`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Learned {
    /// Its closures are presumed blocking: handed a thread of their own as
    /// they are spawned, while its credit lasts.
    pub(crate) presumed: bool,
    /// Its tasks were seen computing for a quantum, and not blocking since.
    pub(crate) computes: bool,
    /// Its tasks wait for the pool's own work: never presumed.
    pub(crate) waits_on_pool: bool,
}

/// Whether a task holds one of its kind's presumptions (a place among the
/// presumed tasks in flight: [`Kind::try_presume`]). Kept with the task, so
/// a task handed on (to a parked worker, then to its deque) is presumed at
/// most once, and whoever ends its journey (runs it, queues it for a slot,
/// drops it at a stop) gives the place back exactly once: a place kept by
/// mistake lowers the kind's cap for good (a worker that put a handed task
/// on its deque and took a second place for it made a short-blocking run's
/// kind unpresumable: p50 start 0.76 ms instead of 0.0074).
///
/// Relaxed: a task is owned by one thread at a time, and queues and
/// hand-offs order its owners.
#[derive(Debug, Default)]
pub(crate) struct Presumption(AtomicBool);

impl Presumption {
    /// Holds one of `kind`'s presumptions: true if it already does, or if
    /// [`Kind::try_presume`] gives it one.
    pub(crate) fn take(&self, kind: Kind) -> bool {
        if self.0.load(Ordering::Relaxed) {
            return true;
        }
        let taken = kind.try_presume();
        if taken {
            self.0.store(true, Ordering::Relaxed);
        }
        taken
    }

    /// True if [`Presumption::take`] may succeed: the task holds one, or
    /// its kind has room (a load; `take` checks again as it takes).
    pub(crate) fn may_take(&self, kind: Kind) -> bool {
        self.0.load(Ordering::Relaxed) || kind.likely_blocks()
    }

    /// Lets go of the presumption, if held; true if it was. The caller then
    /// ends it ([`Kind::presumption_over`]) when it knows what the task did.
    pub(crate) fn let_go(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }

    /// Ends the presumption, if held, for a task that did not run presumed.
    pub(crate) fn give_back(&self, kind: Kind) {
        if self.let_go() {
            kind.presumption_over(None);
        }
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    fn kind_of_value<T: 'static>(_: &T) -> Kind {
        Kind::of::<T>()
    }

    #[track_caller]
    fn kind_here() -> Kind {
        Kind::at(std::panic::Location::caller())
    }

    #[test]
    fn a_call_site_is_one_kind_and_two_sites_are_two() {
        let sites: Vec<Kind> = (0..2).map(|_| kind_here()).collect();
        assert_eq!(sites[0], sites[1], "one site, one kind");
        let (a, b) = (kind_here(), kind_here());
        assert_ne!(a, b, "two sites on one line, two kinds");
        assert_ne!(a.tag, 0, "a site is a kind, not no kind");
        // What one site learns, the other does not (unless they share a
        // table word, which is legal and leaves nothing to check).
        if a.index != b.index {
            a.declared_blocking();
            assert!(a.likely_blocks());
            assert!(!b.likely_blocks());
        }
    }

    /// Two kinds of distinct closures that do not share a table word (a
    /// shared word is legal, and these tests then have nothing to check).
    fn two_kinds<A: 'static, B: 'static>(a: &A, b: &B) -> Option<(Kind, Kind)> {
        let (a, b) = (kind_of_value(a), kind_of_value(b));
        (a.index != b.index).then_some((a, b))
    }

    #[test]
    fn kinds_of_distinct_types_keep_their_own_history() {
        // Two closures of one function: one name, two types.
        let (first, second) = (|| 1, || 2);
        assert_eq!(
            kind_of_value(&first),
            kind_of_value(&first),
            "one type, one kind"
        );
        let Some((a, b)) = two_kinds(&first, &second) else {
            return;
        };
        a.saw_computing();
        assert!(a.likely_computes());
        assert!(!b.likely_computes());
        a.declared_blocking();
        assert!(!a.likely_computes(), "blocking once clears the suspicion");
        assert_eq!(Kind::from_bits(a.to_bits()), a);
    }

    #[test]
    fn a_kind_is_presumed_blocking_until_it_computes() {
        let (first, second) = (|| 3, || 4);
        let Some((a, b)) = two_kinds(&first, &second) else {
            return;
        };
        assert!(!a.likely_blocks(), "nothing seen yet");
        a.saw_blocking();
        assert!(!a.likely_blocks(), "one sighting may be an accident");
        a.saw_blocking();
        assert!(a.likely_blocks(), "seen twice");
        assert!(!b.likely_blocks());
        presumed(a, Presumed::Computed);
        assert!(
            a.likely_blocks(),
            "computed once when presumed: may be noise"
        );
        presumed(a, Presumed::Waited);
        presumed(a, Presumed::Computed);
        assert!(a.likely_blocks(), "a wait in between restarts the count");
        presumed(a, Presumed::Computed);
        assert!(!a.likely_blocks(), "computed twice in a row: never again");
        b.declared_blocking();
        assert!(b.likely_blocks(), "declared: known from the first time");
        b.saw_computing();
        assert!(!b.likely_blocks(), "a kind that computes is not presumed");
    }

    #[test]
    fn two_blocked_sightings_outweigh_one_of_computing() {
        let kind = kind_of_value(&|| 11);
        kind.saw_blocking();
        kind.saw_blocking();
        assert!(kind.likely_blocks());
        kind.saw_computing();
        assert!(!kind.likely_blocks(), "computed for a quantum");
        assert!(!kind.likely_computes(), "it was seen blocking too");
        kind.saw_blocking();
        assert!(!kind.likely_blocks(), "one sighting may be an accident");
        kind.saw_computing();
        kind.saw_blocking();
        assert!(
            !kind.likely_blocks(),
            "computing in between: the count starts again"
        );
        kind.saw_blocking();
        assert!(kind.likely_blocks(), "blocked twice since it computed");
        presumed(kind, Presumed::Computed);
        presumed(kind, Presumed::Computed);
        kind.saw_blocking();
        kind.saw_blocking();
        kind.declared_blocking();
        assert!(
            !kind.likely_blocks(),
            "a presumed task that computed ends presumption for good"
        );
    }

    /// Runs one presumed task of `kind` that did `what`.
    fn presumed(kind: Kind, what: Presumed) {
        assert!(kind.try_presume(), "presumed");
        kind.presumption_over(Some(what));
    }

    #[test]
    fn short_presumed_tasks_use_up_the_credit_and_waits_earn_it_back() {
        let kind = kind_of_value(&|| 5);
        kind.declared_blocking();
        for _ in 0..FRESH_CREDIT - 1 {
            presumed(kind, Presumed::Short);
        }
        assert!(kind.likely_blocks(), "one credit left");
        presumed(kind, Presumed::Waited);
        presumed(kind, Presumed::Short);
        presumed(kind, Presumed::Short);
        assert!(!kind.likely_blocks(), "out of credit");
        assert!(!kind.try_presume());
        kind.saw_blocking();
        assert!(kind.likely_blocks(), "seen blocking again: fresh credit");
        for _ in 0..2 * MAX_CREDIT {
            presumed(kind, Presumed::Waited);
        }
        for _ in 0..MAX_CREDIT {
            presumed(kind, Presumed::Short);
        }
        assert!(!kind.likely_blocks(), "the credit is capped at MAX_CREDIT");
    }

    #[test]
    fn presumed_tasks_in_flight_are_capped_at_the_credit() {
        let kind = kind_of_value(&|| 8);
        kind.declared_blocking();
        for _ in 0..FRESH_CREDIT {
            assert!(kind.try_presume());
        }
        assert!(!kind.try_presume(), "FRESH_CREDIT in flight: no more");
        // One ends without running (queued after all): room for one.
        kind.presumption_over(None);
        assert!(kind.try_presume());
        assert!(!kind.try_presume());
        // One that waited earns a credit: room for two more.
        kind.presumption_over(Some(Presumed::Waited));
        assert!(kind.try_presume());
        assert!(kind.try_presume());
        assert!(!kind.try_presume());
        for _ in 0..FRESH_CREDIT + 1 {
            kind.presumption_over(None);
        }
        assert_eq!(kind.read().in_flight, 0, "every presumption ended");
    }

    #[test]
    fn a_task_holds_at_most_one_presumption_and_gives_it_back_once() {
        let kind = kind_of_value(&|| 10);
        kind.declared_blocking();
        let task = Presumption::default();
        assert!(task.take(kind));
        assert!(task.take(kind), "held already");
        assert_eq!(kind.read().in_flight, 1, "one place, however often taken");
        task.give_back(kind);
        task.give_back(kind);
        assert_eq!(kind.read().in_flight, 0, "given back once");
        assert!(!task.let_go());
    }

    #[test]
    fn a_presumption_never_takes_another_kinds_word() {
        let owner = Kind { index: 9, tag: 100 };
        let other = Kind { index: 9, tag: 200 };
        owner.declared_blocking();
        assert!(!other.try_presume());
        other.presumption_over(Some(Presumed::Waited));
        assert!(owner.likely_blocks(), "the owner's record is untouched");
    }

    #[test]
    fn a_colliding_kind_forgets_the_older_history_and_never_borrows_it() {
        let owner = Kind { index: 7, tag: 100 };
        let other = Kind { index: 7, tag: 200 };
        owner.declared_blocking();
        assert!(owner.likely_blocks());
        assert!(!other.likely_blocks(), "another kind's history is not ours");
        other.saw_computing();
        assert!(other.likely_computes());
        assert!(!owner.likely_blocks(), "the word was taken over: forgotten");
    }

    #[test]
    fn a_kind_that_waits_on_the_pool_is_never_presumed() {
        let kind = kind_of_value(&|| 6);
        kind.declared_blocking();
        assert!(kind.likely_blocks());
        assert_eq!(
            kind.learned(),
            Learned {
                presumed: true,
                ..Learned::default()
            }
        );
        kind.saw_pool_wait();
        assert!(!kind.likely_blocks(), "a join needs a slot to help");
        assert!(kind.learned().waits_on_pool && !kind.learned().presumed);
        kind.saw_blocking();
        kind.declared_blocking();
        assert!(!kind.likely_blocks(), "for good");
    }

    #[test]
    fn no_kind_learns_nothing() {
        Kind::NONE.declared_blocking();
        assert!(!Kind::NONE.likely_blocks());
        assert_eq!(Kind::from_bits(0), Kind::NONE);
    }
}
