//! `di`: Distributed Intensity (Zhuravlev, Blagodurov & Fedorova, ASPLOS'10, §5).
//!
//! Contention for the shared memory hierarchy (LLC, prefetcher, memory controller and bus) is
//! predicted by each thread's **LLC miss rate**. DI sorts the threads by miss rate and
//! distributes them so that the sum of miss rates in every memory domain is as even as
//! possible: memory-intensive threads are spread across domains rather than piled into one.
//! This is the online variant (DIO): miss rates are measured as the program runs, over the
//! last interval, and the placement is recomputed every [`Di::period_ns`].
//!
//! Parameters as in the paper: the miss rate is LLC misses per instruction (here per thousand,
//! `core::metric::llc_mpki`, which ranks identically to the paper's misses per million); a
//! memory domain is a set of cores sharing an LLC. Within a domain the same balancing is
//! applied to its cores (heavy threads do not share an SMT core when a light partner exists),
//! then to hardware threads (fewest tasks first).

use crate::signal;
use crate::tree::MachineTree;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::BTreeMap;

/// The DI policy.
#[derive(Clone, Debug)]
pub struct Di {
    /// How often the placement is recomputed from fresh miss rates.
    pub period_ns: u64,
    last_mpki: BTreeMap<TaskId, f64>,
    last_decision_ns: Option<u64>,
}

impl Default for Di {
    fn default() -> Self {
        Self {
            period_ns: 1_000_000_000,
            last_mpki: BTreeMap::new(),
            last_decision_ns: None,
        }
    }
}

/// Greedy balancing: each item (in the given order) goes to the bin with the smallest sum
/// among bins with room; ties to fewer items, then lower index. Returns the bin of each item.
fn balance(weights: &[f64], capacities: &[usize]) -> Vec<usize> {
    let mut sums = vec![0.0f64; capacities.len()];
    let mut counts = vec![0usize; capacities.len()];
    let mut out = Vec::with_capacity(weights.len());
    for &w in weights {
        let bin = (0..capacities.len())
            .filter(|&b| counts[b] < capacities[b])
            .min_by(|&a, &b| {
                sums[a]
                    .total_cmp(&sums[b])
                    .then(counts[a].cmp(&counts[b]))
                    .then(a.cmp(&b))
            })
            // Every bin full: fall back to the least loaded overall (oversubscription).
            .unwrap_or_else(|| {
                (0..capacities.len())
                    .min_by(|&a, &b| counts[a].cmp(&counts[b]).then(a.cmp(&b)))
                    .unwrap_or(0)
            });
        sums[bin] += w;
        counts[bin] += 1;
        out.push(bin);
    }
    out
}

impl Di {
    /// DI's placement for tasks with known miss rates: one CPU per task.
    pub fn plan(topology: &Topology, mpki: &[(TaskId, f64)]) -> BTreeMap<TaskId, CpuId> {
        let tree = MachineTree::new(topology);
        let m = tree.cpu_count().max(1);
        let per_cpu = mpki.len().div_ceil(m).max(1);
        let mut sorted = mpki.to_vec();
        sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

        // Level 1: memory domains (LLC domains).
        let domains: Vec<Vec<&crate::tree::CoreNode>> = tree
            .packages
            .iter()
            .flat_map(|p| p.llcs.iter().map(|l| l.cores.iter().collect()))
            .collect();
        let dom_caps: Vec<usize> = domains
            .iter()
            .map(|cores| cores.iter().map(|c| c.cpus.len()).sum::<usize>() * per_cpu)
            .collect();
        let weights: Vec<f64> = sorted.iter().map(|t| t.1).collect();
        let dom_of = balance(&weights, &dom_caps);

        let mut out = BTreeMap::new();
        for (d, cores) in domains.iter().enumerate() {
            let members: Vec<(TaskId, f64)> = sorted
                .iter()
                .zip(&dom_of)
                .filter(|(_, &b)| b == d)
                .map(|(t, _)| *t)
                .collect();
            // Level 2: cores of the domain.
            let core_caps: Vec<usize> = cores.iter().map(|c| c.cpus.len() * per_cpu).collect();
            let w: Vec<f64> = members.iter().map(|t| t.1).collect();
            let core_of = balance(&w, &core_caps);
            for (c, core) in cores.iter().enumerate() {
                // Level 3: threads, fewest tasks first.
                let mut count = vec![0usize; core.cpus.len()];
                for (t, _) in members.iter().zip(&core_of).filter(|(_, &k)| k == c) {
                    let i = (0..count.len()).min_by_key(|&i| (count[i], i)).unwrap_or(0);
                    count[i] += 1;
                    out.insert(t.0, core.cpus[i]);
                }
            }
        }
        out
    }
}

impl Policy for Di {
    fn name(&self) -> &str {
        "di"
    }
    fn required_events(&self) -> Vec<&'static str> {
        vec![event::CACHE_MISSES, event::INSTRUCTIONS]
    }
    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action> {
        for t in &observation.tasks {
            if t.finished {
                self.last_mpki.remove(&t.id);
            } else if let Some(v) = signal::llc_mpki(&t.sample).filter(|v| v.is_finite()) {
                self.last_mpki.insert(t.id, v);
            }
        }
        if let Some(at) = self.last_decision_ns {
            if observation.time_ns.saturating_sub(at) < self.period_ns {
                return Vec::new();
            }
        }
        let known: Vec<(TaskId, f64)> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .filter_map(|t| self.last_mpki.get(&t.id).map(|v| (t.id, *v)))
            .collect();
        if known.is_empty() {
            return Vec::new();
        }
        self.last_decision_ns = Some(observation.time_ns);
        let plan = Self::plan(topology, &known);
        observation
            .tasks
            .iter()
            .filter_map(|t| {
                let want = CpuSet::single(*plan.get(&t.id)?);
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

    #[test]
    fn heavy_tasks_go_to_different_memory_domains() {
        // 2 packages (one LLC each) x 2 cores: two heavy (mcf-like) and two light tasks,
        // all started in package 0.
        let t = topo(2, 2, 1);
        let all = t.online_cpus();
        let mk = |id, cpu, misses: f64| {
            task(
                id,
                cpu,
                &all,
                &[
                    (event::INSTRUCTIONS, 1e9),
                    (event::CACHE_MISSES, misses * 1e6),
                ],
            )
        };
        let obs = observation(
            &t,
            vec![mk(1, 0, 30.0), mk(2, 1, 25.0), mk(3, 2, 0.5), mk(4, 3, 0.2)],
        );
        let mut di = Di::default();
        let actions = di.decide(&t, &obs);
        let cpu: BTreeMap<u64, CpuId> = actions
            .iter()
            .filter_map(|a| match a {
                Action::SetAffinity { task, cpus } => Some((task.0, cpus.first()?)),
                _ => None,
            })
            .collect();
        let dom = |c: CpuId| c / 2;
        assert_ne!(dom(cpu[&1]), dom(cpu[&2]), "heavy tasks share a domain");
        assert_ne!(dom(cpu[&3]), dom(cpu[&4]));
    }

    #[test]
    fn balance_respects_capacity() {
        assert_eq!(balance(&[5.0, 4.0, 1.0, 0.5], &[2, 2]), vec![0, 1, 1, 0]);
        assert_eq!(balance(&[1.0, 1.0, 1.0], &[1, 1]), vec![0, 1, 0]);
    }

    #[test]
    fn within_a_domain_heavy_threads_avoid_sharing_a_core() {
        // One package, one LLC, 2 cores x 2 threads.
        let t = topo(1, 2, 2);
        let plan = Di::plan(
            &t,
            &[
                (TaskId(1), 20.0),
                (TaskId(2), 18.0),
                (TaskId(3), 1.0),
                (TaskId(4), 0.5),
            ],
        );
        let core = |c: CpuId| c / 2;
        assert_ne!(core(plan[&TaskId(1)]), core(plan[&TaskId(2)]));
        let mut cpus: Vec<CpuId> = plan.values().copied().collect();
        cpus.sort();
        assert_eq!(cpus, vec![0, 1, 2, 3]);
    }
}
