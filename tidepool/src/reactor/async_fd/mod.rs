//! [`Async`]: a socket (or any pollable descriptor) whose waits hold no
//! thread, on tidepool's reactor. The method names are async-io's, so code
//! written for `async_io::Async` compiles unchanged.

mod inet;
mod unix_domain;

use super::source::{Direction, Ready, Source, Waiter};
use super::Reactor;
use futures_lite::io::{AsyncRead, AsyncWrite};
use futures_lite::{future, ready};
use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// An I/O object (a socket, a pipe) whose reads and writes wait without
/// holding a thread: a task that awaits one is parked in tidepool's reactor
/// and woken when the descriptor is ready.
///
/// Wrap a descriptor with [`Async::new`], or use the socket constructors
/// ([`Async::<TcpListener>::bind`](Async::<TcpListener>::bind),
/// [`Async::<TcpStream>::connect`](Async::<TcpStream>::connect), ...). Read
/// and write through [`AsyncRead`]/[`AsyncWrite`] with the extension
/// methods in [`tidepool::io`](crate::io), or with
/// [`read_with`](Async::read_with)/[`write_with`](Async::write_with) for
/// any other call (`recv_from`, `accept`, ...). Both `Async<T>` and
/// `&Async<T>` read and write, so one task may read while another writes.
///
/// The method names and behaviour are those of `async_io::Async`, which
/// tidepool used before its own reactor: code written for it compiles
/// unchanged. What differs is inside (see `src/reactor/mod.rs`): the
/// descriptor is registered once, and readiness the reactor saw is kept
/// and used, so a read is tried only when it can succeed; and while the
/// pool's workers are busy they poll the reactor themselves between tasks.
///
/// Dropping an `Async` deregisters the descriptor and then closes it.
///
/// # Examples
///
/// ```
/// use std::net::{TcpListener, TcpStream};
/// use tidepool::io::{AsyncReadExt, AsyncWriteExt};
/// use tidepool::Async;
///
/// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
/// let addr = listener.get_ref().local_addr()?;
/// let server = tidepool::spawn(async move {
///     let (mut stream, _) = listener.accept().await?;
///     let mut word = [0; 4];
///     stream.read_exact(&mut word).await?;
///     stream.write_all(&word).await?;
///     Ok::<_, std::io::Error>(())
/// });
/// let echoed = tidepool::block_on(async move {
///     let mut client = Async::<TcpStream>::connect(addr).await?;
///     client.write_all(b"ping").await?;
///     let mut back = [0; 4];
///     client.read_exact(&mut back).await?;
///     Ok::<_, std::io::Error>(back)
/// })?;
/// assert_eq!(&echoed, b"ping");
/// tidepool::block_on(server).unwrap()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Async<T> {
    /// `None` only inside [`Async::into_inner`] and `drop`.
    io: Option<T>,
    /// Its readiness and waiters.
    source: Arc<Source>,
    /// Its registration.
    key: usize,
    fd: RawFd,
    /// A stream socket: a read or write that moved less than asked
    /// emptied the receive buffer or filled the send buffer, so the
    /// readiness it used is cleared at once (the next edge sets it), which
    /// saves the attempt that would only have said `WouldBlock`. Not for
    /// other descriptors: a terminal returns one line per read, a
    /// `SOCK_SEQPACKET` socket one message, with more still queued.
    stream_socket: bool,
    reactor: &'static Reactor,
}

// Nothing in an `Async` is pinned: `T` is only ever borrowed.
impl<T> Unpin for Async<T> {}

impl<T: AsFd> Async<T> {
    /// Puts `io` in non-blocking mode and registers it with the reactor.
    ///
    /// # Errors
    ///
    /// The OS refused the non-blocking mode, the registration (for example
    /// a regular file, which epoll does not take), or the reactor itself
    /// (its epoll instance or its thread).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::TcpListener;
    /// use tidepool::Async;
    ///
    /// let listener = Async::new(TcpListener::bind("127.0.0.1:0")?)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(io: T) -> io::Result<Async<T>> {
        crate::sys::set_nonblocking(io.as_fd())?;
        Async::new_nonblocking(io)
    }

    /// Registers `io`, which the caller has already put in non-blocking
    /// mode (one system call less than [`Async::new`]). A descriptor left
    /// blocking would block the worker that reads it.
    ///
    /// # Errors
    ///
    /// As [`Async::new`], but for the non-blocking mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = UdpSocket::bind("127.0.0.1:0")?;
    /// socket.set_nonblocking(true)?;
    /// let socket = Async::new_nonblocking(socket)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_nonblocking(io: T) -> io::Result<Async<T>> {
        // Not a socket: the query fails, and the answer is no.
        let stream_socket =
            socket2::SockRef::from(&io).r#type().ok() == Some(socket2::Type::STREAM);
        Async::registered(io, stream_socket)
    }

    /// A stream socket tidepool made non-blocking itself (a connect's or an
    /// accept's): registered without asking the kernel its type, one
    /// system call less per connection than [`new_nonblocking`](Self::new_nonblocking).
    pub(super) fn new_stream_socket(io: T) -> io::Result<Async<T>> {
        Async::registered(io, true)
    }

    /// Registers `io`, non-blocking already; `stream_socket` as the field.
    fn registered(io: T, stream_socket: bool) -> io::Result<Async<T>> {
        let reactor = Reactor::get()?;
        let fd = io.as_fd().as_raw_fd();
        let (key, source) = reactor.register(fd)?;
        Ok(Async {
            io: Some(io),
            source,
            key,
            fd,
            stream_socket,
            reactor,
        })
    }

    /// Waits until the descriptor is readable (or closed, or in error: the
    /// next read says which). Ready at once if it is readable now.
    ///
    /// For a read loop of your own: read until `WouldBlock`, then await
    /// this. [`read_with`](Async::read_with) does both.
    ///
    /// # Errors
    ///
    /// The OS failed to report the descriptor's state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let addr = socket.get_ref().local_addr()?;
    /// UdpSocket::bind("127.0.0.1:0")?.send_to(b"hi", addr)?;
    /// tidepool::block_on(socket.readable())?;
    /// let mut buf = [0; 2];
    /// assert_eq!(socket.get_ref().recv(&mut buf)?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        let mut waiter = self.source.waiter(Direction::Read);
        future::poll_fn(|cx| self.poll_ready_now(&mut waiter, libc::POLLIN, cx)).await
    }

    /// Waits until the descriptor is writable (or closed, or in error).
    /// Ready at once if it is writable now.
    ///
    /// # Errors
    ///
    /// The OS failed to report the descriptor's state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// tidepool::block_on(socket.writable())?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        let mut waiter = self.source.waiter(Direction::Write);
        future::poll_fn(|cx| self.poll_ready_now(&mut waiter, libc::POLLOUT, cx)).await
    }

    /// Waits until a connect started on this socket ends (writable, or in
    /// error), through the poll functions' wait (an inline slot) rather than
    /// a [`Waiter`]: the connect's future owns the socket, so a dropped
    /// wait leaves nothing behind (the socket goes with it), and the first
    /// wait on a new socket allocates no list of waiters: two allocations
    /// fewer per connect.
    ///
    /// The kept readiness alone, without [`poll_writable`]'s second look
    /// (a `poll(2)` per connect): that look is for callers who write on
    /// their own, unseen by the reactor, and nothing has written on a
    /// socket still connecting. Its readiness starts unset, and only an
    /// event after the connect began sets it: the end of the connect, or
    /// its failure (which the caller's `take_error` reports).
    ///
    /// [`poll_writable`]: Async::poll_writable
    pub(super) async fn connect_ended(&self) -> io::Result<()> {
        future::poll_fn(|cx| self.source.poll_ready(Direction::Write, cx).map(|_| Ok(()))).await
    }

    /// [`readable`](Async::readable) as a poll function, for hand-written
    /// futures: `Ready` once the descriptor is readable; otherwise
    /// `Pending`, and `cx`'s task is woken when it may be.
    ///
    /// The socket keeps `cx`'s waker (one per task) until the next event
    /// in this direction, even if the task stops waiting; the futures
    /// ([`readable`](Async::readable), [`read_with`](Async::read_with))
    /// take their waker back when they are dropped.
    ///
    /// # Errors
    ///
    /// The OS failed to report the descriptor's state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let addr = socket.get_ref().local_addr()?;
    /// UdpSocket::bind("127.0.0.1:0")?.send_to(b"hi", addr)?;
    /// tidepool::block_on(std::future::poll_fn(|cx| socket.poll_readable(cx)))?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_ready_now(
            &mut PolledWait(&self.source, Direction::Read),
            libc::POLLIN,
            cx,
        )
    }

    /// [`writable`](Async::writable) as a poll function (see
    /// [`poll_readable`](Async::poll_readable)).
    ///
    /// # Errors
    ///
    /// The OS failed to report the descriptor's state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// tidepool::block_on(std::future::poll_fn(|cx| socket.poll_writable(cx)))?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_ready_now(
            &mut PolledWait(&self.source, Direction::Write),
            libc::POLLOUT,
            cx,
        )
    }

    /// Ready when the kept readiness says so *and* the descriptor is ready
    /// now. The callers do their own reads, and the reactor cannot see
    /// them: without the second look, a caller that drained the socket
    /// would be told "readable" again at once, forever.
    fn poll_ready_now(
        &self,
        wait: &mut impl WaitReady,
        events: libc::c_short,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let ready = ready!(wait.poll_ready(cx));
            if crate::sys::ready_now(self.get_ref().as_fd(), events)? {
                return Poll::Ready(Ok(()));
            }
            wait.clear_ready(ready);
        }
    }
}

impl<T> Async<T> {
    /// The inner I/O object, for calls that do not wait (addresses,
    /// options, `shutdown`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::TcpListener;
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// let port = listener.get_ref().local_addr()?.port();
    /// assert_ne!(port, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn get_ref(&self) -> &T {
        self.io
            .as_ref()
            .expect("an Async holds its I/O until it is dropped")
    }

    /// Deregisters the descriptor and returns the I/O object, still in
    /// non-blocking mode.
    ///
    /// # Errors
    ///
    /// The OS refused the deregistration (the object is closed then).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::TcpListener;
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// let listener: TcpListener = listener.into_inner()?;
    /// listener.set_nonblocking(false)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_inner(mut self) -> io::Result<T> {
        let io = self
            .io
            .take()
            .expect("an Async holds its I/O until it is dropped");
        self.reactor.deregister(self.key, self.fd)?;
        Ok(io)
    }

    /// Runs `op` on the I/O object until it does not say `WouldBlock`,
    /// waiting for readability between tries: the way to any read-side
    /// call this type has no method for (`recv_from`, `peek`, `accept`).
    /// `op` is tried at once when the reactor last saw the descriptor
    /// readable, and after each readiness event.
    ///
    /// # Errors
    ///
    /// Whatever `op` returns other than `WouldBlock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::TcpListener;
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// let addr = listener.get_ref().local_addr()?;
    /// let client = std::net::TcpStream::connect(addr)?;
    /// let (stream, peer) = tidepool::block_on(listener.read_with(|l| l.accept()))?;
    /// assert_eq!(peer, client.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn read_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        let io = self.get_ref();
        let mut waiter = self.source.waiter(Direction::Read);
        future::poll_fn(|cx| poll_until_blocked(&mut waiter, cx, || op(io), |_| false)).await
    }

    /// As [`read_with`](Async::read_with), waiting for writability: the way
    /// to `send_to` and other write-side calls.
    ///
    /// # Errors
    ///
    /// Whatever `op` returns other than `WouldBlock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let to = UdpSocket::bind("127.0.0.1:0")?;
    /// let addr = to.local_addr()?;
    /// let sent = tidepool::block_on(socket.write_with(|s| s.send_to(b"hi", addr)))?;
    /// assert_eq!(sent, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn write_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        let io = self.get_ref();
        let mut waiter = self.source.waiter(Direction::Write);
        future::poll_fn(|cx| poll_until_blocked(&mut waiter, cx, || op(io), |_| false)).await
    }
}

/// How an operation waits for a direction's readiness: as a poll
/// function ([`PolledWait`]: one entry per task, kept until the next
/// event) or as a future with a [`Waiter`] of its own (its entry leaves
/// with it, so a cancelled wait leaves nothing behind).
trait WaitReady {
    /// `Source::poll_ready`, through this kind of wait.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready>;
    /// `Source::clear_ready` of the waited direction.
    fn clear_ready(&self, ready: Ready);
}

/// The wait of the poll functions (`poll_readable`, `AsyncRead`, ...):
/// they have no value that lives as long as the wait.
struct PolledWait<'a>(&'a Source, Direction);

impl WaitReady for PolledWait<'_> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready> {
        self.0.poll_ready(self.1, cx)
    }

    fn clear_ready(&self, ready: Ready) {
        self.0.clear_ready(self.1, ready);
    }
}

impl WaitReady for Waiter<'_> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready> {
        Waiter::poll_ready(self, cx)
    }

    fn clear_ready(&self, ready: Ready) {
        Waiter::clear_ready(self, ready);
    }
}

/// Tries `op` while the kept readiness allows, clearing it when `op` says
/// `WouldBlock` (`source`, "The protocol"). For the poll functions.
fn poll_io<R>(
    source: &Source,
    direction: Direction,
    cx: &mut Context<'_>,
    op: impl FnMut() -> io::Result<R>,
) -> Poll<io::Result<R>> {
    poll_until_blocked(&mut PolledWait(source, direction), cx, op, |_| false)
}

/// [`poll_io`] for a read or write of `len` bytes: on a stream socket
/// (`stream_socket`), a transfer of less than `len` (but not the zero of
/// end-of-file, after which reads must go on returning it) also clears the
/// readiness it used (see the `stream_socket` field of [`Async`]).
fn poll_bytes(
    source: &Source,
    direction: Direction,
    stream_socket: bool,
    len: usize,
    cx: &mut Context<'_>,
    op: impl FnMut() -> io::Result<usize>,
) -> Poll<io::Result<usize>> {
    poll_until_blocked(&mut PolledWait(source, direction), cx, op, |&n| {
        stream_socket && n > 0 && n < len
    })
}

/// The loop of [`poll_io`] and [`poll_bytes`]: `drained` says whether a
/// successful result also used up the readiness.
fn poll_until_blocked<R>(
    wait: &mut impl WaitReady,
    cx: &mut Context<'_>,
    mut op: impl FnMut() -> io::Result<R>,
    drained: impl Fn(&R) -> bool,
) -> Poll<io::Result<R>> {
    loop {
        let ready: Ready = ready!(wait.poll_ready(cx));
        match op() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait.clear_ready(ready);
            }
            Ok(done) => {
                if drained(&done) {
                    wait.clear_ready(ready);
                }
                return Poll::Ready(Ok(done));
            }
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

impl<T> Drop for Async<T> {
    fn drop(&mut self) {
        if self.io.is_some() {
            // Deregistered before the descriptor closes (the `io` field
            // drops after this body), so its number is never registered
            // twice. A failure here has no one to report to.
            let _ = self.reactor.deregister(self.key, self.fd);
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Async").field("io", &self.io).finish()
    }
}

impl<T> AsRef<T> for Async<T> {
    fn as_ref(&self) -> &T {
        self.get_ref()
    }
}

impl<T: AsRawFd> AsRawFd for Async<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

impl<T: AsFd> AsFd for Async<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

impl<T: Read> AsyncRead for Async<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let io = this
            .io
            .as_mut()
            .expect("an Async holds its I/O until it is dropped");
        let len = buf.len();
        poll_bytes(
            &this.source,
            Direction::Read,
            this.stream_socket,
            len,
            cx,
            || io.read(buf),
        )
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let io = this
            .io
            .as_mut()
            .expect("an Async holds its I/O until it is dropped");
        let len = bufs.iter().map(|b| b.len()).sum();
        poll_bytes(
            &this.source,
            Direction::Read,
            this.stream_socket,
            len,
            cx,
            || io.read_vectored(bufs),
        )
    }
}

impl<T> AsyncRead for &Async<T>
where
    for<'a> &'a T: Read,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this: &Async<T> = self.get_mut();
        let len = buf.len();
        poll_bytes(
            &this.source,
            Direction::Read,
            this.stream_socket,
            len,
            cx,
            || this.get_ref().read(buf),
        )
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        let this: &Async<T> = self.get_mut();
        let len = bufs.iter().map(|b| b.len()).sum();
        poll_bytes(
            &this.source,
            Direction::Read,
            this.stream_socket,
            len,
            cx,
            || this.get_ref().read_vectored(bufs),
        )
    }
}

impl<T: Write> AsyncWrite for Async<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let io = this
            .io
            .as_mut()
            .expect("an Async holds its I/O until it is dropped");
        let len = buf.len();
        poll_bytes(
            &this.source,
            Direction::Write,
            this.stream_socket,
            len,
            cx,
            || io.write(buf),
        )
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let io = this
            .io
            .as_mut()
            .expect("an Async holds its I/O until it is dropped");
        let len = bufs.iter().map(|b| b.len()).sum();
        poll_bytes(
            &this.source,
            Direction::Write,
            this.stream_socket,
            len,
            cx,
            || io.write_vectored(bufs),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let io = this
            .io
            .as_mut()
            .expect("an Async holds its I/O until it is dropped");
        poll_io(&this.source, Direction::Write, cx, || io.flush())
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl<T> AsyncWrite for &Async<T>
where
    for<'a> &'a T: Write,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this: &Async<T> = self.get_mut();
        let len = buf.len();
        poll_bytes(
            &this.source,
            Direction::Write,
            this.stream_socket,
            len,
            cx,
            || this.get_ref().write(buf),
        )
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this: &Async<T> = self.get_mut();
        let len = bufs.iter().map(|b| b.len()).sum();
        poll_bytes(
            &this.source,
            Direction::Write,
            this.stream_socket,
            len,
            cx,
            || this.get_ref().write_vectored(bufs),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this: &Async<T> = self.get_mut();
        poll_io(&this.source, Direction::Write, cx, || {
            this.get_ref().flush()
        })
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// `TryFrom` for the standard socket types, as `Async::new`.
macro_rules! try_from_std {
    ($($ty:ty),*) => {$(
        impl TryFrom<$ty> for Async<$ty> {
            type Error = io::Error;

            fn try_from(io: $ty) -> io::Result<Self> {
                Async::new(io)
            }
        }
    )*};
}

try_from_std!(
    std::net::TcpListener,
    std::net::TcpStream,
    std::net::UdpSocket,
    std::os::unix::net::UnixListener,
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixDatagram
);
