//! The Unix-domain sockets on the reactor: [`Async`]'s constructors and
//! calls for Unix listeners, streams and datagram sockets.

use super::inet::start_connect;
use super::Async;
use futures_lite::Stream;
use std::io;
use std::os::unix::net::{self as unix, UnixDatagram, UnixListener, UnixStream};
use std::path::Path;

impl Async<UnixListener> {
    /// A Unix stream listener bound to `path` (which must not exist).
    ///
    /// # Errors
    ///
    /// The path exists or is not writable, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixListener;
    /// use tidepool::Async;
    ///
    /// let path = std::env::temp_dir().join(format!("tidepool-doc-{}.sock", std::process::id()));
    /// let listener = Async::<UnixListener>::bind(&path)?;
    /// # drop(listener);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<Async<UnixListener>> {
        Async::new(UnixListener::bind(path)?)
    }

    /// Waits for the next connection; returns it and the peer's address.
    ///
    /// # Errors
    ///
    /// The OS failed the accept.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::{UnixListener, UnixStream};
    /// use tidepool::Async;
    ///
    /// let path = std::env::temp_dir().join(format!("tidepool-accept-{}.sock", std::process::id()));
    /// let listener = Async::<UnixListener>::bind(&path)?;
    /// let _client = UnixStream::connect(&path)?;
    /// let (stream, _peer) = tidepool::block_on(listener.accept())?;
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn accept(&self) -> io::Result<(Async<UnixStream>, unix::SocketAddr)> {
        let (stream, addr) = self.read_with(UnixListener::accept).await?;
        Ok((Async::new(stream)?, addr))
    }

    /// The incoming connections as a stream (never ends).
    ///
    /// # Examples
    ///
    /// ```
    /// use futures_lite::StreamExt;
    /// use std::os::unix::net::{UnixListener, UnixStream};
    /// use tidepool::Async;
    ///
    /// let path = std::env::temp_dir().join(format!("tidepool-inc-{}.sock", std::process::id()));
    /// let listener = Async::<UnixListener>::bind(&path)?;
    /// let _client = UnixStream::connect(&path)?;
    /// let stream = tidepool::block_on(listener.incoming().next()).unwrap()?;
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn incoming(
        &self,
    ) -> impl Stream<Item = io::Result<Async<UnixStream>>> + Send + Unpin + '_ {
        // Boxed to be `Unpin`: `incoming().next().await` needs no pinning.
        Box::pin(futures_lite::stream::unfold(self, |listener| async move {
            let next = listener.accept().await.map(|(stream, _)| stream);
            Some((next, listener))
        }))
    }
}

impl Async<UnixStream> {
    /// Connects to the Unix socket at `path`; the wait holds no thread.
    ///
    /// # Errors
    ///
    /// Nothing listens there, or the OS failed the connect.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::{UnixListener, UnixStream};
    /// use tidepool::Async;
    ///
    /// let path = std::env::temp_dir().join(format!("tidepool-conn-{}.sock", std::process::id()));
    /// let _listener = UnixListener::bind(&path)?;
    /// let stream = tidepool::block_on(Async::<UnixStream>::connect(&path))?;
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect<P: AsRef<Path>>(path: P) -> io::Result<Async<UnixStream>> {
        let addr = socket2::SockAddr::unix(path)?;
        let socket = start_connect(socket2::Domain::UNIX, &addr)?;
        let stream =
            Async::new_stream_socket(UnixStream::from(std::os::fd::OwnedFd::from(socket)))?;
        stream.connect_ended().await?;
        if let Some(error) = stream.get_ref().take_error()? {
            return Err(error);
        }
        // Writable is also what a failed connect looks like on Linux.
        stream.get_ref().peer_addr()?;
        Ok(stream)
    }

    /// A connected pair of unnamed Unix stream sockets.
    ///
    /// # Errors
    ///
    /// The OS refused the sockets, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use tidepool::io::{AsyncReadExt, AsyncWriteExt};
    /// use tidepool::Async;
    ///
    /// let (mut a, mut b) = Async::<UnixStream>::pair()?;
    /// let mut buf = [0; 2];
    /// tidepool::block_on(async {
    ///     a.write_all(b"hi").await?;
    ///     b.read_exact(&mut buf).await
    /// })?;
    /// assert_eq!(&buf, b"hi");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn pair() -> io::Result<(Async<UnixStream>, Async<UnixStream>)> {
        let (a, b) = UnixStream::pair()?;
        Ok((Async::new(a)?, Async::new(b)?))
    }
}

impl Async<UnixDatagram> {
    /// A Unix datagram socket bound to `path`.
    ///
    /// # Errors
    ///
    /// The path exists or is not writable, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let path = std::env::temp_dir().join(format!("tidepool-dgram-{}.sock", std::process::id()));
    /// let socket = Async::<UnixDatagram>::bind(&path)?;
    /// # drop(socket);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<Async<UnixDatagram>> {
        Async::new(UnixDatagram::bind(path)?)
    }

    /// A Unix datagram socket bound to no path.
    ///
    /// # Errors
    ///
    /// The OS refused the socket, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let socket = Async::<UnixDatagram>::unbound()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn unbound() -> io::Result<Async<UnixDatagram>> {
        Async::new(UnixDatagram::unbound()?)
    }

    /// A connected pair of unnamed Unix datagram sockets.
    ///
    /// # Errors
    ///
    /// The OS refused the sockets, or the reactor failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let (a, b) = Async::<UnixDatagram>::pair()?;
    /// let mut buf = [0; 2];
    /// let n = tidepool::block_on(async {
    ///     a.send(b"hi").await?;
    ///     b.recv(&mut buf).await
    /// })?;
    /// assert_eq!(&buf[..n], b"hi");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn pair() -> io::Result<(Async<UnixDatagram>, Async<UnixDatagram>)> {
        let (a, b) = UnixDatagram::pair()?;
        Ok((Async::new(a)?, Async::new(b)?))
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
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let (a, b) = Async::<UnixDatagram>::pair()?;
    /// let mut buf = [0; 8];
    /// let (n, _from) = tidepool::block_on(async {
    ///     a.send(b"hi").await?;
    ///     b.recv_from(&mut buf).await
    /// })?;
    /// assert_eq!(n, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, unix::SocketAddr)> {
        self.read_with(|io| io.recv_from(buf)).await
    }

    /// Sends one datagram to the socket at `path`.
    ///
    /// # Errors
    ///
    /// Nothing is bound there, or the OS failed the send.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let path = std::env::temp_dir().join(format!("tidepool-send-{}.sock", std::process::id()));
    /// let to = UnixDatagram::bind(&path)?;
    /// let socket = Async::<UnixDatagram>::unbound()?;
    /// assert_eq!(tidepool::block_on(socket.send_to(b"hi", &path))?, 2);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to<P: AsRef<Path>>(&self, buf: &[u8], path: P) -> io::Result<usize> {
        let path = path.as_ref();
        self.write_with(|io| io.send_to(buf, path)).await
    }

    /// Receives one datagram from the connected peer.
    ///
    /// # Errors
    ///
    /// Not connected, or the OS failed the receive.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let (a, b) = Async::<UnixDatagram>::pair()?;
    /// let mut buf = [0; 8];
    /// let n = tidepool::block_on(async {
    ///     a.send(b"hi").await?;
    ///     b.recv(&mut buf).await
    /// })?;
    /// assert_eq!(n, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(|io| io.recv(buf)).await
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
    /// use std::os::unix::net::UnixDatagram;
    /// use tidepool::Async;
    ///
    /// let (a, _b) = Async::<UnixDatagram>::pair()?;
    /// assert_eq!(tidepool::block_on(a.send(b"hi"))?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.write_with(|io| io.send(buf)).await
    }
}
