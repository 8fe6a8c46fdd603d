//! Ablation switches: each of the pool's mechanisms can be switched off,
//! one at a time, so that the lab can show what each one buys
//! (docs/ablation.md, made by `tidepool-lab ablation-table`). A mechanism
//! that buys nothing measurable has no place in the pool; this is how we
//! find out.
//!
//! Not a tuning knob: a pool with a mechanism switched off is a worse
//! pool. The switches are read from the environment variable
//! [`ABLATE_VAR`] (a comma-separated list of [`Mechanism`] names) when a
//! pool is built, like `TIDEPOOL_CONCURRENCY`, so that a lab run switches
//! one off in every pool of its processes (the global pool, the service's
//! server processes) without code of its own in each experiment. Unset
//! (the only case outside the lab), every mechanism is on.
//!
//! Each switch is read where its mechanism decides (one load of the
//! pool's settings and a branch); the pure policies get them in their
//! inputs (`policy::Limits::switches`), so their tests can switch one off
//! too.

use std::fmt;

/// The environment variable that switches mechanisms off (module docs).
pub(crate) const ABLATE_VAR: &str = "TIDEPOOL_ABLATE";

/// One mechanism that can be switched off. Each name is the one
/// [`ABLATE_VAR`] takes and the lab's ablation table shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mechanism {
    /// Closures of a kind learned to block start on a thread of their own,
    /// as they are spawned (`control::presumption`, `worker::schedule`).
    Presumption,
    /// The growth climb: presumption's cap and the policy's burst grow
    /// only while completions per second rise (`control::growth`).
    GrowthClimb,
    /// Asking the kernel what a sleeping presumed task waits in (a futex
    /// or a call outside the process, `sys::WaitsFor`): off, every wait
    /// is judged by the climb.
    WaitClasses,
    /// The policy's burst: more replacements than blocked workers while
    /// the queue does not drain (`control::policy`).
    Burst,
    /// The quantum rule: a slot lent to queued work while computing tasks
    /// hold every slot (`Builder::quantum`; off is `quantum(None)`).
    Quantum,
    /// A spare parked thread after a presumed task took the last one
    /// (`worker::start_spare`).
    Spare,
    /// A worker that starts a presumed task hands two more queued ones a
    /// thread each, so a queue of them starts as a tree (`worker::fan_out`).
    FanOut,
    /// Every 61st pick looks at the lanes, the low lane, the deque's
    /// oldest task and the admitted FIFOs before the worker's own deque
    /// (`worker::find_task`).
    FairnessTurns,
    /// The spawner's free rings: finished cells freed by the thread that
    /// allocated them (`runtime::task::local_free`).
    FreeRings,
    /// Searchers and thieves wait a little for a batch to gather
    /// (`worker::coalesce`).
    Coalesce,
    /// A worker that gives way moves its deque to the handed-off FIFO,
    /// served before new arrivals (`runtime::queues`); off, to the back of
    /// the normal lane.
    HandedOffFifo,
    /// After a find, the monitor ticks at a quarter of its interval for a
    /// while (`monitor`).
    QuickPace,
    /// A worker whose slot was given away and that computes again is
    /// counted against the slots again (`control::back_from_block`).
    CountAgain,
    /// A worker back from its block that computes while every slot is
    /// taken is held until a slot is its own (`control::hold`); off, it is
    /// counted beyond the slots and runs on.
    Hold,
    /// A held worker given its slot by a worker about to park or block
    /// wakes on that worker's CPU (`runtime::hold::let_go_here`); off,
    /// wherever the kernel places it.
    WakeHere,
    /// A pool thread about to leave its CPU idle pulls a runnable worker
    /// waiting behind another on a second CPU (`control::placement`); off,
    /// the kernel's placement alone.
    PullHere,
    /// A `SCHED_IDLE` thread per CPU that runs when its CPU would idle
    /// while every slot is taken and work waits, and has the monitor look
    /// at once (`control::sentinel`); off, blocks are found at the
    /// monitor's ticks alone.
    CpuSentinel,
    /// While every task at work is of a kind its growth climb holds (a
    /// lock convoy), the policy works within a few threads, declines
    /// spares, and does not mark a sibling's waiter blocked (`monitor`).
    ConvoyHold,
    /// A kind one of whose tasks was found runnable an interval into its
    /// run (a lock's holder kept off the cores) does not climb with
    /// nothing ended, nor lose its hold (`control::growth`, "A sibling
    /// runs").
    SiblingRuns,
    /// A reactor thread pauses while the workers are saturated, so events
    /// reach them in fewer wake-ups (`reactor_pacing`).
    ReactorPacing,
}

impl Mechanism {
    /// Every mechanism, in the order the table shows them.
    pub(crate) const ALL: [Mechanism; 20] = [
        Mechanism::Presumption,
        Mechanism::GrowthClimb,
        Mechanism::WaitClasses,
        Mechanism::Burst,
        Mechanism::Quantum,
        Mechanism::Spare,
        Mechanism::FanOut,
        Mechanism::FairnessTurns,
        Mechanism::FreeRings,
        Mechanism::Coalesce,
        Mechanism::HandedOffFifo,
        Mechanism::QuickPace,
        Mechanism::CountAgain,
        Mechanism::Hold,
        Mechanism::WakeHere,
        Mechanism::PullHere,
        Mechanism::CpuSentinel,
        Mechanism::ConvoyHold,
        Mechanism::SiblingRuns,
        Mechanism::ReactorPacing,
    ];

    /// The name [`ABLATE_VAR`] takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::Presumption => "presumption",
            Mechanism::GrowthClimb => "growth-climb",
            Mechanism::WaitClasses => "wait-classes",
            Mechanism::Burst => "burst",
            Mechanism::Quantum => "quantum",
            Mechanism::Spare => "spare",
            Mechanism::FanOut => "fan-out",
            Mechanism::FairnessTurns => "fairness-turns",
            Mechanism::FreeRings => "free-rings",
            Mechanism::Coalesce => "coalesce",
            Mechanism::HandedOffFifo => "handed-off-fifo",
            Mechanism::QuickPace => "quick-pace",
            Mechanism::CountAgain => "count-again",
            Mechanism::Hold => "hold",
            Mechanism::WakeHere => "wake-here",
            Mechanism::PullHere => "pull-here",
            Mechanism::CpuSentinel => "cpu-sentinel",
            Mechanism::ConvoyHold => "convoy-hold",
            Mechanism::SiblingRuns => "sibling-runs",
            Mechanism::ReactorPacing => "reactor-pacing",
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Which mechanisms are on: all of them, unless [`ABLATE_VAR`] switched
/// some off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Switches {
    /// One bit per mechanism switched off.
    off: u32,
}

/// A name in [`ABLATE_VAR`] that is no mechanism's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnknownMechanism(pub(crate) String);

impl fmt::Display for UnknownMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is no mechanism's name (known: ", self.0)?;
        for (i, m) in Mechanism::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{}", m.name())?;
        }
        f.write_str(")")
    }
}

impl Switches {
    /// Every mechanism on.
    pub(crate) const ALL_ON: Switches = Switches { off: 0 };

    /// Whether `mechanism` is on.
    #[inline(always)]
    pub(crate) fn on(self, mechanism: Mechanism) -> bool {
        self.off & mechanism.bit() == 0
    }

    /// These switches with `mechanism` off.
    pub(crate) fn without(self, mechanism: Mechanism) -> Switches {
        Switches {
            off: self.off | mechanism.bit(),
        }
    }

    /// The switches a comma-separated list of mechanism names turns off
    /// (blanks around names and empty entries are ignored).
    pub(crate) fn parse(list: &str) -> Result<Switches, UnknownMechanism> {
        let mut switches = Switches::ALL_ON;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let mechanism = Mechanism::ALL
                .into_iter()
                .find(|m| m.name() == name)
                .ok_or_else(|| UnknownMechanism(name.to_owned()))?;
            switches = switches.without(mechanism);
        }
        Ok(switches)
    }

    /// The switches [`ABLATE_VAR`] sets, or the bad name it holds. Unset
    /// or not Unicode: every mechanism on.
    pub(crate) fn from_env() -> Result<Switches, UnknownMechanism> {
        match std::env::var(ABLATE_VAR) {
            Ok(list) => Switches::parse(&list),
            Err(_) => Ok(Switches::ALL_ON),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mechanism_is_on_unless_named() {
        let none = Switches::parse("").unwrap();
        assert!(Mechanism::ALL.iter().all(|&m| none.on(m)));
        let two = Switches::parse(" spare, burst ,").unwrap();
        for m in Mechanism::ALL {
            let named = matches!(m, Mechanism::Spare | Mechanism::Burst);
            assert_eq!(two.on(m), !named, "{}", m.name());
        }
    }

    #[test]
    fn names_are_distinct_and_each_parses_back_to_its_mechanism() {
        for (i, a) in Mechanism::ALL.iter().enumerate() {
            assert_eq!(a.bit(), 1 << i, "ALL lists the variants in order");
            let alone = Switches::parse(a.name()).unwrap();
            assert_eq!(alone, Switches::ALL_ON.without(*a));
        }
    }

    #[test]
    fn an_unknown_name_is_an_error_that_names_it_and_the_known_ones() {
        let error = Switches::parse("spare,sparse").unwrap_err();
        assert_eq!(error, UnknownMechanism("sparse".to_owned()));
        let message = error.to_string();
        assert!(message.starts_with("\"sparse\" is no mechanism's name (known: presumption, "));
        assert!(message.ends_with("reactor-pacing)"), "{message}");
    }
}
