//! Faults of the command line found by probing: an unwritable stdout, absurd numbers, flags
//! without their value, scenario-file mistakes, and messages that must name what went wrong.
//! Every check is deterministic: exit statuses and message text, never a time.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

/// A scenario short enough for a test (0.3 s simulated on two CPUs).
fn scenario(dir: &Path, policy: &str) -> PathBuf {
    let path = dir.join(format!("tiny-{policy}.toml"));
    let text = format!(
        "name = \"tiny\"\nmachine = \"zhang-smp\"\nduration_ms = 300\nseed = 2\n\
         policy = \"{policy}\"\n\n[[task]]\nprogram = \"gzip\"\ncpus = \"0\"\n\n\
         [[task]]\nprogram = \"swim\"\ncpus = \"1\"\n"
    );
    std::fs::write(&path, text).expect("write the scenario");
    path
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `args` with stdout on /dev/full (every write fails with ENOSPC).
fn to_dev_full(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    bin()
        .args(args)
        .stdout(Stdio::from(full))
        .output()
        .expect("run counterpoint")
}

/// A refused command: a non-zero status that is not a panic's (101), no panic text, and a
/// message containing `want`.
fn assert_refused(out: &Output, want: &str, what: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "{what}: succeeded; stderr: {err}");
    assert_ne!(out.status.code(), Some(101), "{what}: panicked: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(err.contains(want), "{what}: expected {want:?} in: {err}");
}

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "linux");
    let sc = sc.to_str().expect("utf-8 path");
    let sysfs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../host/tests/data/sysfs/vm-2cpu");
    let sysfs = sysfs.to_str().expect("utf-8 path");
    let outdir = dir.path().join("out");
    let outdir = outdir.to_str().expect("utf-8 path");
    let cases: Vec<Vec<&str>> = vec![
        vec!["simulate", sc, "--json"],
        vec!["simulate", sc],
        vec!["simulate", sc, "--out", outdir],
        vec!["bench", "sim", "--scenario", sc, "--repeat", "1", "--json"],
        vec!["metrics"],
        vec!["metrics", "--json"],
        vec!["topology", "--sysfs", sysfs],
        vec!["topology", "--sysfs", sysfs, "--json"],
        vec!["policies"],
        vec!["policies", "--json"],
    ];
    for args in &cases {
        let out = to_dev_full(args);
        assert_refused(
            &out,
            "writing to stdout: No space left on device",
            &args.join(" "),
        );
    }
    // The files of --out are written before stdout fails.
    assert!(Path::new(outdir).join("result.json").is_file());
}

#[test]
fn absurd_run_lengths_are_refused_at_parsing() {
    for args in [
        &["burn", "--kind", "int", "--seconds", "1e300"][..],
        &["burn", "--kind", "int", "--seconds", "inf"],
        &["burn", "--kind", "int", "--seconds", "0"],
        &["calibrate", "--seconds", "1e300", "--json"],
    ] {
        let out = bin().args(args).output().expect("run");
        assert_refused(&out, "--seconds", &args.join(" "));
        assert!(stderr(&out).contains("604800"), "{}", stderr(&out));
    }
}

#[test]
fn bare_daemon_flag_means_the_default_socket() {
    // Not "a value is required": the bare flag parses (whether a broker answers is another
    // matter, so only the parse is checked).
    let out = bin()
        .args(["stat", "--daemon", "-e", "task-clock", "--", "true"])
        .output()
        .expect("run");
    assert!(
        !stderr(&out).contains("a value is required"),
        "{}",
        stderr(&out)
    );
    for cmd in ["top", "agent"] {
        let out = bin()
            .args([cmd, "--daemon", "--direct"])
            .output()
            .expect("run");
        // clap got past the value and reached the conflict check.
        assert_refused(&out, "cannot be used with", cmd);
        assert!(
            !stderr(&out).contains("a value is required"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn bench_sim_repeat_is_bounded() {
    for n in ["0", "1001", "18446744073709551615"] {
        let out = bin()
            .args(["bench", "sim", "--repeat", n])
            .output()
            .expect("run");
        assert_refused(&out, "--repeat", n);
        assert!(stderr(&out).contains("1..=1000"), "{}", stderr(&out));
    }
}

#[test]
fn an_unknown_policy_in_a_scenario_names_the_file_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "nosuch");
    // The key is on line 5 of the test's scenario, at column 1.
    let want = format!(
        "{}:5:1: policy: unknown policy \"nosuch\" (known: ",
        sc.display()
    );
    let out = bin().arg("simulate").arg(&sc).output().expect("run");
    assert_refused(&out, &want, "simulate");
    assert!(!stderr(&out).contains("--policy"), "{}", stderr(&out));
    let out = bin()
        .args(["bench", "sim", "--repeat", "1", "--scenario"])
        .arg(&sc)
        .output()
        .expect("run");
    assert_refused(&out, &want, "bench sim");
}

#[test]
fn simulate_out_is_checked_before_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "linux");
    // A file where the directory should be.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("write");
    let out = bin()
        .arg("simulate")
        .arg(&sc)
        .arg("--out")
        .arg(&file)
        .output()
        .expect("run");
    assert_refused(&out, "not a directory", "--out FILE");
    // Refused before the run: nothing on stdout.
    assert!(out.stdout.is_empty());
    // A directory that cannot be created (its parent is a file).
    let out = bin()
        .arg("simulate")
        .arg(&sc)
        .arg("--out")
        .arg(file.join("sub"))
        .output()
        .expect("run");
    assert_refused(
        &out,
        "cannot create the results directory",
        "--out FILE/sub",
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn messages_name_what_was_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.toml");
    let out = bin()
        .args(["bench", "sim", "--repeat", "1", "--scenario"])
        .arg(&missing)
        .output()
        .expect("run");
    assert_refused(&out, "missing.toml", "bench sim --scenario missing");
    assert!(
        !stderr(&out).contains("pass --scenario"),
        "{}",
        stderr(&out)
    );

    // zhang-smp has one CPU per package: MASA cannot calibrate it, and the flag is named.
    let sc = scenario(dir.path(), "linux");
    let out = bin()
        .arg("simulate")
        .arg(&sc)
        .args(["--policy", "masa"])
        .output()
        .expect("run");
    assert_refused(&out, "--paper-calibration", "masa on zhang-smp");

    let out = bin()
        .arg("simulate")
        .arg(&sc)
        .args(["--policy", "spread", "--hungry-cpus", "inf"])
        .output()
        .expect("run");
    assert_refused(&out, "--hungry-cpus", "--hungry-cpus inf");
    assert!(!stderr(&out).contains("must be a positive number"));

    let out = bin()
        .args(["top", "--once", "--interval", "100us"])
        .output()
        .expect("run");
    assert_refused(&out, "unit \"us\" is not supported", "--interval 100us");

    let out = bin()
        .arg("lockprof")
        .arg("--")
        .arg(dir.path())
        .output()
        .expect("run");
    assert_refused(&out, "is a directory", "lockprof -- DIR");

    let out = bin()
        .args(["stat", "-e", "task-clock", "-o", "/dev/full", "--", "true"])
        .output()
        .expect("run");
    assert_refused(&out, "/dev/full", "stat -o /dev/full");
}

#[test]
fn top_refuses_what_the_agent_refuses() {
    // A pid far above any pid_max the kernel allows (4194304), so it never exists.
    let out = bin()
        .args(["top", "--once", "--targets", "pid:999999999"])
        .output()
        .expect("run");
    assert_refused(&out, "no such process (999999999)", "top pid:999999999");
    let out = bin().args(["top", "--count", "0"]).output().expect("run");
    assert_refused(&out, "--count", "top --count 0");
}

/// The entry of `command` in the top-level help: its line and the wrapped lines under it.
fn command_entry(help: &str, command: &str) -> String {
    let mut lines = help.lines().skip_while(|l| {
        !(l.starts_with("  ") && l.trim_start().starts_with(&format!("{command} ")))
    });
    let first = lines.next().unwrap_or_default().to_string();
    // Continuation lines are indented past the command column.
    let rest: Vec<&str> = lines.take_while(|l| l.starts_with("    ")).collect();
    format!("{first} {}", rest.join(" "))
}

#[test]
fn top_level_help_lists_every_experiment_and_burn_kind() {
    let out = bin().arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    let experiment = command_entry(&help, "experiment");
    for (name, _) in counterpoint_experiment::EXPERIMENTS {
        assert!(
            experiment.contains(name),
            "{name} missing from: {experiment}"
        );
    }
    let burn = command_entry(&help, "burn");
    for kind in ["int", "fp", "l2", "mem", "replica"] {
        assert!(burn.contains(kind), "burn kind {kind} missing from: {burn}");
    }
}

#[test]
fn a_closed_stdout_still_ends_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "linux");
    let sc = sc.to_str().expect("utf-8 path");
    for args in [&["metrics"][..], &["policies", "--json"], &["simulate", sc]] {
        // A pipe whose read end is closed before the command starts: its first write fails.
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills two descriptors we then own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just created and are owned here only.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(read);
        let out = bin()
            .args(args)
            .stdout(Stdio::from(write))
            .output()
            .expect("run");
        let what = args.join(" ");
        assert!(
            !out.status.success(),
            "{what}: a closed stdout went unnoticed"
        );
        assert_ne!(out.status.code(), Some(101), "{what}: panicked");
        assert!(out.stderr.is_empty(), "{what}: {}", stderr(&out));
    }
}

/// Files named on the command line are refused above a size no real one reaches, before
/// they are read whole: `/dev/zero` once grew a run to 24 GB and the kernel's OOM killer.
#[test]
fn endless_input_files_are_refused_before_reading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "linux");
    let source = format!("sim:{}", sc.display());
    let socket = dir.path().join("d.sock");
    let socket = socket.to_str().expect("utf-8 path");
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "experiment",
                "replica",
                "--seeds",
                "1",
                "--c2c",
                "/dev/zero",
            ],
            "--c2c /dev/zero: larger than 16 MiB",
        ),
        (
            &["agent", "--source", &source, "--policy", "masa"]
                .into_iter()
                .chain(["--masa-calibration", "/dev/zero", "--max-intervals", "1"])
                .collect::<Vec<_>>(),
            "--masa-calibration /dev/zero: larger than 16 MiB",
        ),
        (
            &["daemon", "--socket", socket, "--policy", "/dev/zero"],
            "policy /dev/zero: larger than 1024 KiB",
        ),
    ];
    for (args, want) in cases {
        let out = bin().args(args).output().expect("run counterpoint");
        assert_refused(&out, want, &args.join(" "));
    }
}

/// `simulate --help` states the budget `--force` lifts as a number, and it is the library's.
#[test]
fn simulate_help_states_the_budget_it_enforces() {
    let out = bin().args(["simulate", "--help"]).output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("(2e9 task-ticks"), "{help}");
    assert_eq!(counterpoint_sim::scenario::TASK_TICK_BUDGET, 2_000_000_000);
}

/// `simulate`'s policy errors say each thing once, and a flag the policy ignores is refused
/// like `--hungry-cpus` is.
#[test]
fn simulate_policy_errors_say_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "linux");
    let sc = sc.to_str().expect("utf-8 path");
    let run = |args: &[&str]| {
        let out = bin()
            .arg("simulate")
            .arg(sc)
            .args(args)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{args:?} succeeded");
        stderr(&out)
    };
    let err = run(&["--hungry-cpus", "1"]);
    assert_eq!(err.matches("policy \"linux\"").count(), 1, "{err}");
    let err = run(&["--policy", "masa"]);
    assert_eq!(err.matches("paper's table").count(), 1, "{err}");
    assert!(err.contains("--paper-calibration"), "{err}");
    let err = run(&["--paper-calibration"]);
    assert!(
        err.contains("--paper-calibration: policy \"linux\" uses no load calibration"),
        "{err}"
    );
}

/// `bench c2c --svg` names a place that cannot take the figure before the pairs run.
#[test]
fn bench_c2c_checks_its_figure_path_first() {
    for (svg, want) in [
        ("/proc/x/c2c.svg", "--svg /proc/x/c2c.svg"),
        ("/tmp", "a directory"),
    ] {
        let out = bin()
            .args([
                "bench",
                "c2c",
                "--rounds",
                "1",
                "--futex-rounds",
                "1",
                "--svg",
                svg,
            ])
            .output()
            .expect("run");
        assert_refused(&out, want, svg);
        assert!(!stderr(&out).contains("pair 1/"), "{}", stderr(&out));
    }
}

/// A bad `--source` is named first, whatever else the policy would refuse (here: a PMU this
/// machine may lack).
#[test]
fn agent_names_a_bad_source_first() {
    let out = bin()
        .args(["agent", "--source", "bogus", "--policy", "di"])
        .output()
        .expect("run");
    assert_refused(
        &out,
        "--source \"bogus\": expected host or sim:",
        "agent --source bogus",
    );
}

/// `top --once --count 3` was run as `--once`, the count silently dropped.
#[test]
fn top_once_and_count_conflict() {
    let out = bin()
        .args(["top", "--once", "--count", "3"])
        .output()
        .expect("run");
    assert_refused(&out, "--count", "top --once --count 3");
}

/// `calibrate --seconds 1e-7` printed a table of NaN with exit 0: too short to measure.
#[test]
fn calibrate_refuses_runs_too_short_to_measure() {
    let out = bin()
        .args(["calibrate", "--seconds", "0.0000001"])
        .output()
        .expect("run");
    assert_refused(&out, "too short to measure", "calibrate --seconds 1e-7");
    // And a run too long to wait for: 14 weeks in silence (CLI probe, session 30).
    let out = bin()
        .args(["calibrate", "--seconds", "604800"])
        .output()
        .expect("run");
    assert_refused(
        &out,
        "at most 3600 s (an hour) per run",
        "calibrate --seconds 604800",
    );
}

/// `lockprof -o` is checked before the program runs: after it, a bad path lost the profile.
#[test]
fn lockprof_checks_its_report_path_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("missing/rep.txt");
    let bad = bad.to_str().expect("utf-8 path");
    let out = bin()
        .args(["lockprof", "-o", bad, "--", "true"])
        .output()
        .expect("run");
    assert_refused(&out, &format!("-o {bad}: no directory"), "lockprof -o");
}

/// `heatmap` stops sampling when its target exits (it sampled the whole `--duration-ms`, and
/// the rate was over time the process did not live), and says so.
#[test]
fn heatmap_ends_when_its_target_exits() {
    let mut target = Command::new("sleep").arg("2").spawn().expect("sleep");
    let pid = target.id().to_string();
    let out = bin()
        .args(["heatmap", "--pid", &pid, "--duration-ms", "60000"])
        .output()
        .expect("run");
    let _ = target.wait();
    let err = stderr(&out);
    if err.contains("opening the cpu-clock samplers") {
        return eprintln!("skipped: cpu-clock sampling refused here: {err}");
    }
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("process {pid} exited after")),
        "{err}"
    );
}

/// A kernel thread is refused at once (kthreadd, pid 2 on Linux): it has no user code to map,
/// and its sampling gave an empty table after the whole run (CLI probe, session 27).
#[test]
fn heatmap_refuses_a_kernel_thread() {
    let comm = std::fs::read_to_string("/proc/2/comm").unwrap_or_default();
    if comm.trim() != "kthreadd" {
        return eprintln!("skipped: pid 2 is not kthreadd here ({comm:?})");
    }
    let out = bin()
        .args(["heatmap", "--pid", "2", "--duration-ms", "60000"])
        .output()
        .expect("run heatmap");
    assert_refused(
        &out,
        "--pid 2: a kernel thread (kthreadd)",
        "heatmap on kthreadd",
    );
}

/// A refused sampler names the setting that refuses it and says the OS error once (it was
/// printed twice: "Permission denied (os error 13): Permission denied (os error 13)").
/// Needs root, to run `heatmap` and its target as `nobody`, and perf_event_paranoid >= 2.
#[test]
fn heatmap_refused_names_perf_event_paranoid_once() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return eprintln!("skipped: needs root to run heatmap as another user");
    }
    let paranoid: Option<i32> = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if !matches!(paranoid, Some(p) if p >= 2) {
        return eprintln!("skipped: perf_event_paranoid is {paranoid:?}, kernel samples allowed");
    }
    let mut target = Command::new("sleep")
        .arg("30")
        .uid(65534)
        .gid(65534)
        .spawn()
        .expect("sleep as nobody");
    let pid = target.id().to_string();
    let out = bin()
        .args(["heatmap", "--pid", &pid, "--duration-ms", "100"])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run heatmap as nobody");
    let _ = target.kill();
    let _ = target.wait();
    assert_refused(&out, "perf_event_paranoid is", "heatmap as nobody");
    let err = stderr(&out);
    assert!(err.contains("--no-kernel"), "{err}");
    assert_eq!(err.matches("Permission denied").count(), 1, "{err}");
}

/// An output that cannot be written whole leaves the files it would replace as they were (a full
/// disk left `result.json` truncated to what fitted). The file-size limit stands in for a full
/// disk: writes past it fail with `EFBIG` once `SIGXFSZ` is ignored.
#[test]
fn a_failed_write_leaves_the_old_output_whole() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let sc = scenario(dir.path(), "linux");
    let out_dir = dir.path().join("out");
    // An earlier run's files (simulate refuses to overwrite files it did not write).
    let first = bin()
        .arg("simulate")
        .arg(&sc)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run");
    assert!(first.status.success(), "{}", stderr(&first));
    let old_files = |names: &[&str]| -> Vec<Vec<u8>> {
        names
            .iter()
            .map(|n| std::fs::read(out_dir.join(n)).expect("read"))
            .collect()
    };
    let names = common::SIMULATE_OUT_FILES;
    let before = old_files(&names);
    let mut cmd = bin();
    cmd.arg("simulate").arg(&sc).arg("--out").arg(&out_dir);
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 2048,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().expect("run");
    assert_refused(
        &out,
        "result.json",
        "simulate --out with a 2 KiB file limit",
    );
    // The whole earlier set, not only result.json.
    assert!(
        old_files(&names) == before,
        "an earlier file was replaced or truncated"
    );
    // The partial file is removed.
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Ctrl-C (or SIGTERM) ends `heatmap`'s sampling early and still prints the heatmap of what it
/// sampled, as `perf record` keeps what it recorded (probe, session 22: the default action
/// killed it and the samples were lost). The signal goes once its perf events are open: its
/// handler is installed before it opens them.
#[test]
fn heatmap_interrupted_prints_what_it_sampled() {
    let mut target = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = target.id().to_string();
    let child = bin()
        .args([
            "heatmap",
            "--pid",
            &pid,
            "--duration-ms",
            "600000",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    // Its fd table shows perf events once the samplers are open.
    common::wait_for_perf_fds(child.id());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait");
    let _ = target.kill();
    let _ = target.wait();
    let err = stderr(&out);
    if err.contains("opening the cpu-clock samplers") {
        return eprintln!("skipped: cpu-clock sampling refused here: {err}");
    }
    assert!(out.status.success(), "{err}");
    assert!(err.contains("interrupted after"), "{err}");
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the heatmap's JSON on stdout");
    assert_eq!(v["pid"].to_string(), pid);
}

/// `calibrate` co-runs its probes on CPUs this process may run on: kept to one CPU (as
/// `taskset -c N` keeps it), it refuses naming the CPUs it was allowed, where it pinned a probe
/// to a CPU outside its affinity (CLI probe, session 30).
#[test]
fn calibrate_keeps_to_the_cpus_it_was_allowed() {
    use std::os::unix::process::CommandExt;
    // The first CPU this test may run on: always online and allowed.
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let first = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("an allowed CPU")
    };
    let mut cmd = bin();
    cmd.args(["calibrate", "--seconds", "0.1"]);
    // SAFETY: sched_setaffinity is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(first, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("run");
    assert_refused(
        &out,
        &format!("allowed by its affinity: {first})"),
        "calibrate kept to one CPU",
    );
}

/// `agent-overhead --waker-ms` longer than a whole agent run is refused: the thread would never
/// wake while the agent watched, and the summary said it woke every N ms (CLI probe, session 30).
#[test]
fn agent_overhead_refuses_a_waker_slower_than_its_run() {
    let out = bin()
        .args(["agent-overhead", "--waker-ms", "100000"])
        .args(["--intervals", "4", "--interval", "10ms"])
        .output()
        .expect("run");
    assert_refused(
        &out,
        "--waker-ms 100000: longer than an agent run (4 intervals of 10ms = 40 ms)",
        "agent-overhead --waker-ms 100000",
    );
}
