//! Named code regions: `Region::begin("name")` returns a guard; the region's time and counter
//! deltas are added to the calling thread's table when the guard ends. Regions nest (each is
//! inclusive of the regions inside it). Tables live in a global registry, so a report merges
//! every thread, including threads that have exited.

use crate::counter::{parse_events, SelfCounter, SelfmonError};
use crate::page::Reading;
use counterpoint_counters::EventSpec;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The event list used when `init` was not called.
pub const DEFAULT_EVENTS: &str = "task-clock";

struct Config {
    list: String,
    /// Parsed events, or why there are none (regions then record time and entries only).
    specs: Result<Vec<EventSpec>, String>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();
static THREADS: Mutex<Vec<Arc<Mutex<ThreadTable>>>> = Mutex::new(Vec::new());

/// Choose the events regions count (perf syntax, e.g. `task-clock,page-faults`). Must come
/// before the first region; calling it again with the same list is harmless.
pub fn init(events: &str) -> Result<(), SelfmonError> {
    let specs = parse_events(events)?;
    // Open once here so that an unsupported event is reported now, not silently per thread.
    for s in &specs {
        SelfCounter::open(s)?;
    }
    let mut fresh = false;
    let cfg = CONFIG.get_or_init(|| {
        fresh = true;
        Config {
            list: events.to_string(),
            specs: Ok(specs),
        }
    });
    if !fresh && cfg.list != events {
        return Err(SelfmonError::AlreadyStarted(cfg.list.clone()));
    }
    Ok(())
}

fn config() -> &'static Config {
    CONFIG.get_or_init(|| Config {
        list: DEFAULT_EVENTS.to_string(),
        specs: parse_events(DEFAULT_EVENTS).map_err(|e| e.to_string()),
    })
}

#[derive(Default, Clone)]
struct Stats {
    entries: u64,
    total_ns: u64,
    max_ns: u64,
    counts: Vec<u64>,
}

#[derive(Default)]
struct ThreadTable {
    names: Vec<String>,
    stats: Vec<Stats>,
}

struct Open {
    slot: usize,
    start: Instant,
    start_counts: Vec<Reading>,
}

struct ThreadState {
    counters: Vec<SelfCounter>,
    counter_error: Option<String>,
    index: HashMap<String, usize>,
    table: Arc<Mutex<ThreadTable>>,
    stack: Vec<Open>,
}

impl ThreadState {
    fn new() -> Self {
        let cfg = config();
        let (counters, counter_error) = match &cfg.specs {
            Ok(specs) => match specs.iter().map(SelfCounter::open).collect() {
                Ok(c) => (c, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            },
            Err(e) => (Vec::new(), Some(e.clone())),
        };
        let table = Arc::new(Mutex::new(ThreadTable::default()));
        if let Ok(mut all) = THREADS.lock() {
            all.push(Arc::clone(&table));
        }
        ThreadState {
            counters,
            counter_error,
            index: HashMap::new(),
            table,
            stack: Vec::new(),
        }
    }

    fn read_all(&self) -> Vec<Reading> {
        // A failed read counts as zero for this region rather than aborting the program.
        self.counters
            .iter()
            .map(|c| c.read().unwrap_or_default())
            .collect()
    }

    fn begin(&mut self, name: &str) -> usize {
        let slot = match self.index.get(name) {
            Some(&s) => s,
            None => {
                let s = self.index.len();
                self.index.insert(name.to_string(), s);
                if let Ok(mut t) = self.table.lock() {
                    t.names.push(name.to_string());
                    t.stats.push(Stats {
                        counts: vec![0; self.counters.len()],
                        ..Stats::default()
                    });
                }
                s
            }
        };
        let start_counts = self.read_all();
        self.stack.push(Open {
            slot,
            start: Instant::now(),
            start_counts,
        });
        self.stack.len() - 1
    }

    /// End the region at `depth` and any still open inside it.
    fn end(&mut self, depth: usize) -> bool {
        if depth >= self.stack.len() {
            return false;
        }
        let now = Instant::now();
        let counts = self.read_all();
        let Ok(mut t) = self.table.lock() else {
            self.stack.truncate(depth);
            return true;
        };
        while self.stack.len() > depth {
            let Some(open) = self.stack.pop() else { break };
            let ns = u64::try_from(now.duration_since(open.start).as_nanos()).unwrap_or(u64::MAX);
            let Some(s) = t.stats.get_mut(open.slot) else {
                continue;
            };
            s.entries += 1;
            s.total_ns = s.total_ns.saturating_add(ns);
            s.max_ns = s.max_ns.max(ns);
            for (i, (a, b)) in open.start_counts.iter().zip(&counts).enumerate() {
                let dv = b.value.wrapping_sub(a.value);
                let de = b.time_enabled_ns.saturating_sub(a.time_enabled_ns);
                let dr = b.time_running_ns.saturating_sub(a.time_running_ns);
                // Scale by the region's own enabled/running share (multiplexing).
                let scaled = if dr == de || dr == 0 {
                    dv
                } else {
                    crate::page::scale(dv, de, dr).unwrap_or(dv)
                };
                if let Some(c) = s.counts.get_mut(i) {
                    *c = c.saturating_add(scaled);
                }
            }
        }
        true
    }
}

thread_local! {
    static STATE: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
}

fn with_state<R>(f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    STATE
        .try_with(|cell| {
            let mut b = cell.try_borrow_mut().ok()?;
            let st = b.get_or_insert_with(ThreadState::new);
            Some(f(st))
        })
        .ok()
        .flatten()
}

/// Begin a region on the calling thread; returns its handle (its nesting depth).
pub fn begin(name: &str) -> Option<usize> {
    with_state(|st| st.begin(name))
}

/// End the region with `handle` (and any region still open inside it).
pub fn end(handle: usize) -> Result<(), SelfmonError> {
    match with_state(|st| st.end(handle)) {
        Some(true) => Ok(()),
        _ => Err(SelfmonError::BadHandle(handle as i64)),
    }
}

/// A region in progress; it ends when dropped.
pub struct Region {
    handle: Option<usize>,
    _not_send: PhantomData<*const ()>,
}

impl Region {
    pub fn begin(name: &str) -> Region {
        Region {
            handle: begin(name),
            _not_send: PhantomData,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(h) = self.handle {
            let _ = end(h);
        }
    }
}

/// One region merged over threads.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RegionReport {
    pub name: String,
    pub entries: u64,
    pub threads: usize,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    /// Counter deltas inside the region, summed over entries, by event name.
    pub counts: BTreeMap<String, u64>,
}

/// Every region of every thread that used self-monitoring.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub events: Vec<String>,
    /// Why counters are missing, if they are (regions still have time and entries).
    pub counters_unavailable: Option<String>,
    pub threads: usize,
    pub regions: Vec<RegionReport>,
}

/// Merge every thread's table into a report (regions sorted by name).
pub fn report() -> Report {
    let cfg = config();
    let events: Vec<String> = match &cfg.specs {
        Ok(s) => s.iter().map(|e| e.name.clone()).collect(),
        Err(_) => Vec::new(),
    };
    let mut unavailable = cfg.specs.as_ref().err().cloned();
    if unavailable.is_none() {
        unavailable = STATE
            .try_with(|c| {
                c.try_borrow()
                    .ok()
                    .and_then(|b| b.as_ref().and_then(|st| st.counter_error.clone()))
            })
            .ok()
            .flatten();
    }
    let tables: Vec<Arc<Mutex<ThreadTable>>> =
        THREADS.lock().map(|t| t.clone()).unwrap_or_default();
    let mut merged: BTreeMap<String, RegionReport> = BTreeMap::new();
    let mut threads = 0;
    for table in &tables {
        let Ok(t) = table.lock() else { continue };
        if t.names.is_empty() {
            continue;
        }
        threads += 1;
        for (name, s) in t.names.iter().zip(&t.stats) {
            let r = merged.entry(name.clone()).or_insert_with(|| RegionReport {
                name: name.clone(),
                entries: 0,
                threads: 0,
                total_ns: 0,
                mean_ns: 0.0,
                max_ns: 0,
                counts: events.iter().map(|e| (e.clone(), 0)).collect(),
            });
            r.entries += s.entries;
            r.threads += 1;
            r.total_ns = r.total_ns.saturating_add(s.total_ns);
            r.max_ns = r.max_ns.max(s.max_ns);
            for (e, c) in events.iter().zip(&s.counts) {
                if let Some(v) = r.counts.get_mut(e) {
                    *v = v.saturating_add(*c);
                }
            }
        }
    }
    let mut regions: Vec<RegionReport> = merged.into_values().collect();
    for r in &mut regions {
        r.mean_ns = if r.entries == 0 {
            0.0
        } else {
            r.total_ns as f64 / r.entries as f64
        };
    }
    Report {
        events,
        counters_unavailable: unavailable,
        threads,
        regions,
    }
}

impl Report {
    /// A fixed-width table, regions by total time, largest first.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "counterpoint selfmon: {} region(s) over {} thread(s)\n",
            self.regions.len(),
            self.threads
        ));
        if let Some(why) = &self.counters_unavailable {
            out.push_str(&format!("counters unavailable: {why}\n"));
        }
        let mut head = format!(
            "{:<24} {:>10} {:>7} {:>14} {:>12} {:>12}",
            "region", "entries", "threads", "total ms", "mean ns", "max ns"
        );
        for e in &self.events {
            head.push_str(&format!(" {e:>16}"));
        }
        out.push_str(&head);
        out.push('\n');
        let mut rows: Vec<&RegionReport> = self.regions.iter().collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        for r in rows {
            let mut line = format!(
                "{:<24} {:>10} {:>7} {:>14.3} {:>12.0} {:>12}",
                r.name,
                r.entries,
                r.threads,
                r.total_ns as f64 / 1e6,
                r.mean_ns,
                r.max_ns
            );
            for e in &self.events {
                line.push_str(&format!(" {:>16}", r.counts.get(e).copied().unwrap_or(0)));
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
