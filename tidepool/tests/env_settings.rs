//! `TIDEPOOL_CONCURRENCY` and `TIDEPOOL_MAX_THREADS` set a pool's slots and
//! thread cap when the code does not; a value set in code wins; a bad value
//! is a build error that names the variable and what it holds. Alone in
//! its binary, one test: the environment is the process's.

use tidepool::{BuildError, Pool};

#[test]
fn the_environment_sets_what_the_code_leaves_unset() {
    std::env::set_var("TIDEPOOL_CONCURRENCY", "3");
    let pool = Pool::builder().build().unwrap();
    assert_eq!(pool.concurrency(), 3);
    assert_eq!(pool.metrics().concurrency_target, 3);
    pool.shutdown().unwrap();

    // Set in code, it wins.
    let pool = Pool::builder().concurrency(1).build().unwrap();
    assert_eq!(pool.concurrency(), 1);
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
    // Empty is unset.
    std::env::set_var("TIDEPOOL_CONCURRENCY", "");
    std::env::remove_var("TIDEPOOL_MAX_THREADS");
    let pool = Pool::builder().build().unwrap();
    assert_eq!(
        pool.concurrency(),
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    pool.shutdown().unwrap();
}
