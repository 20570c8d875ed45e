//! `counterpoint-lockprof`: a pthread lock profiler loaded with `LD_PRELOAD` (LiMiT's lock case
//! study). It interposes the pthread mutex, rwlock, condition-variable and spinlock entry points
//! (plain, timed and `clock` variants), forwards each call to the real glibc function, and
//! accounts per lock address and per call site: acquisitions, contended acquisitions (a
//! `trylock` failed first), wait and hold time from the TSC, plus LiMiT's free / locking / held /
//! unlocking split per thread.
//!
//! Accounting is thread-local and allocation-free ([`table`]): every thread claims one slot of a
//! static table once, and writes only its own slot with relaxed atomic loads/stores, so the fast
//! path ([`account`]) takes no global lock. The report ([`report`]) is JSON written with
//! `write(2)` from a stack buffer to `$COUNTERPOINT_LOCKPROF_OUT/lockprof.<pid>.json` at exit, on
//! a fatal or terminating signal and just before an `exec` ([`lifecycle`]), in the format of
//! `counterpoint-lockprof-report`'s `Report`, which also aggregates it. The interposers are
//! generated from one table ([`interpose`], [`real`]).
//!
//! The call site is the interposed function's return address: naked trampolines (x86-64 only)
//! load `[rsp]` into the next free argument register and tail-jump into Rust.
//!
//! # Example
//!
//! Run a program under the library and read its report (this needs the built cdylib, so it is
//! not run as a doctest; `counterpoint lockprof -- PROG` does all of it):
//!
//! ```no_run
//! use counterpoint_lockprof_report::{aggregate, read_reports};
//! use std::process::Command;
//!
//! let dir = tempfile::tempdir()?;
//! let status = Command::new("xz")
//!     .args(["-T2", "-c", "/etc/services"])
//!     .env("LD_PRELOAD", "target/debug/libcounterpoint_lockprof.so")
//!     .env("COUNTERPOINT_LOCKPROF_OUT", dir.path())
//!     .stdout(std::process::Stdio::null())
//!     .status()?;
//! assert!(status.success());
//! let found = read_reports(dir.path())?;
//! let profile = aggregate(&found.reports);
//! println!("{} locks, {} acquisitions", profile.locks.len(), profile.acquisitions);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![allow(clippy::missing_safety_doc)]
#![warn(missing_docs)]
// Under `cfg(test)` the constructor is not registered, so the lifecycle code is unused.
#![cfg_attr(test, allow(dead_code))]

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("counterpoint-lockprof supports x86-64 Linux only");

pub mod account;
pub mod events;
pub mod interpose;
pub mod lifecycle;
pub mod locks;
pub mod objects;
pub mod real;
pub mod report;
pub mod table;

/// Lock kinds as written to the report: a mutex.
pub const KIND_MUTEX: u64 = 1;
/// A read lock of an rwlock.
pub const KIND_RDLOCK: u64 = 2;
/// A write lock of an rwlock.
pub const KIND_WRLOCK: u64 = 3;
/// A spinlock.
pub const KIND_SPIN: u64 = 4;
/// A condition-variable wait.
pub const KIND_COND: u64 = 5;
/// A `pthread_cond_signal`.
pub const KIND_SIGNAL: u64 = 6;
/// A `pthread_cond_broadcast`.
pub const KIND_BROADCAST: u64 = 7;

/// Name of a lock kind in the report.
pub fn kind_name(kind: u64) -> &'static str {
    match kind {
        KIND_MUTEX => "mutex",
        KIND_RDLOCK => "rwlock-read",
        KIND_WRLOCK => "rwlock-write",
        KIND_SPIN => "spin",
        KIND_COND => "cond-wait",
        KIND_SIGNAL => "cond-signal",
        KIND_BROADCAST => "cond-broadcast",
        _ => "unknown",
    }
}

/// Threads that can be tracked at once; later threads run unprofiled and are counted.
pub const MAX_THREADS: usize = 512;
/// (lock, call site, kind) entries per thread; events beyond it are counted as overflow.
pub const ENTRIES_PER_THREAD: usize = 512;
/// Locks one thread can hold at once and still be timed.
pub const HOLD_STACK: usize = 32;
/// Buckets of the wait and hold histograms (see [`table::hist_bucket`]).
pub const HIST_BUCKETS: usize = 80;
