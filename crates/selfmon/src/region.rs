//! Named code regions: `Region::begin("name")` returns a guard; the region's time and counter
//! deltas are added to the calling thread's table when the guard ends. Regions nest (each is
//! inclusive of the regions inside it). Tables live in a global registry, so a report merges
//! every thread, including threads that have exited.
//!
//! After `fork` the child starts afresh: a `pthread_atfork` child handler bumps a generation
//! number and drops the registry (another parent thread may have held its lock, and that thread
//! does not exist in the child); the first region in the child sees the thread state is from an
//! older generation, closes the inherited descriptors (they count the parent's thread), forgets
//! the control pages without unmapping them (perf mappings are not copied into a child) and
//! opens its own counters. Regions left open across the fork are dropped. The child's report
//! holds only what the child did.
//!
//! A counter read that fails, or a count that goes backwards, makes that region entry's delta
//! *lost* (counted per event in [`RegionReport::lost`]) instead of a wrapped near-`u64::MAX`.

use crate::counter::{parse_events, SelfCounter, SelfmonError};
use crate::page::Reading;
use counterpoint_counters::EventSpec;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Instant;

/// The event list used when `init` was not called.
pub const DEFAULT_EVENTS: &str = "task-clock";

struct Config {
    list: String,
    /// Set by `init` (else by the first region, with the default list).
    by_init: bool,
    /// Parsed events, or why there are none (regions then record time and entries only).
    specs: Result<Vec<EventSpec>, String>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

type Registry = Mutex<Vec<Arc<Mutex<ThreadTable>>>>;
/// The registry of the original process (generation 0).
static FIRST_REGISTRY: Registry = Mutex::new(Vec::new());
/// The registry of a forked child, created on first use (null until then).
static CHILD_REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());
/// Incremented in every forked child.
static FORK_GEN: AtomicU64 = AtomicU64::new(0);
static ATFORK: Once = Once::new();

/// The fork generation of this process: 0 in the original, +1 per `fork` down to this one.
pub fn fork_generation() -> u64 {
    FORK_GEN.load(Ordering::Acquire)
}

extern "C" fn atfork_child() {
    // Only atomics here: the child is single-threaded but may be in any state. The old child
    // registry, if any, is leaked: its lock may be held by a thread that does not exist here.
    CHILD_REGISTRY.store(std::ptr::null_mut(), Ordering::Release);
    FORK_GEN.fetch_add(1, Ordering::AcqRel);
}

pub(crate) fn register_atfork() {
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" fn; it only touches atomics.
        unsafe { libc::pthread_atfork(None, None, Some(atfork_child)) };
    });
}

fn registry() -> &'static Registry {
    if fork_generation() == 0 {
        return &FIRST_REGISTRY;
    }
    let p = CHILD_REGISTRY.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: registries are leaked, never freed, once published.
        return unsafe { &*p };
    }
    let fresh = Box::into_raw(Box::new(Mutex::new(Vec::new())));
    match CHILD_REGISTRY.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just published; never freed.
        Ok(_) => unsafe { &*fresh },
        Err(existing) => {
            // SAFETY: `fresh` was not published; `existing` is a leaked registry.
            unsafe {
                drop(Box::from_raw(fresh));
                &*existing
            }
        }
    }
}

/// Choose the events regions count (perf syntax, e.g. `task-clock,page-faults`). Must come
/// before the first region; calling it again with the same list is harmless.
pub fn init(events: &str) -> Result<(), SelfmonError> {
    register_atfork();
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
            by_init: true,
            specs: Ok(specs),
        }
    });
    if !fresh && cfg.list != events {
        return Err(if cfg.by_init {
            SelfmonError::AlreadyInitialised(cfg.list.clone())
        } else {
            SelfmonError::AlreadyStarted(cfg.list.clone())
        });
    }
    Ok(())
}

fn config() -> &'static Config {
    CONFIG.get_or_init(|| Config {
        list: DEFAULT_EVENTS.to_string(),
        by_init: false,
        specs: parse_events(DEFAULT_EVENTS).map_err(|e| e.to_string()),
    })
}

#[derive(Default, Clone)]
struct Stats {
    entries: u64,
    total_ns: u64,
    max_ns: u64,
    counts: Vec<u64>,
    /// Per event: entries whose delta was lost (failed read, or a count that went backwards).
    lost: Vec<u64>,
}

#[derive(Default)]
struct ThreadTable {
    names: Vec<String>,
    stats: Vec<Stats>,
}

struct Open {
    slot: usize,
    start: Instant,
    start_counts: Vec<Option<Reading>>,
}

struct ThreadState {
    counters: Vec<SelfCounter>,
    counter_error: Option<String>,
    index: HashMap<String, usize>,
    table: Arc<Mutex<ThreadTable>>,
    stack: Vec<Open>,
    /// The fork generation this state was created in.
    generation: u64,
}

impl ThreadState {
    fn new() -> Self {
        register_atfork();
        let generation = fork_generation();
        let cfg = config();
        let (counters, counter_error) = match &cfg.specs {
            Ok(specs) => match specs.iter().map(SelfCounter::open).collect() {
                Ok(c) => (c, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            },
            Err(e) => (Vec::new(), Some(e.clone())),
        };
        let table = Arc::new(Mutex::new(ThreadTable::default()));
        if let Ok(mut all) = registry().lock() {
            all.push(Arc::clone(&table));
        }
        ThreadState {
            counters,
            counter_error,
            index: HashMap::new(),
            table,
            stack: Vec::new(),
            generation,
        }
    }

    /// Drop a state inherited through fork without touching what the parent owns.
    fn abandon_after_fork(self) {
        for c in self.counters {
            c.abandon_after_fork();
        }
        // The table's lock may have been held by a parent thread at the fork: never lock it;
        // the (leaked) old registry keeps it alive, so dropping this reference frees nothing.
        std::mem::forget(self.table);
    }

    fn read_all(&self) -> Vec<Option<Reading>> {
        // A failed read loses this region's delta rather than aborting the program.
        self.counters.iter().map(|c| c.read().ok()).collect()
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
                        lost: vec![0; self.counters.len()],
                        ..Stats::default()
                    });
                }
                s
            }
        };
        // The clock before the counters at the start and after them at the end: the region's
        // time then holds its counting, and a thread's task-clock never exceeds it (the other
        // way round, the counts held part of each read(2) the time did not: a 100 ns region
        // showed 881 ns of task-clock).
        let start = Instant::now();
        let start_counts = self.read_all();
        self.stack.push(Open {
            slot,
            start,
            start_counts,
        });
        self.stack.len() - 1
    }

    /// End the region at `depth` and any still open inside it.
    fn end(&mut self, depth: usize) -> bool {
        if depth >= self.stack.len() {
            return false;
        }
        let counts = self.read_all();
        let now = Instant::now();
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
                match region_delta(*a, *b) {
                    Some(d) => {
                        if let Some(c) = s.counts.get_mut(i) {
                            *c = c.saturating_add(d);
                        }
                    }
                    None => {
                        if let Some(l) = s.lost.get_mut(i) {
                            *l += 1;
                        }
                    }
                }
            }
        }
        true
    }
}

/// A counter's delta over a region, scaled by the region's own enabled/running share
/// (multiplexing); `None` (lost) when either read failed or the count went backwards.
pub fn region_delta(start: Option<Reading>, end: Option<Reading>) -> Option<u64> {
    let (a, b) = (start?, end?);
    let dv = b.value.checked_sub(a.value)?;
    let de = b.time_enabled_ns.saturating_sub(a.time_enabled_ns);
    let dr = b.time_running_ns.saturating_sub(a.time_running_ns);
    Some(if dr == de || dr == 0 {
        dv
    } else {
        crate::page::scale(dv, de, dr).unwrap_or(dv)
    })
}

thread_local! {
    static STATE: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
}

fn with_state<R>(f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    STATE
        .try_with(|cell| {
            let mut b = cell.try_borrow_mut().ok()?;
            if b.as_ref()
                .is_some_and(|st| st.generation != fork_generation())
            {
                if let Some(old) = b.take() {
                    old.abandon_after_fork();
                }
            }
            let st = b.get_or_insert_with(ThreadState::new);
            Some(f(st))
        })
        .ok()
        .flatten()
}

/// Read the calling thread's counters once (one read per event, the regions' read path): the
/// readings in event order, or `None` when the thread state is unavailable (thread exit).
pub(crate) fn read_thread_counters() -> Option<Vec<Option<Reading>>> {
    with_state(|st| st.read_all())
}

/// The configured events' names (empty when counters are unavailable) and why they are missing.
pub(crate) fn event_names() -> (Vec<String>, Option<String>) {
    let cfg = config();
    match &cfg.specs {
        Ok(s) => {
            let why = with_state(|st| st.counter_error.clone()).flatten();
            if why.is_some() {
                (Vec::new(), why)
            } else {
                (s.iter().map(|e| e.name.clone()).collect(), None)
            }
        }
        Err(e) => (Vec::new(), Some(e.clone())),
    }
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
    /// Begin region `name` on the calling thread; it ends when the guard drops.
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
    /// Region name.
    pub name: String,
    /// Times the region ended.
    pub entries: u64,
    /// Threads that ran it (in a `Report`: threads with regions).
    pub threads: usize,
    /// Wall time inside it, summed.
    pub total_ns: u64,
    /// Per entry.
    pub mean_ns: f64,
    /// Longest entry.
    pub max_ns: u64,
    /// Counter deltas inside the region, summed over entries, by event name.
    pub counts: BTreeMap<String, u64>,
    /// Per event, entries whose delta was lost (a failed read or a count that went backwards)
    /// and is therefore missing from `counts`.
    pub lost: BTreeMap<String, u64>,
}

/// Every region of every thread that used self-monitoring.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// The events counted.
    pub events: Vec<String>,
    /// Why counters are missing, if they are (regions still have time and entries).
    pub counters_unavailable: Option<String>,
    /// Threads that ran it (in a `Report`: threads with regions).
    pub threads: usize,
    /// Regions by name.
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
        registry().lock().map(|t| t.clone()).unwrap_or_default();
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
                lost: events.iter().map(|e| (e.clone(), 0)).collect(),
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
            for (e, c) in events.iter().zip(&s.lost) {
                if let Some(v) = r.lost.get_mut(e) {
                    *v += *c;
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
                // A newline or escape in a name must not split or recolour its row.
                counterpoint_core::text::printable(&r.name),
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
        for r in &self.regions {
            for (e, n) in r.lost.iter().filter(|(_, n)| **n > 0) {
                out.push_str(&format!(
                    "lost: {e} in {} of {} entries of region {} (failed read or backward count; not in the sum)\n",
                    n,
                    r.entries,
                    counterpoint_core::text::printable(&r.name)
                ));
            }
        }
        out
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(value: u64, enabled: u64, running: u64) -> Option<Reading> {
        Some(Reading {
            value,
            time_enabled_ns: enabled,
            time_running_ns: running,
        })
    }

    #[test]
    fn a_failed_or_backward_read_is_lost_not_wrapped() {
        assert_eq!(region_delta(r(10, 5, 5), r(25, 9, 9)), Some(15));
        // Before the fix a failed read was an all-zero reading: 0 - 10 wrapped to ~u64::MAX.
        assert_eq!(region_delta(r(10, 5, 5), None), None);
        assert_eq!(region_delta(None, r(10, 5, 5)), None);
        assert_eq!(region_delta(r(10, 5, 5), r(3, 9, 9)), None);
        // Multiplexed within the region: scaled by its own enabled/running share.
        assert_eq!(region_delta(r(0, 0, 0), r(100, 40, 20)), Some(200));
    }
}
