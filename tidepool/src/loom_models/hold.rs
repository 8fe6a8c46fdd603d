//! Loom model of holding a worker back from its block for a slot
//! (`runtime::hold`): the monitor asked worker A (whose slot went to B in
//! its block) to wait; B ends a task and hands A its slot while A's thread
//! waits, or gives up waiting and ends its task. The slot is counted
//! exactly once, never lost, and the waiter always ends. And the same
//! when A holds itself (its CPU timer fired: `Holds::hold_self`) while B
//! ends its task and, finding nobody held, gives its slot back as it
//! parks.

use crate::control::slots::{Slots, StatusWord, TaskStatus};
use crate::runtime::hold::{HeldSelf, HoldWord, Holds};
use loom::sync::Arc;

/// A's slot was given away in a block and B took it. Returns the slots,
/// A's status and hold word, the (empty) queue and A's blocked status.
fn a_blocked_while_b_holds_the_slot() -> (
    Arc<Slots>,
    Arc<(TaskStatus, HoldWord)>,
    Arc<Holds>,
    StatusWord,
) {
    let slots = Arc::new(Slots::new(1));
    let a = Arc::new((TaskStatus::default(), HoldWord::default()));
    assert!(slots.try_acquire(false));
    a.0.begin_task();
    assert!(a.0.try_mark_blocked(a.0.load()));
    slots.release();
    // B takes the slot.
    assert!(slots.try_acquire(false));
    let blocked: StatusWord = a.0.load();
    let holds = Arc::new(Holds::new(true, true, 4));
    (slots, a, holds, blocked)
}

/// As [`a_blocked_while_b_holds_the_slot`], and the monitor then asked A
/// to wait and queued it.
fn a_held_while_b_holds_the_slot() -> (Arc<Slots>, Arc<(TaskStatus, HoldWord)>, Arc<Holds>) {
    let (slots, a, holds, blocked) = a_blocked_while_b_holds_the_slot();
    assert!(a.1.ask(blocked.tick()));
    holds.push((0, blocked));
    (slots, a, holds)
}

/// B ends its task: hands its slot to A, or gives it back.
fn b_ends_its_task(slots: &Slots, a: &(TaskStatus, HoldWord), holds: &Holds) -> bool {
    let handed = holds.hand_slot(
        |_| &a.0,
        |_| {
            a.1.let_go();
        },
    );
    if !handed {
        slots.release();
    }
    handed
}

#[test]
fn a_slot_handed_to_a_held_worker_is_counted_once() {
    loom::model(|| {
        let (slots, a, holds) = a_held_while_b_holds_the_slot();
        let b = {
            let (slots, a, holds) = (slots.clone(), a.clone(), holds.clone());
            loom::thread::spawn(move || b_ends_its_task(&slots, &a, &holds))
        };
        // A's thread waits (patiently) until let go, then its task ends.
        a.1.wait(|_, _| {
            loom::thread::yield_now();
            true
        });
        let a_holds = a.0.end_task();
        if a_holds {
            slots.release();
        }
        let handed = b.join().unwrap();
        assert!(handed, "A waited until it had the slot");
        assert!(a_holds);
        assert_eq!(slots.counts().active, 0, "the one slot, given back once");
    });
}

#[test]
fn a_held_worker_that_stops_waiting_and_ends_leaves_the_slot_counted_once() {
    loom::model(|| {
        let (slots, a, holds) = a_held_while_b_holds_the_slot();
        let b = {
            let (slots, a, holds) = (slots.clone(), a.clone(), holds.clone());
            loom::thread::spawn(move || b_ends_its_task(&slots, &a, &holds))
        };
        // A's patience is over at once: it runs on and ends its task,
        // holding the slot only if B's hand-off came first.
        a.1.wait(|_, _| false);
        let a_holds = a.0.end_task();
        if a_holds {
            slots.release();
        }
        let handed = b.join().unwrap();
        assert_eq!(handed, a_holds, "the hand-off and the task end agree");
        assert_eq!(slots.counts().active, 0, "never lost, never doubled");
    });
}

#[test]
fn a_worker_that_holds_itself_is_never_left_waiting_beside_a_free_slot() {
    holds_itself_beside_a_worker_that_parks(false);
}

/// The same, with A back from a declared section
/// (`Holds::hold_after_section`, outside any handler: the queue's lock
/// is waited for, so it is never busy).
#[test]
fn a_worker_back_from_a_declared_section_is_never_left_waiting_beside_a_free_slot() {
    holds_itself_beside_a_worker_that_parks(true);
}

/// A, blocked, holds itself (its timer fired, or `section`: its declared
/// section returned) while B ends its task and parks.
fn holds_itself_beside_a_worker_that_parks(section: bool) {
    loom::model(move || {
        let (slots, a, holds, blocked) = a_blocked_while_b_holds_the_slot();
        let b = {
            let (slots, a, holds) = (slots.clone(), a.clone(), holds.clone());
            loom::thread::spawn(move || {
                // B ends its task: hands its slot on if A is queued, else
                // (later) parks, giving the slot back and looking at the
                // queue after the fence a parking worker passes
                // (`Slots::release_searching`, `Shared::look_at_held`).
                if !b_ends_its_task(&slots, &a, &holds) {
                    loom::sync::atomic::fence(loom::sync::atomic::Ordering::SeqCst);
                    holds.count_free(
                        &slots,
                        |_| &a.0,
                        |_| {
                            a.1.let_go();
                        },
                    );
                }
            })
        };
        // A's timer fired: it takes the slot if free, or holds itself and
        // waits until let go (a wait nobody ends would not finish).
        let did = loop {
            let let_go = |_| {
                a.1.let_go();
            };
            let did = if section {
                holds.hold_after_section(&slots, |_| &a.0, &a.1, (0, blocked), let_go)
            } else {
                holds.hold_self(&slots, |_| &a.0, &a.1, (0, blocked), let_go)
            };
            if did != HeldSelf::Busy {
                break did;
            }
            // The queue was taken: the handler re-arms the timer and comes
            // back.
            loom::thread::yield_now();
        };
        assert_ne!(did, HeldSelf::Not);
        if did == HeldSelf::Held {
            a.1.wait(|_, _| {
                loom::thread::yield_now();
                true
            });
        }
        b.join().unwrap();
        assert!(a.0.end_task(), "A ran on with the slot, counted");
        slots.release();
        assert_eq!(slots.counts().active, 0, "the one slot, counted once");
    });
}
