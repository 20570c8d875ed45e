//! Replicated execution (seed 001) on the simulated machine: placements, the cache side from
//! the engine, the meeting costs, the `bench c2c` machine file, and determinism.

use counterpoint_sim::replica::{
    self, Distance, NotifyCosts, PlacementKind, ReplicaProgram, ReplicaRun, RunLengths,
};
use counterpoint_sim::Catalog;

fn run<'a>(catalog: &'a Catalog, costs: &'a NotifyCosts) -> ReplicaRun<'a> {
    ReplicaRun {
        catalog,
        machine: "x5650-2s",
        costs,
        replicas: 3,
        lengths: RunLengths {
            warm_ms: 500,
            measure_ms: 500,
        },
        instructions: 1e11,
    }
}

#[test]
fn x5650_placements() {
    let catalog = Catalog::builtin();
    let costs = NotifyCosts::seed_x5650();
    let (_, t) = run(&catalog, &costs).machine().expect("machine");
    assert_eq!(t.cpus().len(), 24);
    let same = replica::place(&t, 3, PlacementKind::SameSocket).expect("same");
    let spread = replica::place(&t, 3, PlacementKind::Spread).expect("spread");
    let pkg = |c: u32| t.cpu(c).and_then(|x| x.package);
    assert!(same.iter().all(|&c| pkg(c) == Some(0)));
    assert_eq!(
        spread.iter().map(|&c| pkg(c)).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(0)]
    );
    // Distinct cores, never SMT siblings.
    for v in [&same, &spread] {
        for (i, &a) in v.iter().enumerate() {
            for &b in &v[i + 1..] {
                assert_ne!(replica::distance(&t, a, b), Distance::SmtSibling);
            }
        }
    }
    assert_eq!(replica::distance(&t, same[0], same[1]), Distance::SameLlc);
    assert_eq!(
        replica::distance(&t, spread[0], spread[1]),
        Distance::OtherPackage
    );
    assert!(replica::place(&t, 13, PlacementKind::SameSocket).is_err());
}

#[test]
fn cache_heavy_program_spreads_sync_heavy_one_stays() {
    let catalog = Catalog::builtin();
    let costs = NotifyCosts::seed_x5650();
    let r = run(&catalog, &costs);
    // libquantum: fits half an L3, not a third (seed 001's miss table).
    let lq = ReplicaProgram {
        program: "462.libquantum".into(),
        sync_every_instructions: 2e8,
    };
    let same = r.outcome(&lq, PlacementKind::SameSocket, 1).expect("same");
    let spread = r.outcome(&lq, PlacementKind::Spread, 1).expect("spread");
    assert!(
        same.replica_llc_mpki > 10.0 * spread.replica_llc_mpki,
        "{same:?} {spread:?}"
    );
    assert!(same.overhead > spread.overhead);
    // A small working set meeting every 20,000 instructions: notification dominates.
    let chatty = ReplicaProgram {
        program: "456.hmmer".into(),
        sync_every_instructions: 2e4,
    };
    let same = r
        .outcome(&chatty, PlacementKind::SameSocket, 1)
        .expect("same");
    let spread = r
        .outcome(&chatty, PlacementKind::Spread, 1)
        .expect("spread");
    assert_eq!(same.sync_cycles, 6_100.0);
    assert_eq!(spread.sync_cycles, 14_400.0);
    assert!(same.overhead < spread.overhead, "{same:?} {spread:?}");
}

#[test]
fn same_seed_same_outcome_other_seed_other_sync_count() {
    let catalog = Catalog::builtin();
    let costs = NotifyCosts::seed_x5650();
    let r = run(&catalog, &costs);
    let p = ReplicaProgram {
        program: "403.gcc".into(),
        sync_every_instructions: 3e6,
    };
    let a = r.outcome(&p, PlacementKind::Spread, 7).expect("a");
    let b = r.outcome(&p, PlacementKind::Spread, 7).expect("b");
    assert_eq!(
        serde_json::to_string(&a).expect("json"),
        serde_json::to_string(&b).expect("json")
    );
    let c = r.outcome(&p, PlacementKind::Spread, 8).expect("c");
    assert_ne!(a.syncs, c.syncs);
    // Poisson mean 1e11 / 3e6 = 33,333: within 1 % of it.
    assert!((a.syncs as f64 - 33_333.3).abs() < 333.0, "{}", a.syncs);
}

#[test]
fn poisson_small_means_are_exact_draws() {
    let draws: Vec<u64> = (0..2000).map(|s| replica::poisson(3.0, s)).collect();
    let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
    assert!((mean - 3.0).abs() < 0.2, "{mean}");
    assert_eq!(replica::poisson(0.0, 1), 0);
}

#[test]
fn c2c_file_of_the_vm_as_notification_costs() {
    let text = include_str!("data/c2c-vm-2cpu.json");
    let c = NotifyCosts::from_c2c_json(text, "c2c-vm-2cpu.json", 2.0).expect("loads");
    // The VM has one pair, sharing its LLC: every other distance is assumed from it.
    assert_eq!(
        c.assumed,
        vec![
            Distance::SmtSibling,
            Distance::SamePackage,
            Distance::OtherPackage
        ]
    );
    assert!(c.same_llc_cycles > 0.0);
    assert_eq!(c.other_package_cycles, c.same_llc_cycles);
    assert_eq!(c.smt_sibling_cycles, c.same_llc_cycles);
    let bad = NotifyCosts::from_c2c_json("{\"schema\":1}", "x.json", 2.0).unwrap_err();
    assert!(bad.to_string().contains("x.json"), "{bad}");
    let none = NotifyCosts::from_c2c_json("{\"schema\":1,\"groups\":[]}", "y.json", 2.0);
    assert!(none.is_err());
    // A round trip of 1e300 ns is refused, naming the file and the field.
    let huge = text.replacen(
        "\"futex_median_ns\":",
        "\"futex_median_ns\":1e300,\"was\":",
        1,
    );
    assert_ne!(huge, text, "the test file has a futex_median_ns");
    let e = NotifyCosts::from_c2c_json(&huge, "z.json", 2.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("z.json") && e.contains("futex_median_ns"), "{e}");
    // Too short a round trip, and a distance given twice, are refused with the file's own
    // names (CLI probe, session 27: 1e-300 gave 0-cycle notifications, a second group
    // replaced the first, and messages said `SameLlc`).
    let group = |ns: &str| format!("{{\"distance\":\"other_package\",\"futex_median_ns\":{ns}}}");
    let doc = |groups: &[String]| format!("{{\"schema\":1,\"groups\":[{}]}}", groups.join(","));
    let e = NotifyCosts::from_c2c_json(&doc(&[group("1e-300")]), "t.json", 2.0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "groups[0] (other_package).futex_median_ns = 1e-300 ns is not a futex round trip"
        ),
        "{e}"
    );
    let e = NotifyCosts::from_c2c_json(&doc(&[group("5000"), group("1")]), "t.json", 2.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("groups[1] (other_package)"), "{e}");
    let e = NotifyCosts::from_c2c_json(&doc(&[group("5000"), group("6000")]), "t.json", 2.0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("groups[1] (other_package): distance other_package is given twice"),
        "{e}"
    );
    assert!(!e.contains("OtherPackage"), "{e}");
}

#[test]
fn seed_costs_only_for_the_seed_machine() {
    assert_eq!(
        NotifyCosts::for_machine("x5650-2s"),
        Some(NotifyCosts::seed_x5650())
    );
    assert_eq!(NotifyCosts::for_machine("bench-64"), None);
}
