//! Fixes of session 23: `calibrate` stopped by a signal prints the runs that finished instead
//! of dying silently. The signal is sent once a progress line shows a run has finished, and the
//! checks hold however many more finished before it came; only the status, the JSON's fields and the
//! message are checked, never a measured rate.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn calibrate_stopped_by_sigterm_prints_the_runs_that_finished() {
    if online_cpus() < 2 {
        eprintln!("skipped: calibrate needs two online CPUs");
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        // 10 s a run: the signal lands well before the calibration's 140 s are over.
        .args(["calibrate", "--json", "--seconds", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn calibrate");
    let mut child = common::Kill(child);
    let err = child.0.stderr.take().expect("stderr");
    let mut lines = BufReader::new(err).lines();
    let mut seen = Vec::new();
    // "[ 2/14] ..." is printed when the second run starts: the first one has finished.
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        let second = line.starts_with("[ 2/");
        seen.push(line);
        if second {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.starts_with("[ 2/")),
        "no second run: {seen:?}"
    );
    // SAFETY: the pid is our unreaped child's.
    unsafe { libc::kill(child.pid() as i32, libc::SIGTERM) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.0.wait_with_output_stdout();
    let status = child.0.wait().expect("wait");
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{rest:?}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(v["complete"], false, "{out}");
    let solo = v["solo_units_per_s"].as_array().expect("solo rates").len();
    let pairs = v["pairs"].as_array().map_or(0, Vec::len);
    // The first run finished (the signal came after the second began; how many more finished
    // depends on how soon it came): those are printed, the one cut short is dropped.
    assert!(solo >= 1 && solo + pairs < 14, "{out}");
    let said = format!("stopped by SIGTERM after {} of 14 runs", solo + pairs);
    let warned = v["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .any(|w| w.as_str().is_some_and(|w| w.contains(&said)));
    assert!(warned, "{said}: {out}");
    assert!(
        rest.iter().any(|l| l.contains("stopped by SIGTERM")),
        "stderr: {rest:?}"
    );
}

trait StdoutText {
    fn wait_with_output_stdout(&mut self) -> String;
}

impl StdoutText for std::process::Child {
    /// Everything the child writes to stdout, up to its end.
    fn wait_with_output_stdout(&mut self) -> String {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut out) = self.stdout.take() {
            out.read_to_string(&mut text).expect("read stdout");
        }
        text
    }
}

/// A measurement that would run for more than a day is refused before anything starts (four
/// billion repetitions of hour-long intervals were accepted and ran in silence).
#[test]
fn agent_overhead_refuses_a_run_of_years() {
    let o = common::run(&[
        "agent-overhead",
        "--repeat",
        "4294967295",
        "--intervals",
        "1000000",
        "--interval",
        "1h",
    ]);
    let err = common::stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("days of measuring: at most 24.0 h"), "{err}");
}

/// `requests --pid`: an event named twice is refused (it made two identical CSV columns),
/// a list of which nothing can be counted is refused before any input is read (it printed
/// rows of `"counts":{}`), and an input that measured no request exits 1, as when the task
/// exits first (it exited 0).
#[test]
fn requests_refuses_what_it_cannot_measure() {
    use std::io::Write;
    let sleeper = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let sleeper = common::Kill(sleeper);
    let pid = sleeper.pid().to_string();
    let run_with = |events: Option<&str>, input: &str| {
        let mut args = vec!["requests", "--pid", &pid];
        if let Some(e) = events {
            args.extend(["--events", e]);
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn requests");
        let mut stdin = child.stdin.take().expect("stdin");
        // A command that refuses before reading its input may already be gone: a closed pipe
        // is then part of the outcome, not a failure of the test.
        let _ = stdin.write_all(input.as_bytes());
        drop(stdin);
        child.wait_with_output().expect("requests output")
    };
    let twice = run_with(Some("task-clock,task-clock"), "begin 1\nend 1\n");
    assert_eq!(twice.status.code(), Some(2));
    assert!(common::stderr(&twice).contains("task-clock is named twice"));
    // `cycles` needs a PMU; where one exists it can be counted and this case does not apply.
    if !common::has_hw_pmu() {
        let none = run_with(Some("cycles"), "begin 1\nend 1\n");
        assert_eq!(none.status.code(), Some(2), "{}", common::stderr(&none));
        assert!(common::stderr(&none).contains("none of these events can be counted here"));
    }
    let empty = run_with(Some("task-clock"), "");
    assert_eq!(empty.status.code(), Some(1), "{}", common::stderr(&empty));
    assert!(common::stderr(&empty).contains("no request measured"));
    let one = run_with(Some("task-clock"), "begin 1\nend 1\n");
    assert_eq!(one.status.code(), Some(0), "{}", common::stderr(&one));
}
