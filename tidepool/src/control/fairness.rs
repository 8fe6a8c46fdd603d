//! Which queue a worker's pick starts with, when it is not the usual order:
//! the fairness turns, a pure decision on the pick's number. The worker
//! (`worker/find.rs`) looks where the turn says first, then in its usual
//! order.
//!
//! # Design note
//!
//! A worker's usual order serves its newest work first: urgent work, then
//! its own deque (newest first, for fork-join's locality), then the global
//! lanes and other workers' deques only when its own is empty. Alone, that
//! order can starve four things: work spawned from outside the pool (the
//! normal lane) while workers feed themselves, the low lane, the bottom of
//! a worker's own deque when nobody steals, and the admitted tasks of
//! groups behind a stream of plain tasks. So every [`FAIRNESS_INTERVAL`]-th
//! pick starts, in turn, with one of them ([`FAIRNESS_TURNS`] turns), and
//! the admitted turn starts with each lane's admitted FIFO in a round of
//! its own. With every queue busy, each of the four gets at least one pick
//! in `4 x 61` per worker, and each lane's admitted FIFO one in `12 x 61`:
//! that is the bound on how long any of them waits behind local work.

/// One pick in this many starts with a fairness turn. 61 is prime, so it
/// does not fall into step with a program's own periodic patterns, and
/// small enough that outside work waits behind at most 60 local tasks per
/// worker.
pub(crate) const FAIRNESS_INTERVAL: u64 = 61;

/// The turns rotate over this many queues: the normal lane, the low lane,
/// the oldest local task, the admitted tasks.
pub(crate) const FAIRNESS_TURNS: u64 = 4;

/// Which lane's admitted FIFO an admitted turn looks at first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// The normal lane.
    Normal,
    /// The low lane.
    Low,
    /// The high lane.
    High,
}

/// Where a pick starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The normal global lane (work from outside the pool).
    NormalLane,
    /// The low lane, plain then admitted.
    LowLane,
    /// The oldest task of the worker's own deque.
    OldestLocal,
    /// The groups' admitted tasks, starting with this lane's FIFO.
    Admitted(Lane),
}

/// The fairness turn of pick number `pick` (a worker's task tick), or
/// `None` for the usual order.
pub(crate) fn turn(pick: u64) -> Option<Turn> {
    if !pick.is_multiple_of(FAIRNESS_INTERVAL) {
        return None;
    }
    let turn = pick / FAIRNESS_INTERVAL;
    Some(match turn % FAIRNESS_TURNS {
        0 => Turn::NormalLane,
        1 => Turn::LowLane,
        2 => Turn::OldestLocal,
        _ => Turn::Admitted(match (turn / FAIRNESS_TURNS) % 3 {
            0 => Lane::Normal,
            1 => Lane::Low,
            _ => Lane::High,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_picks_take_the_usual_order() {
        let turns = (1..FAIRNESS_INTERVAL)
            .filter(|&p| turn(p).is_some())
            .count();
        assert_eq!(turns, 0);
        assert!(turn(0).is_some());
        assert!(turn(FAIRNESS_INTERVAL).is_some());
    }

    #[test]
    fn each_queue_gets_a_turn_in_every_four_intervals() {
        // Any window of 4 x 61 consecutive picks, wherever it starts.
        for start in [0, 1, 60, 61, 1_000, u64::MAX / 2] {
            let turns: Vec<Turn> = (start..start + FAIRNESS_TURNS * FAIRNESS_INTERVAL)
                .filter_map(turn)
                .collect();
            assert_eq!(turns.len(), FAIRNESS_TURNS as usize, "from {start}");
            assert!(turns.contains(&Turn::NormalLane), "from {start}");
            assert!(turns.contains(&Turn::LowLane), "from {start}");
            assert!(turns.contains(&Turn::OldestLocal), "from {start}");
            assert!(
                turns.iter().any(|t| matches!(t, Turn::Admitted(_))),
                "from {start}"
            );
        }
    }

    #[test]
    fn each_lanes_admitted_fifo_goes_first_once_in_twelve_intervals() {
        for start in [0, 7, 5_000] {
            let firsts: Vec<Lane> = (start..start + 3 * FAIRNESS_TURNS * FAIRNESS_INTERVAL)
                .filter_map(turn)
                .filter_map(|t| match t {
                    Turn::Admitted(lane) => Some(lane),
                    _ => None,
                })
                .collect();
            assert_eq!(firsts.len(), 3, "from {start}");
            for lane in [Lane::Normal, Lane::Low, Lane::High] {
                assert!(firsts.contains(&lane), "{lane:?} from {start}");
            }
        }
    }
}
