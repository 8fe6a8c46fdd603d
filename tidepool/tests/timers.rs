//! `Timer`, `sleep` and `timeout` on tidepool's reactor: deadlines are
//! kept (never early), a new early timer is not held up by a later one the
//! reactor already sleeps for, a timer moved between tasks or reset wakes
//! the task that waits on it now, and intervals keep their period.

mod common;

use common::{within, HANG};
use futures_lite::future::poll_once;
use futures_lite::StreamExt;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tidepool::{Controller, Pool, Timer};

fn pool(concurrency: usize) -> Pool {
    Pool::builder()
        .concurrency(concurrency)
        .controller(Controller::Fixed)
        .build()
        .unwrap()
}

#[test]
fn many_timers_each_fire_at_or_after_their_deadline() {
    within(HANG, || {
        let pool = pool(2);
        let sleepers: Vec<_> = (0..200u64)
            .map(|i| {
                // Deadlines spread over 0-39 ms, in no particular order.
                let wait = Duration::from_micros((i * 7_919) % 40_000);
                pool.spawn(async move {
                    let due = Instant::now() + wait;
                    let fired = Timer::at(due).await;
                    (due, fired, Instant::now())
                })
            })
            .collect();
        for sleeper in sleepers {
            let (due, fired, woke) = sleeper.join().unwrap();
            assert_eq!(fired, due, "a timer resolves to its deadline");
            assert!(woke >= due, "woke {:?} early", due - woke);
        }
    });
}

#[test]
fn a_short_timer_is_not_held_up_by_a_long_one_the_reactor_sleeps_for() {
    within(HANG, || {
        let pool = pool(1);
        // The reactor's thread settles in its wait until this one ...
        let mut long = pool.spawn(tidepool::sleep(Duration::from_secs(3600)));
        std::thread::sleep(Duration::from_millis(50));
        // ... and must wake for this one (else this test hangs).
        let short = pool.spawn(tidepool::sleep(Duration::from_millis(5)));
        short.join().unwrap();
        // On a thread outside the pool too.
        tidepool::block_on(tidepool::sleep(Duration::from_millis(5)));
        assert!(long.cancel());
    });
}

#[test]
fn a_timer_first_polled_elsewhere_wakes_the_task_that_awaits_it_now() {
    within(HANG, || {
        let pool = pool(1);
        let mut timer = Timer::after(Duration::from_secs(3600));
        // Registered with this thread's waker, which nobody will poll after.
        assert!(tidepool::block_on(poll_once(&mut timer)).is_none());
        // Reset: still registered with that waker, now due soon.
        timer.set_after(Duration::from_millis(20));
        let moved = pool.spawn(timer);
        moved.join().unwrap();
    });
}

#[test]
fn resetting_a_waited_timer_moves_its_deadline_and_clearing_stops_it() {
    within(HANG, || {
        let mut timer = Timer::after(Duration::from_secs(3600));
        assert!(tidepool::block_on(poll_once(&mut timer)).is_none());
        let due = Instant::now() + Duration::from_millis(5);
        timer.set_at(due);
        assert_eq!(tidepool::block_on(&mut timer), due);
        assert!(!timer.will_fire(), "a one-shot timer fired");

        timer.set_after(Duration::from_millis(1));
        timer.clear();
        assert!(!timer.will_fire());
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            tidepool::block_on(poll_once(&mut timer)).is_none(),
            "a cleared timer does not fire"
        );
        assert!(tidepool::block_on(poll_once(Timer::after(Duration::MAX))).is_none());
        assert!(tidepool::block_on(poll_once(Timer::never())).is_none());
    });
}

#[test]
fn an_interval_yields_deadlines_one_period_apart() {
    within(HANG, || {
        let pool = pool(1);
        let start = Instant::now();
        let period = Duration::from_millis(3);
        let ticks: Vec<Instant> =
            pool.block_on(async move { Timer::interval_at(start, period).take(4).collect().await });
        let expected: Vec<Instant> = (0..4).map(|k| start + period * k).collect();
        assert_eq!(ticks, expected);
    });
}

#[test]
fn timers_fire_while_every_worker_runs_long_closures() {
    within(HANG, || {
        let pool = pool(2);
        let busy: Vec<_> = (0..8)
            .map(|_| {
                pool.spawn_fn(|| {
                    let end = Instant::now() + Duration::from_millis(100);
                    while Instant::now() < end {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let sleepers: Vec<_> = (0..50)
            .map(|_| pool.spawn(tidepool::sleep(Duration::from_millis(1))))
            .collect();
        for sleeper in sleepers {
            sleeper.join().unwrap();
        }
        for task in busy {
            task.join().unwrap();
        }
    });
}

/// Counts its polls and never completes.
struct CountPolls(Arc<AtomicUsize>);

impl std::future::Future for CountPolls {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Poll::Pending
    }
}

#[test]
fn a_timeout_that_did_not_fire_never_wakes_its_task_later() {
    within(HANG, || {
        let pool = pool(2);
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&polls);
        let mut task = pool.spawn(async move {
            // The inner future is pending once, so the timer registers;
            // then it completes and the timeout drops its timer.
            let inner = tidepool::timeout(Duration::from_millis(10), tidepool::yield_now());
            assert_eq!(inner.await, Ok(()));
            CountPolls(counted).await;
        });
        assert!(common::eventually(HANG, || polls.load(Ordering::SeqCst) == 1));
        // Past the dropped deadline: a timer left behind would wake the
        // task and poll it again.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        assert!(task.cancel());
    });
}
