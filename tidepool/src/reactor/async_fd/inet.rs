//! The Internet sockets on the reactor: [`Async`]'s constructors and
//! calls for TCP listeners and streams and UDP sockets, and the
//! non-blocking connect the Unix streams share.

use super::Async;
use futures_lite::Stream;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};

/// Starts a non-blocking connect of a new socket of `domain` to `addr`;
/// the socket becomes writable when the connect ends.
pub(super) fn start_connect(
    domain: socket2::Domain,
    addr: &socket2::SockAddr,
) -> io::Result<socket2::Socket> {
    let socket = born_nonblocking::stream_socket(domain)?;
    match socket.connect(addr) {
        Ok(()) => Ok(socket),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(socket),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(socket),
        Err(e) => Err(e),
    }
}

/// Sockets made non-blocking (and close-on-exec) by the call that creates
/// them, where the OS takes `SOCK_NONBLOCK` in `socket` and `accept4`, as
/// tokio's are: two `fcntl` calls fewer per connect and per accept than
/// making them so afterwards (docs/measurements.md, "System calls and
/// allocations per connection"). Linux and Android here; elsewhere the
/// `fcntl` calls.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod born_nonblocking {
    use std::io;
    use std::os::fd::AsFd;

    /// A new stream socket of `domain`.
    pub(super) fn stream_socket(domain: socket2::Domain) -> io::Result<socket2::Socket> {
        socket2::Socket::new(domain, socket2::Type::STREAM.nonblocking(), None)
    }

    /// The next connection on `listener` (non-blocking).
    pub(super) fn accept<L: AsFd>(
        listener: &L,
    ) -> io::Result<(socket2::Socket, socket2::SockAddr)> {
        socket2::SockRef::from(listener).accept4(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK)
    }
}

/// See the module of the same name above: made non-blocking after.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod born_nonblocking {
    use std::io;
    use std::os::fd::AsFd;

    /// A new stream socket of `domain`.
    pub(super) fn stream_socket(domain: socket2::Domain) -> io::Result<socket2::Socket> {
        let socket = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        Ok(socket)
    }

    /// The next connection on `listener` (non-blocking).
    pub(super) fn accept<L: AsFd>(
        listener: &L,
    ) -> io::Result<(socket2::Socket, socket2::SockAddr)> {
        let (socket, addr) = socket2::SockRef::from(listener).accept()?;
        socket.set_nonblocking(true)?;
        Ok((socket, addr))
    }
}

/// The listen backlog of [`Async::<TcpListener>::bind`]: tokio's, and
/// 8 times the standard library's 128.
const DEFAULT_BACKLOG: u32 = 1024;

impl Async<TcpListener> {
    /// A TCP listener bound to `addr` (port 0 picks a free port), with a
    /// listen backlog of 1,024 connections, as tokio's (the standard
    /// library's is 128): see [`bind_with_backlog`](Async::<TcpListener>::bind_with_backlog).
    ///
    /// # Errors
    ///
    /// The address is taken or not local, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::TcpListener;
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// println!("listening on {}", listener.get_ref().local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<A: Into<SocketAddr>>(addr: A) -> io::Result<Async<TcpListener>> {
        Async::<TcpListener>::bind_with_backlog(addr, DEFAULT_BACKLOG)
    }

    /// A TCP listener bound to `addr` whose queue of connections not yet
    /// accepted holds up to `backlog` (the kernel caps it at its own limit,
    /// `net.core.somaxconn` on Linux). [`bind`](Async::<TcpListener>::bind)
    /// uses 1,024, as tokio does; the standard library's `TcpListener::bind`
    /// uses 128, which a burst of connections overflows (the peers then
    /// wait for their SYN to be sent again, a second or more).
    ///
    /// # Errors
    ///
    /// The address is taken or not local, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::TcpListener;
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind_with_backlog(([127, 0, 0, 1], 0), 4096)?;
    /// # drop(listener);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind_with_backlog<A: Into<SocketAddr>>(
        addr: A,
        backlog: u32,
    ) -> io::Result<Async<TcpListener>> {
        let addr = addr.into();
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )?;
        // As the standard library's bind: a restarted server can bind its
        // port while old connections linger in TIME_WAIT.
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        Async::new(TcpListener::from(socket))
    }

    /// Waits for the next connection; returns it and the peer's address.
    ///
    /// # Errors
    ///
    /// The OS failed the accept (for example, out of descriptors).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::{TcpListener, TcpStream};
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// let client = TcpStream::connect(listener.get_ref().local_addr()?)?;
    /// let (stream, peer) = tidepool::block_on(listener.accept())?;
    /// assert_eq!(peer, client.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn accept(&self) -> io::Result<(Async<TcpStream>, SocketAddr)> {
        let (socket, addr) = self.read_with(born_nonblocking::accept).await?;
        let addr = addr.as_socket().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "a TCP accept returned an address that is not an Internet one",
            )
        })?;
        Ok((Async::new_stream_socket(TcpStream::from(socket))?, addr))
    }

    /// The incoming connections as a stream (never ends; each item is an
    /// [`accept`](Async::<TcpListener>::accept)).
    ///
    /// # Examples
    ///
    /// ```
    /// use futures_lite::StreamExt;
    /// use std::net::{TcpListener, TcpStream};
    /// use tidepool::Async;
    ///
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// let _client = TcpStream::connect(listener.get_ref().local_addr()?)?;
    /// let mut incoming = listener.incoming();
    /// let stream = tidepool::block_on(incoming.next()).unwrap()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn incoming(&self) -> impl Stream<Item = io::Result<Async<TcpStream>>> + Send + Unpin + '_ {
        // Boxed to be `Unpin`: `incoming().next().await` needs no pinning.
        Box::pin(futures_lite::stream::unfold(self, |listener| async move {
            let next = listener.accept().await.map(|(stream, _)| stream);
            Some((next, listener))
        }))
    }
}

impl Async<TcpStream> {
    /// Connects to `addr`; the wait holds no thread.
    ///
    /// # Errors
    ///
    /// The connection was refused, timed out or failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::{TcpListener, TcpStream};
    /// use tidepool::Async;
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?;
    /// let stream = tidepool::block_on(Async::<TcpStream>::connect(addr))?;
    /// assert_eq!(stream.get_ref().peer_addr()?, addr);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect<A: Into<SocketAddr>>(addr: A) -> io::Result<Async<TcpStream>> {
        let addr = addr.into();
        let socket = start_connect(socket2::Domain::for_address(addr), &addr.into())?;
        let stream = Async::new_stream_socket(TcpStream::from(socket))?;
        stream.connect_ended().await?;
        match stream.get_ref().take_error()? {
            None => Ok(stream),
            Some(error) => Err(error),
        }
    }

    /// Reads without taking the data from the socket's buffer.
    ///
    /// # Errors
    ///
    /// The OS failed the read.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// use std::net::{TcpListener, TcpStream};
    /// use tidepool::Async;
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let stream = tidepool::block_on(Async::<TcpStream>::connect(listener.local_addr()?))?;
    /// listener.accept()?.0.write_all(b"hello")?;
    /// let mut buf = [0; 5];
    /// let n = tidepool::block_on(stream.peek(&mut buf))?;
    /// assert!(n > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(|io| io.peek(buf)).await
    }
}

impl Async<UdpSocket> {
    /// A UDP socket bound to `addr`.
    ///
    /// # Errors
    ///
    /// The address is taken or not local, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<A: Into<SocketAddr>>(addr: A) -> io::Result<Async<UdpSocket>> {
        Async::new(UdpSocket::bind(addr.into())?)
    }

    /// Receives one datagram; returns its length and sender.
    ///
    /// # Errors
    ///
    /// The OS failed the receive.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let sender = UdpSocket::bind("127.0.0.1:0")?;
    /// sender.send_to(b"hi", socket.get_ref().local_addr()?)?;
    /// let mut buf = [0; 8];
    /// let (n, from) = tidepool::block_on(socket.recv_from(&mut buf))?;
    /// assert_eq!((n, from), (2, sender.local_addr()?));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.read_with(|io| io.recv_from(buf)).await
    }

    /// Receives one datagram without taking it from the queue.
    ///
    /// # Errors
    ///
    /// The OS failed the receive.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// UdpSocket::bind("127.0.0.1:0")?.send_to(b"hi", socket.get_ref().local_addr()?)?;
    /// let mut buf = [0; 8];
    /// let (n, _) = tidepool::block_on(socket.peek_from(&mut buf))?;
    /// assert_eq!(tidepool::block_on(socket.recv_from(&mut buf))?.0, n);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.read_with(|io| io.peek_from(buf)).await
    }

    /// Sends one datagram to `addr`; returns the bytes sent.
    ///
    /// # Errors
    ///
    /// The OS failed the send.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let to = UdpSocket::bind("127.0.0.1:0")?;
    /// assert_eq!(tidepool::block_on(socket.send_to(b"hi", to.local_addr()?))?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to<A: Into<SocketAddr>>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let addr = addr.into();
        self.write_with(|io| io.send_to(buf, addr)).await
    }

    /// Receives one datagram from the connected peer (see
    /// [`UdpSocket::connect`]).
    ///
    /// # Errors
    ///
    /// Not connected, or the OS failed the receive.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let peer = UdpSocket::bind("127.0.0.1:0")?;
    /// socket.get_ref().connect(peer.local_addr()?)?;
    /// peer.send_to(b"hi", socket.get_ref().local_addr()?)?;
    /// let mut buf = [0; 8];
    /// assert_eq!(tidepool::block_on(socket.recv(&mut buf))?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(|io| io.recv(buf)).await
    }

    /// Receives one datagram from the connected peer without taking it.
    ///
    /// # Errors
    ///
    /// Not connected, or the OS failed the receive.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let peer = UdpSocket::bind("127.0.0.1:0")?;
    /// socket.get_ref().connect(peer.local_addr()?)?;
    /// peer.send_to(b"hi", socket.get_ref().local_addr()?)?;
    /// let mut buf = [0; 8];
    /// assert_eq!(tidepool::block_on(socket.peek(&mut buf))?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(|io| io.peek(buf)).await
    }

    /// Sends one datagram to the connected peer.
    ///
    /// # Errors
    ///
    /// Not connected, or the OS failed the send.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::UdpSocket;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0))?;
    /// let peer = UdpSocket::bind("127.0.0.1:0")?;
    /// socket.get_ref().connect(peer.local_addr()?)?;
    /// assert_eq!(tidepool::block_on(socket.send(b"hi"))?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.write_with(|io| io.send(buf)).await
    }
}
