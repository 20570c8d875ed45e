//! The agent on real processes: spread pins two busy loops apart, SIGTERM restores, SIGKILL +
//! restart restores from the journal, and bad input changes nothing.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

mod common;
use common::{Busy, Kill};

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

/// The tests share two CPUs; run them one at a time so each sees its loops as CPU-hungry.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn cpus_allowed(pid: u32) -> String {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim()
        .to_string()
}

fn online() -> String {
    fs::read_to_string("/sys/devices/system/cpu/online")
        .expect("online")
        .trim()
        .to_string()
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if f() {
            return true;
        }
        sleep(Duration::from_millis(50));
    }
    f()
}

/// Whether an agent holds the journal's lock: the file is created before it is locked, so its
/// existence (and a pause of 300 ms) let a second agent on a loaded machine take the lock
/// first and the first one end (a test waiting for the second to fail then hung).
fn journal_locked(path: &Path) -> bool {
    fs::File::open(path)
        .ok()
        .and_then(|f| counterpoint_host::files::flock_holder(&f))
        .is_some()
}

fn start_agent(policy: &str, targets: &str, journal: &Path) -> Kill {
    let mut cmd = Command::new(BIN);
    cmd.args(["agent", "--policy", policy, "--interval", "200ms"]);
    // The baseline moves no task, and the agent refuses a hold-back it would ignore.
    if policy != "linux" {
        cmd.args(["--min-residency", "1"]);
    }
    if policy == "spread" {
        // The other engineers' builds share these two CPUs: a busy loop may get a quarter of
        // one, below spread's default hunger threshold of half a CPU.
        // Their load must not count as foreign either: a CPU they saturate would be "taken"
        // and spread would (rightly) put both loops on the other one.
        cmd.args(["--hungry-cpus", "0.05", "--foreign-cpus", "2"]);
    }
    Kill(
        cmd.args(["--targets", targets, "--journal"])
            .arg(journal)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn agent"),
    )
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid we spawned.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

fn two_cpus() -> bool {
    online() == "0-1" || online().contains(',') || online().contains('-')
}

fn pinned_apart(a: u32, b: u32) -> bool {
    let (ca, cb) = (cpus_allowed(a), cpus_allowed(b));
    ca != online() && cb != online() && ca != cb
}

#[test]
fn spread_pins_then_sigterm_restores() {
    let _g = serial();
    if !two_cpus() {
        eprintln!("skipped: needs at least two online CPUs");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("agent.journal");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let mut agent = start_agent("spread", &format!("pid:{},{}", a.pid(), b.pid()), &journal);
    assert!(
        wait_until(Duration::from_secs(60), || pinned_apart(a.pid(), b.pid())),
        "spread did not pin the two busy loops to different CPUs: {} / {}",
        cpus_allowed(a.pid()),
        cpus_allowed(b.pid())
    );
    // The journal holds the originals while the agent runs.
    let text = fs::read_to_string(&journal).expect("journal");
    assert!(text.contains(&format!("\"{}\"", a.pid())), "{text}");
    signal(agent.0.id(), libc::SIGTERM);
    let status = agent.0.wait().expect("wait");
    assert!(status.success(), "agent exit {status:?}");
    assert_eq!((cpus_allowed(a.pid()), cpus_allowed(b.pid())), before);
}

#[test]
fn sigkill_then_restart_restores_from_journal() {
    let _g = serial();
    if !two_cpus() {
        eprintln!("skipped: needs at least two online CPUs");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("agent.journal");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let targets = format!("pid:{},{}", a.pid(), b.pid());
    let mut agent = start_agent("spread", &targets, &journal);
    assert!(wait_until(Duration::from_secs(60), || pinned_apart(
        a.pid(),
        b.pid()
    )));
    signal(agent.0.id(), libc::SIGKILL);
    let _ = agent.0.wait();
    // Killed: nothing restored yet.
    assert!(pinned_apart(a.pid(), b.pid()));
    // The baseline policy changes nothing, so what we see after its start is the recovery.
    let mut again = start_agent("linux", &targets, &journal);
    assert!(
        wait_until(Duration::from_secs(60), || (
            cpus_allowed(a.pid()),
            cpus_allowed(b.pid())
        ) == before),
        "not restored after restart"
    );
    signal(again.0.id(), libc::SIGTERM);
    assert!(again.0.wait().expect("wait").success());
}

#[test]
fn task_that_changed_its_own_affinity_is_left_alone() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("agent.journal");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let mut agent = start_agent("spread", &format!("pid:{},{}", a.pid(), b.pid()), &journal);
    assert!(wait_until(Duration::from_secs(60), || pinned_apart(
        a.pid(),
        b.pid()
    )));
    // Someone else (here: taskset) moves A after the agent did.
    let own = if cpus_allowed(a.pid()) == "0" {
        "1"
    } else {
        "0"
    };
    let ok = Command::new("taskset")
        .args(["-pc", own, &a.pid().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return; // no taskset here
    }
    signal(agent.0.id(), libc::SIGKILL);
    let _ = agent.0.wait();
    let out = Command::new(BIN)
        .args(["agent", "--restore-only", "--journal"])
        .arg(&journal)
        .output()
        .expect("restore-only");
    assert!(out.status.success());
    assert_eq!(cpus_allowed(a.pid()), own, "A's own choice was overridden");
    assert_eq!(cpus_allowed(b.pid()), online(), "B not restored");
}

fn run_fails(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().expect("run");
    assert!(!out.status.success(), "{args:?} succeeded");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    let j = journal.to_str().expect("utf8");
    let a = Busy::spawn();
    let before = cpus_allowed(a.pid());
    let t = format!("pid:{}", a.pid());
    let e = run_fails(&["agent", "--policy", "nope", "--targets", &t, "--journal", j]);
    assert!(
        e.contains("unknown policy \"nope\"") && e.contains("spread"),
        "{e}"
    );
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--targets",
        "pid:1,zz",
        "--journal",
        j,
    ]);
    assert!(e.contains("\"zz\""), "{e}");
    let e = run_fails(&["agent", "--policy", "masa", "--targets", &t, "--journal", j]);
    assert!(e.contains("calibration"), "{e}");
    let e = run_fails(&[
        "agent",
        "--policy",
        "masa",
        "--masa-calibration",
        "paper",
        "--targets",
        &t,
        "--journal",
        j,
    ]);
    assert!(e.contains("instructions"), "{e}");
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--targets",
        &t,
        "--journal",
        "/proc/no/such/j",
    ]);
    assert!(e.contains("/proc/no/such/j"), "{e}");
    // A second agent on a journal that is in use.
    let mut first = start_agent("linux", &t, &journal);
    assert!(wait_until(Duration::from_secs(60), || journal_locked(
        &journal
    )));
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--targets",
        &t,
        "--journal",
        j,
    ]);
    assert!(e.contains("another agent"), "{e}");
    signal(first.0.id(), libc::SIGTERM);
    let _ = first.0.wait();
    // Insufficient privileges: as nobody, on a root-owned process.
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 && Path::new("/usr/bin/setpriv").exists() {
        let open_dir = tempfile::tempdir_in("/tmp").expect("tempdir");
        let mut perms = fs::metadata(open_dir.path()).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
        fs::set_permissions(open_dir.path(), perms).expect("chmod");
        let nj = open_dir.path().join("nobody.journal");
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(["agent", "--policy", "spread", "--targets", &t, "--journal"])
            .arg(&nj)
            .output()
            .expect("setpriv");
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("insufficient privileges"), "{e}");
    }
    assert_eq!(cpus_allowed(a.pid()), before);
}

#[test]
fn top_once_json_reports_a_busy_loop() {
    let _g = serial();
    let a = Busy::spawn();
    let out = Command::new(BIN)
        .args([
            "top",
            "--once",
            "--json",
            "--interval",
            "300ms",
            "--targets",
        ])
        .arg(format!("pid:{}", a.pid()))
        .output()
        .expect("top");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let t = &v["tasks"][0];
    assert_eq!(t["pid"].as_u64(), Some(a.pid() as u64));
    let cpu = t["cpu_percent"].as_f64().expect("cpu_percent");
    assert!(cpu > 5.0 && cpu < 105.0, "busy loop at {cpu} %");
    assert_eq!(v["unavailable"]["ipc"], "no hardware PMU");
    let e = run_fails(&["top", "--once", "--sort", "colour"]);
    assert!(e.contains("colour"), "{e}");
}

#[test]
fn sim_source_runs_the_same_loop() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/masa-testcase1.toml"
    );
    if !Path::new(scenario).exists() {
        return;
    }
    let out = Command::new(BIN)
        .args([
            "agent",
            "--policy",
            "spread",
            "--interval",
            "20ms",
            "--max-intervals",
            "3",
        ])
        .args(["--log-json", "--source"])
        .arg(format!("sim:{scenario}"))
        .output()
        .expect("agent sim");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let decisions = err
        .lines()
        .filter(|l| l.contains("\"event\":\"decision\""))
        .count();
    // Four shells on 2 packages x 2 HT: spread gives each its own CPU.
    assert_eq!(decisions, 4, "{err}");
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--source",
        "sim:/no/such.toml",
    ]);
    assert!(e.contains("/no/such.toml"), "{e}");
    let e = run_fails(&["agent", "--policy", "spread", "--source", "cloud"]);
    assert!(e.contains("cloud"), "{e}");
}

#[test]
fn decisions_are_logged_as_structured_events() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let targets = format!("pid:{},{}", a.pid(), b.pid());
    let run = |json: bool| {
        let mut cmd = Command::new(BIN);
        // A low hunger threshold: on a loaded machine the loops may get well under half a CPU.
        cmd.args(["agent", "--policy", "spread", "--dry-run", "--interval"])
            .args([
                "200ms",
                "--max-intervals",
                "2",
                "--hungry-cpus",
                "0.02",
                "--foreign-cpus",
                "2",
            ])
            .args(["--targets", &targets]);
        if json {
            cmd.arg("--log-json");
        }
        let out = cmd.output().expect("agent");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = run(true);
    let events: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(events[0]["event"], "start", "{err}");
    let decisions: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["event"] == "decision").collect();
    assert!(!decisions.is_empty(), "no decision logged: {err}");
    for d in &decisions {
        let task = d["task"].as_u64().expect("task");
        assert!(task == a.pid() as u64 || task == b.pid() as u64, "{d}");
        assert_eq!(d["policy"], "spread", "{d}");
        assert_eq!(d["dry_run"], true, "{d}");
        assert_eq!(d["applied"], false, "{d}");
        assert_eq!(d["from"].as_str(), Some(online().as_str()), "{d}");
        let to = d["to"].as_str().expect("to");
        assert!(!to.is_empty() && to != online(), "{d}");
        assert!(matches!(d["interval"].as_u64(), Some(1 | 2)), "{d}");
        assert!(
            d["reason"].as_str().is_some_and(|r| r.contains("spread")),
            "{d}"
        );
    }
    // The default format is one human-readable line per event, same fields.
    let err = run(false);
    let line = err
        .lines()
        .find(|l| l.contains("event=\"decision\""))
        .unwrap_or_else(|| panic!("no decision line: {err}"));
    assert!(serde_json::from_str::<serde_json::Value>(line).is_err());
    assert!(
        line.contains("dry_run=true") && line.contains("to="),
        "{line}"
    );
    // Dry run: nothing changed.
    assert_eq!((cpus_allowed(a.pid()), cpus_allowed(b.pid())), before);
}

// ---- Issue 18: nothing panics, nothing is left changed ----

/// A pipe as (read end, write end).
fn pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we pass.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2");
    // SAFETY: both descriptors are fresh and owned by nobody else.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

/// A pipe whose read end is already closed: writing to it fails with EPIPE (or SIGPIPE).
fn closed_pipe() -> std::os::fd::OwnedFd {
    let (r, w) = pipe();
    drop(r);
    w
}

/// Every command (but `stat`, which ends its counted command on EPIPE itself) ends quietly when
/// its stdout or stderr is a closed pipe: no panic, never status 101.
#[test]
fn closed_stdout_or_stderr_never_panics() {
    let cmds: Vec<Vec<&str>> = vec![
        vec!["metrics"],
        vec!["topology"],
        vec!["topology", "--json"],
        vec!["--help"],
        vec!["--version"],
        vec!["agent", "--help"],
        vec!["simulate", "/no/such/scenario.toml"],
        vec!["top", "--once", "--interval", "50ms", "--targets", "pid:1"],
        vec!["experiment", "--help"],
        vec!["burn", "--kind", "int", "--seconds", "0.05"],
        vec!["burn", "--kind", "int", "--seconds", "0.05", "--json"],
        vec!["calibrate", "--help"],
        vec!["bench", "--help"],
        vec!["agent-overhead", "--help"],
        vec!["lockprof", "--help"],
        vec!["no-such-command"],
        vec!["agent", "--policy", "nope"],
        vec!["agent", "--policy", "spread", "--interval", "1e300s"],
    ];
    for args in &cmds {
        for closed in ["stdout", "stderr"] {
            let mut cmd = Command::new(BIN);
            cmd.args(args).stdin(Stdio::null());
            if closed == "stdout" {
                cmd.stdout(closed_pipe()).stderr(Stdio::null());
            } else {
                cmd.stdout(Stdio::null()).stderr(closed_pipe());
            }
            let status = cmd.status().expect("run");
            assert_ne!(
                status.code(),
                Some(101),
                "{args:?} with a closed {closed} panicked"
            );
        }
        // And with both open, no panic message either.
        let out = Command::new(BIN).args(args).output().expect("run");
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("panicked"),
            "{args:?}"
        );
    }
}

fn agent_cmd(policy: &str, targets: &str, journal: &Path) -> Command {
    agent_cmd_every(policy, "100ms", targets, journal)
}

fn agent_cmd_every(policy: &str, interval: &str, targets: &str, journal: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["agent", "--policy", policy, "--interval", interval]);
    // The baseline moves no task, and the agent refuses a hold-back it would ignore.
    if policy != "linux" {
        cmd.args(["--min-residency", "1"]);
    }
    cmd.args(["--targets", targets, "--journal"]).arg(journal);
    if policy == "spread" {
        cmd.args(["--hungry-cpus", "0.02", "--foreign-cpus", "2"]);
    }
    cmd
}

/// The agent's log is a pipe whose reader goes away after the agent pinned its targets: the
/// agent notices, restores every affinity and exits (not killed by SIGPIPE, no panic).
#[test]
fn agent_under_a_closed_stderr_restores() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let (reader, writer) = pipe();
    let mut agent = Kill(
        agent_cmd("spread", &format!("pid:{},{}", a.pid(), b.pid()), &journal)
            .stderr(writer)
            .spawn()
            .expect("agent"),
    );
    // The pipe's write end now lives only in the agent.
    assert!(
        wait_until(Duration::from_secs(60), || pinned_apart(a.pid(), b.pid())),
        "not pinned"
    );
    drop(reader);
    let mut status = None;
    assert!(
        wait_until(Duration::from_secs(60), || {
            status = agent.0.try_wait().ok().flatten();
            status.is_some()
        }),
        "the agent went on with nobody reading its log"
    );
    let status = status.expect("status");
    assert_ne!(status.code(), Some(101), "{status:?}");
    assert!(status.code().is_some(), "killed by a signal: {status:?}");
    assert_eq!((cpus_allowed(a.pid()), cpus_allowed(b.pid())), before);
    assert_eq!(
        fs::read(&journal).expect("journal").len(),
        0,
        "journal cleared"
    );
}

/// Every catchable terminating signal ends the agent through the restore path.
#[test]
fn every_terminating_signal_restores() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let targets = format!("pid:{},{}", a.pid(), b.pid());
    for sig in [
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGPIPE,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
    ] {
        let log = dir.path().join(format!("log{sig}"));
        let mut agent = Kill(
            agent_cmd("spread", &targets, &journal)
                .arg("--log-json")
                .stderr(fs::File::create(&log).expect("log"))
                .spawn()
                .expect("agent"),
        );
        assert!(
            wait_until(Duration::from_secs(60), || pinned_apart(a.pid(), b.pid())),
            "signal {sig}: not pinned"
        );
        signal(agent.pid(), sig);
        let status = agent.0.wait().expect("wait");
        assert!(status.success(), "signal {sig}: {status:?}");
        assert_eq!(
            (cpus_allowed(a.pid()), cpus_allowed(b.pid())),
            before,
            "signal {sig} left affinities changed"
        );
        let text = fs::read_to_string(&log).expect("log");
        let last: serde_json::Value =
            serde_json::from_str(text.lines().last().expect("a line")).expect("json");
        assert_eq!(last["event"], "restored", "{text}");
        assert_eq!(last["restored"], 2, "{text}");
        assert!(
            last["signal"]
                .as_str()
                .is_some_and(|s| s.starts_with("SIG")),
            "{last}"
        );
    }
}

#[test]
fn journal_must_be_a_regular_file_locked_by_its_real_path() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Busy::spawn();
    let t = format!("pid:{}", a.pid());
    // /dev/null is refused and stays a device.
    let e = run_fails(&[
        "agent",
        "--policy",
        "linux",
        "--targets",
        &t,
        "--journal",
        "/dev/null",
    ]);
    assert!(
        e.contains("/dev/null") && e.contains("not a regular file"),
        "{e}"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::metadata("/dev/null")
        .expect("meta")
        .file_type()
        .is_char_device());
    // A second agent through a symlink to the first one's journal refuses to start.
    let real = dir.path().join("real.journal");
    let link = dir.path().join("link.journal");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let mut first = Kill(
        agent_cmd("linux", &t, &real)
            .stderr(Stdio::null())
            .spawn()
            .expect("agent"),
    );
    assert!(wait_until(Duration::from_secs(60), || journal_locked(
        &real
    )));
    let e = run_fails(&[
        "agent",
        "--policy",
        "linux",
        "--targets",
        &t,
        "--journal",
        link.to_str().expect("utf8"),
    ]);
    assert!(e.contains("another agent"), "{e}");
    assert!(fs::symlink_metadata(&link)
        .expect("meta")
        .file_type()
        .is_symlink());
    signal(first.pid(), libc::SIGTERM);
    assert!(first.0.wait().expect("wait").success());
    // Version 99 is refused; a corrupt journal is named once.
    let j = dir.path().join("v99");
    fs::write(&j, r#"{"version": 99, "threads": {}}"#).expect("write");
    let e = run_fails(&[
        "agent",
        "--restore-only",
        "--journal",
        j.to_str().expect("utf8"),
    ]);
    assert!(e.contains("version 99"), "{e}");
    // A journal that does not exist (a typo after a crash) is refused, and not created.
    let typo = dir.path().join("typo.journal");
    let e = run_fails(&[
        "agent",
        "--restore-only",
        "--journal",
        typo.to_str().expect("utf8"),
    ]);
    assert!(
        e.contains("does not exist") && e.contains("typo.journal"),
        "{e}"
    );
    assert!(!typo.exists(), "--restore-only created {}", typo.display());
    fs::write(&j, "garbage\n").expect("write");
    let e = run_fails(&[
        "agent",
        "--restore-only",
        "--journal",
        j.to_str().expect("utf8"),
    ]);
    assert_eq!(e.matches("corrupt").count(), 1, "{e}");
    assert_eq!(e.matches("v99").count(), 1, "{e}");
}

#[test]
fn smaller_input_checks() {
    let e = run_fails(&["agent", "--policy", "spread", "--interval", "1e300s"]);
    assert!(e.contains("too large") && !e.contains("at least"), "{e}");
    let e = run_fails(&["top", "--once", "--interval", "1e300s"]);
    assert!(e.contains("too large"), "{e}");
    let dir = tempfile::tempdir().expect("tempdir");
    let j = dir.path().join("j");
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--targets",
        "pid:999999999",
        "--journal",
        j.to_str().expect("utf8"),
    ]);
    assert!(
        e.contains("no such process") && e.contains("999999999"),
        "{e}"
    );
    assert!(!j.exists(), "nothing created for a refused start");
}

fn thread_cpus(pid: u32, tid: u32) -> Option<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// A busy Python process with one idle thread from the start (its id in `out.ready`) that,
/// once pinned, starts a thread and a child process (both inherit the pinned set) and writes
/// "TID CHILD_PID" to `out`.
const SPAWNER: &str = r#"
import os, sys, threading, subprocess, time
out = sys.argv[1]
orig = os.sched_getaffinity(0)
def idle():
    while True:
        time.sleep(0.01)
early = threading.Thread(target=idle, daemon=True)
early.start()
with open(out + ".ready.tmp", "w") as f:
    f.write(f"{early.native_id}\n")
os.rename(out + ".ready.tmp", out + ".ready")
while os.sched_getaffinity(0) == orig:
    pass
t = threading.Thread(target=idle, daemon=True)
t.start()
child = subprocess.Popen(["sleep", "120"])
with open(out + ".tmp", "w") as f:
    f.write(f"{t.native_id} {child.pid}\n")
os.rename(out + ".tmp", out)
while True:
    pass
"#;

fn spawner(out: &Path) -> Option<Kill> {
    Command::new("python3")
        .args(["-c", SPAWNER])
        .arg(out)
        .spawn()
        .ok()
        .map(Kill)
}

/// Threads and children created after the agent pinned a process are journaled and restored:
/// once through SIGTERM (the agent's own sweep), once through SIGKILL + `--restore-only` (the
/// sweep at restore), and once with the process named by one of its threads' ids (as `top -H`
/// or `ps -L` show them), which stands for the process: until session 27 the agent pinned the
/// process but adopted nothing, and the threads born later stayed pinned after it stopped.
#[test]
fn threads_and_children_born_pinned_are_restored() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    for (kill, by_thread) in [
        (libc::SIGTERM, false),
        (libc::SIGKILL, false),
        (libc::SIGTERM, true),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = dir.path().join("j");
        let ids = dir.path().join("ids");
        let Some(p) = spawner(&ids) else {
            eprintln!("skipped: no python3");
            return;
        };
        let q = Busy::spawn();
        let original = cpus_allowed(p.pid());
        // The spawner must know its original set before the agent may change it.
        assert!(wait_until(Duration::from_secs(60), || dir
            .path()
            .join("ids.ready")
            .exists()));
        let early: u32 = fs::read_to_string(dir.path().join("ids.ready"))
            .expect("ready")
            .trim()
            .parse()
            .expect("early thread id");
        let named = if by_thread { early } else { p.pid() };
        let log = dir.path().join("log");
        let mut agent = Kill(
            agent_cmd("spread", &format!("pid:{named},{}", q.pid()), &journal)
                .arg("--log-json")
                .stderr(fs::File::create(&log).expect("log"))
                .spawn()
                .expect("agent"),
        );
        assert!(
            wait_until(Duration::from_secs(60), || ids.exists()),
            "the spawner was never pinned"
        );
        let text = fs::read_to_string(&ids).expect("ids");
        let mut it = text
            .split_whitespace()
            .map(|v| v.parse::<u32>().expect("id"));
        let (tid, child) = (it.next().expect("tid"), it.next().expect("child"));
        assert_ne!(
            thread_cpus(p.pid(), tid).as_deref(),
            Some(original.as_str())
        );
        assert_ne!(cpus_allowed(child), original);
        if kill == libc::SIGTERM {
            // The per-interval sweep journals them while the agent runs.
            assert!(
                wait_until(Duration::from_secs(60), || fs::read_to_string(&journal)
                    .is_ok_and(|j| j.contains(&format!("\"{child}\"")))),
                "the child was never journaled"
            );
            // The sweep saves the journal first and logs the adoption after: wait for the line
            // too, or a loaded machine shows the gap between the two writes.
            let adopted = wait_until(Duration::from_secs(60), || {
                fs::read_to_string(&log).is_ok_and(|l| l.contains("\"event\":\"adopted\""))
            });
            let l = fs::read_to_string(&log).expect("log");
            assert!(adopted, "{l}");
        }
        if by_thread {
            let l = fs::read_to_string(&log).expect("log");
            assert!(
                l.contains(&format!(
                    "pid:{early} is a thread of process {}: the agent watches the process",
                    p.pid()
                )),
                "{l}"
            );
        }
        signal(agent.pid(), kill);
        let _ = agent.0.wait();
        if kill == libc::SIGKILL {
            let out = Command::new(BIN)
                .args(["agent", "--restore-only", "--journal"])
                .arg(&journal)
                .output()
                .expect("restore-only");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let now = (
            cpus_allowed(p.pid()),
            thread_cpus(p.pid(), early),
            thread_cpus(p.pid(), tid),
            cpus_allowed(child),
        );
        signal(child, libc::SIGKILL);
        assert_eq!(
            now,
            (
                original.clone(),
                Some(original.clone()),
                Some(original.clone()),
                original.clone()
            ),
            "after {kill} (named by a thread id: {by_thread}): process, first thread, new \
             thread, new child"
        );
    }
}

/// Someone else re-pins a task after the agent did: the agent notices, records it, says so,
/// never moves that task again, and does not restore over it.
#[test]
fn a_task_the_user_repinned_is_left_alone() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    let log = dir.path().join("log");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let b_before = cpus_allowed(b.pid());
    let mut agent = Kill(
        agent_cmd("spread", &format!("pid:{},{}", a.pid(), b.pid()), &journal)
            .arg("--log-json")
            .stderr(fs::File::create(&log).expect("log"))
            .spawn()
            .expect("agent"),
    );
    assert!(wait_until(Duration::from_secs(60), || pinned_apart(
        a.pid(),
        b.pid()
    )));
    let theirs = if cpus_allowed(a.pid()) == "0" {
        "1"
    } else {
        "0"
    };
    let ok = Command::new("taskset")
        .args(["-pc", theirs, &a.pid().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return; // no taskset here
    }
    assert!(
        wait_until(Duration::from_secs(60), || fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("\"event\":\"user_override\""))),
        "override never reported"
    );
    assert!(fs::read_to_string(&journal)
        .expect("journal")
        .contains("user_set"));
    // Several more intervals: the agent must not move A back (spread wants A and B apart, and
    // they now share a CPU, so it may move B, never A).
    sleep(Duration::from_millis(600));
    assert_eq!(cpus_allowed(a.pid()), theirs, "the agent overrode the user");
    signal(agent.pid(), libc::SIGTERM);
    assert!(agent.0.wait().expect("wait").success());
    assert_eq!(
        cpus_allowed(a.pid()),
        theirs,
        "restored over the user's choice"
    );
    assert_eq!(cpus_allowed(b.pid()), b_before, "B not restored");
    let l = fs::read_to_string(&log).expect("log");
    let moved_a_after = l
        .lines()
        .skip_while(|x| !x.contains("user_override"))
        .filter(|x| {
            x.contains("\"event\":\"decision\"") && x.contains(&format!("\"task\":{}", a.pid()))
        })
        .count();
    assert_eq!(moved_a_after, 0, "{l}");
}

// ---- Fault injection: kill the agent anywhere, restart, nothing is left changed ----

/// splitmix64: a seeded, dependency-free generator (the run is reproducible from its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const FAULT_SIGNALS: &[(libc::c_int, &str)] = &[
    (libc::SIGTERM, "TERM"),
    (libc::SIGINT, "INT"),
    (libc::SIGHUP, "HUP"),
    (libc::SIGQUIT, "QUIT"),
    (libc::SIGUSR1, "USR1"),
    (libc::SIGUSR2, "USR2"),
    (libc::SIGALRM, "ALRM"),
    (libc::SIGPIPE, "PIPE"),
    (libc::SIGXCPU, "XCPU"),
    (libc::SIGXFSZ, "XFSZ"),
    (libc::SIGVTALRM, "VTALRM"),
    (libc::SIGPROF, "PROF"),
];

#[derive(Debug, Default)]
struct FaultReport {
    iterations: usize,
    signals: std::collections::BTreeMap<&'static str, usize>,
    torn_writes: usize,
    /// Torn-write runs where the agent did die inside the write.
    torn_crashed: usize,
    user_repins: usize,
    /// Runs where the agent had changed affinities when the signal came.
    pinned_at_kill: usize,
    wrong_affinities: usize,
    corrupt_journals: usize,
    hangs: usize,
}

fn set_affinity(pid: u32, list: &str) -> bool {
    Command::new("taskset")
        .args(["-pc", list, &pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Start the agent (spread, 50 ms interval) on two busy loops, end it with a random signal at a
/// random point (SIGKILL in 40 % of the runs, or a crash inside the N-th journal write through
/// the test hook), sometimes after a "user" re-pinned one loop, then run `--restore-only` and
/// compare every affinity with what it must be. Returns the tally.
fn fault_run(iterations: usize, seed: u64) -> FaultReport {
    let mut rng = Rng(seed);
    let mut rep = FaultReport::default();
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("agent.journal");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let original = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let targets = format!("pid:{},{}", a.pid(), b.pid());
    for _ in 0..iterations {
        rep.iterations += 1;
        let mut cmd = agent_cmd_every("spread", "50ms", &targets, &journal);
        cmd.stderr(Stdio::null());
        let torn = rng.below(4) == 0;
        if torn {
            // Saves 1..4: the first pin's before/after records of either loop.
            let k = 1 + rng.below(4);
            cmd.env("COUNTERPOINT_TEST_TORN_WRITE", k.to_string());
            rep.torn_writes += 1;
        }
        let mut agent = Kill(cmd.spawn().expect("agent"));
        // Every draw is made whatever happens, so the run's choices depend on the seed alone.
        let delay_ms = rng.below(1200);
        let repin = rng.below(4) == 0;
        let repin_wait_ms = rng.below(200);
        let sig = if rng.below(10) < 4 {
            (libc::SIGKILL, "KILL")
        } else {
            FAULT_SIGNALS[rng.below(FAULT_SIGNALS.len() as u64) as usize]
        };
        let mut expected = original.clone();
        if torn {
            // The agent kills itself inside a journal write; if the write never comes, end it
            // (with SIGTERM, so the tally below counts only the hook's crashes).
            let mut st = None;
            if !wait_until(Duration::from_secs(5), || {
                st = st.or_else(|| agent.0.try_wait().ok().flatten());
                st.is_some()
            }) {
                signal(agent.pid(), libc::SIGTERM);
            }
            use std::os::unix::process::ExitStatusExt;
            if st.and_then(|s| s.signal()) == Some(libc::SIGKILL) {
                rep.torn_crashed += 1;
            }
        } else {
            sleep(Duration::from_millis(delay_ms));
            if repin && cpus_allowed(a.pid()) != original.0 {
                // The user's own choice, after the agent's: it must survive.
                let theirs = if cpus_allowed(a.pid()) == "0" {
                    "1"
                } else {
                    "0"
                };
                if set_affinity(a.pid(), theirs) {
                    expected.0 = theirs.to_string();
                    rep.user_repins += 1;
                    // Let the agent see it (or not): both must end the same way.
                    sleep(Duration::from_millis(repin_wait_ms));
                }
            }
            if pinned_apart(a.pid(), b.pid()) || expected.0 != original.0 {
                rep.pinned_at_kill += 1;
            }
            signal(agent.pid(), sig.0);
            *rep.signals.entry(sig.1).or_default() += 1;
        }
        let mut status = None;
        let exited = wait_until(Duration::from_secs(60), || {
            status = status.or_else(|| agent.0.try_wait().ok().flatten());
            status.is_some()
        });
        if !exited {
            rep.hangs += 1;
            // Say where it is stuck before it is killed: the state and kernel wait channel of
            // each of its threads.
            let pid = agent.pid();
            let mut where_ = String::new();
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for t in tasks.flatten() {
                    let p = t.path();
                    let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
                    let wchan = std::fs::read_to_string(p.join("wchan")).unwrap_or_default();
                    let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
                    where_.push_str(&format!(
                        "[{} {} state {} wchan {}] ",
                        t.file_name().to_string_lossy(),
                        comm.trim(),
                        stat.rsplit(')')
                            .next()
                            .unwrap_or("")
                            .split_whitespace()
                            .next()
                            .unwrap_or("?"),
                        wchan.trim()
                    ));
                }
            }
            eprintln!(
                "hang: agent {pid} did not exit 20 s after signal {} (torn {torn}, delay {delay_ms} ms): {where_}",
                sig.1
            );
        }

        drop(agent);
        // An agent ended before it opened its journal changed nothing and left no journal:
        // `--restore-only` refuses a missing one (a wrong path), so there is nothing to run.
        let out = Command::new(BIN)
            .args(["agent", "--restore-only", "--journal"])
            .arg(&journal)
            .output()
            .expect("restore-only");
        let err = String::from_utf8_lossy(&out.stderr);
        let missing = !journal.exists() && err.contains("does not exist");
        if (!out.status.success() && !missing) || err.contains("corrupt") {
            rep.corrupt_journals += 1;
            eprintln!("restore-only failed: {err}");
        }
        let now = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
        if now.0 != expected.0 {
            rep.wrong_affinities += 1;
            eprintln!(
                "A is {} but must be {} (signal {}, torn {torn})",
                now.0, expected.0, sig.1
            );
        }
        if now.1 != expected.1 {
            rep.wrong_affinities += 1;
            eprintln!(
                "B is {} but must be {} (signal {}, torn {torn})",
                now.1, expected.1, sig.1
            );
        }
        // The next iteration starts from the originals.
        set_affinity(a.pid(), &original.0);
        set_affinity(b.pid(), &original.1);
    }
    rep
}

fn check_fault_run(iterations: usize) {
    let _g = serial();
    if !two_cpus() || !Path::new("/usr/bin/taskset").exists() {
        eprintln!("skipped: needs two CPUs and taskset");
        return;
    }
    let seed = std::env::var("COUNTERPOINT_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0018);
    let rep = fault_run(iterations, seed);
    eprintln!(
        "fault injection (seed {seed:#x}): {} iterations, signals {:?}, torn journal writes {} \
         ({} crashed mid-write), user re-pins {}, pinned when signalled {}, wrong affinities {}, corrupt journals {}, \
         hangs {}",
        rep.iterations,
        rep.signals,
        rep.torn_writes,
        rep.torn_crashed,
        rep.user_repins,
        rep.pinned_at_kill,
        rep.wrong_affinities,
        rep.corrupt_journals,
        rep.hangs
    );
    assert_eq!(rep.wrong_affinities, 0, "{rep:?}");
    assert_eq!(rep.corrupt_journals, 0, "{rep:?}");
    assert_eq!(rep.hangs, 0, "{rep:?}");
    // The run exercised something: the agent had pinned tasks when most signals came.
    assert!(rep.pinned_at_kill > 0, "{rep:?}");
}

/// The suite's short run (20 iterations; `COUNTERPOINT_FAULT_ITERATIONS` changes it).
#[test]
fn fault_injection_short() {
    let n = std::env::var("COUNTERPOINT_FAULT_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    check_fault_run(n);
}

/// The full run: `cargo test -p counterpoint --test agent -- --ignored fault_injection_full
/// --nocapture`.
#[test]
#[ignore]
fn fault_injection_full() {
    check_fault_run(200);
}

/// A small tmpfs mounted for one test, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    /// Fill it until the kernel says ENOSPC (again: space freed since is taken too).
    fn fill(&self) {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.0.join("filler"))
            .expect("filler");
        let block = [0u8; 4096];
        while f.write_all(&block).is_ok() {}
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// On a full disk: an agent that already pinned its targets still restores them, and clearing
/// the journal (a truncation) is not a failure; an agent whose first journal write fails
/// changes nothing and says the journal could not be written, never that restoring failed.
#[test]
fn full_disk_restores_and_never_says_restoring_failed() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(fs_) = Tmpfs::mount(dir.path(), "256k") else {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    };
    let journal = dir.path().join("j");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    let targets = format!("pid:{},{}", a.pid(), b.pid());
    let out_log = tempfile::NamedTempFile::new().expect("log");
    let mut agent = Kill(
        agent_cmd("spread", &targets, &journal)
            .stderr(out_log.reopen().expect("log"))
            .spawn()
            .expect("agent"),
    );
    assert!(wait_until(Duration::from_secs(60), || pinned_apart(
        a.pid(),
        b.pid()
    )));
    fs_.fill();
    signal(agent.pid(), libc::SIGTERM);
    let status = agent.0.wait().expect("wait");
    let log = fs::read_to_string(out_log.path()).expect("log");
    assert!(status.success(), "{status:?}: {log}");
    assert_eq!(
        (cpus_allowed(a.pid()), cpus_allowed(b.pid())),
        before,
        "{log}"
    );
    assert!(
        !log.contains("clear_failed") && !log.contains("could not be restored"),
        "{log}"
    );
    assert_eq!(fs::read(&journal).expect("journal").len(), 0);
    // Full from the start (the journal's freed page taken too): the first record cannot be
    // written, so nothing is changed. Bounded, should the write succeed after all.
    fs_.fill();
    let out = agent_cmd("spread", &targets, &journal)
        .args(["--max-intervals", "30"])
        .output()
        .expect("agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let last = err
        .lines()
        .find(|l| l.starts_with("counterpoint: error:"))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert_eq!(last.matches("No space left").count(), 1, "{last}");
    assert!(last.contains("cannot write it"), "{last}");
    assert!(
        !err.contains("could not be restored") && !err.contains("panicked"),
        "{err}"
    );
    assert_eq!((cpus_allowed(a.pid()), cpus_allowed(b.pid())), before);
}

/// A panic inside the loop (a policy bug, here the test hook) still restores every affinity.
#[test]
fn a_panic_in_the_loop_still_restores() {
    let _g = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let before = (cpus_allowed(a.pid()), cpus_allowed(b.pid()));
    // Several intervals in, so spread has pinned the two loops (or the run says so below).
    let out = agent_cmd("spread", &format!("pid:{},{}", a.pid(), b.pid()), &journal)
        .env("COUNTERPOINT_TEST_PANIC_AT_INTERVAL", "30")
        .arg("--log-json")
        .output()
        .expect("agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the agent loop panicked"), "{err}");
    assert!(
        err.contains("\"event\":\"decision\""),
        "nothing was pinned: {err}"
    );
    assert!(err.contains("\"event\":\"restored\""), "{err}");
    assert_eq!((cpus_allowed(a.pid()), cpus_allowed(b.pid())), before);
    assert_eq!(fs::read(&journal).expect("journal").len(), 0);
}

/// When every process `pid:` listed has exited, the agent says so, restores and exits 0 by
/// itself (it used to run on, watching nothing, until a signal).
#[test]
fn agent_ends_when_its_pid_targets_are_gone() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j");
    // `cat` ends when its stdin closes: the test decides when, not a clock.
    let mut target = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn cat");
    let pid = target.id();
    let mut agent = Kill(
        Command::new(BIN)
            .args(["agent", "--policy", "spread", "--interval", "100ms"])
            .args([
                "--log-json",
                "--targets",
                &format!("pid:{pid}"),
                "--journal",
            ])
            .arg(&journal)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent"),
    );
    // Let it start (its journal is created before the loop; 30 s is a hang guard, not a
    // timing claim), then end the target. Not reaped: a zombie counts as gone too.
    assert!(wait_until(Duration::from_secs(30), || journal.exists()));
    drop(target.stdin.take());
    // A hang guard, not a timing assertion: the agent must end on its own.
    let ended = wait_until(Duration::from_secs(60), || {
        matches!(agent.0.try_wait(), Ok(Some(_)))
    });
    assert!(ended, "the agent kept running after its only target exited");
    let status = agent.0.wait().expect("wait agent");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut agent.0.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(err.contains("\"targets_gone\""), "{err}");
    assert!(err.contains("\"restored\""), "{err}");
    let _ = target.wait();
}

/// A `pid:` list of kernel threads only (kthreadd is pid 2 on Linux) has nothing to place.
#[test]
fn agent_refuses_kernel_thread_targets() {
    let comm = fs::read_to_string("/proc/2/comm").unwrap_or_default();
    if comm.trim() != "kthreadd" {
        eprintln!("skipped: pid 2 is not kthreadd here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let j = dir.path().join("j");
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--targets",
        "pid:2",
        "--journal",
        j.to_str().expect("utf8"),
    ]);
    assert!(e.contains("kernel thread") && e.contains("(2)"), "{e}");
    assert!(!j.exists(), "nothing created for a refused start");
}

/// The missing-policy message lists only what the agent can run (never `oracle`, which needs
/// the simulator's cost), and a calibration table for a policy that reads none is refused.
#[test]
fn policy_list_and_ignored_options_are_refused_honestly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let j = dir.path().join("j");
    let j = j.to_str().expect("utf8");
    let e = run_fails(&["agent", "--journal", j, "--dry-run"]);
    assert!(
        e.contains("--policy is required") && e.contains("spread"),
        "{e}"
    );
    assert!(!e.contains("oracle"), "{e}");
    assert!(
        !e.contains("bus-pair,") && !e.contains("ipc-pair,"),
        "pick-next hooks: {e}"
    );
    // An unknown name (or one only the simulator runs) is refused with the same list.
    for asked in ["nosuch", "oracle", "bus-pair"] {
        let e = run_fails(&["agent", "--policy", asked, "--journal", j, "--dry-run"]);
        let listed = e.trim().rsplit(": ").next().unwrap_or("");
        assert!(listed.contains("spread"), "{asked}: {e}");
        assert!(!listed.contains("oracle"), "{asked}: {e}");
        assert!(
            !listed.contains("bus-pair,") && !listed.contains("ipc-pair,"),
            "{asked}: pick-next hooks: {e}"
        );
    }
    let e = run_fails(&[
        "agent",
        "--policy",
        "spread",
        "--masa-calibration",
        "paper",
        "--dry-run",
        "--journal",
        j,
    ]);
    assert!(
        e.contains("--masa-calibration") && e.contains("\"spread\"") && e.contains("masa"),
        "{e}"
    );
    assert!(!std::path::Path::new(j).exists(), "nothing created");
}
