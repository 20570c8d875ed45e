//! `simulate --out` and `experiment --out` write their files as one set (probe, session 23):
//! a stop signal leaves either every old file or every new one, never a mix and no temporary
//! file, and ends the command with 128 + the signal and a message naming it; files under their
//! names that they did not write are refused without `--force`.
//!
//! Signals go at deterministic points, never after a delay: once the command catches SIGINT
//! (its `/proc` status says so), or once it is writing its files: one of them is a link to a
//! FIFO, which the command opens (and blocks on) in the middle of its renames, and which the
//! test opens from its side before it sends the signal.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Writes a two-task scenario of `duration_ms` at `path`.
fn scenario(path: &Path, duration_ms: u64) -> PathBuf {
    let text = format!(
        "name = \"tiny\"\nmachine = \"zhang-smp\"\nduration_ms = {duration_ms}\nseed = 2\n\
         policy = \"linux\"\n\n[[task]]\nprogram = \"gzip\"\ncpus = \"0\"\n\n\
         [[task]]\nprogram = \"swim\"\ncpus = \"1\"\n"
    );
    std::fs::write(path, text).expect("write the scenario");
    path.to_path_buf()
}

/// Every name in `dir` with its bytes (a link's target's), sorted by name.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| {
            let e = e.expect("entry");
            let bytes = if e.path().is_file() {
                std::fs::read(e.path()).expect("read")
            } else {
                Vec::new()
            };
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    v.sort();
    v
}

/// Hidden names in `dir` (the temporary files are `.NAME.PID.tmp`).
fn hidden(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// The exit status code and stderr of `child`, once it ends.
fn finish(child: &mut Child) -> (Option<i32>, String) {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).expect("read stderr");
    }
    (child.wait().expect("wait").code(), err)
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run counterpoint");
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Whether process `pid` catches SIGINT (its SigCgt mask in `/proc/PID/status`).
fn catches_sigint(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
}

/// Sends SIGINT to `child` once it catches SIGINT; panics if it ends first.
/// Start `cmd`, interrupt it once it catches SIGINT, and check that it says so, exits 130 and
/// leaves `out_dir` as `old` (the earlier run's files).
fn interrupted_before_writing(cmd: &mut Command, out_dir: &Path, old: &[(String, Vec<u8>)]) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(common::Kill)
        .expect("spawn");
    interrupt_once_caught(&mut child.0);
    let (code, err) = finish(&mut child.0);
    assert_eq!(code, Some(128 + libc::SIGINT), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert_eq!(snapshot(out_dir), old, "the earlier files changed");
}

fn interrupt_once_caught(child: &mut Child) {
    while !catches_sigint(child.id()) {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("ended ({status}) without ever catching SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: signalling our own unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

/// The read end of a FIFO that a link in an output directory points to, with the smallest
/// pipe buffer: a file larger than `capacity` written there blocks its writer until the test
/// reads.
struct Fifo {
    reader: std::fs::File,
    capacity: usize,
}

/// Makes `link` a symbolic link to a new FIFO beside it, opened for reading.
fn fifo_at(link: &Path) -> Fifo {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let fifo = link.with_extension("fifo");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8 path")).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(&fifo, link).expect("symlink");
    // Non-blocking only to open without a writer; blocking reads afterwards.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .expect("open the FIFO");
    let fd = reader.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    let capacity = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, 4096) };
    assert!(capacity > 0, "F_SETPIPE_SZ");
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, 0) };
    Fifo {
        reader,
        capacity: capacity as usize,
    }
}

/// Waits until `child` has filled `fifo`'s buffer (it is then blocked in its write phase,
/// until the test reads), sends SIGINT, and returns what it wrote there; panics if the child
/// ends first.
fn interrupt_while_writing(child: &mut Child, fifo: &mut Fifo) -> Vec<u8> {
    use std::io::Read;
    use std::os::unix::io::AsRawFd;
    let queued = |f: &Fifo| {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int.
        unsafe { libc::ioctl(f.reader.as_raw_fd(), libc::FIONREAD, &mut n) };
        n as usize
    };
    while queued(fifo) < fifo.capacity {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("ended ({status}) without filling the FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: signalling our own unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut bytes = Vec::new();
    fifo.reader.read_to_end(&mut bytes).expect("read the FIFO");
    bytes
}

/// A signal during the simulation leaves the earlier results as they were (Ctrl-C killed the
/// command by its default action, silently).
#[test]
fn simulate_interrupted_during_the_run_keeps_the_old_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    let sc = scenario(&dir.path().join("s.toml"), 300);
    run_ok(bin().arg("simulate").arg(&sc).arg("--out").arg(&out_dir));
    let old = snapshot(&out_dir);
    // An hour simulated: far longer than the signal takes to come.
    let long = scenario(&dir.path().join("long.toml"), 3_600_000);
    interrupted_before_writing(
        bin().arg("simulate").arg(&long).arg("--out").arg(&out_dir),
        &out_dir,
        &old,
    );
}

/// A signal while the files are renamed into place lets the renames finish: every file is
/// the new run's (a new `result.json` sat beside the old `series.csv`, and a 16 MB temporary
/// file was left).
#[test]
fn simulate_interrupted_while_writing_leaves_the_whole_new_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    let sc = scenario(&dir.path().join("s.toml"), 300);
    run_ok(bin().arg("simulate").arg(&sc).arg("--out").arg(&out_dir));
    let old = snapshot(&out_dir);
    // np.svg, written after result.json, series.csv and bus.csv, goes to a FIFO: the command
    // waits there, in the middle of its renames.
    let mut fifo = fifo_at(&out_dir.join("np.svg"));
    scenario(&sc, 400);
    let mut child = bin()
        .arg("simulate")
        .arg(&sc)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(common::Kill)
        .expect("spawn");
    let np = interrupt_while_writing(&mut child.0, &mut fifo);
    let (code, err) = finish(&mut child.0);
    assert_eq!(code, Some(128 + libc::SIGINT), "{err}");
    assert!(
        err.contains("interrupted by SIGINT") && err.contains("holds the new results"),
        "{err}"
    );
    // Every file is the 400 ms run's.
    assert!(np.starts_with(b"<svg") && np.len() > fifo.capacity);
    let series = std::fs::read_to_string(out_dir.join("series.csv")).expect("read");
    assert!(
        series
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("400000000,")),
        "{series}"
    );
    let now = snapshot(&out_dir);
    for name in ["result.json", "series.csv", "bus.csv", "bus.svg", "ipc.svg"] {
        let was = old.iter().find(|(n, _)| n == name).expect("old file");
        let is = now.iter().find(|(n, _)| n == name).expect("new file");
        assert_ne!(was.1, is.1, "{name} is the earlier run's");
    }
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("result.json")).expect("read"))
            .expect("JSON");
    assert_eq!(result["duration_ns"], 400_000_000u64);
    assert!(hidden(&out_dir).is_empty(), "left: {:?}", hidden(&out_dir));
}

/// The same for one experiment's report: a new figure beside the old `results.json` was left.
#[test]
fn experiment_interrupted_while_writing_leaves_the_whole_new_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("report");
    let leak = |seeds: &str| {
        let mut c = bin();
        c.args(["experiment", "leak", "--seeds", seeds, "--out"])
            .arg(&out_dir);
        c
    };
    run_ok(leak("2").stdout(Stdio::null()));
    let old = snapshot(&out_dir);
    // The figure, the first file written, goes to a FIFO: the command waits there, before
    // its renames of report.md and results.json.
    let mut fifo = fifo_at(&out_dir.join("leak-recovery.svg"));
    let mut child = leak("3")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(common::Kill)
        .expect("spawn");
    let svg = interrupt_while_writing(&mut child.0, &mut fifo);
    let (code, err) = finish(&mut child.0);
    assert_eq!(code, Some(128 + libc::SIGINT), "{err}");
    assert!(
        err.contains("interrupted by SIGINT") && err.contains("holds the new report"),
        "{err}"
    );
    assert!(svg.starts_with(b"<svg") && svg.len() > fifo.capacity);
    let report = std::fs::read_to_string(out_dir.join("report.md")).expect("read");
    assert!(report.contains("Seeds: 3 (1, 2, 3)"), "{report}");
    let old_report = &old.iter().find(|(n, _)| n == "report.md").expect("old").1;
    assert_ne!(old_report, report.as_bytes());
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("results.json")).expect("read"))
            .expect("JSON");
    assert_eq!(results[0]["seeds"], serde_json::json!([1, 2, 3]));
    assert!(hidden(&out_dir).is_empty(), "left: {:?}", hidden(&out_dir));
}

/// A signal during an experiment's runs leaves the earlier report as it was, with a message
/// (the command was killed silently).
#[test]
fn experiment_interrupted_during_the_runs_keeps_the_old_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("report");
    run_ok(
        bin()
            .args(["experiment", "leak", "--seeds", "2", "--out"])
            .arg(&out_dir)
            .stdout(Stdio::null()),
    );
    let old = snapshot(&out_dir);
    // Far more seeds than the signal takes to come (about a second each in a debug build).
    interrupted_before_writing(
        bin()
            .args(["experiment", "leak", "--seeds", "400", "--out"])
            .arg(&out_dir),
        &out_dir,
        &old,
    );
}

/// `simulate --out` refuses to overwrite a `result.json` or `series.csv` it did not write
/// (they were replaced without a word); `--force` overwrites them, and its own earlier output
/// is overwritten without it.
#[test]
fn simulate_out_refuses_files_it_did_not_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let sc = scenario(&dir.path().join("s.toml"), 300);
    let theirs = [
        ("result.json", "{\"my\": \"notes\"}\n"),
        ("series.csv", "a,b\n1,2\n"),
    ];
    for (name, text) in theirs {
        std::fs::write(out_dir.join(name), text).expect("write");
    }
    let simulate = |force: bool| {
        let mut c = bin();
        c.arg("simulate").arg(&sc).arg("--out").arg(&out_dir);
        if force {
            c.arg("--force");
        }
        c.output().expect("run")
    };
    let out = simulate(false);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for (name, text) in theirs {
        assert!(err.contains(&format!("out/{name}")), "{err}");
        assert_eq!(
            std::fs::read_to_string(out_dir.join(name)).expect("read"),
            text
        );
    }
    assert!(err.contains("--force"), "{err}");
    // Only their two files were there: nothing was written.
    assert_eq!(snapshot(&out_dir).len(), 2);
    assert!(simulate(true).status.success());
    // Now the directory holds simulate's own output: overwritten without --force.
    let out = simulate(false);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(snapshot(&out_dir).len(), 6);
}

/// `experiment NAME --out` refuses to overwrite a hand-written `report.md` and a
/// `results.json` that is not a report's (`clock-scaling --out D` replaced both).
#[test]
fn experiment_out_refuses_files_it_did_not_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let theirs = [
        ("report.md", "# My report\n\nHand-written.\n"),
        ("results.json", "{\"mine\": true}\n"),
    ];
    for (name, text) in theirs {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    let leak = |force: bool| {
        let mut c = bin();
        c.args(["experiment", "leak", "--seeds", "2", "--out"])
            .arg(dir.path())
            .stdout(Stdio::null());
        if force {
            c.arg("--force");
        }
        c.output().expect("run")
    };
    let out = leak(false);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for (name, text) in theirs {
        assert!(err.contains(name), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).expect("read"),
            text
        );
    }
    assert!(err.contains("--force"), "{err}");
    let out = leak(true);
    assert!(out.status.success(), "{}", stderr(&out));
    // Its own report now: replaced again without --force.
    let out = leak(false);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A directory where `--out` writes a file is refused with and without `--force`, and the
/// message does not offer `--force`, which cannot write a file over a directory (CLI probe,
/// session 27: it did, and with `--force` the run then failed with "Is a directory").
#[test]
fn a_directory_in_a_files_place_is_refused_even_with_force() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let sc = scenario(&tmp.path().join("s.toml"), 100);
    let out = tmp.path().join("out");
    std::fs::create_dir_all(out.join("result.json")).expect("mkdir");
    for force in [false, true] {
        let mut cmd = bin();
        cmd.arg("simulate").arg(&sc).arg("--out").arg(&out);
        if force {
            cmd.arg("--force");
        }
        let o = cmd.output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("result.json is a directory where this run writes a file"),
            "{err}"
        );
        assert!(!err.contains("--force"), "{err}");
    }
    // Nothing was written beside it.
    assert_eq!(
        std::fs::read_dir(&out).expect("list").count(),
        1,
        "only the directory"
    );
}
