//! Slices in parallel: chunks (producers like the others) and sorts (a
//! recursion of their own on the same splitter).

use super::splitter::{divide, Site};
use super::{IndexedParallelIterator, Producer};
use std::cmp::Ordering;
use std::panic::Location;

/// Parallel methods of shared slices (and of `Vec`s and arrays, through
/// `Deref`).
///
/// ```
/// use tidepool::prelude::*;
/// let values = [1, 2, 3, 4, 5];
/// let sums: Vec<i32> = values.par_chunks(2).map(|chunk| chunk.iter().sum()).collect();
/// assert_eq!(sums, [3, 7, 5]);
/// ```
pub trait ParallelSlice<T: Sync> {
    /// The slice itself.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// assert_eq!([1, 2].as_parallel_slice(), &[1, 2]);
    /// ```
    fn as_parallel_slice(&self) -> &[T];

    /// A parallel iterator over `chunk_size` items at a time, as
    /// [`slice::chunks`]: the last chunk may be shorter.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is zero.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let chunks: Vec<&[u8]> = [1, 2, 3].par_chunks(2).collect();
    /// assert_eq!(chunks, [&[1, 2][..], &[3][..]]);
    /// ```
    fn par_chunks(&self, chunk_size: usize) -> Chunks<'_, T> {
        assert!(
            chunk_size != 0,
            "par_chunks: the chunk size must not be zero"
        );
        Chunks {
            slice: self.as_parallel_slice(),
            size: chunk_size,
        }
    }
}

impl<T: Sync> ParallelSlice<T> for [T] {
    fn as_parallel_slice(&self) -> &[T] {
        self
    }
}

/// Parallel methods of mutable slices (and of `Vec`s and arrays, through
/// `DerefMut`): chunks and sorts.
///
/// The sorts cut the slice with the same splitter as the parallel
/// iterators (about two pieces per slot of the current pool, more where
/// thieves take them), never into pieces under 4,096 items, and sort the
/// pieces with the standard library's sorts. A comparator that panics
/// leaves the slice a permutation of what it held (no item lost or
/// doubled), as the standard sorts do; the panic is resumed on the caller
/// once every piece has stopped.
///
/// ```
/// use tidepool::prelude::*;
/// let mut values = vec![5, 3, 1, 4, 2];
/// values.par_sort();
/// assert_eq!(values, [1, 2, 3, 4, 5]);
/// ```
pub trait ParallelSliceMut<T: Send> {
    /// The slice itself.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values = [1, 2];
    /// values.as_parallel_slice_mut()[0] = 7;
    /// assert_eq!(values, [7, 2]);
    /// ```
    fn as_parallel_slice_mut(&mut self) -> &mut [T];

    /// A parallel iterator over `chunk_size` items at a time, mutably, as
    /// [`slice::chunks_mut`]: the last chunk may be shorter.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is zero.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values = [1, 2, 3, 4, 5];
    /// values.par_chunks_mut(2).for_each(|chunk| chunk.reverse());
    /// assert_eq!(values, [2, 1, 4, 3, 5]);
    /// ```
    fn par_chunks_mut(&mut self, chunk_size: usize) -> ChunksMut<'_, T> {
        assert!(
            chunk_size != 0,
            "par_chunks_mut: the chunk size must not be zero"
        );
        ChunksMut {
            slice: self.as_parallel_slice_mut(),
            size: chunk_size,
        }
    }

    /// Sorts the slice in parallel, stably (equal items keep their order),
    /// as [`slice::sort`]: a merge sort. The halves are sorted in parallel,
    /// then merged by the standard stable sort, which finds the two sorted
    /// runs and merges them in one pass (that pass is sequential: the top
    /// merge walks the whole slice on one thread).
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values: Vec<u32> = (0..10_000).rev().collect();
    /// values.par_sort();
    /// assert!(values.windows(2).all(|w| w[0] <= w[1]));
    /// ```
    #[track_caller]
    fn par_sort(&mut self)
    where
        T: Ord,
    {
        merge_sort(self.as_parallel_slice_mut(), Location::caller(), &T::cmp);
    }

    /// Sorts the slice in parallel, stably, by a comparator, as
    /// [`slice::sort_by`]. See [`ParallelSliceMut::par_sort`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values = vec![1, 5, 2, 4];
    /// values.par_sort_by(|a, b| b.cmp(a));
    /// assert_eq!(values, [5, 4, 2, 1]);
    /// ```
    #[track_caller]
    fn par_sort_by<F>(&mut self, compare: F)
    where
        F: Fn(&T, &T) -> Ordering + Sync,
    {
        merge_sort(self.as_parallel_slice_mut(), Location::caller(), &compare);
    }

    /// Sorts the slice in parallel, stably, by a key, as
    /// [`slice::sort_by_key`] (the key is computed at every comparison).
    /// See [`ParallelSliceMut::par_sort`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut words = vec!["pool", "a", "tide", "of"];
    /// words.par_sort_by_key(|w| w.len());
    /// assert_eq!(words, ["a", "of", "pool", "tide"]);
    /// ```
    #[track_caller]
    fn par_sort_by_key<K, F>(&mut self, key: F)
    where
        K: Ord,
        F: Fn(&T) -> K + Sync,
    {
        let compare = |a: &T, b: &T| key(a).cmp(&key(b));
        merge_sort(self.as_parallel_slice_mut(), Location::caller(), &compare);
    }

    /// Sorts the slice in parallel, not stably, as
    /// [`slice::sort_unstable`]: a quicksort that cuts at the median
    /// ([`slice::select_nth_unstable`], so the halves are even), sorts the
    /// two sides in parallel, and sorts a piece it does not cut with the
    /// standard unstable sort. Finding the median is sequential: the first
    /// cut walks the whole slice on one thread.
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values: Vec<u64> = (0..10_000).map(|n| n * 7919 % 10_007).collect();
    /// values.par_sort_unstable();
    /// assert!(values.windows(2).all(|w| w[0] <= w[1]));
    /// ```
    #[track_caller]
    fn par_sort_unstable(&mut self)
    where
        T: Ord,
    {
        quick_sort(self.as_parallel_slice_mut(), Location::caller(), &T::cmp);
    }

    /// Sorts the slice in parallel, not stably, by a comparator, as
    /// [`slice::sort_unstable_by`]. See
    /// [`ParallelSliceMut::par_sort_unstable`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut values = vec![1.5, -2.0, 0.5];
    /// values.par_sort_unstable_by(|a: &f64, b| a.total_cmp(b));
    /// assert_eq!(values, [-2.0, 0.5, 1.5]);
    /// ```
    #[track_caller]
    fn par_sort_unstable_by<F>(&mut self, compare: F)
    where
        F: Fn(&T, &T) -> Ordering + Sync,
    {
        quick_sort(self.as_parallel_slice_mut(), Location::caller(), &compare);
    }

    /// Sorts the slice in parallel, not stably, by a key, as
    /// [`slice::sort_unstable_by_key`]. See
    /// [`ParallelSliceMut::par_sort_unstable`].
    ///
    /// ```
    /// use tidepool::prelude::*;
    /// let mut pairs = vec![(3, 'c'), (1, 'a'), (2, 'b')];
    /// pairs.par_sort_unstable_by_key(|pair| pair.0);
    /// assert_eq!(pairs, [(1, 'a'), (2, 'b'), (3, 'c')]);
    /// ```
    #[track_caller]
    fn par_sort_unstable_by_key<K, F>(&mut self, key: F)
    where
        K: Ord,
        F: Fn(&T) -> K + Sync,
    {
        let compare = |a: &T, b: &T| key(a).cmp(&key(b));
        quick_sort(self.as_parallel_slice_mut(), Location::caller(), &compare);
    }
}

impl<T: Send> ParallelSliceMut<T> for [T] {
    fn as_parallel_slice_mut(&mut self) -> &mut [T] {
        self
    }
}

/// The shortest piece a sort cuts off: below it a piece is sorted whole
/// (not measured; rayon's sorts stop cutting at a few thousand items too).
const SORT_MIN_LEN: usize = 4096;

/// A stable merge sort: sorted halves, then one merge pass of the
/// standard sort (which finds the two runs; were it not to, it would sort
/// the piece anew, still stably, only slower).
fn merge_sort<T, F>(data: &mut [T], site: Site, compare: &F)
where
    T: Send,
    F: Fn(&T, &T) -> Ordering + Sync,
{
    let sort = |piece: &mut [T]| piece.sort_by(compare);
    divide(data, site, SORT_MIN_LEN, &halve, &sort, &sort);
}

/// Cuts `data` into its two halves.
fn halve<T>(data: &mut [T]) -> (&mut [T], &mut [T]) {
    let mid = data.len() / 2;
    data.split_at_mut(mid)
}

/// A quicksort cut at the median: the sides sort independently, and need
/// nothing done once they are sorted.
fn quick_sort<T, F>(data: &mut [T], site: Site, compare: &F)
where
    T: Send,
    F: Fn(&T, &T) -> Ordering + Sync,
{
    divide(
        data,
        site,
        SORT_MIN_LEN,
        &|piece: &mut [T]| {
            let mid = piece.len() / 2;
            let (below, _median, above) = piece.select_nth_unstable_by(mid, compare);
            (below, above)
        },
        &|piece: &mut [T]| piece.sort_unstable_by(compare),
        &|_: &mut [T]| {},
    );
}

/// A parallel iterator over a slice, `size` items at a time: what
/// [`ParallelSlice::par_chunks`] gives.
///
/// ```
/// use tidepool::prelude::*;
/// let longest = [1, 2, 3].par_chunks(2).map(|chunk| chunk.len()).max();
/// assert_eq!(longest, Some(2));
/// ```
#[derive(Debug)]
pub struct Chunks<'a, T> {
    slice: &'a [T],
    size: usize,
}

/// Chunks of `size` in `len` items, the last one perhaps shorter.
fn chunk_count(len: usize, size: usize) -> usize {
    len.div_ceil(size)
}

impl<'a, T: Sync> Producer for Chunks<'a, T> {
    type Item = &'a [T];
    type Sequential = std::slice::Chunks<'a, T>;

    fn positions(&self) -> usize {
        chunk_count(self.slice.len(), self.size)
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let at = position.saturating_mul(self.size).min(self.slice.len());
        let (left, right) = self.slice.split_at(at);
        let size = self.size;
        (Chunks { slice: left, size }, Chunks { slice: right, size })
    }

    fn into_sequential(self) -> Self::Sequential {
        self.slice.chunks(self.size)
    }
}

impl<T: Sync> IndexedParallelIterator for Chunks<'_, T> {}

/// A parallel iterator over a mutable slice, `size` items at a time: what
/// [`ParallelSliceMut::par_chunks_mut`] gives.
///
/// ```
/// use tidepool::prelude::*;
/// let mut values = [0; 5];
/// values.par_chunks_mut(2).enumerate().for_each(|(i, chunk)| chunk.fill(i));
/// assert_eq!(values, [0, 0, 1, 1, 2]);
/// ```
#[derive(Debug)]
pub struct ChunksMut<'a, T> {
    slice: &'a mut [T],
    size: usize,
}

impl<'a, T: Send> Producer for ChunksMut<'a, T> {
    type Item = &'a mut [T];
    type Sequential = std::slice::ChunksMut<'a, T>;

    fn positions(&self) -> usize {
        chunk_count(self.slice.len(), self.size)
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let at = position.saturating_mul(self.size).min(self.slice.len());
        let (left, right) = self.slice.split_at_mut(at);
        let size = self.size;
        (
            ChunksMut { slice: left, size },
            ChunksMut { slice: right, size },
        )
    }

    fn into_sequential(self) -> Self::Sequential {
        self.slice.chunks_mut(self.size)
    }
}

impl<T: Send> IndexedParallelIterator for ChunksMut<'_, T> {}
