//! `counterpoint bench selfmon --json` runs here and says which read path it used.

mod common;

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

/// Self-monitoring counts where an unprivileged user may count only user mode
/// (`perf_event_paranoid` 2, the default of many distributions): its events are retried
/// user-only (`task-clock:u`), as `perf stat` does. Until session 30 it failed there
/// ("permission denied opening 'task-clock'"). Run as root, the check drops to `nobody` in the
/// child; run unprivileged, the test above already is that check.
#[test]
fn self_monitoring_counts_user_only_where_kernel_counting_is_refused() {
    let Some((out, paranoid)) = common::run_as_nobody(&[
        "bench",
        "selfmon",
        "--json",
        "--rounds",
        "1",
        "--iterations",
        "200",
    ]) else {
        return;
    };
    assert!(
        out.status.success(),
        "as nobody under perf_event_paranoid {paranoid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        v["region_begin_end_ns"]
            .as_f64()
            .is_some_and(f64::is_finite),
        "{v}"
    );
}
