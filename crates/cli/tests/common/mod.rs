//! Helpers shared by the CLI integration tests (each test file uses a subset).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

/// A child process killed and reaped when dropped, so a failing test leaves nothing running.
pub struct Kill(pub Child);

impl Kill {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A busy shell loop, killed when dropped.
pub struct Busy;

impl Busy {
    pub fn spawn() -> Kill {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new("sh");
        c.args(["-c", "while :; do :; done"]);
        // Killed with the test's thread even when the test process is killed (no drop runs).
        // SAFETY: prctl on the child itself, async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        Kill(c.spawn().expect("spawn sh"))
    }
}

/// The directory of the `counterpoint` binary under test.
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_counterpoint"))
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

/// The preload library next to the binary, built on demand (`cargo test -p counterpoint` alone
/// does not build the cdylib).
pub fn ensure_lockprof_lib() {
    let dir = bin_dir();
    // Always (a no-op when fresh): `cargo test -p counterpoint` does not rebuild the cdylib.
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "counterpoint-lockprof"]);
    if dir.ends_with("release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo").success());
    assert!(dir.join("libcounterpoint_lockprof.so").exists());
}

/// Runs `counterpoint` with `args` to its end.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .args(args)
        .output()
        .expect("run counterpoint")
}

/// A finished command's stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether this machine has a hardware PMU (the kernel's `cpu` event source, or a hybrid's).
pub fn has_hw_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

/// The files `simulate --out` writes (the binary's `OUT_FILES`, which an integration test
/// cannot import).
pub const SIMULATE_OUT_FILES: [&str; 6] = [
    "result.json",
    "series.csv",
    "bus.csv",
    "np.svg",
    "bus.svg",
    "ipc.svg",
];

/// Write scenario `body` as `name` in `dir` (a test's temporary directory) and return its path.
pub fn scenario_file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write scenario");
    path
}

/// Waits (at most 60 s) until process `pid` holds a perf_event descriptor: its counters or
/// samplers are open, so a signal sent now reaches a command that is counting. Never a delay.
#[allow(dead_code)] // not every test binary that shares this module sends such a signal
pub fn wait_for_perf_fds(pid: u32) {
    let fds = format!("/proc/{pid}/fd");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let open = || {
        std::fs::read_dir(&fds).is_ok_and(|d| {
            d.flatten().any(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
            })
        })
    };
    while !open() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `counterpoint ARGS` run as `nobody` (uid and gid 65534, no supplementary groups, from `/`),
/// for the checks of what an unprivileged user may count, with `perf_event_paranoid`'s value:
/// `None`, having printed why, where that check cannot be made here: not root (then the suite
/// itself runs unprivileged), the setting unreadable or above 2 (every unprivileged counter
/// refused), or the binary not runnable as nobody (a directory on its path closed to others,
/// no setuid in the sandbox).
pub fn run_as_nobody(args: &[&str]) -> Option<(Output, i32)> {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: not root (the suite runs unprivileged already)");
        return None;
    }
    let Some(paranoid) = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    else {
        println!("skipped: perf_event_paranoid unreadable: what it allows is unknown");
        return None;
    };
    if paranoid > 2 {
        println!("skipped: perf_event_paranoid {paranoid} refuses every unprivileged counter");
        return None;
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_counterpoint"));
    cmd.args(args).current_dir("/");
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
    match cmd.output() {
        Ok(o) => Some((o, paranoid)),
        Err(e) => {
            println!(
                "skipped: cannot run the binary as nobody here ({e}): a directory on its path \
                 closed to other users, or no setuid in this sandbox"
            );
            None
        }
    }
}
