//! Serving HTTP on the pool (feature `http`) with the crates services use:
//! an axum `Router` served by `tidepool::http::serve`, hyper-util's client
//! on `tidepool::http::Executor`, reqwest (which spawns with
//! `tokio::spawn`), a database with its own connection pool (r2d2 with
//! rusqlite), plain `axum::serve`, and shutdown with connections open.
//! Network use: loopback only, a few dozen requests per test.

#![cfg(feature = "http")]

mod common;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use common::{within, Peak, HANG};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidepool::Pool;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn pool(name: &str) -> Pool {
    Pool::builder()
        .concurrency(2)
        .thread_name(name)
        .build()
        .unwrap()
}

/// A router whose handler blocks for `block` inline, records the thread
/// it ran on, and answers the thread's name.
fn blocking_router(block: Duration, asleep: Arc<Peak>, threads: Arc<Mutex<Vec<String>>>) -> Router {
    Router::new().route(
        "/",
        get(move || {
            let (asleep, threads) = (asleep.clone(), threads.clone());
            async move {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                threads.lock().unwrap().push(name.clone());
                asleep.inside(|| std::thread::sleep(block));
                name
            }
        }),
    )
}

/// Binds a loopback listener (inside a task or `block_on`: tokio's context).
async fn listener() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// GETs `url` with hyper-util's client; the status and the body.
async fn get_with(client: &HttpClient, url: String) -> (u16, String) {
    let response = client.get(url.parse().unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// GETs `paths` of `addr` at once, each from a task of its own, with
/// hyper-util's client on the pool; the statuses and bodies in order.
async fn get_all(addr: SocketAddr, paths: impl Iterator<Item = String>) -> Vec<(u16, String)> {
    let client: HttpClient = Client::builder(tidepool::http::Executor::current()).build_http();
    let requests: Vec<_> = paths
        .map(|path| {
            let client = client.clone();
            tidepool::spawn(async move { get_with(&client, format!("http://{addr}{path}")).await })
        })
        .collect();
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.unwrap());
    }
    answers
}

#[test]
fn handlers_run_on_the_pool_and_a_blocked_one_hands_its_slot_over() {
    within(HANG, || {
        let pool = pool("served");
        let asleep = Arc::new(Peak::default());
        let threads = Arc::new(Mutex::new(Vec::new()));
        let router = blocking_router(Duration::from_millis(50), asleep.clone(), threads.clone());
        let answers = pool.block_on(async {
            let (listener, addr) = listener().await;
            drop(tidepool::spawn(
                tidepool::http::serve(listener, router).into_future(),
            ));
            get_all(addr, (0..12).map(|_| "/".to_owned())).await
        });
        assert_eq!(answers.len(), 12);
        for (status, thread) in &answers {
            assert_eq!(*status, 200);
            assert!(
                thread.starts_with("served"),
                "a handler ran on {thread:?}, not on the pool"
            );
        }
        let most = asleep.most();
        assert!(
            most > 2,
            "{most} handlers blocked at once on 2 slots: a block must hand its slot over"
        );
        assert!(pool.metrics().blocked_detections >= 1);
        pool.shutdown_timeout(Duration::from_secs(5)).ok();
    });
}

#[test]
fn reqwest_in_pool_tasks_against_a_served_router() {
    within(HANG, || {
        let pool = pool("reqwest");
        let router = Router::new().route("/", get(|| async { "hi" }));
        let bodies = pool.block_on(async {
            let (listener, addr) = listener().await;
            drop(tidepool::spawn(
                tidepool::http::serve(listener, router).into_future(),
            ));
            let client = reqwest::Client::new();
            let requests: Vec<_> = (0..32)
                .map(|_| {
                    let client = client.clone();
                    tidepool::spawn(async move {
                        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
                        assert!(response.status().is_success());
                        response.text().await.unwrap()
                    })
                })
                .collect();
            let mut bodies = Vec::new();
            for request in requests {
                bodies.push(request.await.unwrap());
            }
            bodies
        });
        assert_eq!(bodies, vec!["hi".to_owned(); 32]);
        pool.shutdown_timeout(Duration::from_secs(5)).ok();
    });
}

#[test]
fn a_database_with_its_own_pool_under_concurrent_requests() {
    within(HANG, || {
        let pool = pool("db");
        let path =
            std::env::temp_dir().join(format!("tidepool-http-test-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let db = r2d2::Pool::builder()
            .max_size(4)
            .build(r2d2_sqlite::SqliteConnectionManager::file(&path))
            .unwrap();
        db.get()
            .unwrap()
            .execute_batch(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
                 INSERT INTO t SELECT i, i * 2 FROM n;",
            )
            .unwrap();
        let router = Router::new()
            .route(
                "/{id}",
                get(
                    |axum::extract::Path(id): axum::extract::Path<i64>,
                     State(db): State<r2d2::Pool<r2d2_sqlite::SqliteConnectionManager>>| async move {
                        let v: i64 = db
                            .get()
                            .unwrap()
                            .query_row("SELECT v FROM t WHERE id = ?1", [id], |row| row.get(0))
                            .unwrap();
                        v.to_string()
                    },
                ),
            )
            .with_state(db);
        let answers = pool.block_on(async {
            let (listener, addr) = listener().await;
            drop(tidepool::spawn(
                tidepool::http::serve(listener, router).into_future(),
            ));
            get_all(addr, (1..=64).map(|id| format!("/{id}"))).await
        });
        for (id, (status, body)) in (1..=64i64).zip(answers) {
            assert_eq!(status, 200);
            assert_eq!(body, (id * 2).to_string());
        }
        let _ = std::fs::remove_file(&path);
        pool.shutdown_timeout(Duration::from_secs(5)).ok();
    });
}

#[test]
fn graceful_shutdown_finishes_the_request_in_flight_and_closes_idle_connections() {
    within(HANG, || {
        let pool = pool("graceful");
        let router = Router::new().route(
            "/",
            get(|| async {
                tidepool::sleep(Duration::from_millis(200)).await;
                "done"
            }),
        );
        let (in_flight, served) = pool.block_on(async {
            let (listener, addr) = listener().await;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let server = tidepool::spawn(
                tidepool::http::serve(listener, router)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .into_future(),
            );
            let client: HttpClient =
                Client::builder(tidepool::http::Executor::current()).build_http();
            // An idle keep-alive connection, and a request in flight.
            let (status, _) = get_with(&client, format!("http://{addr}/")).await;
            assert_eq!(status, 200);
            let in_flight = tidepool::spawn({
                let client = client.clone();
                async move { get_with(&client, format!("http://{addr}/")).await }
            });
            tidepool::sleep(Duration::from_millis(50)).await;
            let _ = stop.send(());
            let served = server.await.unwrap();
            (in_flight.await.unwrap(), served)
        });
        assert_eq!(
            in_flight,
            (200, "done".to_owned()),
            "the request in flight is answered"
        );
        assert!(
            served.is_ok(),
            "the server ends once its connections closed"
        );
        pool.shutdown_timeout(Duration::from_secs(5)).ok();
    });
}

#[test]
fn a_pool_shuts_down_with_connections_open() {
    within(HANG, || {
        let pool = pool("stops");
        let router = Router::new().route("/", get(|| async { "hi" }));
        let addr = pool.block_on(async {
            let (listener, addr) = listener().await;
            drop(tidepool::spawn(
                tidepool::http::serve(listener, router).into_future(),
            ));
            addr
        });
        // A client off the pool keeps a connection open.
        let mut open = std::net::TcpStream::connect(addr).unwrap();
        use std::io::{Read, Write};
        open.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let mut first = [0u8; 12];
        open.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        // `shutdown` would wait for the server, which never ends by itself;
        // `shutdown_timeout` cancels the accept loop and the idle
        // connection, both waiting for a wake, and so closes them.
        let stopped = pool.shutdown_timeout(Duration::from_millis(100));
        assert!(
            matches!(stopped, Err(tidepool::ShutdownError::TimedOut { .. })),
            "the server's tasks were abandoned: {stopped:?}"
        );
        open.set_read_timeout(Some(HANG)).unwrap();
        let mut rest = Vec::new();
        // The rest of the first answer, then the end: the connection closed.
        open.read_to_end(&mut rest).unwrap();
        assert!(
            rest.ends_with(b"hi"),
            "{:?}",
            String::from_utf8_lossy(&rest)
        );
        assert!(
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
            "nothing listens any more"
        );
    });
}

#[test]
fn plain_axum_serve_keeps_serving_when_handlers_block() {
    within(HANG, || {
        let pool = pool("plain");
        let asleep = Arc::new(Peak::default());
        let threads = Arc::new(Mutex::new(Vec::new()));
        let router = blocking_router(Duration::from_millis(100), asleep.clone(), threads.clone());
        let places = std::thread::available_parallelism().map_or(1, usize::from);
        let answers = pool.block_on(async {
            let (listener, addr) = listener().await;
            // What a new user writes: axum's own serve, which spawns every
            // connection with tokio::spawn.
            drop(tokio::spawn(axum::serve(listener, router).into_future()));
            get_all(addr, (0..places + 6).map(|_| "/".to_owned())).await
        });
        assert!(answers.iter().all(|(status, _)| *status == 200));
        let most = asleep.most();
        assert!(
            most > places,
            "{most} handlers blocked at once with {places} places: the shared runtime must hand a blocked place over"
        );
        assert!(pool.metrics().tokio_blocked >= 1, "the blocks are counted");
        pool.shutdown_timeout(Duration::from_secs(5)).ok();
    });
}
