//! `spread`: software-only placement that needs nothing but task-clock, so it runs on a host
//! without a hardware PMU.
//!
//! CPU-hungry tasks (those that used at least [`Spread::hungry_threshold_cpus`] CPUs over the
//! last interval) get CPUs of their own in [`MachineTree::spread_order`]: one per package in
//! turn, then one per core, and SMT siblings only once every core has a hungry task. This is
//! the HT-aware idle placement of Nakajima & Pallipadi (prefer a fully idle package or core to
//! a half-idle one) made persistent with affinity. A task keeps its CPU while that CPU and its
//! core stay uncontended, so a steady workload is not migrated every interval; tasks that stop
//! being hungry get their whole-machine affinity back.
//!
//! Load from tasks the policy does not watch counts too: a CPU that other processes keep busy
//! (its busy fraction from the observation, less what the targets that last ran there used, at
//! least [`FOREIGN_SATURATION`]) is treated as taken, so a hungry target is not put there, and
//! one pinned there is moved — unless others saturate every CPU, where moving cannot help. Attributing a CPU's busy time to the targets by where
//! they last ran is approximate (a target that migrated in the interval leaves time behind),
//! so it is only trusted when the machine as a whole is busier than the targets account for:
//! a foreign CPU's load is capped by that difference. On a machine whose only tasks are the
//! targets (the simulator) the difference is ~0 and nothing changes.

use crate::signal;
use crate::tree::MachineTree;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::{BTreeMap, BTreeSet};

/// The spread policy and what it has pinned.
#[derive(Clone, Debug)]
pub struct Spread {
    /// CPUs used (task-clock / wall time) above which a task counts as CPU-hungry.
    pub hungry_threshold_cpus: f64,
    /// Share of a CPU that non-target tasks must keep busy for the CPU to count as taken
    /// ([`FOREIGN_SATURATION`] by default; above 1 foreign load is never considered).
    pub foreign_saturation: f64,
    /// Tasks this policy has pinned, and where.
    pinned: BTreeMap<TaskId, CpuSet>,
    /// Each live task's CPU use over its last [`HUNGER_WINDOW`] intervals, newest last.
    history: BTreeMap<TaskId, std::collections::VecDeque<f64>>,
    /// Why each action of the last [`Policy::decide`] was taken, by task.
    reasons: BTreeMap<TaskId, String>,
}

impl Default for Spread {
    fn default() -> Self {
        Self {
            hungry_threshold_cpus: 0.5,
            foreign_saturation: FOREIGN_SATURATION,
            pinned: BTreeMap::new(),
            history: BTreeMap::new(),
            reasons: BTreeMap::new(),
        }
    }
}

impl Spread {
    /// Spread with its own hunger threshold (CPUs used per wall second).
    pub fn new(hungry_threshold_cpus: f64) -> Self {
        Self {
            hungry_threshold_cpus,
            ..Self::default()
        }
    }

    /// The CPU sets the policy currently holds tasks to.
    pub fn pinned(&self) -> &BTreeMap<TaskId, CpuSet> {
        &self.pinned
    }
}

/// Share of a CPU (0..1) that tasks other than the targets must keep busy for the CPU to count
/// as taken (fixed, not the hunger threshold: a low threshold for starved targets must not make
/// every flicker of other work a reason to move).
pub const FOREIGN_SATURATION: f64 = 0.5;

/// Intervals over which a task's CPU use is averaged to judge it hungry. One interval misread
/// time-shared tasks: a third of a CPU in 100 ms slices reads 1.0 in one 100 ms interval and 0
/// in the next two, so such tasks were pinned and released in turn (26-42 migrations in 3 s on
/// a probe's mixes, session 19). Over five intervals they read 0.2-0.4, not hungry, while a
/// task that uses a whole CPU is hungry from its first interval. A task the policy pinned stays
/// hungry down to half the threshold (hysteresis).
pub const HUNGER_WINDOW: usize = 5;

/// Per CPU, the share of it (0..1) that tasks other than the targets kept busy over the
/// interval: the CPU's busy fraction less the utilization of the live targets that last ran
/// there (each capped at one CPU), capped by how much busier the whole machine was than all the
/// targets together (so misattributed target time cannot invent foreign load).
pub fn foreign_load(observation: &Observation) -> BTreeMap<CpuId, f64> {
    let mut target_on: BTreeMap<CpuId, f64> = BTreeMap::new();
    let mut target_total = 0.0;
    for t in observation.tasks.iter().filter(|t| signal::is_live(t)) {
        let u = signal::cpu_utilization(&t.sample).max(0.0);
        target_total += u;
        if let Some(c) = t.cpu {
            *target_on.entry(c).or_default() += u.min(1.0);
        }
    }
    let busy_total: f64 = observation
        .cpus
        .iter()
        .map(|c| c.busy_fraction.clamp(0.0, 1.0))
        .sum();
    let unexplained = (busy_total - target_total).max(0.0);
    observation
        .cpus
        .iter()
        .map(|c| {
            let own = target_on.get(&c.cpu).copied().unwrap_or(0.0);
            let foreign = (c.busy_fraction.clamp(0.0, 1.0) - own).max(0.0);
            (c.cpu, foreign.min(unexplained))
        })
        .collect()
}

/// How many CPUs a task needs: multi-threaded processes that used 1.5 CPUs or more get
/// `round(utilization)` of them rather than being squeezed onto one.
fn cpus_needed(utilization: f64, max: usize) -> usize {
    if utilization >= 1.5 {
        (utilization.round() as usize).clamp(1, max.max(1))
    } else {
        1
    }
}

impl Policy for Spread {
    fn name(&self) -> &str {
        "spread"
    }
    fn required_events(&self) -> Vec<&'static str> {
        vec![event::TASK_CLOCK]
    }
    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action> {
        let tree = MachineTree::new(topology);
        let order = tree.spread_order();
        let core_of: BTreeMap<CpuId, usize> = tree
            .cores()
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.cpus.iter().map(move |&cpu| (cpu, i)))
            .collect();
        // Each live task's use, averaged over its last intervals (the history of tasks gone is
        // dropped).
        let live: BTreeSet<TaskId> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .map(|t| t.id)
            .collect();
        self.history.retain(|id, _| live.contains(id));
        let mut hungry: Vec<(TaskId, f64)> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .map(|t| {
                let h = self.history.entry(t.id).or_default();
                h.push_back(signal::cpu_utilization(&t.sample));
                while h.len() > HUNGER_WINDOW {
                    h.pop_front();
                }
                (t.id, h.iter().sum::<f64>() / h.len() as f64)
            })
            // Hysteresis: a task this policy pinned stays hungry down to half the threshold,
            // so a use that hovers around it does not pin and release the task in turn.
            .filter(|&(id, u)| {
                let keep = if self.pinned.contains_key(&id) {
                    0.5
                } else {
                    1.0
                };
                u >= keep * self.hungry_threshold_cpus
            })
            .collect();
        hungry.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

        let mut used: BTreeSet<CpuId> = BTreeSet::new();
        let mut busy_cores: BTreeSet<usize> = BTreeSet::new();
        // The CPUs placement may use.
        let placeable: BTreeSet<CpuId> = order.iter().copied().collect();
        let mut new_pins: BTreeMap<TaskId, CpuSet> = BTreeMap::new();
        let mut kept_foreign: BTreeSet<TaskId> = BTreeSet::new();
        self.reasons.clear();
        // CPUs other processes saturate count as taken by a hungry task of their own, as long
        // as some CPU is not: when others load every CPU, moving cannot help (and would only
        // churn with their load).
        let foreign = foreign_load(observation);
        let mut taken_by_others: BTreeMap<CpuId, f64> = foreign
            .iter()
            .filter(|&(c, &f)| f >= self.foreign_saturation && placeable.contains(c))
            .map(|(&c, &f)| (c, f))
            .collect();
        if taken_by_others.len() >= placeable.len() {
            taken_by_others.clear();
        }
        for &c in taken_by_others.keys() {
            used.insert(c);
            if let Some(k) = core_of.get(&c) {
                busy_cores.insert(*k);
            }
        }
        let others_note = if taken_by_others.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = taken_by_others
                .iter()
                .map(|(c, f)| format!("CPU {c} {:.0} %", f * 100.0))
                .collect();
            format!("; busy with non-target tasks: {}", list.join(", "))
        };
        // When the hungry tasks need more CPUs than there are cores, some must share a core
        // whatever is done: a sibling is then no reason to move a task that has a CPU of its
        // own (spread turned MASA's mixed placement, four tasks on two HT cores, into the alike
        // one: NP 0.602 -> 0.534; probe, session 19).
        let needed_cpus: usize = hungry
            .iter()
            .map(|&(_, u)| cpus_needed(u, order.len()))
            .sum();
        let siblings_unavoidable = needed_cpus > tree.cores().len();
        let affinity: BTreeMap<TaskId, &CpuSet> = observation
            .tasks
            .iter()
            .map(|t| (t.id, &t.affinity))
            .collect();
        // First keep the placements that still hold: those this policy made, and a hungry
        // task's own single CPU (set by someone else) while siblings are unavoidable.
        for &(id, u) in &hungry {
            let (prev, ours) = match (self.pinned.get(&id), affinity.get(&id)) {
                (Some(p), _) => (p, true),
                (None, Some(&a)) if siblings_unavoidable && a.len() == 1 => (a, false),
                _ => continue,
            };
            let fits = prev.len() == cpus_needed(u, order.len())
                && prev.iter().all(|c| {
                    placeable.contains(&c)
                        && !used.contains(&c)
                        && (siblings_unavoidable
                            || core_of.get(&c).is_some_and(|k| !busy_cores.contains(k)))
                });
            if fits {
                for c in prev.iter() {
                    used.insert(c);
                    if let Some(k) = core_of.get(&c) {
                        busy_cores.insert(*k);
                    }
                }
                if ours {
                    new_pins.insert(id, prev.clone());
                } else {
                    // Kept where it is, and not this policy's to release later.
                    kept_foreign.insert(id);
                }
            }
        }
        for &(id, u) in &hungry {
            if new_pins.contains_key(&id) || kept_foreign.contains(&id) {
                continue;
            }
            let mut set = CpuSet::new();
            // Undone when the task cannot have every CPU it needs (below).
            let (used_before, busy_before) = (used.clone(), busy_cores.clone());
            let needed = cpus_needed(u, order.len());
            for _ in 0..needed {
                // A CPU on an idle core, else any idle CPU. None free: the task is left to the
                // kernel's balancing on the whole machine (below). Pinning it to the least
                // loaded CPU put two hungry targets on one CPU while another CPU idled part of
                // the time, and told both the CPU was "of its own" (probe, session 19).
                let pick = order
                    .iter()
                    .copied()
                    .find(|c| {
                        !used.contains(c)
                            && !set.contains(*c)
                            && core_of.get(c).is_some_and(|k| !busy_cores.contains(k))
                    })
                    .or_else(|| {
                        order
                            .iter()
                            .copied()
                            .find(|c| !used.contains(c) && !set.contains(*c))
                    });
                let Some(cpu) = pick else { break };
                set.insert(cpu);
                used.insert(cpu);
                if let Some(k) = core_of.get(&cpu) {
                    busy_cores.insert(*k);
                }
            }
            if set.len() == needed {
                new_pins.insert(id, set);
            } else {
                // Fewer free CPUs than it used (a 3-CPU process given one, told it was its
                // own): the whole machine, like a task that finds none.
                (used, busy_cores) = (used_before, busy_before);
            }
        }

        let mut actions = Vec::new();
        let all = topology.online_cpus();
        let utilization: BTreeMap<TaskId, f64> = hungry.iter().copied().collect();
        for t in observation.tasks.iter().filter(|t| signal::is_live(t)) {
            match new_pins.get(&t.id) {
                Some(set) if *set != t.affinity => {
                    let u = utilization.get(&t.id).copied().unwrap_or(0.0);
                    let was = match self.pinned.get(&t.id) {
                        Some(prev) if taken_by_others.keys().any(|c| prev.contains(*c)) => {
                            format!(
                                ", moved off CPU(s) {} which other processes keep busy",
                                prev.to_list()
                            )
                        }
                        Some(prev) => format!(", its CPU(s) {} are now contended", prev.to_list()),
                        None => String::new(),
                    };
                    self.reasons.insert(
                        t.id,
                        format!(
                            "hungry: used {u:.2} CPUs (threshold {:.2}); gets CPU(s) {} of its own{was}{others_note}",
                            self.hungry_threshold_cpus,
                            set.to_list()
                        ),
                    );
                    actions.push(Action::SetAffinity {
                        task: t.id,
                        cpus: set.clone(),
                    });
                }
                Some(_) => {}
                None => {
                    // Release a task this policy pinned and that is no longer hungry, or that
                    // is hungry but finds no CPU free of other hungry tasks and other processes.
                    if self.pinned.contains_key(&t.id) && t.affinity != all {
                        let u = signal::cpu_utilization(&t.sample);
                        let why = if utilization.contains_key(&t.id) {
                            format!(
                                "hungry: used {u:.2} CPUs (threshold {:.2}), but no CPU is free of \
                                 other hungry targets{}; whole machine back, for the kernel to \
                                 balance{others_note}",
                                self.hungry_threshold_cpus,
                                if taken_by_others.is_empty() {
                                    ""
                                } else {
                                    " and other processes"
                                }
                            )
                        } else {
                            format!(
                                "no longer hungry: used {u:.2} CPUs (threshold {:.2}); whole machine back",
                                self.hungry_threshold_cpus
                            )
                        };
                        self.reasons.insert(t.id, why);
                        actions.push(Action::SetAffinity {
                            task: t.id,
                            cpus: all.clone(),
                        });
                    }
                }
            }
        }
        self.pinned = new_pins;
        actions
    }
    fn reason(&self, action: &Action) -> Option<String> {
        match action {
            Action::SetAffinity { task, .. } => self.reasons.get(task).cloned(),
            Action::Swap { .. } => None,
            // Never asked for by this policy.
            Action::SetThreadAffinity { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::testutils::{observation, task, topo};

    fn targets(actions: &[Action]) -> BTreeMap<u64, String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::SetAffinity { task, cpus } => Some((task.0, cpus.to_list())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn two_hungry_tasks_on_one_core_are_split_across_packages() {
        // 2 packages x 1 core x 2 threads; both hungry tasks sit on package 0's siblings.
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let obs = observation(&t, vec![task(1, 0, &all, &[]), task(2, 1, &all, &[])]);
        let mut p = Spread::default();
        let a = targets(&p.decide(&t, &obs));
        // One per package: CPU 0 (package 0) and CPU 2 (package 1).
        assert_eq!(a.get(&1).map(String::as_str), Some("0"));
        assert_eq!(a.get(&2).map(String::as_str), Some("2"));
    }

    #[test]
    fn placement_is_stable_and_idle_tasks_are_released() {
        let t = topo(2, 1, 2);
        let all = t.online_cpus();
        let mut p = Spread::default();
        let obs = observation(&t, vec![task(1, 0, &all, &[]), task(2, 1, &all, &[])]);
        let first = p.decide(&t, &obs);
        assert_eq!(first.len(), 2);
        // Same load again, with the affinities applied: nothing to do.
        let mut t1 = task(1, 0, &CpuSet::single(0), &[]);
        t1.affinity = CpuSet::single(0);
        let mut t2 = task(2, 2, &CpuSet::single(2), &[]);
        t2.affinity = CpuSet::single(2);
        let obs2 = observation(&t, vec![t1.clone(), t2.clone()]);
        assert!(p.decide(&t, &obs2).is_empty());
        // Task 2 goes idle: it gets the whole machine back once its use over the last
        // `HUNGER_WINDOW` intervals falls below half the threshold (it was pinned): two busy
        // intervals, then four idle.
        t2.sample = Sample::new(Some(TaskId(2)), obs2.interval_ns);
        let obs3 = observation(&t, vec![t1, t2]);
        for idle in 1..=3 {
            assert!(p.decide(&t, &obs3).is_empty(), "released after {idle} idle");
        }
        let a = targets(&p.decide(&t, &obs3));
        assert_eq!(a.get(&2).map(String::as_str), Some("0-3"));
        assert!(!a.contains_key(&1));
    }

    /// A task with a third of a CPU in slices as long as the interval reads 1.0 in one interval
    /// and 0 in the next two: judged over `HUNGER_WINDOW` intervals it is not hungry, so it is
    /// not pinned and released in turn (it was, every few intervals).
    #[test]
    fn a_time_shared_task_is_not_pinned_and_released_in_turn() {
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let mut p = Spread::default();
        let mut actions = 0;
        for i in 0..30u64 {
            let mut tk = task(1, 0, &all, &[]);
            if i % 3 != 0 {
                tk.sample = Sample::new(Some(TaskId(1)), counterpoint_core::testutils::INTERVAL_NS);
            }
            // Where spread put it, as the host would show.
            if let Some(set) = p.pinned().get(&TaskId(1)) {
                tk.affinity = set.clone();
            }
            actions += p.decide(&t, &observation(&t, vec![tk])).len();
        }
        // One pin at the first interval (a whole CPU used), one release when the average
        // drops: nothing after.
        assert!(actions <= 2, "{actions} actions in 30 intervals");
    }

    /// Four hungry tasks on two HT cores: siblings are unavoidable, so tasks that each have a
    /// CPU of their own stay where they are (spread re-placed them in its own order and turned
    /// MASA's mixed placement into the alike one).
    #[test]
    fn a_full_smt_machine_is_left_as_placed() {
        let t = topo(2, 1, 2);
        let tasks = (0..4u32)
            .map(|c| task(u64::from(c) + 1, c, &CpuSet::single(c), &[]))
            .collect();
        let mut p = Spread::default();
        let a = p.decide(&t, &observation(&t, tasks));
        assert!(a.is_empty(), "{a:?}");
    }

    /// The CPU sets a fresh `spread` gives `n` hungry tasks that all sit on CPU 0, sorted.
    fn pins_of_hungry(t: &Topology, n: u64) -> Vec<String> {
        let all = t.online_cpus();
        let tasks = (1..=n).map(|i| task(i, 0, &all, &[])).collect();
        let mut p = Spread::default();
        let mut cpus: Vec<String> = targets(&p.decide(t, &observation(t, tasks)))
            .into_values()
            .collect();
        cpus.sort();
        cpus
    }

    #[test]
    fn more_hungry_tasks_than_cores_use_siblings_last() {
        // Cores {0,1} and {2,3}: first CPU 0 and 2, then sibling 1.
        assert_eq!(pins_of_hungry(&topo(1, 2, 2), 3), vec!["0", "1", "2"]);
    }

    /// More hungry targets than free CPUs: the ones without a CPU of their own are left to the
    /// kernel (whole machine), never put on a CPU another hungry target holds.
    #[test]
    fn hungry_targets_beyond_the_free_cpus_are_left_unpinned() {
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        assert_eq!(pins_of_hungry(&t, 3), vec!["0", "1"]);
        // A target on `cpu`, allowed on `affinity`, that used `quarters` quarters of a CPU.
        let used = |id: u64, cpu: u32, affinity: &CpuSet, quarters: u64| {
            let ns = counterpoint_core::testutils::INTERVAL_NS * quarters / 4;
            task(id, cpu, affinity, &[(event::TASK_CLOCK, ns as f64)])
        };
        // A CPU others keep busy: two hungry targets, one free CPU; the second target is not
        // put beside the first. Each target used half of CPU 0; CPU 1's busy time is another
        // process's.
        let mut obs = observation(&t, vec![used(1, 0, &all, 2), used(2, 0, &all, 2)]);
        obs.cpus[0].busy_fraction = 1.0;
        obs.cpus[1].busy_fraction = 1.0;
        let mut p = Spread::default();
        let a = targets(&p.decide(&t, &obs));
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a.values().next().map(String::as_str), Some("0"), "{a:?}");
        // A target pinned before that now finds no free CPU (other processes take half of its
        // CPU 1, and a hungrier target keeps CPU 0) gets the whole machine back, told why.
        let mut p = Spread::default();
        let first = p.decide(
            &t,
            &observation(&t, vec![used(1, 1, &all, 2), used(2, 0, &all, 3)]),
        );
        assert_eq!(
            targets(&first).get(&1).map(String::as_str),
            Some("1"),
            "{first:?}"
        );
        assert_eq!(
            targets(&first).get(&2).map(String::as_str),
            Some("0"),
            "{first:?}"
        );
        let one = used(1, 1, &CpuSet::single(1), 2);
        let two = used(2, 0, &CpuSet::single(0), 3);
        let mut obs = observation(&t, vec![one, two]);
        obs.cpus[0].busy_fraction = 1.0;
        obs.cpus[1].busy_fraction = 1.0;
        let a = p.decide(&t, &obs);
        assert_eq!(
            targets(&a).get(&1).map(String::as_str),
            Some("0-1"),
            "{a:?}"
        );
        assert!(!targets(&a).contains_key(&2), "{a:?}");
        let back = a
            .iter()
            .find(|x| matches!(x, Action::SetAffinity { task, .. } if task.0 == 1))
            .expect("task 1's action");
        let why = p.reason(back).expect("a reason");
        assert!(why.contains("no CPU is free"), "{why}");
        assert!(!why.contains("of its own"), "{why}");
    }

    /// A process that used 3 CPUs where only one is free is not squeezed onto it (it was given
    /// the free CPU and told it was its own): it keeps the whole machine.
    #[test]
    fn a_multi_cpu_process_gets_all_it_needs_or_the_whole_machine() {
        let t = topo(1, 4, 1);
        let all = t.online_cpus();
        let three_cpus_ns = 3 * counterpoint_core::testutils::INTERVAL_NS;
        let big = task(1, 0, &all, &[(event::TASK_CLOCK, three_cpus_ns as f64)]);
        let mut p = Spread::default();
        let a = targets(&p.decide(&t, &observation(&t, vec![big.clone()])));
        let cpus = a
            .get(&1)
            .map(|s| CpuSet::parse_list(s).expect("a CPU list").len());
        assert_eq!(cpus, Some(3), "{a:?}");
        // Every CPU busy, 3 of them by the target: other processes hold one CPU's worth, on
        // CPUs 1-3 (where the target did not last run), so only CPU 0 counts as free.
        let mut obs = observation(&t, vec![big]);
        for c in &mut obs.cpus {
            c.busy_fraction = 1.0;
        }
        let mut p = Spread::default();
        let a = p.decide(&t, &obs);
        assert!(targets(&a).is_empty(), "squeezed: {a:?}");
    }

    use counterpoint_core::sample::Sample;

    #[test]
    fn a_cpu_saturated_by_other_processes_gets_no_hungry_target() {
        // 1 package x 2 cores x 1 thread: CPUs 0 and 1. A non-target hog keeps CPU 0 busy;
        // the hungry target runs on CPU 0 too and got only half of it.
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let mut tk = task(1, 0, &all, &[]);
        tk.sample.set(
            event::TASK_CLOCK,
            counterpoint_core::sample::CounterValue::exact(
                counterpoint_core::testutils::INTERVAL_NS / 2,
                counterpoint_core::testutils::INTERVAL_NS,
            ),
        );
        let mut obs = observation(&t, vec![tk]);
        obs.cpus[0].busy_fraction = 1.0;
        obs.cpus[1].busy_fraction = 0.0;
        let f = foreign_load(&obs);
        assert!((f[&0] - 0.5).abs() < 1e-9, "{f:?}");
        assert_eq!(f[&1], 0.0);
        let mut p = Spread::default();
        let actions = p.decide(&t, &obs);
        assert_eq!(targets(&actions).get(&1).map(String::as_str), Some("1"));
        let why = p.reason(&actions[0]).expect("a reason");
        assert!(why.contains("hungry: used 0.50 CPUs"), "{why}");
        assert!(
            why.contains("busy with non-target tasks: CPU 0 50 %"),
            "{why}"
        );
        // Without the hog the same target would have been given CPU 0 (first in order).
        let mut quiet = obs.clone();
        quiet.cpus[0].busy_fraction = 0.5;
        let mut p = Spread::default();
        assert_eq!(
            targets(&p.decide(&t, &quiet)).get(&1).map(String::as_str),
            Some("0")
        );
    }

    /// A target on CPU 0 that used `share` of it, CPU 0 fully busy, CPU 1 idle.
    fn hogged(t: &Topology, affinity: &CpuSet, share: f64) -> Observation {
        use counterpoint_core::sample::CounterValue;
        use counterpoint_core::testutils::INTERVAL_NS;
        let mut tk = task(1, 0, affinity, &[]);
        tk.sample.set(
            event::TASK_CLOCK,
            CounterValue::exact((INTERVAL_NS as f64 * share) as u64, INTERVAL_NS),
        );
        let mut obs = observation(t, vec![tk]);
        obs.cpus[0].busy_fraction = 1.0;
        obs.cpus[1].busy_fraction = 0.0;
        obs
    }

    #[test]
    fn a_pinned_target_is_moved_off_a_cpu_others_start_to_saturate() {
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let mut p = Spread::new(0.3);
        let first = p.decide(&t, &observation(&t, vec![task(1, 0, &all, &[])]));
        assert_eq!(targets(&first).get(&1).map(String::as_str), Some("0"));
        let pinned = CpuSet::single(0);
        // A little foreign load (0.2 of CPU 0): the placement stays.
        assert!(p.decide(&t, &hogged(&t, &pinned, 0.8)).is_empty());
        // Another process takes 0.6 of CPU 0: the target moves to the idle CPU 1.
        let a = p.decide(&t, &hogged(&t, &pinned, 0.4));
        assert_eq!(targets(&a).get(&1).map(String::as_str), Some("1"), "{a:?}");
        let why = p.reason(&a[0]).expect("reason");
        assert!(why.contains("moved off CPU(s) 0"), "{why}");
        assert!(why.contains("CPU 0 60 %"), "{why}");
    }

    #[test]
    fn foreign_load_on_every_cpu_moves_nothing() {
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let mut p = Spread::new(0.3);
        let first = p.decide(&t, &observation(&t, vec![task(1, 0, &all, &[])]));
        assert_eq!(targets(&first).get(&1).map(String::as_str), Some("0"));
        // Others take 0.6 of CPU 0 and all of CPU 1: nowhere better to go.
        let mut obs = hogged(&t, &CpuSet::single(0), 0.4);
        obs.cpus[1].busy_fraction = 1.0;
        assert!(p.decide(&t, &obs).is_empty());
    }

    #[test]
    fn only_targets_on_the_machine_means_no_foreign_load() {
        // Misattributed time (a target that migrated) is not foreign load when the machine is
        // no busier than the targets.
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let mut obs = observation(&t, vec![task(1, 1, &all, &[])]);
        obs.cpus[0].busy_fraction = 0.5;
        obs.cpus[1].busy_fraction = 0.5;
        assert!(foreign_load(&obs).values().all(|&f| f == 0.0));
    }
}
