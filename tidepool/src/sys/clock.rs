//! Clocks: the cycle counter that times queue-to-start (and its rate),
//! the monotonic clock and threads' CPU clocks, the last two readable from
//! a signal handler.

use std::time::Duration;

/// A cheap, unordered timestamp for measuring queue-to-start latency, in
/// ticks: the CPU's time-stamp counter on x86-64, nanoseconds since a process
/// anchor elsewhere. Scale differences by [`nanos_per_tick`].
///
/// Why not `Instant::now()`: the vDSO clock orders the counter read against
/// earlier loads and stores (`rdtscp`/`lfence`), so on the spawn path, right
/// after a cache-missing allocation, it stalls; measured on the project
/// machine, reading `Instant` at spawn and at first poll cost ~75 ns of a
/// ~250 ns task (examples/spawn_parts.rs). A plain `rdtsc` does not wait.
/// It may run a few cycles early or late, which is noise at the scale of a
/// queue wait. The counter is invariant and synchronised across cores on the
/// x86-64 machines Linux uses it as its clock source on; a difference that
/// comes out negative (a core skew) is clamped to zero by the caller.
#[inline]
pub(crate) fn ticks() -> u64 {
    // Miri interprets no `rdtsc`: the portable clock there.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: `rdtsc` reads a register; it has no preconditions, touches
        // no memory and exists on every x86-64 CPU. (`unused_unsafe`: newer
        // toolchains declare the intrinsic safe; 1.88, the minimum, does not.)
        #[allow(unused_unsafe)]
        let t = unsafe { core::arch::x86_64::_rdtsc() };
        t
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    {
        let (_, anchor) = tick_anchor();
        u64::try_from(anchor.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The first (ticks, instant) pair read in this process: the reference both
/// [`ticks`] (elsewhere than x86-64) and [`nanos_per_tick`] measure from.
fn tick_anchor() -> (u64, std::time::Instant) {
    static ANCHOR: std::sync::OnceLock<(u64, std::time::Instant)> = std::sync::OnceLock::new();
    *ANCHOR.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        let t = ticks();
        #[cfg(any(not(target_arch = "x86_64"), miri))]
        let t = 0;
        (t, std::time::Instant::now())
    })
}

/// Starts the tick calibration clock (call early: the longer the interval
/// before the first conversion, the more exact it is).
pub(crate) fn start_tick_calibration() {
    let _ = tick_anchor();
}

/// Nanoseconds per tick, measured over the time since the anchor: the
/// counter's rate against the monotonic clock. 1.0 until the anchor is a
/// millisecond old (too short a baseline to divide by).
pub(crate) fn nanos_per_tick() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        let (t0, i0) = tick_anchor();
        let nanos = i0.elapsed().as_nanos() as f64;
        let ticks = ticks().saturating_sub(t0) as f64;
        if nanos < 1e6 || ticks <= 0.0 {
            1.0
        } else {
            nanos / ticks
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        1.0
    }
}

/// The CPU time of the thread whose CPU clock is `clock` (a
/// [`ThreadProbe::clock_id`](super::ThreadProbe::clock_id)): `clock_gettime`, which a signal handler may
/// call. `None` if the thread has exited, or off Linux.
pub(crate) fn cpu_clock_time(clock: i32) -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable, properly aligned `timespec`
        // that outlives the call. `clock` is a clock id, a plain integer:
        // no pointer is dereferenced through it, and an id naming a thread
        // that no longer exists makes the call fail with EINVAL, which is
        // handled below; nothing is undefined about it.
        let rc = unsafe { libc::clock_gettime(clock as libc::clockid_t, &mut ts) };
        if rc != 0 {
            return None;
        }
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u32::try_from(ts.tv_nsec).ok()?;
        Some(Duration::new(secs, nanos))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = clock;
        None
    }
}

/// The monotonic clock (`Instant`'s) in nanoseconds since an arbitrary
/// origin, from `clock_gettime`, which a signal handler may call.
pub(crate) fn monotonic_nanos() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable, properly aligned `timespec`
        // that outlives the call; the clock id is a constant.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
    }
    #[cfg(not(target_os = "linux"))]
    {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// The calling thread's CPU clock id, or `None` if it cannot be had.
#[cfg(target_os = "linux")]
pub(super) fn current_thread_clock() -> Option<libc::clockid_t> {
    // SAFETY: `pthread_self` has no preconditions and cannot fail.
    let me = unsafe { libc::pthread_self() };
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `me` names the calling thread, which is alive for the whole call
    // (this is the only place a `pthread_t` is used; it is never stored, see
    // the module docs). `clock` is a valid, writable, aligned `clockid_t` that
    // outlives the call.
    let rc = unsafe { libc::pthread_getcpuclockid(me, &mut clock) };
    (rc == 0).then_some(clock)
}
