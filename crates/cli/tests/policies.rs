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
