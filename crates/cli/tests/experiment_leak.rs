//! `counterpoint experiment leak` end to end: JSON shape and values, the report directory.

use std::process::Command;

#[test]
fn leak_json_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args(["experiment", "leak", "--seeds", "1", "--json", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &j["leak"]["policies"];
    let fine = p["per-core@250ns"]["bits_recovered"]["mean"]
        .as_f64()
        .unwrap();
    assert!(fine > 0.9, "per-core at 250 ns: {fine}");
    assert_eq!(p["per-task@250ns"]["bits_recovered"]["basis"], "predicted");
    assert_eq!(p["per-task@250ns"]["bits_recovered"]["n"], 64);
    let flat = p["per-core-no-difference@250ns"]["bits_recovered"]["mean"]
        .as_f64()
        .unwrap();
    assert!((flat - 0.5).abs() < 0.05, "counter-experiment: {flat}");
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("(`leak`)") && md.contains("leak-recovery.svg"));
    assert!(dir.path().join("leak-recovery.svg").exists());
}
