//! The tick engine: contention fixed point, counters, and the Linux-like baseline scheduler.
//!
//! State is kept in flat vectors indexed by CPU, task, LLC domain and bus; the per-tick loop
//! allocates nothing and uses no hash maps. The contention model is re-solved only when
//! something changed (a context switch, a phase change, the end of a burst of warm-ups); a
//! warm-up step in between moves the warming task's own rates (a local step) and, once its
//! miss ratio (v1) or the bus's rates (v2) have moved by more than a bound, takes one
//! fixed-point iteration (a light update); otherwise a tick just retires instructions at the
//! rates of the last solution. The reference path re-solves at every step. docs/sim.md,
//! "Speed and scaling" and "Limits".

use crate::scenario::{Scenario, Workload};
use crate::spec::{MachineSpec, MemoryKind, MissCurve, Model, Profile, SchedParams};
use crate::SimError;
use counterpoint_core::event;
use counterpoint_core::{
    Action, CounterValue, CpuId, CpuObservation, CpuSet, Machine, Observation, PickContext,
    PickNext, Sample, TaskId, TaskInfo, TaskObservation, TaskStats, Topology,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

mod contention;
mod observe;
mod scheduler;
mod tick;
mod workload;

use observe::slice_stats;
use scheduler::mask_of;
use workload::{first_phase, next_phase, seq_source, Next};

const NONE: u32 = u32::MAX;
/// Cap on fixed-point iterations of the contention model per solve.
const FIXED_POINT_MAX_ITERS: usize = 100;
/// Converged when no CPI moves by more than this, relatively.
const FIXED_POINT_TOL: f64 = 1e-11;
/// A light (warm-up or switch) update iterates the fixed point from the last solution until
/// no CPI or cache share moves by more than this in an iteration (relative; shares against
/// the domain's capacity). One fixed iteration (three on a v2 bus where both threads of a core
/// run) until session 26 left tasks up to 1.4e-1 off the reference path's work where caches
/// warm all the time (`examples/fast_vs_reference -- random 3000`: 836 scenarios above 5e-3;
/// 112 at this tolerance, most of the rest the wait of a filled share, fixed in tick.rs too;
/// 10 with both; docs/sim.md "Limits"). It bounds the last step, not the distance to the
/// fixed point, which near a knee can be larger.
const LIGHT_TOL: f64 = 1e-2;
/// Cap on a light update's iterations: on the random scenarios none needed more than 8 (mean
/// about 3; 1.55 on bench-64 under v1, 1.85 under v2), so the cap only guards against a
/// mixing that does not settle.
const LIGHT_MAX_ITERS: usize = 10;
/// Cap on Newton steps for a bus's latency (it converges in a handful).
const BUS_ITERS: usize = 60;
/// v2: Newton's method for a bus's latency stops after a step smaller than this (relative):
/// the next one would move it by about the square (contention.rs, `latency_v2`).
const NEWTON_LAST_STEP: f64 = 1e-7;
/// v2 snoop coupling: a bus's demand must move by more than this (relative) before the other
/// buses take their new snoop load in a light update (`engine/contention.rs`,
/// `note_bus_demand_v2`).
const SNOOP_RESOLVE_TOL: f64 = 1e-4;
/// The same on the v2 fast path: a socket's snoop load may lag the others' demand by 1 %
/// (snoops cost a fraction of a line each, so the latency it sees moves far less: 16
/// swim copies on one socket move an mcf's CPI on the other by 2e-4, docs/sim.md).
const SNOOP_RESOLVE_TOL_FAST: f64 = 1e-2;
/// v2 fast path: a whole solve of a bus on which a task is still warming up stops when no CPI
/// or share moves by more than this (relative) in an iteration, instead of `FIXED_POINT_TOL`:
/// the warming task's rates move again at the next ticks (a local step may move the bus's
/// rates by up to `V2_DRIFT_BOUND` before the bus is touched again), so digits below that
/// scale would be thrown away; the bus gets a settling solve (`V2_SETTLED_TOL`) once the burst
/// of warm-ups is over (`full_pending_ticks`). docs/sim.md, "Speed and scaling", third pass.
const V2_WARMING_TOL: f64 = 1e-3;
/// v2 fast path: the whole solve of a bus whose tasks have all filled their shares (the
/// settling solve after a burst of warm-ups) stops at this tolerance instead of
/// `FIXED_POINT_TOL`. Between solves the fast path's rates are approximate to the drift bound,
/// and its per-task work lies up to a few 1e-3 from the reference path's (speed_paths), so
/// digits below 1e-5 are not worth their iterations (bench-64 v2: 4.7 -> 4.1 iterations per
/// whole solve; docs/sim.md, "fifth pass").
const V2_SETTLED_TOL: f64 = 1e-5;
/// v2 fast path: a warming task's own miss ratio and CPI follow its occupancy every tick
/// (a local step); the rest of its bus is re-divided (a light update) only once the running
/// tasks' rates have drifted from the bus's last update by more than this: the sum over the
/// bus's CPUs of `|r - r_last| / R_domain + |n - n_last| / N_bus` (LLC access rate against
/// its domain's total, bus lines per cycle against the bus's total), as the last whole solve
/// or light update left them. The local step is in tick.rs. 5 % since the fourth pass (2 %
/// before): once switches became light updates, drift-triggered ones were half of them
/// (bench-64 v2: 1.33 -> 0.95 light updates per tick, +10 % speed; the fast path's gaps to the
/// reference path at most doubled, within speed_paths' bounds; docs/sim.md).
const V2_DRIFT_BOUND: f64 = 0.05;
/// A task that filled its share waits at most this many ticks for the other warming tasks of
/// its bus before the bus is re-solved (tick.rs).
const FULL_PENDING_MAX_TICKS: u32 = 10;
/// The v2 fast path's `FULL_PENDING_MAX_TICKS`. There a context switch is a light update and
/// a bus of 16 CPUs has a task warming up most of the time (a switch every 6 ticks, a warm-up
/// of about 11), so the cap, not the end of a burst, sets how often a bus is solved whole;
/// meanwhile its co-runners' rates lag by at most `V2_DRIFT_BOUND` (docs/sim.md, "fourth
/// pass": 0.29 -> 0.16 whole solves per tick on bench-64, within speed_paths' bounds).
const V2_PENDING_MAX_TICKS: u32 = 30;
/// v2 fast path: how far (relative) snoop latency updates may move a bus's latency from the
/// one its shares were divided at before the bus is marked for a settling solve. A latency
/// update keeps the shares ("the next solve catches up"), but a socket of pinned, warm tasks
/// gets no next solve: one that had settled alone kept, for good, the shares of a latency
/// without the other socket's snoops, its tasks 0.1-0.7 % off their identical twins on the
/// other socket (physics probe, session 22; the reference path was symmetric). The snoop
/// load moves a latency by a few per cent at most, so this asks for a solve only when that
/// matters, and rarely where switches divide the shares every few ticks anyway.
const V2_RESHARE_LATENCY_TOL: f64 = 1e-3;

/// A profile with derived constants for the hot path.
#[derive(Clone, Debug)]
struct Prof {
    cpi_core: f64,
    /// LLC accesses per instruction.
    api: f64,
    /// `1 / api` (0 for a program that never reaches the LLC): a product in the warming
    /// tick's time check instead of a division.
    inv_api: f64,
    /// `api / mlp`: memory stall cycles per instruction per miss ratio per cycle of latency
    /// (a product in the hot loops instead of a division).
    api_per_mlp: f64,
    /// v2: `cpi_core` and `api_per_mlp` while an SMT sibling runs (its window halved:
    /// `ProfileV2::smt_mlp`); v1: the same values.
    cpi_core_smt: f64,
    api_per_mlp_smt: f64,
    curve: MissCurve,
    fp: f64,
    /// Capacity beyond which more cache does not help (the curve's floor).
    saturation_bytes: f64,
    /// Bus line transfers per LLC miss: the fill plus, under v2, the dirty line it evicts.
    lines_per_miss: f64,
    /// Bytes of cache one miss fills: a line, or on a sectored LLC under v2 the line and
    /// the part of its sector the program leaves unused (`ProfileV2::sector_footprint`).
    fill_line_bytes: f64,
    /// v2: lines per instruction devices move on the task's behalf (DMA): bus load only.
    dma_lpi: f64,
    /// The curve as knees with a whole-number sharpness, evaluated with `powi` (see
    /// [`Prof::miss_ratio`]); `None` for other curves.
    knees: Option<FastKnees>,
    /// Accesses needed to fill the LLC from empty, as a function of the bytes held: how a
    /// warming task's misses are counted (tick.rs), up to the machine's LLC domain.
    fill: FillTable,
}

/// Warm-up misses as a function of accesses, independent of how a run slices time.
///
/// While a task fills its share every miss brings a line in, so its occupancy `o` grows with
/// its LLC accesses `a` as `do/da = line x m(o)`: the accesses needed to reach `o` from empty
/// are `A(o) = integral_0^o dx / (line m(x))`. A tick of `n` accesses from `o0` ends at
/// `A^-1(A(o0) + n)` and its misses are the lines brought in. Counting them at the miss ratio
/// of the tick's start instead (before session 13) made a task that retires more per tick
/// (one running alone) take more warm-up misses than the same task slowed by a co-runner
/// on another cache: a probe found co-runners *lowering* a victim's misses per instruction in
/// 635 of 4312 pairs (up to 5.7e-3). With one table both ways, `A^-1(A(o) + n1 + n2)` is
/// `A^-1(A(A^-1(A(o) + n1)) + n2)` up to rounding: misses depend on accesses only.
///
/// `A` is tabulated at 16 points per octave of bytes held (from one line up to the domain's
/// capacity, which is the last point), cells halved where the miss ratio moves by more than 10 % across them, each
/// integrated by Simpson's rule, and linear between points (a constant miss ratio inside a
/// cell: the cell's harmonic mean).
#[derive(Clone, Debug)]
struct FillTable {
    /// Bytes held, increasing from 0.
    occ: Vec<f64>,
    /// Accesses to fill from empty to `occ[k]`, increasing from 0.
    acc: Vec<f64>,
    /// The miss ratio at `occ[k]`, exactly.
    m: Vec<f64>,
    /// Per cell `k` (from point `k` to `k + 1`), the slopes `lerp` interpolates by: accesses per
    /// byte held, bytes held per access, miss ratio per byte held. The same quotients the
    /// lookups divided out at every call (bit for bit), computed once: a warming tick's
    /// lookups were chains of divisions.
    acc_per_occ: Vec<f64>,
    occ_per_acc: Vec<f64>,
    m_per_occ: Vec<f64>,
}

impl FillTable {
    const PER_OCTAVE: f64 = 16.0;

    /// The table from empty to `max_bytes` (the domain's capacity, its last point), with
    /// `knot_bytes` (the curve's saturation, where a task alone stops filling; ignored outside
    /// the table) a point of its own.
    fn new(
        miss_ratio: impl Fn(f64) -> f64,
        line_bytes: f64,
        max_bytes: f64,
        knot_bytes: f64,
    ) -> Self {
        let mut t = Self {
            occ: vec![0.0],
            acc: vec![0.0],
            m: vec![miss_ratio(0.0)],
            acc_per_occ: Vec::new(),
            occ_per_acc: Vec::new(),
            m_per_occ: Vec::new(),
        };
        let step = 2f64.powf(1.0 / Self::PER_OCTAVE);
        let mut hi = line_bytes;
        loop {
            let lo = *t.occ.last().unwrap_or(&0.0);
            // The last point is the capacity itself, where a task holding the whole cache
            // stops filling. Past it, the last cell's chord of the convex `A` lay above the
            // curve at the capacity, so every refill to it counted more accesses than it took
            // and fewer misses: on a 20 MB cache (not a whole octave of the grid) 483.xalancbmk
            // time-sharing with crafty at 1 ms slices missed 0.5 % less than alone and ran
            // faster than alone (NP 1.0007; physics probe, session 24). A point within 1e-9
            // of it (a power of two reached by repeated products) is the capacity too.
            let last = hi >= max_bytes * (1.0 - 1e-9);
            let hi_cell = if last && max_bytes > lo {
                max_bytes
            } else {
                hi
            };
            // The same for a task whose target is its curve's saturation (a task alone or
            // beside small co-runners): two sixtrack copies time-sharing one CPU of bench-8,
            // which refill to theirs (12.8 MB, a power law's kink) after every switch, each
            // ran 1.5e-6 faster than alone (the probe's too).
            if knot_bytes > lo * (1.0 + 1e-9) && knot_bytes < hi_cell * (1.0 - 1e-9) {
                t.push_cell(&miss_ratio, line_bytes, lo, knot_bytes, 0);
                t.push_cell(&miss_ratio, line_bytes, knot_bytes, hi_cell, 0);
            } else {
                t.push_cell(&miss_ratio, line_bytes, lo, hi_cell, 0);
            }
            if last {
                break;
            }
            hi *= step;
        }
        t.acc_per_occ = slopes(&t.occ, &t.acc);
        t.occ_per_acc = slopes(&t.acc, &t.occ);
        t.m_per_occ = slopes(&t.occ, &t.m);
        t
    }

    /// Append the cell `[lo, hi]`, halved until the miss ratio moves by less than 10 % across
    /// each piece (at most `MAX_SPLITS` times): where a curve is steep, has a kink or falls to
    /// 0, a cell integrated and interpolated as one would misplace the fill (a review found
    /// 462.libquantum's table curve needing twice the accesses it does, and a curve reaching 0
    /// stalling 4 % short of its target). A miss ratio of 0 counts as 1e-12 (the fill has then
    /// stopped for any run the engine can make).
    fn push_cell(&mut self, miss: &impl Fn(f64) -> f64, line: f64, lo: f64, hi: f64, depth: u32) {
        const MAX_SPLITS: u32 = 40;
        let (m_lo, m_hi) = (miss(lo).max(1e-12), miss(hi).max(1e-12));
        if depth < MAX_SPLITS && (m_lo > 1.1 * m_hi || m_hi > 1.1 * m_lo) {
            let mid = 0.5 * (lo + hi);
            self.push_cell(miss, line, lo, mid, depth + 1);
            self.push_cell(miss, line, mid, hi, depth + 1);
            return;
        }
        let rate = |m: f64| 1.0 / (line * m);
        let m_mid = miss(0.5 * (lo + hi)).max(1e-12);
        let a = (hi - lo) / 6.0 * (rate(m_lo) + 4.0 * rate(m_mid) + rate(m_hi));
        self.acc.push(self.acc.last().unwrap_or(&0.0) + a);
        self.occ.push(hi);
        self.m.push(miss(hi));
    }

    /// `A(o)`, searching from cell `k` (left at `o`'s cell); beyond the table, the last cell's
    /// slope.
    #[inline]
    fn acc_at(&self, o: f64, k: &mut u32) -> f64 {
        lerp(&self.occ, &self.acc, &self.acc_per_occ, o, k)
    }

    /// `A^-1(a)` and its slope there (bytes per access: `line x` the cell's miss ratio),
    /// found by `seek`'s binary search.
    #[inline]
    fn occ_and_slope(&self, a: f64) -> (f64, f64) {
        let i = seek(&self.acc, a, &mut 0);
        let slope = self.occ_per_acc[i];
        (self.occ[i] + (a - self.acc[i]) * slope, slope)
    }

    /// The miss ratio at `o`, linear between the exact values at the grid points: within a
    /// cell it moves by less than 10 %, so on a smooth stretch this is within about
    /// `alpha (alpha + 1) / 8 x 0.044^2` of the curve (1e-4 relative for a power law), but next
    /// to a kink inside a cell (a power law's clamp, a table's breakpoint) it can be off by a
    /// few 1e-3. Searches from cell `k`, which it updates.
    #[inline]
    fn miss_at(&self, o: f64, k: &mut u32) -> f64 {
        lerp(&self.occ, &self.m, &self.m_per_occ, o, k)
    }

    /// `A^-1(a)`, searching from cell `k` (left at `a`'s cell).
    #[inline]
    fn occ_at(&self, a: f64, k: &mut u32) -> f64 {
        lerp(&self.acc, &self.occ, &self.occ_per_acc, a, k)
    }
}

/// `1 / x`, or 0 for a non-positive `x`.
fn recip_or_zero(x: f64) -> f64 {
    if x > 0.0 {
        1.0 / x
    } else {
        0.0
    }
}

/// `ys` at `x`, linear between the points `(xs[i], ys[i])` (the end cells extended) by the
/// cells' `slopes` ([`slopes`]), searching from cell `k` ([`seek`], which updates it).
#[inline]
fn lerp(xs: &[f64], ys: &[f64], slopes: &[f64], x: f64, k: &mut u32) -> f64 {
    let i = seek(xs, x, k);
    ys[i] + (x - xs[i]) * slopes[i]
}

/// Per cell of the points `(xs[i], ys[i])`: `(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])`.
fn slopes(xs: &[f64], ys: &[f64]) -> Vec<f64> {
    xs.windows(2)
        .zip(ys.windows(2))
        .map(|(x, y)| (y[1] - y[0]) / (x[1] - x[0]))
        .collect()
}

/// The cell `i` of increasing `xs` with `xs[i] <= x < xs[i + 1]` (the first or last cell
/// beyond the ends): cell `k` or the next when `x` is there, else a galloping search from
/// `k` (steps of 1, 2, 4, ... cells, then a binary search inside the last step). Updates `k`.
///
/// A warm-up tick moves a few cells at 16 cells per octave, so about a quarter of bench-64's
/// lookups missed cell `k` and `k + 1`; a binary search over the whole table (about 300
/// cells, a chain of dependent loads) then took 12 % of v1's wall time (`perf record -e
/// cpu-clock`, session 24) for 6 % of its instructions. Galloping costs a move of `d` cells
/// about `2 log2 d` comparisons, and a far jump (a task switched back in) no more than the
/// plain search. Same cell as the plain search for every `x`, NaN included (`seek_tests`).
#[inline]
fn seek(xs: &[f64], x: f64, k: &mut u32) -> usize {
    let last = xs.len().saturating_sub(2);
    let i = (*k as usize).min(last);
    let inside = |j: usize| (j == 0 || xs[j] <= x) && (j == last || x < xs[j + 1]);
    let i = if inside(i) {
        i
    } else if i < last && inside(i + 1) {
        i + 1
    } else {
        gallop(xs, x, i, last)
    };
    *k = i as u32;
    i
}

/// `seek`'s search outside cells `i` and `i + 1`: the cell of the first point above `x`,
/// found from `i` outward.
#[cold]
#[inline(never)]
fn gallop(xs: &[f64], x: f64, i: usize, last: usize) -> usize {
    // The first index whose point is above `x` (`xs.len()` if none), then its cell.
    let first_above = if i < last && xs[i + 1] <= x {
        // Right: `xs[lo] <= x` throughout.
        let (mut lo, mut step) = (i + 1, 1);
        let hi = loop {
            let h = lo + step;
            if h >= xs.len() {
                break xs.len();
            }
            if xs[h] > x {
                break h;
            }
            lo = h;
            step *= 2;
        };
        lo + 1 + xs[lo + 1..hi].partition_point(|&v| v <= x)
    } else if i > 0 && x < xs[i] {
        // Left: `xs[hi] > x` throughout.
        let (mut hi, mut step) = (i, 1);
        let lo = loop {
            if hi < step {
                break 0;
            }
            let l = hi - step;
            if xs[l] <= x {
                break l;
            }
            hi = l;
            step *= 2;
        };
        lo + xs[lo..hi].partition_point(|&v| v <= x)
    } else {
        // Neither way (a NaN compares false both ways): the plain search.
        xs.partition_point(|&v| v <= x)
    };
    first_above.saturating_sub(1).min(last)
}

/// A knee curve whose sharpness is a whole number `k`: `(c / w)^k` by `k - 1` multiplications
/// instead of `powf` (the dearest step of a contention iteration: about a fifth of v2's time
/// on bench-64), and `c / w` as `c * (1 / w)`. Same formula as `MissCurve::miss_ratio`; the
/// products differ from a correctly rounded power and quotient by a few units in the last
/// place (`fast_knees_match_the_curve`).
#[derive(Clone, Debug)]
struct FastKnees {
    floor: f64,
    /// Per set: `1 / w_i` (a product instead of a division) and `f_i`.
    sets: Vec<(f64, f64)>,
    k: i32,
}

impl FastKnees {
    /// `z^k`: the catalog's sharpness 3 inline, `z (z z)`, the same products in the same order
    /// as `powi`'s helper (which the compiler calls for an exponent not known at build time).
    #[inline]
    fn pow(&self, z: f64) -> f64 {
        match self.k {
            2 => z * z,
            3 => z * (z * z),
            4 => {
                let z2 = z * z;
                z2 * z2
            }
            k => z.powi(k),
        }
    }

    fn of(curve: &MissCurve) -> Option<Self> {
        match curve {
            MissCurve::Knees {
                floor,
                sets,
                sharpness,
            } if sharpness.fract() == 0.0 && (1.0..=16.0).contains(sharpness) => Some(Self {
                floor: *floor,
                sets: sets.iter().map(|&(w, f)| (1.0 / w, f)).collect(),
                k: *sharpness as i32,
            }),
            _ => None,
        }
    }
}

impl Prof {
    fn new(p: &Profile, spec: &MachineSpec) -> Self {
        if let (Model::V2, Some(v)) = (spec.model, &p.v2) {
            // v2: the core CPI and the memory overlap are pure functions of the profile and
            // the machine's physics (spec.rs: `ProfileV2::core_cpi`, `effective_mlp`).
            // On a sectored LLC the program's data takes `k` bytes of cache per byte: its
            // curve, occupancy and fills are all in bytes of cache (spec.rs,
            // `ProfileV2::sector_footprint`).
            let k = v.sector_footprint(&spec.v2);
            let curve = v.miss_curve.stretched(k);
            let fill_line_bytes = spec.line_bytes as f64 * k;
            return Self {
                cpi_core: p.core_cpi_on(spec, spec.model),
                api: v.llc_apki / 1000.0,
                inv_api: recip_or_zero(v.llc_apki / 1000.0),
                api_per_mlp: v.llc_apki / 1000.0 / v.effective_mlp(&spec.v2),
                cpi_core_smt: v.smt_core_cpi(p.fp_fraction, &spec.v2),
                api_per_mlp_smt: v.llc_apki / 1000.0 / v.smt_effective_mlp(&spec.v2),
                saturation_bytes: saturation_of(&curve),
                fp: p.fp_fraction,
                lines_per_miss: v.lines_per_miss(&spec.v2),
                fill_line_bytes,
                dma_lpi: v.dma_lines_pki / 1000.0,
                knees: FastKnees::of(&curve),
                fill: FillTable::new(
                    |c| curve.miss_ratio(c),
                    fill_line_bytes,
                    spec.llc_bytes as f64,
                    saturation_of(&curve),
                ),
                curve,
            };
        }
        // A profile without a v2 description keeps its one core CPI; under v2 its overlap
        // still shrinks with the window beside a running sibling.
        let smt_mlp = if spec.model == Model::V2 {
            crate::spec::smt_mlp_of(p.mlp, &spec.v2)
        } else {
            p.mlp
        };
        Self {
            cpi_core: p.core_cpi_on(spec, spec.model),
            api: p.llc_apki / 1000.0,
            inv_api: recip_or_zero(p.llc_apki / 1000.0),
            api_per_mlp: p.llc_apki / 1000.0 / p.mlp,
            cpi_core_smt: p.cpi_core,
            api_per_mlp_smt: p.llc_apki / 1000.0 / smt_mlp,
            saturation_bytes: saturation_of(&p.miss_curve),
            curve: p.miss_curve.clone(),
            fp: p.fp_fraction,
            lines_per_miss: 1.0,
            fill_line_bytes: spec.line_bytes as f64,
            dma_lpi: 0.0,
            knees: FastKnees::of(&p.miss_curve),
            fill: FillTable::new(
                |c| p.miss_curve.miss_ratio(c),
                spec.line_bytes as f64,
                spec.llc_bytes as f64,
                saturation_of(&p.miss_curve),
            ),
        }
    }

    /// LLC misses of a warming task (holding `occ` bytes, below `target`) over `refs`
    /// accesses: the lines that bring it along its fill curve ([`FillTable`]), and once it
    /// reaches `target`, the rest at the miss ratio there. The table's searches start from
    /// cell `k_start` for `occ` and `k_end` for where the accesses end, and leave each at its
    /// cell: a warming tick's Newton steps look both up again, and with one cell for both each
    /// lookup searched from the other end of the step (a cold start's first tick crosses a
    /// hundred cells).
    #[inline]
    fn warm_misses(
        &self,
        occ: f64,
        target: f64,
        refs: f64,
        line: f64,
        k_start: &mut u32,
        k_end: &mut u32,
    ) -> f64 {
        let a1 = self.fill.acc_at(occ, k_start) + refs;
        let o1 = self.fill.occ_at(a1, k_end);
        if o1 < target {
            // The table and its inverse agree to rounding: a step of no accesses brings in
            // nothing, never a negative count.
            return ((o1 - occ) / line).max(0.0);
        }
        let mut kt = *k_end;
        let rest = (a1 - self.fill.acc_at(target, &mut kt)).max(0.0);
        (target - occ) / line + rest * self.miss_ratio(target)
    }

    /// The occupancy a task of this profile warms up to at cache share `share`: the whole
    /// share under footprint sharing (LRU fills it, used or not), else as much of it as the
    /// curve can use.
    #[inline]
    fn target(&self, share: f64, footprint_sharing: bool) -> f64 {
        if footprint_sharing {
            share
        } else {
            share.min(self.saturation_bytes)
        }
    }

    /// LLC accesses per cycle and bus lines per cycle (fills, dirty victims, DMA) at miss
    /// ratio `miss` and IPC `ipc`.
    #[inline]
    fn rates(&self, miss: f64, ipc: f64) -> (f64, f64) {
        (
            self.api * ipc,
            (self.api * miss * self.lines_per_miss + self.dma_lpi) * ipc,
        )
    }

    /// The miss ratio at `capacity_bytes` held: `MissCurve::miss_ratio`, with knees of a
    /// whole-number sharpness by multiplication.
    #[inline]
    fn miss_ratio(&self, capacity_bytes: f64) -> f64 {
        match &self.knees {
            Some(k) => {
                let c = capacity_bytes.max(0.0);
                let mut m = k.floor;
                for &(inv_w, f) in &k.sets {
                    m += f / (1.0 + k.pow(c * inv_w));
                }
                m.clamp(0.0, 1.0)
            }
            None => self.curve.miss_ratio(capacity_bytes),
        }
    }
}

/// Each task's request stream key: FNV-1a of its name, its affinity (kernel list format, `*`
/// when unpinned) and how many tasks before it have both the same name and the same affinity
/// (two copies listed apart get two streams), below the CPUs' streams. A task keeps its key
/// wherever the scenario lists it, unless it is listed past another task of the same name
/// and the same affinity — two tasks no run can tell apart.
pub(crate) fn stream_keys(scenario: &Scenario) -> Vec<u64> {
    let mut seen: std::collections::BTreeMap<(&str, String), u64> =
        std::collections::BTreeMap::new();
    scenario
        .tasks
        .iter()
        .map(|t| {
            let affinity = t
                .affinity
                .as_ref()
                .map_or_else(|| "*".to_string(), |a| a.to_string());
            let k = seen.entry((t.name.as_str(), affinity.clone())).or_insert(0);
            let occurrence = *k;
            *k += 1;
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            let bytes = t
                .name
                .bytes()
                .chain([0xff])
                .chain(affinity.bytes())
                .chain([0xff])
                .chain(occurrence.to_le_bytes());
            for b in bytes {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            // Top bit clear: apart from the CPUs' streams (`u64::MAX - cpu`).
            h >> 1
        })
        .collect()
}

/// Capacity beyond which more cache does not help a curve (for warm-up targets).
fn saturation_of(curve: &MissCurve) -> f64 {
    match curve {
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
        // Beyond 100^(1/s) times the largest set, every knee term is below 1 % of its
        // fraction.
        MissCurve::Knees {
            sets, sharpness, ..
        } => {
            let w = sets.iter().map(|s| s.0).fold(0.0, f64::max);
            w * 100f64.powf(1.0 / sharpness)
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
    /// Core cycles the task ran.
    pub cycles: f64,
    /// Instructions retired.
    pub instructions: f64,
    /// LLC references.
    pub llc_references: f64,
    /// LLC misses.
    pub llc_misses: f64,
    /// Memory-bus transactions (one per LLC miss: a line fill).
    pub mem_transactions: f64,
    /// Floating-point operations retired.
    pub fp_ops: f64,
    /// Time on a CPU.
    pub task_clock_ns: u64,
    /// Involuntary context switches (slice expiries with others waiting).
    pub context_switches: u64,
    /// Moves to another CPU.
    pub migrations: u64,
    /// Programs (or requests) completed.
    pub completions: u64,
}

impl Counters {
    /// What the counters moved by since `base` (an earlier reading of the same task), in
    /// whole events: the difference of the two readings each rounded to a count, as a
    /// hardware counter read twice gives. Deltas over consecutive intervals then add up to
    /// the rounded total exactly (rounding each delta instead drifted by a few counts over a
    /// run: 867094230 summed against 867094227).
    pub fn since(&self, base: &Counters) -> Counters {
        let d = |now: f64, then: f64| now.round() - then.round();
        Counters {
            cycles: d(self.cycles, base.cycles),
            instructions: d(self.instructions, base.instructions),
            llc_references: d(self.llc_references, base.llc_references),
            llc_misses: d(self.llc_misses, base.llc_misses),
            mem_transactions: d(self.mem_transactions, base.mem_transactions),
            fp_ops: d(self.fp_ops, base.fp_ops),
            task_clock_ns: self.task_clock_ns - base.task_clock_ns,
            context_switches: self.context_switches - base.context_switches,
            migrations: self.migrations - base.migrations,
            completions: self.completions - base.completions,
        }
    }
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
    /// Pool generation of the domain when the task parked its lines there.
    occ_gen: u64,
    /// The task has filled its target (its share, or all its curve can use) since it was last
    /// switched in: it then follows its share, up to `fill_bytes` more per tick.
    full: bool,
    /// Bytes the task's misses brought into the LLC in its last tick while full (how far its
    /// occupancy can follow a growing share within one tick).
    fill_bytes: f64,
    /// Where the last warm-up step left its search in its profile's `FillTable` (occupancy
    /// only grows while warming, so the next step starts here).
    fill_k: u32,
    /// LRU order of a returning task's lines (`Simulation::evict_waiting`): the bytes it got
    /// back at its switch-in, older than every waiting task's lines, that its own fills replace
    /// before they evict other tasks' lines; 0 once it has touched as many distinct bytes since
    /// (or for a cold start, or after a phase change).
    lru_hold: f64,
    /// Its LLC references at that switch-in.
    lru_refs0: f64,
    /// The references a cold start makes until it has touched `lru_hold` distinct bytes (its
    /// profile's fill curve): the end of the re-touch.
    lru_refs: f64,
    /// Search position in the fill table for the distinct bytes touched since the switch-in.
    lru_k: u32,
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
    domain: u32,
    bus: u32,
    // Solved rates for the running task.
    cpi: f64,
    miss: f64,
    /// The miss ratio the bus's last solve or light update gave (`miss` moves in between with a
    /// warming task's local steps). v1: a light update is due when a warming task's ratio has
    /// moved 0.5 % from this one; both models: when a task fills its share at a ratio 0.5 %
    /// from it.
    miss_solved: f64,
    share: f64,
    /// The task whose rates the last solve computed (its share seeds the next solve).
    solved_task: u32,
    /// Last miss-curve evaluation on this CPU: profile, bytes held, miss ratio.
    memo_prof: u32,
    memo_held: f64,
    memo_miss: f64,
    ipc: f64,
    /// v2 fast path: the running task's LLC access rate and bus lines per cycle at the bus's
    /// last whole solve or light update, and how far its local warm-up steps have moved them
    /// since, as its part of `Bus::drift`.
    touch_rate: f64,
    touch_lines: f64,
    drift: f64,
    busy_ns_obs: u64,
    cycles_obs: f64,
    instr_obs: f64,
    /// Lazy retire (tick.rs): the running task is steady (full, holding what it will hold,
    /// rates unchanged since its last tick), so its ticks from pass `lazy_from` on are retired
    /// later, all at once (`Simulation::flush_cpu`), by the per-tick amounts in `lazy_tick`,
    /// until the pass in `Simulation::lazy_skip` (which says whether the CPU is lazy at all).
    lazy_from: u64,
    lazy_tick: LazyTick,
}

/// A CPU's lazy run, and what the tick loop reads of a lazy CPU on the ticks it skips, kept
/// apart from `Cpu` (216 bytes) and `Task` (528): the pass at which it retires eagerly again
/// (it may cross a phase boundary there; 0 when the CPU is not lazy), its
/// LLC domain and its task's occupancy (constant while lazy: the task is full and holds its
/// target, and a switch or an update flushes the CPU first). The skip had loaded a CPU and a
/// task from far apart in memory for every steady CPU of every tick (with the store chain
/// `tick` now avoids, about 5 % of v1's wall time on bench-64: `perf record -e cpu-clock`,
/// session 24).
#[derive(Clone, Copy, Debug, Default)]
struct LazySkip {
    until: u64,
    occ: f64,
    domain: u32,
}

/// One steady tick of a CPU's running task: what it retires (instructions, FP operations, LLC
/// references and misses, bus lines). A tick is `cycles_per_tick` cycles and `tick_ns` of
/// task clock.
#[derive(Clone, Copy, Debug, Default)]
struct LazyTick {
    instr: f64,
    fp: f64,
    refs: f64,
    misses: f64,
    transfers: f64,
}

#[derive(Clone, Debug, Default)]
struct Domain {
    cpus: Vec<u32>,
    capacity: f64,
    /// `1 / capacity`, for the solver's convergence test.
    inv_capacity: f64,
    /// Lazily scaled pool of lines held by tasks that are not running here.
    idle_total: f64,
    idle_scale: f64,
    /// Bumped when the pool is evicted to nothing: lines parked in an older generation are gone.
    generation: u64,
    /// v2 fast path: total LLC access rate of the running tasks at the bus's last update.
    touch_access: f64,
    /// v2 with footprint sharing: the cache's eviction time (cycles) at the last division,
    /// where the next one starts (`footprint_shares`).
    eviction_cycles: f64,
}

impl Domain {
    /// Bytes still held by a task parked here with stored (unscaled) occupancy `occ` in pool
    /// generation `gen`.
    fn parked(&self, occ: f64, gen: u64) -> f64 {
        if gen == self.generation {
            (occ * self.idle_scale).min(self.idle_total)
        } else {
            0.0
        }
    }
}

/// One running CPU's load on its bus: demand at latency `L` is `n / (cc + q L)` bytes per
/// cycle.
#[derive(Clone, Copy, Debug, Default)]
struct LoadTerm {
    /// Bytes moved per instruction (fills, dirty victims, DMA).
    n: f64,
    /// Memory stall cycles per instruction per cycle of latency.
    q: f64,
    /// The core CPI (SMT-inflated).
    cc: f64,
}

#[derive(Clone, Debug, Default)]
struct Bus {
    cpus: Vec<u32>,
    latency_cycles: f64,
    rho: f64,
    rho_obs_sum: f64,
    /// v2: the bus's own demand (bytes per cycle) at its last solve; the other sockets'
    /// snoop load is computed from it (`coupling.rs`).
    demand: f64,
    /// v2: the demand the other buses were last re-solved for.
    demand_seen: f64,
    /// v2: `demand` as it stood when this tick's updates began: every bus's snoop load reads
    /// the others' snapshot, so the order buses are solved in within a tick does not matter
    /// and identical sockets stay identical.
    demand_snap: f64,
    /// The bus's load terms packed by `pack_bus` (contention.rs) for the latency's Newton
    /// steps, one per running CPU that moves lines. The vector keeps its capacity, so packing
    /// allocates only at a bus's first solves.
    pk: Vec<LoadTerm>,
    /// v2: the bandwidth the controller sustains for the packed traffic mix (0 when the bus
    /// carries none).
    bw_eff: f64,
    /// v2 fast path: bus lines per cycle of the running tasks at the last update, and the
    /// drift of their rates since (local warm-up steps; see `V2_DRIFT_BOUND`).
    touch_lines: f64,
    /// How much a relative change of the bus's traffic moves its latency there (at least 1):
    /// the bus-lines part of the drift is weighed by it, so a queue near saturation, where
    /// a 5 % move of traffic moves the latency by far more, is updated as often as that needs.
    touch_gain: f64,
    drift: f64,
    /// Pass of the tick loop at which the bus was last updated (solve, light or latency
    /// update): lazy retire waits for a quiet bus.
    updated_pass: u64,
    /// Its CPUs retiring lazily now (`flush_bus` has nothing to do when none is).
    lazy_cpus: u32,
    /// v2 fast path: the latency at which the shares were last divided (the end of a solve or
    /// light update); snoop latency updates move the latency without dividing them again.
    latency_at_division: f64,
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
    /// Per CPU, the scheduler's random stream.
    cpu_rngs: Vec<ChaCha8Rng>,
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
    /// Contention solves so far (one per dirty bus per tick): the engine's main cost.
    solves: u64,
    /// Buses with a warming task whose miss ratio moved: they get a light update at the next
    /// tick (the fixed point iterated to `LIGHT_TOL`) instead of a whole solve (`light_update`).
    light_bus: Vec<bool>,
    light: bool,
    /// v2, snoop coupling: buses whose snoop load moved, for a latency update at the next tick
    /// (`latency_update`); `light` is also set when any is.
    latency_bus: Vec<bool>,
    /// v2, snoop coupling: updates other buses asked for during this tick's updates (1: a
    /// latency update, 2: a whole solve on the reference path), given at the next tick, when
    /// the demand snapshot holds the demand that moved.
    snoop_next: Vec<u8>,
    /// Latency updates so far.
    latency_updates: u64,
    /// Per bus, ticks since a task filled its share without a whole solve since (0: none).
    full_pending_ticks: Vec<u32>,
    /// Light updates so far.
    light_updates: u64,
    /// v2 fast path: warm-up steps taken by the warming task alone (tick.rs).
    local_steps: u64,
    /// Fixed-point iterations of all whole solves so far.
    solve_iterations: u64,
    /// Fixed-point iterations of light updates so far (each iterates to `LIGHT_TOL`).
    light_iterations: u64,
    /// Re-solve the whole fixed point for warm-up steps too (the slow, reference path).
    exact_warmup: bool,
    /// v2 with `LlcSharing::Footprint`: shares are the footprints' natural partition and a
    /// warming task fills its whole share (no cap at what its curve can use).
    footprint_sharing: bool,
    /// v2 fast path: steady CPUs retire lazily (tick.rs); off only to check it
    /// (`set_lazy_retire`).
    lazy_retire: bool,
    /// Solo reference runs: the points (task, instructions, task-clock ns) where a task crossed
    /// into a new phase during the last tick (tick.rs). A crossing tick runs at two rates, so a
    /// solo curve interpolating linearly across it would misplace a target inside it.
    record_crossings: bool,
    crossings: Vec<(u32, f64, f64)>,
    /// Passes of the tick's per-CPU loop so far (lazy retire counts deferred ticks in them).
    tick_passes: u64,
    // Scratch for the solver (kept to avoid per-tick allocation).
    scratch_dom_access: Vec<f64>,
    scratch_cc: Vec<f64>,
    /// Per CPU: its running task's memory stall cycles per instruction per miss ratio per
    /// cycle of latency, as the last solve found it (`Prof::api_per_mlp`, or `_smt` while a
    /// sibling runs), beside `scratch_cc`.
    scratch_apm: Vec<f64>,
    /// Per CPU: whether a sibling ran at the last solve (its task's `_smt` rates were used):
    /// a tick that crosses into a new phase rates the rest of it with the same ones.
    scratch_smt: Vec<bool>,
    /// Per CPU: LLC accesses per cycle of its running task in this iteration.
    scratch_rate: Vec<f64>,
    scratch_dom_running: Vec<f64>,
    /// Running tasks still warming up, per bus, in the current tick.
    scratch_bus_warming: Vec<u32>,
    /// Per CPU: the share map's image in this iteration, and the previous iteration's shares
    /// and image (Anderson mixing, contention.rs).
    scratch_share: Vec<f64>,
    scratch_prev_x: Vec<f64>,
    scratch_prev_f: Vec<f64>,
    /// The running CPUs of the bus being solved and their profiles (contention.rs).
    scratch_run: Vec<(u32, u32)>,
    /// CPUs with a waiting task, collected by the tick's idle balancing.
    scratch_sources: Vec<usize>,
    /// CPUs running a task, one bit each (`Cpu::current != NONE`, kept by `switch_out` and
    /// `dispatch`): the tick visits only these, so a machine of 1024 mostly idle CPUs (a
    /// server's solo reference run on bench-1024) does not walk every CPU's state twice a tick.
    busy: Vec<u64>,
    /// CPUs whose run queue holds a task, one bit each (`Simulation::note_queue`).
    queued: Vec<u64>,
    /// A copy of `busy` for the slice-expiry walk, which switches tasks as it goes.
    scratch_busy: Vec<u64>,
    /// Per CPU: `LazySkip`.
    lazy_skip: Vec<LazySkip>,
    /// Per CPU: when the running task's slice ends (kept out of `Cpu`, like `lazy_skip`: the
    /// slice-expiry walk reads it for every running CPU at every tick).
    slice_end_ns: Vec<u64>,
    /// No running task's slice ends before this (the earliest `slice_end_ns` of the running
    /// CPUs as the last slice-expiry walk left them, lowered by every slice begun since): the
    /// tick skips the walk before it. Most ticks end no slice (a slice is tens of ticks).
    next_slice_end_ns: u64,
    /// Per task: it has run since the last `take_interval` (tick.rs), so its counters may
    /// have moved.
    ran_in_interval: Vec<bool>,
}

impl Simulation {
    /// Build the machine and its tasks from a scenario; `seed` drives every random choice.
    /// The scenario is checked as a file or a builder's is ([`Scenario::validate`]): its fields
    /// are public, and one edited after it was built (a `start_ms` between ticks, a task on a
    /// CPU the machine lacks) is refused here rather than run as something else (review,
    /// session 25).
    pub fn new(scenario: &Scenario, seed: u64) -> Result<Self, SimError> {
        scenario.validate()?;
        Self::build(scenario, seed, &stream_keys(scenario))
    }

    /// A machine running the one-task scenario `solo`, its task drawing requests from the
    /// stream `stream_key` it has in the whole scenario ([`stream_keys`]).
    pub(crate) fn new_solo(solo: &Scenario, seed: u64, stream_key: u64) -> Result<Self, SimError> {
        let mut sim = Self::build(solo, seed, &[stream_key])?;
        sim.record_crossings = true;
        Ok(sim)
    }

    /// Where tasks crossed into a new phase during the last tick: (task, instructions,
    /// task-clock ns) at each crossing, in order (solo runs only; empty otherwise).
    pub(crate) fn crossings(&self) -> &[(u32, f64, f64)] {
        &self.crossings
    }

    /// `stream_keys[i]`: the random stream of task `i`'s requests ([`stream_keys`]).
    fn build(scenario: &Scenario, seed: u64, stream_keys: &[u64]) -> Result<Self, SimError> {
        let mut spec = scenario.machine.clone();
        // The SMT sharing the engine reads (`spec.smt`) is the model's (v2 may refit it).
        spec.smt = spec.smt_for_model();
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
                inv_capacity: 1.0 / spec.llc_bytes as f64,
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
                domain: domain as u32,
                bus: bus as u32,
                cpi: 1.0,
                solved_task: NONE,
                memo_prof: NONE,
                memo_held: 0.0,
                memo_miss: 1.0,
                miss: 0.0,
                miss_solved: 0.0,
                share: 0.0,
                ipc: 0.0,
                touch_rate: 0.0,
                touch_lines: 0.0,
                drift: 0.0,
                busy_ns_obs: 0,
                cycles_obs: 0.0,
                instr_obs: 0.0,
                lazy_from: 0,
                lazy_tick: LazyTick::default(),
            });
        }
        let freq_hz = spec.freq_ghz * 1e9;
        let l0_cycles = spec.mem_latency_ns * spec.freq_ghz;
        for b in &mut buses {
            b.latency_cycles = l0_cycles;
        }
        // The scheduler's draws (slice jitter, a new task's first slice, background ticks)
        // come from each CPU's own stream: on a CPU they follow that CPU's events only, so
        // listing pinned tasks in another order across CPUs changes nothing but their numbers
        // (physics probe, session 14: with one generator for the machine it acted as a new
        // seed under v2). Streams from the top of the range, apart from the tasks' (below).
        let cpu_rngs: Vec<ChaCha8Rng> = (0..ncpu)
            .map(|c| {
                let mut r = ChaCha8Rng::seed_from_u64(seed);
                r.set_stream(u64::MAX - c as u64);
                r
            })
            .collect();
        let mut profs: Vec<Prof> = Vec::new();
        let mut prof_keys: Vec<Profile> = Vec::new();
        let mut intern = |p: &Profile| -> Result<u32, SimError> {
            p.validate().map_err(SimError::Invalid)?;
            if let Some(i) = prof_keys.iter().position(|k| k == p) {
                return Ok(i as u32);
            }
            prof_keys.push(p.clone());
            profs.push(Prof::new(p, &spec));
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
                    // Each server's request stream has its own generator, keyed by the task's
                    // name and affinity (`stream_keys`): the same task draws the same requests
                    // alone and shared, wherever the scenario lists it.
                    let mut stream = ChaCha8Rng::seed_from_u64(seed);
                    stream.set_stream(stream_keys.get(i).copied().unwrap_or(0));
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
                occ_gen: 0,
                full: false,
                fill_bytes: 0.0,
                fill_k: 0,
                lru_hold: 0.0,
                lru_refs0: 0.0,
                lru_refs: 0.0,
                lru_k: 0,
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
        let ntasks = tasks.len();
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
            scratch_apm: vec![0.0; ncpu],
            scratch_smt: vec![false; ncpu],
            scratch_rate: vec![0.0; ncpu],
            scratch_share: vec![0.0; ncpu],
            scratch_prev_x: vec![0.0; ncpu],
            scratch_prev_f: vec![0.0; ncpu],
            scratch_run: Vec::with_capacity(ncpu),
            scratch_sources: Vec::new(),
            busy: vec![0; ncpu.div_ceil(64)],
            scratch_busy: Vec::new(),
            lazy_skip: vec![LazySkip::default(); ncpu],
            slice_end_ns: vec![0; ncpu],
            next_slice_end_ns: 0,
            queued: vec![0; ncpu.div_ceil(64)],
            ran_in_interval: vec![false; ntasks],
            cpus,
            domains,
            buses,
            cpu_rngs,
            now_ns: 0,
            tick_ns,
            cycles_per_tick: freq_hz * tick_ns as f64 * 1e-9,
            l0_cycles,
            peak_bytes_per_cycle: spec.bus_bandwidth_gb_per_s() * 1e9 / freq_hz,
            next_balance_ns: 0,
            next_arrival_ns: 0,
            dirty: true,
            dirty_bus: vec![true; nbus],
            obs_start_ns: 0,
            obs_ticks: 0,
            solves: 0,
            light_bus: vec![false; nbus],
            light: false,
            latency_bus: vec![false; nbus],
            snoop_next: vec![0; nbus],
            latency_updates: 0,
            full_pending_ticks: vec![0; nbus],
            scratch_bus_warming: vec![0; nbus],
            light_updates: 0,
            local_steps: 0,
            solve_iterations: 0,
            light_iterations: 0,
            exact_warmup: false,
            footprint_sharing: spec.model == Model::V2
                && spec.v2.llc_sharing == crate::spec::LlcSharing::Footprint,
            lazy_retire: true,
            record_crossings: false,
            crossings: Vec::new(),
            tick_passes: 0,
            spec,
        };
        sim.next_balance_ns = sim.ms_to_ns(sim.sched.balance_interval_ms);
        sim.arrivals(None);
        Ok(sim)
    }

    fn ms_to_ns(&self, ms: f64) -> u64 {
        (ms * 1e6).round().max(self.tick_ns as f64) as u64
    }

    /// Contention solves so far (one per bus whose running set or rates changed, per tick).
    pub fn solves(&self) -> u64 {
        self.solves
    }
    /// Light updates so far (a warming task's miss ratio moved, a task filled its share, or on
    /// the v2 fast path a context switch: its bus iterated the fixed point to `LIGHT_TOL`
    /// instead of taking a whole solve).
    pub fn light_updates(&self) -> u64 {
        self.light_updates
    }
    /// Latency updates so far (v2, several sockets with snoops: another socket's demand moved,
    /// so this bus's latency and CPIs were re-solved for the new snoop load alone).
    pub fn latency_updates(&self) -> u64 {
        self.latency_updates
    }
    /// v2 fast path: warm-up steps in which only the warming task's own miss ratio and CPI
    /// moved (its bus's other tasks keep their rates until the drift passes a bound).
    pub fn local_steps(&self) -> u64 {
        self.local_steps
    }
    /// Fixed-point iterations of light updates so far (deterministic, like `light_updates`).
    pub fn light_iterations(&self) -> u64 {
        self.light_iterations
    }
    /// Fixed-point iterations of all whole solves so far (each one pass over the bus's CPUs
    /// with a miss-curve evaluation per running task and a Newton step for the latency).
    pub fn solve_iterations(&self) -> u64 {
        self.solve_iterations
    }
    /// Whether warm-up steps re-solve the whole contention fixed point at once (the reference
    /// path) or take a light update (iterated to `LIGHT_TOL`), with the whole solve when the
    /// burst of warm-ups on the bus is over (the default). docs/sim.md, "Speed and scaling".
    pub fn set_exact_warmup(&mut self, exact: bool) {
        // The reference path retires every tick: nothing stays deferred across the switch.
        self.flush_all();
        self.exact_warmup = exact;
    }
    /// Whether steady CPUs off the reference path retire lazily, under either model (the
    /// default; docs/sim.md, "v2, sixth pass", and since session 19 v1 too). Turning it off
    /// retires every CPU every tick; the results differ only by the rounding of a product
    /// against a sum (`tests/speed_paths.rs`).
    pub fn set_lazy_retire(&mut self, lazy: bool) {
        self.flush_all();
        self.lazy_retire = lazy;
    }
    /// The v2 fast path (docs/sim.md, "Speed and scaling", third pass): model v2 off the
    /// reference path. v1's paths are left as they were (v1 is calibrated).
    fn v2_fast(&self) -> bool {
        self.spec.model == Model::V2 && !self.exact_warmup
    }
    /// Simulated time since the start.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }
    /// Length of one tick.
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }
    /// The machine being simulated.
    pub fn spec(&self) -> &MachineSpec {
        &self.spec
    }
    /// Number of tasks (ids are 0..count).
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
    /// Display label of task `i` (its program, shell or server).
    pub fn task_label(&self, i: usize) -> Option<&str> {
        self.tasks.get(i).map(|t| t.label.as_str())
    }
    /// Name of task `i` as the scenario gave it.
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
            self.domains[t.occ_domain as usize].parked(t.occ, t.occ_gen)
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

    fn task_index(&self, id: TaskId) -> Result<usize, SimError> {
        let i = id.0 as usize;
        if i < self.tasks.len() {
            Ok(i)
        } else {
            Err(SimError::BadAction(format!("no task {id}")))
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
            // A simulated task has one thread: a thread-level action sets the task.
            Action::SetAffinity { task, cpus } | Action::SetThreadAffinity { task, cpus, .. } => {
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

#[cfg(test)]
mod seek_tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain search `seek` stands for.
    fn plain(xs: &[f64], x: f64) -> usize {
        xs.partition_point(|&v| v <= x)
            .saturating_sub(1)
            .min(xs.len().saturating_sub(2))
    }

    proptest! {
        /// From any starting cell, for any `x` (inside, on a point, beyond either end), the
        /// cell of the plain search over the whole table.
        #[test]
        fn seek_finds_the_plain_searchs_cell(
            steps in proptest::collection::vec(0.0f64..10.0, 2..400),
            x in -20.0f64..4100.0,
            k in 0u32..500,
            on_point in any::<bool>(),
        ) {
            let mut xs = Vec::with_capacity(steps.len());
            let mut acc = 0.0;
            for s in steps {
                // Strictly increasing, as every table here is.
                acc += s + 1e-3;
                xs.push(acc);
            }
            let x = if on_point { xs[(k as usize) % xs.len()] } else { x };
            let mut kk = k;
            let got = seek(&xs, x, &mut kk);
            prop_assert_eq!(got, plain(&xs, x));
            prop_assert_eq!(kk as usize, got);
        }
    }

    #[test]
    fn seek_of_nan_and_infinities_is_the_plain_searchs() {
        let xs: Vec<f64> = (0..50).map(|i| i as f64).collect();
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0] {
            for k in [0, 1, 10, 48, 49, 200] {
                let mut kk = k;
                assert_eq!(seek(&xs, x, &mut kk), plain(&xs, x), "x {x} from {k}");
            }
        }
    }
}

#[cfg(test)]
mod fill_tests {
    use super::*;
    use crate::catalog::Catalog;
    use proptest::prelude::*;

    proptest! {
        /// Warm-up misses depend on the accesses made, not on how they are cut into ticks:
        /// one step of `n1 + n2` accesses brings in what a step of `n1` and then one of `n2`
        /// from where it ended do (the engine counts a warming task's misses this way).
        #[test]
        fn warm_up_misses_do_not_depend_on_the_tick(
            prog in 0usize..8,
            v2 in any::<bool>(),
            occ0_kb in 0.0f64..2048.0,
            target_kb in 1.0f64..4096.0,
            n1 in 0.0f64..2e6,
            n2 in 0.0f64..2e6,
        ) {
            let names = ["gzip", "parser", "swim", "mesa", "wupwise", "art", "mcf", "gcc"];
            let cat = Catalog::builtin();
            let mut spec = cat.machine("dualcore-shared-l2").unwrap();
            spec.model = if v2 { Model::V2 } else { Model::V1 };
            let p = Prof::new(&cat.program(names[prog]).unwrap().phases[0].profile, &spec);
            let line = spec.line_bytes as f64;
            let target = (target_kb * 1024.0).min(spec.llc_bytes as f64);
            let occ0 = (occ0_kb * 1024.0).min(target * 0.999);
            let whole = p.warm_misses(occ0, target, n1 + n2, line, &mut 0, &mut 0);
            let first = p.warm_misses(occ0, target, n1, line, &mut 0, &mut 0);
            let occ1 = (occ0 + first * line).min(target);
            let second = if occ1 < target * (1.0 - 1e-9) {
                p.warm_misses(occ1, target, n2, line, &mut 0, &mut 0)
            } else {
                n2 * p.miss_ratio(target)
            };
            let parts = first + second;
            prop_assert!(
                (whole - parts).abs() <= 1e-9 * whole.max(1.0),
                "{} accesses at once: {whole} misses; in two steps: {parts}", n1 + n2
            );
            // Never more misses than accesses.
            prop_assert!(whole <= (n1 + n2) * (1.0 + 1e-12));
        }
    }

    /// Accesses to fill from empty, by a fine trapezoid (512 points per octave).
    fn fine_fill(curve: &MissCurve, line: f64, to: f64) -> f64 {
        let rate = |x: f64| 1.0 / (line * curve.miss_ratio(x).max(1e-12));
        let mut a = line / 6.0 * (rate(0.0) + 4.0 * rate(line / 2.0) + rate(line));
        let step = 2f64.powf(1.0 / 512.0);
        let mut x = line;
        while x < to {
            let y = (x * step).min(to);
            a += (y - x) * 0.5 * (rate(x) + rate(y));
            x = y;
        }
        a
    }

    /// The table against a fine integral for every catalog program's curves (both models),
    /// kinks and all (462.libquantum's table curve was off by +108 % with one Simpson step per
    /// cell).
    #[test]
    fn fill_table_matches_a_fine_integral_for_every_catalog_curve() {
        let cat = Catalog::builtin();
        let (line, max) = (64.0, 16.0 * 1024.0 * 1024.0);
        for name in cat.program_names() {
            let prog = cat.program(&name).unwrap();
            for phase in &prog.phases {
                let mut curves = vec![phase.profile.miss_curve.clone()];
                curves.extend(phase.profile.v2.as_ref().map(|v| v.miss_curve.clone()));
                for curve in curves {
                    let t =
                        FillTable::new(|c| curve.miss_ratio(c), line, max, saturation_of(&curve));
                    for kb in [64.0, 256.0, 1024.0, 4096.0, 16384.0] {
                        let o = kb * 1024.0;
                        let (got, want) = (t.acc_at(o, &mut 0), fine_fill(&curve, line, o));
                        assert!(
                            (got - want).abs() <= 1e-2 * want,
                            "{name} at {kb} KB: table {got:.6e}, integral {want:.6e}"
                        );
                    }
                }
            }
        }
    }

    /// The capacity and the curve's saturation are points of the grid, whatever their size
    /// (a refill ending between two points counted its accesses on the cell's chord).
    #[test]
    fn the_capacity_and_the_saturation_are_points_of_the_table() {
        let curve = MissCurve::PowerLaw {
            m_ref: 0.05,
            c_ref_bytes: 512.0 * 1024.0,
            alpha: 0.5,
            m_min: 0.01,
        };
        let saturation = saturation_of(&curve);
        for max_mb in [4.0, 12.0, 16.0, 20.0, 22.0] {
            let max = max_mb * 1024.0 * 1024.0;
            let t = FillTable::new(|c| curve.miss_ratio(c), 64.0, max, saturation);
            assert_eq!(t.occ.last().copied(), Some(max), "{max_mb} MB");
            assert!(t.occ.windows(2).all(|w| w[1] > w[0]), "{max_mb} MB");
            if saturation < max {
                assert!(t.occ.contains(&saturation), "{max_mb} MB: {saturation}");
            }
        }
    }

    /// A curve that falls to 0 at 1 MB: the fill approaches it as `exp(-m0 line a / x0)`, so
    /// it is within 1e-8 of it after about 6e5 accesses; the table does not stall short of it.
    #[test]
    fn a_fill_toward_a_zero_miss_ratio_does_not_stall() {
        let x0 = 1024.0 * 1024.0;
        let curve = MissCurve::Table {
            points: vec![(0.0, 0.5), (x0, 0.0)],
        };
        let t = FillTable::new(|c| curve.miss_ratio(c), 64.0, 4.0 * x0, x0);
        let o = t.occ_at(1e6, &mut 0);
        assert!(
            (o - x0).abs() <= 1e-8 * x0,
            "after 1e6 accesses: {o} of {x0}"
        );
    }
}

#[cfg(test)]
mod cold_start_tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::scenario::{TaskSpec, Workload};
    use counterpoint_core::CpuSet;

    /// A new program's occupancy after the tick it started in counts only the misses taken
    /// after it started: swim's misses earlier in that tick brought in swim's lines, not
    /// gzip's (review, session 14: they were added to gzip's occupancy).
    #[test]
    fn a_new_programs_occupancy_excludes_the_finished_programs_misses() {
        let cat = Catalog::builtin();
        for model in [Model::V1, Model::V2] {
            let mut swim = cat.program("swim").unwrap();
            // Part of a tick's work at swim's rate on this machine, in one phase.
            swim.phases.truncate(1);
            swim.phases[0].instructions = 200_000;
            let gzip = cat.program("gzip").unwrap();
            // (programs ended, misses, occupancy) after one tick.
            let one_tick = |work: Workload| {
                let sc = Scenario::builder(&cat, "bench-8")
                    .unwrap()
                    .model(model)
                    .duration_ms(10)
                    .task_spec(TaskSpec {
                        name: "t".into(),
                        workload: work,
                        affinity: Some(CpuSet::single(0)),
                        repeat: false,
                        start_ms: 0,
                    })
                    .build()
                    .unwrap();
                let mut sim = Simulation::new(&sc, 1).unwrap();
                sim.advance_quiet(sim.tick_ns(), None);
                let t = &sim.tasks[0];
                (t.c.completions, t.c.llc_misses, t.occ)
            };
            // swim alone ends inside the tick with the misses it takes in the shell too (the
            // same program from the same cold start).
            let (swim_done, swim_misses, _) = one_tick(Workload::Program(swim.clone()));
            let (done, misses, occ) = one_tick(Workload::Shell(vec![swim, gzip]));
            assert_eq!(
                (swim_done, done),
                (1, 1),
                "{model:?}: swim ends inside the tick"
            );
            let line = 64.0; // bench-8's lines
            let gzip_lines = (misses - swim_misses) * line;
            assert!(
                gzip_lines > 0.0 && (occ - gzip_lines).abs() <= 1e-6 * gzip_lines,
                "{model:?}: gzip holds {occ} bytes; its own misses brought {gzip_lines}, \
                 the tick's {}",
                misses * line
            );
        }
    }
    /// On a sectored LLC a warming task's occupancy follows its stretched fill curve, tick by
    /// tick, and every miss fills `k` lines of it: parser alone on `zhang-smp` with
    /// `sectored_llc` on (`k` 1.9), from cold until it holds its share. Each tick's new
    /// occupancy is `A^-1(A(o) + accesses)` of the fill table built with `k` lines a miss,
    /// its misses are that growth over `k` lines, and the headroom the tick that fills it
    /// leaves (`fill_bytes`) covers a tick of misses at the full miss ratio, `k` lines each.
    #[test]
    fn a_sectored_warm_up_fills_k_lines_a_miss() {
        let mut cat = Catalog::builtin();
        let mut m = cat.machine("zhang-smp").unwrap();
        m.v2.sectored_llc = true;
        cat.set_machine(m.clone());
        let sc = Scenario::builder(&cat, "zhang-smp")
            .unwrap()
            .model(Model::V2)
            .duration_ms(2000)
            .task("parser", Some(CpuSet::single(0)))
            .unwrap()
            .build()
            .unwrap();
        let mut sim = Simulation::new(&sc, 1).unwrap();
        let line = m.line_bytes as f64;
        let (mut ticks, mut filled) = (0, false);
        while !filled && ticks < 2000 {
            let (o0, m0, r0) = {
                let t = &sim.tasks[0];
                (t.occ, t.c.llc_misses, t.c.llc_references)
            };
            sim.advance_quiet(sim.tick_ns(), None);
            ticks += 1;
            let t = &sim.tasks[0];
            let p = &sim.profs[t.prof as usize];
            let k = p.fill_line_bytes / line;
            assert!((k - 1.9).abs() < 1e-12, "{k}");
            let (dm, dr) = (t.c.llc_misses - m0, t.c.llc_references - r0);
            let grown = t.occ - o0;
            if t.full {
                // The tick that fills it stops at its target; the rest of its misses refill.
                assert!(
                    grown <= dm * k * line * (1.0 + 1e-9),
                    "tick {ticks}: grew {grown} bytes from {dm} misses"
                );
                filled = true;
                let m_full = p.miss_ratio(t.occ);
                assert!(
                    t.fill_bytes >= dr * m_full * k * line * (1.0 - 1e-12),
                    "headroom {} for {dr} accesses at {m_full}",
                    t.fill_bytes
                );
            } else {
                assert!(
                    (grown - dm * k * line).abs() <= 1e-9 * grown.max(line),
                    "tick {ticks}: grew {grown} bytes from {dm} misses"
                );
                let want = p.fill.occ_at(p.fill.acc_at(o0, &mut 0) + dr, &mut 0);
                // To 0.5 %: the last small part of a warming tick's accesses is counted at the
                // tick's average miss ratio, not along the curve (tick.rs, `WARM_TIME_TOL`;
                // 0.12 % on the first tick). Unstretched (`k` 1) the occupancy would be half.
                assert!(
                    (t.occ - want).abs() <= 5e-3 * want,
                    "tick {ticks}: holds {} where the fill curve gives {want}",
                    t.occ
                );
            }
        }
        assert!(filled && ticks > 2, "parser warmed up in {ticks} ticks");
    }
}
