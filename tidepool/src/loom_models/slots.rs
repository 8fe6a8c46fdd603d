//! Loom model of slot accounting (`control::slots`): a worker runs a task
//! while the monitor may mark it blocked and give its slot away, another
//! worker may take that slot, and the first takes a slot back or gives way.
//! Slots are never lost or duplicated.

use crate::control::slots::{count_worker_again, Slots, StatusWord, TaskStatus};
use loom::sync::Arc;

#[test]
fn blocked_slot_is_given_away_exactly_once() {
    loom::model(|| {
        let slots = Arc::new(Slots::new(1));
        let status = Arc::new(TaskStatus::default());
        // Worker A holds the only slot and starts task 1.
        assert!(slots.try_acquire(false));
        status.begin_task();

        let monitor = {
            let (slots, status) = (slots.clone(), status.clone());
            loom::thread::spawn(move || {
                let seen = status.load();
                if status.try_mark_blocked(seen) {
                    slots.release();
                    true
                } else {
                    false
                }
            })
        };
        let worker_b = {
            let slots = slots.clone();
            loom::thread::spawn(move || slots.try_acquire(false))
        };
        // Worker A finishes its task and takes a slot back if it lost it.
        let kept = status.end_task();
        let a_holds = kept || slots.try_acquire(false);

        let marked = monitor.join().unwrap();
        let b_holds = worker_b.join().unwrap();
        assert_eq!(marked, !kept, "the mark and the task end have one winner");
        let holders = usize::from(a_holds) + usize::from(b_holds);
        assert_eq!(slots.counts().active, holders, "slots match their holders");
        assert!(holders <= 1, "never more holders than slots");
    });
}

#[test]
fn retire_and_reacquire_keep_the_count() {
    loom::model(|| {
        let slots = Arc::new(Slots::new(2));
        assert!(slots.try_reserve_searcher()); // worker A searching
        assert!(slots.try_acquire(false)); // worker B running
        let a = {
            let slots = slots.clone();
            loom::thread::spawn(move || {
                // A finds nothing and parks (gives its slot and mark back).
                slots.release_searching();
            })
        };
        let b = {
            let slots = slots.clone();
            loom::thread::spawn(move || {
                // B declares blocking, then takes a slot back.
                slots.release();
                slots.try_acquire(false)
            })
        };
        a.join().unwrap();
        let b_back = b.join().unwrap();
        assert!(b_back, "a slot was free for B");
        let counts = slots.counts();
        assert_eq!(counts.active, 1);
        assert_eq!(counts.searching, 0);
    });
}

/// One slot; worker A ran a task with it, was found blocked and gave it
/// away, and worker B took it. Returns the slots, A's status and the word
/// A was seen blocked in.
fn a_slot_given_away_and_taken() -> (Arc<Slots>, Arc<TaskStatus>, StatusWord) {
    let slots = Arc::new(Slots::new(1));
    let status = Arc::new(TaskStatus::default());
    assert!(slots.try_acquire(false));
    status.begin_task();
    assert!(status.try_mark_blocked(status.load()));
    slots.release();
    assert!(slots.try_acquire(false));
    let blocked = status.load();
    (slots, status, blocked)
}

#[test]
fn a_worker_counted_again_as_its_task_ends_holds_exactly_one_slot_or_none() {
    loom::model(|| {
        // Worker A ran a task with the only slot; the monitor found it
        // blocked and gave the slot away; worker B took it.
        let (slots, status, blocked) = a_slot_given_away_and_taken();

        // The monitor sees A computing again and counts it (slot first,
        // then the word; the slot back if the word moved on).
        let monitor = {
            let (slots, status) = (slots.clone(), status.clone());
            loom::thread::spawn(move || count_worker_again(&slots, &status, blocked))
        };
        // A's task ends: it holds a slot if it was counted again.
        let a_holds = status.end_task();
        let counted = monitor.join().unwrap();
        assert_eq!(a_holds, counted, "the count and the task end agree");
        // B holds one; A holds one if counted: never lost, never doubled.
        assert_eq!(slots.counts().active, 1 + usize::from(a_holds));
        if a_holds {
            assert!(
                slots.over_target(),
                "over the target: someone gives one back"
            );
        }
    });
}

#[test]
fn a_worker_leaving_its_declared_section_and_the_monitor_count_it_again_once() {
    loom::model(|| {
        // A's slot was given away in its declared section, and B took it.
        let (slots, status, blocked) = a_slot_given_away_and_taken();

        // The monitor sees A computing again while A leaves its section
        // (`worker::declared::DeclaredSection`'s drop) and then ends its
        // task.
        let monitor = {
            let (slots, status) = (slots.clone(), status.clone());
            loom::thread::spawn(move || count_worker_again(&slots, &status, blocked))
        };
        let by_a = count_worker_again(&slots, &status, blocked);
        let a_holds = status.end_task();
        if a_holds {
            slots.release();
        }
        let by_monitor = monitor.join().unwrap();
        assert!(
            by_a || by_monitor,
            "A had not ended: one of the two counted it"
        );
        assert!(!(by_a && by_monitor), "counted once");
        assert!(a_holds, "A held the slot counted for it at its end");
        // B's slot is all that is left: none lost, none doubled.
        assert_eq!(slots.counts().active, 1);
    });
}
