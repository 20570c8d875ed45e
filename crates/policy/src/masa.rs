//! `masa`: Micro-Architectural Scheduling Assist (Nakajima & Pallipadi, WIESS'02, §4), the
//! user-level daemon that balances execution-resource load between processor packages of an
//! SMT (Hyper-Threading) machine by swapping processes with `sched_setaffinity`.
//!
//! Every step of the paper's §4.2 program, with its parameters:
//! 1. read the counters for the last sampling period ([`MasaParams::period_ns`], 5 s);
//! 2. compute the multi-dimensional **process load** (events per second per load metric), the
//!    **CPU load** (the per-CPU counters where the machine reports them, otherwise the sum of
//!    the loads of the processes on that CPU) and the **package load** (sum of its CPUs);
//! 3. the **outstanding-process check**: a process is outstanding if its load exceeds
//!    `(sum of package loads) / (4 x N)` (N = number of CPUs; 4 =
//!    [`MasaParams::outstanding_divisor`]); the check is applied to every load dimension and to
//!    the activity dimension (instructions per second), since an integer program loads neither
//!    FP nor L2 yet keeps a logical CPU busy. If within a package one CPU has more than one
//!    outstanding process and its sibling none, one of them is migrated to the sibling and the
//!    period ends;
//! 4. otherwise, for each load metric in **priority order** (from load calibration):
//!    a. interference: does any package load exceed the metric's **execution-resource limit**?
//!    If not, next metric;
//!    b. find the packages with the highest (`max_load`) and lowest (`min_load`) load;
//!    c. `imbalance = (max_load - min_load) / 2`; below 25 % ([`MasaParams::imbalance_threshold`],
//!    taken relative to `max_load`) there is no imbalance: next metric;
//!    d. choose the swap (a process of the max package with one of the min package, or a
//!    migration to an idle CPU there) whose projected loads equalize the two packages best,
//!    among those whose projected package loads exceed no execution-resource limit of any
//!    metric; pin the two processes to each other's CPU. One swap per period.
//!
//! **Load calibration** ([`Calibration`], input data): for each metric a probe program is run
//! alone on a package (solo) and as two copies on one package's two logical CPUs (coupled).
//! The execution-resource limit is the solo rate (events per second; the paper's example is
//! 46925899 / 244 = 192319 L2 misses/s). The priority is ΔT/ΔL, the slowdown per unit of
//! added load. The paper's table with the raw numbers is not in the seed text; because FP
//! operations and L2 misses differ in rate by orders of magnitude, ΔT and ΔL are taken relative
//! to the solo run (ΔT/T_solo over ΔL/L_solo), which makes the ratio unit-free and comparable
//! across metrics (the paper's example ratio between the two metrics is 1.03).
//!
//! **Log-only mode** ([`MasaParams::log_only`]): every decision is made and logged, none is
//! applied. Swap counts per metric are kept either way ([`Masa::swap_counts`]).

use crate::signal;
use crate::tree::MachineTree;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A MASA load metric: one event counted per process and per CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadMetric {
    /// L2 (last-level) cache misses: the cache-related load metric.
    L2Misses,
    /// Floating-point uops retired: load on the FP move and execute units.
    FpUops,
    /// Memory-bus transactions: the bus-activity load metric.
    BusTransactions,
}

impl LoadMetric {
    /// Every metric.
    pub const ALL: [LoadMetric; 3] = [
        LoadMetric::L2Misses,
        LoadMetric::FpUops,
        LoadMetric::BusTransactions,
    ];
    /// The metric's name in tables and JSON (`l2_misses`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LoadMetric::L2Misses => "l2_misses",
            LoadMetric::FpUops => "fp_uops",
            LoadMetric::BusTransactions => "bus_transactions",
        }
    }
    /// The canonical event that counts it.
    pub fn event(self) -> &'static str {
        match self {
            LoadMetric::L2Misses => event::CACHE_MISSES,
            LoadMetric::FpUops => event::FP_OPS,
            LoadMetric::BusTransactions => event::MEM_TRANSACTIONS,
        }
    }
    /// The metric named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One row of the load-calibration table: a probe program solo and coupled on one package.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationEntry {
    /// The metric the probe loads.
    pub metric: LoadMetric,
    /// The probe program (the paper: 177.mesa for FP, 197.parser for L2C).
    pub probe: String,
    /// Time for one copy to complete alone on a package (the other package idle).
    pub solo_time_s: f64,
    /// Time for each of two copies bound to one package's two logical CPUs.
    pub coupled_time_s: f64,
    /// Package events per second during the solo run.
    pub solo_events_per_s: f64,
    /// Package events per second during the coupled run (both copies).
    pub coupled_events_per_s: f64,
}

impl CalibrationEntry {
    /// A row from probes run for a fixed *time* (a host's `calibrate`) rather than a fixed amount
    /// of work: the work is what the solo run does in one second, so `solo_time_s` = 1 and
    /// `coupled_time_s` = solo work rate / coupled work rate (per copy). Event rates are the
    /// package's (summed over its CPUs) in each run.
    pub fn from_rates(
        metric: LoadMetric,
        probe: &str,
        solo_units_per_s: f64,
        coupled_units_per_s: f64,
        solo_events_per_s: f64,
        coupled_events_per_s: f64,
    ) -> Self {
        Self {
            metric,
            probe: probe.to_string(),
            solo_time_s: 1.0,
            coupled_time_s: if coupled_units_per_s > 0.0 {
                solo_units_per_s / coupled_units_per_s
            } else {
                f64::INFINITY
            },
            solo_events_per_s,
            coupled_events_per_s,
        }
    }
    /// The execution-resource limit: the solo rate.
    pub fn limit_per_s(&self) -> f64 {
        self.solo_events_per_s
    }
    /// ΔT/ΔL with both deltas relative to the solo run.
    pub fn impact(&self) -> Result<f64, CalibrationError> {
        let bad = |why: &str| CalibrationError::Invalid {
            metric: self.metric.name(),
            why: why.to_string(),
        };
        if !(self.solo_time_s > 0.0 && self.solo_events_per_s > 0.0) {
            return Err(bad("solo time and solo rate must be positive"));
        }
        if !(self.coupled_time_s.is_finite() && self.coupled_events_per_s.is_finite()) {
            return Err(bad("coupled time and rate must be finite"));
        }
        let dt = (self.coupled_time_s - self.solo_time_s) / self.solo_time_s;
        let dl = (self.coupled_events_per_s - self.solo_events_per_s) / self.solo_events_per_s;
        if dl <= 0.0 {
            return Err(bad(
                "the coupled run did not raise the package load (ΔL <= 0)",
            ));
        }
        Ok(dt / dl)
    }
}

/// Why a calibration table cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrationError {
    /// A row whose numbers cannot give an impact or a limit.
    #[error("calibration for {metric}: {why}")]
    Invalid {
        /// The metric of the row.
        metric: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A metric listed twice.
    #[error("calibration table lists {0} twice")]
    Duplicate(&'static str),
    /// No rows.
    #[error("calibration table is empty")]
    Empty,
}

/// The load-calibration table (input data, measured on the target machine).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// One row per metric.
    pub entries: Vec<CalibrationEntry>,
}

/// A metric with its calibrated priority and limit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankedMetric {
    /// The metric.
    pub metric: LoadMetric,
    /// ΔT/ΔL (relative); higher is checked first.
    pub impact: f64,
    /// Execution-resource limit in events per second; `None` = unknown (never "exceeded"
    /// check is skipped and only the imbalance test applies).
    pub limit_per_s: Option<f64>,
}

impl Calibration {
    /// Metrics in priority order (descending ΔT/ΔL; ties by name).
    pub fn rank(&self) -> Result<Vec<RankedMetric>, CalibrationError> {
        if self.entries.is_empty() {
            return Err(CalibrationError::Empty);
        }
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for e in &self.entries {
            if seen.contains(&e.metric) {
                return Err(CalibrationError::Duplicate(e.metric.name()));
            }
            seen.push(e.metric);
            out.push(RankedMetric {
                metric: e.metric,
                impact: e.impact()?,
                limit_per_s: Some(e.limit_per_s()),
            });
        }
        out.sort_by(|a, b| b.impact.total_cmp(&a.impact).then(a.metric.cmp(&b.metric)));
        Ok(out)
    }

    /// What the paper itself gives for its dual Xeon: the L2C limit 46925899/244 = 192319
    /// misses/s and L2 misses ranked above FP uops (ratio 1.03). The FP limit is not in the
    /// text, so FP is balanced by the imbalance test alone. Used when no table is supplied.
    pub fn paper_xeon() -> Vec<RankedMetric> {
        vec![
            RankedMetric {
                metric: LoadMetric::L2Misses,
                impact: 1.03,
                limit_per_s: Some(46_925_899.0 / 244.0),
            },
            RankedMetric {
                metric: LoadMetric::FpUops,
                impact: 1.0,
                limit_per_s: None,
            },
        ]
    }
}

/// How step 4d's "projected load does not exceed the execution resource limit for every
/// execution resource" is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitCheck {
    /// Literally: after the swap both packages are within every limit. When the machine's
    /// total load of a metric exceeds twice its limit no swap can ever pass.
    Strict,
    /// The check's purpose (avoid fluctuations): a swap may not push either package above a
    /// limit beyond what the more loaded of the two already carries, for any metric; it may
    /// reduce an existing excess without removing it.
    NoNewExcess,
    /// Only the metric being balanced is checked against its own limit (other resources are
    /// ignored).
    OwnMetric,
}

/// MASA's parameters, named as in the paper.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasaParams {
    /// Sampling period ("5 sec. by default").
    pub period_ns: u64,
    /// Imbalance threshold (25 %).
    pub imbalance_threshold: f64,
    /// The "4" in `(sum of package loads) / (4 x N)`.
    pub outstanding_divisor: f64,
    /// Only log decisions ("migration can be suppressed by a command option").
    pub log_only: bool,
    /// Reading of the limit check in step 4d.
    pub limit_check: LimitCheck,
}

impl Default for MasaParams {
    fn default() -> Self {
        Self {
            period_ns: 5_000_000_000,
            imbalance_threshold: 0.25,
            outstanding_divisor: 4.0,
            log_only: false,
            limit_check: LimitCheck::Strict,
        }
    }
}

/// One decision MASA made.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MasaEvent {
    /// Step 3: an outstanding process moved to an idle sibling.
    Migrate {
        /// When it was decided.
        time_ns: u64,
        /// The outstanding process.
        task: TaskId,
        /// Where it ran.
        from_cpu: CpuId,
        /// The idle sibling.
        to_cpu: CpuId,
        /// False in log-only mode.
        applied: bool,
    },
    /// Step 4d: a swap between the max- and min-loaded packages for one metric.
    Swap {
        /// When it was decided.
        time_ns: u64,
        /// The metric whose imbalance it corrects.
        metric: LoadMetric,
        /// The process moved off the max-loaded package.
        a: TaskId,
        /// `None` when `a` moved to an idle CPU (a migration expressed as a swap).
        b: Option<TaskId>,
        /// Load of the max-loaded package before the swap (events per second).
        max_load: f64,
        /// Load of the min-loaded package before the swap.
        min_load: f64,
        /// Projected load of the max-loaded package after it.
        projected_max: f64,
        /// Projected load of the min-loaded package after it.
        projected_min: f64,
        /// False in log-only mode.
        applied: bool,
    },
}

/// Per-task accumulation over the current period.
#[derive(Clone, Debug, Default)]
struct TaskAcc {
    /// Counts per dimension: index 0 = instructions (activity), then the ranked metrics.
    counts: Vec<f64>,
    cpu: Option<CpuId>,
    live: bool,
}

/// The MASA daemon's state.
#[derive(Clone, Debug)]
pub struct Masa {
    /// The daemon's parameters.
    pub params: MasaParams,
    metrics: Vec<RankedMetric>,
    period_start_ns: Option<u64>,
    tasks: BTreeMap<TaskId, TaskAcc>,
    /// Per-CPU counts where the machine reports per-CPU samples (same dimensions).
    cpus: BTreeMap<CpuId, Vec<f64>>,
    cpu_reports: bool,
    swaps: BTreeMap<LoadMetric, u64>,
    migrations: u64,
    log: Vec<MasaEvent>,
}

/// Loads of one period, in events per second.
struct Loads {
    /// (task, cpu, loads per dimension)
    tasks: Vec<(TaskId, CpuId, Vec<f64>)>,
    cpu: BTreeMap<CpuId, Vec<f64>>,
}

impl Masa {
    /// MASA with a calibration table measured on the machine.
    pub fn new(params: MasaParams, calibration: &Calibration) -> Result<Self, CalibrationError> {
        Ok(Self::with_ranked(params, calibration.rank()?))
    }
    /// MASA with metrics already ranked (e.g. [`Calibration::paper_xeon`]).
    pub fn with_ranked(params: MasaParams, metrics: Vec<RankedMetric>) -> Self {
        Self {
            params,
            metrics,
            period_start_ns: None,
            tasks: BTreeMap::new(),
            cpus: BTreeMap::new(),
            cpu_reports: false,
            swaps: BTreeMap::new(),
            migrations: 0,
            log: Vec::new(),
        }
    }
    /// The metrics in the order they are checked.
    pub fn metrics(&self) -> &[RankedMetric] {
        &self.metrics
    }
    /// Swaps decided per metric (applied, or logged in log-only mode).
    pub fn swap_counts(&self) -> BTreeMap<&'static str, u64> {
        self.metrics
            .iter()
            .map(|m| {
                (
                    m.metric.name(),
                    self.swaps.get(&m.metric).copied().unwrap_or(0),
                )
            })
            .collect()
    }
    /// Step-3 migrations decided.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }
    /// Every decision so far.
    pub fn log(&self) -> &[MasaEvent] {
        &self.log
    }

    fn dims(&self) -> usize {
        1 + self.metrics.len()
    }

    fn event_of_dim(&self, d: usize) -> &'static str {
        if d == 0 {
            event::INSTRUCTIONS
        } else {
            self.metrics[d - 1].metric.event()
        }
    }

    fn accumulate(&mut self, observation: &Observation) {
        let dims = self.dims();
        let events: Vec<&'static str> = (0..dims).map(|d| self.event_of_dim(d)).collect();
        for t in &observation.tasks {
            let acc = self.tasks.entry(t.id).or_insert_with(|| TaskAcc {
                counts: vec![0.0; dims],
                ..Default::default()
            });
            for (d, e) in events.iter().enumerate() {
                acc.counts[d] += t.sample.get(e).unwrap_or(0.0);
            }
            acc.cpu = t.cpu.or(acc.cpu);
            acc.live = signal::is_live(t);
        }
        for c in &observation.cpus {
            let has_any = events.iter().skip(1).any(|e| c.sample.get(e).is_some());
            if has_any {
                self.cpu_reports = true;
            }
            let acc = self.cpus.entry(c.cpu).or_insert_with(|| vec![0.0; dims]);
            for (d, e) in events.iter().enumerate() {
                acc[d] += c.sample.get(e).unwrap_or(0.0);
            }
        }
    }

    fn loads(&self, seconds: f64) -> Loads {
        let tasks: Vec<(TaskId, CpuId, Vec<f64>)> = self
            .tasks
            .iter()
            .filter(|(_, a)| a.live)
            .filter_map(|(id, a)| {
                Some((*id, a.cpu?, a.counts.iter().map(|c| c / seconds).collect()))
            })
            .collect();
        let mut cpu: BTreeMap<CpuId, Vec<f64>> = BTreeMap::new();
        if self.cpu_reports {
            for (c, counts) in &self.cpus {
                cpu.insert(*c, counts.iter().map(|v| v / seconds).collect());
            }
        } else {
            for (_, c, l) in &tasks {
                let e = cpu.entry(*c).or_insert_with(|| vec![0.0; self.dims()]);
                for (d, v) in l.iter().enumerate() {
                    e[d] += v;
                }
            }
        }
        Loads { tasks, cpu }
    }

    /// Step 3. Returns the migration if one is needed.
    fn outstanding_check(
        &self,
        tree: &MachineTree,
        loads: &Loads,
    ) -> Option<(TaskId, CpuId, CpuId)> {
        let n = tree.cpu_count().max(1) as f64;
        let dims = self.dims();
        let pkg_sum: Vec<f64> = (0..dims)
            .map(|d| loads.cpu.values().map(|l| l[d]).sum::<f64>())
            .collect();
        let thresholds: Vec<f64> = pkg_sum
            .iter()
            .map(|s| s / (self.params.outstanding_divisor * n))
            .collect();
        let outstanding = |l: &[f64]| l.iter().zip(&thresholds).any(|(v, t)| *t > 0.0 && v > t);
        let mut per_cpu: BTreeMap<CpuId, Vec<TaskId>> = BTreeMap::new();
        for (id, cpu, l) in &loads.tasks {
            if outstanding(l) {
                per_cpu.entry(*cpu).or_default().push(*id);
            }
        }
        for core in tree.cores() {
            for &busy in &core.cpus {
                let Some(procs) = per_cpu.get(&busy) else {
                    continue;
                };
                if procs.len() < 2 {
                    continue;
                }
                if let Some(&idle) = core
                    .cpus
                    .iter()
                    .find(|c| **c != busy && per_cpu.get(c).map_or(true, Vec::is_empty))
                {
                    // The newest process (highest id): the one most likely just spawned.
                    let task = *procs.iter().max()?;
                    return Some((task, busy, idle));
                }
            }
        }
        None
    }

    /// Step 4 for one metric: the swap to make, if any.
    #[allow(clippy::type_complexity)]
    fn balance_metric(
        &self,
        tree: &MachineTree,
        loads: &Loads,
        mi: usize,
    ) -> Option<(TaskId, CpuId, Option<(TaskId, CpuId)>, [f64; 4])> {
        let d = mi + 1;
        let pkg_of = |c: CpuId| tree.package_of(c);
        let np = tree.packages.len();
        if np < 2 {
            return None;
        }
        // Package loads per dimension.
        let mut pkg: Vec<Vec<f64>> = vec![vec![0.0; self.dims()]; np];
        for (c, l) in &loads.cpu {
            if let Some(p) = pkg_of(*c) {
                for (k, v) in l.iter().enumerate() {
                    pkg[p][k] += v;
                }
            }
        }
        let m = &self.metrics[mi];
        // a. interference with the execution-resource limit.
        if let Some(limit) = m.limit_per_s {
            if !pkg.iter().any(|l| l[d] > limit) {
                return None;
            }
        }
        // b. max and min packages.
        let hi = (0..np).max_by(|&a, &b| pkg[a][d].total_cmp(&pkg[b][d]).then(b.cmp(&a)))?;
        let lo = (0..np).min_by(|&a, &b| pkg[a][d].total_cmp(&pkg[b][d]).then(a.cmp(&b)))?;
        let (max_load, min_load) = (pkg[hi][d], pkg[lo][d]);
        // c. imbalance = (max - min) / 2, relative to max_load.
        if max_load <= 0.0
            || (max_load - min_load) / 2.0 / max_load < self.params.imbalance_threshold
        {
            return None;
        }
        // d. candidate swaps.
        let in_pkg = |p: usize| -> Vec<&(TaskId, CpuId, Vec<f64>)> {
            loads
                .tasks
                .iter()
                .filter(|(_, c, _)| pkg_of(*c) == Some(p))
                .collect()
        };
        let from = in_pkg(hi);
        let to = in_pkg(lo);
        let occupied: Vec<CpuId> = to.iter().map(|t| t.1).collect();
        let idle_cpu = tree.packages[lo]
            .cpus()
            .into_iter()
            .find(|c| !occupied.contains(c));
        let limits: Vec<Option<f64>> = std::iter::once(None)
            .chain(self.metrics.iter().map(|m| m.limit_per_s))
            .collect();
        let zero = vec![0.0; self.dims()];
        let mut best: Option<(f64, TaskId, CpuId, Option<(TaskId, CpuId)>, [f64; 4])> = None;
        for p in &from {
            let mut partners: Vec<Option<&(TaskId, CpuId, Vec<f64>)>> =
                to.iter().map(|q| Some(*q)).collect();
            if idle_cpu.is_some() {
                partners.push(None);
            }
            for q in partners {
                let lq = q.map(|q| &q.2).unwrap_or(&zero);
                let admissible = (1..self.dims()).all(|k| match limits[k] {
                    _ if self.params.limit_check == LimitCheck::OwnMetric && k != d => true,
                    Some(lim) => {
                        let (a, b) = (pkg[hi][k] - p.2[k] + lq[k], pkg[lo][k] + p.2[k] - lq[k]);
                        let bound = match self.params.limit_check {
                            LimitCheck::Strict | LimitCheck::OwnMetric => lim,
                            LimitCheck::NoNewExcess => lim.max(pkg[hi][k]).max(pkg[lo][k]),
                        };
                        a <= bound && b <= bound
                    }
                    None => true,
                });
                if !admissible {
                    continue;
                }
                let pmax = max_load - p.2[d] + lq[d];
                let pmin = min_load + p.2[d] - lq[d];
                let gap = (pmax - pmin).abs();
                if gap >= max_load - min_load {
                    continue;
                }
                let better = best.as_ref().map_or(true, |b| gap < b.0 - 1e-9);
                if better {
                    let dest = match q {
                        Some(q) => q.1,
                        None => idle_cpu?,
                    };
                    best = Some((
                        gap,
                        p.0,
                        dest,
                        q.map(|q| (q.0, p.1)),
                        [max_load, min_load, pmax, pmin],
                    ));
                }
            }
        }
        best.map(|(_, a, dest, b, l)| (a, dest, b, l))
    }

    fn end_period(&mut self, topology: &Topology, time_ns: u64, seconds: f64) -> Vec<Action> {
        let tree = MachineTree::new(topology);
        let loads = self.loads(seconds);
        let apply = !self.params.log_only;
        // Step 3.
        if let Some((task, from_cpu, to_cpu)) = self.outstanding_check(&tree, &loads) {
            self.migrations += 1;
            self.log.push(MasaEvent::Migrate {
                time_ns,
                task,
                from_cpu,
                to_cpu,
                applied: apply,
            });
            return if apply {
                vec![Action::SetAffinity {
                    task,
                    cpus: CpuSet::single(to_cpu),
                }]
            } else {
                Vec::new()
            };
        }
        // Step 4, metrics in priority order; one swap per period.
        for mi in 0..self.metrics.len() {
            if let Some((a, dest, b, l)) = self.balance_metric(&tree, &loads, mi) {
                let metric = self.metrics[mi].metric;
                *self.swaps.entry(metric).or_default() += 1;
                self.log.push(MasaEvent::Swap {
                    time_ns,
                    metric,
                    a,
                    b: b.map(|x| x.0),
                    max_load: l[0],
                    min_load: l[1],
                    projected_max: l[2],
                    projected_min: l[3],
                    applied: apply,
                });
                if !apply {
                    return Vec::new();
                }
                let mut actions = vec![Action::SetAffinity {
                    task: a,
                    cpus: CpuSet::single(dest),
                }];
                if let Some((b, b_dest)) = b {
                    actions.push(Action::SetAffinity {
                        task: b,
                        cpus: CpuSet::single(b_dest),
                    });
                }
                return actions;
            }
        }
        Vec::new()
    }
}

impl Policy for Masa {
    fn name(&self) -> &str {
        if self.params.log_only {
            "masa-log"
        } else {
            "masa"
        }
    }
    fn required_events(&self) -> Vec<&'static str> {
        let mut v = vec![event::INSTRUCTIONS];
        v.extend(self.metrics.iter().map(|m| m.metric.event()));
        v
    }
    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action> {
        let start = *self
            .period_start_ns
            .get_or_insert(observation.time_ns.saturating_sub(observation.interval_ns));
        self.accumulate(observation);
        let elapsed = observation.time_ns.saturating_sub(start);
        if elapsed < self.params.period_ns {
            return Vec::new();
        }
        let actions = self.end_period(topology, observation.time_ns, elapsed as f64 / 1e9);
        self.period_start_ns = Some(observation.time_ns);
        self.tasks.clear();
        self.cpus.clear();
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::testutils::{observation, task, topo, INTERVAL_NS};

    /// A calibration where both copies of each probe slow down and raise the package load.
    fn calibration() -> Calibration {
        Calibration {
            entries: vec![
                CalibrationEntry {
                    metric: LoadMetric::FpUops,
                    probe: "mesa".into(),
                    solo_time_s: 230.0,
                    coupled_time_s: 325.0,
                    solo_events_per_s: 1.0e9,
                    coupled_events_per_s: 1.4e9,
                },
                CalibrationEntry {
                    metric: LoadMetric::L2Misses,
                    probe: "parser".into(),
                    solo_time_s: 244.0,
                    coupled_time_s: 460.0,
                    solo_events_per_s: 192_319.0,
                    coupled_events_per_s: 260_000.0,
                },
            ],
        }
    }

    fn params() -> MasaParams {
        MasaParams {
            period_ns: INTERVAL_NS,
            ..Default::default()
        }
    }

    #[test]
    fn calibration_orders_metrics_and_sets_limits() {
        let r = calibration().rank().unwrap();
        // FP: ΔT 0.413 / ΔL 0.4 = 1.03; L2: ΔT 0.885 / ΔL 0.352 = 2.5 → L2 first.
        assert_eq!(r[0].metric, LoadMetric::L2Misses);
        assert_eq!(r[1].metric, LoadMetric::FpUops);
        assert!((r[0].limit_per_s.unwrap() - 192_319.0).abs() < 1e-9);
        let mut bad = calibration();
        bad.entries[0].coupled_events_per_s = 0.9e9;
        assert!(matches!(bad.rank(), Err(CalibrationError::Invalid { .. })));
        bad.entries[0] = bad.entries[1].clone();
        assert_eq!(bad.rank(), Err(CalibrationError::Duplicate("l2_misses")));
        assert_eq!(Calibration::default().rank(), Err(CalibrationError::Empty));
    }

    /// (INT, INT) (FP, FP) on 2 packages x 2 threads: MASA swaps an FP with an INT.
    fn int_int_fp_fp() -> (Topology, Observation) {
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let int = |id, cpu| {
            task(
                id,
                cpu,
                &all,
                &[(event::INSTRUCTIONS, 2e9), (event::CACHE_MISSES, 1e4)],
            )
        };
        let fp = |id, cpu| {
            task(
                id,
                cpu,
                &all,
                &[
                    (event::INSTRUCTIONS, 1e9),
                    (event::CACHE_MISSES, 2e4),
                    (event::FP_OPS, 0.7e9),
                ],
            )
        };
        (
            t.clone(),
            observation(&t, vec![int(1, 0), int(2, 1), fp(3, 2), fp(4, 3)]),
        )
    }

    #[test]
    fn swaps_fp_with_int_across_packages() {
        let (t, obs) = int_int_fp_fp();
        let mut masa = Masa::new(params(), &calibration()).unwrap();
        let actions = masa.decide(&t, &obs);
        assert_eq!(actions.len(), 2, "{actions:?}");
        let moved: BTreeMap<u64, CpuId> = actions
            .iter()
            .filter_map(|a| match a {
                Action::SetAffinity { task, cpus } => Some((task.0, cpus.first()?)),
                _ => None,
            })
            .collect();
        // One FP task goes to package 0 and one INT task to package 1.
        let fp_moved = moved.iter().find(|(id, _)| **id >= 3).unwrap();
        let int_moved = moved.iter().find(|(id, _)| **id <= 2).unwrap();
        assert!(*fp_moved.1 < 2);
        assert!(*int_moved.1 >= 2);
        assert_eq!(masa.swap_counts()["fp_uops"], 1);
        assert_eq!(masa.swap_counts()["l2_misses"], 0);
    }

    #[test]
    fn balanced_placement_is_left_alone_and_log_only_applies_nothing() {
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let int = |id, cpu| task(id, cpu, &all, &[(event::INSTRUCTIONS, 2e9)]);
        let fp = |id, cpu| {
            task(
                id,
                cpu,
                &all,
                &[(event::INSTRUCTIONS, 1e9), (event::FP_OPS, 0.7e9)],
            )
        };
        // (INT, FP) (INT, FP): FP load 0.7e9 per package, under the 1e9 limit.
        let obs = observation(&t, vec![int(1, 0), fp(2, 1), int(3, 2), fp(4, 3)]);
        let mut masa = Masa::new(params(), &calibration()).unwrap();
        assert!(masa.decide(&t, &obs).is_empty());
        assert!(masa.log().is_empty());

        let (t, obs) = int_int_fp_fp();
        let mut logger = Masa::new(
            MasaParams {
                log_only: true,
                ..params()
            },
            &calibration(),
        )
        .unwrap();
        assert!(logger.decide(&t, &obs).is_empty());
        assert_eq!(logger.swap_counts()["fp_uops"], 1);
        assert!(matches!(
            logger.log()[0],
            MasaEvent::Swap { applied: false, .. }
        ));
        assert_eq!(logger.name(), "masa-log");
    }

    #[test]
    fn outstanding_processes_on_one_cpu_move_to_the_idle_sibling() {
        // Two busy processes share CPU 0, CPU 1 (its sibling) has none: (sum/4N) rule.
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let busy = |id, cpu| task(id, cpu, &all, &[(event::INSTRUCTIONS, 1e9)]);
        let idle = |id, cpu| task(id, cpu, &all, &[(event::INSTRUCTIONS, 1e6)]);
        let obs = observation(
            &t,
            vec![busy(1, 0), busy(2, 0), idle(3, 1), busy(4, 2), busy(5, 3)],
        );
        let mut masa = Masa::new(params(), &calibration()).unwrap();
        let a = masa.decide(&t, &obs);
        assert_eq!(
            a,
            vec![Action::SetAffinity {
                task: TaskId(2),
                cpus: CpuSet::single(1)
            }]
        );
        assert_eq!(masa.migrations(), 1);
    }

    #[test]
    fn limit_check_readings_differ_when_no_swap_can_meet_the_limit() {
        // L2 limit 192319/s. Package 0: 250k + 200k misses/s; package 1: 150k + 10k. The
        // imbalance is (450k - 160k) / 2 / 450k = 32 %, but every swap leaves package 0 at
        // 210k or more: over the limit.
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let mk = |id, cpu, l2: f64| {
            task(
                id,
                cpu,
                &all,
                &[(event::INSTRUCTIONS, 1e9), (event::CACHE_MISSES, l2)],
            )
        };
        let obs = observation(
            &t,
            vec![
                mk(1, 0, 250e3),
                mk(2, 1, 200e3),
                mk(3, 2, 150e3),
                mk(4, 3, 10e3),
            ],
        );
        let mut strict = Masa::new(params(), &calibration()).unwrap();
        assert!(
            strict.decide(&t, &obs).is_empty(),
            "no swap keeps both under the limit"
        );
        let mut relaxed = Masa::new(
            MasaParams {
                limit_check: LimitCheck::NoNewExcess,
                ..params()
            },
            &calibration(),
        )
        .unwrap();
        let a = relaxed.decide(&t, &obs);
        // Swaps reducing the excess are allowed: 250k <-> 150k (350k / 260k) is the first of the
        // two best (gap 90k).
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(relaxed.swap_counts()["l2_misses"], 1);
        // Checking only the balanced metric's own limit: still over it, so no swap here.
        let mut own = Masa::new(
            MasaParams {
                limit_check: LimitCheck::OwnMetric,
                ..params()
            },
            &calibration(),
        )
        .unwrap();
        assert!(own.decide(&t, &obs).is_empty());
    }

    #[test]
    fn own_metric_reading_ignores_other_resources() {
        // FP: (FP, FP) on package 1 over the FP limit. Every process misses 110k/s in L2, so
        // both packages sit at 220k/s, over the L2 limit, and balanced. Strict refuses every
        // swap (each package keeps its L2 excess); checking only FP lets an FP process trade
        // places with an INT one.
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let int = |id, cpu| {
            task(
                id,
                cpu,
                &all,
                &[(event::INSTRUCTIONS, 2e9), (event::CACHE_MISSES, 110e3)],
            )
        };
        let fp = |id, cpu| {
            task(
                id,
                cpu,
                &all,
                &[
                    (event::INSTRUCTIONS, 1e9),
                    (event::FP_OPS, 0.7e9),
                    (event::CACHE_MISSES, 110e3),
                ],
            )
        };
        let obs = observation(&t, vec![int(1, 0), int(2, 1), fp(3, 2), fp(4, 3)]);
        let mut strict = Masa::new(params(), &calibration()).unwrap();
        assert!(strict.decide(&t, &obs).is_empty());
        let mut own = Masa::new(
            MasaParams {
                limit_check: LimitCheck::OwnMetric,
                ..params()
            },
            &calibration(),
        )
        .unwrap();
        assert_eq!(own.decide(&t, &obs).len(), 2);
        assert_eq!(own.swap_counts()["fp_uops"], 1);
    }

    #[test]
    fn waits_for_the_sampling_period_and_respects_limits() {
        let (t, obs) = int_int_fp_fp();
        let mut masa = Masa::new(MasaParams::default(), &calibration()).unwrap();
        // 1 s of a 5 s period: nothing yet.
        assert!(masa.decide(&t, &obs).is_empty());
        // A swap that would push the destination above the FP limit is refused: make the FP
        // tasks so heavy that even one of them exceeds the limit.
        let mut heavy = obs.clone();
        for tk in heavy.tasks.iter_mut().filter(|tk| tk.id.0 >= 3) {
            tk.sample.set(
                event::FP_OPS,
                counterpoint_core::sample::CounterValue::exact(1_200_000_000, INTERVAL_NS),
            );
        }
        let mut masa = Masa::new(params(), &calibration()).unwrap();
        assert!(masa.decide(&t, &heavy).is_empty());
    }

    #[test]
    fn rows_from_fixed_time_rates_rank_like_fixed_work_rows() {
        // Coupled, each copy does 80 % of the solo work rate (ΔT = 25 %) while the package's
        // event rate rises by 50 % (ΔL): impact 0.5.
        let e = CalibrationEntry::from_rates(LoadMetric::L2Misses, "l2", 100.0, 80.0, 1e6, 1.5e6);
        assert!((e.coupled_time_s - 1.25).abs() < 1e-12);
        assert!((e.impact().unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(e.limit_per_s(), 1e6);
        // A probe that did no work coupled cannot be ranked.
        let dead = CalibrationEntry::from_rates(LoadMetric::FpUops, "fp", 100.0, 0.0, 1e6, 1.5e6);
        assert!(dead.impact().is_err());
    }
}
