//! The C ABI end to end: the example in `examples/c/regions.c` is compiled against the shared
//! and the static library and run; its JSON report must have the exact entry counts.

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>, from this test executable's path (target/<profile>/deps/c_abi-...).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

fn libraries() -> Option<PathBuf> {
    let dir = target_dir();
    let so = dir.join("libcounterpoint_selfmon.so");
    let a = dir.join("libcounterpoint_selfmon.a");
    if !so.exists() || !a.exists() {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "counterpoint-selfmon", "--lib"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("cargo build");
        assert!(st.success(), "building the selfmon libraries failed");
    }
    (so.exists() && a.exists()).then_some(dir)
}

fn have_cc() -> bool {
    Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn check_report(json: &Path) {
    let text = std::fs::read_to_string(json).expect("report written");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    let regions = v["regions"].as_array().expect("regions");
    let get = |name: &str| {
        regions
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no region {name} in {text}"))
    };
    for name in ["outer", "inner"] {
        let r = get(name);
        assert_eq!(r["entries"], 2000, "{name}: {text}");
        assert_eq!(r["threads"], 2, "{name}: {text}");
        assert!(
            r["counts"]["task-clock"].as_u64().expect("task-clock") > 0,
            "{text}"
        );
    }
    // Inclusive nesting: the outer region contains the inner one.
    assert!(get("outer")["total_ns"].as_u64() >= get("inner")["total_ns"].as_u64());
    assert_eq!(
        v["events"],
        serde_json::json!(["task-clock", "page-faults"])
    );
}

fn build_and_run(kind: &str, dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = tmp.path().join(format!("regions-{kind}"));
    let mut cc = Command::new("cc");
    cc.arg(root.join("examples/c/regions.c"))
        .arg("-I")
        .arg(root.join("include"))
        .arg("-o")
        .arg(&exe);
    if kind == "shared" {
        cc.arg(format!("-L{}", dir.display()))
            .arg("-lcounterpoint_selfmon")
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .arg("-lpthread");
    } else {
        cc.arg(dir.join("libcounterpoint_selfmon.a"))
            .args(["-lpthread", "-ldl", "-lm"]);
    }
    let out = cc.output().expect("cc");
    assert!(
        out.status.success(),
        "cc ({kind}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = tmp.path().join("report.json");
    let out = Command::new(&exe).arg(&json).output().expect("run example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "example ({kind}) failed: {stderr}");
    assert!(stderr.contains("unknown event 'bogus-event'"), "{stderr}");
    assert!(
        stderr.contains("outer") && stderr.contains("inner"),
        "table: {stderr}"
    );
    check_report(&json);
}

#[test]
fn c_example_against_shared_and_static_libraries() {
    if !have_cc() {
        eprintln!("skipped: no C compiler");
        return;
    }
    let Some(dir) = libraries() else {
        panic!("selfmon libraries not found in {}", target_dir().display());
    };
    build_and_run("shared", &dir);
    build_and_run("static", &dir);
}
