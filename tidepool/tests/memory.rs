//! Memory follows live work (issue #42): once a burst has finished, the
//! threads that spawned it hold at most a few MB each, whatever they
//! spawned, and what their free rings keep (`runtime::free_rings`)
//! goes when the pool goes idle or the thread spawns again.
//!
//! Measured in bytes held, with a counting global allocator: live bytes
//! are what the program allocated and has not freed, whatever the
//! allocator keeps in its own free lists (resident memory would also
//! count those, and every thread's stack). The tests of this binary run
//! one at a time (`ALONE`): the count is the whole process's.

mod common;

use common::{park_after, within, Parked, HANG};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use tidepool::Pool;

/// The system allocator, counting the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call goes to `System` with the caller's arguments; the
// count is a side effect that allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System::alloc`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        new
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes allocated and not freed, process-wide.
fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// One test at a time: the count is the process's.
static ALONE: Mutex<()> = Mutex::new(());

const MB: isize = 1 << 20;

/// Spawning threads in the bursts below.
const THREADS: usize = 16;
/// Spawns per thread.
const SPAWNS: usize = 65_536;

/// Waits until the bytes held beyond `baseline` fall to `bound` (or
/// `HANG` passes), and returns the last count: the assertion is on bytes,
/// the wait only lets the pool finish what it does when it goes idle.
fn held_after(baseline: isize, bound: isize) -> isize {
    let deadline = Instant::now() + HANG / 2;
    loop {
        let held = live() - baseline;
        if held <= bound || Instant::now() >= deadline {
            return held;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `THREADS` threads that each spawn `SPAWNS` small futures on `pool` in a
/// tight loop (a burst), each future counting itself in `done`, then park
/// (spawning nothing more); returns once every thread has spawned all.
fn bursts_of_small_futures(pool: &Pool, done: &Arc<AtomicUsize>) -> Parked {
    let spawned = Arc::new(Barrier::new(THREADS + 1));
    let parked = park_after(THREADS, {
        let (pool, done, spawned) = (pool.clone(), done.clone(), spawned.clone());
        move |_| {
            for _ in 0..SPAWNS {
                let done = done.clone();
                drop(pool.spawn(async move {
                    done.fetch_add(1, Ordering::Relaxed);
                }));
            }
            spawned.wait();
        }
    });
    spawned.wait();
    parked
}

/// Waits until `count` reaches `n`.
fn until(count: &AtomicUsize, n: usize) {
    while count.load(Ordering::Relaxed) < n {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The set-up of every test here: alone in the process (`ALONE`), bounded
/// by `HANG`, on a pool of two workers, warmed (its threads, queues and
/// thread-locals allocated before the test takes its baseline), and shut
/// down after.
fn alone_on_a_warm_pool(test: impl FnOnce(&Pool) + Send + 'static) {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    within(HANG, move || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        for _ in 0..64 {
            pool.spawn_fn(|| ()).join().unwrap();
            pool.spawn(async {}).join().unwrap();
        }
        test(&pool);
        pool.shutdown().unwrap();
    });
}

#[test]
fn small_futures_spawned_by_16_threads_are_let_go_once_the_pool_is_idle() {
    alone_on_a_warm_pool(|pool| {
        let baseline = live();
        let done = Arc::new(AtomicUsize::new(0));
        let parked = bursts_of_small_futures(pool, &done);
        until(&done, THREADS * SPAWNS);
        let finished = live() - baseline;
        // Nothing of the bursts is live: the pool went idle, and let go of
        // what every thread's ring kept of its tasks.
        let held = held_after(baseline, MB);
        std::thread::sleep(Duration::from_millis(20));
        println!(
            "{THREADS} threads x {SPAWNS} futures, parked: {} KiB held as the last ended, \
             {} KiB once the pool was idle ({} KiB 20 ms later)",
            finished >> 10,
            held >> 10,
            (live() - baseline) >> 10
        );
        assert!(
            held <= MB,
            "{} KiB still held after {THREADS} threads spawned {SPAWNS} futures each and parked",
            held >> 10
        );
        parked.release();
    });
}

#[test]
fn small_futures_kept_while_the_pool_stays_busy_are_bounded_per_thread() {
    alone_on_a_warm_pool(|pool| {
        // One worker computes until the end, so the pool never goes idle
        // and nothing lets go of the rings: what they keep is the cap's.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = pool.spawn_fn({
            let stop = stop.clone();
            move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        });
        let baseline = live();
        let done = Arc::new(AtomicUsize::new(0));
        let parked = bursts_of_small_futures(pool, &done);
        until(&done, THREADS * SPAWNS);
        // The cap: 4 MiB of cells and ring entries a thread.
        let per_thread = 4 * MB + MB / 4;
        let held = held_after(baseline, THREADS as isize * per_thread);
        println!(
            "{THREADS} threads x {SPAWNS} futures, parked, pool busy: {} KiB held ({} KiB a thread)",
            held >> 10,
            (held >> 10) / THREADS as isize
        );
        assert!(
            held <= THREADS as isize * per_thread,
            "{} KiB held by {THREADS} parked threads while the pool is busy",
            held >> 10
        );
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        parked.release();
    });
}

#[test]
fn small_closures_spawned_by_16_threads_hold_the_cap_then_go_when_spawning_resumes() {
    alone_on_a_warm_pool(|pool| {
        let baseline = live();
        let done = Arc::new(AtomicUsize::new(0));
        let spawned = Arc::new(Barrier::new(THREADS + 1));
        let idle = Arc::new(Barrier::new(THREADS + 1));
        let again = Arc::new(Barrier::new(THREADS + 1));
        // Parked after: alive until the count is read (a thread's exit
        // would free its ring).
        let threads = park_after(THREADS, {
            let (pool, done) = (pool.clone(), done.clone());
            let (spawned, idle, again) = (spawned.clone(), idle.clone(), again.clone());
            move |_| {
                for _ in 0..SPAWNS {
                    let done = done.clone();
                    pool.execute(move || {
                        done.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                }
                spawned.wait();
                idle.wait();
                // Back after a pause, out of the burst: a few dozen
                // spawns (each lets go of 2,048 finished items).
                for _ in 0..48 {
                    pool.spawn_fn(|| ()).join().unwrap();
                }
                again.wait();
            }
        });
        spawned.wait();
        until(&done, THREADS * SPAWNS);
        // A thread outside the pool cannot be called back: until it spawns
        // again, its ring holds at most its cap (4 MiB of cells, and the
        // ring's 512 KiB).
        let per_thread = 4 * MB + MB / 2;
        let parked = held_after(baseline, THREADS as isize * per_thread);
        // Let the pool go idle (its monitor then tells the rings).
        std::thread::sleep(Duration::from_millis(50));
        idle.wait();
        again.wait();
        let resumed = held_after(baseline, MB);
        println!(
            "{THREADS} threads x {SPAWNS} closures: {} KiB held while parked ({} KiB a thread), \
             {} KiB once they spawned again",
            parked >> 10,
            (parked >> 10) / THREADS as isize,
            resumed >> 10
        );
        assert!(
            parked <= THREADS as isize * per_thread,
            "{} KiB held by {THREADS} parked threads",
            parked >> 10
        );
        assert!(
            resumed <= MB,
            "{} KiB held after the threads spawned again",
            resumed >> 10
        );
        threads.release();
    });
}

#[test]
fn a_finished_burst_of_large_closures_leaves_little_held() {
    alone_on_a_warm_pool(|pool| {
        let baseline = live();
        const ITEMS: usize = 65_536;
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..ITEMS {
            let mut captured = [0u8; 8192];
            captured[i % 8192] = 1;
            let done = done.clone();
            pool.execute(move || {
                std::hint::black_box(&captured);
                done.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        until(&done, ITEMS);
        let held = held_after(baseline, MB);
        println!(
            "{ITEMS} closures of 8 KiB: {} KiB held once they finished",
            held >> 10
        );
        assert!(
            held <= MB,
            "{} KiB still held after {ITEMS} finished closures of 8 KiB",
            held >> 10
        );
    });
}
