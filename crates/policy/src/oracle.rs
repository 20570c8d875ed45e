//! `oracle`: the best static placement, found by search — the ceiling the other policies are
//! measured against (Zhuravlev et al. compare DI with the optimal schedule the same way).
//!
//! The cost of a placement is supplied by the caller ([`PlacementCost`]), typically a
//! simulator evaluation, so this crate stays independent of any machine model. The search is a
//! depth-first branch and bound over task → CPU assignments:
//! - **symmetry breaking**: on a machine whose packages, LLC domains, cores and threads are
//!   interchangeable (the same shape), placements that differ only by relabelling empty
//!   siblings are equivalent, so an empty package / domain / core / thread is only tried if it
//!   is the first empty one of its shape among its siblings. Every placement has exactly one
//!   canonical representative (label nodes in order of first use), so nothing is lost, as long
//!   as the cost itself is invariant under those relabellings (it is for a symmetric machine);
//! - **bounding**: the caller may supply a lower bound of any completion of a partial
//!   placement; subtrees whose bound is not below the best cost found are skipped;
//! - **capacity**: at most `ceil(tasks / CPUs)` tasks per CPU unless set otherwise.
//!
//! Intended for up to about 12 tasks; [`OracleSearch::max_evaluations`] caps the work and the
//! result says whether the search was exhaustive.

use crate::tree::MachineTree;
use counterpoint_core::action::{Action, Placement};
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::BTreeMap;

/// The objective: lower is better.
pub trait PlacementCost {
    /// Cost of a complete placement: `placement[i]` is the CPU of task `i`.
    fn cost(&mut self, placement: &[CpuId]) -> f64;
    /// A lower bound on the cost of every completion of `partial` (the first tasks placed).
    /// The default never prunes.
    fn lower_bound(&mut self, _partial: &[CpuId]) -> f64 {
        f64::NEG_INFINITY
    }
}

/// Adapts a closure over complete placements.
pub struct FnCost<F>(pub F);

impl<F: FnMut(&[CpuId]) -> f64> PlacementCost for FnCost<F> {
    fn cost(&mut self, placement: &[CpuId]) -> f64 {
        (self.0)(placement)
    }
}

/// Search settings.
#[derive(Clone, Debug)]
pub struct OracleSearch {
    /// Tasks per CPU allowed; `None` = `ceil(tasks / CPUs)`.
    pub max_tasks_per_cpu: Option<usize>,
    /// Exploit the machine's symmetry (only valid if the cost is invariant under it).
    pub symmetric: bool,
    /// Stop after this many complete placements have been evaluated.
    pub max_evaluations: u64,
}

impl Default for OracleSearch {
    fn default() -> Self {
        Self {
            max_tasks_per_cpu: None,
            symmetric: true,
            max_evaluations: 1_000_000,
        }
    }
}

/// What the search found.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleResult {
    /// CPU of each task, in the caller's task order.
    pub placement: Vec<CpuId>,
    /// Its cost.
    pub cost: f64,
    /// Complete placements evaluated.
    pub evaluations: u64,
    /// Partial placements pruned by the bound.
    pub pruned: u64,
    /// False if `max_evaluations` stopped the search early.
    pub exhaustive: bool,
}

/// A node of the topology tree, flattened: each CPU's path (package, llc, core, thread) and
/// the shape signature of every node on the path (for symmetry).
struct Layout {
    cpus: Vec<CpuId>,
    /// `path[c][level]` = index of the node among its siblings at that level.
    path: Vec<[usize; 4]>,
    /// `shape[c][level]` = shape signature of that node.
    shape: Vec<[Vec<usize>; 4]>,
}

impl Layout {
    fn new(tree: &MachineTree) -> Self {
        let mut cpus = Vec::new();
        let mut path = Vec::new();
        let mut shape = Vec::new();
        for (pi, p) in tree.packages.iter().enumerate() {
            let psig: Vec<usize> = p
                .llcs
                .iter()
                .flat_map(|l| l.cores.iter().map(|c| c.cpus.len()))
                .chain(std::iter::once(usize::MAX))
                .chain(p.llcs.iter().map(|l| l.cores.len()))
                .collect();
            for (li, l) in p.llcs.iter().enumerate() {
                let lsig: Vec<usize> = l.cores.iter().map(|c| c.cpus.len()).collect();
                for (ci, c) in l.cores.iter().enumerate() {
                    for (ti, &cpu) in c.cpus.iter().enumerate() {
                        cpus.push(cpu);
                        path.push([pi, li, ci, ti]);
                        shape.push([psig.clone(), lsig.clone(), vec![c.cpus.len()], vec![1]]);
                    }
                }
            }
        }
        Self { cpus, path, shape }
    }

    /// Whether placing the next task on CPU index `c` is canonical, given which CPUs are used.
    fn canonical(&self, c: usize, used: &[usize]) -> bool {
        // Walk down the levels: at the first level where c's node is empty, c's node must be
        // the first empty node of its shape among its siblings (same parent path), and c must
        // be the first CPU of that node (below an empty node every choice is equivalent).
        for level in 0..4 {
            let node_used = (0..self.cpus.len())
                .any(|o| used[o] > 0 && self.path[o][..=level] == self.path[c][..=level]);
            if node_used {
                continue;
            }
            // Any earlier empty sibling of the same shape makes c non-canonical.
            for o in 0..self.cpus.len() {
                if self.path[o][..level] == self.path[c][..level]
                    && self.path[o][level] < self.path[c][level]
                    && self.shape[o][level] == self.shape[c][level]
                {
                    let sib = &self.path[o][..=level];
                    let sib_used =
                        (0..self.cpus.len()).any(|q| used[q] > 0 && &self.path[q][..=level] == sib);
                    if !sib_used {
                        return false;
                    }
                }
            }
            // Below an empty node, only its first CPU.
            return self.path[c][level + 1..].iter().all(|&i| i == 0);
        }
        true
    }
}

impl OracleSearch {
    /// Search for the cheapest placement of `tasks` tasks on `topology`.
    pub fn search(
        &self,
        topology: &Topology,
        tasks: usize,
        cost: &mut dyn PlacementCost,
    ) -> Option<OracleResult> {
        let tree = MachineTree::new(topology);
        let layout = Layout::new(&tree);
        let m = layout.cpus.len();
        if m == 0 || tasks == 0 {
            return None;
        }
        let cap = self
            .max_tasks_per_cpu
            .unwrap_or_else(|| tasks.div_ceil(m))
            .max(1);
        if cap * m < tasks {
            return None;
        }
        let mut st = State {
            used: vec![0; m],
            partial: Vec::with_capacity(tasks),
            best: None,
            evaluations: 0,
            pruned: 0,
            stopped: false,
        };
        self.dfs(&layout, tasks, cap, cost, &mut st);
        let (placement, best_cost) = st.best?;
        Some(OracleResult {
            placement,
            cost: best_cost,
            evaluations: st.evaluations,
            pruned: st.pruned,
            exhaustive: !st.stopped,
        })
    }

    fn dfs(
        &self,
        layout: &Layout,
        tasks: usize,
        cap: usize,
        cost: &mut dyn PlacementCost,
        st: &mut State,
    ) {
        if st.stopped {
            return;
        }
        if st.partial.len() == tasks {
            let c = cost.cost(&st.partial);
            st.evaluations += 1;
            if st.best.as_ref().map_or(true, |(_, b)| c < *b) {
                st.best = Some((st.partial.clone(), c));
            }
            if st.evaluations >= self.max_evaluations {
                st.stopped = true;
            }
            return;
        }
        for c in 0..layout.cpus.len() {
            if st.used[c] >= cap {
                continue;
            }
            if self.symmetric && !layout.canonical(c, &st.used) {
                continue;
            }
            st.used[c] += 1;
            st.partial.push(layout.cpus[c]);
            let prune = st.partial.len() < tasks
                && st
                    .best
                    .as_ref()
                    .is_some_and(|(_, b)| cost.lower_bound(&st.partial) >= *b);
            if prune {
                st.pruned += 1;
            } else {
                self.dfs(layout, tasks, cap, cost, st);
            }
            st.partial.pop();
            st.used[c] -= 1;
            if st.stopped {
                return;
            }
        }
    }
}

struct State {
    used: Vec<usize>,
    partial: Vec<CpuId>,
    best: Option<(Vec<CpuId>, f64)>,
    evaluations: u64,
    pruned: u64,
    stopped: bool,
}

/// The oracle as an epoch-level policy: imposes a placement found beforehand (by
/// [`OracleSearch`] against the scenario) on the first interval, then holds it.
#[derive(Clone, Debug)]
pub struct Oracle {
    placement: Placement,
}

impl Oracle {
    /// The oracle imposing `placement`.
    pub fn new(placement: Placement) -> Self {
        Self { placement }
    }
    /// Build from a search result over tasks in `task_order`.
    pub fn from_result(task_order: &[TaskId], result: &OracleResult) -> Self {
        let map: BTreeMap<TaskId, CpuSet> = task_order
            .iter()
            .zip(&result.placement)
            .map(|(t, c)| (*t, CpuSet::single(*c)))
            .collect();
        Self::new(Placement(map))
    }
    /// The placement it imposes.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }
}

impl Policy for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }
    fn required_events(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn decide(&mut self, _topology: &Topology, observation: &Observation) -> Vec<Action> {
        observation
            .tasks
            .iter()
            .filter(|t| !t.finished)
            .filter_map(|t| {
                let want = self.placement.0.get(&t.id)?;
                (t.affinity != *want).then(|| Action::SetAffinity {
                    task: t.id,
                    cpus: want.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::testutils::topo;

    /// Cost: heavy tasks sharing a package are penalised (a hand-built contention model).
    fn pkg_cost(weights: Vec<f64>, cpus_per_pkg: u32) -> impl FnMut(&[CpuId]) -> f64 {
        move |p: &[CpuId]| {
            let mut per_pkg: BTreeMap<u32, f64> = BTreeMap::new();
            for (i, c) in p.iter().enumerate() {
                *per_pkg.entry(c / cpus_per_pkg).or_default() += weights[i];
            }
            per_pkg.values().map(|s| s * s).sum()
        }
    }

    #[test]
    fn finds_the_balanced_placement() {
        // 2 packages x 2 threads; tasks 0,1 heavy, 2,3 light: best is one heavy per package.
        let t = topo(2, 1, 2);
        let mut cost = FnCost(pkg_cost(vec![10.0, 9.0, 1.0, 1.0], 2));
        let r = OracleSearch::default().search(&t, 4, &mut cost).unwrap();
        assert!(r.exhaustive);
        assert_ne!(r.placement[0] / 2, r.placement[1] / 2);
        assert!((r.cost - (11.0f64.powi(2) + 10.0f64.powi(2))).abs() < 1e-9);
    }

    #[test]
    fn symmetry_breaking_loses_nothing_and_saves_work() {
        let t = topo(2, 2, 2);
        let w = vec![7.0, 3.0, 5.0, 1.0, 2.0];
        let full = OracleSearch {
            symmetric: false,
            ..Default::default()
        }
        .search(&t, 5, &mut FnCost(pkg_cost(w.clone(), 4)))
        .unwrap();
        let sym = OracleSearch::default()
            .search(&t, 5, &mut FnCost(pkg_cost(w, 4)))
            .unwrap();
        assert!((full.cost - sym.cost).abs() < 1e-9);
        assert_eq!(full.evaluations, 8 * 7 * 6 * 5 * 4);
        assert!(sym.evaluations * 10 < full.evaluations);
    }

    #[test]
    fn bound_prunes_and_cap_limits() {
        struct Bounded(Vec<f64>);
        impl PlacementCost for Bounded {
            fn cost(&mut self, p: &[CpuId]) -> f64 {
                p.iter().zip(&self.0).map(|(c, w)| *c as f64 * w).sum()
            }
            fn lower_bound(&mut self, p: &[CpuId]) -> f64 {
                self.cost(p)
            }
        }
        let t = topo(1, 4, 1);
        let r = OracleSearch {
            symmetric: false,
            ..Default::default()
        }
        .search(&t, 4, &mut Bounded(vec![4.0, 3.0, 2.0, 1.0]))
        .unwrap();
        // Heaviest weight on the cheapest CPU.
        assert_eq!(r.placement, vec![0, 1, 2, 3]);
        assert!(r.pruned > 0);
        assert!(OracleSearch {
            max_tasks_per_cpu: Some(1),
            ..Default::default()
        }
        .search(&t, 5, &mut Bounded(vec![1.0; 5]))
        .is_none());
    }

    #[test]
    fn oracle_policy_imposes_its_placement_once() {
        use counterpoint_core::testutils::{observation, task};
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let r = OracleResult {
            placement: vec![1, 0],
            cost: 0.0,
            evaluations: 1,
            pruned: 0,
            exhaustive: true,
        };
        let mut o = Oracle::from_result(&[TaskId(1), TaskId(2)], &r);
        let obs = observation(&t, vec![task(1, 0, &all, &[]), task(2, 1, &all, &[])]);
        assert_eq!(o.decide(&t, &obs).len(), 2);
        let mut a = task(1, 1, &all, &[]);
        a.affinity = CpuSet::single(1);
        let mut b = task(2, 0, &all, &[]);
        b.affinity = CpuSet::single(0);
        assert!(o.decide(&t, &observation(&t, vec![a, b])).is_empty());
    }
}
