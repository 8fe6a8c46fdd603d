//! Reading what the kernel says about one thread: [`ThreadProbe`] (its
//! state, its CPU clock, its run delay, the system call it sleeps in) and
//! the descriptor table it needs room in.
//!
//! # What it is for
//!
//! Blocking is detected, not guessed (ARCHITECTURE.md, "Blocking detection"). A worker opens a
//! [`ThreadProbe`] for itself when it starts and hands it to the monitor. When
//! the worker's current task has run longer than the monitor's threshold, the
//! monitor asks, through the probe:
//!
//! - [`ThreadProbe::state`]: the state letter of
//!   `/proc/self/task/<tid>/stat`. `S` (sleeping: a futex, a pipe, a socket,
//!   `thread::sleep`) and `D` (uninterruptible wait, usually disk I/O) mean the
//!   thread waits on something other than a CPU: a candidate for compensation.
//!   `R` means running *or runnable and waiting for a CPU*: never compensate,
//!   another thread would only add to the queue for the cores.
//! - [`ThreadProbe::cpu_time`]: the thread's CPU clock. If it advances, the task
//!   makes progress, whatever the state letter says at one instant. It is also
//!   the fallback where `/proc` is not mounted.
//! - [`ThreadProbe::run_delay`]: time spent runnable but not running, from
//!   `/proc/self/task/<tid>/schedstat`. If it grows, the thread is
//!   oversubscribed (or throttled by its cgroup), not blocked.
//!
//! The descriptors are opened once, on the observed thread, and kept open, so
//! a read is one `pread` at offset 0 into a stack buffer: no path lookup, no
//! allocation. A descriptor of `/proc/self/task/<tid>/` stays bound to *that*
//! thread: once it exits, reads fail (`ESRCH`) even if the numeric tid is
//! later reused, and the probe reports [`ThreadState::Unknown`].
//!
//! # Costs
//!
//! Measured on the project machine (2 cores, Linux 6.18, release build, the
//! observed thread asleep). "Hot" is back-to-back calls; "cold" is the median
//! of one call a millisecond, the way the monitor makes them. Run the ignored
//! test `measure_costs` to repeat.
//!
//! | call                                | hot     | cold    |
//! |-------------------------------------|---------|---------|
//! | [`ThreadProbe::state`]              | 1.0 µs  | 1.7 µs  |
//! | [`ThreadProbe::run_delay`]          | 0.3 µs  | 0.7 µs  |
//! | [`ThreadProbe::cpu_time`]           | 0.12 µs | 0.3 µs  |
//! | [`current_tid`]                     | 0.08 µs | 0.14 µs |
//! | [`ThreadProbe::for_current_thread`] | 2.2 µs  | 3.5 µs  |
//!
//! So a `/proc` read costs several times a clock read (the kernel formats the
//! whole ~300-byte line, 52 fields, to hand out one letter), and the first design's
//! planning figures (3 µs and 0.4 µs) are safe upper bounds.
//!
//! Hence the monitor reads `/proc` only for suspects (workers holding a slot
//! whose task has outlived the threshold), never for every thread every tick.
//!
//! # The CPU clock and thread exit
//!
//! A `pthread_t` must not be used after its thread has exited (it may point
//! to freed or reused memory), so the probe calls `pthread_getcpuclockid` once,
//! on the observed thread itself, when it is created, and later only passes
//! the resulting `clockid_t` to `clock_gettime`. That is always sound: a
//! clock id is a plain integer, the kernel looks the thread up by it (only
//! among the threads of this process) and fails with `EINVAL` when it is
//! gone, which [`ThreadProbe::cpu_time`] maps to `None`. One caveat: on Linux
//! the clock id encodes the numeric tid, so if the thread has exited *and* a
//! new thread of this process has been given the same tid (tids are handed
//! out cyclically up to `/proc/sys/kernel/pid_max`, so the pid space must
//! wrap first), the clock reads the new thread. Owners should drop a probe when its thread exits; the
//! `/proc` reads are not affected.
//!
//! # Other platforms
//!
//! Everything compiles everywhere; off Linux, [`current_tid`] is a
//! process-unique counter, [`ThreadProbe::state`] is always
//! [`ThreadState::Unknown`] and the times are `None`, so the monitor falls
//! back to judging by elapsed time alone.
//!
//! # What a probe can read
//!
//! [`ThreadProbe::reads_state`] and [`ThreadProbe::reads_cpu_clock`] say
//! which parts opened: a probe without its `stat` file (no `/proc`, out of
//! descriptors: [`ThreadProbe::open_error`] says why) is judged by its CPU
//! clock, and one without a clock by time alone (`control::policy`).

use super::clock::{cpu_clock_time, current_thread_clock};
use super::current_tid;
use std::fmt;
use std::time::Duration;

#[cfg(target_os = "linux")]
use std::fs::File;
#[cfg(target_os = "linux")]
use std::os::unix::fs::FileExt;

/// Size of the stack buffer a `stat` line is read into.
///
/// A line is about 300 bytes. The state letter comes right after `comm`,
/// which the kernel limits to 64 bytes, so even if a future kernel made the
/// line longer than this, the prefix that fits still holds the state, and
/// nothing after `comm` contains a `)` to confuse the parser.
#[cfg(target_os = "linux")]
const STAT_BUF: usize = 1024;

/// Size of the stack buffer a `schedstat` line is read into: three `u64`s of
/// at most 20 digits, two spaces and a newline fit in 63 bytes.
#[cfg(target_os = "linux")]
const SCHEDSTAT_BUF: usize = 128;

/// What the kernel says a thread is doing (the state letter of its `stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadState {
    /// `R`: running, or runnable and waiting for a CPU. The two cannot be told
    /// apart from the letter; a growing [`ThreadProbe::run_delay`] means the
    /// latter.
    Running,
    /// `S`: interruptible sleep: a futex (mutex, condvar, park, channel), a
    /// pipe or socket read, `thread::sleep`, `poll`/`epoll_wait`.
    Sleeping,
    /// `D`: uninterruptible wait, usually disk I/O or page faults on it.
    DiskWait,
    /// `T` or `t`: stopped by a signal or by a tracer.
    Stopped,
    /// `Z`, `X` or `x`: exiting.
    Dead,
    /// Any other letter, e.g. `I` (idle kernel thread) or `P` (parked).
    Other(u8),
    /// Not known: `/proc` unavailable, the read failed (the thread exited), or
    /// the line could not be parsed.
    Unknown,
}

impl ThreadState {
    /// True for [`Sleeping`](Self::Sleeping) and [`DiskWait`](Self::DiskWait):
    /// the thread waits on something other than a CPU.
    pub(crate) fn is_waiting(self) -> bool {
        matches!(self, ThreadState::Sleeping | ThreadState::DiskWait)
    }

    /// The state for one state letter of a `stat` line.
    fn from_letter(letter: u8) -> ThreadState {
        match letter {
            b'R' => ThreadState::Running,
            b'S' => ThreadState::Sleeping,
            b'D' => ThreadState::DiskWait,
            b'T' | b't' => ThreadState::Stopped,
            b'Z' | b'X' | b'x' => ThreadState::Dead,
            other => ThreadState::Other(other),
        }
    }
}

/// Parses the state out of a `/proc/.../stat` line (or a prefix of one).
///
/// The line is `pid (comm) S ...`. `comm` is chosen by the program and may
/// contain spaces and parentheses, so the state is the first non-space byte
/// after the *last* `)`; later fields are numbers and never contain one.
/// Returns [`ThreadState::Unknown`] when there is no `)` or nothing after it.
fn parse_stat_state(line: &[u8]) -> ThreadState {
    let Some(close) = line.iter().rposition(|&b| b == b')') else {
        return ThreadState::Unknown;
    };
    match line[close + 1..].iter().find(|&&b| b != b' ') {
        Some(&letter) if letter.is_ascii_alphabetic() => ThreadState::from_letter(letter),
        _ => ThreadState::Unknown,
    }
}

/// Parses the CPU out of a `/proc/.../stat` line: field 39 (`processor`),
/// the 37th after the last `)` (the state is the 3rd field, the first
/// after it). `None` if the line is cut short or the field is no number.
fn parse_stat_cpu(line: &[u8]) -> Option<usize> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let field = line[close + 1..]
        .split(u8::is_ascii_whitespace)
        .filter(|field| !field.is_empty())
        .nth(36)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Parses the run delay (the second field, in nanoseconds) out of a
/// `/proc/.../schedstat` line: `<on-cpu ns> <run-delay ns> <timeslices>`.
///
/// Returns `None` if the field is missing or not a number.
fn parse_schedstat_run_delay(line: &[u8]) -> Option<u64> {
    let field = line
        .split(u8::is_ascii_whitespace)
        .filter(|field| !field.is_empty())
        .nth(1)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Handles for observing one thread from another.
///
/// Opened *on* the observed thread (so it knows its own tid and can name its
/// own CPU clock safely), then shared: the probe is `Send + Sync`, and every
/// query takes `&self` and may run on any thread, concurrently. A query never
/// blocks and never allocates. Dropping the probe closes its descriptors
/// (each is a `std::fs::File`, which closes itself).
pub(crate) struct ThreadProbe {
    /// Kernel tid of the observed thread (see [`current_tid`]).
    tid: i32,
    /// `/proc/self/task/<tid>/stat`, or `None` if it could not be opened.
    #[cfg(target_os = "linux")]
    stat: Option<File>,
    /// `/proc/self/task/<tid>/schedstat`, or `None` if it could not be opened
    /// (kernels without `CONFIG_SCHED_INFO`).
    #[cfg(target_os = "linux")]
    schedstat: Option<File>,
    /// The observed thread's CPU clock, or `None` if it could not be had.
    #[cfg(target_os = "linux")]
    clock: Option<libc::clockid_t>,
    /// Why `stat` could not be opened, if it could not.
    #[cfg(target_os = "linux")]
    open_error: Option<std::io::Error>,
}

impl ThreadProbe {
    /// Opens the probe for the calling thread.
    ///
    /// Opens `/proc/self/task/<tid>/stat` and `/proc/self/task/<tid>/schedstat`
    /// read-only (`O_RDONLY | O_CLOEXEC`, the flags `File::open` uses) and
    /// keeps them open, and computes the thread's CPU clock id with
    /// `pthread_getcpuclockid(pthread_self())`. Never fails: a part that cannot
    /// be had (no `/proc`, out of descriptors) is recorded as unavailable, and
    /// the corresponding query answers `Unknown` / `None`.
    pub(crate) fn for_current_thread() -> ThreadProbe {
        let tid = current_tid();
        #[cfg(target_os = "linux")]
        {
            let open = |file: &str| File::open(format!("/proc/self/task/{tid}/{file}"));
            let (stat, open_error) = match open("stat") {
                Ok(stat) => (Some(stat), None),
                Err(error) => (None, Some(error)),
            };
            ThreadProbe {
                tid,
                stat,
                schedstat: open("schedstat").ok(),
                clock: current_thread_clock(),
                open_error,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            ThreadProbe { tid }
        }
    }

    /// The kernel thread id of the observed thread (see [`current_tid`]).
    pub(crate) fn tid(&self) -> i32 {
        self.tid
    }

    /// True if the `stat` file opened, so [`state`](Self::state) can say
    /// what the thread is doing (it still answers `Unknown` once the
    /// thread has exited). Always false off Linux.
    pub(crate) fn reads_state(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.stat.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// True if the thread's CPU clock could be had, so
    /// [`cpu_time`](Self::cpu_time) answers while the thread lives. Always
    /// false off Linux.
    pub(crate) fn reads_cpu_clock(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.clock.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Why the `stat` file could not be opened (say, "Too many open files"
    /// or "No such file or directory"), if it could not. `None` off Linux,
    /// where there is nothing to open.
    pub(crate) fn open_error(&self) -> Option<&std::io::Error> {
        #[cfg(target_os = "linux")]
        {
            self.open_error.as_ref()
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// What the observed thread is doing now.
    ///
    /// One `pread` at offset 0 of its `stat` file into a stack buffer (1-2 µs),
    /// parsing the state letter after the last `)`. [`ThreadState::Unknown`]
    /// if the file is unavailable or the read fails, e.g. because the thread
    /// has exited (its descriptor then fails with `ESRCH` for good, even if
    /// the tid is reused).
    pub(crate) fn state(&self) -> ThreadState {
        self.read_stat(parse_stat_state)
            .unwrap_or(ThreadState::Unknown)
    }

    /// What the observed thread is doing now, and the CPU it runs on or
    /// waits for (the `processor` field, the 39th of its `stat` line):
    /// one read, as [`state`](Self::state). The CPU is `None` where the
    /// state is unknown or the field is missing.
    pub(crate) fn state_and_cpu(&self) -> (ThreadState, Option<usize>) {
        self.read_stat(|line| (parse_stat_state(line), parse_stat_cpu(line)))
            .unwrap_or((ThreadState::Unknown, None))
    }

    /// One `pread` at offset 0 of the thread's `stat` file into a stack
    /// buffer, handed to `parse`; `None` if there is no file or the read
    /// failed.
    fn read_stat<R>(&self, parse: impl FnOnce(&[u8]) -> R) -> Option<R> {
        #[cfg(target_os = "linux")]
        {
            let stat = self.stat.as_ref()?;
            let mut buf = [0u8; STAT_BUF];
            let n = stat.read_at(&mut buf, 0).ok()?;
            Some(parse(&buf[..n]))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = parse;
            None
        }
    }

    /// CPU time the observed thread has consumed (user + system), read from its
    /// CPU clock with `clock_gettime` (0.1-0.3 µs, a system call: thread CPU
    /// clocks are not in the vDSO).
    ///
    /// `None` if the clock is unavailable or the thread has exited. See the
    /// module docs for why reading the clock of an exited thread is sound, and
    /// for the tid-reuse caveat.
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        cpu_clock_time(self.clock_id()?)
    }

    /// The observed thread's CPU clock id (for [`cpu_clock_time`]), if it
    /// could be had.
    pub(crate) fn clock_id(&self) -> Option<i32> {
        #[cfg(target_os = "linux")]
        {
            self.clock
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Total time the observed thread has spent runnable but waiting for a
    /// CPU: the second field of its `schedstat` file, in nanoseconds (one
    /// `pread`, 0.3-0.7 µs).
    ///
    /// `None` if the file is unavailable or the read fails (the thread exited).
    /// On kernels with scheduler statistics compiled in but switched off it may
    /// stay at zero.
    pub(crate) fn run_delay(&self) -> Option<Duration> {
        #[cfg(target_os = "linux")]
        {
            let schedstat = self.schedstat.as_ref()?;
            let mut buf = [0u8; SCHEDSTAT_BUF];
            let n = schedstat.read_at(&mut buf, 0).ok()?;
            parse_schedstat_run_delay(&buf[..n]).map(Duration::from_nanos)
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}

impl ThreadProbe {
    /// What the observed thread, found asleep, waits for: the process
    /// itself (a futex: a mutex, a condvar, a channel, a park: another
    /// thread of this process will wake it) or something outside it (any
    /// other system call: a sleep, a socket, a pipe, a disk), from the
    /// system call it sleeps in (`/proc/self/task/<tid>/syscall`, opened,
    /// read and closed here: 5-10 µs, so callers ask once per task).
    ///
    /// [`WaitsFor::Unknown`] if the thread runs, the file cannot be read
    /// (no `/proc`, not Linux) or its line cannot be parsed.
    pub(crate) fn waits_for(&self) -> WaitsFor {
        #[cfg(target_os = "linux")]
        {
            let path = format!("/proc/self/task/{}/syscall", self.tid);
            let Ok(file) = File::open(path) else {
                return WaitsFor::Unknown;
            };
            let mut buf = [0u8; 32];
            match file.read_at(&mut buf, 0) {
                Ok(n) => parse_syscall_waits_for(&buf[..n]),
                Err(_) => WaitsFor::Unknown,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            WaitsFor::Unknown
        }
    }
}

/// What an asleep thread waits for ([`ThreadProbe::waits_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitsFor {
    /// A futex: another thread of this process (a lock's holder, a
    /// channel's sender) will wake it.
    ThisProcess,
    /// Any other system call: a timer, a socket, a pipe, a disk.
    Outside,
    /// Not known: running, or the kernel would not say.
    Unknown,
}

/// Parses `/proc/.../syscall`'s line: the number of the system call the
/// thread is blocked in, then its arguments; `running` while it runs, `-1`
/// while blocked outside a system call (a page fault).
#[cfg(target_os = "linux")]
fn parse_syscall_waits_for(line: &[u8]) -> WaitsFor {
    let first = line
        .split(|&b| b == b' ' || b == b'\n')
        .next()
        .and_then(|field| std::str::from_utf8(field).ok())
        .and_then(|field| field.parse::<libc::c_long>().ok());
    match first {
        Some(libc::SYS_futex) => WaitsFor::ThisProcess,
        Some(n) if n >= 0 => WaitsFor::Outside,
        _ => WaitsFor::Unknown,
    }
}

impl fmt::Debug for ThreadProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ThreadProbe");
        d.field("tid", &self.tid);
        #[cfg(target_os = "linux")]
        {
            d.field("stat", &self.stat.is_some())
                .field("schedstat", &self.schedstat.is_some())
                .field("clock", &self.clock)
                .field("open_error", &self.open_error);
        }
        d.finish()
    }
}

/// Grows the process's descriptor table, once, so that at least `count`
/// descriptors fit before the kernel must grow it again. Returns true if
/// the table is (now) that large as far as this process asked; false where
/// the limit (`RLIMIT_NOFILE`) or the platform does not allow it.
///
/// Why: every worker opens two descriptors for its probe. The kernel grows
/// a multithreaded process's table by doubling it, and each growth waits
/// for an RCU grace period (milliseconds) with the table locked: a burst
/// that starts hundreds of threads started them in waves, one wave per
/// doubling. Growing it once at build costs one such wait, before any task.
pub(crate) fn reserve_descriptors(count: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::sync::atomic::{AtomicUsize, Ordering};
        /// The largest count reserved so far: tables never shrink.
        static RESERVED: AtomicUsize = AtomicUsize::new(0);
        if RESERVED.load(Ordering::Relaxed) >= count {
            return true;
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` only writes the `rlimit` we pass, a live,
        // exclusively borrowed local of the right type.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return false;
        }
        let top = (count as u64).min(limit.rlim_cur.saturating_sub(1));
        let Ok(top) = libc::c_int::try_from(top) else {
            return false;
        };
        // Any descriptor will do as the original; a socket needs no file
        // system (`/dev/null` may be missing in a sandbox).
        let Ok(socket) = std::os::unix::net::UnixDatagram::unbound() else {
            return false;
        };
        // SAFETY: `F_DUPFD_CLOEXEC` reads no memory; it duplicates the
        // descriptor `socket` owns (open for the whole call) onto the lowest
        // free number >= `top`, growing the table to hold it.
        let copy = unsafe { libc::fcntl(socket.as_raw_fd(), libc::F_DUPFD_CLOEXEC, top) };
        if copy < 0 {
            return false;
        }
        // SAFETY: `copy` was just created by the `fcntl` above, is open, and
        // nothing else knows its number: this is its only owner, which
        // closes it when dropped (the table keeps its size).
        drop(unsafe { OwnedFd::from_raw_fd(copy) });
        RESERVED.fetch_max(top as usize, Ordering::Relaxed);
        top as usize >= count
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = count;
        false
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    /// The descriptor table's size, from `/proc/self/status` (`FDSize`).
    fn table_size() -> Option<usize> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("FDSize:"))?;
        line["FDSize:".len()..].trim().parse().ok()
    }

    #[test]
    fn the_cpu_is_the_39th_field_of_a_stat_line() {
        // A real line's shape, the comm with a space and a parenthesis.
        let line = b"4242 (a (b) c) R 1 2 3 0 -1 4194368 10 0 0 0 5 6 0 0 20 0 1 0 \
            100 200 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
        assert_eq!(parse_stat_cpu(line), Some(3));
        assert_eq!(parse_stat_cpu(b"1 (x) R 0 0"), None, "cut short");
        // This thread's own line says the CPU it runs on (it may move
        // between the two reads, so only that one is read).
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            let line = std::fs::read(format!("/proc/self/task/{}/stat", current_tid())).unwrap();
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            assert!(
                parse_stat_cpu(&line).is_some_and(|cpu| cpu < cpus.max(64)),
                "{line:?}"
            );
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn reserving_descriptors_grows_the_table_once() {
        let Some(before) = table_size() else {
            return; // no /proc: nothing to look at
        };
        let want = before * 4;
        if reserve_descriptors(want) {
            let after = table_size().unwrap();
            assert!(
                after >= want,
                "FDSize {before} -> {after}, asked for {want}"
            );
        } else {
            // Only a low RLIMIT_NOFILE may refuse.
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: `getrlimit` only writes the local we pass.
            let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
            assert_eq!(rc, 0);
            assert!(
                (limit.rlim_cur as usize) <= want,
                "refused under a limit of {}",
                limit.rlim_cur
            );
        }
    }

    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::thread;
    use std::time::Instant;
    /// Generous bound for anything the tests wait for: only a hang hits it.
    const PATIENCE: Duration = Duration::from_secs(30);

    /// Polls `probe.state()` until `want` holds or `PATIENCE` runs out; returns
    /// the last state seen.
    fn wait_for_state(probe: &ThreadProbe, want: impl Fn(ThreadState) -> bool) -> ThreadState {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = probe.state();
            if want(state) || Instant::now() > deadline {
                return state;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// A thread that opens its probe, sends it back, then blocks in
    /// `thread::sleep` until told to stop.
    fn sleeper() -> (Arc<ThreadProbe>, Arc<AtomicBool>, thread::JoinHandle<()>) {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let handle = thread::spawn({
            let stop = stop.clone();
            move || {
                tx.send(Arc::new(ThreadProbe::for_current_thread()))
                    .unwrap();
                while !stop.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(20));
                }
            }
        });
        (rx.recv().unwrap(), stop, handle)
    }

    #[test]
    fn parses_plain_state() {
        let line = b"3240 (cat) R 3230 3230 2344 0 -1 4194304 103 0 0 0 0";
        assert_eq!(parse_stat_state(line), ThreadState::Running);
        assert_eq!(parse_stat_state(b"1 (x) S 0"), ThreadState::Sleeping);
        assert_eq!(parse_stat_state(b"1 (x) D 0"), ThreadState::DiskWait);
        assert_eq!(parse_stat_state(b"1 (x) T 0"), ThreadState::Stopped);
        assert_eq!(parse_stat_state(b"1 (x) t 0"), ThreadState::Stopped);
        assert_eq!(parse_stat_state(b"1 (x) Z 0"), ThreadState::Dead);
        assert_eq!(parse_stat_state(b"1 (x) X 0"), ThreadState::Dead);
        assert_eq!(parse_stat_state(b"1 (x) x 0"), ThreadState::Dead);
        assert_eq!(parse_stat_state(b"1 (x) I 0"), ThreadState::Other(b'I'));
    }

    #[test]
    fn parses_comm_with_spaces_and_parens() {
        // A thread may name itself anything (up to 15 bytes), e.g. "a) R (b c".
        assert_eq!(
            parse_stat_state(b"77 (a) R (b c) S 1 2 3"),
            ThreadState::Sleeping
        );
        assert_eq!(parse_stat_state(b"77 ()) D 1"), ThreadState::DiskWait);
        assert_eq!(parse_stat_state(b"77 ( ) ) R 1"), ThreadState::Running);
        assert_eq!(
            parse_stat_state(b"77 (:-) :-)) S 1\n"),
            ThreadState::Sleeping
        );
        assert_eq!(
            parse_stat_state(b"77 ((((()))))) T 1"),
            ThreadState::Stopped
        );
    }

    #[test]
    fn parses_malformed_lines_as_unknown() {
        assert_eq!(parse_stat_state(b""), ThreadState::Unknown);
        assert_eq!(
            parse_stat_state(b"12 (no close paren S 1"),
            ThreadState::Unknown
        );
        assert_eq!(parse_stat_state(b"12 (cut short)"), ThreadState::Unknown);
        assert_eq!(parse_stat_state(b"12 (cut short)   "), ThreadState::Unknown);
    }

    #[test]
    fn parses_run_delay() {
        assert_eq!(parse_schedstat_run_delay(b"53941 43380 2\n"), Some(43380));
        assert_eq!(parse_schedstat_run_delay(b"0 0 0\n"), Some(0));
        assert_eq!(
            parse_schedstat_run_delay(b"18446744073709551615 18446744073709551615 9\n"),
            Some(u64::MAX)
        );
        assert_eq!(parse_schedstat_run_delay(b"53941\n"), None);
        assert_eq!(parse_schedstat_run_delay(b"1 x 2\n"), None);
        assert_eq!(parse_schedstat_run_delay(b""), None);
    }

    #[test]
    fn is_waiting_only_for_sleep_and_disk_wait() {
        assert!(ThreadState::Sleeping.is_waiting());
        assert!(ThreadState::DiskWait.is_waiting());
        for state in [
            ThreadState::Running,
            ThreadState::Stopped,
            ThreadState::Dead,
            ThreadState::Other(b'I'),
            ThreadState::Unknown,
        ] {
            assert!(!state.is_waiting(), "{state:?}");
        }
    }

    #[test]
    fn probe_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ThreadProbe>();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn probe_sees_itself_running() {
        let probe = ThreadProbe::for_current_thread();
        assert_eq!(probe.tid, current_tid());
        // The calling thread is on a CPU while it reads its own stat.
        assert_eq!(probe.state(), ThreadState::Running);
        assert!(probe.cpu_time().is_some());
        assert!(probe.run_delay().is_some());
        assert!(probe.reads_state() && probe.reads_cpu_clock());
        assert!(probe.open_error().is_none());
        assert!(format!("{probe:?}").contains("ThreadProbe"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sleeping_thread_reads_sleeping() {
        let (probe, stop, handle) = sleeper();
        assert_eq!(
            wait_for_state(&probe, |s| s == ThreadState::Sleeping),
            ThreadState::Sleeping
        );
        stop.store(true, Ordering::Relaxed);
        handle.join().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn thread_waiting_on_channel_reads_sleeping() {
        let (probe_tx, probe_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let handle = thread::spawn(move || {
            probe_tx.send(ThreadProbe::for_current_thread()).unwrap();
            go_rx.recv().unwrap();
        });
        let probe = probe_rx.recv().unwrap();
        assert_eq!(
            wait_for_state(&probe, |s| s == ThreadState::Sleeping),
            ThreadState::Sleeping
        );
        assert_eq!(
            probe.waits_for(),
            WaitsFor::ThisProcess,
            "a channel's receiver sleeps in a futex"
        );
        go_tx.send(()).unwrap();
        handle.join().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_sleeper_waits_outside_the_process() {
        let (probe, stop, handle) = sleeper();
        wait_for_state(&probe, |s| s == ThreadState::Sleeping);
        // Between two sleeps it may be seen running: ask until it is not.
        let seen = (0..1_000)
            .map(|_| probe.waits_for())
            .find(|&w| w != WaitsFor::Unknown);
        assert_eq!(seen, Some(WaitsFor::Outside));
        stop.store(true, Ordering::Relaxed);
        handle.join().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn parses_the_system_call_a_thread_sleeps_in() {
        let futex = format!("{} 0x7f 0x189 0x0 0x0\n", libc::SYS_futex);
        assert_eq!(
            parse_syscall_waits_for(futex.as_bytes()),
            WaitsFor::ThisProcess
        );
        let sleep = format!("{} 0x1 0x0\n", libc::SYS_clock_nanosleep);
        assert_eq!(parse_syscall_waits_for(sleep.as_bytes()), WaitsFor::Outside);
        assert_eq!(parse_syscall_waits_for(b"running\n"), WaitsFor::Unknown);
        assert_eq!(
            parse_syscall_waits_for(b"-1 0x7ffc 0x55\n"),
            WaitsFor::Unknown
        );
        assert_eq!(parse_syscall_waits_for(b""), WaitsFor::Unknown);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn spinner_runs_and_uses_cpu_sleeper_does_not() {
        let (sleeper_probe, sleeper_stop, sleeper_handle) = sleeper();

        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let spinner_handle = thread::spawn({
            let stop = stop.clone();
            move || {
                tx.send(ThreadProbe::for_current_thread()).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
        });
        let spinner = rx.recv().unwrap();

        // Runnable whether it is on a CPU or preempted: never waiting.
        assert_eq!(
            wait_for_state(&spinner, |s| s == ThreadState::Running),
            ThreadState::Running
        );

        let spin_start = spinner.cpu_time().unwrap();
        let sleep_start = sleeper_probe.cpu_time().unwrap();
        let deadline = Instant::now() + PATIENCE;
        let mut spin_now = spin_start;
        while spin_now - spin_start < Duration::from_millis(50) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
            spin_now = spinner.cpu_time().unwrap();
        }
        let sleep_now = sleeper_probe.cpu_time().unwrap();
        let spun = spin_now - spin_start;
        let slept = sleep_now - sleep_start;
        assert!(
            spun >= Duration::from_millis(50),
            "spinner used only {spun:?}"
        );
        assert!(spun > slept, "spinner {spun:?} vs sleeper {slept:?}");
        assert!(spinner.run_delay().is_some());

        stop.store(true, Ordering::Relaxed);
        sleeper_stop.store(true, Ordering::Relaxed);
        spinner_handle.join().unwrap();
        sleeper_handle.join().unwrap();
    }

    #[test]
    fn exited_thread_reads_unknown_and_none() {
        let probe = thread::spawn(ThreadProbe::for_current_thread)
            .join()
            .unwrap();
        // `join` returns once the thread has left user space; the kernel may
        // still be tearing it down for a moment, so poll.
        assert_eq!(
            wait_for_state(&probe, |s| s == ThreadState::Unknown),
            ThreadState::Unknown
        );
        let deadline = Instant::now() + PATIENCE;
        while probe.cpu_time().is_some() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(probe.cpu_time(), None);
        assert_eq!(probe.run_delay(), None);
        assert!(!probe.state().is_waiting());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn unavailable_parts_read_unknown_and_none() {
        let probe = ThreadProbe {
            tid: current_tid(),
            stat: None,
            schedstat: None,
            clock: None,
            open_error: Some(std::io::Error::from_raw_os_error(libc::EMFILE)),
        };
        assert!(!probe.reads_state() && !probe.reads_cpu_clock());
        assert_eq!(
            probe.open_error().and_then(std::io::Error::raw_os_error),
            Some(libc::EMFILE)
        );
        assert_eq!(probe.state(), ThreadState::Unknown);
        assert_eq!(probe.cpu_time(), None);
        assert_eq!(probe.run_delay(), None);
    }

    /// Prints what each call costs, hot (back to back) and cold (one call a
    /// millisecond, the way the monitor calls them). Run with
    /// `cargo test --release -- --ignored --nocapture measure_costs`.
    #[test]
    #[ignore = "measurement, not a check"]
    fn measure_costs() {
        fn hot(mut f: impl FnMut()) -> Duration {
            let n = 100_000;
            for _ in 0..n / 10 {
                f();
            }
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed() / n
        }
        fn cold(mut f: impl FnMut()) -> Duration {
            let mut times: Vec<Duration> = (0..500)
                .map(|_| {
                    thread::sleep(Duration::from_millis(1));
                    let start = Instant::now();
                    f();
                    start.elapsed()
                })
                .collect();
            times.sort();
            times[times.len() / 2]
        }
        fn report(name: &str, mut f: impl FnMut()) {
            let hot = hot(&mut f);
            let cold = cold(&mut f);
            println!("{name:<28} hot {hot:>9?}   cold (median) {cold:>9?}");
        }
        let (probe, stop, handle) = sleeper();
        report("state (pread stat)", || {
            std::hint::black_box(probe.state());
        });
        report("run_delay (pread schedstat)", || {
            std::hint::black_box(probe.run_delay());
        });
        report("cpu_time (clock_gettime)", || {
            std::hint::black_box(probe.cpu_time());
        });
        report("current_tid (gettid)", || {
            std::hint::black_box(current_tid());
        });
        report("for_current_thread", || {
            std::hint::black_box(ThreadProbe::for_current_thread());
        });
        stop.store(true, Ordering::Relaxed);
        handle.join().unwrap();
    }
}
