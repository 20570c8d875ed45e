//! `bench broker` and `bench lockprof` stopped by SIGTERM once their child runs: exit status
//! 143, the child killed and reaped (not left running, reparented to init) and the bench's
//! temporary directory removed. No time is asserted: the timeouts only guard against a hang.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Generous: only a hang guard (a loaded machine may be slow to start anything).
const HANG_GUARD: Duration = Duration::from_secs(300);

/// The child processes of `pid` (all its threads'), with their command lines.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        for c in text
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            out.push((c, cmdline(c)));
        }
    }
    out
}

/// `pid`'s command line, arguments joined by spaces (empty once it ended: a zombie's too).
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The finished child's stderr (it was piped).
fn stderr_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Whether a command line (arguments joined by spaces) runs `want`: its program's file name
/// is `want` (`.../bench_pair`), or it is this binary's subcommand `want` (`counterpoint
/// daemon`). Not any argument that contains it: the compiler building `bench_pair` (`cc ... -o
/// DIR/bench_pair`) matched, and the signal came before the program it was meant for ran.
fn runs(cmdline: &str, want: &str) -> bool {
    let mut args = cmdline.split(' ');
    let program = args.next().unwrap_or("");
    let name = program.rsplit('/').next().unwrap_or(program);
    name == want || (name == "counterpoint" && args.next() == Some(want))
}

/// Start `counterpoint ARGS` with its temporary files in a scratch directory, wait until it has
/// a child that [`runs`] `want`, SIGTERM it and check what it left.
fn stop_once_child_runs(args: &[&str], want: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let mut bench = common::Kill(
        Command::new(env!("CARGO_BIN_EXE_counterpoint"))
            .args(args)
            .env("TMPDIR", scratch.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = bench.pid();
    let start = Instant::now();
    let child = loop {
        if let Some((c, _)) = children(pid).into_iter().find(|(_, l)| runs(l, want)) {
            break c;
        }
        if let Some(st) = bench.0.try_wait().unwrap() {
            panic!(
                "{args:?} ended ({st}) before starting {want}: {}",
                stderr_of(&mut bench.0)
            );
        }
        assert!(start.elapsed() < HANG_GUARD, "{args:?}: no {want} child");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        dir_entries(scratch.path()) > 0,
        "{args:?}: no temporary directory"
    );
    // SAFETY: signalling the process we started (not yet reaped: `bench` owns it).
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(st) = bench.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < HANG_GUARD,
            "{args:?}: not ended by SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = stderr_of(&mut bench.0);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{args:?}: {err}");
    assert!(err.contains("stopped by SIGTERM"), "{args:?}: {err}");
    // Reaped by the bench (its /proc entry is gone), or at least no longer running as `want`
    // (a recycled pid runs something else).
    let left = cmdline(child);
    assert!(
        !runs(&left, want),
        "{args:?}: child {child} ({left}) is still running"
    );
    let entries: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(entries.is_empty(), "{args:?}: left behind {entries:?}");
}

fn dir_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn bench_broker_stopped_by_sigterm_ends_its_daemon_and_cleans_up() {
    // Long enough never to finish first; the stop ends it early.
    stop_once_child_runs(
        &[
            "bench",
            "broker",
            "--seconds",
            "600",
            "--consumers",
            "2",
            "--reads",
            "10",
        ],
        "daemon",
    );
}

#[test]
fn bench_lockprof_stopped_by_sigterm_ends_its_program_and_cleans_up() {
    let cc = Command::new("cc")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !cc.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no C compiler (`cc`) to build the bench's programs");
        return;
    }
    common::ensure_lockprof_lib();
    stop_once_child_runs(
        &[
            "bench", "lockprof", "--rounds", "100", "--pairs", "50000000",
        ],
        "bench_pair",
    );
}
