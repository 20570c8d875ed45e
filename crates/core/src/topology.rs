//! Machine topology: packages, cores, hardware threads, cache domains and NUMA nodes.
//!
//! The same structure describes a live host (read from sysfs by `counterpoint-host`) and a
//! simulated machine (built from a scenario by `sim`). CPUs are hardware threads; a "core" is the
//! set of SMT siblings; a cache domain is one cache instance and the CPUs that share it.

use crate::cpuset::{CpuId, CpuSet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What kind of core a CPU is on a hybrid part (Intel `cpu_core` / `cpu_atom` PMUs).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CpuKind {
    /// Not a hybrid part, or the kind is unknown.
    #[default]
    Uniform,
    /// Performance core (Intel `cpu_core`).
    Performance,
    /// Efficiency core (Intel `cpu_atom`).
    Efficiency,
}

/// One hardware thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub id: CpuId,
    pub online: bool,
    /// `physical_package_id`; `None` when offline and unknown.
    pub package: Option<u32>,
    /// `die_id` where the kernel reports it.
    pub die: Option<u32>,
    /// `core_id` as sysfs reports it: unique only within a package.
    pub core: Option<u32>,
    pub numa_node: Option<u32>,
    pub kind: CpuKind,
}

/// Data, instruction or unified cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheKind {
    Data,
    Instruction,
    Unified,
}

/// One cache instance and the CPUs that share it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheDomain {
    pub level: u8,
    pub kind: CacheKind,
    /// Instance id (`cache/indexN/id`) where known.
    pub id: Option<u32>,
    pub size_bytes: Option<u64>,
    pub line_bytes: Option<u32>,
    pub ways: Option<u32>,
    pub cpus: CpuSet,
}

/// A NUMA node and its CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuSet,
    pub memory_bytes: Option<u64>,
}

/// Inconsistent topology description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("CPU {0} appears twice")]
    DuplicateCpu(CpuId),
    #[error("cache domain L{level} names CPU {cpu}, which the topology does not have")]
    UnknownCacheCpu { level: u8, cpu: CpuId },
    #[error("NUMA node {node} names CPU {cpu}, which the topology does not have")]
    UnknownNodeCpu { node: u32, cpu: CpuId },
    #[error("a topology needs at least one online CPU")]
    NoOnlineCpu,
    #[error("invalid shape: {0}")]
    BadShape(String),
}

/// The whole machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Sorted by id.
    cpus: Vec<Cpu>,
    caches: Vec<CacheDomain>,
    numa_nodes: Vec<NumaNode>,
}

/// How far apart two CPUs are, nearest first: what a notification or a shared cache line pays
/// between them (`bench c2c` groups its pairs by it; the replica model prices meetings with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuDistance {
    /// Two hardware threads of one core.
    SmtSibling,
    /// Different cores sharing the last-level cache.
    SameLlc,
    /// Same package (socket), different last-level caches.
    SamePackage,
    /// Different packages.
    OtherPackage,
}

impl CpuDistance {
    /// Every distance, nearest first.
    pub const ALL: [CpuDistance; 4] = [
        CpuDistance::SmtSibling,
        CpuDistance::SameLlc,
        CpuDistance::SamePackage,
        CpuDistance::OtherPackage,
    ];

    /// The name used in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            CpuDistance::SmtSibling => "smt_sibling",
            CpuDistance::SameLlc => "same_llc",
            CpuDistance::SamePackage => "same_package",
            CpuDistance::OtherPackage => "other_package",
        }
    }
}

impl Topology {
    /// Build and validate. CPUs are sorted by id; cache domains by (level, kind, first CPU).
    pub fn new(
        mut cpus: Vec<Cpu>,
        mut caches: Vec<CacheDomain>,
        mut numa_nodes: Vec<NumaNode>,
    ) -> Result<Self, TopologyError> {
        cpus.sort_by_key(|c| c.id);
        for w in cpus.windows(2) {
            if w[0].id == w[1].id {
                return Err(TopologyError::DuplicateCpu(w[0].id));
            }
        }
        if !cpus.iter().any(|c| c.online) {
            return Err(TopologyError::NoOnlineCpu);
        }
        let known = |id: CpuId| cpus.binary_search_by_key(&id, |c| c.id).is_ok();
        for c in &caches {
            if let Some(cpu) = c.cpus.iter().find(|&id| !known(id)) {
                return Err(TopologyError::UnknownCacheCpu {
                    level: c.level,
                    cpu,
                });
            }
        }
        for n in &numa_nodes {
            if let Some(cpu) = n.cpus.iter().find(|&id| !known(id)) {
                return Err(TopologyError::UnknownNodeCpu { node: n.id, cpu });
            }
        }
        caches.sort_by(|a, b| {
            (a.level, a.kind, a.cpus.first()).cmp(&(b.level, b.kind, b.cpus.first()))
        });
        caches.dedup();
        numa_nodes.sort_by_key(|n| n.id);
        Ok(Self {
            cpus,
            caches,
            numa_nodes,
        })
    }

    /// A symmetric machine: `packages` x `cores_per_package` x `threads_per_core`, CPUs numbered
    /// package-major then core then thread (0,1 are the SMT siblings of core 0 when
    /// `threads_per_core == 2`). One private L1d/L2 per core, `llc_domains_per_package` LLC
    /// instances per package splitting its cores evenly, one NUMA node per package.
    pub fn symmetric(spec: &SymmetricSpec) -> Result<Self, TopologyError> {
        let SymmetricSpec {
            packages,
            cores_per_package,
            threads_per_core,
            llc_domains_per_package,
            l1d_bytes,
            l2_bytes,
            llc_bytes,
            line_bytes,
        } = *spec;
        if packages == 0 || cores_per_package == 0 || threads_per_core == 0 {
            return Err(TopologyError::BadShape(
                "packages, cores per package and threads per core must all be at least 1".into(),
            ));
        }
        if llc_domains_per_package == 0 || cores_per_package % llc_domains_per_package != 0 {
            return Err(TopologyError::BadShape(format!(
                "{cores_per_package} cores per package cannot be split evenly into \
                 {llc_domains_per_package} LLC domains"
            )));
        }
        let mut cpus = Vec::new();
        let mut caches = Vec::new();
        let mut nodes = Vec::new();
        let cores_per_llc = cores_per_package / llc_domains_per_package;
        let mut next: CpuId = 0;
        for p in 0..packages {
            let mut node_cpus = CpuSet::new();
            let mut llc_cpus = CpuSet::new();
            for c in 0..cores_per_package {
                let mut core_cpus = CpuSet::new();
                for _ in 0..threads_per_core {
                    cpus.push(Cpu {
                        id: next,
                        online: true,
                        package: Some(p),
                        die: Some(0),
                        core: Some(c),
                        numa_node: Some(p),
                        kind: CpuKind::Uniform,
                    });
                    core_cpus.insert(next);
                    next += 1;
                }
                for (level, size) in [(1u8, l1d_bytes), (2u8, l2_bytes)] {
                    caches.push(CacheDomain {
                        level,
                        kind: if level == 1 {
                            CacheKind::Data
                        } else {
                            CacheKind::Unified
                        },
                        id: None,
                        size_bytes: Some(size),
                        line_bytes: Some(line_bytes),
                        ways: None,
                        cpus: core_cpus.clone(),
                    });
                }
                node_cpus = node_cpus.union(&core_cpus);
                llc_cpus = llc_cpus.union(&core_cpus);
                if (c + 1) % cores_per_llc == 0 {
                    caches.push(CacheDomain {
                        level: 3,
                        kind: CacheKind::Unified,
                        id: None,
                        size_bytes: Some(llc_bytes),
                        line_bytes: Some(line_bytes),
                        ways: None,
                        cpus: std::mem::take(&mut llc_cpus),
                    });
                }
            }
            nodes.push(NumaNode {
                id: p,
                cpus: node_cpus,
                memory_bytes: None,
            });
        }
        Self::new(cpus, caches, nodes)
    }

    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }
    pub fn cpu(&self, id: CpuId) -> Option<&Cpu> {
        self.cpus
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|i| &self.cpus[i])
    }
    pub fn caches(&self) -> &[CacheDomain] {
        &self.caches
    }
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.numa_nodes
    }
    pub fn all_cpus(&self) -> CpuSet {
        self.cpus.iter().map(|c| c.id).collect()
    }
    pub fn online_cpus(&self) -> CpuSet {
        self.cpus
            .iter()
            .filter(|c| c.online)
            .map(|c| c.id)
            .collect()
    }
    /// Package ids of online CPUs, ascending.
    pub fn packages(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.cpus.iter().filter_map(|c| c.package).collect();
        p.sort_unstable();
        p.dedup();
        p
    }
    /// Online CPUs of one package.
    pub fn package_cpus(&self, package: u32) -> CpuSet {
        self.cpus
            .iter()
            .filter(|c| c.online && c.package == Some(package))
            .map(|c| c.id)
            .collect()
    }
    /// Physical cores as sets of online SMT siblings, ordered by first CPU.
    pub fn cores(&self) -> Vec<CpuSet> {
        // Keyed by (package, die, core): sysfs core ids repeat across packages.
        type CoreKey = (Option<u32>, Option<u32>, Option<u32>);
        let mut by_core: BTreeMap<CoreKey, CpuSet> = BTreeMap::new();
        for c in self.cpus.iter().filter(|c| c.online) {
            let key = match c.core {
                Some(core) => (c.package, c.die, Some(core)),
                // No core id: treat the CPU as its own core.
                None => (c.package, c.die, Some(u32::MAX - c.id)),
            };
            by_core.entry(key).or_default().insert(c.id);
        }
        let mut cores: Vec<CpuSet> = by_core.into_values().collect();
        cores.sort_by_key(|s| s.first());
        cores
    }
    /// Online SMT siblings of `cpu`, including itself.
    pub fn smt_siblings(&self, cpu: CpuId) -> CpuSet {
        self.cores()
            .into_iter()
            .find(|s| s.contains(cpu))
            .unwrap_or_else(|| CpuSet::single(cpu))
    }
    /// Highest cache level present (the LLC level), if any cache is described.
    pub fn llc_level(&self) -> Option<u8> {
        self.caches.iter().map(|c| c.level).max()
    }
    /// Cache domains of one level (data and unified; instruction caches excluded).
    pub fn cache_domains(&self, level: u8) -> Vec<&CacheDomain> {
        self.caches
            .iter()
            .filter(|c| c.level == level && c.kind != CacheKind::Instruction)
            .collect()
    }
    /// LLC domains; if no cache is described, one domain per package.
    pub fn llc_domains(&self) -> Vec<CpuSet> {
        match self.llc_level() {
            Some(l) => self
                .cache_domains(l)
                .into_iter()
                .map(|c| c.cpus.clone())
                .collect(),
            None => self
                .packages()
                .into_iter()
                .map(|p| self.package_cpus(p))
                .collect(),
        }
    }
    /// Index into [`Self::llc_domains`] of the domain holding `cpu`.
    pub fn llc_domain_of(&self, cpu: CpuId) -> Option<usize> {
        self.llc_domains().iter().position(|d| d.contains(cpu))
    }
    /// Whether any core has more than one online hardware thread.
    pub fn has_smt(&self) -> bool {
        self.cores().iter().any(|c| c.len() > 1)
    }
}

/// Parameters of [`Topology::symmetric`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymmetricSpec {
    pub packages: u32,
    pub cores_per_package: u32,
    pub threads_per_core: u32,
    pub llc_domains_per_package: u32,
    pub l1d_bytes: u64,
    pub l2_bytes: u64,
    pub llc_bytes: u64,
    pub line_bytes: u32,
}

impl Default for SymmetricSpec {
    fn default() -> Self {
        Self {
            packages: 1,
            cores_per_package: 2,
            threads_per_core: 1,
            llc_domains_per_package: 1,
            l1d_bytes: 32 << 10,
            l2_bytes: 256 << 10,
            llc_bytes: 8 << 20,
            line_bytes: 64,
        }
    }
}

impl Topology {
    /// Distance between two different CPUs, or `None` for the same CPU or a CPU the topology
    /// does not place (offline, unknown package).
    pub fn distance(&self, a: CpuId, b: CpuId) -> Option<CpuDistance> {
        if a == b {
            return None;
        }
        let (pa, pb) = (self.cpu(a)?.package?, self.cpu(b)?.package?);
        if self.smt_siblings(a).contains(b) {
            return Some(CpuDistance::SmtSibling);
        }
        match (self.llc_domain_of(a), self.llc_domain_of(b)) {
            (Some(x), Some(y)) if x == y => return Some(CpuDistance::SameLlc),
            _ => {}
        }
        Some(if pa == pb {
            CpuDistance::SamePackage
        } else {
            CpuDistance::OtherPackage
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_two_by_two_smt() {
        let t = Topology::symmetric(&SymmetricSpec {
            packages: 2,
            cores_per_package: 1,
            threads_per_core: 2,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(t.cpus().len(), 4);
        assert_eq!(t.packages(), vec![0, 1]);
        assert_eq!(t.cores().len(), 2);
        assert_eq!(t.smt_siblings(1).to_list(), "0-1");
        assert_eq!(t.llc_domains().len(), 2);
        assert_eq!(t.llc_domain_of(3), Some(1));
        assert!(t.has_smt());
    }

    #[test]
    fn rejects_bad_shapes() {
        assert!(Topology::symmetric(&SymmetricSpec {
            cores_per_package: 3,
            llc_domains_per_package: 2,
            ..Default::default()
        })
        .is_err());
        assert_eq!(
            Topology::new(vec![], vec![], vec![]),
            Err(TopologyError::NoOnlineCpu)
        );
    }

    #[test]
    fn multiple_llc_domains_per_package() {
        let t = Topology::symmetric(&SymmetricSpec {
            packages: 1,
            cores_per_package: 8,
            threads_per_core: 2,
            llc_domains_per_package: 2,
            ..Default::default()
        })
        .unwrap();
        let d = t.llc_domains();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].to_list(), "0-7");
        assert_eq!(d[1].to_list(), "8-15");
    }
}
