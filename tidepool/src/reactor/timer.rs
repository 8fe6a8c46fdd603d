//! [`Timer`], the public type: a deadline in the reactor's timer list
//! (`timers`), registered at its first `Pending` poll and removed when it
//! fires, is reset or dropped.

use super::timers::TimerKey;
use super::Reactor;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A future (and a stream, for intervals) that completes at a deadline,
/// holding no thread while it waits: the deadline sits in tidepool's
/// reactor, which wakes the task when it is due. Resolves to the deadline
/// it was set for. On Unix it runs on tidepool's own reactor (the one
/// behind [`Async`](crate::Async)), where busy workers fire due timers
/// themselves between tasks; elsewhere it is
/// [async-io](https://docs.rs/async-io)'s `Timer`, with the same methods.
///
/// Timers are precise to the OS's timer slack (tens of microseconds on
/// Linux), not rounded to milliseconds. While every worker is busy, a due
/// timer fires at the next boundary between tasks where a worker looks, or
/// at the reactor thread's next check (within about a millisecond).
///
/// ```
/// use std::time::{Duration, Instant};
/// use tidepool::Timer;
///
/// let start = Instant::now();
/// let fired = tidepool::block_on(Timer::after(Duration::from_millis(5)));
/// assert!(fired >= start + Duration::from_millis(5));
///
/// // An interval is a stream of deadlines, one period apart.
/// use futures_lite::StreamExt;
/// let ticks: Vec<Instant> = tidepool::block_on(
///     Timer::interval(Duration::from_millis(1)).take(3).collect(),
/// );
/// assert_eq!(ticks[2] - ticks[0], Duration::from_millis(2));
/// ```
#[derive(Debug)]
pub struct Timer {
    /// The next deadline, if the timer will fire.
    when: Option<Instant>,
    /// Added to `when` after each firing (`Duration::MAX`: fires once).
    period: Duration,
    /// Where it is registered, and the waker it registered (to see without
    /// the lock whether a new poll brings a different task).
    registered: Option<(TimerKey, Waker)>,
}

impl Timer {
    /// A timer that never fires: for an optional timeout, e.g.
    /// `timeout.map_or_else(Timer::never, Timer::after)`.
    ///
    /// ```
    /// use tidepool::Timer;
    /// assert!(!Timer::never().will_fire());
    /// ```
    pub fn never() -> Timer {
        Timer {
            when: None,
            period: Duration::MAX,
            registered: None,
        }
    }

    /// A timer that fires once, `duration` from now (never, if that instant
    /// cannot be represented, e.g. `Duration::MAX`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::Timer;
    /// tidepool::block_on(Timer::after(Duration::from_millis(1)));
    /// assert!(!Timer::after(Duration::MAX).will_fire());
    /// ```
    pub fn after(duration: Duration) -> Timer {
        Instant::now()
            .checked_add(duration)
            .map_or_else(Timer::never, Timer::at)
    }

    /// A timer that fires once, at `instant` (at once if it has passed).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tidepool::Timer;
    /// let at = Instant::now() + Duration::from_millis(1);
    /// assert_eq!(tidepool::block_on(Timer::at(at)), at);
    /// ```
    pub fn at(instant: Instant) -> Timer {
        Timer::interval_at(instant, Duration::MAX)
    }

    /// A timer that fires every `period`, the first time one period from
    /// now. As a [`Stream`](futures_lite::Stream) it yields each deadline;
    /// awaited as a future it yields the next one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures_lite::StreamExt;
    /// use tidepool::Timer;
    /// let mut every_ms = Timer::interval(Duration::from_millis(1));
    /// let first = tidepool::block_on(every_ms.next()).unwrap();
    /// let second = tidepool::block_on(every_ms.next()).unwrap();
    /// assert_eq!(second - first, Duration::from_millis(1));
    /// ```
    pub fn interval(period: Duration) -> Timer {
        Instant::now()
            .checked_add(period)
            .map_or_else(Timer::never, |start| Timer::interval_at(start, period))
    }

    /// A timer that fires at `start`, then every `period`.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use futures_lite::StreamExt;
    /// use tidepool::Timer;
    /// let start = Instant::now();
    /// let mut ticks = Timer::interval_at(start, Duration::from_millis(2));
    /// assert_eq!(tidepool::block_on(ticks.next()), Some(start));
    /// ```
    pub fn interval_at(start: Instant, period: Duration) -> Timer {
        Timer {
            when: Some(start),
            period,
            registered: None,
        }
    }

    /// Whether the timer will fire again: false for [`never`](Self::never),
    /// for a deadline too far to represent, and for a one-shot timer that
    /// fired; true for an interval.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::Timer;
    /// let mut once = Timer::after(Duration::from_millis(1));
    /// assert!(once.will_fire());
    /// tidepool::block_on(&mut once);
    /// assert!(!once.will_fire());
    /// ```
    pub fn will_fire(&self) -> bool {
        self.when.is_some()
    }

    /// Makes it a one-shot timer due `duration` from now, replacing what
    /// it was set to. A task already waiting on it keeps waiting, for the
    /// new deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::Timer;
    /// let mut timer = Timer::never();
    /// timer.set_after(Duration::from_millis(1));
    /// assert!(timer.will_fire());
    /// tidepool::block_on(timer);
    /// ```
    pub fn set_after(&mut self, duration: Duration) {
        match Instant::now().checked_add(duration) {
            Some(instant) => self.set_at(instant),
            None => self.clear(),
        }
    }

    /// Makes it a one-shot timer due at `instant` (see
    /// [`set_after`](Self::set_after)).
    ///
    /// ```
    /// use std::time::Instant;
    /// use tidepool::Timer;
    /// let mut timer = Timer::never();
    /// let now = Instant::now();
    /// timer.set_at(now);
    /// assert_eq!(tidepool::block_on(timer), now);
    /// ```
    pub fn set_at(&mut self, instant: Instant) {
        self.set_interval_at(instant, Duration::MAX);
    }

    /// Makes it an interval of `period`, first due one period from now (see
    /// [`set_after`](Self::set_after)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::Timer;
    /// let mut timer = Timer::never();
    /// timer.set_interval(Duration::from_millis(1));
    /// assert!(timer.will_fire());
    /// ```
    pub fn set_interval(&mut self, period: Duration) {
        match Instant::now().checked_add(period) {
            Some(start) => self.set_interval_at(start, period),
            None => self.clear(),
        }
    }

    /// Makes it an interval of `period` first due at `start` (see
    /// [`set_after`](Self::set_after)).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tidepool::Timer;
    /// let mut timer = Timer::never();
    /// let start = Instant::now();
    /// timer.set_interval_at(start, Duration::from_secs(1));
    /// assert_eq!(tidepool::block_on(&mut timer), start);
    /// assert!(timer.will_fire(), "an interval fires again");
    /// ```
    pub fn set_interval_at(&mut self, start: Instant, period: Duration) {
        let waker = self.unregister();
        self.when = Some(start);
        self.period = period;
        // A task that waited on the old deadline waits on the new one.
        if let Some(waker) = waker {
            self.register(start, waker);
        }
    }

    /// Unsets it: it will not fire until set again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::Timer;
    /// let mut timer = Timer::after(Duration::from_millis(1));
    /// timer.clear();
    /// assert!(!timer.will_fire());
    /// ```
    pub fn clear(&mut self) {
        self.unregister();
        self.when = None;
    }

    /// Removes its registration, if any; returns the waker it held.
    fn unregister(&mut self) -> Option<Waker> {
        let (key, waker) = self.registered.take()?;
        reactor().timers.remove(key);
        Some(waker)
    }

    fn register(&mut self, when: Instant, waker: Waker) {
        let reactor = reactor();
        let (key, wake_thread) = reactor.timers.insert(when, waker.clone());
        if wake_thread {
            reactor.wake_thread();
        }
        self.registered = Some((key, waker));
    }
}

/// The reactor, which a pool's build starts; a timer used without any
/// pool starts it here.
#[inline]
fn reactor() -> &'static Reactor {
    match Reactor::started() {
        Some(reactor) => reactor,
        None => start_reactor(),
    }
}

#[cold]
fn start_reactor() -> &'static Reactor {
    match Reactor::get() {
        Ok(reactor) => reactor.in_use(),
        Err(error) => panic!(
            "tidepool's reactor could not start its thread, so no timer can fire ({error}); \
             build a `tidepool::Pool` first to get this as an error, or raise the thread \
             limit (`ulimit -u`)"
        ),
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl Future for Timer {
    type Output = Instant;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Instant> {
        match futures_lite::Stream::poll_next(self, cx) {
            Poll::Ready(Some(when)) => Poll::Ready(when),
            // `poll_next` never ends the stream: a timer that will not
            // fire is pending for ever.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

impl futures_lite::Stream for Timer {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        let this = self.get_mut();
        let Some(when) = this.when else {
            return Poll::Pending;
        };
        if Instant::now() >= when {
            this.unregister();
            this.when = when.checked_add(this.period);
            if let Some(next) = this.when {
                this.register(next, cx.waker().clone());
            }
            return Poll::Ready(Some(when));
        }
        match &mut this.registered {
            None => this.register(when, cx.waker().clone()),
            Some((key, waker)) if !waker.will_wake(cx.waker()) => {
                waker.clone_from(cx.waker());
                if !reactor().timers.set_waker(*key, cx.waker()) {
                    // It fired (woke the old waker) since the clock read
                    // above: it is due, so the new task polls again now.
                    this.registered = None;
                    cx.waker().wake_by_ref();
                }
            }
            Some(_) => {}
        }
        Poll::Pending
    }
}
