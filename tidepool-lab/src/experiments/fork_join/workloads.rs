//! The fork-join experiment's workloads, each written once per way of
//! forking: Fibonacci and quicksort by `join`, `scope`, a spawn per fork
//! and rayon; the parallel-iterator workloads on tidepool's and rayon's
//! iterators; and the data they run on, the same for every run.

use super::{IterWork, Runner, Via};
use std::collections::HashMap;
use std::hint::black_box;

/// Below this many integers the quicksort calls `sort_unstable`.
pub(super) const SORT_CUTOFF: usize = 8 * 1024;

/// What a run computed, checked after the clock stops.
pub(super) enum Output<'t> {
    Fib(u64),
    Sorted(Vec<u32>),
    Sum(u64),
    Filtered(Vec<u64>),
    /// `par_sort_unstable` sorted the run's copy in place.
    SortedInPlace,
    Counts(HashMap<&'t str, u64>),
}

// ---- Fibonacci -------------------------------------------------------------

/// The sequential Fibonacci, never inlined: every way runs the same leaves.
#[inline(never)]
pub(super) fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    fib_seq(n - 1) + fib_seq(n - 2)
}

/// fib(n) by iteration, to check the result.
pub(super) fn fib_iter(n: u32) -> u64 {
    let (mut a, mut b) = (0_u64, 1_u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// Forks of fib(n) with a fork at every n above `cutoff`.
pub(super) fn fib_forks(n: u32, cutoff: u32) -> u64 {
    // forks(n) = 1 + forks(n-1) + forks(n-2) above the cutoff, 0 at and below.
    let (mut below2, mut below1) = (0_u64, 0_u64);
    for k in 0..=n {
        let f = if k <= cutoff { 0 } else { 1 + below1 + below2 };
        (below2, below1) = (below1, f);
    }
    below1
}

pub(super) fn fib_on(pool: &Runner, via: Via, n: u32, cutoff: u32) -> Result<u64, String> {
    let n = black_box(n);
    match (pool, via) {
        (Runner::Tidepool(p), Via::Join) => Ok(if n <= cutoff {
            fib_seq(n)
        } else {
            let (a, b) = p.join(|| fib_join(n - 1, cutoff), || fib_join(n - 2, cutoff));
            a + b
        }),
        (Runner::Tidepool(p), Via::Scope) => Ok(p.scope(|_| fib_scope(n, cutoff))),
        (Runner::Tidepool(p), Via::Spawn) => p
            .spawn_fn(move || fib_spawn(n, cutoff))
            .join()
            .map_err(|e| format!("the task failed: {e}")),
        (Runner::Rayon(p), Via::Rayon) => Ok(p.install(|| fib_rayon(n, cutoff))),
        (Runner::None, Via::Sequential) => Ok(fib_seq(n)),
        _ => Err("no such pool for this run".into()),
    }
}

pub(super) fn fib_join(n: u32, cutoff: u32) -> u64 {
    if n <= cutoff {
        return fib_seq(n);
    }
    let (a, b) = tidepool::join(|| fib_join(n - 1, cutoff), || fib_join(n - 2, cutoff));
    a + b
}

pub(super) fn fib_scope(n: u32, cutoff: u32) -> u64 {
    if n <= cutoff {
        return fib_seq(n);
    }
    let mut a = 0;
    let b = tidepool::scope(|s| {
        s.spawn(|_| a = fib_scope(n - 1, cutoff));
        fib_scope(n - 2, cutoff)
    });
    a + b
}

pub(super) fn fib_spawn(n: u32, cutoff: u32) -> u64 {
    if n <= cutoff {
        return fib_seq(n);
    }
    let first = tidepool::spawn_fn(move || fib_spawn(n - 1, cutoff));
    let b = fib_spawn(n - 2, cutoff);
    match first.join() {
        Ok(a) => a + b,
        Err(e) => panic!("fib({}) failed: {e}", n - 1),
    }
}

pub(super) fn fib_rayon(n: u32, cutoff: u32) -> u64 {
    if n <= cutoff {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1, cutoff), || fib_rayon(n - 2, cutoff));
    a + b
}

// ---- Quicksort -------------------------------------------------------------

/// `len` pseudo-random integers (xorshift64), the same for every run.
pub(super) fn random_integers(len: usize, mut seed: u64) -> Vec<u32> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u32
        })
        .collect()
}

/// Puts the median at the middle of `v`, smaller integers before it and
/// larger after, and returns its index: the two sides sort independently.
pub(super) fn split_at_median(v: &mut [u32]) -> usize {
    let mid = v.len() / 2;
    v.select_nth_unstable(mid);
    mid
}

/// Forks of a quicksort of `len` integers.
pub(super) fn sort_forks(len: usize) -> u64 {
    if len <= SORT_CUTOFF {
        return 0;
    }
    let mid = len / 2;
    1 + sort_forks(mid) + sort_forks(len - mid - 1)
}

/// Checks `sorted` is in order and holds the integers of `input`.
pub(super) fn check_sorted<T: Ord + Clone>(input: &[T], sorted: &[T]) -> Result<(), String> {
    if sorted.len() != input.len() {
        return Err(format!(
            "{} integers came back, {} went in",
            sorted.len(),
            input.len()
        ));
    }
    if let Some(i) = sorted.windows(2).position(|w| w[0] > w[1]) {
        return Err(format!("not sorted at index {i}"));
    }
    let mut expected = input.to_vec();
    expected.sort_unstable();
    if expected != sorted {
        return Err("sorted, but not the same integers".into());
    }
    Ok(())
}

pub(super) fn sort_on(pool: &Runner, via: Via, mut v: Vec<u32>) -> Result<Vec<u32>, String> {
    match (pool, via) {
        (Runner::Tidepool(p), Via::Join) => {
            if v.len() <= SORT_CUTOFF {
                v.sort_unstable();
            } else {
                let mid = split_at_median(&mut v);
                let (left, right) = v.split_at_mut(mid);
                p.join(|| sort_join(left), || sort_join(&mut right[1..]));
            }
            Ok(v)
        }
        (Runner::Tidepool(p), Via::Scope) => {
            p.scope(|_| sort_scope(&mut v));
            Ok(v)
        }
        (Runner::Tidepool(p), Via::Spawn) => p
            .spawn_fn(move || sort_spawn(v))
            .join()
            .map_err(|e| format!("the task failed: {e}")),
        (Runner::Rayon(p), Via::Rayon) => {
            p.install(|| sort_rayon(&mut v));
            Ok(v)
        }
        (Runner::None, Via::Sequential) => {
            v.sort_unstable();
            Ok(v)
        }
        _ => Err("no such pool for this run".into()),
    }
}

pub(super) fn sort_join(v: &mut [u32]) {
    if v.len() <= SORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = split_at_median(v);
    let (left, right) = v.split_at_mut(mid);
    tidepool::join(|| sort_join(left), || sort_join(&mut right[1..]));
}

pub(super) fn sort_scope(v: &mut [u32]) {
    if v.len() <= SORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = split_at_median(v);
    let (left, right) = v.split_at_mut(mid);
    tidepool::scope(|s| {
        s.spawn(|_| sort_scope(left));
        sort_scope(&mut right[1..]);
    });
}

/// The quicksort without borrowing: a spawned closure must be `'static`, so
/// the right half (the median and above) is moved out and copied back.
pub(super) fn sort_spawn(mut v: Vec<u32>) -> Vec<u32> {
    if v.len() <= SORT_CUTOFF {
        v.sort_unstable();
        return v;
    }
    let mid = split_at_median(&mut v);
    let right = v.split_off(mid);
    let right = tidepool::spawn_fn(move || sort_spawn(right));
    let mut left = sort_spawn(v);
    match right.join() {
        Ok(right) => left.extend_from_slice(&right),
        Err(e) => panic!("a half of {} integers failed: {e}", left.len()),
    }
    left
}

pub(super) fn sort_rayon(v: &mut [u32]) {
    if v.len() <= SORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = split_at_median(v);
    let (left, right) = v.split_at_mut(mid);
    rayon::join(|| sort_rayon(left), || sort_rayon(&mut right[1..]));
}

// ---- Parallel iterators ----------------------------------------------------

/// The parallel-iterator workloads, written once for both libraries: the
/// code is the same, only the prelude differs (what a rayon user changes).
macro_rules! iter_workloads {
    ($($prelude:tt)*) => {
        use super::{count_chunk, merge_counts, IterWork, Output};
        use std::collections::HashMap;
        use $($prelude)*;

        /// Runs `work` with this library's parallel iterators (from a
        /// thread of its pool).
        pub(in crate::experiments::fork_join) fn run<'t>(
            work: IterWork,
            numbers: &[u64],
            to_sort: &mut [u64],
            chunks: &[&'t str],
        ) -> Output<'t> {
            match work {
                IterWork::SumOfSquares => Output::Sum(numbers.par_iter().map(|v| v * v).sum()),
                IterWork::FilterCollect => {
                    Output::Filtered(numbers.par_iter().copied().filter(|v| v % 3 == 0).collect())
                }
                IterWork::ParSort => {
                    to_sort.par_sort_unstable();
                    Output::SortedInPlace
                }
                IterWork::WordCount => Output::Counts(
                    chunks
                        .par_iter()
                        .map(|&chunk| count_chunk(chunk))
                        .reduce(HashMap::new, merge_counts),
                ),
            }
        }
    };
}

/// The workloads on tidepool's parallel iterators.
pub(super) mod iter_on_tidepool {
    iter_workloads!(tidepool::prelude::*);
}

/// The same workloads on rayon's.
pub(super) mod iter_on_rayon {
    iter_workloads!(rayon::prelude::*);
}

pub(super) fn iter_on<'t>(
    pool: &Runner,
    via: Via,
    work: IterWork,
    numbers: &[u64],
    to_sort: &mut [u64],
    chunks: &[&'t str],
) -> Result<Output<'t>, String> {
    match (pool, via) {
        // Pool::scope runs its closure on one of the pool's workers, as
        // rayon's install does: the iterators start on the pool.
        (Runner::Tidepool(p), Via::Iter) => {
            Ok(p.scope(|_| iter_on_tidepool::run(work, numbers, to_sort, chunks)))
        }
        (Runner::Rayon(p), Via::Rayon) => {
            Ok(p.install(|| iter_on_rayon::run(work, numbers, to_sort, chunks)))
        }
        _ => Err("no such pool for this run".into()),
    }
}

/// `len` pseudo-random u64s (xorshift64), the same for every run.
pub(super) fn random_u64s(len: usize, mut seed: u64) -> Vec<u64> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        })
        .collect()
}

/// Distinct words the text draws from.
pub(super) const VOCABULARY: u32 = 8192;

/// The text's chunks are about this long (cut at the next space).
pub(super) const CHUNK_BYTES: usize = 256 * 1024;

/// A text of `words` words of lower-case letters, twelve to a line, drawn
/// from [`VOCABULARY`] words, the short ones more often (the smaller of
/// two draws), as in prose; the same for every run.
pub(super) fn make_text(words: usize, mut seed: u64) -> String {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut text = String::with_capacity(words * 5);
    for i in 0..words {
        let id = (next() % u64::from(VOCABULARY)).min(next() % u64::from(VOCABULARY));
        let mut id = id as u32;
        // The word of `id`: its base-26 digits as letters.
        loop {
            text.push(char::from(b'a' + (id % 26) as u8));
            id /= 26;
            if id == 0 {
                break;
            }
        }
        text.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    text
}

/// `text` in chunks of about `size` bytes, each cut after a word.
pub(super) fn text_chunks(text: &str, size: usize) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while end < rest.len() && !rest.as_bytes()[end].is_ascii_whitespace() {
            end += 1;
        }
        let (chunk, tail) = rest.split_at(end);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

/// How often each word occurs in `chunk` (the map step).
pub(super) fn count_chunk(chunk: &str) -> HashMap<&str, u64> {
    let mut counts = HashMap::new();
    for word in chunk.split_ascii_whitespace() {
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

/// Two chunks' counts in one (the reduce step): the smaller map is added
/// into the larger.
pub(super) fn merge_counts<'t>(
    mut a: HashMap<&'t str, u64>,
    mut b: HashMap<&'t str, u64>,
) -> HashMap<&'t str, u64> {
    if a.len() < b.len() {
        std::mem::swap(&mut a, &mut b);
    }
    for (word, n) in b {
        *a.entry(word).or_insert(0) += n;
    }
    a
}
