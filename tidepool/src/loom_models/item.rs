//! Loom models of a work item's cell (`runtime::item`): its three owners
//! (the runnable a worker runs or drops, the handle, the spawner's free
//! ring) racing each other.
//!
//! * The closure runs once or is dropped unrun once, the output is dropped
//!   once (by whoever ends up with it), and the cell is freed exactly once
//!   (`loom::alloc::Track` in the cell fails a model that leaks it), in
//!   every order of the run, the handle's drop and the ring's.
//! * A handle that waits as the item finishes is woken, or sees the output
//!   at once: never a lost wake-up, never the output twice.
//! * A handle waiting on an item dropped unrun resolves to "no output".

use crate::runtime::item::{self, ItemHandle};
use crate::runtime::task::TaskMeta;
use crate::sync::counting::waker as counting_waker;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Counts its drops (plain `std` atomics: read after the threads joined).
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An item whose closure captures a `Tracked` (counted in `closures`) and
/// returns one (counted in `outputs`).
fn tracked_item(
    closures: &Arc<AtomicUsize>,
    outputs: &Arc<AtomicUsize>,
) -> (item::ItemRunnable, ItemHandle<Tracked>, item::ItemKept) {
    let captured = Tracked(Arc::clone(closures));
    let outputs = Arc::clone(outputs);
    item::spawn(TaskMeta::for_tests(true), move || {
        drop(captured);
        Tracked(outputs)
    })
}

#[test]
fn every_owner_may_go_last_and_each_value_is_dropped_once() {
    loom::model(|| {
        let (closures, outputs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (runnable, handle, kept) = tracked_item(&closures, &outputs);
        let worker = loom::thread::spawn(move || runnable.run());
        let ring = loom::thread::spawn(move || drop(kept));
        drop(handle);
        worker.join().unwrap();
        ring.join().unwrap();
        assert_eq!(closures.load(Ordering::SeqCst), 1, "the closure ran once");
        assert_eq!(outputs.load(Ordering::SeqCst), 1, "its output dropped once");
    });
}

#[test]
fn a_handle_that_waits_as_the_item_finishes_gets_the_output_once() {
    loom::model(|| {
        let (closures, outputs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (runnable, mut handle, kept) = tracked_item(&closures, &outputs);
        let worker = loom::thread::spawn(move || runnable.run());
        let ring = loom::thread::spawn(move || drop(kept));
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let first = handle.poll_output(&mut cx);
        worker.join().unwrap();
        ring.join().unwrap();
        let output = match first {
            Poll::Ready(output) => {
                assert_eq!(wakes.get(), 0, "not woken for an output it had");
                output
            }
            Poll::Pending => {
                assert_eq!(wakes.get(), 1, "a waiting handle is woken");
                match handle.poll_output(&mut cx) {
                    Poll::Ready(output) => output,
                    Poll::Pending => panic!("woken, yet not finished"),
                }
            }
        };
        assert!(matches!(output, Some(Ok(_))), "the closure's output");
        assert_eq!(outputs.load(Ordering::SeqCst), 0, "not dropped by the cell");
        drop(output);
        drop(handle);
        assert_eq!(closures.load(Ordering::SeqCst), 1);
        assert_eq!(outputs.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_handle_waiting_on_an_item_dropped_unrun_sees_no_output() {
    loom::model(|| {
        let (closures, outputs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (runnable, mut handle, kept) = tracked_item(&closures, &outputs);
        // A stopping pool drops what it finds queued.
        let drainer = loom::thread::spawn(move || drop(runnable));
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let first = handle.poll_output(&mut cx);
        drop(kept);
        drainer.join().unwrap();
        let output = match first {
            Poll::Ready(output) => output,
            Poll::Pending => {
                assert_eq!(wakes.get(), 1, "a waiting handle is woken");
                match handle.poll_output(&mut cx) {
                    Poll::Ready(output) => output,
                    Poll::Pending => panic!("woken, yet not finished"),
                }
            }
        };
        assert!(output.is_none(), "dropped unrun: no output");
        drop(handle);
        assert_eq!(
            closures.load(Ordering::SeqCst),
            1,
            "the closure dropped once"
        );
        assert_eq!(outputs.load(Ordering::SeqCst), 0, "it never ran");
    });
}

/// A detached item (`Pool::execute`) is born without the handle's
/// reference: its two owners, the runnable (run, or dropped unrun by a
/// stopping pool) and the free ring, may each go last, and the closure is
/// dropped once, the output (none) never looked for, the cell freed once.
#[test]
fn a_detached_items_two_owners_may_each_go_last() {
    loom::model(|| {
        for run in [true, false] {
            let closures = Arc::new(AtomicUsize::new(0));
            let captured = Tracked(Arc::clone(&closures));
            let (runnable, kept) =
                item::spawn_detached(TaskMeta::for_tests(true), move || drop(captured));
            let worker = loom::thread::spawn(move || {
                if run {
                    runnable.run();
                } else {
                    drop(runnable);
                }
            });
            drop(kept);
            worker.join().unwrap();
            assert_eq!(
                closures.load(Ordering::SeqCst),
                1,
                "the closure dropped once"
            );
        }
    });
}
