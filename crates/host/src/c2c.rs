//! `bench c2c`: the core-to-core communication cost matrix of the live host.
//!
//! Per pair of CPUs, two probes between two threads pinned one on each CPU:
//!
//! - **ping-pong**: one 64-byte line (alone in a 128-byte aligned slot, so no neighbour shares
//!   it) that the two threads take turns to write; one round = A writes, B sees it and answers,
//!   A sees the answer: two cache-line transfers, what a spinning replica pays to learn that its
//!   partner arrived;
//! - **futex**: the same turn-taking through `FUTEX_WAIT`/`FUTEX_WAKE` on one 32-bit word, so
//!   each round is two sleeps and two wake-ups through the kernel: what a blocked replica pays
//!   to be notified (seed 001's "notification" cost; one wake-up is about half a round).
//!
//! Every round is timed on its own, so medians and 99th percentiles are over rounds. Time comes
//! from the TSC (`rdtsc`) where the CPU has one; ns are cycles over the TSC rate measured
//! against `CLOCK_MONOTONIC` during the run. Where the TSC is not invariant (no `constant_tsc`
//! and `nonstop_tsc` in `/proc/cpuinfo`) cycles are not a time base: ns come from the monotonic
//! clock per round and the report says so.
//!
//! Pairs are grouped by topology distance from the sysfs topology reader: SMT siblings, same
//! last-level cache, same package, other package.

use crate::affinity;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::Topology;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Version of the JSON document; bumped when a field changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

pub use counterpoint_core::topology::CpuDistance as Distance;

/// Distance between two different CPUs, or `None` for the same CPU or a CPU the topology does
/// not place (offline, unknown package).
pub fn distance(t: &Topology, a: CpuId, b: CpuId) -> Option<Distance> {
    t.distance(a, b)
}

/// Every unordered pair (a < b) of `cpus` that the topology places, with its distance.
pub fn plan(t: &Topology, cpus: &CpuSet) -> Vec<(CpuId, CpuId, Distance)> {
    let list: Vec<CpuId> = cpus.iter().collect();
    let mut out = Vec::new();
    for (i, &a) in list.iter().enumerate() {
        for &b in &list[i + 1..] {
            if let Some(d) = distance(t, a, b) {
                out.push((a, b, d));
            }
        }
    }
    out
}

/// Median and 99th percentile of one probe over its rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeStats {
    /// Rounds timed (warm-up rounds excluded).
    pub rounds: usize,
    /// Median round trip.
    pub median_ns: f64,
    /// 99th percentile round trip.
    pub p99_ns: f64,
    /// Median round trip in TSC cycles (`None` without a TSC).
    pub median_cycles: Option<f64>,
    /// 99th percentile in TSC cycles.
    pub p99_cycles: Option<f64>,
}

/// One measured pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    /// The initiating CPU.
    pub a: CpuId,
    /// The answering CPU.
    pub b: CpuId,
    /// Their topology distance.
    pub distance: Distance,
    /// Cache-line ping-pong round trip.
    pub pingpong: ProbeStats,
    /// Futex wake-up round trip (two wake-ups).
    pub futex: ProbeStats,
}

/// Per-distance summary: the median over the group's pairs of each pair's median (and p99).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// The distance.
    pub distance: Distance,
    /// Pairs measured at this distance.
    pub pairs: usize,
    /// Median over pairs of the ping-pong median, ns.
    pub pingpong_median_ns: f64,
    /// Median over pairs of the ping-pong p99, ns.
    pub pingpong_p99_ns: f64,
    /// Median over pairs of the futex median, ns.
    pub futex_median_ns: f64,
    /// Median over pairs of the futex p99, ns.
    pub futex_p99_ns: f64,
    /// Median over pairs of the ping-pong median, TSC cycles.
    pub pingpong_median_cycles: Option<f64>,
    /// Median over pairs of the futex median, TSC cycles.
    pub futex_median_cycles: Option<f64>,
}

/// Where one CPU sits (printed with the matrix).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuPlace {
    /// The CPU.
    pub cpu: CpuId,
    /// Its package.
    pub package: Option<u32>,
    /// Its core id within the package.
    pub core: Option<u32>,
    /// Index of its last-level cache domain.
    pub llc: Option<usize>,
}

/// The time base of the figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    /// The CPU has a time-stamp counter we read (`rdtsc`).
    pub tsc: bool,
    /// `constant_tsc` and `nonstop_tsc`: the TSC ticks at one rate in every state.
    pub tsc_invariant: bool,
    /// TSC rate measured against `CLOCK_MONOTONIC` over the run.
    pub tsc_hz: Option<f64>,
    /// Where the ns come from: `"tsc"` or `"clock_monotonic"`.
    pub ns_source: String,
}

/// The whole `bench c2c` result (`--json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C2cReport {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The CPUs measured and where they sit.
    pub topology: Vec<CpuPlace>,
    /// The time base.
    pub clock: ClockInfo,
    /// Every pair.
    pub pairs: Vec<PairResult>,
    /// Per distance, nearest first; distances without a pair are absent.
    pub groups: Vec<GroupSummary>,
}

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum C2cError {
    /// Fewer than two placed CPUs.
    #[error("bench c2c needs at least two online CPUs the topology places; CPUs considered: {0}")]
    TooFewCpus(String),
    /// A thread could not be pinned.
    #[error("pinning the probe thread to CPU {cpu}: {source}")]
    Pin {
        /// The CPU.
        cpu: CpuId,
        /// Why.
        source: affinity::AffinityError,
    },
    /// The partner thread did not answer in time (stopped, or a CPU taken away).
    #[error("CPU pair {a}-{b}: the partner thread did not answer within {secs} s")]
    Stalled {
        /// Initiator.
        a: CpuId,
        /// Partner.
        b: CpuId,
        /// The limit.
        secs: u64,
    },
    /// Interrupted by the caller's stop flag.
    #[error("interrupted")]
    Interrupted,
    /// A probe thread panicked.
    #[error("a probe thread panicked")]
    ThreadPanicked,
    /// More rounds than [`MAX_ROUNDS`] (their samples are kept in memory).
    #[error("{0} rounds per probe: at most {MAX_ROUNDS} (and at least 1)")]
    Rounds(usize),
}

/// Most timed rounds per probe and pair (8 bytes of samples each).
pub const MAX_ROUNDS: usize = 10_000_000;

/// How many rounds per probe and pair.
#[derive(Clone, Copy, Debug)]
pub struct C2cOptions {
    /// Timed ping-pong rounds per pair.
    pub pingpong_rounds: usize,
    /// Timed futex rounds per pair.
    pub futex_rounds: usize,
    /// Untimed rounds before each probe.
    pub warmup_rounds: usize,
}

impl Default for C2cOptions {
    fn default() -> Self {
        C2cOptions {
            pingpong_rounds: 20_000,
            futex_rounds: 5_000,
            warmup_rounds: 500,
        }
    }
}

/// Longest a thread waits for its partner before the pair is declared stalled.
const STALL_LIMIT: Duration = Duration::from_secs(10);

/// Median and 99th percentile (nearest rank) of unsorted samples; `None` when empty.
pub fn median_p99(samples: &mut [f64]) -> Option<(f64, f64)> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let p99_rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
    Some((samples[n / 2], samples[p99_rank - 1]))
}

/// Group summaries from pair results, nearest distance first.
pub fn summarize(pairs: &[PairResult]) -> Vec<GroupSummary> {
    let med = |mut v: Vec<f64>| median_p99(&mut v).map(|(m, _)| m);
    let mut out = Vec::new();
    for d in Distance::ALL {
        let g: Vec<&PairResult> = pairs.iter().filter(|p| p.distance == d).collect();
        if g.is_empty() {
            continue;
        }
        let of = |f: &dyn Fn(&PairResult) -> f64| med(g.iter().map(|p| f(p)).collect());
        let of_opt = |f: &dyn Fn(&PairResult) -> Option<f64>| {
            let v: Option<Vec<f64>> = g.iter().map(|p| f(p)).collect();
            v.and_then(med)
        };
        out.push(GroupSummary {
            distance: d,
            pairs: g.len(),
            pingpong_median_ns: of(&|p| p.pingpong.median_ns).unwrap_or(f64::NAN),
            pingpong_p99_ns: of(&|p| p.pingpong.p99_ns).unwrap_or(f64::NAN),
            futex_median_ns: of(&|p| p.futex.median_ns).unwrap_or(f64::NAN),
            futex_p99_ns: of(&|p| p.futex.p99_ns).unwrap_or(f64::NAN),
            pingpong_median_cycles: of_opt(&|p| p.pingpong.median_cycles),
            futex_median_cycles: of_opt(&|p| p.futex.median_cycles),
        });
    }
    out
}

/// Where each CPU of `cpus` sits.
pub fn places(t: &Topology, cpus: &CpuSet) -> Vec<CpuPlace> {
    cpus.iter()
        .map(|c| {
            let cpu = t.cpu(c);
            CpuPlace {
                cpu: c,
                package: cpu.and_then(|x| x.package),
                core: cpu.and_then(|x| x.core),
                llc: t.llc_domain_of(c),
            }
        })
        .collect()
}

/// Whether `/proc/cpuinfo` flags say the TSC is invariant.
pub fn tsc_invariant_from_cpuinfo(cpuinfo: &str) -> bool {
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> Option<u64> {
    // SAFETY: rdtsc has no memory effects; every x86_64 CPU has it.
    Some(unsafe { core::arch::x86_64::_rdtsc() })
}
#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> Option<u64> {
    None
}

/// The clock of one round: TSC cycles when invariant (cheap, ~20 cycles), else monotonic ns.
#[derive(Clone, Copy)]
enum Clock {
    Tsc,
    Mono(Instant),
}

impl Clock {
    fn now(self) -> f64 {
        match self {
            Clock::Tsc => rdtsc().unwrap_or(0) as f64,
            Clock::Mono(t0) => t0.elapsed().as_nanos() as f64,
        }
    }
}

#[repr(align(128))]
struct Slot<T>(T);

fn my_tid() -> u32 {
    nix::unistd::gettid().as_raw() as u32
}

fn pin(cpu: CpuId) -> Result<(), C2cError> {
    affinity::set(my_tid(), &CpuSet::single(cpu), &CpuSet::single(cpu))
        .map(|_| ())
        .map_err(|source| C2cError::Pin { cpu, source })
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned u32 for the whole call; the kernel only reads it.
    // EAGAIN (value changed), EINTR and ETIMEDOUT all just return to the caller's re-check.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: as above; FUTEX_WAKE does not touch memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// Which probe a pair run does.
#[derive(Clone, Copy, PartialEq)]
enum Probe {
    PingPong,
    Futex,
}

/// Spin or sleep until `word` holds `want`; false on stall or stop.
fn await_value(
    probe: Probe,
    word: &AtomicU32,
    want: u32,
    stop: &AtomicBool,
    abort: &AtomicBool,
) -> bool {
    let mut spins: u32 = 0;
    let mut since: Option<Instant> = None;
    loop {
        let v = word.load(Ordering::Acquire);
        if v == want {
            return true;
        }
        match probe {
            Probe::PingPong => {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins % 65_536 != 0 {
                    continue;
                }
            }
            Probe::Futex => futex_wait(word, v, Duration::from_millis(200)),
        }
        if stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed) {
            return false;
        }
        let t = *since.get_or_insert_with(Instant::now);
        if t.elapsed() > STALL_LIMIT {
            abort.store(true, Ordering::Relaxed);
            return false;
        }
    }
}

/// One probe on one pair: returns per-round times in the clock's unit.
fn run_probe(
    probe: Probe,
    a: CpuId,
    b: CpuId,
    rounds: usize,
    warmup: usize,
    clock: Clock,
    stop: &AtomicBool,
) -> Result<Vec<f64>, C2cError> {
    let word = Slot(AtomicU32::new(0));
    let abort = AtomicBool::new(false);
    let start = Barrier::new(2);
    let total = (warmup + rounds) as u32;
    let (samples, partner) = std::thread::scope(|s| {
        let partner = s.spawn(|| -> Result<(), C2cError> {
            let pinned = pin(b);
            if pinned.is_err() {
                abort.store(true, Ordering::Relaxed);
            }
            start.wait();
            pinned?;
            for i in 0..total {
                if !await_value(probe, &word.0, 2 * i + 1, stop, &abort) {
                    return Ok(());
                }
                word.0.store(2 * i + 2, Ordering::Release);
                if probe == Probe::Futex {
                    futex_wake(&word.0);
                }
            }
            Ok(())
        });
        let pinned = pin(a);
        if pinned.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        start.wait();
        let mut samples = Vec::with_capacity(rounds);
        if pinned.is_ok() {
            for i in 0..total {
                let t0 = clock.now();
                word.0.store(2 * i + 1, Ordering::Release);
                if probe == Probe::Futex {
                    futex_wake(&word.0);
                }
                if !await_value(probe, &word.0, 2 * i + 2, stop, &abort) {
                    break;
                }
                let t1 = clock.now();
                if i as usize >= warmup {
                    samples.push(t1 - t0);
                }
            }
        }
        // Release a partner still waiting (we stopped early).
        abort.store(true, Ordering::Relaxed);
        futex_wake(&word.0);
        (pinned.map(|()| samples), partner.join())
    });
    match partner {
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(C2cError::ThreadPanicked),
        Ok(Ok(())) => {}
    }
    let samples = samples?;
    if stop.load(Ordering::Relaxed) {
        return Err(C2cError::Interrupted);
    }
    if samples.len() < rounds {
        return Err(C2cError::Stalled {
            a,
            b,
            secs: STALL_LIMIT.as_secs(),
        });
    }
    Ok(samples)
}

fn stats(mut raw: Vec<f64>, clock: Clock, tsc_hz: Option<f64>) -> ProbeStats {
    let rounds = raw.len();
    let (m, p) = median_p99(&mut raw).unwrap_or((f64::NAN, f64::NAN));
    match (clock, tsc_hz) {
        (Clock::Tsc, Some(hz)) => ProbeStats {
            rounds,
            median_ns: m / hz * 1e9,
            p99_ns: p / hz * 1e9,
            median_cycles: Some(m),
            p99_cycles: Some(p),
        },
        _ => ProbeStats {
            rounds,
            median_ns: m,
            p99_ns: p,
            median_cycles: tsc_hz.map(|hz| m * hz / 1e9),
            p99_cycles: tsc_hz.map(|hz| p * hz / 1e9),
        },
    }
}

/// Measure every pair of `cpus` (those the topology places). `progress` is called before each
/// pair with (index, count, a, b). `stop` ends the run early with [`C2cError::Interrupted`].
pub fn run(
    t: &Topology,
    cpus: &CpuSet,
    opts: C2cOptions,
    stop: &AtomicBool,
    mut progress: impl FnMut(usize, usize, CpuId, CpuId),
) -> Result<C2cReport, C2cError> {
    for n in [opts.pingpong_rounds, opts.futex_rounds] {
        if n == 0 || n > MAX_ROUNDS {
            return Err(C2cError::Rounds(n));
        }
    }
    if opts.warmup_rounds > MAX_ROUNDS {
        return Err(C2cError::Rounds(opts.warmup_rounds));
    }
    let pairs = plan(t, cpus);
    if pairs.is_empty() {
        return Err(C2cError::TooFewCpus(cpus.to_list()));
    }
    let invariant = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| tsc_invariant_from_cpuinfo(&s))
        .unwrap_or(false);
    let tsc = rdtsc().is_some();
    let clock = if tsc && invariant {
        Clock::Tsc
    } else {
        Clock::Mono(Instant::now())
    };
    let wall0 = Instant::now();
    let tsc0 = rdtsc();
    let mut raw = Vec::new();
    for (i, &(a, b, d)) in pairs.iter().enumerate() {
        progress(i, pairs.len(), a, b);
        let w = opts.warmup_rounds;
        let pp = run_probe(Probe::PingPong, a, b, opts.pingpong_rounds, w, clock, stop)?;
        let fx = run_probe(Probe::Futex, a, b, opts.futex_rounds, w, clock, stop)?;
        raw.push((a, b, d, pp, fx));
    }
    // The TSC rate over the whole run (seconds of it), against the monotonic clock.
    let tsc_hz = match (tsc0, rdtsc()) {
        (Some(c0), Some(c1)) => {
            let secs = wall0.elapsed().as_secs_f64();
            (secs > 0.0).then(|| (c1.wrapping_sub(c0)) as f64 / secs)
        }
        _ => None,
    };
    let pairs: Vec<PairResult> = raw
        .into_iter()
        .map(|(a, b, distance, pp, fx)| PairResult {
            a,
            b,
            distance,
            pingpong: stats(pp, clock, tsc_hz),
            futex: stats(fx, clock, tsc_hz),
        })
        .collect();
    Ok(C2cReport {
        schema: SCHEMA_VERSION,
        topology: places(t, cpus),
        clock: ClockInfo {
            tsc,
            tsc_invariant: invariant,
            tsc_hz,
            ns_source: match clock {
                Clock::Tsc => "tsc".into(),
                Clock::Mono(_) => "clock_monotonic".into(),
            },
        },
        groups: summarize(&pairs),
        pairs,
    })
}
