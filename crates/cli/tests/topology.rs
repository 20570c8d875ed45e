//! `counterpoint topology` on the fixture sysfs trees of the host crate, as text and JSON, and
//! on a bad `--sysfs` root.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_counterpoint");

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../host/tests/data/sysfs")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("topology")
        .args(args)
        .output()
        .expect("run counterpoint")
}

fn text(name: &str) -> String {
    let out = run(&["--sysfs", fixture(name).to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn json(name: &str) -> Value {
    let out = run(&[
        "--json",
        "--sysfs",
        fixture(name).to_str().expect("utf-8 path"),
    ]);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn xeon_text() {
    let t = text("xeon-2s-smt");
    assert!(
        t.contains("CPUs: 32 present (0-31), 30 online (0-29), offline: 30-31"),
        "{t}"
    );
    assert!(
        t.contains("shape: 2 package(s), 16 core(s), 30 online thread(s), SMT yes"),
        "{t}"
    );
    assert!(
        t.contains("package 1: 8 core(s), 14 thread(s), NUMA node 1"),
        "{t}"
    );
    assert!(t.contains("core   8: cpus 5,21"), "{t}");
    assert!(
        t.contains("L3       12 MiB   2 x per package   0-7,16-23 | 8-15,24-29"),
        "{t}"
    );
    assert!(t.contains("L2     1.25 MiB  16 x per core"), "{t}");
    assert!(t.contains("node 1: cpus 8-15,24-29, 64 GiB"), "{t}");
}

#[test]
fn amd_text_shows_four_l3_domains() {
    let t = text("amd-epyc-ccx");
    assert!(
        t.contains(
            "L3       16 MiB   4 x per 4 cores   0-3,16-19 | 4-7,20-23 | 8-11,24-27 | 12-15,28-31"
        ),
        "{t}"
    );
    assert!(t.contains("LLC: L3, 4 domain(s)"), "{t}");
}

#[test]
fn hybrid_text_shows_kinds() {
    let t = text("intel-hybrid");
    assert!(
        t.contains("kinds: 16 performance (0-15), 8 efficiency (16-23)"),
        "{t}"
    );
    assert!(t.contains("core  32: cpus 16  [efficiency]"), "{t}");
    assert!(
        t.contains("L2        2 MiB   2 x per 4 cores   16-19 | 20-23"),
        "{t}"
    );
}

#[test]
fn broken_text_lists_what_was_missing() {
    let t = text("broken");
    assert!(
        t.contains("none described (LLC domains default to packages)"),
        "{t}"
    );
    assert!(t.contains("package unknown: 1 core(s), 1 thread(s)"), "{t}");
    assert!(t.contains("cpu3: online but no topology/ directory"), "{t}");
}

#[test]
fn vm_json_is_the_whole_topology() {
    let j = json("vm-2cpu");
    assert_eq!(j["cpus"].as_array().map(Vec::len), Some(2));
    assert_eq!(j["cpus"][1]["core"], 1);
    assert_eq!(j["cpus"][0]["kind"], "uniform");
    let caches = j["caches"].as_array().expect("caches");
    assert_eq!(caches.len(), 7, "2 L1d + 2 L1i + 2 L2 + 1 L3");
    let l3 = caches.iter().find(|c| c["level"] == 3).expect("an L3");
    assert_eq!(l3["cpus"], "0-1");
    assert_eq!(l3["size_bytes"], 491520u64 * 1024);
    assert_eq!(j["numa_nodes"][0]["cpus"], "0-1");
    assert_eq!(j["online"], "0-1");
    assert_eq!(j["offline"], "");
}

#[test]
fn xeon_json_offline_and_kinds() {
    let j = json("xeon-2s-smt");
    assert_eq!(j["offline"], "30-31");
    let cpus = j["cpus"].as_array().expect("cpus");
    assert_eq!(cpus.len(), 32);
    assert_eq!(cpus[31]["online"], false);
    assert_eq!(cpus[31]["package"], Value::Null);
    let h = json("intel-hybrid");
    assert_eq!(h["cpus"][16]["kind"], "efficiency");
    assert_eq!(h["cpus"][0]["kind"], "performance");
}

#[test]
fn bad_root_is_one_line_error() {
    let out = run(&["--sysfs", "/nonexistent/sysfs-root"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/sysfs-root"), "{err}");
    assert!(err.contains("not a sysfs CPU directory"), "{err}");
}

#[test]
fn live_machine_text_and_json() {
    let t = text_root("/sys");
    assert!(t.contains("sysfs root: /sys"), "{t}");
    let out = run(&["--json"]);
    assert!(out.status.success());
    let j: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(!j["cpus"].as_array().expect("cpus").is_empty());
}

fn text_root(root: &str) -> String {
    let out = run(&["--sysfs", root]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}
