//! The scheduler tells a reactor thread when the tasks it wakes queue
//! behind busy workers, and that thread then pauses now and then
//! (`src/reactor_pacing.rs`). Seen from outside: a thread named like
//! async-io's reactor thread that spawns a dense stream onto a pool whose
//! every slot is busy spends a pause inside some of its spawn calls (that
//! other threads never pause is checked by the module's unit tests).

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidepool::Pool;

/// The pause `reactor_pacing::PAUSE`: a spawn call that takes this long
/// slept in it.
const PAUSE: Duration = Duration::from_micros(200);

/// Spawns a task every ~50 µs for 5 ms from a thread named `name` onto a
/// one-slot pool whose slot a spinning task holds, and returns how many
/// spawn calls took at least [`PAUSE`].
fn slow_spawns_from(name: &str) -> usize {
    let name = name.to_owned();
    within(HANG, move || {
        // No quantum: the spinning task must keep the only slot.
        let pool = Pool::builder()
            .concurrency(1)
            .quantum(None)
            .build()
            .unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let spinning = Arc::new(AtomicBool::new(false));
        let holder = {
            let (release, spinning) = (release.clone(), spinning.clone());
            pool.spawn_fn(move || {
                spinning.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
            })
        };
        while !spinning.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let spawner = {
            let pool = pool.clone();
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let mut slow = 0;
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(5) {
                        let before = Instant::now();
                        drop(pool.spawn_fn(|| ()));
                        slow += usize::from(before.elapsed() >= PAUSE);
                        let next = Instant::now() + Duration::from_micros(50);
                        while Instant::now() < next {
                            std::hint::spin_loop();
                        }
                    }
                    slow
                })
                .unwrap()
        };
        let slow = spawner.join().unwrap();
        release.store(true, Ordering::SeqCst);
        holder.join().unwrap();
        slow
    })
}

#[test]
fn async_ios_reactor_thread_pauses_while_its_tasks_queue_behind_busy_workers() {
    // Dense spawns (50 µs apart) into a busy pool: about one pause per
    // 250 µs of the 5 ms; a few are enough to show it pauses.
    let slow = slow_spawns_from("async-io");
    assert!(slow >= 3, "{slow} spawn calls paused");
}
