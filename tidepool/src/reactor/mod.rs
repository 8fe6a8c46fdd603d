//! tidepool's own I/O reactor, behind [`Async`]: one per process, shared by
//! every pool.
//!
//! # Design
//!
//! * **Registered once, edge-triggered, readiness kept** (`source`). A
//!   socket is registered for both directions when it is wrapped and never
//!   re-armed; each event sets a readiness bit that the next read or write
//!   uses without asking the kernel again. A read is tried first only when
//!   the bit says it can succeed. async-io (which tidepool used before)
//!   registers one-shot, re-arms for every wait and tries every read
//!   first: 15.6 system calls per echo round trip against tokio's 5.2
//!   (docs/measurements.md, "Where async sockets lose time").
//! * **Polled by busy workers** (`handoff`). A thread of the reactor's own
//!   waits for events while the pool is quiet (an idle pool uses no CPU:
//!   the thread sleeps in `epoll_wait`); while workers are busy and events
//!   are dense, it steps aside and the workers poll between tasks; the
//!   tasks an event wakes queue at the back of their lanes
//!   ([`waking_from_poll`]).
//! * Built on [mio](https://docs.rs/mio) (epoll on Linux, kqueue on the
//!   BSDs and macOS) for the registration and the wait.
//!
//! * **Timers in the same reactor** (`timers`). [`Timer`] (and so
//!   [`sleep`](crate::sleep) and [`timeout`](crate::timeout)) registers its
//!   deadline here; whoever polls fires the due ones, so a busy worker
//!   wakes a timer's task on its own lane, as it does an I/O event's. The
//!   thread sleeps until the earliest deadline, on a timerfd on Linux (so
//!   deadlines keep microsecond precision; `epoll_wait`'s own timeout is in
//!   milliseconds). Timers used to be async-io's, on a second thread whose
//!   every new timer is a notification to it. Measured against that
//!   (docs/measurements.md, "Timers in tidepool's reactor"): timeouts in 4
//!   tasks on busy workers 6% faster, 1,000 tasks sleeping 1 ms at once 13%
//!   less CPU per sleep, a 1 ms sleep 9 µs less late; a lone task's
//!   timeout loop 5% slower (a mutex and a B-tree against async-io's
//!   lock-free queue of timer operations); and one thread fewer.
//!
//! # Layout
//!
//! * `source`: one descriptor's readiness and its waiting tasks.
//! * `timers`: the deadlines, and when the thread must be woken for one.
//! * `handoff`: who polls, the thread or the workers.
//! * `async_fd`: [`Async`], the public type, and its socket helpers.
//! * `timer`: [`Timer`], the public type.

mod async_fd;
pub(crate) mod handoff;
pub(crate) mod source;
mod timer;
pub(crate) mod timers;

pub use async_fd::Async;
pub use timer::Timer;

use crate::sync::lock_std;
use handoff::Handoff;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use slab::Slab;
use source::{Source, READ, READ_CLOSED, WRITE, WRITE_CLOSED};
use std::cell::Cell;
use std::io;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::task::Waker;
use std::time::{Duration, Instant};

/// The process's reactor, made by the first [`Async`].
static REACTOR: OnceLock<Reactor> = OnceLock::new();
/// Serialises making the reactor and starting its thread.
static START: Mutex<()> = Mutex::new(());

/// Events handled per `epoll_wait`.
const EVENTS: usize = 1024;

/// The token of the thread's wake-up (a new earliest timer). Sources get
/// slab keys, which never come near these two.
const WAKE_TOKEN: Token = Token(usize::MAX);
/// The token of the timerfd that ends the thread's wait at a deadline.
const DEADLINE_TOKEN: Token = Token(usize::MAX - 1);

/// While the thread is aside, a worker polls every this many tasks, and
/// whenever the pool's queues run dry. tokio's workers look at their
/// driver every 61 tasks. A first rule, polling whenever this worker's
/// deque ran dry, polled after nearly every task in the lab's `async-io`
/// (its tasks wait on the lanes, not on deques: `waking_from_poll`);
/// with this one, `epoll_wait` calls per round trip are near tokio's
/// (docs/measurements.md, "tidepool's own reactor").
const POLL_EVERY: u32 = 32;

/// The reactor (module docs).
pub(crate) struct Reactor {
    /// Registers and deregisters (a clone of the poll's registry, so
    /// registering never waits for a poll).
    registry: Registry,
    /// The wait itself: held by the thread while it sleeps in it, or by the
    /// one worker polling.
    poller: Mutex<Poller>,
    /// Every registered source, by token.
    sources: Mutex<Slab<Arc<Source>>>,
    /// Who polls.
    handoff: Handoff,
    /// The deadlines tasks wait for.
    timers: timers::Timers,
    /// Ends the thread's wait in the reactor early (a new earliest timer).
    wake: mio::Waker,
    /// A socket or a timer used the reactor: from then on workers count
    /// themselves awake and poll while the thread is aside. Until then a
    /// pool pays one load between tasks for the reactor a build started.
    used: AtomicBool,
    /// The reactor's thread, to call back from aside.
    thread: OnceLock<std::thread::Thread>,
}

/// What one poll needs.
struct Poller {
    poll: Poll,
    events: Events,
    /// Wakers collected under the sources lock, woken after it.
    wake: Vec<Waker>,
    /// Ends the thread's wait at a deadline.
    deadline: Deadline,
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("handoff", &self.handoff)
            .finish_non_exhaustive()
    }
}

impl Reactor {
    /// The reactor, made and its thread started on first use. Fails if the
    /// OS refuses the epoll instance or the thread.
    pub(crate) fn get() -> io::Result<&'static Reactor> {
        if let Some(reactor) = REACTOR.get() {
            if reactor.thread.get().is_some() {
                return Ok(reactor);
            }
        }
        let _start = lock_std(&START);
        let reactor = match REACTOR.get() {
            Some(reactor) => reactor,
            None => {
                let made = Reactor::new()?;
                REACTOR.get_or_init(|| made)
            }
        };
        if reactor.thread.get().is_none() {
            // Started after the reactor is in its static: the thread reads
            // it from there. A refused thread is retried by the next caller.
            let thread = std::thread::Builder::new()
                .name("tidepool-reactor".to_owned())
                .stack_size(128 * 1024)
                .spawn(|| {
                    crate::reactor_pacing::this_thread_drives_the_reactor();
                    if let Some(reactor) = REACTOR.get() {
                        reactor.drive();
                    }
                })?;
            let _ = reactor.thread.set(thread.thread().clone());
        }
        Ok(reactor)
    }

    /// A reactor without its thread (which [`get`](Self::get) starts).
    fn new() -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let wake = mio::Waker::new(&registry, WAKE_TOKEN)?;
        let deadline = Deadline::new(&registry);
        Ok(Reactor {
            registry,
            poller: Mutex::new(Poller {
                poll,
                events: Events::with_capacity(EVENTS),
                wake: Vec::new(),
                deadline,
            }),
            sources: Mutex::new(Slab::new()),
            handoff: Handoff::new(),
            timers: timers::Timers::new(),
            wake,
            used: AtomicBool::new(false),
            thread: OnceLock::new(),
        })
    }

    /// The reactor if it is made, its thread started and marked used: the
    /// fast path of every timer.
    #[inline]
    pub(crate) fn started() -> Option<&'static Reactor> {
        Reactor::if_started().filter(|reactor| reactor.thread.get().is_some())
    }

    /// The reactor if something used it already (no side effects).
    fn if_started() -> Option<&'static Reactor> {
        REACTOR
            .get()
            .filter(|reactor| reactor.used.load(Ordering::Relaxed))
    }

    /// Marks the reactor used (a socket or a timer): workers poll it from
    /// now on while its thread is aside.
    pub(crate) fn in_use(&self) -> &Self {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        self
    }

    /// Ends the thread's wait in the reactor (a timer due before it).
    fn wake_thread(&self) {
        // A failed write leaves the thread to its earlier deadline or its
        // next event; nothing better to do with the error here.
        let _ = self.wake.wake();
    }

    /// Registers `fd` for both directions, edge-triggered; returns its
    /// source and the key to [`deregister`](Self::deregister) it with.
    pub(crate) fn register(&self, fd: RawFd) -> io::Result<(usize, Arc<Source>)> {
        self.in_use();
        let source = Arc::new(Source::new());
        let key = lock_std(&self.sources).insert(Arc::clone(&source));
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .registry
            .register(&mut SourceFd(&fd), Token(key), interest)
        {
            lock_std(&self.sources).remove(key);
            return Err(explain_refused(fd, e));
        }
        Ok((key, source))
    }

    /// Deregisters `fd` (registered under `key`). Events for it still in a
    /// poll's hands find the key gone, or reused by a new source: a
    /// spurious readiness, which the new source's first attempt clears.
    pub(crate) fn deregister(&self, key: usize, fd: RawFd) -> io::Result<()> {
        let result = self.registry.deregister(&mut SourceFd(&fd));
        lock_std(&self.sources).try_remove(key);
        result
    }

    /// The reactor's thread: waits in the reactor, or stands aside while
    /// workers poll (`handoff`).
    fn drive(&self) {
        let mut last_turn: Option<Instant> = None;
        loop {
            let woken = {
                let mut poller = lock_std(&self.poller);
                let timeout = poller.deadline.wait_for(self.timers.thread_waits());
                let polled = poller.poll(timeout);
                self.timers.thread_woke();
                if polled {
                    self.wake_ready(&mut poller)
                } else {
                    Woken::default()
                }
            };
            let now = Instant::now();
            let turn = handoff::Turn {
                woke: woken.tasks,
                socket_events: woken.socket_events,
                since_last: last_turn.map(|at| now.duration_since(at)),
                // Workers busy: a task we woke was queued behind them.
                queued_behind_busy: crate::reactor_pacing::take_queued_behind_busy(),
            };
            last_turn = Some(now);
            if !crate::reactor_pacing::own_thread_steps_aside()
                || !handoff::steps_aside(&turn)
                || !self.handoff.step_aside()
            {
                continue;
            }
            loop {
                let polls = self.handoff.polls();
                std::thread::park_timeout(handoff::CHECK);
                // Due timers wait at most one check for a worker's poll.
                let mut due = Vec::new();
                self.timers.fire_due(Instant::now, &mut due);
                due.into_iter().for_each(Waker::wake);
                if !self.handoff.stay_aside(polls) {
                    break;
                }
            }
            last_turn = None;
        }
    }

    /// Wakes the tasks of the events the last poll found, and of the
    /// timers due now.
    fn wake_ready(&self, poller: &mut Poller) -> Woken {
        let Poller { events, wake, .. } = poller;
        let mut socket_events = 0;
        {
            let sources = lock_std(&self.sources);
            for event in events.iter() {
                let mut bits = 0;
                if event.is_readable() {
                    bits |= READ;
                }
                if event.is_writable() {
                    bits |= WRITE;
                }
                // Closed or in error: every later attempt ends at once
                // (with the end or the error), so these bits stay.
                if event.is_read_closed() || event.is_error() {
                    bits |= READ | READ_CLOSED;
                }
                if event.is_write_closed() || event.is_error() {
                    bits |= WRITE | WRITE_CLOSED;
                }
                // The thread's wake-up and deadline tokens find no source.
                if let Some(source) = sources.get(event.token().0) {
                    source.set_ready(bits, wake);
                    socket_events += 1;
                }
            }
        }
        self.timers.fire_due(Instant::now, wake);
        let woke = wake.len();
        WAKING_FROM_POLL.with(|flag| flag.set(true));
        for waker in wake.drain(..) {
            waker.wake();
        }
        WAKING_FROM_POLL.with(|flag| flag.set(false));
        Woken {
            tasks: woke,
            socket_events,
        }
    }
}

/// What one poll's events did ([`Reactor::wake_ready`]).
#[derive(Clone, Copy, Debug, Default)]
struct Woken {
    /// Wakers called (tasks of ready sockets and of due timers).
    tasks: usize,
    /// Events of registered sockets, whether or not a task waited on them.
    socket_events: usize,
}

thread_local! {
    /// Set while this thread wakes the tasks a poll found ready.
    static WAKING_FROM_POLL: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is waking tasks a reactor poll found ready.
/// The scheduler queues those at the back of their lane, not on the
/// worker's LIFO deque: a worker that polls between tasks would otherwise
/// push each poll's tasks on top of the last poll's, and under a steady
/// stream of events the oldest would wait until the stream paused (a
/// first version did this, and its p99 round trip in the lab's
/// `async-io` was several times tokio's; a check of three repetitions,
/// not a measured figure).
pub(crate) fn waking_from_poll() -> bool {
    WAKING_FROM_POLL.try_with(Cell::get).unwrap_or(false)
}

/// The OS's refusal to register `fd`, with what to do when the cause is
/// the kind of descriptor (epoll takes no regular file or directory: they
/// are always ready, and reading them blocks the thread either way).
fn explain_refused(fd: RawFd, error: io::Error) -> io::Error {
    if error.raw_os_error() != Some(libc::EPERM) {
        return error;
    }
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "descriptor {fd} cannot wait in the reactor ({error}): regular files and \
             directories are always ready; read them with blocking calls inside \
             `spawn_fn` (tidepool detects the block) instead of wrapping them in `Async`"
        ),
    )
}

/// A worker's part in polling (`handoff`): whether it counts as awake, and
/// how many tasks since it last polled. One per worker thread; dropped (or
/// [`sleep`](Self::sleep)) as it parks or exits.
#[derive(Debug, Default)]
pub(crate) struct WorkerPolls {
    counted: Cell<bool>,
    since_poll: Cell<u32>,
}

impl WorkerPolls {
    /// Between two tasks: counts the worker awake if the reactor exists,
    /// and polls if the thread is aside and either nothing is queued
    /// (`nothing_queued`) or the worker ran [`POLL_EVERY`] tasks since its
    /// last poll. Costs a worker that never used sockets one load.
    #[inline]
    pub(crate) fn between_tasks(&self, nothing_queued: impl FnOnce() -> bool) {
        let Some(reactor) = Reactor::if_started() else {
            return;
        };
        self.between_tasks_cold(reactor, nothing_queued);
    }

    fn between_tasks_cold(&self, reactor: &Reactor, nothing_queued: impl FnOnce() -> bool) {
        if !self.counted.replace(true) {
            reactor.handoff.worker_awake();
        }
        if !reactor.handoff.is_aside() {
            return;
        }
        let since = self.since_poll.get() + 1;
        if since < POLL_EVERY && !nothing_queued() {
            self.since_poll.set(since);
            return;
        }
        self.since_poll.set(0);
        poll_now(reactor);
    }

    /// Before parking: polls once if the thread is aside. Returns true if
    /// that woke tasks (the caller looks for work again instead).
    pub(crate) fn before_idle(&self) -> bool {
        match Reactor::if_started() {
            Some(reactor) if reactor.handoff.is_aside() => poll_now(reactor) > 0,
            _ => false,
        }
    }

    /// The worker parks (or exits): uncounts it, and calls the thread back
    /// if it was the last awake while the thread was aside.
    pub(crate) fn sleep(&self) {
        if !self.counted.replace(false) {
            return;
        }
        if let Some(reactor) = Reactor::if_started() {
            if reactor.handoff.worker_sleeps() {
                if let Some(thread) = reactor.thread.get() {
                    thread.unpark();
                }
            }
        }
    }
}

impl Drop for WorkerPolls {
    fn drop(&mut self) {
        self.sleep();
    }
}

/// Polls without waiting, unless another worker is polling (then it does
/// nothing: that one serves the events). Returns how many wakers it called.
fn poll_now(reactor: &Reactor) -> usize {
    let mut poller = match reactor.poller.try_lock() {
        Ok(poller) => poller,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return 0,
    };
    reactor.handoff.polled();
    if poller.poll(Some(Duration::ZERO)) {
        reactor.wake_ready(&mut poller).tasks
    } else {
        0
    }
}

impl Poller {
    /// One wait for events (`timeout`: `None` waits for one, zero does not
    /// wait). False if it failed: a signal or a transient failure, and the
    /// caller comes back.
    fn poll(&mut self, timeout: Option<Duration>) -> bool {
        self.poll.poll(&mut self.events, timeout).is_ok()
    }
}

/// Ends the reactor thread's wait at the earliest deadline: a timerfd on
/// Linux, armed only when the deadline changes (a timeout that is removed
/// before it fires costs the thread at most one spurious turn, no system
/// call); elsewhere, or if the timerfd was refused, `epoll_wait`'s own
/// timeout, rounded up to whole milliseconds by mio.
struct Deadline {
    #[cfg(target_os = "linux")]
    timer_fd: Option<std::os::fd::OwnedFd>,
    /// The deadline the timerfd is armed for.
    #[cfg(target_os = "linux")]
    armed: Option<Instant>,
}

impl Deadline {
    #[cfg(target_os = "linux")]
    fn new(registry: &Registry) -> Deadline {
        use std::os::fd::AsRawFd;
        let timer_fd = crate::sys::timer_fd().ok().filter(|fd| {
            registry
                .register(
                    &mut SourceFd(&fd.as_raw_fd()),
                    DEADLINE_TOKEN,
                    Interest::READABLE,
                )
                .is_ok()
        });
        Deadline {
            timer_fd,
            armed: None,
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn new(_registry: &Registry) -> Deadline {
        Deadline {}
    }

    /// The timeout for a wait that must end at `deadline` (or at an event).
    fn wait_for(&mut self, deadline: Option<Instant>) -> Option<Duration> {
        let deadline = deadline?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Some(Duration::ZERO);
        }
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.timer_fd {
            use std::os::fd::AsFd;
            if self.armed == Some(deadline) || crate::sys::arm_timer_fd(fd.as_fd(), left).is_ok() {
                self.armed = Some(deadline);
                return None;
            }
        }
        Some(left)
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::task::Context;

    /// A reactor of the test's own, without a thread (so nothing else
    /// polls it), with one socket of a pair registered and not yet ready.
    fn reactor_with_a_socket() -> (Reactor, Arc<Source>, UnixStream, UnixStream) {
        let reactor = Reactor::new().unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let (_key, source) = reactor.register(ours.as_raw_fd()).unwrap();
        // The registration's first event (writable), taken here and not
        // counted as a worker's poll.
        let mut poller = lock_std(&reactor.poller);
        poller.poll(Some(Duration::ZERO));
        reactor.wake_ready(&mut poller);
        drop(poller);
        (reactor, source, ours, theirs)
    }

    fn readable(source: &Source) -> bool {
        let waker = Waker::from(Arc::new(NoWake));
        source
            .poll_ready(source::Direction::Read, &mut Context::from_waker(&waker))
            .is_ready()
    }

    struct NoWake;
    impl std::task::Wake for NoWake {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn a_worker_polls_between_tasks_while_the_thread_is_aside() {
        let (reactor, source, _ours, mut theirs) = reactor_with_a_socket();
        let worker = WorkerPolls::default();
        theirs.write_all(b"x").unwrap();
        // The thread steps aside while this worker is awake.
        worker.between_tasks_cold(&reactor, || true);
        assert!(reactor.handoff.step_aside());
        assert!(!readable(&source), "nobody polled yet");
        // Nothing queued: the worker's next boundary polls.
        worker.between_tasks_cold(&reactor, || true);
        assert_eq!(reactor.handoff.polls(), 1);
        assert!(readable(&source), "the worker's poll saw the event");
        // Parking, the last awake worker takes the thread's place back.
        assert!(reactor.handoff.worker_sleeps());
        worker.counted.set(false);
    }

    #[test]
    fn a_busy_worker_polls_only_every_so_many_tasks() {
        let (reactor, source, _ours, mut theirs) = reactor_with_a_socket();
        let worker = WorkerPolls::default();
        worker.between_tasks_cold(&reactor, || false);
        assert!(reactor.handoff.step_aside());
        theirs.write_all(b"x").unwrap();
        // Work queued: the first POLL_EVERY - 1 boundaries do not poll.
        for _ in 0..POLL_EVERY - 1 {
            worker.between_tasks_cold(&reactor, || false);
        }
        assert_eq!(reactor.handoff.polls(), 0);
        assert!(!readable(&source));
        worker.between_tasks_cold(&reactor, || false);
        assert_eq!(reactor.handoff.polls(), 1);
        assert!(readable(&source));
        assert!(reactor.handoff.worker_sleeps());
        worker.counted.set(false);
    }

    #[test]
    fn with_the_thread_in_the_reactor_workers_do_not_poll() {
        let (reactor, _source, _ours, _theirs) = reactor_with_a_socket();
        let worker = WorkerPolls::default();
        for _ in 0..2 * POLL_EVERY {
            worker.between_tasks_cold(&reactor, || true);
        }
        assert_eq!(reactor.handoff.polls(), 0);
        assert!(!reactor.handoff.worker_sleeps(), "not aside: no call-back");
        worker.counted.set(false);
    }

    /// Records whether the scheduler would see `waking_from_poll` when
    /// the task is woken.
    struct SeesFlag(std::sync::Mutex<Option<bool>>);
    impl std::task::Wake for SeesFlag {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() = Some(waking_from_poll());
        }
    }

    #[test]
    fn a_turn_counts_socket_events_apart_from_the_tasks_they_woke_and_its_own_wake_up() {
        let (reactor, _source, _ours, mut theirs) = reactor_with_a_socket();
        let dense_turn = |woken: Woken| handoff::Turn {
            woke: woken.tasks,
            socket_events: woken.socket_events,
            since_last: Some(Duration::from_micros(50)),
            queued_behind_busy: false,
        };
        let turn = || {
            let mut poller = lock_std(&reactor.poller);
            poller.poll(Some(Duration::ZERO));
            reactor.wake_ready(&mut poller)
        };
        // Data on a socket nobody waits on: an event that woke nobody,
        // after which the thread steps aside.
        theirs.write_all(b"x").unwrap();
        let woken = turn();
        assert_eq!((woken.tasks, woken.socket_events), (0, 1));
        assert!(handoff::steps_aside(&dense_turn(woken)));
        // The thread's own wake-up is no socket's event: it stays.
        reactor.wake_thread();
        let woken = turn();
        assert_eq!((woken.tasks, woken.socket_events), (0, 0));
        assert!(!handoff::steps_aside(&dense_turn(woken)));
        // A task waiting on a second socket is woken by its event: the
        // thread stays unless that task queued behind busy workers.
        let (second, mut its_peer) = UnixStream::pair().unwrap();
        second.set_nonblocking(true).unwrap();
        let (_key, waited_on) = reactor.register(second.as_raw_fd()).unwrap();
        let _ = turn(); // the registration's writable event
        let waker = Waker::from(Arc::new(NoWake));
        let pending =
            waited_on.poll_ready(source::Direction::Read, &mut Context::from_waker(&waker));
        assert!(pending.is_pending());
        its_peer.write_all(b"y").unwrap();
        let woken = turn();
        assert_eq!((woken.tasks, woken.socket_events), (1, 1));
        assert!(!handoff::steps_aside(&dense_turn(woken)));
    }

    #[test]
    fn tasks_a_poll_wakes_are_marked_for_the_back_of_their_lane() {
        let (reactor, source, _ours, mut theirs) = reactor_with_a_socket();
        let seen = Arc::new(SeesFlag(std::sync::Mutex::new(None)));
        let waker = Waker::from(Arc::clone(&seen));
        let pending = source.poll_ready(source::Direction::Read, &mut Context::from_waker(&waker));
        assert!(pending.is_pending());
        theirs.write_all(b"x").unwrap();
        assert_eq!(poll_now(&reactor), 1);
        assert_eq!(*seen.0.lock().unwrap(), Some(true), "marked while woken");
        assert!(!waking_from_poll(), "and only then");
    }
}
