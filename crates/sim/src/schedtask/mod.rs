//! SchedTask's level of the simulated machine (seed 004; docs/schedtask.md): OS execution at the
//! granularity of SuperFunctions, and where each one runs.
//!
//! A benchmark's threads alternate application segments and system calls drawn from the
//! benchmark's mix; a call may block on the disk or the network, and is then completed by an
//! interrupt, a bottom half and the call's tail. Every invocation belongs to a SuperFunction
//! type (`app:NAME`, a system call, `irq:*`, `bh:*`) with code pages, shared data, lock lines
//! and the calling thread's user buffer ([`layout`]). Each of the machine's cores (32 in the
//! paper) has a private 4-way 32 KB i-cache and d-cache and a 4-way 256 KB L2 ([`cache`]),
//! simulated line by line with LRU and per-line versions, so a lock or buffer line written on
//! another core comes back as a bounce. An invocation's cycles are its instructions times a
//! base CPI plus its stalls; the [`Technique`] decides on which core's queue each invocation
//! waits and what an idle core steals. The model is a pure function of benchmark, technique,
//! options and seed.
//!
//! ```
//! use counterpoint_sim::schedtask::{run, Options, Technique};
//!
//! let o = Options { cores: 8, warmup_epochs: 1, measure_epochs: 1, ..Options::default() };
//! let a = run("FileSrv", Technique::Linux, &o, 1).unwrap();
//! assert_eq!(a.instructions, run("FileSrv", Technique::Linux, &o, 1).unwrap().instructions);
//! assert!(a.icache_hit_rate > 0.0 && a.icache_hit_rate < 1.0);
//! ```

pub mod cache;
pub mod layout;
pub mod model;
pub mod workload;

pub use crate::SimError;
use serde::Serialize;

/// Machine and timing parameters. Defaults: the paper's machine (32 cores, 4-way 32 KB L1 i/d,
/// 4-way 256 KB L2) with our estimates of clock and latencies.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Cores.
    pub cores: u32,
    /// Clock, GHz (estimated: the paper does not state it).
    pub freq_ghz: f64,
    /// SchedTask's epoch (the paper's 3 ms).
    pub epoch_ms: f64,
    /// Epochs run before measuring (caches warm, the first profile taken).
    pub warmup_epochs: u32,
    /// Epochs measured.
    pub measure_epochs: u32,
    /// Private L1 i- and d-cache size, bytes.
    pub l1_bytes: usize,
    /// Private L2 size, bytes.
    pub l2_bytes: usize,
    /// CPI with every access hitting L1 (estimated).
    pub base_cpi: f64,
    /// L1 miss served by L2, cycles (estimated).
    pub l2_hit_cycles: u64,
    /// L2 miss served by the shared L3, cycles (estimated).
    pub l3_hit_cycles: u64,
    /// A line whose current copy is in another core's cache, cycles (estimated).
    pub bounce_cycles: u64,
    /// A line never seen before (from memory), cycles (estimated).
    pub memory_cycles: u64,
    /// Share of a kernel type's shared-data touches that write the line (estimated).
    pub shared_write_fraction: f64,
    /// Share of a random data miss's latency the out-of-order core does not hide (estimated).
    pub random_stall_exposed: f64,
    /// Share of a lock line's miss latency exposed (an atomic waits for the line; estimated).
    pub lock_stall_exposed: f64,
    /// Share of a sequential copy's miss latency exposed (prefetched; estimated).
    pub sequential_stall_exposed: f64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            cores: 32,
            freq_ghz: 2.0,
            epoch_ms: 3.0,
            warmup_epochs: 1,
            measure_epochs: 1,
            l1_bytes: 32 * 1024,
            l2_bytes: 256 * 1024,
            base_cpi: 1.0,
            l2_hit_cycles: 10,
            l3_hit_cycles: 35,
            bounce_cycles: 100,
            memory_cycles: 200,
            shared_write_fraction: 0.1,
            random_stall_exposed: 0.5,
            lock_stall_exposed: 1.0,
            sequential_stall_exposed: 0.15,
        }
    }
}

/// SchedTask and its ablations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SchedTaskVariant {
    /// TMigrate: idle cores steal.
    pub stealing: bool,
    /// TAlloc replaced by random cores per type (same counts).
    pub random_allocation: bool,
    /// Use the overlap table (co-location in TAlloc, second choice in TMigrate).
    pub overlap: bool,
}

impl SchedTaskVariant {
    /// The full scheduler.
    pub const FULL: Self = Self {
        stealing: true,
        random_allocation: false,
        overlap: true,
    };
}

/// Where SuperFunctions run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Technique {
    /// Linux 2.6.32: a thread runs its application code and its calls on its own core;
    /// interrupts spread round robin, bottom halves where their interrupt ran; an idle core
    /// pulls one waiting thread.
    Linux,
    /// n application cores and n OS cores; calls of at least 2,000 instructions (mean) and
    /// every interrupt go to the OS cores.
    SelectiveOffload,
    /// System calls run on syscall cores (as many as last epoch's OS share asks), any call on
    /// the least loaded; interrupts stay with Linux.
    FlexSc,
    /// Every OS region (call, interrupt, bottom half) goes to the OS cores (sized like
    /// FlexSC's); each region type has two fixed cores.
    RegionSched,
    /// Invocations follow their code: to a core that ran the type recently unless it is much
    /// busier than the least loaded; no epochs.
    Slicc,
    /// TAlloc per epoch and TMigrate, or an ablation.
    SchedTask(SchedTaskVariant),
}

impl Technique {
    /// The full SchedTask.
    pub const SCHEDTASK: Self = Technique::SchedTask(SchedTaskVariant::FULL);

    /// Every technique the paper compares, and the three ablations.
    pub fn all() -> Vec<Technique> {
        vec![
            Technique::Linux,
            Technique::SelectiveOffload,
            Technique::FlexSc,
            Technique::RegionSched,
            Technique::Slicc,
            Technique::SCHEDTASK,
            Technique::SchedTask(SchedTaskVariant {
                stealing: false,
                ..SchedTaskVariant::FULL
            }),
            Technique::SchedTask(SchedTaskVariant {
                random_allocation: true,
                ..SchedTaskVariant::FULL
            }),
            Technique::SchedTask(SchedTaskVariant {
                overlap: false,
                ..SchedTaskVariant::FULL
            }),
        ]
    }

    /// Name in tables.
    pub fn label(&self) -> String {
        match self {
            Technique::Linux => "linux".into(),
            Technique::SelectiveOffload => "selective-offload".into(),
            Technique::FlexSc => "flexsc".into(),
            Technique::RegionSched => "regionsched".into(),
            Technique::Slicc => "slicc".into(),
            Technique::SchedTask(v) => {
                let mut s = String::from("schedtask");
                if !v.stealing {
                    s.push_str("-no-stealing");
                }
                if v.random_allocation {
                    s.push_str("-random-alloc");
                }
                if !v.overlap {
                    s.push_str("-no-overlap");
                }
                s
            }
        }
    }

    /// The technique called `name` (as [`Self::label`] prints it).
    pub fn by_name(name: &str) -> Option<Self> {
        Self::all().into_iter().find(|t| t.label() == name)
    }
}

/// One run's measurements over the measured epochs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// Benchmark.
    pub benchmark: String,
    /// Technique label.
    pub technique: String,
    /// Instructions started in the window.
    pub instructions: u64,
    /// Window length, cycles.
    pub window_cycles: u64,
    /// Instructions per cycle of the whole machine.
    pub throughput_ipc: f64,
    /// The same per core.
    pub per_core_ipc: f64,
    /// L1 i-cache hit rate (fetches: one per 4 instructions).
    pub icache_hit_rate: f64,
    /// L1 d-cache hit rate (0.35 accesses per instruction).
    pub dcache_hit_rate: f64,
    /// Share of core-cycles with nothing to run.
    pub idle_fraction: f64,
    /// Share of instructions in the OS.
    pub os_instruction_share: f64,
    /// Lines fetched from another core's cache per 1000 instructions.
    pub bounces_per_kinstr: f64,
    /// Invocations started in the window.
    pub invocations: u64,
    /// Each type's share of busy time, largest first.
    pub type_time_share: Vec<(String, f64)>,
    /// SchedTask: cores per type in the last epoch.
    pub last_allocation: Vec<(String, u32)>,
    /// Epochs completed.
    pub epochs: u32,
}

/// Run `benchmark` (a name of [`workload::BENCHMARKS`]) under `tech` with seed `seed`.
pub fn run(benchmark: &str, tech: Technique, o: &Options, seed: u64) -> Result<Outcome, SimError> {
    let b = workload::benchmark(benchmark)?;
    let l = layout::Layout::build(b)?;
    run_layout(&l, tech, o, seed)
}

/// Run an already laid-out benchmark.
pub fn run_layout(
    l: &layout::Layout,
    tech: Technique,
    o: &Options,
    seed: u64,
) -> Result<Outcome, SimError> {
    Ok(model::Model::new(l, tech, *o, seed)?.run())
}

/// One benchmark's simulation speed.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    /// Benchmark.
    pub benchmark: String,
    /// Technique.
    pub technique: String,
    /// Wall time of the run, s.
    pub wall_s: f64,
    /// Invocations simulated per wall second (the measured window's invocations over the
    /// whole run's wall time, warm-up included).
    pub invocations_per_s: f64,
    /// Simulated core-milliseconds (all epochs) per wall second.
    pub core_ms_per_s: f64,
}

/// Time one run of every benchmark under `techniques` (for `counterpoint bench schedtask`; a
/// bench reports, it asserts nothing).
pub fn bench(o: &Options, techniques: &[Technique], seed: u64) -> Result<Vec<BenchRow>, SimError> {
    let mut rows = Vec::new();
    for b in workload::BENCHMARKS {
        let l = layout::Layout::build(b)?;
        for &t in techniques {
            let start = std::time::Instant::now();
            let r = run_layout(&l, t, o, seed)?;
            let wall_s = start.elapsed().as_secs_f64().max(1e-9);
            let epochs = (o.warmup_epochs + o.measure_epochs) as f64;
            rows.push(BenchRow {
                benchmark: b.name.to_string(),
                technique: t.label(),
                wall_s,
                invocations_per_s: r.invocations as f64 / wall_s,
                core_ms_per_s: o.cores as f64 * o.epoch_ms * epochs / wall_s,
            });
        }
    }
    Ok(rows)
}
