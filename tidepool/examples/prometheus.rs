//! Serves a pool's metrics to Prometheus on loopback, through the `metrics`
//! crate and `metrics-exporter-prometheus`:
//!
//! ```text
//! cargo run --example prometheus --features metrics -- 9184
//! curl http://127.0.0.1:9184/metrics
//! ```
//!
//! The pool's monitor publishes its figures once a second while the pool is
//! busy; `Pool::publish_metrics` publishes on demand.

use metrics_exporter_prometheus::PrometheusBuilder;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(port) => port.parse()?,
        None => 9184,
    };
    // Loopback only: nothing outside this machine can scrape it.
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()?;

    let pool = tidepool::Pool::builder().thread_name("example").build()?;
    // Some work: CPU-bound closures, and blocking ones the pool compensates.
    for round in 0..10u64 {
        let handles: Vec<_> = (0..100)
            .map(|i| {
                pool.spawn_fn(move || {
                    if i % 10 == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    (0..10_000u64).map(|x| x ^ round).sum::<u64>()
                })
            })
            .collect();
        for handle in handles {
            handle.join()?;
        }
    }
    pool.publish_metrics();
    println!("serving the pool's metrics at http://{address}/metrics for 60 s");
    std::thread::sleep(Duration::from_secs(60));
    Ok(())
}
