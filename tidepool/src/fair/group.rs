//! [`Group`]: a throttled share of a pool, with its own FIFO, limits, weight
//! and priority; [`GroupBuilder`], [`GroupMetrics`], [`GroupError`].

use super::admission::{Side, UnitConfig};
use super::gate::{TaskGate, UnitCore, UnitStats};
use super::Fair;
use crate::runtime::kind_names;
use crate::runtime::task::Gate;
use crate::runtime::{OpenHandle, Priority};
use crate::sync::Arc;
use crate::task::{JoinHandle, SpawnError};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

/// Configures a [`Group`]; from [`Pool::group`](crate::Pool::group).
///
/// Every setting has a default: a group built with none of them has no
/// limits of its own, weight 1 and [`Priority::Normal`], and still feeds the
/// pool only a lane's budget of items at a time (see the
/// [`fair` design notes](crate::Group#how-it-works)).
///
/// ```
/// use tidepool::{Pool, Priority};
/// let pool = Pool::builder().concurrency(2).build()?;
/// let group = pool
///     .group()
///     .name("uploads")
///     .max_concurrency(4)
///     .max_in_flight(16)
///     .weight(2)
///     .priority(Priority::Low)
///     .build()?;
/// assert_eq!(group.spawn_fn(|| 1).join().unwrap(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a GroupBuilder does nothing until .build() is called"]
pub struct GroupBuilder {
    /// Keeps the pool open while the builder or the group exists.
    pool: Arc<OpenHandle>,
    max_concurrency: usize,
    max_in_flight: usize,
    weight: u32,
    priority: Priority,
    name: Option<String>,
}

impl GroupBuilder {
    pub(crate) fn new(pool: Arc<OpenHandle>) -> Self {
        GroupBuilder {
            pool,
            max_concurrency: usize::MAX,
            max_in_flight: usize::MAX,
            weight: 1,
            priority: Priority::Normal,
            name: None,
        }
    }

    /// At most `n` of the group's items *run* (are being polled) at once. An
    /// async task that is awaiting does not count: each poll is a run, as a
    /// throttled scheduler counts executions. Items admitted to the pool's
    /// queue count from admission to the end of their run, so the group never
    /// has more than `n` items in the pool's queues either.
    ///
    /// A task of the group that blocks waiting for another task of the same
    /// group (`join`) holds its permit meanwhile: with `n` such tasks the
    /// group deadlocks, as a throttled scheduler would.
    ///
    /// Default: no limit of its own.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().max_concurrency(2).build().unwrap();
    /// # drop(group);
    /// ```
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n;
        self
    }

    /// At most `n` of the group's tasks are started and not finished: the
    /// semaphore style, for async work that must be bounded end to end (say,
    /// open connections). A task takes its permit when first admitted and
    /// keeps it while it awaits, until it ends (completes, panics or is
    /// cancelled). Wakes of started tasks are admitted before new tasks, so
    /// this limit cannot deadlock the group by itself; a task awaiting another
    /// task of the same group that has not started can.
    ///
    /// Default: no limit.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().max_in_flight(100).build().unwrap();
    /// # drop(group);
    /// ```
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// The group's share of its lane when several groups have work waiting
    /// for the lane's queue budget: weighted round robin, `n` admissions per
    /// turn. Two flooding groups of weight 1 alternate; weight 2 against 1
    /// gets two thirds. The group's own limits cap it further.
    ///
    /// Default: 1.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let heavy = pool.group().weight(3).build().unwrap();
    /// # drop(heavy);
    /// ```
    pub fn weight(mut self, n: u32) -> Self {
        self.weight = n;
        self
    }

    /// The lane of the group's tasks (see [`Priority`]). Groups compete for
    /// admission only with groups of the same lane.
    ///
    /// Default: [`Priority::Normal`].
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let urgent = pool.group().priority(tidepool::Priority::High).build().unwrap();
    /// # drop(urgent);
    /// ```
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// A name for debugging output and the lab's reports.
    ///
    /// Default: none.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().name("thumbnails").build().unwrap();
    /// assert_eq!(group.name(), Some("thumbnails"));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Builds the group.
    ///
    /// # Errors
    ///
    /// [`GroupError`] for a zero `max_concurrency`, `max_in_flight` or
    /// `weight`. A group of a shut-down pool builds, but refuses every spawn.
    ///
    /// ```
    /// use tidepool::GroupError;
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let err = pool.group().max_concurrency(0).build().unwrap_err();
    /// assert_eq!(err, GroupError::ZeroMaxConcurrency);
    /// ```
    pub fn build(self) -> Result<Group, GroupError> {
        if self.max_concurrency == 0 {
            return Err(GroupError::ZeroMaxConcurrency);
        }
        if self.max_in_flight == 0 {
            return Err(GroupError::ZeroMaxInFlight);
        }
        if self.weight == 0 {
            return Err(GroupError::ZeroWeight);
        }
        let config = UnitConfig {
            max_running: self.max_concurrency,
            max_in_flight: self.max_in_flight,
            weight: self.weight,
            lane: self.priority.index(),
        };
        Ok(Group {
            spawner: Spawner::new(self.pool, config, self.priority, self.name, Side::Group),
        })
    }
}

/// A throttled share of a pool: its tasks wait in the group's own FIFO and
/// enter the pool's queues only as the group's limits (and its fair share of
/// its lane) allow. Cheap to clone; keeps its pool open like a [`Pool`](crate::Pool)
/// handle does.
///
/// `spawn` and `spawn_fn` behave as on the pool: same handles, cancellation
/// and panics, plus per-group [`metrics`](Group::metrics).
///
/// # How it works
///
/// A group is an *admission gate*: its tasks wait in the group's own FIFO
/// and enter the pool's queues only when the group's permits allow. So the
/// pool's queues stay short however large a flood is. Workers serve a
/// lane's plain tasks before the tasks groups admitted to it: a task spawned
/// straight on the pool after a flood waits only for the flood's running
/// items, and another group's task behind at most a lane's budget, never
/// behind the flood.
///
/// * Limits count *runs*: a closure runs once, an async task once per poll.
///   An async task that awaits (a timer, a socket, another task) is not
///   running and holds no run permit.
/// * **Run permits** ([`max_concurrency`](GroupBuilder::max_concurrency)):
///   taken when a run is admitted to the pool's queue, given back when the
///   poll returns. At most `max_concurrency` runs of the group are queued or
///   running at once.
/// * **In-flight permits** ([`max_in_flight`](GroupBuilder::max_in_flight)):
///   taken at a task's first admission, given back when it ends (completes,
///   panics or is cancelled). Awaiting tasks keep theirs.
/// * **Fair share**: each priority lane lets at most
///   [`QUEUE_BUDGET_PER_SLOT`](crate::QUEUE_BUDGET_PER_SLOT) × `concurrency`
///   gated items wait in the pool's queues; the lane's groups take turns
///   admitting in weighted round robin ([`weight`](GroupBuilder::weight)
///   admissions per turn). A token is given back when the run *starts*, so a
///   grouped task that blocks its thread does not hold the budget, and the
///   pool's blocking compensation applies to grouped work too.
/// * A concurrent/exclusive pair
///   ([`Pool::concurrent_exclusive`](crate::Pool::concurrent_exclusive)) is
///   the same gate with one more rule: an exclusive run is admitted only when
///   no other run of the pair holds a permit, and blocks the others while it
///   does.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use tidepool::Pool;
///
/// let pool = Pool::builder().concurrency(4).build()?;
/// let flood = pool.group().max_concurrency(2).build()?;
/// let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
/// let handles: Vec<_> = (0..20)
///     .map(|_| {
///         let (now, peak) = (now.clone(), peak.clone());
///         flood.spawn_fn(move || {
///             peak.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
///             std::thread::sleep(std::time::Duration::from_millis(1));
///             now.fetch_sub(1, Ordering::SeqCst);
///         })
///     })
///     .collect();
/// for handle in handles {
///     handle.join().unwrap();
/// }
/// assert!(peak.load(Ordering::SeqCst) <= 2);
/// assert_eq!(flood.metrics().completed, 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Group {
    spawner: Spawner,
}

impl Group {
    /// Runs `future` as a task of the group. See [`Pool::spawn`](crate::Pool::spawn).
    ///
    /// On a closed group or a shut-down pool the task is dropped and the
    /// handle resolves to [`JoinError::ShutDown`](crate::JoinError::ShutDown)
    /// at once; [`Group::try_spawn`] says so instead.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().max_concurrency(1).build().unwrap();
    /// assert_eq!(group.spawn(async { 2 }).join().unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawner.spawn(future)
    }

    /// Runs `work` (a closure) as an item of the group. See [`Pool::spawn_fn`](crate::Pool::spawn_fn).
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().max_concurrency(1).build().unwrap();
    /// assert_eq!(group.spawn_fn(|| 3).join().unwrap(), 3);
    /// ```
    #[track_caller]
    pub fn spawn_fn<F, R>(&self, work: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawner.spawn_fn(work)
    }

    /// Like [`Group::spawn`], but says so if the group or the pool is closed.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the group was closed or the pool shut down.
    ///
    /// ```
    /// use tidepool::SpawnError;
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().build().unwrap();
    /// assert_eq!(group.try_spawn(async { 4 }).unwrap().join().unwrap(), 4);
    /// group.close();
    /// assert_eq!(group.try_spawn(async { 5 }).unwrap_err(), SpawnError::ShutDown);
    /// ```
    #[track_caller]
    pub fn try_spawn<F>(&self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawner.try_spawn(future)
    }

    /// Like [`Group::spawn_fn`], but says so if the group or the pool is
    /// closed.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the group was closed or the pool shut down.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().build().unwrap();
    /// pool.shutdown().unwrap();
    /// assert!(group.try_spawn_fn(|| 6).is_err());
    /// ```
    #[track_caller]
    pub fn try_spawn_fn<F, R>(&self, work: F) -> Result<JoinHandle<R>, SpawnError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawner.try_spawn_fn(work)
    }

    /// A snapshot of the group's counters.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().build().unwrap();
    /// group.spawn_fn(|| ()).join().unwrap();
    /// let m = group.metrics();
    /// assert_eq!((m.spawned, m.completed, m.queued, m.in_flight), (1, 1, 0, 0));
    /// ```
    pub fn metrics(&self) -> GroupMetrics {
        self.spawner.metrics()
    }

    /// Stops taking new work: later spawns are refused (as on a shut-down
    /// pool). Tasks already spawned, queued in the group or not, still run.
    /// Closing one clone closes the group for all of them.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().build().unwrap();
    /// let queued = group.spawn_fn(|| "ran");
    /// group.close();
    /// assert!(group.is_closed());
    /// assert_eq!(queued.join().unwrap(), "ran");
    /// assert!(group.spawn_fn(|| ()).join().unwrap_err().is_cancelled());
    /// ```
    pub fn close(&self) {
        self.spawner.close();
    }

    /// True once [`Group::close`] was called on any clone.
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// let group = pool.group().build().unwrap();
    /// assert!(!group.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.spawner.is_closed()
    }

    /// The name given with [`GroupBuilder::name`].
    ///
    /// ```
    /// # let pool = tidepool::Pool::builder().build().unwrap();
    /// assert_eq!(pool.group().build().unwrap().name(), None);
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.spawner.unit.name.as_deref()
    }
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("name", &self.name())
            .field("priority", &self.spawner.unit.priority)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Counters of a [`Group`] (or of a concurrent/exclusive pair), from
/// [`Group::metrics`]. The ended counters add up:
/// `spawned = completed + panicked + cancelled + (tasks not ended yet)`.
///
/// ```
/// # let pool = tidepool::Pool::builder().build().unwrap();
/// let group = pool.group().build().unwrap();
/// assert!(group.spawn_fn(|| panic!("boom")).join().is_err());
/// let m = group.metrics();
/// assert_eq!(m.spawned, m.completed + m.panicked + m.cancelled);
/// assert_eq!(m.panicked, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupMetrics {
    /// Tasks accepted by the group.
    pub spawned: u64,
    /// Tasks that ran to their end.
    pub completed: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Tasks cancelled (by their handle, or dropped by a stopping pool).
    pub cancelled: u64,
    /// Runs waiting in the group's FIFOs for admission (new tasks and wakes
    /// of started ones).
    pub queued: usize,
    /// Runs admitted to the pool and not yet through: queued in the pool or
    /// being polled. Never above `max_concurrency`. A run's permit comes back
    /// just after the run, so right after a `join` the joined task may still
    /// be counted here for a moment.
    pub admitted: usize,
    /// Tasks being polled right now.
    pub running: usize,
    /// Tasks started and not ended (awaiting ones included). Never above
    /// `max_in_flight`.
    pub in_flight: usize,
}

/// Why a group or pair could not be built. Each message names the setting,
/// the value given and the fix.
///
/// ```
/// use tidepool::GroupError;
/// # let pool = tidepool::Pool::builder().build().unwrap();
/// let err = pool.group().weight(0).build().unwrap_err();
/// assert_eq!(err, GroupError::ZeroWeight);
/// assert_eq!(
///     err.to_string(),
///     "weight (0) must be at least 1: it is the number of admissions per turn; omit it for the default of 1"
/// );
/// assert!(format!("{err:?}").starts_with("GroupError::ZeroWeight: weight (0) must be"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupError {
    /// A group's `max_concurrency(0)`: nothing of the group could run.
    ZeroMaxConcurrency,
    /// `concurrent_exclusive(0)`: no concurrent item of the pair could run.
    ZeroPairConcurrency,
    /// `max_in_flight(0)`: no task could start.
    ZeroMaxInFlight,
    /// `weight(0)`: the group would never get a turn.
    ZeroWeight,
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GroupError::ZeroMaxConcurrency => {
                "max_concurrency (0) must be at least 1: nothing of the group could run; omit it for no limit"
            }
            GroupError::ZeroPairConcurrency => {
                "max_concurrency (0) of concurrent_exclusive must be at least 1: no concurrent item of the pair could run; pass 1 or more (1 runs the concurrent side one at a time)"
            }
            GroupError::ZeroMaxInFlight => {
                "max_in_flight (0) must be at least 1: no task of the group could start; omit it for no limit"
            }
            GroupError::ZeroWeight => {
                "weight (0) must be at least 1: it is the number of admissions per turn; omit it for the default of 1"
            }
        })
    }
}

impl fmt::Debug for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variant = match self {
            GroupError::ZeroMaxConcurrency => "ZeroMaxConcurrency",
            GroupError::ZeroMaxInFlight => "ZeroMaxInFlight",
            GroupError::ZeroWeight => "ZeroWeight",
            GroupError::ZeroPairConcurrency => "ZeroPairConcurrency",
        };
        write!(f, "GroupError::{variant}: {self}")
    }
}

impl std::error::Error for GroupError {}

/// What a group and both sides of a pair have in common: a unit to spawn on.
#[derive(Clone, Debug)]
pub(crate) struct Spawner {
    /// Keeps the pool open while handles to the unit exist.
    pool: Arc<OpenHandle>,
    pub(crate) unit: Arc<UnitCore>,
    side: Side,
}

impl Spawner {
    pub(crate) fn new(
        pool: Arc<OpenHandle>,
        config: UnitConfig,
        priority: Priority,
        name: Option<String>,
        side: Side,
    ) -> Self {
        let fair = Fair::of(pool.shared());
        let id = fair.arbiter().add_unit(config);
        let unit = Arc::new(UnitCore {
            fair,
            id,
            priority,
            name,
            closed: AtomicBool::new(false),
            stats: UnitStats::default(),
        });
        Spawner { pool, unit, side }
    }

    /// The same unit, spawning on `side`.
    pub(crate) fn with_side(&self, side: Side) -> Self {
        Spawner {
            side,
            ..self.clone()
        }
    }

    #[track_caller]
    pub(crate) fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(future)
            .unwrap_or_else(|_| JoinHandle::refused())
    }

    /// A closure through the gate: a future with a closure's claim
    /// (`worker::spawn_closure`), so a cancel says true only if it will
    /// not run.
    #[track_caller]
    pub(crate) fn spawn_fn<F, R>(&self, work: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.try_spawn_fn(work)
            .unwrap_or_else(|_| JoinHandle::refused())
    }

    #[track_caller]
    pub(crate) fn try_spawn_fn<F, R>(&self, work: F) -> Result<JoinHandle<R>, SpawnError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let future = async move { work() };
        // Named after the closure, not the future made for it.
        kind_names::name_as::<F, _>(&future, Some(std::panic::Location::caller()));
        self.try_spawn_as(future, true)
    }

    #[track_caller]
    pub(crate) fn try_spawn<F>(&self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        kind_names::kind_of::<F>(Some(std::panic::Location::caller()));
        self.try_spawn_as(future, false)
    }

    fn try_spawn_as<F>(&self, future: F, closure: bool) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shared = self.pool.shared();
        // Relaxed: see `UnitCore::closed`. The pool's own check in
        // `worker::spawn` is the authoritative one (its refusal is taken
        // out of `spawned` below); this one spares building the gate.
        if self.is_closed() || shared.is_closed() {
            return Err(SpawnError::ShutDown);
        }
        if let Err(failure) = crate::worker::can_run(shared) {
            shared.no_thread_refusal();
            return Err(SpawnError::no_threads(failure));
        }
        let gate: Arc<dyn Gate> = TaskGate::new(Arc::clone(&self.unit), self.side);
        // Counted before the task exists, so that no end is seen first.
        self.unit.stats.spawned.fetch_add(1, Ordering::Relaxed);
        let priority = self.unit.priority;
        let cell = if closure {
            crate::worker::spawn_closure(shared, future, priority, gate)
        } else {
            crate::worker::spawn(shared, future, priority, gate)
        };
        let Some(cell) = cell else {
            // Refused by a stopping pool: never accepted.
            self.unit.stats.spawned.fetch_sub(1, Ordering::Relaxed);
            return Err(SpawnError::ShutDown);
        };
        Ok(JoinHandle::new(cell))
    }

    pub(crate) fn close(&self) {
        self.unit.closed.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.unit.closed.load(Ordering::Relaxed)
    }

    pub(crate) fn metrics(&self) -> GroupMetrics {
        let counts = self.unit.fair.arbiter().counts(self.unit.id);
        let stats = &self.unit.stats;
        let (spawned, completed, panicked, cancelled) = stats.snapshot();
        GroupMetrics {
            spawned,
            completed,
            panicked,
            cancelled,
            queued: counts.queued,
            admitted: counts.admitted,
            running: stats.polling.load(Ordering::Relaxed),
            in_flight: counts.in_flight,
        }
    }
}
