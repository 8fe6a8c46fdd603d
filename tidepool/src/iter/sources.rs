//! The producers over data: slices (by reference and by mutable
//! reference), an owned `Vec`, and integer ranges. Each cuts its data at a
//! position and walks a piece with the standard library's own iterator.

use super::{IndexedParallelIterator, IntoParallelIterator, Producer};

/// A parallel iterator over the items of a slice, by reference: what
/// `par_iter()` gives on a slice, a `Vec` or an array.
///
/// ```
/// use tidepool::prelude::*;
/// let words = vec!["tide", "pool", "rock"];
/// let letters: usize = words.par_iter().map(|word| word.len()).sum();
/// assert_eq!(letters, 12);
/// ```
#[derive(Debug)]
pub struct Iter<'a, T> {
    slice: &'a [T],
}

impl<'a, T: Sync> Producer for Iter<'a, T> {
    type Item = &'a T;
    type Sequential = std::slice::Iter<'a, T>;

    fn positions(&self) -> usize {
        self.slice.len()
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let (left, right) = self.slice.split_at(position);
        (Iter { slice: left }, Iter { slice: right })
    }

    fn into_sequential(self) -> Self::Sequential {
        self.slice.iter()
    }
}

impl<T: Sync> IndexedParallelIterator for Iter<'_, T> {}

impl<'a, T: Sync + 'a> IntoParallelIterator for &'a [T] {
    type Iter = Iter<'a, T>;
    type Item = &'a T;

    fn into_par_iter(self) -> Iter<'a, T> {
        Iter { slice: self }
    }
}

impl<'a, T: Sync + 'a> IntoParallelIterator for &'a Vec<T> {
    type Iter = Iter<'a, T>;
    type Item = &'a T;

    fn into_par_iter(self) -> Iter<'a, T> {
        Iter { slice: self }
    }
}

impl<'a, T: Sync + 'a, const N: usize> IntoParallelIterator for &'a [T; N] {
    type Iter = Iter<'a, T>;
    type Item = &'a T;

    fn into_par_iter(self) -> Iter<'a, T> {
        Iter { slice: self }
    }
}

/// A parallel iterator over the items of a slice, by mutable reference:
/// what `par_iter_mut()` gives on a slice, a `Vec` or an array.
///
/// ```
/// use tidepool::prelude::*;
/// let mut levels = vec![1, 2, 3];
/// levels.par_iter_mut().for_each(|level| *level *= 10);
/// assert_eq!(levels, [10, 20, 30]);
/// ```
#[derive(Debug)]
pub struct IterMut<'a, T> {
    slice: &'a mut [T],
}

impl<'a, T: Send> Producer for IterMut<'a, T> {
    type Item = &'a mut T;
    type Sequential = std::slice::IterMut<'a, T>;

    fn positions(&self) -> usize {
        self.slice.len()
    }

    fn split_at(self, position: usize) -> (Self, Self) {
        let (left, right) = self.slice.split_at_mut(position);
        (IterMut { slice: left }, IterMut { slice: right })
    }

    fn into_sequential(self) -> Self::Sequential {
        self.slice.iter_mut()
    }
}

impl<T: Send> IndexedParallelIterator for IterMut<'_, T> {}

impl<'a, T: Send + 'a> IntoParallelIterator for &'a mut [T] {
    type Iter = IterMut<'a, T>;
    type Item = &'a mut T;

    fn into_par_iter(self) -> IterMut<'a, T> {
        IterMut { slice: self }
    }
}

impl<'a, T: Send + 'a> IntoParallelIterator for &'a mut Vec<T> {
    type Iter = IterMut<'a, T>;
    type Item = &'a mut T;

    fn into_par_iter(self) -> IterMut<'a, T> {
        IterMut { slice: self }
    }
}

impl<'a, T: Send + 'a, const N: usize> IntoParallelIterator for &'a mut [T; N] {
    type Iter = IterMut<'a, T>;
    type Item = &'a mut T;

    fn into_par_iter(self) -> IterMut<'a, T> {
        IterMut { slice: self }
    }
}

/// A parallel iterator that owns the items of a `Vec`: what
/// `into_par_iter()` gives on one. Items a panic leaves unconsumed are
/// dropped with their piece.
///
/// A cut moves the right half into a `Vec` of its own
/// ([`Vec::split_off`]): a copy of the half's items, a few cuts deep, in
/// exchange for no unsafe code (rayon reads the items out of the one
/// buffer instead).
///
/// ```
/// use tidepool::prelude::*;
/// let names = vec![String::from("tide"), String::from("pool")];
/// let shouted: Vec<String> = names.into_par_iter().map(|name| name.to_uppercase()).collect();
/// assert_eq!(shouted, ["TIDE", "POOL"]);
/// ```
#[derive(Debug)]
pub struct IntoIter<T> {
    vec: Vec<T>,
}

impl<T: Send> Producer for IntoIter<T> {
    type Item = T;
    type Sequential = std::vec::IntoIter<T>;

    fn positions(&self) -> usize {
        self.vec.len()
    }

    fn split_at(mut self, position: usize) -> (Self, Self) {
        let right = self.vec.split_off(position);
        (self, IntoIter { vec: right })
    }

    fn into_sequential(self) -> Self::Sequential {
        self.vec.into_iter()
    }
}

impl<T: Send> IndexedParallelIterator for IntoIter<T> {}

impl<T: Send> IntoParallelIterator for Vec<T> {
    type Iter = IntoIter<T>;
    type Item = T;

    fn into_par_iter(self) -> IntoIter<T> {
        IntoIter { vec: self }
    }
}

/// A parallel iterator over an integer range (`start..end`): what
/// `into_par_iter()` gives on a `Range` of any primitive integer type up to
/// 64 bits.
///
/// ```
/// use tidepool::prelude::*;
/// let even = (0..1_000u32).into_par_iter().filter(|n| n % 2 == 0).count();
/// assert_eq!(even, 500);
/// ```
#[derive(Debug, Clone)]
pub struct RangeIter<T> {
    range: std::ops::Range<T>,
}

/// A parallel iterator over an inclusive integer range (`start..=end`):
/// what `into_par_iter()` gives on a `RangeInclusive` of any primitive
/// integer type up to 64 bits.
///
/// ```
/// use tidepool::prelude::*;
/// let total: u64 = (1..=100u64).into_par_iter().sum();
/// assert_eq!(total, 5050);
/// let top = (250..=u8::MAX).into_par_iter().max();
/// assert_eq!(top, Some(255));
/// ```
#[derive(Debug, Clone)]
pub struct RangeInclusiveIter<T> {
    range: std::ops::RangeInclusive<T>,
}

/// The number of integers from `start` up to `end` (excluded), as a
/// position count.
///
/// # Panics
///
/// If there are more than `usize::MAX` (a 64-bit range on a 32-bit target,
/// or all of `u64` inclusive): positions are counted in `usize`.
fn count_between(start: i128, end: i128) -> usize {
    usize::try_from((end - start).max(0))
        .expect("a parallel range holds at most usize::MAX integers")
}

macro_rules! integer_ranges {
    ($($int:ty),* $(,)?) => {$(
        impl Producer for RangeIter<$int> {
            type Item = $int;
            type Sequential = std::ops::Range<$int>;

            fn positions(&self) -> usize {
                count_between(self.range.start as i128, self.range.end as i128)
            }

            fn split_at(self, position: usize) -> (Self, Self) {
                // Within the range, so the cast back cannot wrap.
                let mid = (self.range.start as i128 + position as i128) as $int;
                (
                    RangeIter { range: self.range.start..mid },
                    RangeIter { range: mid..self.range.end },
                )
            }

            fn into_sequential(self) -> Self::Sequential {
                self.range
            }
        }

        impl IndexedParallelIterator for RangeIter<$int> {}

        impl IntoParallelIterator for std::ops::Range<$int> {
            type Iter = RangeIter<$int>;
            type Item = $int;

            fn into_par_iter(self) -> RangeIter<$int> {
                RangeIter { range: self }
            }
        }

        impl Producer for RangeInclusiveIter<$int> {
            type Item = $int;
            type Sequential = std::ops::RangeInclusive<$int>;

            fn positions(&self) -> usize {
                if self.range.is_empty() {
                    return 0;
                }
                count_between(*self.range.start() as i128, *self.range.end() as i128 + 1)
            }

            fn split_at(self, position: usize) -> (Self, Self) {
                let len = self.positions();
                let (start, end) = self.range.into_inner();
                // From 1 to 0: empty in every integer type.
                let empty = || RangeInclusiveIter {
                    range: std::ops::RangeInclusive::new(1, 0),
                };
                if len == 0 {
                    // Perhaps iterated to its end already: keep it empty.
                    return (empty(), empty());
                }
                if position == 0 {
                    return (empty(), RangeInclusiveIter { range: start..=end });
                }
                if position >= len {
                    return (RangeInclusiveIter { range: start..=end }, empty());
                }
                // 0 < position < len, so both ends are inside the range.
                let last_left = (start as i128 + position as i128 - 1) as $int;
                let first_right = (start as i128 + position as i128) as $int;
                (
                    RangeInclusiveIter { range: start..=last_left },
                    RangeInclusiveIter { range: first_right..=end },
                )
            }

            fn into_sequential(self) -> Self::Sequential {
                self.range
            }
        }

        impl IndexedParallelIterator for RangeInclusiveIter<$int> {}

        impl IntoParallelIterator for std::ops::RangeInclusive<$int> {
            type Iter = RangeInclusiveIter<$int>;
            type Item = $int;

            fn into_par_iter(self) -> RangeInclusiveIter<$int> {
                RangeInclusiveIter { range: self }
            }
        }
    )*};
}

integer_ranges!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);
