//! `TIDEPOOL_CONCURRENCY` and `TIDEPOOL_MAX_THREADS` set a pool's slots and
//! thread cap when the code does not; a value set in code wins; a bad value
//! is a build error that names the variable and what it holds; `Metrics`
//! shows each setting and where it came from (`SettingSource`). Alone in
//! its binary, one test: the environment is the process's.

use tidepool::{BuildError, Controller, Metrics, Pool, SettingSource};

/// The pool's `concurrency` and its source.
fn concurrency(m: &Metrics) -> (usize, SettingSource) {
    (m.concurrency, m.concurrency_from)
}

/// The pool's `max_threads` and its source.
fn max_threads(m: &Metrics) -> (usize, SettingSource) {
    (m.max_threads, m.max_threads_from)
}

#[test]
fn the_environment_sets_what_the_code_leaves_unset() {
    // Whatever the test runner's environment holds.
    std::env::remove_var("TIDEPOOL_MAX_THREADS");
    std::env::set_var("TIDEPOOL_CONCURRENCY", "3");
    let pool = Pool::builder().build().unwrap();
    assert_eq!(pool.concurrency(), 3);
    let m = pool.metrics();
    assert_eq!(m.concurrency_target, 3);
    assert_eq!(concurrency(&m), (3, SettingSource::Environment));
    // Neither in code nor in the environment: max(512, 64 * concurrency).
    assert_eq!(max_threads(&m), (512, SettingSource::Default));
    pool.shutdown().unwrap();

    // The global pool, built on first use, reads it too.
    let m = tidepool::global().metrics();
    assert_eq!(concurrency(&m), (3, SettingSource::Environment));
    assert_eq!(max_threads(&m), (512, SettingSource::Default));

    // Set in code, it wins.
    let pool = Pool::builder().concurrency(1).build().unwrap();
    assert_eq!(pool.concurrency(), 1);
    let m = pool.metrics();
    assert_eq!(concurrency(&m), (1, SettingSource::Code));
    assert_eq!(max_threads(&m), (512, SettingSource::Default));
    pool.shutdown().unwrap();

    // The thread cap: below the slots it is refused as in code.
    std::env::set_var("TIDEPOOL_MAX_THREADS", "2");
    let err = Pool::builder().build().unwrap_err();
    assert!(
        matches!(
            err,
            BuildError::MaxBelowConcurrency {
                max_threads: 2,
                concurrency: 3
            }
        ),
        "{err:?}"
    );
    std::env::set_var("TIDEPOOL_MAX_THREADS", "8");
    let pool = Pool::builder().build().unwrap();
    assert_eq!(pool.concurrency(), 3);
    let m = pool.metrics();
    assert_eq!(concurrency(&m), (3, SettingSource::Environment));
    assert_eq!(max_threads(&m), (8, SettingSource::Environment));
    pool.shutdown().unwrap();

    // Set in code, it wins; each setting keeps its own source.
    let pool = Pool::builder().max_threads(16).build().unwrap();
    let m = pool.metrics();
    assert_eq!(concurrency(&m), (3, SettingSource::Environment));
    assert_eq!(max_threads(&m), (16, SettingSource::Code));
    pool.shutdown().unwrap();
    let pool = Pool::builder()
        .concurrency(2)
        .max_threads(4)
        .build()
        .unwrap();
    let m = pool.metrics();
    assert_eq!(concurrency(&m), (2, SettingSource::Code));
    assert_eq!(max_threads(&m), (4, SettingSource::Code));
    pool.shutdown().unwrap();

    // Bad values name themselves.
    for bad in ["abc", "0", "-2", "1.5"] {
        std::env::set_var("TIDEPOOL_CONCURRENCY", bad);
        let err = Pool::builder().build().unwrap_err();
        assert_eq!(
            err,
            BuildError::Environment {
                variable: "TIDEPOOL_CONCURRENCY",
                value: bad.to_owned()
            }
        );
        let message = err.to_string();
        assert!(
            message.contains("TIDEPOOL_CONCURRENCY") && message.contains(bad),
            "{message}"
        );
        // Set in code, the variable is not read.
        assert!(Pool::builder().concurrency(2).build().is_ok());
    }
    // Empty is unset: the defaults.
    std::env::set_var("TIDEPOOL_CONCURRENCY", "");
    std::env::set_var("TIDEPOOL_MAX_THREADS", "");
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let pool = Pool::builder().build().unwrap();
    assert_eq!(pool.concurrency(), cores);
    let m = pool.metrics();
    assert_eq!(concurrency(&m), (cores, SettingSource::Default));
    let max = (64 * cores).clamp(512, tidepool::MAX_THREADS_LIMIT);
    assert_eq!(max_threads(&m), (max, SettingSource::Default));
    pool.shutdown().unwrap();
    // A fixed pool's default cap is its slots: still the default.
    let pool = Pool::builder()
        .controller(Controller::Fixed)
        .build()
        .unwrap();
    assert_eq!(
        max_threads(&pool.metrics()),
        (cores, SettingSource::Default)
    );
    pool.shutdown().unwrap();
    // Unset: the same.
    std::env::remove_var("TIDEPOOL_CONCURRENCY");
    std::env::remove_var("TIDEPOOL_MAX_THREADS");
    let pool = Pool::builder().build().unwrap();
    let m = pool.metrics();
    assert_eq!(concurrency(&m), (cores, SettingSource::Default));
    assert_eq!(max_threads(&m), (max, SettingSource::Default));
    pool.shutdown().unwrap();
}
