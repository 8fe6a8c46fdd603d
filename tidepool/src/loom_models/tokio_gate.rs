//! Loom model of the gate around the shared tokio runtime's workers
//! (`interop::gate`): a worker leaves (tokio parks it) while the watcher
//! takes its place or counts it again after a block, and a second worker
//! waits for a place. The count never goes below zero, ends at the places
//! still held, and a waiting worker always gets in once a place is free.

use crate::control::slots::TaskStatus;
use crate::interop::gate::Gate;
use loom::sync::Arc;

#[test]
fn a_place_taken_while_its_worker_parks_is_given_back_once() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(1));
        let first = Arc::new(TaskStatus::default());
        gate.enter(&first);

        let watcher = {
            let (gate, first) = (gate.clone(), first.clone());
            loom::thread::spawn(move || {
                let seen = first.load();
                gate.take(&first, seen)
            })
        };
        // A second worker wakes for work and waits for the place.
        let second = {
            let gate = gate.clone();
            loom::thread::spawn(move || {
                let status = TaskStatus::default();
                gate.enter(&status);
                gate.leave(&status);
            })
        };
        // The first parks.
        gate.leave(&first);

        watcher.join().unwrap();
        second.join().unwrap();
        assert_eq!(gate.counts(), (0, 0), "every place given back once");
    });
}

#[test]
fn a_worker_counted_again_as_it_parks_gives_its_place_back_once() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(1));
        let first = Arc::new(TaskStatus::default());
        gate.enter(&first);
        // Found blocked: its place is free.
        assert!(gate.take(&first, first.load()));
        let blocked = first.load();

        let watcher = {
            let (gate, first) = (gate.clone(), first.clone());
            loom::thread::spawn(move || gate.count_again(&first, blocked))
        };
        // Back from its block, it parks while the watcher counts it again.
        gate.leave(&first);

        watcher.join().unwrap();
        assert_eq!(
            gate.counts(),
            (0, 0),
            "counted again and given back, or neither"
        );
    });
}
