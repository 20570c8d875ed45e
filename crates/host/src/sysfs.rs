//! The host's topology from sysfs: packages, cores and SMT siblings, cache instances per level,
//! NUMA nodes, online/offline/present/possible CPUs and hybrid core kinds.
//!
//! Everything is read relative to a root that stands for `/sys`, so the same code reads the live
//! machine and the fixture trees under `tests/data/sysfs/`. Missing files are tolerated (an
//! offline CPU has no `topology/` or `cache/` directory; a kernel without NUMA has no `node/`
//! directory): the field stays unknown and a warning says what was missing. A file that exists
//! but cannot be parsed is an error naming the file, because a guess would be silently wrong.

use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::{CacheDomain, CacheKind, Cpu, CpuKind, NumaNode, Topology};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    /// A file exists but cannot be read or parsed.
    #[error("{path}: {reason}")]
    Bad {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The root has no CPU directory.
    #[error("{path}: not a sysfs CPU directory ({reason})")]
    NoCpuDir {
        /// The directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// What was read does not make a consistent topology.
    #[error("topology: {0}")]
    Topology(#[from] counterpoint_core::topology::TopologyError),
}

fn bad(p: &Path, reason: impl Into<String>) -> SysfsError {
    SysfsError::Bad {
        path: p.display().to_string(),
        reason: reason.into(),
    }
}

/// The most a sysfs attribute holds: the kernel's are at most a page; a longer file (a tree
/// made by hand with `/dev/zero` behind a name) is refused before it is read whole.
const MAX_ATTR_BYTES: u64 = 64 << 10;

/// The trimmed contents of a file; `Ok(None)` when it does not exist.
fn read_opt(p: &Path) -> Result<Option<String>, SysfsError> {
    use std::io::Read as _;
    let file = match fs::File::open(p) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(p, e.to_string())),
    };
    // A FIFO or a device would block or never end: sysfs attributes are regular files.
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(bad(p, "not a regular file")),
        Err(e) => return Err(bad(p, e.to_string())),
    }
    let mut bytes = Vec::new();
    file.take(MAX_ATTR_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(p, e.to_string()))?;
    if bytes.len() as u64 > MAX_ATTR_BYTES {
        return Err(bad(
            p,
            format!(
                "longer than {} KiB: not a sysfs attribute",
                MAX_ATTR_BYTES >> 10
            ),
        ));
    }
    String::from_utf8(bytes)
        .map(|s| Some(s.trim().to_string()))
        .map_err(|e| bad(p, format!("not UTF-8 text ({e})")))
}

fn read_list_opt(p: &Path) -> Result<Option<CpuSet>, SysfsError> {
    match read_opt(p)? {
        None => Ok(None),
        Some(text) => CpuSet::parse_list(&text)
            .map(Some)
            .map_err(|e| bad(p, e.to_string())),
    }
}

fn read_num_opt<T: std::str::FromStr>(p: &Path) -> Result<Option<T>, SysfsError> {
    match read_opt(p)? {
        None => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| bad(p, format!("expected a number, found {text:?}"))),
    }
}

/// An id file that the kernel may set to `-1` for "unknown": `Ok(None)` when absent,
/// `Ok(Some(None))` for -1, an error naming the file for anything else that is not a number.
fn read_id_opt<T: std::str::FromStr>(p: &Path) -> Result<Option<Option<T>>, SysfsError> {
    match read_opt(p)? {
        None => Ok(None),
        Some(text) if text == "-1" => Ok(Some(None)),
        Some(text) => text
            .parse()
            .map(|v| Some(Some(v)))
            .map_err(|_| bad(p, format!("expected a number or -1, found {text:?}"))),
    }
}

/// Parse a sysfs cache size (`48K`, `1280K`, `32M`, or plain bytes) into bytes.
pub fn parse_size_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// A topology as read from sysfs, with the CPU state sets the core [`Topology`] does not keep
/// and what was missing on the way.
#[derive(Clone, Debug, Serialize)]
pub struct SysfsTopology {
    /// The topology the rest of Counterpoint uses.
    #[serde(flatten)]
    pub topology: Topology,
    /// `cpu/possible`: CPUs the kernel could ever bring up.
    pub possible: CpuSet,
    /// `cpu/present`: CPUs physically there; [`Topology::cpus`] lists exactly these.
    pub present: CpuSet,
    /// `cpu/online`.
    pub online: CpuSet,
    /// Present but not online.
    pub offline: CpuSet,
    /// Files that were missing or inconsistent and what default was used instead.
    pub warnings: Vec<String>,
}

/// Where the CPU directory lives under a root that stands for `/sys`.
pub fn cpu_dir(root: &Path) -> PathBuf {
    root.join("devices/system/cpu")
}

/// Read the topology under `root`, which stands for `/sys`.
pub fn read_topology(root: &Path) -> Result<Topology, SysfsError> {
    read_sysfs(root).map(|s| s.topology)
}

/// CPUs that have a `cpuN` directory.
fn cpu_dirs(cpu_root: &Path) -> Result<CpuSet, SysfsError> {
    let entries = fs::read_dir(cpu_root).map_err(|e| SysfsError::NoCpuDir {
        path: cpu_root.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut set = CpuSet::new();
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name();
        if let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<CpuId>().ok())
        {
            set.insert(id);
        }
    }
    Ok(set)
}

/// Read the topology and the CPU state sets under `root`, which stands for `/sys`.
pub fn read_sysfs(root: &Path) -> Result<SysfsTopology, SysfsError> {
    let cpu_root = cpu_dir(root);
    let dirs = cpu_dirs(&cpu_root)?;
    let mut warnings = Vec::new();
    let possible = read_list_opt(&cpu_root.join("possible"))?;
    let present = read_list_opt(&cpu_root.join("present"))?;
    // Prefer `present`; fall back to `possible`, then to the cpuN directories themselves.
    let present = match (present, &possible) {
        (Some(p), _) => p,
        (None, Some(p)) => {
            warnings.push("cpu/present missing: using cpu/possible".to_string());
            p.clone()
        }
        (None, None) => {
            warnings.push(
                "cpu/present and cpu/possible missing: using the cpuN directories".to_string(),
            );
            dirs.clone()
        }
    };
    if present.is_empty() {
        return Err(SysfsError::NoCpuDir {
            path: cpu_root.display().to_string(),
            reason: "no CPUs listed".into(),
        });
    }
    let possible = possible.unwrap_or_else(|| present.clone());
    let online = match read_list_opt(&cpu_root.join("online"))? {
        Some(o) => o.intersection(&present),
        None => {
            // Per-CPU `online` files say 0 or 1; the boot CPU often has none and is online.
            warnings.push("cpu/online missing: using cpuN/online files".to_string());
            let mut o = CpuSet::new();
            for id in present.iter() {
                let f = cpu_root.join(format!("cpu{id}/online"));
                if read_num_opt::<u8>(&f)?.unwrap_or(1) == 1 {
                    o.insert(id);
                }
            }
            o
        }
    };
    let offline = present.difference(&online);

    let kinds = read_kinds(root, &cpu_root, &present, &mut warnings)?;

    let mut cpus = Vec::new();
    let mut caches: Vec<CacheDomain> = Vec::new();
    // Siblings as the kernel lists them, to cross-check the (package, die, core) grouping.
    let mut sibling_lists: BTreeMap<CpuId, CpuSet> = BTreeMap::new();
    for id in present.iter() {
        let dir = cpu_root.join(format!("cpu{id}"));
        let is_online = online.contains(id);
        let topo = dir.join("topology");
        let mut cpu = Cpu {
            id,
            online: is_online,
            package: None,
            die: None,
            core: None,
            numa_node: None,
            kind: kinds.get(&id).copied().unwrap_or_default(),
        };
        if topo.is_dir() {
            cpu.package = read_id_opt(&topo.join("physical_package_id"))?.map(|v| match v {
                Some(p) => p,
                None => {
                    // Real kernels (arm64 without PPTT, some VMs) report -1: one package.
                    warnings.push(format!(
                        "cpu{id}/topology/physical_package_id is -1 (unknown): treated as package 0"
                    ));
                    0
                }
            });
            cpu.die = read_id_opt(&topo.join("die_id"))?.flatten();
            cpu.core = read_num_opt(&topo.join("core_id"))?;
            let siblings = match read_list_opt(&topo.join("core_cpus_list"))? {
                Some(s) => Some(s),
                None => read_list_opt(&topo.join("thread_siblings_list"))?,
            };
            if let Some(s) = siblings {
                if cpu.core.is_none() {
                    // No core id: name the core after its first sibling so siblings still
                    // group together.
                    if let Some(first) = s.first() {
                        cpu.core = Some(first);
                        warnings.push(format!(
                            "cpu{id}/topology/core_id missing: core named after sibling list {}",
                            s.to_list()
                        ));
                    }
                }
                sibling_lists.insert(id, s.intersection(&online));
            }
            if cpu.package.is_none() {
                warnings.push(format!(
                    "cpu{id}/topology/physical_package_id missing: package unknown"
                ));
            }
        } else if is_online {
            warnings.push(format!(
                "cpu{id}: online but no topology/ directory: package and core unknown"
            ));
        }
        cpus.push(cpu);
        if is_online {
            read_caches(&dir, id, &present, &mut caches, &mut warnings)?;
        }
    }

    let nodes = read_nodes(root, &present, &mut cpus, &mut warnings)?;
    let topology = Topology::new(cpus, caches, nodes)?;
    for (cpu, listed) in &sibling_lists {
        let grouped = topology.smt_siblings(*cpu);
        if topology.cpu(*cpu).is_some_and(|c| c.online) && !listed.is_empty() && grouped != *listed
        {
            warnings.push(format!(
                "cpu{cpu}: core_cpus_list {} disagrees with core ids ({})",
                listed.to_list(),
                grouped.to_list()
            ));
        }
    }
    Ok(SysfsTopology {
        topology,
        possible,
        present,
        online,
        offline,
        warnings,
    })
}

/// Hybrid kinds from the `cpu_core` / `cpu_atom` PMUs' `cpus` files (Intel), else from the
/// CPUs' `cpu_capacity` (Arm big.LITTLE and DynamIQ: the kernel's relative capacity, 1024 for
/// the biggest; until session 30 such parts showed as uniform): where the present CPUs'
/// capacities differ, those of the largest are performance CPUs and the rest efficiency ones.
fn read_kinds(
    root: &Path,
    cpu_root: &Path,
    present: &CpuSet,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<CpuId, CpuKind>, SysfsError> {
    let mut kinds = BTreeMap::new();
    for (pmu, kind) in [
        ("cpu_core", CpuKind::Performance),
        ("cpu_atom", CpuKind::Efficiency),
    ] {
        let dir = root.join("devices").join(pmu);
        if let Some(set) = read_list_opt(&dir.join("cpus"))? {
            for id in set.iter() {
                if let Some(other) = kinds.insert(id, kind) {
                    warnings.push(format!(
                        "cpu{id} is listed by both devices/cpu_core and devices/cpu_atom: taken \
                         as {kind:?}, not {other:?}"
                    ));
                }
            }
        } else if dir.is_dir() {
            warnings.push(format!("devices/{pmu}/cpus missing: kinds unknown"));
        }
    }
    if !kinds.is_empty() {
        return Ok(kinds);
    }
    let mut capacity = BTreeMap::new();
    for id in present.iter() {
        match read_num_opt::<u32>(&cpu_root.join(format!("cpu{id}/cpu_capacity")))? {
            Some(c) => {
                capacity.insert(id, c);
            }
            // Not every CPU says: no kinds from a partial picture.
            None => return Ok(kinds),
        }
    }
    let (Some(&max), Some(&min)) = (capacity.values().max(), capacity.values().min()) else {
        return Ok(kinds);
    };
    if max != min {
        for (id, c) in capacity {
            let kind = if c == max {
                CpuKind::Performance
            } else {
                CpuKind::Efficiency
            };
            kinds.insert(id, kind);
        }
    }
    Ok(kinds)
}

fn read_caches(
    dir: &Path,
    id: CpuId,
    present: &CpuSet,
    caches: &mut Vec<CacheDomain>,
    warnings: &mut Vec<String>,
) -> Result<(), SysfsError> {
    let cache_dir = dir.join("cache");
    let entries = match fs::read_dir(&cache_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            warnings.push(format!("cpu{id}: no cache/ directory: caches unknown"));
            return Ok(());
        }
        Err(e) => return Err(bad(&cache_dir, e.to_string())),
    };
    let mut indexes: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_str()?
                .strip_prefix("index")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    indexes.sort();
    for (_, d) in indexes {
        let Some(level) = read_num_opt::<u8>(&d.join("level"))? else {
            warnings.push(format!("{}: no level: index skipped", d.display()));
            continue;
        };
        let kind = match read_opt(&d.join("type"))?.as_deref() {
            Some("Data") => CacheKind::Data,
            Some("Instruction") => CacheKind::Instruction,
            Some("Unified") | None => CacheKind::Unified,
            Some(other) => {
                return Err(bad(
                    &d.join("type"),
                    format!("unknown cache type {other:?}"),
                ))
            }
        };
        let size_path = d.join("size");
        let size_bytes = match read_opt(&size_path)? {
            None => None,
            Some(s) => Some(
                parse_size_bytes(&s)
                    .ok_or_else(|| bad(&size_path, format!("bad cache size {s:?}")))?,
            ),
        };
        let cpus = match read_list_opt(&d.join("shared_cpu_list"))? {
            Some(s) => {
                let mut s = s.intersection(present);
                s.insert(id);
                s
            }
            None => {
                warnings.push(format!(
                    "{}: no shared_cpu_list: treated as private",
                    d.display()
                ));
                CpuSet::single(id)
            }
        };
        let dom = CacheDomain {
            level,
            kind,
            id: read_num_opt(&d.join("id"))?,
            size_bytes,
            line_bytes: read_num_opt(&d.join("coherency_line_size"))?,
            ways: read_num_opt(&d.join("ways_of_associativity"))?,
            cpus,
        };
        // One domain per (level, kind, sharing set): every sharer reports the same instance.
        if !caches
            .iter()
            .any(|c| c.level == dom.level && c.kind == dom.kind && c.cpus == dom.cpus)
        {
            caches.push(dom);
        }
    }
    Ok(())
}

fn read_nodes(
    root: &Path,
    present: &CpuSet,
    cpus: &mut [Cpu],
    warnings: &mut Vec<String>,
) -> Result<Vec<NumaNode>, SysfsError> {
    let node_root = root.join("devices/system/node");
    let entries = match fs::read_dir(&node_root) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            warnings.push("devices/system/node missing: NUMA nodes unknown".to_string());
            return Ok(Vec::new());
        }
        Err(e) => return Err(bad(&node_root, e.to_string())),
    };
    let mut nodes = Vec::new();
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("node"))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Some(list) = read_list_opt(&e.path().join("cpulist"))? else {
            warnings.push(format!("node{n}/cpulist missing: node skipped"));
            continue;
        };
        let list = list.intersection(present);
        for c in cpus.iter_mut().filter(|c| list.contains(c.id)) {
            c.numa_node = Some(n);
        }
        nodes.push(NumaNode {
            id: n,
            cpus: list,
            memory_bytes: read_node_memory(&e.path().join("meminfo"))?,
        });
    }
    Ok(nodes)
}

/// `MemTotal` from a node's `meminfo` (`Node 0 MemTotal:   24683656 kB`).
fn read_node_memory(p: &Path) -> Result<Option<u64>, SysfsError> {
    let Some(text) = read_opt(p)? else {
        return Ok(None);
    };
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.nth(2) == Some("MemTotal:") {
            let kb: u64 = words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| bad(p, format!("bad MemTotal line {line:?}")))?;
            return Ok(kb.checked_mul(1024));
        }
    }
    Ok(None)
}

/// The topology of this machine.
pub fn host_topology() -> Result<Topology, SysfsError> {
    read_topology(Path::new("/sys"))
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
    fn sizes() {
        assert_eq!(parse_size_bytes("48K"), Some(48 << 10));
        assert_eq!(parse_size_bytes("491520K"), Some(491520 << 10));
        assert_eq!(parse_size_bytes("32M"), Some(32 << 20));
        assert_eq!(parse_size_bytes("4096"), Some(4096));
        assert_eq!(parse_size_bytes("K"), None);
        assert_eq!(parse_size_bytes("12Q"), None);
    }

    #[test]
    fn reads_a_fixture_with_an_offline_cpu() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path().join("devices/system/cpu");
        fs::create_dir_all(&r).expect("mkdir");
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
        let s = read_sysfs(dir.path()).expect("fixture");
        let t = &s.topology;
        assert_eq!(t.online_cpus().to_list(), "0-1");
        assert_eq!(t.all_cpus().to_list(), "0-2");
        assert_eq!(s.offline.to_list(), "2");
        let l2 = t.cache_domains(2);
        assert_eq!(l2.len(), 1, "offline CPU's cache skipped");
        assert_eq!(l2[0].size_bytes, Some(1024 * 1024));
        assert_eq!(t.smt_siblings(0).to_list(), "0-1");
    }

    /// A hand-made tree with an endless or blocking file behind a name is refused with the
    /// file named, not read into memory (a probe's `online -> /dev/zero` took 2 GB).
    #[test]
    fn endless_or_special_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path().join("devices/system/cpu");
        fs::create_dir_all(r.join("cpu0/topology")).expect("mkdir");
        std::os::unix::fs::symlink("/dev/zero", r.join("online")).expect("symlink");
        let e = read_sysfs(dir.path()).expect_err("a device").to_string();
        assert!(
            e.contains("online") && e.contains("not a regular file"),
            "{e}"
        );
        fs::remove_file(r.join("online")).expect("rm");
        fs::write(r.join("online"), "0".repeat(70_000)).expect("w");
        let e = read_sysfs(dir.path()).expect_err("too long").to_string();
        assert!(
            e.contains("online") && e.contains("longer than 64 KiB"),
            "{e}"
        );
    }

    #[test]
    fn malformed_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path().join("devices/system/cpu");
        fs::create_dir_all(r.join("cpu0/topology")).expect("mkdir");
        fs::write(r.join("present"), "0\n").expect("w");
        fs::write(r.join("online"), "0\n").expect("w");
        fs::write(r.join("cpu0/topology/core_id"), "zero\n").expect("w");
        let e = read_sysfs(dir.path()).expect_err("bad core_id").to_string();
        assert!(e.contains("cpu0/topology/core_id"), "{e}");
    }

    #[test]
    fn missing_root_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = read_sysfs(&dir.path().join("nope"))
            .expect_err("no root")
            .to_string();
        assert!(e.contains("not a sysfs CPU directory"), "{e}");
    }
}
