//! Property: any symmetric machine written out as a sysfs tree (the kernel's file layout) reads
//! back as the same topology: same CPUs, cores, packages, cache domains and NUMA nodes.

use counterpoint_core::topology::{CacheKind, SymmetricSpec, Topology};
use counterpoint_host::sysfs::read_sysfs;
use proptest::prelude::*;
use std::fs;
use std::path::Path;

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, format!("{text}\n")).expect("write");
}

fn write_tree(root: &Path, t: &Topology) {
    let cpu = root.join("devices/system/cpu");
    let all = t.all_cpus().to_list();
    write(&cpu.join("possible"), &all);
    write(&cpu.join("present"), &all);
    write(&cpu.join("online"), &t.online_cpus().to_list());
    for c in t.cpus() {
        let d = cpu.join(format!("cpu{}", c.id));
        let top = d.join("topology");
        write(
            &top.join("physical_package_id"),
            &c.package.unwrap_or(0).to_string(),
        );
        write(&top.join("die_id"), &c.die.unwrap_or(0).to_string());
        write(&top.join("core_id"), &c.core.unwrap_or(0).to_string());
        write(&top.join("core_cpus_list"), &t.smt_siblings(c.id).to_list());
        let mine = t.caches().iter().filter(|k| k.cpus.contains(c.id));
        for (i, k) in mine.enumerate() {
            let x = d.join(format!("cache/index{i}"));
            write(&x.join("level"), &k.level.to_string());
            let ty = match k.kind {
                CacheKind::Data => "Data",
                CacheKind::Instruction => "Instruction",
                CacheKind::Unified => "Unified",
            };
            write(&x.join("type"), ty);
            write(
                &x.join("size"),
                &format!("{}K", k.size_bytes.unwrap_or(0) / 1024),
            );
            write(&x.join("shared_cpu_list"), &k.cpus.to_list());
            write(
                &x.join("coherency_line_size"),
                &k.line_bytes.unwrap_or(64).to_string(),
            );
        }
    }
    for n in t.numa_nodes() {
        write(
            &root.join(format!("devices/system/node/node{}/cpulist", n.id)),
            &n.cpus.to_list(),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn symmetric_machines_round_trip(
        packages in 1u32..=3,
        llc_per_package in 1u32..=3,
        cores_per_llc in 1u32..=4,
        threads in 1u32..=2,
    ) {
        let spec = SymmetricSpec {
            packages,
            cores_per_package: llc_per_package * cores_per_llc,
            threads_per_core: threads,
            llc_domains_per_package: llc_per_package,
            ..Default::default()
        };
        let t = Topology::symmetric(&spec).expect("symmetric");
        let dir = tempfile::tempdir().expect("tempdir");
        write_tree(dir.path(), &t);
        let s = read_sysfs(dir.path()).expect("read back");
        let r = &s.topology;
        prop_assert_eq!(r.all_cpus(), t.all_cpus());
        prop_assert_eq!(r.packages(), t.packages());
        prop_assert_eq!(r.cores(), t.cores());
        prop_assert_eq!(r.llc_domains(), t.llc_domains());
        prop_assert_eq!(r.numa_nodes(), t.numa_nodes());
        let shape = |t: &Topology| -> Vec<_> {
            t.caches().iter().map(|c| (c.level, c.kind, c.size_bytes, c.cpus.clone())).collect()
        };
        prop_assert_eq!(shape(r), shape(&t));
        prop_assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }
}
