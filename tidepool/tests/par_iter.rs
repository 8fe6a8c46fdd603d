//! Parallel iterators (`tidepool::prelude`): every method gives what the
//! standard library's sequential one gives, in order; panics reach the
//! caller with every item dropped once; they run on the current pool, on a
//! pool of one slot, and nested.

mod common;

use common::{within, HANG};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::Wrapping;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tidepool::prelude::*;
use tidepool::Pool;

// ---- The same results as the sequential iterators ---------------------------

proptest! {
    #[test]
    fn map_and_collect_keep_the_order(values in prop::collection::vec(any::<u32>(), 0..3000)) {
        let got: Vec<u64> = values.par_iter().map(|&v| u64::from(v) * 3).collect();
        let want: Vec<u64> = values.iter().map(|&v| u64::from(v) * 3).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn filter_and_filter_map_keep_the_order(values in prop::collection::vec(any::<u16>(), 0..3000)) {
        let got: Vec<u16> = values.par_iter().copied().filter(|v| v % 3 == 0).collect();
        let want: Vec<u16> = values.iter().copied().filter(|v| v % 3 == 0).collect();
        prop_assert_eq!(got, want);
        let ones_of_five = |&v: &u16| (v % 5 == 1).then(|| u32::from(v) + 1);
        let got: Vec<u32> = values.par_iter().filter_map(ones_of_five).collect();
        let want: Vec<u32> = values.iter().filter_map(ones_of_five).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn sums_counts_and_extremes_are_the_sequential_ones(values in prop::collection::vec(any::<i32>(), 0..3000)) {
        let wide = |v: &i32| i64::from(*v);
        prop_assert_eq!(values.par_iter().map(wide).sum::<i64>(), values.iter().map(wide).sum::<i64>());
        prop_assert_eq!(values.par_iter().filter(|v| **v > 0).count(), values.iter().filter(|v| **v > 0).count());
        prop_assert_eq!(values.par_iter().min(), values.iter().min());
        prop_assert_eq!(values.par_iter().max(), values.iter().max());
        prop_assert_eq!(
            values.par_iter().map(wide).reduce(|| 0, |a, b| a.wrapping_mul(31).wrapping_add(b) - a.wrapping_mul(30)),
            values.iter().map(wide).sum::<i64>(),
        );
        prop_assert_eq!(values.par_iter().any(|v| *v == 7), values.contains(&7));
        prop_assert_eq!(values.par_iter().all(|v| *v != 7), values.iter().all(|v| *v != 7));
    }

    #[test]
    fn owned_items_come_out_in_order(values in prop::collection::vec(".{0,3}", 0..500)) {
        let got: Vec<String> = values.clone().into_par_iter().map(|s| s + "!").collect();
        let want: Vec<String> = values.iter().map(|s| s.clone() + "!").collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn ranges_are_the_sequential_ranges(start in -5_000i64..5_000, len in 0i64..5_000) {
        let end = start + len;
        let got: Vec<i64> = (start..end).into_par_iter().collect();
        prop_assert_eq!(got, (start..end).collect::<Vec<_>>());
        let got: Vec<i64> = (start..=end).into_par_iter().collect();
        prop_assert_eq!(got, (start..=end).collect::<Vec<_>>());
        prop_assert_eq!((start..end).into_par_iter().len(), (start..end).count());
    }
}

proptest! {
    // Sorts cut nothing under 8,192 items: fewer, longer inputs.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn sorts_are_the_sequential_sorts(values in prop::collection::vec(any::<u32>(), 0..40_000)) {
        let mut want = values.clone();
        want.sort_unstable();
        let mut stable = values.clone();
        stable.par_sort();
        prop_assert_eq!(&stable, &want);
        let mut unstable = values.clone();
        unstable.par_sort_unstable();
        prop_assert_eq!(&unstable, &want);
        let mut reversed = values.clone();
        reversed.par_sort_unstable_by(|a, b| b.cmp(a));
        want.reverse();
        prop_assert_eq!(&reversed, &want);
    }

    #[test]
    fn par_sort_is_stable(keys in prop::collection::vec(0u8..16, 0..40_000)) {
        // Few keys, many equal items: each remembers where it was.
        let tagged: Vec<(u8, usize)> = keys.iter().copied().zip(0..).collect();
        let mut want = tagged.clone();
        want.sort_by_key(|t| t.0);
        let mut by_key = tagged.clone();
        by_key.par_sort_by_key(|t| t.0);
        prop_assert_eq!(&by_key, &want);
        let mut by = tagged;
        by.par_sort_by(|a, b| a.0.cmp(&b.0));
        prop_assert_eq!(&by, &want);
    }
}

#[test]
fn empty_and_single_inputs() {
    let empty: Vec<u32> = Vec::new();
    assert_eq!(
        empty.par_iter().map(|v| v + 1).collect::<Vec<_>>(),
        Vec::<u32>::new()
    );
    assert_eq!(empty.par_iter().sum::<u32>(), 0);
    assert_eq!(empty.par_iter().min(), None);
    assert_eq!(empty.par_iter().count(), 0);
    assert!(!empty.par_iter().any(|_| true));
    assert!(empty.par_iter().all(|_| false));
    assert_eq!(empty.par_iter().copied().reduce(|| 9, |a, b| a + b), 9);
    assert_eq!(empty.clone().into_par_iter().collect::<Vec<_>>(), empty);
    let mut sorted = empty.clone();
    sorted.par_sort();
    assert_eq!(sorted, empty);
    assert_eq!(empty.par_chunks(3).count(), 0);
    assert_eq!((5..5u32).into_par_iter().count(), 0);
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = (5..=4u32).into_par_iter().count();
    assert_eq!(reversed, 0);

    let one = vec![7u32];
    assert_eq!(one.par_iter().map(|v| v + 1).collect::<Vec<_>>(), [8]);
    assert_eq!(one.par_iter().sum::<u32>(), 7);
    assert_eq!(one.par_iter().max(), Some(&7));
    assert_eq!(one.par_iter().enumerate().collect::<Vec<_>>(), [(0, &7)]);
    assert_eq!(one.clone().into_par_iter().collect::<Vec<_>>(), one);
    let mut sorted = one.clone();
    sorted.par_sort_unstable();
    assert_eq!(sorted, one);
    assert_eq!(one.par_chunks(3).collect::<Vec<_>>(), [&[7][..]]);
}

#[test]
fn every_adaptor_matches_its_sequential_twin() {
    let values: Vec<u32> = (0..5_000).map(|n| n * 7919 % 4_999).collect();
    let seq = values.iter();

    let enumerated: Vec<(usize, &u32)> = values.par_iter().enumerate().collect();
    assert_eq!(enumerated, seq.clone().enumerate().collect::<Vec<_>>());

    let shorter: Vec<u32> = (0..3_000).collect();
    let zipped: Vec<(&u32, u32)> = values.par_iter().zip(shorter.clone()).collect();
    assert_eq!(zipped, seq.clone().zip(shorter.clone()).collect::<Vec<_>>());
    let zipped_the_other_way: Vec<(u32, &u32)> =
        shorter.clone().into_par_iter().zip(&values).collect();
    assert_eq!(
        zipped_the_other_way,
        shorter.iter().copied().zip(seq.clone()).collect::<Vec<_>>()
    );
    let numbered_pairs: Vec<(usize, (&u32, &u32))> =
        values.par_iter().zip(&shorter).enumerate().collect();
    assert_eq!(
        numbered_pairs,
        seq.clone().zip(&shorter).enumerate().collect::<Vec<_>>()
    );

    let flat: Vec<u32> = values.par_iter().flat_map_iter(|&v| 0..v % 4).collect();
    assert_eq!(
        flat,
        seq.clone().flat_map(|&v| 0..v % 4).collect::<Vec<_>>()
    );

    let cloned: Vec<u32> = values.par_iter().cloned().collect();
    assert_eq!(cloned, values);

    let folded: u64 = values
        .par_iter()
        .fold(|| 0u64, |sum, &v| sum + u64::from(v))
        .sum();
    assert_eq!(folded, seq.clone().map(|&v| u64::from(v)).sum());

    let limited: Vec<u32> = values
        .par_iter()
        .copied()
        .with_max_len(7)
        .with_min_len(3)
        .collect();
    assert_eq!(limited, values);

    assert_eq!(
        values.par_iter().copied().reduce_with(u32::max),
        seq.clone().copied().max()
    );
    let factor = |v: &u32| Wrapping(u64::from(v % 3 + 1));
    assert_eq!(
        values.par_iter().map(factor).product::<Wrapping<u64>>(),
        seq.clone().map(factor).product::<Wrapping<u64>>(),
    );
    let hit = values.par_iter().find_any(|&&v| v % 1_000 == 999);
    assert!(hit.is_some_and(|v| v % 1_000 == 999));
    assert_eq!(values.par_iter().find_any(|&&v| v > 5_000), None);
}

#[test]
fn ties_break_as_in_the_standard_iterators() {
    // Equal keys: min takes the first, max the last.
    let pairs: Vec<(u8, usize)> = (0..10_000).map(|i| ((i % 3) as u8, i)).collect();
    let key = |p: &&(u8, usize)| p.0;
    assert_eq!(
        pairs.par_iter().min_by_key(key),
        pairs.iter().min_by_key(key)
    );
    assert_eq!(
        pairs.par_iter().max_by_key(key),
        pairs.iter().max_by_key(key)
    );
    let compare = |a: &&(u8, usize), b: &&(u8, usize)| a.0.cmp(&b.0);
    assert_eq!(
        pairs.par_iter().min_by(compare),
        pairs.iter().min_by(compare)
    );
    assert_eq!(
        pairs.par_iter().max_by(compare),
        pairs.iter().max_by(compare)
    );
}

#[test]
fn mutable_iterators_and_chunks_see_every_item_once() {
    let mut values: Vec<u64> = (0..10_001).collect();
    values.par_iter_mut().for_each(|v| *v *= 2);
    assert_eq!(values, (0..10_001).map(|v| v * 2).collect::<Vec<u64>>());

    let sums: Vec<u64> = values.par_chunks(100).map(|c| c.iter().sum()).collect();
    assert_eq!(
        sums,
        values
            .chunks(100)
            .map(|c| c.iter().sum())
            .collect::<Vec<u64>>()
    );

    values
        .par_chunks_mut(64)
        .enumerate()
        .for_each(|(i, chunk)| {
            for v in chunk {
                *v = i as u64;
            }
        });
    assert_eq!(values, (0..10_001).map(|v| v / 64).collect::<Vec<u64>>());

    let mut array = [1u8; 300];
    array
        .par_iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = (i % 200) as u8);
    assert_eq!(array[250], 50);
}

#[test]
fn every_integer_range_type_works() {
    assert_eq!(
        (0..=u8::MAX).into_par_iter().map(u32::from).sum::<u32>(),
        255 * 256 / 2
    );
    assert_eq!((i8::MIN..=i8::MAX).into_par_iter().count(), 256);
    assert_eq!(
        (-300..300i16).into_par_iter().map(i64::from).sum::<i64>(),
        -300
    );
    assert_eq!(
        (0..70_000u32)
            .into_par_iter()
            .filter(|v| v % 7 == 0)
            .count(),
        10_000
    );
    assert_eq!(
        (u64::MAX - 10..=u64::MAX).into_par_iter().min(),
        Some(u64::MAX - 10)
    );
    assert_eq!((0..1_000usize).into_par_iter().max(), Some(999));
    assert_eq!((-5..5isize).into_par_iter().sum::<isize>(), -5);
    assert_eq!(
        (i32::MIN..i32::MIN + 3).into_par_iter().collect::<Vec<_>>(),
        [i32::MIN, i32::MIN + 1, i32::MIN + 2]
    );
}

#[test]
fn other_collections() {
    let words = ["tide", "pool", "tide", "rock"];
    let set: HashSet<&str> = words.par_iter().copied().collect();
    assert_eq!(set.len(), 3);
    let lengths: BTreeMap<&str, usize> = words.par_iter().map(|w| (*w, w.len())).collect();
    assert_eq!(lengths.len(), 3);
    let joined: String = words.par_iter().copied().collect();
    assert_eq!(joined, "tidepooltiderock");
    let letters: String = joined.chars().collect::<Vec<_>>().into_par_iter().collect();
    assert_eq!(letters, joined);
    let counts: HashMap<usize, usize> = (0..1_000usize)
        .into_par_iter()
        .map(|n| (n, n % 10))
        .collect();
    assert_eq!(counts[&999], 9);

    let all_ok: Result<Vec<u32>, String> = (0..1_000u32).into_par_iter().map(Ok).collect();
    assert_eq!(all_ok.unwrap(), (0..1_000).collect::<Vec<_>>());
    let one_bad: Result<Vec<u32>, String> = (0..1_000u32)
        .into_par_iter()
        .map(|n| {
            if n == 500 {
                Err(format!("bad {n}"))
            } else {
                Ok(n)
            }
        })
        .collect();
    assert_eq!(one_bad, Err("bad 500".to_string()));
    let none: Option<Vec<u32>> = (0..1_000u32)
        .into_par_iter()
        .map(|n| (n != 3).then_some(n))
        .collect();
    assert_eq!(none, None);
    let some: Option<Vec<u32>> = (0..10u32).into_par_iter().map(Some).collect();
    assert_eq!(some, Some((0..10).collect()));
}

// ---- Panics and drops ------------------------------------------------------

/// An item that counts its drops in its own slot of a shared table.
struct Tracked {
    id: usize,
    drops: Arc<Vec<AtomicUsize>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

fn tracked(n: usize) -> (Vec<Tracked>, Arc<Vec<AtomicUsize>>) {
    let drops: Arc<Vec<AtomicUsize>> = Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
    let items = (0..n)
        .map(|id| Tracked {
            id,
            drops: Arc::clone(&drops),
        })
        .collect();
    (items, drops)
}

fn assert_each_dropped_once(drops: &[AtomicUsize]) {
    for (id, count) in drops.iter().enumerate() {
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "item {id} dropped {count:?} times"
        );
    }
}

#[test]
fn owned_items_are_dropped_once_when_a_closure_panics() {
    let (items, drops) = tracked(10_000);
    let result = catch_unwind(AssertUnwindSafe(|| {
        items
            .into_par_iter()
            .with_max_len(100)
            .map(|item| {
                if item.id == 6_543 {
                    panic!("item 6543 refused");
                }
                item
            })
            .collect::<Vec<Tracked>>()
    }));
    let Err(panic) = result else {
        panic!("the panic did not reach the caller")
    };
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"item 6543 refused"));
    assert_each_dropped_once(&drops);
}

#[test]
fn owned_items_are_dropped_once_when_consumed_or_filtered() {
    let (items, drops) = tracked(5_000);
    let kept: Vec<Tracked> = items
        .into_par_iter()
        .filter(|item| item.id % 2 == 0)
        .collect();
    assert_eq!(kept.len(), 2_500);
    assert!(kept.iter().map(|item| item.id).eq((0..5_000).step_by(2)));
    drop(kept);
    assert_each_dropped_once(&drops);

    // Items a short-circuiting consumer never reached are dropped too.
    let (items, drops) = tracked(5_000);
    assert!(items.into_par_iter().any(|item| item.id == 10));
    assert_each_dropped_once(&drops);
}

#[test]
fn a_panic_in_a_consumer_reaches_the_caller() {
    let result = catch_unwind(|| {
        (0..10_000u32).into_par_iter().for_each(|n| {
            if n == 9_999 {
                panic!("the last one");
            }
        });
    });
    let Err(panic) = result else {
        panic!("the panic did not reach the caller")
    };
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"the last one"));
    // The pool is fine afterwards.
    assert_eq!((0..10_000u64).into_par_iter().sum::<u64>(), 49_995_000);
}

#[test]
fn a_panicking_comparator_leaves_every_item_in_the_slice() {
    let original: Vec<u32> = (0..50_000).map(|n| n * 7919 % 50_021).collect();
    for unstable in [false, true] {
        let mut values = original.clone();
        let calls = AtomicUsize::new(0);
        let compare = |a: &u32, b: &u32| {
            if calls.fetch_add(1, Ordering::Relaxed) == 200_000 {
                panic!("comparator gave up");
            }
            a.cmp(b)
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            if unstable {
                values.par_sort_unstable_by(compare);
            } else {
                values.par_sort_by(compare);
            }
        }));
        assert!(result.is_err(), "the panic reaches the caller");
        let mut after = values.clone();
        after.sort_unstable();
        let mut want = original.clone();
        want.sort_unstable();
        assert_eq!(
            after, want,
            "a permutation of the input (unstable: {unstable})"
        );
    }
}

// ---- Where it runs ---------------------------------------------------------

#[test]
fn runs_on_the_global_pool_from_outside_any_pool() {
    let names: Vec<String> = (0..1_000u32)
        .into_par_iter()
        .map(|_| std::thread::current().name().unwrap_or("").to_string())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("tidepool-global")),
        "{names:?}"
    );
}

#[test]
fn runs_on_the_pool_whose_task_calls_it() {
    let (total, names) = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .thread_name("iter-task")
            .build()
            .unwrap();
        let handle = pool.spawn_fn(|| {
            let values: Vec<u64> = (0..100_000).collect();
            let total: u64 = values.par_iter().map(|v| v * v).sum();
            let names: HashSet<String> = values
                .par_iter()
                .map(|_| std::thread::current().name().unwrap_or("").to_string())
                .collect();
            (total, names)
        });
        let out = handle.join().unwrap();
        pool.shutdown().unwrap();
        out
    });
    assert_eq!(total, (0..100_000u64).map(|v| v * v).sum());
    assert!(
        names.iter().all(|n| n.starts_with("iter-task")),
        "{names:?}"
    );
}

#[test]
fn runs_on_a_pool_of_one_slot() {
    let (sum, sorted) = within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let out = pool.scope(|_| {
            let sum: u64 = (0..200_000u64).into_par_iter().filter(|v| v % 3 == 0).sum();
            let mut values: Vec<u32> = (0..100_000).rev().collect();
            values.par_sort();
            (sum, values)
        });
        pool.shutdown().unwrap();
        out
    });
    assert_eq!(sum, (0..200_000u64).filter(|v| v % 3 == 0).sum());
    assert_eq!(sorted, (0..100_000).collect::<Vec<u32>>());
}

#[test]
fn nested_parallel_iterators() {
    let rows: Vec<Vec<u64>> = within(HANG, || {
        (0..200u64)
            .into_par_iter()
            .map(|row| (0..row).into_par_iter().map(|col| row * col).collect())
            .collect()
    });
    for (row, cols) in rows.iter().enumerate() {
        let row = row as u64;
        assert_eq!(*cols, (0..row).map(|col| row * col).collect::<Vec<_>>());
    }

    // And a sort inside a parallel loop, on a pool of one slot.
    let sorted = within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let mut tables: Vec<Vec<u32>> = (0..4)
            .map(|t| (0..20_000).map(|n| (n * 31 + t) % 20_011).collect())
            .collect();
        pool.scope(|_| {
            tables
                .par_iter_mut()
                .for_each(|table| table.par_sort_unstable())
        });
        pool.shutdown().unwrap();
        tables
    });
    assert!(sorted.iter().all(|t| t.windows(2).all(|w| w[0] <= w[1])));
}

#[test]
fn work_spreads_over_the_pools_workers() {
    // Items that block: the pool's other workers take halves while the
    // first one sleeps (or the monitor hands its slot on).
    let threads = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .thread_name("iter-spread")
            .build()
            .unwrap();
        let seen = Mutex::new(HashSet::new());
        pool.scope(|_| {
            (0..200u32).into_par_iter().with_max_len(1).for_each(|_| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                seen.lock().unwrap().insert(name);
                std::thread::sleep(std::time::Duration::from_millis(1));
            });
        });
        pool.shutdown().unwrap();
        seen.into_inner().unwrap()
    });
    assert!(threads.len() >= 2, "one thread did everything: {threads:?}");
}

#[test]
fn a_large_sort_is_sorted_and_stable() {
    // Pairs (key, position) with many equal keys.
    let len = 1_000_000usize;
    let mut pairs: Vec<(u32, usize)> = (0..len)
        .map(|i| (((i as u64 * 2_654_435_761) % 1_000) as u32, i))
        .collect();
    pairs.par_sort_by_key(|p| p.0);
    assert!(pairs
        .windows(2)
        .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
    assert_eq!(pairs.len(), len);

    let mut values: Vec<u64> = (0..len as u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let mut want = values.clone();
    want.sort_unstable();
    values.par_sort_unstable();
    assert_eq!(values, want);
}
