//! Publishing a snapshot through the `metrics` crate's facade (feature
//! `metrics`): the series, their labels and their descriptions.

use super::Metrics;
use std::time::Duration;

/// How often the monitor publishes a pool's metrics while it ticks (the
/// `metrics` feature; see [`Metrics::publish`]).
#[cfg(feature = "metrics")]
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_secs(1);

#[cfg(feature = "metrics")]
impl Metrics {
    /// Publishes this snapshot through the `metrics` crate's facade, every
    /// series labelled `pool = pool`. Counters are set to their absolute
    /// values, so publishing twice never counts twice.
    pub(crate) fn publish(&self, pool: &str) {
        use metrics::{counter, gauge};
        describe_once();
        let pool = pool.to_owned();
        let p = || pool.clone();
        for (state, n) in [
            ("running", self.running_threads),
            ("blocked", self.blocked_threads),
            ("idle", self.idle_threads),
        ] {
            gauge!("tidepool_threads", "pool" => p(), "state" => state).set(n as f64);
        }
        gauge!("tidepool_threads_alive", "pool" => p()).set(self.threads as f64);
        gauge!("tidepool_threads_peak", "pool" => p()).set(self.peak_threads as f64);
        gauge!("tidepool_concurrency_target", "pool" => p()).set(self.concurrency_target as f64);
        gauge!("tidepool_tasks_queued", "pool" => p()).set(self.queued as f64);
        gauge!("tidepool_tasks_in_flight", "pool" => p()).set(self.in_flight as f64);

        counter!("tidepool_tasks_spawned_total", "pool" => p()).absolute(self.spawned);
        counter!("tidepool_tasks_rejected_total", "pool" => p()).absolute(self.rejected);
        for (outcome, n) in [
            ("completed", self.completed),
            ("panicked", self.panicked),
            ("cancelled", self.cancelled),
        ] {
            counter!("tidepool_tasks_ended_total", "pool" => p(), "outcome" => outcome).absolute(n);
        }
        for (reason, n) in [
            ("demand", self.threads_started_demand),
            ("compensation", self.threads_started_compensation),
            ("policy", self.threads_started_policy),
            ("burst", self.threads_started_burst),
            ("min_threads", self.threads_started_floor),
            ("quantum", self.threads_started_quantum),
            ("presumed", self.threads_started_presumed),
            ("spare", self.threads_started_spare),
        ] {
            counter!("tidepool_thread_starts_total", "pool" => p(), "reason" => reason).absolute(n);
        }
        for (reason, n) in [
            ("idle", self.threads_retired_idle),
            ("surplus", self.threads_retired_surplus),
        ] {
            counter!("tidepool_thread_retirements_total", "pool" => p(), "reason" => reason)
                .absolute(n);
        }
        for (how, n) in [
            ("detected", self.blocked_detections),
            ("declared", self.declared_blocking),
            ("presumed", self.presumed_blocking),
        ] {
            counter!("tidepool_blocking_total", "pool" => p(), "how" => how).absolute(n);
        }
        counter!("tidepool_thread_start_failures_total", "pool" => p())
            .absolute(self.thread_start_failures);
        counter!("tidepool_oversubscribed_total", "pool" => p())
            .absolute(self.oversubscribed_observations);
        counter!("tidepool_hook_panics_total", "pool" => p()).absolute(self.hook_panics);
        counter!("tidepool_detection_fallbacks_total", "pool" => p())
            .absolute(self.detection_fallbacks);
        gauge!("tidepool_stuck", "pool" => p()).set(f64::from(u8::from(self.stuck)));
        counter!("tidepool_stuck_episodes_total", "pool" => p()).absolute(self.stuck_episodes);

        let latency = &self.start_latency;
        counter!("tidepool_start_latency_samples_total", "pool" => p()).absolute(latency.count);
        for (quantile, value) in [
            ("0.5", latency.p50),
            ("0.99", latency.p99),
            ("1", latency.max),
        ] {
            gauge!("tidepool_start_latency_seconds", "pool" => p(), "quantile" => quantile)
                .set(value.as_secs_f64());
        }
        gauge!("tidepool_start_latency_mean_seconds", "pool" => p())
            .set(latency.mean.as_secs_f64());
    }
}

/// Describes the series once per process (the HELP lines of Prometheus).
#[cfg(feature = "metrics")]
fn describe_once() {
    use metrics::{describe_counter, describe_gauge, Unit};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        describe_gauge!("tidepool_threads", "Worker threads by state: running (holding a slot), blocked (slot given away), idle (parked).");
        describe_gauge!("tidepool_threads_alive", "Worker threads alive.");
        describe_gauge!("tidepool_threads_peak", "The most worker threads alive at once.");
        describe_gauge!("tidepool_concurrency_target", "Running slots now.");
        describe_gauge!("tidepool_tasks_queued", "Tasks waiting in a queue.");
        describe_gauge!("tidepool_tasks_in_flight", "Tasks accepted and not yet ended.");
        describe_counter!("tidepool_tasks_spawned_total", "Tasks accepted.");
        describe_counter!("tidepool_tasks_rejected_total", "Spawns refused because the pool was shut down.");
        describe_counter!("tidepool_tasks_ended_total", "Tasks ended, by outcome.");
        describe_counter!("tidepool_thread_starts_total", "Worker threads started, by reason.");
        describe_counter!("tidepool_thread_retirements_total", "Worker threads retired, by reason.");
        describe_counter!("tidepool_blocking_total", "Workers that gave their slot away: blocking detected by the monitor, or declared.");
        describe_counter!("tidepool_thread_start_failures_total", "Thread starts the OS refused.");
        describe_counter!("tidepool_oversubscribed_total", "Long-running workers seen waiting for a CPU.");
        describe_counter!("tidepool_hook_panics_total", "Panics caught in thread hooks.");
        describe_counter!("tidepool_detection_fallbacks_total", "Workers that could not read the kernel's thread state and were judged by their CPU clock or by time.");
        describe_gauge!("tidepool_stuck", "1 while every thread up to max_threads is blocked and work waits.");
        describe_counter!("tidepool_stuck_episodes_total", "Times every thread up to max_threads was blocked while work waited.");
        describe_counter!("tidepool_start_latency_samples_total", "Queue-to-first-poll latencies measured.");
        describe_gauge!("tidepool_start_latency_seconds", Unit::Seconds, "Queue-to-first-poll latency since the pool was built, by quantile (1 = max).");
        describe_gauge!("tidepool_start_latency_mean_seconds", Unit::Seconds, "Mean queue-to-first-poll latency since the pool was built.");
    });
}
