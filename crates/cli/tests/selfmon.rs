//! `counterpoint bench selfmon --json` runs here and says which read path it used.

use std::process::Command;

#[test]
fn bench_selfmon_reports_the_read_path_and_costs() {
    let out = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args([
            "bench",
            "selfmon",
            "--json",
            "--rounds",
            "1",
            "--iterations",
            "200",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for k in [
        "region_begin_end_ns",
        "read_ours_ns",
        "read_raw_syscall_ns",
        "synthetic_page_read_ns",
    ] {
        // Present and sane; how fast is the benchmark's output, never asserted.
        assert!(
            v[k].as_f64().is_some_and(|x| x.is_finite() && x >= 0.0),
            "{k}: {v}"
        );
    }
    assert!(v["read_path"].as_str().is_some_and(|s| !s.is_empty()));
}

#[test]
fn bench_selfmon_refuses_zero_rounds() {
    let out = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args(["bench", "selfmon", "--rounds", "0"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rounds"));
}
