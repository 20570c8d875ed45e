//! `counterpoint stat` end to end on this machine (software events; no hardware PMU).

use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

fn stat(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("stat")
        .args(args)
        .output()
        .expect("run counterpoint")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn has_hw_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom"].iter().any(|p| {
        std::path::Path::new("/sys/bus/event_source/devices")
            .join(p)
            .exists()
    })
}

/// Rows of `-x,` output: (value, unit, event, run time, percent, metric, metric unit).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn counts_task_clock_of_true() {
    let o = stat(&["-x,", "-e", "task-clock", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][2], "task-clock");
    assert_eq!(rows[0][1], "msec");
    let msec: f64 = rows[0][0].parse().unwrap();
    assert!(msec > 0.0 && msec < 1000.0, "{msec}");
    let run_ns: u64 = rows[0][3].parse().unwrap();
    assert!((run_ns as f64 / 1e6 - msec).abs() < 0.01 + msec * 0.01);
    assert_eq!(rows[0][4], "100.00");
    assert_eq!(rows[0][6], "CPUs utilized");
}

#[test]
fn cycles_not_supported_task_clock_counted_exit_zero() {
    let o = stat(&["-e", "cycles,task-clock", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let tc = err.lines().find(|l| l.contains("task-clock")).unwrap();
    let v: f64 = tc.split_whitespace().next().unwrap().parse().unwrap();
    assert!(v > 0.0, "{tc}");
    if !has_hw_pmu() {
        assert!(err.contains("<not supported>       cycles"), "{err}");
        // The reason once.
        assert_eq!(
            err.matches("no hardware PMU on this machine").count(),
            1,
            "{err}"
        );
    }
}

#[test]
fn exit_code_propagates() {
    let o = stat(&["-e", "task-clock", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3));
    let o = stat(&["-e", "task-clock", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15));
}

#[test]
fn csv_has_perf_column_count() {
    let o = stat(&[
        "-x,",
        "-e",
        "task-clock,context-switches,page-faults,cpu-migrations,cycles",
        "--",
        "ls",
        "/",
    ]);
    assert!(o.status.success());
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows.len(), 5);
    for r in &rows {
        assert_eq!(r.len(), 7, "{r:?}");
    }
    let names: Vec<&str> = rows.iter().map(|r| r[2].as_str()).collect();
    assert_eq!(
        names,
        [
            "task-clock",
            "context-switches",
            "page-faults",
            "cpu-migrations",
            "cycles"
        ]
    );
    let faults: u64 = rows[2][0].parse().unwrap();
    assert!(faults > 10, "{faults}");
    if !has_hw_pmu() {
        assert_eq!(rows[4][0], "<not supported>");
    }
}

#[test]
fn json_is_one_object() {
    let o = stat(&["--json", "-e", "task-clock,page-faults", "--", "true"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    let evs = v["events"].as_array().unwrap();
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0]["event"], "task-clock");
    assert!(evs[1]["raw"].as_u64().unwrap() > 0);
    assert_eq!(evs[1]["counted_percent"], 100.0);
}

#[test]
fn default_set_and_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.csv");
    let o = stat(&["-x;", "-o", out.to_str().unwrap(), "--", "true"]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(out).unwrap();
    let names: Vec<&str> = text.lines().map(|l| l.split(';').nth(2).unwrap()).collect();
    assert_eq!(
        names,
        [
            "task-clock",
            "context-switches",
            "cpu-migrations",
            "page-faults",
            "cycles",
            "instructions",
            "branches",
            "branch-misses"
        ]
    );
}

#[test]
fn pid_target_counts_while_command_runs() {
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = busy.id().to_string();
    let o = stat(&["-x,", "-e", "task-clock", "-p", &pid, "--", "sleep", "0.3"]);
    busy.kill().ok();
    busy.wait().ok();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    let msec: f64 = rows[0][0].parse().unwrap();
    // A busy loop on a shared 2-CPU machine: a good part of 300 ms.
    assert!(msec > 50.0, "{msec}");
}

#[test]
fn cpu_target_and_interval() {
    let o = stat(&[
        "-x,",
        "-C",
        "0",
        "-I",
        "100",
        "-e",
        "cpu-clock",
        "--",
        "sleep",
        "0.35",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    assert!(rows.len() >= 3, "{rows:?}");
    // Interval rows carry a timestamp first, then perf's seven columns.
    for r in &rows {
        assert_eq!(r.len(), 8, "{r:?}");
        assert_eq!(r[3], "cpu-clock");
    }
    let first: f64 = rows[0][1].parse().unwrap();
    assert!(
        first > 80.0 && first < 130.0,
        "{first} msec in a 100 ms interval"
    );
}

fn one_line_error(o: &Output, needle: &str) {
    assert!(!o.status.success());
    let err = stderr(o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_one_line_error() {
    one_line_error(
        &stat(&["-e", "task-clok", "--", "true"]),
        "did you mean: task-clock",
    );
    one_line_error(
        &stat(&["-e", "{task-clock,cs", "--", "true"]),
        "malformed group",
    );
    one_line_error(&stat(&["-e", "{}", "--", "true"]), "empty group");
    one_line_error(
        &stat(&["-e", "nopmu/event=1/", "--", "true"]),
        "unknown PMU 'nopmu'",
    );
    one_line_error(
        &stat(&["-e", "task-clock", "-p", "2147483647", "--", "true"]),
        "no such process",
    );
    one_line_error(
        &stat(&["-e", "task-clock", "-p", "abc"]),
        "not a process id",
    );
    one_line_error(
        &stat(&["-e", "task-clock", "--", "/nonexistent/prog"]),
        "cannot run",
    );
    one_line_error(&stat(&["-e", "task-clock"]), "nothing to count");
}

#[test]
fn fixture_pmu_tree_errors() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../counters/tests/data/pmu/intel");
    let root = root.to_str().unwrap();
    one_line_error(
        &stat(&["--sysfs-root", root, "-e", "cpu/evnt=1/", "--", "true"]),
        "no format term 'evnt'",
    );
    one_line_error(
        &stat(&["--sysfs-root", root, "-e", "cpu/umask=0x100/", "--", "true"]),
        "too wide",
    );
}

#[test]
fn bench_read_reports_all_paths() {
    let o = Command::new(BIN)
        .args([
            "bench",
            "read",
            "--json",
            "--rounds",
            "3",
            "--iterations",
            "2000",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "ours_ns",
        "raw_read_ns",
        "ours_over_raw",
        "group3_ns",
        "perf_event2_read_full_ns",
    ] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    if !has_hw_pmu() {
        assert_eq!(v["user_space"]["available"], false);
        assert!(v["user_space"]["explanation"]
            .as_str()
            .unwrap()
            .contains("no hardware PMU"));
    }
}
