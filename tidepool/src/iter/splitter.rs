//! The splitter: when to cut a piece of work in two, and the recursion
//! that cuts producers with [`join`](crate::join) and combines what their
//! leaves computed.

use super::Producer;
use std::panic::Location;

/// Where a consumer was called (`#[track_caller]`): the kind of the hop
/// into the pool when it is called from outside one.
pub(super) type Site = &'static Location<'static>;

/// Decides, piece by piece, whether to cut again. A copy travels with
/// each half.
///
/// A run starts with `splits` equal to the pool's concurrency and halves it
/// at every cut, so an undisturbed run ends in about twice as many leaves
/// as the pool has slots: enough for an idle worker to find a half to
/// steal, few enough that the joins cost nothing next to the leaves. A
/// half that runs on another thread than the one that cut it was stolen,
/// so a worker was idle: that half starts over with `splits` at the
/// concurrency and is cut further, and the work spreads to where the idle
/// workers are.
#[derive(Clone, Copy, Debug)]
pub(super) struct Splitter {
    /// Cuts left before a piece runs whole; halved at every cut.
    splits: usize,
    /// The pool's concurrency, which a stolen piece starts over from.
    concurrency: usize,
    /// No leaf shorter than this (at least 1): a piece is cut only if both
    /// halves reach it.
    min_len: usize,
    /// A piece longer than this is cut whatever `splits` says.
    max_len: usize,
    /// The thread that made this copy (see [`this_thread`]).
    cut_on: usize,
}

impl Splitter {
    /// The splitter of a run on a pool of `concurrency` slots, whose
    /// leaves hold between `min_len` and `max_len` positions (as far as
    /// halving can keep to both).
    pub(super) fn new(concurrency: usize, min_len: usize, max_len: usize) -> Splitter {
        Splitter {
            splits: concurrency.max(1),
            concurrency: concurrency.max(1),
            min_len: min_len.max(1),
            max_len,
            cut_on: this_thread(),
        }
    }

    /// Whether a piece of `len` positions should be cut in two here.
    pub(super) fn should_split(&mut self, len: usize) -> bool {
        if len / 2 < self.min_len {
            return false;
        }
        let here = this_thread();
        if here != self.cut_on {
            // A thief took this half: there is an idle worker, so more
            // pieces will find takers.
            self.cut_on = here;
            self.splits = self.splits.max(self.concurrency);
        }
        if self.splits > 0 {
            self.splits /= 2;
            true
        } else {
            len > self.max_len
        }
    }
}

/// A number that tells the live threads apart: the address of a
/// thread-local. Cheaper than `thread::current().id()`, and all the
/// splitter needs is "the same thread or not".
fn this_thread() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    // A thread whose locals are being destroyed cannot be a thief.
    MARK.try_with(|mark| mark as *const u8 as usize)
        .unwrap_or(0)
}

/// Runs a consumer over `producer` on the current pool: each leaf's
/// sequential iterator goes through `leaf`, and neighbouring results are
/// combined by `combine` (left, right), up to the one result.
///
/// A producer too short to cut runs here, on the calling thread: one piece
/// gains nothing from a hop into the pool.
pub(super) fn drive<P, R, L, C>(producer: P, site: Site, leaf: L, combine: C) -> R
where
    P: Producer,
    R: Send,
    L: Fn(P::Sequential) -> R + Sync,
    C: Fn(R, R) -> R + Sync,
{
    let (min_len, max_len) = (producer.min_len().max(1), producer.max_len());
    let len = producer.positions();
    if len / 2 < min_len && len <= max_len {
        return leaf(producer.into_sequential());
    }
    let (leaf, combine) = (&leaf, &combine);
    crate::global::on_current_pool(site, move |concurrency| {
        bridge(
            producer,
            Splitter::new(concurrency, min_len, max_len),
            leaf,
            combine,
        )
    })
}

/// The recursion of [`drive`], on a worker of the pool: cut while the
/// splitter says so, one `join` per cut.
fn bridge<P, R, L, C>(producer: P, mut splitter: Splitter, leaf: &L, combine: &C) -> R
where
    P: Producer,
    R: Send,
    L: Fn(P::Sequential) -> R + Sync,
    C: Fn(R, R) -> R + Sync,
{
    let len = producer.positions();
    if !splitter.should_split(len) {
        return leaf(producer.into_sequential());
    }
    let (left, right) = producer.split_at(len / 2);
    let (left, right) = crate::global::join(
        || bridge(left, splitter, leaf, combine),
        || bridge(right, splitter, leaf, combine),
    );
    combine(left, right)
}

/// Runs `whole` on `data` on the current pool, cut by a [`Splitter`]: a
/// piece the splitter will not cut goes to `leaf`; one it cuts goes to
/// `cut`, which returns the two halves, and once both halves are done
/// `after` runs on the whole piece. For the sorts: the producers' recursion
/// without a producer (the halves of a sort are not known before the cut,
/// and a merge sort's work follows its halves').
pub(super) fn divide<T, Cut, Leaf, After>(
    data: &mut [T],
    site: Site,
    min_len: usize,
    cut: &Cut,
    leaf: &Leaf,
    after: &After,
) where
    T: Send,
    Cut: for<'a> Fn(&'a mut [T]) -> (&'a mut [T], &'a mut [T]) + Sync,
    Leaf: Fn(&mut [T]) + Sync,
    After: Fn(&mut [T]) + Sync,
{
    if data.len() / 2 < min_len.max(1) {
        leaf(data);
        return;
    }
    crate::global::on_current_pool(site, move |concurrency| {
        let splitter = Splitter::new(concurrency, min_len, usize::MAX);
        divide_here(data, splitter, cut, leaf, after);
    });
}

/// The recursion of [`divide`], on a worker of the pool.
fn divide_here<T, Cut, Leaf, After>(
    data: &mut [T],
    mut splitter: Splitter,
    cut: &Cut,
    leaf: &Leaf,
    after: &After,
) where
    T: Send,
    Cut: for<'a> Fn(&'a mut [T]) -> (&'a mut [T], &'a mut [T]) + Sync,
    Leaf: Fn(&mut [T]) + Sync,
    After: Fn(&mut [T]) + Sync,
{
    if !splitter.should_split(data.len()) {
        leaf(data);
        return;
    }
    {
        let (left, right) = cut(data);
        crate::global::join(
            || divide_here(left, splitter, cut, leaf, after),
            || divide_here(right, splitter, cut, leaf, after),
        );
    }
    after(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaves of an undisturbed run (every cut on this thread).
    fn leaves(mut splitter: Splitter, len: usize) -> usize {
        if splitter.should_split(len) {
            leaves(splitter, len / 2) + leaves(splitter, len - len / 2)
        } else {
            1
        }
    }

    #[test]
    fn an_undisturbed_run_ends_in_about_two_leaves_per_slot() {
        assert_eq!(leaves(Splitter::new(1, 1, usize::MAX), 1 << 20), 2);
        assert_eq!(leaves(Splitter::new(2, 1, usize::MAX), 1 << 20), 4);
        assert_eq!(leaves(Splitter::new(8, 1, usize::MAX), 1 << 20), 16);
    }

    #[test]
    fn the_lengths_bound_the_leaves() {
        // Never a leaf below min_len...
        assert_eq!(leaves(Splitter::new(8, 1000, usize::MAX), 3000), 2);
        assert_eq!(leaves(Splitter::new(8, 1000, usize::MAX), 1999), 1);
        // ...and none above max_len.
        assert_eq!(leaves(Splitter::new(1, 1, 10), 80), 8);
    }

    #[test]
    fn a_stolen_half_starts_over() {
        let mut splitter = Splitter::new(4, 1, usize::MAX);
        splitter.splits = 0;
        assert!(!splitter.should_split(100));
        splitter.cut_on = this_thread().wrapping_add(1);
        assert!(splitter.should_split(100), "a stolen half is cut again");
        assert_eq!(splitter.splits, 2);
    }
}
