//! The calibrated baseline still reproduces the seeds (docs/calibration.md), on the shipped
//! scenario files with shortened durations so the test stays quick in debug builds.

use counterpoint_sim::{run, Catalog, RunResult, Scenario};
use std::path::Path;

fn run_file(name: &str, duration_ms: u64) -> RunResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let mut sc = Scenario::from_file(&path, &Catalog::builtin()).unwrap();
    sc.duration_ms = duration_ms;
    run(&sc, sc.seed, None, None, sc.epoch_ms * 1_000_000).unwrap()
}

#[test]
fn zhang_spec_baseline_matches_published() {
    let r = run_file("zhang-spec.toml", 6000);
    let m = r.metrics.unwrap();
    assert!(
        (m.normalized_performance - 0.818).abs() <= 0.03,
        "NP {}",
        m.normalized_performance
    );
    assert!(
        (m.unfairness - 0.178).abs() <= 0.03,
        "unfairness {}",
        m.unfairness
    );
}

fn total_s(name: &str) -> f64 {
    let r = run_file(name, 1000);
    r.tasks
        .iter()
        .map(|t| t.wall_ns_per_program.unwrap() * 1e-9)
        .sum()
}

#[test]
fn masa_tables_order_and_ratios() {
    for (table, mix_gain, ht_gain) in [("table1", 0.120, 0.175), ("table2", 0.062, 0.128)] {
        let mixed = total_s(&format!("masa-{table}-mixed.toml"));
        let alike = total_s(&format!("masa-{table}-alike.toml"));
        let off = total_s(&format!("masa-{table}-htoff-alike.toml"));
        let off_mixed = total_s(&format!("masa-{table}-htoff-mixed.toml"));
        assert!(
            mixed < alike && alike < off && alike < off_mixed,
            "{table}: {mixed} {alike} {off} {off_mixed}"
        );
        let g_mix = 1.0 - mixed / alike;
        let g_ht = 1.0 - mixed / off;
        assert!(
            (g_mix - mix_gain).abs() < 0.015,
            "{table}: mixed vs alike {g_mix}"
        );
        assert!(
            (g_ht - ht_gain).abs() < 0.015,
            "{table}: HT on vs off {g_ht}"
        );
    }
}
