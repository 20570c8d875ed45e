//! Observation: what a PMU and the scheduler's accounting would show, as counter deltas per
//! task and CPU since the last observation, and the per-slice statistics a pick-next hook sees.

use super::*;

impl Simulation {
    /// Build the observation since the last one and reset the interval accumulators.
    pub(super) fn observe(&mut self) -> Observation {
        let now = self.now_ns;
        let interval = now - self.obs_start_ns;
        let mut tasks = Vec::with_capacity(self.tasks.len());
        for (i, t) in self.tasks.iter_mut().enumerate() {
            let d = t.c.since(&t.obs_base);
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
                code: None,
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
}

/// Last-value statistics of a slice. The bus utilization counts the lines the task moved over
/// the bus (`mem_transactions`: fills, write-backs and, on NetBurst, the sector's second line),
/// what a bus counter sees, not its LLC misses; the two are equal under v1.
#[allow(clippy::too_many_arguments)]
pub(super) fn slice_stats(
    task: TaskId,
    instr: f64,
    cycles: f64,
    misses: f64,
    bus_lines: f64,
    fp: f64,
    ns: u64,
    peak_lines_per_s: f64,
) -> TaskStats {
    TaskStats {
        task,
        ipc: if cycles > 0.0 { instr / cycles } else { 0.0 },
        bus_utilization: (bus_lines / (ns as f64 * 1e-9)) / peak_lines_per_s,
        llc_mpki: if instr > 0.0 {
            misses * 1000.0 / instr
        } else {
            0.0
        },
        fp_fraction: if instr > 0.0 { fp / instr } else { 0.0 },
    }
}
