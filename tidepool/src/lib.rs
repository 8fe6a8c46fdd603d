//! tidepool: one thread pool for closures and async tasks that keeps every
//! core busy with useful work, whatever that work does.
//!
//! * Work items ([`spawn_fn`]) and async tasks ([`spawn`]) run on the same
//!   workers.
//! * A pool has `concurrency` running slots (one per core by default). When a
//!   worker blocks — a synchronous HTTP call, `thread::sleep`, a contended
//!   lock — the monitor sees it in the kernel's thread state and gives its
//!   slot to another worker at once. CPU-bound work never adds threads.
//! * An async task that awaits a timer or a socket ([`sleep`], [`Async`])
//!   holds no thread at all.
//! * Urgent work can jump the queue ([`Priority`]).
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//!
//! // The process-wide pool, built on first use with the defaults.
//! let work_item = tidepool::spawn_fn(|| {
//!     std::thread::sleep(Duration::from_millis(10)); // blocking is fine
//!     "slept"
//! });
//! let task = tidepool::spawn(async {
//!     tidepool::sleep(Duration::from_millis(10)).await; // holds no thread
//!     "awaited"
//! });
//! assert_eq!(work_item.join().unwrap(), "slept");
//! assert_eq!(tidepool::block_on(task).unwrap(), "awaited");
//!
//! // Or a pool of your own.
//! let pool = tidepool::Pool::builder().concurrency(2).build()?;
//! let sum = pool.spawn_fn(|| (1..=100).sum::<u32>()).join().unwrap();
//! assert_eq!(sum, 5050);
//! pool.shutdown().unwrap();
//! # Ok::<(), tidepool::BuildError>(())
//! ```
//!
//! # Which API when
//!
//! | you have | use | why |
//! |---|---|---|
//! | a closure, blocking or not (file I/O, a sync HTTP call, a lock, CPU work) | [`spawn_fn`] / [`Pool::spawn_fn`] | a worker that blocks is detected and its slot given to another worker |
//! | a closure whose end nothing waits for (fire and forget) | [`execute`] / [`Pool::execute`] | no handle to make and drop: the cheapest spawn; a shut-down pool is an `Err`, not a handle that resolves to one |
//! | a future (async I/O, timers, other tasks) | [`spawn`] / [`Pool::spawn`] | while it awaits it holds no thread |
//! | a blocking call *inside* a task or a handler (a database query, a file read) | call it inline, as plain code | the monitor sees the worker block (Linux, about 1 ms) and hands its slot over; nothing to annotate. [`blocking`] declares it instead (handed over after one monitor interval without asking the kernel): for calls known to block, and off Linux |
//! | an HTTP server (axum, hyper) | `tidepool::http::serve` (feature `http`) | every connection a task on the pool; see [Serving HTTP](#serving-http) |
//! | a future to run on the current thread, e.g. from `main` | [`block_on`] / [`Pool::block_on`] | timers and sockets are served by the reactor's thread meanwhile; on a worker the wait runs the pool's queued work instead of blocking |
//! | the result of a task | [`JoinHandle::join`] or `.await` | on a worker, `join` runs queued work (usually the awaited task) while it waits, so a recursion of joins needs no thread per join |
//! | divide and conquer over borrowed data | [`join`], [`scope`] (and [`Pool::join`], [`Pool::scope`]) | closures borrow the caller's stack; `join` allocates nothing and runs its second half inline unless a thief took it |
//! | a lock held across a `join`, `scope` or `block_on` that queued work also takes | [`isolate`] around the wait (or release the lock first) | a plain wait on a worker runs queued work on this thread, which would block on the lock held beneath it: a deadlock; an isolated wait runs only what it waits for |
//! | a parallel loop over a slice or a range | [`for_each`], [`for_range`] | split in halves with `join`, balanced by stealing |
//! | rayon-style parallel iterators (`par_iter().map(..).sum()`, `collect`, `par_sort`) | `use tidepool::prelude::*;` ([`iter`]) | rayon's names on the current pool; see [Parallel iterators](#parallel-iterators) |
//! | work that must not wait behind a flood | [`Pool::task`]`().priority(`[`Priority::High`]`)` | lanes: High before Normal before Low, none starves |
//! | a tenant, a client or a batch that must not take the whole pool | [`Pool::group`] ([`Group`]) | its own FIFO, `max_concurrency`, `max_in_flight`, a weighted fair share |
//! | readers and writers of one resource | [`Pool::concurrent_exclusive`] | an exclusive run never overlaps another run of the pair |
//! | a fixed-size pool like the `threadpool` crate, or slower growth | [`Controller`] (`Fixed`, `Gradual`, `HillClimbing`) | the default, `Adaptive`, adds threads only for blocked workers |
//! | to be told that the pool is shut down | [`Pool::try_spawn`] / [`Pool::try_spawn_fn`] | `spawn` hands back a handle that resolves to [`JoinError::ShutDown`] |
//! | the process-wide pool with other settings | [`Builder::build_global`] | once, before the first use |
//! | a deadline, or to let others run in a long async loop | [`timeout`], [`yield_now`] | |
//!
//! # Coming from tokio, rayon, .NET or the threadpool crate
//!
//! (Also in `docs/coming-from.md` in the repository, copied from here;
//! `tests/coming_from.rs` fails when the two differ. The names below link
//! to their docs, so a renamed item fails the doc build.)
//!
//! | you used | in tidepool | note |
//! |---|---|---|
//! | tokio `tokio::spawn(fut)` | [`tidepool::spawn(fut)`](spawn) / [`pool.spawn(fut)`](Pool::spawn) | same [`JoinHandle`] shape: `.await` it or [`.join()`](JoinHandle::join) it |
//! | tokio `spawn_blocking(f)` | inside a task, call `f()` inline; from outside, [`pool.spawn_fn(f)`](Pool::spawn_fn) | no separate blocking pool: a worker that blocks is detected (Linux) and its slot goes to another worker; once its kind was seen blocking, later ones get a thread as they are spawned, as `spawn_blocking` would give them |
//! | axum `axum::serve(listener, app)` | `tidepool::http::serve(listener, app)` (feature `http`) | the same arguments; connections run on the pool, not on tokio's workers |
//! | tokio `block_in_place(f)` | [`tidepool::blocking(f)`](blocking) | declares the block: a call still inside after one monitor interval hands its slot over without asking the kernel (on every platform); a quick one moves nothing |
//! | tokio `Runtime::block_on(fut)` | [`pool.block_on(fut)`](Pool::block_on) / [`tidepool::block_on(fut)`](block_on) | |
//! | tokio `time::sleep`, `time::timeout`, `task::yield_now` | [`tidepool::sleep`](sleep), [`tidepool::timeout`](timeout), [`tidepool::yield_now`](yield_now) | timers live in tidepool's reactor (microsecond precision; busy workers fire due ones between tasks); an awaiting task holds no thread |
//! | tokio `net::TcpStream`, hyper, reqwest, tonic, sqlx in a task | the same code, with the `tokio` cargo feature | see [tokio-based crates](#tokio-based-crates-hyper-reqwest-tonic-sqlx) |
//! | tokio `net::TcpStream` / `TcpListener` | [`tidepool::Async<std::net::TcpStream>`](Async) + [`tidepool::io`](io) | tidepool's reactor, polled by busy workers; async-io's method names; `examples/echo.rs` |
//! | tokio `Builder::worker_threads(n)` | [`Builder::concurrency(n)`](Builder::concurrency) | running slots; threads beyond it only replace blocked workers, up to [`max_threads`](Builder::max_threads) |
//! | tokio `on_thread_start` / `on_thread_stop`, `thread_name_fn` | [`Builder::on_thread_start`] / [`on_thread_stop`](Builder::on_thread_stop), [`thread_name_fn`](Builder::thread_name_fn) | also run on the monitor thread; panics are counted, not fatal |
//! | tokio `JoinError::is_cancelled` / `is_panic` / `into_panic` | the same on [`tidepool::JoinError`](JoinError) | plus [`JoinError::ShutDown`] for a spawn on a shut-down pool |
//! | tokio `Runtime::shutdown_timeout` | [`Pool::shutdown_timeout`] | [`Pool::shutdown`] waits for every task |
//! | rayon `rayon::spawn(f)` | [`tidepool::execute(f)`](execute) | no handle, like rayon's; [`tidepool::spawn_fn(f)`](spawn_fn) returns one (drop it to detach); `execute` returns `Err` if the pool is shut down, where rayon's `spawn` cannot fail |
//! | rayon `ThreadPoolBuilder::build_global` | [`Builder::build_global`] | once, before the global pool is used |
//! | rayon `start_handler` / `exit_handler` | [`Builder::on_thread_start`] / [`on_thread_stop`](Builder::on_thread_stop) | |
//! | rayon `join`, `scope` | [`tidepool::join`](join), [`tidepool::scope`](scope) (and [`Pool::join`], [`Pool::scope`]) | closures borrow the caller's stack; a waiting worker helps instead of blocking |
//! | rayon `join` with a lock held across it (rayon's issue #592: the wait may run queued work that takes the lock, a deadlock) | [`tidepool::isolate(f)`](isolate), with `f` calling `tidepool::join(a, b)` | the wait runs only its own work (rayon's always help); the thread blocks meanwhile and its slot goes to another worker |
//! | rayon `use rayon::prelude::*;` (`par_iter`, `into_par_iter`, `par_chunks`, `par_sort`, `map`, `filter`, `collect`, `sum`, ...) | [`use tidepool::prelude::*;`](prelude) | the same names and signatures for the common adaptors and consumers ([`tidepool::iter`](iter) lists what is missing); runs on the current pool |
//! | .NET `ThreadPool.QueueUserWorkItem` | [`tidepool::execute`](execute) (or [`spawn_fn`] for a handle) | the process-wide pool is [`tidepool::global()`](fn@global) |
//! | .NET `Task.Run(async …)` | [`tidepool::spawn(async …)`](spawn) | |
//! | .NET `SetMinThreads` / `SetMaxThreads` | [`Builder::min_threads`] / [`max_threads`](Builder::max_threads) | tidepool starts a replacement as soon as a worker blocks, without the hill-climbing delay ([`Controller::HillClimbing`] and [`Controller::Gradual`] exist if you want it) |
//! | .NET `ConcurrentExclusiveSchedulerPair` | [`Pool::concurrent_exclusive(n)`](Pool::concurrent_exclusive) | |
//! | .NET `TaskCreationOptions.LongRunning` | [`tidepool::blocking`](blocking) inside the task, or nothing | a blocked task's slot is handed over anyway |
//! | threadpool `ThreadPool::new(n)` + `execute(f)` | `Pool::builder().concurrency(n).controller(Controller::Fixed).build()` + [`execute(f)`](Pool::execute) | [`Fixed`](Controller::Fixed) never adds threads, like `threadpool`; `execute` returns `Err` on a shut-down pool |
//! | threadpool `join()` | [`Pool::shutdown()`](Pool::shutdown) (waits), or join the handles | |
//! | threadpool `panic_count()` | [`pool.metrics().panicked`](Metrics::panicked) | |
//!
//! # Parallel iterators
//!
//! `use tidepool::prelude::*;` brings rayon's parallel iterators, built on
//! [`join`] and run on the current pool (the global pool outside any
//! pool): `par_iter()`, `par_iter_mut()` and `into_par_iter()` on slices,
//! `Vec`s and integer ranges, `par_chunks`, `par_sort` and
//! `par_sort_unstable`, and the usual adaptors and consumers (`map`,
//! `filter`, `enumerate`, `zip`, `fold`, `reduce`, `sum`, `min`, `any`,
//! `count`, `collect` in order, ...). The [`iter`] module's docs are a
//! tour of how they work, and list what rayon has that they do not.
//!
//! ```
//! use tidepool::prelude::*;
//!
//! let values: Vec<u64> = (0..100_000).collect();
//! let sum_of_squares: u64 = values.par_iter().map(|v| v * v).sum();
//! let evens: Vec<u64> = values.par_iter().copied().filter(|v| v % 2 == 0).collect();
//! assert_eq!(sum_of_squares, values.iter().map(|v| v * v).sum::<u64>());
//! assert_eq!(evens.len(), 50_000);
//!
//! // Inside a pool's task they run on that pool.
//! let pool = tidepool::Pool::builder().concurrency(2).build()?;
//! let sorted = pool
//!     .spawn_fn(|| {
//!         let mut v: Vec<u32> = (0..50_000).rev().collect();
//!         v.par_sort_unstable();
//!         v
//!     })
//!     .join()
//!     .unwrap();
//! assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
//! pool.shutdown().unwrap();
//! # Ok::<(), tidepool::BuildError>(())
//! ```
//!
//! # tokio-based crates (hyper, reqwest, tonic, sqlx)
//!
//! Most of the async ecosystem runs on tokio's reactor and timers. Without
//! the `tokio` cargo feature, tokio code inside a tidepool task fails at
//! once: `tokio::time::sleep`, `tokio::net::TcpStream::connect` and
//! everything built on them panic with tokio's message *"there is no
//! reactor running, must be called from the context of a Tokio 1.x
//! runtime"*. The task's panic is caught, so its handle resolves to
//! [`JoinError::Panicked`] carrying that message (never a hang). **The fix:
//! enable the `tokio` feature** (`tidepool = { version = "0.1", features =
//! ["tokio"] }`); no code changes, except for a server: serve it with
//! `tidepool::http::serve` (feature `http`, [Serving HTTP](#serving-http))
//! so that its connections run on the pool.
//!
//! With the feature, every worker thread enters a tokio runtime's context
//! for its whole life (and [`Pool::block_on`] and [`block_on`] while they
//! block; off any pool, [`block_on`] holds a lease on the shared runtime
//! below for as long), so tokio
//! resources created in a task register with that runtime's I/O and time
//! drivers:
//!
//! * **Which runtime**: by default a *shared* one, a tokio multi-thread
//!   runtime whose threads are named `tidepool-tokio` (see `tokio::spawn`
//!   below for how many run at once). It
//!   starts when the first pool is built with the feature and stops when
//!   the last such pool is gone (shut down or dropped, with its tasks and
//!   handles); a later pool starts a new one. The global pool is never
//!   gone, so once it is used the runtime stays for the process. Idle, its
//!   threads sleep (one in `epoll_wait`) and cost no CPU. Or bring your own with
//!   [`Builder::tokio_handle`](Builder#method.tokio_handle) (with the
//!   feature).
//! * **The cost: a thread hop per event.** The reactor runs on the shared
//!   runtime's threads (tidepool's own [`Async`] does not: busy workers poll its
//!   reactor between tasks): a readiness event wakes a `tidepool-tokio` thread, which wakes the
//!   task, which is queued and runs on a worker (woken if parked); tokio's
//!   own runtime polls the reactor on its workers instead. While the
//!   workers are saturated, the reactor thread pauses 200 µs now and then,
//!   so events gather without waking it (events of other pools in the
//!   process may wait as long meanwhile). The lab's `async-io` experiment
//!   measures it (echo over loopback, 1,000 connections, 2 cores): tokio
//!   sockets on tidepool make fewer round trips per second than tokio's own
//!   runtime, at a lower p99 and a higher median, for more CPU time (the
//!   figures, with their commit and spread, are in the README's results).
//! * **`tokio::spawn`** works, but the task runs on the shared runtime's
//!   workers (or on your runtime with `tokio_handle`), not on the pool:
//!   tokio has no way to run it elsewhere. Libraries do it (`axum::serve`
//!   spawns every connection so; hyper's and reqwest's clients their
//!   connection tasks), so the shared runtime's workers are kept like the
//!   pool's where tokio lets them be: a worker waking for work waits while
//!   `available_parallelism` of them hold a place, and one that blocks
//!   inside a task (found asleep by the same kernel look as the pool's
//!   monitor uses, within about a millisecond) gives its place to one of
//!   16 spare workers; once it computes again it is counted again, but
//!   runs on (tokio shows no task boundary where it could give way), so
//!   under sustained load with blocking calls more of them than places may
//!   run at once.
//!   Each block is counted in [`Metrics::tokio_blocked`] and reported by a
//!   `tracing` warning (at most one per ten seconds) that names the fix:
//!   run the work on the pool, where the blocking call is learned and its
//!   slot handed over like any other, with [`tidepool::spawn`](spawn) for
//!   tasks and `tidepool::http::serve` for a server (feature `http`). For
//!   hyper-util's client, `tidepool::http::Executor` puts its connection
//!   tasks on the pool.
//! * **`tokio::task::spawn_blocking`** works, on tokio's blocking threads
//!   (named `tidepool-tokio` too), outside the pool's slots: call the
//!   function inline in a task (blocking is detected), or use [`spawn_fn`].
//! * **`tokio::task::block_in_place`** finds no tokio worker here, so it
//!   just runs its closure on the tidepool worker without telling the pool
//!   (the monitor still detects a block on Linux within about a
//!   millisecond): [`blocking`] declares it, and hands the slot over
//!   after one monitor interval without asking the kernel.
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use std::time::Duration;
//!
//! // tokio's timer and sockets inside a tidepool task.
//! let slept = tidepool::spawn(async {
//!     tokio::time::sleep(Duration::from_millis(5)).await;
//!     "woken by tokio's timer"
//! });
//! assert_eq!(slept.join().unwrap(), "woken by tokio's timer");
//! # }
//! ```
//!
//! Without the feature, the same task ends in a panic that says what is
//! missing:
//!
//! ```
//! # #[cfg(not(feature = "tokio"))] {
//! let pool = tidepool::Pool::builder().build().unwrap();
//! let err = pool
//!     .spawn(async { tokio::time::sleep(std::time::Duration::from_millis(5)).await })
//!     .join()
//!     .unwrap_err();
//! let tidepool::JoinError::Panicked(panic) = err else { unreachable!() };
//! assert!(panic.message().unwrap().starts_with("there is no reactor running"));
//! # }
//! ```
//!
//! # Serving HTTP
//!
//! With the `http` feature, `tidepool::http::serve` takes what
//! `axum::serve` takes, and runs every connection as a task on the pool:
//!
//! ```no_run
//! # #[cfg(feature = "http")] {
//! use axum::{routing::get, Router};
//!
//! fn query_the_database() -> u64 {
//!     std::thread::sleep(std::time::Duration::from_millis(5)); // blocking
//!     42
//! }
//!
//! let app = Router::new().route("/", get(|| async {
//!     // A blocking call, inline: the pool sees the worker block and hands
//!     // its slot over, so other requests keep running.
//!     query_the_database().to_string()
//! }));
//! tidepool::block_on(async {
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     tidepool::http::serve(listener, app).await
//! })?;
//! # }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! * **A blocking call in a handler**: call it inline. That is the one
//!   answer: a worker that blocks is found within about a millisecond and
//!   its slot goes to another worker, as for any task. The lab's `service`
//!   experiment measures it beside tokio with `spawn_blocking`.
//! * **Outbound HTTP**: hyper-util's client with
//!   `Client::builder(tidepool::http::Executor::current())`, so its
//!   connection tasks run on the pool; reqwest works too (its tasks run on
//!   the shared tokio runtime's workers, which are watched).
//! * **Plain `axum::serve`** inside [`block_on`] also serves, on the shared
//!   tokio runtime's workers: gated to the cores and compensated when a
//!   handler blocks, but the pool learns nothing there, and
//!   [`Metrics::tokio_blocked`] counts each block with a `tracing`
//!   warning that points here.
//! * **Stopping**: `Serve::with_graceful_shutdown`, then
//!   [`Pool::shutdown`]; or [`Pool::shutdown_timeout`], which closes the
//!   connections still open.
//!
//! `examples/service.rs` is a whole service (axum, SQLite through r2d2, an
//! outbound call) that serves 200 requests of its own and stops.
//!
//! # Settings from the environment
//!
//! Two settings can be given by whoever runs the program, so an operator
//! can cap a service without a rebuild (as with `RAYON_NUM_THREADS` or
//! `GOMAXPROCS`): `TIDEPOOL_CONCURRENCY` sets [`Builder::concurrency`] and
//! `TIDEPOOL_MAX_THREADS` sets [`Builder::max_threads`], for every pool
//! built with [`Pool::builder`] and for the global pool. A value set in
//! code wins over the variable; a variable that holds anything but a
//! whole number of at least 1 is refused by [`Builder::build`]
//! ([`BuildError::Environment`], naming the variable and its value); an
//! empty one counts as unset.
//!
//! A pool says what it got and where from: [`Metrics::concurrency`] and
//! [`Metrics::max_threads`], with [`Metrics::concurrency_from`] and
//! [`Metrics::max_threads_from`] ([`SettingSource::Code`],
//! [`Environment`](SettingSource::Environment) or
//! [`Default`](SettingSource::Default)). With the `tracing` feature, the
//! `thread started` and `thread retired` events carry the same, as fields
//! `concurrency`, `concurrency_from`, `max_threads` and `max_threads_from`.
//!
//! ```
//! use tidepool::{Pool, SettingSource};
//!
//! let pool = Pool::builder().concurrency(2).build()?;
//! let m = pool.metrics();
//! assert_eq!((m.concurrency, m.concurrency_from), (2, SettingSource::Code));
//! println!("max_threads {} ({:?})", m.max_threads, m.max_threads_from);
//! # Ok::<(), tidepool::BuildError>(())
//! ```
//!
//! # Platform support
//!
//! tidepool builds and runs everywhere the standard library has threads.
//! What differs is how the monitor tells a blocked worker from a busy one,
//! and [`Metrics::detection`] says which way a pool works ([`Detection`]):
//!
//! * **Linux** ([`Detection::Kernel`]): a worker whose task has run longer
//!   than the monitor interval is looked up in `/proc/self/task/<tid>/stat`
//!   and its CPU clock; if the kernel says it sleeps (`S` or `D`) and it used
//!   little CPU, its slot goes to another worker. A runnable thread is never
//!   compensated. A worker back from such a block that computes while
//!   every slot is taken waits for a slot: the monitor stops its thread
//!   with a real-time signal the pool installs once (the highest one below
//!   `SIGRTMAX` that has no handler; none free, nothing is held), and a
//!   worker that ends a task hands it its slot ([`Metrics::workers_held`];
//!   [`Builder::hold_signal`] turns it off).
//! * **Linux without `/proc`, or out of file descriptors when a worker
//!   starts** ([`Detection::CpuClock`]): that worker is judged by its thread
//!   CPU clock: one that used less than a quarter of the wall time over ten
//!   monitor intervals is blocked. A computing thread is never compensated;
//!   one kept off the cores that long by other load can be.
//!   [`Metrics::detection_fallbacks`] counts such workers, and with the
//!   `tracing` feature the first one is a warning that names the cause.
//! * **Elsewhere (macOS, Windows, the BSDs)** ([`Detection::TimeOnly`]):
//!   there is no thread state and no thread clock to read, so a worker in
//!   the same task for fifty monitor intervals (50 ms by default) *while
//!   work is queued* is taken for blocked, up to `concurrency` of them at
//!   once. That is a guess: it replaces blocked workers late, and a long
//!   CPU-bound task may get a thread it does not need (at most doubling the
//!   threads that compete for the cores; the extra thread retires when the
//!   task ends). Everything else works the same: a wait on the pool
//!   ([`JoinHandle::join`] and [`block_on`] on a worker) hands the slot over
//!   at once, a [`blocking`] section still inside after one monitor
//!   interval hands it over (no kernel look needed), async tasks hold no
//!   thread while they await, and
//!   [`Controller::Gradual`] / [`Controller::HillClimbing`] add slots when
//!   queued work stops moving. So off Linux, wrap blocking calls in
//!   [`blocking`] for prompt hand-over, or pick a [`Controller::Fixed`] pool
//!   for CPU-bound work that must never oversubscribe.
//!
//! Whatever the mode, a pool whose every thread up to `max_threads` is
//! blocked while work waits says so: [`Metrics::stuck`],
//! [`Metrics::stuck_episodes`], and a `tracing` warning with the fix.
//!
//! # Cargo features and observability
//!
//! [`Pool::metrics`] is always there: counters, thread counts by state, the
//! start-latency summary, a thread-count series, and which work blocked
//! (below). Two optional features export what happens (a third, `tokio`,
//! is interop); all are off by default, and with them off the code they
//! add compiles to nothing.
//!
//! * **`tracing`**: events through the [`tracing`](https://docs.rs/tracing)
//!   crate, target `tidepool`, field `pool` (the pool's `thread_name`):
//!   `thread started` (reason `demand`, `compensation` or `policy`),
//!   `thread retired` (`idle`, `surplus` or `shutdown`), both with the
//!   pool's settings (`concurrency`, `max_threads` and where each came
//!   from: see [Settings from the
//!   environment](#settings-from-the-environment)), `thread start
//!   failed` (with the OS error), `worker blocked` (`detected`, `declared`
//!   or `presumed`; fields `kind` and `site` name the work, see below),
//!   `worker returned from blocking` (`kind`, `site`), `hook panicked`,
//!   `blocking detection fell back` (WARN, once per pool), `pool stuck`
//!   (WARN, once per episode) and `pool no longer stuck`, `pool closed`,
//!   `pool stopped`. No event is emitted per task, so their cost is per
//!   thread start, exit or block. Per task there is one span,
//!   `tidepool.task` (TRACE; fields `pool`, `thread`, `kind`, `site`),
//!   entered for each run of a task (a closure's run, each poll of a
//!   future) and of a fork-join job a thief runs, so what a task logs is
//!   inside its kind's span; with no subscriber that wants TRACE spans it
//!   costs a level check per run.
//! * **`tokio`**: worker threads enter a tokio runtime's context, so
//!   tokio-based crates work in tasks (see [tokio-based
//!   crates](#tokio-based-crates-hyper-reqwest-tonic-sqlx)). The cost is the
//!   shared runtime's threads (parked while nothing is spawned on them with
//!   `tokio::spawn`) and its watcher's, while a pool exists, and a
//!   thread-local write per worker thread start; nothing per task.
//! * **`http`** (implies `tokio`): `tidepool::http::serve`, an HTTP/1.1
//!   server for an axum `Router` or any tower service of hyper requests,
//!   each connection a task on the pool, and `tidepool::http::Executor`,
//!   hyper's executor for the pool (see [Serving HTTP](#serving-http)).
//! * **`metrics`**: `Pool::publish_metrics` publishes the figures through
//!   the [`metrics`](https://docs.rs/metrics) facade (Prometheus with
//!   `metrics-exporter-prometheus`: see `examples/prometheus.rs`); the
//!   monitor thread publishes once a second while the pool is busy. The cost
//!   is one snapshot a second on the monitor thread, none on the workers.
//!
//! Measured with valgrind's callgrind on `SLOTS=1 spawn_profile inside 100000
//! 1` (100,000 tiny tasks spawned from a worker, instructions of the whole
//! process): 126.26 M with no feature, 126.26-126.32 M with both (no
//! subscriber or recorder installed): no difference above the run-to-run
//! noise of 0.05%. (Measured before the `tidepool.task` span existed: it
//! adds the level check per run with the feature on; not measured.)
//!
//! ## Which work blocked
//!
//! The pool knows which work it found blocked, and says so. A task's
//! *kind* is the type of its closure or future (for a `join` or a scope's
//! task started outside the pool, its closure and call site): every task
//! spawned from one `spawn_fn(|| ...)` is one kind, named after its type
//! (`std::any::type_name`, such as `my_app::handlers::export::{{closure}}`:
//! the function the closure is written in) and the line of its first spawn
//! (the spawn functions are `#[track_caller]`).
//!
//! * [`Metrics::kinds`] ([`KindFigures`]): per kind that gave a worker's
//!   slot away in this pool, most first: found blocked, declared blocking,
//!   started presumed blocking, presumptions that were wrong, and what the
//!   pool has learned (presumed blocking now, computes, waits on the
//!   pool). At most [`KINDS_TRACKED`] kinds, the first to block; later
//!   ones are counted in [`Metrics::kinds_untracked`].
//! * [`Metrics::workers`] ([`WorkerFigures`]): per worker, its state now
//!   ([`WorkerState`]), the tasks that ended on it and its blocks.
//! * [`Pool::running`] ([`RunningTask`]): the tasks running now, with their
//!   kind's name, how long they have run (at least: since the monitor first
//!   saw them) and whether their slot was given away. For a pool that
//!   seems stuck, it says which work holds the threads.
//! * With `tracing`, the `worker blocked` events carry `kind` and `site`.
//!
//! ```
//! use std::time::Duration;
//!
//! fn export_report() {
//!     // A declared block: handed over after one monitor interval, on every
//!     // platform (on Linux a plain sleep is found blocked as well).
//!     tidepool::blocking(|| std::thread::sleep(Duration::from_millis(50)));
//! }
//!
//! let pool = tidepool::Pool::builder().concurrency(1).build().unwrap();
//! pool.spawn_fn(|| export_report()).join().unwrap();
//! for kind in pool.metrics().kinds {
//!     println!(
//!         "{} spawned at {}: {} slots given away",
//!         kind.name,
//!         kind.site.map_or("?".into(), |site| site.to_string()),
//!         kind.blocking(),
//!     );
//! }
//! for task in pool.running() {
//!     println!("worker {} runs {} for {:?}", task.worker, task.name, task.running_for);
//! }
//! ```
//!
//! The cost: a spawn checks that its kind is named in a process-wide table
//! (one load of a word no spawn writes after the kind's first, a compare, a
//! branch; the first spawn of a kind claims a slot and stores a function
//! pointer). Nothing is stored per task: a work item's cell is unchanged.
//! The counts are written where a slot is given away (rare paths), and
//! the monitor records when it first saw each task it looks at. A metrics
//! snapshot scans the pool's 64-slot kind table and its worker entries
//! (two short `Vec`s more than before); `Pool::running` reads the worker
//! entries and takes one uncontended lock per running task.

// The loom build (`--cfg tidepool_loom`) compiles only what the models
// drive: the hold signal, the CPU timers and the threads' waits are left
// out, so what only they call is unused there. The ordinary build keeps
// the dead-code and unused-import checks for all of it.
#![cfg_attr(tidepool_loom, allow(dead_code, unused_imports))]

/// The crate README's examples (`tidepool/README.md`, inside the package, so
/// they run from the published crate too), compiled and run as doc-tests.
/// The repository's README repeats its Rust blocks verbatim
/// (`tests/readme.rs` checks that).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The layers, top to bottom. A module names only modules below it (checked
// by `.ci/modcycles`); ARCHITECTURE.md at the repository root says what each
// one owns and how a task travels through them.
//
//   iter ─▶ global ─▶ pool ─▶ fork ─▶ fair ─▶ task ─▶ worker ─▶ runtime ─▶ control ─▶ metrics, sys, sync
//              │                                 ▲          ▲
//              └──────▶ monitor ─────────────────┴──────────┘
//
// * iter:    parallel iterators and sorts (rayon's names) on join.
// * pool:    Pool, TaskBuilder, Builder: the public face; starts the monitor.
// * fork:    join, scope and parallel loops: closures that borrow, helping waits.
// * fair:    groups and concurrent/exclusive pairs (admission gates).
// * task:    JoinHandle and the task errors users see.
// * monitor: the thread that finds blocked workers and applies the policy.
// * worker:  worker threads: spawning, scheduling, the run loop, thread starts.
// * runtime: the state a pool shares: queues, entries, parking, the latch,
//            the task cells (a future's, a work item's) and the
//            thread-locals. Starts no thread.
// * control: slot accounting, policies, the monitor's signal.
// * interop: the tokio context worker threads enter (feature `tokio`).
// * reactor: tidepool's I/O reactor and `Async` (registered once, readiness
//            kept; polled by busy workers).
// * reactor_pacing: when the threads that drive I/O reactors pause.
mod control;
mod fair;
mod fork;
mod global;
#[cfg(feature = "http")]
pub mod http;
mod interop;
pub mod iter;
#[cfg(all(test, tidepool_loom))]
mod loom_models;
mod metrics;
mod monitor;
mod pool;
#[cfg(unix)]
mod reactor;
mod reactor_pacing;
mod runtime;
mod sync;
mod sys;
mod task;
mod trace;
mod worker;

#[cfg(not(unix))]
pub use async_io::{Async, Timer};
#[cfg(unix)]
pub use reactor::{Async, Timer};

/// What you need to read and write on an [`Async`] socket (or any
/// `futures-io` stream): the traits, their extension methods
/// (`read`, `read_exact`, `write_all`, `flush`, `close`, ...), buffering,
/// `copy` and `split`, re-exported from
/// [`futures-lite`](https://docs.rs/futures-lite) so you need no extra
/// dependency. `examples/echo.rs` is an echo server and client.
///
/// ```
/// use std::net::{TcpListener, TcpStream};
/// use tidepool::io::{AsyncReadExt, AsyncWriteExt};
/// use tidepool::Async;
///
/// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
/// let addr = listener.get_ref().local_addr()?;
/// let server = tidepool::spawn(async move {
///     let (stream, _) = listener.accept().await?;
///     // Echo what comes in until the client closes its side.
///     tidepool::io::copy(&stream, &mut &stream).await
/// });
/// let echoed = tidepool::block_on(async move {
///     let mut client = Async::<TcpStream>::connect(addr).await?;
///     client.write_all(b"hello").await?;
///     client.get_ref().shutdown(std::net::Shutdown::Write)?;
///     let mut back = String::new();
///     client.read_to_string(&mut back).await?;
///     Ok::<_, std::io::Error>(back)
/// })?;
/// assert_eq!(echoed, "hello");
/// assert_eq!(tidepool::block_on(server).unwrap()?, 5);
/// # Ok::<(), std::io::Error>(())
/// ```
pub mod io {
    pub use futures_lite::io::{
        copy, split, AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncSeek,
        AsyncSeekExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter, ReadHalf, WriteHalf,
    };
}
pub use control::Controller;
pub use fair::{
    ConcurrentSpawner, ExclusiveSpawner, Group, GroupBuilder, GroupError, GroupMetrics,
    QUEUE_BUDGET_PER_SLOT,
};
pub use fork::{isolate, Scope};
pub use global::{
    block_on, execute, for_each, for_range, global, join, scope, spawn, spawn_fn, GlobalPoolError,
};
pub use metrics::{
    Detection, KindFigures, LatencySummary, Metrics, RunningTask, SettingSource, ThreadSample,
    WorkerFigures, WorkerState, KINDS_TRACKED,
};
pub use pool::{
    BuildError, Builder, Pool, ShutdownError, TaskBuilder, MAX_THREADS_LIMIT, MIN_STACK_SIZE,
};
pub use runtime::{PanicPayload, Priority};

/// The parallel-iterator traits ([`iter`]), for `use tidepool::prelude::*;`
/// where rayon code has `use rayon::prelude::*;`: `par_iter()`,
/// `par_iter_mut()`, `into_par_iter()`, `par_chunks()`, `par_sort()` and
/// the adaptors and consumers of [`ParallelIterator`](iter::ParallelIterator).
///
/// ```
/// use tidepool::prelude::*;
/// let total: u64 = vec![1u64, 2, 3].par_iter().map(|v| v * 10).sum();
/// assert_eq!(total, 60);
/// ```
pub mod prelude {
    pub use crate::iter::{
        FromParallelIterator, IndexedParallelIterator, IntoParallelIterator,
        IntoParallelRefIterator, IntoParallelRefMutIterator, ParallelIterator, ParallelSlice,
        ParallelSliceMut,
    };
}
pub use task::{JoinError, JoinHandle, SpawnError, TaskPanic};

use std::time::{Duration, Instant};

/// Waits for `duration` without holding a thread: the task is parked in the
/// timer reactor and woken when the time is up. Returns the instant it woke.
///
/// ```
/// use std::time::{Duration, Instant};
/// let start = Instant::now();
/// tidepool::block_on(tidepool::sleep(Duration::from_millis(5)));
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub async fn sleep(duration: Duration) -> Instant {
    Timer::after(duration).await
}

/// Lets other tasks run: the calling task is woken at once and re-queued
/// behind the tasks already queued on its worker (on its lane's queue when
/// not on a worker; tasks queued from outside the pool get a turn at least
/// once in 244 picks), then resumes. Use it in a
/// long computation inside an async task so it does not hold its worker
/// while other tasks wait (a closure from `spawn_fn` cannot yield: it runs
/// to its end).
///
/// ```
/// let handle = tidepool::spawn(async {
///     let mut sum = 0u64;
///     for i in 0..1_000u64 {
///         sum += i;
///         if i % 100 == 0 {
///             tidepool::yield_now().await;
///         }
///     }
///     sum
/// });
/// assert_eq!(handle.join().unwrap(), 499_500);
/// ```
pub async fn yield_now() {
    futures_lite::future::yield_now().await;
}

/// Runs `future` for at most `duration`: its output, or [`Elapsed`] if the
/// time ran out first (the future is then dropped, which cancels it). The
/// wait holds no thread (a timer in the reactor, as [`sleep`]). A future
/// that is ready at once wins even with a zero duration.
///
/// # Errors
///
/// [`Elapsed`] if `duration` passed before `future` completed.
///
/// ```
/// use std::time::Duration;
///
/// let quick = tidepool::block_on(tidepool::timeout(Duration::from_secs(5), async { 1 }));
/// assert_eq!(quick, Ok(1));
///
/// let never = std::future::pending::<()>();
/// let err = tidepool::block_on(tidepool::timeout(Duration::from_millis(5), never)).unwrap_err();
/// assert_eq!(err.duration(), Duration::from_millis(5));
/// ```
pub async fn timeout<F: std::future::Future>(
    duration: Duration,
    future: F,
) -> Result<F::Output, Elapsed> {
    let output = async { Ok(future.await) };
    let timer = async {
        Timer::after(duration).await;
        Err(Elapsed { duration })
    };
    futures_lite::future::or(output, timer).await
}

/// The error of [`timeout`]: the time ran out before the future completed.
///
/// ```
/// use std::time::Duration;
/// let never = std::future::pending::<()>();
/// let err = tidepool::block_on(tidepool::timeout(Duration::from_millis(1), never)).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "timed out after 1ms before the future completed: raise the timeout, or handle Elapsed as a failure"
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Elapsed {
    duration: Duration,
}

impl Elapsed {
    /// The timeout that passed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let never = std::future::pending::<()>();
    /// let err = tidepool::block_on(tidepool::timeout(Duration::from_millis(2), never)).unwrap_err();
    /// assert_eq!(err.duration(), Duration::from_millis(2));
    /// ```
    pub fn duration(&self) -> Duration {
        self.duration
    }
}

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timed out after {:?} before the future completed: raise the timeout, or handle Elapsed as a failure",
            self.duration
        )
    }
}

impl std::fmt::Debug for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Elapsed: {self}")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `f`, a piece of code that may block, and tells the pool so.
///
/// Called on a pool worker, `f` runs in a *declared blocking section*. A
/// section that ends quickly costs next to nothing: no slot moves and no
/// thread starts or wakes, so wrapping a call that usually returns in a
/// millisecond (a database query) is cheap. A section still running after
/// one monitor interval (1 ms by default; the monitor looks at it twice)
/// gives its worker's slot to another worker, so the pool keeps
/// `concurrency` workers running meanwhile, without asking the kernel
/// first and on every platform. When `f` returns without its slot (handed
/// over, or in a task that started without one, presumed blocking), the
/// worker takes a slot back before the task runs on, waiting for one if
/// they are all taken (as a goroutine reacquires a P after a system
/// call): what follows the call never computes beside the `concurrency`
/// workers that hold the slots. Called outside a pool it just runs `f`.
///
/// Without it, the monitor detects blocking by itself on Linux within
/// about the same time; calling `f` inline is just as good there. A
/// section handed over also teaches the pool that work items of this kind
/// (this closure's type) block, so later ones get a thread of their own as
/// they are spawned ("presumed blocking", see [`Controller::Adaptive`]): 2
/// at a time at first, twice as many at each monitor look that finds them
/// all waiting. A kind whose tasks also wait for the pool's own tasks
/// ([`JoinHandle::join`], [`join`], [`scope`], [`block_on`]) is never
/// presumed: those waits run queued work on a slot, which a presumed task
/// does not hold. No need to wrap such waits in `blocking`.
///
/// ```
/// let handle = tidepool::spawn_fn(|| {
///     tidepool::blocking(|| std::thread::sleep(std::time::Duration::from_millis(5)));
///     "done"
/// });
/// assert_eq!(handle.join().unwrap(), "done");
/// ```
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let _section = worker::DeclaredSection::enter();
    f()
}
