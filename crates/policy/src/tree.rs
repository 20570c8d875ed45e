//! The machine as a tree the policies walk: packages → LLC domains → cores → hardware threads
//! (online CPUs only). Built once per decision from a [`Topology`]; every level is ordered by
//! its first CPU so decisions are deterministic.

use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::Topology;

/// One physical core: its online SMT siblings, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreNode {
    /// Its logical CPUs.
    pub cpus: Vec<CpuId>,
}

/// One last-level cache domain (Zhuravlev's memory domain when it also has its own bus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlcNode {
    /// Cores sharing the cache.
    pub cores: Vec<CoreNode>,
}

/// One processor package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageNode {
    /// Package id.
    pub id: u32,
    /// Its LLC domains.
    pub llcs: Vec<LlcNode>,
}

impl PackageNode {
    /// Its online CPUs, in tree order.
    pub fn cpus(&self) -> Vec<CpuId> {
        self.llcs
            .iter()
            .flat_map(|l| l.cores.iter().flat_map(|c| c.cpus.iter().copied()))
            .collect()
    }
    /// Its online CPUs as a set.
    pub fn cpuset(&self) -> CpuSet {
        self.cpus().into_iter().collect()
    }
}

/// The whole machine as a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineTree {
    /// Packages, ascending by id.
    pub packages: Vec<PackageNode>,
}

impl MachineTree {
    /// The tree of `topology`'s online CPUs.
    pub fn new(topology: &Topology) -> Self {
        let cores = topology.cores();
        let llcs = topology.llc_domains();
        let mut packages = Vec::new();
        let mut pkg_ids = topology.packages();
        if pkg_ids.is_empty() {
            pkg_ids.push(0);
        }
        for p in pkg_ids {
            let pcpus = topology.package_cpus(p);
            let pcpus = if pcpus.is_empty() && topology.packages().is_empty() {
                topology.online_cpus()
            } else {
                pcpus
            };
            let mut llc_nodes: Vec<LlcNode> = Vec::new();
            // Cores whose CPUs share one LLC domain (restricted to this package).
            let mut domains: Vec<CpuSet> = llcs
                .iter()
                .map(|d| d.intersection(&pcpus))
                .filter(|d| !d.is_empty())
                .collect();
            domains.dedup();
            let covered: CpuSet = domains.iter().fold(CpuSet::new(), |a, d| a.union(d));
            let rest = pcpus.difference(&covered);
            if !rest.is_empty() {
                domains.push(rest);
            }
            domains.sort_by_key(|d| d.first());
            for d in domains {
                let mut cnodes: Vec<CoreNode> = cores
                    .iter()
                    .map(|c| c.intersection(&d))
                    .filter(|c| !c.is_empty())
                    .map(|c| CoreNode {
                        cpus: c.iter().collect(),
                    })
                    .collect();
                cnodes.sort_by_key(|c| c.cpus.first().copied());
                cnodes.dedup();
                if !cnodes.is_empty() {
                    llc_nodes.push(LlcNode { cores: cnodes });
                }
            }
            if !llc_nodes.is_empty() {
                packages.push(PackageNode {
                    id: p,
                    llcs: llc_nodes,
                });
            }
        }
        Self { packages }
    }

    /// Online CPUs in the tree.
    pub fn cpu_count(&self) -> usize {
        self.packages.iter().map(|p| p.cpus().len()).sum()
    }

    /// All cores, package-major.
    pub fn cores(&self) -> Vec<&CoreNode> {
        self.packages
            .iter()
            .flat_map(|p| p.llcs.iter().flat_map(|l| l.cores.iter()))
            .collect()
    }

    /// LLC domains as CPU lists, package-major.
    pub fn llc_domains(&self) -> Vec<Vec<CpuId>> {
        self.packages
            .iter()
            .flat_map(|p| {
                p.llcs.iter().map(|l| {
                    l.cores
                        .iter()
                        .flat_map(|c| c.cpus.iter().copied())
                        .collect()
                })
            })
            .collect()
    }

    /// Package index (into `packages`) of a CPU.
    pub fn package_of(&self, cpu: CpuId) -> Option<usize> {
        self.packages.iter().position(|p| p.cpus().contains(&cpu))
    }

    /// CPUs in the order a spreading placement fills them: first one thread on one core of
    /// each package in turn (round robin over packages, then over LLC domains, then over
    /// cores), and only when every core has one task the second SMT thread, and so on.
    pub fn spread_order(&self) -> Vec<CpuId> {
        let max_threads = self.cores().iter().map(|c| c.cpus.len()).max().unwrap_or(0);
        // Per package, the order its cores are visited: round robin over its LLC domains.
        let per_pkg: Vec<Vec<&CoreNode>> = self
            .packages
            .iter()
            .map(|p| {
                let mut order = Vec::new();
                let max_cores = p.llcs.iter().map(|l| l.cores.len()).max().unwrap_or(0);
                for i in 0..max_cores {
                    for l in &p.llcs {
                        if let Some(c) = l.cores.get(i) {
                            order.push(c);
                        }
                    }
                }
                order
            })
            .collect();
        let max_cores = per_pkg.iter().map(Vec::len).max().unwrap_or(0);
        let mut out = Vec::new();
        for t in 0..max_threads {
            for i in 0..max_cores {
                for pkg in &per_pkg {
                    if let Some(cpu) = pkg.get(i).and_then(|c| c.cpus.get(t)) {
                        out.push(*cpu);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::testutils::topo;

    #[test]
    fn spread_order_visits_packages_then_cores_then_threads() {
        let t = MachineTree::new(&topo(2, 2, 2));
        // CPUs: pkg0 core0 = 0,1; pkg0 core1 = 2,3; pkg1 core0 = 4,5; pkg1 core1 = 6,7.
        assert_eq!(t.spread_order(), vec![0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(t.cpu_count(), 8);
        assert_eq!(t.package_of(5), Some(1));
        assert_eq!(t.llc_domains().len(), 2);
    }

    #[test]
    fn smp_without_smt() {
        let t = MachineTree::new(&topo(1, 2, 1));
        assert_eq!(t.spread_order(), vec![0, 1]);
        assert_eq!(t.cores().len(), 2);
    }
}
