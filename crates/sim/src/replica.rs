//! Replicated execution on the simulated machine (seed 001, Döbel & Härtig).
//!
//! A replica group is N copies of one program, each with its own memory (replicated, as
//! Romain does), that meet at every externalization event — a system call or fault, every
//! `sync_every_instructions` on average. At each meeting the slowest replica sets the pace, the
//! master compares states (~100 cycles) and notifies the replicas, at a cost that grows with
//! the distance between the master's CPU (replica 0's) and the farthest replica's.
//!
//! The model is a composition, so the engine is not touched:
//!
//! 1. **compute**: the replicas run pinned on their CPUs in the ordinary engine, which gives
//!    each one's CPI with its co-replicas in the same LLC (frequency-of-access sharing of the
//!    cache model, the shared memory controller, SMT siblings when placed there). The program
//!    alone on the same machine gives the native CPI.
//! 2. **synchronize**: over `I` instructions there are `S ~ Poisson(I / K)` meetings (drawn
//!    from the seed: system calls do not come at fixed strides), each costing
//!    `compare + max_i notify(distance(master, replica_i))` cycles on the critical path.
//!    Replicated time = `max_i(I · CPI_i) + S · sync cost`; overhead = that over `I · CPI_native`,
//!    minus one.
//!
//! What it leaves out: during a meeting the replicas stall and issue no cache accesses, which
//! would lower their pressure on the memory controller; the engine sees them running
//! continuously. Identical replicas stall together, so their LLC shares do not change; only the
//! memory queueing is overstated, by up to the fraction of time spent in meetings (about 1 %
//! for the SPEC-like programs at their estimated rates; most of the time at the map's
//! meeting-every-10^4-instructions column, where the sync side dominates anyway).

use crate::catalog::Catalog;
use crate::engine::{Counters, Simulation};
use crate::scenario::Scenario;
use crate::spec::MachineSpec;
use crate::SimError;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::Topology;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Distance between two CPUs as the notification cost sees it (the same names as
/// `bench c2c`'s JSON).
pub use counterpoint_core::topology::CpuDistance as Distance;

/// Distance between two CPUs of a topology (`a == b` counts as the same core; a simulated
/// machine places every CPU, so the fallback is never taken there).
pub fn distance(t: &Topology, a: CpuId, b: CpuId) -> Distance {
    if a == b {
        return Distance::SmtSibling;
    }
    t.distance(a, b).unwrap_or(Distance::SamePackage)
}

/// Cycles of one notification (the master waking a blocked replica) by distance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotifyCosts {
    /// Same core.
    pub smt_sibling_cycles: f64,
    /// Same LLC.
    pub same_llc_cycles: f64,
    /// Same package.
    pub same_package_cycles: f64,
    /// Other package.
    pub other_package_cycles: f64,
    /// Where the figures come from.
    pub source: String,
    /// Distances not measured in the source, filled from the nearest measured one.
    pub assumed: Vec<Distance>,
}

/// Seed 001's notification costs on its two-socket Xeon X5650: ~2,000 cycles on the local
/// core, ~6,000 on the socket, ~14,300 across sockets (the X5650 has one L3 per socket, so
/// "same LLC" and "same package" are the same figure).
pub const SEED_X5650: [f64; 3] = [2_000.0, 6_000.0, 14_300.0];

/// State comparison at a meeting (seed 001: ~100 cycles).
pub const COMPARE_CYCLES: f64 = 100.0;

/// Why a notification-cost file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// Not JSON, or not a `bench c2c` document.
    #[error("{file}: not a `counterpoint bench c2c --json` document: {msg}")]
    BadC2c {
        /// The file.
        file: String,
        /// Why.
        msg: String,
    },
    /// A machine without notification costs and no file given.
    #[error(
        "machine {0:?} has no notification costs in the catalog; give a `bench c2c --json` file"
    )]
    NoCosts(String),
    /// A placement the machine cannot hold.
    #[error("placement: {0}")]
    Placement(String),
    /// The engine refused.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// The longest futex round trip a `bench c2c` file may give (ns): a second. A wake-up between
/// cores takes microseconds; a file with 1e300 ran the experiment to overheads of 1e293 %
/// and null spreads (CLI probe, session 24).
const MAX_FUTEX_ROUND_TRIP_NS: f64 = 1e9;
/// The shortest (ns): a futex wake-up is two system calls and a cache line between cores,
/// hundreds of nanoseconds at the least; 1e-300 gave notifications of 0 cycles (CLI probe,
/// session 27).
const MIN_FUTEX_ROUND_TRIP_NS: f64 = 10.0;

#[derive(Deserialize)]
struct C2cDoc {
    schema: u32,
    groups: Vec<C2cGroup>,
}
#[derive(Deserialize)]
struct C2cGroup {
    distance: Distance,
    futex_median_ns: f64,
}

impl NotifyCosts {
    /// Seed 001's figures for its X5650 platform.
    pub fn seed_x5650() -> Self {
        let [core, socket, cross] = SEED_X5650;
        NotifyCosts {
            smt_sibling_cycles: core,
            same_llc_cycles: socket,
            same_package_cycles: socket,
            other_package_cycles: cross,
            source: "seed 001 (Döbel & Härtig 2013), Xeon X5650".into(),
            assumed: vec![],
        }
    }

    /// The catalog's costs for a machine: seed 001's for `x5650-2s`, none otherwise.
    pub fn for_machine(machine: &str) -> Option<Self> {
        (machine == "x5650-2s").then(Self::seed_x5650)
    }

    /// Costs from `counterpoint bench c2c --json` output: one notification is one futex
    /// wake-up, half the measured median futex round trip, converted to cycles of the
    /// simulated machine's clock (`freq_ghz`). Distances the host did not have take the
    /// nearest measured distance's figure (farther first) and are listed in `assumed`.
    pub fn from_c2c_json(text: &str, file: &str, freq_ghz: f64) -> Result<Self, ReplicaError> {
        let bad = |msg: String| ReplicaError::BadC2c {
            file: file.into(),
            msg,
        };
        let doc: C2cDoc = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if doc.schema != 1 {
            return Err(bad(format!("schema {} (this reader knows 1)", doc.schema)));
        }
        let mut measured: [Option<f64>; 4] = [None; 4];
        for (k, g) in doc.groups.iter().enumerate() {
            // The file's own names (`smt_sibling`), not the enum's.
            let at = format!("groups[{k}] ({})", g.distance.name());
            if !(g.futex_median_ns.is_finite() && g.futex_median_ns > 0.0) {
                return Err(bad(format!(
                    "{at}.futex_median_ns = {} is not a positive time",
                    g.futex_median_ns
                )));
            }
            if g.futex_median_ns > MAX_FUTEX_ROUND_TRIP_NS {
                return Err(bad(format!(
                    "{at}.futex_median_ns = {:e} ns is not a futex round trip (at most \
                     {MAX_FUTEX_ROUND_TRIP_NS:e} ns, a second; a core-to-core wake-up takes \
                     microseconds)",
                    g.futex_median_ns
                )));
            }
            if g.futex_median_ns < MIN_FUTEX_ROUND_TRIP_NS {
                return Err(bad(format!(
                    "{at}.futex_median_ns = {:e} ns is not a futex round trip (at least \
                     {MIN_FUTEX_ROUND_TRIP_NS} ns: two system calls and a cache line between \
                     cores take hundreds)",
                    g.futex_median_ns
                )));
            }
            let i = Distance::ALL
                .iter()
                .position(|d| *d == g.distance)
                .unwrap_or(0);
            // A second group for a distance silently replaced the first (CLI probe).
            if measured[i].is_some() {
                return Err(bad(format!(
                    "{at}: distance {} is given twice (one group per distance)",
                    g.distance.name()
                )));
            }
            measured[i] = Some(g.futex_median_ns / 2.0 * freq_ghz);
        }
        if measured.iter().all(Option::is_none) {
            return Err(bad("no distance group measured".into()));
        }
        let mut assumed = Vec::new();
        let mut v = [0.0; 4];
        for i in 0..4 {
            v[i] = match measured[i] {
                Some(x) => x,
                None => {
                    assumed.push(Distance::ALL[i]);
                    // Nearest measured: look farther first, then nearer.
                    let far = (i + 1..4).find_map(|j| measured[j]);
                    let near = (0..i).rev().find_map(|j| measured[j]);
                    far.or(near).unwrap_or(0.0)
                }
            };
        }
        Ok(NotifyCosts {
            smt_sibling_cycles: v[0],
            same_llc_cycles: v[1],
            same_package_cycles: v[2],
            other_package_cycles: v[3],
            source: format!("bench c2c file {file} (half the futex round trip)"),
            assumed,
        })
    }

    /// Cycles for one notification at `d`.
    pub fn cycles(&self, d: Distance) -> f64 {
        match d {
            Distance::SmtSibling => self.smt_sibling_cycles,
            Distance::SameLlc => self.same_llc_cycles,
            Distance::SamePackage => self.same_package_cycles,
            Distance::OtherPackage => self.other_package_cycles,
        }
    }
}

/// A replicated program: a catalog program and how often its replicas meet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaProgram {
    /// Catalog program name.
    pub program: String,
    /// Mean instructions between meetings (system calls and faults Romain intercepts).
    pub sync_every_instructions: f64,
}

/// SPEC INT 2006 programs of seed 001 with their mean instructions between meetings. All
/// **estimated** (docs/replica.md): order of magnitude from each program's system calls and
/// page faults (input read once, output written in chunks, heap growth), not measured.
pub const SPEC_INT_2006_SYNC: &[(&str, f64)] = &[
    ("400.perlbench", 2e6),
    ("401.bzip2", 5e7),
    ("403.gcc", 3e6),
    ("429.mcf", 2e8),
    ("445.gobmk", 2e7),
    ("456.hmmer", 1e8),
    ("458.sjeng", 5e8),
    ("462.libquantum", 2e8),
    ("464.h264ref", 2e7),
    ("471.omnetpp", 5e6),
    ("473.astar", 1e8),
    ("483.xalancbmk", 5e6),
];

/// The SPEC INT 2006 replica programs.
pub fn spec_int_2006() -> Vec<ReplicaProgram> {
    SPEC_INT_2006_SYNC
        .iter()
        .map(|&(p, k)| ReplicaProgram {
            program: p.into(),
            sync_every_instructions: k,
        })
        .collect()
}

/// Where the replicas go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementKind {
    /// Distinct cores of one package (one LLC on the seed's machine).
    SameSocket,
    /// Replica i on package i mod P, distinct cores.
    Spread,
}

impl PlacementKind {
    /// As printed.
    pub fn name(self) -> &'static str {
        match self {
            PlacementKind::SameSocket => "same-socket",
            PlacementKind::Spread => "spread",
        }
    }
}

/// The CPUs of `n` replicas under a placement: first hardware thread of distinct cores.
pub fn place(t: &Topology, n: usize, kind: PlacementKind) -> Result<Vec<CpuId>, ReplicaError> {
    let packages = t.packages();
    // First thread of each core, per package, in core order.
    let mut per_pkg: Vec<Vec<CpuId>> = packages
        .iter()
        .map(|&p| {
            let cpus = t.package_cpus(p);
            t.cores()
                .iter()
                .filter(|core| core.iter().all(|c| cpus.contains(c)))
                .filter_map(|core| core.first())
                .collect()
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let p = match kind {
            PlacementKind::SameSocket => 0,
            PlacementKind::Spread => i % per_pkg.len().max(1),
        };
        let Some(slot) = per_pkg.get_mut(p).filter(|v| !v.is_empty()) else {
            return Err(ReplicaError::Placement(format!(
                "{n} replicas do not fit {} with one core each",
                kind.name()
            )));
        };
        out.push(slot.remove(0));
    }
    Ok(out)
}

/// Engine run lengths for the compute part.
#[derive(Clone, Copy, Debug)]
pub struct RunLengths {
    /// Simulated time before measuring (caches warm up).
    pub warm_ms: u64,
    /// Simulated time measured.
    pub measure_ms: u64,
}

impl Default for RunLengths {
    fn default() -> Self {
        RunLengths {
            warm_ms: 1_000,
            measure_ms: 2_000,
        }
    }
}

/// What the engine says about tasks pinned to `cpus`, all running `program`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComputeResult {
    /// CPI of each replica.
    pub cpi: Vec<f64>,
    /// LLC misses per kilo-instruction of each replica.
    pub llc_mpki: Vec<f64>,
}

/// Run `program` pinned once on each of `cpus` and measure each copy's CPI and LLC MPKI after
/// warm-up.
pub fn compute(
    catalog: &Catalog,
    machine: &str,
    program: &str,
    cpus: &[CpuId],
    lengths: RunLengths,
) -> Result<ComputeResult, ReplicaError> {
    let mut b = Scenario::builder(catalog, machine)
        .map_err(|e| SimError::Invalid(e.to_string()))?
        .name("replica")
        .duration_ms(lengths.warm_ms + lengths.measure_ms)
        .epoch_ms(lengths.measure_ms);
    for &c in cpus {
        b = b
            .task(program, Some(CpuSet::single(c)))
            .map_err(|e| SimError::Invalid(e.to_string()))?;
    }
    let sc = b.build().map_err(SimError::from)?;
    let mut sim = Simulation::new(&sc, 0)?;
    let mut deltas: Vec<Counters> = Vec::new();
    let mut bus = Vec::new();
    sim.advance_quiet(lengths.warm_ms * 1_000_000, None);
    sim.take_interval(&mut deltas, &mut bus);
    sim.advance_quiet(lengths.measure_ms * 1_000_000, None);
    sim.take_interval(&mut deltas, &mut bus);
    let mut cpi = Vec::new();
    let mut mpki = Vec::new();
    for d in &deltas {
        if d.instructions <= 0.0 {
            return Err(ReplicaError::Sim(SimError::Invalid(format!(
                "{program} retired nothing on {machine}"
            ))));
        }
        cpi.push(d.cycles / d.instructions);
        mpki.push(d.llc_misses / d.instructions * 1000.0);
    }
    Ok(ComputeResult {
        cpi,
        llc_mpki: mpki,
    })
}

/// One replicated run's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaOutcome {
    /// The placement.
    pub placement: PlacementKind,
    /// CPUs of the replicas (replica 0 hosts the master).
    pub cpus: Vec<CpuId>,
    /// CPI alone on the machine.
    pub native_cpi: f64,
    /// LLC MPKI alone.
    pub native_llc_mpki: f64,
    /// Slowest replica's CPI in this placement.
    pub replica_cpi: f64,
    /// Mean LLC MPKI of the replicas in this placement.
    pub replica_llc_mpki: f64,
    /// Meetings over the run (drawn).
    pub syncs: u64,
    /// Cycles of one meeting (compare + farthest notification).
    pub sync_cycles: f64,
    /// Replicated time over native time, minus one.
    pub overhead: f64,
    /// Part of the overhead from the meetings.
    pub sync_overhead: f64,
    /// Part of the overhead from the slower compute (caches, memory).
    pub compute_overhead: f64,
}

/// Combine the engine's compute results with the meetings of a run of `instructions`.
#[allow(clippy::too_many_arguments)]
pub fn combine(
    t: &Topology,
    placement: PlacementKind,
    cpus: &[CpuId],
    native: &ComputeResult,
    replicas: &ComputeResult,
    costs: &NotifyCosts,
    sync_every_instructions: f64,
    instructions: f64,
    seed: u64,
) -> ReplicaOutcome {
    let master = cpus.first().copied().unwrap_or(0);
    let notify = cpus
        .iter()
        .skip(1)
        .map(|&c| costs.cycles(distance(t, master, c)))
        .fold(0.0, f64::max);
    let sync_cycles = COMPARE_CYCLES + notify;
    let syncs = poisson(instructions / sync_every_instructions, seed);
    let native_cpi = native.cpi.first().copied().unwrap_or(f64::NAN);
    let replica_cpi = replicas.cpi.iter().cloned().fold(0.0, f64::max);
    let native_cycles = instructions * native_cpi;
    let compute_cycles = instructions * replica_cpi;
    let sync_total = syncs as f64 * sync_cycles;
    let n = replicas.llc_mpki.len().max(1) as f64;
    ReplicaOutcome {
        placement,
        cpus: cpus.to_vec(),
        native_cpi,
        native_llc_mpki: native.llc_mpki.first().copied().unwrap_or(f64::NAN),
        replica_cpi,
        replica_llc_mpki: replicas.llc_mpki.iter().sum::<f64>() / n,
        syncs,
        sync_cycles,
        overhead: (compute_cycles + sync_total) / native_cycles - 1.0,
        sync_overhead: sync_total / native_cycles,
        compute_overhead: compute_cycles / native_cycles - 1.0,
    }
}

/// A Poisson draw with mean `lambda` (normal approximation above 1,000, exact below), from a
/// ChaCha8 stream of `seed`.
pub fn poisson(lambda: f64, seed: u64) -> u64 {
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0052_6570_6c69_6361);
    if !(lambda.is_finite() && lambda > 0.0) {
        return 0;
    }
    if lambda > 1_000.0 {
        // Box-Muller.
        let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.gen();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        return (lambda + z * lambda.sqrt()).round().max(0.0) as u64;
    }
    // Knuth's product of uniforms.
    let l = (-lambda).exp();
    let mut k = 0u64;
    let mut p = 1.0;
    loop {
        p *= rng.gen::<f64>();
        if p <= l {
            return k;
        }
        k += 1;
    }
}

/// A whole group on a machine under one placement: engine runs for the native and the
/// replicated compute, then the meetings.
#[derive(Clone, Debug)]
pub struct ReplicaRun<'a> {
    /// The catalog.
    pub catalog: &'a Catalog,
    /// Machine name in the catalog.
    pub machine: &'a str,
    /// Notification costs.
    pub costs: &'a NotifyCosts,
    /// Replicas in the group.
    pub replicas: usize,
    /// Engine run lengths.
    pub lengths: RunLengths,
    /// Instructions of the replicated run the meetings are drawn over.
    pub instructions: f64,
}

impl ReplicaRun<'_> {
    /// The machine spec and its topology.
    pub fn machine(&self) -> Result<(MachineSpec, Topology), ReplicaError> {
        let spec = self
            .catalog
            .machine(self.machine)
            .ok_or_else(|| SimError::Invalid(format!("unknown machine {:?}", self.machine)))?;
        let t = spec.topology().map_err(SimError::from)?;
        Ok((spec, t))
    }

    /// Native compute: the program alone on the first core.
    pub fn native(&self, program: &str) -> Result<ComputeResult, ReplicaError> {
        let (_, t) = self.machine()?;
        let cpus = place(&t, 1, PlacementKind::SameSocket)?;
        compute(self.catalog, self.machine, program, &cpus, self.lengths)
    }

    /// Replicated compute under a placement.
    pub fn replicated(
        &self,
        program: &str,
        kind: PlacementKind,
    ) -> Result<(Vec<CpuId>, ComputeResult), ReplicaError> {
        let (_, t) = self.machine()?;
        let cpus = place(&t, self.replicas, kind)?;
        let r = compute(self.catalog, self.machine, program, &cpus, self.lengths)?;
        Ok((cpus, r))
    }

    /// The whole outcome for one program, placement and seed.
    pub fn outcome(
        &self,
        p: &ReplicaProgram,
        kind: PlacementKind,
        seed: u64,
    ) -> Result<ReplicaOutcome, ReplicaError> {
        let (_, t) = self.machine()?;
        let native = self.native(&p.program)?;
        let (cpus, rep) = self.replicated(&p.program, kind)?;
        Ok(combine(
            &t,
            kind,
            &cpus,
            &native,
            &rep,
            self.costs,
            p.sync_every_instructions,
            self.instructions,
            seed,
        ))
    }
}
