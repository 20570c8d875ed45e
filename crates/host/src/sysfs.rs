//! The host's topology from sysfs (`/sys/devices/system/cpu`): online CPUs, package and core
//! ids, cache instances. (The `counters` crate carries the fuller reader; this one keeps the
//! host crate independent of it until that lands.)

use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::topology::{CacheDomain, CacheKind, Cpu, CpuKind, NumaNode, Topology};
use std::fs;
use std::path::Path;

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("{path}: {reason}")]
    Bad { path: String, reason: String },
    #[error("topology: {0}")]
    Topology(#[from] counterpoint_core::topology::TopologyError),
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn read_list(p: &Path) -> Result<CpuSet, SysfsError> {
    let text = read_trim(p).ok_or_else(|| SysfsError::Bad {
        path: p.display().to_string(),
        reason: "cannot read".into(),
    })?;
    CpuSet::parse_list(&text).map_err(|e| SysfsError::Bad {
        path: p.display().to_string(),
        reason: e.to_string(),
    })
}

fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1024),
        'M' => (&s[..s.len() - 1], 1024 * 1024),
        'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// Read the topology under `root` (normally `/sys/devices/system/cpu`).
pub fn read_topology(root: &Path) -> Result<Topology, SysfsError> {
    let possible =
        read_list(&root.join("possible")).or_else(|_| read_list(&root.join("present")))?;
    let online = read_list(&root.join("online"))?;
    let mut cpus = Vec::new();
    let mut caches: Vec<CacheDomain> = Vec::new();
    for id in possible.iter() {
        let dir = root.join(format!("cpu{id}"));
        let is_online = online.contains(id);
        let num = |f: &str| read_trim(&dir.join("topology").join(f)).and_then(|s| s.parse().ok());
        cpus.push(Cpu {
            id,
            online: is_online,
            package: num("physical_package_id"),
            die: num("die_id"),
            core: num("core_id"),
            numa_node: None,
            kind: CpuKind::Uniform,
        });
        if !is_online {
            continue;
        }
        let Ok(entries) = fs::read_dir(dir.join("cache")) else {
            continue;
        };
        for e in entries.filter_map(|e| e.ok()) {
            let d = e.path();
            if !e.file_name().to_string_lossy().starts_with("index") {
                continue;
            }
            let Some(level) = read_trim(&d.join("level")).and_then(|s| s.parse().ok()) else {
                continue;
            };
            let kind = match read_trim(&d.join("type")).as_deref() {
                Some("Data") => CacheKind::Data,
                Some("Instruction") => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let shared: CpuSet = read_list(&d.join("shared_cpu_list"))
                .unwrap_or_else(|_| CpuSet::single(id))
                .intersection(&possible);
            let dom = CacheDomain {
                level,
                kind,
                id: read_trim(&d.join("id")).and_then(|s| s.parse().ok()),
                size_bytes: read_trim(&d.join("size")).and_then(|s| parse_size(&s)),
                line_bytes: read_trim(&d.join("coherency_line_size")).and_then(|s| s.parse().ok()),
                ways: read_trim(&d.join("ways_of_associativity")).and_then(|s| s.parse().ok()),
                cpus: shared,
            };
            if !caches
                .iter()
                .any(|c| c.level == dom.level && c.kind == dom.kind && c.cpus == dom.cpus)
            {
                caches.push(dom);
            }
        }
    }
    let mut nodes = Vec::new();
    if let Some(node_root) = root.parent().map(|p| p.join("node")) {
        if let Ok(entries) = fs::read_dir(&node_root) {
            for e in entries.filter_map(|e| e.ok()) {
                let name = e.file_name().to_string_lossy().to_string();
                let Some(n) = name
                    .strip_prefix("node")
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                if let Ok(list) = read_list(&e.path().join("cpulist")) {
                    let list = list.intersection(&possible);
                    for c in cpus.iter_mut().filter(|c| list.contains(c.id)) {
                        c.numa_node = Some(n);
                    }
                    nodes.push(NumaNode {
                        id: n,
                        cpus: list,
                        memory_bytes: None,
                    });
                }
            }
        }
    }
    Ok(Topology::new(cpus, caches, nodes)?)
}

/// The topology of this machine.
pub fn host_topology() -> Result<Topology, SysfsError> {
    read_topology(Path::new("/sys/devices/system/cpu"))
}

/// Online CPUs of a topology as a set.
pub fn online(t: &Topology) -> CpuSet {
    t.online_cpus()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_machine() {
        let t = host_topology().expect("sysfs topology");
        assert!(!t.online_cpus().is_empty());
        assert_eq!(t.online_cpus(), crate::affinity::online_cpus());
    }

    #[test]
    fn reads_a_fixture_with_an_offline_cpu() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::write(r.join("possible"), "0-2\n").expect("w");
        fs::write(r.join("online"), "0-1\n").expect("w");
        for c in 0..3 {
            let t = r.join(format!("cpu{c}/topology"));
            fs::create_dir_all(&t).expect("mkdir");
            fs::write(t.join("physical_package_id"), "0\n").expect("w");
            fs::write(t.join("core_id"), format!("{}\n", c / 2)).expect("w");
            let l2 = r.join(format!("cpu{c}/cache/index2"));
            fs::create_dir_all(&l2).expect("mkdir");
            fs::write(l2.join("level"), "2\n").expect("w");
            fs::write(l2.join("type"), "Unified\n").expect("w");
            fs::write(l2.join("size"), "1024K\n").expect("w");
            fs::write(
                l2.join("shared_cpu_list"),
                if c < 2 { "0-1\n" } else { "2\n" },
            )
            .expect("w");
        }
        let t = read_topology(r).expect("fixture");
        assert_eq!(t.online_cpus().to_list(), "0-1");
        assert_eq!(t.all_cpus().to_list(), "0-2");
        let l2 = t.cache_domains(2);
        assert_eq!(l2.len(), 1, "offline CPU's cache skipped");
        assert_eq!(l2[0].size_bytes, Some(1024 * 1024));
        assert_eq!(t.smt_siblings(0).to_list(), "0-1");
    }
}
