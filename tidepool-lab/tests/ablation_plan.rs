//! The ablation plan (`tidepool-lab ablation`) names exactly the library's
//! mechanisms: each of its names builds a pool with that mechanism off,
//! and the library knows no mechanism the plan leaves out. Alone in its
//! binary, one test: the environment is the process's.

use std::collections::BTreeSet;
use tidepool::Pool;
use tidepool_lab::ablation::{ABLATE_VAR, PLAN};

#[test]
fn the_plan_names_every_mechanism_of_the_library_and_no_other() {
    for probe in PLAN {
        std::env::set_var(ABLATE_VAR, probe.mechanism);
        let pool = Pool::builder().concurrency(1).build();
        assert!(pool.is_ok(), "{}: {:?}", probe.mechanism, pool.err());
        pool.unwrap().shutdown().unwrap();
        assert!(!probe.figures.is_empty(), "{} has figures", probe.mechanism);
    }
    // The library's refusal lists the names it knows.
    std::env::set_var(ABLATE_VAR, "no-such-mechanism");
    let message = Pool::builder().build().unwrap_err().to_string();
    std::env::remove_var(ABLATE_VAR);
    let known = message
        .split("(known: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no list of known names in: {message}"));
    let library: BTreeSet<&str> = known.split(", ").collect();
    let plan: BTreeSet<&str> = PLAN.iter().map(|p| p.mechanism).collect();
    assert_eq!(library, plan);
}
