//! Progress on screen (indicatif), kept off the measured path: items never
//! touch the bar. A follower thread copies a run's latch count to the bar
//! ten times a second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::measure::Latch;

/// The progress bar of one run.
#[derive(Debug, Clone)]
pub struct RunBar {
    bar: ProgressBar,
}

impl RunBar {
    /// A bar for `label`, drawn on standard error when it is a terminal.
    pub fn new(label: String, visible: bool) -> RunBar {
        let target = if visible {
            ProgressDrawTarget::stderr_with_hz(10)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {prefix:<40} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
            )
            .expect("static template is valid"),
        );
        bar.set_prefix(label);
        RunBar { bar }
    }

    /// A bar that draws nothing (tests).
    pub fn hidden() -> RunBar {
        RunBar::new(String::new(), false)
    }

    /// Sets the bar's current phase ("calibrating", "submitting", ...).
    pub fn phase(&self, what: &str) {
        self.bar.set_message(what.to_string());
    }

    /// Follows `latch` until the guard is dropped.
    pub fn follow(&self, latch: Arc<Latch>) -> Follow {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let bar = self.bar.clone();
        bar.set_length(latch_total(&latch));
        let handle = thread::Builder::new()
            .name("lab-progress".into())
            .spawn(move || {
                // Relaxed: the flag carries no data.
                while !flag.load(Ordering::Relaxed) {
                    bar.set_position(latch.finished() as u64);
                    thread::sleep(Duration::from_millis(100));
                }
                bar.set_position(latch.finished() as u64);
            })
            .ok();
        Follow { stop, handle }
    }

    /// Removes the bar from the screen.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Prints a line above the bars (or on standard error when hidden).
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }
}

fn latch_total(latch: &Latch) -> u64 {
    latch.total() as u64
}

/// Stops following a latch when dropped.
#[derive(Debug)]
pub struct Follow {
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
