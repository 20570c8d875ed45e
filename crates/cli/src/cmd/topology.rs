//! `counterpoint topology`: the machine as Counterpoint sees it, read from sysfs: packages, cores
//! and their hardware threads, cache instances per level with size and sharing, NUMA nodes,
//! online/offline CPUs and hybrid core kinds. `--sysfs` reads a saved or synthetic tree instead
//! of `/sys` (the fixtures under `crates/host/tests/data/sysfs/`).

use anyhow::{Context, Result};
use clap::Args;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::topology::{CacheDomain, CacheKind, CpuKind, Topology};
use counterpoint_host::sysfs::{read_sysfs, SysfsTopology};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct TopologyArgs {
    /// Print the whole topology as JSON (cpus, caches, numa_nodes, CPU state sets, warnings).
    #[arg(long)]
    json: bool,
    /// Root standing for /sys (reads ROOT/devices/system/cpu, ROOT/devices/system/node, ...).
    #[arg(long, value_name = "ROOT", default_value = "/sys")]
    sysfs: PathBuf,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    sysfs_root: String,
    #[serde(flatten)]
    sysfs: &'a SysfsTopology,
}

pub fn run(args: TopologyArgs) -> Result<ExitCode> {
    let s = read_sysfs(&args.sysfs)
        .with_context(|| format!("reading the topology under {}", args.sysfs.display()))?;
    if args.json {
        let out = JsonOut {
            sysfs_root: args.sysfs.display().to_string(),
            sysfs: &s,
        };
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        out!("{}", render(&args.sysfs.display().to_string(), &s))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Bytes in binary units, trimmed: 49152 -> "48 KiB", 1310720 -> "1.25 MiB".
fn human_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ];
    for (name, size) in UNITS {
        if b >= size {
            let v = b as f64 / size as f64;
            let text = format!("{v:.2}");
            let text = text.trim_end_matches('0').trim_end_matches('.');
            return format!("{text} {name}");
        }
    }
    "0 B".to_string()
}

fn kind_name(k: CpuKind) -> &'static str {
    match k {
        CpuKind::Uniform => "uniform",
        CpuKind::Performance => "performance",
        CpuKind::Efficiency => "efficiency",
    }
}

fn cache_name(c: &CacheDomain) -> String {
    match c.kind {
        CacheKind::Data => format!("L{}d", c.level),
        CacheKind::Instruction => format!("L{}i", c.level),
        CacheKind::Unified => format!("L{}", c.level),
    }
}

/// How widely a cache instance is shared, in the machine's own terms.
fn sharing(t: &Topology, cores: &[CpuSet], d: &CacheDomain) -> String {
    let Some(first) = d.cpus.first() else {
        return "no online CPU".into();
    };
    if d.cpus.len() == 1 && !t.has_smt() {
        return "per core".into();
    }
    if d.cpus == t.smt_siblings(first) {
        return "per core".into();
    }
    if d.cpus.len() == 1 {
        return "per thread".into();
    }
    if d.cpus == t.online_cpus() {
        return "all CPUs".into();
    }
    if let Some(p) = t.cpu(first).and_then(|c| c.package) {
        if d.cpus == t.package_cpus(p) {
            return "per package".into();
        }
    }
    let n = cores.iter().filter(|c| c.is_subset(&d.cpus)).count();
    format!("per {n} cores")
}

/// The readable summary.
pub fn render(root: &str, s: &SysfsTopology) -> String {
    use std::fmt::Write;
    let t = &s.topology;
    let mut o = String::new();
    let cores = t.cores();
    let _ = writeln!(o, "sysfs root: {root}");
    let _ = writeln!(
        o,
        "CPUs: {} present ({}), {} online ({}), offline: {}, possible: {}",
        s.present.len(),
        s.present.to_list(),
        s.online.len(),
        s.online.to_list(),
        if s.offline.is_empty() {
            "none".to_string()
        } else {
            s.offline.to_list()
        },
        s.possible.to_list()
    );
    let _ = writeln!(
        o,
        "shape: {} package(s), {} core(s), {} online thread(s), SMT {}",
        t.packages().len(),
        cores.len(),
        s.online.len(),
        if t.has_smt() { "yes" } else { "no" }
    );
    let mut kinds: BTreeMap<CpuKind, CpuSet> = BTreeMap::new();
    for c in t.cpus() {
        kinds.entry(c.kind).or_default().insert(c.id);
    }
    let kinds_text: Vec<String> = kinds
        .iter()
        .map(|(k, set)| format!("{} {} ({})", set.len(), kind_name(*k), set.to_list()))
        .collect();
    let _ = writeln!(o, "kinds: {}", kinds_text.join(", "));

    let _ = writeln!(o, "\npackages:");
    // Keyed so that CPUs of unknown package come last.
    let mut by_package: BTreeMap<(bool, Option<u32>), Vec<&CpuSet>> = BTreeMap::new();
    for core in &cores {
        let pkg = core.first().and_then(|c| t.cpu(c)).and_then(|c| c.package);
        by_package
            .entry((pkg.is_none(), pkg))
            .or_default()
            .push(core);
    }
    for ((_, pkg), pcores) in &by_package {
        let threads: usize = pcores.iter().map(|c| c.len()).sum();
        let nodes: CpuSet = pcores
            .iter()
            .flat_map(|c| c.iter())
            .filter_map(|id| t.cpu(id).and_then(|c| c.numa_node))
            .collect();
        let label = match pkg {
            Some(p) => format!("package {p}"),
            None => "package unknown".to_string(),
        };
        let node_text = if nodes.is_empty() {
            String::new()
        } else {
            format!(", NUMA node {}", nodes.to_list())
        };
        let _ = writeln!(
            o,
            "  {label}: {} core(s), {threads} thread(s){node_text}",
            pcores.len()
        );
        for core in pcores {
            let first = core.first().and_then(|c| t.cpu(c));
            let id = first
                .and_then(|c| c.core)
                .map_or("?".to_string(), |c| c.to_string());
            let kind = first
                .map(|c| c.kind)
                .filter(|k| *k != CpuKind::Uniform)
                .map_or(String::new(), |k| format!("  [{}]", kind_name(k)));
            let _ = writeln!(o, "    core {id:>3}: cpus {}{kind}", core.to_list());
        }
    }

    let _ = writeln!(o, "\ncaches:");
    if t.caches().is_empty() {
        let _ = writeln!(o, "  none described (LLC domains default to packages)");
    }
    // Group instances of the same level, kind, size and sharing into one line.
    type Key = (u8, CacheKind, Option<u64>, String);
    let mut groups: BTreeMap<Key, Vec<&CacheDomain>> = BTreeMap::new();
    for d in t.caches() {
        let key = (d.level, d.kind, d.size_bytes, sharing(t, &cores, d));
        groups.entry(key).or_default().push(d);
    }
    for ((_, _, size, share), ds) in &groups {
        let size = size.map_or("size ?".to_string(), human_bytes);
        let sets: Vec<String> = ds.iter().map(|d| d.cpus.to_list()).collect();
        let _ = writeln!(
            o,
            "  {:<4} {:>10}  {:>2} x {:<13} {}",
            cache_name(ds[0]),
            size,
            ds.len(),
            share,
            sets.join(" | ")
        );
    }
    if let Some(l) = t.llc_level() {
        let _ = writeln!(o, "  LLC: L{l}, {} domain(s)", t.llc_domains().len());
    }

    let _ = writeln!(o, "\nNUMA nodes:");
    if t.numa_nodes().is_empty() {
        let _ = writeln!(o, "  none described");
    }
    for n in t.numa_nodes() {
        let mem = n
            .memory_bytes
            .map_or(String::new(), |b| format!(", {}", human_bytes(b)));
        let _ = writeln!(o, "  node {}: cpus {}{mem}", n.id, n.cpus.to_list());
    }
    if !s.warnings.is_empty() {
        let _ = writeln!(o, "\nmissing or inconsistent (defaults used):");
        for w in &s.warnings {
            let _ = writeln!(o, "  {w}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(human_bytes(48 << 10), "48 KiB");
        assert_eq!(human_bytes(1280 << 10), "1.25 MiB");
        assert_eq!(human_bytes(491520 << 10), "480 MiB");
        assert_eq!(human_bytes(64 << 30), "64 GiB");
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(100), "100 B");
    }
}
