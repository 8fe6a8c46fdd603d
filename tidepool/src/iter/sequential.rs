//! The sequential iterators that walk one leaf of an adaptor (what
//! [`Producer::into_sequential`](super::Producer::into_sequential) returns),
//! where the standard library's own cannot be named (its adaptors take
//! closures by value; these share the adaptor's closure through an `Arc`).
//! Each forwards `fold`, so a leaf's `sum`, `for_each` or `collect` runs as
//! the underlying iterator's own loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A leaf of [`iter::Map`](super::Map).
///
/// ```
/// use tidepool::iter::Producer;
/// use tidepool::prelude::*;
/// let mut leaf = [1, 2].par_iter().map(|n| n * 10).into_sequential();
/// assert_eq!(leaf.next(), Some(10));
/// assert_eq!(leaf.next(), Some(20));
/// assert_eq!(leaf.next(), None);
/// ```
pub struct Map<I, F> {
    iter: I,
    map_op: Arc<F>,
}

impl<I, F> Map<I, F> {
    pub(super) fn new(iter: I, map_op: Arc<F>) -> Self {
        Map { iter, map_op }
    }
}

impl<I: std::fmt::Debug, F> std::fmt::Debug for Map<I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("iter", &self.iter)
            .finish_non_exhaustive()
    }
}

impl<I, F, R> Iterator for Map<I, F>
where
    I: Iterator,
    F: Fn(I::Item) -> R,
{
    type Item = R;

    fn next(&mut self) -> Option<R> {
        self.iter.next().map(&*self.map_op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }

    fn fold<B, G: FnMut(B, R) -> B>(self, init: B, mut fold_op: G) -> B {
        let map_op = &*self.map_op;
        self.iter
            .fold(init, move |acc, item| fold_op(acc, map_op(item)))
    }
}

/// A leaf of [`iter::Filter`](super::Filter).
///
/// ```
/// use tidepool::iter::Producer;
/// use tidepool::prelude::*;
/// let leaf = (0..6u8).into_par_iter().filter(|n| n % 3 == 0).into_sequential();
/// assert_eq!(leaf.collect::<Vec<_>>(), [0, 3]);
/// ```
pub struct Filter<I, F> {
    iter: I,
    predicate: Arc<F>,
}

impl<I, F> Filter<I, F> {
    pub(super) fn new(iter: I, predicate: Arc<F>) -> Self {
        Filter { iter, predicate }
    }
}

impl<I: std::fmt::Debug, F> std::fmt::Debug for Filter<I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("iter", &self.iter)
            .finish_non_exhaustive()
    }
}

impl<I, F> Iterator for Filter<I, F>
where
    I: Iterator,
    F: Fn(&I::Item) -> bool,
{
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let predicate = &*self.predicate;
        self.iter.find(|item| predicate(item))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.iter.size_hint().1)
    }

    fn fold<B, G: FnMut(B, I::Item) -> B>(self, init: B, mut fold_op: G) -> B {
        let predicate = &*self.predicate;
        self.iter.fold(init, move |acc, item| {
            if predicate(&item) {
                fold_op(acc, item)
            } else {
                acc
            }
        })
    }
}

/// A leaf of [`iter::FilterMap`](super::FilterMap).
///
/// ```
/// use tidepool::iter::Producer;
/// use tidepool::prelude::*;
/// let leaf = ["7", "x"].par_iter().filter_map(|s| s.parse::<u8>().ok()).into_sequential();
/// assert_eq!(leaf.collect::<Vec<_>>(), [7]);
/// ```
pub struct FilterMap<I, F> {
    iter: I,
    filter_op: Arc<F>,
}

impl<I, F> FilterMap<I, F> {
    pub(super) fn new(iter: I, filter_op: Arc<F>) -> Self {
        FilterMap { iter, filter_op }
    }
}

impl<I: std::fmt::Debug, F> std::fmt::Debug for FilterMap<I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterMap")
            .field("iter", &self.iter)
            .finish_non_exhaustive()
    }
}

impl<I, F, R> Iterator for FilterMap<I, F>
where
    I: Iterator,
    F: Fn(I::Item) -> Option<R>,
{
    type Item = R;

    fn next(&mut self) -> Option<R> {
        let filter_op = &*self.filter_op;
        self.iter.find_map(filter_op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.iter.size_hint().1)
    }

    fn fold<B, G: FnMut(B, R) -> B>(self, init: B, mut fold_op: G) -> B {
        let filter_op = &*self.filter_op;
        self.iter
            .fold(init, move |acc, item| match filter_op(item) {
                Some(kept) => fold_op(acc, kept),
                None => acc,
            })
    }
}

/// A leaf of [`iter::FlatMapIter`](super::FlatMapIter).
///
/// ```
/// use tidepool::iter::Producer;
/// use tidepool::prelude::*;
/// let leaf = [2, 3].par_iter().flat_map_iter(|&n| 0..n).into_sequential();
/// assert_eq!(leaf.collect::<Vec<_>>(), [0, 1, 0, 1, 2]);
/// ```
pub struct FlatMapIter<I, F, U: IntoIterator> {
    iter: I,
    map_op: Arc<F>,
    /// The inner iterator being walked, if any.
    front: Option<U::IntoIter>,
}

impl<I, F, U: IntoIterator> FlatMapIter<I, F, U> {
    pub(super) fn new(iter: I, map_op: Arc<F>) -> Self {
        FlatMapIter {
            iter,
            map_op,
            front: None,
        }
    }
}

impl<I: std::fmt::Debug, F, U: IntoIterator> std::fmt::Debug for FlatMapIter<I, F, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatMapIter")
            .field("iter", &self.iter)
            .finish_non_exhaustive()
    }
}

impl<I, F, U> Iterator for FlatMapIter<I, F, U>
where
    I: Iterator,
    F: Fn(I::Item) -> U,
    U: IntoIterator,
{
    type Item = U::Item;

    fn next(&mut self) -> Option<U::Item> {
        loop {
            if let Some(front) = &mut self.front {
                if let Some(item) = front.next() {
                    return Some(item);
                }
                self.front = None;
            }
            let outer = self.iter.next()?;
            self.front = Some((self.map_op)(outer).into_iter());
        }
    }

    fn fold<B, G: FnMut(B, U::Item) -> B>(self, init: B, mut fold_op: G) -> B {
        let acc = match self.front {
            Some(front) => front.fold(init, &mut fold_op),
            None => init,
        };
        let map_op = &*self.map_op;
        self.iter.fold(acc, move |acc, outer| {
            map_op(outer).into_iter().fold(acc, &mut fold_op)
        })
    }
}

/// A leaf of [`iter::WhileSome`](super::WhileSome): ends at its first
/// `None`, or as soon as another leaf met one.
///
/// ```
/// use tidepool::iter::Producer;
/// use tidepool::prelude::*;
/// let leaf = [Some(1), None, Some(3)].par_iter().copied().while_some().into_sequential();
/// assert_eq!(leaf.collect::<Vec<_>>(), [1]);
/// ```
#[derive(Debug)]
pub struct WhileSome<I> {
    iter: I,
    stop: Arc<AtomicBool>,
}

impl<I> WhileSome<I> {
    pub(super) fn new(iter: I, stop: Arc<AtomicBool>) -> Self {
        WhileSome { iter, stop }
    }
}

impl<I, T> Iterator for WhileSome<I>
where
    I: Iterator<Item = Option<T>>,
{
    type Item = T;

    fn next(&mut self) -> Option<T> {
        // Relaxed: a flag, not a hand-over of data; a leaf that sees it
        // late only walks a little further.
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        match self.iter.next() {
            Some(Some(item)) => Some(item),
            Some(None) => {
                self.stop.store(true, Ordering::Relaxed);
                None
            }
            None => None,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.iter.size_hint().1)
    }
}
