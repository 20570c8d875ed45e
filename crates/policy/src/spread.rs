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
    /// Tasks this policy has pinned, and where.
    pinned: BTreeMap<TaskId, CpuSet>,
}

impl Default for Spread {
    fn default() -> Self {
        Self {
            hungry_threshold_cpus: 0.5,
            pinned: BTreeMap::new(),
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
        let mut hungry: Vec<(TaskId, f64)> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .map(|t| (t.id, signal::cpu_utilization(&t.sample)))
            .filter(|&(_, u)| u >= self.hungry_threshold_cpus)
            .collect();
        hungry.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

        let mut used: BTreeSet<CpuId> = BTreeSet::new();
        let mut busy_cores: BTreeSet<usize> = BTreeSet::new();
        let mut load: BTreeMap<CpuId, usize> = order.iter().map(|&c| (c, 0)).collect();
        let mut new_pins: BTreeMap<TaskId, CpuSet> = BTreeMap::new();
        // First keep the previous placements that are still uncontended.
        for &(id, u) in &hungry {
            if let Some(prev) = self.pinned.get(&id) {
                let fits = prev.len() == cpus_needed(u, order.len())
                    && prev.iter().all(|c| {
                        load.contains_key(&c)
                            && !used.contains(&c)
                            && core_of.get(&c).is_some_and(|k| !busy_cores.contains(k))
                    });
                if fits {
                    for c in prev.iter() {
                        used.insert(c);
                        *load.entry(c).or_default() += 1;
                        if let Some(k) = core_of.get(&c) {
                            busy_cores.insert(*k);
                        }
                    }
                    new_pins.insert(id, prev.clone());
                }
            }
        }
        for &(id, u) in &hungry {
            if new_pins.contains_key(&id) {
                continue;
            }
            let mut set = CpuSet::new();
            for _ in 0..cpus_needed(u, order.len()) {
                // A CPU on an idle core, else any idle CPU, else the least loaded one.
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
                    })
                    .or_else(|| {
                        order
                            .iter()
                            .copied()
                            .filter(|c| !set.contains(*c))
                            .min_by_key(|c| load.get(c).copied().unwrap_or(0))
                    });
                let Some(cpu) = pick else { break };
                set.insert(cpu);
                used.insert(cpu);
                *load.entry(cpu).or_default() += 1;
                if let Some(k) = core_of.get(&cpu) {
                    busy_cores.insert(*k);
                }
            }
            if !set.is_empty() {
                new_pins.insert(id, set);
            }
        }

        let mut actions = Vec::new();
        let all = topology.online_cpus();
        for t in observation.tasks.iter().filter(|t| signal::is_live(t)) {
            match new_pins.get(&t.id) {
                Some(set) if *set != t.affinity => actions.push(Action::SetAffinity {
                    task: t.id,
                    cpus: set.clone(),
                }),
                Some(_) => {}
                None => {
                    // Release a task this policy pinned and that is no longer hungry.
                    if self.pinned.contains_key(&t.id) && t.affinity != all {
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
        // Task 2 goes idle: it gets the whole machine back.
        t2.sample = Sample::new(Some(TaskId(2)), obs2.interval_ns);
        let obs3 = observation(&t, vec![t1, t2]);
        let a = targets(&p.decide(&t, &obs3));
        assert_eq!(a.get(&2).map(String::as_str), Some("0-3"));
        assert!(!a.contains_key(&1));
    }

    #[test]
    fn more_hungry_tasks_than_cores_use_siblings_last() {
        let t = topo(1, 2, 2);
        let all = t.online_cpus();
        let tasks = (1..=3).map(|i| task(i, 0, &all, &[])).collect();
        let mut p = Spread::default();
        let a = targets(&p.decide(&t, &observation(&t, tasks)));
        let mut cpus: Vec<String> = a.values().cloned().collect();
        cpus.sort();
        // Cores {0,1} and {2,3}: first CPU 0 and 2, then sibling 1.
        assert_eq!(cpus, vec!["0", "1", "2"]);
    }

    use counterpoint_core::sample::Sample;
}
