//! The must-have test: a private PostgreSQL cluster, 200 requests from 2 clients, each request's
//! attribution checked against its backend's own total over the run. Skips, saying why, when
//! PostgreSQL is not installed (scripts/setup.d/postgresql.sh installs it).

use counterpoint_requests::run::{run_pg, RunConfig};
use counterpoint_requests::RequestsError;

/// The counters' resolution between two independent descriptors on one backend read a moment
/// apart while it waits for the next query: what the backend can do in that moment.
fn resolution(event: &str) -> f64 {
    match event {
        "task-clock" => 2e6, // ns
        _ => 2.0,            // context switches, page faults
    }
}

/// The cluster tests run one at a time: the stop test compares the temp dir's clusters before
/// and after, which another test's cluster would disturb.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn attribution_sums_to_the_backends_total() {
    let _g = serial();
    let cfg = RunConfig {
        scale: 0.002,
        clients: 2,
        requests: 200,
        seed: 7,
        ..RunConfig::default()
    };
    let out = match run_pg(&cfg) {
        Ok(o) => o,
        Err(RequestsError::NoPostgres(why)) => {
            eprintln!("SKIPPED: PostgreSQL cannot run here: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    // Every request answered with its template's row count (run_pg refuses otherwise).
    assert_eq!(out.rows.len(), 200);
    assert_eq!(out.table_rows["region"], 5);
    assert_eq!(out.table_rows["nation"], 25);
    assert_eq!(out.table_rows["orders"], 3000);
    let ids: Vec<u64> = out.rows.iter().map(|r| r.id).collect();
    assert_eq!(ids, (0..200).collect::<Vec<_>>());
    for e in ["task-clock", "context-switches", "page-faults"] {
        assert!(out.events.iter().any(|x| x == e), "{e} not counted");
    }
    // No PMU here: hardware events are listed with a reason, never given a value.
    for (e, why) in &out.unsupported {
        assert!(!why.is_empty(), "{e}");
        assert!(out.rows.iter().all(|r| !r.counts.contains_key(e)));
    }
    for r in &out.rows {
        assert!(
            r.get("task-clock") > 0.0,
            "request {} ran no backend CPU: {r:?}",
            r.id
        );
        assert!(r.counts.values().all(|d| d.coverage == 1.0), "{r:?}");
    }
    assert_eq!(out.accounting.len(), 2);
    for acc in &out.accounting {
        assert_eq!(acc.requests, 100);
        let mine: f64 = out
            .rows
            .iter()
            .filter(|r| r.client == acc.client)
            .map(|r| r.get("task-clock"))
            .sum();
        assert!((mine - acc.requests_sum["task-clock"]).abs() < 1.0);
        for (e, total) in &acc.total {
            let req = acc.requests_sum[e];
            let gaps = acc.gaps_sum[e];
            // Requests and the gaps between them tile the run: they sum to the backend's total
            // from an independent counter within the counters' resolution.
            assert!(
                (req + gaps - total).abs() <= resolution(e),
                "client {} {e}: requests {req} + gaps {gaps} vs total {total}",
                acc.client
            );
        }
        // The backend's CPU time is in the requests: the gaps hold only the end of a reply.
        let t = acc.total["task-clock"];
        assert!(
            acc.requests_sum["task-clock"] >= 0.95 * t,
            "client {}: requests hold {} of {t} ns",
            acc.client,
            acc.requests_sum["task-clock"]
        );
    }
}

/// A stop asked for before the first request ends the run with `Interrupted`, and the private
/// cluster is stopped and its directory removed like on any other return.
#[test]
fn a_stop_flag_ends_the_run_and_removes_the_cluster() {
    static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    let _g = serial();
    let before = pg_dirs();
    let cfg = RunConfig {
        scale: 0.002,
        clients: 1,
        requests: 10,
        stop: Some(&STOP),
        ..RunConfig::default()
    };
    match run_pg(&cfg) {
        Err(RequestsError::Interrupted) => {}
        Err(RequestsError::NoPostgres(why)) => {
            eprintln!("SKIPPED: PostgreSQL cannot run here: {why}");
            return;
        }
        other => panic!(
            "expected Interrupted, got {:?}",
            other.map(|o| o.rows.len())
        ),
    }
    let after = pg_dirs();
    assert!(
        after.difference(&before).next().is_none(),
        "left behind: {:?}",
        after.difference(&before).collect::<Vec<_>>()
    );
}

#[test]
fn absurd_sizes_are_refused_before_anything_starts() {
    let cfg = RunConfig {
        requests: counterpoint_requests::run::MAX_REQUESTS + 1,
        ..RunConfig::default()
    };
    match run_pg(&cfg) {
        Err(RequestsError::Invalid(msg)) => assert!(msg.contains("at most"), "{msg}"),
        other => panic!("expected Invalid, got {:?}", other.map(|o| o.rows.len())),
    }
}

/// The cluster directories (`counterpoint-pg-*`) under the temp dir.
fn pg_dirs() -> std::collections::BTreeSet<std::path::PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("counterpoint-pg-"))
                })
                .collect()
        })
        .unwrap_or_default()
}
