//! Parallel iterators on the pool, with rayon's names: `use
//! tidepool::prelude::*;` where rayon code has `use rayon::prelude::*;`.
//!
//! ```
//! use tidepool::prelude::*;
//!
//! let values: Vec<u64> = (1..=10_000).collect();
//! let sum_of_squares: u64 = values.par_iter().map(|v| v * v).sum();
//! assert_eq!(sum_of_squares, (1..=10_000u64).map(|v| v * v).sum());
//!
//! let mut words = vec!["tide", "pool", "rock", "shell"];
//! words.par_sort_unstable();
//! let short: Vec<&str> = words.par_iter().copied().filter(|w| w.len() == 4).collect();
//! assert_eq!(short, ["pool", "rock", "tide"]);
//! ```
//!
//! # A guided tour
//!
//! Three pieces, each in a file of this module.
//!
//! **Producers** (`sources.rs`, `adaptors.rs`). A [`Producer`] spans a
//! number of positions; it can be cut in two at any position
//! ([`Producer::split_at`]), and a piece that is not cut again, a *leaf*,
//! is walked on one thread by a plain [`Iterator`]
//! ([`Producer::into_sequential`]). The sources cut data: slices ([`Iter`],
//! [`IterMut`], [`Chunks`], [`ChunksMut`]), an owned `Vec` ([`IntoIter`]),
//! integer ranges ([`RangeIter`], [`RangeInclusiveIter`]). An adaptor
//! wraps a producer, cuts where it cuts and walks a leaf through its
//! base's iterator: [`Map`] applies its closure, [`Filter`] skips items,
//! [`Enumerate`] counts from the leaf's first position, [`Zip`] cuts two
//! producers at the same position. Every producer is a
//! [`ParallelIterator`] (a blanket implementation), and that trait's
//! methods are what a user calls.
//!
//! A position is an item in an [`IndexedParallelIterator`] (the sources,
//! and `map`, `enumerate`, `zip` and the like over them), which is what
//! `enumerate` and `zip` need. After `filter`, `filter_map`, `fold` or
//! `flat_map_iter` a position is only where the base cuts: a filtered
//! leaf walks its base's positions and yields what passes.
//!
//! **Consumers** (the consuming methods of [`ParallelIterator`];
//! `collect.rs`). A consumer is two functions: what a leaf computes from
//! its sequential iterator (a sum, a `Vec`, whether an item matched) and
//! how the results of two neighbouring pieces combine, left then right. So
//! `collect` keeps the order, `reduce` needs only an associative
//! operation, and `min`, `max` and `find_any` break ties as the standard
//! iterators do. `any`, `all` and `find_any` share a flag that stops every
//! leaf once the answer is known.
//!
//! **The splitter** (`splitter.rs`) decides where to cut. A run starts
//! with about two pieces per slot of the pool in mind (it halves a budget
//! of the pool's concurrency at every cut); a half that a thief took (it
//! runs on another thread than the one that cut it) starts over with a
//! full budget, so pieces get smaller where idle workers are and stay big
//! elsewhere. A leaf never holds fewer positions than the producer's
//! minimum ([`ParallelIterator::with_min_len`], 1 by default), nor more
//! than its maximum ([`ParallelIterator::with_max_len`]). Each cut is one
//! [`join`](crate::join): the left half runs here, the right half waits on
//! this worker's deque for a thief, and comes back here if none came.
//! The parallel sorts ([`ParallelSliceMut`], `slice.rs`) cut with the same
//! splitter.
//!
//! # Where it runs
//!
//! On the current pool, as [`join`](crate::join): the pool whose task runs
//! on this thread, else the pool whose `block_on` runs here, else the
//! global pool. Called from outside a pool, the whole run moves to one of
//! the pool's workers once and the calling thread waits for it; an input
//! too short to cut (under two minimum lengths) runs on the calling
//! thread instead. Inside a parallel iterator's closure, another parallel
//! iterator (or a `join`, a `scope`) runs on the same pool, nested. To run
//! on a pool of your own from outside it, run the iterator inside
//! `pool.scope(|_| ...)` or a task of that pool.
//!
//! # Panics
//!
//! A panic in a closure is resumed on the caller once every piece has
//! stopped (the rule of [`join`](crate::join)); items not consumed are
//! dropped with their pieces, each once. There is no `unsafe` code here.
//!
//! # Next to rayon
//!
//! What is here has rayon's names and signatures. What is not: most
//! adaptors beyond the common ones (`flat_map` with a parallel inner
//! iterator, `chain`, `skip`, `take`, `rev`, `map_with`...), `par_bridge`,
//! the string methods (`par_lines`, `par_split`), `ThreadPool::install`
//! (see above), and rayon's `Consumer` plumbing: a consumer here is a pair
//! of closures, and a [`Producer`] is the one trait to implement for a
//! source of your own.

mod adaptors;
mod collect;
pub mod sequential;
mod slice;
mod sources;
mod splitter;

pub use adaptors::{
    Cloned, Copied, Enumerate, Filter, FilterMap, FlatMapIter, Fold, Map, MaxLen, MinLen,
    WhileSome, Zip,
};
pub use slice::{Chunks, ChunksMut, ParallelSlice, ParallelSliceMut};
pub use sources::{IntoIter, Iter, IterMut, RangeInclusiveIter, RangeIter};

use splitter::drive;
use std::cmp::Ordering;
use std::iter::{Product, Sum};
use std::panic::Location;
use std::sync::atomic::{self, AtomicBool};

/// Work that can be cut in two at a position, and walked sequentially once
/// it is not cut again: what every parallel iterator is (see the module
/// docs). Implement it for a source of your own; the
/// [`ParallelIterator`] methods come with it.
///
/// ```
/// use tidepool::iter::Producer;
/// use tidepool::prelude::*;
///
/// /// The multiples of `step` below `step * count`.
/// struct Multiples {
///     first: u64,
///     count: usize,
///     step: u64,
/// }
///
/// impl Producer for Multiples {
///     type Item = u64;
///     type Sequential = std::iter::StepBy<std::ops::Range<u64>>;
///
///     fn positions(&self) -> usize {
///         self.count
///     }
///
///     fn split_at(self, position: usize) -> (Self, Self) {
///         let right_first = self.first + position as u64 * self.step;
///         let left = Multiples { count: position, ..self };
///         let right = Multiples { first: right_first, count: self.count - position, ..self };
///         (left, right)
///     }
///
///     fn into_sequential(self) -> Self::Sequential {
///         let end = self.first + self.count as u64 * self.step;
///         (self.first..end).step_by(self.step as usize)
///     }
/// }
///
/// let multiples = Multiples { first: 0, count: 1_000, step: 3 };
/// assert_eq!(multiples.sum::<u64>(), (0..1_000).map(|n| n * 3).sum());
/// ```
pub trait Producer: Sized + Send {
    /// What the iterator yields.
    type Item: Send;
    /// The iterator that walks a leaf.
    type Sequential: Iterator<Item = Self::Item>;

    /// The positions this producer spans: its items, in an
    /// [`IndexedParallelIterator`]; an upper bound of them after a
    /// `filter`.
    fn positions(&self) -> usize;

    /// Cuts the producer at `position` (at most [`Producer::positions`]):
    /// the positions before it, and those from it on.
    fn split_at(self, position: usize) -> (Self, Self);

    /// The sequential iterator over this piece's items, in order.
    fn into_sequential(self) -> Self::Sequential;

    /// The fewest positions a leaf should hold (1 unless
    /// [`ParallelIterator::with_min_len`] says more).
    fn min_len(&self) -> usize {
        1
    }

    /// The most positions a leaf should hold (no limit unless
    /// [`ParallelIterator::with_max_len`] says so).
    fn max_len(&self) -> usize {
        usize::MAX
    }
}

/// The methods of a parallel iterator: adaptors, which return another
/// parallel iterator, and consumers, which run it on the pool and return
/// a result. Every [`Producer`] is one.
///
/// ```
/// use tidepool::prelude::*;
/// let evens_squared: Vec<u32> = (0..10u32)
///     .into_par_iter()
///     .filter(|n| n % 2 == 0)
///     .map(|n| n * n)
///     .collect();
/// assert_eq!(evens_squared, [0, 4, 16, 36, 64]);
/// ```
pub trait ParallelIterator: Producer {
    /// Each item through `map_op`.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let doubled: Vec<i32> = [1, 2, 3].par_iter().map(|x| x * 2).collect();
    /// assert_eq!(doubled, [2, 4, 6]);
    /// ```
    fn map<F, R>(self, map_op: F) -> Map<Self, F>
    where
        F: Fn(Self::Item) -> R + Sync + Send,
        R: Send,
    {
        Map::new(self, map_op)
    }

    /// The items `predicate` accepts.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let big: Vec<u32> = (0..100u32).into_par_iter().filter(|&n| n >= 97).collect();
    /// assert_eq!(big, [97, 98, 99]);
    /// ```
    fn filter<F>(self, predicate: F) -> Filter<Self, F>
    where
        F: Fn(&Self::Item) -> bool + Sync + Send,
    {
        Filter::new(self, predicate)
    }

    /// The `Some` results of `filter_op` on each item.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let parsed: Vec<i32> = ["4", "four", "2"].par_iter().filter_map(|s| s.parse().ok()).collect();
    /// assert_eq!(parsed, [4, 2]);
    /// ```
    fn filter_map<F, R>(self, filter_op: F) -> FilterMap<Self, F>
    where
        F: Fn(Self::Item) -> Option<R> + Sync + Send,
        R: Send,
    {
        FilterMap::new(self, filter_op)
    }

    /// The items of the sequential iterators `map_op` makes of each item,
    /// flattened (each inner iterator walked on the thread of its item).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let repeated: Vec<u8> = [1u8, 2].par_iter().flat_map_iter(|&n| std::iter::repeat(n).take(n.into())).collect();
    /// assert_eq!(repeated, [1, 2, 2]);
    /// ```
    fn flat_map_iter<F, U>(self, map_op: F) -> FlatMapIter<Self, F>
    where
        F: Fn(Self::Item) -> U + Sync + Send,
        U: IntoIterator,
        U::Item: Send,
    {
        FlatMapIter::new(self, map_op)
    }

    /// The items, copied out of the references this iterator yields.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let values = [3u8, 4];
    /// let owned: Vec<u8> = values.par_iter().copied().collect();
    /// assert_eq!(owned, [3, 4]);
    /// ```
    fn copied<'a, T>(self) -> Copied<Self>
    where
        T: 'a + Copy + Send + Sync,
        Self: ParallelIterator<Item = &'a T>,
    {
        Copied::new(self)
    }

    /// The items, cloned out of the references this iterator yields.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let names = [String::from("tide")];
    /// let owned: Vec<String> = names.par_iter().cloned().collect();
    /// assert_eq!(owned, ["tide"]);
    /// ```
    fn cloned<'a, T>(self) -> Cloned<Self>
    where
        T: 'a + Clone + Send + Sync,
        Self: ParallelIterator<Item = &'a T>,
    {
        Cloned::new(self)
    }

    /// Folds each leaf's items into an accumulator that starts at
    /// `identity()`: a parallel iterator of the accumulators, one per
    /// leaf (how many depends on the splitting), to be reduced. The
    /// usual way to build a collection per leaf and merge them once.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use tidepool::prelude::*;
    ///
    /// let words = ["tide", "pool", "tide"];
    /// let counts = words
    ///     .par_iter()
    ///     .fold(HashMap::new, |mut counts, word| {
    ///         *counts.entry(*word).or_insert(0) += 1;
    ///         counts
    ///     })
    ///     .reduce(HashMap::new, |mut all, part| {
    ///         for (word, n) in part {
    ///             *all.entry(word).or_insert(0) += n;
    ///         }
    ///         all
    ///     });
    /// assert_eq!(counts["tide"], 2);
    /// assert_eq!(counts["pool"], 1);
    /// ```
    fn fold<T, ID, F>(self, identity: ID, fold_op: F) -> Fold<Self, ID, F>
    where
        ID: Fn() -> T + Sync + Send,
        F: Fn(T, Self::Item) -> T + Sync + Send,
        T: Send,
    {
        Fold::new(self, identity, fold_op)
    }

    /// The contents of the `Some` items, stopping every piece at the
    /// first `None` met. Items before that `None` may be missing too (a
    /// piece to its left may have stopped early), as in rayon.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let upto: Vec<u32> = (0..10u32).into_par_iter().map(|n| (n < 5).then_some(n)).while_some().collect();
    /// assert!(upto.len() <= 5 && upto.iter().all(|&n| n < 5));
    /// ```
    fn while_some<T>(self) -> WhileSome<Self>
    where
        Self: ParallelIterator<Item = Option<T>>,
        T: Send,
    {
        WhileSome::new(self)
    }

    /// Leaves of at least `min` positions: for items so cheap that a cut
    /// would cost more than it spreads.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let count = (0..100_000u32).into_par_iter().with_min_len(10_000).filter(|n| n % 7 == 0).count();
    /// assert_eq!(count, 14_286);
    /// ```
    fn with_min_len(self, min: usize) -> MinLen<Self> {
        MinLen::new(self, min)
    }

    /// Leaves of at most `max` positions: for items so costly that each
    /// should be free to go to another worker.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let slow: Vec<u64> = (0..4u64).into_par_iter().with_max_len(1).map(|n| n * 2).collect();
    /// assert_eq!(slow, [0, 2, 4, 6]);
    /// ```
    fn with_max_len(self, max: usize) -> MaxLen<Self> {
        MaxLen::new(self, max)
    }

    /// Calls `op` on every item, in parallel.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use tidepool::prelude::*;
    /// let total = AtomicU32::new(0);
    /// (1..=10u32).into_par_iter().for_each(|n| {
    ///     total.fetch_add(n, Ordering::Relaxed);
    /// });
    /// assert_eq!(total.into_inner(), 55);
    /// ```
    #[track_caller]
    fn for_each<F>(self, op: F)
    where
        F: Fn(Self::Item) + Sync + Send,
    {
        drive(
            self,
            Location::caller(),
            |items| items.for_each(&op),
            |(), ()| (),
        );
    }

    /// Combines every item with `op`, starting each leaf at `identity()`:
    /// `op` must be associative and `identity()` neutral for it (the
    /// number of leaves depends on the splitting).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let product = (1..=10u64).into_par_iter().reduce(|| 1, |a, b| a * b);
    /// assert_eq!(product, 3_628_800);
    /// ```
    #[track_caller]
    fn reduce<ID, OP>(self, identity: ID, op: OP) -> Self::Item
    where
        ID: Fn() -> Self::Item + Sync + Send,
        OP: Fn(Self::Item, Self::Item) -> Self::Item + Sync + Send,
    {
        drive(
            self,
            Location::caller(),
            |items| items.fold(identity(), &op),
            &op,
        )
    }

    /// Combines every item with the associative `op`; `None` if there are
    /// none.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let longest = ["tide", "rockpool", "sea"].par_iter().copied().reduce_with(|a, b| if b.len() > a.len() { b } else { a });
    /// assert_eq!(longest, Some("rockpool"));
    /// let none: Option<u8> = Vec::<u8>::new().into_par_iter().reduce_with(|a, b| a + b);
    /// assert_eq!(none, None);
    /// ```
    #[track_caller]
    fn reduce_with<OP>(self, op: OP) -> Option<Self::Item>
    where
        OP: Fn(Self::Item, Self::Item) -> Self::Item + Sync + Send,
    {
        drive(
            self,
            Location::caller(),
            |items| items.reduce(&op),
            |left, right| match (left, right) {
                (Some(left), Some(right)) => Some(op(left, right)),
                (left, right) => left.or(right),
            },
        )
    }

    /// The sum of the items, as [`Iterator::sum`] (an integer sum that
    /// overflows panics in debug builds and wraps in release builds, as
    /// there).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let values = vec![1.5f64, 2.5, 3.0];
    /// let total: f64 = values.par_iter().sum();
    /// assert_eq!(total, 7.0);
    /// ```
    #[track_caller]
    fn sum<S>(self) -> S
    where
        S: Send + Sum<Self::Item> + Sum<S>,
    {
        drive(
            self,
            Location::caller(),
            |items| items.sum::<S>(),
            |left, right| [left, right].into_iter().sum(),
        )
    }

    /// The product of the items, as [`Iterator::product`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let factorial: u64 = (1..=20u64).into_par_iter().product();
    /// assert_eq!(factorial, 2_432_902_008_176_640_000);
    /// ```
    #[track_caller]
    fn product<P>(self) -> P
    where
        P: Send + Product<Self::Item> + Product<P>,
    {
        drive(
            self,
            Location::caller(),
            |items| items.product::<P>(),
            |left, right| [left, right].into_iter().product(),
        )
    }

    /// The smallest item (the first of equal ones), as [`Iterator::min`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// assert_eq!([4, 1, 3].par_iter().min(), Some(&1));
    /// assert_eq!(Vec::<u8>::new().par_iter().min(), None);
    /// ```
    #[track_caller]
    fn min(self) -> Option<Self::Item>
    where
        Self::Item: Ord,
    {
        min_by_at(self, Location::caller(), &<Self::Item as Ord>::cmp)
    }

    /// The largest item (the last of equal ones), as [`Iterator::max`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// assert_eq!([4, 1, 3].par_iter().max(), Some(&4));
    /// ```
    #[track_caller]
    fn max(self) -> Option<Self::Item>
    where
        Self::Item: Ord,
    {
        max_by_at(self, Location::caller(), &<Self::Item as Ord>::cmp)
    }

    /// The smallest item by `compare` (the first of equal ones), as
    /// [`Iterator::min_by`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let lowest = [2.5f64, -1.0, 7.0].par_iter().min_by(|a, b| a.total_cmp(b));
    /// assert_eq!(lowest, Some(&-1.0));
    /// ```
    #[track_caller]
    fn min_by<F>(self, compare: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item, &Self::Item) -> Ordering + Sync + Send,
    {
        min_by_at(self, Location::caller(), &compare)
    }

    /// The largest item by `compare` (the last of equal ones), as
    /// [`Iterator::max_by`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let highest = [2.5f64, -1.0, 7.0].par_iter().max_by(|a, b| a.total_cmp(b));
    /// assert_eq!(highest, Some(&7.0));
    /// ```
    #[track_caller]
    fn max_by<F>(self, compare: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item, &Self::Item) -> Ordering + Sync + Send,
    {
        max_by_at(self, Location::caller(), &compare)
    }

    /// The item with the smallest key (the first of equal ones), as
    /// [`Iterator::min_by_key`] (the key is computed at every comparison).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let shortest = ["tide", "a", "pool", "b"].par_iter().min_by_key(|w| w.len());
    /// assert_eq!(shortest, Some(&"a"));
    /// ```
    #[track_caller]
    fn min_by_key<K, F>(self, key: F) -> Option<Self::Item>
    where
        K: Ord + Send,
        F: Fn(&Self::Item) -> K + Sync + Send,
    {
        min_by_at(
            self,
            Location::caller(),
            &|a: &Self::Item, b: &Self::Item| key(a).cmp(&key(b)),
        )
    }

    /// The item with the largest key (the last of equal ones), as
    /// [`Iterator::max_by_key`] (the key is computed at every comparison).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let longest = ["tide", "a", "pool", "b"].par_iter().max_by_key(|w| w.len());
    /// assert_eq!(longest, Some(&"pool"));
    /// ```
    #[track_caller]
    fn max_by_key<K, F>(self, key: F) -> Option<Self::Item>
    where
        K: Ord + Send,
        F: Fn(&Self::Item) -> K + Sync + Send,
    {
        max_by_at(
            self,
            Location::caller(),
            &|a: &Self::Item, b: &Self::Item| key(a).cmp(&key(b)),
        )
    }

    /// Whether `predicate` holds for some item. Every piece stops once one
    /// has found it.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// assert!((0..1_000u32).into_par_iter().any(|n| n == 999));
    /// assert!(!(0..1_000u32).into_par_iter().any(|n| n > 1_000));
    /// ```
    #[track_caller]
    fn any<F>(self, predicate: F) -> bool
    where
        F: Fn(Self::Item) -> bool + Sync + Send,
    {
        let found = AtomicBool::new(false);
        drive(
            self,
            Location::caller(),
            |mut items| {
                // Relaxed: a flag; a piece that sees it late walks further.
                let hit =
                    items.any(|item| found.load(atomic::Ordering::Relaxed) || predicate(item));
                if hit {
                    found.store(true, atomic::Ordering::Relaxed);
                }
                hit
            },
            |left, right| left || right,
        )
    }

    /// Whether `predicate` holds for every item (`true` if there are
    /// none). Every piece stops once one has found an item it fails.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// assert!([2, 4, 6].par_iter().all(|n| n % 2 == 0));
    /// assert!(![2, 5, 6].par_iter().all(|n| n % 2 == 0));
    /// ```
    #[track_caller]
    fn all<F>(self, predicate: F) -> bool
    where
        F: Fn(Self::Item) -> bool + Sync + Send,
    {
        !self.any(|item| !predicate(item))
    }

    /// Some item `predicate` accepts, not necessarily the first: every
    /// piece stops once one has found one.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let found = (1..100u32).into_par_iter().find_any(|n| n % 10 == 0);
    /// assert!(matches!(found, Some(n) if n % 10 == 0));
    /// assert_eq!((1..9u32).into_par_iter().find_any(|n| n % 10 == 0), None);
    /// ```
    #[track_caller]
    fn find_any<F>(self, predicate: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item) -> bool + Sync + Send,
    {
        let found = AtomicBool::new(false);
        drive(
            self,
            Location::caller(),
            |items| {
                for item in items {
                    if found.load(atomic::Ordering::Relaxed) {
                        return None;
                    }
                    if predicate(&item) {
                        found.store(true, atomic::Ordering::Relaxed);
                        return Some(item);
                    }
                }
                None
            },
            |left, right| left.or(right),
        )
    }

    /// The number of items.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let multiples_of_three = (0..300u32).into_par_iter().filter(|n| n % 3 == 0).count();
    /// assert_eq!(multiples_of_three, 100);
    /// ```
    #[track_caller]
    fn count(self) -> usize {
        drive(
            self,
            Location::caller(),
            |items| items.count(),
            |left, right| left + right,
        )
    }

    /// The items in a collection, in order: a `Vec` (or `VecDeque`,
    /// `String`, a map or a set), or a `Result` / `Option` of one, which is
    /// an `Err` / `None` if any item is (every piece stops at the first one
    /// met). See [`FromParallelIterator`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let squares: Vec<u32> = (0..5u32).into_par_iter().map(|n| n * n).collect();
    /// assert_eq!(squares, [0, 1, 4, 9, 16]);
    ///
    /// let parsed: Result<Vec<u8>, _> = ["1", "2", "x"].par_iter().map(|s| s.parse::<u8>()).collect();
    /// assert!(parsed.is_err());
    /// ```
    #[track_caller]
    fn collect<C>(self) -> C
    where
        C: FromParallelIterator<Self::Item>,
    {
        C::from_par_iter(self)
    }
}

impl<P: Producer> ParallelIterator for P {}

/// The smallest item by `compare`; of equal ones, the leftmost.
fn min_by_at<P, F>(producer: P, site: splitter::Site, compare: &F) -> Option<P::Item>
where
    P: Producer,
    F: Fn(&P::Item, &P::Item) -> Ordering + Sync,
{
    drive(
        producer,
        site,
        |items| items.min_by(compare),
        |left, right| match (left, right) {
            (Some(left), Some(right)) => Some(match compare(&right, &left) {
                Ordering::Less => right,
                _ => left,
            }),
            (left, right) => left.or(right),
        },
    )
}

/// The largest item by `compare`; of equal ones, the rightmost.
fn max_by_at<P, F>(producer: P, site: splitter::Site, compare: &F) -> Option<P::Item>
where
    P: Producer,
    F: Fn(&P::Item, &P::Item) -> Ordering + Sync,
{
    drive(
        producer,
        site,
        |items| items.max_by(compare),
        |left, right| match (left, right) {
            (Some(left), Some(right)) => Some(match compare(&right, &left) {
                Ordering::Less => left,
                _ => right,
            }),
            (left, right) => left.or(right),
        },
    )
}

/// A parallel iterator whose positions are its items: every position
/// yields exactly one item, so the items can be counted, numbered and
/// paired by position. Slices, `Vec`s, ranges and chunks are, and so are
/// `map`, `copied`, `enumerate`, `zip` and the length limits over them;
/// `filter` and the like are not.
///
/// ```
/// use tidepool::prelude::*;
/// let it = [10, 20, 30].par_iter().map(|x| x + 1);
/// assert_eq!(it.len(), 3);
/// ```
// rayon's name set has `len` without `is_empty`.
#[allow(clippy::len_without_is_empty)]
pub trait IndexedParallelIterator: ParallelIterator {
    /// The number of items.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// assert_eq!((5..15u8).into_par_iter().len(), 10);
    /// ```
    fn len(&self) -> usize {
        self.positions()
    }

    /// Each item with its index.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let tagged: Vec<String> = ["a", "b"].par_iter().enumerate().map(|(i, s)| format!("{i}{s}")).collect();
    /// assert_eq!(tagged, ["0a", "1b"]);
    /// ```
    fn enumerate(self) -> Enumerate<Self> {
        Enumerate::new(self)
    }

    /// Pairs of this iterator's and `other`'s items at the same index, as
    /// many as the shorter one has.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let names = ["tide", "pool", "extra"];
    /// let ages = vec![3, 4];
    /// let pairs: Vec<(&str, i32)> = names.par_iter().copied().zip(ages).collect();
    /// assert_eq!(pairs, [("tide", 3), ("pool", 4)]);
    /// ```
    fn zip<Z>(self, other: Z) -> Zip<Self, Z::Iter>
    where
        Z: IntoParallelIterator,
        Z::Iter: IndexedParallelIterator,
    {
        Zip::new(self, other.into_par_iter())
    }
}

/// What can become a parallel iterator: every parallel iterator, `Vec`s
/// (by value), slices, `Vec`s and arrays by reference (`&` and `&mut`),
/// and integer ranges (`a..b` and `a..=b`).
///
/// ```
/// use tidepool::prelude::*;
/// let owned: Vec<String> = vec!["a".to_string(), "b".to_string()];
/// let joined: String = owned.into_par_iter().collect();
/// assert_eq!(joined, "ab");
/// ```
pub trait IntoParallelIterator {
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;
    /// What it yields.
    type Item: Send;

    /// The parallel iterator over `self`.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let total: u32 = (1..5u32).into_par_iter().sum();
    /// assert_eq!(total, 10);
    /// ```
    fn into_par_iter(self) -> Self::Iter;
}

impl<P: ParallelIterator> IntoParallelIterator for P {
    type Iter = P;
    type Item = P::Item;

    fn into_par_iter(self) -> P {
        self
    }
}

/// `par_iter()`: a parallel iterator over references to the items of a
/// collection (anything whose `&` is [`IntoParallelIterator`]).
///
/// ```
/// use tidepool::prelude::*;
/// let values = vec![1, 2, 3];
/// assert_eq!(values.par_iter().max(), Some(&3));
/// ```
pub trait IntoParallelRefIterator<'data> {
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;
    /// What it yields (a reference).
    type Item: Send + 'data;

    /// The parallel iterator over `&self`.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let values = [1, 2, 3];
    /// let total: i32 = values.par_iter().sum();
    /// assert_eq!(total, 6);
    /// ```
    fn par_iter(&'data self) -> Self::Iter;
}

impl<'data, I: 'data + ?Sized> IntoParallelRefIterator<'data> for I
where
    &'data I: IntoParallelIterator,
{
    type Iter = <&'data I as IntoParallelIterator>::Iter;
    type Item = <&'data I as IntoParallelIterator>::Item;

    fn par_iter(&'data self) -> Self::Iter {
        self.into_par_iter()
    }
}

/// `par_iter_mut()`: a parallel iterator over mutable references to the
/// items of a collection (anything whose `&mut` is
/// [`IntoParallelIterator`]).
///
/// ```
/// use tidepool::prelude::*;
/// let mut values = vec![1, 2, 3];
/// values.par_iter_mut().for_each(|v| *v += 1);
/// assert_eq!(values, [2, 3, 4]);
/// ```
pub trait IntoParallelRefMutIterator<'data> {
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;
    /// What it yields (a mutable reference).
    type Item: Send + 'data;

    /// The parallel iterator over `&mut self`.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values = [1, 2, 3];
    /// values.par_iter_mut().enumerate().for_each(|(i, v)| *v *= i);
    /// assert_eq!(values, [0, 2, 6]);
    /// ```
    fn par_iter_mut(&'data mut self) -> Self::Iter;
}

impl<'data, I: 'data + ?Sized> IntoParallelRefMutIterator<'data> for I
where
    &'data mut I: IntoParallelIterator,
{
    type Iter = <&'data mut I as IntoParallelIterator>::Iter;
    type Item = <&'data mut I as IntoParallelIterator>::Item;

    fn par_iter_mut(&'data mut self) -> Self::Iter {
        self.into_par_iter()
    }
}

/// A collection [`ParallelIterator::collect`] can build: `Vec`,
/// `VecDeque`, `String` (of `char`s, `&str`s or `String`s), `HashMap`,
/// `BTreeMap`, `HashSet`, `BTreeSet`, `()`, and `Result` or `Option` of
/// any of them.
///
/// ```
/// use std::collections::HashMap;
/// use tidepool::prelude::*;
/// let lengths: HashMap<&str, usize> = ["tide", "pool"].par_iter().map(|w| (*w, w.len())).collect();
/// assert_eq!(lengths["pool"], 4);
/// ```
pub trait FromParallelIterator<T: Send>: Sized {
    /// The collection of `par_iter`'s items.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let values = Vec::from_par_iter((0..3u8).into_par_iter());
    /// assert_eq!(values, [0, 1, 2]);
    /// ```
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = T>>(par_iter: I) -> Self;
}
