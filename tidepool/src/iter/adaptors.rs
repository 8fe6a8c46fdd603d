//! The adaptors: producers that wrap a producer. Each cuts where its base
//! cuts and walks a piece through its base's sequential iterator. A
//! closure is shared by the pieces through an `Arc`: one allocation per
//! adaptor and one reference count per cut, and no producer borrows from
//! a frame that might be gone.

use super::{sequential, IndexedParallelIterator, Producer};
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// An adaptor that holds its base and closures: the struct (each closure
/// in an `Arc`, for the pieces to share), `new`, which takes the closures,
/// and a `Debug` that shows the base (a closure has nothing to show).
macro_rules! closure_adaptor {
    (
        $(#[$attr:meta])*
        $name:ident<P, $($generic:ident),+> { $($op:ident: $op_type:ident),+ $(,)? }
    ) => {
        $(#[$attr])*
        pub struct $name<P, $($generic),+> {
            base: P,
            $($op: Arc<$op_type>,)+
        }

        impl<P, $($generic),+> $name<P, $($generic),+> {
            pub(super) fn new(base: P, $($op: $op_type),+) -> Self {
                $name {
                    base,
                    $($op: Arc::new($op),)+
                }
            }
        }

        impl<P: fmt::Debug, $($generic),+> fmt::Debug for $name<P, $($generic),+> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("base", &self.base)
                    .finish_non_exhaustive()
            }
        }
    };
}

/// The `Producer` methods of an adaptor that cuts where its base cuts and
/// keeps its base's leaf lengths: `positions`, `split_at` (each piece gets
/// a clone of the adaptor's other fields: its closures' `Arc`s, a shared
/// flag) and `min_len` / `max_len`.
macro_rules! like_base {
    ($name:ident { $($field:ident),* }) => {
        fn positions(&self) -> usize {
            self.base.positions()
        }

        fn split_at(self, position: usize) -> (Self, Self) {
            let (left, right) = self.base.split_at(position);
            let left = $name {
                base: left,
                $($field: Clone::clone(&self.$field),)*
            };
            let right = $name {
                base: right,
                $($field: self.$field,)*
            };
            (left, right)
        }

        fn min_len(&self) -> usize {
            self.base.min_len()
        }

        fn max_len(&self) -> usize {
            self.base.max_len()
        }
    };
}

closure_adaptor! {
    /// Each item through a closure: see [`ParallelIterator::map`](super::ParallelIterator::map).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let lengths: Vec<usize> = ["tide", "rock"].par_iter().map(|w| w.len()).collect();
    /// assert_eq!(lengths, [4, 4]);
    /// ```
    Map<P, F> { map_op: F }
}

impl<P, F, R> Producer for Map<P, F>
where
    P: Producer,
    F: Fn(P::Item) -> R + Sync + Send,
    R: Send,
{
    type Item = R;
    type Sequential = sequential::Map<P::Sequential, F>;

    like_base!(Map { map_op });

    fn into_sequential(self) -> Self::Sequential {
        sequential::Map::new(self.base.into_sequential(), self.map_op)
    }
}

impl<P, F, R> IndexedParallelIterator for Map<P, F>
where
    P: IndexedParallelIterator,
    F: Fn(P::Item) -> R + Sync + Send,
    R: Send,
{
}

closure_adaptor! {
    /// The items a predicate accepts: see [`ParallelIterator::filter`](super::ParallelIterator::filter).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let odd: Vec<u32> = (0..10u32).into_par_iter().filter(|n| n % 2 == 1).collect();
    /// assert_eq!(odd, [1, 3, 5, 7, 9]);
    /// ```
    Filter<P, F> { predicate: F }
}

impl<P, F> Producer for Filter<P, F>
where
    P: Producer,
    F: Fn(&P::Item) -> bool + Sync + Send,
{
    type Item = P::Item;
    type Sequential = sequential::Filter<P::Sequential, F>;

    like_base!(Filter { predicate });

    fn into_sequential(self) -> Self::Sequential {
        sequential::Filter::new(self.base.into_sequential(), self.predicate)
    }
}

closure_adaptor! {
    /// The `Some` results of a closure: see [`ParallelIterator::filter_map`](super::ParallelIterator::filter_map).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let numbers: Vec<u32> = ["1", "x", "3"].par_iter().filter_map(|s| s.parse().ok()).collect();
    /// assert_eq!(numbers, [1, 3]);
    /// ```
    FilterMap<P, F> { filter_op: F }
}

impl<P, F, R> Producer for FilterMap<P, F>
where
    P: Producer,
    F: Fn(P::Item) -> Option<R> + Sync + Send,
    R: Send,
{
    type Item = R;
    type Sequential = sequential::FilterMap<P::Sequential, F>;

    like_base!(FilterMap { filter_op });

    fn into_sequential(self) -> Self::Sequential {
        sequential::FilterMap::new(self.base.into_sequential(), self.filter_op)
    }
}

closure_adaptor! {
    /// Each item into a sequential iterator, flattened: see
    /// [`ParallelIterator::flat_map_iter`](super::ParallelIterator::flat_map_iter).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let words: Vec<&str> = ["tide pool", "rock"].par_iter().flat_map_iter(|s| s.split(' ')).collect();
    /// assert_eq!(words, ["tide", "pool", "rock"]);
    /// ```
    FlatMapIter<P, F> { map_op: F }
}

impl<P, F, U> Producer for FlatMapIter<P, F>
where
    P: Producer,
    F: Fn(P::Item) -> U + Sync + Send,
    U: IntoIterator,
    U::Item: Send,
{
    type Item = U::Item;
    type Sequential = sequential::FlatMapIter<P::Sequential, F, U>;

    like_base!(FlatMapIter { map_op });

    fn into_sequential(self) -> Self::Sequential {
        sequential::FlatMapIter::new(self.base.into_sequential(), self.map_op)
    }
}

/// Items copied out of references: see [`ParallelIterator::copied`](super::ParallelIterator::copied).
///
/// ```
/// use tidepool::prelude::*;
/// let values = vec![1u64, 2, 3];
/// let total: u64 = values.par_iter().copied().sum();
/// assert_eq!(total, 6);
/// ```
#[derive(Debug)]
pub struct Copied<P> {
    base: P,
}

impl<P> Copied<P> {
    pub(super) fn new(base: P) -> Self {
        Copied { base }
    }
}

impl<'a, T, P> Producer for Copied<P>
where
    P: Producer<Item = &'a T>,
    T: 'a + Copy + Send + Sync,
{
    type Item = T;
    type Sequential = std::iter::Copied<P::Sequential>;

    like_base!(Copied {});

    fn into_sequential(self) -> Self::Sequential {
        self.base.into_sequential().copied()
    }
}

impl<'a, T, P> IndexedParallelIterator for Copied<P>
where
    P: IndexedParallelIterator<Item = &'a T>,
    T: 'a + Copy + Send + Sync,
{
}

/// Items cloned out of references: see [`ParallelIterator::cloned`](super::ParallelIterator::cloned).
///
/// ```
/// use tidepool::prelude::*;
/// let names = vec![String::from("tide"), String::from("pool")];
/// let copies: Vec<String> = names.par_iter().cloned().collect();
/// assert_eq!(copies, names);
/// ```
#[derive(Debug)]
pub struct Cloned<P> {
    base: P,
}

impl<P> Cloned<P> {
    pub(super) fn new(base: P) -> Self {
        Cloned { base }
    }
}

impl<'a, T, P> Producer for Cloned<P>
where
    P: Producer<Item = &'a T>,
    T: 'a + Clone + Send + Sync,
{
    type Item = T;
    type Sequential = std::iter::Cloned<P::Sequential>;

    like_base!(Cloned {});

    fn into_sequential(self) -> Self::Sequential {
        self.base.into_sequential().cloned()
    }
}

impl<'a, T, P> IndexedParallelIterator for Cloned<P>
where
    P: IndexedParallelIterator<Item = &'a T>,
    T: 'a + Clone + Send + Sync,
{
}

/// Items with their index: see [`IndexedParallelIterator::enumerate`].
///
/// ```
/// use tidepool::prelude::*;
/// let pairs: Vec<(usize, char)> = ['a', 'b'].par_iter().copied().enumerate().collect();
/// assert_eq!(pairs, [(0, 'a'), (1, 'b')]);
/// ```
#[derive(Debug)]
pub struct Enumerate<P> {
    base: P,
    /// The index of the piece's first item.
    offset: usize,
}

impl<P> Enumerate<P> {
    pub(super) fn new(base: P) -> Self {
        Enumerate { base, offset: 0 }
    }
}

impl<P: IndexedParallelIterator> Producer for Enumerate<P> {
    type Item = (usize, P::Item);
    type Sequential = std::iter::Zip<std::ops::Range<usize>, P::Sequential>;

    fn positions(&self) -> usize {
        self.base.positions()
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let (left, right) = self.base.split_at(position);
        let left = Enumerate {
            base: left,
            offset: self.offset,
        };
        let right = Enumerate {
            base: right,
            offset: self.offset + position,
        };
        (left, right)
    }

    fn into_sequential(self) -> Self::Sequential {
        let indices = self.offset..self.offset + self.base.positions();
        indices.zip(self.base.into_sequential())
    }

    fn min_len(&self) -> usize {
        self.base.min_len()
    }

    fn max_len(&self) -> usize {
        self.base.max_len()
    }
}

impl<P: IndexedParallelIterator> IndexedParallelIterator for Enumerate<P> {}

/// Pairs of items at the same index: see [`IndexedParallelIterator::zip`].
///
/// ```
/// use tidepool::prelude::*;
/// let a = [1, 2, 3];
/// let b = [10, 20, 30];
/// let sums: Vec<i32> = a.par_iter().zip(&b).map(|(x, y)| x + y).collect();
/// assert_eq!(sums, [11, 22, 33]);
/// ```
#[derive(Debug)]
pub struct Zip<A, B> {
    a: A,
    b: B,
}

impl<A, B> Zip<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Zip { a, b }
    }
}

impl<A, B> Producer for Zip<A, B>
where
    A: IndexedParallelIterator,
    B: IndexedParallelIterator,
{
    type Item = (A::Item, B::Item);
    type Sequential = std::iter::Zip<A::Sequential, B::Sequential>;

    fn positions(&self) -> usize {
        self.a.positions().min(self.b.positions())
    }

    /// Both sides at the same position: the longer side's surplus stays
    /// in its right piece, where the sequential zip stops short of it.
    fn split_at(self, position: usize) -> (Self, Self) {
        let (a_left, a_right) = self.a.split_at(position);
        let (b_left, b_right) = self.b.split_at(position);
        (Zip::new(a_left, b_left), Zip::new(a_right, b_right))
    }

    fn into_sequential(self) -> Self::Sequential {
        self.a.into_sequential().zip(self.b.into_sequential())
    }

    fn min_len(&self) -> usize {
        self.a.min_len().max(self.b.min_len())
    }

    fn max_len(&self) -> usize {
        self.a.max_len().min(self.b.max_len())
    }
}

impl<A, B> IndexedParallelIterator for Zip<A, B>
where
    A: IndexedParallelIterator,
    B: IndexedParallelIterator,
{
}

closure_adaptor! {
    /// One accumulator per leaf: see [`ParallelIterator::fold`](super::ParallelIterator::fold).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let total: u32 = (1..=4u32).into_par_iter().fold(|| 0, |sum, n| sum + n).sum();
    /// assert_eq!(total, 10);
    /// ```
    Fold<P, ID, F> { identity: ID, fold_op: F }
}

impl<P, ID, F, T> Producer for Fold<P, ID, F>
where
    P: Producer,
    ID: Fn() -> T + Sync + Send,
    F: Fn(T, P::Item) -> T + Sync + Send,
    T: Send,
{
    type Item = T;
    type Sequential = std::option::IntoIter<T>;

    like_base!(Fold { identity, fold_op });

    /// The leaf's one accumulator, folded here: a leaf is walked as soon
    /// as it is made.
    fn into_sequential(self) -> Self::Sequential {
        let fold_op = &*self.fold_op;
        let folded = self.base.into_sequential().fold((self.identity)(), fold_op);
        Some(folded).into_iter()
    }
}

/// The contents of `Some` items, up to the first `None`: see
/// [`ParallelIterator::while_some`](super::ParallelIterator::while_some).
///
/// ```
/// use tidepool::prelude::*;
/// let all: Vec<u32> = [Some(1), Some(2)].par_iter().copied().while_some().collect();
/// assert_eq!(all, [1, 2]);
/// ```
#[derive(Debug)]
pub struct WhileSome<P> {
    base: P,
    /// Set by the first piece that meets a `None`; every piece stops at it.
    stop: Arc<AtomicBool>,
}

impl<P> WhileSome<P> {
    pub(super) fn new(base: P) -> Self {
        WhileSome {
            base,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<P, T> Producer for WhileSome<P>
where
    P: Producer<Item = Option<T>>,
    T: Send,
{
    type Item = T;
    type Sequential = sequential::WhileSome<P::Sequential>;

    like_base!(WhileSome { stop });

    fn into_sequential(self) -> Self::Sequential {
        sequential::WhileSome::new(self.base.into_sequential(), self.stop)
    }
}

/// A base whose leaves hold at least `min` positions: see
/// [`ParallelIterator::with_min_len`](super::ParallelIterator::with_min_len).
///
/// ```
/// use tidepool::prelude::*;
/// let total: u64 = (0..10_000u64).into_par_iter().with_min_len(1_000).sum();
/// assert_eq!(total, 49_995_000);
/// ```
#[derive(Debug)]
pub struct MinLen<P> {
    base: P,
    min: usize,
}

impl<P> MinLen<P> {
    pub(super) fn new(base: P, min: usize) -> Self {
        MinLen { base, min }
    }
}

impl<P: Producer> Producer for MinLen<P> {
    type Item = P::Item;
    type Sequential = P::Sequential;

    fn positions(&self) -> usize {
        self.base.positions()
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let (left, right) = self.base.split_at(position);
        (MinLen::new(left, self.min), MinLen::new(right, self.min))
    }

    fn into_sequential(self) -> Self::Sequential {
        self.base.into_sequential()
    }

    fn min_len(&self) -> usize {
        self.base.min_len().max(self.min)
    }

    fn max_len(&self) -> usize {
        self.base.max_len()
    }
}

impl<P: IndexedParallelIterator> IndexedParallelIterator for MinLen<P> {}

/// A base whose leaves hold at most `max` positions: see
/// [`ParallelIterator::with_max_len`](super::ParallelIterator::with_max_len).
///
/// ```
/// use tidepool::prelude::*;
/// let total: u64 = (0..100u64).into_par_iter().with_max_len(1).sum();
/// assert_eq!(total, 4_950);
/// ```
#[derive(Debug)]
pub struct MaxLen<P> {
    base: P,
    max: usize,
}

impl<P> MaxLen<P> {
    pub(super) fn new(base: P, max: usize) -> Self {
        MaxLen { base, max }
    }
}

impl<P: Producer> Producer for MaxLen<P> {
    type Item = P::Item;
    type Sequential = P::Sequential;

    fn positions(&self) -> usize {
        self.base.positions()
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let (left, right) = self.base.split_at(position);
        (MaxLen::new(left, self.max), MaxLen::new(right, self.max))
    }

    fn into_sequential(self) -> Self::Sequential {
        self.base.into_sequential()
    }

    fn min_len(&self) -> usize {
        self.base.min_len()
    }

    fn max_len(&self) -> usize {
        self.base.max_len().min(self.max)
    }
}

impl<P: IndexedParallelIterator> IndexedParallelIterator for MaxLen<P> {}
