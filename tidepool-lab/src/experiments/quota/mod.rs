//! What the experiments of issue #41 ("learning that cannot run away")
//! share. The issue asks whether the pool's core promise holds: CPU-bound
//! work never oversubscribes the cores, one computing thread per slot,
//! whatever the pool learned about blocking. Four experiments ask it in
//! four ways (`fetch-process`, `learned-then-computes`, `lock-convoy`,
//! `mixed-kind`, each described in its own module); this module measures
//! for all four.
//!
//! # Pools
//!
//! Every system runs [`CONCURRENCY`] (2) at a time: tidepool
//! `Pool::builder().concurrency(2)` with its default controller (and, in
//! `lock-convoy`, `Controller::Fixed` with 2 slots and 2 threads), tokio's
//! multi-thread runtime with 2 workers, rayon and the threadpool crate with
//! 2 threads ([`session::Way`], the one place each is built).
//!
//! # Computing at once
//!
//! A task that computes does so for a fixed amount of its own thread's
//! CPU time (`work::burn_cpu`: the lab's Fibonacci loop, looking at
//! `CLOCK_THREAD_CPUTIME_ID` every 32 rounds), so every system does the
//! same CPU work however the cores are shared, and counts itself in an
//! atomic "computing now" counter from before its first instruction to
//! after its last ([`computing::Computing`]). Sleeping (a fetch's wait)
//! is not computing.
//!
//! - `peak_computing`: the most tasks computing at once, counted at every
//!   start (the counter keeps its maximum), however short the overlap.
//! - `peak_computing_sampled`: the most a sampler thread (`lab-quota`,
//!   one of the lab's own) found when it looked, every millisecond, not
//!   counting threads the kernel finds asleep inside their computation
//!   (held by tidepool until a slot is theirs: [`computing`]).
//! - `over_quota_ms`: the time during which more than `concurrency + 2`
//!   ([`QUOTA`], 4) tasks computed at once, by that sampler: each sample's
//!   count holds until the next sample ([`computing::OverQuota`]).
//!   `peak_computing` counts held threads (it is counted at each start);
//!   the sampler's figures do not.
//! - `max_sample_gap_ms`: the sampler's longest gap between two looks, so
//!   the resolution of `over_quota_ms` on cores kept busy is on the page.
//!
//! # Threads and the pool's own figures
//!
//! - `peak_threads`: tidepool's own count (`Metrics::peak_threads`); for
//!   the others the process's threads above the count before the system
//!   was built, from `/proc` every 5 ms (as in the other experiments).
//! - tidepool's `Metrics` when the run ends: `blocked_detections`,
//!   `presumed_blocking`, `presumptions_failed`, `workers_counted_again`,
//!   with `concurrency` and `monitor_busy_ms`.
//!
//! # A process of its own
//!
//! tidepool learns per kind of task (a closure's type) which kinds block,
//! process-wide today, and a pool may learn per pool later: each
//! repetition of each row runs in a process of its own (`fresh_process`),
//! so no row inherits what another taught, and rows stay honest either
//! way. The rounds rotate, as in `overload`.
//!
//! # Ids and scales
//!
//! A row's id says what it runs (`tidepool-16-one-type`,
//! `fixed-10k-5us`). The item counts of `fetch-process`,
//! `learned-then-computes` and `mixed-kind` are those of their ids at
//! every scale, their durations shrink at `--quick` (a quarter) and
//! `--tiny`; `lock-convoy`'s holds are those of its ids, its counts shrink
//! (a tenth, a hundredth). `--items` does not apply to these experiments:
//! the ids name the counts. Each run's note says what it ran.
//!
//! # What each experiment keeps
//!
//! Its module doc opens with its `about.md` (the report's paragraph) and
//! then `quota/about_rest.md`, the note that says so; its rows, items,
//! figures and verdict. A run with one batch of items is
//! [`session::Session::one_batch`]; the time it measured against its
//! yardstick is [`put_against`]; the longest a row should take is from
//! [`serial`]; the time-over-quota bars are [`over_quota_plot`].

use std::time::Duration;

use crate::aggregate::Measured;
use crate::experiments::metric_bars;
use crate::model::plot::Plot;
use crate::model::RunResult;

pub(crate) mod computing;
pub(crate) mod ideal;
pub(crate) mod session;

/// The slots (threads, workers) of every pool.
pub(crate) const CONCURRENCY: usize = 2;

/// More than this many tasks computing at once is over the quota: the
/// slots and the two more the issue tolerates.
pub(crate) const QUOTA: usize = CONCURRENCY + 2;

/// An item's duration in a note or a scale's description, in ms to the
/// tenth where it has one: `50 ms`, `12.5 ms`, `7.5 ms`.
pub(crate) fn duration(d: Duration) -> String {
    let tenths = (d.as_secs_f64() * 1e4).round() / 10.0;
    format!("{tenths} ms")
}

/// The longest `items` items of `each` take on the [`CONCURRENCY`] slots
/// when nothing overlaps: the slots take them in turn, `ceil(items / 2)`
/// rounds (rayon's way, a sleep holding its thread).
pub(crate) fn serial(items: usize, each: Duration) -> Duration {
    each * u32::try_from(items.div_ceil(CONCURRENCY)).unwrap_or(u32::MAX)
}

/// Puts a measured time, its yardstick and the one over the other:
/// `names` are the time's (ms), the yardstick's (ms) and the ratio's.
pub(crate) fn put_against(
    m: &mut Measured,
    [time, yardstick_ms, ratio]: [&'static str; 3],
    got: Duration,
    yardstick: Duration,
) {
    m.put(time, got.as_secs_f64() * 1e3);
    m.put(yardstick_ms, yardstick.as_secs_f64() * 1e3);
    m.put(ratio, got.as_secs_f64() / yardstick.as_secs_f64());
}

/// The verdict on tidepool's rows: `MET on every tidepool row (N)` when
/// none of the `rows` missed its goal, else `MISSED_AS` and the rows that
/// did (`missed`, as each experiment names them).
pub(crate) fn on_every_row(met: &str, rows: usize, missed_as: &str, missed: &[String]) -> String {
    if missed.is_empty() {
        format!("{met} on every tidepool row ({rows})")
    } else {
        format!("{missed_as} {}", missed.join(", "))
    }
}

/// A bar per row of its time with more than [`QUOTA`] computing, the
/// plot `key`, `note` under its title.
pub(crate) fn over_quota_plot(runs: &[RunResult], key: &str, note: &str) -> Plot {
    Plot::bars(
        key,
        ("Time with more than concurrency + 2 computing", note),
        "ms over the quota",
        metric_bars(runs, "over_quota_ms"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_their_half_milliseconds() {
        assert_eq!(duration(Duration::from_millis(50)), "50 ms");
        assert_eq!(duration(Duration::from_micros(12_500)), "12.5 ms");
        assert_eq!(duration(Duration::from_micros(7_500)), "7.5 ms");
        assert_eq!(duration(Duration::from_millis(1)), "1 ms");
    }

    #[test]
    fn serial_is_the_slots_taking_the_items_in_turn() {
        let ms = Duration::from_millis;
        assert_eq!(serial(16, ms(50)), ms(400));
        assert_eq!(serial(3, ms(10)), ms(20), "an odd item takes a round");
        assert_eq!(serial(0, ms(10)), Duration::ZERO);
    }

    #[test]
    fn a_verdict_on_rows_names_the_rows_that_missed() {
        assert_eq!(
            on_every_row("both goals met", 3, "missed on", &[]),
            "both goals met on every tidepool row (3)"
        );
        let missed = ["a wall".to_string(), "b threads".to_string()];
        assert_eq!(
            on_every_row("both goals met", 3, "missed on", &missed),
            "missed on a wall, b threads"
        );
    }

    #[test]
    fn a_time_goes_with_its_yardstick_and_the_ratio() {
        let mut m = Measured::default();
        let ms = Duration::from_millis;
        put_against(&mut m, ["wall_ms", "ideal_ms", "x"], ms(30), ms(20));
        assert_eq!(
            m.metrics,
            vec![("wall_ms", 30.0), ("ideal_ms", 20.0), ("x", 1.5)]
        );
    }
}
