//! A real Prometheus server scrapes the exporter and returns its series through the query API.
//!
//! The families come from real software-event counts of this test process (`task-clock` and
//! `context-switches`, opened through `counterpoint_counters` and read at every scrape). The
//! test starts its own `prometheus` on a free port with a temporary storage directory and a
//! scrape config for the exporter (a system instance, if any, is never touched), polls
//! `/api/v1/query` until the series appears, checks the value, the coverage and the labels,
//! and always kills the server. Skipped, with the reason printed, where `prometheus` is not
//! installed (`scripts/setup.d/prometheus.sh` installs it) or this process cannot be counted.

mod common;

use common::get;
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use counterpoint_openmetrics::{counter_families, serve, CounterReading};
use serde_json::Value;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A label value that needs every escape.
const WHO: &str = "prometheus \"test\" \\ line1\nline2";
/// A hang guard for Prometheus to start and scrape, not an assertion about speed.
const DEADLINE: Duration = Duration::from_secs(180);

/// Kills and reaps Prometheus whatever happens to the test.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// `GET /api/v1/...` on Prometheus; the `data` of a successful answer.
fn api(prom: SocketAddr, path: &str) -> Option<Value> {
    let r = get(prom, path, &[]).ok()?;
    if r.status != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&r.body).ok()?;
    (v["status"] == "success").then(|| v["data"].clone())
}

/// The first result of an instant query, once it has one.
fn query_one(prom: SocketAddr, q: &str) -> Option<Value> {
    let data = api(prom, &format!("/api/v1/query?query={q}"))?;
    data["result"].as_array()?.first().cloned()
}

/// The last sample of series `name`, through `last_over_time` (a scrape that timed out on a
/// loaded machine marks every series stale, and a plain query then finds nothing; a range
/// leaves the staleness markers out), retried until [`DEADLINE`].
fn query_last(prom: SocketAddr, name: &str) -> Option<Value> {
    // `last_over_time(NAME[1h])`, URL-encoded.
    let q = format!("last_over_time%28{name}%5B1h%5D%29");
    let start = Instant::now();
    loop {
        let r = query_one(prom, &q);
        if r.is_some() || start.elapsed() > DEADLINE {
            return r;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn fixed_readings() -> Vec<CounterReading> {
    let r = |event: &str, consumer: &str, raw, enabled_ns, running_ns| CounterReading {
        event: event.into(),
        labels: vec![("consumer".into(), consumer.into())],
        raw,
        enabled_ns,
        running_ns,
    };
    vec![
        r("cycles", "agent", 3_000_000, 2_000_000_000, 500_000_000),
        r("instructions", "starved", 0, 1_000_000_000, 0),
        r("cpu/event=0x3c,umask=0x0/u", "x\"y\\z", 42, 10, 10),
    ]
}

fn value_of(result: &Value) -> f64 {
    result["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no value in {result}"))
}

#[test]
fn prometheus_scrapes_raw_counts_with_coverage_and_labels() {
    match Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => {}
        _ => {
            eprintln!(
                "skipped: prometheus is not installed (scripts/setup.d/prometheus.sh installs \
                 Debian's `prometheus`)"
            );
            return;
        }
    }

    // Real counts of this process, read at each scrape.
    let tree = PmuTree::default();
    let list = parse_event_list("task-clock,context-switches", &tree).expect("event list");
    let pid = std::process::id();
    let target = Target::process(pid as i32).expect("this process as a target");
    let mut set = match CounterSet::open(&list, &target, &tree) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("skipped: this process cannot be counted here: {e}");
            return;
        }
    };
    set.enable().expect("enable counters");
    let set = Mutex::new(set);
    let labels = vec![
        ("pid".to_string(), pid.to_string()),
        ("who".to_string(), WHO.to_string()),
    ];
    let exporter = serve(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(move || {
            // A poisoned lock or a failed read exposes nothing rather than a made-up value.
            let Ok(set) = set.lock() else { return vec![] };
            let Ok(readings) = set.read_all() else {
                return vec![];
            };
            let readings: Vec<CounterReading> = readings
                .into_iter()
                .filter_map(|r| {
                    let v = r.value?;
                    Some(CounterReading {
                        event: r.spec.name.clone(),
                        labels: labels.clone(),
                        raw: v.raw,
                        enabled_ns: v.time_enabled_ns,
                        running_ns: v.time_running_ns,
                    })
                })
                .collect();
            let mut families = counter_families(&readings);
            // Fixed readings in the same scrape: a multiplexed event, one that never ran (NaN
            // estimate), an odd name. Prometheus drops the whole scrape on one bad line, so
            // the real series appearing also means its OpenMetrics parser took all of these.
            families.extend(counter_families(&fixed_readings()));
            families
        }),
    )
    .expect("start the exporter");

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: counterpoint\n    static_configs:\n      \
             - targets: ['{}']\n",
            exporter.addr()
        ),
    )
    .expect("write prometheus.yml");
    let log = dir.path().join("prometheus.log");
    let start_server = |prom: SocketAddr| {
        Server(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address={prom}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("log file"))
                .current_dir(dir.path())
                .spawn()
                .expect("start prometheus"),
        )
    };
    let mut prom: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut server = start_server(prom);
    let mut port_retries = 3;

    let start = Instant::now();
    let total = loop {
        if let Ok(Some(status)) = server.0.try_wait() {
            // The free port was taken between our probe and Prometheus' bind: try another.
            if port_retries > 0 && log_tail(&log).contains("address already in use") {
                port_retries -= 1;
                prom = format!("127.0.0.1:{}", free_port()).parse().unwrap();
                server = start_server(prom);
                continue;
            }
            panic!("prometheus exited ({status}):\n{}", log_tail(&log));
        }
        if let Some(r) = query_one(prom, "counterpoint_task_clock_seconds_total") {
            break r;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no counterpoint_task_clock_seconds_total in Prometheus after {DEADLINE:?}; targets: {:?}\n{}",
            api(prom, "/api/v1/targets"),
            log_tail(&log)
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!("prometheus returned: {total}");

    // The raw count of a real event, with our labels back unchanged (escapes undone).
    assert!(
        value_of(&total) > 0.0,
        "task-clock is not positive: {total}"
    );
    let m = &total["metric"];
    assert_eq!(m["__name__"], "counterpoint_task_clock_seconds_total");
    assert_eq!(m["event"], "task-clock");
    assert_eq!(m["pid"], pid.to_string().as_str());
    assert_eq!(m["who"], WHO);
    assert_eq!(m["job"], "counterpoint");

    // Software events are never multiplexed: coverage 1, not flagged, estimate = raw.
    for event in ["task_clock", "context_switches"] {
        let cov = query_last(prom, &format!("counterpoint_{event}_coverage"))
            .unwrap_or_else(|| panic!("no coverage series for {event}"));
        assert_eq!(value_of(&cov), 1.0, "{cov}");
        assert_eq!(cov["metric"]["who"], WHO);
        let mux = query_last(prom, &format!("counterpoint_{event}_multiplexed"))
            .unwrap_or_else(|| panic!("no multiplexed series for {event}"));
        assert_eq!(value_of(&mux), 0.0, "{mux}");
        let en = query_last(prom, &format!("counterpoint_{event}_enabled_seconds_total"))
            .unwrap_or_else(|| panic!("no enabled time for {event}"));
        assert!(value_of(&en) > 0.0, "{en}");
    }

    // The fixed families arrived with their values.
    let cov = query_last(prom, "counterpoint_cycles_coverage").expect("cycles coverage");
    assert_eq!(value_of(&cov), 0.25, "{cov}");
    let mux = query_last(prom, "counterpoint_cycles_multiplexed").expect("cycles flag");
    assert_eq!(value_of(&mux), 1.0, "{mux}");
    let raw = query_last(prom, "counterpoint_cycles_total").expect("cycles raw");
    assert_eq!(value_of(&raw), 3_000_000.0, "{raw}");
    let est = query_last(prom, "counterpoint_cycles_scaled").expect("cycles estimate");
    assert_eq!(value_of(&est), 12_000_000.0, "{est}");
    let none = query_last(prom, "counterpoint_instructions_scaled").expect("no estimate");
    assert!(value_of(&none).is_nan(), "{none}");
    let odd = query_last(prom, "counterpoint_cpu_event_0x3c_umask_0x0_u_total").expect("odd name");
    assert_eq!(odd["metric"]["event"], "cpu/event=0x3c,umask=0x0/u");
    assert_eq!(odd["metric"]["consumer"], "x\"y\\z");

    // The OpenMetrics metadata arrived: Prometheus knows the family as a counter.
    let meta = api(
        prom,
        "/api/v1/metadata?metric=counterpoint_task_clock_seconds",
    )
    .expect("metadata API answered");
    let kinds: Vec<&str> = meta["counterpoint_task_clock_seconds"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(kinds, ["counter"], "metadata: {meta}");

    drop(server);
    exporter.stop();
}
