//! Fork-join: `join` and `scope` that borrow, joins that help instead of
//! blocking, and spawns that stay in their pool.

mod common;

use common::{eventually, within, HANG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidepool::{Controller, Pool};

/// Recursive Fibonacci with `spawn_fn` + `join` at every level.
fn fib_spawned(pool: &Pool, n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let p = pool.clone();
    let left = pool.spawn_fn(move || fib_spawned(&p, n - 1));
    let right = fib_spawned(pool, n - 2);
    left.join().unwrap() + right
}

fn fib_joined(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (a, b) = tidepool::join(|| fib_joined(n - 1), || fib_joined(n - 2));
    a + b
}

fn fib(n: u32) -> u64 {
    (0..n).fold((0u64, 1u64), |(a, b), _| (b, a + b)).0
}

#[test]
fn a_deep_recursion_of_blocking_joins_completes_within_max_threads() {
    // Depth 22 of spawn + blocking join, on 2 slots and at most 4 threads:
    // a join that blocked its thread needed a thread per pending join and
    // hung at max_threads; a helping join needs none.
    let (value, peak) = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .max_threads(4)
            .build()
            .unwrap();
        let p = pool.clone();
        let value = pool.spawn_fn(move || fib_spawned(&p, 22)).join().unwrap();
        (value, pool.metrics().peak_threads)
    });
    assert_eq!(value, fib(22));
    assert!(peak <= 4, "{peak} threads");
}

#[test]
fn waits_that_cannot_help_do_not_teach_the_pool_that_the_kind_blocks() {
    // A small stack: past half of it a join blocks, declared, instead of
    // helping. Taught as blocking, the recursion's closure kind would be
    // handed a thread per spawn (each then waiting on queued children), so
    // the second run would presume its items blocking.
    let m = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        for _ in 0..2 {
            let p = pool.clone();
            let value = pool.spawn_fn(move || fib_spawned(&p, 22)).join().unwrap();
            assert_eq!(value, fib(22));
        }
        pool.metrics()
    });
    assert!(
        m.declared_blocking > 0,
        "no wait blocked, nothing tested: {m:?}"
    );
    assert_eq!(m.presumed_blocking, 0, "{m:?}");
}

/// [`fib_spawned`] whose first leaf in a spawned task (while `TEACH` is
/// set) declares a block (until the monitor hands it over), teaching the pool that the recursion's
/// closure kind blocks. `spawned`: this call runs in a task the recursion
/// spawned (the root runs in a closure of another kind).
fn fib_taught(pool: &Pool, n: u32, spawned: bool) -> u64 {
    static TEACH: AtomicBool = AtomicBool::new(true);
    if n < 2 {
        if spawned && TEACH.swap(false, Ordering::Relaxed) {
            // Declared, and long enough to outlast the section's grace
            // (handed over at the monitor's second look).
            let pool = pool.clone();
            tidepool::blocking(move || {
                while pool.metrics().declared_blocking == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
        return u64::from(n);
    }
    let p = pool.clone();
    let left = pool.spawn_fn(move || fib_taught(&p, n - 1, true));
    let right = fib_taught(pool, n - 2, spawned);
    left.join().unwrap() + right
}

#[test]
fn a_recursion_whose_kind_blocked_once_is_not_given_a_thread_per_spawn() {
    // One leaf declares a block, so the recursion's closure kind is known
    // to block; but its tasks join, and a task presumed blocking holds no
    // slot to help with. Presumed, every spawn got a thread waiting on
    // queued children, up to max_threads, and the recursion hung.
    let (value, m) = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let mut value = 0;
        for _ in 0..3 {
            let p = pool.clone();
            value = pool
                .spawn_fn(move || fib_taught(&p, 20, false))
                .join()
                .unwrap();
        }
        (value, pool.metrics())
    });
    assert_eq!(value, fib(20));
    assert!(m.declared_blocking > 0, "nothing was taught: {m:?}");
    // Tasks spawned between the block and the kind's first join may be
    // presumed: a few, never one per spawn (fib(20) spawns 10,945 a run).
    assert!(m.presumed_blocking < 200, "{m:?}");
    assert!(m.peak_threads < 64, "{m:?}");
}

#[test]
fn join_recursion_runs_on_a_fixed_pool_without_extra_threads() {
    let (value, metrics) = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .controller(Controller::Fixed)
            .build()
            .unwrap();
        let value = pool.join(|| fib_joined(24), || fib_joined(23));
        (value.0 + value.1, pool.metrics())
    });
    assert_eq!(value, fib(25));
    assert!(metrics.peak_threads <= 2, "{metrics:?}");
}

/// Splits `depth` times with `tidepool::join`, then computes for `leaf`
/// in each leaf, counting the leaves in progress at once in `inside` and
/// the most seen in `most`.
fn split_and_compute(depth: u32, leaf: Duration, inside: &AtomicUsize, most: &AtomicUsize) {
    if depth == 0 {
        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        let start = std::time::Instant::now();
        while start.elapsed() < leaf {
            std::hint::spin_loop();
        }
        inside.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    tidepool::join(
        || split_and_compute(depth - 1, leaf, inside, most),
        || split_and_compute(depth - 1, leaf, inside, most),
    );
}

/// The quantum rule lends a slot beyond `concurrency` to queued work not
/// known to compute. A recursion's queued halves were work of no kind,
/// never known to compute, so a lent slot took them: a recursion that
/// computed for a few quanta on `concurrency(1)` ran two leaves at once
/// (on two cores). A half is now of the kind of the work that forked it,
/// which the monitor sees compute.
#[test]
fn a_computing_recursion_runs_no_more_leaves_at_once_than_its_slots() {
    let (most, metrics) = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .quantum(Some(Duration::from_millis(5)))
            .build()
            .unwrap();
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        // 2,048 leaves of 200 µs: about 0.4 s of computing, 80 quanta.
        pool.join(
            || split_and_compute(11, Duration::from_micros(200), &inside, &most),
            || (),
        );
        (most.load(Ordering::SeqCst), pool.metrics())
    });
    assert_eq!(
        most, 1,
        "leaves ran beside each other on one slot ({} quantum lends, {} oversubscribed observations)",
        metrics.quantum_lends, metrics.oversubscribed_observations
    );
}

/// Every scope task ran behind one future type, so every scope's tasks
/// were one kind: a scope whose tasks were seen blocking had the tasks of
/// every other scope presumed blocking too, each given a thread of its
/// own without a slot (a CPU-bound scope then ran on more threads than
/// cores). A scope task is now of its closure's kind.
#[test]
fn a_scope_whose_tasks_block_teaches_nothing_about_another_scopes_tasks() {
    let (before, after) = within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        // Seen blocked again and again: their kind is presumed blocking.
        for _ in 0..3 {
            pool.scope(|s| {
                for _ in 0..8 {
                    s.spawn(|_| std::thread::sleep(Duration::from_millis(20)));
                }
            });
        }
        let before = pool.metrics().presumed_blocking;
        let total = AtomicUsize::new(0);
        pool.scope(|s| {
            for _ in 0..64 {
                s.spawn(|_| {
                    total.fetch_add(
                        (0..20_000u64).map(std::hint::black_box).sum::<u64>() as usize,
                        Ordering::Relaxed,
                    );
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 64 * 199_990_000);
        (before, pool.metrics().presumed_blocking)
    });
    assert!(
        before > 0,
        "the sleeping scope's tasks were presumed blocking"
    );
    assert_eq!(
        after, before,
        "the computing scope's tasks were presumed blocking"
    );
}

/// A join's second halves are taken by an idle worker while the first
/// halves run: the innermost first half computes until the three second
/// halves (`mark`) pushed above it have run elsewhere, so the test fails
/// (the wait times out) if the parked worker is never woken or never
/// steals them. The marks are pushed onto a busy deque, which
/// `fork::job::push` does not announce. (It does not tell whether the
/// announcement or the monitor woke the worker: with announcements
/// removed it still passed, the monitor waking a parked worker for the
/// queued jobs.)
#[test]
fn a_joins_second_halves_run_on_an_idle_worker_while_the_first_halves_run() {
    let all_taken = within(HANG, || {
        let pool = Pool::builder()
            .concurrency(2)
            .controller(Controller::Fixed)
            .build()
            .unwrap();
        // Both workers parked first: a worker still searching after the
        // build would find the jobs without being woken.
        assert!(
            eventually(HANG, || {
                let m = pool.metrics();
                m.threads == 2 && m.idle_threads == 2
            }),
            "the pool's workers parked"
        );
        let taken = AtomicUsize::new(0);
        let mark = || {
            taken.fetch_add(1, Ordering::SeqCst);
        };
        let wait_for_three = || {
            // Computes (no sleep: the slot stays this worker's) until the
            // other worker has run the three second halves.
            let deadline = std::time::Instant::now() + HANG / 2;
            while taken.load(Ordering::SeqCst) < 3 {
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                std::hint::spin_loop();
            }
            true
        };
        pool.join(
            || {
                tidepool::join(
                    || tidepool::join(|| tidepool::join(wait_for_three, mark).0, mark).0,
                    mark,
                )
                .0
            },
            || (),
        )
        .0
    });
    assert!(all_taken, "the second halves waited for the first halves");
}

#[test]
fn join_and_scope_mutate_disjoint_halves_of_a_stack_vec() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let mut values: Vec<u32> = (0..1000).collect();
        {
            let (left, right) = values.split_at_mut(500);
            let (a, b) = pool.join(
                || {
                    left.iter_mut().for_each(|v| *v *= 2);
                    left.len()
                },
                || {
                    right.iter_mut().for_each(|v| *v += 1);
                    right.len()
                },
            );
            assert_eq!((a, b), (500, 500));
        }
        assert_eq!(values[499], 998);
        assert_eq!(values[500], 501);

        let mut chunks: Vec<Vec<u32>> = vec![vec![1; 10]; 8];
        pool.scope(|s| {
            for (i, chunk) in chunks.iter_mut().enumerate() {
                s.spawn(move |s| {
                    // Nested spawns borrow from outside the scope too.
                    let (head, tail) = chunk.split_at_mut(5);
                    s.spawn(move |_| head.iter_mut().for_each(|v| *v = i as u32));
                    tail.iter_mut().for_each(|v| *v = 100 + i as u32);
                });
            }
        });
        for (i, chunk) in chunks.iter().enumerate() {
            assert_eq!(chunk[..5], [i as u32; 5]);
            assert_eq!(chunk[5..], [100 + i as u32; 5]);
        }
    });
}

#[test]
fn a_panic_in_join_is_resumed_after_both_halves_finished() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let other_finished = AtomicBool::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.join(
                || panic!("left half"),
                || {
                    std::thread::sleep(Duration::from_millis(50));
                    other_finished.store(true, Ordering::SeqCst);
                },
            )
        }));
        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"left half"));
        assert!(
            other_finished.load(Ordering::SeqCst),
            "b ran to its end first"
        );
        // The pool still works.
        assert_eq!(pool.join(|| 1, || 2), (1, 2));
    });
}

#[test]
fn a_panic_in_a_scope_task_is_resumed_after_every_task_finished() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let finished = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.scope(|s| {
                for i in 0..16 {
                    let finished = &finished;
                    s.spawn(move |_| {
                        if i == 3 {
                            panic!("task 3");
                        }
                        std::thread::sleep(Duration::from_millis(5));
                        finished.fetch_add(1, Ordering::SeqCst);
                    });
                }
            })
        }));
        assert_eq!(caught.unwrap_err().downcast_ref::<&str>(), Some(&"task 3"));
        assert_eq!(finished.load(Ordering::SeqCst), 15);
    });
}

#[test]
fn spawns_inside_a_pools_task_stay_in_that_pool() {
    within(HANG, || {
        let pool = Pool::builder().thread_name("own").build().unwrap();
        let names = pool
            .spawn_fn(|| {
                let spawned =
                    tidepool::spawn_fn(|| std::thread::current().name().map(String::from));
                let awaited =
                    tidepool::spawn(async { std::thread::current().name().map(String::from) });
                let (joined, _) =
                    tidepool::join(|| std::thread::current().name().map(String::from), || ());
                let current = Pool::current().map(|p| p.concurrency());
                (
                    spawned.join().unwrap(),
                    awaited.join().unwrap(),
                    joined,
                    current,
                )
            })
            .join()
            .unwrap();
        for name in [&names.0, &names.1, &names.2] {
            assert!(name.as_deref().unwrap().starts_with("own-"), "{names:?}");
        }
        assert_eq!(names.3, Some(pool.concurrency()));
        assert!(Pool::current().is_none(), "no pool outside");
    });
}

#[test]
fn block_on_from_outside_spawns_into_its_pool() {
    within(HANG, || {
        let pool = Pool::builder().thread_name("entered").build().unwrap();
        let name = pool.block_on(async {
            tidepool::spawn_fn(|| std::thread::current().name().map(String::from))
                .await
                .unwrap()
        });
        assert!(name.unwrap().starts_with("entered-"));
    });
}

#[test]
fn join_from_outside_runs_both_closures_on_the_pool() {
    within(HANG, || {
        let pool = Pool::builder().thread_name("outside").build().unwrap();
        let name = || std::thread::current().name().map(String::from).unwrap();
        let (a, b) = pool.join(name, name);
        assert!(
            a.starts_with("outside-") && b.starts_with("outside-"),
            "{a} {b}"
        );
    });
}

#[test]
fn join_on_a_shut_down_pool_runs_on_the_caller() {
    within(HANG, || {
        let pool = Pool::builder().build().unwrap();
        pool.shutdown().unwrap();
        let mut hits = [0; 2];
        let (left, right) = hits.split_at_mut(1);
        pool.join(|| left[0] += 1, || right[0] += 1);
        assert_eq!(hits, [1, 1]);
    });
}

#[test]
fn a_helped_task_of_a_group_never_runs_beside_another_of_the_group() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let group = pool.group().max_concurrency(1).build().unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let overlap = Arc::new(AtomicBool::new(false));
        let item = {
            let (running, overlap) = (running.clone(), overlap.clone());
            move || {
                if running.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlap.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(2));
                running.fetch_sub(1, Ordering::SeqCst);
            }
        };
        let handles: Vec<_> = (0..20).map(|_| group.spawn_fn(item.clone())).collect();
        // Plain tasks join the group's items: their waits help, and may run
        // admitted group items, never two at once.
        let joiners: Vec<_> = handles
            .into_iter()
            .map(|h| pool.spawn_fn(move || h.join().unwrap()))
            .collect();
        for j in joiners {
            j.join().unwrap();
        }
        assert!(
            !overlap.load(Ordering::SeqCst),
            "two group items ran at once"
        );
        assert_eq!(group.metrics().completed, 20);
    });
}

#[test]
fn parallel_loops_visit_every_item_once() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let mut values: Vec<u64> = (0..100_000).collect();
        let visits: Vec<AtomicUsize> = (0..50_000).map(|_| AtomicUsize::new(0)).collect();
        pool.spawn_fn(|| ()).join().unwrap();
        pool.scope(|_| {
            tidepool::for_each(&mut values, |v| *v += 1);
            tidepool::for_range(0..visits.len(), |i| {
                visits[i].fetch_add(1, Ordering::Relaxed);
            });
        });
        assert!(values.iter().enumerate().all(|(i, v)| *v == i as u64 + 1));
        assert!(visits.iter().all(|v| v.load(Ordering::Relaxed) == 1));
        // Empty inputs are fine.
        tidepool::for_each(&mut [] as &mut [u8], |_| unreachable!());
        tidepool::for_range(5..5, |_| unreachable!());
    });
}

/// Completion counting under stress: many scopes with nested spawns, racing
/// thieves and the owner's inline runs; every task runs exactly once and the
/// scope returns only after all of them.
#[test]
fn scope_completion_counting_holds_under_stress() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        for round in 0..200 {
            let runs: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
            let log = Mutex::new(Vec::new());
            pool.scope(|s| {
                for i in 0..8 {
                    let (runs, log) = (&runs, &log);
                    s.spawn(move |s| {
                        for j in 0..8 {
                            s.spawn(move |_| {
                                runs[i * 8 + j].fetch_add(1, Ordering::SeqCst);
                                if (i + j + round) % 7 == 0 {
                                    std::thread::yield_now();
                                }
                            });
                        }
                        log.lock().unwrap().push(i);
                    });
                }
            });
            // Read after the scope: a task still running would race here.
            assert!(
                runs.iter().all(|r| r.load(Ordering::SeqCst) == 1),
                "round {round}"
            );
            assert_eq!(log.lock().unwrap().len(), 8);
        }
    });
}
