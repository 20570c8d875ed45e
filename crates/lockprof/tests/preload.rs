//! Runs the C programs in `tests/c/` under the preloaded library and checks the report against
//! what the programs are known to do.

use counterpoint_lockprof_report::{read_report, read_reports, Ending};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn lib_path() -> PathBuf {
    // Integration tests live in target/<profile>/deps; the cdylib is in target/<profile>.
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let lib = dir.join("libcounterpoint_lockprof.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

fn compile(name: &str, out: &Path) -> PathBuf {
    compile_with("cc", &format!("{name}.c"), name, out)
}

fn compile_with(compiler: &str, file: &str, name: &str, out: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(file);
    let bin = out.join(name);
    let st = Command::new(compiler)
        .args(["-O1", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc failed for {name}");
    bin
}

struct Run {
    stdout: String,
    code: Option<i32>,
    report: Value,
}

fn run(bin: &Path, args: &[&str], dir: &Path) -> Run {
    let out = Command::new(bin)
        .args(args)
        .env("LD_PRELOAD", lib_path())
        .env("COUNTERPOINT_LOCKPROF_OUT", dir)
        .output()
        .expect("run program");
    let pid_file = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("lockprof.")
        })
        .expect("report written");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&pid_file).unwrap()).unwrap();
    // Every report the library writes is exactly the shared serde type (unknown fields refused).
    read_report(&pid_file).expect("the report matches counterpoint_lockprof_report::Report");
    std::fs::remove_file(pid_file).unwrap();
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        code: out.status.code(),
        report,
    }
}

fn entries<'a>(r: &'a Value, lock: &str, kind: &str) -> Vec<&'a Value> {
    r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["lock"] == lock && e["kind"] == kind)
        .collect()
}

fn sum(es: &[&Value], field: &str) -> u64 {
    es.iter().map(|e| e[field].as_u64().unwrap()).sum()
}

#[test]
fn mutex_grid_counts_are_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("mutex_grid", tmp.path());
    let (n, m, k) = (4u64, 2000u64, 3u64);
    let r = run(
        &bin,
        &[&n.to_string(), &m.to_string(), &k.to_string()],
        tmp.path(),
    );
    assert_eq!(r.code, Some(0));
    assert!(r.stdout.contains(&format!("total {}", n * m)));
    let mut total = 0;
    for line in r.stdout.lines().filter(|l| l.starts_with("lock ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (addr, count) = (f[2], f[3].parse::<u64>().unwrap());
        let es = entries(&r.report, addr, "mutex");
        assert_eq!(sum(&es, "acquisitions"), count, "lock {addr}");
        assert_eq!(sum(&es, "hold_count"), count, "lock {addr}");
        assert!(sum(&es, "contentions") <= count);
        total += count;
    }
    assert_eq!(total, n * m);
    let threads = r.report["threads"].as_array().unwrap();
    assert_eq!(threads.len() as u64, n, "one slot per locking thread");
    for t in threads {
        assert_eq!(t["lock_calls"], m);
        assert_eq!(t["unmatched_unlocks"], 0);
        let parts: u64 = ["free_ns", "locking_ns", "held_ns", "unlocking_ns"]
            .iter()
            .map(|f| t[*f].as_u64().unwrap())
            .sum();
        let total = t["total_ns"].as_u64().unwrap();
        assert!(
            parts <= total + total / 100 + 1000,
            "split exceeds total: {t}"
        );
    }
}

/// Structure only: how long the holds were is a timing and lives in `counterpoint bench
/// lockprof` (hold accuracy against the program's own clock); whether the two threads met is
/// up to the scheduler, so contention is bounded, never required.
#[test]
fn programmed_holds_are_counted_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("hold_time", tmp.path());
    let r = run(&bin, &["2", "40", "200"], tmp.path());
    assert_eq!(r.code, Some(0));
    let addr = r.stdout.split_whitespace().nth(1).unwrap().to_string();
    let es = entries(&r.report, &addr, "mutex");
    assert_eq!(sum(&es, "acquisitions"), 80);
    assert_eq!(sum(&es, "hold_count"), 80, "every hold ended by its unlock");
    assert!(sum(&es, "contentions") <= 80);
    // Per entry: a maximum never exceeds its total, and a 200 us spin is a non-empty hold.
    for e in &es {
        let g = |k: &str| e[k].as_u64().unwrap();
        assert!(g("hold_max_ns") <= g("hold_total_ns"), "{e}");
        assert!(g("wait_max_ns") <= g("wait_total_ns"), "{e}");
        assert!(g("hold_total_ns") > 0, "{e}");
    }
    let threads = r.report["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    for t in threads {
        assert_eq!(t["lock_calls"], 40, "{t}");
        assert_eq!(t["unmatched_unlocks"], 0, "{t}");
    }
}

#[test]
fn rwlocks_and_condition_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("rwlock_cond", tmp.path());
    let (readers, writers, m) = (2u64, 2u64, 1000u64);
    let r = run(&bin, &["2", "2", "1000"], tmp.path());
    assert_eq!(r.code, Some(0));
    let f: Vec<&str> = r.stdout.split_whitespace().collect();
    let (rw, qm, qc) = (f[1], f[3], f[5]);
    assert_eq!(
        sum(&entries(&r.report, rw, "rwlock-read"), "acquisitions"),
        readers * m
    );
    assert_eq!(
        sum(&entries(&r.report, rw, "rwlock-write"), "acquisitions"),
        writers * m
    );
    let waits = sum(&entries(&r.report, qc, "cond-wait"), "acquisitions");
    // The consumer locks once per outer iteration and waits at most once per item.
    let qm_acq = sum(&entries(&r.report, qm, "mutex"), "acquisitions");
    assert!(qm_acq > m && qm_acq <= 2 * m, "{qm_acq}");
    assert!(waits <= m);
    for t in r.report["threads"].as_array().unwrap() {
        assert_eq!(t["unmatched_unlocks"], 0, "{t}");
    }
}

#[test]
fn crash_still_writes_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("crash", tmp.path());
    let r = run(&bin, &[], tmp.path());
    assert_eq!(r.code, None, "killed by a signal");
    assert_eq!(r.report["complete"], false);
    assert_eq!(r.report["signal"], 11);
    let e = &r.report["entries"][0];
    assert_eq!(e["acquisitions"], 1000);
}

#[test]
fn exited_threads_are_merged_and_slots_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("thread_churn", tmp.path());
    // More threads than slots: only works if exiting threads give their slot back.
    let threads = counterpoint_lockprof_max_threads() + 88;
    let r = run(&bin, &[&threads.to_string(), "10"], tmp.path());
    assert_eq!(r.code, Some(0));
    let addr = r.stdout.split_whitespace().nth(1).unwrap().to_string();
    let es = entries(&r.report, &addr, "mutex");
    assert_eq!(sum(&es, "acquisitions"), threads as u64 * 10);
    assert_eq!(r.report["threads_untracked"], 0);
    let exited = r.report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["exited"] == true)
        .count();
    assert_eq!(exited, threads);
}

fn counterpoint_lockprof_max_threads() -> usize {
    // Mirrors counterpoint_lockprof::MAX_THREADS without linking the interposing rlib here.
    512
}

#[test]
fn fork_gives_the_child_its_own_report() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("fork_child", tmp.path());
    let out = Command::new(&bin)
        .env("LD_PRELOAD", lib_path())
        .env("COUNTERPOINT_LOCKPROF_OUT", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = stdout.split_whitespace().collect();
    let (addr, child) = (f[1], f[3]);
    let read = |pid: &str| -> Value {
        let p = tmp.path().join(format!("lockprof.{pid}.json"));
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let parent = read(&out_pid(&stdout, tmp.path(), child));
    let child_r = read(child);
    assert_eq!(sum(&entries(&parent, addr, "mutex"), "acquisitions"), 101);
    // The child's report holds only the child's work, the held-across-fork lock matched.
    assert_eq!(sum(&entries(&child_r, addr, "mutex"), "acquisitions"), 7);
    assert_eq!(child_r["threads"][0]["unmatched_unlocks"], 0);
    assert_eq!(parent["threads"][0]["unmatched_unlocks"], 0);
}

/// The parent's pid: the report file that is not the child's.
fn out_pid(_stdout: &str, dir: &Path, child: &str) -> String {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("lockprof.") && *n != format!("lockprof.{child}.json"))
        .map(|n| {
            n.trim_start_matches("lockprof.")
                .trim_end_matches(".json")
                .to_string()
        })
        .next()
        .unwrap()
}

/// The report of a program ended by `sig` (issue 18 #8: lost before).
fn ended_by_signal(sig: i32) {
    ended_by_signals(&[sig]);
}

/// The report of a program sent `sigs` back to back (the first, the lowest-numbered, ends it).
fn ended_by_signals(sigs: &[i32]) {
    let sig = sigs[0];
    let all = sigs.to_vec();
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("term_wait", tmp.path());
    let mut cmd = Command::new(&bin);
    cmd.arg("123")
        .env("LD_PRELOAD", lib_path())
        .env("COUNTERPOINT_LOCKPROF_OUT", tmp.path())
        .stdout(Stdio::piped());
    // This test is about the profiler, not about how the test runner was started: a runner
    // launched in the background by a shell without job control (or under nohup) has SIGINT /
    // SIGHUP ignored, the child inherits that, the profiler rightly leaves an ignored signal
    // alone, and the child would pause forever. Give the child the default disposition, as a
    // terminal's foreground job has.
    // SAFETY: between fork and exec only async-signal-safe calls (signal, sigprocmask).
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in &all {
                libc::signal(s, libc::SIG_DFL);
                libc::sigaddset(&mut set, s);
            }
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.ends_with("ready\n"), "{line}");
    let addr = line.split_whitespace().nth(1).unwrap().to_string();
    for &s in sigs {
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, s) }, 0);
    }
    let status = wait_bounded(&mut child, sig);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(sig), "it still dies of the signal");
    let found = read_reports(tmp.path()).unwrap();
    assert_eq!(found.reports.len(), 1);
    let r = &found.reports[0];
    assert_eq!(r.ended_by, Ending::Signal);
    assert_eq!(r.signal, Some(sig));
    assert!(!r.complete);
    let acq: u64 = r
        .entries
        .iter()
        .filter(|e| e.lock == addr && e.kind == "mutex")
        .map(|e| e.acquisitions)
        .sum();
    assert_eq!(acq, 123);
    // No dladdr in the handler, but the call site is placed in the executable.
    for e in r.entries.iter().filter(|e| e.lock == addr) {
        let object = e.object.as_deref().unwrap_or("");
        assert!(object.ends_with("/term_wait"), "{e:?}");
        assert!(e.object_offset.is_some() && e.symbol.is_none(), "{e:?}");
    }
}

/// Waits for a child that was sent `sig`; a child still alive after two minutes is killed and the
/// test fails with a message, so a lost signal shows as a failure instead of a hung suite. (The
/// bound is a hang guard, not a timing assertion: a live child has had 120 s to die.)
fn wait_bounded(child: &mut std::process::Child, sig: i32) -> std::process::ExitStatus {
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the child did not end within 120 s of signal {sig}");
}

#[test]
fn sigterm_writes_the_profile() {
    ended_by_signal(libc::SIGTERM);
}

#[test]
fn sigint_writes_the_profile() {
    ended_by_signal(libc::SIGINT);
}

#[test]
fn sighup_writes_the_profile() {
    ended_by_signal(libc::SIGHUP);
}

/// A second ending signal while the first one's handler writes the report (Ctrl-C from the
/// terminal and again from `counterpoint lockprof`, or a signal to a whole process group)
/// waits: the report is whole and the process dies of the first.
#[test]
fn a_second_signal_does_not_cut_the_profile_short() {
    ended_by_signals(&[libc::SIGINT, libc::SIGTERM]);
}

/// Issue 18 #8: every lock taken before an exec was lost. Now each image writes its segment
/// just before its exec (execv, and the variadic execlp through the naked trampoline); a failed
/// exec loses nothing (execv: the file is removed at once; execl: it is replaced by the next
/// flush, with everything since).
#[test]
fn exec_keeps_the_profile_of_the_image_before() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("exec_chain", tmp.path());
    let out = Command::new(&bin)
        .env("LD_PRELOAD", lib_path())
        .env("COUNTERPOINT_LOCKPROF_OUT", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let addr = |image: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("image {image} lock")))
            .and_then(|l| l.split_whitespace().nth(3))
            .unwrap()
            .to_string()
    };
    let found = read_reports(tmp.path()).unwrap();
    assert_eq!(found.reports.len(), 3, "one report per image: {stdout}");
    let acq = |r: &counterpoint_lockprof_report::Report, a: &str| -> u64 {
        r.entries
            .iter()
            .filter(|e| e.lock == a && e.kind == "mutex")
            .map(|e| e.acquisitions)
            .sum()
    };
    let expect = [
        ("1", Ending::Exec, 60),
        ("2", Ending::Exec, 30),
        ("3", Ending::Exit, 20),
    ];
    for (i, (r, (image, ending, n))) in found.reports.iter().zip(expect).enumerate() {
        assert_eq!(r.pid, found.reports[0].pid, "exec keeps the pid");
        assert_eq!(r.segment as usize, i);
        assert_eq!(r.ended_by, ending, "image {image}");
        assert_eq!(acq(r, &addr(image)), n, "image {image}");
    }
}

fn entry_sum(r: &Value, lock: &str, kind: &str, field: &str) -> u64 {
    sum(&entries(r, lock, kind), field)
}

/// Issue 18 #12: the clock variants were not interposed: clocklock acquisitions were lost and
/// their unlocks unmatched; a cond_clockwait showed as mutex hold and no wait.
#[test]
fn clock_variants_are_interposed() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("clock_variants", tmp.path());
    let r = run(&bin, &["40", "5"], tmp.path());
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    let f: Vec<&str> = r.stdout.split_whitespace().collect();
    let (m, rw, cm, c) = (f[1], f[3], f[5], f[7]);
    assert_eq!(entry_sum(&r.report, m, "mutex", "acquisitions"), 40);
    assert_eq!(entry_sum(&r.report, m, "mutex", "hold_count"), 40);
    assert_eq!(entry_sum(&r.report, rw, "rwlock-read", "acquisitions"), 40);
    assert_eq!(entry_sum(&r.report, rw, "rwlock-write", "acquisitions"), 40);
    // Five waits, all timed out; the mutex is released for each wait: 1 acquisition, 6 holds.
    assert_eq!(entry_sum(&r.report, c, "cond-wait", "acquisitions"), 5);
    assert_eq!(f[9], "5", "the program saw five timeouts");
    assert_eq!(entry_sum(&r.report, c, "cond-wait", "contentions"), 5);
    assert_eq!(entry_sum(&r.report, cm, "mutex", "acquisitions"), 1);
    assert_eq!(entry_sum(&r.report, cm, "mutex", "hold_count"), 6);
    for t in r.report["threads"].as_array().unwrap() {
        assert_eq!(t["unmatched_unlocks"], 0, "{t}");
    }
}

/// The C++ case of issue 18 #12: `condition_variable::wait_for`.
#[test]
fn cpp_condition_variable_wait_for_is_a_wait() {
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("skipped: no g++");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_with("g++", "cv_wait_for.cpp", "cv_wait_for", tmp.path());
    let r = run(&bin, &["5"], tmp.path());
    assert_eq!(r.code, Some(0));
    let f: Vec<&str> = r.stdout.split_whitespace().collect();
    let (mx, cv) = (f[1], f[3]);
    assert_eq!(entry_sum(&r.report, cv, "cond-wait", "acquisitions"), 5);
    assert_eq!(entry_sum(&r.report, mx, "mutex", "acquisitions"), 1);
    assert_eq!(entry_sum(&r.report, mx, "mutex", "hold_count"), 6);
}

/// The `pmu` field says whether this machine has a core PMU, and why there are no deltas.
#[test]
fn pmu_field_tells_the_truth_here() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("mutex_grid", tmp.path());
    let r = run(&bin, &["1", "10", "1"], tmp.path());
    let pmu = r.report["pmu"].as_str().unwrap();
    let devices = Path::new("/sys/bus/event_source/devices");
    let has = ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| devices.join(p).exists())
        || std::fs::read_dir(devices).is_ok_and(|d| {
            d.filter_map(Result::ok).any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("armv") || n.starts_with("arm_cortex")
            })
        });
    if has {
        assert!(pmu.starts_with("present ("), "{pmu}");
    } else {
        assert!(pmu.starts_with("none: no hardware PMU"), "{pmu}");
    }
}

fn addr_of(stdout: &str, name: &str) -> String {
    let f: Vec<&str> = stdout.split_whitespace().collect();
    let i = f.iter().position(|w| *w == name).expect("name printed");
    f[i + 1].to_string()
}

fn hist_total(es: &[&Value], field: &str) -> u64 {
    es.iter()
        .flat_map(|e| e[field].as_array().unwrap().iter())
        .map(|b| b[1].as_u64().unwrap())
        .sum()
}

/// Owner changes are exact when the threads take turns by construction; every other lock kind
/// (timed mutex and rwlock variants, spinlocks, condition-variable notifications) is counted;
/// histograms hold one sample per acquisition and hold; minima are within the maxima; the
/// first-seen stack starts in the program.
fn check_owners_report(r: &Run, bin: &Path, n: u64) {
    let rep = &r.report;
    let m = addr_of(&r.stdout, "m");
    let es = entries(rep, &m, "mutex");
    assert_eq!(sum(&es, "acquisitions"), 2 * n + 1);
    assert_eq!(sum(&es, "owner_changes"), 2, "A->B and B->main: {es:?}");
    assert_eq!(hist_total(&es, "wait_hist"), 2 * n + 1);
    assert_eq!(hist_total(&es, "hold_hist"), sum(&es, "hold_count"));
    for e in &es {
        assert!(
            e["wait_min_ns"].as_u64() <= e["wait_max_ns"].as_u64(),
            "{e}"
        );
        assert!(
            e["hold_min_ns"].as_u64() <= e["hold_max_ns"].as_u64(),
            "{e}"
        );
    }
    let t = addr_of(&r.stdout, "t");
    assert_eq!(
        sum(&entries(rep, &t, "mutex"), "acquisitions"),
        n,
        "timedlock"
    );
    assert_eq!(sum(&entries(rep, &t, "mutex"), "owner_changes"), 0);
    let rw = addr_of(&r.stdout, "r");
    assert_eq!(sum(&entries(rep, &rw, "rwlock-read"), "acquisitions"), n);
    assert_eq!(sum(&entries(rep, &rw, "rwlock-write"), "acquisitions"), n);
    let s = addr_of(&r.stdout, "s");
    let spin = entries(rep, &s, "spin");
    assert_eq!(
        sum(&spin, "acquisitions"),
        2 * n,
        "spin_lock + spin_trylock"
    );
    assert_eq!(spin.len(), 2, "two call sites");
    let c = addr_of(&r.stdout, "c");
    assert_eq!(sum(&entries(rep, &c, "cond-signal"), "acquisitions"), 3);
    assert_eq!(sum(&entries(rep, &c, "cond-broadcast"), "acquisitions"), 2);
    for t in rep["threads"].as_array().unwrap() {
        assert_eq!(t["unmatched_unlocks"], 0);
    }
    // The lock table: each lock once, first seen with a stack whose first frame is the program.
    let locks = rep["locks"].as_array().unwrap();
    let ml: Vec<&Value> = locks.iter().filter(|l| l["lock"] == m.as_str()).collect();
    assert_eq!(ml.len(), 1, "{locks:?}");
    let frames = ml[0]["frames"].as_array().unwrap();
    assert!(!frames.is_empty(), "{:?}", ml[0]);
    let obj = frames[0]["object"].as_str().unwrap_or("");
    assert_eq!(
        Path::new(obj).file_name(),
        bin.file_name(),
        "first frame in the program: {:?}",
        ml[0]
    );
    assert_eq!(
        ml[0]["created"], false,
        "statically initialised: first taken"
    );
    // The spinlock is made by pthread_spin_init in main: its stack is the creating one.
    let sl: Vec<&Value> = locks.iter().filter(|l| l["lock"] == s.as_str()).collect();
    assert_eq!(sl.len(), 1, "{locks:?}");
    assert_eq!(sl[0]["created"], true, "{:?}", sl[0]);
    let obj = sl[0]["frames"][0]["object"].as_str().unwrap_or("");
    assert_eq!(Path::new(obj).file_name(), bin.file_name(), "{:?}", sl[0]);
    assert_eq!(rep["locks_untracked"], 0);
}

#[test]
fn owner_changes_timed_variants_spinlocks_and_notifications() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("owners", tmp.path());
    let r = run(&bin, &["50"], tmp.path());
    assert_eq!(r.code, Some(0));
    assert_eq!(r.report["ended_by"], "exit");
    check_owners_report(&r, &bin, 50);
}

/// `_exit` skips atexit handlers; the interposed `_exit` writes the profile first.
#[test]
fn quick_exit_still_writes_the_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("owners", tmp.path());
    let r = run(&bin, &["20", "quick"], tmp.path());
    assert_eq!(r.code, Some(0));
    assert_eq!(r.report["ended_by"], "_exit");
    assert_eq!(r.report["complete"], true);
    check_owners_report(&r, &bin, 20);
}

/// Opt-in counter deltas while held, on a software event (no PMU needed): the 64 page faults of
/// the pages first touched under mutex a are counted to a; b, which guards nothing, gets (next
/// to) none.
#[test]
fn page_faults_while_held_are_attributed_to_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("faults_held", tmp.path());
    let out = Command::new(&bin)
        .arg("64")
        .env("LD_PRELOAD", lib_path())
        .env("COUNTERPOINT_LOCKPROF_OUT", tmp.path())
        .env("COUNTERPOINT_LOCKPROF_EVENTS", "page-faults,task-clock")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let found = read_reports(tmp.path()).expect("reports");
    let r = &found.reports[0];
    assert_eq!(r.events, vec!["page-faults", "task-clock"]);
    assert_eq!(r.events_error, None);
    let delta = |addr: &str, i: usize| -> u64 {
        r.entries
            .iter()
            .filter(|e| e.lock == addr)
            .map(|e| e.event_deltas[i])
            .sum()
    };
    let (a, b) = (addr_of(&stdout, "a"), addr_of(&stdout, "b"));
    // At least the 64 first touches; a loaded machine can add a minor fault anywhere (a text
    // page reclaimed and faulted back), so no exact count and b is only compared with a.
    assert!(delta(&a, 0) >= 64, "{r:?}");
    assert!(delta(&b, 0) < delta(&a, 0) / 2, "{r:?}");
    assert!(delta(&a, 1) > 0, "task-clock ran while a was held");

    // Off by default: no events, no deltas.
    let dir2 = tempfile::tempdir().unwrap();
    let r = run(&bin, &["8"], dir2.path());
    assert_eq!(r.report["events"].as_array().unwrap().len(), 0);
    assert_eq!(
        r.report["entries"][0]["event_deltas"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

/// An event list the library cannot use is reported, not fatal.
#[test]
fn a_bad_event_list_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile("faults_held", tmp.path());
    let out = Command::new(&bin)
        .arg("4")
        .env("LD_PRELOAD", lib_path())
        .env("COUNTERPOINT_LOCKPROF_OUT", tmp.path())
        .env("COUNTERPOINT_LOCKPROF_EVENTS", "no-such-event")
        .output()
        .unwrap();
    assert!(out.status.success());
    let found = read_reports(tmp.path()).expect("reports");
    let e = found.reports[0].events_error.clone().unwrap_or_default();
    assert!(e.contains("no-such-event"), "{e}");
    assert!(found.reports[0].events.is_empty());
}

/// `lockprof --events` refuses a list longer than the library reads, by the report crate's
/// constant (the library cannot link that crate): the two must agree. Read from the source, as
/// `counterpoint_lockprof_max_threads` mirrors its constant: linking the interposing rlib
/// into this test would profile the test harness itself and leave its report in the crate.
#[test]
fn the_command_and_the_library_read_as_many_events() {
    let want = format!(
        "pub const MAX_EVENTS: usize = {};",
        counterpoint_lockprof_report::MAX_EVENTS
    );
    assert!(
        include_str!("../src/events.rs").contains(&want),
        "src/events.rs does not say {want}"
    );
}
