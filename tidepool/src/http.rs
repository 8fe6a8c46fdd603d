//! Serving HTTP on the pool (cargo feature `http`): [`serve`] runs every
//! connection of a hyper or axum service as a task on the pool, and
//! [`Executor`] runs hyper's background tasks (a client's connections, an
//! HTTP/2 server's streams) there too.
//!
//! Why not `axum::serve`: it spawns every connection with `tokio::spawn`,
//! and tokio runs those only on its own runtime's workers, never on the
//! pool. With the `tokio` feature that is the shared runtime, whose
//! workers are gated to the cores and watched for blocks (see the crate
//! docs, "tokio-based crates"), but the pool does not learn the blocking
//! calls there, and the handlers do not share the pool's slots, queues and
//! priorities. With [`serve`], a handler is a task on the pool like any
//! other: a blocking call inside it is detected and its slot handed over,
//! and its kind learned.
//!
//! ```no_run
//! # async fn handler() -> &'static str { "" }
//! use axum::{routing::get, Router};
//!
//! let app = Router::new().route("/", get(|| async {
//!     // Plain blocking code is fine here: the pool sees the block and
//!     // hands the slot to another worker.
//!     std::thread::sleep(std::time::Duration::from_millis(5));
//!     "hello"
//! }));
//! tidepool::block_on(async {
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     tidepool::http::serve(listener, app).await
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The server speaks HTTP/1.1 with keep-alive, as `axum::serve` does by
//! default.

use crate::Pool;
use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::error::Error as StdError;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::pin::Pin;
use std::time::Duration;
use tokio::net::TcpListener;

/// What an error of a service or a body must convert into.
type BoxError = Box<dyn StdError + Send + Sync>;

/// A future that ends the server when it completes.
type Signal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves `service` on every connection `listener` accepts, each
/// connection a task on the current pool (the pool running the caller, or
/// the global pool outside any pool).
///
/// Await it (inside [`block_on`](crate::block_on), or a task); it runs
/// until the shutdown signal of [`Serve::with_graceful_shutdown`]
/// completes, or forever. `service` is any tower service of hyper
/// requests: an axum `Router`, or `tower::service_fn(...)`. It is cloned
/// for each connection.
///
/// Accept errors (a peer that reset before the accept, or the process out
/// of file descriptors) do not stop the server: it waits a millisecond and
/// accepts again, as `axum::serve` does.
///
/// A server never ends by itself, so [`Pool::shutdown`], which runs every
/// task to its end, would wait for it forever: stop it first with
/// [`Serve::with_graceful_shutdown`], or use [`Pool::shutdown_timeout`],
/// which cancels the accept loop and the idle connections (they wait for a
/// wake) and so closes them.
///
/// ```no_run
/// use axum::{routing::get, Router};
///
/// let app = Router::new().route("/", get(|| async { "hello" }));
/// tidepool::block_on(async {
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
///     tidepool::http::serve(listener, app).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    Serve {
        listener,
        service,
        signal: None,
    }
}

/// A server made by [`serve`]: await it to run it.
#[must_use = "a server does nothing until it is awaited"]
pub struct Serve<S> {
    listener: TcpListener,
    service: S,
    signal: Option<Signal>,
}

impl<S> fmt::Debug for Serve<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("graceful_shutdown", &self.signal.is_some())
            .finish_non_exhaustive()
    }
}

impl<S> Serve<S> {
    /// Stops the server once `signal` completes: it accepts no more
    /// connections, tells every open one to close after the request it is
    /// serving (idle keep-alive connections close at once), and ends when
    /// all have closed.
    ///
    /// ```
    /// # #[cfg(feature = "http")] {
    /// use axum::{routing::get, Router};
    ///
    /// let app = Router::new().route("/", get(|| async { "hello" }));
    /// let served = tidepool::block_on(async {
    ///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     // A signal that is already done: the server stops at once.
    ///     tidepool::http::serve(listener, app)
    ///         .with_graceful_shutdown(async {})
    ///         .await
    /// });
    /// assert!(served.is_ok());
    /// # }
    /// ```
    pub fn with_graceful_shutdown<F>(mut self, signal: F) -> Serve<S>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.signal = Some(Box::pin(signal));
        self
    }
}

impl<S, B> IntoFuture for Serve<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(run(self))
    }
}

/// What the accept loop woke for.
enum Next {
    Accepted(io::Result<tokio::net::TcpStream>),
    Stop,
}

async fn run<S, B>(server: Serve<S>) -> io::Result<()>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let Serve {
        listener,
        service,
        signal,
    } = server;
    let mut signal: Signal = signal.unwrap_or_else(|| Box::pin(std::future::pending()));
    let graceful = GracefulShutdown::new();
    let http1 = hyper::server::conn::http1::Builder::new();
    loop {
        let accept = async { Next::Accepted(listener.accept().await.map(|(stream, _)| stream)) };
        let stop = async {
            (&mut signal).await;
            Next::Stop
        };
        match futures_lite::future::or(stop, accept).await {
            Next::Stop => break,
            Next::Accepted(Ok(stream)) => {
                // Small responses go out at once, as axum's serve does.
                let _ = stream.set_nodelay(true);
                let connection = http1.serve_connection(
                    TokioIo::new(stream),
                    TowerToHyperService::new(service.clone()),
                );
                let connection = graceful.watch(connection);
                // Detached: the connection's task ends when it closes.
                drop(crate::spawn(async move {
                    // A connection's error (a peer that went away
                    // mid-request) is that connection's alone.
                    let _ = connection.await;
                }));
            }
            Next::Accepted(Err(_)) => {
                // Out of descriptors, or a peer gone before the accept:
                // wait a little, then accept again.
                crate::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Runs hyper's background tasks on a pool: give it to hyper-util's
/// client (`Client::builder(Executor::current())`) so its connections'
/// tasks run on the pool instead of the shared tokio runtime, or to an
/// HTTP/2 server builder.
///
/// ```
/// # #[cfg(feature = "http")] {
/// use hyper::rt::Executor as _;
///
/// let pool = tidepool::Pool::builder().build().unwrap();
/// let executor = tidepool::http::Executor::on(&pool);
/// let (sent, received) = std::sync::mpsc::channel();
/// executor.execute(async move { sent.send("ran on the pool").unwrap() });
/// assert_eq!(received.recv().unwrap(), "ran on the pool");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Executor {
    /// `None`: the current pool at each spawn.
    pool: Option<Pool>,
}

impl Executor {
    /// Spawns on the pool running the caller now, or on the current pool
    /// at each spawn if the caller is on no pool (the global pool outside
    /// any pool).
    ///
    /// ```
    /// # #[cfg(feature = "http")] {
    /// let executor = tidepool::http::Executor::current();
    /// # let _ = executor;
    /// # }
    /// ```
    pub fn current() -> Executor {
        Executor {
            pool: Pool::current(),
        }
    }

    /// Spawns on `pool`.
    ///
    /// ```
    /// # #[cfg(feature = "http")] {
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let executor = tidepool::http::Executor::on(&pool);
    /// # let _ = executor;
    /// # }
    /// ```
    pub fn on(pool: &Pool) -> Executor {
        Executor {
            pool: Some(pool.clone()),
        }
    }
}

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        // Detached, as tokio's executor does.
        match &self.pool {
            Some(pool) => drop(pool.spawn(future)),
            None => drop(crate::spawn(future)),
        }
    }
}
