//! Fixes of session 25's CLI probe. No test asserts a duration or a speed: a child that does
//! not end is killed after a generous hang guard and the test fails saying so.

mod common;

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Waits for `child` at most `secs` seconds; `None` (after killing it) when it is still running.
fn wait_or_kill(child: &mut common::Kill, secs: u64) -> Option<ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.0.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.0.kill();
            let _ = child.0.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `agent --source sim:` ran the scenario's simulation for as long as it was left running: a
/// scenario of `duration_ms = 200` at `--interval 10ms` was still running after 500 intervals.
/// It ends now with the scenario (20 intervals here), as `simulate` does, saying so.
#[test]
fn agent_on_a_simulated_source_ends_with_its_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = common::scenario_file(
        dir.path(),
        "short.toml",
        "name = \"short\"\nmachine = \"zhang-smp\"\nduration_ms = 200\nepoch_ms = 100\n\
         [[task]]\nprogram = \"gzip\"\n",
    );
    let source = format!("sim:{}", scenario.display());
    let child = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args([
            "agent",
            "--policy",
            "spread",
            "--log-json",
            "--interval",
            "10ms",
        ])
        .args(["--source", &source])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent");
    let mut child = common::Kill(child);
    // 20 intervals of 10 ms: a minute is a hang, not a slow machine.
    let status = wait_or_kill(&mut child, 60);
    let mut log = String::new();
    use std::io::Read as _;
    if let Some(mut err) = child.0.stderr.take() {
        err.read_to_string(&mut log).expect("read log");
    }
    let status = status.unwrap_or_else(|| {
        panic!("agent on a 200 ms scenario still running after 60 s; log:\n{log}")
    });
    assert!(status.success(), "{status:?}; log:\n{log}");
    let finished: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "machine_finished")
        .collect();
    assert_eq!(finished.len(), 1, "one machine_finished line; log:\n{log}");
    assert_eq!(
        finished[0]["intervals"], 20,
        "200 ms in 10 ms intervals; log:\n{log}"
    );
    assert!(
        log.lines()
            .last()
            .is_some_and(|l| l.contains("\"stopped\"")),
        "the stop line last; log:\n{log}"
    );
}

/// `agent --restore-only` restores every thread its journal records; the options of a run were
/// accepted with it and ignored, so `--restore-only --targets pid:N` read as "restore only N"
/// and restored everything. They are refused now, before the journal is touched.
#[test]
fn restore_only_refuses_the_options_of_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("agent.journal");
    let journal = journal.to_str().expect("utf8");
    for extra in [
        &["--targets", "pid:1"][..],
        &["--policy", "spread"],
        &["--interval", "5s"],
        &["--dry-run"],
        &["--max-intervals", "3"],
        &["--hungry-cpus", "0.7"],
        &["--direct"],
    ] {
        let mut args = vec!["agent", "--restore-only", "--journal", journal];
        args.extend_from_slice(extra);
        let o = common::run(&args);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains("--restore-only") && err.contains(extra[0]),
            "{extra:?}: {err}"
        );
    }
    assert!(
        !std::path::Path::new(journal).exists(),
        "a refused --restore-only created its journal"
    );
    // With only the journal (and --log-json) it runs: a missing journal is its own refusal.
    let o = common::run(&[
        "agent",
        "--restore-only",
        "--log-json",
        "--journal",
        journal,
    ]);
    assert!(
        common::stderr(&o).contains("does not exist"),
        "{}",
        common::stderr(&o)
    );
}

/// `--source sim:` without a file was read as the scenario "" and refused as `--source sim:: :
/// cannot read: No such file or directory`; it names what is missing now.
#[test]
fn a_simulated_source_without_a_file_says_so() {
    let o = common::run(&["agent", "--policy", "spread", "--source", "sim:"]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no scenario file after `sim:`") && !err.contains("cannot read"),
        "{err}"
    );
}

/// A negative number given to an option that takes a number was refused by clap as
/// "unexpected argument '-1' found", which names neither the option nor what it takes; it is
/// the option's value now, refused by its own parser with its range.
#[test]
fn a_negative_number_is_refused_by_its_options_parser() {
    for (args, option) in [
        (
            &["burn", "--kind", "int", "--seconds", "-1"][..],
            "--seconds",
        ),
        (
            &["agent", "--policy", "spread", "--hungry-cpus", "-0.5"],
            "--hungry-cpus",
        ),
        (&["experiment", "zhang-spec", "--seeds", "-1"], "--seeds"),
        (&["top", "--once", "--rows", "-3"], "--rows"),
        // A nested subcommand too.
        (&["bench", "sim", "--repeat", "-1"], "--repeat"),
    ] {
        let o = common::run(args);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("invalid value '-") && err.contains(option),
            "{args:?}: {err}"
        );
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
    // A whole number's range is said (until session 30: "invalid digit found in string"),
    // found by asking the option's own parser; and a duration's `-` is its value (it was
    // "unexpected argument '-1' found"). Docs audit, session 30.
    for (args, said) in [
        (
            &["top", "--once", "--rows", "-3"][..],
            "-3 is not in 1..=100000",
        ),
        (&["daemon", "--slots", "-1"], "-1 is not in 1..=64"),
        (
            &["stat", "-r", "-1", "--", "true"],
            "runs must be from 1 to 100000, not -1",
        ),
        (
            &["simulate", "x.toml", "--seed", "-2"],
            "-2 is negative: this option takes a whole number",
        ),
        (
            &["top", "--once", "--interval", "-1s"],
            "--interval \"-1s\": must be at least",
        ),
        (
            &["agent", "--policy", "spread", "--interval", "-1s"],
            "--interval \"-1s\"",
        ),
        (
            &["lockprof", "--min-wait", "-1ms", "--", "true"],
            "\"-1ms\" is not a duration",
        ),
    ] {
        let o = common::run(args);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(
            !err.contains("unexpected argument") && !err.contains("invalid digit"),
            "{args:?}: {err}"
        );
    }
    // A command's own arguments after `--` are untouched.
    let o = common::run(&["stat", "-x,", "-e", "task-clock", "--", "echo", "-1"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "-1\n");
}

/// `simulate`'s line about tasks that never ran named every one of them: 100,000 tasks on
/// bench-1024 for 10 ms made one line of 98,976 names (1.1 MB). It names the first ten and
/// counts the rest (the table's NP column marks each). The simulator is deterministic: the
/// same 38 of 40 tasks never run in 10 ms on two CPUs.
#[test]
fn simulate_names_a_few_tasks_that_never_ran_and_counts_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = common::scenario_file(
        dir.path(),
        "starve.toml",
        "name = \"starve\"\nmachine = \"zhang-smp\"\nduration_ms = 10\nepoch_ms = 10\n\
         [[task]]\nprogram = \"gzip\"\ncount = 40\n",
    );
    let o = common::run(&["simulate", scenario.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("never ran"))
        .unwrap_or_else(|| panic!("no line about tasks that never ran:\n{out}"));
    let (n, total) = line
        .split_once(" tasks never ran")
        .and_then(|(head, _)| head.split_once(" of "))
        .map(|(n, t)| {
            (
                n.parse::<usize>().expect("n"),
                t.parse::<usize>().expect("total"),
            )
        })
        .unwrap_or_else(|| panic!("{line}"));
    assert_eq!(total, 40, "{line}");
    assert!(n > 10, "the scenario starves more than ten tasks: {line}");
    assert_eq!(line.matches("gzip#").count(), 10, "{line}");
    assert!(line.contains(&format!("and {} more", n - 10)), "{line}");
}
