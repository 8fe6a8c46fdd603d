//! With the `tracing` feature, the pool's thread and blocking events reach a
//! subscriber with their reasons. A tiny hand-written subscriber collects
//! them (installed globally: the events come from the pool's threads).

#![cfg(feature = "tracing")]

mod common;

use common::{eventually, within, HANG};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tidepool::Pool;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One event: its fields as text (`message` included).
type Fields = BTreeMap<String, String>;

static EVENTS: Mutex<Vec<Fields>> = Mutex::new(Vec::new());

struct Collect;

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tidepool"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Id::from_u64(NEXT.fetch_add(1, Ordering::Relaxed))
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        fields.insert("level".into(), event.metadata().level().to_string());
        EVENTS.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| tracing::subscriber::set_global_default(Collect).unwrap());
}

/// Whether an event of `pool` with this message and reason was seen.
fn seen(pool: &str, message: &str, reason: Option<&str>) -> bool {
    EVENTS.lock().unwrap().iter().any(|e| {
        e.get("pool").map(String::as_str) == Some(pool)
            && e.get("message").map(String::as_str) == Some(message)
            && reason.is_none_or(|r| e.get("reason").map(String::as_str) == Some(r))
    })
}

fn events_of(pool: &str) -> Vec<Fields> {
    let events = EVENTS.lock().unwrap();
    let of_pool = events
        .iter()
        .filter(|e| e.get("pool").map(String::as_str) == Some(pool));
    of_pool.cloned().collect()
}

#[test]
fn a_blocked_worker_and_its_replacement_are_traced_with_reasons() {
    install();
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .thread_name("traced-block")
            .build()
            .unwrap();
        let sleeper = pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(200)));
        let second = pool.spawn_fn(|| 2);
        assert_eq!(second.join().unwrap(), 2);
        sleeper.join().unwrap();
        // A declared section that outlasts its grace (one monitor interval).
        let declared = pool.spawn_fn(|| {
            tidepool::blocking(|| {
                std::thread::sleep(Duration::from_millis(50));
                3
            })
        });
        assert_eq!(declared.join().unwrap(), 3);
        pool.shutdown().unwrap();

        let p = "traced-block";
        let all = events_of(p);
        assert!(seen(p, "thread started", Some("min_threads")), "{all:#?}");
        // The blocked worker is replaced by the spare parked at build (a
        // wake, not a start): no "thread started" for compensation here.
        assert!(seen(p, "worker blocked", Some("detected")), "{all:#?}");
        assert!(seen(p, "worker blocked", Some("declared")), "{all:#?}");
        assert!(seen(p, "worker returned from blocking", None), "{all:#?}");
        assert!(seen(p, "pool closed", None), "{all:#?}");
        assert!(seen(p, "pool stopped", None), "{all:#?}");
        assert!(seen(p, "thread retired", Some("shutdown")), "{all:#?}");
        // Thread events name the worker.
        let started = all
            .iter()
            .find(|e| e["message"] == "thread started")
            .unwrap();
        assert!(started.contains_key("thread"));
        assert_eq!(started["level"], "DEBUG");
    });
}

#[test]
fn idle_retirement_and_hook_panics_are_traced() {
    install();
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .min_threads(0)
            .idle_timeout(Duration::from_millis(20))
            .thread_name("traced-idle")
            .on_thread_start(|| panic!("hook"))
            .build()
            .unwrap();
        pool.spawn_fn(|| ()).join().unwrap();
        let p = "traced-idle";
        assert!(eventually(HANG, || seen(p, "thread retired", Some("idle"))));
        let panics = events_of(p);
        let panic = panics.iter().find(|e| e["message"] == "hook panicked");
        let panic = panic.expect("the hook's panic was traced");
        assert_eq!(panic["hook"], "on_thread_start");
        assert_eq!(panic["level"], "WARN");
    });
}

#[test]
fn a_stuck_pool_warns_once_with_the_fix() {
    install();
    within(HANG, || {
        let pool = Pool::builder()
            .concurrency(1)
            .max_threads(2)
            .thread_name("traced-stuck")
            .build()
            .unwrap();
        let blockers: Vec<_> = (0..2)
            .map(|_| {
                let (release, released) = std::sync::mpsc::channel::<()>();
                let task = pool.spawn_fn(move || released.recv_timeout(HANG).is_ok());
                (release, task)
            })
            .collect();
        // Both blocked (the second on the thread started to replace the
        // first), then the work that has no thread left to run it.
        assert!(eventually(HANG, || pool.metrics().blocked_threads == 2));
        let queued = pool.spawn_fn(|| 3);
        let p = "traced-stuck";
        assert!(
            eventually(HANG, || seen(p, "pool stuck", None)),
            "{:#?}",
            events_of(p)
        );
        for (release, blocker) in blockers {
            release.send(()).unwrap();
            assert!(blocker.join().unwrap());
        }
        assert_eq!(queued.join().unwrap(), 3);
        assert!(eventually(HANG, || seen(p, "pool no longer stuck", None)));
        let all = events_of(p);
        let warnings: Vec<_> = all
            .iter()
            .filter(|e| e["message"] == "pool stuck")
            .collect();
        assert_eq!(warnings.len(), 1, "{all:#?}");
        let warning = warnings[0];
        assert_eq!(warning["level"], "WARN");
        assert_eq!(
            (warning["threads"].as_str(), warning["blocked"].as_str()),
            ("2", "2")
        );
        assert!(warning["fix"].contains("max_threads"), "{warning:?}");
    });
}
