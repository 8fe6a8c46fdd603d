//! CPU sentinels (`control::sentinel`): a block is found when the core it
//! left idles, not at the monitor's next tick. A binary of its own: the
//! test needs the cores otherwise idle, which tests running beside it in
//! one process would not leave them.

#![cfg(target_os = "linux")]

mod common;

use common::{within, HANG};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;
use tidepool::Pool;

/// The CPUs this process may run on.
fn allowed_cpus() -> usize {
    // SAFETY: a `cpu_set_t` is plain bits; `sched_getaffinity` writes at
    // most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        libc::CPU_COUNT(&set) as usize
    }
}

/// The monitor's interval at its longest (10 s): its first tick comes 10 s
/// after the pool's first task, and it would mark a slot holder blocked
/// one more interval later. Every slot holder sleeps in a socket read
/// (outside the process), a task is queued: the cores idle, their
/// sentinels have the monitor look at once, and the queued task starts
/// long before the first tick. With the `cpu-sentinel` switch off
/// (`TIDEPOOL_ABLATE=cpu-sentinel`) it starts after about 20 s, past the
/// 5 s this test allows.
#[test]
fn a_slot_holder_asleep_in_a_read_is_found_while_its_core_idles() {
    within(HANG, || {
        let cpus = allowed_cpus();
        let pool = Pool::builder()
            .concurrency(cpus)
            .monitor_interval(Duration::from_secs(10))
            .build()
            .unwrap();
        let (in_read_tx, in_read) = mpsc::channel();
        let (ends, blockers): (Vec<_>, Vec<_>) = (0..cpus)
            .map(|_| {
                let (mut reader, writer) = UnixStream::pair().unwrap();
                let in_read = in_read_tx.clone();
                let blocker = pool.spawn_fn(move || {
                    in_read.send(()).unwrap();
                    let mut byte = [0];
                    reader.read_exact(&mut byte).unwrap();
                });
                (writer, blocker)
            })
            .unzip();
        // Every slot held by a blocker before the task that must wait.
        for _ in 0..cpus {
            in_read.recv().unwrap();
        }
        let (started_tx, started) = mpsc::channel();
        let queued = pool.spawn_fn(move || started_tx.send(()).unwrap());
        let found = started.recv_timeout(Duration::from_secs(5));
        for mut end in ends {
            end.write_all(&[1]).unwrap();
        }
        for blocker in blockers {
            blocker.join().unwrap();
        }
        queued.join().unwrap();
        assert!(
            found.is_ok(),
            "the queued task waited for the monitor's tick: no sentinel looked"
        );
        assert!(pool.metrics().blocked_detections >= 1);
    });
}
