//! `counterpoint requests --pid`: boundary lines on stdin become per-request rows of another
//! task's counters; bad input is refused with its line number.

use std::io::Write;
use std::process::{Command, Stdio};

fn counterpoint() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

fn with_sleeper(f: impl FnOnce(u32)) {
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    f(sleeper.id());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

fn run_with_input(args: &[String], input: &str) -> std::process::Output {
    let mut child = counterpoint()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run counterpoint");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

#[test]
fn pid_mode_writes_one_row_per_request() {
    with_sleeper(|pid| {
        let args: Vec<String> = [
            "requests",
            "--pid",
            &pid.to_string(),
            "--events",
            "task-clock,page-faults",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = run_with_input(
            &args,
            "# two requests\nbegin 1 login\nend 1 3\nbegin 2\nend 2\n",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("perf_event") && !out.status.success() {
            return eprintln!("skipped: counters unavailable: {stderr}");
        }
        assert!(out.status.success(), "{stderr}");
        let text = String::from_utf8_lossy(&out.stdout);
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert_eq!(rows[0]["id"], 1);
        assert_eq!(rows[0]["class"], "login");
        assert_eq!(rows[0]["rows"], 3);
        // `end 2` gave no row count: null, not the 0 of a real empty result (session 29).
        assert!(rows[1]["rows"].is_null(), "{text}");
        assert_eq!(rows[0]["server_tid"], pid);
        // A sleeping task runs nothing: its deltas are exactly zero, fully covered.
        assert_eq!(rows[1]["counts"]["page-faults"]["value"], 0.0);
        assert_eq!(rows[1]["counts"]["task-clock"]["coverage"], 1.0);

        let mut csv_args = args.clone();
        csv_args.push("--csv".into());
        let out = run_with_input(&csv_args, "begin 5 a\nend 5\nbegin 6 b\nend 6 0\n");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // task-clock's values are ns: its column says so.
        assert_eq!(
            lines[0],
            "id,client,server_tid,class,start_ns,wall_ns,rows,task-clock_ns,task-clock_coverage,\
             page-faults,page-faults_coverage"
        );
        // The 7th field, rows: empty when not given, 0 when given as 0.
        let rows_field = |l: &str| l.split(',').nth(6).map(str::to_string);
        assert!(lines[1].starts_with("5,0,"), "{text}");
        assert_eq!(rows_field(lines[1]).as_deref(), Some(""), "{text}");
        assert_eq!(rows_field(lines[2]).as_deref(), Some("0"), "{text}");
    });
}

#[test]
fn bad_boundaries_name_the_line() {
    with_sleeper(|pid| {
        let args: Vec<String> = [
            "requests",
            "--pid",
            &pid.to_string(),
            "--events",
            "task-clock",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = run_with_input(&args, "begin 1\nbegin 2\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("perf_event") {
            return eprintln!("skipped: counters unavailable: {stderr}");
        }
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("input line 2") && stderr.contains("request 1 is still open"),
            "{stderr}"
        );
        // A negative row count says what is wanted; a request left open at the end is said.
        let out = run_with_input(&args, "begin 1\nend 1 -5\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not a whole number of rows"), "{stderr}");
        // A whole number past the limit is said to be too large, with the limit.
        let out = run_with_input(&args, "begin 1\nend 1 99999999999999999999999\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(
                "row count '99999999999999999999999' is too large (at most 18446744073709551615)"
            ),
            "{stderr}"
        );
        let out = run_with_input(&args, "begin 1\nend 1\nbegin 2\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("request 2 begun and not ended"), "{stderr}");
    });
    let out = counterpoint()
        .args(["requests", "--pid", "999999999"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("999999999"), "{err}");
    let out = counterpoint().arg("requests").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid"));
}

#[test]
fn run_pg_writes_rows_csv_analysis_and_the_figure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = counterpoint()
        .args([
            "requests",
            "run-pg",
            "--scale",
            "0.002",
            "--clients",
            "2",
            "--requests",
            "40",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("PostgreSQL unavailable") {
        return eprintln!("SKIPPED: {stderr}");
    }
    assert!(out.status.success(), "{stderr}");
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("| Q1 |") && md.contains("ARI"), "{md}");
    let jsonl = std::fs::read_to_string(dir.path().join("requests.jsonl")).expect("jsonl");
    assert_eq!(jsonl.lines().count(), 40);
    let csv = std::fs::read_to_string(dir.path().join("requests.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 41);
    let a: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("analysis.json")).expect("analysis"),
    )
    .expect("JSON");
    let ari = a["analysis"]["time_and_counters"]["ari"]
        .as_f64()
        .expect("ari");
    assert!((-1.0..=1.0).contains(&ari));
    assert_eq!(a["run"]["accounting"].as_array().map(Vec::len), Some(2));
    let svg = std::fs::read_to_string(dir.path().join("requests-fig3.svg")).expect("svg");
    assert!(
        svg.starts_with("<svg") && svg.contains("Q6"),
        "legend names the templates"
    );
}

#[test]
fn without_postgres_run_pg_fails_and_the_experiment_says_skipped() {
    let out = counterpoint()
        .args(["requests", "run-pg", "--scale", "0.001"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--scale must be in [0.002, 1]") && err.contains("below 0.002"));
    // Each bound gives its own reason.
    let out = counterpoint()
        .args(["requests", "run-pg", "--scale", "2"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 is the largest") && !err.contains("below 0.002"),
        "{err}"
    );
    let out = counterpoint()
        .args(["requests", "run-pg"])
        .env("COUNTERPOINT_PG_BIN", "/nonexistent")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("PostgreSQL unavailable") && err.contains("/nonexistent"),
        "{err}"
    );
    let out = counterpoint()
        .args(["experiment", "requests", "--seeds", "1", "--json"])
        .env("COUNTERPOINT_PG_BIN", "/nonexistent")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let findings = v["requests"]["findings"].to_string();
    assert!(
        findings.contains("Skipped: PostgreSQL cannot run here"),
        "{findings}"
    );
}

/// `counterpoint requests --pid PID --events task-clock` with every stream piped.
fn requests_on(pid: &str) -> std::process::Child {
    counterpoint()
        .args(["requests", "--pid", pid, "--events", "task-clock"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run counterpoint")
}

/// Once the counted task has exited, `requests --pid` says so and stops (it used to report
/// zeros "fully covered" for requests nobody served): exit 0 after some measured requests,
/// 1 when none was.
#[test]
fn pid_mode_stops_when_the_task_is_gone() {
    use std::io::BufRead;
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = sleeper.id().to_string();
    let mut child = requests_on(&pid);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"begin 1\nend 1\n").expect("write");
    stdin.flush().expect("flush");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    if first.is_empty() {
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("perf_event"), "{err}");
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        return eprintln!("skipped: counters unavailable: {err}");
    }
    assert!(first.contains("\"id\":1"), "{first}");
    // The server ends (reaped: its pid no longer exists) before the next request.
    sleeper.kill().expect("kill");
    sleeper.wait().expect("reap");
    // A closed pipe if it has already stopped: fine either way.
    let _ = stdin.write_all(b"begin 2\nend 2\nbegin 3\nend 3\n");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        err.contains(&format!("task {pid} has exited")) && err.contains("input line 3"),
        "{err}"
    );
    assert!(err.contains("after 1 measured request"), "{err}");

    // Gone before any request (a zombie: killed, not yet reaped): nothing measured, exit 1.
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = sleeper.id().to_string();
    let mut child = requests_on(&pid);
    let stdin = child.stdin.take().expect("stdin");
    // Killed only once its counters are open (a perf_event descriptor in its fd table).
    let fds = format!("/proc/{}/fd", child.id());
    let has_perf_fd = || {
        std::fs::read_dir(&fds).is_ok_and(|d| {
            d.flatten().any(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
            })
        })
    };
    let t0 = std::time::Instant::now();
    // A hang guard only (the command may also have failed to open them: checked below).
    while !has_perf_fd() && t0.elapsed() < std::time::Duration::from_secs(30) {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut stdin = stdin;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(sleeper.id() as i32, libc::SIGKILL) };
    // Now a zombie until reaped below: /proc/PID/stat says Z.
    while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z"))
        .unwrap_or(true)
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = stdin.write_all(b"begin 1\nend 1\n");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    let _ = sleeper.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("perf_event") {
        return eprintln!("skipped: counters unavailable: {err}");
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("after 0 measured requests"), "{err}");
}

/// Ctrl-C during `experiment requests` stops its private cluster and removes its directory (a
/// signal's default action killed the command and left the server running and 45 MB in /tmp).
/// The cluster's directory is made under a TMPDIR of the test's own, so the test finds it
/// without racing anything else; it waits for the directory (a state, not a time) and then
/// interrupts.
#[test]
fn interrupting_experiment_requests_stops_and_removes_the_cluster() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    // The server runs as postgres (or nobody) under root: it must reach its directory.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // A process group of its own, signalled whole below, as a terminal's Ctrl-C is: initdb and
    // pg_ctl must not die of it (their failure read as "PostgreSQL cannot run here", exit 0).
    let mut child = counterpoint()
        .args(["experiment", "requests", "--seeds", "2"])
        .process_group(0)
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let cluster_dirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(tmp.path())
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("counterpoint-pg-"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    // Wait for the cluster's directory, or for the command to end (no PostgreSQL here).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut ended = None;
    while cluster_dirs().is_empty() && std::time::Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            ended = Some(status);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if ended.is_some() {
        let out = child.wait_with_output().expect("output");
        return eprintln!(
            "SKIPPED: the experiment ended before starting a cluster: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        !cluster_dirs().is_empty(),
        "no cluster directory within 300 s"
    );
    // SAFETY: kill has no memory preconditions; the group is our child's.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let out = child.wait_with_output().expect("output");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(
        cluster_dirs().is_empty(),
        "left behind: {:?}; {err}",
        cluster_dirs()
    );
    // And no server: no process names the test's directory on its command line.
    let tmp_name = tmp.path().to_string_lossy().into_owned();
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .filter(|c| c.contains(&tmp_name))
                .collect()
        })
        .unwrap_or_default();
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}
