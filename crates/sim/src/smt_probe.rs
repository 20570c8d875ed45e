//! Two threads on one SMT core at sub-microsecond resolution: a victim running a sequence of
//! operations and a probe thread on its sibling, with the counts each exposure gives the probe.
//!
//! The engine's ticks (1 ms) are far coarser than one operation of a cryptographic loop (about
//! a microsecond), so this module applies the engine's SMT equation
//! (`engine/contention.rs`, docs/sim.md "SMT") to a piecewise-constant timeline instead of
//! ticks: while the victim runs one operation, both threads' IPCs are the fixed point of
//!
//! `cpi_i' = cpi_core_i * (1 + min(1, IPC_s / issue_width) * (issue_penalty + same_unit_penalty * overlap))`
//! with `overlap = (1-fp_i)(1-fp_s) + fp_unit_weight * fp_i * fp_s`,
//!
//! and counts are exact integrals of those rates over any interval. Both threads' working sets
//! are taken to fit in the private caches (a modular exponentiation's operands and a probe
//! loop's registers), so the memory term of the CPI is zero. Everything random (per-operation
//! length variation, the probe's own stalls, the jitter of its read times) is drawn from the
//! caller's seeded RNG: the same inputs give the same bytes.

use crate::spec::SmtSpec;
use rand::Rng;

/// What one thread executes, in the terms of the model: core CPI alone and FP fraction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThreadMix {
    /// Cycles per instruction alone on the core (no memory stalls).
    pub cpi_core: f64,
    /// Fraction of instructions using the FP/vector unit.
    pub fp: f64,
}

/// One kind of victim operation: its length and its mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpKind {
    /// Instructions of one operation (before per-operation variation).
    pub instructions: f64,
    /// Its mix.
    pub mix: ThreadMix,
}

/// The steady-state IPCs of two threads on one SMT core (the engine's SMT fixed point).
pub fn pair_ipc(smt: &SmtSpec, a: ThreadMix, b: ThreadMix) -> (f64, f64) {
    let overlap = (1.0 - a.fp) * (1.0 - b.fp) + smt.fp_unit_weight * a.fp * b.fp;
    let factor = smt.issue_penalty + smt.same_unit_penalty * overlap;
    let (mut ia, mut ib) = (1.0 / a.cpi_core, 1.0 / b.cpi_core);
    // A contraction for the calibrated parameters; a damped iteration converges in < 100 steps.
    for _ in 0..500 {
        let na = 1.0 / (a.cpi_core * (1.0 + (ib / smt.issue_width).min(1.0) * factor));
        let nb = 1.0 / (b.cpi_core * (1.0 + (ia / smt.issue_width).min(1.0) * factor));
        let moved = ((na - ia) / ia).abs().max(((nb - ib) / ib).abs());
        ia = 0.5 * (ia + na);
        ib = 0.5 * (ib + nb);
        if moved < 1e-13 {
            break;
        }
    }
    (ia, ib)
}

/// The probe thread's noise: its own stalls and the jitter of its read times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeNoise {
    /// Relative half-width of the uniform variation of each operation's instruction count
    /// (data-dependent carries, loop exits).
    pub op_variation: f64,
    /// Rate of the probe's own stall events (its cache misses, branch mispredictions), per µs.
    pub stalls_per_us: f64,
    /// Length of one stall (no instruction retired), ns.
    pub stall_ns: f64,
    /// Half-width of the uniform jitter of each read time around its schedule, ns.
    pub read_jitter_ns: f64,
}

/// One victim operation on the timeline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpSpan {
    /// Index into the caller's operation kinds.
    pub kind: usize,
    /// Start, ns from the first operation.
    pub start_ns: f64,
    /// End, ns.
    pub end_ns: f64,
    /// Victim IPC while it runs (with the probe on the sibling).
    pub victim_ipc: f64,
    /// Probe IPC meanwhile.
    pub probe_ipc: f64,
}

/// The victim's operations back to back with the probe running throughout.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Operations in order, contiguous.
    pub ops: Vec<OpSpan>,
    /// Core clock, GHz (cycles per ns).
    pub freq_ghz: f64,
}

impl Timeline {
    /// Lay out `sequence` (indices into `kinds`) on a core with `probe` on the sibling.
    pub fn build<R: Rng>(
        smt: &SmtSpec,
        freq_ghz: f64,
        kinds: &[OpKind],
        sequence: &[usize],
        probe: ThreadMix,
        op_variation: f64,
        rng: &mut R,
    ) -> Timeline {
        let ipcs: Vec<(f64, f64)> = kinds.iter().map(|k| pair_ipc(smt, k.mix, probe)).collect();
        let mut t = 0.0;
        let mut ops = Vec::with_capacity(sequence.len());
        for &k in sequence {
            let (vi, pi) = ipcs[k];
            let v = if op_variation > 0.0 {
                rng.gen_range(-op_variation..=op_variation)
            } else {
                0.0
            };
            let instr = kinds[k].instructions * (1.0 + v);
            let dur = instr / vi / freq_ghz;
            ops.push(OpSpan {
                kind: k,
                start_ns: t,
                end_ns: t + dur,
                victim_ipc: vi,
                probe_ipc: pi,
            });
            t += dur;
        }
        Timeline { ops, freq_ghz }
    }

    /// End of the last operation, ns.
    pub fn end_ns(&self) -> f64 {
        self.ops.last().map_or(0.0, |o| o.end_ns)
    }

    /// Per-interval counts the probe reads every `interval_ns` over the whole timeline:
    /// its own instructions (per-task, virtualized) and the core's (its own plus the
    /// sibling's: what a per-core count exposes).
    pub fn sample<R: Rng>(&self, interval_ns: f64, noise: &ProbeNoise, rng: &mut R) -> Samples {
        let end = self.end_ns();
        let n = ((end / interval_ns).ceil() as usize).max(1);
        let jitter = noise.read_jitter_ns.min(interval_ns / 4.0);
        let mut times = Vec::with_capacity(n + 1);
        times.push(0.0);
        for k in 1..n {
            let j = if jitter > 0.0 {
                rng.gen_range(-jitter..=jitter)
            } else {
                0.0
            };
            times.push((k as f64 * interval_ns + j).min(end));
        }
        times.push(end);
        let mut own = Vec::with_capacity(n);
        let mut core = Vec::with_capacity(n);
        let mut i = 0; // first op that may overlap the interval
        let f = self.freq_ghz;
        for w in times.windows(2) {
            let (a, b) = (w[0], w[1]);
            let (mut probe, mut victim) = (0.0, 0.0);
            while i < self.ops.len() && self.ops[i].end_ns <= a {
                i += 1;
            }
            let mut j = i;
            while j < self.ops.len() && self.ops[j].start_ns < b {
                let o = &self.ops[j];
                let overlap_ns = o.end_ns.min(b) - o.start_ns.max(a);
                if overlap_ns > 0.0 {
                    probe += overlap_ns * f * o.probe_ipc;
                    victim += overlap_ns * f * o.victim_ipc;
                }
                j += 1;
            }
            let dt = b - a;
            if dt > 0.0 && noise.stalls_per_us > 0.0 && noise.stall_ns > 0.0 {
                let stalls = poisson(rng, noise.stalls_per_us * dt / 1000.0);
                let lost = (stalls * noise.stall_ns / dt).min(1.0);
                probe *= 1.0 - lost;
            }
            own.push(probe);
            core.push(probe + victim);
        }
        Samples {
            times_ns: times,
            own,
            core,
        }
    }
}

/// What the probe read.
#[derive(Clone, Debug, PartialEq)]
pub struct Samples {
    /// Read times, ns (`own.len() + 1` of them, from 0 to the end).
    pub times_ns: Vec<f64>,
    /// Its own instructions per interval (per-task virtualized count).
    pub own: Vec<f64>,
    /// The core's instructions per interval (both SMT threads).
    pub core: Vec<f64>,
}

/// A Poisson draw (Knuth's method for small means, a rounded normal beyond).
fn poisson<R: Rng>(rng: &mut R, mean: f64) -> f64 {
    if mean <= 0.0 {
        return 0.0;
    }
    if mean < 30.0 {
        let l = (-mean).exp();
        let mut k = 0.0;
        let mut p = 1.0;
        loop {
            p *= rng.gen::<f64>();
            if p <= l {
                return k;
            }
            k += 1.0;
        }
    }
    // Box–Muller.
    let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.gen();
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    (mean + mean.sqrt() * z).round().max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn smt() -> SmtSpec {
        SmtSpec {
            issue_width: 3.0,
            issue_penalty: 1.702,
            same_unit_penalty: 1.835,
            fp_unit_weight: 7.473,
        }
    }

    #[test]
    fn pair_ipc_is_the_engine_equation_at_its_fixed_point() {
        let s = smt();
        let a = ThreadMix {
            cpi_core: 0.6,
            fp: 0.25,
        };
        let b = ThreadMix {
            cpi_core: 0.7,
            fp: 0.5,
        };
        let (ia, ib) = pair_ipc(&s, a, b);
        let ov = 0.75 * 0.5 + 7.473 * 0.25 * 0.5;
        let f = 1.702 + 1.835 * ov;
        assert!((ia - 1.0 / (0.6 * (1.0 + (ib / 3.0).min(1.0) * f))).abs() < 1e-9);
        assert!((ib - 1.0 / (0.7 * (1.0 + (ia / 3.0).min(1.0) * f))).abs() < 1e-9);
        // A sibling always costs something; identical threads get identical IPCs.
        assert!(ia < 1.0 / 0.6 && ib < 1.0 / 0.7);
        let (x, y) = pair_ipc(&s, a, a);
        assert!((x - y).abs() < 1e-12);
    }

    #[test]
    fn samples_integrate_the_timeline_exactly_without_noise() {
        let kinds = [
            OpKind {
                instructions: 1000.0,
                mix: ThreadMix {
                    cpi_core: 0.7,
                    fp: 0.0,
                },
            },
            OpKind {
                instructions: 1500.0,
                mix: ThreadMix {
                    cpi_core: 0.6,
                    fp: 0.3,
                },
            },
        ];
        let probe = ThreadMix {
            cpi_core: 0.6,
            fp: 0.5,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let tl = Timeline::build(&smt(), 2.0, &kinds, &[0, 1, 0, 0, 1], probe, 0.0, &mut rng);
        let quiet = ProbeNoise {
            op_variation: 0.0,
            stalls_per_us: 0.0,
            stall_ns: 0.0,
            read_jitter_ns: 0.0,
        };
        let s = tl.sample(97.0, &quiet, &mut rng);
        let victim: f64 = s.core.iter().zip(&s.own).map(|(c, o)| c - o).sum();
        // The victim's instructions over the whole run are exactly its operations'.
        assert!((victim - 6000.0).abs() < 1e-6, "{victim}");
        assert_eq!(s.times_ns.len(), s.own.len() + 1);
        assert!(s.own.iter().all(|&x| x > 0.0));
    }

    #[test]
    fn poisson_mean_is_right() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for mean in [0.5, 4.0, 80.0] {
            let n = 20_000;
            let m: f64 = (0..n).map(|_| poisson(&mut rng, mean)).sum::<f64>() / n as f64;
            assert!((m - mean).abs() < 0.05 * mean + 0.02, "{mean}: {m}");
        }
    }
}
