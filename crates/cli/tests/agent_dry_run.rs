//! `agent --dry-run` as a daily tool: it says each decision once (not every interval while
//! nothing changes), with the policy's reason, and says that no journal is used.

use std::process::Command;

mod common;
use common::Busy;

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

/// The agent's stderr (it must have succeeded) and its `--log-json` events.
fn json_log(out: &std::process::Output) -> (String, Vec<serde_json::Value>) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let events = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (err, events)
}

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
    let (err, events) = json_log(&out);
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

#[test]
fn schedtask_dry_run_separates_kernel_heavy_and_user_code() {
    // `dd` spends its time in the kernel clearing and discarding pages, the shell loop in its
    // own code: their heatmaps do not overlap, so schedtask gives them cores of their own.
    let a = Busy::spawn();
    let dd = common::Kill(
        Command::new("dd")
            .args(["if=/dev/zero", "of=/dev/null", "bs=1M"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn dd"),
    );
    let out = Command::new(BIN)
        .args(["agent", "--policy", "schedtask", "--dry-run", "--log-json"])
        .args(["--interval", "500ms", "--max-intervals", "6"])
        .args(["--heatmap-period-us", "1000", "--targets"])
        .arg(format!("pid:{},{}", a.pid(), dd.pid()))
        .output()
        .expect("agent");
    let (err, events) = json_log(&out);
    let code = events[0]["code_heatmaps"].as_str().expect("code_heatmaps");
    assert!(
        code.starts_with("cpu-clock IP sampling every 1000 us"),
        "{code}"
    );
    // The last decision said for each task (a dry run says a decision again only when it
    // changes).
    let mut to: std::collections::BTreeMap<u64, String> = Default::default();
    for d in events.iter().filter(|e| e["event"] == "decision") {
        let reason = d["reason"].as_str().expect("reason");
        assert!(reason.starts_with("schedtask: group "), "{reason}");
        to.insert(
            d["task"].as_u64().expect("task"),
            d["to"].as_str().expect("to").to_string(),
        );
    }
    // One core (one CPU, or SMT siblings only): one group of cores for everything.
    let siblings =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
            .unwrap_or_default();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if siblings.trim() == online.trim() {
        return;
    }
    let (sa, sd) = (
        to.get(&(a.pid() as u64)).expect("a decision for the loop"),
        to.get(&(dd.pid() as u64)).expect("a decision for dd"),
    );
    let (sa, sd): (counterpoint_core::CpuSet, counterpoint_core::CpuSet) =
        (sa.parse().expect("cpu list"), sd.parse().expect("cpu list"));
    assert!(
        sa.intersection(&sd).is_empty(),
        "{sa} and {sd} overlap\n{err}"
    );
}
