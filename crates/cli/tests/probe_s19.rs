//! Fixes from the s19 CLI probe: options a command would ignore are refused by name (`agent
//! --seed` without a simulated source, `--heatmap-period-us` for a policy without heatmaps,
//! `burn`'s replica options with another kind); `agent --heatmap-period-us` has `heatmap
//! --period-us`'s range; help texts state defaults and ranges; the daemon's socket-path,
//! `--sysfs-root` and `--audit` refusals; one-line `--targets` errors; the per-replica cap before
//! the memory check; `bench selfmon --json`'s load average as a number; the experiment estimate
//! after the `--c2c` check. Only exit statuses and message text are checked, never a time.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{run, stderr};

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

/// Refused with exit status 2 and one line on stderr containing each of `want`; no panic.
fn refused(o: &Output, want: &[&str], what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{what}: not one line: {err}");
    for w in want {
        assert!(err.contains(w), "{what}: expected {w:?} in: {err}");
    }
}

/// Refused by clap (its own format: `error: invalid value ...`), exit status 2, each of `want`.
fn refused_by_clap(o: &Output, want: &[&str], what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert!(err.starts_with("error: invalid value"), "{what}: {err}");
    for w in want {
        assert!(err.contains(w), "{what}: expected {w:?} in: {err}");
    }
}

/// `--help` of `cmd`, the text of `flag`'s entry (its first lines, joined).
fn help_of(cmd: &[&str], flag: &str) -> String {
    let mut args = cmd.to_vec();
    args.push("--help");
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let entry: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(&format!("{flag} ")))
        .take(6)
        .map(str::trim)
        .collect();
    assert!(
        !entry.is_empty(),
        "{flag} not in the help of {cmd:?}: {text}"
    );
    // Up to the next option.
    let mut out = entry[0].to_string();
    for l in &entry[1..] {
        if l.starts_with('-') {
            break;
        }
        out.push(' ');
        out.push_str(l);
    }
    out
}

/// Run with a hang guard (a command that should refuse at once but started instead is killed
/// after a minute, and the status is then `None`): not a timing claim.
fn run_guarded(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn counterpoint");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("wait")
}

// --- 7: ignored options are refused -----------------------------------------------------------

#[test]
fn agent_seed_is_refused_without_a_simulated_source() {
    let o = run(&[
        "agent",
        "--policy",
        "spread",
        "--dry-run",
        "--max-intervals",
        "1",
        "--seed",
        "5",
    ]);
    refused(&o, &["--seed 5", "--source sim:"], "agent --seed with host");
    // With a simulated source the seed is taken (the missing scenario is the error here).
    let o = run(&[
        "agent",
        "--policy",
        "spread",
        "--source",
        "sim:/nonexistent/scenario.toml",
        "--seed",
        "5",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(!err.contains("--seed"), "{err}");
}

/// The host's options are refused with a simulated source (session 20): the simulator takes
/// its tasks from the scenario, changes nothing on the host, counts and samples itself. The
/// scenario is never opened: the refusal comes first.
#[test]
fn agent_host_options_are_refused_with_a_simulated_source() {
    let cases: &[&[&str]] = &[
        &["--targets", "comm:postgres"],
        &["--journal", "/tmp/other.journal"],
        &["--daemon"],
        &["--direct"],
        &["--read-every-thread"],
        &["--heatmap-period-us", "100"],
        &["--syscalls"],
    ];
    for extra in cases {
        let mut args = vec![
            "agent",
            "--policy",
            "schedtask",
            "--source",
            "sim:/nonexistent/scenario.toml",
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        refused(
            &o,
            &[extra[0], "only the host source uses it"],
            &format!("agent --source sim: {extra:?}"),
        );
    }
    // `--restore-only` restores the host's journal: a simulated source or a seed is refused.
    let o = run(&[
        "agent",
        "--restore-only",
        "--source",
        "sim:/nonexistent/scenario.toml",
    ]);
    refused(
        &o,
        &["--restore-only", "has none to restore"],
        "restore-only sim",
    );
    let o = run(&["agent", "--restore-only", "--seed", "3"]);
    refused(&o, &["--seed 3", "--restore-only"], "restore-only seed");
    // Without them the simulated source gets as far as its scenario.
    let o = run(&[
        "agent",
        "--policy",
        "schedtask",
        "--source",
        "sim:/nonexistent/scenario.toml",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(!err.contains("only the host source"), "{err}");
}

#[test]
fn agent_heatmap_period_is_refused_for_a_policy_without_heatmaps() {
    let o = run(&[
        "agent",
        "--policy",
        "spread",
        "--dry-run",
        "--max-intervals",
        "1",
        "--heatmap-period-us",
        "100",
    ]);
    refused(
        &o,
        &["--heatmap-period-us 100", "reads no code heatmaps"],
        "spread --heatmap-period-us",
    );
}

#[test]
fn burn_replica_options_are_refused_for_other_kinds() {
    for (flag, value) in [
        ("--replicas", "5"),
        ("--ws-bytes", "4M"),
        ("--sync-every", "100"),
    ] {
        let o = run(&["burn", "--kind", "int", "--seconds", "0.1", flag, value]);
        refused(
            &o,
            &[flag, "only --kind replica", "\"int\""],
            &format!("burn --kind int {flag}"),
        );
    }
    // An unknown kind is named as such first, whatever other option comes with it.
    let o = run(&["burn", "--kind", "foo", "--replicas", "3"]);
    refused(
        &o,
        &["--kind \"foo\"", "expected int"],
        "burn --kind foo --replicas 3",
    );
    // Several at once are named together.
    let o = run(&[
        "burn",
        "--kind",
        "fp",
        "--seconds",
        "0.1",
        "--replicas",
        "5",
        "--ws-bytes",
        "4M",
    ]);
    refused(
        &o,
        &["--replicas, --ws-bytes"],
        "burn --kind fp, two options",
    );
}

// --- 8: --heatmap-period-us bounds -------------------------------------------------------------

#[test]
fn agent_heatmap_period_has_the_heatmap_commands_range() {
    for v in ["0", "9", "10000001", "999999999999"] {
        let o = run(&[
            "agent",
            "--policy",
            "schedtask",
            "--dry-run",
            "--max-intervals",
            "1",
            "--heatmap-period-us",
            v,
        ]);
        refused_by_clap(
            &o,
            &["--heatmap-period-us", v, "10..=10000000"],
            &format!("agent --heatmap-period-us {v}"),
        );
    }
    // The same range as `heatmap --period-us`.
    let o = run(&["heatmap", "--period-us", "0", "--pid", "1"]);
    refused_by_clap(&o, &["10..=10000000"], "heatmap --period-us 0");
    let help = help_of(&["agent"], "--heatmap-period-us");
    assert!(help.contains("10 µs to 10 s"), "{help}");
    assert!(help.contains("default 1000"), "{help}");
}

// --- 9: help texts ----------------------------------------------------------------------------

#[test]
fn help_texts_state_defaults_and_ranges() {
    let cases: [(&[&str], &str, &[&str]); 11] = [
        (&["agent"], "--hungry-cpus", &["default 0.5"]),
        (&["agent"], "--interval", &["10ms to 1h"]),
        (&["agent-overhead"], "--interval", &["10ms to 1h"]),
        (&["agent-overhead"], "--intervals", &["at least 4"]),
        (&["daemon"], "--slots", &["1 to 64"]),
        (&["daemon"], "--slice-ms", &["1 to 10000"]),
        (
            &["bench", "broker"],
            "--seconds",
            &["0.1 to 600", "decimal"],
        ),
        (&["bench", "broker"], "--consumers", &["1 to 1000"]),
        (&["bench", "broker"], "--reads", &["10 to 10000000"]),
        (&["experiment"], "--seeds", &["1 to 4294967295"]),
        (&["daemon"], "--socket", &["107 bytes"]),
    ];
    for (cmd, flag, want) in cases {
        let help = help_of(cmd, flag);
        for w in want {
            assert!(
                help.contains(w),
                "{cmd:?} {flag}: expected {w:?} in: {help}"
            );
        }
    }
}

#[test]
fn bench_broker_seconds_take_decimals_within_their_range() {
    // Parsed: clap checks a value before the options that go together, so 0.5 beside --fuzz
    // (which does not take it; session 29) is refused as a conflict, not as a value, and
    // nothing long runs.
    let o = run(&["bench", "broker", "--seconds", "0.5", "--fuzz", "10"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("error: the argument '--seconds <SECONDS>' cannot be used with"),
        "{}",
        stderr(&o)
    );
    for v in ["0", "0.05", "600.5", "nan", "inf", "abc"] {
        let o = run(&["bench", "broker", "--seconds", v, "--fuzz", "10"]);
        refused_by_clap(
            &o,
            &["--seconds", "0.1 to 600"],
            &format!("bench broker --seconds {v}"),
        );
    }
}

#[test]
fn agent_overhead_intervals_message_adds_up() {
    for v in ["0", "3"] {
        let o = run(&["agent-overhead", "--threads", "1", "--intervals", v]);
        refused(
            &o,
            &[
                &format!("--intervals {v}"),
                "at least 4",
                "1 start-up interval is left out",
                "1 + 1/2 + 2 + 1/2",
            ],
            &format!("agent-overhead --intervals {v}"),
        );
    }
}

// --- 11: daemon socket paths ------------------------------------------------------------------

#[test]
fn daemon_refuses_a_socket_path_taken_by_a_file_or_directory_and_leaves_it() {
    let d = tempfile::tempdir().expect("tempdir");
    let file = d.path().join("regular.sock");
    std::fs::write(&file, "keep\n").expect("write");
    let dir = d.path().join("dir.sock");
    std::fs::create_dir(&dir).expect("mkdir");
    for (path, kind) in [(&file, "a regular file"), (&dir, "a directory")] {
        let o = run_guarded(&["daemon", "--socket", path.to_str().expect("utf-8")]);
        refused(
            &o,
            &["exists and is not a socket", kind],
            &format!("daemon --socket {}", path.display()),
        );
        assert!(
            !stderr(&o).contains("entity already exists"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "keep\n");
    assert!(dir.is_dir());
}

#[test]
fn daemon_says_a_socket_parent_is_not_a_directory() {
    let d = tempfile::tempdir().expect("tempdir");
    let file = d.path().join("regular");
    std::fs::write(&file, "keep\n").expect("write");
    for sub in ["x.sock", "a/b/x.sock"] {
        let sock = file.join(sub);
        let o = run_guarded(&["daemon", "--socket", sock.to_str().expect("utf-8")]);
        refused(
            &o,
            &[&format!("{} is not a directory", file.display())],
            &format!("daemon --socket {}", sock.display()),
        );
    }
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "keep\n");
}

#[test]
fn daemon_states_the_socket_path_limit() {
    let d = tempfile::tempdir().expect("tempdir");
    let long = d.path().join(format!("{}.sock", "a".repeat(120)));
    let o = run_guarded(&["daemon", "--socket", long.to_str().expect("utf-8")]);
    refused(&o, &["too long", "at most 107 bytes", "108"], "long socket");
    assert!(!stderr(&o).contains("SUN_LEN"), "{}", stderr(&o));
}

#[test]
fn stat_through_a_daemon_path_that_is_not_a_socket_says_so() {
    let d = tempfile::tempdir().expect("tempdir");
    let file = d.path().join("regular.sock");
    std::fs::write(&file, "").expect("write");
    let o = run(&[
        "stat",
        "--daemon",
        file.to_str().expect("utf-8"),
        "-e",
        "task-clock",
        "--",
        "true",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("not a socket (a regular file)"), "{err}");
    assert!(!err.contains("Connection refused"), "{err}");
}

// --- 12: --sysfs-root and --audit ------------------------------------------------------------

#[test]
fn daemon_refuses_a_sysfs_root_that_is_not_a_directory() {
    let d = tempfile::tempdir().expect("tempdir");
    let sock = d.path().join("broker.sock");
    let file = d.path().join("file");
    std::fs::write(&file, "x").expect("write");
    let missing = d.path().join("missing");
    for (root, want) in [(&missing, "No such file"), (&file, "not a directory")] {
        let o = run_guarded(&[
            "daemon",
            "--socket",
            sock.to_str().expect("utf-8"),
            "--sysfs-root",
            root.to_str().expect("utf-8"),
        ]);
        refused(
            &o,
            &["--sysfs-root", want],
            &format!("--sysfs-root {}", root.display()),
        );
    }
    assert!(!sock.exists());
}

#[test]
fn daemon_refuses_an_audit_file_that_is_not_an_audit_log_and_leaves_it() {
    let d = tempfile::tempdir().expect("tempdir");
    let sock = d.path().join("broker.sock");
    let readme = d.path().join("README.md");
    let text = "# counterpoint\n\nNot an audit log.\n";
    std::fs::write(&readme, text).expect("write");
    let o = run_guarded(&[
        "daemon",
        "--socket",
        sock.to_str().expect("utf-8"),
        "--audit",
        readme.to_str().expect("utf-8"),
    ]);
    refused(
        &o,
        &["--audit", "not a counterpoint audit log"],
        "daemon --audit README.md",
    );
    assert_eq!(std::fs::read_to_string(&readme).expect("read"), text);
    // The same file named by the policy's audit_log.
    let policy = d.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!("audit_log = {:?}\n", readme.display().to_string()),
    )
    .expect("write policy");
    let o = run_guarded(&[
        "daemon",
        "--socket",
        sock.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    refused(
        &o,
        &["audit_log", "not a counterpoint audit log"],
        "policy audit_log",
    );
    assert_eq!(std::fs::read_to_string(&readme).expect("read"), text);
}

/// An existing audit log (and an empty file) is appended to: the daemon starts.
#[test]
fn daemon_appends_to_an_existing_audit_log() {
    let d = tempfile::tempdir().expect("tempdir");
    let sock = d.path().join("broker.sock");
    let audit = d.path().join("audit.jsonl");
    let line =
        "{\"time_ns\":1,\"action\":\"grant\",\"uid\":0,\"gid\":0,\"pid\":1,\"what\":\"x\"}\n";
    std::fs::write(&audit, line).expect("write");
    let mut child = Command::new(BIN)
        .args(["daemon", "--socket"])
        .arg(&sock)
        .arg("--audit")
        .arg(&audit)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start daemon");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut exited = None;
    while !sock.exists() {
        if let Some(st) = child.try_wait().expect("try_wait") {
            exited = Some(st);
            break;
        }
        assert!(Instant::now() < deadline, "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().expect("wait");
    assert!(exited.is_none(), "exited at start: {}", stderr(&out));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&audit)
        .expect("read")
        .starts_with(line));
}

// --- 13: smaller output points ----------------------------------------------------------------

#[test]
fn burn_replica_gives_the_per_replica_cap_before_the_memory_check() {
    for ws in ["100G", "2G"] {
        let o = run(&[
            "burn",
            "--kind",
            "replica",
            "--ws-bytes",
            ws,
            "--seconds",
            "0.1",
        ]);
        refused(
            &o,
            &[
                &format!("--ws-bytes {ws}"),
                "between 128 B and 1 GiB per replica",
            ],
            &format!("--ws-bytes {ws}"),
        );
        assert!(
            !stderr(&o).contains("working sets in all"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn bench_selfmon_json_load_average_is_a_number() {
    let o = run(&[
        "bench",
        "selfmon",
        "--rounds",
        "1",
        "--iterations",
        "10",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let load = &v["loadavg_1m"];
    assert!(
        load.is_number() || (load.is_null() && !Path::new("/proc/loadavg").exists()),
        "{load}"
    );
}

#[test]
fn agent_targets_errors_are_one_line_and_say_what_is_wrong() {
    let o = run(&[
        "agent",
        "--policy",
        "spread",
        "--dry-run",
        "--max-intervals",
        "1",
        "--targets",
        "pid:99999999999999999999",
    ]);
    refused(
        &o,
        &["99999999999999999999", "out of range"],
        "pid out of range",
    );
    assert!(!stderr(&o).contains("positive integer"), "{}", stderr(&o));
    let o = run(&[
        "agent",
        "--policy",
        "spread",
        "--dry-run",
        "--max-intervals",
        "1",
        "--targets",
        "comm:(",
    ]);
    refused(
        &o,
        &["bad regular expression", "unclosed group", "at character 1"],
        "comm:(",
    );
}

// --- 5: the estimate after the --c2c check ----------------------------------------------------

#[test]
fn experiment_c2c_refusal_comes_without_an_estimate_line() {
    // Over 10 seeds (well within the budget) `model-validation` is estimated at more than a
    // minute, so a started run prints the estimate line.
    let o = run(&[
        "experiment",
        "model-validation",
        "--seeds",
        "10",
        "--c2c",
        "/nonexistent/c2c.json",
    ]);
    refused(
        &o,
        &["--c2c applies to `experiment replica` only"],
        "experiment model-validation --c2c",
    );
    assert!(!stderr(&o).contains("on 2 vCPUs"), "{}", stderr(&o));
}

/// An epoch longer than the run is legal but rarely meant: `simulate` says what it does.
#[test]
fn simulate_warns_of_an_epoch_longer_than_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("long-epoch.toml");
    std::fs::write(
        &path,
        "name = \"e\"\nmachine = \"zhang-smp\"\nduration_ms = 200\nepoch_ms = 500\n\
         [[task]]\nprogram = \"gzip\"\n",
    )
    .expect("write");
    let o = run(&["simulate", path.to_str().expect("a UTF-8 path")]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("epoch_ms 500 is longer than duration_ms 200"),
        "{err}"
    );
}
