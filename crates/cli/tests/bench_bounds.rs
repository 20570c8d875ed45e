//! Counts of the benches and of `agent-overhead` are bounded: a typo's huge number (or a 0 that
//! would divide by zero) is refused before any work, with the flag and the allowed range named;
//! a `--compare-lib` that is not a library, or that is not preloaded, is refused. Only exit
//! statuses and message text are checked, never a time.

mod common;

use common::{run, stderr};
use std::process::Output;

/// A refused command: a non-zero status that is not a panic's (101), no panic text, and a
/// message containing each of `want`.
fn assert_refused(out: &Output, want: &[&str], what: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "{what}: succeeded; stderr: {err}");
    assert_ne!(out.status.code(), Some(101), "{what}: panicked: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    for w in want {
        assert!(err.contains(w), "{what}: expected {w:?} in: {err}");
    }
}

const HUGE: &str = "18446744073709551615";

#[test]
fn bench_counts_are_bounded() {
    // (bench, flag, the other flags, the largest value accepted)
    let cases: [(&str, &str, &[&str], &str); 9] = [
        ("read", "--iterations", &["--rounds", "1"], "1000000"),
        ("read", "--rounds", &["--iterations", "1"], "1000"),
        ("selfmon", "--iterations", &["--rounds", "1"], "1000000"),
        ("selfmon", "--rounds", &["--iterations", "1"], "1000"),
        ("requests", "--iterations", &["--rounds", "1"], "200000"),
        ("requests", "--rounds", &["--iterations", "1"], "1000"),
        ("lockprof", "--pairs", &["--rounds", "1"], "50000000"),
        ("lockprof", "--rounds", &["--pairs", "1"], "100"),
        ("broker", "--fuzz", &[], "100000000"),
    ];
    for (bench, flag, other, max) in cases {
        let over = (max.parse::<u64>().expect("a number") + 1).to_string();
        for v in ["0", over.as_str(), HUGE] {
            let what = format!("bench {bench} {flag} {v}");
            let mut args = vec!["bench", bench, flag, v];
            args.extend_from_slice(other);
            let range = format!("1..={max}");
            assert_refused(&run(&args), &[flag, v, &range], &what);
        }
        // The range is in the flag's help.
        let help = run(&["bench", bench, "--help"]);
        assert!(help.status.success(), "{}", stderr(&help));
        let text = String::from_utf8_lossy(&help.stdout);
        let line = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(flag))
            .take(3)
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            line.contains(&format!("1 to {max}")),
            "bench {bench} {flag}: {text}"
        );
    }
}

#[test]
fn agent_overhead_threads_are_bounded() {
    for v in ["10001", "100000000", "4294967296"] {
        let out = run(&[
            "agent-overhead",
            "--threads",
            v,
            "--interval",
            "100ms",
            "--intervals",
            "4",
            "--repeat",
            "1",
        ]);
        assert_refused(
            &out,
            &["--threads", v, "0..=10000"],
            &format!("--threads {v}"),
        );
    }
    let help = run(&["agent-overhead", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("(0 to 10000)"));
    // The helper's own flag too.
    let out = run(&["agent-overhead", "--hold-threads", "100000000"]);
    assert_refused(&out, &["--hold-threads", "0..=10000"], "--hold-threads");
}

#[test]
fn compare_lib_must_be_an_elf_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("not-a-library.so");
    std::fs::write(&text, "#!/bin/sh\n").expect("write");
    let short = dir.path().join("short.so");
    std::fs::write(&short, "\x7fE").expect("write");
    let missing = dir.path().join("missing.so");
    let cases = [
        ("/etc/passwd".into(), "not an ELF shared library"),
        (text, "not an ELF shared library"),
        (short, "not an ELF shared library"),
        (dir.path().to_path_buf(), "not a regular file"),
        (missing, "No such file"),
    ];
    for (path, why) in cases {
        let p = path.to_str().expect("utf-8 path");
        let out = run(&[
            "bench",
            "lockprof",
            "--rounds",
            "1",
            "--pairs",
            "1000",
            "--compare-lib",
            p,
        ]);
        assert_refused(&out, &[&format!("--compare-lib {p}: "), why], p);
        // Refused before anything ran.
        assert!(out.stdout.is_empty(), "{p}");
    }
}

/// A file that starts like ELF but that ld.so cannot load: the comparison run notices that the
/// library was not preloaded (ld.so says so and runs the program without it).
#[test]
fn compare_lib_that_is_not_preloaded_is_an_error() {
    common::ensure_lockprof_lib();
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("truncated.so");
    let mut bytes = b"\x7fELF".to_vec();
    bytes.resize(200, 0);
    std::fs::write(&bad, bytes).expect("write");
    let p = bad.to_str().expect("utf-8 path");
    let out = run(&[
        "bench",
        "lockprof",
        "--rounds",
        "1",
        "--pairs",
        "1000",
        "--compare-lib",
        p,
    ]);
    assert_refused(
        &out,
        &[
            &format!("--compare-lib {p}: not preloaded into"),
            "cannot be preloaded",
        ],
        p,
    );
    assert!(out.stdout.is_empty());
}

/// An ELF shared library that loads but is not the lock profiler (the C library's math
/// library): it writes no report, and the comparison says so.
#[test]
fn compare_lib_that_is_not_the_profiler_is_an_error() {
    common::ensure_lockprof_lib();
    let Some(libm) = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .iter()
    .find(|p| std::path::Path::new(p).is_file()) else {
        eprintln!("no libm.so.6 found; skipped");
        return;
    };
    let out = run(&[
        "bench",
        "lockprof",
        "--rounds",
        "1",
        "--pairs",
        "1000",
        "--compare-lib",
        libm,
    ]);
    assert_refused(
        &out,
        &[
            &format!("--compare-lib {libm}: preloaded into"),
            "wrote no lock profile report",
        ],
        libm,
    );
}

/// `--fuzz` runs the decoder only: the measured runs' options beside it are refused by clap,
/// naming both (they were ignored without a word; CLI probe, session 29), and the help says
/// which go together.
#[test]
fn broker_fuzz_refuses_the_measured_runs_options() {
    for opt in [
        &["--consumers", "3"][..],
        &["--seconds", "1"],
        &["--reads", "100"],
        &["--shared"],
    ] {
        let mut args = vec!["bench", "broker", "--fuzz", "5"];
        args.extend_from_slice(opt);
        let out = run(&args);
        let what = args.join(" ");
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert_refused(&out, &["--fuzz", opt[0], "cannot be used with"], &what);
        assert!(out.stdout.is_empty(), "{what}");
    }
    let help = run(&["bench", "broker", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("Goes with --json only"), "{text}");
    assert!(
        text.contains("none of the above (refused with it)"),
        "{text}"
    );
}

/// `bench broker --fuzz N --json` prints one JSON object (it printed the text line).
#[test]
fn broker_fuzz_honours_json() {
    let out = run(&["bench", "broker", "--fuzz", "1000", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["fuzz_inputs"], 1000);
    assert_eq!(v["panics"], 0);
}
