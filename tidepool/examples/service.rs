//! A web service on tidepool: an axum `Router` served by
//! `tidepool::http::serve`, whose handler makes a blocking SQLite query
//! (plain blocking code, inline), computes a little, and calls an upstream
//! service through hyper-util's client. Every connection, the handler and
//! the client's connection tasks run on the pool.
//!
//! ```text
//! cargo run --release --features http --example service            # serves 200 requests of its own, then stops
//! cargo run --release --features http --example service -- --forever # serves http://127.0.0.1:3000/item/7
//! ```
//!
//! The blocking call needs no annotation: the pool sees the thread block
//! and hands its slot to another worker, so the other requests keep
//! running. (Wrapping it in `tidepool::blocking` declares the block at
//! once instead; that is for calls known to block for long.)

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use r2d2_sqlite::SqliteConnectionManager;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What every handler shares: the database's connections, the HTTP client
/// and where the upstream listens.
#[derive(Clone)]
struct App {
    db: r2d2::Pool<SqliteConnectionManager>,
    client: Client<HttpConnector, Empty<Bytes>>,
    upstream: SocketAddr,
}

async fn item(
    Path(id): Path<u32>,
    State(app): State<App>,
) -> Result<Json<serde_json::Value>, String> {
    // 1. A blocking database call, inline.
    let (count, total): (i64, i64) = app
        .db
        .get()
        .map_err(|e| e.to_string())?
        .query_row(
            "SELECT COUNT(*), COALESCE(SUM(price), 0) FROM items WHERE shop = ?1",
            [id % 16],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(|e| e.to_string())?;
    // Standing for a database server's round trip: a local SQLite file
    // answers faster than most databases do.
    std::thread::sleep(Duration::from_millis(3));
    // 2. A little CPU.
    let mut hash = u64::from(id);
    for _ in 0..20_000 {
        hash = hash.rotate_left(5) ^ hash.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    // 3. An outbound call; its wait holds no thread.
    let uri = format!("http://{}/price", app.upstream).parse().unwrap();
    let response = app.client.get(uri).await.map_err(|e| e.to_string())?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(Json(serde_json::json!({
        "id": id,
        "items": count,
        "total": total,
        "upstream": String::from_utf8_lossy(&body.to_bytes()),
        "hash": hash,
    })))
}

/// A database file with a table of items, made fresh in the temp folder.
fn database() -> r2d2::Pool<SqliteConnectionManager> {
    let path = std::env::temp_dir().join(format!("tidepool-service-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let db = r2d2::Pool::builder()
        .max_size(16)
        .build(SqliteConnectionManager::file(&path))
        .expect("the database file can be created");
    let conn = db.get().unwrap();
    conn.execute_batch(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, shop INTEGER, price INTEGER);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO items SELECT i, i % 16, i % 997 FROM n;",
    )
    .unwrap();
    db
}

fn main() -> std::io::Result<()> {
    let forever = std::env::args().any(|arg| arg == "--forever");
    tidepool::block_on(async move {
        // The upstream: another service on the pool, answering in 20 ms.
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let upstream_addr = upstream.local_addr()?;
        let price = Router::new().route(
            "/price",
            get(|| async {
                tidepool::sleep(Duration::from_millis(20)).await;
                "42"
            }),
        );
        drop(tidepool::spawn(
            tidepool::http::serve(upstream, price).into_future(),
        ));

        let app = App {
            db: database(),
            // The client's connection tasks run on the pool too.
            client: Client::builder(tidepool::http::Executor::current()).build_http(),
            upstream: upstream_addr,
        };
        let router = Router::new().route("/item/{id}", get(item)).with_state(app);
        let addr = if forever {
            "127.0.0.1:3000"
        } else {
            "127.0.0.1:0"
        };
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        if forever {
            println!("serving http://{addr}/item/7");
            return tidepool::http::serve(listener, router).await;
        }

        // Serve 200 requests of our own, 20 at a time, then stop.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tidepool::spawn(
            tidepool::http::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .into_future(),
        );
        let client: Client<HttpConnector, Empty<Bytes>> =
            Client::builder(tidepool::http::Executor::current()).build_http();
        let started = Instant::now();
        let requests: Vec<_> = (0..20u32)
            .map(|worker| {
                let client = client.clone();
                tidepool::spawn(async move {
                    for i in 0..10 {
                        let uri = format!("http://{addr}/item/{}", worker * 10 + i)
                            .parse()
                            .unwrap();
                        let response = client.get(uri).await.expect("the service answers");
                        assert!(response.status().is_success(), "{}", response.status());
                    }
                })
            })
            .collect();
        for request in requests {
            request.await.expect("the requests succeed");
        }
        let elapsed = started.elapsed();
        let _ = stop.send(());
        server.await.expect("the server stops")?;
        let m = tidepool::global().metrics();
        println!(
            "200 requests in {elapsed:.2?}; the pool found {} blocked calls, ran {} tasks, peaked at {} threads",
            m.blocked_detections, m.completed, m.peak_threads
        );
        Ok(())
    })
}
