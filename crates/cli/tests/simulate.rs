//! `counterpoint simulate` end to end: table, JSON, output directory, bad input, and the
//! `bench sim` report.

mod common;

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

/// `counterpoint simulate PATH`'s table, the run asserted to succeed.
fn table_of(path: &std::path::Path) -> String {
    let out = bin().arg("simulate").arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const SCENARIO: &str = r#"name = "tiny"
machine = "zhang-smp"
duration_ms = 300
seed = 2

[[task]]
program = "gzip"
cpus = "0"

[[task]]
program = "swim"
cpus = "1"
"#;

#[test]
fn table_json_and_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.toml");
    std::fs::write(&path, SCENARIO).unwrap();
    let text = table_of(&path);
    assert!(text.contains("normalized performance"), "{text}");
    assert!(text.contains("swim"));
    // The physics and the tick every figure depends on, and a short run's length in ms.
    assert!(
        text.starts_with("scenario tiny on zhang-smp (model v1, 1000 us ticks, seed 2, policy linux), 300 ms simulated"),
        "{text}"
    );

    let out = bin()
        .args(["simulate", "--json", "--seed", "5"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seed"], 5);
    assert_eq!(v["model"], "v1");
    assert_eq!(v["tick_ns"], 1_000_000);
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);
    let np = v["tasks"][1]["np"].as_f64().unwrap();
    assert!(np > 0.0 && np <= 1.0);

    let outdir = dir.path().join("out");
    let out = bin()
        .arg("simulate")
        .arg(&path)
        .arg("--out")
        .arg(&outdir)
        .output()
        .unwrap();
    assert!(out.status.success());
    for f in common::SIMULATE_OUT_FILES {
        let meta = std::fs::metadata(outdir.join(f)).unwrap();
        assert!(meta.len() > 0, "{f} empty");
    }
    let csv = std::fs::read_to_string(outdir.join("series.csv")).unwrap();
    // Header + 2 tasks x 3 epochs.
    assert_eq!(csv.lines().count(), 7, "{csv}");
    assert!(std::fs::read_to_string(outdir.join("np.svg"))
        .unwrap()
        .contains("<svg"));
}

#[test]
fn bad_scenario_and_policy_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, SCENARIO.replace("seed = 2", "seed = 2\nspeed = 3")).unwrap();
    let out = bin().arg("simulate").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("bad.toml:5:1: speed: unknown field `speed`"),
        "{err}"
    );

    std::fs::write(&path, SCENARIO).unwrap();
    let out = bin()
        .args(["simulate", "--policy", "no-such-policy"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    // Refused with the registry's list, never replaced by the baseline.
    assert!(err.contains("unknown policy \"no-such-policy\""), "{err}");
    assert!(
        err.contains("bus-pair-affinity") && err.contains("oracle"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // The old user-space spelling is not silently mapped either.
    let out = bin()
        .args(["simulate", "--policy", "bus-pair-user"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A flag the policy does not take is named as the flag's mistake, not the file's.
    let out = bin()
        .args(["simulate", "--hungry-cpus", "0.5"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("error: --hungry-cpus: policy \"linux\" does not take it"),
        "{err}"
    );
}

/// Every registry policy runs on the simulator by name; the oracle's static placement (found
/// with short simulated runs) is at least as good as the baseline on this two-task scenario,
/// and MASA on a machine with one CPU per package says why it cannot calibrate.
#[test]
fn every_registry_policy_runs_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.toml");
    std::fs::write(
        &path,
        SCENARIO
            .replace("cpus = \"0\"\n", "")
            .replace("cpus = \"1\"\n", ""),
    )
    .unwrap();
    let np = |policy: &str, extra: &[&str]| -> Result<f64, String> {
        let out = bin()
            .args(["simulate", "--json", "--policy", policy])
            .args(extra)
            .arg(&path)
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["policy"], policy);
        Ok(v["metrics"]["normalized_performance"].as_f64().unwrap())
    };
    let linux = np("linux", &[]).unwrap();
    for p in [
        "spread",
        "bus-pair",
        "ipc-pair",
        "bus-pair-affinity",
        "ipc-pair-affinity",
        "di",
    ] {
        let v = np(p, &[]).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(v > 0.0 && v <= 1.0 + 1e-9, "{p}: {v}");
    }
    let oracle = np("oracle", &[]).unwrap();
    assert!(oracle >= linux - 1e-9, "oracle {oracle} < linux {linux}");
    let e = np("masa", &[]).unwrap_err();
    assert!(e.contains("one CPU per package"), "{e}");
    assert!(np("masa", &["--paper-calibration"]).is_ok());
}

#[test]
fn policies_lists_the_registry() {
    let out = bin().arg("policies").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "linux",
        "spread",
        "bus-pair",
        "ipc-pair",
        "bus-pair-affinity",
        "ipc-pair-affinity",
        "masa",
        "masa-log",
        "di",
        "oracle",
    ] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing: {text}"
        );
    }
    let out = bin().args(["policies", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(entry("bus-pair")["level"], "pick-next");
    assert_eq!(entry("bus-pair-affinity")["level"], "epoch");
    assert_eq!(entry("spread")["events"], serde_json::json!(["task-clock"]));
    assert_eq!(entry("oracle")["runs_on"], serde_json::json!(["simulator"]));
    assert_eq!(
        entry("di")["runs_on"],
        serde_json::json!(["simulator", "host"])
    );
}

#[test]
fn bench_sim_reports_a_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.toml");
    std::fs::write(&path, SCENARIO).unwrap();
    let out = bin()
        .args(["bench", "sim", "--json", "--repeat", "1", "--scenario"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["core_ticks"], 600);
    assert!(v["result"]["core_ticks_per_s"].as_f64().unwrap() > 0.0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A scenario's policy is not what is timed: said on stderr (CLI probe, session 27).
    std::fs::write(
        &path,
        SCENARIO.replace("seed = 2", "seed = 2\npolicy = \"spread\""),
    )
    .unwrap();
    let out = bin()
        .args(["bench", "sim", "--repeat", "1", "--scenario"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("policy \"spread\" is not run"), "{err}");
}

#[test]
fn bench_sim_runs_the_model_asked_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.toml");
    // A task waiting on CPU 0: the benchmark times the steady state after one round of slices,
    // and with nothing waiting that state has no switches and so no solves.
    let scenario = format!("{SCENARIO}\n[[task]]\nprogram = \"mesa\"\ncpus = \"0\"\n");
    std::fs::write(&path, scenario).unwrap();
    let out = bin()
        .args([
            "bench",
            "sim",
            "--json",
            "--repeat",
            "1",
            "--model",
            "v2",
            "--scenario",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["model"], "v2");
    assert!(v["result"]["solves_per_tick"].as_f64().unwrap() > 0.0);
    // One bus: no snoop coupling, so no latency updates (the field is there all the same).
    assert_eq!(v["result"]["latency_updates_per_tick"].as_f64(), Some(0.0));
    let out = bin()
        .args(["bench", "sim", "--model", "v3", "--scenario"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("v3"));
}

/// Names reach the terminal with their control characters escaped (a scenario's escape
/// sequence recoloured the terminal), and a task that never ran shows `-` for its IPC and
/// MPKI, not 0 (CLI probe, session 27).
#[test]
fn the_table_escapes_names_and_marks_tasks_that_never_ran() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("esc.toml");
    std::fs::write(
        &path,
        "name = \"red\\u001b[31m\"\nmachine = \"zhang-smp\"\nduration_ms = 5\nepoch_ms = 5\n\
         [[task]]\nprogram = \"gzip\"\nname = \"g\\u0007z\"\ncpus = \"0\"\n\
         [[task]]\nprogram = \"mcf\"\ncpus = \"0\"\nstart_ms = 4\n",
    )
    .unwrap();
    let text = table_of(&path);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(
        text.starts_with("scenario red\\u{1b}[31m on zhang-smp"),
        "{text}"
    );
    assert!(text.contains("g\\u{7}z"), "{text}");
    let mcf = text.lines().find(|l| l.contains("mcf")).unwrap();
    let cols: Vec<&str> = mcf.split_whitespace().collect();
    assert_eq!(&cols[2..5], ["-", "-", "-"], "{mcf}");
    // JSON keeps the name as it is.
    let out = bin()
        .arg("simulate")
        .arg(&path)
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scenario"], "red\u{1b}[31m");
}

/// Wide characters take two terminal columns: the table pads names by columns, so a CJK name
/// keeps its row's numbers under their headers (CLI probe, session 27: `{:<w$}` counts
/// characters).
#[test]
fn wide_names_keep_the_columns_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cjk.toml");
    std::fs::write(
        &path,
        "name = \"cjk\"\nmachine = \"zhang-smp\"\nduration_ms = 5\nepoch_ms = 5\n\
         [[task]]\nprogram = \"gzip\"\nname = \"数据库\"\ncpus = \"0\"\n\
         [[task]]\nprogram = \"mcf\"\nname = \"web\"\ncpus = \"1\"\n",
    )
    .unwrap();
    let text = table_of(&path);
    // The terminal column where " NP" ends in the header and where each row's NP value ends.
    let columns = |line: &str, upto: usize| -> usize {
        line.char_indices()
            .take_while(|(i, _)| *i < upto)
            .map(|(_, c)| {
                if ('\u{4e00}'..='\u{9fff}').contains(&c) {
                    2
                } else {
                    1
                }
            })
            .sum()
    };
    let header = text.lines().find(|l| l.contains("LLC-MPKI")).unwrap();
    let np_end = columns(header, header.find("NP").unwrap() + 2);
    for name in ["数据库", "web"] {
        let row = text.lines().find(|l| l.contains(name)).unwrap();
        let after = row.find(name).unwrap() + name.len();
        let value_end = after
            + row[after..].trim_start().find(' ').unwrap()
            + (row[after..].len() - row[after..].trim_start().len());
        assert_eq!(columns(row, value_end), np_end, "{text}");
    }
}
