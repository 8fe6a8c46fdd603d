//! Plain tasks and a throttled flood (issue 12): a plain task spawned after
//! a group's flood starts before the flood's queued items, and a stream of
//! plain tasks does not starve the group. Assertions are on start order and
//! counts; timeouts only catch hangs.

mod common;

use common::{eventually, within, HANG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use tidepool::{Controller, Pool};

/// One slot, exactly: `Fixed` so a holder waiting on a channel is not
/// replaced by another worker, and no quantum so no slot is lent.
fn one_slot_pool() -> Pool {
    Pool::builder()
        .concurrency(1)
        .controller(Controller::Fixed)
        .quantum(None)
        .build()
        .unwrap()
}

/// Who started, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Started {
    Flood(usize),
    Plain,
}

#[test]
fn a_plain_task_starts_before_the_queued_items_of_a_flood() {
    within(HANG, || {
        let pool = one_slot_pool();
        let group = pool.group().max_concurrency(4).build().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));

        // Hold the only slot until the flood and the plain task are queued.
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = pool.spawn_fn(move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        started_rx.recv().unwrap();

        let flood: Vec<_> = (0..50)
            .map(|i| {
                let order = Arc::clone(&order);
                group.spawn_fn(move || order.lock().unwrap().push(Started::Flood(i)))
            })
            .collect();
        // The gate admitted what its lane's budget allows: queued in the
        // pool, ahead of the plain task in time.
        assert!(eventually(HANG, || group.metrics().admitted > 0));
        let o = Arc::clone(&order);
        let plain = pool.spawn_fn(move || o.lock().unwrap().push(Started::Plain));

        // Flood items that started while the holder held the slot (none
        // with one fixed slot; counted so the assertion says what it means).
        let already_running = order.lock().unwrap().len();
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        plain.join().unwrap();
        for handle in flood {
            handle.join().unwrap();
        }

        let order = order.lock().unwrap();
        assert_eq!(order.len(), 51);
        let plain_at = order.iter().position(|s| *s == Started::Plain).unwrap();
        assert!(
            plain_at <= already_running,
            "the plain task started after {plain_at} flood items, \
             {already_running} of them running before it was spawned: {order:?}"
        );
    });
}

/// Spawns link `n` of a chain of plain tasks, each spawning the next from
/// its worker (so onto the worker's own deque): a stream that never leaves
/// the worker idle. The last link sets `done`.
fn chain(pool: Pool, n: usize, links: usize, done: Arc<AtomicBool>) {
    let next = pool.clone();
    // Dropped, so detached: the chain is awaited through `done`.
    drop(pool.spawn_fn(move || {
        std::hint::black_box((0..200u64).sum::<u64>());
        if n + 1 < links {
            chain(next, n + 1, links, done);
        } else {
            done.store(true, Ordering::SeqCst);
        }
    }));
}

#[test]
fn a_stream_of_plain_tasks_does_not_starve_a_group() {
    within(HANG, || {
        let pool = one_slot_pool();
        let group = pool.group().max_concurrency(4).build().unwrap();
        let stream_done = Arc::new(AtomicBool::new(false));
        let during_stream = Arc::new(AtomicUsize::new(0));

        // Hold the slot so the whole flood is spawned before the stream
        // starts, then start the stream from the worker itself.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let (pool, done) = (pool.clone(), Arc::clone(&stream_done));
            pool.clone().spawn_fn(move || {
                release_rx.recv().unwrap();
                chain(pool, 0, 2_000, done);
            })
        };
        let flood: Vec<_> = (0..20)
            .map(|_| {
                let (done, during) = (Arc::clone(&stream_done), Arc::clone(&during_stream));
                group.spawn_fn(move || {
                    if !done.load(Ordering::SeqCst) {
                        during.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        for handle in flood {
            handle.join().unwrap();
        }
        assert!(eventually(HANG, || stream_done.load(Ordering::SeqCst)));
        let during = during_stream.load(Ordering::SeqCst);
        assert!(
            during > 0,
            "no group item ran during a stream of 2,000 plain tasks"
        );
        let m = group.metrics();
        assert_eq!(m.completed, 20, "{m:?}");
    });
}
