//! `top` and the agent counting through `counterpoint daemon` (`--daemon SOCKET`), and directly
//! when no broker answers. Nothing here asserts a time or a rate's size.

use counterpoint_broker::client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::Kill;

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let socket = dir.join("broker.sock");
        let child = Command::new(BIN)
            .args(["daemon", "--socket"])
            .arg(&socket)
            .stderr(Stdio::null())
            .spawn()
            .expect("start daemon");
        let deadline = Instant::now() + Duration::from_secs(60);
        while Client::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "daemon did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, socket }
    }

    /// Registrations the broker holds now.
    fn registrations(&self) -> usize {
        let mut c = Client::connect(&self.socket).expect("connect");
        match c.status().expect("status") {
            counterpoint_broker::proto::Response::Status { registrations, .. } => {
                registrations.len()
            }
            other => panic!("{other:?}"),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sleeper() -> Kill {
    Kill(
        Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep"),
    )
}

fn top_json(pid: u32, daemon: &Path) -> (serde_json::Value, String) {
    let out = Command::new(BIN)
        .args([
            "top",
            "--once",
            "--json",
            "--interval",
            "100ms",
            "--targets",
        ])
        .arg(format!("pid:{pid}"))
        .arg("--daemon")
        .arg(daemon)
        .output()
        .expect("top");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().expect("one JSON document");
    (serde_json::from_str(line).expect("JSON"), err)
}

#[test]
fn top_counts_through_the_daemon_and_directly_without_one() {
    let d = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(d.path());
    let target = sleeper();
    let (doc, _) = top_json(target.pid(), &daemon.socket);
    let src = &doc["counter_source"];
    assert_eq!(src["kind"], "broker", "{doc}");
    let via = src["via"].as_str().unwrap();
    assert!(via.contains(daemon.socket.to_str().unwrap()), "{via}");
    assert!(src["perf_threads"].as_u64().unwrap() >= 1, "{doc}");
    assert_eq!(src["proc_threads"], 0, "{doc}");
    let rows = doc["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{doc}");
    let row = &rows[0];
    assert_eq!(row["pid"], target.pid());
    assert_eq!(row["comm"], "sleep");
    let cpu = row["cpu_percent"].as_f64().unwrap();
    assert!((0.0..=100.0 * 64.0).contains(&cpu), "{row}");
    assert!(row["context_switches_per_s"].as_f64().unwrap() >= 0.0);
    assert!(row["migrations_per_s"].as_f64().is_some(), "{row}");
    assert_eq!(row["counted_fraction"], 1.0);
    // top unregistered everything when it exited.
    assert_eq!(daemon.registrations(), 0);

    // No broker at the socket: direct, and said so.
    let none = d.path().join("none.sock");
    let (doc, err) = top_json(target.pid(), &none);
    assert_eq!(doc["counter_source"]["kind"], "direct", "{doc}");
    assert_eq!(doc["counter_source"]["via"], "perf_event", "{doc}");
    assert!(err.contains("counting directly (no broker"), "{err}");
    assert_eq!(doc["tasks"].as_array().unwrap().len(), 1, "{doc}");
}

#[test]
fn top_text_says_where_it_counts() {
    let d = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(d.path());
    let target = sleeper();
    let out = Command::new(BIN)
        .args(["top", "--once", "--interval", "100ms", "--targets"])
        .arg(format!("pid:{}", target.pid()))
        .arg("--daemon")
        .arg(&daemon.socket)
        .output()
        .expect("top");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    let line = text
        .lines()
        .find(|l| l.starts_with("counters: "))
        .unwrap_or_else(|| panic!("no counters line: {text}"));
    assert!(line.starts_with("counters: broker at "), "{line}");
}

fn agent_events(pid: u32, daemon: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(BIN)
        .args(["agent", "--policy", "spread", "--dry-run", "--log-json"])
        .args(["--interval", "100ms", "--max-intervals", "2", "--targets"])
        .arg(format!("pid:{pid}"))
        .arg("--daemon")
        .arg(daemon)
        .output()
        .expect("agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    err.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn agent_dry_run_counts_through_the_daemon_or_directly() {
    let d = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(d.path());
    let target = sleeper();
    let events = agent_events(target.pid(), &daemon.socket);
    let start = events
        .iter()
        .find(|e| e["event"] == "start")
        .expect("start event");
    let counters = start["counters"].as_str().unwrap();
    assert!(counters.starts_with("broker at "), "{start}");
    assert!(start["perf_threads"].as_u64().unwrap() >= 1, "{start}");
    assert_eq!(events.last().unwrap()["event"], "stopped");
    assert_eq!(daemon.registrations(), 0);

    let none = d.path().join("none.sock");
    let events = agent_events(target.pid(), &none);
    assert_eq!(events[0]["event"], "no_broker", "{:?}", events[0]);
    let start = events.iter().find(|e| e["event"] == "start").unwrap();
    assert_eq!(start["counters"], "perf_event", "{start}");
}

/// The broker killed under a running agent: the agent counts on by itself and says so in its
/// log, once (CLI probe, session 27: its start line named the broker and nothing said it was
/// gone).
#[test]
fn agent_says_when_it_gives_the_broker_up() {
    let d = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(d.path());
    let target = sleeper();
    let log = d.path().join("log");
    let mut agent = Kill(
        Command::new(BIN)
            .args(["agent", "--policy", "spread", "--dry-run", "--log-json"])
            .args(["--interval", "100ms", "--targets"])
            .arg(format!("pid:{}", target.pid()))
            .arg("--daemon")
            .arg(&daemon.socket)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("agent"),
    );
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !read().contains("\"event\":\"start\"") {
        assert!(Instant::now() < deadline, "no start: {}", read());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !read().contains("\"event\":\"counters_fallback\"") {
        assert!(Instant::now() < deadline, "no fallback logged: {}", read());
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(agent.pid() as i32, libc::SIGTERM) };
    let _ = agent.0.wait();
    let text = read();
    assert_eq!(text.matches("counters_fallback").count(), 1, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("counters_fallback"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["level"], "WARN");
    assert_eq!(v["counters"], "perf_event");
    assert!(
        v["reason"].as_str().unwrap().starts_with("broker at "),
        "{v}"
    );
}
