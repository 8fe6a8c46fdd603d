//! The admission state machine shared by groups and concurrent/exclusive
//! pairs: who may enter the pool's queues now, and who waits in which FIFO.
//!
//! It knows nothing about runnables or pools: items are any `T: Ticketed`,
//! and every operation returns the items it admitted ([`Admitted`]) for the
//! caller to queue in the pool *after* the lock is released. That keeps it
//! small enough for the loom model in `loom_models/admission.rs`, which drives this
//! very code. See the module docs of `fair` for the protocol it implements.
//!
//! All state sits behind one mutex per pool. The per-task [`Ticket`] flags
//! are atomics only to be `Sync`: they are read and written under that mutex,
//! which orders them, so `Relaxed` is enough for every access.

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use std::collections::VecDeque;
use std::fmt;

/// Which permits an item needs: see the `fair` module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// An item of a group: a run permit, plus an in-flight permit the first
    /// time it is admitted.
    Group,
    /// A concurrent item of a pair: a run permit, and no exclusive item
    /// running or waiting.
    Concurrent,
    /// An exclusive item of a pair: the pair's whole run capacity.
    Exclusive,
}

/// The item holds an in-flight permit (it was admitted once and has not ended).
const STARTED: usize = 1;
/// The item holds one of its lane's queue tokens (admitted, not yet polled).
const TOKEN: usize = 2;
/// The item ended; it holds nothing and is never admitted again.
const ENDED: usize = 4;

/// Per-task admission state: which side the task is on and which permits it
/// holds. Only touched under the arbiter's lock.
pub(crate) struct Ticket {
    side: Side,
    flags: AtomicUsize,
}

impl Ticket {
    /// A ticket for a new task on `side`, holding nothing.
    pub(crate) fn new(side: Side) -> Self {
        Ticket {
            side,
            flags: AtomicUsize::new(0),
        }
    }

    /// The side this ticket's task is on.
    #[cfg_attr(not(test), allow(dead_code))] // the models' and tests'
    pub(crate) fn side(&self) -> Side {
        self.side
    }

    // Relaxed: every access happens under the arbiter's lock (module docs).
    fn has(&self, flag: usize) -> bool {
        self.flags.load(Ordering::Relaxed) & flag != 0
    }

    fn set(&self, flag: usize) {
        self.flags.fetch_or(flag, Ordering::Relaxed);
    }

    fn clear(&self, flag: usize) {
        self.flags.fetch_and(!flag, Ordering::Relaxed);
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("side", &self.side)
            .field("flags", &self.flags.load(Ordering::Relaxed))
            .finish()
    }
}

/// An item the arbiter can queue: it carries its task's ticket.
pub(crate) trait Ticketed {
    /// The ticket of the item's task.
    fn ticket(&self) -> &Ticket;
}

/// The limits of one unit (a group or a pair). `usize::MAX` is "no limit".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnitConfig {
    /// Run permits: items admitted and not yet through their run. For a pair,
    /// the concurrent side's limit (an exclusive item takes all of them).
    pub(crate) max_running: usize,
    /// In-flight permits: tasks admitted at least once and not ended.
    pub(crate) max_in_flight: usize,
    /// Consecutive admissions the unit gets when its lane's turn comes.
    pub(crate) weight: u32,
    /// The pool lane (0 = high, 1 = normal, 2 = low) whose budget it uses.
    pub(crate) lane: usize,
}

/// A unit's handle inside its arbiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnitId(usize);

/// A unit's counters, read under the lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnitCounts {
    /// Items waiting in the unit's FIFOs.
    pub(crate) queued: usize,
    /// Run permits held (items admitted and not yet through their run); an
    /// exclusive item counts as one.
    pub(crate) admitted: usize,
    /// Whether an exclusive item holds the pair.
    pub(crate) exclusive: bool,
    /// In-flight permits held.
    pub(crate) in_flight: usize,
}

/// Items an operation admitted, in admission order, to be queued in the pool
/// once the arbiter's lock is released. Usually zero or one, so the first is
/// kept inline.
#[must_use = "admitted items must be queued in the pool, or they are lost"]
pub(crate) struct Admitted<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Admitted<T> {
    fn new() -> Self {
        Admitted {
            first: None,
            rest: Vec::new(),
        }
    }

    fn push(&mut self, item: T) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(item);
        } else {
            self.rest.push(item);
        }
    }

    /// True if nothing was admitted.
    #[cfg_attr(any(not(test), tidepool_loom), allow(dead_code))] // the tests'
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_empty()
    }

    /// How many items were admitted.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }
}

impl<T> IntoIterator for Admitted<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<T> fmt::Debug for Admitted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitted")
            .field("len", &self.len())
            .finish()
    }
}

/// Which of a unit's FIFOs an item waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    /// Wakes of started group tasks: need a run permit only.
    Resumed,
    /// Group tasks not yet started, and every concurrent item of a pair.
    Fresh,
    /// Exclusive items of a pair.
    Exclusive,
}

struct Unit<T> {
    config: UnitConfig,
    /// Run permits held by group and concurrent items.
    running: usize,
    /// An exclusive item holds the pair.
    exclusive_running: bool,
    in_flight: usize,
    resumed: VecDeque<T>,
    fresh: VecDeque<T>,
    exclusive: VecDeque<T>,
    /// Whether the unit is in its lane's ring.
    in_ring: bool,
    /// Admissions left in the unit's current turn at the ring's head.
    credit: u32,
}

impl<T> Unit<T> {
    fn new(config: UnitConfig) -> Self {
        Unit {
            config,
            running: 0,
            exclusive_running: false,
            in_flight: 0,
            resumed: VecDeque::new(),
            fresh: VecDeque::new(),
            exclusive: VecDeque::new(),
            in_ring: false,
            credit: config.weight,
        }
    }

    fn queued(&self) -> usize {
        self.resumed.len() + self.fresh.len() + self.exclusive.len()
    }

    /// The FIFO whose head the unit's own limits admit now, if any. The
    /// order of the checks is the admission policy:
    ///
    /// * a waiting exclusive item blocks every concurrent item behind it, and
    ///   runs once nothing else of the pair holds a permit;
    /// * wakes of started tasks go before tasks that have not started (this
    ///   is what keeps `max_in_flight` from deadlocking: a started task never
    ///   waits behind one that needs its in-flight permit).
    fn next(&self) -> Option<Queue> {
        if self.exclusive_running {
            return None;
        }
        if !self.exclusive.is_empty() {
            return (self.running == 0).then_some(Queue::Exclusive);
        }
        if self.running >= self.config.max_running {
            return None;
        }
        if !self.resumed.is_empty() {
            return Some(Queue::Resumed);
        }
        if !self.fresh.is_empty() && self.in_flight < self.config.max_in_flight {
            return Some(Queue::Fresh);
        }
        None
    }
}

impl<T: Ticketed> Unit<T> {
    /// Takes the head of `queue` and the permits it needs (not the token).
    fn take(&mut self, queue: Queue) -> T {
        let item = match queue {
            Queue::Resumed => self.resumed.pop_front(),
            Queue::Fresh => self.fresh.pop_front(),
            Queue::Exclusive => self.exclusive.pop_front(),
        }
        .expect("Unit::next named a non-empty queue");
        let ticket = item.ticket();
        if ticket.side == Side::Exclusive {
            self.exclusive_running = true;
        } else {
            self.running += 1;
        }
        if !ticket.has(STARTED) {
            ticket.set(STARTED);
            self.in_flight += 1;
        }
        item
    }

    fn enqueue(&mut self, item: T) {
        let ticket = item.ticket();
        match ticket.side {
            Side::Exclusive => self.exclusive.push_back(item),
            Side::Group if ticket.has(STARTED) => self.resumed.push_back(item),
            Side::Group | Side::Concurrent => self.fresh.push_back(item),
        }
    }
}

/// A pool lane's share of the admission budget.
#[derive(Debug)]
struct Lane {
    /// Queue tokens free: how many more gated items may wait in this lane of
    /// the pool's queues.
    tokens: usize,
    /// Units whose own limits admit their head item but that wait for a
    /// token, in turn order. Lazily cleaned: a unit that lost its eligibility
    /// while in the ring leaves when it reaches the head.
    ring: VecDeque<usize>,
}

struct State<T> {
    lanes: [Lane; 3],
    units: Vec<Option<Unit<T>>>,
    free_ids: Vec<usize>,
}

/// One pool's admission state: every unit's permits and FIFOs, and the
/// lanes' queue budgets. See the `fair` module docs.
pub(crate) struct Arbiter<T> {
    state: Mutex<State<T>>,
}

impl<T> fmt::Debug for Arbiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("Arbiter")
            .field("tokens", &[0, 1, 2].map(|lane| state.lanes[lane].tokens))
            .field("units", &state.units.iter().flatten().count())
            .finish()
    }
}

impl<T: Ticketed> Arbiter<T> {
    /// An arbiter whose lanes each let `budget` gated items wait in the
    /// pool's queues at a time.
    ///
    /// # Panics
    ///
    /// If `budget` is zero: nothing could ever be admitted.
    pub(crate) fn new(budget: usize) -> Self {
        assert!(budget > 0, "an admission budget of 0 would admit nothing");
        let lane = || Lane {
            tokens: budget,
            ring: VecDeque::new(),
        };
        Arbiter {
            state: Mutex::new(State {
                lanes: [lane(), lane(), lane()],
                units: Vec::new(),
                free_ids: Vec::new(),
            }),
        }
    }

    /// Registers a unit.
    ///
    /// # Panics
    ///
    /// If a limit or the weight is zero, or the lane is not 0, 1 or 2.
    pub(crate) fn add_unit(&self, config: UnitConfig) -> UnitId {
        assert!(config.max_running > 0 && config.max_in_flight > 0 && config.weight > 0);
        assert!(config.lane < 3);
        let mut state = lock(&self.state);
        let unit = Some(Unit::new(config));
        match state.free_ids.pop() {
            Some(id) => {
                state.units[id] = unit;
                UnitId(id)
            }
            None => {
                state.units.push(unit);
                UnitId(state.units.len() - 1)
            }
        }
    }

    /// Forgets a unit whose tasks have all ended. Returns what it still had
    /// queued (nothing, unless the pool stopped), for the caller to drop
    /// outside the lock.
    pub(crate) fn remove_unit(&self, id: UnitId) -> Vec<T> {
        let mut state = lock(&self.state);
        let unit = state.units[id.0].take().expect("unit removed twice");
        state.free_ids.push(id.0);
        let lane = unit.config.lane;
        state.lanes[lane].ring.retain(|&u| u != id.0);
        unit.resumed
            .into_iter()
            .chain(unit.fresh)
            .chain(unit.exclusive)
            .collect()
    }

    /// A task of unit `id` was scheduled (spawned or woken): admits it, or
    /// queues it in the unit's FIFO. Returns what was admitted.
    pub(crate) fn schedule(&self, id: UnitId, item: T) -> Admitted<T> {
        let mut state = lock(&self.state);
        debug_assert!(!item.ticket().has(ENDED), "an ended task was scheduled");
        state.unit(id).enqueue(item);
        state.settle(id)
    }

    /// The item's task is being polled: its queue token is free again.
    pub(crate) fn poll_started(&self, id: UnitId, ticket: &Ticket) -> Admitted<T> {
        let mut state = lock(&self.state);
        if !state.release_token(id, ticket) {
            return Admitted::new();
        }
        state.settle(id)
    }

    /// One run of the item's task is over (polled, or dropped because the
    /// task was cancelled): its run permit is free again.
    pub(crate) fn after_run(&self, id: UnitId, ticket: &Ticket) -> Admitted<T> {
        let mut state = lock(&self.state);
        // A run that never polled (a cancelled task) still holds its token,
        // unless `ended` gave it back already.
        state.release_token(id, ticket);
        let unit = state.unit(id);
        if ticket.side == Side::Exclusive {
            debug_assert!(unit.exclusive_running, "exclusive permit released twice");
            unit.exclusive_running = false;
        } else {
            debug_assert!(unit.running > 0, "run permit released twice");
            unit.running -= 1;
        }
        state.settle(id)
    }

    /// The item's task ended (completed, panicked, or its future was dropped):
    /// its in-flight permit and any token are free.
    pub(crate) fn ended(&self, id: UnitId, ticket: &Ticket) -> Admitted<T> {
        let mut state = lock(&self.state);
        debug_assert!(!ticket.has(ENDED), "a task ended twice");
        state.release_token(id, ticket);
        if ticket.has(STARTED) {
            ticket.clear(STARTED);
            let unit = state.unit(id);
            debug_assert!(unit.in_flight > 0);
            unit.in_flight -= 1;
        }
        ticket.set(ENDED);
        state.settle(id)
    }

    /// Empties every unit's FIFOs (the pool stopped): the caller drops the
    /// items outside the lock, which cancels their tasks.
    pub(crate) fn drain(&self) -> Vec<T> {
        let mut state = lock(&self.state);
        let mut out = Vec::new();
        for unit in state.units.iter_mut().flatten() {
            out.extend(unit.resumed.drain(..));
            out.extend(unit.fresh.drain(..));
            out.extend(unit.exclusive.drain(..));
        }
        out
    }

    /// Unit `id`'s counters now.
    pub(crate) fn counts(&self, id: UnitId) -> UnitCounts {
        let mut state = lock(&self.state);
        let unit = state.unit(id);
        UnitCounts {
            queued: unit.queued(),
            admitted: unit.running + usize::from(unit.exclusive_running),
            exclusive: unit.exclusive_running,
            in_flight: unit.in_flight,
        }
    }

    /// Free queue tokens of each lane (for tests and invariant checks).
    #[cfg_attr(not(test), allow(dead_code))] // the models' and tests'
    pub(crate) fn free_tokens(&self) -> [usize; 3] {
        let state = lock(&self.state);
        [0, 1, 2].map(|lane| state.lanes[lane].tokens)
    }
}

impl<T: Ticketed> State<T> {
    fn unit(&mut self, id: UnitId) -> &mut Unit<T> {
        self.units[id.0].as_mut().expect("unit used after removal")
    }

    /// Gives the ticket's token back to its lane; false if it held none.
    fn release_token(&mut self, id: UnitId, ticket: &Ticket) -> bool {
        if !ticket.has(TOKEN) {
            return false;
        }
        ticket.clear(TOKEN);
        let lane = self.unit(id).config.lane;
        self.lanes[lane].tokens += 1;
        true
    }

    /// Restores the lane invariant after unit `id` changed: a unit its own
    /// limits admit is in the ring, and a lane has free tokens only if its
    /// ring is empty. Admits from the ring head while tokens are free,
    /// `weight` consecutive items per turn (weighted round robin).
    fn settle(&mut self, id: UnitId) -> Admitted<T> {
        let mut out = Admitted::new();
        let lane = {
            let unit = self.unit(id);
            if !unit.in_ring && unit.next().is_some() {
                unit.in_ring = true;
                unit.credit = unit.config.weight;
                let lane = unit.config.lane;
                self.lanes[lane].ring.push_back(id.0);
            }
            self.unit(id).config.lane
        };
        while self.lanes[lane].tokens > 0 {
            let Some(&head) = self.lanes[lane].ring.front() else {
                break;
            };
            let unit = self.units[head]
                .as_mut()
                .expect("removed units leave the ring");
            let Some(queue) = unit.next() else {
                unit.in_ring = false;
                self.lanes[lane].ring.pop_front();
                continue;
            };
            let item = unit.take(queue);
            item.ticket().set(TOKEN);
            unit.credit -= 1;
            if unit.credit == 0 {
                unit.credit = unit.config.weight;
                let ring = &mut self.lanes[lane].ring;
                ring.rotate_left(1);
            }
            self.lanes[lane].tokens -= 1;
            out.push(item);
        }
        out
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A test item: a task's ticket and a label.
    struct Item(Arc<Ticket>, u32);

    impl Ticketed for Item {
        fn ticket(&self) -> &Ticket {
            &self.0
        }
    }

    fn item(side: Side, label: u32) -> Item {
        Item(Arc::new(Ticket::new(side)), label)
    }

    fn labels(admitted: Admitted<Item>) -> Vec<u32> {
        admitted.into_iter().map(|i| i.1).collect()
    }

    fn config(max_running: usize, max_in_flight: usize, weight: u32) -> UnitConfig {
        UnitConfig {
            max_running,
            max_in_flight,
            weight,
            lane: 1,
        }
    }

    /// Runs an admitted item to its end: poll, end, after_run.
    fn finish(arbiter: &Arbiter<Item>, id: UnitId, item: &Item) -> Vec<u32> {
        let mut out = labels(arbiter.poll_started(id, &item.0));
        out.extend(labels(arbiter.ended(id, &item.0)));
        out.extend(labels(arbiter.after_run(id, &item.0)));
        out
    }

    #[test]
    fn run_permits_bound_admission_and_fifo_holds() {
        let arbiter = Arbiter::new(100);
        let id = arbiter.add_unit(config(2, usize::MAX, 1));
        let items: Vec<_> = (0..5).map(|n| item(Side::Group, n)).collect();
        let mut admitted = Vec::new();
        for it in &items {
            let t = Item(Arc::clone(&it.0), it.1);
            admitted.extend(labels(arbiter.schedule(id, t)));
        }
        assert_eq!(admitted, [0, 1]);
        assert_eq!(arbiter.counts(id).queued, 3);
        assert_eq!(finish(&arbiter, id, &items[1]), [2]);
        assert_eq!(finish(&arbiter, id, &items[0]), [3]);
        assert_eq!(finish(&arbiter, id, &items[2]), [4]);
        finish(&arbiter, id, &items[3]);
        finish(&arbiter, id, &items[4]);
        assert_eq!(arbiter.counts(id), UnitCounts::default());
        assert_eq!(arbiter.free_tokens(), [100; 3]);
    }

    #[test]
    fn resumed_tasks_go_before_new_ones_and_in_flight_is_bounded() {
        let arbiter = Arbiter::new(100);
        let id = arbiter.add_unit(config(1, 1, 1));
        let a = item(Side::Group, 0);
        let b = item(Side::Group, 1);
        assert_eq!(labels(arbiter.schedule(id, Item(a.0.clone(), 0))), [0]);
        assert!(arbiter.schedule(id, Item(b.0.clone(), 1)).is_empty());
        // `a` awaits: its run ends, but it keeps its in-flight permit.
        assert!(arbiter.poll_started(id, &a.0).is_empty());
        assert!(
            arbiter.after_run(id, &a.0).is_empty(),
            "b needs a's in-flight permit"
        );
        assert_eq!(arbiter.counts(id).in_flight, 1);
        // `a` is woken: it goes first although `b` waited longer.
        assert_eq!(labels(arbiter.schedule(id, Item(a.0.clone(), 0))), [0]);
        assert!(arbiter.poll_started(id, &a.0).is_empty());
        assert!(
            arbiter.ended(id, &a.0).is_empty(),
            "a's run permit is still held"
        );
        assert_eq!(labels(arbiter.after_run(id, &a.0)), [1]);
        finish(&arbiter, id, &b);
        assert_eq!(arbiter.counts(id), UnitCounts::default());
    }

    #[test]
    fn waiting_exclusive_blocks_later_concurrent_items() {
        let arbiter = Arbiter::new(100);
        let id = arbiter.add_unit(config(2, usize::MAX, 1));
        let c0 = item(Side::Concurrent, 0);
        let e = item(Side::Exclusive, 1);
        let c2 = item(Side::Concurrent, 2);
        assert_eq!(labels(arbiter.schedule(id, Item(c0.0.clone(), 0))), [0]);
        assert!(arbiter.schedule(id, Item(e.0.clone(), 1)).is_empty());
        assert!(
            arbiter.schedule(id, Item(c2.0.clone(), 2)).is_empty(),
            "a permit is free, but the exclusive item waits"
        );
        assert_eq!(finish(&arbiter, id, &c0), [1]);
        assert!(arbiter.counts(id).exclusive);
        assert_eq!(finish(&arbiter, id, &e), [2]);
        finish(&arbiter, id, &c2);
        assert_eq!(arbiter.counts(id), UnitCounts::default());
    }

    #[test]
    fn lane_budget_is_shared_by_weighted_round_robin() {
        let arbiter = Arbiter::new(1);
        let heavy = arbiter.add_unit(config(usize::MAX, usize::MAX, 2));
        let light = arbiter.add_unit(config(usize::MAX, usize::MAX, 1));
        let mut pending = std::collections::HashMap::new();
        let mut first = Vec::new();
        for n in 0..12u32 {
            let (id, label) = if n % 2 == 0 { (heavy, n) } else { (light, n) };
            let it = item(Side::Group, label);
            pending.insert(label, (id, it.0.clone()));
            first.extend(labels(arbiter.schedule(id, it)));
        }
        // One token: the first item got it; everything else waits.
        assert_eq!(first, [0]);
        let mut order = Vec::new();
        let mut next = first;
        while let Some(label) = next.pop() {
            order.push(label);
            let (id, ticket) = pending.remove(&label).unwrap();
            next = labels(arbiter.poll_started(id, &ticket));
            next.extend(labels(arbiter.ended(id, &ticket)));
            next.extend(labels(arbiter.after_run(id, &ticket)));
        }
        let kinds: String = order
            .iter()
            .map(|n| if n % 2 == 0 { 'H' } else { 'L' })
            .collect();
        // `heavy` came first and gets 2 admissions per turn, `light` 1.
        assert_eq!(kinds, "HHLHHLHHLLLL");
        assert_eq!(arbiter.free_tokens(), [1, 1, 1]);
    }

    #[test]
    fn cancelled_before_poll_gives_everything_back() {
        let arbiter = Arbiter::new(1);
        let id = arbiter.add_unit(config(1, 1, 1));
        let a = item(Side::Group, 0);
        assert_eq!(labels(arbiter.schedule(id, Item(a.0.clone(), 0))), [0]);
        // Run of a cancelled task: the future is dropped without a poll.
        assert!(arbiter.ended(id, &a.0).is_empty());
        assert!(arbiter.after_run(id, &a.0).is_empty());
        assert_eq!(arbiter.counts(id), UnitCounts::default());
        assert_eq!(arbiter.free_tokens(), [1, 1, 1]);
        let b = item(Side::Exclusive, 1);
        assert_eq!(b.0.side(), Side::Exclusive);
    }
}
