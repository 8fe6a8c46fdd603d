//! The signal that stops a worker's thread where it is until a slot is
//! its own (`control::hold` decides, `runtime::hold` is the protocol).
//!
//! One real-time signal for the whole process, chosen when the first pool
//! that holds is built: the highest of `SIGRTMAX - 1` down to `SIGRTMIN +
//! 4` that has no handler (`SIG_DFL`), so a program's own real-time
//! signals (conventionally counted up from `SIGRTMIN`) are left alone.
//! None free, or off Linux: nothing is held, and the pool counts a worker
//! back from its block beyond the slots as before.
//!
//! The handler is installed with `SA_RESTART` (an interrupted `read`,
//! `write`, `accept` or `wait` resumes) and `SA_ONSTACK` (it runs on the
//! thread's alternate stack where std set one up, so a thread deep in its
//! stack is not pushed over its guard). The monitor only signals a thread
//! it saw computing, so the signal seldom lands in a system call at all;
//! the few calls Linux never restarts (`epoll_wait`, `nanosleep`, `poll`)
//! return `EINTR`, which their callers (std, mio, async-io) retry.
//!
//! The handler does only what a signal handler may: it reads a
//! thread-local pointer (a `const`-initialised cell without a destructor:
//! no lazy registration, no allocation), hands it to the runtime's wait
//! (atomics and a `futex` wait), and keeps `errno` as it found it. The
//! pointer is set by the worker thread itself after it took its entry and
//! cleared before it lets go of the pool ([`enter`], [`leave`]), so the
//! handler never reads an entry the pool has freed.
//!
//! Before each signal the monitor checks that the handler is still the
//! installed one ([`send`]): a program that installs its own handler for
//! the signal later simply stops threads from being held.
//!
//! The same signal comes from a worker's [`CpuTimer`] (a POSIX timer on the
//! thread's own CPU clock, delivered to that thread: `SIGEV_THREAD_ID`),
//! armed when the worker's slot is given away in a block; the handler
//! tells the two apart by the worker's hold word (`runtime::hold`).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// How long a held thread waits at most without being let go: a safety
/// bound under the monitor's own patience (`control::hold`), for a monitor
/// that stopped looking.
#[cfg(all(target_os = "linux", not(miri)))]
const LONGEST_WAIT: Duration = Duration::from_secs(1);

#[cfg(all(target_os = "linux", not(miri)))]
mod linux {
    use super::*;
    use std::cell::Cell;
    use std::sync::OnceLock;

    thread_local! {
        /// What the handler is called with on this thread (the worker's
        /// entry); null when it is no worker (or between entries).
        static HELD_AS: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    }

    /// The signal, once chosen and installed (`None`: none could be).
    static SIGNAL: OnceLock<Option<libc::c_int>> = OnceLock::new();

    /// What the handler calls with the thread's pointer (`runtime::hold`'s
    /// wait).
    static ON_HOLD: OnceLock<fn(*const ())> = OnceLock::new();

    pub(crate) fn install(on_hold: fn(*const ())) -> Option<libc::c_int> {
        let _ = ON_HOLD.set(on_hold);
        *SIGNAL.get_or_init(choose_and_install)
    }

    fn choose_and_install() -> Option<libc::c_int> {
        let (low, high) = (libc::SIGRTMIN() + 4, libc::SIGRTMAX() - 1);
        (low..=high)
            .rev()
            .find(|&signal| handler_of(signal) == Some(libc::SIG_DFL) && install_at(signal))
    }

    /// The installed disposition of `signal`, if it can be read.
    fn handler_of(signal: libc::c_int) -> Option<libc::sighandler_t> {
        // SAFETY: `sigaction(sig, NULL, old)` only writes `old`, a live,
        // zeroed (a valid bit pattern for this plain C struct) `sigaction`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            (libc::sigaction(signal, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
        }
    }

    fn install_at(signal: libc::c_int) -> bool {
        // SAFETY: (1) `action` is a zeroed `sigaction` (a valid bit
        // pattern), its mask emptied by `sigemptyset` before use; (2) the
        // handler is an `extern "C" fn(c_int)`, the type `sa_sigaction`
        // holds without `SA_SIGINFO`; (3) `sigaction` only reads `action`.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART | libc::SA_ONSTACK;
            libc::sigaction(signal, &action, std::ptr::null_mut()) == 0
        }
    }

    extern "C" fn on_signal(_signal: libc::c_int) {
        // SAFETY: `__errno_location` returns this thread's errno, valid
        // for the thread's life; read here and restored before returning,
        // so the interrupted code sees the errno it had.
        let errno = unsafe { *libc::__errno_location() };
        let held_as = HELD_AS.with(Cell::get);
        if !held_as.is_null() {
            if let Some(on_hold) = ON_HOLD.get() {
                on_hold(held_as);
            }
        }
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
    }

    pub(crate) fn enter(held_as: *const ()) {
        HELD_AS.with(|cell| cell.set(held_as));
        if let Some(Some(signal)) = SIGNAL.get() {
            // The thread inherited its creator's mask, which may block the
            // signal; a held thread must see it.
            // SAFETY: `set` is a live, zeroed `sigset_t` filled by
            // `sigemptyset`/`sigaddset`; `pthread_sigmask` reads it and
            // writes nothing (the old mask pointer is null).
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, *signal);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            }
        }
    }

    pub(crate) fn leave() {
        HELD_AS.with(|cell| cell.set(std::ptr::null()));
    }

    pub(crate) fn send(tid: i32) -> bool {
        let Some(Some(signal)) = SIGNAL.get() else {
            return false;
        };
        let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        if handler_of(*signal) != Some(ours) {
            return false;
        }
        // SAFETY: `tgkill(tgid, tid, sig)` takes three integers and touches
        // no memory of ours; the thread group is this process, so a tid
        // that is gone (or belongs to no thread of ours) fails with ESRCH.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                tid as libc::pid_t,
                *signal,
            )
        };
        rc == 0
    }

    /// A timer on one thread's CPU clock that sends that thread the hold
    /// signal: the id `timer_create` gave.
    #[derive(Debug)]
    pub(crate) struct CpuTimer(libc::timer_t);

    // SAFETY: a `timer_t` is a process-wide id (glibc hands the kernel's
    // timer id back as a pointer-sized value), not a pointer into memory
    // of ours: any thread may arm, disarm or delete it.
    unsafe impl Send for CpuTimer {}
    // SAFETY: as above; the timer calls take the id by value.
    unsafe impl Sync for CpuTimer {}

    impl CpuTimer {
        pub(crate) fn for_current_thread() -> Option<CpuTimer> {
            let Some(Some(signal)) = SIGNAL.get() else {
                return None;
            };
            // SAFETY: (1) `event` is a zeroed `sigevent` (a valid bit
            // pattern for this plain C struct) with its notification set
            // to this thread's id and the signal; (2) `timer_create` reads
            // `event` and writes the new id into `id`, a live local; (3)
            // `CLOCK_THREAD_CPUTIME_ID` is the calling thread's CPU clock,
            // so the timer counts this thread's CPU time only.
            unsafe {
                let mut event: libc::sigevent = std::mem::zeroed();
                event.sigev_notify = libc::SIGEV_THREAD_ID;
                event.sigev_signo = *signal;
                event.sigev_notify_thread_id = libc::gettid();
                let mut id: libc::timer_t = std::mem::zeroed();
                (libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut event, &mut id) == 0)
                    .then_some(CpuTimer(id))
            }
        }

        /// Sets the timer to fire once its thread has used `cpu` more CPU
        /// time (zero: never).
        pub(crate) fn set(&self, cpu: Duration) {
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: cpu.as_secs() as libc::time_t,
                    tv_nsec: cpu.subsec_nanos() as libc::c_long,
                },
            };
            // SAFETY: `timer_settime` reads `spec`, a live local, for the
            // timer this value owns (deleted only on drop); the old value's
            // pointer is null.
            unsafe {
                libc::timer_settime(self.0, 0, &spec, std::ptr::null_mut());
            }
        }
    }

    impl Drop for CpuTimer {
        fn drop(&mut self) {
            // SAFETY: the id came from `timer_create` and is deleted once,
            // here; nothing uses it after.
            unsafe {
                libc::timer_delete(self.0);
            }
        }
    }

    /// Sleeps while `word` holds `expected`, for at most `timeout` (or until
    /// woken, or a spurious return).
    pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
        let spec = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `futex(uaddr, FUTEX_WAIT_PRIVATE, val, timeout)` reads the
        // aligned `u32` at `uaddr` (an `AtomicU32` of ours, alive for the
        // call) and the `timespec`; it writes nothing.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                &spec as *const libc::timespec,
            );
        }
    }

    pub(crate) fn futex_wake(word: &AtomicU32) {
        // SAFETY: `futex(uaddr, FUTEX_WAKE_PRIVATE, n)` only uses `uaddr` as
        // a key; the word is alive for the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

/// Chooses and installs the process's hold signal (once); `on_hold` is what
/// the handler calls, with the pointer the thread gave [`enter`]. Returns
/// the signal, or `None` if none could be had (then nothing is held).
pub(crate) fn install(on_hold: fn(*const ())) -> Option<i32> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        linux::install(on_hold)
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = on_hold;
        None
    }
}

/// On a worker's thread, after it took its entry: the signal's handler
/// calls `on_hold` with `held_as` on this thread (and the signal is
/// unblocked here). The caller keeps what `held_as` points to alive until
/// it calls [`leave`] on this thread.
pub(crate) fn enter(held_as: *const ()) {
    #[cfg(all(target_os = "linux", not(miri)))]
    linux::enter(held_as);
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = held_as;
}

/// On a worker's thread, before it lets go of its pool: the handler does
/// nothing here any more.
pub(crate) fn leave() {
    #[cfg(all(target_os = "linux", not(miri)))]
    linux::leave();
}

/// Sends the hold signal to thread `tid` of this process. False if there
/// is no signal, another handler took it over, or the thread is gone.
pub(crate) fn send(tid: i32) -> bool {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        linux::send(tid)
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = tid;
        false
    }
}

/// A timer on a worker thread's own CPU clock that sends that thread the
/// hold signal once it has computed for a while: armed when the thread's
/// slot is given away in a block, it stops a thread back from its block
/// that computes on without a slot, without waiting for the monitor (which
/// shares the oversubscribed cores with it and may not run for tens of
/// milliseconds). `None` off Linux or without the signal.
#[derive(Debug)]
pub(crate) struct CpuTimer {
    #[cfg(all(target_os = "linux", not(miri)))]
    timer: linux::CpuTimer,
}

impl CpuTimer {
    /// A timer on the calling thread's CPU clock, signalling it.
    pub(crate) fn for_current_thread() -> Option<CpuTimer> {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            linux::CpuTimer::for_current_thread().map(|timer| CpuTimer { timer })
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        {
            None
        }
    }

    /// Fires once the thread has used `cpu` more CPU time.
    pub(crate) fn arm(&self, cpu: Duration) {
        #[cfg(all(target_os = "linux", not(miri)))]
        self.timer.set(cpu.max(Duration::from_nanos(1)));
        #[cfg(not(all(target_os = "linux", not(miri))))]
        let _ = cpu;
    }

    /// Never fires (until armed again).
    pub(crate) fn disarm(&self) {
        #[cfg(all(target_os = "linux", not(miri)))]
        self.timer.set(Duration::ZERO);
    }
}

/// For the handler: sleeps while `word` holds `expected`, until woken or
/// `deadline`; false once the deadline passed.
pub(crate) fn wait_until(word: &AtomicU32, expected: u32, deadline: std::time::Instant) -> bool {
    let now = std::time::Instant::now();
    if now >= deadline {
        return false;
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    linux::futex_wait(word, expected, deadline - now);
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = (word, expected);
    true
}

/// The deadline of a wait that starts now.
pub(crate) fn wait_deadline() -> std::time::Instant {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        std::time::Instant::now() + LONGEST_WAIT
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        std::time::Instant::now()
    }
}

/// Wakes the thread waiting on `word`, if any.
pub(crate) fn wake(word: &AtomicU32) {
    #[cfg(all(target_os = "linux", not(miri)))]
    linux::futex_wake(word);
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = word;
}
