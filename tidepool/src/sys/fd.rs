//! The reactor's descriptors: non-blocking mode, the timerfd its thread
//! waits on, a look at readiness that does not wait.

#[cfg(target_os = "linux")]
use std::time::Duration;

/// Puts `fd` in non-blocking mode (`O_NONBLOCK`), for the reactor: any
/// descriptor (socket, pipe, terminal), not only sockets.
#[cfg(unix)]
pub(crate) fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = fd.as_raw_fd();
    // SAFETY: `F_GETFL` reads no memory; `fd` is open for the call (the
    // caller's `BorrowedFd` keeps it so).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK != 0 {
        return Ok(());
    }
    // SAFETY: `F_SETFL` with an `int` argument reads no memory; `fd` is open
    // as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A new timerfd on the monotonic clock (`Instant`'s), non-blocking, for
/// the reactor's thread to wait until a deadline with `epoll`.
#[cfg(target_os = "linux")]
pub(crate) fn timer_fd() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `timerfd_create` takes no pointers.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a non-negative result is a new descriptor that nothing else
    // owns; the `OwnedFd` closes it once.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Arms a timerfd to expire once, `after` from now (which must not be zero:
/// a zero time disarms it). Re-arming also clears an expiry not yet read.
#[cfg(target_os = "linux")]
pub(crate) fn arm_timer_fd(
    fd: std::os::fd::BorrowedFd<'_>,
    after: Duration,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let value = libc::itimerspec {
        it_interval: zero,
        it_value: libc::timespec {
            tv_sec: libc::time_t::try_from(after.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: after.subsec_nanos().into(),
        },
    };
    // SAFETY: `value` is a valid `itimerspec` that outlives the call, the old
    // value is not asked for (null), and `fd` is open for the call (the
    // `BorrowedFd`).
    let result = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &value, std::ptr::null_mut()) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `fd` is ready for `events` (`libc::POLLIN` or `libc::POLLOUT`)
/// now, or closed or in error (which the next read or write reports): one
/// `poll(2)` that does not wait. The reactor keeps readiness it saw; this
/// is for the callers of `Async::readable`, who do their own reads.
#[cfg(unix)]
pub(crate) fn ready_now(
    fd: std::os::fd::BorrowedFd<'_>,
    events: libc::c_short,
) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut pollfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    loop {
        // SAFETY: `poll` reads and writes exactly the one `pollfd` we pass
        // (count 1), a live, exclusively borrowed local; timeout 0 returns
        // at once. `fd` is open for the call (the `BorrowedFd`).
        let found = unsafe { libc::poll(&mut pollfd, 1, 0) };
        if found >= 0 {
            return Ok(found > 0 && pollfd.revents != 0);
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}
