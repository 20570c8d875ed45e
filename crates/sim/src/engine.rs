//! The tick engine: contention fixed point, counters, and the Linux-like baseline scheduler.
//!
//! State is kept in flat vectors indexed by CPU, task, LLC domain and bus; the per-tick loop
//! allocates nothing and uses no hash maps. The contention model is re-solved only when
//! something changed (a context switch, a phase change, a cache still warming up); otherwise a
//! tick just retires instructions at the rates of the last solution.

use crate::scenario::{Scenario, Workload};
use crate::spec::{MachineSpec, MemoryKind, MissCurve, Profile, SchedParams};
use crate::SimError;
use counterpoint_core::event;
use counterpoint_core::{
    Action, CounterValue, CpuId, CpuObservation, CpuSet, Machine, Observation, PickContext,
    PickNext, Sample, TaskId, TaskInfo, TaskObservation, TaskStats, Topology,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

const NONE: u32 = u32::MAX;
/// Cap on fixed-point iterations of the contention model per solve.
const FIXED_POINT_MAX_ITERS: usize = 100;
/// Converged when no CPI moves by more than this, relatively.
const FIXED_POINT_TOL: f64 = 1e-11;
/// Cap on Newton steps for a bus's latency (it converges in a handful).
const BUS_ITERS: usize = 60;

/// A profile with derived constants for the hot path.
#[derive(Clone, Debug)]
struct Prof {
    cpi_core: f64,
    /// LLC accesses per instruction.
    api: f64,
    curve: MissCurve,
    mlp: f64,
    fp: f64,
    /// Capacity beyond which more cache does not help (the curve's floor).
    saturation_bytes: f64,
}

impl Prof {
    fn new(p: &Profile) -> Self {
        let saturation_bytes = match &p.miss_curve {
            MissCurve::PowerLaw {
                m_ref,
                c_ref_bytes,
                alpha,
                m_min,
            } => {
                if *alpha <= 0.0 || *m_min <= 0.0 {
                    f64::INFINITY
                } else if m_ref <= m_min {
                    *c_ref_bytes
                } else {
                    c_ref_bytes * (m_ref / m_min).powf(1.0 / alpha)
                }
            }
            MissCurve::Table { points } => points.last().map_or(0.0, |p| p.0),
        };
        Self {
            cpi_core: p.cpi_core,
            api: p.llc_apki / 1000.0,
            curve: p.miss_curve.clone(),
            mlp: p.mlp,
            fp: p.fp_fraction,
            saturation_bytes,
        }
    }
}

/// Where a task's instructions come from.
#[derive(Clone, Debug)]
enum Source {
    /// Phases in order (a program or a shell); `bounds[i]` = true when phase i ends a program.
    Seq {
        phases: Vec<(u32, u64)>,
        ends_program: Vec<bool>,
        pos: usize,
    },
    /// Requests drawn from classes by cumulative weight.
    Server {
        classes: Vec<(f64, u32, u64)>,
        rng: Box<ChaCha8Rng>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    NotArrived,
    Queued,
    Running,
    Done,
}

/// Cumulative per-task counters (f64 where a tick retires fractions).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    pub cycles: f64,
    pub instructions: f64,
    pub llc_references: f64,
    pub llc_misses: f64,
    pub mem_transactions: f64,
    pub fp_ops: f64,
    pub task_clock_ns: u64,
    pub context_switches: u64,
    pub migrations: u64,
    /// Programs (or requests) completed.
    pub completions: u64,
}

#[derive(Clone, Debug)]
struct Task {
    name: String,
    label: String,
    affinity: CpuSet,
    /// Affinity as a bit vector over CPUs, for the scheduler's checks.
    mask: Vec<u64>,
    state: State,
    cpu: u32,
    last_cpu: u32,
    start_ns: u64,
    repeat: bool,
    src: Source,
    prof: u32,
    phase_left: f64,
    /// Bytes of the LLC the task holds in its domain (when running), or its stored share of the
    /// domain's idle pool (scaled lazily) while it waits.
    occ: f64,
    occ_domain: u32,
    c: Counters,
    /// Counters at the start of the current slice, and the stats of the last finished slice.
    slice_start: Counters,
    slice_start_ns: u64,
    last_stats: Option<TaskStats>,
    /// Counters at the last observation.
    obs_base: Counters,
    /// When a non-repeating task finished its work.
    finish_ns: Option<u64>,
}

#[derive(Clone, Debug)]
struct Cpu {
    current: u32,
    queue: VecDeque<u32>,
    slice_end_ns: u64,
    domain: u32,
    bus: u32,
    // Solved rates for the running task.
    cpi: f64,
    miss: f64,
    share: f64,
    ipc: f64,
    busy_ns_obs: u64,
    cycles_obs: f64,
    instr_obs: f64,
}

#[derive(Clone, Debug, Default)]
struct Domain {
    cpus: Vec<u32>,
    capacity: f64,
    /// Lazily scaled pool of lines held by tasks that are not running here.
    idle_total: f64,
    idle_scale: f64,
}

#[derive(Clone, Debug, Default)]
struct Bus {
    cpus: Vec<u32>,
    latency_cycles: f64,
    rho: f64,
    rho_obs_sum: f64,
}

/// The simulated machine.
pub struct Simulation {
    spec: MachineSpec,
    sched: SchedParams,
    topo: Topology,
    profs: Vec<Prof>,
    tasks: Vec<Task>,
    cpus: Vec<Cpu>,
    /// SMT siblings of each CPU (excluding itself), flattened: `sib[sib_off[c]..sib_off[c+1]]`.
    sib: Vec<u32>,
    sib_off: Vec<u32>,
    domains: Vec<Domain>,
    buses: Vec<Bus>,
    rng: ChaCha8Rng,
    now_ns: u64,
    tick_ns: u64,
    cycles_per_tick: f64,
    l0_cycles: f64,
    peak_bytes_per_cycle: f64,
    next_balance_ns: u64,
    /// Earliest start time of a task that has not arrived (`u64::MAX` when none).
    next_arrival_ns: u64,
    dirty: bool,
    /// Buses whose running set or rates changed since their last solve.
    dirty_bus: Vec<bool>,
    obs_start_ns: u64,
    obs_ticks: u64,
    // Scratch for the solver (kept to avoid per-tick allocation).
    scratch_dom_access: Vec<f64>,
    scratch_cc: Vec<f64>,
    scratch_dom_running: Vec<f64>,
}

fn mask_of(set: &CpuSet, ncpu: usize) -> Vec<u64> {
    let mut m = vec![0u64; ncpu.div_ceil(64)];
    for c in set.iter() {
        if (c as usize) < ncpu {
            m[c as usize / 64] |= 1 << (c % 64);
        }
    }
    m
}

#[inline]
fn allowed(mask: &[u64], cpu: u32) -> bool {
    mask[cpu as usize / 64] & (1 << (cpu % 64)) != 0
}

impl Simulation {
    /// Build the machine and its tasks from a scenario; `seed` drives every random choice.
    pub fn new(scenario: &Scenario, seed: u64) -> Result<Self, SimError> {
        let ids: Vec<usize> = (0..scenario.tasks.len()).collect();
        Self::build(scenario, seed, &ids)
    }

    /// A machine running only task `i` of `full` (given as the one-task scenario `solo`), with
    /// the same request stream it has in `full`.
    pub(crate) fn new_solo(
        solo: &Scenario,
        seed: u64,
        full: &Scenario,
        i: usize,
    ) -> Result<Self, SimError> {
        debug_assert!(i < full.tasks.len());
        Self::build(solo, seed, &[i])
    }

    fn build(scenario: &Scenario, seed: u64, stream_ids: &[usize]) -> Result<Self, SimError> {
        let spec = scenario.machine.clone();
        spec.validate().map_err(SimError::Invalid)?;
        scenario.sched.validate().map_err(SimError::Invalid)?;
        if scenario.tick_us == 0 {
            return Err(SimError::Invalid("tick_us must be at least 1".into()));
        }
        let topo = spec.topology()?;
        let ncpu = spec.cpus();
        let tpc = spec.threads_per_core as usize;
        let cores_per_domain = (spec.cores_per_package / spec.llc_domains_per_package) as usize;
        let mut cpus = Vec::with_capacity(ncpu);
        let mut sib = Vec::new();
        let mut sib_off = vec![0u32];
        let ndom = (spec.packages * spec.llc_domains_per_package) as usize;
        let nbus = match spec.memory {
            MemoryKind::SharedBus => 1,
            MemoryKind::PerPackage => spec.packages as usize,
        };
        let mut domains = vec![
            Domain {
                capacity: spec.llc_bytes as f64,
                idle_scale: 1.0,
                ..Default::default()
            };
            ndom
        ];
        let mut buses = vec![Bus::default(); nbus];
        for c in 0..ncpu {
            let core = c / tpc;
            let package = core / spec.cores_per_package as usize;
            let domain = core / cores_per_domain;
            let bus = match spec.memory {
                MemoryKind::SharedBus => 0,
                MemoryKind::PerPackage => package,
            };
            for s in core * tpc..(core + 1) * tpc {
                if s != c {
                    sib.push(s as u32);
                }
            }
            sib_off.push(sib.len() as u32);
            domains[domain].cpus.push(c as u32);
            buses[bus].cpus.push(c as u32);
            cpus.push(Cpu {
                current: NONE,
                queue: VecDeque::new(),
                slice_end_ns: 0,
                domain: domain as u32,
                bus: bus as u32,
                cpi: 1.0,
                miss: 0.0,
                share: 0.0,
                ipc: 0.0,
                busy_ns_obs: 0,
                cycles_obs: 0.0,
                instr_obs: 0.0,
            });
        }
        let freq_hz = spec.freq_ghz * 1e9;
        let l0_cycles = spec.mem_latency_ns * spec.freq_ghz;
        for b in &mut buses {
            b.latency_cycles = l0_cycles;
        }
        let rng = ChaCha8Rng::seed_from_u64(seed);
        let mut profs: Vec<Prof> = Vec::new();
        let mut prof_keys: Vec<Profile> = Vec::new();
        let mut intern = |p: &Profile| -> Result<u32, SimError> {
            p.validate().map_err(SimError::Invalid)?;
            if let Some(i) = prof_keys.iter().position(|k| k == p) {
                return Ok(i as u32);
            }
            prof_keys.push(p.clone());
            profs.push(Prof::new(p));
            Ok((profs.len() - 1) as u32)
        };
        let all = topo.all_cpus();
        let mut tasks = Vec::with_capacity(scenario.tasks.len());
        for (i, t) in scenario.tasks.iter().enumerate() {
            let src = match &t.workload {
                Workload::Program(p) => seq_source(std::slice::from_ref(p), &mut intern)?,
                Workload::Shell(ps) => seq_source(ps, &mut intern)?,
                Workload::Server(s) => {
                    if s.classes.is_empty() {
                        return Err(SimError::Invalid(format!(
                            "server {} has no classes",
                            s.name
                        )));
                    }
                    let total: f64 = s.classes.iter().map(|c| c.weight).sum();
                    if total.is_nan()
                        || total <= 0.0
                        || s.classes
                            .iter()
                            .any(|c| c.weight.is_nan() || c.weight < 0.0)
                    {
                        return Err(SimError::Invalid(format!(
                            "server {} needs non-negative weights with a positive sum",
                            s.name
                        )));
                    }
                    let mut acc = 0.0;
                    let mut classes = Vec::new();
                    for c in &s.classes {
                        acc += c.weight / total;
                        classes.push((acc, intern(&c.profile)?, c.instructions.max(1)));
                    }
                    // Each server's request stream has its own generator: the same task draws
                    // the same requests alone and shared.
                    let mut stream = ChaCha8Rng::seed_from_u64(seed);
                    stream.set_stream(stream_ids[i] as u64 + 1);
                    Source::Server {
                        classes,
                        rng: Box::new(stream),
                    }
                }
            };
            let affinity = match &t.affinity {
                Some(a) => {
                    if a.is_empty() || !a.is_subset(&all) {
                        return Err(SimError::Invalid(format!(
                            "task {} has CPU list {:?} outside the machine's {}",
                            t.name,
                            a.to_list(),
                            all.to_list()
                        )));
                    }
                    a.clone()
                }
                None => all.clone(),
            };
            let mut task = Task {
                name: t.name.clone(),
                label: t.workload.label(),
                mask: mask_of(&affinity, ncpu),
                affinity,
                state: State::NotArrived,
                cpu: NONE,
                last_cpu: NONE,
                start_ns: t.start_ms * 1_000_000,
                repeat: t.repeat,
                src,
                prof: 0,
                phase_left: 0.0,
                occ: 0.0,
                occ_domain: NONE,
                c: Counters::default(),
                slice_start: Counters::default(),
                slice_start_ns: 0,
                last_stats: None,
                obs_base: Counters::default(),
                finish_ns: None,
            };
            let (p, n) = first_phase(&mut task.src);
            task.prof = p;
            task.phase_left = n as f64;
            tasks.push(task);
        }
        let tick_ns = scenario.tick_us * 1000;
        let mut sim = Simulation {
            sched: scenario.sched,
            topo,
            profs,
            tasks,
            sib,
            sib_off,
            scratch_dom_access: vec![0.0; domains.len()],
            scratch_dom_running: vec![0.0; domains.len()],
            scratch_cc: vec![0.0; ncpu],
            cpus,
            domains,
            buses,
            rng,
            now_ns: 0,
            tick_ns,
            cycles_per_tick: freq_hz * tick_ns as f64 * 1e-9,
            l0_cycles,
            peak_bytes_per_cycle: spec.peak_bandwidth_gb_per_s * 1e9 / freq_hz,
            next_balance_ns: 0,
            next_arrival_ns: 0,
            dirty: true,
            dirty_bus: vec![true; nbus],
            obs_start_ns: 0,
            obs_ticks: 0,
            spec,
        };
        sim.next_balance_ns = sim.ms_to_ns(sim.sched.balance_interval_ms);
        sim.arrivals(None);
        Ok(sim)
    }

    fn ms_to_ns(&self, ms: f64) -> u64 {
        (ms * 1e6).round().max(self.tick_ns as f64) as u64
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }
    pub fn spec(&self) -> &MachineSpec {
        &self.spec
    }
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }
    /// Cumulative counters of task `i` (index = task id).
    pub fn counters(&self, i: usize) -> Option<&Counters> {
        self.tasks.get(i).map(|t| &t.c)
    }
    /// When task `i` finished (non-repeating tasks), in simulated ns since the start.
    pub fn finish_ns(&self, i: usize) -> Option<u64> {
        self.tasks.get(i).and_then(|t| t.finish_ns)
    }
    pub fn task_label(&self, i: usize) -> Option<&str> {
        self.tasks.get(i).map(|t| t.label.as_str())
    }
    pub fn task_name(&self, i: usize) -> Option<&str> {
        self.tasks.get(i).map(|t| t.name.as_str())
    }
    /// Whether every task is done (non-repeating tasks only ever finish).
    pub fn all_done(&self) -> bool {
        self.tasks.iter().all(|t| t.state == State::Done)
    }
    /// Current utilization of each bus, in [0, 1).
    pub fn bus_utilization(&self) -> Vec<f64> {
        self.buses.iter().map(|b| b.rho).collect()
    }
    /// Current loaded memory latency of each bus, in cycles.
    pub fn bus_latency_cycles(&self) -> Vec<f64> {
        self.buses.iter().map(|b| b.latency_cycles).collect()
    }
    /// Unloaded memory latency in cycles.
    pub fn unloaded_latency_cycles(&self) -> f64 {
        self.l0_cycles
    }
    /// LLC bytes held by each task in its current domain (0 when it holds none).
    pub fn cache_occupancy(&self) -> Vec<f64> {
        (0..self.tasks.len())
            .map(|i| self.occupancy_of(i))
            .collect()
    }
    fn occupancy_of(&self, i: usize) -> f64 {
        let t = &self.tasks[i];
        if t.occ_domain == NONE {
            return 0.0;
        }
        if t.state == State::Running {
            t.occ
        } else {
            t.occ * self.domains[t.occ_domain as usize].idle_scale
        }
    }
    /// Per-CPU (running task, CPI) for tests and tools.
    pub fn cpu_rates(&self) -> Vec<(Option<usize>, f64)> {
        self.cpus
            .iter()
            .map(|c| {
                (
                    (c.current != NONE).then_some(c.current as usize),
                    if c.current != NONE { c.cpi } else { 0.0 },
                )
            })
            .collect()
    }
    /// Capacity share of each running CPU's task in its LLC domain (0 when idle).
    pub fn cache_shares(&self) -> Vec<f64> {
        self.cpus
            .iter()
            .map(|c| if c.current != NONE { c.share } else { 0.0 })
            .collect()
    }

    // ---------------------------------------------------------------- contention model

    /// Solve the contention fixed point for the running set of bus `b` (LLC domains and SMT
    /// cores never span buses, so buses are independent components).
    fn solve(&mut self, b: usize) {
        let nb = self.buses[b].cpus.len();
        let width = self.spec.smt.issue_width;
        let issue_pen = self.spec.smt.issue_penalty;
        let same_pen = self.spec.smt.same_unit_penalty;
        let fpw = self.spec.smt.fp_unit_weight;
        // Initial guesses: solo-like IPC from the last rates, equal cache shares.
        for k in 0..nb {
            let c = self.buses[b].cpus[k] as usize;
            self.scratch_dom_running[self.cpus[c].domain as usize] = 0.0;
        }
        for k in 0..nb {
            let c = self.buses[b].cpus[k] as usize;
            if self.cpus[c].current != NONE {
                self.scratch_dom_running[self.cpus[c].domain as usize] += 1.0;
            }
        }
        for k in 0..nb {
            let c = self.buses[b].cpus[k] as usize;
            let cur = self.cpus[c].current;
            if cur == NONE {
                self.cpus[c].ipc = 0.0;
                continue;
            }
            let d = self.cpus[c].domain as usize;
            let p = &self.profs[self.tasks[cur as usize].prof as usize];
            self.cpus[c].share = self.domains[d].capacity / self.scratch_dom_running[d];
            if self.cpus[c].ipc.is_nan() || self.cpus[c].ipc <= 0.0 {
                self.cpus[c].ipc = 1.0 / p.cpi_core;
            }
        }
        for _ in 0..FIXED_POINT_MAX_ITERS {
            let mut moved = 0.0f64;
            // 1. SMT-inflated core CPI and miss ratio at the current share.
            for k in 0..nb {
                let c = self.buses[b].cpus[k] as usize;
                let cur = self.cpus[c].current;
                if cur == NONE {
                    continue;
                }
                let t = &self.tasks[cur as usize];
                let p = &self.profs[t.prof as usize];
                let mut pressure = 0.0;
                let (a, b) = (self.sib_off[c] as usize, self.sib_off[c + 1] as usize);
                for &s in &self.sib[a..b] {
                    let sc = &self.cpus[s as usize];
                    if sc.current == NONE {
                        continue;
                    }
                    let q = &self.profs[self.tasks[sc.current as usize].prof as usize];
                    let overlap = (1.0 - p.fp) * (1.0 - q.fp) + fpw * p.fp * q.fp;
                    pressure += (sc.ipc / width).min(1.0) * (issue_pen + same_pen * overlap);
                }
                self.scratch_cc[c] = p.cpi_core * (1.0 + pressure);
                let held = self.cpus[c].share.min(t.occ);
                self.cpus[c].miss = p.curve.miss_ratio(held);
            }
            // 2. Each bus: the latency at which demand and queueing agree.
            self.solve_bus(b);
            // 3. CPI, IPC and the access-frequency shares of each domain.
            for k in 0..nb {
                let c = self.buses[b].cpus[k] as usize;
                self.scratch_dom_access[self.cpus[c].domain as usize] = 0.0;
            }
            for k in 0..nb {
                let c = self.buses[b].cpus[k] as usize;
                let cur = self.cpus[c].current;
                if cur == NONE {
                    continue;
                }
                let p = &self.profs[self.tasks[cur as usize].prof as usize];
                let lat = self.buses[self.cpus[c].bus as usize].latency_cycles;
                let cpi = self.scratch_cc[c] + p.api * self.cpus[c].miss * lat / p.mlp;
                moved = moved.max(((cpi - self.cpus[c].cpi) / cpi).abs());
                self.cpus[c].cpi = cpi;
                self.cpus[c].ipc = 1.0 / cpi;
                self.scratch_dom_access[self.cpus[c].domain as usize] += p.api / cpi;
            }
            for k in 0..nb {
                let c = self.buses[b].cpus[k] as usize;
                let cur = self.cpus[c].current;
                if cur == NONE {
                    continue;
                }
                let p = &self.profs[self.tasks[cur as usize].prof as usize];
                let d = self.cpus[c].domain as usize;
                let total = self.scratch_dom_access[d];
                let cap = self.domains[d].capacity;
                let share = if total > 0.0 {
                    cap * (p.api / self.cpus[c].cpi) / total
                } else {
                    cap / self.scratch_dom_running[d]
                };
                moved = moved.max(((share - self.cpus[c].share) / cap).abs());
                self.cpus[c].share = share;
            }
            if moved < FIXED_POINT_TOL {
                break;
            }
        }
        // Final miss ratios at the final shares, consistent with the CPIs used to retire.
        for k in 0..nb {
            let c = self.buses[b].cpus[k] as usize;
            let cur = self.cpus[c].current;
            if cur == NONE {
                continue;
            }
            let t = &self.tasks[cur as usize];
            let p = &self.profs[t.prof as usize];
            self.cpus[c].miss = p.curve.miss_ratio(self.cpus[c].share.min(t.occ));
        }
        self.solve_bus(b);
        for k in 0..nb {
            let c = self.buses[b].cpus[k] as usize;
            let cur = self.cpus[c].current;
            if cur == NONE {
                continue;
            }
            let p = &self.profs[self.tasks[cur as usize].prof as usize];
            let lat = self.buses[self.cpus[c].bus as usize].latency_cycles;
            let cpi = self.scratch_cc[c] + p.api * self.cpus[c].miss * lat / p.mlp;
            self.cpus[c].cpi = cpi;
            self.cpus[c].ipc = 1.0 / cpi;
        }
    }

    /// Bus demand in bytes per cycle at memory latency `lat` (cycles), and its derivative in
    /// `lat`.
    #[inline]
    fn bus_demand(&self, b: usize, lat: f64) -> (f64, f64) {
        let line = self.spec.line_bytes as f64;
        let (mut sum, mut deriv) = (0.0, 0.0);
        for &c in &self.buses[b].cpus {
            let cpu = &self.cpus[c as usize];
            if cpu.current == NONE {
                continue;
            }
            let p = &self.profs[self.tasks[cpu.current as usize].prof as usize];
            let mpi = p.api * cpu.miss;
            if mpi > 0.0 {
                let q = mpi / p.mlp;
                let den = self.scratch_cc[c as usize] + q * lat;
                let d = line * mpi / den;
                sum += d;
                deriv -= d * q / den;
            }
        }
        (sum, deriv)
    }

    /// Find the latency where demand meets the queueing curve `rho = 1 - L0/L` (capped at
    /// `rho_cap`, beyond which latency grows just enough to hold demand at the cap).
    ///
    /// Both equations are convex and decreasing in the latency, so Newton's method converges
    /// monotonically once left of the root; each step is one pass over the bus's CPUs.
    fn solve_bus(&mut self, b: usize) {
        let l0 = self.l0_cycles;
        let cap = self.spec.rho_cap;
        let peak = self.peak_bytes_per_cycle;
        let l_cap = l0 / (1.0 - cap);
        let (d0, _) = self.bus_demand(b, l0);
        if d0 <= 0.0 {
            self.buses[b].latency_cycles = l0;
            self.buses[b].rho = 0.0;
            return;
        }
        let (dc, _) = self.bus_demand(b, l_cap);
        let saturated = dc > cap * peak;
        // g(L) = demand(L) - peak * rho(L); start left of the root.
        let g = |sim: &Self, l: f64| -> (f64, f64) {
            let (d, dd) = sim.bus_demand(b, l);
            if saturated {
                (d - cap * peak, dd)
            } else {
                (d - peak * (1.0 - l0 / l), dd - peak * l0 / (l * l))
            }
        };
        let (lo, hi) = if saturated {
            (l_cap, f64::INFINITY)
        } else {
            (l0, l_cap)
        };
        let prev = self.buses[b].latency_cycles;
        let mut l = if prev > lo && prev < hi && g(self, prev).0 >= 0.0 {
            prev
        } else {
            lo
        };
        for _ in 0..BUS_ITERS {
            let (v, dv) = g(self, l);
            if dv >= 0.0 || v <= 0.0 {
                break;
            }
            let next = (l - v / dv).clamp(lo, hi);
            if (next - l).abs() <= 1e-13 * l {
                l = next;
                break;
            }
            l = next;
        }
        self.buses[b].latency_cycles = l;
        self.buses[b].rho = (self.bus_demand(b, l).0 / peak).min(cap);
    }

    // ---------------------------------------------------------------- time

    /// Advance one tick.
    fn tick(&mut self, mut pick: Option<&mut (dyn PickNext + '_)>) {
        if self.dirty {
            for b in 0..self.buses.len() {
                if self.dirty_bus[b] {
                    self.solve(b);
                    self.dirty_bus[b] = false;
                }
            }
            self.dirty = false;
        }
        let line = self.spec.line_bytes as f64;
        let tick_ns = self.tick_ns;
        let cyc = self.cycles_per_tick;
        for d in 0..self.domains.len() {
            self.scratch_dom_running[d] = 0.0;
        }
        let mut finished_any = false;
        for c in 0..self.cpus.len() {
            let cur = self.cpus[c].current;
            if cur == NONE {
                continue;
            }
            let (cpi, miss, share) = (self.cpus[c].cpi, self.cpus[c].miss, self.cpus[c].share);
            let bus = self.cpus[c].bus as usize;
            let t = &mut self.tasks[cur as usize];
            let mut instr = cyc / cpi;
            let mut tick_instr = 0.0;
            let mut fp = 0.0;
            let mut refs = 0.0;
            let mut misses = 0.0;
            // Retire, crossing phase boundaries at the current rates.
            loop {
                let p = &self.profs[t.prof as usize];
                let n = instr.min(t.phase_left);
                tick_instr += n;
                fp += n * p.fp;
                refs += n * p.api;
                misses += n * p.api * miss;
                t.phase_left -= n;
                instr -= n;
                if t.phase_left > 0.0 {
                    break;
                }
                // Phase done: next phase, program completion, or the end.
                match next_phase(&mut t.src, t.repeat) {
                    Next::Phase(p, n, ended) => {
                        t.prof = p;
                        t.phase_left = n as f64;
                        if ended {
                            t.c.completions += 1;
                        }
                        self.dirty = true;
                        self.dirty_bus[bus] = true;
                    }
                    Next::Done => {
                        t.c.completions += 1;
                        t.state = State::Done;
                        // Finished part-way through the tick.
                        let used = ((cyc - instr * cpi) / cyc).clamp(0.0, 1.0);
                        t.finish_ns = Some(self.now_ns + (used * tick_ns as f64).round() as u64);
                        finished_any = true;
                        break;
                    }
                }
                if instr <= 0.0 {
                    break;
                }
            }
            let used_cycles = if t.state == State::Done {
                (tick_instr * cpi).min(cyc)
            } else {
                cyc
            };
            t.c.cycles += used_cycles;
            t.c.instructions += tick_instr;
            t.c.fp_ops += fp;
            t.c.llc_references += refs;
            t.c.llc_misses += misses;
            t.c.mem_transactions += misses;
            // A task that finished part-way through the tick ran only for that part.
            let used_ns = if used_cycles < cyc {
                (used_cycles / cyc * tick_ns as f64).round() as u64
            } else {
                tick_ns
            };
            t.c.task_clock_ns += used_ns;
            // Warm-up: misses bring lines in until the task holds its share (or all it can use).
            let p = &self.profs[t.prof as usize];
            let target = share.min(p.saturation_bytes);
            if t.occ < target * (1.0 - 1e-9) {
                t.occ = (t.occ + misses * line).min(target);
                // Re-solve while the miss ratio still moves by more than 0.5 %, and once more
                // when the share is filled, so that warm tasks run at exact steady-state rates.
                let m_now = p.curve.miss_ratio(share.min(t.occ));
                if t.occ >= target || (m_now - miss).abs() > 0.005 * miss {
                    self.dirty = true;
                    self.dirty_bus[bus] = true;
                }
            } else if t.occ > share {
                t.occ = share;
            }
            self.scratch_dom_running[self.cpus[c].domain as usize] += t.occ;
            let cpu = &mut self.cpus[c];
            cpu.busy_ns_obs += used_ns;
            cpu.cycles_obs += used_cycles;
            cpu.instr_obs += tick_instr;
        }
        // Lines filled by running tasks evict lines of tasks waiting in the same domain.
        for d in 0..self.domains.len() {
            let dom = &mut self.domains[d];
            let over = self.scratch_dom_running[d] + dom.idle_total - dom.capacity;
            if over > 0.0 && dom.idle_total > 0.0 {
                let keep = (dom.idle_total - over).max(0.0);
                dom.idle_scale *= keep / dom.idle_total;
                dom.idle_total = keep;
                if dom.idle_total < 1.0 {
                    dom.idle_total = 0.0;
                }
            }
        }
        for b in 0..self.buses.len() {
            self.buses[b].rho_obs_sum += self.buses[b].rho;
        }
        self.now_ns += tick_ns;
        self.obs_ticks += 1;
        if finished_any {
            for c in 0..self.cpus.len() {
                let cur = self.cpus[c].current;
                if cur != NONE && self.tasks[cur as usize].state == State::Done {
                    self.switch_out(c, false);
                    self.dispatch(c, pick.as_deref_mut());
                    if self.cpus[c].current == NONE {
                        self.idle_pull(c, pick.as_deref_mut());
                    }
                }
            }
        }
        // Slice expiry.
        for c in 0..self.cpus.len() {
            if self.cpus[c].current != NONE && self.cpus[c].slice_end_ns <= self.now_ns {
                if self.cpus[c].queue.is_empty() {
                    let slice = self.slice_ns();
                    self.cpus[c].slice_end_ns = self.now_ns + slice;
                } else {
                    let t = self.cpus[c].current;
                    self.switch_out(c, true);
                    self.cpus[c].queue.push_back(t);
                    self.tasks[t as usize].state = State::Queued;
                    self.tasks[t as usize].cpu = c as u32;
                    self.dispatch(c, pick.as_deref_mut());
                }
            }
        }
        self.arrivals(pick.as_deref_mut());
        if self.now_ns >= self.next_balance_ns {
            self.next_balance_ns = self.now_ns + self.ms_to_ns(self.sched.balance_interval_ms);
            self.balance(pick);
        }
    }

    fn slice_ns(&mut self) -> u64 {
        let base = self.sched.timeslice_ms * 1e6;
        let j = self.sched.timeslice_jitter;
        let f = if j > 0.0 {
            1.0 + self.rng.gen_range(-j..j)
        } else {
            1.0
        };
        // Whole ticks: the scheduler acts on tick boundaries.
        let ticks = ((base * f) / self.tick_ns as f64).round().max(1.0) as u64;
        ticks * self.tick_ns
    }

    /// Take the running task off CPU `c`; it keeps its occupancy in the domain's idle pool.
    fn switch_out(&mut self, c: usize, involuntary: bool) {
        let t = self.cpus[c].current;
        if t == NONE {
            return;
        }
        self.cpus[c].current = NONE;
        self.dirty = true;
        self.dirty_bus[self.cpus[c].bus as usize] = true;
        let now = self.now_ns;
        let task = &mut self.tasks[t as usize];
        if involuntary {
            task.c.context_switches += 1;
        }
        // Last-value statistics of the slice just ended.
        let d_instr = task.c.instructions - task.slice_start.instructions;
        let d_cyc = task.c.cycles - task.slice_start.cycles;
        let d_miss = task.c.llc_misses - task.slice_start.llc_misses;
        let d_fp = task.c.fp_ops - task.slice_start.fp_ops;
        let d_ns = now.saturating_sub(task.slice_start_ns);
        if d_cyc > 0.0 && d_ns > 0 {
            task.last_stats = Some(slice_stats(
                TaskId(t as u64),
                d_instr,
                d_cyc,
                d_miss,
                d_fp,
                d_ns,
                self.spec.peak_bandwidth_gb_per_s * 1e9 / self.spec.line_bytes as f64,
            ));
        }
        if task.state == State::Running {
            task.state = State::Queued;
        }
        // Park the lines in the domain's idle pool.
        if task.occ_domain != NONE && task.state != State::Done {
            let dom = &mut self.domains[task.occ_domain as usize];
            dom.idle_total += task.occ;
            task.occ /= dom.idle_scale;
        } else {
            task.occ = 0.0;
            task.occ_domain = NONE;
        }
    }

    /// Run task `t` on idle CPU `c`.
    fn switch_in(&mut self, c: usize, t: u32) {
        debug_assert_eq!(self.cpus[c].current, NONE);
        let slice = self.slice_ns();
        let now = self.now_ns;
        let d = self.cpus[c].domain;
        let task = &mut self.tasks[t as usize];
        if task.last_cpu != NONE && task.last_cpu != c as u32 {
            task.c.migrations += 1;
        }
        // Reclaim parked lines; a new cache domain means a cold start.
        if task.occ_domain == d {
            let dom = &mut self.domains[d as usize];
            let held = (task.occ * dom.idle_scale).min(dom.idle_total);
            dom.idle_total -= held;
            task.occ = held;
        } else {
            if task.occ_domain != NONE {
                let dom = &mut self.domains[task.occ_domain as usize];
                let held = (task.occ * dom.idle_scale).min(dom.idle_total);
                dom.idle_total -= held;
            }
            task.occ = 0.0;
            task.occ_domain = d;
        }
        task.state = State::Running;
        task.cpu = c as u32;
        task.last_cpu = c as u32;
        task.slice_start = task.c;
        task.slice_start_ns = now;
        self.cpus[c].current = t;
        self.cpus[c].slice_end_ns = now + slice;
        self.dirty = true;
        self.dirty_bus[self.cpus[c].bus as usize] = true;
    }

    /// CPU `c` is free: run the next queued task (the pick-next hook chooses if present).
    fn dispatch(&mut self, c: usize, pick: Option<&mut (dyn PickNext + '_)>) {
        if self.cpus[c].queue.is_empty() {
            return;
        }
        let idx = match pick {
            Some(p) if self.cpus[c].queue.len() > 1 => {
                let ready: Vec<TaskStats> = self.cpus[c]
                    .queue
                    .iter()
                    .map(|&t| self.stats_of(t))
                    .collect();
                let others: Vec<(CpuId, Option<TaskStats>)> = (0..self.cpus.len())
                    .filter(|&o| o != c)
                    .map(|o| {
                        let cur = self.cpus[o].current;
                        (o as CpuId, (cur != NONE).then(|| self.running_stats(cur)))
                    })
                    .collect();
                let ctx = PickContext {
                    cpu: c as CpuId,
                    now_ns: self.now_ns,
                    topology: &self.topo,
                    ready: &ready,
                    others: &others,
                    bus_peak_transactions_per_s: self.spec.peak_bandwidth_gb_per_s * 1e9
                        / self.spec.line_bytes as f64,
                };
                p.pick(&ctx).min(ready.len() - 1)
            }
            _ => 0,
        };
        let Some(t) = self.cpus[c].queue.remove(idx) else {
            return;
        };
        self.switch_in(c, t);
    }

    fn stats_of(&self, t: u32) -> TaskStats {
        self.tasks[t as usize].last_stats.unwrap_or(TaskStats {
            task: TaskId(t as u64),
            ipc: 0.0,
            bus_utilization: 0.0,
            llc_mpki: 0.0,
            fp_fraction: 0.0,
        })
    }

    /// Stats of a running task: its current slice so far if it has run a tick, else the last.
    fn running_stats(&self, t: u32) -> TaskStats {
        let task = &self.tasks[t as usize];
        let d_cyc = task.c.cycles - task.slice_start.cycles;
        let d_ns = self.now_ns.saturating_sub(task.slice_start_ns);
        if d_cyc > 0.0 && d_ns > 0 {
            slice_stats(
                TaskId(t as u64),
                task.c.instructions - task.slice_start.instructions,
                d_cyc,
                task.c.llc_misses - task.slice_start.llc_misses,
                task.c.fp_ops - task.slice_start.fp_ops,
                d_ns,
                self.spec.peak_bandwidth_gb_per_s * 1e9 / self.spec.line_bytes as f64,
            )
        } else {
            self.stats_of(t)
        }
    }

    fn nr_running(&self, c: usize) -> usize {
        self.cpus[c].queue.len() + usize::from(self.cpus[c].current != NONE)
    }

    /// Wake-up placement: a fully idle core first, then an idle sibling, then the shortest
    /// queue; the previous CPU wins ties (cache affinity).
    fn place(&self, t: u32) -> usize {
        let task = &self.tasks[t as usize];
        let mut best: Option<(u32, usize, usize)> = None; // (class, nr, cpu)
        let prev = task.last_cpu;
        for c in 0..self.cpus.len() {
            if !allowed(&task.mask, c as u32) {
                continue;
            }
            let nr = self.nr_running(c);
            let class = if nr == 0 {
                let (a, b) = (self.sib_off[c] as usize, self.sib_off[c + 1] as usize);
                if self.sib[a..b]
                    .iter()
                    .all(|&s| self.nr_running(s as usize) == 0)
                {
                    0
                } else {
                    1
                }
            } else {
                2
            };
            let key = (class, nr, usize::from(c as u32 != prev));
            let better = match best {
                None => true,
                Some((bc, bn, bcpu)) => key < (bc, bn, usize::from(bcpu as u32 != prev)),
            };
            if better {
                best = Some((class, nr, c));
            }
        }
        best.map_or(0, |b| b.2)
    }

    fn enqueue(&mut self, t: u32, c: usize, pick: Option<&mut (dyn PickNext + '_)>) {
        self.tasks[t as usize].state = State::Queued;
        self.tasks[t as usize].cpu = c as u32;
        self.cpus[c].queue.push_back(t);
        if self.cpus[c].current == NONE {
            self.dispatch(c, pick);
        }
    }

    fn arrivals(&mut self, mut pick: Option<&mut (dyn PickNext + '_)>) {
        if self.now_ns < self.next_arrival_ns {
            return;
        }
        let mut next = u64::MAX;
        for t in 0..self.tasks.len() {
            if self.tasks[t].state != State::NotArrived {
                continue;
            }
            if self.tasks[t].start_ns <= self.now_ns {
                let c = self.place(t as u32);
                self.enqueue(t as u32, c, pick.as_deref_mut());
            } else {
                next = next.min(self.tasks[t].start_ns);
            }
        }
        self.next_arrival_ns = next;
    }

    /// An idle CPU pulls a queued task from the busiest CPU that has one it may run.
    fn idle_pull(&mut self, c: usize, pick: Option<&mut (dyn PickNext + '_)>) {
        let mut best: Option<(usize, usize, usize)> = None; // (nr, src, pos)
        for s in 0..self.cpus.len() {
            if s == c || self.cpus[s].queue.is_empty() {
                continue;
            }
            let nr = self.nr_running(s);
            if nr < 2 {
                continue;
            }
            if let Some(pos) = self.cpus[s]
                .queue
                .iter()
                .rposition(|&t| allowed(&self.tasks[t as usize].mask, c as u32))
            {
                if best.map_or(true, |b| nr > b.0) {
                    best = Some((nr, s, pos));
                }
            }
        }
        if let Some((_, s, pos)) = best {
            if let Some(t) = self.cpus[s].queue.remove(pos) {
                self.enqueue(t, c, pick);
            }
        }
    }

    /// Periodic balancing by run-queue length: move queued tasks from the longest queues to
    /// CPUs at least two shorter, affinity permitting.
    fn balance(&mut self, mut pick: Option<&mut (dyn PickNext + '_)>) {
        let n = self.cpus.len();
        let mut moves = 0;
        while moves < n {
            // Busiest and idlest by nr_running.
            let mut order: Vec<(usize, usize)> = (0..n).map(|c| (self.nr_running(c), c)).collect();
            order.sort_unstable();
            let mut moved = false;
            'outer: for &(nr_dst, dst) in &order {
                for &(nr_src, src) in order.iter().rev() {
                    if nr_src < nr_dst + 2 {
                        break;
                    }
                    if let Some(pos) = self.cpus[src]
                        .queue
                        .iter()
                        .rposition(|&t| allowed(&self.tasks[t as usize].mask, dst as u32))
                    {
                        if let Some(t) = self.cpus[src].queue.remove(pos) {
                            self.enqueue(t, dst, pick.as_deref_mut());
                            moved = true;
                            break 'outer;
                        }
                    }
                }
            }
            if !moved {
                break;
            }
            moves += 1;
        }
    }

    /// Advance by `interval_ns` (whole ticks), consulting `pick` at every context switch.
    pub fn advance_with(
        &mut self,
        interval_ns: u64,
        mut pick: Option<&mut (dyn PickNext + '_)>,
    ) -> Observation {
        let ticks = interval_ns.div_ceil(self.tick_ns).max(1);
        for _ in 0..ticks {
            self.tick(pick.as_deref_mut());
        }
        self.observe()
    }

    /// Advance by `interval_ns` without building an [`Observation`]; read the interval with
    /// [`Self::take_interval`]. What `run` uses when no epoch-level policy needs observations.
    pub fn advance_quiet(&mut self, interval_ns: u64, mut pick: Option<&mut (dyn PickNext + '_)>) {
        let ticks = interval_ns.div_ceil(self.tick_ns).max(1);
        for _ in 0..ticks {
            self.tick(pick.as_deref_mut());
        }
    }

    /// Counter deltas of every task since the last observation (into `deltas`, indexed by task)
    /// and mean bus utilizations (into `bus`); resets the interval as [`Machine::advance`]'s
    /// observation does. Returns the interval length.
    pub fn take_interval(&mut self, deltas: &mut Vec<Counters>, bus: &mut Vec<f64>) -> u64 {
        deltas.clear();
        for t in &mut self.tasks {
            deltas.push(diff(&t.c, &t.obs_base));
            t.obs_base = t.c;
        }
        for c in &mut self.cpus {
            c.busy_ns_obs = 0;
            c.cycles_obs = 0.0;
            c.instr_obs = 0.0;
        }
        let ticks = self.obs_ticks.max(1) as f64;
        bus.clear();
        for b in &mut self.buses {
            bus.push(b.rho_obs_sum / ticks);
            b.rho_obs_sum = 0.0;
        }
        let interval = self.now_ns - self.obs_start_ns;
        self.obs_start_ns = self.now_ns;
        self.obs_ticks = 0;
        interval
    }

    /// Build the observation since the last one and reset the interval accumulators.
    fn observe(&mut self) -> Observation {
        let now = self.now_ns;
        let interval = now - self.obs_start_ns;
        let mut tasks = Vec::with_capacity(self.tasks.len());
        for (i, t) in self.tasks.iter_mut().enumerate() {
            let d = diff(&t.c, &t.obs_base);
            t.obs_base = t.c;
            let mut s = Sample::new(Some(TaskId(i as u64)), interval);
            let ev = |v: f64| CounterValue::exact(v.round().max(0.0) as u64, interval);
            s.set(event::CYCLES, ev(d.cycles));
            s.set(event::INSTRUCTIONS, ev(d.instructions));
            s.set(event::CACHE_REFERENCES, ev(d.llc_references));
            s.set(event::CACHE_MISSES, ev(d.llc_misses));
            s.set(event::LLC_LOADS, ev(d.llc_references));
            s.set(event::LLC_LOAD_MISSES, ev(d.llc_misses));
            s.set(event::MEM_TRANSACTIONS, ev(d.mem_transactions));
            s.set(event::FP_OPS, ev(d.fp_ops));
            s.set(event::TASK_CLOCK, ev(d.task_clock_ns as f64));
            s.set(event::CPU_CLOCK, ev(d.task_clock_ns as f64));
            s.set(event::CONTEXT_SWITCHES, ev(d.context_switches as f64));
            s.set(event::CPU_MIGRATIONS, ev(d.migrations as f64));
            tasks.push(TaskObservation {
                id: TaskId(i as u64),
                name: t.name.clone(),
                affinity: t.affinity.clone(),
                cpu: (t.last_cpu != NONE).then_some(t.last_cpu),
                sample: s,
                runnable: matches!(t.state, State::Queued | State::Running),
                finished: t.state == State::Done,
            });
        }
        let mut cpus = Vec::with_capacity(self.cpus.len());
        for (i, c) in self.cpus.iter_mut().enumerate() {
            let mut s = Sample::new(None, interval);
            s.set(
                event::CYCLES,
                CounterValue::exact(c.cycles_obs.round() as u64, interval),
            );
            s.set(
                event::INSTRUCTIONS,
                CounterValue::exact(c.instr_obs.round() as u64, interval),
            );
            s.set(
                event::CPU_CLOCK,
                CounterValue::exact(c.busy_ns_obs, interval),
            );
            cpus.push(CpuObservation {
                cpu: i as CpuId,
                running: (c.current != NONE).then_some(TaskId(c.current as u64)),
                busy_fraction: if interval > 0 {
                    (c.busy_ns_obs as f64 / interval as f64).min(1.0)
                } else {
                    0.0
                },
                sample: s,
            });
            c.busy_ns_obs = 0;
            c.cycles_obs = 0.0;
            c.instr_obs = 0.0;
        }
        let ticks = self.obs_ticks.max(1) as f64;
        let memory_utilization = self
            .buses
            .iter_mut()
            .map(|b| {
                let u = b.rho_obs_sum / ticks;
                b.rho_obs_sum = 0.0;
                u
            })
            .collect();
        self.obs_start_ns = now;
        self.obs_ticks = 0;
        Observation {
            time_ns: now,
            interval_ns: interval,
            tasks,
            cpus,
            memory_utilization,
        }
    }

    /// Change a task's affinity, moving it if its CPU is no longer allowed.
    fn set_affinity(&mut self, t: usize, cpus: CpuSet) -> Result<(), SimError> {
        let all = self.topo.all_cpus();
        if cpus.is_empty() || !cpus.is_subset(&all) {
            return Err(SimError::BadAction(format!(
                "CPU set {:?} for task {t} is empty or outside the machine's {}",
                cpus.to_list(),
                all.to_list()
            )));
        }
        let n = self.cpus.len();
        let task = &mut self.tasks[t];
        task.mask = mask_of(&cpus, n);
        task.affinity = cpus;
        let c = task.cpu;
        match task.state {
            State::Running if !allowed(&task.mask, c) => {
                self.switch_out(c as usize, true);
                self.dispatch(c as usize, None);
                let dst = self.place(t as u32);
                self.enqueue(t as u32, dst, None);
            }
            State::Queued if !allowed(&task.mask, c) => {
                if let Some(pos) = self.cpus[c as usize]
                    .queue
                    .iter()
                    .position(|&x| x == t as u32)
                {
                    self.cpus[c as usize].queue.remove(pos);
                }
                let dst = self.place(t as u32);
                self.enqueue(t as u32, dst, None);
            }
            _ => {}
        }
        Ok(())
    }

    fn task_index(&self, id: TaskId) -> Result<usize, SimError> {
        let i = id.0 as usize;
        if i < self.tasks.len() {
            Ok(i)
        } else {
            Err(SimError::BadAction(format!("no task {id}")))
        }
    }
}

fn diff(a: &Counters, b: &Counters) -> Counters {
    Counters {
        cycles: a.cycles - b.cycles,
        instructions: a.instructions - b.instructions,
        llc_references: a.llc_references - b.llc_references,
        llc_misses: a.llc_misses - b.llc_misses,
        mem_transactions: a.mem_transactions - b.mem_transactions,
        fp_ops: a.fp_ops - b.fp_ops,
        task_clock_ns: a.task_clock_ns - b.task_clock_ns,
        context_switches: a.context_switches - b.context_switches,
        migrations: a.migrations - b.migrations,
        completions: a.completions - b.completions,
    }
}

fn slice_stats(
    task: TaskId,
    instr: f64,
    cycles: f64,
    misses: f64,
    fp: f64,
    ns: u64,
    peak_tps: f64,
) -> TaskStats {
    TaskStats {
        task,
        ipc: if cycles > 0.0 { instr / cycles } else { 0.0 },
        bus_utilization: (misses / (ns as f64 * 1e-9)) / peak_tps,
        llc_mpki: if instr > 0.0 {
            misses * 1000.0 / instr
        } else {
            0.0
        },
        fp_fraction: if instr > 0.0 { fp / instr } else { 0.0 },
    }
}

fn seq_source(
    programs: &[crate::spec::Program],
    intern: &mut impl FnMut(&Profile) -> Result<u32, SimError>,
) -> Result<Source, SimError> {
    let mut phases = Vec::new();
    let mut ends = Vec::new();
    for p in programs {
        if p.phases.is_empty() || p.instructions() == 0 {
            return Err(SimError::Invalid(format!("program {} has no work", p.name)));
        }
        for (i, ph) in p.phases.iter().enumerate() {
            phases.push((intern(&ph.profile)?, ph.instructions.max(1)));
            ends.push(i + 1 == p.phases.len());
        }
    }
    Ok(Source::Seq {
        phases,
        ends_program: ends,
        pos: 0,
    })
}

fn first_phase(src: &mut Source) -> (u32, u64) {
    match src {
        Source::Seq { phases, .. } => phases[0],
        Source::Server { classes, rng } => draw(classes, rng),
    }
}

fn draw(classes: &[(f64, u32, u64)], rng: &mut ChaCha8Rng) -> (u32, u64) {
    let u: f64 = rng.gen();
    let i = classes
        .iter()
        .position(|c| u < c.0)
        .unwrap_or(classes.len() - 1);
    (classes[i].1, classes[i].2)
}

enum Next {
    /// Next phase (profile, instructions) and whether the finished phase ended a program.
    Phase(u32, u64, bool),
    Done,
}

fn next_phase(src: &mut Source, repeat: bool) -> Next {
    match src {
        Source::Seq {
            phases,
            ends_program,
            pos,
        } => {
            let ended = ends_program[*pos];
            if *pos + 1 < phases.len() {
                *pos += 1;
            } else if repeat {
                *pos = 0;
            } else {
                return Next::Done;
            }
            let (p, n) = phases[*pos];
            Next::Phase(p, n, ended)
        }
        Source::Server { classes, rng } => {
            let (p, n) = draw(classes, rng);
            Next::Phase(p, n, true)
        }
    }
}

impl Machine for Simulation {
    type Error = SimError;
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn tasks(&self) -> Vec<TaskInfo> {
        self.tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskInfo {
                id: TaskId(i as u64),
                name: t.name.clone(),
                affinity: t.affinity.clone(),
                last_cpu: (t.last_cpu != NONE).then_some(t.last_cpu),
                threads: 1,
            })
            .collect()
    }
    fn advance(&mut self, interval_ns: u64) -> Result<Observation, SimError> {
        Ok(self.advance_with(interval_ns, None))
    }
    fn apply(&mut self, action: &Action) -> Result<(), SimError> {
        match action {
            Action::SetAffinity { task, cpus } => {
                let i = self.task_index(*task)?;
                if self.tasks[i].state == State::Done {
                    return Ok(());
                }
                self.set_affinity(i, cpus.clone())
            }
            Action::Swap { a, b } => {
                let (i, j) = (self.task_index(*a)?, self.task_index(*b)?);
                let (ca, cb) = (
                    self.tasks[i].affinity.clone(),
                    self.tasks[j].affinity.clone(),
                );
                if self.tasks[i].state != State::Done {
                    self.set_affinity(i, cb)?;
                }
                if self.tasks[j].state != State::Done {
                    self.set_affinity(j, ca)?;
                }
                Ok(())
            }
        }
    }
}
