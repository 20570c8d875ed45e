//! MASA's probe programs, as real code that stresses one resource each, and the load
//! calibration that co-runs them in pairs.
//!
//! - `int`: a dependent chain of integer multiply/xor/shift (the integer ALUs);
//! - `fp`: eight independent multiply-then-add chains (the FP multiplier and adder);
//! - `l2`: a random pointer chase over a working set of half the L2 (L2 hits, L1 misses);
//! - `mem`: a streaming read-modify-write pass over a buffer 8x the LLC (at least 64 MiB).
//!
//! Each probe counts completed *work units* (fixed amounts of work), so its rate over a timed
//! run gives the time a fixed amount of work would take: ΔT of a pair = solo rate / coupled
//! rate - 1.

use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::Topology;
use serde::Serialize;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Which resource a probe stresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    Int,
    Fp,
    L2,
    Mem,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 4] = [ProbeKind::Int, ProbeKind::Fp, ProbeKind::L2, ProbeKind::Mem];
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Int => "int",
            ProbeKind::Fp => "fp",
            ProbeKind::L2 => "l2",
            ProbeKind::Mem => "mem",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Buffer sizes the probes use, from the topology's caches.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProbeSizes {
    pub l2_working_set_bytes: usize,
    pub mem_buffer_bytes: usize,
}

impl ProbeSizes {
    pub fn for_topology(t: &Topology) -> Self {
        let size_of = |level: u8| {
            t.cache_domains(level)
                .iter()
                .filter_map(|c| c.size_bytes)
                .max()
        };
        let l2 = size_of(2).unwrap_or(1 << 20) as usize;
        let llc = t.llc_level().and_then(size_of).unwrap_or(32 << 20) as usize;
        Self {
            l2_working_set_bytes: (l2 / 2).max(64 << 10),
            // 8x the LLC, at least 64 MiB; capped at 1 GiB (VMs can report a host-sized LLC).
            mem_buffer_bytes: (llc * 8).clamp(64 << 20, 1 << 30),
        }
    }
}

/// What one probe run did.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProbeRun {
    pub units: u64,
    pub elapsed_s: f64,
}

impl ProbeRun {
    pub fn units_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.units as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

/// A probe's buffer could not be allocated (a memory limit, `ulimit -v`): said, not an abort.
#[derive(Debug, thiserror::Error)]
#[error("the {kind} probe's buffer of {bytes} bytes could not be allocated: memory limited (ulimit -v, a cgroup)?")]
pub struct ProbeError {
    /// The probe.
    pub kind: &'static str,
    /// The buffer it needed.
    pub bytes: usize,
    #[source]
    source: std::collections::TryReserveError,
}

/// A vector of `n` copies of `v`, or the allocator's refusal.
fn try_filled<T: Clone>(n: usize, v: T) -> Result<Vec<T>, std::collections::TryReserveError> {
    let mut out = Vec::new();
    out.try_reserve_exact(n)?;
    out.resize(n, v);
    Ok(out)
}

/// Run a probe on the calling thread until `duration` passes or `stop` is set.
/// Buffers are allocated and touched before the clock starts; one that cannot be allocated is
/// an error.
pub fn run(
    kind: ProbeKind,
    sizes: ProbeSizes,
    duration: Duration,
    stop: &AtomicBool,
) -> Result<ProbeRun, ProbeError> {
    let refused = |bytes: usize| {
        move |source| ProbeError {
            kind: kind.name(),
            bytes,
            source,
        }
    };
    let next = match kind {
        ProbeKind::L2 => {
            let n = sizes.l2_working_set_bytes / std::mem::size_of::<usize>();
            let mut next = try_filled(n, 0usize).map_err(refused(sizes.l2_working_set_bytes))?;
            chase_ring_into(&mut next);
            next
        }
        _ => Vec::new(),
    };
    let mut buf = match kind {
        ProbeKind::Mem => try_filled(sizes.mem_buffer_bytes / std::mem::size_of::<u64>(), 1u64)
            .map_err(refused(sizes.mem_buffer_bytes))?,
        _ => Vec::new(),
    };
    let t0 = Instant::now();
    let mut units = 0u64;
    let done = || t0.elapsed() >= duration || stop.load(Ordering::Relaxed);
    match kind {
        ProbeKind::Int => {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            while !done() {
                for _ in 0..(1 << 16) {
                    x = x.wrapping_mul(0x5851_F42D_4C95_7F2D) ^ (x >> 29);
                    x = x.wrapping_add(0x1405_7B7E_F767_814F);
                }
                x = black_box(x);
                units += 1;
            }
        }
        ProbeKind::Fp => {
            let mut acc = [1.0f64, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7];
            let (a, b) = (black_box(0.999_999_9f64), black_box(1e-7f64));
            while !done() {
                for _ in 0..(1 << 14) {
                    // A multiply, then an add: the FP units themselves. `f64::mul_add` was a
                    // call into libm's software `fma` on baseline x86-64 (no FMA instruction
                    // without `-C target-feature=+fma`): the probe timed calls and stack
                    // spills, about 6 cycles per operation (CLI probe, session 30).
                    for v in acc.iter_mut() {
                        *v = *v * a + b;
                    }
                }
                acc = black_box(acc);
                units += 1;
            }
        }
        ProbeKind::L2 => {
            let mut i = 0usize;
            while !done() {
                for _ in 0..(1 << 14) {
                    i = next[i];
                }
                i = black_box(i);
                units += 1;
            }
        }
        ProbeKind::Mem => {
            let n = buf.len();
            // One unit = one 1 MiB slice read and written, stepping through the whole buffer.
            let slice = (1 << 20) / std::mem::size_of::<u64>();
            let mut off = 0usize;
            while !done() {
                let end = (off + slice).min(n);
                for v in &mut buf[off..end] {
                    *v = v.wrapping_add(1);
                }
                black_box(&buf[off]);
                off = if end >= n { 0 } else { end };
                units += 1;
            }
        }
    }
    Ok(ProbeRun {
        units,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

/// A single random cycle over `n` slots (Sattolo's algorithm), so the chase visits every slot
/// and the prefetcher cannot guess the next one.
#[cfg(test)]
fn chase_ring(n: usize) -> Vec<usize> {
    let mut next = vec![0; n];
    chase_ring_into(&mut next);
    next
}

/// Make `next` one random cycle through all its slots (a pointer chase the prefetcher cannot
/// follow).
fn chase_ring_into(next: &mut [usize]) {
    let n = next.len();
    for (i, v) in next.iter_mut().enumerate() {
        *v = i;
    }
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = (seed % i as u64) as usize;
        next.swap(i, j);
    }
}

/// One row of the calibration table: probe `a` on the first CPU, `b` on the second.
#[derive(Clone, Debug, Serialize)]
pub struct PairResult {
    pub a: ProbeKind,
    pub b: ProbeKind,
    /// ΔT of `a` when co-running with `b`: solo rate / coupled rate - 1.
    pub delta_t_a: f64,
    pub delta_t_b: f64,
}

/// The whole calibration.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrationTable {
    pub cpus: (CpuId, CpuId),
    /// Whether the two CPUs are SMT siblings of one core (MASA's setting) or separate cores.
    pub smt_siblings: bool,
    pub seconds_per_run: f64,
    pub sizes: ProbeSizes,
    pub solo_units_per_s: Vec<(ProbeKind, f64)>,
    pub pairs: Vec<PairResult>,
    /// ΔL (change in each resource's event rate) needs a hardware PMU.
    pub delta_l: Option<String>,
}

/// The two CPUs to co-run on, among `allowed` (the caller's affinity: `taskset -c 0,2
/// counterpoint calibrate` calibrates on CPUs 0 and 2, never on one it was kept off): a core's
/// SMT siblings if both are allowed, else the first two allowed online CPUs. Until session 30
/// the caller's affinity was ignored and the probes were pinned to the first online CPUs.
pub fn calibration_cpus(t: &Topology, allowed: &CpuSet) -> Option<(CpuId, CpuId, bool)> {
    let usable = t.online_cpus().intersection(allowed);
    if let Some(core) = t
        .cores()
        .into_iter()
        .find(|c| c.intersection(&usable).len() >= 2)
    {
        let v: Vec<CpuId> = core.intersection(&usable).iter().take(2).collect();
        return Some((v[0], v[1], true));
    }
    let v: Vec<CpuId> = usable.iter().take(2).collect();
    (v.len() == 2).then(|| (v[0], v[1], false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer the allocator refuses is an error naming the probe and its size, not an abort
    /// (`burn --kind mem` under `ulimit -v` died with a backtrace).
    #[test]
    fn a_buffer_that_cannot_be_allocated_is_an_error() {
        let stop = AtomicBool::new(false);
        let huge = ProbeSizes {
            l2_working_set_bytes: usize::MAX,
            mem_buffer_bytes: usize::MAX,
        };
        for kind in [ProbeKind::Mem, ProbeKind::L2] {
            let e = run(kind, huge, Duration::from_millis(1), &stop).unwrap_err();
            assert_eq!(e.bytes, usize::MAX);
            assert!(e.to_string().contains("could not be allocated"), "{e}");
        }
    }

    #[test]
    fn chase_ring_is_one_cycle() {
        let next = chase_ring(1000);
        let (mut i, mut steps) = (0usize, 0usize);
        loop {
            i = next[i];
            steps += 1;
            if i == 0 {
                break;
            }
        }
        assert_eq!(steps, 1000);
    }

    #[test]
    fn each_probe_does_work_and_stops_on_the_flag() {
        let sizes = ProbeSizes {
            l2_working_set_bytes: 64 << 10,
            mem_buffer_bytes: 4 << 20,
        };
        let stop = AtomicBool::new(false);
        for k in ProbeKind::ALL {
            let r = run(k, sizes, Duration::from_millis(30), &stop).expect("buffers");
            assert!(r.units > 0, "{k:?} did nothing");
            assert!(r.elapsed_s >= 0.03);
        }
        stop.store(true, Ordering::Relaxed);
        let r = run(ProbeKind::Int, sizes, Duration::from_secs(60), &stop).expect("buffers");
        // Stopped at once, not after the 60 s asked (the bound leaves a loaded machine room).
        assert!(r.elapsed_s < 30.0, "{} s", r.elapsed_s);
    }

    #[test]
    fn parse_names() {
        assert_eq!(ProbeKind::parse("l2"), Some(ProbeKind::L2));
        assert_eq!(ProbeKind::parse("gpu"), None);
    }
}
