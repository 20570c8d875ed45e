//! Fixes from the session-22 CLI probe for `agent`: a simulated source calibrates MASA on its
//! machine as `simulate` does, `--min-residency` is refused for the baseline, a policy the
//! agent's loop cannot run points to the command that can, and a stop line names a signal only
//! when one came. Only exit statuses, message text and log fields are checked.

mod common;

use common::{run, stderr};

fn scenario(name: &str) -> String {
    format!("{}/../../scenarios/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// MASA on a simulated source runs without a table: the simulated machine is calibrated (it
/// was refused with "needs a load calibration measured on this machine (the simulator
/// calibrates itself ...)"). It stops on its own after its intervals, and the stop line then
/// has no `signal` field (it had `signal=""`).
#[test]
fn masa_runs_on_a_simulated_source_and_stops_without_a_signal() {
    let source = format!("sim:{}", scenario("masa-testcase1.toml"));
    let o = run(&[
        "agent",
        "--source",
        &source,
        "--policy",
        "masa",
        "--max-intervals",
        "2",
        "--interval",
        "10ms",
        "--log-json",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines[0]["event"], "start", "{err}");
    assert_eq!(lines[0]["policy"], "masa", "{err}");
    let last = lines.last().expect("a stop line");
    assert_eq!(last["event"], "stopped", "{err}");
    assert!(last.get("signal").is_none(), "{last}");
}

#[test]
fn min_residency_is_refused_for_the_baseline() {
    let o = run(&[
        "agent",
        "--policy",
        "linux",
        "--min-residency",
        "7",
        "--dry-run",
        "--max-intervals",
        "1",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--min-residency 7") && err.contains("moves no task"),
        "{err}"
    );
}

/// A pick-next policy and the oracle are refused with the command that runs them, also on a
/// simulated source (the message said "only the simulator can run it" to a user running the
/// simulator).
#[test]
fn a_policy_the_loop_cannot_run_points_to_simulate() {
    let source = format!("sim:{}", scenario("zhang-spec.toml"));
    for policy in ["bus-pair", "oracle"] {
        let o = run(&["agent", "--source", &source, "--policy", policy]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{policy}: {err}");
        assert!(
            err.contains(&format!("counterpoint simulate --policy {policy}")),
            "{policy}: {err}"
        );
        assert!(!err.contains("only the simulator can run it"), "{err}");
    }
}
