//! Tasks spawned or woken from a thread-local destructor, while the thread's
//! own locals (tidepool's included) are being destroyed. Both once aborted
//! the process ("thread local panicked on drop"), hence a binary of their own.

mod common;

use common::{within, HANG};
use std::cell::RefCell;
use std::sync::{mpsc, Mutex};
use std::task::{Poll, Waker};
use tidepool::Pool;

/// Spawns a task on its pool when dropped; the task reports on `done`.
struct SpawnOnDrop {
    pool: Pool,
    done: mpsc::Sender<u32>,
}

impl Drop for SpawnOnDrop {
    fn drop(&mut self) {
        let done = self.done.clone();
        drop(self.pool.spawn_fn(move || done.send(42).unwrap()));
    }
}

/// Wakes a task when dropped.
struct WakeOnDrop(Option<Waker>);

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        if let Some(waker) = self.0.take() {
            waker.wake();
        }
    }
}

thread_local! {
    static SPAWN_AT_EXIT: RefCell<Option<SpawnOnDrop>> = const { RefCell::new(None) };
    static WAKE_AT_EXIT: RefCell<Option<WakeOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn a_task_spawned_by_an_exiting_threads_destructor_runs() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (done, ran) = mpsc::channel();
        let p = pool.clone();
        std::thread::spawn(move || {
            // Our local first, then tidepool's (spawning touches them), so
            // tidepool's are destroyed before ours runs its destructor.
            SPAWN_AT_EXIT.with(|s| {
                *s.borrow_mut() = Some(SpawnOnDrop {
                    pool: p.clone(),
                    done,
                })
            });
            p.spawn_fn(|| ()).join().unwrap();
        })
        .join()
        .unwrap();
        assert_eq!(ran.recv_timeout(HANG), Ok(42));
    });
}

#[test]
fn a_task_woken_by_an_exiting_threads_destructor_finishes() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let parked: &'static Mutex<Option<Waker>> = Box::leak(Box::new(Mutex::new(None)));
        let mut woken_once = false;
        let task = pool.spawn(std::future::poll_fn(move |cx| {
            if woken_once {
                return Poll::Ready(7);
            }
            woken_once = true;
            *parked.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }));
        let p = pool.clone();
        std::thread::spawn(move || {
            WAKE_AT_EXIT.with(|w| *w.borrow_mut() = Some(WakeOnDrop(None)));
            // Touch tidepool's locals after ours.
            p.spawn_fn(|| ()).join().unwrap();
            let waker = loop {
                if let Some(waker) = parked.lock().unwrap().take() {
                    break waker;
                }
                std::thread::yield_now();
            };
            WAKE_AT_EXIT.with(|w| w.borrow_mut().as_mut().unwrap().0 = Some(waker));
        })
        .join()
        .unwrap();
        assert_eq!(task.join().unwrap(), 7);
    });
}
