//! A process whose real-time signals are all taken (each has a handler)
//! before its first pool: the pool cannot hold a worker back from its
//! block (`control::hold` needs a free signal), says so
//! (`Metrics::holds_workers`, and with the `tracing` feature the warning
//! `hold signal unavailable`), and still runs everything. A binary of its
//! own: the signal is chosen once per process.

#![cfg(target_os = "linux")]

mod common;

use common::{within, HANG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidepool::Pool;

#[test]
fn with_every_signal_taken_nothing_is_held_and_the_work_still_runs() {
    // The signals the pool may choose from (`sys::hold_signal`), all
    // given a disposition other than the default.
    for signal in libc::SIGRTMIN() + 4..=libc::SIGRTMAX() - 1 {
        // SAFETY: setting a real-time signal's disposition to "ignore";
        // nothing in this test process sends it.
        let previous = unsafe { libc::signal(signal, libc::SIG_IGN) };
        assert_ne!(previous, libc::SIG_ERR, "signal {signal}");
    }
    #[cfg(feature = "tracing")]
    warnings::collect();
    let m = within(HANG, || {
        let pool = Pool::builder()
            .thread_name("no-signal")
            .concurrency(2)
            .build()
            .unwrap();
        let ended = Arc::new(AtomicUsize::new(0));
        // Items that wait, then compute: with a free signal some would be
        // held (`control_hold`).
        for _ in 0..16 {
            let ended = ended.clone();
            pool.execute(move || {
                std::thread::sleep(Duration::from_millis(20));
                let until = Instant::now() + Duration::from_millis(30);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                ended.fetch_add(1, Ordering::Release);
            })
            .unwrap();
        }
        assert!(common::eventually(HANG, || ended.load(Ordering::Acquire) == 16));
        pool.metrics()
    });
    assert!(!m.holds_workers, "{m:?}");
    assert_eq!(m.workers_held, 0, "{m:?}");
    assert_eq!(m.completed, 16, "{m:?}");
    common::assert_counters_add_up(&m);
    #[cfg(feature = "tracing")]
    {
        let said = warnings::said("hold signal unavailable");
        assert_eq!(said.len(), 1, "said once per pool: {said:?}");
        assert_eq!(said[0].get("pool").map(String::as_str), Some("no-signal"));
        assert!(
            said[0]
                .get("fix")
                .is_some_and(|fix| fix.contains("hold_signal(false)")),
            "{said:?}"
        );
    }
}

/// The pool's warnings, collected by a subscriber installed for the whole
/// process (the pool warns from its own threads).
#[cfg(feature = "tracing")]
mod warnings {
    use crate::common::fields::{Fields, Visitor};
    use std::sync::Mutex;
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    static WARNINGS: Mutex<Vec<Fields>> = Mutex::new(Vec::new());

    struct Warnings;

    impl Subscriber for Warnings {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            metadata.target() == "tidepool" && *metadata.level() == Level::WARN
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut fields = Fields::new();
            event.record(&mut Visitor(&mut fields));
            WARNINGS.lock().unwrap().push(fields);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Installs the collector for the process.
    pub(crate) fn collect() {
        tracing::subscriber::set_global_default(Warnings).unwrap();
    }

    /// The warnings whose message is `message`.
    pub(crate) fn said(message: &str) -> Vec<Fields> {
        WARNINGS
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.get("message").map(String::as_str) == Some(message))
            .cloned()
            .collect()
    }
}
