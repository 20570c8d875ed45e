//! Serve real counts over HTTP: per CPU (system-wide) or for one process.
//!
//! ```text
//! cargo run -p counterpoint-openmetrics --example exporter -- 127.0.0.1:9464 --cpus
//! cargo run -p counterpoint-openmetrics --example exporter -- 127.0.0.1:9464 --pid 1234 \
//!     --events task-clock,context-switches,cycles --seconds 60
//! curl -s http://127.0.0.1:9464/metrics
//! ```
//!
//! Each event is exposed raw with its enabled/running time and coverage (see docs/openmetrics.md).
//! Events this machine cannot count (`cycles` without a PMU) are left out, with a note on
//! stderr.

use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use counterpoint_openmetrics::{counter_families, serve, CounterReading};
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const USAGE: &str = "usage: exporter ADDR (--cpus | --pid PID) [--events LIST] [--seconds N]";

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().ok_or(USAGE)?.parse()?;
    let (mut pid, mut cpus, mut events, mut seconds) =
        (None, false, "task-clock,context-switches".to_string(), None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cpus" => cpus = true,
            "--pid" => pid = Some(args.next().ok_or(USAGE)?.parse::<i32>()?),
            "--events" => events = args.next().ok_or(USAGE)?,
            "--seconds" => seconds = Some(args.next().ok_or(USAGE)?.parse::<u64>()?),
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}").into()),
        }
    }
    let tree = PmuTree::default();
    let list = parse_event_list(&events, &tree)?;
    // One counter set per label set: per CPU, or the whole process.
    let mut sets: Vec<(Vec<(String, String)>, CounterSet)> = Vec::new();
    match (cpus, pid) {
        (true, None) => {
            let n = std::thread::available_parallelism()?.get();
            for cpu in 0..n {
                let set = CounterSet::open(&list, &Target::Cpus(vec![cpu]), &tree)?;
                sets.push((vec![("cpu".into(), cpu.to_string())], set));
            }
        }
        (false, Some(pid)) => {
            let set = CounterSet::open(&list, &Target::process(pid)?, &tree)?;
            sets.push((vec![("pid".into(), pid.to_string())], set));
        }
        _ => return Err(USAGE.into()),
    }
    for (_, set) in &mut sets {
        set.enable()?;
    }
    if let Some((_, set)) = sets.first() {
        for r in set.read_all()? {
            if r.value.is_none() {
                eprintln!(
                    "not counted here, left out: {} ({:?})",
                    r.spec.name, r.status
                );
            }
        }
    }
    let sets = Mutex::new(sets);
    let exporter = serve(
        addr,
        Arc::new(move || {
            let Ok(sets) = sets.lock() else { return vec![] };
            let mut readings = Vec::new();
            for (labels, set) in sets.iter() {
                // A failed read leaves that label set out of this scrape: no invented value.
                let Ok(rs) = set.read_all() else { continue };
                for r in rs {
                    if let Some(v) = r.value {
                        readings.push(CounterReading {
                            event: r.spec.name.clone(),
                            labels: labels.clone(),
                            raw: v.raw,
                            enabled_ns: v.time_enabled_ns,
                            running_ns: v.time_running_ns,
                        });
                    }
                }
            }
            counter_families(&readings)
        }),
    )?;
    eprintln!("serving http://{}/metrics", exporter.addr());
    match seconds {
        Some(s) => std::thread::sleep(Duration::from_secs(s)),
        None => loop {
            std::thread::park();
        },
    }
    Ok(())
}
