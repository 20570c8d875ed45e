//! [`Host`]: the live machine behind the `Machine` trait. Observation reads per-thread counters
//! and sums them per process: a perf_event group per thread (`task-clock`, `context-switches`,
//! `cpu-migrations`, plus the hardware events where a PMU has them) opened when the thread is
//! first seen and closed when it is gone, or, where perf_event is refused, the kernel's scheduler
//! accounting in `/proc` (exact, counted fraction 1). Actions set the affinity of every thread
//! of a process, journaled first.

mod threads;
pub use threads::SkippedThread;

use crate::affinity::{self, AffinityError};
use crate::journal::{Adopted, Journal, JournalError, Override, Relink, RestoreReport};
use crate::perf::{
    self, CounterSource, DirectSource, PerfError, PerfEvent, ThreadCounts, HARDWARE_GROUP,
    SOFTWARE_GROUP,
};
use crate::procfs::{self, Proc, ThreadTimes};
use crate::sysfs::{self, SysfsError};
use crate::targets::TargetSpec;
use crate::taskstats::{RunSignature, Taskstats, TaskstatsError};
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_core::observation::{CpuObservation, Observation, TaskObservation};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_core::task::{TaskId, TaskInfo};
use counterpoint_core::topology::Topology;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Events every live host counts, PMU or not (by perf_event, or from `/proc` when
/// perf_event is refused; cpu-migrations from `/proc` only in detailed mode).
pub const HOST_EVENTS: &[&str] = &[
    event::TASK_CLOCK,
    event::CONTEXT_SWITCHES,
    event::CPU_MIGRATIONS,
];

/// Host failures.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// An affinity could not be read or set.
    #[error(transparent)]
    Affinity(#[from] AffinityError),
    /// The topology could not be read.
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    /// Kernel threads are never touched.
    #[error("process {0} is a kernel thread: never touched")]
    KernelThread(u32),
    /// Changing affinities needs a journal.
    #[error("no journal is open: refusing to change affinities without the safety net")]
    NoJournal,
    /// Someone else set the process's affinity after the agent did.
    #[error("process {0}: someone else set its affinity after the agent did; left alone")]
    UserOwned(u32),
    /// An action named a task id that cannot be a process id (never cut down to one).
    #[error("task id {0} is not a process id: refused")]
    NotAPid(u64),
}

/// The live Linux host.
pub struct Host {
    proc_: Proc,
    topology: Topology,
    online: CpuSet,
    targets: TargetSpec,
    self_pid: u32,
    journal: Option<Journal>,
    /// Per thread, its last reading and the gate's mark (looked up once per thread per
    /// interval, hence a hash map).
    prev: HashMap<u32, Prev>,
    prev_cpu: BTreeMap<CpuId, (u64, u64)>,
    started: Instant,
    stop: Option<&'static AtomicBool>,
    detailed: bool,
    /// Where each thread's counters come from, by thread id (closed when it is no longer seen),
    /// for the processes counted thread by thread (not in `families`).
    sources: HashMap<u32, ThreadSource>,
    /// Per process counted through inherited groups, its [`Family`]: the groups of the threads
    /// it had when first read, which count every thread started since.
    families: BTreeMap<u32, Family>,
    /// Processes counted thread by thread although families could be used (a thread's
    /// inherited group did not open), with the reason and when the family is tried again.
    per_thread: BTreeMap<u32, PerThread>,
    /// Per watched process, its start time (`stat` field 22) when it was last read: a pid
    /// that names another process since (reused) is counted afresh, nothing of the old
    /// process's groups or readings being its.
    starts: BTreeMap<u32, u64>,
    /// Why no process is counted through inherited groups (the kernel or the counter source
    /// cannot inherit to threads only), if none is.
    inherit_off: Option<String>,
    /// Threads found born while their process's family was being opened, on the last of its
    /// attempts: they may have been started just before their creator's group opened, and
    /// then count nowhere (see [`FAMILY_ATTEMPTS`]).
    unsure_threads: u64,
    /// Whether new threads get perf_event groups (false when the probe failed, or after an
    /// error that says perf_event cannot work here at all).
    use_perf: bool,
    /// Why perf_event is not used, if it is not.
    perf_off_reason: Option<String>,
    /// The last refusal of one thread's group (not a reason to stop trying the next thread,
    /// but the reason that thread is read from `/proc`: a broker with fewer counter slots than
    /// the group has events refuses every thread, which went unsaid; CLI probe, session 23).
    open_refused: Option<String>,
    /// The hardware events that opened in the probe (none without a PMU).
    hw_group: Vec<(&'static str, PerfEvent)>,
    /// Overrides found while applying an action, reported by the next [`Host::sweep`].
    found_overrides: Vec<Override>,
    /// Thread-level changes whose thread had exited, reported by the next [`Host::sweep`].
    skipped_threads: Vec<SkippedThread>,
    /// When the counters in `prev` were read: deltas cover the time since then, which is longer
    /// than the wait in `advance` by whatever the caller did in between.
    prev_read: Instant,
    /// Per target process, its thread ids as last listed and the interval they were listed in.
    /// Listing `/proc/PID/task` is the dearest part of an interval (the kernel builds a dentry
    /// per thread), so it is redone only when the process's thread count (`stat` field 20,
    /// read anyway) changed, or every [`RELIST_INTERVALS`] intervals for a thread that ended
    /// while another started.
    thread_lists: BTreeMap<u32, (Vec<u32>, u64)>,
    /// The exit watch over the threads whose counters are open: a process with a thread that
    /// exited is re-listed at the next interval even when its count is unchanged.
    exits: crate::exits::ThreadExits,
    /// The processes the exit watch reported at the start of this interval.
    exited_pids: std::collections::BTreeSet<u32>,
    /// Whether the per-thread gate is on (with the idle gate: `--read-every-thread` turns both
    /// off).
    thread_gate: bool,
    /// Control pages mapped now, and how many may be (see [`control_page_budget`]).
    control_pages: usize,
    control_page_budget: usize,
    /// Intervals observed so far.
    intervals: u64,
    /// Longest single sleep while waiting in `advance` (a signal cuts it short anyway; the stop
    /// flag set by another thread is seen within it).
    wait_slice: Duration,
    /// Who opens and reads the per-thread groups: this process ([`DirectSource`]) or a broker.
    counter_source: Box<dyn CounterSource>,
    /// Why a non-direct source was given up for this process's own groups, if it was.
    source_fallback: Option<String>,
    /// The idle gate: a process whose threads did not run since the last interval keeps its
    /// last readings instead of a read per thread ([`crate::taskstats`]). `None` when the
    /// kernel refused it or it was turned off; `idle_gate_off` says why.
    idle_gate: Option<Taskstats>,
    idle_gate_off: Option<String>,
    /// Per process, its run signature at the last interval.
    signatures: BTreeMap<u32, RunSignature>,
    /// Thread readings taken over from the last interval instead of read (all intervals).
    reads_skipped: u64,
    /// Per process, whether its last real read found every thread where it was (no counter
    /// moved, no new thread): only such a process is gated. A thread that keeps running on a
    /// tickless CPU moves the signature seldom; one real read per idle spell settles it.
    idle_last: BTreeMap<u32, bool>,
    /// Per process, the zero deltas of its last read that found it idle: what a gated
    /// interval reports, without touching its threads.
    idle_sums: BTreeMap<u32, ProcessSums>,
    /// Per process, when its counters were last read (just before its threads' reads; through
    /// a broker, at the interval's one request). Its sample's interval runs from there: the
    /// interval's own clock is taken before the `/proc` scan, and a command paused between the
    /// two on a loaded machine reported a busy thread above 100 % of a CPU.
    read_times: BTreeMap<u32, Instant>,
    /// Per process, the threads its last read covered (sorted): a thread gone from the list
    /// has ended, and its counters are closed.
    read_tids: BTreeMap<u32, Vec<u32>>,
    /// The watched processes' `stat` files, kept open.
    stat_files: procfs::KeptStats,
    /// `/proc/stat`, kept open.
    proc_stat: Option<std::fs::File>,
    /// SchedTask's IP sampler, when a policy or `top --heatmaps` asked for code heatmaps.
    code: Option<crate::code::CodeSampling>,
    /// For `pid:` targets, each listed user process alive when the host was made, with its
    /// start time (a pid reused by a new process is not the target): when none is left, the
    /// host is [finished](Machine::finished). `None` for other specs, which can gain members.
    listed: Option<Vec<(u32, u64)>>,
}

/// A process's thread list is re-read at least this often (in intervals) even when its thread
/// count has not changed. Listing 500 threads took about a tenth of the agent's steady-state
/// CPU when done every 5 intervals; a thread that ends while another starts in the same
/// interval is rare, and the newcomer is then counted from this many intervals later at most.
pub const RELIST_INTERVALS: u64 = 20;

/// Sleep up to `d`, returning early when a signal arrives (unlike `std::thread::sleep`, which
/// sleeps on after a handler ran).
fn sleep_interruptible(d: Duration) {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    // SAFETY: nanosleep reads a timespec we own; no remainder is asked for.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// A zombie (`Z`) or dead (`X`) process: it has exited, only its entry is left until it is reaped.
fn is_exited(st: &procfs::Stat) -> bool {
    matches!(st.state, 'Z' | 'X')
}

impl Host {
    /// A host watching `targets`, changing affinities only through `journal` (none = observe
    /// only). The first snapshot is taken here, so the first interval has deltas.
    pub fn new(targets: TargetSpec, journal: Option<Journal>) -> Result<Self, HostError> {
        Self::with_source(targets, journal, None)
    }

    /// [`Host::new`] counting through `source` (a broker) from the first snapshot on, so no
    /// thread's own perf_event group is opened only to be closed again (`None`: direct).
    pub fn with_source(
        targets: TargetSpec,
        journal: Option<Journal>,
        source: Option<Box<dyn CounterSource>>,
    ) -> Result<Self, HostError> {
        let topology = sysfs::host_topology()?;
        let online = topology.online_cpus();
        let avail = perf::availability();
        // One descriptor per event per thread: allow as many as the hard limit does.
        let _ = perf::raise_fd_limit();
        let mut h = Self {
            proc_: Proc::default(),
            topology,
            online,
            targets,
            self_pid: std::process::id(),
            journal,
            prev: HashMap::new(),
            prev_cpu: BTreeMap::new(),
            started: Instant::now(),
            stop: None,
            detailed: false,
            sources: HashMap::new(),
            families: BTreeMap::new(),
            per_thread: BTreeMap::new(),
            starts: BTreeMap::new(),
            inherit_off: None,
            unsure_threads: 0,
            prev_read: Instant::now(),
            use_perf: false,
            perf_off_reason: None,
            open_refused: None,
            hw_group: Vec::new(),
            found_overrides: Vec::new(),
            skipped_threads: Vec::new(),
            thread_lists: BTreeMap::new(),
            exits: crate::exits::ThreadExits::new(),
            exited_pids: std::collections::BTreeSet::new(),
            thread_gate: true,
            control_pages: 0,
            control_page_budget: control_page_budget(),
            intervals: 0,
            wait_slice: Duration::from_secs(1),
            counter_source: Box::new(DirectSource),
            source_fallback: None,
            idle_gate: None,
            idle_gate_off: None,
            signatures: BTreeMap::new(),
            reads_skipped: 0,
            idle_last: BTreeMap::new(),
            read_times: BTreeMap::new(),
            idle_sums: BTreeMap::new(),
            read_tids: BTreeMap::new(),
            stat_files: procfs::KeptStats::default(),
            proc_stat: std::fs::File::open("/proc/stat").ok(),
            code: None,
            listed: None,
        };
        if let TargetSpec::Pids(_) = &h.targets {
            let alive = h
                .target_pids()
                .into_iter()
                .filter_map(|pid| {
                    let st = h.proc_.stat(pid)?;
                    (!is_exited(&st)).then_some((pid, st.starttime_ticks))
                })
                .collect();
            h.listed = Some(alive);
        }
        h.set_idle_gate(true);
        match &avail.software {
            Ok(()) => {
                h.use_perf = true;
                let hw = avail.hardware_events();
                h.hw_group = HARDWARE_GROUP
                    .iter()
                    .filter(|(n, _)| hw.contains(n))
                    .cloned()
                    .collect();
            }
            Err(e) => h.perf_off_reason = Some(e.clone()),
        }
        h.inherit_off = h.counter_source.inherits().err();
        if let Some(source) = source {
            h.use_source(source);
        }
        h.prev = h.snapshot_threads();
        h.prev_cpu = h.read_proc_stat_cpus();
        Ok(h)
    }

    /// Count every process thread by thread from now on, as where the kernel or the counter
    /// source cannot inherit: each thread in a group of its own from the interval after it is
    /// first listed (for tests of that path, and comparisons, on a kernel that can). Every
    /// process's counting starts afresh here.
    pub fn count_thread_by_thread(&mut self) {
        self.inherit_off = Some("per-thread counting asked for".into());
        self.families.clear();
        self.prev_read = Instant::now();
        self.prev = self.snapshot_threads();
    }

    /// A flag that cuts the wait in [`Machine::advance`] short (set from a signal handler).
    pub fn set_stop_flag(&mut self, flag: &'static AtomicBool) {
        self.stop = Some(flag);
    }

    /// Count the watched threads through `source` (a broker) instead of this process's own
    /// perf_event groups. Every thread's source is closed and reopened through it; the next
    /// interval's deltas start here.
    pub fn set_counter_source(&mut self, source: Box<dyn CounterSource>) {
        // Every thread reopens through the new source: those on `/proc` too (the broker may
        // count what this process could not).
        self.sources.clear();
        self.families.clear();
        self.per_thread.clear();
        self.control_pages = 0;
        self.exits.forget_all();
        self.use_source(source);
        self.prev_read = Instant::now();
        self.prev = self.snapshot_threads();
    }

    fn use_source(&mut self, source: Box<dyn CounterSource>) {
        if !source.is_direct() {
            // The broker opens the groups with its own rights: this process's failed probe
            // (an unprivileged user under a strict perf_event_paranoid) does not apply to it.
            self.use_perf = true;
            self.perf_off_reason = None;
        }
        self.counter_source = source;
        self.inherit_off = self.counter_source.inherits().err();
        self.source_fallback = None;
        self.open_refused = None;
    }

    /// Turn the idle gate on (where the kernel allows it: see [`crate::taskstats`]) or off
    /// (every thread is read every interval).
    pub fn set_idle_gate(&mut self, on: bool) {
        self.signatures.clear();
        self.thread_gate = on;
        if !on {
            self.idle_gate = None;
            self.idle_gate_off = Some("turned off".into());
            return;
        }
        match Taskstats::open() {
            Ok(g) => {
                self.idle_gate = Some(g);
                self.idle_gate_off = None;
            }
            Err(e) => {
                self.idle_gate = None;
                self.idle_gate_off = Some(e.to_string());
            }
        }
    }

    /// Thread readings the idle gate took over from the previous interval instead of reading
    /// them, since the host started.
    pub fn reads_skipped(&self) -> u64 {
        self.reads_skipped
    }

    /// Whether `pid`'s threads all kept still since the last interval: its run signature is
    /// the one seen then and every thread listed now was read then. The signature is taken
    /// before any thread is read, so readings taken after the last one are current.
    fn kept_still(&mut self, pid: u32, tids: &[u32], sig: Option<RunSignature>) -> bool {
        // A source that stopped answering (a broker gone) is found out by reading: its
        // threads are reopened on this process's own groups.
        if self.counter_source.broken().is_some() {
            return false;
        }
        let Some(now) = sig else {
            self.signatures.remove(&pid);
            return false;
        };
        let same = self.signatures.insert(pid, now) == Some(now);
        // A family's groups also count the threads born and ended since the last look, which
        // leave the thread list as it was: only the scheduler's own sums (switch-ins and run
        // time, which include exited threads) tell that none ran. The fallback signature's
        // switch counts and tick-charged time cover live threads only.
        let family_ok = !self.families.contains_key(&pid)
            || self.idle_gate.as_ref().is_some_and(Taskstats::precise);
        same && family_ok
            && self.idle_last.get(&pid) == Some(&true)
            && self
                .read_tids
                .get(&pid)
                .is_some_and(|t| t.as_slice() == tids)
    }

    /// Every target's run signature, taken before any counter is read (a broker's readings
    /// come in one request at `refresh`: a signature taken after it could miss a thread that
    /// ran in between).
    fn signatures_now(&mut self, pids: &[u32]) -> BTreeMap<u32, RunSignature> {
        let mut out = BTreeMap::new();
        for &pid in pids {
            let Some(gate) = self.idle_gate.as_mut() else {
                break;
            };
            match gate.signature(pid) {
                Ok(sig) => {
                    out.insert(pid, sig);
                }
                Err(TaskstatsError::Denied(e)) => {
                    self.idle_gate = None;
                    self.idle_gate_off = Some(TaskstatsError::Denied(e).to_string());
                }
                Err(_) => {}
            }
        }
        out
    }

    /// Per-CPU (busy, total) jiffies from `/proc/stat` (kept open).
    fn read_proc_stat_cpus(&mut self) -> BTreeMap<CpuId, (u64, u64)> {
        let mut text = String::new();
        let ok = self
            .proc_stat
            .as_ref()
            .is_some_and(|f| procfs::reread_to_string(f, &mut text).is_ok());
        if !ok {
            text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        }
        parse_proc_stat_cpus(&text)
    }

    /// Sample every watched thread's instruction pointers from now on and attach each
    /// process's code heatmaps to the observations ([`TaskObservation::code`]); for policies
    /// that ask ([`counterpoint_core::Policy::wants_code_heatmaps`]) and `top --heatmaps`.
    pub fn enable_code_heatmaps(
        &mut self,
        cfg: crate::code::CodeSamplingConfig,
    ) -> crate::code::CodeSamplingStatus {
        let mut c = crate::code::CodeSampling::new(cfg);
        for pid in self.target_pids() {
            for tid in self.proc_.threads(pid) {
                c.watch(tid);
            }
        }
        let status = c.status().clone();
        self.code = Some(c);
        status
    }

    /// Threads whose IP sampler would not open so far, and the last reason (0, `None` when
    /// code heatmaps are off or every sampler opened).
    pub fn code_sampling_failures(&self) -> (u64, Option<String>) {
        self.code
            .as_ref()
            .map_or((0, None), |c| (c.failed_threads(), c.last_error.clone()))
    }

    /// How soon the wait in [`Machine::advance`] sees a stop flag set by another thread
    /// (default 250 ms; a signal to the waiting thread ends the wait at once).
    pub fn set_wait_slice(&mut self, d: Duration) {
        self.wait_slice = d.max(Duration::from_millis(1));
    }

    /// The threads of `pid`, re-listed only when its thread count changed or the list is
    /// [`RELIST_INTERVALS`] old (see `thread_lists`).
    fn threads_of(&mut self, pid: u32, num_threads: u32) -> Vec<u32> {
        if let Some((tids, at)) = self.thread_lists.get(&pid) {
            if num_threads as usize == tids.len()
                && self.intervals < at + RELIST_INTERVALS
                && !self.exited_pids.contains(&pid)
            {
                return tids.clone();
            }
        }
        let tids = self.proc_.threads(pid);
        self.thread_lists
            .insert(pid, (tids.clone(), self.intervals));
        tids
    }

    /// The events this host puts in its samples: the software ones always (cpu-migrations when
    /// perf_event or detailed mode gives them), hardware ones only where they opened.
    pub fn counted_events(&self) -> Vec<&'static str> {
        let mut v = vec![event::TASK_CLOCK, event::CONTEXT_SWITCHES];
        if self.use_perf || self.detailed {
            v.push(event::CPU_MIGRATIONS);
        }
        if self.use_perf {
            v.extend(self.hw_group.iter().map(|(n, _)| *n));
        }
        v
    }

    /// The journal's path, if the host keeps one.
    pub fn journal_path(&self) -> Option<String> {
        self.journal
            .as_ref()
            .map(|j| j.path().display().to_string())
    }

    /// Why a counter broker was given up for direct counting, if it was (cheap: for a check
    /// every interval, where [`Host::counter_sources`] walks every thread).
    pub fn source_fallback(&self) -> Option<&str> {
        self.source_fallback.as_deref()
    }

    /// How the threads being watched are counted now.
    pub fn counter_sources(&self) -> CounterSources {
        let perf_threads = self
            .sources
            .values()
            .filter(|s| matches!(s, ThreadSource::Perf { .. }))
            .count();
        let family_groups: usize = self.families.values().map(|f| f.members.len()).sum();
        CounterSources {
            perf_threads: perf_threads + family_groups,
            proc_threads: self.sources.len() - perf_threads,
            inherited_processes: self.families.len(),
            per_thread_processes: self
                .read_tids
                .keys()
                .filter(|p| !self.families.contains_key(p))
                .count(),
            inherit_off: self.inherit_off.clone(),
            per_thread_reason: self
                .per_thread
                .values()
                .next_back()
                .map(|p| p.reason.clone()),
            unsure_threads: self.unsure_threads,
            perf_off_reason: self.perf_off_reason.clone(),
            open_refused: self.open_refused.clone(),
            via: self.counter_source.describe(),
            direct: self.counter_source.is_direct(),
            fallback_reason: self.source_fallback.clone(),
            idle_gate_off: self.idle_gate_off.clone(),
            idle_gate_precise: self.idle_gate.as_ref().is_some_and(Taskstats::precise),
            exit_watch_off: self.exits.off_reason().map(str::to_string),
            thread_gate: self.thread_gate,
            control_pages: self.control_pages,
        }
    }

    /// The online CPUs.
    pub fn online(&self) -> &CpuSet {
        &self.online
    }

    /// Target processes now.
    pub fn target_pids(&self) -> Vec<u32> {
        self.targets.select(&self.proc_, self.self_pid)
    }

    /// Check that every thread of every target can be re-pinned by us, changing nothing.
    pub fn check_permissions(&self) -> Result<(), HostError> {
        for pid in self.target_pids() {
            for tid in self.proc_.threads(pid) {
                match affinity::probe_permission(tid) {
                    Ok(()) | Err(AffinityError::Gone { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Restore every journaled thread (see [`Journal::restore_all`]).
    pub fn restore(&mut self) -> RestoreReport {
        match self.journal.as_mut() {
            Some(j) => j.restore_all(&self.online),
            None => RestoreReport::default(),
        }
    }

    /// The safety net's sweep, once per interval: forget threads that exited (see
    /// [`Journal::forget_exited`]), journal threads and children born with a set we gave (see [`Journal::adopt_new_tasks`]) and find tasks someone else re-pinned
    /// (see [`Journal::detect_overrides`]), which are never touched again.
    pub fn sweep(&mut self) -> Result<Sweep, HostError> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(Sweep::default());
        };
        let relink = j.relink();
        j.forget_exited()?;
        let mut overrides = std::mem::take(&mut self.found_overrides);
        overrides.extend(j.detect_overrides()?);
        let adopted = j.adopt_new_tasks()?;
        let skipped = std::mem::take(&mut self.skipped_threads);
        Ok(Sweep {
            adopted,
            overrides,
            skipped,
            relink,
        })
    }

    /// Whether the agent leaves `pid` alone because someone else set its affinity.
    pub fn is_user_owned(&self, pid: u32) -> bool {
        self.journal.as_ref().is_some_and(|j| j.is_user_owned(pid))
    }

    fn snapshot_threads(&mut self) -> HashMap<u32, Prev> {
        self.counter_source.refresh();
        let refreshed_at = Instant::now();
        let direct = self.counter_source.is_direct();
        let pids = self.target_pids();
        // A pid that names another process than at its last read: its old groups go first.
        self.starts.retain(|p, _| pids.contains(p));
        for &pid in &pids {
            if let Some(st) = self.proc_.stat(pid) {
                self.check_start(pid, st.starttime_ticks);
            }
        }
        self.read_tids.clear();
        self.idle_last.clear();
        self.idle_sums.clear();
        self.signatures.clear();
        self.read_times.clear();
        let mut out = HashMap::new();
        self.families.retain(|p, _| pids.contains(p));
        for pid in pids {
            let mut tids = self.proc_.threads(pid);
            self.read_times
                .insert(pid, if direct { Instant::now() } else { refreshed_at });
            if !self.families.contains_key(&pid) && self.may_inherit(pid) {
                self.open_family(pid, &mut tids);
            }
            if let Some(f) = self.families.get_mut(&pid) {
                // A new baseline for every group (the source or the mode changed).
                for m in &mut f.members {
                    m.last = m.read();
                }
                for &tid in &tids {
                    self.exits.watch(pid, tid);
                }
            } else {
                for &tid in &tids {
                    if let Some(reading) = self.read_thread(pid, tid) {
                        out.insert(
                            tid,
                            Prev {
                                reading,
                                idle_seq: None,
                            },
                        );
                    }
                }
            }
            self.read_tids.insert(pid, tids);
        }
        out
    }

    /// Whether `pid` may be counted through a family: perf_event works, the source inherits,
    /// and its family did not fail to open before.
    fn may_inherit(&self, pid: u32) -> bool {
        self.use_perf && self.inherit_off.is_none() && !self.per_thread.contains_key(&pid)
    }

    /// Count `pid` thread by thread for `reason` (its family did not open); with `retry`, its
    /// family is tried again after 1, 2, 4, ... intervals (at most [`FAMILY_RETRY_MAX`]), as
    /// the refusals go on.
    fn note_per_thread(&mut self, pid: u32, reason: String, retry: bool) {
        let attempts = self.per_thread.get(&pid).map_or(0, |p| p.attempts) + 1;
        let wait = (1u64 << (attempts - 1).min(16)).min(FAMILY_RETRY_MAX);
        self.per_thread.insert(
            pid,
            PerThread {
                reason: if retry {
                    format!(
                        "{reason}; its inherited groups are tried again within {wait} interval(s)"
                    )
                } else {
                    reason
                },
                retry_at: retry.then_some(self.intervals + wait),
                attempts,
            },
        );
    }

    /// Whether `pid`, counted thread by thread after a refusal that may pass, is due to have
    /// its family tried again.
    fn family_retry_due(&self, pid: u32) -> bool {
        self.use_perf
            && self.inherit_off.is_none()
            && !self.families.contains_key(&pid)
            && self
                .per_thread
                .get(&pid)
                .and_then(|p| p.retry_at)
                .is_some_and(|at| self.intervals >= at)
    }

    /// Try `pid`'s family again (see [`Host::family_retry_due`]), after its threads were read
    /// one by one for this interval. Where it opens, the per-thread groups are closed and the
    /// family's first reading is its baseline: it counts from here on, with nothing lost but
    /// the instant between the last per-thread reads and its opening. Where it does not, the
    /// process stays thread by thread, tried again later.
    fn retry_family(&mut self, pid: u32) {
        let mut tids = self.proc_.threads(pid);
        if !self.open_family(pid, &mut tids) {
            return;
        }
        self.per_thread.remove(&pid);
        for tid in self.read_tids.remove(&pid).unwrap_or_default() {
            self.close_thread(tid);
        }
        if let Some(f) = self.families.get_mut(&pid) {
            for m in &mut f.members {
                m.last = m.read();
            }
        }
        for &tid in &tids {
            self.exits.watch(pid, tid);
        }
        self.read_tids.insert(pid, tids);
    }

    /// Check that `pid` is the process it was at its last read (by its start time): where
    /// the pid was reused, the old process's groups, readings and marks are dropped, and the
    /// new one is counted from its first read, as any process first seen.
    fn check_start(&mut self, pid: u32, start: u64) {
        if self.starts.insert(pid, start).is_some_and(|s| s != start) {
            self.forget_process(pid);
        }
    }

    /// Drop everything kept about `pid`'s counting: its family or its threads' groups and
    /// readings, its thread list, its idle-gate marks and its last read time.
    fn forget_process(&mut self, pid: u32) {
        self.families.remove(&pid);
        self.per_thread.remove(&pid);
        for tid in self.read_tids.remove(&pid).unwrap_or_default() {
            self.close_thread(tid);
        }
        self.thread_lists.remove(&pid);
        self.signatures.remove(&pid);
        self.idle_last.remove(&pid);
        self.idle_sums.remove(&pid);
        self.read_times.remove(&pid);
    }

    /// Open `pid`'s family on its threads `tids` (sorted), which it replaces with the list
    /// taken after the groups opened. A thread started between the listing and its creator's
    /// group has no inherited group and would count nowhere, so the threads are listed again
    /// once every group is open, and while the new list has a thread the first lacked, the
    /// groups are closed and opened again on it, [`FAMILY_ATTEMPTS`] times at most; after the
    /// last, the newcomers are taken as born after their creator's group opened (counted in
    /// it) and counted in `unsure_threads`. A thread gone before its open is skipped (its
    /// threads are listed). Any other refusal leaves the process to per-thread counting, and
    /// one that says no thread can inherit here turns families off. False where no family
    /// opened.
    fn open_family(&mut self, pid: u32, tids: &mut Vec<u32>) -> bool {
        for attempt in 1..=FAMILY_ATTEMPTS {
            let mut members = Vec::with_capacity(tids.len());
            for &tid in tids.iter() {
                match self.counter_source.open_inherited(tid, &SOFTWARE_GROUP) {
                    Ok(sw) => {
                        // A thread whose hardware group does not open lacks those events; its
                        // process then reports none of them rather than a partial sum.
                        let hw = if self.hw_group.is_empty() {
                            None
                        } else {
                            self.counter_source.open_inherited(tid, &self.hw_group).ok()
                        };
                        members.push(Member { sw, hw, last: None });
                    }
                    Err(e) => {
                        let broken = self.counter_source.broken();
                        if let (Some(why), false) = (broken, self.counter_source.is_direct()) {
                            // The broker went away: this family, and every later one, opens
                            // on this process's own groups.
                            drop(members);
                            self.fall_back_to_direct(why);
                            return self.may_inherit(pid) && self.open_family(pid, tids);
                        }
                        if e.is_gone() {
                            continue;
                        }
                        // The source cannot inherit for any thread (a broker without the
                        // form, a kernel without inherit_thread): thread by thread for all.
                        if let Err(why) = self.counter_source.inherits() {
                            self.inherit_off = Some(why);
                        } else if e.is_global() {
                            self.inherit_off = Some(e.to_string());
                        } else {
                            // Refused for this task (its owner's): thread by thread for good.
                            // Anything else may pass (out of descriptors, a broker's rate
                            // limit or its own trouble): thread by thread until the family is
                            // tried again, at a later interval.
                            self.note_per_thread(pid, e.to_string(), !refused_for_the_task(&e));
                        }
                        return false;
                    }
                }
            }
            let now = self.proc_.threads(pid);
            let born = now
                .iter()
                .filter(|t| tids.binary_search(t).is_err())
                .count();
            *tids = now;
            if born == 0 || attempt == FAMILY_ATTEMPTS {
                self.unsure_threads += born as u64;
                self.families.insert(
                    pid,
                    Family {
                        members,
                        failed_reads: 0,
                    },
                );
                return true;
            }
        }
        false
    }

    /// Read `pid`'s family: the sum of its groups' deltas is the process's (every thread it
    /// has had since its first read, alive or ended). `tids` (its threads now) only keep the
    /// exit watch and the idle gate's list up to date.
    fn read_family(&mut self, pid: u32, tids: Vec<u32>) -> ProcessSums {
        let mut sums = ProcessSums::default();
        let mut moved = false;
        if !self.counter_source.is_direct() {
            if let Some(why) = self.counter_source.broken() {
                // The broker went away: the family opens again on this process's own groups
                // and counts from the next interval on.
                self.families.remove(&pid);
                self.read_tids.remove(&pid);
                self.fall_back_to_direct(why);
                return self.read_process(pid, tids);
            }
        }
        let mut reopen = false;
        if let Some(f) = self.families.get_mut(&pid) {
            let now: Vec<Option<Reading>> = f.members.iter_mut().map(Member::read).collect();
            let failed = now.iter().filter(|r| r.is_none()).count();
            if failed > 0 {
                // No group's last reading moves, and neither does the process's read time
                // (`held`): the next read's deltas and its interval both start at the last
                // read that succeeded. Taking the groups that did read would mix deltas over
                // one interval and over two, divided by one (a read that failed once made the
                // next sample count up to twice the time there was).
                sums.missed = failed;
                sums.held = true;
                moved = true;
                f.failed_reads += 1;
                // A group that keeps failing (a registration the broker dropped, say) is not
                // waited for: the family is opened again at the process's next read.
                reopen = f.failed_reads >= FAMILY_READ_ATTEMPTS;
            } else {
                f.failed_reads = 0;
                for (m, r) in f.members.iter_mut().zip(now) {
                    let Some(r) = r else { continue };
                    match m.last.replace(r) {
                        Some(p) => {
                            sums.add(&p, &r);
                            moved |= p != r;
                        }
                        None => {
                            sums.fresh += 1;
                            moved = true;
                        }
                    }
                }
            }
        }
        if sums.held {
            if let Err(why) = self.counter_source.inherits() {
                // The source found it cannot count thread trees after all (a broker whose
                // kernel refuses inherit_thread reports those events unsupported): every
                // process is counted thread by thread from its next read.
                self.inherit_off = Some(why);
                let pids: Vec<u32> = self.families.keys().copied().collect();
                for p in pids {
                    self.families.remove(&p);
                    self.read_tids.remove(&p);
                }
                self.note_idle(pid, true, &sums);
                return sums;
            }
        }
        let old = self.read_tids.insert(pid, tids).unwrap_or_default();
        let now = &self.read_tids[&pid];
        for &t in now {
            if old.binary_search(&t).is_err() {
                self.exits.watch(pid, t);
            }
        }
        for t in old {
            if now.binary_search(&t).is_err() {
                self.exits.forget(t);
            }
        }
        if reopen {
            self.families.remove(&pid);
            self.read_tids.remove(&pid);
        }
        self.note_idle(pid, moved, &sums);
        sums
    }

    /// Whether `pid`'s read found it idle (see `idle_last`), and the zero sums a gated
    /// interval reports then.
    fn note_idle(&mut self, pid: u32, moved: bool, sums: &ProcessSums) {
        self.idle_last.insert(pid, !moved);
        if moved {
            self.idle_sums.remove(&pid);
        } else {
            self.idle_sums.insert(pid, sums.clone());
        }
    }

    /// Thread `tid`'s control-page sequence, where its source has one.
    fn sched_seq(&self, tid: u32) -> Option<u32> {
        match self.sources.get(&tid)? {
            ThreadSource::Perf { sw, .. } => sw.sched_seq(),
            _ => None,
        }
    }

    /// Read every thread of `pid` in `tids` (sorted), sum their deltas since the last reading,
    /// close the counters of its threads gone since its last read, and note whether it was
    /// idle (see `idle_last`).
    fn read_process(&mut self, pid: u32, mut tids: Vec<u32>) -> ProcessSums {
        // First read of a process: through a family where one opens.
        if !self.families.contains_key(&pid)
            && !self.read_tids.contains_key(&pid)
            && self.may_inherit(pid)
        {
            self.open_family(pid, &mut tids);
        }
        if self.families.contains_key(&pid) {
            return self.read_family(pid, tids);
        }
        let mut sums = ProcessSums::default();
        // Whether any thread moved, is new, or failed to read.
        let mut moved = false;
        for &tid in &tids {
            // The thread gate: a thread its last read found idle, whose control page the
            // kernel has not rewritten since just before that read (no switch in or out), has
            // not run since: its last reading stands, as a read would have returned it. One
            // load from the page instead of a read(2).
            let seq_now = self.thread_gate.then(|| self.sched_seq(tid)).flatten();
            let still = seq_now.and_then(|seq| {
                self.prev
                    .get(&tid)
                    .filter(|p| p.idle_seq == Some(seq) && seq % 2 == 0)
            });
            if let Some(p) = still {
                sums.add(&p.reading, &p.reading);
                self.reads_skipped += 1;
                continue;
            }
            let Some(r) = self.read_thread(pid, tid) else {
                moved = true;
                // A thread that is still there but could not be read (its broker went away):
                // the process's sums lack it. A thread that exited is simply gone.
                if self.proc_.thread_alive(pid, tid) {
                    sums.missed += 1;
                }
                continue;
            };
            // A thread first seen now contributes from the next interval on.
            moved |= match self.prev.entry(tid) {
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let p = e.get_mut();
                    sums.add(&p.reading, &r);
                    let thread_moved = p.reading != r;
                    p.reading = r;
                    // The sequence was taken before the read, so a switch after it shows.
                    p.idle_seq = if thread_moved { None } else { seq_now };
                    thread_moved
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(Prev {
                        reading: r,
                        idle_seq: None,
                    });
                    sums.fresh += 1;
                    true
                }
            };
        }
        if let Some(old) = self.read_tids.insert(pid, tids) {
            let now = &self.read_tids[&pid];
            let gone: Vec<u32> = old
                .into_iter()
                .filter(|t| now.binary_search(t).is_err())
                .collect();
            for tid in gone {
                // A thread that ended since its last read: its perf_event group still reads
                // its final counts, so what it did since then is its process's too (a `/proc`
                // file of an ended thread reads nothing, and that stretch is lost).
                let last = self.prev.get(&tid).map(|p| p.reading);
                if let (Some(p), Some(r)) = (last, self.read_source(pid, tid)) {
                    sums.add(&p, &r);
                    moved |= p != r;
                }
                self.close_thread(tid);
            }
        }
        self.note_idle(pid, moved, &sums);
        if self.family_retry_due(pid) {
            self.retry_family(pid);
        }
        sums
    }

    /// Target processes now, their `stat` read through the kept-open files (which are kept
    /// for the candidates only).
    fn targets_now(&mut self) -> (Vec<u32>, BTreeMap<u32, procfs::Stat>) {
        let mut got = BTreeMap::new();
        let (proc_, kept) = (&self.proc_, &mut self.stat_files);
        let pids = self.targets.select_with(proc_, self.self_pid, &mut |pid| {
            let st = kept.stat(proc_, pid);
            if let Some(s) = &st {
                got.insert(pid, s.clone());
            }
            st
        });
        self.stat_files.retain(|p| got.contains_key(&p));
        (pids, got)
    }

    /// The checks before any pin of `pid` (or of its thread `tid`, named in errors): not a
    /// kernel thread, a non-empty set once intersected with the online CPUs (returned), a
    /// journal to write first, and not a task someone else re-pinned since our last look
    /// (theirs: never overridden).
    fn may_pin(&mut self, pid: u32, tid: u32, cpus: &CpuSet) -> Result<CpuSet, HostError> {
        if self.proc_.is_kernel_thread(pid) {
            return Err(HostError::KernelThread(pid));
        }
        let effective = cpus.intersection(&self.online);
        if effective.is_empty() {
            return Err(AffinityError::Empty {
                tid,
                requested: cpus.to_list(),
                online: self.online.to_list(),
            }
            .into());
        }
        let journal = self.journal.as_mut().ok_or(HostError::NoJournal)?;
        if !journal.is_user_owned(pid) {
            let found = journal.detect_overrides()?;
            self.found_overrides.extend(found);
        }
        if journal.is_user_owned(pid) {
            return Err(HostError::UserOwned(pid));
        }
        Ok(effective)
    }

    /// Set every thread of `pid` to `cpus` (∩ online), journaling each thread first.
    pub fn set_process_affinity(&mut self, pid: u32, cpus: &CpuSet) -> Result<CpuSet, HostError> {
        let effective = self.may_pin(pid, pid, cpus)?;
        let journal = self.journal.as_mut().ok_or(HostError::NoJournal)?;
        let tids = self.proc_.threads(pid);
        // One journal write before any thread changes, one after all of them.
        journal.before_change_all(pid, &tids, &effective)?;
        let mut outcomes = Vec::with_capacity(tids.len());
        let mut failure = None;
        for &tid in &tids {
            // A thread the journal did not take (it left the process, or its start time could
            // not be read) is not changed: nothing could put it back.
            if journal.pending(tid) != Some(&effective) {
                outcomes.push((tid, None));
                continue;
            }
            match affinity::set(tid, &effective, &self.online) {
                Ok(s) => outcomes.push((tid, Some(s))),
                Err(AffinityError::Gone { .. }) => outcomes.push((tid, None)),
                Err(e) => {
                    outcomes.push((tid, None));
                    failure = Some(e);
                    break;
                }
            }
        }
        // Threads after a failure were not touched: clear their pending marks too.
        for &tid in tids.iter().skip(outcomes.len()) {
            outcomes.push((tid, None));
        }
        journal.after_change_all(&outcomes)?;
        if let Some(e) = failure {
            return Err(e.into());
        }
        Ok(effective)
    }

    /// A source for a thread seen for the first time: a perf_event group where it opens, else
    /// `/proc` (the `sched` file in detailed mode, else an open `schedstat`).
    fn open_source(&mut self, pid: u32, tid: u32) -> ThreadSource {
        if self.use_perf {
            let mut opened = self.counter_source.open(tid, &SOFTWARE_GROUP);
            if let Err(e) = &opened {
                let broken = self.counter_source.broken();
                if (e.is_global() || broken.is_some()) && !self.counter_source.is_direct() {
                    // The broker went away or cannot count here: count ourselves from now on.
                    self.fall_back_to_direct(broken.unwrap_or_else(|| e.to_string()));
                    opened = self.counter_source.open(tid, &SOFTWARE_GROUP);
                }
            }
            match opened {
                Ok(sw) => {
                    let hw = if self.hw_group.is_empty() {
                        None
                    } else {
                        // A thread whose hardware group does not open lacks those events; its
                        // process then reports none of them rather than a partial sum.
                        self.counter_source.open(tid, &self.hw_group).ok()
                    };
                    return ThreadSource::Perf { sw, hw };
                }
                Err(e) if e.is_global() => {
                    self.use_perf = false;
                    self.perf_off_reason = Some(e.to_string());
                }
                // Gone, out of descriptors, or not permitted for this task: /proc for it.
                Err(e) => {
                    if self.proc_.thread_alive(pid, tid) {
                        self.open_refused = Some(e.to_string());
                    }
                }
            }
        }
        if self.detailed {
            return ThreadSource::Proc;
        }
        match self.proc_.open_schedstat(pid, tid) {
            Some(f) => ThreadSource::Schedstat(f),
            None => ThreadSource::Proc,
        }
    }

    /// Count with this process's own groups from now on: the source (a broker) went away or
    /// cannot count here, for `why`.
    ///
    /// Every group open now is the source's, so every process is counted afresh, as at its
    /// first read (through a family where one opens), from its next read on: the families
    /// too, all of them (until session 29 only the family that found the broker gone was
    /// reopened, and every other process's reads failed from then on).
    fn fall_back_to_direct(&mut self, why: String) {
        self.source_fallback = Some(format!("{}: {why}", self.counter_source.describe()));
        self.counter_source = Box::new(DirectSource);
        // What this process can count by itself (the broker's rights no longer apply).
        let avail = perf::availability();
        self.use_perf = avail.software.is_ok();
        self.perf_off_reason = avail.software.clone().err();
        self.inherit_off = self.counter_source.inherits().err();
        self.open_refused = None;
        self.sources.clear();
        self.prev.clear();
        self.families.clear();
        self.per_thread.clear();
        self.read_tids.clear();
        self.idle_last.clear();
        self.idle_sums.clear();
        self.control_pages = 0;
        self.exits.forget_all();
    }

    /// Close thread `tid`'s counters and forget its last reading and exit watch.
    fn close_thread(&mut self, tid: u32) {
        self.prev.remove(&tid);
        if let Some(ThreadSource::Perf { sw, .. }) = self.sources.remove(&tid) {
            if sw.sched_seq().is_some() {
                self.control_pages = self.control_pages.saturating_sub(1);
            }
        }
        self.exits.forget(tid);
    }

    /// One thread's cumulative counters, `None` when it is gone. A thread whose source fails
    /// loses its previous reading too, so no delta is taken across two different sources.
    fn read_thread(&mut self, pid: u32, tid: u32) -> Option<Reading> {
        if !self.sources.contains_key(&tid) {
            let mut src = self.open_source(pid, tid);
            if let ThreadSource::Perf { sw, .. } = &mut src {
                if self.thread_gate
                    && self.control_pages < self.control_page_budget
                    && sw.map_control_page()
                {
                    self.control_pages += 1;
                }
            }
            self.sources.insert(tid, src);
            self.exits.watch(pid, tid);
        }
        let got = self.read_source(pid, tid);
        if got.is_none() {
            self.close_thread(tid);
        }
        got
    }

    /// Thread `tid`'s cumulative counters from the source it has (`None` without one, or
    /// when the read fails).
    fn read_source(&mut self, pid: u32, tid: u32) -> Option<Reading> {
        let detailed = self.detailed;
        match self.sources.get_mut(&tid)? {
            ThreadSource::Perf { sw, hw } => read_groups(sw, hw.as_mut()),
            ThreadSource::Schedstat(f) => procfs::read_schedstat_at(f).map(times_reading),
            ThreadSource::Proc => {
                let t = if detailed {
                    self.proc_.thread_times(pid, tid)
                } else {
                    self.proc_.thread_times_fast(pid, tid)
                };
                t.map(times_reading)
            }
        }
    }

    /// Where perf_event is refused, read migrations too from `/proc` (`sched`, a longer file per
    /// thread) — for `top`; the agent keeps the cheap `schedstat` path.
    pub fn set_detailed(&mut self, detailed: bool) {
        self.detailed = detailed;
        // Threads already on a /proc source switch to the new one.
        self.sources
            .retain(|_, s| matches!(s, ThreadSource::Perf { .. }));
        self.prev_read = Instant::now();
        self.prev = self.snapshot_threads();
    }

    fn process_affinity(&self, pid: u32) -> Option<CpuSet> {
        affinity::get(pid).ok()
    }
}

/// What one sweep of the safety net found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Threads and child processes that inherited a set we gave, now journaled.
    pub adopted: Vec<Adopted>,
    /// Tasks someone else re-pinned after us, now left alone.
    pub overrides: Vec<Override>,
    /// Thread-level changes skipped because the thread had exited.
    pub skipped: Vec<SkippedThread>,
    /// Whether the journal's path still named the journal ([`Journal::relink`]).
    pub relink: Relink,
}

/// How the watched threads are counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterSources {
    /// perf_event groups open (this process's own, or the broker's), which since families
    /// are not threads: one per thread a family's process had when first read (whether that
    /// thread lives on or not; it also counts every thread started since), and one per
    /// thread counted one by one. The name is kept (`top`'s and the agent's JSON
    /// `perf_threads`); `top`'s text says groups.
    pub perf_threads: usize,
    /// Processes counted through inherited groups (see [`Family`]): every thread they start
    /// is counted, however short its life.
    pub inherited_processes: usize,
    /// Processes counted thread by thread (each thread in a group of its own, or on `/proc`,
    /// from the interval after it is listed), whatever the reason: `inherit_off` for all of
    /// them, or `per_thread_reason`.
    pub per_thread_processes: usize,
    /// Why processes are counted thread by thread, each thread from the interval after it is
    /// first listed (`None` where inherited groups are used): the kernel has no
    /// `inherit_thread`, the counters come from a source that cannot inherit, or perf_event
    /// is off.
    pub inherit_off: Option<String>,
    /// Why some process is counted thread by thread although others are not (its family did
    /// not open), if one is.
    pub per_thread_reason: Option<String>,
    /// Threads found born while their process's family was being opened, after the last
    /// attempt: assumed counted in their creator's group (see [`FAMILY_ATTEMPTS`]).
    pub unsure_threads: u64,
    /// Threads read from `/proc`.
    pub proc_threads: usize,
    /// Why new threads are not given perf_event groups, when they are not.
    pub perf_off_reason: Option<String>,
    /// Why the last thread whose group did not open (while others may) is on `/proc`.
    pub open_refused: Option<String>,
    /// Who opens the groups ([`CounterSource::describe`]: `perf_event`, `broker at PATH`).
    pub via: String,
    /// Whether that is this process's own perf_event groups.
    pub direct: bool,
    /// Why a broker was given up for direct counting, if it was.
    pub fallback_reason: Option<String>,
    /// Why the idle gate (skip reading the threads of a process that did not run) is off;
    /// `None` when it is on.
    pub idle_gate_off: Option<String>,
    /// Whether the gate's signatures carry the scheduler's switch-ins and ns on a CPU, or only
    /// switch counts and tick-charged time (see [`crate::taskstats`]).
    pub idle_gate_precise: bool,
    /// Why thread exits are not watched (`None` while they are): a process whose thread count
    /// stays the same while threads come and go is then re-listed every
    /// [`RELIST_INTERVALS`] intervals only.
    pub exit_watch_off: Option<String>,
    /// Whether the thread gate is on (`--read-every-thread` turns it off with the idle gate).
    pub thread_gate: bool,
    /// Threads whose counters have a mapped control page, so the thread gate can look at them
    /// without a read (the others are read every interval their process ran).
    pub control_pages: usize,
}

impl CounterSources {
    /// How each watched process's threads are counted, in words (`top`'s `counters:` line, the
    /// agent's `threads` start field): in the creators' groups (inherited), or each thread from
    /// the interval after it is listed, with the reason; both, with how many processes each,
    /// when the processes differ.
    pub fn thread_counting(&self) -> String {
        const INHERITED: &str = "inherited: threads a process starts after its first read count in their creators' groups, however short-lived";
        const PER_THREAD: &str = "per thread: each thread counted from the interval after it is listed; threads shorter than an interval are missed";
        let why = self
            .inherit_off
            .as_deref()
            .or(self.per_thread_reason.as_deref())
            .unwrap_or("no reason recorded");
        let (i, p) = (self.inherited_processes, self.per_thread_processes);
        if p == 0 && (i > 0 || self.inherit_off.is_none()) {
            INHERITED.to_string()
        } else if i == 0 {
            format!("{PER_THREAD} ({why})")
        } else {
            format!(
                "{INHERITED} ({i} {}); {PER_THREAD} ({p} {}: {why})",
                plural(i, "process", "processes"),
                plural(p, "process", "processes")
            )
        }
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// How many times a family is opened before threads born meanwhile are taken as counted (see
/// `Host::open_family`).
pub const FAMILY_ATTEMPTS: usize = 3;

/// A process counted through inherited groups: one group per thread it had when first read
/// (its "originals"), opened with `inherit` and `inherit_thread`. A thread started later by
/// any of them, or by a thread they started, and so on, is counted in its creator's group
/// from its first instant: the kernel gives it a copy of the group at its birth, a read of the
/// group sums the copies of the live ones, and an ended thread's counts are folded into the
/// group for good. So the sum of the originals' deltas is the whole process's, threads too
/// short-lived to be listed included, and no thread is opened after the first read. Forked
/// processes are not followed (they are processes of their own). A group is kept until its
/// process is no longer watched, also after its thread has ended: its threads' counts are in
/// it, and those still running fold into it when they end. Its control page cannot be mapped
/// (the kernel refuses for inherited events), so the thread gate does not apply.
struct Family {
    members: Vec<Member>,
    /// Reads in a row in which some group failed (see `Host::read_family`).
    failed_reads: usize,
}

/// How many reads in a row a family's groups may fail (each keeping its last readings) before
/// the family is opened again.
pub const FAMILY_READ_ATTEMPTS: usize = 3;

/// The longest wait, in intervals, before a process counted thread by thread after a refusal
/// that may pass has its family tried again (the waits double from 1).
pub const FAMILY_RETRY_MAX: u64 = 64;

/// Why a process is counted thread by thread although families could be used, and when its
/// family is tried again.
struct PerThread {
    /// The refusal, in words.
    reason: String,
    /// The interval from which its family is tried again; `None`: never (refused for this
    /// task, by its owner's rights or the broker's policy).
    retry_at: Option<u64>,
    /// Family opens refused so far.
    attempts: u32,
}

/// Whether a group was refused for this task (the kernel's EACCES/EPERM, a broker's policy
/// rule): a refusal that will not pass by waiting.
fn refused_for_the_task(e: &PerfError) -> bool {
    matches!(e, PerfError::Open { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
}

/// One original's groups and their last reading.
struct Member {
    sw: Box<dyn ThreadCounts>,
    hw: Option<Box<dyn ThreadCounts>>,
    /// `None` until its first read.
    last: Option<Reading>,
}

impl Member {
    fn read(&mut self) -> Option<Reading> {
        read_groups(&mut self.sw, self.hw.as_mut())
    }
}

/// One reading of a thread's software group and, where it has one, its hardware group (left
/// out of the reading when its read fails).
fn read_groups(
    sw: &mut Box<dyn ThreadCounts>,
    hw: Option<&mut Box<dyn ThreadCounts>>,
) -> Option<Reading> {
    let r = sw.read().ok()?;
    let mut out = Reading::default();
    out.add_group(sw.names(), &r);
    if let Some(h) = hw {
        if let Ok(hr) = h.read() {
            out.add_group(h.names(), &hr);
        }
    }
    Some(out)
}

/// Where one thread's counters come from.
enum ThreadSource {
    /// perf_event groups: software always, hardware where the probe opened any.
    Perf {
        sw: Box<dyn ThreadCounts>,
        hw: Option<Box<dyn ThreadCounts>>,
    },
    /// `/proc/PID/task/TID/schedstat`, kept open.
    Schedstat(std::fs::File),
    /// `/proc` files read each time (detailed mode, or no descriptor to keep).
    Proc,
}

/// A cumulative count with its group's enabled/running time (both 0 for exact `/proc` values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cumulative {
    count: u64,
    enabled_ns: u64,
    running_ns: u64,
}

impl Cumulative {
    /// The per-process value over an interval of `interval_ns`: exact unless some group ran for
    /// less than it was enabled, in which case the counted fraction is carried over to the
    /// interval so `scaled()` extrapolates the count.
    fn value(&self, interval_ns: u64) -> CounterValue {
        if self.enabled_ns == 0 || self.running_ns >= self.enabled_ns {
            return CounterValue::exact(self.count, interval_ns);
        }
        let frac = self.running_ns as f64 / self.enabled_ns as f64;
        CounterValue {
            raw: self.count,
            time_enabled_ns: interval_ns,
            time_running_ns: (interval_ns as f64 * frac) as u64,
        }
    }
}

/// The events a thread reading can hold, each in a fixed slot (so a reading is a small `Copy`
/// value: the agent keeps one per watched thread and replaces it every interval).
const SLOTS: [&str; 8] = [
    event::TASK_CLOCK,
    event::CONTEXT_SWITCHES,
    event::CPU_MIGRATIONS,
    event::CYCLES,
    event::INSTRUCTIONS,
    event::CACHE_MISSES,
    event::MEM_TRANSACTIONS,
    event::FP_OPS,
];

fn slot(name: &str) -> Option<usize> {
    SLOTS.iter().position(|s| *s == name)
}

/// How many control pages the thread gate may map. Each is a page of the user's locked perf
/// memory: root (`CAP_IPC_LOCK`, which lifts the limit) maps one per thread; another user at
/// most half of its `perf_event_mlock_kb` allowance over the online CPUs, so `perf record` keeps
/// the rest. None when that allowance cannot be read.
fn control_page_budget() -> usize {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return usize::MAX;
    }
    let Some(kb) = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
    else {
        return 0;
    };
    // SAFETY: sysconf has no preconditions.
    let page_kb = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .map_or(4, |b| (b / 1024).max(1));
    // SAFETY: as above.
    let cpus = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(1);
    kb / page_kb * cpus.max(1) / 2
}

/// A thread's last reading, and the gate's mark: `Some(seq)` when that read found it idle and
/// its control page's sequence, taken just before the read, was `seq` (see `read_process`).
struct Prev {
    reading: Reading,
    idle_seq: Option<u32>,
}

/// One thread's cumulative counters, by slot (`None`: not counted for this thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Reading([Option<Cumulative>; SLOTS.len()]);

impl Reading {
    fn set(&mut self, name: &str, c: Cumulative) {
        if let Some(i) = slot(name) {
            self.0[i] = Some(c);
        }
    }

    fn add_group(&mut self, names: &[&'static str], r: &perf::GroupReading) {
        for (name, count) in names.iter().zip(&r.values[..r.len]) {
            self.set(
                name,
                Cumulative {
                    count: *count,
                    enabled_ns: r.time_enabled_ns,
                    running_ns: r.time_running_ns,
                },
            );
        }
    }

    #[cfg(test)]
    fn of(pairs: &[(&str, Cumulative)]) -> Self {
        let mut r = Self::default();
        for (n, c) in pairs {
            r.set(n, *c);
        }
        r
    }
}

fn times_reading(t: ThreadTimes) -> Reading {
    let exact = |count| Cumulative {
        count,
        ..Default::default()
    };
    let mut r = Reading::default();
    r.set(event::TASK_CLOCK, exact(t.runtime_ns));
    r.set(event::CONTEXT_SWITCHES, exact(t.switches));
    if let Some(m) = t.migrations {
        r.set(event::CPU_MIGRATIONS, exact(m));
    }
    r
}

/// One process's counter deltas summed over its threads.
#[derive(Clone, Default)]
struct ProcessSums {
    /// Per slot: the summed deltas and how many threads contributed to them.
    acc: [(Cumulative, usize); SLOTS.len()],
    /// Threads that contributed deltas.
    threads: usize,
    /// Threads listed whose read failed this interval (their source broke or went away while
    /// the thread lives on): the sums lack them, so no event is complete.
    missed: usize,
    /// Threads first seen (or reopened on a new source) this interval: they contribute from
    /// the next interval on.
    fresh: usize,
    /// A family's read failed and every group kept its last reading: the next read's deltas
    /// start where this one would have, and so must its interval.
    held: bool,
    /// Slots a contributing thread had in only one of its two readings.
    lacking: [bool; SLOTS.len()],
}

impl ProcessSums {
    /// Add one thread's deltas `now - prev`.
    fn add(&mut self, prev: &Reading, now: &Reading) {
        self.threads += 1;
        for i in 0..SLOTS.len() {
            match (prev.0[i], now.0[i]) {
                (Some(p), Some(c)) => {
                    let (a, k) = &mut self.acc[i];
                    a.count += c.count.saturating_sub(p.count);
                    a.enabled_ns += c.enabled_ns.saturating_sub(p.enabled_ns);
                    a.running_ns += c.running_ns.saturating_sub(p.running_ns);
                    *k += 1;
                }
                (None, None) => {}
                _ => self.lacking[i] = true,
            }
        }
    }

    /// Events every contributing thread counted, as values over the interval: an event some
    /// thread did not count is left out rather than reported as a partial sum.
    fn values(&self, interval_ns: u64) -> Vec<(&'static str, CounterValue)> {
        (0..SLOTS.len())
            .filter(|&i| {
                let k = self.acc[i].1;
                // A thread that failed to read is in no sum: none is complete.
                k > 0 && k == self.threads && !self.lacking[i] && self.missed == 0
            })
            .map(|i| (SLOTS[i], self.acc[i].0.value(interval_ns)))
            .collect()
    }

    /// Whether `name` is known to be incomplete (so not even a zero may be reported for it).
    fn incomplete(&self, name: &str) -> bool {
        slot(name).is_some_and(|i| {
            let k = self.acc[i].1;
            self.lacking[i] || (k > 0 && k != self.threads) || self.missed > 0
        })
    }

    /// Whether a process with no deltas this interval may be reported as having done nothing:
    /// only when no thread failed to read and not every thread is new. A process whose threads
    /// were all just (re)opened was not watched over the interval; a zero would be a false,
    /// fully counted reading (`top` showed a busy task at 0.0 % CPU, counted 100 %, for two
    /// intervals after its broker stopped; CLI probe, session 23).
    fn known_zero(&self) -> bool {
        self.missed == 0 && (self.threads > 0 || self.fresh == 0)
    }
}

/// Per-CPU (busy, total) jiffies from the text of `/proc/stat`.
fn parse_proc_stat_cpus(text: &str) -> BTreeMap<CpuId, (u64, u64)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(id) = name
            .strip_prefix("cpu")
            .and_then(|s| s.parse::<CpuId>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        out.insert(id, (total.saturating_sub(idle), total));
    }
    out
}

impl Machine for Host {
    type Error = HostError;

    fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Every process a `pid:` spec listed has exited (or its pid now names another process):
    /// nothing is left to watch, and none can come back.
    fn finished(&self) -> bool {
        self.listed.as_ref().is_some_and(|listed| {
            listed.iter().all(|&(pid, start)| {
                self.proc_
                    .stat(pid)
                    .map_or(true, |st| is_exited(&st) || st.starttime_ticks != start)
            })
        })
    }

    fn tasks(&self) -> Vec<TaskInfo> {
        self.target_pids()
            .into_iter()
            .filter_map(|pid| {
                let st = self.proc_.stat(pid)?;
                Some(TaskInfo {
                    id: TaskId(pid as u64),
                    name: st.comm,
                    affinity: self.process_affinity(pid)?,
                    last_cpu: st.processor,
                    threads: self.proc_.threads(pid).len() as u32,
                })
            })
            .collect()
    }

    fn advance(&mut self, interval_ns: u64) -> Result<Observation, HostError> {
        let begin = Instant::now();
        let want = Duration::from_nanos(interval_ns);
        while begin.elapsed() < want {
            if self.stop.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
                break;
            }
            // With code heatmaps on, the sample buffers are drained every 100 ms at least so
            // they do not fill.
            let slice = match self.code {
                Some(_) => self.wait_slice.min(Duration::from_millis(100)),
                None => self.wait_slice,
            };
            sleep_interruptible(want.saturating_sub(begin.elapsed()).min(slice));
            if let Some(c) = &mut self.code {
                c.drain();
            }
        }
        self.intervals += 1;
        let read_at = Instant::now();
        let elapsed_ns = read_at.duration_since(self.prev_read).as_nanos() as u64;
        self.prev_read = read_at;
        let mut tasks = Vec::new();
        self.exited_pids = self.exits.take_exited();
        // Per process, the threads listed (for the code heatmaps, when on).
        let mut listed: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let (pids, mut stats) = self.targets_now();
        // A process found idle below keeps its old readings: they stand for a read at the
        // time its signature was taken (nothing had moved by then), not later.
        let signed_at = Instant::now();
        let sigs = self.signatures_now(&pids);
        // A broker answers every open group with one request here.
        self.counter_source.refresh();
        let refreshed_at = Instant::now();
        if !self.counter_source.is_direct() {
            if let Some(why) = self.counter_source.broken() {
                // The broker went away: every process is reopened on this process's own
                // groups, each from its read below.
                self.fall_back_to_direct(why);
            }
        }
        let direct = self.counter_source.is_direct();
        // Forget the processes no longer watched, and close their threads' counters.
        let watched: std::collections::BTreeSet<u32> = pids.iter().copied().collect();
        self.thread_lists.retain(|p, _| watched.contains(p));
        self.signatures.retain(|p, _| watched.contains(p));
        self.idle_last.retain(|p, _| watched.contains(p));
        self.idle_sums.retain(|p, _| watched.contains(p));
        self.read_times.retain(|p, _| watched.contains(p));
        // A family's groups close with it.
        self.families.retain(|p, _| watched.contains(p));
        self.per_thread.retain(|p, _| watched.contains(p));
        self.starts.retain(|p, _| watched.contains(p));
        let unwatched: Vec<u32> = self
            .read_tids
            .keys()
            .filter(|p| !watched.contains(p))
            .copied()
            .collect();
        for p in unwatched {
            for tid in self.read_tids.remove(&p).unwrap_or_default() {
                self.close_thread(tid);
            }
        }
        for pid in pids {
            let Some(st) = stats.remove(&pid) else {
                continue;
            };
            // A reused pid: the old process's groups are closed before anything is read.
            self.check_start(pid, st.starttime_ticks);
            let Some(aff) = self.process_affinity(pid) else {
                continue;
            };
            let runnable = st.state == 'R';
            let tids = self.threads_of(pid, st.num_threads);
            if let Some(c) = &mut self.code {
                for &t in &tids {
                    c.watch(t);
                }
                listed.insert(pid, tids.clone());
            }
            // The deltas below cover the time since this process's last read: now (its
            // threads are read next), the broker's one request, or, for a process found idle
            // whose read is skipped, the moment its signature showed nothing had moved (CPU
            // time it takes after that is in its next delta, which must start no later).
            // Still a lower bound of the true window: a pause between this clock and a
            // thread's read shortens it.
            let still = self.kept_still(pid, &tids, sigs.get(&pid).copied());
            let read_now = match (still, direct) {
                (true, _) => signed_at,
                (false, true) => Instant::now(),
                (false, false) => refreshed_at,
            };
            let last_read = self.read_times.insert(pid, read_now);
            let since_ns = last_read
                .map_or(elapsed_ns, |prev| {
                    read_now.saturating_duration_since(prev).as_nanos() as u64
                })
                .max(1);
            let sums = if still {
                // No thread ran: every counter is where the last read left it.
                // One reading per group: a family's originals, or each listed thread.
                let groups = self
                    .families
                    .get(&pid)
                    .map_or(tids.len(), |f| f.members.len());
                self.reads_skipped += groups as u64;
                self.idle_sums.get(&pid).cloned().unwrap_or_default()
            } else {
                self.read_process(pid, tids)
            };
            if let (true, Some(prev)) = (sums.held, last_read) {
                // The read failed and its readings were kept: so is its start, so that the
                // next sample's interval covers its deltas (see `read_family`).
                self.read_times.insert(pid, prev);
            }
            let mut sample = Sample::new(Some(TaskId(pid as u64)), since_ns);
            // CPU time and switches are always known (zero for a process without deltas yet).
            for name in [event::TASK_CLOCK, event::CONTEXT_SWITCHES] {
                if !sums.incomplete(name) && sums.known_zero() {
                    sample.set(name, CounterValue::exact(0, since_ns));
                }
            }
            for (name, v) in sums.values(since_ns) {
                sample.set(name, v);
            }
            tasks.push(TaskObservation {
                id: TaskId(pid as u64),
                name: st.comm,
                affinity: aff,
                cpu: st.processor,
                sample,
                runnable,
                finished: false,
                code: None,
            });
        }
        if let Some(c) = &mut self.code {
            let mut codes = c.take(&listed);
            for t in &mut tasks {
                t.code = codes.remove(&(t.id.0 as u32));
            }
        }
        let cpu_now = self.read_proc_stat_cpus();
        let cpus = self
            .online
            .iter()
            .map(|c| {
                let busy = match (cpu_now.get(&c), self.prev_cpu.get(&c)) {
                    (Some(a), Some(b)) if a.1 > b.1 => {
                        (a.0.saturating_sub(b.0)) as f64 / (a.1 - b.1) as f64
                    }
                    _ => 0.0,
                };
                CpuObservation {
                    cpu: c,
                    running: None,
                    busy_fraction: busy.clamp(0.0, 1.0),
                    sample: Sample::new(None, elapsed_ns),
                }
            })
            .collect();
        self.prev_cpu = cpu_now;
        Ok(Observation {
            time_ns: self.started.elapsed().as_nanos() as u64,
            interval_ns: elapsed_ns,
            tasks,
            cpus,
            memory_utilization: Vec::new(),
        })
    }

    fn apply(&mut self, action: &Action) -> Result<(), HostError> {
        // A task id beyond a pid is a policy's bug: truncated, it would name another process.
        let pid = |t: &TaskId| u32::try_from(t.0).map_err(|_| HostError::NotAPid(t.0));
        match action {
            Action::SetAffinity { task, cpus } => {
                self.set_process_affinity(pid(task)?, cpus)?;
            }
            Action::SetThreadAffinity { task, tid, cpus } => {
                self.set_thread_affinity(pid(task)?, *tid, cpus)?;
            }
            Action::Swap { a, b } => {
                let (pa, pb) = (pid(a)?, pid(b)?);
                let (Some(sa), Some(sb)) = (self.process_affinity(pa), self.process_affinity(pb))
                else {
                    return Ok(()); // one of them exited: nothing to swap
                };
                self.set_process_affinity(pa, &sb)?;
                self.set_process_affinity(pb, &sa)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod counting_tests {
    use super::*;

    fn c(count: u64, enabled_ns: u64, running_ns: u64) -> Cumulative {
        Cumulative {
            count,
            enabled_ns,
            running_ns,
        }
    }

    #[test]
    fn multiplexed_sums_carry_their_counted_fraction() {
        let mut sums = ProcessSums::default();
        // Two threads of one process; the hardware group ran half the time it was enabled.
        let prev1 = Reading::of(&[
            (event::TASK_CLOCK, c(100, 0, 0)),
            (event::CYCLES, c(1_000, 10, 5)),
        ]);
        let now1 = Reading::of(&[
            (event::TASK_CLOCK, c(600, 0, 0)),
            (event::CYCLES, c(3_000, 110, 55)),
        ]);
        let prev2 = Reading::of(&[(event::TASK_CLOCK, c(0, 0, 0)), (event::CYCLES, c(0, 0, 0))]);
        let now2 = Reading::of(&[
            (event::TASK_CLOCK, c(500, 0, 0)),
            (event::CYCLES, c(1_000, 100, 50)),
        ]);
        sums.add(&prev1, &now1);
        sums.add(&prev2, &now2);
        let v: BTreeMap<_, _> = sums.values(1_000).into_iter().collect();
        assert_eq!(v[event::TASK_CLOCK], CounterValue::exact(1_000, 1_000));
        let cycles = v[event::CYCLES];
        assert_eq!(cycles.raw, 3_000);
        assert!((cycles.counted_fraction() - 0.5).abs() < 1e-9);
        assert_eq!(cycles.scaled(), Some(6_000.0));
    }

    #[test]
    fn a_process_not_watched_over_the_interval_has_no_zero() {
        // Nothing contributed: a known zero only when no thread failed and not all are new.
        let quiet = ProcessSums::default();
        assert!(quiet.known_zero());
        let reopened = ProcessSums {
            fresh: 1,
            ..Default::default()
        };
        assert!(!reopened.known_zero());
        // A thread that failed to read leaves every event incomplete, even with others summed.
        let mut broken = ProcessSums::default();
        let r = Reading::of(&[(event::TASK_CLOCK, c(5, 0, 0))]);
        broken.add(&r, &r);
        broken.missed = 1;
        assert!(broken.incomplete(event::TASK_CLOCK));
        assert!(!broken.known_zero());
        // Nor are the other threads' sums reported as the process's.
        assert!(broken.values(10).is_empty());
        // One new thread beside one that was read: the old one's deltas stand.
        let mut growing = ProcessSums {
            fresh: 1,
            ..Default::default()
        };
        growing.add(&r, &r);
        assert!(growing.known_zero());
        assert!(!growing.incomplete(event::TASK_CLOCK));
    }

    #[test]
    fn an_event_missing_on_one_thread_is_left_out() {
        let with = Reading::of(&[
            (event::TASK_CLOCK, c(1, 0, 0)),
            (event::CPU_MIGRATIONS, c(1, 0, 0)),
        ]);
        let without = Reading::of(&[(event::TASK_CLOCK, c(5, 0, 0))]);
        // One thread on perf (migrations), one on /proc schedstat (none).
        let mut sums = ProcessSums::default();
        sums.add(&with, &with);
        sums.add(&without, &without);
        let names: Vec<_> = sums.values(10).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, [event::TASK_CLOCK]);
        assert!(sums.incomplete(event::CPU_MIGRATIONS));
        assert!(!sums.incomplete(event::TASK_CLOCK));
        // A source change between readings (migrations before, not now) also drops it.
        let mut sums = ProcessSums::default();
        sums.add(&with, &without);
        assert!(sums.incomplete(event::CPU_MIGRATIONS));
        assert!(sums
            .values(10)
            .iter()
            .all(|(n, _)| *n != event::CPU_MIGRATIONS));
    }
}

#[cfg(test)]
mod thread_list_tests {
    use super::*;

    #[test]
    fn a_pid_spec_host_finishes_when_its_processes_have_exited() {
        let mut a = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let mut b = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let h = Host::new(TargetSpec::Pids(vec![a.id(), b.id()]), None).expect("host");
        assert!(!h.finished());
        // One left: not finished. A zombie (killed, not reaped) counts as exited.
        a.kill().expect("kill");
        a.wait().expect("reap");
        assert!(!h.finished());
        b.kill().expect("kill");
        while !std::fs::read_to_string(format!("/proc/{}/stat", b.id()))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(h.finished());
        b.wait().expect("reap");
        assert!(h.finished());
        // Other specs never finish by themselves (members may appear).
        let all = Host::new(
            TargetSpec::Comm(regex::Regex::new("^no-such-comm$").expect("re")),
            None,
        )
        .expect("host");
        assert!(!all.finished());
    }

    #[test]
    fn thread_lists_are_reread_when_the_count_changes_or_they_are_old() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        h.advance(10_000_000).expect("advance");
        assert_eq!(h.thread_lists.get(&pid), Some(&(vec![pid], 1)));
        // A stale list (a thread 999999 that is not there) is kept while the count matches...
        h.thread_lists.insert(pid, (vec![pid, 999_999], 1));
        assert_eq!(h.threads_of(pid, 2), vec![pid, 999_999]);
        // ...re-read when the count changes...
        assert_eq!(h.threads_of(pid, 1), vec![pid]);
        // ...and when it is RELIST_INTERVALS old.
        h.thread_lists.insert(pid, (vec![pid, 999_999], 1));
        h.intervals = 1 + RELIST_INTERVALS;
        assert_eq!(h.threads_of(pid, 2), vec![pid]);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// A thread replaced by another at an unchanged thread count: the exit watch has the
    /// process re-listed at the next interval, so the newcomer is counted at once instead of
    /// after RELIST_INTERVALS.
    #[test]
    fn a_thread_replaced_at_the_same_count_is_listed_at_the_next_interval() {
        use std::io::{BufRead, Write};
        let script = r#"
import threading, sys
def start():
    e = threading.Event()
    t = threading.Thread(target=e.wait, daemon=True)
    t.start()
    return t, e
cur = start()
print(cur[0].native_id, flush=True)
for line in sys.stdin:
    new = start()
    cur[1].set()
    cur[0].join()
    cur = new
    print(new[0].native_id, flush=True)
"#;
        /// Kills the child however the test ends (a failed assertion included).
        struct Killed(std::process::Child);
        impl Drop for Killed {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let Ok(child) = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("SKIPPED a_thread_replaced_at_the_same_count_is_listed_at_the_next_interval: no python3");
            return;
        };
        let mut child = Killed(child);
        let pid = child.0.id();
        let mut out = std::io::BufReader::new(child.0.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("first tid");
        let first: u32 = line.trim().parse().expect("tid");
        let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        h.advance(10_000_000).expect("advance");
        if let Some(why) = h.exits.off_reason() {
            eprintln!(
                "SKIPPED a_thread_replaced_at_the_same_count_is_listed_at_the_next_interval: {why}"
            );
            return;
        }
        let listed = h
            .thread_lists
            .get(&pid)
            .map(|(t, _)| t.clone())
            .unwrap_or_default();
        assert!(listed.contains(&first), "{listed:?} lacks {first}");
        let n = listed.len();
        writeln!(child.0.stdin.as_mut().expect("stdin")).expect("swap");
        line.clear();
        out.read_line(&mut line).expect("second tid");
        let second: u32 = line.trim().parse().expect("tid");
        // The old thread has been joined; wait (bounded) until the kernel has let it go.
        let gone = (0..10_000).any(|_| {
            if !std::path::Path::new(&format!("/proc/{pid}/task/{first}")).exists() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
            false
        });
        assert!(gone, "thread {first} never ended");
        h.advance(10_000_000).expect("advance");
        let listed = h
            .thread_lists
            .get(&pid)
            .map(|(t, _)| t.clone())
            .unwrap_or_default();
        assert_eq!(listed.len(), n, "the count is unchanged: {listed:?}");
        assert!(
            listed.contains(&second),
            "{listed:?} lacks the newcomer {second}"
        );
        assert!(!listed.contains(&first), "{listed:?} still has {first}");
        assert!(h.intervals < RELIST_INTERVALS);
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;
    use crate::perf::{GroupReading, PerfError, MAX_GROUP};
    use std::sync::{Arc, Mutex};

    /// A fake group's reading: `count` in each of its `len` events.
    fn same_count(len: usize, count: u64, enabled_ns: u64, running_ns: u64) -> GroupReading {
        let mut values = [0; MAX_GROUP];
        for v in values.iter_mut().take(len) {
            *v = count;
        }
        GroupReading {
            values,
            len,
            time_enabled_ns: enabled_ns,
            time_running_ns: running_ns,
        }
    }

    /// A source that counts a fixed amount per read, and records what it was asked to open.
    struct Fake {
        opened: Arc<Mutex<Vec<u32>>>,
        refreshes: Arc<Mutex<u32>>,
    }

    struct FakeGroup {
        names: Vec<&'static str>,
        reads: u64,
    }

    impl ThreadCounts for FakeGroup {
        fn names(&self) -> &[&'static str] {
            &self.names
        }
        fn read(&mut self) -> Result<GroupReading, PerfError> {
            self.reads += 1;
            Ok(same_count(
                self.names.len(),
                1_000 * self.reads,
                10 * self.reads,
                5 * self.reads,
            ))
        }
    }

    impl CounterSource for Fake {
        fn describe(&self) -> String {
            "fake".into()
        }
        fn is_direct(&self) -> bool {
            false
        }
        fn open(
            &mut self,
            tid: u32,
            events: &[(&'static str, PerfEvent)],
        ) -> Result<Box<dyn ThreadCounts>, PerfError> {
            self.opened.lock().unwrap().push(tid);
            Ok(Box::new(FakeGroup {
                names: events.iter().map(|(n, _)| *n).collect(),
                reads: 0,
            }))
        }
        fn refresh(&mut self) {
            *self.refreshes.lock().unwrap() += 1;
        }
    }

    /// Whether `pid` shows `state` in its `stat` within a minute.
    fn reaches_state(pid: u32, state: char) -> bool {
        (0..12_000).any(|_| {
            if Proc::default().stat(pid).is_some_and(|s| s.state == state) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
            false
        })
    }

    /// A stopped child: it cannot run, so `sleep` and its readings stay where they are.
    fn stopped_child() -> std::process::Child {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        // SAFETY: kill on our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        assert!(reaches_state(pid, 'T'), "child never stopped");
        child
    }

    fn switches_of(h: &mut Host, pid: u32) -> u64 {
        let obs = h.advance(1_000_000).expect("advance");
        let t = obs.tasks.iter().find(|t| t.id.0 == pid as u64).cloned();
        t.expect("task").sample.values[event::CONTEXT_SWITCHES].raw
    }

    /// A stopped child counted by this process (perf_event or /proc, whichever works): the
    /// first interval reads it and finds nothing moved; from the second on the idle gate takes
    /// its reading over instead of reading it. With the gate off it is read again. Skipped with
    /// the reason where the kernel refuses taskstats.
    #[test]
    fn a_process_that_did_not_run_is_not_read_again() {
        let mut child = stopped_child();
        let pid = child.id();
        let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        assert_eq!(switches_of(&mut h, pid), 0);
        if let Some(why) = h.counter_sources().idle_gate_off {
            eprintln!("SKIPPED a_process_that_did_not_run_is_not_read_again: idle gate off: {why}");
            assert_eq!(h.reads_skipped(), 0);
        } else {
            assert_eq!(h.reads_skipped(), 0, "gated before a read found it idle");
            assert_eq!(switches_of(&mut h, pid), 0);
            assert_eq!(h.reads_skipped(), 1, "a stopped process was read again");
            assert_eq!(switches_of(&mut h, pid), 0);
            assert_eq!(h.reads_skipped(), 2);
            h.set_idle_gate(false);
            assert!(h.counter_sources().idle_gate_off.is_some());
            assert_eq!(switches_of(&mut h, pid), 0);
            assert_eq!(h.reads_skipped(), 2);
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// What a [`Paged`] source's one thread shows: its cumulative count and its control
    /// page's sequence, set by the test; and how often it was read.
    #[derive(Default)]
    struct PageState {
        count: u64,
        seq: u32,
        reads: u64,
    }

    /// A source with a control page the test writes.
    struct Paged(Arc<Mutex<PageState>>);

    struct PagedGroup {
        names: Vec<&'static str>,
        st: Arc<Mutex<PageState>>,
        mapped: bool,
    }

    impl ThreadCounts for PagedGroup {
        fn names(&self) -> &[&'static str] {
            &self.names
        }
        fn read(&mut self) -> Result<GroupReading, PerfError> {
            let mut st = self.st.lock().unwrap();
            st.reads += 1;
            Ok(same_count(self.names.len(), st.count, st.count, st.count))
        }
        fn sched_seq(&self) -> Option<u32> {
            self.mapped.then(|| self.st.lock().unwrap().seq)
        }
        fn map_control_page(&mut self) -> bool {
            self.mapped = true;
            true
        }
    }

    impl CounterSource for Paged {
        fn describe(&self) -> String {
            "paged".into()
        }
        fn is_direct(&self) -> bool {
            false
        }
        fn open(
            &mut self,
            _tid: u32,
            events: &[(&'static str, PerfEvent)],
        ) -> Result<Box<dyn ThreadCounts>, PerfError> {
            Ok(Box::new(PagedGroup {
                names: events.iter().map(|(n, _)| *n).collect(),
                st: Arc::clone(&self.0),
                mapped: false,
            }))
        }
    }

    /// The thread gate, with the process gate off so every interval reaches the threads: a
    /// thread its last read found idle is not read again while its control page's sequence
    /// stays put; a new sequence, one caught mid-update (odd), or a read that moved, makes it
    /// read again; the count it then shows is the whole delta. Without a page budget, or
    /// with the gates off, every interval reads it.
    #[test]
    fn a_thread_whose_control_page_did_not_move_is_not_read_again() {
        let mut child = stopped_child();
        let pid = child.id();
        let run = |budget: usize, gate: bool| {
            let st = Arc::new(Mutex::new(PageState {
                count: 100,
                seq: 2,
                reads: 0,
            }));
            let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
            h.control_page_budget = budget;
            h.set_counter_source(Box::new(Paged(Arc::clone(&st))));
            if !gate {
                h.set_idle_gate(false);
            }
            h.idle_gate = None;
            let mut step = |count: u64, seq: u32| {
                {
                    let mut s = st.lock().unwrap();
                    s.count = count;
                    s.seq = seq;
                }
                let obs = h.advance(1_000_000).expect("advance");
                let t = obs
                    .tasks
                    .iter()
                    .find(|t| t.id.0 == pid as u64)
                    .expect("task");
                let switches = t.sample.values[event::CONTEXT_SWITCHES].raw;
                (switches, st.lock().unwrap().reads)
            };
            let mut out = vec![
                step(100, 2), // read: unchanged since the snapshot, so idle, marked at seq 2
                step(100, 2), // page unchanged: not read
                step(100, 4), // switched: read, still idle, marked at 4
                step(100, 4), // not read
                step(107, 6), // switched and ran: read, delta 7
                step(109, 6), // the last read moved: read again, delta 2
                step(109, 6), // read (it was moving), idle now, marked at 6
                step(109, 7), // odd: the kernel is mid-update: read
            ];
            out.push(step(109, 7)); // an odd mark never gates: read
            (out, h.counter_sources().control_pages, h.reads_skipped())
        };
        // The snapshot at set_counter_source is read 1.
        let (gated, pages, skipped) = run(usize::MAX, true);
        assert_eq!(pages, 1);
        assert_eq!(
            gated,
            vec![
                (0, 2),
                (0, 2),
                (0, 3),
                (0, 3),
                (7, 4),
                (2, 5),
                (0, 6),
                (0, 7),
                (0, 8)
            ]
        );
        assert_eq!(skipped, 2);
        let every = (0..9).map(|i| i + 2);
        for (budget, gate) in [(0, true), (usize::MAX, false)] {
            let (reads, pages, skipped) = run(budget, gate);
            assert_eq!(pages, usize::from(budget > 0), "budget {budget}");
            assert_eq!(skipped, 0, "budget {budget}, gate {gate}");
            let counts: Vec<u64> = reads.iter().map(|r| r.1).collect();
            assert_eq!(counts, every.clone().collect::<Vec<_>>(), "budget {budget}");
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The thread gate on this kernel's control pages: a stopped thread is not read again
    /// once a read found it idle; continued, it is switched in, its page moves, and the next
    /// interval reads it. Skipped with the reason where perf_event or the page is refused.
    #[test]
    fn a_stopped_thread_is_gated_by_its_real_control_page_until_it_runs() {
        let mut child = stopped_child();
        let pid = child.id();
        let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        // Per-thread groups: a family's inherited groups have no control page.
        h.count_thread_by_thread();
        h.idle_gate = None;
        let src = h.counter_sources();
        if src.perf_threads == 0 || src.control_pages == 0 {
            eprintln!(
                "SKIPPED a_stopped_thread_is_gated_by_its_real_control_page_until_it_runs: perf threads {}, control pages {} ({:?})",
                src.perf_threads, src.control_pages, src.perf_off_reason
            );
        } else {
            switches_of(&mut h, pid); // read: nothing moved since the snapshot
            assert_eq!(h.reads_skipped(), 0);
            switches_of(&mut h, pid);
            assert_eq!(h.reads_skipped(), 1, "a stopped thread was read again");
            // SAFETY: kill on our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
            assert!(reaches_state(pid, 'S'), "child never continued");
            assert!(
                switches_of(&mut h, pid) >= 1,
                "it was switched in to continue"
            );
            assert_eq!(h.reads_skipped(), 1, "a thread that ran was gated");
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// A source whose every read counts more (as a thread that keeps running where the
    /// scheduler's clock lags would): its process is never gated, although the kernel's
    /// signature of the stopped child stays put, because no read ever finds it idle.
    #[test]
    fn a_process_whose_last_read_moved_is_read_again() {
        let mut child = stopped_child();
        let pid = child.id();
        let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        h.set_counter_source(Box::new(Fake {
            opened: Arc::new(Mutex::new(Vec::new())),
            refreshes: Arc::new(Mutex::new(0)),
        }));
        for _ in 0..3 {
            assert_eq!(switches_of(&mut h, pid), 1_000);
        }
        assert_eq!(h.reads_skipped(), 0);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn every_thread_is_read_through_the_source_given() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        // Whatever the direct probe found (perf_event or /proc), the source takes every thread.
        let opened = Arc::new(Mutex::new(Vec::new()));
        let refreshes = Arc::new(Mutex::new(0));
        h.set_counter_source(Box::new(Fake {
            opened: opened.clone(),
            refreshes: refreshes.clone(),
        }));
        assert_eq!(*opened.lock().unwrap(), vec![pid]);
        let s = h.counter_sources();
        assert_eq!((s.via.as_str(), s.direct), ("fake", false));
        assert_eq!((s.perf_threads, s.proc_threads), (1, 0));
        let obs = h.advance(1_000_000).expect("advance");
        // One refresh per snapshot, one per interval.
        assert_eq!(*refreshes.lock().unwrap(), 2);
        let t = obs
            .tasks
            .iter()
            .find(|t| t.id.0 == pid as u64)
            .expect("task");
        // 1000 counted between the two reads, over half the enabled time: scaled to 2000.
        assert_eq!(t.sample.values[event::CONTEXT_SWITCHES].raw, 1_000);
        // The host states times over the measured interval in whole nanoseconds, so an odd
        // interval rounds the half: allow one nanosecond of it.
        let tol = 1.0 / t.sample.interval_ns.max(1) as f64;
        assert!(
            (t.sample.counted_fraction() - 0.5).abs() <= tol,
            "{:?}",
            t.sample
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    /// What an [`Inheriting`] source's groups show and do, set by the test.
    #[derive(Default)]
    struct FamState {
        /// Every group opened: (thread, inherited).
        opened: Vec<(u32, bool)>,
        /// The cumulative count (and enabled/running ns) every group reads.
        count: u64,
        /// Reads that fail from now on, each failing read taking one.
        failing_reads: usize,
        /// Inherited opens refused from now on with these errors, one each.
        refused_opens: Vec<i32>,
    }

    /// A source whose groups can inherit to later threads (so processes get families), its
    /// counts and failures set by the test.
    struct Inheriting(Arc<Mutex<FamState>>);

    struct FamGroup {
        names: Vec<&'static str>,
        st: Arc<Mutex<FamState>>,
    }

    impl ThreadCounts for FamGroup {
        fn names(&self) -> &[&'static str] {
            &self.names
        }
        fn read(&mut self) -> Result<GroupReading, PerfError> {
            let mut st = self.st.lock().unwrap();
            if st.failing_reads > 0 {
                st.failing_reads -= 1;
                return Err(PerfError::Read {
                    tid: 0,
                    source: std::io::Error::other("failed for the test"),
                });
            }
            Ok(same_count(self.names.len(), st.count, st.count, st.count))
        }
    }

    impl Inheriting {
        fn group(
            &self,
            tid: u32,
            events: &[(&'static str, PerfEvent)],
            inherited: bool,
        ) -> Result<Box<dyn ThreadCounts>, PerfError> {
            let mut st = self.0.lock().unwrap();
            if inherited && !st.refused_opens.is_empty() {
                let errno = st.refused_opens.remove(0);
                return Err(PerfError::Open {
                    tid: tid as i32,
                    event: events[0].0.to_string(),
                    source: std::io::Error::from_raw_os_error(errno),
                });
            }
            st.opened.push((tid, inherited));
            Ok(Box::new(FamGroup {
                names: events.iter().map(|(n, _)| *n).collect(),
                st: Arc::clone(&self.0),
            }))
        }
    }

    impl CounterSource for Inheriting {
        fn describe(&self) -> String {
            "inheriting".into()
        }
        fn is_direct(&self) -> bool {
            false
        }
        fn open(
            &mut self,
            tid: u32,
            events: &[(&'static str, PerfEvent)],
        ) -> Result<Box<dyn ThreadCounts>, PerfError> {
            self.group(tid, events, false)
        }
        fn inherits(&self) -> Result<(), String> {
            Ok(())
        }
        fn open_inherited(
            &mut self,
            tid: u32,
            events: &[(&'static str, PerfEvent)],
        ) -> Result<Box<dyn ThreadCounts>, PerfError> {
            self.group(tid, events, true)
        }
    }

    /// A host on `pids` counting through an [`Inheriting`] source on `st`, every interval
    /// reading every group (no idle gate).
    fn inheriting_host(pids: Vec<u32>, st: &Arc<Mutex<FamState>>) -> Host {
        let mut h = Host::new(TargetSpec::Pids(pids), None).expect("host");
        h.idle_gate = None;
        h.set_counter_source(Box::new(Inheriting(Arc::clone(st))));
        h
    }

    /// One interval with the groups reading `count`: `pid`'s task-clock (`None`: not known
    /// over the interval) and its sample's interval.
    fn step(h: &mut Host, st: &Arc<Mutex<FamState>>, pid: u32, count: u64) -> (Option<u64>, u64) {
        st.lock().unwrap().count = count;
        let obs = h.advance(1_000_000).expect("advance");
        let t = obs
            .tasks
            .iter()
            .find(|t| t.id.0 == pid as u64)
            .expect("task");
        let v = t.sample.values.get(event::TASK_CLOCK).map(|v| v.raw);
        (v, t.sample.interval_ns)
    }

    /// A family whose read fails keeps its groups' last readings, and its process keeps the
    /// time of its last read: the next sample's deltas and its interval both start at the
    /// last read that succeeded. (The interval used to restart at the failed read while the
    /// deltas covered both intervals: up to twice the CPU time there was.) A family that keeps
    /// failing is opened again.
    #[test]
    fn a_failed_family_read_keeps_its_interval_with_its_deltas() {
        let mut child = stopped_child();
        let pid = child.id();
        let st = Arc::new(Mutex::new(FamState {
            count: 100,
            ..Default::default()
        }));
        let mut h = inheriting_host(vec![pid], &st);
        assert_eq!(h.counter_sources().inherited_processes, 1);
        assert_eq!(step(&mut h, &st, pid, 150).0, Some(50));
        let read1 = h.read_times[&pid];
        st.lock().unwrap().failing_reads = 1;
        assert_eq!(step(&mut h, &st, pid, 250).0, None, "a failed read counted");
        assert_eq!(
            h.read_times[&pid], read1,
            "a failed read moved the interval's start"
        );
        let (n, interval) = step(&mut h, &st, pid, 300);
        assert_eq!(n, Some(150), "the deltas since the last good read");
        assert_eq!(
            u128::from(interval),
            (h.read_times[&pid] - read1).as_nanos(),
            "the interval since the last good read"
        );
        // Failing again and again: opened anew after FAMILY_READ_ATTEMPTS reads.
        st.lock().unwrap().failing_reads = FAMILY_READ_ATTEMPTS;
        for _ in 0..FAMILY_READ_ATTEMPTS {
            assert_eq!(step(&mut h, &st, pid, 400).0, None);
        }
        assert_eq!(st.lock().unwrap().opened, vec![(pid, true)]);
        assert_eq!(
            step(&mut h, &st, pid, 500).0,
            None,
            "a reopened family's first read"
        );
        assert_eq!(st.lock().unwrap().opened, vec![(pid, true), (pid, true)]);
        assert_eq!(step(&mut h, &st, pid, 520).0, Some(20));
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The text of a `stat` file for a process with start time `start` (clock ticks).
    fn stat_text(pid: u32, start: u64) -> String {
        let mut f = vec!["0".to_string(); 52];
        f[0] = pid.to_string();
        f[1] = "(reused)".into();
        f[2] = "S".into();
        f[3] = "1".into(); // ppid
        f[19] = "1".into(); // threads
        f[21] = start.to_string();
        f.join(" ") + "\n"
    }

    /// A pid that names another process than at its last read (its start time changed) is
    /// counted afresh, through a family or thread by thread: its old groups are closed and new
    /// ones opened, and its first interval reports nothing rather than the old process's
    /// groups' deltas (which, on the real dead task, never move again: the new process read
    /// 0 % CPU for ever). Through a procfs root whose `stat` the test rewrites, on a stopped
    /// child whose pid the kernel calls are made on.
    #[test]
    fn a_reused_pid_is_counted_afresh() {
        for per_thread in [false, true] {
            let mut child = stopped_child();
            let pid = child.id();
            let root = tempfile::tempdir().expect("tempdir");
            let dir = root.path().join(pid.to_string());
            std::fs::create_dir_all(dir.join("task").join(pid.to_string())).expect("task dir");
            std::fs::write(dir.join("stat"), stat_text(pid, 1000)).expect("stat");
            let st = Arc::new(Mutex::new(FamState {
                count: 100,
                ..Default::default()
            }));
            let mut h = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
            h.idle_gate = None;
            h.proc_ = Proc::new(root.path());
            h.set_counter_source(Box::new(Inheriting(Arc::clone(&st))));
            if per_thread {
                h.count_thread_by_thread();
            }
            st.lock().unwrap().opened.clear();
            assert_eq!(
                step(&mut h, &st, pid, 150).0,
                Some(50),
                "per thread {per_thread}"
            );
            // The same pid, another process.
            std::fs::write(dir.join("stat"), stat_text(pid, 2000)).expect("stat");
            assert_eq!(
                step(&mut h, &st, pid, 170).0,
                None,
                "per thread {per_thread}: the new process's first interval"
            );
            assert_eq!(
                st.lock().unwrap().opened,
                vec![(pid, !per_thread)],
                "per thread {per_thread}: its groups were opened anew"
            );
            assert_eq!(
                step(&mut h, &st, pid, 200).0,
                Some(30),
                "per thread {per_thread}"
            );
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A family refused for a reason that may pass (out of descriptors here; a broker's rate
    /// limit or its own trouble alike) leaves its process thread by thread only until the
    /// family is tried again, at a later interval; one refused for the task (EACCES) stays
    /// thread by thread, and the counters line says how many processes are counted which way.
    #[test]
    fn a_family_refused_for_a_passing_reason_is_tried_again() {
        let mut child = stopped_child();
        let pid = child.id();
        let st = Arc::new(Mutex::new(FamState {
            count: 100,
            refused_opens: vec![libc::EMFILE],
            ..Default::default()
        }));
        let mut h = inheriting_host(vec![pid], &st);
        let s = h.counter_sources();
        assert_eq!(
            (s.inherited_processes, s.per_thread_processes),
            (0, 1),
            "{s:?}"
        );
        let why = s.per_thread_reason.clone().unwrap_or_default();
        assert!(why.contains("tried again"), "{why}");
        assert!(
            s.thread_counting().starts_with("per thread"),
            "{}",
            s.thread_counting()
        );
        assert_eq!(st.lock().unwrap().opened, vec![(pid, false)]);
        // Read thread by thread this interval, then the family opens.
        assert_eq!(step(&mut h, &st, pid, 150).0, Some(50));
        let s = h.counter_sources();
        assert_eq!(
            (s.inherited_processes, s.per_thread_processes),
            (1, 0),
            "{s:?}"
        );
        assert_eq!(s.per_thread_reason, None);
        assert_eq!(st.lock().unwrap().opened, vec![(pid, false), (pid, true)]);
        // The family's baseline was taken when it opened.
        assert_eq!(step(&mut h, &st, pid, 180).0, Some(30));
        let _ = child.kill();
        let _ = child.wait();

        // Refused for the task: never tried again.
        let mut a = stopped_child();
        let mut b = stopped_child();
        let st = Arc::new(Mutex::new(FamState {
            count: 100,
            refused_opens: vec![libc::EACCES],
            ..Default::default()
        }));
        let mut h = inheriting_host(vec![a.id(), b.id()], &st);
        for count in [150, 200, 250, 300] {
            step(&mut h, &st, a.id(), count);
        }
        let s = h.counter_sources();
        assert_eq!(
            (s.inherited_processes, s.per_thread_processes),
            (1, 1),
            "{s:?}"
        );
        assert_eq!(
            st.lock().unwrap().opened.iter().filter(|o| o.1).count(),
            1,
            "a family refused for its task was tried again"
        );
        let text = s.thread_counting();
        assert!(
            text.contains("(1 process)")
                && text.contains("(1 process: ")
                && text.contains("os error 13"),
            "{text}"
        );
        for c in [&mut a, &mut b] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
