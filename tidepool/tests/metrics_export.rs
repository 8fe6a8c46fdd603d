//! With the `metrics` feature, a pool's figures reach a Prometheus exporter:
//! this test serves them on loopback and scrapes the endpoint with a plain
//! HTTP GET.

#![cfg(feature = "metrics")]

mod common;

use common::{eventually, within, HANG};
use metrics_exporter_prometheus::PrometheusBuilder;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;
use tidepool::Pool;

/// One GET of `/metrics`; `None` while the listener is not up yet.
fn scrape(address: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.starts_with("HTTP/1.1 200").then_some(response)
}

/// The value of the series whose line starts with `series` (name and labels).
fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn a_scrape_finds_the_pool_series() {
    within(HANG, || {
        // A free loopback port (the exporter wants an address, not port 0).
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        PrometheusBuilder::new()
            .with_http_listener(address)
            .install()
            .unwrap();

        let pool = Pool::builder()
            .concurrency(1)
            .thread_name("scraped")
            .build()
            .unwrap();
        let handles: Vec<_> = (0..10).map(|i| pool.spawn_fn(move || i)).collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert!(pool.spawn_fn(|| panic!("boom")).join().is_err());
        let sleeper = pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(200)));
        pool.spawn_fn(|| ()).join().unwrap();
        sleeper.join().unwrap();
        pool.publish_metrics();

        let mut body = String::new();
        assert!(eventually(HANG, || match scrape(address) {
            Some(b) => {
                body = b;
                true
            }
            None => false,
        }));
        let get = |series: &str| {
            value(&body, series).unwrap_or_else(|| panic!("{series} missing:\n{body}"))
        };
        assert_eq!(get(r#"tidepool_tasks_spawned_total{pool="scraped"}"#), 13.0);
        assert_eq!(
            get(r#"tidepool_tasks_ended_total{pool="scraped",outcome="completed"}"#),
            12.0
        );
        assert_eq!(
            get(r#"tidepool_tasks_ended_total{pool="scraped",outcome="panicked"}"#),
            1.0
        );
        // The pool starts its min_threads worker when built.
        assert!(get(r#"tidepool_thread_starts_total{pool="scraped",reason="min_threads"}"#) >= 1.0);
        // The blocked worker was replaced by the parked spare (a wake, not
        // a start): the series is there, whatever its value.
        get(r#"tidepool_thread_starts_total{pool="scraped",reason="compensation"}"#);
        assert!(get(r#"tidepool_blocking_total{pool="scraped",how="detected"}"#) >= 1.0);
        assert!(get(r#"tidepool_threads_alive{pool="scraped"}"#) >= 1.0);
        assert_eq!(get(r#"tidepool_tasks_queued{pool="scraped"}"#), 0.0);
        for state in ["running", "blocked", "idle"] {
            get(&format!(
                r#"tidepool_threads{{pool="scraped",state="{state}"}}"#
            ));
        }
        assert!(get(r#"tidepool_start_latency_samples_total{pool="scraped"}"#) >= 1.0);
        get(r#"tidepool_start_latency_seconds{pool="scraped",quantile="0.99"}"#);
        assert!(body.contains("# HELP tidepool_threads "), "{body}");
    });
}
