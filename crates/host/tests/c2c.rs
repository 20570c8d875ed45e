//! `bench c2c` without timing: the pair plan and its distance grouping on the fixture sysfs
//! trees of bigger machines, the summary arithmetic, and the JSON schema round trip.

use counterpoint_core::cpuset::CpuSet;
use counterpoint_host::c2c::{
    self, C2cReport, ClockInfo, Distance, PairResult, ProbeStats, SCHEMA_VERSION,
};
use counterpoint_host::sysfs::read_sysfs;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn topo(name: &str) -> counterpoint_core::topology::Topology {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sysfs")
        .join(name);
    match read_sysfs(&p) {
        Ok(t) => t.topology,
        Err(e) => panic!("{name}: {e}"),
    }
}

fn counts(t: &counterpoint_core::topology::Topology) -> BTreeMap<Distance, usize> {
    let mut m = BTreeMap::new();
    for (_, _, d) in c2c::plan(t, &t.all_cpus()) {
        *m.entry(d).or_insert(0) += 1;
    }
    m
}

#[test]
fn xeon_two_sockets_groups_siblings_llc_and_sockets() {
    let t = topo("xeon-2s-smt");
    // 30 online CPUs (30, 31 offline: no package, so never paired): 435 pairs.
    let c = counts(&t);
    assert_eq!(
        c.get(&Distance::SmtSibling),
        Some(&14),
        "16 cores, 2 lost a sibling"
    );
    // One L3 per socket: every other same-socket pair shares it (120-8 + 91-6).
    assert_eq!(c.get(&Distance::SameLlc), Some(&197));
    assert_eq!(c.get(&Distance::SamePackage), None);
    assert_eq!(c.get(&Distance::OtherPackage), Some(&(16 * 14)));
    assert_eq!(c2c::distance(&t, 0, 16), Some(Distance::SmtSibling));
    assert_eq!(c2c::distance(&t, 0, 7), Some(Distance::SameLlc));
    assert_eq!(c2c::distance(&t, 0, 8), Some(Distance::OtherPackage));
    assert_eq!(c2c::distance(&t, 3, 3), None);
    assert_eq!(c2c::distance(&t, 0, 30), None, "offline CPU");
}

#[test]
fn epyc_ccx_pairs_in_one_package_but_four_llcs() {
    let t = topo("amd-epyc-ccx");
    let c = counts(&t);
    assert_eq!(c.get(&Distance::SmtSibling), Some(&16));
    assert_eq!(c.get(&Distance::SameLlc), Some(&(4 * (28 - 4))));
    assert_eq!(c.get(&Distance::SamePackage), Some(&(496 - 16 - 96)));
    assert_eq!(c.get(&Distance::OtherPackage), None);
    assert_eq!(c2c::distance(&t, 0, 4), Some(Distance::SamePackage));
    assert_eq!(c2c::distance(&t, 0, 19), Some(Distance::SameLlc));
}

#[test]
fn vm_has_one_pair_sharing_its_llc() {
    let t = topo("vm-2cpu");
    assert_eq!(
        c2c::plan(&t, &t.all_cpus()),
        vec![(0, 1, Distance::SameLlc)]
    );
    let only_one = CpuSet::single(0);
    assert!(c2c::plan(&t, &only_one).is_empty());
}

fn probe(median: f64) -> ProbeStats {
    ProbeStats {
        rounds: 100,
        median_ns: median,
        p99_ns: median * 2.0,
        median_cycles: Some(median * 2.5),
        p99_cycles: Some(median * 5.0),
    }
}

fn pair(a: u32, b: u32, d: Distance, pp: f64, fx: f64) -> PairResult {
    PairResult {
        a,
        b,
        distance: d,
        pingpong: probe(pp),
        futex: probe(fx),
    }
}

#[test]
fn summary_is_median_of_pair_medians_nearest_first() {
    let pairs = vec![
        pair(0, 8, Distance::OtherPackage, 300.0, 9000.0),
        pair(0, 1, Distance::SameLlc, 100.0, 5000.0),
        pair(0, 2, Distance::SameLlc, 140.0, 6000.0),
        pair(1, 2, Distance::SameLlc, 120.0, 7000.0),
    ];
    let g = c2c::summarize(&pairs);
    assert_eq!(g.len(), 2);
    assert_eq!(g[0].distance, Distance::SameLlc);
    assert_eq!(g[0].pairs, 3);
    assert_eq!(g[0].pingpong_median_ns, 120.0);
    assert_eq!(g[0].futex_median_ns, 6000.0);
    assert_eq!(g[0].futex_median_cycles, Some(15000.0));
    assert_eq!(g[1].distance, Distance::OtherPackage);
    assert_eq!(g[1].pingpong_p99_ns, 600.0);
}

#[test]
fn median_and_p99_by_nearest_rank() {
    let mut v: Vec<f64> = (1..=200).rev().map(f64::from).collect();
    assert_eq!(c2c::median_p99(&mut v), Some((101.0, 198.0)));
    assert_eq!(c2c::median_p99(&mut []), None);
    let mut one = [7.0];
    assert_eq!(c2c::median_p99(&mut one), Some((7.0, 7.0)));
}

#[test]
fn tsc_invariance_needs_both_flags() {
    assert!(c2c::tsc_invariant_from_cpuinfo(
        "processor\t: 0\nflags\t\t: fpu tsc constant_tsc rdtscp nonstop_tsc\n"
    ));
    assert!(!c2c::tsc_invariant_from_cpuinfo(
        "flags\t: fpu tsc constant_tsc\n"
    ));
    assert!(!c2c::tsc_invariant_from_cpuinfo(""));
}

#[test]
fn json_schema_round_trip() {
    let t = topo("xeon-2s-smt");
    let pairs = vec![
        pair(0, 16, Distance::SmtSibling, 40.0, 3000.0),
        pair(0, 8, Distance::OtherPackage, 300.0, 9000.0),
    ];
    let r = C2cReport {
        schema: SCHEMA_VERSION,
        topology: c2c::places(&t, &CpuSet::parse_list("0,8,16").expect("list")),
        clock: ClockInfo {
            tsc: true,
            tsc_invariant: true,
            tsc_hz: Some(2.5e9),
            ns_source: "tsc".into(),
        },
        groups: c2c::summarize(&pairs),
        pairs,
    };
    let s = serde_json::to_string_pretty(&r).expect("serialize");
    let back: C2cReport = serde_json::from_str(&s).expect("parse");
    assert_eq!(back, r);
    // The names other readers (the simulator's machine file) key on.
    let v: serde_json::Value = serde_json::from_str(&s).expect("value");
    assert_eq!(v["groups"][0]["distance"], "smt_sibling");
    assert_eq!(v["groups"][1]["distance"], "other_package");
    assert_eq!(v["groups"][1]["futex_median_cycles"], 22500.0);
    assert_eq!(v["topology"][1]["package"], 1);
}
