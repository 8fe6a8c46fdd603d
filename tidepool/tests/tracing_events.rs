//! With the `tracing` feature, the pool's thread and blocking events reach a
//! subscriber with their reasons. A tiny hand-written subscriber collects
//! them (installed globally: the events come from the pool's threads).

#![cfg(feature = "tracing")]

mod common;

use common::fields::{Fields, Visitor};
use common::{eventually, within, HANG};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tidepool::Pool;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

static EVENTS: Mutex<Vec<Fields>> = Mutex::new(Vec::new());

/// The spans made, by id: their fields, and `name` (the span's name).
static SPANS: Mutex<BTreeMap<u64, Fields>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// The spans entered on this thread, innermost last.
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Collect;

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tidepool"
    }
    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut fields = Fields::new();
        attributes.record(&mut Visitor(&mut fields));
        fields.insert("name".into(), attributes.metadata().name().to_owned());
        fields.insert("level".into(), attributes.metadata().level().to_string());
        SPANS.lock().unwrap().insert(id, fields);
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        fields.insert("level".into(), event.metadata().level().to_string());
        if let Some(span) = ENTERED.with(|entered| entered.borrow().last().copied()) {
            fields.insert("span".into(), span.to_string());
        }
        EVENTS.lock().unwrap().push(fields);
    }
    fn enter(&self, span: &Id) {
        ENTERED.with(|entered| entered.borrow_mut().push(span.into_u64()));
    }
    fn exit(&self, span: &Id) {
        ENTERED.with(|entered| {
            let mut entered = entered.borrow_mut();
            if let Some(at) = entered.iter().rposition(|s| *s == span.into_u64()) {
                entered.remove(at);
            }
        });
    }
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
fn thread_events_carry_the_pools_settings_and_where_they_came_from() {
    install();
    within(HANG, || {
        let p = "traced-settings";
        let pool = Pool::builder()
            .concurrency(2)
            .max_threads(16)
            .thread_name(p)
            .build()
            .unwrap();
        pool.spawn_fn(|| ()).join().unwrap();
        pool.shutdown().unwrap();
        let all = events_of(p);
        for message in ["thread started", "thread retired"] {
            let event = all
                .iter()
                .find(|e| e["message"] == message)
                .unwrap_or_else(|| panic!("{message}: {all:#?}"));
            assert_eq!(event["concurrency"], "2", "{event:?}");
            assert_eq!(event["concurrency_from"], "code", "{event:?}");
            assert_eq!(event["max_threads"], "16", "{event:?}");
            assert_eq!(event["max_threads_from"], "code", "{event:?}");
        }

        // Left unset: the environment's value or the default, as the
        // pool's metrics say.
        let p = "traced-default-settings";
        let pool = Pool::builder().thread_name(p).build().unwrap();
        let m = pool.metrics();
        pool.shutdown().unwrap();
        let source = |from: tidepool::SettingSource| match from {
            tidepool::SettingSource::Code => "code",
            tidepool::SettingSource::Environment => "environment",
            _ => "default",
        };
        let all = events_of(p);
        let started = all
            .iter()
            .find(|e| e["message"] == "thread started")
            .unwrap_or_else(|| panic!("{all:#?}"));
        assert_eq!(started["concurrency"], m.concurrency.to_string());
        assert_eq!(started["concurrency_from"], source(m.concurrency_from));
        assert_eq!(started["max_threads"], m.max_threads.to_string());
        assert_eq!(started["max_threads_from"], source(m.max_threads_from));
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

/// The `worker blocked` events of `pool` with this reason.
fn blocked_events(pool: &str, reason: &str) -> Vec<Fields> {
    events_of(pool)
        .into_iter()
        .filter(|e| {
            e["message"] == "worker blocked" && e.get("reason").map(String::as_str) == Some(reason)
        })
        .collect()
}

/// A closure that sleeps in short naps until `release` is set (blocked, as
/// the monitor sees it); its type is named after this function.
fn naps_until(release: Arc<AtomicBool>) -> impl FnOnce() + Send + 'static {
    move || {
        let start = std::time::Instant::now();
        while !release.load(Ordering::SeqCst) && start.elapsed() < HANG {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A closure that declares a block past its grace; named after this
/// function.
fn declares_a_block() -> impl FnOnce() + Send + 'static {
    || tidepool::blocking(|| std::thread::sleep(Duration::from_millis(50)))
}

#[test]
fn blocked_events_name_the_kind_of_the_closure_that_blocked() {
    install();
    within(HANG, || {
        let p = "traced-kinds";
        let pool = Pool::builder()
            .concurrency(1)
            .quantum(None)
            .thread_name(p)
            .build()
            .unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let site = std::panic::Location::caller();
        let blocker = pool.spawn_fn(naps_until(release.clone()));
        // One slot: this runs only once the blocked worker's was given away.
        assert_eq!(pool.spawn_fn(|| 2).join().unwrap(), 2);
        release.store(true, Ordering::SeqCst);
        blocker.join().unwrap();
        let detected = blocked_events(p, "detected");
        let event = detected
            .iter()
            .find(|e| e.get("kind").is_some_and(|k| k.contains("naps_until")))
            .unwrap_or_else(|| panic!("the block names the closure: {:#?}", events_of(p)));
        assert!(event["kind"].ends_with("{{closure}}"), "{event:?}");
        let spawned_at = format!("{}:{}:", site.file(), site.line() + 1);
        assert!(event["site"].starts_with(&spawned_at), "{event:?}");
        assert!(
            eventually(HANG, || events_of(p)
                .iter()
                .any(|e| e["message"] == "worker returned from blocking"
                    && e.get("kind").is_some_and(|k| k.contains("naps_until")))),
            "{:#?}",
            events_of(p)
        );

        // Declared, past its grace: the kind blocks; the next of the kind
        // starts presumed blocking. Both events name it.
        assert!(
            eventually(HANG, || {
                pool.spawn_fn(declares_a_block()).join().unwrap();
                !blocked_events(p, "presumed").is_empty()
            }),
            "{:#?}",
            events_of(p)
        );
        for reason in ["declared", "presumed"] {
            let events = blocked_events(p, reason);
            assert!(
                events.iter().any(|e| e
                    .get("kind")
                    .is_some_and(|k| k.contains("declares_a_block"))),
                "{reason}: {events:#?}"
            );
        }
        pool.shutdown().unwrap();
    });
}

#[test]
fn every_run_of_a_task_is_inside_a_span_that_names_its_kind() {
    install();
    within(HANG, || {
        let p = "traced-spans";
        let pool = Pool::builder().thread_name(p).build().unwrap();
        fn says_hello() -> impl FnOnce() + Send + 'static {
            || tracing::info!(target: "tidepool", pool = "traced-spans", "hello from a closure")
        }
        pool.spawn_fn(says_hello()).join().unwrap();
        // A future: each poll is a run, in a span of its own.
        pool.block_on(pool.spawn(async {
            tidepool::yield_now().await;
            tracing::info!(target: "tidepool", pool = "traced-spans", "hello from a future");
        }))
        .unwrap();
        pool.shutdown().unwrap();

        let spans = SPANS.lock().unwrap().clone();
        let span_of = |message: &str| {
            let events = events_of(p);
            let event = events
                .iter()
                .find(|e| e["message"] == message)
                .unwrap_or_else(|| panic!("{message}: {events:#?}"));
            let id: u64 = event.get("span").expect("inside a span").parse().unwrap();
            spans[&id].clone()
        };
        let closure = span_of("hello from a closure");
        assert_eq!(closure["name"], "tidepool.task");
        assert_eq!(closure["level"], "TRACE");
        assert_eq!(closure["pool"], p);
        assert!(closure["kind"].contains("says_hello"), "{closure:?}");
        assert!(closure.contains_key("thread") && closure.contains_key("site"));
        let future = span_of("hello from a future");
        assert_eq!(future["name"], "tidepool.task");
        assert!(
            future["kind"].contains("every_run_of_a_task_is_inside_a_span"),
            "{future:?}"
        );
    });
}
