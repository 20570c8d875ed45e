//! The leak experiment on the real model: determinism and the physical sanity checks.

use counterpoint_experiment::leak::{self, Setup, INTERVALS_NS, KEY_BITS};
use counterpoint_experiment::NoProgress;

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn same_seed_same_bytes() {
    let a = leak::run(&[7], &NoProgress).unwrap();
    let b = leak::run(&[7], &NoProgress).unwrap();
    let ja = serde_json::to_string(&a).unwrap();
    let jb = serde_json::to_string(&b).unwrap();
    assert_eq!(ja, jb);
    // A different seed draws different keys (and so different results).
    let c = leak::run(&[8], &NoProgress).unwrap();
    assert_ne!(ja, serde_json::to_string(&c).unwrap());
    assert_ne!(leak::key_bits(7, 0), leak::key_bits(8, 0));
    assert_eq!(leak::key_bits(7, 3).len(), KEY_BITS);
}

#[test]
fn per_core_counts_at_a_fine_interval_give_the_key_away() {
    let setup = Setup::from_catalog().unwrap();
    let r = leak::sweep(&setup, &[1], 8);
    assert_eq!(INTERVALS_NS[0], 250.0);
    let per_core = mean(&r[0][0]);
    let per_task = mean(&r[1][0]);
    assert!(per_core > 0.9, "per-core at 250 ns: {per_core}");
    // The attacker's own counts leak too, through SMT contention (the finding).
    assert!(per_task > 0.75, "per-task at 250 ns: {per_task}");
    // Far coarser than an operation (128 µs vs ~2 µs), nothing is left.
    let last = INTERVALS_NS.len() - 1;
    for (e, per_interval) in r.iter().enumerate() {
        let coarse = mean(&per_interval[last]);
        assert!(
            (coarse - 0.5).abs() < 0.06,
            "exposure {e} at 128 µs: {coarse}"
        );
    }
}

#[test]
fn no_difference_between_square_and_multiply_gives_chance() {
    let setup = Setup::from_catalog().unwrap().without_difference();
    let r = leak::sweep(&setup, &[1, 2], 8);
    for (e, per_interval) in r.iter().enumerate() {
        for (i, v) in per_interval.iter().enumerate() {
            let m = mean(v);
            assert!(
                (m - 0.5).abs() < 0.06,
                "exposure {e}, interval {}: {m}",
                INTERVALS_NS[i]
            );
        }
    }
}

#[test]
fn the_report_has_its_tables_figure_and_predicted_rows() {
    let r = leak::run(&[1], &NoProgress).unwrap();
    assert_eq!(r.experiment, "leak");
    assert_eq!(r.tables.len(), 2);
    assert_eq!(r.tables[1].rows.len(), INTERVALS_NS.len());
    assert!(r
        .policies
        .values()
        .flat_map(|m| m.values())
        .all(|e| e.basis == counterpoint_experiment::paper::Basis::Predicted));
    assert!(r.policies.contains_key("per-task@250ns"));
    assert_eq!(r.figures.len(), 1);
    assert_eq!(r.figures[0].categories.len(), INTERVALS_NS.len());
}
