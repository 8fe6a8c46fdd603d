//! tidepool's own reactor behind `Async`: sockets under load (the workers
//! poll it between tasks while its thread stands aside), readiness that is
//! kept but never reported for a drained socket, end-of-file, failed
//! connects, and deregistration.
#![cfg(unix)]

mod common;

use common::{within, HANG};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::task::{Context, Poll, Waker};
use tidepool::io::{AsyncReadExt, AsyncWriteExt};
use tidepool::{Async, Pool};

/// Many connections making round trips at once on a two-worker pool: the
/// events come densely into busy workers, which is when the reactor's
/// thread steps aside and the workers poll. Every echo must come back
/// intact, and every client must finish.
#[test]
fn many_connections_echo_intact_on_busy_workers() {
    within(HANG, || {
        const CONNECTIONS: usize = 100;
        const ROUND_TRIPS: usize = 200;
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let server = pool.spawn(async move {
            for _ in 0..CONNECTIONS {
                let (stream, _) = listener.accept().await.unwrap();
                drop(tidepool::spawn(async move {
                    let mut buf = [0u8; 256];
                    loop {
                        match (&stream).read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => (&stream).write_all(&buf[..n]).await.unwrap(),
                        }
                    }
                }));
            }
        });
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|client| {
                pool.spawn(async move {
                    let mut stream = Async::<TcpStream>::connect(addr).await.unwrap();
                    stream.get_ref().set_nodelay(true).unwrap();
                    for trip in 0..ROUND_TRIPS {
                        let message = format!("{client:04}:{trip:04};");
                        stream.write_all(message.as_bytes()).await.unwrap();
                        let mut back = vec![0u8; message.len()];
                        stream.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, message.as_bytes(), "client {client} trip {trip}");
                    }
                    ROUND_TRIPS
                })
            })
            .collect();
        let trips: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(trips, CONNECTIONS * ROUND_TRIPS);
        server.join().unwrap();
    });
}

/// A `Waker` that does nothing, for polling by hand.
fn noop_waker() -> Waker {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    Waker::from(std::sync::Arc::new(Noop))
}

/// Readiness the reactor saw is kept, but `readable` is for callers who
/// read on their own: once they drained the socket it must wait for new
/// data, not report the old event again (a caller's loop would spin).
/// A wait given up on a quiet socket (a request with a timeout, say)
/// must not leave the waiting task behind: the socket would keep one task
/// per timed-out request until data came, which may be never.
#[test]
fn a_cancelled_wait_on_a_quiet_socket_keeps_no_reference_to_its_task() {
    use std::future::Future;
    use std::sync::Arc;
    use std::task::Wake;

    struct Task;
    impl Wake for Task {
        fn wake(self: Arc<Self>) {}
    }

    within(HANG, || {
        let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0)).unwrap();
        let task = Arc::new(Task);
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 16];
        for _ in 0..100 {
            let mut recv = Box::pin(socket.recv_from(&mut buf));
            assert!(recv.as_mut().poll(&mut cx).is_pending(), "nothing was sent");
            let mut ready = Box::pin(socket.readable());
            assert!(ready.as_mut().poll(&mut cx).is_pending());
            // Both waits given up.
        }
        assert_eq!(
            Arc::strong_count(&task),
            2,
            "the socket keeps no waker of the waits given up"
        );
        // And a wait still pending is woken when data comes.
        let mut recv = Box::pin(socket.recv_from(&mut buf));
        let noop = noop_waker();
        assert!(recv
            .as_mut()
            .poll(&mut Context::from_waker(&noop))
            .is_pending());
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .send_to(b"hi", socket.get_ref().local_addr().unwrap())
            .unwrap();
        let (n, _) = tidepool::block_on(recv).unwrap();
        assert_eq!(&buf[..n], b"hi");
    });
}

#[test]
fn readable_waits_again_once_the_caller_drained_the_socket() {
    within(HANG, || {
        let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = socket.get_ref().local_addr().unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(b"one", addr).unwrap();
        tidepool::block_on(socket.readable()).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(socket.get_ref().recv(&mut buf).unwrap(), 3);

        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(
            socket.poll_readable(&mut cx).is_pending(),
            "drained: not readable"
        );
        sender.send_to(b"two", addr).unwrap();
        tidepool::block_on(socket.readable()).unwrap();
        assert_eq!(socket.get_ref().recv(&mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"two");
    });
}

/// A stream socket's short reads clear the readiness they used; the zero
/// of end-of-file must not, or a second read after it would wait forever.
#[test]
fn end_of_file_is_returned_to_every_read() {
    within(HANG, || {
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let mut ours_async = Async::new(ours.try_clone().unwrap()).unwrap();
        drop(ours);
        let mut theirs = theirs;
        theirs.write_all(b"last words").unwrap();
        theirs.shutdown(Shutdown::Write).unwrap();
        let mut text = String::new();
        tidepool::block_on(ours_async.read_to_string(&mut text)).unwrap();
        assert_eq!(text, "last words");
        let mut buf = [0u8; 4];
        for _ in 0..3 {
            assert_eq!(tidepool::block_on(ours_async.read(&mut buf)).unwrap(), 0);
        }
        drop(theirs);
        ours = ours_async.into_inner().unwrap();
        assert_eq!(
            ours.read(&mut buf).unwrap(),
            0,
            "into_inner keeps the socket"
        );
    });
}

/// Data written in pieces smaller than the reader's buffer, each read
/// short: every piece still arrives (a short read clears readiness, and
/// the next piece's edge sets it again).
#[test]
fn a_stream_written_in_small_pieces_arrives_whole() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let (a, b) = Async::<UnixStream>::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let mut b = b.into_inner().unwrap();
            b.set_nonblocking(false).unwrap();
            for i in 0..1000u32 {
                b.write_all(&i.to_le_bytes()).unwrap();
                if i % 100 == 0 {
                    std::thread::yield_now();
                }
            }
        });
        let total = pool
            .spawn(async move {
                let mut a = a;
                let mut all = Vec::new();
                let mut buf = [0u8; 1024];
                loop {
                    match a.read(&mut buf).await.unwrap() {
                        0 => return all,
                        n => all.extend_from_slice(&buf[..n]),
                    }
                }
            })
            .join()
            .unwrap();
        writer.join().unwrap();
        let expected: Vec<u8> = (0..1000u32).flat_map(u32::to_le_bytes).collect();
        assert_eq!(total, expected);
    });
}

#[test]
fn a_refused_connect_reports_the_error() {
    within(HANG, || {
        // A port that was free a moment ago: nothing listens there.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let error = tidepool::block_on(Async::<TcpStream>::connect(addr)).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

/// A connect ends when the connection is made, not before: towards a
/// listener whose accept queue is full (its SYN dropped, resent a second
/// later), it waits, and ends connected once the listener makes room.
#[test]
fn a_connect_waits_while_the_listener_cannot_take_it() {
    within(HANG, || {
        let listener = Async::<TcpListener>::bind_with_backlog(([127, 0, 0, 1], 0), 0).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        // Fill the accept queue: connects that complete, until one cannot.
        let mut queued = Vec::new();
        loop {
            match TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(200)) {
                Ok(stream) => queued.push(stream),
                Err(_) => break,
            }
            assert!(queued.len() < 64, "the accept queue never filled");
        }
        let connect = tidepool::spawn(Async::<TcpStream>::connect(addr));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !connect.is_finished(),
            "the connect ended while the listener's queue was full"
        );
        // Make room: the SYN's resend is taken, and the connect ends.
        let mut accepted = Vec::new();
        for _ in 0..queued.len() {
            accepted.push(tidepool::block_on(listener.accept()).unwrap());
        }
        let mut client = connect.join().unwrap().unwrap();
        assert_eq!(client.get_ref().peer_addr().unwrap(), addr);
        let (mut server, peer) = tidepool::block_on(listener.accept()).unwrap();
        assert_eq!(peer, client.get_ref().local_addr().unwrap());
        tidepool::block_on(async {
            client.write_all(b"!").await.unwrap();
            let mut byte = [0u8; 1];
            server.read_exact(&mut byte).await.unwrap();
            assert_eq!(&byte, b"!");
        });
    });
}

/// A connected stream and an accepted one are both non-blocking (a read
/// with nothing to read returns `WouldBlock` at once instead of holding a
/// worker), and the accept names the peer that connected.
#[test]
fn connected_and_accepted_streams_are_non_blocking_and_the_accept_names_the_peer() {
    within(HANG, || {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let accepted = tidepool::spawn(async move { listener.accept().await });
        let client = tidepool::block_on(Async::<TcpStream>::connect(addr)).unwrap();
        let (server, peer) = tidepool::block_on(accepted).unwrap().unwrap();
        assert_eq!(peer, client.get_ref().local_addr().unwrap());
        assert_eq!(server.get_ref().peer_addr().unwrap(), peer);
        for stream in [client.get_ref(), server.get_ref()] {
            let mut buf = [0u8; 1];
            let error = (&*stream).read(&mut buf).unwrap_err();
            assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock);
            assert!(
                close_on_exec(stream),
                "a child process would inherit the socket"
            );
        }
    });
}

/// Whether `fd` is closed in a child after `exec` (the standard library's
/// sockets are; tidepool's own must be too).
fn close_on_exec(fd: &impl std::os::fd::AsRawFd) -> bool {
    // SAFETY: `F_GETFD` reads no memory; the descriptor is open (borrowed).
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    assert!(flags >= 0, "fcntl: {}", std::io::Error::last_os_error());
    flags & libc::FD_CLOEXEC != 0
}

/// Sockets made and dropped in a loop reuse descriptor numbers: each must
/// be deregistered before its number comes back, and the new socket must
/// get its own events.
#[test]
fn dropped_sockets_leave_no_registration_behind() {
    within(HANG, || {
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..500u32 {
            let socket = Async::<UdpSocket>::bind(([127, 0, 0, 1], 0)).unwrap();
            sender
                .send_to(&i.to_le_bytes(), socket.get_ref().local_addr().unwrap())
                .unwrap();
            let mut buf = [0u8; 4];
            let (n, from) = tidepool::block_on(socket.recv_from(&mut buf)).unwrap();
            assert_eq!((n, u32::from_le_bytes(buf)), (4, i));
            assert_eq!(from, sender.local_addr().unwrap());
        }
    });
}

/// A reader and a writer on one socket, each in its own task, through
/// `&Async`: both directions wait independently.
#[test]
fn one_task_reads_while_another_writes_the_same_socket() {
    within(HANG, || {
        let pool = Pool::builder().concurrency(2).build().unwrap();
        let (ours, theirs) = Async::<UnixStream>::pair().unwrap();
        let ours = std::sync::Arc::new(ours);
        let reader = {
            let ours = ours.clone();
            pool.spawn(async move {
                let mut got = vec![0u8; 100_000];
                (&*ours).read_exact(&mut got).await.unwrap();
                got
            })
        };
        let writer = {
            let ours = ours.clone();
            pool.spawn(async move {
                // Larger than the socket buffer: waits for writability.
                (&*ours).write_all(&[7u8; 300_000]).await.unwrap();
            })
        };
        let echo = pool.spawn(async move {
            let mut theirs = theirs;
            let mut seen = 0;
            let mut buf = [0u8; 4096];
            while seen < 300_000 {
                let n = theirs.read(&mut buf).await.unwrap();
                seen += n;
            }
            theirs.write_all(&[9u8; 100_000]).await.unwrap();
            seen
        });
        assert_eq!(echo.join().unwrap(), 300_000);
        writer.join().unwrap();
        assert!(reader.join().unwrap().iter().all(|&b| b == 9));
    });
}

/// `poll_writable` on a socket whose send buffer is full is pending, and
/// becomes ready once the peer reads.
#[test]
fn writable_waits_for_room_in_the_send_buffer() {
    within(HANG, || {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let ours = Async::new(ours).unwrap();
        // Fill the send buffer.
        let chunk = [1u8; 65536];
        let mut written = 0usize;
        loop {
            match ours.get_ref().write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(ours.poll_writable(&mut cx), Poll::Pending), "full");
        let mut drained = 0usize;
        let mut buf = vec![0u8; 65536];
        while drained < written {
            drained += theirs.read(&mut buf).unwrap();
        }
        tidepool::block_on(ours.writable()).unwrap();
    });
}

/// A regular file cannot wait in epoll: the error says so and what to do
/// instead, rather than the OS's bare "Operation not permitted".
#[test]
fn a_regular_file_is_refused_with_an_explanation() {
    let path = std::env::temp_dir().join(format!("tidepool-reactor-file-{}", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let error = Async::new(file).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(error.kind(), std::io::ErrorKind::Unsupported);
    let message = error.to_string();
    assert!(message.contains("regular files"), "{message}");
    assert!(message.contains("spawn_fn"), "{message}");
}

#[test]
fn a_burst_of_connects_fits_in_the_listen_backlog() {
    within(HANG, || {
        // Nobody accepts: every connect must fit in the listen queue. With
        // the standard library's backlog of 128, the 130th connect's SYN
        // was dropped and it waited for a resend (a second or more), and
        // 200 simultaneous connects overflowed the queue thousands of times.
        let listener = Async::<std::net::TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(1024);
        let burst = 300.min(somaxconn);
        let connected: Vec<_> = (0..burst)
            .map(|i| {
                std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))
                    .unwrap_or_else(|e| panic!("connect {i} of {burst} did not fit: {e}"))
            })
            .collect();
        assert_eq!(connected.len(), burst);
        // And they are all there to accept.
        let accepted = tidepool::block_on(async {
            let mut n = 0;
            while n < burst {
                listener.accept().await.unwrap();
                n += 1;
            }
            n
        });
        assert_eq!(accepted, burst);
    });
}
