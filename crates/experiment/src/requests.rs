//! `experiment requests` (seed 000 §2.2, issue 15): per-request counter statistics of a real
//! PostgreSQL under a TPC-H-shaped mix, clustered on time alone and on time plus counters
//! (adjusted Rand index against the templates), the Figure 3 scatter, and per class projected
//! speed-ups on the simulated machine. Needs PostgreSQL (scripts/setup.d/postgresql.sh); when it
//! is absent the result says so and carries no numbers.

use crate::paper::Basis;
use crate::progress::Progress;
use crate::result::{ExperimentResult, Table};
use counterpoint_requests::analysis::analyze;
use counterpoint_requests::run::{run_pg, RunConfig};
use counterpoint_requests::RequestsError;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Scale factor per seed's run (≈ 30 000 line items).
pub const SCALE: f64 = 0.005;
/// Requests per seed.
pub const REQUESTS: usize = 400;
/// Concurrent clients.
pub const CLIENTS: usize = 2;

/// The flag that ends a run early (`set_stop_flag`).
static STOP: std::sync::OnceLock<&'static AtomicBool> = std::sync::OnceLock::new();
/// Whether a PostgreSQL cluster of this experiment may be running.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Whether this experiment saw the stop flag and ended on it: the caller, not a signal
/// watcher, ends the process then (with this experiment's error, which says what was done).
static HANDLED: AtomicBool = AtomicBool::new(false);

/// Give the experiment a flag that ends it early (a signal handler's): a run in progress stops
/// before its next request, and its private cluster is stopped and its directory removed, as
/// `requests run-pg` does. Without one, a Ctrl-C killed the process and left the server
/// running and its data in `/tmp`. Set once; later calls are ignored.
pub fn set_stop_flag(flag: &'static AtomicBool) {
    let _ = STOP.set(flag);
}

fn stopped() -> bool {
    STOP.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// [`crate::exit::guard`], which a run holds while it enters a cluster (so a signal watcher
/// cannot end the process between the check of the stop flag and the cluster's start).
pub use crate::exit::guard as exit_guard;

/// Whether a signal watcher (holding [`exit_guard`]) may end the process now: no cluster of
/// this experiment may be running, and the experiment has not taken the stop on itself (its
/// caller then ends the process with the experiment's error).
pub fn exit_allowed() -> bool {
    !RUNNING.load(Ordering::SeqCst) && !HANDLED.load(Ordering::SeqCst)
}

/// Marks [`RUNNING`] for the life of a seed's run, and clears it however the run ended.
struct Running;

impl Running {
    fn enter() -> Self {
        let _guard = exit_guard();
        RUNNING.store(true, Ordering::SeqCst);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::SeqCst);
    }
}

/// The runs [`run`] reports to its progress over `seeds` seeds: one PostgreSQL run each.
pub fn planned_runs(seeds: u64) -> u64 {
    seeds
}

/// Run one PostgreSQL run per seed.
pub fn run(seeds: &[u64], progress: &dyn Progress) -> Result<ExperimentResult, String> {
    let mut r = ExperimentResult::new(
        "requests",
        "Per-request counter statistics on PostgreSQL: classes and projection",
        &format!(
            "this machine (no hardware PMU), a private PostgreSQL cluster; TPC-H-shaped data at \
             scale {SCALE}, {CLIENTS} clients, {REQUESTS} requests per seed; projection on the \
             simulated `{}`",
            counterpoint_requests::project::BASE_MACHINE
        ),
        seeds,
    );
    progress.add_total(planned_runs(seeds.len() as u64));
    let mut ari: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut ks: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut speedups: BTreeMap<String, (Vec<f64>, Vec<f64>, String)> = BTreeMap::new();
    let mut first = None;
    for (i, &seed) in seeds.iter().enumerate() {
        let cfg = RunConfig {
            scale: SCALE,
            clients: CLIENTS,
            requests: REQUESTS,
            seed,
            stop: STOP.get().copied(),
            ..RunConfig::default()
        };
        let run = {
            // Entered before the flag is read: a stop that comes after this check is the run's
            // to handle, and a watcher cannot end the process in between.
            let _running = Running::enter();
            if stopped() {
                HANDLED.store(true, Ordering::SeqCst);
                return Err(format!(
                    "interrupted before seed {seed}'s run (no PostgreSQL cluster was started)"
                ));
            }
            let run = run_pg(&cfg);
            // Whatever the error (a Ctrl-C from a terminal also reaches initdb or pg_ctl when
            // they share its process group, and their failure reads as "PostgreSQL cannot run
            // here"), a run that failed while a stop was asked for was interrupted.
            if run.is_err() && stopped() {
                HANDLED.store(true, Ordering::SeqCst);
                return Err(format!(
                    "interrupted during seed {seed}'s run; its PostgreSQL cluster was stopped \
                     and removed"
                ));
            }
            run
        };
        let out = match run {
            Ok(o) => o,
            Err(RequestsError::NoPostgres(why)) => {
                // Skipped runs are over too: the progress reaches its planned total.
                for _ in i..seeds.len() {
                    progress.done("requests: skipped (no PostgreSQL)");
                }
                r.findings.push(format!(
                    "Skipped: PostgreSQL cannot run here ({why}). Install it with \
                     scripts/setup (part postgresql.sh) and run `counterpoint experiment requests`."
                ));
                return Ok(r);
            }
            Err(e) => return Err(format!("seed {seed}: {e}")),
        };
        let a = analyze(&out).map_err(|e| format!("seed {seed}: {e}"))?;
        progress.done("requests: one PostgreSQL run");
        for (name, c) in [
            ("time", &a.time_only),
            ("time+counters", &a.time_and_counters),
        ] {
            ari.entry(name).or_default().push(c.ari);
            ari.entry(if name == "time" {
                "time@k=templates"
            } else {
                "time+counters@k=templates"
            })
            .or_default()
            .push(c.ari_at_template_count);
            ks.entry(name).or_default().push(c.k as f64);
        }
        for p in &a.projection {
            let e = speedups
                .entry(p.class.clone())
                .or_insert_with(|| (Vec::new(), Vec::new(), p.rests_on.clone()));
            e.0.push(p.speedup_faster_cpu);
            e.1.push(p.speedup_more_bandwidth);
        }
        if first.is_none() {
            first = Some((out, a));
        }
    }
    for (name, v) in &ari {
        r.put(name, "ari", v);
    }
    for (name, v) in &ks {
        r.put(name, "k", v);
    }
    let mut t = Table::new(
        "Agreement of k-means classes with the query templates (adjusted Rand index, mean ± sd over seeds)",
        &["features", "k by silhouette", "ARI", "ARI at k = templates"],
    );
    for name in ["time", "time+counters"] {
        let get = |m: &str, p: &str| {
            r.policies
                .get(p)
                .and_then(|x| x.get(m))
                .map(|e| e.show(3))
                .unwrap_or_default()
        };
        let at = format!("{name}@k=templates");
        t.row_with(
            Basis::Measured,
            vec![
                name.into(),
                get("k", name),
                get("ari", name),
                get("ari", &at),
            ],
        );
    }
    r.tables.push(t);
    let mut p = Table::new(
        "Projected speed-up per class (simulated; our classes rest on task-clock and page faults plus a stated assumption)",
        &["class", "faster CPU ×1.5, same memory", "memory bandwidth ×2", "rests on"],
    );
    for (class, (c, b, on)) in &speedups {
        let ms = |v: &[f64]| {
            crate::summary::Summary::of(v)
                .map(|s| s.show(3))
                .unwrap_or_default()
        };
        p.row_with(
            Basis::Predicted,
            vec![class.clone(), ms(c), ms(b), on.clone()],
        );
        r.put(class, "speedup_faster_cpu", c);
        r.put(class, "speedup_more_bandwidth", b);
    }
    r.tables.push(p);
    if let Some((out, a)) = first {
        let mut tt = Table::new(
            &format!(
                "Per template, seed {} (means per request, measured)",
                out.seed
            ),
            &[
                "template",
                "requests",
                "wall ms",
                "task-clock ms",
                "context switches",
                "page faults",
            ],
        );
        for (n, s) in &a.templates {
            tt.row_with(
                Basis::Measured,
                vec![
                    n.clone(),
                    s.requests.to_string(),
                    format!("{:.2}", s.wall_ms),
                    format!("{:.2}", s.cpu_ms),
                    format!("{:.2}", s.context_switches),
                    format!("{:.1}", s.page_faults),
                ],
            );
        }
        r.tables.push(tt);
        r.svgs.push((
            "requests-fig3.svg".into(),
            format!(
                "Requests of seed {}: wall time vs {}",
                out.seed, a.scatter_y
            ),
            a.scatter_svg.clone(),
        ));
        r.findings.push(a.pmu_note.clone());
        r.findings.push(format!(
            "PostgreSQL {}; every request's row count was checked against its template; the \
             backends' counters were read through the counters layer at each query's start and end.",
            out.server_version
        ));
    }
    Ok(r)
}
