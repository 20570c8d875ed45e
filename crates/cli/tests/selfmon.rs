//! `counterpoint bench selfmon --json` runs here and says which read path it used.

use std::process::Command;

#[test]
fn bench_selfmon_reports_the_read_path_and_costs() {
    let out = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args([
            "bench",
            "selfmon",
            "--json",
            "--rounds",
            "1",
            "--iterations",
            "200",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for k in [
        "region_begin_end_ns",
        "read_ours_ns",
        "read_raw_syscall_ns",
        "synthetic_page_read_ns",
    ] {
        // Present and sane; how fast is the benchmark's output, never asserted.
        assert!(
            v[k].as_f64().is_some_and(|x| x.is_finite() && x >= 0.0),
            "{k}: {v}"
        );
    }
    assert!(v["read_path"].as_str().is_some_and(|s| !s.is_empty()));
}

#[test]
fn bench_selfmon_refuses_zero_rounds() {
    let out = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args(["bench", "selfmon", "--rounds", "0"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rounds"));
}

/// Self-monitoring counts where an unprivileged user may count only user mode
/// (`perf_event_paranoid` 2, the default of many distributions): its events are retried
/// user-only (`task-clock:u`), as `perf stat` does. Until session 30 it failed there
/// ("permission denied opening 'task-clock'"). Run as root, the check drops to `nobody` in the
/// child; run unprivileged, the test above already is that check.
#[test]
fn self_monitoring_counts_user_only_where_kernel_counting_is_refused() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return println!("skipped: not root (the test above runs unprivileged already)");
    }
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(i32::MAX);
    if paranoid == i32::MAX {
        return println!("skipped: perf_event_paranoid unreadable: what it allows is unknown");
    }
    if paranoid > 2 {
        return println!(
            "skipped: perf_event_paranoid {paranoid} refuses every unprivileged counter"
        );
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_counterpoint"));
    cmd.args(["bench", "selfmon", "--json", "--rounds", "1"])
        .args(["--iterations", "200"])
        .current_dir("/");
    // SAFETY: setgroups/setgid/setuid are async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Spawning as nobody fails where a directory on the binary's path is closed to others
    // (a clone under /root) or the sandbox forbids the change of user: nothing to check then.
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            return println!(
                "skipped: cannot run the binary as nobody here ({e}): a directory on its path \
                 closed to other users, or no setuid in this sandbox"
            )
        }
    };
    assert!(
        out.status.success(),
        "as nobody under perf_event_paranoid {paranoid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        v["region_begin_end_ns"]
            .as_f64()
            .is_some_and(f64::is_finite),
        "{v}"
    );
}
