//! Loom models of the reactor's two protocols, on the real code:
//!
//! * `reactor::source`: a task that finds a socket not ready registers its
//!   waker and looks again; the reactor sets readiness and then collects
//!   wakers. No event is lost between the two (through the poll functions'
//!   entries or a future's own `Waiter`), nor between a failed attempt and
//!   the clear of the readiness it used; a `Waiter` dropped while the
//!   reactor collects wakers leaves no waker behind.
//! * `reactor::handoff`: the reactor's thread steps aside only while some
//!   worker is awake, and the last worker to park calls it back, so the
//!   reactor is never left with nobody to poll it.

use crate::reactor::handoff::Handoff;
use crate::reactor::source::{Direction, Source, READ, WRITE};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A task's waker that remembers being woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn flag() -> (std::sync::Arc<Flag>, Waker) {
    let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
    (flag.clone(), Waker::from(flag))
}

/// What the reactor does with one readable event.
fn reactor_event(source: &Source) {
    let mut wake = Vec::new();
    source.set_ready(READ, &mut wake);
    wake.into_iter().for_each(Waker::wake);
}

/// A task's first look at a source that is not ready, racing one
/// readable event: the task sees it or is woken by it. `look` polls the
/// source with the task's context, then calls `join_reactor` while its
/// wait is still registered, and says whether it saw the source ready.
fn first_look_races_an_event(
    look: fn(&Source, &mut Context<'_>, join_reactor: &mut dyn FnMut()) -> bool,
) {
    loom::model(move || {
        let source = Arc::new(Source::new());
        let mut reactor = Some({
            let source = source.clone();
            loom::thread::spawn(move || reactor_event(&source))
        });
        let (woken, waker) = flag();
        let mut join_reactor = || {
            if let Some(reactor) = reactor.take() {
                reactor.join().unwrap();
            }
        };
        let ready = look(&source, &mut Context::from_waker(&waker), &mut join_reactor);
        join_reactor();
        assert!(
            ready || woken.0.load(Ordering::SeqCst),
            "pending, and never woken"
        );
    });
}

#[test]
fn an_event_during_a_tasks_first_look_is_never_lost() {
    first_look_races_an_event(|source, cx, join_reactor| {
        let ready = source.poll_ready(Direction::Read, cx).is_ready();
        join_reactor();
        ready
    });
}

#[test]
fn an_event_during_a_waiters_first_look_is_never_lost() {
    // The same race through a future's own `Waiter` (its keyed entry),
    // which must still be waiting when the event comes.
    first_look_races_an_event(|source, cx, join_reactor| {
        let mut waiter = source.waiter(Direction::Read);
        let ready = waiter.poll_ready(cx).is_ready();
        join_reactor();
        ready
    });
}

#[test]
fn a_waiter_dropped_while_the_reactor_collects_leaves_no_waker_behind() {
    // A reader gives up while the reactor collects the wakers of a
    // write event on the same socket (the same lock). The event does not
    // take the reader's entry, so only the waiter's own drop can: if it
    // did not, the source would keep a clone of the waker.
    loom::model(|| {
        let source = Arc::new(Source::new());
        let (woken, waker) = flag();
        let mut waiter = source.waiter(Direction::Read);
        let pending = waiter
            .poll_ready(&mut Context::from_waker(&waker))
            .is_pending();
        assert!(pending, "no event yet");
        let reactor = {
            let source = source.clone();
            loom::thread::spawn(move || {
                let mut wake = Vec::new();
                source.set_ready(WRITE, &mut wake);
                wake.into_iter().for_each(Waker::wake);
            })
        };
        drop(waiter);
        reactor.join().unwrap();
        drop(waker);
        assert!(
            !woken.0.load(Ordering::SeqCst),
            "a write event wakes no reader"
        );
        assert_eq!(
            std::sync::Arc::strong_count(&woken),
            1,
            "the source keeps no waker"
        );
    });
}

#[test]
fn an_event_between_a_failed_attempt_and_its_clear_is_never_lost() {
    loom::model(|| {
        let source = Arc::new(Source::new());
        // The socket was readable; the task's attempt will find it drained.
        reactor_event(&source);
        let reactor = {
            let source = source.clone();
            // New data arrives: a new edge.
            loom::thread::spawn(move || reactor_event(&source))
        };
        let (woken, waker) = flag();
        let mut cx = Context::from_waker(&waker);
        let Poll::Ready(seen) = source.poll_ready(Direction::Read, &mut cx) else {
            panic!("readiness is kept")
        };
        // The attempt said `WouldBlock`.
        source.clear_ready(Direction::Read, seen);
        let ready = source.poll_ready(Direction::Read, &mut cx).is_ready();
        reactor.join().unwrap();
        assert!(
            ready || woken.0.load(Ordering::SeqCst),
            "the new edge was cleared away, and the task sleeps"
        );
    });
}

#[test]
fn the_reactor_is_never_left_aside_with_every_worker_parked() {
    loom::model(|| {
        let handoff = Arc::new(Handoff::new());
        handoff.worker_awake();
        handoff.worker_awake();
        let thread = {
            let handoff = handoff.clone();
            loom::thread::spawn(move || handoff.step_aside())
        };
        let other = {
            let handoff = handoff.clone();
            loom::thread::spawn(move || handoff.worker_sleeps())
        };
        let called_back_here = handoff.worker_sleeps();
        let called_back_there = other.join().unwrap();
        let stepped_aside = thread.join().unwrap();
        assert!(
            !stepped_aside || called_back_here || called_back_there,
            "aside, and no worker called it back"
        );
        assert!(
            !(called_back_here && called_back_there),
            "called back twice"
        );
        assert!(!handoff.is_aside(), "every worker is parked");
    });
}
