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
    // Always (a no-op when fresh): `cargo test` builds the rlib, not necessarily the shared
    // and static libraries, which would otherwise be stale from an older build.
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "counterpoint-selfmon", "--lib"]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("cargo build");
    assert!(st.success(), "building the selfmon libraries failed");
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
    assert_eq!(get("main")["entries"], 1, "{text}");
    assert!(
        regions.iter().all(|r| r["name"] != "child"),
        "the child's regions are not the parent's: {text}"
    );
}

/// The forked child's own report: only its regions, counted by its own counters.
fn check_child_report(json: &Path) {
    let text = std::fs::read_to_string(json).expect("child report written");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    let regions = v["regions"].as_array().expect("regions");
    assert_eq!(regions.len(), 1, "{text}");
    assert_eq!(regions[0]["name"], "child");
    assert_eq!(regions[0]["entries"], 3);
    assert_eq!(regions[0]["threads"], 1);
    assert_eq!(regions[0]["lost"]["task-clock"], 0, "{text}");
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
    // cp_report(NULL) once and the parent's at-exit table once; the child (which exits with
    // exit(), running the inherited at-exit handlers) must not print the parent's again.
    assert_eq!(
        stderr.matches("counterpoint selfmon:").count(),
        2,
        "{stderr}"
    );
    check_report(&json);
    check_child_report(&tmp.path().join("report.json.child"));
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
