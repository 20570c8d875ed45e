//! Descriptions: machines, program profiles, programs, servers and scheduler parameters.
//!
//! These are plain data (serde, `deny_unknown_fields`), shared by the built-in catalog and by
//! scenario files. Units are in the field names.

use counterpoint_core::topology::SymmetricSpec;
use counterpoint_core::{Topology, TopologyError};
use serde::{Deserialize, Serialize};

/// Where a machine's memory sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// One front-side bus shared by every package (the SMPs of the seeds).
    SharedBus,
    /// One memory controller per package; a package's tasks use its own controller.
    PerPackage,
}

/// SMT (Hyper-Threading) sharing parameters of a core.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtSpec {
    /// Instructions a core can issue per cycle; a sibling's IPC over this is its issue pressure.
    pub issue_width: f64,
    /// Core-CPI inflation per unit of sibling issue pressure, whatever units the two use.
    pub issue_penalty: f64,
    /// Extra inflation when both threads use the same functional unit (overlap of unit mixes).
    pub same_unit_penalty: f64,
    /// Weight of FP-unit overlap relative to integer-unit overlap (FP units are scarcer).
    pub fp_unit_weight: f64,
}

impl Default for SmtSpec {
    fn default() -> Self {
        Self {
            issue_width: 3.0,
            issue_penalty: 0.5,
            same_unit_penalty: 0.5,
            fp_unit_weight: 4.0,
        }
    }
}

/// Which physics the engine runs (docs/sim.md, "The model" and "Model v2").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// The first model: one fitted core CPI per program, power-law miss curves, `L0/(1-rho)`
    /// bus latency capped at `rho_cap`, slices that do not drift unless asked.
    #[default]
    V1,
    /// The second model: core CPI built from branch, FP-dependency and LLC-hit components,
    /// working-set (knee) miss curves, an M/M/1 loaded-latency bus from platform figures, and
    /// slices that drift by default.
    V2,
}

impl Model {
    /// `v1` or `v2`.
    pub fn label(self) -> &'static str {
        match self {
            Model::V1 => "v1",
            Model::V2 => "v2",
        }
    }
}

/// Machine physics of the second model; every value has a source in docs/sim-catalog.md.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhysicsV2 {
    /// Cycles lost per mispredicted branch (pipeline refill).
    pub branch_penalty_cycles: f64,
    /// Load-to-use latency of an LLC hit, in core cycles (exposed share divided by the
    /// program's `mlp`, as for misses).
    pub llc_hit_cycles: f64,
    /// Sustained (STREAM-class) bandwidth of one bus / controller; the queue's service rate.
    pub sustained_bandwidth_gb_per_s: f64,
    /// Share of the sustained bandwidth lost when two equal streams interleave at the memory
    /// controller (row-buffer conflicts); scaled by how mixed the traffic is. 0 in every
    /// catalog machine: the sustained figure is a many-stream (STREAM-class) measurement, which
    /// has the conflicts in it already, and a loss on top makes another copy of a streaming
    /// program lower the bytes the bus moves (docs/sim.md, "Memory"). A what-if only.
    pub row_conflict_loss: f64,
    /// Share of each CPU's timer ticks taken by other tasks woken in process context (daemons,
    /// kernel threads): the baseline's round-robin slices drift only through these. A Linux 2.6
    /// O(1) slice is a count of the running task's own ticks, so interrupt and softirq work
    /// inside it does not lengthen it; a tick that lands while a woken task runs is charged to
    /// that task and delays the rotation by one tick (docs/sim.md, "Drifting slices").
    pub background_tick_share: f64,
    /// Independent small-stride streams the hardware prefetcher tracks at once (NetBurst: 8,
    /// Intel's IA-32 optimization manual); streams beyond these are not prefetched.
    #[serde(default = "prefetch_streams")]
    pub prefetch_streams: f64,
    /// Lines (of `line_bytes`) the prefetcher runs ahead of a stream's demand misses
    /// (NetBurst: 4, its 256 bytes; 2 when a machine file leaves it out): a covered miss
    /// finds `1 + depth` lines of the stream already in flight.
    #[serde(default = "prefetch_depth")]
    pub prefetch_depth_lines: f64,
    /// Queue occupancy, in bytes, that one line moved by another socket costs this socket's
    /// memory path in snoops (request and data-less response through its uncore); 0 where
    /// all sockets share one bus (the snoop is that bus's own transaction). See `coupling.rs`.
    #[serde(default)]
    pub snoop_bytes_per_line: f64,
    /// Lines one read miss brings over the bus: 2 on NetBurst, whose L2 fetches a sector of
    /// two adjacent 64-byte lines on every read miss (Intel's IA-32 optimization manual,
    /// 2006, Table 1-1: "Each read due to a cache miss fetches a sector, consisting of two
    /// adjacent cache lines; a write operation is 64 bytes"); 1 elsewhere. A stream uses the
    /// second line (it is the next miss's line, already counted); any other miss wastes it
    /// (`ProfileV2::lines_per_miss`; the stream share as the measure of spatial locality is
    /// an estimate). A fraction is allowed (an adjacent-line fetch that is throttled or
    /// switched off on part of the runs); a machine file that leaves it out gets 1.
    #[serde(default = "one_line")]
    pub lines_per_read: f64,
    /// Whether the LLC keeps one tag per sector (the `lines_per_read` lines a read fetches):
    /// NetBurst's L2 allocates a 128-byte frame, two 64-byte lines under one tag, on every
    /// miss ([IA32opt] §1: "the adjacent cache line within an 128-byte sector"; 128-byte L2
    /// lines in the Pentium 4 descriptions), so a frame whose second line the program never
    /// uses holds half its bytes' worth of the program's data. A program's working sets then
    /// take `ProfileV2::sector_footprint` times their bytes of cache. Off (the default, and
    /// every non-NetBurst machine) the cache holds lines.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sectored_llc: bool,
    /// SMT sharing refitted for v2's core CPIs (`calibrate_v2 -- --fit`, on MASA's pinned
    /// tables); `None` keeps the machine's `smt` (v1's fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt: Option<SmtSpec>,
    /// The core's execution time per instruction relative to NetBurst's, for the part of a
    /// program's core CPI that is its own issue and dependency chains (`ProfileV2::base_cpi`
    /// and `fp_dep_cycles`, fitted on a NetBurst Xeon): 1 on NetBurst; a wider core with
    /// shorter latencies (Core 2 and its successors) runs the same instructions in fewer
    /// cycles. Branch refills and cache hits are the machine's own figures and are not
    /// scaled. Fitted for Core 2 on measured CPIs (docs/calibration.md, "Session 20").
    #[serde(default = "one_scale")]
    pub core_cpi_scale: f64,
    /// Share of the core's out-of-order window (reorder buffer, load and store buffers) each
    /// SMT thread keeps while its sibling runs: Intel's Hyper-Threading partitions them
    /// statically between two active threads, on NetBurst and on Nehalem and its successors
    /// alike, and recombines them when the sibling halts (docs/sim.md, "Hyper-Threading splits
    /// the window"). A thread's
    /// overlap of misses beyond the first comes from the independent loads its window holds,
    /// so it shrinks with the window (`ProfileV2::smt_mlp`). 1 leaves the overlap unchanged
    /// (cores without partitioned windows, a what-if).
    #[serde(default = "half_window")]
    pub smt_window_share: f64,
    /// How running co-runners divide a shared LLC: by frequency of access (`foa`, the default
    /// and what every catalog figure was measured with) or by the natural partition of their
    /// footprints under LRU (`footprint`, session 13, opt-in; docs/sim.md "LLC sharing").
    #[serde(default, skip_serializing_if = "LlcSharing::is_foa")]
    pub llc_sharing: LlcSharing,
}

/// How co-runners divide a shared last-level cache (model v2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlcSharing {
    /// Frequency of access: each running task's share is its LLC access rate's part of the
    /// domain's (Chandra et al.'s FOA model).
    #[default]
    Foa,
    /// Natural partition under LRU: every task holds what its own accesses touch within the
    /// cache's common eviction time `T`, its footprint `fp(r T)`, with the footprints summing
    /// to the capacity. The footprint is the inverse of the fill curve (`FillTable`): a
    /// program whose misses stop past its working set stops growing there, a stream keeps
    /// growing at its insertion rate.
    Footprint,
}

impl LlcSharing {
    /// The default (`foa`), left out of serialized machines.
    pub fn is_foa(&self) -> bool {
        *self == LlcSharing::Foa
    }
}

fn prefetch_streams() -> f64 {
    8.0
}
fn prefetch_depth() -> f64 {
    2.0
}
fn one_line() -> f64 {
    1.0
}
fn half_window() -> f64 {
    0.5
}
fn one_scale() -> f64 {
    1.0
}
fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for PhysicsV2 {
    fn default() -> Self {
        Self {
            branch_penalty_cycles: 20.0,
            llc_hit_cycles: 18.0,
            sustained_bandwidth_gb_per_s: 3.0,
            row_conflict_loss: 0.0,
            background_tick_share: 0.001,
            prefetch_streams: prefetch_streams(),
            prefetch_depth_lines: prefetch_depth(),
            snoop_bytes_per_line: 0.0,
            lines_per_read: one_line(),
            sectored_llc: false,
            smt: None,
            core_cpi_scale: one_scale(),
            smt_window_share: half_window(),
            llc_sharing: LlcSharing::Foa,
        }
    }
}

/// A simulated machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// Catalog name.
    pub name: String,
    /// Sockets.
    pub packages: u32,
    /// Cores per socket.
    pub cores_per_package: u32,
    /// SMT threads per core.
    pub threads_per_core: u32,
    #[serde(default = "one")]
    /// LLC domains per package (CCXs); each has `llc_bytes`.
    pub llc_domains_per_package: u32,
    /// Capacity of one LLC instance.
    pub llc_bytes: u64,
    #[serde(default = "line64")]
    /// Cache line size.
    pub line_bytes: u32,
    /// Core clock.
    pub freq_ghz: f64,
    /// Unloaded memory latency (LLC miss to data).
    pub mem_latency_ns: f64,
    /// Shared bus or per-package controllers.
    pub memory: MemoryKind,
    /// Peak bandwidth of one bus / controller.
    pub peak_bandwidth_gb_per_s: f64,
    /// Utilization at which queueing latency stops growing as `1/(1-rho)`; beyond it the bus is
    /// saturated and latency grows just enough to hold demand at this utilization.
    #[serde(default = "rho_cap")]
    pub rho_cap: f64,
    #[serde(default)]
    /// SMT sharing parameters.
    pub smt: SmtSpec,
    /// Which physics the engine runs for this machine (a scenario's `model` key sets it).
    #[serde(default)]
    pub model: Model,
    /// Second-model physics (used when `model` is `v2`).
    #[serde(default)]
    pub v2: PhysicsV2,
}

fn one() -> u32 {
    1
}
fn line64() -> u32 {
    64
}
fn rho_cap() -> f64 {
    0.95
}

impl MachineSpec {
    /// Logical CPUs.
    pub fn cpus(&self) -> usize {
        (self.packages * self.cores_per_package * self.threads_per_core) as usize
    }
    /// Physical cores.
    pub fn cores(&self) -> usize {
        (self.packages * self.cores_per_package) as usize
    }
    /// The core vocabulary's view of this machine.
    pub fn topology(&self) -> Result<Topology, TopologyError> {
        Topology::symmetric(&SymmetricSpec {
            packages: self.packages,
            cores_per_package: self.cores_per_package,
            threads_per_core: self.threads_per_core,
            llc_domains_per_package: self.llc_domains_per_package,
            l1d_bytes: 16 << 10,
            l2_bytes: 256 << 10,
            llc_bytes: self.llc_bytes,
            line_bytes: self.line_bytes,
        })
    }
    /// SMT sharing under the machine's model: v2's refit where the machine has one, else
    /// the machine's `smt`.
    pub fn smt_for_model(&self) -> SmtSpec {
        match (self.model, self.v2.smt) {
            (Model::V2, Some(s)) => s,
            _ => self.smt,
        }
    }
    /// Bandwidth of one bus / controller under the machine's model: v1's (fitted)
    /// `peak_bandwidth_gb_per_s`, v2's sustained platform figure.
    pub fn bus_bandwidth_gb_per_s(&self) -> f64 {
        match self.model {
            Model::V1 => self.peak_bandwidth_gb_per_s,
            Model::V2 => self.v2.sustained_bandwidth_gb_per_s,
        }
    }
    /// v2's loaded memory latency (ns) when the traffic uses `utilization` of the sustained
    /// bandwidth and is `mixed` (0: one stream, 1/2: two equal streams; see docs/sim.md):
    /// `L0 + S * rho / (1 - rho)` with `S` the time one line takes at the mix's effective
    /// bandwidth and `rho` the utilization of that effective bandwidth. Infinite at or past
    /// saturation. The engine solves the same curve in cycles.
    pub fn v2_loaded_latency_ns(&self, utilization: f64, mixed: f64) -> f64 {
        let eff = 1.0 - self.v2.row_conflict_loss * mixed.clamp(0.0, 1.0);
        let bw_bytes_per_ns = self.v2.sustained_bandwidth_gb_per_s * eff;
        let s_ns = self.line_bytes as f64 / bw_bytes_per_ns;
        let rho = utilization.max(0.0) / eff;
        if rho >= 1.0 {
            return f64::INFINITY;
        }
        self.mem_latency_ns + s_ns * rho / (1.0 - rho)
    }
    /// v2's loaded latency (ns) of socket `b`'s memory when every socket `a` moves
    /// `own_gb_per_s[a]` of its own traffic (mix index `mixed` at `b`): socket `b`'s queue
    /// also carries the snoops of the others' lines (`coupling::snoop_load`, bounded to
    /// `coupling::MAX_SNOOP_SHARE` of its bandwidth). With one socket, or no snoop cost, this
    /// is [`Self::v2_loaded_latency_ns`] at `own_gb_per_s[b]`.
    pub fn v2_socket_latency_ns(&self, own_gb_per_s: &[f64], b: usize, mixed: f64) -> f64 {
        let own = own_gb_per_s.get(b).copied().unwrap_or(0.0).max(0.0);
        let bw = self.v2.sustained_bandwidth_gb_per_s;
        let eff = 1.0 - self.v2.row_conflict_loss * mixed.clamp(0.0, 1.0);
        let snoop = crate::coupling::bounded_snoop_load(
            crate::coupling::snoop_load(
                own_gb_per_s,
                b,
                self.line_bytes as f64,
                self.v2.snoop_bytes_per_line,
            ),
            bw * eff,
            crate::coupling::MAX_SNOOP_SHARE,
        );
        self.v2_loaded_latency_ns((own + snoop) / bw, mixed)
    }
    /// Check value ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, name: &str| -> Result<(), String> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be a positive number, got {v}"))
            }
        };
        if self.packages == 0 || self.cores_per_package == 0 || self.threads_per_core == 0 {
            return Err(
                "packages, cores_per_package and threads_per_core must be at least 1".into(),
            );
        }
        if self.llc_domains_per_package == 0
            || self.cores_per_package % self.llc_domains_per_package != 0
        {
            return Err(format!(
                "llc_domains_per_package = {} must divide cores_per_package = {}",
                self.llc_domains_per_package, self.cores_per_package
            ));
        }
        if self.cpus() > 65_536 {
            return Err(format!(
                "{} CPUs is more than the simulator's 65536",
                self.cpus()
            ));
        }
        pos(self.llc_bytes as f64, "llc_bytes")?;
        pos(self.line_bytes as f64, "line_bytes")?;
        pos(self.freq_ghz, "freq_ghz")?;
        pos(self.mem_latency_ns, "mem_latency_ns")?;
        pos(self.peak_bandwidth_gb_per_s, "peak_bandwidth_gb_per_s")?;
        if !(self.rho_cap > 0.0 && self.rho_cap < 1.0) {
            return Err(format!("rho_cap must be in (0, 1), got {}", self.rho_cap));
        }
        pos(self.smt.issue_width, "smt.issue_width")?;
        pos(self.v2.branch_penalty_cycles, "v2.branch_penalty_cycles")?;
        pos(self.v2.llc_hit_cycles, "v2.llc_hit_cycles")?;
        pos(
            self.v2.sustained_bandwidth_gb_per_s,
            "v2.sustained_bandwidth_gb_per_s",
        )?;
        if !(self.v2.row_conflict_loss >= 0.0 && self.v2.row_conflict_loss < 1.0) {
            return Err(format!(
                "v2.row_conflict_loss must be in [0, 1), got {}",
                self.v2.row_conflict_loss
            ));
        }
        for (v, n) in [
            (self.v2.prefetch_streams, "v2.prefetch_streams"),
            (self.v2.prefetch_depth_lines, "v2.prefetch_depth_lines"),
            (self.v2.snoop_bytes_per_line, "v2.snoop_bytes_per_line"),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{n} must be a non-negative number, got {v}"));
            }
        }
        if !(self.v2.lines_per_read.is_finite() && (1.0..=16.0).contains(&self.v2.lines_per_read)) {
            return Err(format!(
                "v2.lines_per_read must be between 1 (the missed line itself) and 16, got {}",
                self.v2.lines_per_read
            ));
        }
        if !(self.v2.core_cpi_scale > 0.0 && self.v2.core_cpi_scale <= 4.0) {
            return Err(format!(
                "v2.core_cpi_scale must be in (0, 4] (the core's time per instruction against \
                 NetBurst's), got {}",
                self.v2.core_cpi_scale
            ));
        }
        if !(self.v2.smt_window_share > 0.0 && self.v2.smt_window_share <= 1.0) {
            return Err(format!(
                "v2.smt_window_share must be in (0, 1] (the share of the window a thread keeps \
                 beside a running sibling), got {}",
                self.v2.smt_window_share
            ));
        }
        if !(self.v2.background_tick_share >= 0.0 && self.v2.background_tick_share < 1.0) {
            return Err(format!(
                "v2.background_tick_share must be in [0, 1), got {}",
                self.v2.background_tick_share
            ));
        }
        for (v, n) in [
            (self.smt.issue_penalty, "smt.issue_penalty"),
            (self.smt.same_unit_penalty, "smt.same_unit_penalty"),
            (self.smt.fp_unit_weight, "smt.fp_unit_weight"),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{n} must be a non-negative number, got {v}"));
            }
        }
        Ok(())
    }
}

/// LLC miss ratio as a function of the cache capacity a task holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum MissCurve {
    /// `m(c) = clamp(m_ref * (c / c_ref)^-alpha, m_min, 1)`.
    PowerLaw {
        /// Miss ratio at the reference capacity.
        m_ref: f64,
        /// Reference capacity.
        c_ref_bytes: f64,
        /// Power-law exponent (miss ratio falls as capacity^-alpha).
        alpha: f64,
        /// Floor of the miss ratio (compulsory misses).
        m_min: f64,
    },
    /// Stack-distance table: `(capacity_bytes, miss_ratio)` points, capacity ascending, miss
    /// ratio non-increasing; linear interpolation, flat beyond the ends.
    Table {
        /// `(capacity_bytes, miss_ratio)` points.
        points: Vec<(f64, f64)>,
    },
    /// Working sets from a stack-distance profile: `m(c) = floor + sum_i f_i / (1 + (c /
    /// w_i)^sharpness)`. Each set of `w_i` bytes holds a fraction `f_i` of the accesses; its
    /// reuses hit once the cache holds it (a knee at `w_i`, smoothed by `sharpness`); `floor`
    /// is the accesses no cache of this size catches (streams, compulsory misses).
    Knees {
        /// Miss ratio with an unbounded cache.
        floor: f64,
        /// `(working_set_bytes, fraction_of_accesses)` per working set.
        sets: Vec<(f64, f64)>,
        /// Steepness of each knee (LRU on a cyclic working set is a cliff: large values).
        sharpness: f64,
    },
}

impl MissCurve {
    /// A knee curve's miss ratio with no cache, before the clamp to 1: `floor` plus every working
    /// set's fraction (at most 1 for a valid curve, and the bound on how far [`Self::scaled`]
    /// may scale it). `None` for the other shapes.
    pub fn knee_total(&self) -> Option<f64> {
        match self {
            MissCurve::Knees { floor, sets, .. } => {
                Some(floor + sets.iter().map(|s| s.1).sum::<f64>())
            }
            _ => None,
        }
    }
    /// The same curve with every miss ratio times `k` (misses per access scaled, shapes kept):
    /// the v2 fit's knob for a program whose estimated misses a measurement contradicts. A
    /// table's points and a power law's ratios that would pass 1 are capped there (a table still
    /// rises to 1 at no cache below its first point); a knee curve's caller keeps `floor` plus
    /// the sets' fractions at most 1 (`calibrate_v2` bounds `k` so).
    pub fn scaled(&self, k: f64) -> MissCurve {
        match self {
            MissCurve::PowerLaw {
                m_ref,
                c_ref_bytes,
                alpha,
                m_min,
            } => MissCurve::PowerLaw {
                m_ref: m_ref * k,
                c_ref_bytes: *c_ref_bytes,
                alpha: *alpha,
                m_min: (m_min * k).min(1.0),
            },
            MissCurve::Table { points } => MissCurve::Table {
                points: points.iter().map(|&(c, m)| (c, (m * k).min(1.0))).collect(),
            },
            MissCurve::Knees {
                floor,
                sets,
                sharpness,
            } => MissCurve::Knees {
                floor: floor * k,
                sets: sets.iter().map(|&(w, f)| (w, f * k)).collect(),
                sharpness: *sharpness,
            },
        }
    }
    /// The curve with every capacity multiplied by `k` (`m'(c) = m(c / k)`): the same
    /// program on a cache where each byte of its data takes `k` bytes (a sectored cache,
    /// `ProfileV2::sector_footprint`). `k` must be positive; 1 returns the curve unchanged.
    pub fn stretched(&self, k: f64) -> MissCurve {
        match self {
            MissCurve::PowerLaw {
                m_ref,
                c_ref_bytes,
                alpha,
                m_min,
            } => MissCurve::PowerLaw {
                m_ref: *m_ref,
                c_ref_bytes: c_ref_bytes * k,
                alpha: *alpha,
                m_min: *m_min,
            },
            MissCurve::Table { points } => MissCurve::Table {
                points: points.iter().map(|&(c, m)| (c * k, m)).collect(),
            },
            MissCurve::Knees {
                floor,
                sets,
                sharpness,
            } => MissCurve::Knees {
                floor: *floor,
                sets: sets.iter().map(|&(w, f)| (w * k, f)).collect(),
                sharpness: *sharpness,
            },
        }
    }
    /// Miss ratio with `capacity_bytes` of cache.
    #[inline]
    pub fn miss_ratio(&self, capacity_bytes: f64) -> f64 {
        match self {
            MissCurve::PowerLaw {
                m_ref,
                c_ref_bytes,
                alpha,
                m_min,
            } => {
                if capacity_bytes <= 0.0 {
                    return 1.0;
                }
                let m = m_ref * (capacity_bytes / c_ref_bytes).powf(-alpha);
                m.clamp(*m_min, 1.0)
            }
            MissCurve::Table { points } => {
                let Some(first) = points.first() else {
                    return 1.0;
                };
                if capacity_bytes <= first.0 {
                    // Below the first point: interpolate from (0, 1).
                    if first.0 <= 0.0 {
                        return first.1;
                    }
                    let t = (capacity_bytes / first.0).max(0.0);
                    return 1.0 + (first.1 - 1.0) * t;
                }
                for w in points.windows(2) {
                    let (a, b) = (w[0], w[1]);
                    if capacity_bytes <= b.0 {
                        let t = (capacity_bytes - a.0) / (b.0 - a.0);
                        return a.1 + (b.1 - a.1) * t;
                    }
                }
                points[points.len() - 1].1
            }
            MissCurve::Knees {
                floor,
                sets,
                sharpness,
            } => {
                let c = capacity_bytes.max(0.0);
                let mut m = *floor;
                for &(w, f) in sets {
                    m += f / (1.0 + (c / w).powf(*sharpness));
                }
                m.clamp(0.0, 1.0)
            }
        }
    }
    /// Check the machine's parameters are usable; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            MissCurve::PowerLaw {
                m_ref,
                c_ref_bytes,
                alpha,
                m_min,
            } => {
                if !(*m_ref > 0.0 && *m_ref <= 1.0) {
                    return Err(format!("miss_curve.m_ref must be in (0, 1], got {m_ref}"));
                }
                if !(c_ref_bytes.is_finite() && *c_ref_bytes > 0.0) {
                    return Err(format!(
                        "miss_curve.c_ref_bytes must be positive, got {c_ref_bytes}"
                    ));
                }
                if !(alpha.is_finite() && *alpha >= 0.0) {
                    return Err(format!("miss_curve.alpha must be >= 0, got {alpha}"));
                }
                if !(*m_min >= 0.0 && *m_min <= 1.0) {
                    return Err(format!("miss_curve.m_min must be in [0, 1], got {m_min}"));
                }
                Ok(())
            }
            MissCurve::Table { points } => {
                if points.is_empty() {
                    return Err("miss_curve.points must not be empty".into());
                }
                for w in points.windows(2) {
                    if w[1].0 <= w[0].0 {
                        return Err("miss_curve.points capacities must ascend".into());
                    }
                    if w[1].1 > w[0].1 {
                        return Err("miss_curve.points miss ratios must not increase".into());
                    }
                }
                if points
                    .iter()
                    .any(|p| !(p.1 >= 0.0 && p.1 <= 1.0) || p.0 < 0.0)
                {
                    return Err("miss_curve.points need capacity >= 0 and ratio in [0, 1]".into());
                }
                Ok(())
            }
            MissCurve::Knees {
                floor,
                sets,
                sharpness,
            } => {
                if !(*floor >= 0.0 && *floor <= 1.0) {
                    return Err(format!("miss_curve.floor must be in [0, 1], got {floor}"));
                }
                if !(sharpness.is_finite() && *sharpness > 0.0) {
                    return Err(format!(
                        "miss_curve.sharpness must be positive, got {sharpness}"
                    ));
                }
                for (i, &(w, f)) in sets.iter().enumerate() {
                    if !(w.is_finite() && w > 0.0) {
                        return Err(format!(
                            "miss_curve.sets[{i}] size must be positive, got {w}"
                        ));
                    }
                    if !(0.0..=1.0).contains(&f) {
                        return Err(format!(
                            "miss_curve.sets[{i}] fraction must be in [0, 1], got {f}"
                        ));
                    }
                }
                let total = self.knee_total().unwrap_or(0.0);
                if total > 1.0 + 1e-9 {
                    return Err(format!(
                        "miss_curve floor plus set fractions must not exceed 1, got {total}"
                    ));
                }
                Ok(())
            }
        }
    }
}

/// A demand overlap `mlp` beside a running SMT sibling (`ProfileV2::smt_mlp`): `1 + (mlp - 1)
/// x smt_window_share`.
pub fn smt_mlp_of(mlp: f64, phys: &PhysicsV2) -> f64 {
    1.0 + (mlp - 1.0).max(0.0) * phys.smt_window_share
}

/// How a program phase uses the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// CPI with a perfect LLC (every access hits).
    pub cpi_core: f64,
    /// LLC accesses per thousand instructions.
    pub llc_apki: f64,
    /// Miss ratio as a function of the LLC capacity the task holds.
    pub miss_curve: MissCurve,
    /// Average overlapping misses (memory-level parallelism), >= 1.
    pub mlp: f64,
    /// Fraction of retired instructions that are floating point.
    pub fp_fraction: f64,
    /// Code footprint in pages (for SuperFunction-level policies; unused by the contention model).
    #[serde(default)]
    pub code_pages: u32,
    /// Second-model description; a profile without one runs under v2 with its v1 values
    /// (`cpi_core` as the whole core CPI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v2: Option<ProfileV2>,
}

/// How a program phase uses the machine under the second model: the non-memory components of
/// its CPI are separate, so IPC and bus use are different signals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileV2 {
    /// CPI with perfect caches and branch prediction (issue width and integer dependencies).
    pub base_cpi: f64,
    /// Mispredicted branches per thousand instructions (times the machine's penalty).
    pub branch_mpki: f64,
    /// Exposed latency per FP instruction on dependency chains, in cycles.
    pub fp_dep_cycles: f64,
    /// LLC accesses (L1 misses) per thousand instructions.
    pub llc_apki: f64,
    /// Miss ratio as a function of the LLC capacity held (a stack-distance profile).
    pub miss_curve: MissCurve,
    /// Average overlapping misses (memory-level parallelism), >= 1.
    pub mlp: f64,
    /// Share of the lines a miss evicts that are dirty: each costs a second bus transfer.
    pub writeback_fraction: f64,
    /// Share of the LLC misses that belong to small-stride streams (array sweeps) a hardware
    /// prefetcher can follow; pointer chasing and large strides are the rest.
    #[serde(default)]
    pub stream_fraction: f64,
    /// Concurrent streams those misses come from (arrays swept together in the hot loops).
    #[serde(default)]
    pub streams: f64,
    /// Lines per thousand instructions that devices move over the bus on the task's behalf
    /// (a NIC's DMA of the data a server sends): load on the bus that stalls no core and is
    /// not in the task's own counters (a processor counts its own bus transactions).
    #[serde(default)]
    pub dma_lines_pki: f64,
}

impl ProfileV2 {
    /// The core CPI on a machine with `phys` (perfect LLC): the sum of the non-memory
    /// components — issue/dependency base, branch mispredictions times the pipeline refill,
    /// exposed FP latency, and LLC hits exposed like misses (divided by the demand overlap).
    pub fn core_cpi(&self, fp_fraction: f64, phys: &PhysicsV2) -> f64 {
        self.core_cpi_at(fp_fraction, phys, self.mlp)
    }
    /// The core CPI with the LLC hits overlapped `mlp` at a time.
    fn core_cpi_at(&self, fp_fraction: f64, phys: &PhysicsV2, mlp: f64) -> f64 {
        self.execution_cpi(fp_fraction, phys)
            + self.branch_mpki / 1000.0 * phys.branch_penalty_cycles
            + self.llc_apki / 1000.0 * phys.llc_hit_cycles / mlp
    }
    /// The program's own issue and FP dependency time per instruction on the machine's core:
    /// `core_cpi_scale x (base_cpi + fp_fraction x fp_dep_cycles)`.
    fn execution_cpi(&self, fp_fraction: f64, phys: &PhysicsV2) -> f64 {
        phys.core_cpi_scale * (self.base_cpi + fp_fraction * self.fp_dep_cycles)
    }
    /// Share of the LLC misses the hardware prefetcher covers: the stream misses, of which
    /// only the streams it can track (`prefetch_streams` of `streams`).
    pub fn prefetch_coverage(&self, phys: &PhysicsV2) -> f64 {
        if self.stream_fraction <= 0.0 {
            return 0.0;
        }
        let tracked = if self.streams > phys.prefetch_streams {
            phys.prefetch_streams / self.streams
        } else {
            1.0
        };
        (self.stream_fraction * tracked).clamp(0.0, 1.0)
    }
    /// Effective memory-level parallelism with the machine's prefetcher: a covered miss finds
    /// `1 + prefetch_depth_lines` lines of its stream in flight, so its exposed latency is
    /// that much shorter than a demand miss's; the harmonic mix of the two kinds of misses.
    /// Never below the program's own `mlp` (prefetching only hides latency).
    pub fn effective_mlp(&self, phys: &PhysicsV2) -> f64 {
        self.effective_mlp_of(self.mlp, phys)
    }
    /// The demand overlap beside a running SMT sibling: the first miss is exposed whatever the
    /// window, the `mlp - 1` further misses overlapped with it are the independent ones the
    /// window holds, and the thread keeps `smt_window_share` of the window
    /// (`PhysicsV2::smt_window_share`): `1 + (mlp - 1) x share`. Pointer chasing (mlp near 1)
    /// loses almost nothing; an array sweep loses half of what its window found beyond the
    /// first miss.
    pub fn smt_mlp(&self, phys: &PhysicsV2) -> f64 {
        smt_mlp_of(self.mlp, phys)
    }
    /// [`Self::effective_mlp`] beside a running SMT sibling: the window's overlap shrinks
    /// ([`Self::smt_mlp`]) for every miss, a covered one's too (`effective_mlp` multiplies the
    /// window's overlap by the prefetcher's lead); the lead itself, `1 + depth` lines in
    /// flight, is kept (the prefetcher runs from the L2, outside the window).
    pub fn smt_effective_mlp(&self, phys: &PhysicsV2) -> f64 {
        self.effective_mlp_of(self.smt_mlp(phys), phys)
    }
    fn effective_mlp_of(&self, mlp: f64, phys: &PhysicsV2) -> f64 {
        let c = self.prefetch_coverage(phys);
        let ahead = 1.0 + phys.prefetch_depth_lines.max(0.0);
        1.0 / ((1.0 - c) / mlp + c / (mlp * ahead))
    }
    /// [`Self::core_cpi`] beside a running SMT sibling: the LLC hits' exposed latency is
    /// overlapped as the misses' is, with the smaller window's overlap.
    pub fn smt_core_cpi(&self, fp_fraction: f64, phys: &PhysicsV2) -> f64 {
        self.core_cpi_at(fp_fraction, phys, self.smt_mlp(phys))
    }
    /// Lines the bus moves per LLC miss on a machine with `phys`: the missed line, the
    /// sector's other lines where nothing uses them (the non-stream share: a stream's next
    /// line is its next miss, already counted), and the dirty victim written back.
    pub fn lines_per_miss(&self, phys: &PhysicsV2) -> f64 {
        self.lines_per_read_miss(phys) + self.writeback_fraction
    }
    /// Lines one read miss brings in: the missed line and the sector's other lines where no
    /// stream uses them (the stream share standing for spatial locality is an estimate).
    fn lines_per_read_miss(&self, phys: &PhysicsV2) -> f64 {
        1.0 + (phys.lines_per_read - 1.0).max(0.0) * (1.0 - self.stream_fraction)
    }
    /// Bytes of cache each byte of the program's data takes on a machine with `phys`: 1 on a
    /// cache of lines; on a sectored LLC (`PhysicsV2::sectored_llc`) the lines per frame the
    /// program's reads fill, `1 + (lines_per_read - 1)(1 - stream_fraction)`: a stream fills
    /// a frame with its own lines, any other miss holds a frame for one line. It is the read
    /// part of [`Self::lines_per_miss`]: the lines the bus brings in are the lines the cache
    /// holds. The engine stretches the miss curve by it (`MissCurve::stretched`) and counts
    /// that many lines of occupancy per miss.
    pub fn sector_footprint(&self, phys: &PhysicsV2) -> f64 {
        if phys.sectored_llc {
            self.lines_per_read_miss(phys)
        } else {
            1.0
        }
    }
    /// Check the parameters; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        for (v, n) in [
            (self.base_cpi, "v2.base_cpi"),
            (self.branch_mpki, "v2.branch_mpki"),
            (self.fp_dep_cycles, "v2.fp_dep_cycles"),
            (self.llc_apki, "v2.llc_apki"),
            (self.writeback_fraction, "v2.writeback_fraction"),
            (self.stream_fraction, "v2.stream_fraction"),
            (self.streams, "v2.streams"),
            (self.dma_lines_pki, "v2.dma_lines_pki"),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{n} must be a non-negative number, got {v}"));
            }
        }
        if self.base_cpi <= 0.0 {
            return Err(format!(
                "v2.base_cpi must be positive, got {}",
                self.base_cpi
            ));
        }
        if !(self.mlp.is_finite() && self.mlp >= 1.0) {
            return Err(format!("v2.mlp must be >= 1, got {}", self.mlp));
        }
        if self.writeback_fraction > 1.0 {
            return Err(format!(
                "v2.writeback_fraction must be in [0, 1], got {}",
                self.writeback_fraction
            ));
        }
        if self.stream_fraction > 1.0 {
            return Err(format!(
                "v2.stream_fraction must be in [0, 1], got {}",
                self.stream_fraction
            ));
        }
        self.miss_curve.validate()
    }
}

impl Profile {
    /// The CPI with a perfect LLC this profile runs at on `spec` under `model`: under v2 a
    /// profile with a v2 description takes its core CPI from the machine's physics
    /// (`ProfileV2::core_cpi`); any other keeps its one `cpi_core`. What the engine retires
    /// against, and what a program's CPI alone above it (its memory time) is measured from.
    pub fn core_cpi_on(&self, spec: &MachineSpec, model: Model) -> f64 {
        match (model, &self.v2) {
            (Model::V2, Some(v)) => v.core_cpi(self.fp_fraction, &spec.v2),
            _ => self.cpi_core,
        }
    }

    /// Check the profile's parameters; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.cpi_core.is_finite() && self.cpi_core > 0.0) {
            return Err(format!("cpi_core must be positive, got {}", self.cpi_core));
        }
        if !(self.llc_apki.is_finite() && self.llc_apki >= 0.0) {
            return Err(format!("llc_apki must be >= 0, got {}", self.llc_apki));
        }
        if !(self.mlp.is_finite() && self.mlp >= 1.0) {
            return Err(format!("mlp must be >= 1, got {}", self.mlp));
        }
        if !(self.fp_fraction >= 0.0 && self.fp_fraction <= 1.0) {
            return Err(format!(
                "fp_fraction must be in [0, 1], got {}",
                self.fp_fraction
            ));
        }
        self.miss_curve.validate()?;
        match &self.v2 {
            Some(v) => v.validate(),
            None => Ok(()),
        }
    }
}

/// A stretch of a program with one profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Instructions in the phase.
    pub instructions: u64,
    /// How the phase behaves.
    pub profile: Profile,
}

/// A program: phases run in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Program {
    /// Catalog name.
    pub name: String,
    /// Phases, run in order.
    pub phases: Vec<Phase>,
}

impl Program {
    /// Instructions of the whole program.
    pub fn instructions(&self) -> u64 {
        self.phases.iter().map(|p| p.instructions).sum()
    }
}

/// One class of server request: its weight in the mix and its work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestClass {
    /// Class name.
    pub name: String,
    /// Relative frequency of the class.
    pub weight: f64,
    /// Instructions per request.
    pub instructions: u64,
    /// How a request behaves.
    pub profile: Profile,
}

/// A server: a stream of requests drawn (seeded) from its classes, processed back to back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// Catalog name.
    pub name: String,
    /// Request classes.
    pub classes: Vec<RequestClass>,
}

/// Parameters of the Linux-like baseline scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedParams {
    /// Round-robin time slice (Linux 2.6 O(1): 100 ms at nice 0).
    #[serde(default = "timeslice")]
    pub timeslice_ms: f64,
    /// Relative jitter of each slice (timer and interrupt noise), drawn from the seed; 0 keeps
    /// the CPUs' round-robin rotations aligned, as Linux 2.6's fixed 100-tick slices do.
    #[serde(default = "jitter")]
    pub timeslice_jitter: f64,
    /// Period of the run-queue-length load balancer.
    #[serde(default = "balance")]
    pub balance_interval_ms: f64,
}

fn timeslice() -> f64 {
    100.0
}
fn jitter() -> f64 {
    // Linux 2.6's O(1) scheduler gives nice-0 tasks exactly 100 ticks; slices do not drift.
    0.0
}
fn balance() -> f64 {
    200.0
}

impl Default for SchedParams {
    fn default() -> Self {
        Self {
            timeslice_ms: timeslice(),
            timeslice_jitter: jitter(),
            balance_interval_ms: balance(),
        }
    }
}

/// Longest time slice or balancing interval a scenario may ask for, in ms (11.6 days): far
/// beyond any run, and far from where nanoseconds overflow a u64 (where a slice would wrap).
pub const MAX_SCHED_INTERVAL_MS: f64 = 1e9;

impl SchedParams {
    /// Check the parameters; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        self.check().map_err(|(_, message)| message)
    }

    /// Check the parameters: the first bad one's key and a message naming it (a scenario file
    /// points its error at that key).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.timeslice_ms.is_finite() && self.timeslice_ms > 0.0) {
            return Err((
                "timeslice_ms",
                format!("timeslice_ms must be positive, got {}", self.timeslice_ms),
            ));
        }
        for (name, v) in [
            ("timeslice_ms", self.timeslice_ms),
            ("balance_interval_ms", self.balance_interval_ms),
        ] {
            if v > MAX_SCHED_INTERVAL_MS {
                return Err((
                    name,
                    format!("{name} must be at most {MAX_SCHED_INTERVAL_MS:e} ms, got {v}"),
                ));
            }
        }
        if !(self.timeslice_jitter >= 0.0 && self.timeslice_jitter < 1.0) {
            return Err((
                "timeslice_jitter",
                format!(
                    "timeslice_jitter must be in [0, 1), got {}",
                    self.timeslice_jitter
                ),
            ));
        }
        if !(self.balance_interval_ms.is_finite() && self.balance_interval_ms > 0.0) {
            return Err((
                "balance_interval_ms",
                format!(
                    "balance_interval_ms must be positive, got {}",
                    self.balance_interval_ms
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scaled(k)` multiplies every miss ratio by `k` and keeps the curve's shape; a table's or
    /// power law's ratio stops at 1.
    #[test]
    fn scaled_curves_multiply_every_miss_ratio() {
        let knees = MissCurve::Knees {
            floor: 0.05,
            sets: vec![(256.0 * 1024.0, 0.2), (4.0 * 1024.0 * 1024.0, 0.3)],
            sharpness: 3.0,
        };
        let table = MissCurve::Table {
            points: vec![(1024.0, 0.9), (1024.0 * 1024.0, 0.1)],
        };
        let power = MissCurve::PowerLaw {
            m_ref: 0.4,
            c_ref_bytes: 1024.0 * 1024.0,
            alpha: 0.5,
            m_min: 0.05,
        };
        for c in [1e3, 64e3, 512e3, 2e6, 16e6, 1e9] {
            for k in [0.1, 0.5, 1.0, 1.5] {
                let (a, b) = (knees.miss_ratio(c), knees.scaled(k).miss_ratio(c));
                assert!(
                    (b - k * a).abs() <= 1e-12 * a.max(1e-300),
                    "knees at {c}: {a} x {k} -> {b}"
                );
                // From its first point on (below it a table still rises to 1 at no cache), and
                // where no point is capped (then the capped points are interpolated).
                if c >= 1024.0 && k * 0.9 <= 1.0 {
                    let t = table.scaled(k).miss_ratio(c);
                    let want = (k * table.miss_ratio(c)).min(1.0);
                    assert!(
                        t <= 1.0 && (t - want).abs() < 1e-12,
                        "table at {c}: {t} {want}"
                    );
                }
                let p = power.scaled(k).miss_ratio(c);
                assert!(
                    p <= 1.0 && p >= 0.05 * k - 1e-12,
                    "power law at {c} x {k}: {p}"
                );
            }
        }
        assert_eq!(table.scaled(2.0).miss_ratio(0.0), 1.0);
    }

    /// `stretched(k)` moves every capacity by `k` and nothing else: `m'(k c) = m(c)` for the
    /// three shapes, and `k = 1` is the curve itself.
    #[test]
    fn stretched_curves_move_capacities_only() {
        let knees = MissCurve::Knees {
            floor: 0.02,
            sets: vec![(256.0 * 1024.0, 0.12), (1536.0 * 1024.0, 0.10)],
            sharpness: 3.0,
        };
        let table = MissCurve::Table {
            points: vec![(0.0, 1.0), (65536.0, 0.5), (1048576.0, 0.1)],
        };
        let power = MissCurve::PowerLaw {
            m_ref: 0.3,
            c_ref_bytes: 524288.0,
            alpha: 0.5,
            m_min: 0.05,
        };
        for curve in [knees, table, power] {
            assert_eq!(curve.stretched(1.0), curve);
            for k in [1.05, 1.5, 1.9, 2.0] {
                let s = curve.stretched(k);
                for c in [1000.0, 100e3, 400e3, 1.1e6, 5e6] {
                    let (a, b) = (curve.miss_ratio(c), s.miss_ratio(k * c));
                    assert!(
                        (a - b).abs() <= 1e-12 * a.max(1e-300),
                        "{curve:?} k {k} c {c}"
                    );
                    assert!(s.miss_ratio(c) >= a, "a stretched curve never misses less");
                }
            }
        }
    }

    /// `sectored_llc` is read from a machine's `v2` table, defaults to off, and is left out
    /// of a serialized machine that has it off (so machines written before it read the same).
    #[test]
    fn sectored_llc_reads_and_defaults_off() {
        let m = crate::catalog::Catalog::builtin()
            .machine("zhang-smp")
            .unwrap();
        let json = serde_json::to_string(&m).unwrap();
        assert!(!json.contains("sectored_llc"), "{json}");
        let back: MachineSpec = serde_json::from_str(&json).unwrap();
        assert!(!back.v2.sectored_llc);
        let on = json.replacen(
            "\"lines_per_read\":",
            "\"sectored_llc\":true,\"lines_per_read\":",
            1,
        );
        assert_ne!(on, json);
        let back: MachineSpec = serde_json::from_str(&on).unwrap();
        assert!(back.v2.sectored_llc);
        assert_eq!(back.v2.lines_per_read, 2.0);
    }

    /// `smt_window_share` defaults to half when a machine file leaves it out (Intel's static
    /// partition), and a share outside (0, 1] is refused by name.
    #[test]
    fn smt_window_share_defaults_to_half_and_is_checked() {
        let m = crate::catalog::Catalog::builtin()
            .machine("x5650-2s")
            .unwrap();
        let json = serde_json::to_string(&m).unwrap();
        let without = json.replacen(",\"smt_window_share\":0.5", "", 1);
        assert_ne!(json, without, "{json}");
        let back: MachineSpec = serde_json::from_str(&without).unwrap();
        assert_eq!(back.v2.smt_window_share, 0.5);
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            let mut m = m.clone();
            m.v2.smt_window_share = bad;
            let e = m.validate().unwrap_err();
            assert!(e.contains("v2.smt_window_share"), "{e}");
        }
        let mut whole = m.clone();
        whole.v2.smt_window_share = 1.0;
        assert!(whole.validate().is_ok());
    }

    /// Without sectored tags a program's data takes its own bytes of cache; with them, the
    /// read part of its bus lines per miss.
    #[test]
    fn sector_footprint_is_the_read_part_of_the_lines_per_miss() {
        let mut phys = PhysicsV2 {
            lines_per_read: 2.0,
            ..PhysicsV2::default()
        };
        let v = crate::catalog::spec_v2_estimate("parser").unwrap();
        assert_eq!(v.sector_footprint(&phys), 1.0);
        phys.sectored_llc = true;
        let k = v.sector_footprint(&phys);
        assert!((k - (2.0 - v.stream_fraction)).abs() < 1e-15, "{k}");
        assert!((v.lines_per_miss(&phys) - k - v.writeback_fraction).abs() < 1e-15);
        phys.lines_per_read = 1.0;
        assert_eq!(v.sector_footprint(&phys), 1.0);
    }

    #[test]
    fn power_law_is_clamped_and_decreasing() {
        let c = MissCurve::PowerLaw {
            m_ref: 0.4,
            c_ref_bytes: 1024.0 * 1024.0,
            alpha: 0.5,
            m_min: 0.05,
        };
        assert_eq!(c.miss_ratio(0.0), 1.0);
        assert!((c.miss_ratio(1024.0 * 1024.0) - 0.4).abs() < 1e-12);
        assert!((c.miss_ratio(4.0 * 1024.0 * 1024.0) - 0.2).abs() < 1e-12);
        assert_eq!(c.miss_ratio(1e12), 0.05);
        assert_eq!(c.miss_ratio(1.0), 1.0);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn stack_distance_table_interpolates() {
        let c = MissCurve::Table {
            points: vec![(1000.0, 0.5), (3000.0, 0.1)],
        };
        assert!((c.miss_ratio(0.0) - 1.0).abs() < 1e-12);
        assert!((c.miss_ratio(500.0) - 0.75).abs() < 1e-12);
        assert!((c.miss_ratio(2000.0) - 0.3).abs() < 1e-12);
        assert_eq!(c.miss_ratio(1e9), 0.1);
        assert!(c.validate().is_ok());
        let bad = MissCurve::Table {
            points: vec![(1000.0, 0.1), (3000.0, 0.5)],
        };
        assert!(bad.validate().unwrap_err().contains("must not increase"));
        let bad = MissCurve::Table { points: vec![] };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn profile_and_machine_validation_name_the_field() {
        let mut p = Profile {
            cpi_core: 1.0,
            llc_apki: 1.0,
            miss_curve: MissCurve::Table {
                points: vec![(1.0, 0.5)],
            },
            mlp: 0.5,
            fp_fraction: 0.0,
            code_pages: 0,
            v2: None,
        };
        assert!(p.validate().unwrap_err().contains("mlp"));
        p.mlp = 1.0;
        p.fp_fraction = 1.5;
        assert!(p.validate().unwrap_err().contains("fp_fraction"));
        let m = MachineSpec {
            name: "m".into(),
            packages: 1,
            cores_per_package: 3,
            threads_per_core: 1,
            llc_domains_per_package: 2,
            llc_bytes: 1 << 20,
            line_bytes: 64,
            freq_ghz: 2.0,
            mem_latency_ns: 100.0,
            memory: MemoryKind::SharedBus,
            peak_bandwidth_gb_per_s: 1.0,
            rho_cap: 0.95,
            smt: SmtSpec::default(),
            model: Model::V1,
            v2: PhysicsV2::default(),
        };
        assert!(m
            .validate()
            .unwrap_err()
            .contains("llc_domains_per_package"));
        let m = MachineSpec {
            llc_domains_per_package: 1,
            rho_cap: 1.0,
            ..m
        };
        assert!(m.validate().unwrap_err().contains("rho_cap"));
        for bad in [0.5, 17.0, f64::NAN] {
            let m = MachineSpec {
                rho_cap: 0.95,
                v2: PhysicsV2 {
                    lines_per_read: bad,
                    ..PhysicsV2::default()
                },
                ..m.clone()
            };
            assert!(
                m.validate().unwrap_err().contains("v2.lines_per_read"),
                "{bad}"
            );
        }
    }
}
