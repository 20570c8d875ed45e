//! The request entry points from C (`examples/c/requests.c`, linked against the shared
//! library): 100 one-thread requests and one stitched across two threads, as JSON lines.

use std::path::{Path, PathBuf};
use std::process::Command;

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

#[test]
fn c_requests_are_written_as_json_lines() {
    if !Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        panic!("cc is needed for the C ABI tests (scripts/setup installs gcc)");
    }
    let dir = target_dir();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "counterpoint-selfmon", "--lib"]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo build").success());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = tmp.path().join("requests");
    let out = Command::new("cc")
        .arg(root.join("examples/c/requests.c"))
        .arg("-I")
        .arg(root.join("include"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", dir.display()))
        .arg("-lcounterpoint_selfmon")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-lpthread")
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jsonl = tmp.path().join("requests.jsonl");
    let out = Command::new(&exe).arg(&jsonl).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "example failed: {stderr}");
    assert!(stderr.contains("request 7"), "{stderr}");
    let text = std::fs::read_to_string(&jsonl).expect("written");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(rows.len(), 101);
    let handoff = rows.iter().find(|r| r["id"] == 1000).expect("request 1000");
    assert_eq!(handoff["class"], "handoff");
    assert_eq!(handoff["segments"], 2);
    assert_eq!(handoff["threads"], 2);
    assert_eq!(rows.iter().filter(|r| r["class"] == "odd").count(), 50);
    for r in &rows {
        assert_eq!(r["lost"]["task-clock"], 0, "{r}");
        assert!(
            r["counts"]["task-clock"].as_u64().expect("task-clock") > 0,
            "{r}"
        );
    }
}
