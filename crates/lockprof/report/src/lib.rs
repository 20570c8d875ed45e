//! The lock profiler's report, as one set of serde types shared by the writer and the readers.
//!
//! [`Report`] is the file `libcounterpoint_lockprof.so` writes (`lockprof.<pid>.json`, or
//! `lockprof.<pid>.<segment>.json` for the image after an `exec`): per-thread LiMiT splits and
//! per-(thread, lock, call site, kind) entries. The library writes it by hand, with `write(2)`
//! from a stack buffer, because it must also write it from a signal handler; the tests of the
//! library check that everything it writes deserializes into [`Report`] with unknown fields
//! refused. [`aggregate`] merges a process's reports into a [`Profile`] (per lock, then per call
//! site, sorted by wait time), which `counterpoint lockprof` symbolizes and prints.
//!
//! This crate is separate from the preload library on purpose: linking that library would
//! interpose the reader's own `pthread_*` calls.
//!
//! # Example
//!
//! ```
//! use counterpoint_lockprof_report::{aggregate, Report};
//!
//! let text = r#"{"version":3,"pid":42,"segment":0,"ended_by":"exit","complete":true,
//!   "signal":null,"program":"/usr/bin/demo","elapsed_ns":1000000,"tsc_per_ns":2.5,
//!   "pmu":"none: no hardware PMU on this machine","events":[],"events_error":null,
//!   "threads_untracked":0,
//!   "exited_threads_unlisted":0,"exited_overflow_acquisitions":0,
//!   "threads":[{"tid":42,"exited":false,"total_ns":1000000,"free_ns":900000,
//!     "locking_ns":50000,"held_ns":40000,"unlocking_ns":10000,"lock_calls":3,
//!     "overflow_events":0,"unmatched_unlocks":0}],
//!   "entries":[
//!     {"tid":42,"lock":"0x10","site":"0xa","kind":"mutex","acquisitions":2,"contentions":1,
//!      "wait_total_ns":30,"wait_max_ns":20,"hold_count":2,"hold_total_ns":40,"hold_max_ns":25,
//!      "wait_min_ns":10,"hold_min_ns":15,"owner_changes":1,
//!      "wait_hist":[[28,1],[29,1]],"hold_hist":[[28,1],[29,1]],"event_deltas":[]},
//!     {"tid":null,"lock":"0x10","site":"0xb","kind":"mutex","acquisitions":1,"contentions":0,
//!      "wait_total_ns":5,"wait_max_ns":5,"hold_count":1,"hold_total_ns":9,"hold_max_ns":9,
//!      "wait_min_ns":5,"hold_min_ns":9,"owner_changes":0,
//!      "wait_hist":[[27,1]],"hold_hist":[[28,1]],"event_deltas":[]}],
//!   "locks_untracked":0,
//!   "locks":[{"lock":"0x10","first_tid":42,"created":false,"frames":[{"addr":"0x401000"}]}]}"#;
//! let report: Report = serde_json::from_str(text)?;
//! let profile = aggregate(&[report]);
//! assert_eq!(profile.locks.len(), 1);
//! let lock = &profile.locks[0];
//! assert_eq!((lock.stats.acquisitions, lock.stats.contentions), (3, 1));
//! assert_eq!(lock.stats.hold_ns.max, 25);
//! assert_eq!((lock.stats.wait_ns.min, lock.stats.owner_changes), (5, 1));
//! assert_eq!(lock.sites.len(), 2);
//! assert_eq!(lock.first_tid, Some(42));
//! assert!(profile.to_table(20, 4).contains("3 acquisitions"));
//! # Ok::<(), serde_json::Error>(())
//! ```

#![warn(missing_docs)]

/// Events the library reads inside critical sections at most (`lockprof --events`): the
/// library and the command share it, so a longer list is refused before the program runs.
pub const MAX_EVENTS: usize = 4;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The report format version this crate reads.
pub const FORMAT_VERSION: u32 = 3;

/// Why reports could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory or a file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A report is not valid JSON of the expected shape.
    #[error("parsing the report {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong, with line and column.
        source: serde_json::Error,
    },
    /// A report of another format version.
    #[error("the report {path} has format version {found}; this build reads version {FORMAT_VERSION} (profiler library and counterpoint from different builds?)")]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
    },
}

/// How the process, or one image of it, ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ending {
    /// `exit` (atexit handler).
    Exit,
    /// A fatal or terminating signal (written from the handler; call sites unsymbolized).
    Signal,
    /// Replaced by `exec` (written just before it; the next segment is the new image).
    Exec,
    /// `_exit` or `_Exit` (no `atexit` handlers; the library interposes both).
    #[serde(rename = "_exit")]
    QuickExit,
}

impl std::fmt::Display for Ending {
    /// What the image did, in the words of the report (the JSON's names: `exec`, not `Exec`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ending::Exit => "exit",
            Ending::Signal => "signal",
            Ending::Exec => "exec",
            Ending::QuickExit => "_exit",
        })
    }
}

/// One file written by the preload library.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// The process.
    pub pid: u32,
    /// 0 for the first image of the process, n for the image after its n-th `exec`.
    pub segment: u32,
    /// How this image ended.
    pub ended_by: Ending,
    /// False when written from a signal handler.
    pub complete: bool,
    /// The signal, when `ended_by` is `signal`.
    pub signal: Option<i32>,
    /// `/proc/self/exe` of this image.
    pub program: Option<String>,
    /// From load to the report, CLOCK_MONOTONIC.
    pub elapsed_ns: u64,
    /// TSC ticks per ns, calibrated over the run.
    pub tsc_per_ns: f64,
    /// Whether a hardware PMU exists and why the report has no counter deltas.
    pub pmu: String,
    /// Events read inside critical sections (`--events`; empty by default).
    pub events: Vec<String>,
    /// Why events asked for are missing (parse or open failure), if any.
    pub events_error: Option<String>,
    /// Threads that found no free slot (not profiled).
    pub threads_untracked: u64,
    /// Exited threads beyond the summary table (counted, not listed).
    pub exited_threads_unlisted: u64,
    /// Acquisitions of exited threads that found no free merged entry.
    pub exited_overflow_acquisitions: u64,
    /// LiMiT split per thread.
    pub threads: Vec<ThreadRecord>,
    /// Per (thread, lock, call site, kind); `tid` null for entries merged from exited threads.
    pub entries: Vec<EntryRecord>,
    /// Locks beyond the library's lock table (no owner changes, no first-seen stack).
    pub locks_untracked: u64,
    /// Every lock seen, with the stack where it was first taken.
    pub locks: Vec<LockRecord>,
}

/// A lock as the library's process-wide table knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockRecord {
    /// Address, hex.
    pub lock: String,
    /// The thread that created it (`created`) or took it first.
    pub first_tid: u64,
    /// Whether `frames` is where it was initialised (`pthread_*_init`) rather than where it
    /// was first taken (statically initialised locks).
    pub created: bool,
    /// That stack, innermost first (the caller of the init or lock call first).
    pub frames: Vec<FrameRecord>,
}

/// One return address of a stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameRecord {
    /// The address, hex.
    pub addr: String,
    /// Object containing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Offset in `object`, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_offset: Option<String>,
    /// Nearest dynamic symbol (absent in signal-time reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Offset from `symbol`, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol_offset: Option<String>,
}

/// Buckets of the library's histograms.
pub const HIST_BUCKETS: usize = 80;

/// The tick range `[lo, hi)` of histogram bucket `i` (the library's `hist_bucket`): 0 and 1
/// alone, then each power of two in two halves; the last bucket is open-ended (its `hi` is
/// where it starts being open).
pub fn bucket_ticks(i: usize) -> (u64, u64) {
    if i < 2 {
        return (i as u64, i as u64 + 1);
    }
    let k = (i / 2) as u32;
    let half = 1u64 << (k - 1);
    let lo = (1u64 << k) + (i as u64 % 2) * half;
    (lo, lo + half)
}

/// LiMiT's split of one thread's time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadRecord {
    /// Kernel thread id.
    pub tid: u64,
    /// Whether the thread had exited when the report was written.
    pub exited: bool,
    /// From its first lock call to its exit or the report.
    pub total_ns: u64,
    /// Outside lock calls with no lock held.
    pub free_ns: u64,
    /// Inside lock calls.
    pub locking_ns: u64,
    /// With at least one lock held (lock calls excluded).
    pub held_ns: u64,
    /// Inside unlock calls.
    pub unlocking_ns: u64,
    /// Lock calls that acquired.
    pub lock_calls: u64,
    /// Events lost to a full table.
    pub overflow_events: u64,
    /// Unlocks of locks this thread was not seen to take.
    pub unmatched_unlocks: u64,
}

/// One (thread, lock, call site, kind).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryRecord {
    /// The thread, or null for entries merged from exited threads.
    pub tid: Option<u64>,
    /// Lock address, hex.
    pub lock: String,
    /// Call site (return address), hex.
    pub site: String,
    /// `mutex`, `rwlock-read`, `rwlock-write`, `spin` or `cond-wait`.
    pub kind: String,
    /// Successful acquisitions (for `cond-wait`: waits).
    pub acquisitions: u64,
    /// Acquisitions that found the lock busy (for `cond-wait`: waits that timed out).
    pub contentions: u64,
    /// Time acquiring.
    pub wait_total_ns: u64,
    /// Longest acquisition.
    pub wait_max_ns: u64,
    /// Holds ended by an unlock.
    pub hold_count: u64,
    /// Time held.
    pub hold_total_ns: u64,
    /// Longest hold.
    pub hold_max_ns: u64,
    /// Shortest acquisition (0 without acquisitions).
    pub wait_min_ns: u64,
    /// Shortest hold (0 without holds).
    pub hold_min_ns: u64,
    /// Acquisitions that took the lock from another thread than its previous owner.
    pub owner_changes: u64,
    /// Wait times as `[bucket, count]` (ticks; see [`bucket_ticks`]).
    pub wait_hist: Vec<(usize, u64)>,
    /// Hold times as `[bucket, count]`.
    pub hold_hist: Vec<(usize, u64)>,
    /// Per event of the report's `events`: the sum over holds of its change while held.
    pub event_deltas: Vec<u64>,
    /// Object containing the call site (`dladdr`; absent in signal-time reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Offset of the call site in `object`, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_offset: Option<String>,
    /// Nearest dynamic symbol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Offset from `symbol`, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol_offset: Option<String>,
}

/// Wait times of a lock or call site.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitNs {
    /// Sum.
    pub total: u64,
    /// Per acquisition.
    pub mean: u64,
    /// Shortest.
    pub min: u64,
    /// Median, from the histogram (within its bucket's 25%, clamped to min..max).
    pub p50: u64,
    /// 99th percentile, from the histogram.
    pub p99: u64,
    /// Longest.
    pub max: u64,
}

/// Hold times of a lock or call site.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldNs {
    /// Holds ended by an unlock.
    pub count: u64,
    /// Sum.
    pub total: u64,
    /// Per hold.
    pub mean: u64,
    /// Shortest.
    pub min: u64,
    /// Median, from the histogram.
    pub p50: u64,
    /// 99th percentile, from the histogram.
    pub p99: u64,
    /// Longest.
    pub max: u64,
}

/// A histogram merged over threads and reports: bucket midpoint in ns -> count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistNs(pub BTreeMap<u64, u64>);

impl HistNs {
    fn add(&mut self, buckets: &[(usize, u64)], tsc_per_ns: f64) {
        for &(i, c) in buckets {
            let (lo, hi) = bucket_ticks(i.min(HIST_BUCKETS - 1));
            let mid_ticks = (lo as f64 + hi as f64) / 2.0;
            let ns = if tsc_per_ns > 0.0 {
                (mid_ticks / tsc_per_ns) as u64
            } else {
                0
            };
            *self.0.entry(ns).or_default() += c;
        }
    }

    /// The value below which a fraction `q` of the samples lie (bucket midpoint), clamped to
    /// `[min, max]`; 0 when empty.
    pub fn quantile(&self, q: f64, min: u64, max: u64) -> u64 {
        let total: u64 = self.0.values().sum();
        if total == 0 {
            return 0;
        }
        let want = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&v, &c) in &self.0 {
            seen += c;
            if seen >= want {
                return v.clamp(min, max.max(min));
            }
        }
        max
    }
}

/// Statistics of a lock or one of its call sites, merged over threads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Acquisitions (waits for `cond-wait`).
    pub acquisitions: u64,
    /// Contended acquisitions (timed-out waits for `cond-wait`).
    pub contentions: u64,
    /// Acquisitions by another thread than the previous owner (mutrace's "changed").
    pub owner_changes: u64,
    /// Wait times.
    pub wait_ns: WaitNs,
    /// Hold times.
    pub hold_ns: HoldNs,
    /// Per event of the profile's `events`: its total change while the lock was held.
    pub event_deltas: Vec<u64>,
    /// Wait-time histogram (for the percentiles).
    #[serde(skip)]
    pub wait_hist: HistNs,
    /// Hold-time histogram.
    #[serde(skip)]
    pub hold_hist: HistNs,
}

impl Stats {
    fn add(&mut self, e: &EntryRecord, tsc_per_ns: f64) {
        if e.acquisitions > 0 {
            self.wait_ns.min = if self.acquisitions == 0 {
                e.wait_min_ns
            } else {
                self.wait_ns.min.min(e.wait_min_ns)
            };
        }
        if e.hold_count > 0 {
            self.hold_ns.min = if self.hold_ns.count == 0 {
                e.hold_min_ns
            } else {
                self.hold_ns.min.min(e.hold_min_ns)
            };
        }
        self.acquisitions += e.acquisitions;
        self.contentions += e.contentions;
        self.owner_changes += e.owner_changes;
        self.wait_ns.total = self.wait_ns.total.saturating_add(e.wait_total_ns);
        self.wait_ns.max = self.wait_ns.max.max(e.wait_max_ns);
        self.hold_ns.count += e.hold_count;
        self.hold_ns.total = self.hold_ns.total.saturating_add(e.hold_total_ns);
        self.hold_ns.max = self.hold_ns.max.max(e.hold_max_ns);
        self.wait_hist.add(&e.wait_hist, tsc_per_ns);
        self.hold_hist.add(&e.hold_hist, tsc_per_ns);
        if self.event_deltas.len() < e.event_deltas.len() {
            self.event_deltas.resize(e.event_deltas.len(), 0);
        }
        for (d, v) in self.event_deltas.iter_mut().zip(&e.event_deltas) {
            *d = d.saturating_add(*v);
        }
    }
    fn finish(&mut self) {
        self.wait_ns.p50 = self
            .wait_hist
            .quantile(0.5, self.wait_ns.min, self.wait_ns.max);
        self.wait_ns.p99 = self
            .wait_hist
            .quantile(0.99, self.wait_ns.min, self.wait_ns.max);
        self.hold_ns.p50 = self
            .hold_hist
            .quantile(0.5, self.hold_ns.min, self.hold_ns.max);
        self.hold_ns.p99 = self
            .hold_hist
            .quantile(0.99, self.hold_ns.min, self.hold_ns.max);
        self.wait_ns.mean = self
            .wait_ns
            .total
            .checked_div(self.acquisitions)
            .unwrap_or(0);
        self.hold_ns.mean = self
            .hold_ns
            .total
            .checked_div(self.hold_ns.count)
            .unwrap_or(0);
    }
}

/// One call site of a lock (or of a condition variable: its waits, signals and broadcasts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteProfile {
    /// Return address, hex.
    pub site: String,
    /// What was done there (`mutex`, `cond-wait`, `cond-signal`, ...).
    pub kind: String,
    /// Human name (symbol+offset, function (file:line), object+offset, or the address), set by
    /// [`Profile::symbolize`].
    pub name: Option<String>,
    /// As the library found it with `dladdr`.
    #[serde(skip)]
    pub dl: Dl,
    /// Merged statistics.
    #[serde(flatten)]
    pub stats: Stats,
}

/// `dladdr`'s answer for a code address: symbol, offset from it, object, offset in it.
pub type Dl = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// One lock (address and kind) of one image of the process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockProfile {
    /// Address, hex.
    pub lock: String,
    /// Kind.
    pub kind: String,
    /// Which image of the process (0 unless it called `exec`).
    pub segment: u32,
    /// Merged statistics.
    #[serde(flatten)]
    pub stats: Stats,
    /// Per call site, most wait first.
    pub sites: Vec<SiteProfile>,
    /// The thread that created it or took it first (absent when the library's lock table was
    /// full).
    pub first_tid: Option<u64>,
    /// Whether `first_seen` is where it was created (`pthread_*_init`), not first taken.
    pub created: bool,
    /// Where it was created or first taken, innermost first (named by
    /// [`Profile::symbolize`]).
    pub first_seen: Vec<String>,
    /// The raw frames behind `first_seen`.
    #[serde(skip)]
    pub frames: Vec<(String, Dl)>,
}

/// One condition variable of one image: its waits, timeouts, signals and broadcasts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CondProfile {
    /// Address, hex.
    pub cond: String,
    /// Which image.
    pub segment: u32,
    /// `pthread_cond_*wait` calls.
    pub waits: u64,
    /// Waits that returned an error (timed out).
    pub timeouts: u64,
    /// Time blocked in the waits.
    pub wait_ns: WaitNs,
    /// `pthread_cond_signal` calls.
    pub signals: u64,
    /// `pthread_cond_broadcast` calls.
    pub broadcasts: u64,
    /// Per call site and kind (waits first, then by count).
    pub sites: Vec<SiteProfile>,
}

/// One image of the process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Index (0, then 1 after the first exec, ...).
    pub segment: u32,
    /// The executable.
    pub program: Option<String>,
    /// How it ended.
    pub ended_by: Ending,
    /// Its run time.
    pub elapsed_ns: u64,
}

/// One process that wrote reports during the run (the one started, its fork children).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSummary {
    /// The process.
    pub pid: u32,
    /// Its last image's executable.
    pub program: Option<String>,
    /// Its images.
    pub segments: usize,
    /// Lock acquisitions (condition-variable calls excluded).
    pub acquisitions: u64,
    /// Contended acquisitions.
    pub contentions: u64,
    /// Distinct locks.
    pub locks: usize,
    /// Whether this is the process the profile shows.
    pub shown: bool,
}

/// A process's reports merged per lock and call site.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The process.
    pub pid: u32,
    /// False if the last image was ended by a signal.
    pub complete: bool,
    /// That signal.
    pub signal: Option<i32>,
    /// Total run time over the images.
    pub elapsed_ns: u64,
    /// Whether a hardware PMU exists and why there are no counter deltas.
    pub pmu: String,
    /// Events read inside critical sections (`--events`), in the order of `event_deltas`.
    pub events: Vec<String>,
    /// Why events asked for are missing, if any.
    pub events_error: Option<String>,
    /// Threads not profiled (no free slot).
    pub threads_untracked: u64,
    /// Locks beyond the library's lock table (no owner changes or first-seen stack).
    pub locks_untracked: u64,
    /// The images (more than one after `exec`).
    pub segments: Vec<Segment>,
    /// Reports of other processes (children) found beside this one.
    pub other_process_reports: usize,
    /// Every process that wrote a report in the run, this one marked `shown`.
    pub processes: Vec<ProcessSummary>,
    /// Acquisitions over all locks.
    pub acquisitions: u64,
    /// Contended acquisitions over all locks.
    pub contentions: u64,
    /// LiMiT split per thread, over the images.
    pub threads: Vec<ThreadRecord>,
    /// Per lock (condition variables apart), most wait first unless sorted otherwise.
    pub locks: Vec<LockProfile>,
    /// Locks left out by the `--min-*` filters.
    pub locks_filtered_out: usize,
    /// Condition variables.
    pub conds: Vec<CondProfile>,
    /// Lock kinds this profiler cannot see (printed under the table).
    pub invisible: String,
    /// Processes of the run whose profiles are not in this report (still running when the wait
    /// for them ended; a profile cut short while it was being written), filled by the command
    /// that ran them. Empty when every process's profile is here.
    #[serde(default)]
    pub missing_profiles: Vec<MissingProfile>,
}

/// A process of the run whose profile is not in the report, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingProfile {
    /// The process.
    pub pid: u32,
    /// Its command name, when known.
    pub comm: Option<String>,
    /// `still running` or `cut short`.
    pub reason: String,
}

/// What the profiler does not see, said under every report.
pub const INVISIBLE: &str = "invisible: POSIX semaphores (sem_*), raw futex-based locks \
(glibc-internal locks such as stdio's and malloc's, Go/Rust-std/C++-atomic spin or futex \
locks that do not go through pthread_*), C11 mtx_* (glibc maps them to pthread internally, \
not through these symbols), kernel locks, and everything in statically linked programs";

/// What a report directory holds for one process.
#[derive(Debug, Default)]
pub struct Found {
    /// The process's reports, by segment.
    pub reports: Vec<Report>,
    /// Reports of other processes.
    pub other_processes: usize,
}

/// Parse a report's name: `lockprof.<pid>.json` → (pid, 0), `lockprof.<pid>.<n>.json` → (pid, n).
pub fn parse_file_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("lockprof.")?.strip_suffix(".json")?;
    let mut parts = rest.split('.');
    let pid = parts.next()?.parse().ok()?;
    let seg = match parts.next() {
        Some(s) => s.parse().ok()?,
        None => 0,
    };
    parts.next().is_none().then_some((pid, seg))
}

/// Read the reports in `dir`: those of `pid` (every pid when `None`), by segment.
pub fn read_reports_of(dir: &Path, pid: Option<u32>) -> Result<Found, ReportError> {
    let all = read_all_processes(dir)?;
    let mut found = Found::default();
    for (p, reports) in all {
        if pid.is_some_and(|want| want != p) {
            found.other_processes += reports.len();
            continue;
        }
        found.reports.extend(reports);
    }
    Ok(found)
}

/// Every report in `dir`, grouped by process, each process's by segment.
pub fn read_all_processes(dir: &Path) -> Result<BTreeMap<u32, Vec<Report>>, ReportError> {
    let (out, cut) = read_all_processes_skipping_cut(dir)?;
    match cut.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(out),
    }
}

/// [`read_all_processes`] for a directory processes may still be writing to, or were killed
/// while writing to: a report that does not parse is left out and returned beside the others
/// as (pid, error) instead of failing the whole directory (a stop signal that came while one
/// process wrote its profile lost every process's report; CLI probe, session 28).
#[allow(clippy::type_complexity)]
pub fn read_all_processes_skipping_cut(
    dir: &Path,
) -> Result<(BTreeMap<u32, Vec<Report>>, Vec<(u32, ReportError)>), ReportError> {
    let io = |source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((p, seg)) = parse_file_name(&name) {
            names.push((p, seg, e.path()));
        }
    }
    names.sort();
    let mut out: BTreeMap<u32, Vec<Report>> = BTreeMap::new();
    let mut cut = Vec::new();
    for (p, _, path) in names {
        match read_report(&path) {
            Ok(r) => out.entry(p).or_default().push(r),
            Err(e @ ReportError::Parse { .. }) => cut.push((p, e)),
            // Removed since it was listed: the image of an exec that failed, which the
            // process writes again later.
            Err(ReportError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    // A process with one segment cut short is left out whole: its other images alone would
    // read as all it did.
    for (p, _) in &cut {
        out.remove(p);
    }
    Ok((out, cut))
}

/// Every report in `dir`.
pub fn read_reports(dir: &Path) -> Result<Found, ReportError> {
    read_reports_of(dir, None)
}

/// One report file.
pub fn read_report(path: &Path) -> Result<Report, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // The version first, so that another format says so rather than "unknown field".
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        if let Some(found) = v["version"].as_u64() {
            if found != u64::from(FORMAT_VERSION) {
                return Err(ReportError::Version {
                    path: path.to_path_buf(),
                    found: found as u32,
                });
            }
        }
    }
    serde_json::from_str(&text).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `event` (as `--events` names it) counts nanoseconds: the software clocks.
fn is_clock_event(event: &str) -> bool {
    let base = event.split(':').next().unwrap_or(event);
    matches!(base, "task-clock" | "cpu-clock")
}

fn is_cond_kind(kind: &str) -> bool {
    kind.starts_with("cond-")
}

/// Merge reports (the segments of one process, in order) per (segment, lock, kind), then per
/// call site; locks sorted by wait time, then acquisitions. Condition variables go to their own
/// table.
pub fn aggregate(reports: &[Report]) -> Profile {
    let mut map: BTreeMap<(u32, String, String), LockProfile> = BTreeMap::new();
    let mut sites: BTreeMap<(u32, String, String, String), SiteProfile> = BTreeMap::new();
    let mut first: BTreeMap<(u32, String), &LockRecord> = BTreeMap::new();
    for r in reports {
        for l in &r.locks {
            first.insert((r.segment, l.lock.clone()), l);
        }
        for e in &r.entries {
            let key = (r.segment, e.lock.clone(), e.kind.clone());
            map.entry(key)
                .or_insert_with(|| LockProfile {
                    lock: e.lock.clone(),
                    kind: e.kind.clone(),
                    segment: r.segment,
                    stats: Stats::default(),
                    sites: Vec::new(),
                    first_tid: None,
                    created: false,
                    first_seen: Vec::new(),
                    frames: Vec::new(),
                })
                .stats
                .add(e, r.tsc_per_ns);
            sites
                .entry((r.segment, e.lock.clone(), e.kind.clone(), e.site.clone()))
                .or_insert_with(|| SiteProfile {
                    site: e.site.clone(),
                    kind: e.kind.clone(),
                    name: None,
                    dl: (
                        e.symbol.clone(),
                        e.symbol_offset.clone(),
                        e.object.clone(),
                        e.object_offset.clone(),
                    ),
                    stats: Stats::default(),
                })
                .stats
                .add(e, r.tsc_per_ns);
        }
    }
    for ((seg, lock, kind, _), mut s) in sites {
        s.stats.finish();
        if let Some(l) = map.get_mut(&(seg, lock, kind)) {
            l.sites.push(s);
        }
    }
    let mut locks = Vec::new();
    let mut conds: BTreeMap<(u32, String), CondProfile> = BTreeMap::new();
    for (_, mut l) in map {
        l.stats.finish();
        if is_cond_kind(&l.kind) {
            let c = conds
                .entry((l.segment, l.lock.clone()))
                .or_insert_with(|| CondProfile {
                    cond: l.lock.clone(),
                    segment: l.segment,
                    waits: 0,
                    timeouts: 0,
                    wait_ns: WaitNs::default(),
                    signals: 0,
                    broadcasts: 0,
                    sites: Vec::new(),
                });
            match l.kind.as_str() {
                "cond-wait" => {
                    c.waits = l.stats.acquisitions;
                    c.timeouts = l.stats.contentions;
                    c.wait_ns = l.stats.wait_ns.clone();
                }
                "cond-signal" => c.signals = l.stats.acquisitions,
                _ => c.broadcasts = l.stats.acquisitions,
            }
            c.sites.append(&mut l.sites);
            continue;
        }
        if let Some(rec) = first.get(&(l.segment, l.lock.clone())) {
            l.first_tid = Some(rec.first_tid);
            l.created = rec.created;
            l.frames = rec
                .frames
                .iter()
                .map(|f| {
                    (
                        f.addr.clone(),
                        (
                            f.symbol.clone(),
                            f.symbol_offset.clone(),
                            f.object.clone(),
                            f.object_offset.clone(),
                        ),
                    )
                })
                .collect();
        }
        locks.push(l);
    }
    let mut conds: Vec<CondProfile> = conds.into_values().collect();
    for c in &mut conds {
        c.sites.sort_by(|a, b| {
            (
                a.kind != "cond-wait",
                std::cmp::Reverse(a.stats.acquisitions),
                &a.site,
            )
                .cmp(&(
                    b.kind != "cond-wait",
                    std::cmp::Reverse(b.stats.acquisitions),
                    &b.site,
                ))
        });
    }
    conds.sort_by(|a, b| {
        (std::cmp::Reverse(a.wait_ns.total), a.segment, &a.cond).cmp(&(
            std::cmp::Reverse(b.wait_ns.total),
            b.segment,
            &b.cond,
        ))
    });
    let mut profile = {
        let last = reports.last();
        Profile {
            pid: last.map_or(0, |r| r.pid),
            complete: last.map_or(true, |r| r.complete),
            signal: last.and_then(|r| r.signal),
            elapsed_ns: reports.iter().map(|r| r.elapsed_ns).sum(),
            pmu: last.map(|r| r.pmu.clone()).unwrap_or_default(),
            events: last.map(|r| r.events.clone()).unwrap_or_default(),
            events_error: reports.iter().find_map(|r| r.events_error.clone()),
            threads_untracked: reports.iter().map(|r| r.threads_untracked).sum(),
            locks_untracked: reports.iter().map(|r| r.locks_untracked).sum(),
            segments: reports
                .iter()
                .map(|r| Segment {
                    segment: r.segment,
                    program: r.program.clone(),
                    ended_by: r.ended_by,
                    elapsed_ns: r.elapsed_ns,
                })
                .collect(),
            other_process_reports: 0,
            processes: Vec::new(),
            acquisitions: locks.iter().map(|l| l.stats.acquisitions).sum(),
            contentions: locks.iter().map(|l| l.stats.contentions).sum(),
            threads: reports.iter().flat_map(|r| r.threads.clone()).collect(),
            locks,
            locks_filtered_out: 0,
            conds,
            invisible: INVISIBLE.to_string(),
            missing_profiles: Vec::new(),
        }
    };
    profile.sort(SortKey::WaitTotal);
    profile
}

/// A one-line summary of a process's reports (for the process list).
pub fn summarize(pid: u32, reports: &[Report]) -> ProcessSummary {
    let mut locks = std::collections::BTreeSet::new();
    let (mut acquisitions, mut contentions) = (0, 0);
    for r in reports {
        for e in r.entries.iter().filter(|e| !is_cond_kind(&e.kind)) {
            acquisitions += e.acquisitions;
            contentions += e.contentions;
            locks.insert((r.segment, e.lock.as_str()));
        }
    }
    ProcessSummary {
        pid,
        program: reports.last().and_then(|r| r.program.clone()),
        segments: reports.len(),
        acquisitions,
        contentions,
        locks: locks.len(),
        shown: false,
    }
}

/// A column of the lock table, to sort by (`--sort`); the names are the table's headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// `count`: acquisitions.
    Count,
    /// `cont`: contended acquisitions.
    Contentions,
    /// `changes`: owner changes.
    Changes,
    /// `wait-tot`.
    WaitTotal,
    /// `wait-avg`.
    WaitAvg,
    /// `wait-min`.
    WaitMin,
    /// `wait-p50`.
    WaitP50,
    /// `wait-p99`.
    WaitP99,
    /// `wait-max`.
    WaitMax,
    /// `hold-tot`.
    HoldTotal,
    /// `hold-avg`.
    HoldAvg,
    /// `hold-min`.
    HoldMin,
    /// `hold-p50`.
    HoldP50,
    /// `hold-p99`.
    HoldP99,
    /// `hold-max`.
    HoldMax,
}

/// Every sort key with its column name.
pub const SORT_KEYS: [(&str, SortKey); 15] = [
    ("count", SortKey::Count),
    ("cont", SortKey::Contentions),
    ("changes", SortKey::Changes),
    ("wait-tot", SortKey::WaitTotal),
    ("wait-avg", SortKey::WaitAvg),
    ("wait-min", SortKey::WaitMin),
    ("wait-p50", SortKey::WaitP50),
    ("wait-p99", SortKey::WaitP99),
    ("wait-max", SortKey::WaitMax),
    ("hold-tot", SortKey::HoldTotal),
    ("hold-avg", SortKey::HoldAvg),
    ("hold-min", SortKey::HoldMin),
    ("hold-p50", SortKey::HoldP50),
    ("hold-p99", SortKey::HoldP99),
    ("hold-max", SortKey::HoldMax),
];

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let alias = match s.as_str() {
            "contentions" | "contended" => "cont",
            "acquisitions" | "locked" => "count",
            "owner-changes" | "changed" => "changes",
            "wait" | "wait-total" => "wait-tot",
            "hold" | "hold-total" => "hold-tot",
            other => other,
        };
        SORT_KEYS
            .iter()
            .find(|(n, _)| *n == alias)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                format!(
                    "unknown sort column {s:?}; one of: {}",
                    SORT_KEYS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }
}

impl SortKey {
    /// The value of this column in `st`.
    pub fn value(self, st: &Stats) -> u64 {
        match self {
            SortKey::Count => st.acquisitions,
            SortKey::Contentions => st.contentions,
            SortKey::Changes => st.owner_changes,
            SortKey::WaitTotal => st.wait_ns.total,
            SortKey::WaitAvg => st.wait_ns.mean,
            SortKey::WaitMin => st.wait_ns.min,
            SortKey::WaitP50 => st.wait_ns.p50,
            SortKey::WaitP99 => st.wait_ns.p99,
            SortKey::WaitMax => st.wait_ns.max,
            SortKey::HoldTotal => st.hold_ns.total,
            SortKey::HoldAvg => st.hold_ns.mean,
            SortKey::HoldMin => st.hold_ns.min,
            SortKey::HoldP50 => st.hold_ns.p50,
            SortKey::HoldP99 => st.hold_ns.p99,
            SortKey::HoldMax => st.hold_ns.max,
        }
    }
}

/// The `--min-*` filters: a lock is shown when it reaches every one set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Acquisitions.
    pub min_count: u64,
    /// Contended acquisitions.
    pub min_contentions: u64,
    /// Owner changes.
    pub min_changes: u64,
    /// Total wait, ns.
    pub min_wait_ns: u64,
    /// Total hold, ns.
    pub min_hold_ns: u64,
}

impl Filter {
    /// Whether a lock with these statistics passes.
    pub fn keeps(&self, st: &Stats) -> bool {
        st.acquisitions >= self.min_count
            && st.contentions >= self.min_contentions
            && st.owner_changes >= self.min_changes
            && st.wait_ns.total >= self.min_wait_ns
            && st.hold_ns.total >= self.min_hold_ns
    }
}

/// Parse a duration such as `250`, `250ns`, `10us`, `1.5ms`, `2s` into ns.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ns, 10us, 1.5ms, 2s)"))?;
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => return Err(format!("unknown unit {u:?} in {text:?} (ns, us, ms or s)")),
    };
    let ns = v * scale;
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(ns as u64)
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Format a duration for the table.
pub fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2}s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1}ms", ns as f64 / 1e6)
    } else if ns >= 10_000 {
        format!("{:.1}us", ns as f64 / 1e3)
    } else {
        format!("{ns}ns")
    }
}

/// Where a name goes once resolved: a lock's site, a condition variable's site, or a frame of
/// a lock's first-seen stack.
#[derive(Clone, Copy)]
enum Slot {
    Site(usize, usize),
    CondSite(usize, usize),
    Frame(usize, usize),
}

/// `function (file:line)` for an address of an object, from its DWARF line table (the innermost
/// inlined function, as `addr2line -f` names it). `None` without a file and line: the nearest
/// symbol alone would be wrong for internal functions of a stripped object.
fn source_name(loader: &addr2line::Loader, probe: u64) -> Option<String> {
    let mut frames = loader.find_frames(probe).ok()?;
    let frame = frames.next().ok()??;
    let loc = frame.location?;
    let (file, line) = (loc.file?, loc.line?);
    let func = frame
        .function
        .as_ref()
        .and_then(|f| f.demangle().ok())
        .map(|c| c.into_owned())
        .unwrap_or_else(|| "??".to_string());
    let file = file.rsplit('/').next().unwrap_or(file);
    Some(format!("{func} ({file}:{line})"))
}

impl Profile {
    /// Order locks (and each lock's sites) by `key`, largest first; ties by wait, then address.
    pub fn sort(&mut self, key: SortKey) {
        let order = |a: &Stats, b: &Stats| {
            (key.value(b), b.wait_ns.total, b.acquisitions).cmp(&(
                key.value(a),
                a.wait_ns.total,
                a.acquisitions,
            ))
        };
        for l in &mut self.locks {
            l.sites
                .sort_by(|a, b| order(&a.stats, &b.stats).then(a.site.cmp(&b.site)));
        }
        self.locks.sort_by(|a, b| {
            order(&a.stats, &b.stats)
                .then((a.segment, &a.lock, &a.kind).cmp(&(b.segment, &b.lock, &b.kind)))
        });
    }

    /// Drop the locks `filter` does not keep (counted in `locks_filtered_out`; the header's
    /// totals stay those of the whole process).
    pub fn filter(&mut self, filter: &Filter) {
        let before = self.locks.len();
        self.locks.retain(|l| filter.keeps(&l.stats));
        self.locks_filtered_out += before - self.locks.len();
    }

    /// Name every call site and first-seen frame: the dynamic symbol `dladdr` found at exit,
    /// else the object's DWARF (the `addr2line` crate) (static functions of the executable are not in the
    /// dynamic symbol table), else the object and offset, else the raw address.
    pub fn symbolize(&mut self) {
        let mut by_object: BTreeMap<String, Vec<(Slot, u64)>> = BTreeMap::new();
        let mut name_of = |slot: Slot, addr: &str, dl: &Dl| -> String {
            let (sym, sym_off, obj, obj_off) = dl;
            match (sym, sym_off) {
                (Some(n), Some(off)) => format!("{n}+{off}"),
                _ => match (obj, obj_off) {
                    (Some(o), Some(off)) => {
                        if let Ok(v) = u64::from_str_radix(off.trim_start_matches("0x"), 16) {
                            by_object.entry(o.clone()).or_default().push((slot, v));
                        }
                        format!("{}+{off}", short(o))
                    }
                    _ => addr.to_string(),
                },
            }
        };
        for (li, l) in self.locks.iter_mut().enumerate() {
            for (si, s) in l.sites.iter_mut().enumerate() {
                s.name = Some(name_of(Slot::Site(li, si), &s.site, &s.dl));
            }
            l.first_seen = l
                .frames
                .iter()
                .enumerate()
                .map(|(fi, (addr, dl))| name_of(Slot::Frame(li, fi), addr, dl))
                .collect();
        }
        for (ci, c) in self.conds.iter_mut().enumerate() {
            for (si, s) in c.sites.iter_mut().enumerate() {
                s.name = Some(name_of(Slot::CondSite(ci, si), &s.site, &s.dl));
            }
        }
        for (object, wanted) in by_object {
            if !Path::new(&object).is_file() {
                continue;
            }
            // DWARF through the `addr2line` crate (gimli); an object without debug information
            // (or unreadable) keeps object+offset.
            let Ok(loader) = addr2line::Loader::new(&object) else {
                continue;
            };
            for (slot, off) in wanted {
                // Return addresses point after the call: look up the byte before.
                let Some(name) = source_name(&loader, off.saturating_sub(1)) else {
                    continue;
                };
                match slot {
                    Slot::Site(li, si) => {
                        if let Some(s) = self.locks.get_mut(li).and_then(|l| l.sites.get_mut(si)) {
                            s.name = Some(name);
                        }
                    }
                    Slot::CondSite(ci, si) => {
                        if let Some(s) = self.conds.get_mut(ci).and_then(|c| c.sites.get_mut(si)) {
                            s.name = Some(name);
                        }
                    }
                    Slot::Frame(li, fi) => {
                        if let Some(f) = self
                            .locks
                            .get_mut(li)
                            .and_then(|l| l.first_seen.get_mut(fi))
                        {
                            *f = name;
                        }
                    }
                }
            }
        }
    }

    /// A lockstat / mutrace / `perf lock contention`-style table: the `top` locks (all with 0)
    /// in the current order, their call sites and up to `frames` frames of the stack where
    /// each was first taken; the condition variables; the LiMiT split per thread; the other
    /// processes of the run; and what the profile cannot see.
    pub fn to_table(&self, top: usize, frames: usize) -> String {
        let mut s = String::new();
        let ending = match (self.complete, self.signal) {
            (true, _) => "exited".to_string(),
            (false, Some(sig)) => format!("died on signal {sig}"),
            (false, None) => "died".to_string(),
        };
        let program = self
            .segments
            .last()
            .and_then(|g| g.program.as_deref())
            .map(|p| format!(" ({})", short(p)))
            .unwrap_or_default();
        s.push_str(&format!(
            "lockprof: pid {}{program} {ending}, {} locks, {} acquisitions, {} contended; elapsed {}\n",
            self.pid,
            self.locks.len() + self.locks_filtered_out,
            self.acquisitions,
            self.contentions,
            fmt_ns(self.elapsed_ns),
        ));
        if self.segments.len() > 1 {
            for seg in &self.segments {
                s.push_str(&format!(
                    "image {}: {} ({}, {})\n",
                    seg.segment,
                    seg.program.as_deref().unwrap_or("?"),
                    seg.ended_by,
                    fmt_ns(seg.elapsed_ns)
                ));
            }
        }
        const W: usize = 8;
        s.push_str(&format!(
            "{:>9} {:>7} {:>7} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$}  {:<12} {:<14} caller\n",
            "count", "cont", "changes", "wait-tot", "wait-avg", "wait-min", "wait-p50", "wait-p99",
            "wait-max", "hold-tot", "hold-avg", "hold-min", "hold-p50", "hold-p99", "hold-max",
            "kind", "lock"
        ));
        let row = |st: &Stats, kind: &str, lock: &str, caller: &str| {
            let h = |v: u64| {
                if st.hold_ns.count == 0 {
                    "-".to_string()
                } else {
                    fmt_ns(v)
                }
            };
            let w = |v: u64| {
                if st.acquisitions == 0 {
                    "-".to_string()
                } else {
                    fmt_ns(v)
                }
            };
            format!(
                "{:>9} {:>7} {:>7} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$} {:>W$}  {:<12} {:<14} {caller}\n",
                st.acquisitions,
                st.contentions,
                st.owner_changes,
                w(st.wait_ns.total),
                w(st.wait_ns.mean),
                w(st.wait_ns.min),
                w(st.wait_ns.p50),
                w(st.wait_ns.p99),
                w(st.wait_ns.max),
                h(st.hold_ns.total),
                h(st.hold_ns.mean),
                h(st.hold_ns.min),
                h(st.hold_ns.p50),
                h(st.hold_ns.p99),
                h(st.hold_ns.max),
                kind,
                lock,
            )
        };
        let n = if top == 0 {
            self.locks.len()
        } else {
            top.min(self.locks.len())
        };
        let multi = self.segments.len() > 1;
        let name = |site: &SiteProfile| site.name.clone().unwrap_or_else(|| site.site.clone());
        for l in &self.locks[..n] {
            let lock = if multi {
                format!("{}:{}", l.segment, l.lock)
            } else {
                l.lock.clone()
            };
            let first = l.sites.first().map(name).unwrap_or_default();
            let more = if l.sites.len() > 1 {
                format!(" (+{} sites)", l.sites.len() - 1)
            } else {
                String::new()
            };
            s.push_str(&row(&l.stats, &l.kind, &lock, &format!("{first}{more}")));
            if l.sites.len() > 1 {
                for site in &l.sites {
                    s.push_str(&row(&site.stats, "", "", &format!("  {}", name(site))));
                }
            }
            if frames > 0 && !l.first_seen.is_empty() {
                s.push_str(&format!(
                    "{:>12} {} by tid {}:\n",
                    "",
                    if l.created { "created" } else { "first taken" },
                    l.first_tid.unwrap_or(0)
                ));
                for (i, f) in l.first_seen.iter().take(frames).enumerate() {
                    s.push_str(&format!("{:>14}#{i} {f}\n", ""));
                }
            }
        }
        if n < self.locks.len() {
            s.push_str(&format!(
                "({} more locks; --top 0 shows all)\n",
                self.locks.len() - n
            ));
        }
        if self.locks_filtered_out > 0 {
            s.push_str(&format!(
                "({} locks below the --min-* filters not shown)\n",
                self.locks_filtered_out
            ));
        }
        if !self.events.is_empty() {
            s.push_str("\ncounter deltas while held (total, per hold)\n");
            s.push_str(&format!("{:>9}", "holds"));
            for e in &self.events {
                // The software clocks count nanoseconds; every other event counts occurrences.
                let name = if is_clock_event(e) {
                    format!("{e} ns")
                } else {
                    e.clone()
                };
                s.push_str(&format!(" {name:>14} {:>10}", "/hold"));
            }
            s.push_str(&format!("  {:<12} lock\n", "kind"));
            for l in &self.locks[..n] {
                s.push_str(&format!("{:>9}", l.stats.hold_ns.count));
                for i in 0..self.events.len() {
                    let v = l.stats.event_deltas.get(i).copied().unwrap_or(0);
                    let per = v as f64 / l.stats.hold_ns.count.max(1) as f64;
                    s.push_str(&format!(" {v:>14} {per:>10.1}"));
                }
                let lock = if multi {
                    format!("{}:{}", l.segment, l.lock)
                } else {
                    l.lock.clone()
                };
                s.push_str(&format!("  {:<12} {lock}\n", l.kind));
            }
        }
        if let Some(e) = &self.events_error {
            s.push_str(&format!("events: {e}\n"));
        }
        if !self.conds.is_empty() {
            s.push_str("\ncondition variables\n");
            s.push_str(&format!(
                "{:>9} {:>8} {:>W$} {:>W$} {:>W$} {:>9} {:>10}  {:<14} caller\n",
                "waits",
                "timeouts",
                "wait-tot",
                "wait-avg",
                "wait-max",
                "signals",
                "broadcasts",
                "cond"
            ));
            let nc = if top == 0 {
                self.conds.len()
            } else {
                top.min(self.conds.len())
            };
            for c in &self.conds[..nc] {
                let cond = if multi {
                    format!("{}:{}", c.segment, c.cond)
                } else {
                    c.cond.clone()
                };
                let callers: Vec<String> = c
                    .sites
                    .iter()
                    .take(3)
                    .map(|site| {
                        let what = site.kind.trim_start_matches("cond-");
                        format!("{what} {}x {}", site.stats.acquisitions, name(site))
                    })
                    .collect();
                let more = if c.sites.len() > 3 {
                    format!("; +{} sites", c.sites.len() - 3)
                } else {
                    String::new()
                };
                s.push_str(&format!(
                    "{:>9} {:>8} {:>W$} {:>W$} {:>W$} {:>9} {:>10}  {:<14} {}{more}\n",
                    c.waits,
                    c.timeouts,
                    fmt_ns(c.wait_ns.total),
                    fmt_ns(c.wait_ns.mean),
                    fmt_ns(c.wait_ns.max),
                    c.signals,
                    c.broadcasts,
                    cond,
                    callers.join("; "),
                ));
            }
            if nc < self.conds.len() {
                s.push_str(&format!(
                    "({} more condition variables; --top 0 shows all)\n",
                    self.conds.len() - nc
                ));
            }
        }
        s.push_str("\nper thread (LiMiT split)\n");
        s.push_str(&format!(
            "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
            "tid", "calls", "total", "free", "locking", "held", "unlocking"
        ));
        for t in &self.threads {
            s.push_str(&format!(
                "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
                t.tid,
                t.lock_calls,
                fmt_ns(t.total_ns),
                fmt_ns(t.free_ns),
                fmt_ns(t.locking_ns),
                fmt_ns(t.held_ns),
                fmt_ns(t.unlocking_ns)
            ));
        }
        if self.processes.len() > 1 {
            s.push_str(&format!(
                "\nprocesses ({}; choose with --pid PID, --process N or --process NAME)\n",
                self.processes.len()
            ));
            for (i, p) in self.processes.iter().enumerate() {
                s.push_str(&format!(
                    "{} {i:>3} {:>8} {:<20} {:>10} acquisitions {:>8} contended {:>5} locks{}\n",
                    if p.shown { "*" } else { " " },
                    p.pid,
                    p.program.as_deref().map(short).unwrap_or("?"),
                    p.acquisitions,
                    p.contentions,
                    p.locks,
                    if p.segments > 1 {
                        format!(", {} images", p.segments)
                    } else {
                        String::new()
                    }
                ));
            }
        }
        if self.locks_untracked > 0 {
            s.push_str(&format!(
                "note: {} locks beyond the lock table: no owner changes or first-seen stack for them\n",
                self.locks_untracked
            ));
        }
        // What the counts above leave out, said where the counts are read (JSON has the fields;
        // the table said nothing; CLI probe, session 28).
        if self.threads_untracked > 0 {
            s.push_str(&format!(
                "note: {} threads beyond the thread table were not profiled: their lock calls are \
                 not in these counts\n",
                self.threads_untracked
            ));
        }
        let lost: u64 = self.threads.iter().map(|t| t.overflow_events).sum();
        if lost > 0 {
            s.push_str(&format!(
                "note: {lost} lock events lost to full per-thread tables (more distinct locks \
                 per thread than a table holds): the counts are lower than the program's\n"
            ));
        }
        if !self.missing_profiles.is_empty() {
            let list: Vec<String> = self
                .missing_profiles
                .iter()
                .map(|m| match &m.comm {
                    Some(c) => format!("{} ({c}, {})", m.pid, m.reason),
                    None => format!("{} ({})", m.pid, m.reason),
                })
                .collect();
            s.push_str(&format!(
                "note: not in this report, the profiles of {}\n",
                list.join(", ")
            ));
        }
        s.push_str(&format!("pmu: {}\n", self.pmu));
        s.push_str(&format!("{}\n", self.invisible));
        s
    }

    /// The profile as pretty JSON (with a final newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tid: Option<u64>, site: &str, acq: u64, hold: u64) -> EntryRecord {
        EntryRecord {
            tid,
            lock: "0x10".into(),
            site: site.into(),
            kind: "mutex".into(),
            acquisitions: acq,
            contentions: 1,
            wait_total_ns: 5,
            wait_max_ns: 3,
            hold_count: acq,
            hold_total_ns: hold,
            hold_max_ns: hold,
            wait_min_ns: 1,
            hold_min_ns: hold / acq.max(1),
            owner_changes: 1,
            wait_hist: vec![(2, acq)],
            hold_hist: vec![(3, acq)],
            event_deltas: vec![acq * 2],
            object: None,
            object_offset: None,
            symbol: None,
            symbol_offset: None,
        }
    }

    fn report(segment: u32, entries: Vec<EntryRecord>) -> Report {
        Report {
            version: FORMAT_VERSION,
            pid: 7,
            segment,
            ended_by: Ending::Exit,
            complete: true,
            signal: None,
            program: None,
            elapsed_ns: 10,
            tsc_per_ns: 1.0,
            pmu: "none".into(),
            events: vec!["page-faults".into()],
            events_error: None,
            threads_untracked: 0,
            exited_threads_unlisted: 0,
            exited_overflow_acquisitions: 0,
            threads: Vec::new(),
            entries,
            locks_untracked: 0,
            locks: Vec::new(),
        }
    }

    /// A profile cut short (a process stopped or killed while writing it) leaves the others
    /// readable; read strictly, the directory is refused (CLI probe, session 28: one cut file
    /// lost every process's report).
    #[test]
    fn a_profile_cut_short_is_left_out_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let whole = serde_json::to_string(&report(0, vec![entry(Some(1), "0xa", 3, 1)])).unwrap();
        std::fs::write(dir.path().join("lockprof.7.json"), &whole).unwrap();
        std::fs::write(
            dir.path().join("lockprof.8.json"),
            &whole[..whole.len() / 2],
        )
        .unwrap();
        let (all, cut) = read_all_processes_skipping_cut(dir.path()).unwrap();
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), [7]);
        assert_eq!(cut.len(), 1);
        assert_eq!(cut[0].0, 8);
        assert!(matches!(cut[0].1, ReportError::Parse { .. }));
        assert!(read_all_processes(dir.path()).is_err());
    }

    /// What the counts leave out is said under the table, as it is in JSON: threads beyond the
    /// thread table, events lost to full per-thread tables, processes whose profiles are
    /// missing (the table said nothing; CLI probe, session 28).
    #[test]
    fn the_table_says_what_its_counts_leave_out() {
        let mut r = report(0, vec![entry(Some(1), "0xa", 3, 1)]);
        let clean = aggregate(std::slice::from_ref(&r)).to_table(0, 0);
        assert!(!clean.contains("note:"), "{clean}");
        r.threads_untracked = 3488;
        r.threads = vec![ThreadRecord {
            tid: 1,
            exited: false,
            total_ns: 10,
            free_ns: 10,
            locking_ns: 0,
            held_ns: 0,
            unlocking_ns: 0,
            lock_calls: 2000,
            overflow_events: 1488,
            unmatched_unlocks: 0,
        }];
        let mut p = aggregate(&[r]);
        p.missing_profiles = vec![MissingProfile {
            pid: 42,
            comm: Some("fk".into()),
            reason: "still running".into(),
        }];
        let t = p.to_table(0, 0);
        assert!(t.contains("3488 threads beyond the thread table"), "{t}");
        assert!(t.contains("1488 lock events lost"), "{t}");
        assert!(t.contains("the profiles of 42 (fk, still running)"), "{t}");
        let json: serde_json::Value = serde_json::from_str(&p.to_json().unwrap()).unwrap();
        assert_eq!(json["missing_profiles"][0]["reason"], "still running");
    }

    #[test]
    fn aggregate_merges_threads_and_sites() {
        let r = report(
            0,
            vec![
                entry(Some(1), "0xa", 10, 100),
                entry(Some(2), "0xa", 5, 50),
                entry(None, "0xb", 1, 7),
            ],
        );
        let p = aggregate(&[r]);
        assert_eq!(p.locks.len(), 1);
        let l = &p.locks[0];
        assert_eq!(l.stats.acquisitions, 16);
        assert_eq!(l.stats.contentions, 3);
        assert_eq!(l.stats.hold_ns.max, 100);
        assert_eq!(l.stats.hold_ns.mean, 157 / 16);
        assert_eq!(l.sites.len(), 2);
        let a = l.sites.iter().find(|s| s.site == "0xa").expect("site a");
        assert_eq!(a.stats.acquisitions, 15);
        assert_eq!(p.acquisitions, 16);
    }

    #[test]
    fn images_before_and_after_exec_stay_apart() {
        let mut first = report(0, vec![entry(Some(1), "0xa", 50, 1)]);
        first.ended_by = Ending::Exec;
        let second = report(1, vec![entry(Some(1), "0xa", 30, 1)]);
        let p = aggregate(&[first, second]);
        assert_eq!(p.locks.len(), 2, "same address in two images: two locks");
        assert_eq!(p.acquisitions, 80);
        assert_eq!(p.segments.len(), 2);
        assert_eq!(p.segments[0].ended_by, Ending::Exec);
        assert!(p.to_table(0, 0).contains("1:0x10"));
        // The text names the endings as the JSON does (it printed `Exec`, Rust's name).
        let table = p.to_table(0, 0);
        assert!(
            table.contains("(exec, ") && table.contains("(exit, "),
            "{table}"
        );
        for e in [
            Ending::Exit,
            Ending::Signal,
            Ending::Exec,
            Ending::QuickExit,
        ] {
            assert_eq!(serde_json::to_value(e).unwrap(), e.to_string());
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(parse_file_name("lockprof.12.json"), Some((12, 0)));
        assert_eq!(parse_file_name("lockprof.12.3.json"), Some((12, 3)));
        assert_eq!(parse_file_name("lockprof.x.json"), None);
        assert_eq!(parse_file_name("lockprof.1.2.3.json"), None);
        assert_eq!(parse_file_name("other.json"), None);
    }

    #[test]
    fn unknown_fields_and_other_versions_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = serde_json::to_value(report(0, vec![])).expect("json");
        let mut extra = good.clone();
        extra["surprise"] = 1.into();
        let p = dir.path().join("lockprof.1.json");
        std::fs::write(&p, extra.to_string()).expect("write");
        let e = read_report(&p).expect_err("unknown field").to_string();
        assert!(
            e.contains("surprise") && e.contains("lockprof.1.json"),
            "{e}"
        );
        let mut old = good.clone();
        old["version"] = 1.into();
        std::fs::write(&p, old.to_string()).expect("write");
        let e = read_report(&p).expect_err("old version").to_string();
        assert!(e.contains("version 1"), "{e}");
        std::fs::write(&p, good.to_string()).expect("write");
        std::fs::write(dir.path().join("lockprof.2.json"), good.to_string()).expect("write");
        let f = read_reports_of(dir.path(), Some(1)).expect("read");
        assert_eq!((f.reports.len(), f.other_processes), (1, 1));
    }

    #[test]
    fn bucket_ranges_tile_the_ticks() {
        // Consecutive, non-overlapping, each power of two in two halves.
        let mut next = 0;
        for i in 0..HIST_BUCKETS {
            let (lo, hi) = bucket_ticks(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(hi > lo);
            next = hi;
        }
        assert_eq!(bucket_ticks(2), (2, 3));
        assert_eq!(bucket_ticks(3), (3, 4));
        assert_eq!(bucket_ticks(20), (1024, 1536));
        assert_eq!(bucket_ticks(21), (1536, 2048));
    }

    #[test]
    fn percentiles_come_from_the_histogram_and_stay_within_min_max() {
        let mut e = entry(Some(1), "0xa", 100, 0);
        // 98 waits in bucket 20 ([1024,1536) ticks), 2 in bucket 30 ([32768,49152)); 1 tick/ns.
        e.wait_hist = vec![(20, 98), (30, 2)];
        e.wait_min_ns = 1100;
        e.wait_max_ns = 40000;
        let p = aggregate(&[report(0, vec![e])]);
        let w = &p.locks[0].stats.wait_ns;
        assert_eq!(w.p50, 1280, "midpoint of [1024,1536)");
        assert_eq!(w.p99, 40000, "midpoint 40960 clamped to the max");
        assert_eq!(w.min, 1100);
    }

    #[test]
    fn minima_merge_over_threads_and_ignore_empty_entries() {
        let mut a = entry(Some(1), "0xa", 3, 30);
        a.wait_min_ns = 7;
        let mut b = entry(Some(2), "0xa", 2, 20);
        b.wait_min_ns = 4;
        let mut none = entry(Some(3), "0xa", 0, 0);
        none.wait_min_ns = 0;
        none.hold_count = 0;
        let p = aggregate(&[report(0, vec![a, none, b])]);
        let st = &p.locks[0].stats;
        assert_eq!(st.wait_ns.min, 4);
        assert_eq!(st.hold_ns.min, 10);
        assert_eq!(st.owner_changes, 3);
        assert_eq!(
            st.event_deltas,
            vec![10],
            "2 per acquisition, summed over threads"
        );
        let t = p.to_table(0, 0);
        assert!(
            t.contains("counter deltas while held") && t.contains("page-faults"),
            "{t}"
        );
        // Counts carry no unit; the software clocks say theirs.
        assert!(!t.contains("page-faults ns"), "{t}");
        assert!(is_clock_event("task-clock") && is_clock_event("cpu-clock:u"));
        assert!(!is_clock_event("page-faults") && !is_clock_event("cycles"));
    }

    #[test]
    fn sort_by_any_column_and_filter() {
        let mut x = entry(Some(1), "0xa", 10, 100);
        x.lock = "0x1".into();
        x.contentions = 0;
        let mut y = entry(Some(1), "0xb", 2, 900);
        y.lock = "0x2".into();
        y.contentions = 2;
        let mut p = aggregate(&[report(0, vec![x, y])]);
        p.sort("count".parse().expect("key"));
        assert_eq!(p.locks[0].lock, "0x1");
        p.sort("hold-tot".parse().expect("key"));
        assert_eq!(p.locks[0].lock, "0x2");
        for (name, _) in SORT_KEYS {
            assert!(name.parse::<SortKey>().is_ok(), "{name}");
        }
        let e = "bogus".parse::<SortKey>().expect_err("unknown");
        assert!(e.contains("wait-p99"), "{e}");
        p.filter(&Filter {
            min_contentions: 1,
            ..Filter::default()
        });
        assert_eq!(p.locks.len(), 1);
        assert_eq!(p.locks_filtered_out, 1);
        let t = p.to_table(0, 0);
        assert!(
            t.contains("2 locks,") && t.contains("1 locks below the --min-*"),
            "{t}"
        );
    }

    #[test]
    fn condition_variables_get_their_own_table() {
        let mut w = entry(Some(1), "0xa", 5, 0);
        w.kind = "cond-wait".into();
        w.lock = "0x30".into();
        w.contentions = 2;
        let mut sig = entry(Some(2), "0xb", 4, 0);
        sig.kind = "cond-signal".into();
        sig.lock = "0x30".into();
        let mut bc = entry(Some(2), "0xc", 1, 0);
        bc.kind = "cond-broadcast".into();
        bc.lock = "0x30".into();
        let m = entry(Some(1), "0xd", 9, 1);
        let p = aggregate(&[report(0, vec![w, sig, bc, m])]);
        assert_eq!(p.locks.len(), 1, "only the mutex in the lock table");
        assert_eq!(p.acquisitions, 9);
        assert_eq!(p.conds.len(), 1);
        let c = &p.conds[0];
        assert_eq!((c.waits, c.timeouts, c.signals, c.broadcasts), (5, 2, 4, 1));
        assert_eq!(c.sites.len(), 3);
        assert_eq!(c.sites[0].kind, "cond-wait");
        assert!(p.to_table(0, 0).contains("condition variables"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("250"), Ok(250));
        assert_eq!(parse_duration_ns("10us"), Ok(10_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("").is_err());
        assert!(parse_duration_ns("1e300s").is_err());
    }

    #[test]
    fn processes_are_summarized_and_listed() {
        let a = report(0, vec![entry(Some(1), "0xa", 10, 1)]);
        let mut b = report(0, vec![entry(Some(2), "0xa", 7, 1)]);
        b.pid = 8;
        let mut p = aggregate(std::slice::from_ref(&a));
        let mut sa = summarize(7, &[a]);
        sa.shown = true;
        p.processes = vec![sa, summarize(8, &[b])];
        assert_eq!(p.processes[1].acquisitions, 7);
        let t = p.to_table(0, 0);
        assert!(
            t.contains("processes (2;") && t.contains("*   0        7"),
            "{t}"
        );
    }

    proptest::proptest! {
        /// Parsing any text as a report never panics.
        #[test]
        fn parsing_is_total(text in ".{0,200}") {
            let _ = serde_json::from_str::<Report>(&text);
        }

        /// Parsing any text as a duration or a sort column never panics.
        #[test]
        fn option_parsing_is_total(text in ".{0,40}") {
            let _ = parse_duration_ns(&text);
            let _ = text.parse::<SortKey>();
        }

        /// Percentiles lie within [min, max] and p50 <= p99.
        #[test]
        fn percentiles_are_ordered(counts in proptest::collection::vec((0usize..HIST_BUCKETS, 1u64..1000), 1..20)) {
            let mut h = HistNs::default();
            h.add(&counts, 1.0);
            let (p50, p99) = (h.quantile(0.5, 3, 1 << 40), h.quantile(0.99, 3, 1 << 40));
            proptest::prop_assert!(3 <= p50 && p50 <= p99 && p99 <= 1 << 40);
        }
    }
}
