//! CPU-bound work of a calibrated size: the largest Fibonacci number below
//! 100, computed again and again; or of a fixed amount of the calling
//! thread's own CPU time ([`burn_cpu`]).

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Computes the largest Fibonacci number below 100 `rounds` times and
/// returns a checksum (so the optimiser cannot drop the work).
///
/// Never inlined: every caller (calibration, the lone job, each system's
/// closure) then runs the very same machine code, so a job costs the same
/// everywhere and only scheduling differs.
#[inline(never)]
pub fn fib_rounds(rounds: u64) -> u64 {
    let mut acc = 0_u64;
    for _ in 0..rounds {
        let (mut a, mut b) = (0_u64, 1_u64);
        while b < black_box(100) {
            let next = a + b;
            a = b;
            b = next;
        }
        acc = acc.wrapping_add(black_box(a));
    }
    acc
}

/// The number of rounds of [`fib_rounds`] that take about `target` on one
/// otherwise idle core. Measures a few times and keeps the fastest, so a
/// moment of interference does not inflate the estimate.
pub fn rounds_for(target: Duration) -> u64 {
    // Grow the probe until it runs for long enough to time reliably.
    let probe_time = (target / 8).clamp(Duration::from_millis(2), Duration::from_millis(100));
    let mut rounds = 1_000_u64;
    loop {
        let t = Instant::now();
        black_box(fib_rounds(rounds));
        if t.elapsed() >= probe_time || rounds > 1 << 40 {
            break;
        }
        rounds *= 2;
    }
    let best = (0..3)
        .map(|_| {
            let t = Instant::now();
            black_box(fib_rounds(rounds));
            t.elapsed()
        })
        .min()
        .unwrap_or(Duration::from_nanos(1))
        .max(Duration::from_nanos(1));
    let per_round = best.as_secs_f64() / rounds as f64;
    ((target.as_secs_f64() / per_round) as u64).max(1)
}

/// Rounds of [`fib_rounds`] between two looks at the thread's CPU clock in
/// [`burn_cpu`]: well under a microsecond of work, so a 5 µs hold
/// overshoots by little, while the clock (a system call) costs about as
/// much again, which is CPU time all the same.
const ROUNDS_PER_LOOK: u64 = 32;

/// Computes (the same loop as [`fib_rounds`]) until the calling thread has
/// used `cpu` of its own CPU time since the call: a fixed amount of CPU
/// whatever else runs on the machine, where a calibrated round count would
/// be a fixed amount of work and a wall-clock loop would count the time
/// the thread waited for a core. Returns a checksum.
pub fn burn_cpu(cpu: Duration) -> u64 {
    let until = crate::probe::thread_cpu_time() + cpu;
    let mut acc = 0_u64;
    while crate::probe::thread_cpu_time() < until {
        acc = acc.wrapping_add(fib_rounds(ROUNDS_PER_LOOK));
    }
    acc
}

/// The calibrations made (or handed over) so far: target to rounds.
fn calibrations_cache() -> std::sync::MutexGuard<'static, HashMap<Duration, u64>> {
    static CACHE: OnceLock<Mutex<HashMap<Duration, u64>>> = OnceLock::new();
    CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// [`rounds_for`], measured once per target and remembered, so every run of
/// an experiment does exactly the same work.
pub fn calibrated_rounds(target: Duration) -> u64 {
    *calibrations_cache()
        .entry(target)
        .or_insert_with(|| rounds_for(target))
}

/// Every calibration this process made, to hand to a run in a process of
/// its own, so that it does exactly the same work as the lab's runs.
pub fn calibrations() -> Vec<(Duration, u64)> {
    let mut all: Vec<(Duration, u64)> =
        calibrations_cache().iter().map(|(t, r)| (*t, *r)).collect();
    all.sort_unstable();
    all
}

/// Takes a calibration made in another process (see [`calibrations`]):
/// [`calibrated_rounds`] answers it for `target` from now on.
pub fn remember_calibration(target: Duration, rounds: u64) {
    calibrations_cache().insert(target, rounds);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fib_below_100_is_89() {
        assert_eq!(fib_rounds(1), 89);
        assert_eq!(fib_rounds(3), 267);
        assert_eq!(fib_rounds(0), 0);
    }

    #[test]
    fn burning_cpu_uses_that_much_of_the_thread_s_clock() {
        let before = crate::probe::thread_cpu_time();
        black_box(burn_cpu(Duration::from_millis(3)));
        let used = crate::probe::thread_cpu_time() - before;
        assert!(used >= Duration::from_millis(3), "{used:?}");
        // The overshoot is one look's worth (plus a preemption's accounting).
        assert!(used < Duration::from_millis(13), "{used:?}");
        assert_eq!(burn_cpu(Duration::ZERO), 0, "nothing to compute");
    }

    #[test]
    fn calibration_is_positive() {
        assert!(rounds_for(Duration::from_millis(1)) >= 1);
    }

    #[test]
    fn a_handed_over_calibration_is_used_as_is() {
        // A target no other test calibrates.
        let target = Duration::from_nanos(1_234_567);
        remember_calibration(target, 42);
        assert_eq!(calibrated_rounds(target), 42);
        assert!(calibrations().contains(&(target, 42)));
    }
}
