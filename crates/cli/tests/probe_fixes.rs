//! Fixes from a probe of the binary: `stat -o FILE` keeps an existing file when the command
//! cannot start (and exits 127/126 as a shell would), `requests --pid` quotes a long bad line
//! in part and refuses one over the limit without reading all of it, `burn --kind replica`
//! refuses a group larger than the machine's memory before forking. None depends on timing.

use std::io::Write;
use std::process::{Command, Output, Stdio};

mod common;

use common::{run, stderr};

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

/// One line on stderr, containing `needle`, no panic.
fn one_line_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn stat_output_file_is_kept_when_the_command_is_not_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keep = dir.path().join("keep.txt");
    std::fs::write(&keep, "precious\n").expect("write keep.txt");
    let fresh = dir.path().join("fresh.txt");
    for out in [&keep, &fresh] {
        let o = run(&[
            "stat",
            "-o",
            out.to_str().expect("utf-8 path"),
            "-e",
            "task-clock",
            "--",
            "counterpoint-no-such-command",
        ]);
        one_line_error(&o, "cannot run 'counterpoint-no-such-command'");
        // As a shell: not found is 127.
        assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    }
    assert_eq!(
        std::fs::read_to_string(&keep).expect("keep.txt still there"),
        "precious\n"
    );
    assert!(!fresh.exists(), "an output file was created for nothing");
}

#[test]
fn stat_command_that_cannot_be_executed_exits_126() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    // No execute bit for anyone: exec refuses it even to root (EACCES).
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let keep = dir.path().join("keep.txt");
    std::fs::write(&keep, "precious\n").expect("write keep.txt");
    let o = run(&[
        "stat",
        "-o",
        keep.to_str().expect("utf-8 path"),
        "-e",
        "task-clock",
        "--",
        script.to_str().expect("utf-8 path"),
    ]);
    one_line_error(&o, "cannot run");
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&keep).expect("keep"), "precious\n");
}

#[test]
fn stat_output_file_is_written_once_the_command_ran() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("keep.txt");
    std::fs::write(&out, "old contents that must go\n").expect("write");
    let o = run(&[
        "stat",
        "-x,",
        "-o",
        out.to_str().expect("utf-8 path"),
        "-e",
        "task-clock",
        "--",
        "true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).expect("read");
    assert!(!text.contains("old contents"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert_eq!(text.split(',').nth(2), Some("task-clock"), "{text}");
    // A path that cannot be created is still an error (exit 2), the command stopped.
    let o = run(&[
        "stat",
        "-o",
        "/nonexistent-dir/out.txt",
        "-e",
        "task-clock",
        "--",
        "true",
    ]);
    one_line_error(&o, "creating /nonexistent-dir/out.txt");
    assert_eq!(o.status.code(), Some(2));
}

/// Run `requests --pid` on a sleeping process with `input` written from a thread (its write
/// errors ignored: the command may stop reading early).
fn requests_with_input(input: Vec<u8>) -> Option<Output> {
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = sleeper.id().to_string();
    let mut child = Command::new(BIN)
        .args(["requests", "--pid", &pid, "--events", "task-clock"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run counterpoint");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        for chunk in input.chunks(1 << 16) {
            if stdin.write_all(chunk).is_err() {
                break;
            }
        }
    });
    let out = child.wait_with_output().expect("wait");
    let _ = writer.join();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let err = stderr(&out);
    if err.contains("perf_event") && !out.status.success() {
        eprintln!("skipped: counters unavailable: {err}");
        return None;
    }
    Some(out)
}

#[test]
fn requests_quotes_a_long_bad_line_in_part() {
    // Under the line limit: the usual error, with 80 characters of the line and its length.
    let Some(o) = requests_with_input(vec![b'a'; 10_000]) else {
        return;
    };
    let err = stderr(&o);
    one_line_error(&o, "input line 1: '");
    assert!(err.contains("…' (10000 bytes) needs a request id"), "{err}");
    assert!(err.len() < 300, "{} bytes: {err}", err.len());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn requests_refuses_an_overlong_line_without_reading_it_all() {
    // 32 MiB without a newline, after one good line: refused once 64 KiB of it were read.
    let mut input = b"# fine\n".to_vec();
    input.extend(vec![b'a'; 32 << 20]);
    let Some(o) = requests_with_input(input) else {
        return;
    };
    let err = stderr(&o);
    one_line_error(&o, "input line 2: longer than 65536 bytes");
    assert!(
        err.contains(&format!("starts '{}…'", "a".repeat(80))),
        "{err}"
    );
    assert!(err.len() < 400, "{} bytes: {err}", err.len());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn burn_replica_refuses_a_group_larger_than_memory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let meminfo = dir.path().join("meminfo");
    // A 4 MiB machine: 2 replicas of 4 MiB do not fit.
    std::fs::write(&meminfo, "MemTotal:           4096 kB\nMemFree:  1024 kB\n").expect("write");
    let o = run(&[
        "burn",
        "--kind",
        "replica",
        "--replicas",
        "2",
        "--ws-bytes",
        "4M",
        "--seconds",
        "0.1",
        "--meminfo",
        meminfo.to_str().expect("utf-8 path"),
    ]);
    one_line_error(
        &o,
        "8.0 MiB of working sets in all, more than this machine's memory",
    );
    assert_eq!(o.status.code(), Some(2));
    // What fits runs as before.
    let o = run(&[
        "burn",
        "--kind",
        "replica",
        "--replicas",
        "2",
        "--ws-bytes",
        "64K",
        "--seconds",
        "0.1",
        "--meminfo",
        meminfo.to_str().expect("utf-8 path"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn burn_replica_refuses_an_absurd_total_on_this_machine() {
    // 64 replicas of 1 GiB: refused here unless the machine really has 64 GiB (then skipped,
    // rather than filled).
    let mem_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    });
    if mem_kib.is_some_and(|k| k >= 64 << 20) {
        return eprintln!("skipped: this machine has 64 GiB or more");
    }
    let o = run(&[
        "burn",
        "--kind",
        "replica",
        "--replicas",
        "64",
        "--ws-bytes",
        "1G",
        "--seconds",
        "0.1",
    ]);
    one_line_error(&o, "64.0 GiB of working sets in all, more than");
    assert_eq!(o.status.code(), Some(2));
}
