//! Loom model of `reactor::timers`: the reactor's thread, choosing how long
//! to sleep, races tasks registering timers; it never sleeps past one of
//! them (either its chosen deadline covers the timer, or the registration
//! tells the caller to wake it).

use crate::reactor::timers::Timers;
use crate::sync::counting;
use loom::sync::Arc;
use std::time::{Duration, Instant};

/// `registered`: deadlines registered before the race (from the model's
/// start); `racing`: deadlines registered by one thread each, racing the
/// reactor thread's `thread_waits`.
fn thread_never_sleeps_past_a_racing_timer(registered: &'static [u64], racing: &'static [u64]) {
    loom::model(move || {
        let timers = Arc::new(Timers::new());
        let start = Instant::now();
        let at = move |ms: u64| start + Duration::from_millis(ms);
        let (_count, waker) = counting::waker();
        for &ms in registered {
            timers.insert(at(ms), waker.clone());
        }
        let racers: Vec<_> = racing
            .iter()
            .map(|&ms| {
                let timers = Arc::clone(&timers);
                let waker = waker.clone();
                loom::thread::spawn(move || timers.insert(at(ms), waker).1)
            })
            .collect();
        let deadline = timers.thread_waits();
        let woken = racers
            .into_iter()
            .map(|racer| racer.join().unwrap())
            .fold(false, |any, woke| any || woke);
        let earliest = registered.iter().chain(racing).min().map(|&ms| at(ms));
        assert!(
            woken || deadline == earliest,
            "the thread sleeps until {deadline:?} with {earliest:?} registered and no wake"
        );
    });
}

#[test]
fn a_timer_registered_as_the_thread_sleeps_for_ever_wakes_it() {
    thread_never_sleeps_past_a_racing_timer(&[], &[5]);
}

#[test]
fn an_earlier_timer_registered_as_the_thread_sleeps_until_a_later_one_wakes_it() {
    thread_never_sleeps_past_a_racing_timer(&[10_000], &[5]);
}

#[test]
fn two_racing_timers_leave_the_thread_no_later_than_the_earliest() {
    thread_never_sleeps_past_a_racing_timer(&[10_000], &[7, 5]);
}
