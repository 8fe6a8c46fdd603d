//! The operating system, behind crate-private functions: thread ids, what
//! the kernel says a thread is doing, clocks, the scheduler's settings for
//! a thread, descriptors.
//!
//! Most of the library's `unsafe` is in this folder (the rest: `fork`,
//! `runtime::task`, `runtime::work`; see ARCHITECTURE.md). Every unsafe
//! block has a `// SAFETY:` comment listing each obligation it meets.
//!
//! - `probe`: what the kernel says one thread is doing ([`ThreadProbe`]),
//!   its design note (what each read costs, the CPU clock after the thread
//!   exits, other platforms);
//! - `clock`: the cycle counter, the monotonic clock, threads' CPU clocks;
//! - `sched`: a thread's CPU, its allowed CPUs, its scheduler slice, the
//!   CPU sentinels' `SCHED_IDLE`;
//! - `fd`: the reactor's descriptors;
//! - `hold_signal`: the signal that stops a held worker, and the CPU timers
//!   that send it.

mod clock;
#[cfg(unix)]
mod fd;
pub(crate) mod hold_signal;
mod probe;
mod sched;

pub(crate) use clock::{
    cpu_clock_time, monotonic_nanos, nanos_per_tick, start_tick_calibration, ticks,
};
#[cfg(target_os = "linux")]
pub(crate) use fd::{arm_timer_fd, timer_fd};
#[cfg(unix)]
pub(crate) use fd::{ready_now, set_nonblocking};
pub(crate) use probe::{reserve_descriptors, ThreadProbe, ThreadState, WaitsFor};
#[cfg(all(test, not(tidepool_loom)))]
pub(crate) use sched::scheduler_slice;
pub(crate) use sched::{
    become_cpu_sentinel, current_cpu, pull_to_this_cpu, set_thread_cpus, set_urgent_slice,
    thread_cpus,
};

/// A count set in the environment variable `name` (`TIDEPOOL_CONCURRENCY`,
/// `TIDEPOOL_MAX_THREADS`): `Ok(None)` if it is not set (or empty),
/// `Ok(Some(n))` for a whole number of at least 1, and `Err(value)` with
/// what it holds for anything else.
pub(crate) fn env_count(name: &str) -> Result<Option<usize>, String> {
    let value = match std::env::var(name) {
        Ok(value) => value,
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(raw)) => return Err(raw.to_string_lossy().into_owned()),
    };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    match trimmed.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(value),
    }
}

/// Kernel thread id of the calling thread (`gettid`).
///
/// On Linux this is the id `/proc/self/task/<tid>` and `/proc/thread-self`
/// use. It is a system call every time (0.1 µs): cache it if it is needed on
/// a hot path. On other platforms it is a process-unique counter value,
/// assigned on a thread's first call, that never repeats while the process
/// lives.
pub(crate) fn current_tid() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `SYS_gettid` takes no arguments, so no further variadic
        // arguments are passed; it cannot fail and touches no memory of ours.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        // A pid_t always fits in i32 (pid_max is at most 2^22).
        tid as i32
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::atomic::{AtomicI32, Ordering};
        // Not routed through `crate::sync`: this counter only has to hand out
        // distinct values, it takes part in no protocol a loom model checks.
        static NEXT: AtomicI32 = AtomicI32::new(1);
        thread_local! {
            // Relaxed: only the atomicity of the increment matters.
            static TID: i32 = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        TID.with(|tid| *tid)
    }
}

/// Asks the CPU to start loading the cache line at `address` into its
/// cache, so that a read some hundreds of nanoseconds later does not wait for
/// memory. A hint: it changes nothing the program can observe, and is a
/// no-op elsewhere than on x86-64.
#[inline]
pub(crate) fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `prefetcht0` (SSE, part of every x86-64 CPU) is a hint:
        // 1. it never faults, whatever the address: a dangling or unmapped
        //    one is ignored, so no precondition on `address` is needed;
        // 2. it writes no memory and no register the program can see.
        // (`unused_unsafe`: newer toolchains declare the intrinsic safe.)
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                address.cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn tids_differ_between_threads() {
        let here = current_tid();
        assert_eq!(here, current_tid());
        let there = thread::spawn(current_tid).join().unwrap();
        assert_ne!(here, there);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn tid_matches_thread_self() {
        let tid = thread::spawn(|| {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let first: i32 = stat.split(' ').next().unwrap().parse().unwrap();
            assert_eq!(first, current_tid());
            first
        })
        .join()
        .unwrap();
        assert_ne!(tid, current_tid());
    }
}
