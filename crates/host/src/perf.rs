//! Per-thread counters for the live host, opened through `counterpoint-counters` (the only code
//! that opens or reads perf descriptors): one group per thread (`task-clock`
//! leading `context-switches` and `cpu-migrations`, software events every kernel has), opened
//! when the thread is first seen and closed when it is gone, read with one `read` per interval
//! that also returns the group's `time_enabled` / `time_running`.
//!
//! Hardware events are an event list in perf's syntax ([`HARDWARE_EVENTS`], parsed by the
//! counters spec parser, so `mem-transactions` and `fp-ops` resolve through its alias table to
//! this CPU's vendor events). They are probed once per process: where the kernel refuses them (no
//! PMU, as on this host) or no vendor event exists, they are never opened again and policies
//! that need them are refused by name with the reason; where they open, each thread gets a
//! second group for them, so they are scaled by their own group's schedule when multiplexed.

use counterpoint_core::event;
use counterpoint_counters::group::{describe_open_error, lacks_pmu};
use counterpoint_counters::spec::EventSpec;
use counterpoint_counters::{parse_event_list, PmuTree};
use std::io;
use std::sync::{LazyLock, OnceLock};

pub use counterpoint_counters::group::{GroupError as PerfError, GroupReading, MAX_GROUP};

/// A perf event the host can open: a spec from the counters parser.
pub type PerfEvent = EventSpec;

/// The software group, always countable (perf_event or, failing that, `/proc`).
pub const SOFTWARE_EVENTS: &str = "task-clock,context-switches,cpu-migrations";

/// The hardware events tried once: those IPC, LLC MPKI, bandwidth and FP intensity are made of.
pub const HARDWARE_EVENTS: &str = "cycles,instructions,cache-misses,mem-transactions,fp-ops";

/// `canonical` as a `'static` name: the shared constant where there is one.
fn static_name(canonical: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        event::TASK_CLOCK,
        event::CONTEXT_SWITCHES,
        event::CPU_MIGRATIONS,
        event::CYCLES,
        event::INSTRUCTIONS,
        event::CACHE_MISSES,
        event::CACHE_REFERENCES,
        event::MEM_TRANSACTIONS,
        event::FP_OPS,
        event::LLC_MISSES,
        event::BRANCH_MISSES,
        event::PAGE_FAULTS,
    ];
    match KNOWN.iter().find(|k| **k == canonical) {
        Some(k) => k,
        // Parsed once per process (the groups below are built once), so this stays bounded.
        None => Box::leak(canonical.to_string().into_boxed_str()),
    }
}

/// Events with their canonical names, in list order.
pub type NamedEvents = Vec<(&'static str, PerfEvent)>;
/// Events that cannot be counted here, with the reason.
pub type Unavailable = Vec<(&'static str, String)>;

/// Parse `list` against `tree` into `(name, spec)` pairs; events with no vendor event on this
/// machine are returned apart, with the reason.
pub fn parse_events(list: &str, tree: &PmuTree) -> Result<(NamedEvents, Unavailable), String> {
    let parsed = parse_event_list(list, tree).map_err(|e| e.to_string())?;
    let mut ok = Vec::new();
    let mut unavailable = Vec::new();
    for spec in parsed.events() {
        let name = static_name(&spec.canonical);
        match &spec.unavailable {
            Some(r) => unavailable.push((name, r.clone())),
            None => {
                // The host counts kernel mode too (switches and migrations happen there).
                let mut s = spec.clone();
                s.exclude_kernel = false;
                ok.push((name, s));
            }
        }
    }
    Ok((ok, unavailable))
}

/// The PMU tree events are resolved on: `/sys`, unless [`use_pmu_tree`] chose another first.
static TREE: OnceLock<PmuTree> = OnceLock::new();

fn tree() -> &'static PmuTree {
    TREE.get_or_init(PmuTree::default)
}

/// Resolve events on `tree` instead of `/sys` (tests with a scripted PMU and a fixture tree).
/// Only before the first use of the hardware events; gives the tree back if too late.
pub fn use_pmu_tree(t: PmuTree) -> Result<(), PmuTree> {
    TREE.set(t)
}

/// The software group, parsed once.
pub static SOFTWARE_GROUP: LazyLock<Vec<(&'static str, PerfEvent)>> = LazyLock::new(|| {
    // Generic software names parse without any PMU tree.
    parse_events(SOFTWARE_EVENTS, &PmuTree::new("/nonexistent"))
        .map(|(ok, _)| ok)
        .unwrap_or_default()
});

/// [`HARDWARE_EVENTS`] as this machine's sysfs resolves them (abstract names with no vendor
/// event here are left out; [`availability`] says why).
pub static HARDWARE_GROUP: LazyLock<Vec<(&'static str, PerfEvent)>> = LazyLock::new(|| {
    parse_events(HARDWARE_EVENTS, tree())
        .map(|(ok, _)| ok)
        .unwrap_or_default()
});

/// One thread's perf group, with the names of its events.
pub struct ThreadGroup {
    group: counterpoint_counters::group::ThreadGroup,
    names: Vec<&'static str>,
}

impl ThreadGroup {
    /// Open `events` (at most [`MAX_GROUP`]) as one group on thread `tid` (any CPU), created
    /// enabled; the first read is the baseline.
    pub fn open(tid: u32, events: &[(&'static str, PerfEvent)]) -> Result<Self, PerfError> {
        let specs: Vec<EventSpec> = events.iter().map(|(_, s)| s.clone()).collect();
        let group = counterpoint_counters::group::ThreadGroup::open(tid as i32, &specs)?;
        Ok(Self {
            group,
            names: events.iter().map(|(n, _)| *n).collect(),
        })
    }

    /// [`ThreadGroup::open`], inherited by the threads (not the processes) `tid` starts from
    /// now on, and by theirs: a read counts all of them, alive or exited
    /// ([`counterpoint_counters::group::ThreadGroup::open_inherited`]; Linux 5.13).
    pub fn open_inherited(
        tid: u32,
        events: &[(&'static str, PerfEvent)],
    ) -> Result<Self, PerfError> {
        let specs: Vec<EventSpec> = events.iter().map(|(_, s)| s.clone()).collect();
        let group = counterpoint_counters::group::ThreadGroup::open_inherited(tid as i32, &specs)?;
        Ok(Self {
            group,
            names: events.iter().map(|(n, _)| *n).collect(),
        })
    }

    /// Event names, in the order of [`GroupReading::values`].
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// One `read(2)` of the whole group.
    pub fn read(&mut self) -> Result<GroupReading, PerfError> {
        self.group.read()
    }

    /// How many events the group holds.
    pub fn len(&self) -> usize {
        self.group.len()
    }

    /// Never: a group has a leader.
    pub fn is_empty(&self) -> bool {
        self.group.is_empty()
    }
}

/// Where per-thread group counts come from: the seam that lets something other than this
/// process's own perf descriptors (the broker, `counterpoint daemon`) count for [`crate::Host`].
/// [`DirectSource`] (today's per-thread groups) is the default; `counterpoint-broker` implements
/// it over a broker connection (the host does not depend on the broker).
pub trait CounterSource: Send {
    /// Where counts come from, in a word or two (`perf_event`, `broker at PATH`): shown by `top`
    /// and logged by the agent.
    fn describe(&self) -> String;

    /// Whether this is the process's own perf_event groups (false: a broker or other service).
    fn is_direct(&self) -> bool {
        true
    }

    /// Start counting `events` (at most [`MAX_GROUP`]) as one group on thread `tid`.
    /// An error for which [`PerfError::is_global`] holds means no thread will open here.
    fn open(
        &mut self,
        tid: u32,
        events: &[(&'static str, PerfEvent)],
    ) -> Result<Box<dyn ThreadCounts>, PerfError>;

    /// Whether [`CounterSource::open_inherited`] can work, or why not: the host then counts
    /// each thread of a process in a group of its own, as it lists them.
    fn inherits(&self) -> Result<(), String> {
        Err(format!(
            "{} cannot count a thread's later threads in its group",
            self.describe()
        ))
    }

    /// Start counting `events` as one group on thread `tid` and on every thread it starts from
    /// now on, and they start, and so on (not the processes they fork); a read sums them all,
    /// alive or exited. Only where [`CounterSource::inherits`] says so.
    fn open_inherited(
        &mut self,
        tid: u32,
        events: &[(&'static str, PerfEvent)],
    ) -> Result<Box<dyn ThreadCounts>, PerfError> {
        Err(PerfError::Open {
            tid: tid as i32,
            event: events.first().map_or("", |(n, _)| *n).to_string(),
            source: io::Error::new(
                io::ErrorKind::Unsupported,
                self.inherits().err().unwrap_or_default(),
            ),
        })
    }

    /// Called once before the groups are read for an interval: a source that answers many
    /// groups with one request (the broker) fetches them all here. Nothing by default.
    fn refresh(&mut self) {}

    /// Why this source cannot count any more (a broker that went away), if it cannot: the host
    /// then counts with its own groups instead.
    fn broken(&self) -> Option<String> {
        None
    }
}

/// One thread's group, opened by a [`CounterSource`].
pub trait ThreadCounts: Send {
    /// Event names, in the order of [`GroupReading::values`].
    fn names(&self) -> &[&'static str];
    /// Cumulative values since the group was opened, with its enabled/running times.
    fn read(&mut self) -> Result<GroupReading, PerfError>;
    /// A value the kernel changes whenever the thread is switched in or out, read without a
    /// system call (the group's control page), where the source has one.
    fn sched_seq(&self) -> Option<u32> {
        None
    }
    /// Make [`ThreadCounts::sched_seq`] available (map the control page); false where the
    /// source cannot.
    fn map_control_page(&mut self) -> bool {
        false
    }
}

/// This process's own perf_event groups ([`ThreadGroup`]): the default source.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectSource;

impl CounterSource for DirectSource {
    fn describe(&self) -> String {
        "perf_event".into()
    }

    fn open(
        &mut self,
        tid: u32,
        events: &[(&'static str, PerfEvent)],
    ) -> Result<Box<dyn ThreadCounts>, PerfError> {
        Ok(Box::new(ThreadGroup::open(tid, events)?))
    }

    fn inherits(&self) -> Result<(), String> {
        availability().inherit.clone()
    }

    fn open_inherited(
        &mut self,
        tid: u32,
        events: &[(&'static str, PerfEvent)],
    ) -> Result<Box<dyn ThreadCounts>, PerfError> {
        Ok(Box::new(ThreadGroup::open_inherited(tid, events)?))
    }
}

impl ThreadCounts for ThreadGroup {
    fn names(&self) -> &[&'static str] {
        ThreadGroup::names(self)
    }

    fn read(&mut self) -> Result<GroupReading, PerfError> {
        ThreadGroup::read(self)
    }

    fn sched_seq(&self) -> Option<u32> {
        self.group.sched_seq()
    }

    fn map_control_page(&mut self) -> bool {
        self.group.map_control_page()
    }
}

/// What perf_event can count on this host, found once per process by opening each event on the
/// calling thread and closing it again.
#[derive(Clone, Debug)]
pub struct Availability {
    /// `Err(reason)` when the software group cannot be opened (then `/proc` is used).
    pub software: Result<(), String>,
    /// `Err(reason)` when the software group cannot be opened inherited by later threads
    /// (`inherit_thread`, Linux 5.13): each thread is then counted in a group of its own.
    pub inherit: Result<(), String>,
    /// Each hardware event and whether it opened (`Err(reason)` otherwise), aliases included:
    /// an abstract event is available exactly when its vendor event opens.
    pub hardware: Vec<(&'static str, Result<(), String>)>,
}

impl Availability {
    /// Hardware events that opened.
    pub fn hardware_events(&self) -> Vec<&'static str> {
        self.hardware
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| *n)
            .collect()
    }

    /// Hardware events that did not open, with the reason.
    pub fn missing_hardware(&self) -> Vec<(&'static str, String)> {
        self.hardware
            .iter()
            .filter_map(|(n, r)| r.as_ref().err().map(|e| (*n, e.clone())))
            .collect()
    }

    /// Every event a live host can put in its samples: the software group (by perf_event or
    /// `/proc`) and whichever hardware events opened.
    pub fn countable_events(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = SOFTWARE_GROUP.iter().map(|(n, _)| *n).collect();
        v.extend(self.hardware_events());
        v
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Probe the events on the calling thread: the software group, then each hardware event on its
/// own (`tree` resolves names; the live host passes `/sys`).
pub fn probe(tree: &PmuTree) -> Availability {
    let tid = gettid();
    let software = ThreadGroup::open(tid, &SOFTWARE_GROUP)
        .map(drop)
        .map_err(|e| e.to_string());
    let inherit = match &software {
        Ok(()) => ThreadGroup::open_inherited(tid, &SOFTWARE_GROUP)
            .map(drop)
            .map_err(|e| match e {
                PerfError::Open { source, .. } if source.raw_os_error() == Some(libc::EINVAL) => {
                    format!("the kernel cannot inherit counters to threads only (perf_event_attr.inherit_thread, Linux 5.13): {source}")
                }
                other => other.to_string(),
            }),
        Err(e) => Err(e.clone()),
    };
    let mut hardware = Vec::new();
    match parse_events(HARDWARE_EVENTS, tree) {
        Ok((ok, unavailable)) => {
            for (name, spec) in ok {
                let r = ThreadGroup::open(tid, &[(name, spec.clone())])
                    .map(drop)
                    .map_err(|e| match e {
                        PerfError::Open { source, .. } => {
                            describe_open_error(&source, Some(lacks_pmu(&spec, tree)))
                        }
                        other => other.to_string(),
                    });
                hardware.push((name, r));
            }
            hardware.extend(unavailable.into_iter().map(|(n, r)| (n, Err(r))));
        }
        Err(e) => hardware.push((event::CYCLES, Err(e))),
    }
    // Keep HARDWARE_EVENTS' order.
    let order: Vec<&str> = HARDWARE_EVENTS.split(',').collect();
    hardware.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(usize::MAX));
    Availability {
        software,
        inherit,
        hardware,
    }
}

/// [`probe`] once per process on `/sys` (or the tree of [`use_pmu_tree`]), cached.
pub fn availability() -> &'static Availability {
    static AVAIL: OnceLock<Availability> = OnceLock::new();
    AVAIL.get_or_init(|| probe(tree()))
}

/// Raise the soft limit on open files to the hard limit: every watched thread holds one
/// descriptor per event. Returns the new soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read a plain struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if rl.rlim_cur < rl.rlim_max {
        rl.rlim_cur = rl.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(rl.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin_ms(ms: u64) {
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed().as_millis() < ms as u128 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn own_thread_counts_task_clock_and_switches() {
        let Ok(mut g) = ThreadGroup::open(gettid(), &SOFTWARE_GROUP) else {
            // perf_event refused here (paranoid without privileges): the /proc path is used.
            eprintln!("skipped: perf_event refused here");
            return;
        };
        let a = g.read().expect("read");
        spin_ms(30);
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        let b = g.read().expect("read");
        assert_eq!(
            g.names(),
            [
                event::TASK_CLOCK,
                event::CONTEXT_SWITCHES,
                event::CPU_MIGRATIONS
            ]
        );
        assert_eq!((a.len, g.len()), (3, 3));
        let get = |r: &GroupReading, n: &str| {
            let i = g.names().iter().position(|k| *k == n).expect(n);
            r.values[i]
        };
        assert!(get(&b, event::TASK_CLOCK) > get(&a, event::TASK_CLOCK));
        // The sleeps are voluntary switches.
        assert!(get(&b, event::CONTEXT_SWITCHES) > get(&a, event::CONTEXT_SWITCHES));
        // Software events are never multiplexed.
        assert_eq!(b.time_enabled_ns, b.time_running_ns);
        assert!(b.time_enabled_ns > a.time_enabled_ns);
    }

    #[test]
    fn a_gone_thread_does_not_open() {
        // Thread ids above pid_max do not exist.
        let e = ThreadGroup::open(u32::MAX / 2, &SOFTWARE_GROUP)
            .err()
            .expect("no such thread");
        assert!(e.to_string().contains("task-clock"), "{e}");
    }

    #[test]
    fn availability_names_every_hardware_event() {
        let a = availability();
        let names: Vec<_> = a.hardware.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                event::CYCLES,
                event::INSTRUCTIONS,
                event::CACHE_MISSES,
                event::MEM_TRANSACTIONS,
                event::FP_OPS
            ]
        );
        let countable = a.countable_events();
        assert!(countable.contains(&event::TASK_CLOCK));
        // Every hardware event is either countable or missing with a reason, never both.
        for (n, r) in &a.hardware {
            assert_eq!(countable.contains(n), r.is_ok());
            if let Err(why) = r {
                assert!(!why.is_empty());
            }
        }
    }

    #[test]
    fn abstract_events_resolve_through_the_tree_or_say_why() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../counters/tests/data/pmu");
        // Skylake: both abstract events resolve to vendor events on the core PMU.
        let (ok, missing) =
            parse_events(HARDWARE_EVENTS, &PmuTree::new(dir.join("intel"))).expect("parse");
        assert!(missing.is_empty(), "{missing:?}");
        let mem = &ok
            .iter()
            .find(|(n, _)| *n == event::MEM_TRANSACTIONS)
            .expect("mem")
            .1;
        assert_eq!(mem.config, 0x412e);
        // No PMU: the abstract events are missing with a reason, the generic ones still parse.
        let (ok, missing) =
            parse_events(HARDWARE_EVENTS, &PmuTree::new(dir.join("vm"))).expect("parse");
        assert_eq!(ok.len(), 3);
        assert_eq!(
            missing.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            [event::MEM_TRANSACTIONS, event::FP_OPS]
        );
        // The probe on a PMU-less tree reports them as missing with that reason.
        let a = probe(&PmuTree::new(dir.join("vm")));
        let why = a
            .missing_hardware()
            .into_iter()
            .find(|(n, _)| *n == event::FP_OPS)
            .expect("fp-ops missing")
            .1;
        assert!(why.contains("no hardware PMU"), "{why}");
    }
}
