//! `ipc-pair` and `bus-pair`: Zhang, Dwarkadas, Folkmanis & Shen (HotOS'07, §2.1), the IPC
//! scheduler after Fedorova et al.
//!
//! The paper's scheduler monitors each task's IPC or memory-bus utilization with counters and
//! uses **last-value prediction**; "during each context switch, we try to choose one ready task
//! whose monitored bus utilization (IPC) is complementary to the task or tasks currently running
//! on the other CPU or CPUs". Equal CPU time per epoch is left to the underlying scheduler (the
//! machine only offers tasks that still have time in the epoch).
//!
//! *Complementary* is made precise here as: keep the machine's total demand at its average.
//! With `k` CPUs busy after the pick and `mean` the average last value over the tasks seen in
//! the last [`ComplementPick::horizon_ns`], the pick minimizes
//! `|sum(others' last values) + candidate's last value - k * mean|`. High pairs with low and
//! medium with medium, which is the ideal the paper names; ties keep run-queue order.
//!
//! Two forms:
//! - [`ComplementPick`] — the kernel-level hook, exactly the paper's decision point;
//! - [`PairingPolicy`] — what a user-space daemon can do with affinity only: every
//!   [`PairingPolicy::repair_period_ns`] it sorts tasks by last value and deals them into
//!   "rows" of one task per CPU, each row pairing the highest remaining with the lowest
//!   remaining, so that co-runners are complementary *if* the per-CPU run queues rotate in
//!   step. Nothing in user space can enforce that phase; the difference between the two forms
//!   is measured by `counterpoint experiment`.

use crate::signal;
use crate::tree::MachineTree;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::{PickContext, PickNext, Policy, TaskStats};
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::BTreeMap;

/// The counter statistic a pairing policy balances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairMetric {
    /// Instructions per cycle (Fedorova's IPC scheduler).
    Ipc,
    /// Memory-bus utilization (Zhang's bus-utilization scheduler).
    Bus,
}

impl PairMetric {
    /// Name of the kernel-level pick-next form.
    pub fn policy_name(self) -> &'static str {
        match self {
            PairMetric::Ipc => "ipc-pair",
            PairMetric::Bus => "bus-pair",
        }
    }
    /// Name of the user-space epoch/affinity form.
    pub fn affinity_policy_name(self) -> &'static str {
        match self {
            PairMetric::Ipc => "ipc-pair-affinity",
            PairMetric::Bus => "bus-pair-affinity",
        }
    }
    fn of_stats(self, s: &TaskStats) -> f64 {
        match self {
            PairMetric::Ipc => s.ipc,
            PairMetric::Bus => s.bus_utilization,
        }
    }
    fn of_sample(self, s: &counterpoint_core::sample::Sample) -> Option<f64> {
        match self {
            PairMetric::Ipc => signal::ipc(s),
            PairMetric::Bus => signal::bus_rate(s),
        }
    }
    /// Events the metric is computed from.
    pub fn events(self) -> Vec<&'static str> {
        match self {
            PairMetric::Ipc => vec![event::INSTRUCTIONS, event::CYCLES],
            PairMetric::Bus => vec![event::MEM_TRANSACTIONS, event::TASK_CLOCK],
        }
    }
}

/// A usable last value: finite and non-negative. A task that has not run yet (all zeros in
/// the kernel's bookkeeping) has no prediction.
fn known(v: f64, s: &TaskStats) -> Option<f64> {
    let never_ran = s.ipc == 0.0 && s.bus_utilization == 0.0 && s.llc_mpki == 0.0;
    (v.is_finite() && v >= 0.0 && !never_ran).then_some(v)
}

/// The kernel-level pairing hook.
#[derive(Clone, Debug)]
pub struct ComplementPick {
    /// The statistic paired.
    pub metric: PairMetric,
    /// How long a task's last value counts towards the machine average after it was last
    /// seen (tasks that left stop biasing the target).
    pub horizon_ns: u64,
    /// Last value per task and when it was seen.
    last: BTreeMap<TaskId, (f64, u64)>,
    /// Per CPU, the tasks that have had their slice in the current round (the O(1)
    /// scheduler's expired array).
    expired: BTreeMap<CpuId, std::collections::BTreeSet<TaskId>>,
}

impl ComplementPick {
    /// The hook pairing on `metric`.
    pub fn new(metric: PairMetric) -> Self {
        Self {
            metric,
            horizon_ns: 1_000_000_000,
            last: BTreeMap::new(),
            expired: BTreeMap::new(),
        }
    }
    /// `ipc-pair`.
    pub fn ipc() -> Self {
        Self::new(PairMetric::Ipc)
    }
    /// `bus-pair`.
    pub fn bus() -> Self {
        Self::new(PairMetric::Bus)
    }

    fn remember(&mut self, s: &TaskStats, now_ns: u64) {
        if let Some(v) = known(self.metric.of_stats(s), s) {
            self.last.insert(s.task, (v, now_ns));
        }
    }

    /// Average last value over the tasks seen within the horizon.
    fn machine_mean(&self, now_ns: u64) -> Option<f64> {
        let recent: Vec<f64> = self
            .last
            .values()
            .filter(|(_, t)| now_ns.saturating_sub(*t) <= self.horizon_ns)
            .map(|(v, _)| *v)
            .collect();
        (!recent.is_empty()).then(|| recent.iter().sum::<f64>() / recent.len() as f64)
    }
}

impl PickNext for ComplementPick {
    fn name(&self) -> &str {
        self.metric.policy_name()
    }
    fn pick(&mut self, ctx: &PickContext<'_>) -> usize {
        for s in ctx.ready {
            self.remember(s, ctx.now_ns);
        }
        for (_, s) in ctx.others {
            if let Some(s) = s {
                self.remember(s, ctx.now_ns);
            }
        }
        self.last
            .retain(|_, (_, t)| ctx.now_ns.saturating_sub(*t) <= self.horizon_ns);
        // Equal CPU time per round: only tasks that have not run in this round are eligible.
        let expired = self.expired.entry(ctx.cpu).or_default();
        let mut eligible: Vec<usize> = (0..ctx.ready.len())
            .filter(|&i| !expired.contains(&ctx.ready[i].task))
            .collect();
        if eligible.is_empty() {
            expired.clear();
            eligible = (0..ctx.ready.len()).collect();
        }
        let chosen = self.choose(ctx, &eligible);
        if let Some(s) = ctx.ready.get(chosen) {
            self.expired.entry(ctx.cpu).or_default().insert(s.task);
        }
        chosen
    }
}

impl ComplementPick {
    /// The eligible ready task that best complements the other CPUs (first eligible if no
    /// prediction exists yet).
    fn choose(&self, ctx: &PickContext<'_>, eligible: &[usize]) -> usize {
        let first = eligible.first().copied().unwrap_or(0);
        if eligible.len() <= 1 {
            return first;
        }
        let Some(mean) = self.machine_mean(ctx.now_ns) else {
            return first;
        };
        let mut others_sum = 0.0;
        let mut busy = 1.0;
        for (cpu, s) in ctx.others {
            if *cpu == ctx.cpu {
                continue;
            }
            if let Some(s) = s {
                busy += 1.0;
                others_sum += known(self.metric.of_stats(s), s).unwrap_or(mean);
            }
        }
        let target = busy * mean;
        let mut best = first;
        let mut best_dist = f64::INFINITY;
        for &i in eligible {
            let s = &ctx.ready[i];
            let v = known(self.metric.of_stats(s), s).unwrap_or(mean);
            let d = (others_sum + v - target).abs();
            // Strictly better only: ties keep run-queue order.
            if d < best_dist - 1e-12 {
                best = i;
                best_dist = d;
            }
        }
        best
    }
}

/// A pick-next hook that sees counter statistics only part of the time (Zhang et al. §3): the
/// counters are time-division multiplexed at timer interrupts and the scheduler gets `share`
/// of the ticks. Which ticks are the scheduler's is a fixed pseudo-random function of the
/// tick (so it cannot line up with the scheduler's aligned time slices). A task's statistics
/// are refreshed when a decision falls in one of the scheduler's ticks; otherwise the last
/// sampled values stand (last-value prediction over sampled execution). Tasks never sampled
/// have no prediction.
#[derive(Clone, Debug)]
pub struct Multiplexed<P> {
    /// The hook that sees the sampled values.
    pub inner: P,
    /// Fraction of ticks the scheduler's counters are loaded, in [0, 1].
    pub share: f64,
    /// Multiplexing granularity (the timer tick).
    pub tick_ns: u64,
    /// Selects the pseudo-random pattern of scheduler ticks (e.g. the run's seed).
    pub salt: u64,
    sampled: BTreeMap<TaskId, TaskStats>,
}

/// splitmix64: a well-mixed hash of the tick number.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<P: PickNext> Multiplexed<P> {
    /// `inner` seeing counters a `share` of the ticks.
    pub fn new(inner: P, share: f64) -> Self {
        Self {
            inner,
            share: share.clamp(0.0, 1.0),
            tick_ns: 1_000_000,
            salt: 0,
            sampled: BTreeMap::new(),
        }
    }

    /// The same with another pattern of scheduler ticks.
    pub fn with_salt(mut self, salt: u64) -> Self {
        self.salt = salt;
        self
    }

    /// Whether the tick containing `now_ns` belongs to the scheduler.
    fn counting(&self, now_ns: u64) -> bool {
        if self.share >= 1.0 {
            return true;
        }
        let tick = now_ns / self.tick_ns.max(1);
        let unit = (mix(tick ^ mix(self.salt)) >> 11) as f64 / (1u64 << 53) as f64;
        unit < self.share
    }

    fn view(&mut self, s: &TaskStats, counting: bool) -> TaskStats {
        if counting {
            self.sampled.insert(s.task, *s);
            *s
        } else {
            self.sampled.get(&s.task).copied().unwrap_or(TaskStats {
                task: s.task,
                ipc: 0.0,
                bus_utilization: 0.0,
                llc_mpki: 0.0,
                fp_fraction: 0.0,
            })
        }
    }
}

impl<P: PickNext> PickNext for Multiplexed<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn pick(&mut self, ctx: &PickContext<'_>) -> usize {
        let counting = self.counting(ctx.now_ns);
        let ready: Vec<TaskStats> = ctx.ready.iter().map(|s| self.view(s, counting)).collect();
        let others: Vec<(CpuId, Option<TaskStats>)> = ctx
            .others
            .iter()
            .map(|(c, s)| (*c, s.as_ref().map(|s| self.view(s, counting))))
            .collect();
        let seen = PickContext {
            ready: &ready,
            others: &others,
            ..*ctx
        };
        self.inner.pick(&seen)
    }
}

/// The user-space (epoch-level, affinity-only) form of the pairing policies.
#[derive(Clone, Debug)]
pub struct PairingPolicy {
    /// The statistic paired.
    pub metric: PairMetric,
    /// How often the daemon re-pairs (the decision is skipped in between).
    pub repair_period_ns: u64,
    last: BTreeMap<TaskId, f64>,
    last_repair_ns: Option<u64>,
}

impl PairingPolicy {
    /// The policy pairing on `metric`.
    pub fn new(metric: PairMetric) -> Self {
        Self {
            metric,
            repair_period_ns: 1_000_000_000,
            last: BTreeMap::new(),
            last_repair_ns: None,
        }
    }
    /// `ipc-pair-affinity`.
    pub fn ipc() -> Self {
        Self::new(PairMetric::Ipc)
    }
    /// `bus-pair-affinity`.
    pub fn bus() -> Self {
        Self::new(PairMetric::Bus)
    }

    /// The placement (one CPU per task) for tasks with known values.
    ///
    /// CPUs are taken in spread order (one thread per core, round robin over packages, then
    /// the second threads in the same core order), so tasks share a core only when there are
    /// more tasks than cores. Tasks are dealt into rows of at most one per CPU, each row
    /// alternately taking the highest and the lowest remaining value; within a row the
    /// highest go to distinct cores and, where the row has more tasks than cores, the lowest
    /// join them as SMT siblings in reverse order (highest with lowest). Odd rows are laid in
    /// reverse so every CPU's queue mixes high and low rows.
    pub fn plan(topology: &Topology, values: &[(TaskId, f64)]) -> BTreeMap<TaskId, CpuId> {
        let tree = MachineTree::new(topology);
        let order = tree.spread_order();
        let ncores = tree.cores().len().max(1);
        let mut out = BTreeMap::new();
        if order.is_empty() {
            return out;
        }
        let mut sorted: Vec<(TaskId, f64)> = values.to_vec();
        sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut deque: std::collections::VecDeque<(TaskId, f64)> = sorted.into();
        let mut row_index = 0usize;
        while !deque.is_empty() {
            // One row: alternately the highest and the lowest remaining.
            let mut row = Vec::with_capacity(order.len());
            let mut from_front = true;
            while row.len() < order.len() {
                let next = if from_front {
                    deque.pop_front()
                } else {
                    deque.pop_back()
                };
                match next {
                    Some(t) => row.push(t),
                    None => break,
                }
                from_front = !from_front;
            }
            row.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let k = row.len();
            let mut slots: Vec<usize> = Vec::with_capacity(k);
            if k <= ncores {
                slots.extend(0..k);
            } else {
                // Highest on distinct cores; the rest, lowest first, on their siblings.
                slots.extend(0..ncores);
                let extra = k - ncores;
                let mut tail: Vec<usize> = (ncores..ncores + extra).collect();
                tail.reverse();
                slots.extend(tail);
            }
            for (task, slot) in row.iter().zip(slots) {
                let pos = if row_index % 2 == 0 {
                    slot
                } else {
                    order.len() - 1 - slot
                };
                if let Some(cpu) = order.get(pos) {
                    out.insert(task.0, *cpu);
                }
            }
            row_index += 1;
        }
        out
    }
}

impl Policy for PairingPolicy {
    fn name(&self) -> &str {
        self.metric.affinity_policy_name()
    }
    fn required_events(&self) -> Vec<&'static str> {
        self.metric.events()
    }
    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action> {
        for t in &observation.tasks {
            if t.finished {
                self.last.remove(&t.id);
            } else if signal::ran(t) {
                if let Some(v) = self.metric.of_sample(&t.sample) {
                    if v.is_finite() {
                        self.last.insert(t.id, v);
                    }
                }
            }
        }
        if let Some(at) = self.last_repair_ns {
            if observation.time_ns.saturating_sub(at) < self.repair_period_ns {
                return Vec::new();
            }
        }
        let values: Vec<(TaskId, f64)> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .filter_map(|t| self.last.get(&t.id).map(|v| (t.id, *v)))
            .collect();
        if values.len() < 2 {
            return Vec::new();
        }
        self.last_repair_ns = Some(observation.time_ns);
        let plan = Self::plan(topology, &values);
        observation
            .tasks
            .iter()
            .filter_map(|t| {
                let cpu = *plan.get(&t.id)?;
                let want = CpuSet::single(cpu);
                (t.affinity != want).then_some(Action::SetAffinity {
                    task: t.id,
                    cpus: want,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::testutils::{observation, task, topo};

    fn stats(id: u64, ipc: f64, bus: f64) -> TaskStats {
        TaskStats {
            task: TaskId(id),
            ipc,
            bus_utilization: bus,
            llc_mpki: 1.0,
            fp_fraction: 0.0,
        }
    }

    /// Zhang's SPEC setup: CPU 0 queue gzip (low), parser (medium), swim (high); CPU 1 runs
    /// art (high). The bus-pair hook must choose gzip, the baseline the queue head.
    #[test]
    fn bus_pair_picks_the_low_task_against_a_high_one() {
        let t = topo(1, 2, 1);
        let gzip = stats(1, 1.6, 0.05);
        let parser = stats(2, 1.0, 0.30);
        let swim = stats(3, 0.4, 0.70);
        let art = stats(4, 0.5, 0.65);
        let mesa = stats(5, 1.5, 0.06);
        let wupwise = stats(6, 0.9, 0.32);
        let mut hook = ComplementPick::bus();
        // The hook has seen the other CPU's tasks earlier.
        let warm = [art, mesa, wupwise];
        let ctx0 = PickContext {
            cpu: 1,
            now_ns: 0,
            topology: &t,
            ready: &warm,
            others: &[(0, Some(swim))],
            bus_peak_transactions_per_s: 1e8,
        };
        let _ = hook.pick(&ctx0);
        let ready = [swim, parser, gzip];
        let ctx = PickContext {
            cpu: 0,
            now_ns: 1_000,
            topology: &t,
            ready: &ready,
            others: &[(1, Some(art))],
            bus_peak_transactions_per_s: 1e8,
        };
        // Successive picks on CPU 0 are one round: each choice below is a different task.
        assert_eq!(hook.pick(&ctx), 2, "gzip complements art");
        // Against wupwise (medium) the medium task is the complement.
        let ctx = PickContext {
            others: &[(1, Some(wupwise))],
            ..ctx
        };
        assert_eq!(hook.pick(&ctx), 1, "parser complements wupwise");
        // Against mesa (low), the high one.
        let ctx = PickContext {
            others: &[(1, Some(mesa))],
            ..ctx
        };
        assert_eq!(hook.pick(&ctx), 0, "swim complements mesa");
    }

    #[test]
    fn ipc_pair_picks_high_ipc_against_low_ipc() {
        let t = topo(1, 2, 1);
        let ready = [stats(1, 0.4, 0.7), stats(2, 1.8, 0.02)];
        let mut hook = ComplementPick::ipc();
        let ctx = PickContext {
            cpu: 0,
            now_ns: 5,
            topology: &t,
            ready: &ready,
            others: &[(1, Some(stats(3, 0.3, 0.8)))],
            bus_peak_transactions_per_s: 1e8,
        };
        assert_eq!(hook.pick(&ctx), 1);
        // An idle other CPU: nothing to complement but the average; still a valid index.
        let ctx = PickContext {
            others: &[(1, None)],
            ..ctx
        };
        assert!(hook.pick(&ctx) < ready.len());
    }

    #[test]
    fn multiplexed_counters_hold_stale_values_outside_the_scheduler_ticks() {
        let t = topo(1, 2, 1);
        let mut hook = Multiplexed::new(ComplementPick::bus(), 0.05);
        // The share is honoured over many ticks.
        let on = (0..100_000u64)
            .filter(|k| hook.counting(k * 1_000_000))
            .count();
        assert!((4_000..6_000).contains(&on), "{on} of 100000 ticks");
        let tick_on = (0..1_000u64)
            .find(|k| hook.counting(k * 1_000_000))
            .unwrap()
            * 1_000_000;
        let tick_off = (0..1_000u64)
            .find(|k| !hook.counting(k * 1_000_000))
            .unwrap()
            * 1_000_000;
        let high = stats(1, 0.4, 0.7);
        let low = stats(2, 1.6, 0.05);
        // In a scheduler tick: values are sampled.
        let ready = [high, low];
        let ctx = PickContext {
            cpu: 0,
            now_ns: tick_on,
            topology: &t,
            ready: &ready,
            others: &[(1, Some(stats(3, 0.5, 0.65)))],
            bus_peak_transactions_per_s: 1e8,
        };
        assert_eq!(hook.pick(&ctx), 1, "low complements high");
        // Outside: the tasks' behaviour flips, but the hook still sees the samples.
        // (CPU 1 now decides: CPU 0's round already gave task 2 its slice.)
        let flipped = [stats(1, 1.6, 0.05), stats(2, 0.4, 0.7)];
        let others = [(0, Some(stats(3, 0.5, 0.65)))];
        let ctx = PickContext {
            cpu: 1,
            now_ns: tick_off,
            ready: &flipped,
            others: &others,
            ..ctx
        };
        assert_eq!(hook.pick(&ctx), 1, "stale: task 2 still looks low");
        // Full share: the flip is seen at once.
        let mut full = Multiplexed::new(ComplementPick::bus(), 1.0);
        let _ = full.pick(&PickContext {
            cpu: 0,
            ready: &ready,
            now_ns: tick_on,
            ..ctx
        });
        assert_eq!(full.pick(&ctx), 0);
    }

    #[test]
    fn every_ready_task_gets_one_slice_per_round() {
        // Against a high-bus co-runner the hook prefers the low task, but not twice in a round.
        let t = topo(1, 2, 1);
        let ready = [stats(1, 0.4, 0.7), stats(2, 1.0, 0.3), stats(3, 1.6, 0.05)];
        let mut hook = ComplementPick::bus();
        let ctx = PickContext {
            cpu: 0,
            now_ns: 0,
            topology: &t,
            ready: &ready,
            others: &[(1, Some(stats(9, 0.4, 0.8)))],
            bus_peak_transactions_per_s: 1e8,
        };
        let mut picks: Vec<usize> = (0..3).map(|_| hook.pick(&ctx)).collect();
        assert_eq!(picks[0], 2, "the low task first");
        picks.sort();
        assert_eq!(picks, vec![0, 1, 2], "each task once per round");
        // A new round starts once everyone has run.
        assert_eq!(hook.pick(&ctx), 2);
    }

    #[test]
    fn user_space_form_deals_high_low_rows_onto_cpus() {
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        // Bus rate via mem-transactions; swim/art high, parser/wupwise medium, gzip/mesa low.
        let spec = [
            (1, 0, 5e6),  // gzip
            (2, 0, 30e6), // parser
            (3, 0, 70e6), // swim
            (4, 1, 6e6),  // mesa
            (5, 1, 32e6), // wupwise
            (6, 1, 65e6), // art
        ];
        let tasks = spec
            .iter()
            .map(|&(id, cpu, tx)| task(id, cpu, &all, &[(event::MEM_TRANSACTIONS, tx)]))
            .collect();
        let obs = observation(&t, tasks);
        let mut p = PairingPolicy::bus();
        let actions = p.decide(&t, &obs);
        let cpu_of: BTreeMap<u64, String> = actions
            .iter()
            .filter_map(|a| match a {
                Action::SetAffinity { task, cpus } => Some((task.0, cpus.to_list())),
                _ => None,
            })
            .collect();
        assert_eq!(cpu_of.len(), 6);
        // Row 0 = (swim, gzip) on different CPUs; row 1 = (art, mesa); row 2 = (wupwise, parser).
        assert_ne!(cpu_of[&3], cpu_of[&1]);
        assert_ne!(cpu_of[&6], cpu_of[&4]);
        assert_ne!(cpu_of[&5], cpu_of[&2]);
        // The two high tasks land on different CPUs (alternating row direction).
        assert_ne!(cpu_of[&3], cpu_of[&6]);
        // Within the repair period nothing more happens.
        let mut later = obs.clone();
        later.time_ns += 100_000_000;
        assert!(p.decide(&t, &later).is_empty());
    }

    #[test]
    fn user_space_ipc_pairs_siblings_high_with_low() {
        // 1 package x 2 cores x 2 threads, 4 tasks: each core gets one high and one low IPC.
        let t = topo(1, 2, 2);
        let plan = PairingPolicy::plan(
            &t,
            &[
                (TaskId(1), 2.0),
                (TaskId(2), 1.8),
                (TaskId(3), 0.4),
                (TaskId(4), 0.3),
            ],
        );
        let core = |c: CpuId| c / 2;
        assert_ne!(core(plan[&TaskId(1)]), core(plan[&TaskId(2)]));
        assert_ne!(core(plan[&TaskId(3)]), core(plan[&TaskId(4)]));
    }
}
