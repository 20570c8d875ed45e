//! `counterpoint top` on a real busy process: plain text over a pipe, JSON lines, and the live
//! ratatui view driven through tmux (skipped where tmux is missing).

use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

mod common;
use common::Busy;

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

#[test]
fn text_over_a_pipe_is_plain_tables() {
    let a = Busy::spawn();
    // stdout is a pipe here, so no live view even without --once.
    let out = Command::new(BIN)
        .args(["top", "--interval", "200ms", "--count", "2", "--targets"])
        .arg(format!("pid:{}", a.pid()))
        .output()
        .expect("top");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\x1b'), "escape codes over a pipe: {text:?}");
    assert!(
        text.contains("interval 1:") && text.contains("interval 2:"),
        "{text}"
    );
    assert!(!text.contains("interval 3:"), "{text}");
    let row = text
        .lines()
        .rev()
        .find(|l| l.split_whitespace().next() == Some(&a.pid().to_string()))
        .unwrap_or_else(|| panic!("no row for {}: {text}", a.pid()));
    // PID COMM CPU% CS/s MIG/s, then (with a PMU) the three hardware columns, CNT%.
    let cols: Vec<&str> = row.split_whitespace().collect();
    let cpu: f64 = cols[2].parse().expect("CPU%");
    assert!(cpu > 5.0 && cpu < 105.0, "busy loop at {cpu} %: {row}");
    assert!(cols[4].parse::<f64>().is_ok(), "migrations/s: {row}");
    // "n/a" is said once per interval in a header note, never in a row.
    assert!(!row.contains("n/a"), "{row}");
    let pmu = !text.contains("IPC, LLC MPKI, MEM BW: n/a (no PMU)");
    if !pmu {
        assert_eq!(
            text.matches("n/a (no PMU)").count(),
            2,
            "once per interval: {text}"
        );
    }
    // Without --heatmaps the SuperFunction column is off, said once for the whole run.
    assert_eq!(text.matches("SUPERFUNCTION: n/a").count(), 1, "{text}");
    assert_eq!(
        text.matches("n/a").count(),
        if pmu { 1 } else { 3 },
        "{text}"
    );
    // The counted fraction: CNT% in the header, a percentage in the row.
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("PID"))
        .unwrap();
    let hcols: Vec<&str> = header.split_whitespace().collect();
    let cnt = hcols
        .iter()
        .position(|c| *c == "CNT%")
        .expect("CNT% column");
    // Header words: "LLC MPKI" and "MEM BW" are two words each, like their one-word cells.
    let cell_idx = if pmu { cnt - 2 } else { cnt };
    let cnt_cell: f64 = cols[cell_idx].parse().expect("CNT% cell");
    assert!((0.0..=100.0).contains(&cnt_cell), "{row}");
    assert!(text.contains("runs:"), "placement per CPU missing: {text}");
}

#[test]
fn json_lines_one_per_interval_sorted_as_asked() {
    let (a, b) = (Busy::spawn(), Busy::spawn());
    let out = Command::new(BIN)
        .args(["top", "--json", "--count", "2", "--interval", "200ms"])
        .args(["--sort", "pid", "--reverse", "--targets"])
        .arg(format!("pid:{},{}", a.pid(), b.pid()))
        .output()
        .expect("top");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
        .collect();
    assert_eq!(docs.len(), 2, "{text}");
    for d in &docs {
        let pids: Vec<u64> = d["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .filter_map(|t| t["pid"].as_u64())
            .collect();
        let hi = a.pid().max(b.pid()) as u64;
        let lo = a.pid().min(b.pid()) as u64;
        assert_eq!(pids, [hi, lo], "{d}");
        // Without a PMU the hardware values are null and said unavailable (a host with a PMU
        // counts them).
        if d["pmu"] == false {
            assert_eq!(d["tasks"][0]["ipc"], serde_json::Value::Null);
            assert!(d["unavailable"]["ipc"].is_string(), "{d}");
        }
        assert_eq!(d["tasks"][0]["counted_fraction"].as_f64(), Some(1.0));
        // No --heatmaps: no SuperFunction value, and the reason under "unavailable" (the field
        // held the text note, "SUPERFUNCTION: n/a" prefix and all).
        assert_eq!(d["superfunction"], serde_json::Value::Null, "{d}");
        let why = d["unavailable"]["superfunction"].as_str().expect("reason");
        assert!(why.contains("--heatmaps") && !why.contains("n/a"), "{why}");
    }
}

/// `top`'s first line is the interval's header, not a note about a feature that is off; a
/// target that matches nothing is warned about; the heatmap period and the row count are
/// bounded as `heatmap --period-us` is.
#[test]
fn header_first_warnings_and_bounds() {
    let me = format!("pid:{}", std::process::id());
    let out = Command::new(BIN)
        .args(["top", "--once", "--targets", &me])
        .output()
        .expect("top");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("interval 1:"), "{text}");
    assert_eq!(text.matches("SUPERFUNCTION: n/a").count(), 1, "{text}");
    let out = Command::new(BIN)
        .args(["top", "--once", "--targets", "comm:^no-such-command-xyz$"])
        .output()
        .expect("top");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no task matches --targets comm:"), "{err}");
    let cases: [&[&str]; 3] = [
        &["--heatmaps", "--heatmap-period-us", "0"],
        &["--heatmaps", "--heatmap-period-us", "10000001"],
        &["--rows", "0"],
    ];
    for args in cases {
        let out = Command::new(BIN)
            .args(["top", "--once"])
            .args(args)
            .output()
            .expect("top");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is not in"), "{args:?}: {err}");
    }
}

/// A tmux session, killed when dropped.
struct Tmux(String);

impl Tmux {
    fn capture(&self) -> String {
        Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default()
    }
    fn keys(&self, keys: &[&str]) {
        let _ = Command::new("tmux")
            .args(["send-keys", "-t", &self.0])
            .args(keys)
            .status();
    }
    fn wait_for(&self, what: &str) -> String {
        let t0 = Instant::now();
        loop {
            let screen = self.capture();
            if screen.contains(what) || t0.elapsed() > Duration::from_secs(60) {
                return screen;
            }
            sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

/// `top` on `pid` in a detached 150x30 tmux session; after it exits the pane shows its exit
/// status and the terminal mode (`icanon` = raw mode off). `None` where tmux is unusable.
fn live_top(pid: u32, tag: &str) -> Option<Tmux> {
    let have_tmux = Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_tmux {
        eprintln!("skipped: tmux not installed");
        return None;
    }
    let name = format!("cp-top-{tag}-{}", std::process::id());
    let script = format!(
        "{BIN} top --interval 300ms --targets pid:{pid}; echo EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 30"
    );
    let ok = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "150",
            "-y",
            "30",
            &script,
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: tmux cannot start a session here");
        return None;
    }
    Some(Tmux(name))
}

/// The pid of the `counterpoint` process running in the session's pane.
fn top_pid(t: &Tmux) -> Option<u32> {
    let out = Command::new("tmux")
        .args(["list-panes", "-t", &t.0, "-F", "#{pane_pid}"])
        .output()
        .ok()?;
    let shell: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = stat.get(stat.rfind(')')? + 2..)?;
        let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == shell).then_some(pid)
    })
}

#[test]
fn live_view_restores_the_terminal_on_sigterm() {
    let a = Busy::spawn();
    let Some(t) = live_top(a.pid(), "term") else {
        return;
    };
    let screen = t.wait_for("CPU%▼");
    assert!(screen.contains("CPU%▼"), "no live view: {screen}");
    let pid = top_pid(&t).expect("top's pid");
    // SAFETY: kill(2) on the process we started in the session.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let screen = t.wait_for("icanon");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.lines().any(|l| l.trim() == "icanon"),
        "terminal left in raw mode: {screen}"
    );
}

#[test]
fn live_view_sorts_with_keys_and_restores_the_terminal() {
    let a = Busy::spawn();
    let Some(t) = live_top(a.pid(), "keys") else {
        return;
    };
    let screen = t.wait_for("CPU%▼");
    assert!(screen.contains("CPU%▼"), "no live view: {screen}");
    let screen = t.wait_for(&a.pid().to_string());
    assert!(screen.contains("n/a (no PMU)"), "{screen}");
    assert!(screen.contains("placement per CPU"), "{screen}");
    assert!(screen.contains("q/Esc quit"), "{screen}");
    // `s` moves the sort to the next column (CS/s), `r` reverses it.
    t.keys(&["s"]);
    let screen = t.wait_for("CS/s▼");
    assert!(screen.contains("CS/s▼"), "{screen}");
    t.keys(&["r"]);
    let screen = t.wait_for("CS/s▲");
    assert!(screen.contains("(reversed)"), "{screen}");
    t.keys(&["?"]);
    let screen = t.wait_for("reverse the sort order");
    assert!(screen.contains(" help "), "{screen}");
    t.keys(&["q"]);
    let screen = t.wait_for("icanon");
    assert!(screen.contains("EXIT=0"), "{screen}");
    // Raw mode is off again (`icanon`, not `-icanon`) and the main screen is back.
    assert!(
        screen.lines().any(|l| l.trim() == "icanon"),
        "terminal left in raw mode: {screen}"
    );
    assert!(!screen.contains("placement per CPU"), "{screen}");
}

#[test]
fn heatmaps_show_a_busy_shell_loop_as_user_code() {
    let a = Busy::spawn();
    let out = Command::new(BIN)
        .args(["top", "--json", "--count", "1", "--interval", "1s"])
        .args(["--heatmaps", "--heatmap-period-us", "1000", "--targets"])
        .arg(format!("pid:{}", a.pid()))
        .output()
        .expect("top");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON document");
    let note = doc["superfunction"].as_str().expect("superfunction note");
    assert!(note.starts_with("dominant type"), "{note}");
    // `while :; do :; done` runs in the shell's own code: no system calls to speak of.
    let sf = doc["tasks"][0]["superfunction"]
        .as_str()
        .expect("a SuperFunction cell");
    assert!(sf.starts_with("user "), "{sf}: {doc}");
}

/// Without a PMU the hardware columns are hidden, so sorting by one is refused with the reason
/// (it used to order the rows by a column nobody saw).
#[test]
fn sorting_by_a_hardware_column_needs_a_pmu() {
    let me = format!("pid:{}", std::process::id());
    let probe = Command::new(BIN)
        .args(["top", "--json", "--once", "--targets", &me])
        .output()
        .expect("top");
    assert!(probe.status.success());
    let doc: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&probe.stdout).trim()).expect("JSON");
    let pmu = doc["pmu"].as_bool().expect("pmu flag");
    for key in ["ipc", "mpki", "bw"] {
        let out = Command::new(BIN)
            .args(["top", "--json", "--once", "--sort", key, "--targets", &me])
            .output()
            .expect("top");
        let err = String::from_utf8_lossy(&out.stderr);
        if pmu {
            assert!(out.status.success(), "{key}: {err}");
        } else {
            assert_eq!(out.status.code(), Some(2), "{key}: {err}");
            assert!(
                err.contains(&format!("--sort {key}")) && err.contains("needs a hardware PMU"),
                "{err}"
            );
            assert!(out.stdout.is_empty(), "nothing printed for a refused sort");
        }
    }
}

/// A `pid:` list of kernel threads only is refused, naming why, as the agent refuses it: `top`
/// warned "no task matches" for kthreadd, which exists (CLI probe, session 25).
#[test]
fn top_refuses_kernel_thread_targets_naming_them() {
    let comm = std::fs::read_to_string("/proc/2/comm").unwrap_or_default();
    if comm.trim() != "kthreadd" {
        eprintln!("skipped: pid 2 is not kthreadd here");
        return;
    }
    let out = Command::new(BIN)
        .args(["top", "--once", "--targets", "pid:2"])
        .output()
        .expect("top");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("kernel thread") && err.contains("(2)"),
        "{err}"
    );
    assert!(!err.contains("no task matches"), "{err}");
}
