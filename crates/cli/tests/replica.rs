//! Issue 17 from the command line: `bench c2c` (shape of its JSON, refusals), `burn --kind
//! replica` refusals, and `experiment replica --json`. No timing is asserted.

use std::process::Command;

fn counterpoint() -> Command {
    Command::new(env!("CARGO_BIN_EXE_counterpoint"))
}

fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| {
            counterpoint_core::cpuset::CpuSet::parse_list(s.trim())
                .ok()
                .map(|c| c.len())
        })
        .unwrap_or(1)
}

#[test]
fn c2c_json_has_every_pair_grouped() {
    if online_cpus() < 2 {
        eprintln!("skipped: one online CPU");
        return;
    }
    let out = counterpoint()
        .args([
            "bench",
            "c2c",
            "--cpus",
            "0-1",
            "--rounds",
            "200",
            "--futex-rounds",
            "50",
        ])
        .arg("--json")
        .output()
        .expect("run counterpoint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["schema"], 1);
    let pairs = j["pairs"].as_array().expect("pairs");
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0]["a"], 0);
    assert_eq!(pairs[0]["b"], 1);
    assert_eq!(pairs[0]["pingpong"]["rounds"], 200);
    assert_eq!(pairs[0]["futex"]["rounds"], 50);
    let p = &pairs[0]["pingpong"];
    assert!(p["median_ns"].as_f64().expect("ns") <= p["p99_ns"].as_f64().expect("ns"));
    assert_eq!(j["groups"].as_array().expect("groups").len(), 1);
    assert_eq!(j["groups"][0]["distance"], pairs[0]["distance"]);
    assert_eq!(j["topology"].as_array().expect("topology").len(), 2);
}

/// One CPU (or one given twice) is refused before anything is printed: the estimate line
/// ("0 CPU pair(s), at most under a second") came first (CLI probe, session 29).
#[test]
fn c2c_refuses_one_cpu_and_offline_cpus() {
    for list in ["0", "0,0"] {
        let out = counterpoint()
            .args(["bench", "c2c", "--cpus", list])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "--cpus {list}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("at least two"), "{err}");
        assert_eq!(err.lines().count(), 1, "one line, the refusal: {err}");
        assert!(!err.contains("CPU pair(s)"), "{err}");
        assert!(out.stdout.is_empty());
    }
    let out = counterpoint()
        .args(["bench", "c2c", "--cpus", "0,4095"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("4095") && err.contains("not online"), "{err}");
}

/// The time a run will take is said before it starts, and a run estimated past 30 minutes is
/// refused without `--force` (pairs grow as N(N-1)/2; a probe waited 8.5 minutes on one pair
/// with no word of how long).
#[test]
fn c2c_says_how_long_and_refuses_a_run_of_hours() {
    let out = counterpoint()
        .args([
            "bench",
            "c2c",
            "--cpus",
            "0,1",
            "--rounds",
            "10",
            "--futex-rounds",
            "10",
        ])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("1 CPU pair(s), at most under a second"),
        "{err}"
    );
    if online_cpus() < 4 {
        eprintln!("skipped the refusal: fewer than 4 online CPUs cannot make a run of hours");
        return;
    }
    let out = counterpoint()
        .args(["bench", "c2c", "--cpus", "0-3"])
        .args(["--rounds", "10000000", "--futex-rounds", "10000000"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--force") && err.contains("6 CPU pairs"),
        "{err}"
    );
}

#[test]
fn burn_replica_refuses_bad_parameters() {
    for (args, needle) in [
        (vec!["--replicas", "1"], "--replicas 1"),
        (vec!["--sync-every", "2"], "--sync-every 2"),
        (vec!["--ws-bytes", "lots"], "--ws-bytes"),
    ] {
        let out = counterpoint()
            .args(["burn", "--kind", "replica", "--seconds", "0.1"])
            .args(&args)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn experiment_replica_json() {
    let out = counterpoint()
        .args(["experiment", "replica", "--seeds", "1", "--json"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &j["replica"]["policies"];
    let lq = |policy: &str| {
        p[policy]["462.libquantum@2e8"]["mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("{policy} missing"))
    };
    // Three 5 MB working sets do not fit one 12 MB L3; two do.
    assert!(lq("always-spread") < lq("always-same-socket"));
    assert!(p["replica"].is_object());
}
