//! The live host's per-thread counters on real processes: perf_event groups opened when a
//! thread appears and closed when it exits, counted fraction in the sample; and the `/proc`
//! fallback when perf_event is refused (an unprivileged user under perf_event_paranoid=2).

use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_host::{Host, TargetSpec};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{Busy, Kill};

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

/// A process holding `n` sleeping threads (plus its main thread) until killed.
fn hold_threads(n: u32) -> Kill {
    let mut c = Command::new(BIN)
        .args(["agent-overhead", "--hold-threads", &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn helper");
    let mut line = String::new();
    BufReader::new(c.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert_eq!(line.trim(), "ready");
    Kill(c)
}

/// perf_event descriptors this test process holds.
fn perf_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn perf_groups_follow_threads_and_report_counted_fraction() {
    if counterpoint_host::perf::availability().software.is_err() {
        eprintln!("skipped: perf_event refused here; the /proc path is tested below");
        return;
    }
    let (b, h) = (Busy::spawn(), hold_threads(3));
    let targets = TargetSpec::parse(&format!("pid:{},{}", b.0.id(), h.0.id())).expect("targets");
    let fds_before = perf_fds();
    let mut host = Host::new(targets, None).expect("host");
    // 1 + 4 threads, three software events each, each a descriptor.
    let src = host.counter_sources();
    assert_eq!((src.perf_threads, src.proc_threads), (5, 0), "{src:?}");
    assert_eq!(perf_fds() - fds_before, 15);
    let obs = host.advance(300_000_000).expect("advance");
    let t = obs
        .tasks
        .iter()
        .find(|t| t.id.0 == b.0.id() as u64)
        .expect("busy task");
    let run = t.sample.values[event::TASK_CLOCK];
    // A busy loop ran for some of the interval (how much depends on the load), never more than
    // all of it (one thread).
    // Over the task's own sample interval (since its last read, taken just before its
    // threads'), not the interval's clock, read before the `/proc` scan: a pause in between on
    // a loaded machine no longer counts as CPU time of the busy thread. (A pause between the
    // read time and the thread's read itself still could; 5 % is left for it.)
    let share = run.raw as f64 / t.sample.interval_ns as f64;
    assert!(share > 0.0 && share < 1.05, "task-clock share {share}");
    assert_eq!(run.counted_fraction(), 1.0);
    assert!(t.sample.values.contains_key(event::CPU_MIGRATIONS));
    assert!(
        !t.sample.values.contains_key(event::INSTRUCTIONS)
            || host.counted_events().contains(&event::INSTRUCTIONS)
    );
    let held = obs
        .tasks
        .iter()
        .find(|t| t.id.0 == h.0.id() as u64)
        .expect("helper task");
    assert!(held
        .sample
        .get(event::TASK_CLOCK)
        .is_some_and(|ns| ns < 0.1 * obs.interval_ns as f64));
    // The helper exits: its four groups are closed at the next interval.
    drop(h);
    host.advance(50_000_000).expect("advance");
    assert_eq!(host.counter_sources().perf_threads, 1);
    assert_eq!(perf_fds() - fds_before, 3);
    drop(host);
    assert_eq!(perf_fds(), fds_before);
}

#[test]
fn without_perf_event_the_proc_counters_are_used() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to run as nobody");
        return;
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    let b = Busy::spawn();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args([
            "top",
            "--once",
            "--json",
            "--interval",
            "300ms",
            "--targets",
        ])
        .arg(format!("pid:{}", b.0.id()))
        .output()
        .expect("setpriv");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    if paranoid >= 2 {
        // Kernel-mode counting of another user's (root's) task is refused at this level.
        assert_eq!(v["counter_source"]["perf_threads"], 0, "{v}");
        assert!(
            v["counter_source"]["perf_off"]
                .as_str()
                .is_some_and(|s| s.contains("task-clock") && s.contains("thread")),
            "{v}"
        );
    }
    let t = &v["tasks"][0];
    let cpu = t["cpu_percent"].as_f64().expect("cpu_percent");
    assert!(cpu > 0.0 && cpu < 105.0, "busy loop at {cpu} %");
    assert_eq!(t["counted_fraction"].as_f64(), Some(1.0));
}

/// `agent-overhead`: `--repeat 0` is refused up front; a SIGTERM to it ends the agent through
/// its restore path and the helper, and removes its temporary directory.
#[test]
fn agent_overhead_refuses_zero_repeats_and_cleans_up_on_sigterm() {
    let out = Command::new(BIN)
        .args(["agent-overhead", "--repeat", "0"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--repeat"), "{err}");
    let scratch = tempfile::tempdir().expect("tempdir");
    let child = Command::new(BIN)
        .args(["agent-overhead", "--threads", "2", "--interval", "100ms"])
        .args(["--intervals", "600", "--repeat", "1"])
        .env("TMPDIR", scratch.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let dir = scratch
        .path()
        .join(format!("counterpoint-overhead-{}", child.id()));
    // Until its directory exists (a hang guard of 60 s, not a timing claim).
    for _ in 0..1200 {
        if dir.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(dir.exists(), "{} never appeared", dir.display());
    // SAFETY: signalling the command we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("stopped by SIGTERM"), "{err}");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

/// `agent-overhead` stopped after a run finished still gives that run's median (it said
/// "nothing measured" under the results it had printed), with status 128+N; with its output
/// closed it ends its helper and removes its temporary directory (killed by SIGPIPE it left
/// them), status 141. CLI probe, session 30.
#[test]
fn agent_overhead_keeps_finished_runs_and_cleans_up_on_a_closed_pipe() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let spawn = || {
        Command::new(BIN)
            .args(["agent-overhead", "--threads", "2", "--interval", "1s"])
            .args(["--intervals", "4", "--repeat", "2"])
            .env("TMPDIR", scratch.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    // Stopped once the first run's line is out: the second run is then seconds from its end.
    let mut child = spawn();
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("read");
    assert!(first.starts_with("run 1:"), "{first}");
    // SAFETY: signalling the command we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    let status = child.wait().expect("wait");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read");
    if status.code() == Some(128 + libc::SIGTERM) && err.contains("2 of 2 run(s) measured") {
        // The signal came after the second run, before the summary: both runs are given.
        assert!(rest.contains("(of the 2 run(s) that finished)"), "{rest}");
    } else if status.code() == Some(128 + libc::SIGTERM) {
        assert!(err.contains("1 of 2 run(s) measured"), "{err}");
        assert!(rest.contains("(of the 1 run(s) that finished)"), "{rest}");
    } else {
        // The signal came after the second run had ended: a whole summary.
        assert!(status.success(), "{status:?}: {err}");
        assert!(rest.contains("steady state median"), "{rest}");
    }
    // Its output closed after the first line: the next line fails, and everything is removed.
    let mut child = spawn();
    let dir = scratch
        .path()
        .join(format!("counterpoint-overhead-{}", child.id()));
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("read");
    assert!(first.starts_with("run 1:"), "{first}");
    drop(out);
    let status = child.wait().expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        None,
        "killed by a signal: {status:?}"
    );
    assert_eq!(status.code(), Some(141), "{status:?}");
    assert!(!dir.exists(), "{} left behind", dir.display());
}
