//! Fixes from the session-21 CLI probe: options a command would run the same without are
//! refused by name (`simulate --min-residency` for the baseline and the pick-next policies,
//! `agent --max-intervals 0`), `--sysfs-root` is checked by `stat` and `calibrate` as by the
//! daemon, and a scenario that lacks a top-level key or every task is refused as a whole
//! instead of at its first key. Only exit statuses and message text are checked.

mod common;

use common::{run, stderr};

/// Refused with exit status 2, nothing on stdout, and each of `want` on stderr; no panic.
fn refused(args: &[&str], want: &[&str]) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: expected {w:?} in: {err}");
    }
}

fn scenario(name: &str) -> String {
    format!("{}/../../scenarios/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn min_residency_is_refused_where_no_task_moves() {
    let zhang = scenario("zhang-spec.toml");
    refused(
        &["simulate", &zhang, "--min-residency", "5"],
        &["--min-residency", "\"linux\"", "moves no task"],
    );
    refused(
        &[
            "simulate",
            &zhang,
            "--policy",
            "bus-pair",
            "--min-residency",
            "5",
        ],
        &["--min-residency", "\"bus-pair\"", "picks the next task"],
    );
    // An epoch policy that moves tasks takes it.
    let o = run(&[
        "simulate",
        &zhang,
        "--policy",
        "spread",
        "--min-residency",
        "5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_sysfs_root_that_is_not_a_directory_is_refused() {
    refused(
        &[
            "stat",
            "--sysfs-root",
            "/nonexistent-sysfs",
            "-e",
            "task-clock",
            "--",
            "true",
        ],
        &["--sysfs-root /nonexistent-sysfs"],
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().display().to_string();
    refused(
        &["stat", "--sysfs-root", &path, "--", "true"],
        &[&format!("--sysfs-root {path}: not a directory")],
    );
}

#[test]
fn zero_agent_intervals_are_refused() {
    let o = run(&["agent", "--policy", "linux", "--max-intervals", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--max-intervals"), "{}", stderr(&o));
}

#[test]
fn a_scenario_without_machine_or_tasks_is_refused_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let no_machine = dir.path().join("no-machine.toml");
    std::fs::write(
        &no_machine,
        "name = \"x\"\nduration_ms = 100\n[[task]]\nprogram = \"gzip\"\n",
    )
    .unwrap();
    let path = no_machine.display().to_string();
    refused(
        &["simulate", &path],
        &[&format!("{path}:1:1: missing field `machine`")],
    );
    let no_task = dir.path().join("no-task.toml");
    std::fs::write(
        &no_task,
        "name = \"x\"\nmachine = \"zhang-smp\"\nduration_ms = 100\n",
    )
    .unwrap();
    let path = no_task.display().to_string();
    refused(
        &["simulate", &path],
        &[&format!(
            "{path}:1:1: a scenario needs at least one [[task]]"
        )],
    );
}
