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
//! let text = r#"{"version":2,"pid":42,"segment":0,"ended_by":"exit","complete":true,
//!   "signal":null,"program":"/usr/bin/demo","elapsed_ns":1000000,"tsc_per_ns":2.5,
//!   "pmu":"none: no hardware PMU on this machine","threads_untracked":0,
//!   "exited_threads_unlisted":0,"exited_overflow_acquisitions":0,
//!   "threads":[{"tid":42,"exited":false,"total_ns":1000000,"free_ns":900000,
//!     "locking_ns":50000,"held_ns":40000,"unlocking_ns":10000,"lock_calls":3,
//!     "overflow_events":0,"unmatched_unlocks":0}],
//!   "entries":[
//!     {"tid":42,"lock":"0x10","site":"0xa","kind":"mutex","acquisitions":2,"contentions":1,
//!      "wait_total_ns":30,"wait_max_ns":20,"hold_count":2,"hold_total_ns":40,"hold_max_ns":25},
//!     {"tid":null,"lock":"0x10","site":"0xb","kind":"mutex","acquisitions":1,"contentions":0,
//!      "wait_total_ns":5,"wait_max_ns":5,"hold_count":1,"hold_total_ns":9,"hold_max_ns":9}]}"#;
//! let report: Report = serde_json::from_str(text)?;
//! let profile = aggregate(&[report]);
//! assert_eq!(profile.locks.len(), 1);
//! let lock = &profile.locks[0];
//! assert_eq!((lock.stats.acquisitions, lock.stats.contentions), (3, 1));
//! assert_eq!(lock.stats.hold_ns.max, 25);
//! assert_eq!(lock.sites.len(), 2);
//! assert!(profile.to_table(20).contains("3 acquisitions"));
//! # Ok::<(), serde_json::Error>(())
//! ```

#![warn(missing_docs)]

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The report format version this crate reads.
pub const FORMAT_VERSION: u32 = 2;

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
    /// Longest.
    pub max: u64,
}

/// Statistics of a lock or one of its call sites, merged over threads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Acquisitions (waits for `cond-wait`).
    pub acquisitions: u64,
    /// Contended acquisitions (timed-out waits for `cond-wait`).
    pub contentions: u64,
    /// Wait times.
    pub wait_ns: WaitNs,
    /// Hold times.
    pub hold_ns: HoldNs,
}

impl Stats {
    fn add(&mut self, e: &EntryRecord) {
        self.acquisitions += e.acquisitions;
        self.contentions += e.contentions;
        self.wait_ns.total = self.wait_ns.total.saturating_add(e.wait_total_ns);
        self.wait_ns.max = self.wait_ns.max.max(e.wait_max_ns);
        self.hold_ns.count += e.hold_count;
        self.hold_ns.total = self.hold_ns.total.saturating_add(e.hold_total_ns);
        self.hold_ns.max = self.hold_ns.max.max(e.hold_max_ns);
    }
    fn finish(&mut self) {
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

/// One call site of a lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteProfile {
    /// Return address, hex.
    pub site: String,
    /// Human name (symbol+offset, function (file:line), object+offset, or the address), set by
    /// [`Profile::symbolize`].
    pub name: Option<String>,
    /// As the library found it with `dladdr`.
    #[serde(skip)]
    pub dl: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    /// Merged statistics.
    #[serde(flatten)]
    pub stats: Stats,
}

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
    /// Threads not profiled (no free slot).
    pub threads_untracked: u64,
    /// The images (more than one after `exec`).
    pub segments: Vec<Segment>,
    /// Reports of other processes (children) found beside this one.
    pub other_process_reports: usize,
    /// Acquisitions over all locks.
    pub acquisitions: u64,
    /// Contended acquisitions over all locks.
    pub contentions: u64,
    /// LiMiT split per thread, over the images.
    pub threads: Vec<ThreadRecord>,
    /// Per lock, most wait first.
    pub locks: Vec<LockProfile>,
}

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
    let io = |source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut found = Found::default();
    let mut mine = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((p, seg)) = parse_file_name(&name) else {
            continue;
        };
        if pid.is_some_and(|want| want != p) {
            found.other_processes += 1;
            continue;
        }
        mine.push((p, seg, e.path()));
    }
    mine.sort();
    for (_, _, path) in mine {
        found.reports.push(read_report(&path)?);
    }
    Ok(found)
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

/// Merge reports (the segments of one process, in order) per (segment, lock, kind), then per
/// call site; locks sorted by wait time, then acquisitions.
pub fn aggregate(reports: &[Report]) -> Profile {
    let mut map: BTreeMap<(u32, String, String), LockProfile> = BTreeMap::new();
    let mut sites: BTreeMap<(u32, String, String, String), SiteProfile> = BTreeMap::new();
    for r in reports {
        for e in &r.entries {
            let key = (r.segment, e.lock.clone(), e.kind.clone());
            map.entry(key)
                .or_insert_with(|| LockProfile {
                    lock: e.lock.clone(),
                    kind: e.kind.clone(),
                    segment: r.segment,
                    stats: Stats::default(),
                    sites: Vec::new(),
                })
                .stats
                .add(e);
            sites
                .entry((r.segment, e.lock.clone(), e.kind.clone(), e.site.clone()))
                .or_insert_with(|| SiteProfile {
                    site: e.site.clone(),
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
                .add(e);
        }
    }
    for ((seg, lock, kind, _), mut s) in sites {
        s.stats.finish();
        if let Some(l) = map.get_mut(&(seg, lock, kind)) {
            l.sites.push(s);
        }
    }
    let mut locks: Vec<LockProfile> = map.into_values().collect();
    for l in &mut locks {
        l.stats.finish();
        l.sites.sort_by(|a, b| {
            (b.stats.wait_ns.total, b.stats.acquisitions)
                .cmp(&(a.stats.wait_ns.total, a.stats.acquisitions))
                .then(a.site.cmp(&b.site))
        });
    }
    locks.sort_by(|a, b| {
        (b.stats.wait_ns.total, b.stats.acquisitions)
            .cmp(&(a.stats.wait_ns.total, a.stats.acquisitions))
            .then((a.segment, &a.lock, &a.kind).cmp(&(b.segment, &b.lock, &b.kind)))
    });
    let last = reports.last();
    Profile {
        pid: last.map_or(0, |r| r.pid),
        complete: last.map_or(true, |r| r.complete),
        signal: last.and_then(|r| r.signal),
        elapsed_ns: reports.iter().map(|r| r.elapsed_ns).sum(),
        pmu: last.map(|r| r.pmu.clone()).unwrap_or_default(),
        threads_untracked: reports.iter().map(|r| r.threads_untracked).sum(),
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
        acquisitions: locks.iter().map(|l| l.stats.acquisitions).sum(),
        contentions: locks.iter().map(|l| l.stats.contentions).sum(),
        threads: reports.iter().flat_map(|r| r.threads.clone()).collect(),
        locks,
    }
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

impl Profile {
    /// Name every call site: the dynamic symbol `dladdr` found at exit, else `addr2line` on the
    /// object (static functions of the executable are not in the dynamic symbol table), else
    /// the object and offset, else the raw address (reports written from a signal handler).
    pub fn symbolize(&mut self) {
        let mut by_object: BTreeMap<String, Vec<(usize, usize, u64)>> = BTreeMap::new();
        for (li, l) in self.locks.iter_mut().enumerate() {
            for (si, s) in l.sites.iter_mut().enumerate() {
                let (sym, sym_off, obj, obj_off) = &s.dl;
                s.name = Some(match (sym, sym_off) {
                    (Some(n), Some(off)) => format!("{n}+{off}"),
                    _ => match (obj, obj_off) {
                        (Some(o), Some(off)) => {
                            if let Ok(v) = u64::from_str_radix(off.trim_start_matches("0x"), 16) {
                                by_object.entry(o.clone()).or_default().push((li, si, v));
                            }
                            format!("{}+{off}", short(o))
                        }
                        _ => s.site.clone(),
                    },
                });
            }
        }
        for (object, sites) in by_object {
            if !Path::new(&object).is_file() {
                continue;
            }
            // Return addresses point after the call: look up the byte before.
            let out = Command::new("addr2line")
                .args(["-f", "-C", "-e"])
                .arg(&object)
                .args(
                    sites
                        .iter()
                        .map(|(_, _, off)| format!("{:#x}", off.saturating_sub(1))),
                )
                .stderr(Stdio::null())
                .output();
            let Ok(out) = out else { continue };
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().collect();
            for (i, (li, si, _)) in sites.iter().enumerate() {
                let (Some(func), Some(loc)) = (lines.get(2 * i), lines.get(2 * i + 1)) else {
                    break;
                };
                // Without debug information addr2line names the nearest *exported* symbol,
                // which for internal functions is wrong: keep object+offset then.
                if *func != "??" && !loc.starts_with("??") {
                    let loc = loc.rsplit('/').next().unwrap_or(loc);
                    if let Some(s) = self.locks.get_mut(*li).and_then(|l| l.sites.get_mut(*si)) {
                        s.name = Some(format!("{func} ({loc})"));
                    }
                }
            }
        }
    }

    /// A lockstat-style table: the `top` locks by wait time (all with 0), their call sites, the
    /// LiMiT split per thread, and what the profile cannot say.
    pub fn to_table(&self, top: usize) -> String {
        let mut s = String::new();
        let ending = match (self.complete, self.signal) {
            (true, _) => "exited".to_string(),
            (false, Some(sig)) => format!("died on signal {sig}"),
            (false, None) => "died".to_string(),
        };
        s.push_str(&format!(
            "lockprof: pid {} {ending}, {} locks, {} acquisitions, {} contended; elapsed {}\n",
            self.pid,
            self.locks.len(),
            self.acquisitions,
            self.contentions,
            fmt_ns(self.elapsed_ns),
        ));
        if self.segments.len() > 1 {
            for seg in &self.segments {
                s.push_str(&format!(
                    "image {}: {} ({:?}, {})\n",
                    seg.segment,
                    seg.program.as_deref().unwrap_or("?"),
                    seg.ended_by,
                    fmt_ns(seg.elapsed_ns)
                ));
            }
        }
        s.push_str(&format!(
            "{:>10} {:>8} {:>10} {:>10} {:>10} {:>10}  {:<12} {:<16} caller\n",
            "count", "cont", "wait-tot", "wait-max", "hold-avg", "hold-max", "kind", "lock"
        ));
        let hold = |st: &Stats, v: u64| {
            if st.hold_ns.count == 0 {
                "-".to_string()
            } else {
                fmt_ns(v)
            }
        };
        let row = |st: &Stats, kind: &str, lock: &str, caller: &str| {
            format!(
                "{:>10} {:>8} {:>10} {:>10} {:>10} {:>10}  {:<12} {:<16} {caller}\n",
                st.acquisitions,
                st.contentions,
                fmt_ns(st.wait_ns.total),
                fmt_ns(st.wait_ns.max),
                hold(st, st.hold_ns.mean),
                hold(st, st.hold_ns.max),
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
        for l in &self.locks[..n] {
            let name = |site: &SiteProfile| site.name.clone().unwrap_or_else(|| site.site.clone());
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
        }
        if n < self.locks.len() {
            s.push_str(&format!(
                "({} more locks; --top 0 shows all)\n",
                self.locks.len() - n
            ));
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
        s.push_str(&format!("pmu: {}\n", self.pmu));
        if self.other_process_reports > 0 {
            s.push_str(&format!(
                "note: {} other process(es) (children) also wrote profiles; shown: the main process only\n",
                self.other_process_reports
            ));
        }
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
            threads_untracked: 0,
            exited_threads_unlisted: 0,
            exited_overflow_acquisitions: 0,
            threads: Vec::new(),
            entries,
        }
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
        assert!(p.to_table(0).contains("1:0x10"));
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

    proptest::proptest! {
        /// Parsing any text as a report never panics.
        #[test]
        fn parsing_is_total(text in ".{0,200}") {
            let _ = serde_json::from_str::<Report>(&text);
        }
    }
}
