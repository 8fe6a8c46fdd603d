//! The service under test, as it runs in its server process: the database
//! the lab makes, the one handler and its three parts, and the server
//! process's entry point (`tidepool-lab serve-system`).

use std::cell::RefCell;
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rusqlite::{params, Connection, OpenFlags};
use serde::Serialize;

use super::ServeArgs;
use super::ServeSystem;

/// Rows in the database's one table.
const ROWS: u64 = 20_000;
/// Categories the rows fall in (the query's groups).
const CATEGORIES: u64 = 50;
/// Rows the query aggregates: calibrated once so that the query takes
/// about 1.2 ms on the project machine (1.18-1.24 ms in three runs of
/// `tests::calibration`, the machine otherwise idle).
const QUERY_SPAN: u64 = 6_000;
/// How many times the CPU part hashes the serialised rows (6,226 bytes):
/// calibrated once so that it takes about 1 ms with the serialisation
/// (0.98-1.02 ms, as above).
const HASH_ROUNDS: u64 = 175;
/// The database server's round trip the call stands for.
const DB_ROUND_TRIP: Duration = Duration::from_millis(5);

/// The query: per category, a few aggregates over a range of ids (the
/// integer primary key, so the range is an index range).
const QUERY: &str = "SELECT category, COUNT(*), AVG(price), MAX(price), SUM(stock), MIN(name) \
     FROM items WHERE id BETWEEN ?1 AND ?2 GROUP BY category ORDER BY category";

/// One group of the query's answer.
#[derive(Debug, Serialize)]
pub(super) struct Group {
    category: i64,
    items: i64,
    mean_price: f64,
    max_price: f64,
    stock: i64,
    first_name: String,
}

/// Makes the database at `path`: one table of [`ROWS`] rows of made-up
/// items (a fixed seed, so every run has the same data).
pub(super) fn create_database(path: &Path) -> Result<(), String> {
    let fail = |e: rusqlite::Error| format!("database {}: {e}", path.display());
    let mut conn = Connection::open(path).map_err(fail)?;
    conn.execute_batch(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, category INTEGER NOT NULL, \
         price REAL NOT NULL, stock INTEGER NOT NULL, name TEXT NOT NULL);",
    )
    .map_err(fail)?;
    let tx = conn.transaction().map_err(fail)?;
    {
        let mut insert = tx
            .prepare("INSERT INTO items VALUES (?1, ?2, ?3, ?4, ?5)")
            .map_err(fail)?;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for id in 1..=ROWS {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let price = ((x >> 8) % 100_000) as f64 / 100.0;
            insert
                .execute(params![
                    id as i64,
                    (x % CATEGORIES) as i64,
                    price,
                    ((x >> 32) % 500) as i64,
                    format!("item-{id:05}-{:06x}", x >> 40),
                ])
                .map_err(fail)?;
        }
    }
    tx.commit().map_err(fail)
}

/// Opens the database read-only.
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// The query for request `id`: its range of ids depends on `id`, so
/// requests read different rows.
fn query(conn: &Connection, id: u32) -> rusqlite::Result<Vec<Group>> {
    let first = 1 + (u64::from(id) * 7_919) % (ROWS - QUERY_SPAN + 1);
    let last = first + QUERY_SPAN - 1;
    let mut statement = conn.prepare_cached(QUERY)?;
    let groups = statement.query_map(params![first as i64, last as i64], |row| {
        Ok(Group {
            category: row.get(0)?,
            items: row.get(1)?,
            mean_price: row.get(2)?,
            max_price: row.get(3)?,
            stock: row.get(4)?,
            first_name: row.get(5)?,
        })
    })?;
    groups.collect()
}

/// The CPU part: the groups serialised with serde_json, then hashed
/// [`HASH_ROUNDS`] times (FNV-1a, one multiply per byte in a chain the
/// compiler cannot shorten).
fn compute(groups: &[Group]) -> u64 {
    let bytes = serde_json::to_vec(groups).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..HASH_ROUNDS {
        for &b in &bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        hash = black_box(hash) ^ round;
    }
    hash
}

/// What the query and the CPU part take on this machine, in the calling
/// thread: the medians of `times` of each, in milliseconds.
pub(super) fn time_the_work(db: &Path, times: usize) -> Result<(f64, f64), String> {
    let conn = open_read_only(db).map_err(|e| format!("database {}: {e}", db.display()))?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut query_ms = Vec::with_capacity(times);
    let mut cpu_ms = Vec::with_capacity(times);
    for id in 0..times.max(1) {
        let started = Instant::now();
        let groups = query(&conn, id as u32).map_err(|e| format!("query: {e}"))?;
        let queried = Instant::now();
        black_box(compute(&groups));
        query_ms.push((queried - started).as_secs_f64() * 1e3);
        cpu_ms.push(queried.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(query_ms), median(cpu_ms)))
}

/// The database file of this server process (set once at its start).
static DB_PATH: OnceLock<PathBuf> = OnceLock::new();

thread_local! {
    /// This thread's connection, opened read-only on its first query.
    static CONNECTION: RefCell<Option<Connection>> = const { RefCell::new(None) };
}

/// The blocking database call: the query on this thread's connection, then
/// the database server's round trip.
fn database_call(id: u32) -> Result<Vec<Group>, String> {
    let groups = CONNECTION.with(|cell| {
        let mut slot = cell.borrow_mut();
        let conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let path = DB_PATH.get().ok_or("no database path")?;
                open_read_only(path).map_err(|e| format!("open {}: {e}", path.display()))?
            }
        };
        let groups = query(&conn, id).map_err(|e| format!("query: {e}"));
        *slot = Some(conn);
        groups
    })?;
    std::thread::sleep(DB_ROUND_TRIP);
    Ok(groups)
}

/// Where the handler runs its database call.
#[derive(Debug, Clone, Copy)]
enum DbCall {
    /// Inline: plain blocking code in the handler.
    Inline,
    /// Inside `tidepool::blocking`.
    Declared,
    /// In `tidepool::spawn_fn`, awaited.
    SpawnFn,
    /// In `tokio::task::spawn_blocking`.
    SpawnBlocking,
}

/// What every request's handler shares.
#[derive(Debug, Clone)]
struct App {
    db: DbCall,
    client: Client<HttpConnector, Empty<Bytes>>,
    upstream: Uri,
}

/// The handler's answer.
#[derive(Debug, Serialize)]
struct Reply {
    id: u32,
    groups: usize,
    digest: String,
    upstream_bytes: usize,
}

/// Counts failed requests so that only the first few are printed.
static FAILURES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A failed request: its answer, and a line on standard error for the
/// first few.
fn failure(status: StatusCode, what: String) -> (StatusCode, String) {
    if FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 3 {
        eprintln!("service: a request failed: {what}");
    }
    (status, what)
}

/// `GET /item/{id}`: the database call, the CPU part, the outbound call.
async fn item(
    State(app): State<App>,
    UrlPath(id): UrlPath<u32>,
) -> Result<Json<Reply>, (StatusCode, String)> {
    let groups = match app.db {
        DbCall::Inline => database_call(id),
        DbCall::Declared => tidepool::blocking(|| database_call(id)),
        DbCall::SpawnFn => tidepool::spawn_fn(move || database_call(id))
            .await
            .unwrap_or_else(|e| Err(format!("spawn_fn: {e}"))),
        DbCall::SpawnBlocking => tokio::task::spawn_blocking(move || database_call(id))
            .await
            .unwrap_or_else(|e| Err(format!("spawn_blocking: {e}"))),
    }
    .map_err(|e| failure(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    let digest = compute(&groups);
    let upstream_bytes = call_upstream(&app)
        .await
        .map_err(|e| failure(StatusCode::BAD_GATEWAY, e))?;
    Ok(Json(Reply {
        id,
        groups: groups.len(),
        digest: format!("{digest:016x}"),
        upstream_bytes,
    }))
}

/// The outbound call: a GET to the upstream, its body read to the end.
async fn call_upstream(app: &App) -> Result<usize, String> {
    let response = app
        .client
        .get(app.upstream.clone())
        .await
        .map_err(|e| format!("upstream: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("upstream answered {}", response.status()));
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("upstream body: {e}"))?;
    Ok(body.to_bytes().len())
}

/// The server process (`tidepool-lab serve-system`): serves the service on
/// `system` on a port of 127.0.0.1 it prints on standard output, answers
/// each `metrics` line on standard input with one JSON line, and exits when
/// standard input closes.
pub fn serve(args: &ServeArgs) -> ExitCode {
    let _ = DB_PATH.set(args.db.clone());
    let upstream: Uri = match format!("http://{}/upstream", args.upstream).parse() {
        Ok(uri) => uri,
        Err(e) => {
            eprintln!("tidepool-lab serve-system: upstream {}: {e}", args.upstream);
            return ExitCode::from(2);
        }
    };
    let system = args.system;
    if system.is_tidepool() {
        // Built now, not by the first `metrics` line in the middle of a
        // run (`tidepool-axum-serve` spawns nothing on it itself).
        let _ = tidepool::global();
    }
    if let Err(e) = std::thread::Builder::new()
        .name("serve-control".into())
        .spawn(move || control(system))
    {
        eprintln!("tidepool-lab serve-system: control thread: {e}");
        return ExitCode::FAILURE;
    }
    let served = if system.is_tidepool() {
        tidepool::block_on(serve_on(system, upstream))
    } else {
        match crate::systems::tokio_runtime() {
            Ok(rt) => rt.block_on(serve_on(system, upstream)),
            Err(e) => Err(std::io::Error::other(e)),
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tidepool-lab serve-system {}: {e}", system.id());
            ExitCode::FAILURE
        }
    }
}

/// Binds, says where, and serves until the process exits.
async fn serve_on(system: ServeSystem, upstream: Uri) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let (client, db) = match system {
        ServeSystem::TidepoolServe
        | ServeSystem::TidepoolServeBlocking
        | ServeSystem::TidepoolServeSpawnFn => (
            Client::builder(tidepool::http::Executor::current()).build(connector),
            match system {
                ServeSystem::TidepoolServeBlocking => DbCall::Declared,
                ServeSystem::TidepoolServeSpawnFn => DbCall::SpawnFn,
                _ => DbCall::Inline,
            },
        ),
        ServeSystem::TidepoolAxumServe | ServeSystem::TokioInline => (
            Client::builder(TokioExecutor::new()).build(connector),
            DbCall::Inline,
        ),
        ServeSystem::TokioSpawnBlocking => (
            Client::builder(TokioExecutor::new()).build(connector),
            DbCall::SpawnBlocking,
        ),
    };
    let router = Router::new()
        .route("/item/{id}", get(item))
        .with_state(App {
            db,
            client,
            upstream,
        });
    let port = listener.local_addr()?.port();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{port}")?;
        out.flush()?;
    }
    match system {
        ServeSystem::TidepoolServe
        | ServeSystem::TidepoolServeBlocking
        | ServeSystem::TidepoolServeSpawnFn => tidepool::http::serve(listener, router).await,
        _ => axum::serve(listener, router).await,
    }
}

/// Reads standard input: a `metrics` line is answered with the pool's
/// figures (one JSON line; `{}` for tokio), the end of input ends the
/// process.
fn control(system: ServeSystem) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() != "metrics" {
            continue;
        }
        let figures = if system.is_tidepool() {
            let m = tidepool::global().metrics();
            serde_json::json!({
                "start_latency_max_ms": m.start_latency.max.as_secs_f64() * 1e3,
                "tokio_blocked": m.tokio_blocked,
                "blocked_detections": m.blocked_detections,
                "counted_again": m.workers_counted_again,
                "held": m.workers_held,
            })
        } else {
            serde_json::json!({})
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{figures}");
        let _ = out.flush();
    }
    std::process::exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_answers_every_category_and_the_work_is_deterministic() {
        let dir = std::env::temp_dir().join(format!("tidepool-lab-app-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("items.sqlite");
        let _ = std::fs::remove_file(&db);
        create_database(&db).unwrap();
        let conn = open_read_only(&db).unwrap();
        let groups = query(&conn, 7).unwrap();
        assert_eq!(groups.len() as u64, CATEGORIES);
        let rows: i64 = groups.iter().map(|g| g.items).sum();
        assert_eq!(rows as u64, QUERY_SPAN);
        assert_eq!(compute(&groups), compute(&query(&conn, 7).unwrap()));
        // The last request id still reads a full range.
        let rows: i64 = query(&conn, u32::MAX)
            .unwrap()
            .iter()
            .map(|g| g.items)
            .sum();
        assert_eq!(rows as u64, QUERY_SPAN);
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Measures the work's parts on this machine, to calibrate
    /// [`QUERY_SPAN`] and [`HASH_ROUNDS`] again:
    /// `cargo test --release -p tidepool-lab --lib calibration -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints timings; run by hand in a release build"]
    fn calibration() {
        let dir = std::env::temp_dir().join(format!("tidepool-lab-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("items.sqlite");
        let _ = std::fs::remove_file(&db);
        create_database(&db).unwrap();
        let (query_ms, cpu_ms) = time_the_work(&db, 300).unwrap();
        let conn = open_read_only(&db).unwrap();
        let bytes = serde_json::to_vec(&query(&conn, 1).unwrap()).unwrap().len();
        println!(
            "query {query_ms:.3} ms ({QUERY_SPAN} rows), CPU part {cpu_ms:.3} ms \
             ({HASH_ROUNDS} rounds over {bytes} bytes)"
        );
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
