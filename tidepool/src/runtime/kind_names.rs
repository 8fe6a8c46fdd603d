//! What each kind of task is called (`runtime::kinds`): the name of its
//! closure's or future's type (`std::any::type_name`) and, where the spawn
//! function tracks its caller, where the first task of the kind was
//! spawned. The events and figures that say which work blocked read it
//! (`trace::worker_blocked`, `Metrics::kinds`, `Pool::running`).
//!
//! # What it costs a spawn
//!
//! A kind is registered once, at the first spawn the table has room for
//! it; every spawn checks that it was, in [`register`]: a load of a word
//! no spawn writes after the kind's first (read-shared: it stays in every
//! spawning core's cache), a compare and a branch; up to [`WAYS`] such
//! loads, of one cache line, for a kind whose bucket another kind reached
//! first. No store, no read-modify-write, no call, no allocation after the
//! first spawn of a kind. The name itself is not stored per task: the
//! registry keeps a function pointer (`type_name::<T>`, a constant) and
//! calls it when a name is read, on the rare paths that report. A task's
//! cell is unchanged (a work item's header is still 40 bytes).
//!
//! # The table
//!
//! Process-wide, as the kinds are: [`BUCKETS`] buckets of [`WAYS`] keys
//! (a kind's bits, `Kind::to_bits`), a bucket chosen by the kind's table
//! index. A key is claimed once, by a compare-and-swap from empty, and
//! never changes after: the first kind to claim it keeps it for the life of
//! the process, so a name read is never another kind's (unless two types
//! share the whole 28 bits of a kind, which the kind table conflates
//! anyway). A kind whose bucket is full stays unnamed ([`UNNAMED`]); its
//! spawns then load the bucket's four keys each time. 1,024 kinds, of
//! which a program has one per spawning call site and task type: a few
//! hundred in a large one.

use super::kinds::Kind;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Buckets in the table.
const BUCKETS: usize = 256;
/// Keys per bucket: a bucket's keys are 16 bytes, in one cache line.
const WAYS: usize = 4;

/// The name given to a kind the table has no name for (its bucket was
/// full, or the work was not spawned through a function that names it).
pub(crate) const UNNAMED: &str = "(unnamed)";

/// What the table keeps for one kind: how to get its name, and where its
/// first task was spawned.
#[derive(Clone, Copy, Debug)]
struct Origin {
    /// `std::any::type_name` of the closure or future (called when read:
    /// a constant function pointer, not a string, is stored).
    name: fn() -> &'static str,
    /// Where the first task of the kind was spawned, if the spawn function
    /// tracks its caller (`#[track_caller]`).
    site: Option<&'static Location<'static>>,
}

/// A kind's name and first spawn site, as reports show them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KindName {
    /// `std::any::type_name` of the closure or future, or [`UNNAMED`].
    pub(crate) name: &'static str,
    /// Where the first task of the kind was spawned, if known.
    pub(crate) site: Option<&'static Location<'static>>,
}

// `const` items to repeat: the array-repeat form that works on the
// crate's minimum Rust version.
#[allow(clippy::declare_interior_mutable_const)]
const NO_KEY: AtomicU32 = AtomicU32::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NO_ORIGIN: OnceLock<Origin> = OnceLock::new();
static KEYS: [AtomicU32; BUCKETS * WAYS] = [NO_KEY; BUCKETS * WAYS];
static ORIGINS: [OnceLock<Origin>; BUCKETS * WAYS] = [NO_ORIGIN; BUCKETS * WAYS];

/// The first key of the bucket of `key` (a kind's bits: its table index
/// in the low bits, then its tag).
#[inline(always)]
fn bucket_of(key: u32) -> usize {
    (key as usize % BUCKETS) * WAYS
}

/// Names `kind` after the type `T` (a task's closure or future), with
/// `site` as where its first task was spawned, if the table has no name
/// for it yet. See the module docs for the cost: one load and a branch
/// once the kind is registered.
#[inline(always)]
pub(crate) fn register<T: ?Sized>(kind: Kind, site: Option<&'static Location<'static>>) {
    let key = kind.to_bits();
    let first = bucket_of(key);
    for key_slot in &KEYS[first..first + WAYS] {
        let claimed = key_slot.load(Ordering::Relaxed);
        if claimed == key {
            return;
        }
        if claimed == 0 {
            let name = std::any::type_name::<T>;
            return register_slowly(key, Origin { name, site });
        }
    }
    // The bucket is other kinds': this one stays unnamed.
}

/// The kind of tasks whose closure or future is a `T`, named after it
/// (`Kind::of`, then [`register`]).
#[inline(always)]
pub(crate) fn kind_of<T: ?Sized + 'static>(site: Option<&'static Location<'static>>) -> Kind {
    let kind = Kind::of::<T>();
    register::<T>(kind, site);
    kind
}

/// Names the kind of `task` (a future of type `T`, whose kind is
/// `Kind::of::<T>()`) after the type `N` of the closure it runs: for a
/// group's closure, which runs as a future made for it, whose type name
/// says only that it is a group's.
#[inline(always)]
pub(crate) fn name_as<N: ?Sized, T: 'static>(_task: &T, site: Option<&'static Location<'static>>) {
    register::<N>(Kind::of::<T>(), site);
}

/// The kind of work started at `site` (`Kind::at`: a `join` or a scope's
/// task, whose closures borrow and have no `TypeId`), named after the
/// closure's type `T`: its name says which function it is in, `site`
/// which line.
#[inline(always)]
pub(crate) fn kind_at<T: ?Sized>(site: &'static Location<'static>) -> Kind {
    let kind = Kind::at(site);
    register::<T>(kind, Some(site));
    kind
}

/// [`register`]'s rare half: the bucket has a free key and the kind has
/// none yet (or is being named by another thread right now).
#[cold]
#[inline(never)]
fn register_slowly(key: u32, origin: Origin) {
    if key >> 16 == 0 {
        return; // no kind (tag 0)
    }
    let first = bucket_of(key);
    for slot in first..first + WAYS {
        let claimed = KEYS[slot].load(Ordering::Acquire);
        if claimed == key {
            return;
        }
        if claimed != 0 {
            continue;
        }
        // Claimed once, never given back: whoever wins names the kind.
        match KEYS[slot].compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let _ = ORIGINS[slot].set(origin);
                return;
            }
            Err(now) if now == key => return,
            Err(_) => {}
        }
    }
}

/// What `kind` is called; [`UNNAMED`] if the table has no name for it (a
/// reader that races the kind's registration may find it unnamed too).
pub(crate) fn name_of(kind: Kind) -> KindName {
    let key = kind.to_bits();
    let first = bucket_of(key);
    let origin = (first..first + WAYS)
        .find(|&slot| KEYS[slot].load(Ordering::Acquire) == key)
        .and_then(|slot| ORIGINS[slot].get());
    match origin {
        Some(origin) if key >> 16 != 0 => KindName {
            name: (origin.name)(),
            site: origin.site,
        },
        _ => KindName {
            name: UNNAMED,
            site: None,
        },
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    fn kind_of_value<T: 'static>(_: &T, site: Option<&'static Location<'static>>) -> Kind {
        kind_of::<T>(site)
    }

    #[test]
    fn a_kind_is_named_after_its_type_and_first_site() {
        let closure = || 1;
        let first = Location::caller();
        let kind = kind_of_value(&closure, Some(first));
        let named = name_of(kind);
        assert!(
            named
                .name
                .contains("a_kind_is_named_after_its_type_and_first_site"),
            "{named:?}"
        );
        assert!(named.name.ends_with("{{closure}}"), "{named:?}");
        assert_eq!(named.site, Some(first));
        // A later spawn elsewhere keeps the first site.
        let _ = kind_of_value(&closure, None);
        assert_eq!(name_of(kind).site, Some(first));
    }

    #[test]
    fn a_call_site_kind_is_named_after_its_closure_and_its_line() {
        let site = Location::caller();
        let borrowed = String::from("borrowed");
        let closure = || borrowed.len();
        fn at<T>(_: &T, site: &'static Location<'static>) -> Kind {
            kind_at::<T>(site)
        }
        let kind = at(&closure, site);
        assert_eq!(kind, Kind::at(site));
        let named = name_of(kind);
        assert!(named.name.contains("{{closure}}"), "{named:?}");
        assert_eq!(named.site, Some(site));
    }

    #[test]
    fn no_kind_and_unregistered_kinds_are_unnamed() {
        assert_eq!(name_of(Kind::NONE).name, UNNAMED);
        register::<u8>(Kind::NONE, None);
        assert_eq!(name_of(Kind::NONE).name, UNNAMED);
        struct NeverSpawned;
        assert_eq!(name_of(Kind::of::<NeverSpawned>()).name, UNNAMED);
    }

    #[test]
    fn a_full_bucket_leaves_later_kinds_unnamed_and_keeps_earlier_names() {
        // Five kinds of one bucket, made by hand (index 5, tags 1..=5),
        // in a bucket no test's real kind is likely to use.
        let kinds: Vec<Kind> = (1..=5u32)
            .map(|tag| Kind::from_bits(tag << 16 | 0xf05))
            .collect();
        for kind in &kinds {
            register::<u16>(*kind, None);
        }
        let named: Vec<&str> = kinds.iter().map(|k| name_of(*k).name).collect();
        let with_a_name = named.iter().filter(|n| **n == "u16").count();
        assert!(with_a_name <= WAYS, "{named:?}");
        assert_eq!(named[4], UNNAMED, "the fifth finds the bucket full");
    }
}
