//! The registry seen from the command line: `agent` refuses what only the simulator can run,
//! and says what `masa` needs, before anything on the host changes.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

fn fails(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("run counterpoint");
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn agent_refuses_simulator_only_policies_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    let j = journal.to_str().expect("utf8");
    let common = ["--dry-run", "--targets", "pid:1", "--journal", j];
    let run = |policy: &str, extra: &[&str]| {
        let mut a = vec!["agent", "--policy", policy];
        a.extend_from_slice(extra);
        a.extend_from_slice(&common);
        fails(&a)
    };
    // A kernel-level hook: the epoch-level names are offered instead.
    let e = run("bus-pair", &[]);
    assert!(
        e.contains("pick-next") && e.contains("bus-pair-affinity"),
        "{e}"
    );
    // The oracle's cost is simulated runs: a host has none.
    let e = run("oracle", &[]);
    assert!(e.contains("placement cost"), "{e}");
    // MASA without a table measured here (or an explicit request for the paper's).
    let e = run("masa", &[]);
    assert!(
        e.contains("--masa-calibration") && e.contains("calibration"),
        "{e}"
    );
    let bad = dir.path().join("cal.json");
    std::fs::write(&bad, "{\"entries\": 3}").expect("write");
    let e = run("masa", &["--masa-calibration", bad.to_str().expect("utf8")]);
    assert!(e.contains("not a calibration table"), "{e}");
    assert!(!journal.exists(), "nothing was started");
}

/// `calibrate --masa FILE` writes a table the agent accepts where the PMU counts cache misses
/// and FP operations; elsewhere it refuses, naming ΔL, and writes nothing.
#[test]
fn calibrate_masa_writes_a_usable_table_or_says_why_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("masa.json");
    let out = bin()
        .args(["calibrate", "--seconds", "0.2", "--masa"])
        .arg(&path)
        .output()
        .expect("run counterpoint");
    if out.status.success() {
        let text = std::fs::read_to_string(&path).expect("table written");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["entries"].as_array().map(Vec::len), Some(2), "{text}");
    } else {
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ΔL"), "{err}");
        assert!(!path.exists());
    }
}

/// A table in `Calibration`'s JSON form gets `masa` past its constructor: what stops it on a
/// PMU-less host is the events, not the calibration.
#[test]
fn agent_accepts_a_measured_masa_table() {
    use counterpoint_policy::{Calibration, CalibrationEntry, LoadMetric};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("masa.json");
    let table = Calibration {
        entries: vec![
            CalibrationEntry::from_rates(LoadMetric::L2Misses, "l2", 100.0, 80.0, 1e6, 1.5e6),
            CalibrationEntry::from_rates(LoadMetric::FpUops, "fp", 100.0, 95.0, 1e8, 1.9e8),
        ],
    };
    std::fs::write(&path, serde_json::to_string(&table).expect("json")).expect("write");
    let journal = dir.path().join("j");
    let out = bin()
        .args(["agent", "--policy", "masa", "--masa-calibration"])
        .arg(&path)
        .args(["--dry-run", "--max-intervals", "1", "--interval", "100ms"])
        .args(["--targets", "pid:1", "--journal"])
        .arg(&journal)
        .output()
        .expect("run counterpoint");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("calibration"), "{err}");
    if !out.status.success() {
        assert!(err.contains("cannot count"), "{err}");
    }
}
