//! The contention model: per bus, the fixed point of LLC sharing (frequency of access), SMT
//! issue sharing and queueing latency on the memory bus, turned into each running task's CPI.

use super::*;

impl Simulation {
    /// Solve the contention fixed point for the running set of bus `b` (LLC domains and SMT
    /// cores never span buses, so buses are independent components).
    pub(super) fn solve(&mut self, b: usize) {
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
        self.note_bus_demand_v2(b);
    }

    /// Bus demand in bytes per cycle at memory latency `lat` (cycles), and its derivative in
    /// `lat`.
    #[inline]
    pub(super) fn bus_demand(&self, b: usize, lat: f64) -> (f64, f64) {
        let line = self.spec.line_bytes as f64;
        let (mut sum, mut deriv) = (0.0, 0.0);
        for &c in &self.buses[b].cpus {
            let cpu = &self.cpus[c as usize];
            if cpu.current == NONE {
                continue;
            }
            let p = &self.profs[self.tasks[cpu.current as usize].prof as usize];
            let mpi = p.api * cpu.miss;
            if mpi > 0.0 || p.dma_lpi > 0.0 {
                let q = mpi / p.mlp;
                let den = self.scratch_cc[c as usize] + q * lat;
                // Lines on the bus per instruction: fills, dirty victims, devices' DMA.
                let d = line * (mpi * p.lines_per_miss + p.dma_lpi) / den;
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
    pub(super) fn solve_bus(&mut self, b: usize) {
        if self.spec.model == Model::V2 {
            return self.solve_bus_v2(b);
        }
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

    /// v2: the bus / memory controller as a queue served at the sustained bandwidth. A line
    /// takes `S = line / bandwidth` cycles to transfer; with utilization `rho` a request waits
    /// `S * rho / (1 - rho)` (M/M/1: requests from independent cores arrive as a Poisson stream),
    /// so the loaded latency `L(rho) = L0 + S * rho / (1 - rho)` is flat at low load, convex, and
    /// unbounded at saturation; bandwidth never reaches the sustained figure.
    ///
    /// Inverted, `rho(L) = (L - L0) / (L - L0 + S)`, increasing and concave; demand is
    /// decreasing and convex in `L`, so `g(L) = demand(L) - bw * rho(L)` is decreasing and convex
    /// and Newton's method from `L0` converges monotonically.
    fn solve_bus_v2(&mut self, b: usize) {
        let l0 = self.l0_cycles;
        let (d0, _) = self.bus_demand(b, l0);
        if d0 <= 0.0 {
            self.buses[b].latency_cycles = l0;
            self.buses[b].rho = 0.0;
            self.buses[b].demand = 0.0;
            return;
        }
        // Interleaved streams from several tasks break DRAM row-buffer locality: the bandwidth
        // the controller sustains falls with how mixed its traffic is (Gini-Simpson index of
        // the tasks' unloaded demands: 0 for one stream, 1/2 for two equal ones).
        let mut sq = 0.0;
        for &c in &self.buses[b].cpus {
            let cpu = &self.cpus[c as usize];
            if cpu.current == NONE {
                continue;
            }
            let p = &self.profs[self.tasks[cpu.current as usize].prof as usize];
            let mpi = p.api * cpu.miss;
            let d = self.spec.line_bytes as f64 * (mpi * p.lines_per_miss + p.dma_lpi)
                / (self.scratch_cc[c as usize] + mpi / p.mlp * l0);
            sq += (d / d0) * (d / d0);
        }
        let mixed = (1.0 - sq).clamp(0.0, 1.0);
        let bw = self.peak_bytes_per_cycle * (1.0 - self.spec.v2.row_conflict_loss * mixed);
        let s = self.spec.line_bytes as f64 / bw;
        // Other sockets' snoops occupy this queue too (coupling.rs): a constant load here.
        let snoop = self.snoop_load_v2(b, bw);
        let g = |sim: &Self, l: f64| -> (f64, f64) {
            let (d, dd) = sim.bus_demand(b, l);
            let x = l - l0 + s;
            (d + snoop - bw * (l - l0) / x, dd - bw * s / (x * x))
        };
        let prev = self.buses[b].latency_cycles;
        let mut l = if prev > l0 && g(self, prev).0 >= 0.0 {
            prev
        } else {
            l0
        };
        for _ in 0..BUS_ITERS {
            let (v, dv) = g(self, l);
            if dv >= 0.0 || v <= 0.0 {
                break;
            }
            let next = (l - v / dv).max(l0);
            if (next - l).abs() <= 1e-13 * l {
                l = next;
                break;
            }
            l = next;
        }
        self.buses[b].latency_cycles = l;
        // Utilization of the sustained bandwidth (below the mix's effective bandwidth, so
        // below 1 by construction), snoops included.
        self.buses[b].rho = (l - l0) / (l - l0 + s) * bw / self.peak_bytes_per_cycle;
        self.buses[b].demand = self.bus_demand(b, l).0;
    }

    /// Snoop load (bytes per cycle) on bus `b` from the other buses' last solved demand,
    /// bounded so the queue keeps serving its own misses (coupling.rs).
    fn snoop_load_v2(&self, b: usize, bw: f64) -> f64 {
        let per_line = self.spec.v2.snoop_bytes_per_line;
        if per_line <= 0.0 || self.buses.len() < 2 {
            return 0.0;
        }
        let mut others = 0.0;
        for (a, x) in self.buses.iter().enumerate() {
            if a != b {
                others += x.demand.max(0.0);
            }
        }
        let load = crate::coupling::snoop_load_of(others, self.spec.line_bytes as f64, per_line);
        crate::coupling::bounded_snoop_load(load, bw, crate::coupling::MAX_SNOOP_SHARE)
    }

    /// After a solve of bus `b`: when snoops couple the buses and its demand moved by more than
    /// `SNOOP_RESOLVE_TOL` (relative), the others are re-solved on the next tick with the new
    /// load. Smaller moves (Newton's last digits, slow warm-up) are carried without a re-solve:
    /// the snoop load a socket sees then lags the others' demand by at most that tolerance,
    /// which moves its latency by far less (snoops are a fraction of a line each).
    fn note_bus_demand_v2(&mut self, b: usize) {
        if self.spec.model != Model::V2
            || self.spec.v2.snoop_bytes_per_line <= 0.0
            || self.buses.len() < 2
        {
            return;
        }
        let (demand, seen) = (self.buses[b].demand, self.buses[b].demand_seen);
        if (demand - seen).abs() > SNOOP_RESOLVE_TOL * demand.max(seen) {
            self.buses[b].demand_seen = demand;
            for a in 0..self.buses.len() {
                if a != b {
                    self.dirty_bus[a] = true;
                }
            }
            self.dirty = true;
        }
    }
}
