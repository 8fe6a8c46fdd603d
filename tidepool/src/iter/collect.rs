//! `collect`: every leaf collects its items into a `Vec`, neighbouring
//! leaves' `Vec`s are kept in a list in order, and the list is joined into
//! one `Vec` at the end (one move of every item; no unsafe code writes
//! into uninitialised memory). Other collections are built from that
//! `Vec`.

use super::splitter::{drive, Site};
use super::{FromParallelIterator, IntoParallelIterator, ParallelIterator, Producer};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// The items of `producer` in order, in one `Vec`.
fn collect_vec<P: Producer>(producer: P, site: Site) -> Vec<P::Item> {
    let pieces = drive(
        producer,
        site,
        |items| vec![items.collect::<Vec<_>>()],
        |mut left, right| {
            left.extend(right);
            left
        },
    );
    join_pieces(pieces)
}

/// The pieces' items in one `Vec`, in order: the first piece's own `Vec`
/// when it is the only one.
fn join_pieces<T>(mut pieces: Vec<Vec<T>>) -> Vec<T> {
    if pieces.len() == 1 {
        return pieces.pop().unwrap_or_default();
    }
    let total = pieces.iter().map(Vec::len).sum();
    let mut joined = Vec::with_capacity(total);
    for mut piece in pieces {
        joined.append(&mut piece);
    }
    joined
}

impl<T: Send> FromParallelIterator<T> for Vec<T> {
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = T>>(par_iter: I) -> Self {
        collect_vec(par_iter.into_par_iter(), Location::caller())
    }
}

/// Collections built from the collected `Vec`, sequentially: the items are
/// made in parallel, the collection is filled on the calling thread.
macro_rules! from_vec {
    ($(impl<$($generic:ident),*> for $collection:ty where $item:ty: [$($bound:tt)*];)*) => {$(
        impl<$($generic),*> FromParallelIterator<$item> for $collection
        where
            $item: Send,
            $($bound)*
        {
            #[track_caller]
            fn from_par_iter<I: IntoParallelIterator<Item = $item>>(par_iter: I) -> Self {
                collect_vec(par_iter.into_par_iter(), Location::caller())
                    .into_iter()
                    .collect()
            }
        }
    )*};
}

from_vec! {
    impl<T> for VecDeque<T> where T: [];
    impl<T> for BTreeSet<T> where T: [T: Ord];
    impl<T, S> for HashSet<T, S> where T: [T: Eq + Hash, S: BuildHasher + Default];
    impl<K, V> for BTreeMap<K, V> where (K, V): [K: Ord];
    impl<K, V, S> for HashMap<K, V, S> where (K, V): [K: Eq + Hash, S: BuildHasher + Default];
}

impl FromParallelIterator<char> for String {
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = char>>(par_iter: I) -> Self {
        collect_vec(par_iter.into_par_iter(), Location::caller())
            .into_iter()
            .collect()
    }
}

impl<'a> FromParallelIterator<&'a str> for String {
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = &'a str>>(par_iter: I) -> Self {
        collect_vec(par_iter.into_par_iter(), Location::caller()).concat()
    }
}

impl FromParallelIterator<String> for String {
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = String>>(par_iter: I) -> Self {
        collect_vec(par_iter.into_par_iter(), Location::caller()).concat()
    }
}

impl FromParallelIterator<()> for () {
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = ()>>(par_iter: I) -> Self {
        drive(
            par_iter.into_par_iter(),
            Location::caller(),
            |items| items.for_each(drop),
            |(), ()| (),
        );
    }
}

/// `Ok` with the collection of the `Ok` values, or an `Err`: the first one
/// met (in time, not necessarily in order). Every piece stops at the first
/// `Err` met (see [`ParallelIterator::while_some`]).
impl<C, T, E> FromParallelIterator<Result<T, E>> for Result<C, E>
where
    C: FromParallelIterator<T>,
    T: Send,
    E: Send,
{
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = Result<T, E>>>(par_iter: I) -> Self {
        let error = Mutex::new(None);
        let keep_first = |item: Result<T, E>| match item {
            Ok(value) => Some(value),
            Err(e) => {
                error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
                None
            }
        };
        let collection = C::from_par_iter(par_iter.into_par_iter().map(keep_first).while_some());
        match error.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(e) => Err(e),
            None => Ok(collection),
        }
    }
}

/// `Some` collection of the values, or `None` if any item is `None`. Every
/// piece stops at the first `None` met.
impl<C, T> FromParallelIterator<Option<T>> for Option<C>
where
    C: FromParallelIterator<T>,
    T: Send,
{
    #[track_caller]
    fn from_par_iter<I: IntoParallelIterator<Item = Option<T>>>(par_iter: I) -> Self {
        let missing = AtomicBool::new(false);
        let note_none = |item: Option<T>| {
            if item.is_none() {
                missing.store(true, Ordering::Relaxed);
            }
            item
        };
        let collection = C::from_par_iter(par_iter.into_par_iter().map(note_none).while_some());
        // The join that ended the run ordered every store before this load.
        (!missing.load(Ordering::Relaxed)).then_some(collection)
    }
}
