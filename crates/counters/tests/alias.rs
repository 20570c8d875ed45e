//! Abstract events resolved through the alias table on fixture PMU trees of machines we do not
//! have (Intel Skylake, Alder Lake hybrid, AMD Zen 4), and plainly unavailable elsewhere.

use counterpoint_counters::alias::{self, Micro};
use counterpoint_counters::{parse_event_list, PmuTree};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pmu")
        .join(name)
}

/// `(type, config, canonical, unavailable)` of the only event in `list`.
fn one(list: &str, tree: &PmuTree) -> (u32, u64, String, Option<String>) {
    let l = parse_event_list(list, tree).unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(v.len(), 1, "{list}");
    (
        v[0].type_,
        v[0].config,
        v[0].canonical.clone(),
        v[0].unavailable.clone(),
    )
}

#[test]
fn skylake_uses_longest_lat_cache_and_fp_arith() {
    let t = PmuTree::new(fixture("intel"));
    assert_eq!(
        alias::identify(&t).unwrap().micro,
        Some(Micro::IntelSkylake)
    );
    // The intel fixture's cpu PMU is type 4; event in bits 0-7, umask in 8-15.
    let (ty, config, canon, un) = one("mem-transactions", &t);
    assert_eq!(
        (ty, config, canon.as_str(), un),
        (4, 0x412e, "mem-transactions", None)
    );
    assert_eq!(one("llc-misses", &t).1, 0x412e);
    assert_eq!(one("fp-ops", &t).1, 0xffc7);
    // Modifiers apply and the printed name is the one asked for.
    let l = parse_event_list("fp-ops:u", &t).unwrap();
    let e = l.events().next().unwrap();
    assert_eq!(e.name, "fp-ops:u");
    assert!(e.exclude_kernel && !e.exclude_user);
}

#[test]
fn hybrid_puts_the_event_on_the_core_pmu_only() {
    let t = PmuTree::new(fixture("hybrid"));
    let id = alias::identify(&t).unwrap();
    assert_eq!(
        (id.pmu.as_str(), id.micro),
        ("cpu_core", Some(Micro::IntelSkylake))
    );
    let l = parse_event_list("fp-ops", &t).unwrap();
    let e = l.events().next().unwrap();
    assert_eq!(e.config & 0xffff, 0xffc7);
    // Restricted to the P-cores the cpu_core PMU lists.
    assert!(e.cpus.is_some());
}

#[test]
fn zen4_from_cpuinfo_uses_dram_fills_and_retired_flops() {
    let t = PmuTree::new(fixture("amd"));
    assert_eq!(alias::identify(&t).unwrap().micro, Some(Micro::AmdZen4));
    assert_eq!(one("mem-transactions", &t).1, 0x4843);
    assert_eq!(one("llc-misses", &t).1, 0x5c43);
    assert_eq!(one("fp-ops", &t).1, 0x1f03);
}

#[test]
fn haswell_has_no_fp_counter_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("intel"), dir.path());
    std::fs::write(
        dir.path()
            .join("bus/event_source/devices/cpu/caps/pmu_name"),
        "haswell\n",
    )
    .unwrap();
    let t = PmuTree::new(dir.path());
    assert_eq!(one("mem-transactions", &t).1, 0x412e);
    let (_, _, canon, un) = one("fp-ops", &t);
    assert_eq!(canon, "fp-ops");
    let why = un.expect("unavailable");
    assert!(
        why.contains("IntelHaswell") && why.contains("haswell"),
        "{why}"
    );
}

#[test]
fn unknown_cpu_and_no_pmu_are_unavailable_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("intel"), dir.path());
    std::fs::write(
        dir.path()
            .join("bus/event_source/devices/cpu/caps/pmu_name"),
        "core2\n",
    )
    .unwrap();
    let why = one("mem-transactions", &PmuTree::new(dir.path()))
        .3
        .unwrap();
    assert!(
        why.contains("pmu_name core2") && why.contains("alias table"),
        "{why}"
    );
    // The VM fixture: software PMUs only.
    let why = one("fp-ops", &PmuTree::new(fixture("vm"))).3.unwrap();
    assert_eq!(why, "no hardware PMU on this machine");
}

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}
