//! Where and how the scheduler runs a thread: the CPU it is on, the CPUs
//! it may use (and pulling one onto this CPU), a short scheduler slice for
//! urgent work, and the CPU sentinels' `SCHED_IDLE`.

#[cfg(all(test, not(tidepool_loom)))]
use std::time::Duration;

/// The scheduler slice asked for a thread woken for urgent work
/// ([`set_urgent_slice`]): the kernel's shortest (it clamps to 0.1-100 ms).
#[cfg(target_os = "linux")]
const URGENT_SLICE_NS: u64 = 100_000;

/// `struct sched_attr` of `sched_setattr(2)`, its first version (48 bytes,
/// `SCHED_ATTR_SIZE_VER0`): the fields this module reads and writes.
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// The CPU the calling thread runs on now, if the platform says (Linux:
/// `sched_getcpu`, read from the vDSO, a few nanoseconds).
pub(crate) fn current_cpu() -> Option<usize> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: `sched_getcpu` takes no arguments and touches no memory
        // of ours; it returns -1 on failure.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    None
}

/// The CPUs thread `tid` (0: the calling thread) may run on, as a bitmap
/// of CPUs 0-63; `None` if it may also run on a CPU beyond those (a
/// bitmap would not say so), if the call fails, or off Linux.
pub(crate) fn thread_cpus(tid: i32) -> Option<u64> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: a `cpu_set_t` is plain bits; all zeroes is an empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes
        // into `set`, a live, aligned `cpu_set_t` of that size.
        let rc = unsafe {
            libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
        };
        if rc != 0 {
            return None;
        }
        let mut bits = 0u64;
        for cpu in 0..libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below `CPU_SETSIZE`, within `set`'s bits.
            if unsafe { libc::CPU_ISSET(cpu, &set) } {
                if cpu >= 64 {
                    return None;
                }
                bits |= 1 << cpu;
            }
        }
        Some(bits)
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = tid;
        None
    }
}

/// Lets thread `tid` (0: the calling thread) run on the CPUs of `cpus`
/// only (a bitmap of CPUs 0-63, as [`thread_cpus`] reads it). False if
/// the call failed, or off Linux.
pub(crate) fn set_thread_cpus(tid: i32, cpus: u64) -> bool {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: a `cpu_set_t` is plain bits; all zeroes is an empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for cpu in 0..64 {
            if cpus & (1 << cpu) != 0 {
                // SAFETY: `cpu` is below 64, within `set`'s 1,024 bits.
                unsafe { libc::CPU_SET(cpu, &mut set) };
            }
        }
        // SAFETY: the kernel reads `size_of::<cpu_set_t>()` bytes of `set`,
        // a live, aligned `cpu_set_t` of that size.
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = (tid, cpus);
        false
    }
}

/// Moves thread `tid`, runnable on another CPU, onto CPU `here` now, and
/// gives it back its own CPUs (`own`, a bitmap as [`thread_cpus`] reads
/// it, what the thread set itself up with): the kernel moves a thread at
/// once (queued or running) when its allowed CPUs leave out the one it is
/// on, and does not move it again when they are widened. `own` is passed
/// in, not read: read, it could be another mover's temporary CPU. False
/// (nothing changed) if `own` is unknown (0), leaves out `here` or is
/// `here` alone, or a call failed (the thread exited); off Linux, always
/// false.
pub(crate) fn pull_to_this_cpu(tid: i32, here: usize, own: u64) -> bool {
    if here >= 64 {
        return false;
    }
    let only_here = 1u64 << here;
    if own & only_here == 0 || own == only_here {
        return false;
    }
    let moved = set_thread_cpus(tid, only_here);
    // Its own CPUs back whether or not the move took: a failed first call
    // changed nothing, and this one then fails the same way.
    set_thread_cpus(tid, own) && moved
}

/// The scheduling attributes of thread `tid`, or `None` if they cannot be
/// read (no such thread).
#[cfg(target_os = "linux")]
fn sched_getattr(tid: i32) -> Option<SchedAttr> {
    let size = std::mem::size_of::<SchedAttr>();
    let mut attr = SchedAttr::default();
    // SAFETY: `sched_getattr(pid, attr, size, flags)` writes at most `size`
    // bytes into `attr`, a live, exclusively borrowed, aligned `SchedAttr`
    // of exactly `size` bytes (`repr(C)`, the kernel's layout of the first
    // version); the other arguments are integers. A `tid` that names no
    // thread makes it fail with `ESRCH`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut SchedAttr,
            size as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    (rc == 0).then_some(attr)
}

/// Asks the kernel for a short scheduler slice for thread `tid` of this
/// process (`urgent`), or gives it the default slice back. Returns true if
/// the thread's slice is now as asked.
///
/// Why: a thread woken while every core runs a CPU-bound worker waits until
/// the kernel preempts one. Linux's EEVDF scheduler (6.6+) preempts at once
/// for a woken thread whose deadline comes first, and a thread's deadline
/// is its slice away: with the default slice (1.4 ms on the project
/// machine) a woken thread waited up to a slice (a test program: two
/// spinning threads, a third woken every 10 ms, 5 runs each: p99 120 us
/// (18-1,762), max 3.8 ms (0.02-4.0); with a 0.1 ms slice p99 19.5 us
/// (14.6-37.5), max 20 us (15-616); docs/measurements.md). The
/// pool asks for it for a worker it wakes for an urgent task, and the
/// worker gives it back when the task ends (a short slice costs more
/// context switches when threads share a core).
///
/// Only a thread under the default policy (`SCHED_OTHER`) is changed, its
/// nice value kept: a thread a user moved to another policy is left alone.
/// Kernels before 6.12 accept and ignore the slice; off Linux this does
/// nothing and returns false.
pub(crate) fn set_urgent_slice(tid: i32, urgent: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Some(mut attr) = sched_getattr(tid) else {
            return false;
        };
        if attr.policy != libc::SCHED_OTHER as u32 {
            return false;
        }
        attr.size = std::mem::size_of::<SchedAttr>() as u32;
        attr.runtime = if urgent { URGENT_SLICE_NS } else { 0 };
        // SAFETY: `sched_setattr(pid, attr, flags)` only reads `attr.size`
        // bytes of `attr`, a live, aligned `SchedAttr` whose `size` is its
        // own; the other arguments are integers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sched_setattr,
                tid,
                &attr as *const SchedAttr,
                0 as libc::c_uint,
            )
        };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tid, urgent);
        false
    }
}

/// Makes the calling thread a sentinel of CPU `cpu`: allowed on that CPU
/// only, under `SCHED_IDLE`, so that it runs only when the CPU has nothing
/// else to run (a normal thread's wake preempts it at once, and it gets a
/// tiny share of a busy CPU). Any thread may lower itself to `SCHED_IDLE`;
/// it cannot go back without `CAP_SYS_NICE` or `RLIMIT_NICE`, so only
/// threads that stay sentinels call this. False if either call failed, or
/// off Linux.
pub(crate) fn become_cpu_sentinel(cpu: usize) -> bool {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        if cpu >= 64 || !set_thread_cpus(0, 1 << cpu) {
            return false;
        }
        // SAFETY: `prctl(PR_SET_TIMERSLACK, ns)` takes integers only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64 as libc::c_ulong) };
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler(0, policy, param)` reads one live,
        // aligned `sched_param`; 0 names the calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = cpu;
        false
    }
}

/// The scheduler slice of thread `tid` (for tests): `None` off Linux, or
/// if it cannot be read. The kernel reports 0 before 6.12.
#[cfg(all(test, not(tidepool_loom)))]
pub(crate) fn scheduler_slice(tid: i32) -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        sched_getattr(tid).map(|attr| Duration::from_nanos(attr.runtime))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        None
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::sys::current_tid;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    /// A thread computing on one CPU is pulled onto the caller's and keeps
    /// its own CPUs. Needs two CPUs this process may use.
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn a_thread_is_pulled_onto_this_cpu_and_keeps_its_cpus() {
        use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize};
        use std::sync::Arc;
        let Some(mine) = thread_cpus(0) else { return };
        if mine.count_ones() < 2 {
            return;
        }
        let (a, b) = (
            mine.trailing_zeros() as usize,
            63 - mine.leading_zeros() as usize,
        );
        let tid = Arc::new(AtomicI32::new(0));
        let on = Arc::new(AtomicUsize::new(usize::MAX));
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let (tid, on, stop) = (tid.clone(), on.clone(), stop.clone());
            std::thread::spawn(move || {
                // Starts on CPU `a`, free to run on either.
                assert!(set_thread_cpus(0, 1 << a));
                while current_cpu() != Some(a) {}
                assert!(set_thread_cpus(0, mine));
                on.store(a, Ordering::Release);
                tid.store(current_tid(), Ordering::Release);
                while !stop.load(Ordering::Acquire) {
                    on.store(current_cpu().unwrap_or(usize::MAX), Ordering::Release);
                }
            })
        };
        // This thread on CPU `b`, the spinner seen on `a`.
        assert!(set_thread_cpus(0, 1 << b));
        let deadline = Instant::now() + Duration::from_secs(30);
        while tid.load(Ordering::Acquire) == 0 || on.load(Ordering::Acquire) != a {
            assert!(
                Instant::now() < deadline,
                "the spinner never ran on CPU {a}"
            );
            std::thread::yield_now();
        }
        let spinner_tid = tid.load(Ordering::Acquire);
        assert!(
            !pull_to_this_cpu(spinner_tid, 64, mine),
            "no CPU 64 in a bitmap"
        );
        assert!(!pull_to_this_cpu(spinner_tid, b, 0), "its own CPUs unknown");
        // Moved at once; it runs on `b` when this thread lets it. With its
        // own CPUs back at once, CPU `a`, idle since the move, may take it
        // back before it ran here (the kernel's balancing on a newly idle
        // CPU: seen once in a CI run on 2 cores): then it is pulled again.
        'pulled: loop {
            assert!(pull_to_this_cpu(spinner_tid, b, mine));
            assert_eq!(thread_cpus(spinner_tid), Some(mine), "its own CPUs back");
            let retry = Instant::now() + Duration::from_millis(200);
            while Instant::now() < retry {
                if on.load(Ordering::Acquire) == b {
                    break 'pulled;
                }
                std::thread::yield_now();
            }
            assert!(
                Instant::now() < deadline,
                "the spinner never ran on CPU {b}"
            );
        }
        stop.store(true, Ordering::Release);
        spinner.join().unwrap();
        assert!(set_thread_cpus(0, mine));
        // Not among its CPUs: nothing changes.
        let pinned = std::thread::spawn(move || {
            assert!(set_thread_cpus(0, 1 << a));
            let me = current_tid();
            (me, pull_to_this_cpu(me, b, 1 << a), thread_cpus(me))
        })
        .join()
        .unwrap();
        assert_eq!(
            (pinned.1, pinned.2),
            (false, Some(1 << a)),
            "tid {}",
            pinned.0
        );
    }

    #[test]
    fn an_urgent_slice_is_set_and_given_back() {
        let me = current_tid();
        let Some(before) = scheduler_slice(me) else {
            return; // Off Linux: nothing to set.
        };
        if before.is_zero() {
            return; // A kernel before 6.12 reports no slice.
        }
        assert!(set_urgent_slice(me, true));
        assert_eq!(scheduler_slice(me), Some(Duration::from_micros(100)));
        assert!(set_urgent_slice(me, false));
        assert_eq!(scheduler_slice(me), Some(before), "the default again");
        assert!(!set_urgent_slice(-1, true), "no such thread");
    }
}
