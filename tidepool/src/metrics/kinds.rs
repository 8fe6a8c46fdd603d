//! A pool's blocking events per kind of task, behind [`Metrics::kinds`].

#[cfg(doc)]
use super::Metrics;
use super::KINDS_TRACKED;

/// A pool's blocking events per kind of task, for [`Metrics::kinds`]: a
/// fixed table of [`KINDS_TRACKED`] slots, each claimed once by a kind (its
/// bits, `runtime::kinds::Kind::to_bits`; 0 is no kind) and never given
/// back, probed linearly from the kind's own slot. Written on the paths
/// that give a slot away (the monitor's, a declared hand-over's, a
/// presumed start's) and at a presumed task's end: never per task. Plain
/// std atomics: hints, not part of any protocol.
#[derive(Debug)]
pub(crate) struct KindCounters {
    slots: Box<[KindSlot]>,
    untracked: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct KindSlot {
    key: std::sync::atomic::AtomicU32,
    /// Indexed by `KindEvent as usize`.
    counts: [std::sync::atomic::AtomicU64; 4],
}

/// What a task of a kind did, for [`KindCounters::count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KindEvent {
    /// The monitor found it blocked.
    Detected = 0,
    /// It declared blocking (a section past its grace, a wait on the pool).
    Declared = 1,
    /// It started presumed blocking.
    Presumed = 2,
    /// Presumed blocking, it computed instead.
    PresumptionFailed = 3,
}

/// One kind's counts, as [`KindCounters::read`] returns them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KindCounts {
    pub(crate) blocked_detections: u64,
    pub(crate) declared_blocking: u64,
    pub(crate) presumed_blocking: u64,
    pub(crate) presumptions_failed: u64,
}

impl Default for KindCounters {
    fn default() -> Self {
        KindCounters {
            slots: (0..KINDS_TRACKED).map(|_| KindSlot::default()).collect(),
            untracked: Default::default(),
        }
    }
}

impl KindCounters {
    /// Counts `event` for the kind `key`; in `untracked` if every slot is
    /// another kind's. A kind's first event claims a slot (a
    /// compare-and-swap); later ones find it within a few loads.
    pub(crate) fn count(&self, key: u32, event: KindEvent) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
        if key == 0 {
            return;
        }
        let start = key as usize % KINDS_TRACKED;
        for offset in 0..KINDS_TRACKED {
            let slot = &self.slots[(start + offset) % KINDS_TRACKED];
            let claimed = slot.key.load(Acquire);
            let ours = claimed == key
                || claimed == 0
                    && match slot.key.compare_exchange(0, key, AcqRel, Acquire) {
                        Ok(_) => true,
                        Err(now) => now == key,
                    };
            if ours {
                slot.counts[event as usize].fetch_add(1, Relaxed);
                return;
            }
        }
        self.untracked.fetch_add(1, Relaxed);
    }

    /// Every kind that has a slot, with its counts; and the events of
    /// kinds that had none.
    pub(crate) fn read(&self) -> (Vec<(u32, KindCounts)>, u64) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let kinds = self
            .slots
            .iter()
            .filter_map(|slot| {
                let key = slot.key.load(Acquire);
                let get = |event: KindEvent| slot.counts[event as usize].load(Relaxed);
                (key != 0).then(|| {
                    let counts = KindCounts {
                        blocked_detections: get(KindEvent::Detected),
                        declared_blocking: get(KindEvent::Declared),
                        presumed_blocking: get(KindEvent::Presumed),
                        presumptions_failed: get(KindEvent::PresumptionFailed),
                    };
                    (key, counts)
                })
            })
            .collect();
        (kinds, self.untracked.load(Relaxed))
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn each_kind_counts_in_its_own_slot_until_the_table_is_full() {
        let table = KindCounters::default();
        table.count(7, KindEvent::Detected);
        table.count(7, KindEvent::Detected);
        table.count(7, KindEvent::Presumed);
        // Same home slot (7 + KINDS_TRACKED), another kind.
        let neighbour = 7 + KINDS_TRACKED as u32;
        table.count(neighbour, KindEvent::Declared);
        table.count(0, KindEvent::Detected);
        let (kinds, untracked) = table.read();
        assert_eq!(untracked, 0);
        let of = |key| kinds.iter().find(|(k, _)| *k == key).map(|(_, c)| *c);
        assert_eq!(
            of(7),
            Some(KindCounts {
                blocked_detections: 2,
                presumed_blocking: 1,
                ..KindCounts::default()
            })
        );
        assert_eq!(of(neighbour).map(|c| c.declared_blocking), Some(1));
        assert_eq!(kinds.len(), 2, "no kind (0) is not counted");
        for key in 1000..1000 + KINDS_TRACKED as u32 {
            table.count(key, KindEvent::PresumptionFailed);
        }
        let (kinds, untracked) = table.read();
        assert_eq!(kinds.len(), KINDS_TRACKED);
        assert_eq!(untracked, 2, "two kinds found no room");
        table.count(7, KindEvent::Detected);
        assert_eq!(table.read().1, 2, "a kind with a slot keeps it");
    }
}
