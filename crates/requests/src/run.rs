//! The PostgreSQL run: load the TPC-H-shaped data, then `clients` connections issue `requests`
//! queries between them. Each client asks its backend's pid (`pg_backend_pid()`), opens that
//! backend's counters and reads them just before sending each query and just after its reply:
//! the delta is the request's. A second, independent set of counters on the same backend is read
//! only at the client's start and end: the backend's total over the run, against which the
//! requests (and the gaps between them, where the backend waits for the next query) are checked.

use crate::attrib::{deltas, RequestRow, Snapshot, TaskCounters};
use crate::pg::PgCluster;
use crate::tpch::{load_sql, Expect, SCHEMA, TEMPLATES};
use crate::RequestsError;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Smallest scale `run_pg` accepts: the templates' fixed row counts need enough data.
pub const MIN_SCALE: f64 = 0.002;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// TPC-H scale factor (0.01 ≈ 60 000 line items).
    pub scale: f64,
    /// Concurrent client connections.
    pub clients: usize,
    /// Requests over all clients.
    pub requests: usize,
    /// Seed of the template choice and parameters.
    pub seed: u64,
    /// Events per request (perf syntax).
    pub events: String,
    /// Set (by a signal handler, say) to end the run early: each client stops before its next
    /// request, the run returns [`RequestsError::Interrupted`], and the cluster is stopped and
    /// removed as on any other return.
    pub stop: Option<&'static AtomicBool>,
}

/// Most requests one run takes: ~1000 is the intended size; beyond this the run would take
/// hours on a small machine and the analysis holds every row in memory.
pub const MAX_REQUESTS: usize = 100_000;
/// Most concurrent clients (one backend process each).
pub const MAX_CLIENTS: usize = 64;

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            scale: 0.01,
            clients: 2,
            requests: 1000,
            seed: 1,
            events: crate::attrib::DEFAULT_EVENTS.to_string(),
            stop: None,
        }
    }
}

/// One client's accounting over its run, per event.
#[derive(Clone, Debug, Serialize)]
pub struct Accounting {
    /// Client index.
    pub client: usize,
    /// Its backend's pid.
    pub backend_pid: i32,
    /// Requests it issued.
    pub requests: usize,
    /// Σ over its requests.
    pub requests_sum: BTreeMap<String, f64>,
    /// Σ over the gaps between its requests (from one request's end reading to the next one's
    /// start reading: the backend finishing its reply and waiting for the next query).
    pub gaps_sum: BTreeMap<String, f64>,
    /// The backend's total over the run from an independent counter read only at the start
    /// and the end.
    pub total: BTreeMap<String, f64>,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutput {
    /// PostgreSQL major version.
    pub server_version: String,
    /// Scale factor.
    pub scale: f64,
    /// Clients.
    pub clients: usize,
    /// Seed.
    pub seed: u64,
    /// Events counted.
    pub events: Vec<String>,
    /// Events not counted here, with the reason.
    pub unsupported: BTreeMap<String, String>,
    /// Rows per table after the load.
    pub table_rows: BTreeMap<String, i64>,
    /// Every request, by id.
    pub rows: Vec<RequestRow>,
    /// Per client.
    pub accounting: Vec<Accounting>,
    /// Wall time of the measured phase (not the load).
    pub wall_ns: u64,
}

/// Create the schema and load the data at `scale` over `client`.
pub fn load(
    client: &mut postgres::Client,
    scale: f64,
) -> Result<BTreeMap<String, i64>, RequestsError> {
    if !(scale > 0.0 && scale <= 1.0) {
        return Err(RequestsError::Invalid(format!(
            "scale must be in (0, 1], got {scale}"
        )));
    }
    client
        .batch_execute(SCHEMA)
        .map_err(|e| RequestsError::Pg("creating the schema".into(), e))?;
    client
        .batch_execute(&load_sql(scale))
        .map_err(|e| RequestsError::Pg("loading the data".into(), e))?;
    let mut out = BTreeMap::new();
    for t in [
        "region", "nation", "supplier", "customer", "part", "orders", "lineitem",
    ] {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {t}"), &[])
            .map_err(|e| RequestsError::Pg(format!("counting {t}"), e))?
            .get(0);
        out.insert(t.to_string(), n);
    }
    Ok(out)
}

/// The template of request `id` and its SQL: a function of (seed, id) only, so the mix does not
/// depend on how requests are spread over clients.
pub fn request_sql(seed: u64, id: u64) -> (&'static str, Expect, String) {
    let mut rng =
        rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let t = &TEMPLATES[rng.gen_range(0..TEMPLATES.len())];
    let sql = (t.sql)(&mut rng);
    (t.name, t.expect, sql)
}

fn sum_into(acc: &mut BTreeMap<String, f64>, d: &BTreeMap<String, crate::attrib::Delta>) {
    for (k, v) in d {
        *acc.entry(k.clone()).or_default() += v.value;
    }
}

struct ClientOut {
    rows: Vec<RequestRow>,
    acc: Accounting,
    names: Vec<String>,
    unsupported: BTreeMap<String, String>,
}

fn run_client(
    cluster: &PgCluster,
    cfg: &RunConfig,
    client_ix: usize,
    ids: Vec<u64>,
    t0: Instant,
) -> Result<ClientOut, RequestsError> {
    let mut conn = cluster.connect()?;
    let pid: i32 = conn
        .query_one("SELECT pg_backend_pid()", &[])
        .map_err(|e| RequestsError::Pg("asking the backend pid".into(), e))?
        .get(0);
    let counters = TaskCounters::open(pid, &cfg.events)?;
    let total = TaskCounters::open(pid, &cfg.events)?;
    let names = counters.names().to_vec();
    let total_start = total.read()?;
    let mut rows = Vec::with_capacity(ids.len());
    let mut requests_sum = BTreeMap::new();
    let mut gaps_sum = BTreeMap::new();
    let mut prev_end: Option<Snapshot> = None;
    for id in ids {
        if cfg.stop.is_some_and(|f| f.load(Ordering::SeqCst)) {
            return Err(RequestsError::Interrupted);
        }
        let (name, expect, sql) = request_sql(cfg.seed, id);
        let start = Instant::now();
        let a = counters.read()?;
        // The simple query protocol: one round trip, no prepared statement left behind.
        let msgs = conn
            .simple_query(&sql)
            .map_err(|e| RequestsError::Pg(format!("request {id} ({name})"), e))?;
        let b = counters.read()?;
        let wall_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let n = msgs
            .iter()
            .filter(|m| matches!(m, postgres::SimpleQueryMessage::Row(_)))
            .count() as u64;
        if !expect.accepts(n) {
            return Err(RequestsError::WrongRows {
                id,
                template: name.into(),
                rows: n,
                expected: format!("{expect:?}"),
            });
        }
        if let Some(p) = &prev_end {
            sum_into(&mut gaps_sum, &deltas(&names, p, &a)?);
        }
        let d = deltas(&names, &a, &b)?;
        sum_into(&mut requests_sum, &d);
        prev_end = Some(b);
        rows.push(RequestRow {
            id,
            client: client_ix,
            server_tid: pid,
            class: name.to_string(),
            start_ns: u64::try_from(start.duration_since(t0).as_nanos()).unwrap_or(u64::MAX),
            wall_ns,
            rows: Some(n),
            counts: d,
        });
    }
    let total_end = total.read()?;
    let total_map = deltas(total.names(), &total_start, &total_end)?
        .into_iter()
        .map(|(k, v)| (k, v.value))
        .collect();
    Ok(ClientOut {
        acc: Accounting {
            client: client_ix,
            backend_pid: pid,
            requests: rows.len(),
            requests_sum,
            gaps_sum,
            total: total_map,
        },
        rows,
        unsupported: counters.unsupported().clone(),
        names,
    })
}

/// Start a private cluster, load, run the mix, stop the cluster.
pub fn run_pg(cfg: &RunConfig) -> Result<RunOutput, RequestsError> {
    if cfg.clients == 0 || cfg.requests == 0 {
        return Err(RequestsError::Invalid(
            "--clients and --requests must be at least 1".into(),
        ));
    }
    if cfg.requests > MAX_REQUESTS || cfg.clients > MAX_CLIENTS {
        return Err(RequestsError::Invalid(format!(
            "--requests {} / --clients {}: at most {MAX_REQUESTS} requests and {MAX_CLIENTS} \
             clients (about 1000 requests already give the classes their shape)",
            cfg.requests, cfg.clients
        )));
    }
    if !(MIN_SCALE..=1.0).contains(&cfg.scale) {
        // The reason for the bound that was crossed (a probe's `--scale 2` was told about the
        // lower one).
        let why = if cfg.scale.is_nan() {
            "not a number".to_string()
        } else if cfg.scale > 1.0 {
            "1 is the largest the harness is sized for: about 6 million line items, 100 \
             times the default 0.01's"
                .to_string()
        } else {
            format!(
                "below {MIN_SCALE} the LIMIT templates, Q3 and Q10, can find fewer rows than \
                 their LIMIT and the row check would fail"
            )
        };
        return Err(RequestsError::Invalid(format!(
            "--scale must be in [{MIN_SCALE}, 1], got {} ({why})",
            cfg.scale
        )));
    }
    let cluster = PgCluster::start()?;
    let mut admin = cluster.connect()?;
    let table_rows = load(&mut admin, cfg.scale)?;
    drop(admin);
    if cfg.stop.is_some_and(|f| f.load(Ordering::SeqCst)) {
        return Err(RequestsError::Interrupted);
    }
    let t0 = Instant::now();
    let outs: Vec<Result<ClientOut, RequestsError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.clients)
            .map(|c| {
                let ids: Vec<u64> = (0..cfg.requests as u64)
                    .filter(|i| (*i as usize) % cfg.clients == c)
                    .collect();
                let cluster = &cluster;
                s.spawn(move || run_client(cluster, cfg, c, ids, t0))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(RequestsError::Invalid("a client thread panicked".into()))
                })
            })
            .collect()
    });
    let wall_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut rows = Vec::new();
    let mut accounting = Vec::new();
    let mut events = Vec::new();
    let mut unsupported = BTreeMap::new();
    for o in outs {
        let o = o?;
        rows.extend(o.rows);
        accounting.push(o.acc);
        events = o.names;
        unsupported = o.unsupported;
    }
    rows.sort_by_key(|r| r.id);
    let events = events
        .into_iter()
        .filter(|e| !unsupported.contains_key(e))
        .collect();
    Ok(RunOutput {
        server_version: cluster.version().to_string(),
        scale: cfg.scale,
        clients: cfg.clients,
        seed: cfg.seed,
        events,
        unsupported,
        table_rows,
        rows,
        accounting,
        wall_ns,
    })
}
