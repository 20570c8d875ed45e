//! `counterpoint stat` end to end on this machine (software events; no hardware PMU).

mod common;

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

use common::has_hw_pmu;

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
        assert!(err.contains("<not supported>      cycles"), "{err}");
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
    // A busy loop runs for some of the time, however loaded the machine is.
    assert!(msec > 0.0, "{msec}");
}

/// `-p P,P` counts P once: a single-threaded process cannot run longer than the count lasted
/// (named twice, its task-clock was added up twice: 1.85 CPUs of one busy thread).
#[test]
fn a_pid_named_twice_is_counted_once() {
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = busy.id().to_string();
    let both = format!("{pid},{pid}");
    let t0 = std::time::Instant::now();
    let o = stat(&["-x,", "-e", "task-clock", "-p", &both, "--", "sleep", "0.3"]);
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    busy.kill().ok();
    busy.wait().ok();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    let msec: f64 = rows[0][0].parse().unwrap();
    assert!(
        msec > 0.0 && msec <= wall_ms,
        "{msec} ms counted in {wall_ms} ms"
    );
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
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    // About ten intervals; a loaded machine that stalls `stat` merges some into the last row,
    // so only a few are asserted (with `sleep 0.35`, one stall left two rows).
    assert!(rows.len() >= 3, "{rows:?}");
    // Interval rows carry a timestamp first, then perf's seven columns.
    for r in &rows {
        assert_eq!(r.len(), 8, "{r:?}");
        assert_eq!(r[3], "cpu-clock");
    }
    // Every interval's value is a count (the amount depends on the machine's load).
    for r in &rows {
        let v: f64 = r[1].parse().unwrap_or_else(|_| panic!("{r:?}"));
        assert!(v >= 0.0, "{r:?}");
    }
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

/// Run `cmd` to completion, killing it if it has not ended after a minute (a hang guard, far
/// beyond what any of these commands needs; the assertion is that it ends, not how fast).
fn output_or_hang(mut cmd: Command) -> Output {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn counterpoint");
    wait_or_hang(child, &cmd)
}

/// The output of a started `child` (its stdout and stderr piped), or a panic naming `cmd` if it
/// has not ended within a minute (killed).
fn wait_or_hang(child: std::process::Child, cmd: &Command) -> Output {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(o) => o.expect("wait"),
        Err(_) => {
            // SAFETY: killing the process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("hung: {cmd:?}");
        }
    }
}

fn stat_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("stat").args(args);
    c
}

#[test]
fn other_uid_does_not_hang_and_counts_user_only_or_says_why() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: switching to uid 65534 needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    // The other user must be able to create the marker.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let script = format!("touch {}", marker.display());
    let mut cmd = stat_cmd(&[
        "-x,",
        "-e",
        "task-clock,page-faults",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    cmd.uid(65534).gid(65534).current_dir("/");
    let o = output_or_hang(cmd);
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    if o.status.success() {
        // perf_event_paranoid <= 2: like perf, the kernel-mode part is dropped (`:u`).
        assert!(marker.exists(), "the command ran");
        let rows = csv_rows(&err);
        assert_eq!(rows.len(), 2, "{err}");
        assert!(rows[0][2].starts_with("task-clock"), "{err}");
        if read_paranoid() >= Some(2) {
            assert_eq!(rows[0][2], "task-clock:u", "{err}");
        }
    } else {
        // perf_event refused altogether: one clear line, and the command never ran.
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("perf_event_paranoid"), "{err}");
        assert!(!marker.exists(), "the stopped command was killed, not run");
    }
}

fn read_paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

#[test]
fn out_of_descriptors_kills_the_stopped_command_and_says_so() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let events = vec!["task-clock"; 100].join(",");
    let script = format!("touch {}", marker.display());
    let mut cmd = stat_cmd(&["-e", &events, "--", "sh", "-c", &script]);
    // SAFETY: setrlimit is async-signal-safe and touches nothing of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            let rl = libc::rlimit {
                rlim_cur: 40,
                rlim_max: 40,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = output_or_hang(cmd);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("out of file descriptors"), "{err}");
    assert!(err.contains("ulimit -n"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!marker.exists(), "the stopped command must never run");
}

#[test]
fn pid_target_ends_when_the_process_ends() {
    use std::process::Stdio;
    // A target the test ends once `stat` counts it (a `sleep 0.3` could end before a loaded
    // machine had opened the counters: "no such process").
    let mut target = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    let mut cmd = stat_cmd(&["-x,", "-e", "task-clock", "-p", &pid]);
    let counting = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_perf_fds(counting.id());
    drop(target.stdin.take());
    let o = wait_or_hang(counting, &cmd);
    target.wait().ok();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][2], "task-clock");
}

/// A pipe whose read end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> std::process::Stdio {
    let mut fds = [0; 2];
    // SAFETY: a valid 2-int array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors we own; the read end is closed at once.
    unsafe {
        libc::close(fds[0]);
        std::process::Stdio::from(
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]),
        )
    }
}

#[test]
fn command_gets_default_sigpipe() {
    use std::io::BufRead;
    use std::process::Stdio;
    // `stat -- yes | head -1`: `yes` must die of SIGPIPE (exit 141 passed through), quietly.
    let mut child = stat_cmd(&["-x,", "-e", "task-clock", "--", "yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "y\n");
    // The read end closes here; `yes`'s next write gets SIGPIPE.
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(141), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
    assert!(csv_rows(&err)[0][2] == "task-clock", "{err}");
}

#[test]
fn closed_output_ends_stat_quietly_with_141() {
    let mut cmd = stat_cmd(&["-e", "task-clock", "--", "true"]);
    cmd.stderr(closed_pipe());
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(141));
}

#[test]
fn closed_output_with_interval_stops_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 600", pidfile.display());
    let mut cmd = stat_cmd(&["-I", "20", "-e", "task-clock", "--", "sh", "-c", &script]);
    cmd.stderr(closed_pipe());
    let mut child = cmd.spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id() as i32;
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(s) => s.unwrap(),
        Err(_) => {
            // SAFETY: killing the process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("stat -I kept running with its output closed");
        }
    };
    assert_eq!(status.code(), Some(141));
    // The command was stopped and reaped, not orphaned: its pid is gone.
    // (The shell may be stopped between creating the file and writing its pid: an empty
    // file names no process, and on a loaded machine that happens.)
    if let Some(cpid) = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
    {
        assert!(
            !std::path::Path::new(&format!("/proc/{cpid}")).exists(),
            "command {cpid} left running"
        );
    }
}

#[test]
fn closed_output_file_target_ends_quietly() {
    // `-o /dev/stderr` onto a closed pipe: the same quiet 141.
    let mut cmd = stat_cmd(&["-o", "/dev/stderr", "-e", "task-clock", "--", "true"]);
    cmd.stderr(closed_pipe());
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(141));
}

#[test]
fn duplicate_events_are_shown_twice_and_counted_once_in_metrics() {
    let o = stat(&["-x,", "-e", "task-clock,task-clock", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r[2] == "task-clock"));
    assert_eq!(rows[0][6], "CPUs utilized");
    assert_eq!(rows[1][5], "", "the metric once: {rows:?}");
}

#[test]
fn empty_separator_and_cpu_list_are_refused() {
    for args in [&["-x", ""][..], &["-C", ""][..]] {
        let mut a = args.to_vec();
        a.extend(["-e", "task-clock", "--", "true"]);
        let o = stat(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains("a value is required"), "{err}");
        assert!(
            err.contains(if args[0] == "-x" {
                "--field-separator"
            } else {
                "--cpu"
            }),
            "{err}"
        );
    }
}

#[test]
fn an_error_with_stderr_closed_ends_quietly() {
    // Bad input and nowhere to say so: no panic ("failed printing to stderr"), exit 141.
    let mut cmd = stat_cmd(&["-e", "task-clok", "--", "true"]);
    cmd.stderr(closed_pipe());
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(141));
}

#[test]
fn repeat_prints_runs_and_spread_like_perf() {
    let o = stat(&["-r", "3", "-e", "task-clock,page-faults", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("Performance counter stats for 'true' (3 runs):"),
        "{err}"
    );
    let el = err
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .unwrap();
    // `MEAN +- SEM seconds time elapsed  ( +- x% )`
    let words: Vec<&str> = el.split_whitespace().collect();
    assert_eq!(words[1], "+-", "{el}");
    assert!(words[0].parse::<f64>().unwrap() > 0.0, "{el}");
    assert!(words[2].parse::<f64>().unwrap() >= 0.0, "{el}");
    assert!(el.trim_end().ends_with("% )"), "{el}");
    // user/sys are per run only (perf prints them without -r).
    assert!(!err.contains("seconds user"), "{err}");
    // -x with -r: the spread column after the event name (8 columns).
    let o = stat(&["-r", "2", "-x,", "-e", "page-faults", "--", "true"]);
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].len(), 8, "{rows:?}");
    assert!(rows[0][3].ends_with('%'), "{rows:?}");
    // JSON says how many runs.
    let o = stat(&["-r", "2", "--json", "-e", "page-faults", "--", "true"]);
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!(v["runs"], 2);
}

#[test]
fn repeat_and_modes_refuse_what_perf_refuses() {
    for args in [
        &["-r", "0", "--", "true"][..],
        &["-r", "2", "-I", "100", "--", "true"],
        &["-r", "2", "-a"],
        &["-A", "--", "true"],
        &["--per-thread", "--", "true"],
        &["-A", "--per-thread", "-a", "--", "true"],
    ] {
        let o = stat(args);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn daemon_refuses_repeats_saying_what_r_accepts() {
    // Refused before any broker is reached (the socket does not exist), as the direct path
    // refuses -r 0: the message names the option and what it accepts with --daemon.
    for n in ["0", "2"] {
        let o = stat(&["--daemon", "/nonexistent/cp.sock", "-r", n, "--", "true"]);
        assert_eq!(o.status.code(), Some(2), "-r {n}");
        let err = stderr(&o);
        assert!(
            err.contains(&format!("-r {n}:")) && err.contains("must be 1"),
            "-r {n}: {err}"
        );
        assert!(!err.contains("connect"), "{err}");
    }
    for (flag, name) in [("-A", "-A/--no-aggr"), ("--per-thread", "--per-thread")] {
        let o = stat(&["--daemon", "/nonexistent/cp.sock", flag, "--", "true"]);
        assert!(
            stderr(&o).contains(&format!("{name}: --daemon")),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn command_prints_user_and_sys_seconds() {
    let o = stat(&["-e", "task-clock", "--", "true"]);
    let err = stderr(&o);
    for what in ["seconds user", "seconds sys"] {
        let l = err.lines().find(|l| l.ends_with(what)).expect(what);
        let v: f64 = l.split_whitespace().next().unwrap().parse().unwrap();
        assert!(v >= 0.0, "{l}");
    }
    // Not for -a, where the command only times the count (as perf).
    let o = stat(&["-a", "-e", "cpu-clock", "--", "true"]);
    assert!(!stderr(&o).contains("seconds user"), "{}", stderr(&o));
}

#[test]
fn rates_are_per_task_clock_second() {
    // context-switches rate = count / task-clock seconds (perf's K/sec), checked on -x output.
    let o = stat(&[
        "-x,",
        "-e",
        "task-clock,page-faults",
        "--",
        "sh",
        "-c",
        "true",
    ]);
    let rows = csv_rows(&stderr(&o));
    let msec: f64 = rows[0][0].parse().unwrap();
    let faults: f64 = rows[1][0].parse().unwrap();
    let rate: f64 = rows[1][5].parse().unwrap();
    let scale = match rows[1][6].as_str() {
        "M/sec" => 1e6,
        "K/sec" => 1e3,
        "/sec" => 1.0,
        other => panic!("unit {other}"),
    };
    let expect = faults / (msec / 1e3);
    // Rounding of the printed task-clock (0.01 ms) and the rate (3 decimals).
    assert!(
        ((rate * scale) - expect).abs() <= expect * 0.05 + scale * 0.001,
        "{rate} {} vs {expect}",
        rows[1][6]
    );
    // Without a clock event there is no rate (as perf).
    let o = stat(&["-x,", "-e", "page-faults", "--", "true"]);
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows[0][5], "", "{rows:?}");
}

#[test]
fn no_aggr_has_one_row_per_cpu_and_event() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpus: Vec<usize> = online
        .trim()
        .split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![r.parse().unwrap()],
        })
        .collect();
    let o = stat(&["-a", "-A", "-x,", "-e", "cpu-clock,cs", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    assert_eq!(rows.len(), 2 * cpus.len(), "{rows:?}");
    // Event-major, CPUs in order, each row labelled.
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[0], format!("CPU{}", cpus[i % cpus.len()]), "{r:?}");
        assert_eq!(r[3], if i < cpus.len() { "cpu-clock" } else { "cs" });
    }
    // Human format: the label column, then perf's columns.
    let o = stat(&["-a", "-A", "-e", "cpu-clock", "--", "true"]);
    let err = stderr(&o);
    let first = format!("CPU{}", cpus[0]);
    let l = err
        .lines()
        .find(|l| l.starts_with(&first))
        .expect("CPU row");
    assert!(l.contains(" msec cpu-clock "), "{l}");
    assert!(l.contains("CPUs utilized"), "{l}");
}

#[test]
fn per_thread_has_one_row_per_thread() {
    // A helper with three threads in total, all asleep.
    let mut child = Command::new("sh")
        .args(["-c", "sleep 30 & sleep 30 & wait"])
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let o = stat(&[
        "-p",
        &pid,
        "--per-thread",
        "-x,",
        "-e",
        "task-clock",
        "--",
        "sleep",
        "0.1",
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stderr(&o));
    // sh has one thread: one row, labelled comm-tid.
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][0], format!("sh-{pid}"), "{rows:?}");
    assert_eq!(rows[0][3], "task-clock");
}

#[test]
fn interval_prints_perfs_header_once() {
    let o = stat(&["-I", "100", "-e", "task-clock", "--", "sleep", "0.25"]);
    let err = stderr(&o);
    assert_eq!(
        err.lines().filter(|l| l.starts_with('#')).count(),
        1,
        "{err}"
    );
    assert_eq!(
        err.lines().next().unwrap(),
        "#           time             counts unit events"
    );
    let o = stat(&[
        "-a",
        "-A",
        "-I",
        "100",
        "-e",
        "cpu-clock",
        "--",
        "sleep",
        "0.15",
    ]);
    assert_eq!(
        stderr(&o).lines().next().unwrap(),
        "#           time CPU                    counts unit events"
    );
    // CSV has no header (parsers read every line).
    let o = stat(&[
        "-x,",
        "-I",
        "100",
        "-e",
        "task-clock",
        "--",
        "sleep",
        "0.15",
    ]);
    assert!(!stderr(&o).contains('#'), "{}", stderr(&o));
}

/// Every run of -r is made even when the command dies of a signal, each death is named on
/// stderr, and the exit status is the last run's (perf's behaviour; it used to stop after the
/// first death without a word).
#[test]
fn repeat_runs_all_and_names_each_death() {
    let o = stat(&[
        "-r",
        "3",
        "-e",
        "task-clock",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(128 + 15), "{err}");
    for run in 1..=3 {
        let line = format!("run {run} of 3: the command was killed by SIGTERM (15)");
        assert!(err.contains(&line), "{line:?} missing: {err}");
    }
    assert!(err.contains("(3 runs)"), "{err}");
    // The last run's status, whatever the earlier ones: only the third run fails here.
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = dir.path().join("n");
    let script = "n=$(cat \"$1\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$1\"; \
                  [ $n -lt 3 ] || exit 7";
    let o = stat(&[
        "-r",
        "3",
        "-e",
        "task-clock",
        "--",
        "sh",
        "-c",
        script,
        "sh",
        counter.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(&counter).expect("counter").trim(),
        "3"
    );
    // Bounded: a typo does not run a command for ever.
    let o = stat(&["-r", "100001", "--", "true"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("from 1 to 100000"), "{}", stderr(&o));
}

/// SIGTERM sent to `stat` alone (not to the command) is passed on to the command: `stat` waits
/// for it, prints the counts, and leaves nothing running (it used to die and orphan it).
#[test]
fn sigterm_to_stat_is_passed_on_to_the_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ready = dir.path().join("ready");
    let pidfile = dir.path().join("pid");
    // The command says it runs (its pid in a file), then waits long: only a signal ends it.
    let script = "echo $$ > \"$1\"; touch \"$2\"; exec sleep 1000";
    let mut child = std::process::Command::new(BIN)
        .args(["stat", "-e", "task-clock", "--", "sh", "-c", script, "sh"])
        .arg(&pidfile)
        .arg(&ready)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn stat");
    let t0 = std::time::Instant::now();
    // A hang guard only.
    while !ready.exists() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ready.exists(), "the command never started");
    let cmd_pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .parse()
        .expect("a pid");
    // SAFETY: kill(2) on the stat we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait stat");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    assert_eq!(status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("Performance counter stats for"), "{err}");
    assert!(err.contains("task-clock"), "{err}");
    assert!(err.contains("killed by SIGTERM"), "{err}");
    // The command is gone (stat reaped it: no zombie, no orphan).
    assert!(
        !std::path::Path::new(&format!("/proc/{cmd_pid}")).exists(),
        "the command {cmd_pid} was left behind"
    );
}

/// Counting another user's process unprivileged fails for want of ptrace access, which no
/// perf_event_paranoid value grants: the message says so instead of "lower it". Needs root (to
/// drop to `nobody` with setpriv) and setpriv; skipped otherwise.
#[test]
fn another_users_process_names_the_owner_not_paranoid() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/usr/bin/setpriv").exists() {
        return eprintln!("skipped: needs root and setpriv");
    }
    let mut target = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let pid = target.id().to_string();
    let o = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args(["stat", "-p", &pid, "-e", "task-clock", "--", "true"])
        .output()
        .expect("run setpriv");
    let _ = target.kill();
    let _ = target.wait();
    let err = stderr(&o);
    if err.contains("Permission denied") && err.contains("setpriv") {
        return eprintln!("skipped: the binary is not reachable as nobody: {err}");
    }
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!("-p {pid}: the process belongs to root (uid 0)")),
        "{err}"
    );
    assert!(err.contains("ptrace access"), "{err}");
    assert!(!err.contains("sysctl"), "{err}");
}

/// `-p` with a thread id counts the thread's whole process, as perf does; the header says it
/// was a thread and of which process (it said "process id" of the thread's id).
#[test]
fn a_thread_id_is_named_as_a_thread_in_the_header() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let o = stat(&["-p", &tid.to_string(), "-e", "task-clock", "--", "true"]);
    let _ = stop_tx.send(());
    t.join().unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "thread id '{tid}' (process {})",
            std::process::id()
        )),
        "{err}"
    );
    let o = stat(&[
        "-p",
        &std::process::id().to_string(),
        "-e",
        "task-clock",
        "--",
        "true",
    ]);
    assert!(stderr(&o).contains("process id '"), "{}", stderr(&o));
}

/// With no command (`-p`, `-a`, `-C`), a stop signal ends the count, the counts are printed and
/// the status is 128+N, as perf stat's (it was 0; CLI probe, session 27). The signal is sent
/// once the counters are open (the fd table shows them), never after a delay.
#[test]
fn stopped_without_a_command_prints_the_counts_and_gives_128_plus_the_signal() {
    use std::process::Stdio;
    let mut target = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = target.id().to_string();
    let child = stat_cmd(&["-x,", "-e", "task-clock", "-p", &pid])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_perf_fds(child.id());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let _ = target.kill();
    let _ = target.wait();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(128 + libc::SIGINT), "{err}");
    let rows = csv_rows(&err);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][2], "task-clock");
}

/// `bench read` counts user-only where the kernel refuses kernel-mode counting to the user
/// (`perf_event_paranoid` 2), says so (`user_only`), and a refused hardware counter is not
/// reported as a missing PMU. Until session 30 it failed there ("Permission denied"). Run as
/// root, the check drops to `nobody` in the child.
#[test]
fn bench_read_counts_user_only_where_kernel_counting_is_refused() {
    let Some((o, paranoid)) = common::run_as_nobody(&[
        "bench",
        "read",
        "--json",
        "--rounds",
        "1",
        "--iterations",
        "100",
    ]) else {
        return;
    };
    assert!(
        o.status.success(),
        "as nobody under perf_event_paranoid {paranoid}: {}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["user_only"], paranoid == 2, "{v}");
    assert!(v["ours_ns"].as_f64().is_some_and(|x| x > 0.0), "{v}");
}
