//! scripts/setup without root or without the network: it must exit 0, say what is present and
//! what it skipped, and never call apt when nothing is missing. `dpkg-query`, `apt-get` and
//! `id` are replaced by stubs on PATH, so the system is neither queried for real nor changed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stub(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write stub");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod stub");
}

/// Run scripts/setup with stubs; (exit code, stderr, apt-get calls).
fn run_setup(installed: bool, uid: u32, apt_exit: i32, args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let calls = dir.path().join("apt-calls");
    let status = if installed {
        "printf 'install ok installed'"
    } else {
        "exit 1"
    };
    stub(dir.path(), "dpkg-query", status);
    stub(
        dir.path(),
        "apt-get",
        &format!("echo \"$*\" >> '{}'; exit {apt_exit}", calls.display()),
    );
    stub(dir.path(), "id", &format!("echo {uid}"));
    // Tools the parts look for after installing (prometheus --version, perf).
    stub(dir.path(), "prometheus", "echo 'prometheus, version stub'");
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let setup = repo().join("scripts/setup");
    assert!(setup.exists(), "{} is missing", setup.display());
    let out = Command::new("bash")
        .arg(&setup)
        .args(args)
        .env("PATH", path)
        .env_remove("COUNTERPOINT_SETUP_EXTRAS")
        .output()
        .expect("run scripts/setup");
    let apt_calls = std::fs::read_to_string(&calls).unwrap_or_default();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        apt_calls,
    )
}

#[test]
fn offline_as_root_skips_and_exits_zero() {
    let (code, err, apt) = run_setup(false, 0, 100, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("prometheus: skipped: prometheus (apt-get could not install them: offline"),
        "{err}"
    );
    assert!(
        err.contains("lockprof: skipped: pigz xz-utils sqlite3 binutils g++"),
        "{err}"
    );
    assert!(err.contains("tools: skipped: gcc tmux python3"), "{err}");
    assert!(
        err.contains("postgresql: skipped: postgresql (apt-get could not install them: offline"),
        "{err}"
    );
    assert!(
        err.contains("setup: 1 part(s) complete; skipped: lockprof postgresql prometheus tools"),
        "{err}"
    );
    // One install from the cached lists, one update, one more install; per installing part
    // (lockprof, postgresql, prometheus, tools), no retries.
    assert_eq!(
        apt.lines().filter(|l| l.contains("update")).count(),
        4,
        "{apt}"
    );
    assert!(
        !apt.contains("linux-perf"),
        "perf is not installed without --extras: {apt}"
    );
}

#[test]
fn without_root_names_the_command_and_never_calls_apt() {
    let (code, err, apt) = run_setup(false, 1000, 0, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("prometheus: skipped: prometheus (needs root: apt-get install prometheus)"),
        "{err}"
    );
    assert!(apt.is_empty(), "apt-get called without root: {apt}");
}

#[test]
fn everything_present_is_quiet_and_calls_no_apt() {
    let (code, err, apt) = run_setup(true, 0, 100, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("prometheus: present: prometheus"), "{err}");
    assert!(err.contains("postgresql: present: postgresql"), "{err}");
    // The postgresql part also checks the server's binaries on disk, which the dpkg stub cannot
    // fake: on a machine without them that part fails, and says so.
    let pg_on_disk = std::fs::read_dir("/usr/lib/postgresql")
        .is_ok_and(|d| d.flatten().any(|v| v.path().join("bin/initdb").exists()));
    if pg_on_disk {
        assert!(err.contains("setup: 5 part(s) complete"), "{err}");
    } else {
        assert!(
            err.contains("setup: 4 part(s) complete; FAILED: postgresql"),
            "{err}"
        );
    }
    assert!(!err.contains("skipped"), "{err}");
    assert!(
        apt.is_empty(),
        "apt-get called with everything present: {apt}"
    );
}

#[test]
fn extras_add_perf_and_bad_options_are_refused() {
    let (code, err, apt) = run_setup(false, 0, 100, &["--extras"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("counters: skipped: linux-perf"), "{err}");
    assert!(apt.contains("linux-perf"), "{apt}");
    let (code, err, _) = run_setup(true, 0, 0, &["--bogus"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown option '--bogus'"), "{err}");
}
