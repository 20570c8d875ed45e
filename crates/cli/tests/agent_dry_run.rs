//! `agent --dry-run` as a daily tool: it says each decision once (not every interval while
//! nothing changes), with the policy's reason, and says that no journal is used.

use std::process::Command;

mod common;
use common::Busy;

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

#[test]
fn dry_run_says_no_journal_and_each_decision_once() {
    let a = Busy::spawn();
    let out = Command::new(BIN)
        .args(["agent", "--policy", "spread", "--dry-run", "--log-json"])
        .args(["--interval", "100ms", "--max-intervals", "4"])
        // A journal path that must not be touched in a dry run.
        .args(["--journal", "/nonexistent-dir/should-not-be-created"])
        // A low threshold: on a loaded machine the loop may get well under half a CPU.
        .args(["--hungry-cpus", "0.02", "--foreign-cpus", "2", "--targets"])
        .arg(format!("pid:{}", a.pid()))
        .output()
        .expect("agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let events: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let start = &events[0];
    assert_eq!(start["event"], "start", "{err}");
    let journal = start["journal"].as_str().expect("journal field");
    assert!(
        journal.starts_with("none (dry run"),
        "the journal is not used in a dry run: {journal}"
    );
    assert!(!std::path::Path::new("/nonexistent-dir").exists());
    // And at the end: nothing to restore, not "restored from the journal".
    let last = events.last().expect("events");
    assert_eq!(last["event"], "stopped", "{err}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing was changed")),
        "{last}"
    );
    // Whatever the load did to the hunger of the loop, a decision is never said again in the
    // very next interval with the same target (it is news only when it changes).
    let decisions: Vec<(u64, u64, String)> = events
        .iter()
        .filter(|e| e["event"] == "decision")
        .map(|d| {
            assert_eq!(d["dry_run"], true, "{d}");
            let reason = d["reason"].as_str().expect("reason");
            assert!(reason.starts_with("spread: "), "{reason}");
            (
                d["task"].as_u64().expect("task"),
                d["interval"].as_u64().expect("interval"),
                d["to"].as_str().expect("to").to_string(),
            )
        })
        .collect();
    for (i, x) in decisions.iter().enumerate() {
        for y in &decisions[i + 1..] {
            assert!(
                !(x.0 == y.0 && x.2 == y.2 && y.1 == x.1 + 1),
                "said twice in a row: {x:?} {y:?}\n{err}"
            );
        }
    }
}
