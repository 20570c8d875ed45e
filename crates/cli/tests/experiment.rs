//! `counterpoint experiment`: bad input is refused with the list of names; small runs produce
//! the JSON and report shapes the README documents, and the kernel-level bus-pair scheduler
//! beats the baseline on Zhang's SPEC mix.

use std::process::Command;

fn counterpoint() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

#[test]
fn unknown_experiment_lists_the_names() {
    let out = counterpoint()
        .args(["experiment", "zhang"])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown experiment \"zhang\""), "{err}");
    for name in [
        "zhang-spec",
        "zhang-server",
        "masa-placement",
        "masa-testcases",
        "clock-scaling",
        "corun-slowdown",
        "di-vs-oracle",
        "all",
    ] {
        assert!(err.contains(name), "{name} missing from: {err}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn zero_seeds_and_bad_numbers_are_refused() {
    let out = counterpoint()
        .args(["experiment", "zhang-spec", "--seeds", "0"])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    // One range, the same for 0 and for a negative number (they were two messages).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 is not in 1..=4294967295"), "{err}");
    let out = counterpoint()
        .args(["experiment", "zhang-spec", "--seeds", "many"])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seeds"));
}

#[test]
fn an_unknown_model_is_refused_before_any_work() {
    let out = counterpoint()
        .args(["experiment", "zhang-spec", "--model", "v3"])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--model \"v3\": expected v1 or v2"), "{err}");
    assert!(out.stdout.is_empty());
}

/// `--model` is refused by name where the experiment would run the same without it (its own
/// model, both models, or no simulator), before any work; `replica` takes it: its engine runs
/// change, and `--model v1` is its default.
#[test]
fn a_model_the_experiment_would_ignore_is_refused() {
    for (name, why) in [
        ("leak", "runs its own sub-microsecond model"),
        ("schedtask", "runs its own model of OS-intensive programs"),
        ("model-validation", "always runs both models"),
        ("requests", "runs a real PostgreSQL"),
    ] {
        let out = counterpoint()
            .args(["experiment", name, "--model", "v2", "--seeds", "1"])
            .output()
            .expect("run counterpoint");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("--model: experiment {name} {why}")),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{name}");
    }
    let replica = |model: Option<&str>| {
        let mut args = vec!["experiment", "replica", "--seeds", "1", "--json"];
        args.extend(model.map(|m| ["--model", m]).iter().flatten());
        let out = counterpoint()
            .args(&args)
            .output()
            .expect("run counterpoint");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        // The label says how the model was chosen; the figures are what must agree.
        let label = v["replica"]["model"].take();
        (v, label)
    };
    let (default, label) = replica(None);
    // Said plainly: every run of replica's machine is v1 (report audit, session 29).
    assert_eq!(label, "v1");
    let (v1, label) = replica(Some("v1"));
    assert_eq!(label, "v1 (--model)");
    assert_eq!(v1, default);
    let (v2, label) = replica(Some("v2"));
    assert_eq!(label, "v2 (--model)");
    assert_ne!(v2, default);
}

#[test]
fn zhang_spec_json_has_ours_beside_the_paper() {
    let out = counterpoint()
        .args(["experiment", "zhang-spec", "--seeds", "1", "--json"])
        .output()
        .expect("run counterpoint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let spec = &v["zhang-spec"];
    let np = |p: &str| spec["policies"][p]["normalized_performance"]["mean"].as_f64();
    let unf = |p: &str| spec["policies"][p]["unfairness"]["mean"].as_f64();
    for p in [
        "linux",
        "ipc-pair",
        "bus-pair",
        "ipc-pair-affinity",
        "bus-pair-affinity",
        "bus-pair jitter=0.05",
        "linux jitter=0.1",
    ] {
        let v = np(p).unwrap_or_else(|| panic!("{p} has no NP"));
        assert!(v > 0.0 && v <= 1.05, "{p}: NP {v}");
        assert!(unf(p).is_some(), "{p} has no unfairness");
    }
    assert_eq!(spec["paper"]["bus-pair"]["normalized_performance"], 0.883);
    assert_eq!(spec["paper"]["linux"]["unfairness"], 0.178);
    assert_eq!(spec["policies"]["linux"]["normalized_performance"]["n"], 1);
    // Every entry says whether it was fitted or predicted; only the jitter-0 baseline was fitted.
    let basis = |p: &str| spec["policies"][p]["normalized_performance"]["basis"].clone();
    assert_eq!(basis("linux"), "calibrated");
    assert_eq!(basis("linux jitter=0.1"), "predicted");
    assert_eq!(basis("bus-pair"), "predicted");
    for (p, metrics) in spec["policies"].as_object().expect("policies object") {
        for (m, e) in metrics.as_object().expect("metrics object") {
            let b = e["basis"].as_str().unwrap_or("");
            assert!(b == "calibrated" || b == "predicted", "{p} {m}: {b}");
        }
    }
    // The seed paper's result: bus pairing beats the default scheduler on both metrics.
    assert!(np("bus-pair") > np("linux"));
    assert!(unf("bus-pair") < unf("linux"));
}

#[test]
fn out_dir_gets_markdown_json_and_figures() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = counterpoint()
        .args(["experiment", "masa-placement", "--seeds", "1", "--out"])
        .arg(dir.path())
        .output()
        .expect("run counterpoint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    assert!(md.contains("Table 1: average time (s) to complete (INT, FP)"));
    assert!(md.contains("(INT, FP) (INT, FP)"));
    for svg in ["masa-table1.svg", "masa-table2.svg"] {
        let s = std::fs::read_to_string(dir.path().join(svg)).expect(svg);
        assert!(s.starts_with("<svg"));
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("results.json")).expect("results.json"),
    )
    .expect("valid JSON");
    assert_eq!(json[0]["experiment"], "masa-placement");
    assert!(json[0]["paper"]["table1"]["mix_gain"].is_number());
}

#[test]
fn too_many_seeds_are_estimated_and_refused_unless_forced() {
    let out = counterpoint()
        .args(["experiment", "all", "--seeds", "100000", "--out"])
        .arg(tempfile::tempdir().expect("temp dir").path())
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("100000 seed(s) would take about"), "{err}");
    assert!(err.contains("--force"), "{err}");
    // Refused before any run: no report was written.
    assert!(out.stdout.is_empty());
    // Refused before the seed list is built (4e9 seeds would be 32 GB).
    let out = counterpoint()
        .args(["experiment", "zhang-spec", "--seeds", "4000000000"])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("4000000000 seed(s) would take about"), "{err}");
}

#[test]
fn seeds_past_u64_max_are_refused() {
    let out = counterpoint()
        .args([
            "experiment",
            "zhang-spec",
            "--first-seed",
            "18446744073709551615",
            "--seeds",
            "2",
        ])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("goes past the largest seed"), "{err}");
    // One seed at u64::MAX is fine to ask for (checked, not run here: --out is unwritable).
    let out = counterpoint()
        .args([
            "experiment",
            "zhang-spec",
            "--first-seed",
            "18446744073709551615",
            "--seeds",
            "1",
            "--out",
            "/proc/counterpoint-no-such-dir",
        ])
        .output()
        .expect("run counterpoint");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("largest seed"), "{err}");
}

#[test]
fn an_unwritable_out_dir_fails_before_any_work() {
    let out = counterpoint()
        .args(["experiment", "all", "--out", "/proc/x"])
        .output()
        .expect("run counterpoint");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/x"), "{err}");
    assert!(err.contains("cannot create the report directory"), "{err}");
    // No run started: nothing but the error was printed (no progress, no timing line).
    assert!(!err.contains("runs"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_closed_output_pipe_ends_quietly() {
    use std::process::Stdio;
    let mut child = counterpoint()
        .args(["experiment", "masa-placement", "--seeds", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run counterpoint");
    // The reader goes away before anything is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    // Quietly: either the command noticed and exited 0, or it ended by SIGPIPE as `yes | head`
    // does (main resets SIGPIPE to its default action) — never a panic or exit 101.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {err}",
        out.status
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// `experiment NAME --out DIR` does not replace a report of other experiments in DIR (it
/// turned a 12-experiment report into a one-experiment one); `--force` does.
#[test]
fn out_keeps_a_report_of_other_experiments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results.json");
    let theirs = "[{\"experiment\": \"zhang-spec\"}, {\"experiment\": \"leak\"}]\n";
    std::fs::write(&results, theirs).expect("write");
    let run = |force: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_counterpoint"));
        c.args(["experiment", "leak", "--seeds", "2", "--out"])
            .arg(dir.path());
        if force {
            c.arg("--force");
        }
        c.output().expect("run")
    };
    let out = run(false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("zhang-spec") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&results).expect("read"), theirs);
    let out = run(true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let now = std::fs::read_to_string(&results).expect("read");
    assert!(!now.contains("zhang-spec"), "replaced under --force");
}

/// A run refused after its `--out` was checked leaves no empty directory behind: the directory
/// is made when the first file is written.
#[test]
fn a_refused_run_leaves_no_empty_out_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("new-report");
    let out = counterpoint()
        .args(["experiment", "replica", "--seeds", "1", "--c2c"])
        .arg(dir.path().join("missing.json"))
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run counterpoint");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.json"), "{err}");
    assert!(!out_dir.exists(), "{} was left behind", out_dir.display());
}

/// `replica --c2c` says which model it ran under, in its text, its JSON and its report, as
/// without `--c2c` (it said `model: `, `"model": ""` and "not recorded"; CLI probe, session
/// 29); a file whose group measured no pair is refused, naming the file and the field.
#[test]
fn replica_with_a_c2c_file_says_its_model() {
    let c2c = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sim/tests/data/c2c-vm-2cpu.json"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("report");
    let out = counterpoint()
        .args([
            "experiment",
            "replica",
            "--seeds",
            "1",
            "--json",
            "--c2c",
            c2c,
        ])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run counterpoint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["replica"]["model"], "v1", "{j}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).expect("report");
    assert!(!report.contains("not recorded"), "{report}");
    assert!(report.contains(" Model: v1. "), "{report}");
    let out = counterpoint()
        .args([
            "experiment",
            "replica",
            "--seeds",
            "1",
            "--model",
            "v2",
            "--c2c",
            c2c,
        ])
        .output()
        .expect("run counterpoint");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("; model: v2 (--model); seeds: 1"), "{text}");

    let zero = dir.path().join("zero.json");
    let doc = std::fs::read_to_string(c2c).expect("read");
    let doc = doc.replacen("\"pairs\": 1,", "\"pairs\": 0,", 1);
    assert!(
        doc.contains("\"pairs\": 0,"),
        "the fixture has a group of one pair"
    );
    std::fs::write(&zero, doc).expect("write");
    let out = counterpoint()
        .args(["experiment", "replica", "--seeds", "1", "--c2c"])
        .arg(&zero)
        .output()
        .expect("run counterpoint");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("zero.json") && err.contains("groups[0] (same_llc).pairs = 0"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// A report replaced under `--force` takes its own figures with it: `zhang-spec-*.svg` stayed
/// beside `zhang-server`'s report (CLI probe, session 29). Only what the old report linked and
/// drew goes: a copy of one of its figures under another name, and a file of someone else's,
/// stay.
#[test]
fn a_replaced_report_takes_its_figures_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("exp dir");
    let run = |name: &str, force: bool| {
        let mut c = counterpoint();
        c.args(["experiment", name, "--seeds", "1", "--out"])
            .arg(&out_dir);
        if force {
            c.arg("--force");
        }
        let out = c.output().expect("run counterpoint");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    let svgs = || {
        let mut v: Vec<String> = std::fs::read_dir(&out_dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".svg"))
            .collect();
        v.sort();
        v
    };
    run("zhang-spec", false);
    let spec_figures = svgs();
    assert!(!spec_figures.is_empty() && spec_figures.iter().all(|f| f.starts_with("zhang-spec-")));
    std::fs::copy(out_dir.join(&spec_figures[0]), out_dir.join("my-copy.svg")).expect("copy");
    std::fs::write(out_dir.join("notes.txt"), "mine").expect("write");
    let err = run("zhang-server", true);
    assert!(
        err.contains("removed the replaced report's figures: ")
            && spec_figures.iter().all(|f| err.contains(f.as_str())),
        "{err}"
    );
    let now = svgs();
    assert!(now.contains(&"my-copy.svg".to_string()), "{now:?}");
    assert!(
        now.iter()
            .all(|f| f == "my-copy.svg" || f.starts_with("zhang-server-")),
        "{now:?}"
    );
    assert!(
        now.iter().any(|f| f.starts_with("zhang-server-")),
        "{now:?}"
    );
    assert!(out_dir.join("notes.txt").exists());
    let report = std::fs::read_to_string(out_dir.join("report.md")).expect("report");
    for f in now.iter().filter(|f| *f != "my-copy.svg") {
        assert!(report.contains(&format!("]({f})")), "{f} not in the report");
    }
}
