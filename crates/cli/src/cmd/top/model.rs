//! The task table's model: one [`Snapshot`] per interval built from an observation, and
//! sorting by any column.

use anyhow::{bail, Result};
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_core::metric;
use counterpoint_core::observation::Observation;
use counterpoint_host::machine::CounterSources;
use std::cmp::Ordering as CmpOrdering;

/// A sortable column of the task table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SortKey {
    Pid,
    Comm,
    Cpu,
    Cs,
    Migrations,
    Ipc,
    Mpki,
    Bandwidth,
}

impl SortKey {
    pub(super) const ALL: [SortKey; 8] = [
        SortKey::Pid,
        SortKey::Comm,
        SortKey::Cpu,
        SortKey::Cs,
        SortKey::Migrations,
        SortKey::Ipc,
        SortKey::Mpki,
        SortKey::Bandwidth,
    ];

    pub(super) fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pid" => SortKey::Pid,
            "comm" => SortKey::Comm,
            "cpu" => SortKey::Cpu,
            "cs" => SortKey::Cs,
            "migrations" | "mig" => SortKey::Migrations,
            "ipc" => SortKey::Ipc,
            "mpki" => SortKey::Mpki,
            "bw" | "bandwidth" => SortKey::Bandwidth,
            other => {
                bail!("--sort {other:?}: expected pid, comm, cpu, cs, migrations, ipc, mpki or bw")
            }
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            SortKey::Pid => "pid",
            SortKey::Comm => "comm",
            SortKey::Cpu => "cpu",
            SortKey::Cs => "cs",
            SortKey::Migrations => "migrations",
            SortKey::Ipc => "ipc",
            SortKey::Mpki => "mpki",
            SortKey::Bandwidth => "bw",
        }
    }

    pub(super) fn header(self) -> &'static str {
        match self {
            SortKey::Pid => "PID",
            SortKey::Comm => "COMM",
            SortKey::Cpu => "CPU%",
            SortKey::Cs => "CS/s",
            SortKey::Migrations => "MIG/s",
            SortKey::Ipc => "IPC",
            SortKey::Mpki => "LLC MPKI",
            SortKey::Bandwidth => "MEM BW",
        }
    }

    pub(super) fn step(self, by: isize) -> Self {
        let n = Self::ALL.len() as isize;
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as isize;
        Self::ALL[((i + by).rem_euclid(n)) as usize]
    }

    /// IPC, LLC MPKI and MEM BW: counted by a hardware PMU only.
    pub(super) fn is_hardware(self) -> bool {
        matches!(self, SortKey::Ipc | SortKey::Mpki | SortKey::Bandwidth)
    }

    /// Whether the column is on screen: the hardware ones are hidden without a PMU.
    pub(super) fn shown(self, pmu: bool) -> bool {
        pmu || !self.is_hardware()
    }

    /// The next column on screen `by` steps away (wrapping), skipping hidden ones, so the
    /// rows are never ordered by a value nobody sees. PID is always shown: this ends.
    pub(super) fn step_shown(self, by: isize, pmu: bool) -> Self {
        let mut k = self.step(by);
        while !k.shown(pmu) {
            k = k.step(by.signum());
        }
        k
    }

    /// How many columns are on screen (the digit keys `1..=n` pick them).
    pub(super) fn shown_count(pmu: bool) -> usize {
        Self::ALL.iter().filter(|k| k.shown(pmu)).count()
    }
}

/// One task's view of one interval.
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub(super) pid: u64,
    pub(super) name: String,
    /// 0 when not counted (see `counted`), so that sorting and totals still work.
    pub(super) cpu_pct: f64,
    pub(super) cs_per_s: f64,
    /// Whether the task's CPU time was counted over the interval: not when its counters were
    /// (re)opened or failed to read in it (a broker that stopped), shown as "-", not 0.0.
    pub(super) counted: bool,
    pub(super) mig_per_s: Option<f64>,
    pub(super) ipc: Option<f64>,
    pub(super) llc_mpki: Option<f64>,
    pub(super) bw_bytes_per_s: Option<f64>,
    pub(super) counted_fraction: f64,
    pub(super) affinity: CpuSet,
    pub(super) last_cpu: Option<u32>,
    /// The dominant SuperFunction and its share of the samples (`--heatmaps`; `None`: off).
    pub(super) superfn: Option<String>,
    /// Per thread with samples: (tid, its dominant SuperFunction and share).
    pub(super) thread_superfns: Vec<(u64, String)>,
}

/// One CPU: how busy, which target tasks last ran there (and used > 1 % CPU), which are pinned
/// to a set that includes it.
#[derive(Clone, Debug)]
pub(super) struct CpuLine {
    pub(super) cpu: u32,
    pub(super) busy_fraction: f64,
    pub(super) running: Vec<(u64, String)>,
    pub(super) pinned: Vec<(u64, String)>,
}

/// Everything one refresh shows.
#[derive(Clone, Debug)]
pub(super) struct Snapshot {
    pub(super) interval_ns: u64,
    pub(super) rows: Vec<Row>,
    pub(super) cpus: Vec<CpuLine>,
    /// Whether hardware events were counted (IPC etc. available).
    pub(super) pmu: bool,
    /// perf_event or /proc, per thread.
    pub(super) sources: CounterSources,
    /// With `--heatmaps`: how the code is sampled (period, syscalls visible or why not);
    /// `None`: sampling off.
    pub(super) code_note: Option<String>,
}

/// Running above this share of a CPU in the interval counts as "running on" its last CPU.
pub(super) const RUNNING_PCT: f64 = 1.0;

pub(super) fn snapshot(
    obs: &Observation,
    online: &CpuSet,
    pmu: bool,
    sources: CounterSources,
) -> Snapshot {
    let (ipc, mpki, bw) = (metric::ipc(), metric::llc_mpki(), metric::mem_bandwidth());
    // Each task's rates over its own sample's interval (the time since its last read), not
    // the observation's: the two differ by however long the reads were delayed.
    let secs =
        |t: &counterpoint_core::TaskObservation| (t.sample.interval_ns as f64 / 1e9).max(1e-9);
    let rows: Vec<Row> = obs
        .tasks
        .iter()
        .map(|t| (t, t.sample.get(event::TASK_CLOCK).is_some()))
        .map(|(t, counted)| Row {
            pid: t.id.0,
            name: t.name.clone(),
            cpu_pct: t.sample.get(event::TASK_CLOCK).unwrap_or(0.0) / secs(t) / 1e9 * 100.0,
            cs_per_s: t.sample.get(event::CONTEXT_SWITCHES).unwrap_or(0.0) / secs(t),
            counted,
            mig_per_s: t.sample.get(event::CPU_MIGRATIONS).map(|m| m / secs(t)),
            ipc: ipc.eval_sample(&t.sample),
            llc_mpki: mpki.eval_sample(&t.sample),
            bw_bytes_per_s: bw.eval_sample(&t.sample),
            // An empty sample's fraction is 1 (nothing multiplexed): not counted is 0.
            counted_fraction: if counted {
                t.sample.counted_fraction()
            } else {
                0.0
            },
            affinity: t.affinity.clone(),
            last_cpu: t.cpu,
            superfn: t.code.as_ref().map(|c| c.total.dominant_label()),
            thread_superfns: t
                .code
                .as_ref()
                .map(|c| {
                    c.threads
                        .iter()
                        .filter(|th| th.code.samples() > 0)
                        .map(|th| (th.tid, th.code.dominant_label()))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    let cpus = obs
        .cpus
        .iter()
        .map(|c| {
            let mut running: Vec<&Row> = rows
                .iter()
                .filter(|r| r.last_cpu == Some(c.cpu) && r.cpu_pct > RUNNING_PCT)
                .collect();
            running.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
            let pinned = rows
                .iter()
                .filter(|r| r.affinity != *online && r.affinity.contains(c.cpu))
                .map(|r| (r.pid, r.name.clone()))
                .collect();
            CpuLine {
                cpu: c.cpu,
                busy_fraction: c.busy_fraction,
                running: running.iter().map(|r| (r.pid, r.name.clone())).collect(),
                pinned,
            }
        })
        .collect();
    Snapshot {
        interval_ns: obs.interval_ns,
        rows,
        cpus,
        pmu,
        sources,
        code_note: None,
    }
}

/// `None` sorts last whatever the direction.
pub(super) fn cmp_opt(a: Option<f64>, b: Option<f64>, descending: bool) -> CmpOrdering {
    match (a, b) {
        (Some(x), Some(y)) if descending => y.total_cmp(&x),
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => CmpOrdering::Less,
        (None, Some(_)) => CmpOrdering::Greater,
        (None, None) => CmpOrdering::Equal,
    }
}

/// Sort rows: pid and comm ascending, rates and ratios descending; `reverse` flips that.
/// Ties are broken by pid so the order is stable between refreshes.
pub(super) fn sort_rows(rows: &mut [Row], key: SortKey, reverse: bool) {
    let natural_desc = !matches!(key, SortKey::Pid | SortKey::Comm);
    let desc = natural_desc != reverse;
    rows.sort_by(|a, b| {
        let o = match key {
            SortKey::Pid => CmpOrdering::Equal,
            SortKey::Comm => a.name.cmp(&b.name),
            SortKey::Cpu => cmp_opt(Some(a.cpu_pct), Some(b.cpu_pct), desc),
            SortKey::Cs => cmp_opt(Some(a.cs_per_s), Some(b.cs_per_s), desc),
            SortKey::Migrations => cmp_opt(a.mig_per_s, b.mig_per_s, desc),
            SortKey::Ipc => cmp_opt(a.ipc, b.ipc, desc),
            SortKey::Mpki => cmp_opt(a.llc_mpki, b.llc_mpki, desc),
            SortKey::Bandwidth => cmp_opt(a.bw_bytes_per_s, b.bw_bytes_per_s, desc),
        };
        let o = if key == SortKey::Comm && desc {
            o.reverse()
        } else {
            o
        };
        let by_pid = if key == SortKey::Pid && desc {
            b.pid.cmp(&a.pid)
        } else {
            a.pid.cmp(&b.pid)
        };
        o.then(by_pid)
    });
}
