//! The broker: kernel counters (deduplicated), the scheduler in real time, the policy, the
//! journal, and the Unix-socket server (one thread per connection, one ticker thread).
//!
//! Counting follows the schedule: a kernel counter is enabled while at least one consumer that
//! uses it is scheduled, and disabled otherwise (so the slot budget is real on the PMU and
//! exercised for software events). Whenever the running set changes, and on every read, each
//! affected kernel counter is read once and the events counted since the previous read are
//! credited to every consumer that was running and uses it. A consumer's `raw` is therefore what
//! happened while it was scheduled, its `running_ns` the time it was scheduled, its
//! `enabled_ns` the time since it registered, and `scaled = raw * enabled / running`.

/// A line on stderr that never panics: `eprintln!` does when stderr is gone (the terminal of
/// a daemon stopped by SIGHUP), and a broker must not die of a warning.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use crate::access::{Access, AuditLog, AuditRecord, Peer, Policy, RateLimiter, Refusal};
use crate::journal::{Checkpoint, Journal, JournalError, Record, RegRecord};
use crate::proto::{
    self, CpuReading, EventCount, LineBuffer, Reading, RegistrationInfo, Request, Response,
};
use crate::sched::{Class, Demand, Scheduler, UnitId};
use crate::shm::SharedPage;
use crate::target::{self, Roots};
use counterpoint_counters::count::Status;
use counterpoint_counters::spec::{EventList, EventSpec, Group, Source};
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Server errors (start-up and fatal ones; per-request failures are responses).
#[derive(Debug, Error)]
pub enum ServerError {
    /// Socket set-up.
    #[error("socket {}: {what}: {error}", .path.display())]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        what: &'static str,
        /// The error.
        error: io::Error,
    },
    /// Another broker answers on the socket.
    #[error("socket {}: a broker is already running there", .0.display())]
    InUse(PathBuf),
    /// Something accepts connections on the socket but does not answer `hello` as a broker.
    #[error(
        "something is already listening on {} (not answering as a broker); left untouched: \
         stop it or choose another socket path",
        .0.display()
    )]
    Occupied(PathBuf),
    /// Journal.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Audit log.
    #[error("audit log {}: {error}", .path.display())]
    Audit {
        /// The log.
        path: PathBuf,
        /// The error.
        error: io::Error,
    },
    /// Metrics.
    #[error("metrics on {addr}: {message}")]
    Metrics {
        /// The address.
        addr: String,
        /// Why.
        message: String,
    },
}

/// Reads of one kernel counter closer than this are coalesced (see `sync_key`).
const COALESCE: Duration = Duration::from_millis(1);

/// Connections served at once, and per uid.
pub const MAX_CONNECTIONS: usize = 2048;
/// See [`MAX_CONNECTIONS`].
pub const MAX_CONNECTIONS_PER_UID: usize = 512;

/// Journal records between compactions.
const COMPACT_EVERY: u64 = 10_000;

/// One exported reading: (event, labels `cpu`/`consumer`/`target`, raw, enabled_ns, running_ns).
pub type MetricReading = (String, Vec<(String, String)>, u64, u64, u64);

/// Broker configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Counter slots per CPU.
    pub slots: usize,
    /// Scheduling slice.
    pub slice: Duration,
    /// The policy.
    pub policy: Policy,
    /// Journal file, if any.
    pub journal: Option<PathBuf>,
    /// Audit log (overrides the policy's), if any.
    pub audit: Option<PathBuf>,
    /// sysfs root for event names.
    pub sysfs_root: PathBuf,
    /// procfs/sysfs/cgroup roots for targets.
    pub roots: Roots,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            slots: 4,
            slice: Duration::from_millis(20),
            policy: Policy::default(),
            journal: None,
            audit: None,
            sysfs_root: "/sys".into(),
            roots: Roots::default(),
        }
    }
}

/// General-purpose counters per core from CPUID leaf 0xA (x86), if the CPU reports a PMU.
// `__cpuid` is safe from Rust 1.87 on and unsafe before; the workspace supports 1.80.
#[allow(unused_unsafe)]
pub fn pmu_slots() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: CPUID is available on every x86_64 CPU; leaf 0 gives the highest leaf.
        let max = unsafe { std::arch::x86_64::__cpuid(0) }.eax;
        if max >= 0xa {
            // SAFETY: as above, leaf 0xA exists (checked).
            let a = unsafe { std::arch::x86_64::__cpuid(0xa) }.eax;
            let version = a & 0xff;
            let gp = ((a >> 8) & 0xff) as usize;
            if version > 0 && gp > 0 {
                return Some(gp);
            }
        }
    }
    None
}

/// Socket path by default: `/run/counterpoint/broker.sock` for root,
/// `$XDG_RUNTIME_DIR/counterpoint/broker.sock` otherwise (`/tmp/counterpoint-UID/` without it).
pub fn default_socket() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/counterpoint/broker.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("counterpoint/broker.sock"),
        _ => PathBuf::from(format!("/tmp/counterpoint-{uid}/broker.sock")),
    }
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One kernel counter: an event on a target, opened once and shared.
struct Kernel {
    event: String,
    /// Canonical target; `cpus:N` for one CPU's counter of a per-CPU target.
    target: String,
    /// What it is shared by, with `event` (its key in `key_of`): the target's identity
    /// ([`target::Resolved::identity`]: a task's start time with its number).
    identity: String,
    /// The CPU, for a per-CPU counter.
    cpu: Option<usize>,
    set: CounterSet,
    enabled: bool,
    last_raw: u64,
    /// The counter's own running time at the last read (a task counter's: the task's time on
    /// a CPU while the counter was enabled; a CPU counter's: the enabled time).
    last_running_ns: u64,
    last_read: Option<Instant>,
    users: usize,
}

/// One event of a registration.
struct RegEvent {
    spec: EventSpec,
    /// The kernel counter, or why the event is not counted.
    key: Result<u64, String>,
    /// Counted during this broker's life while scheduled.
    raw_here: u64,
    /// The kernel counter's own running time credited in the same windows as `raw_here`.
    counted_here_ns: u64,
}

struct Reg {
    rec: RegRecord,
    /// Events per scheduling unit, unit-major: `events[u * nspec + j]` is event `j` on unit
    /// `u` (one unit for a task target, one per CPU for a per-CPU target).
    events: Vec<RegEvent>,
    /// Events in the registration's list.
    nspec: usize,
    /// The CPU of each unit of a per-CPU target (empty for a task target).
    unit_cpus: Vec<usize>,
    /// Counts restored from the journal (a previous broker's life).
    base: Checkpoint,
    /// Last values reported (never reported lower).
    last: Checkpoint,
    keys: BTreeSet<u64>,
    /// The target as resolved (`self` is `pid:N` of the registering process): what the
    /// metrics label a consumer's series with, since `self` tells a scraper nothing.
    resolved_target: String,
}

/// A journaled registration the broker refused when it restarted (the policy changed).
struct Revoked {
    uid: u32,
    rule: Option<String>,
    message: String,
}

struct State {
    sched: Scheduler,
    /// Registrations refused on restart, kept to tell their consumers why.
    revoked: BTreeMap<u64, Revoked>,
    /// The scheduler's task-set id of each task target, by its identity.
    task_sets: HashMap<String, u64>,
    kernel: BTreeMap<u64, Kernel>,
    key_of: HashMap<(String, String), u64>,
    regs: BTreeMap<u64, Reg>,
    journal: Option<Journal>,
    next_id: u64,
    next_key: u64,
    epoch: Instant,
    last_reap: Instant,
    cpus: Vec<usize>,
}

/// The broker's state and policy, shared by the connection threads.
pub struct Broker {
    state: Mutex<State>,
    policy: Policy,
    audit: AuditLog,
    tree: PmuTree,
    roots: Roots,
    slice: Duration,
    /// Wakes the ticker early when a registration or a grant may need slicing to start.
    kick: (Mutex<bool>, Condvar),
}

/// A request's failure as the client sees it.
#[derive(Debug)]
struct Failure {
    rule: Option<String>,
    message: String,
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Failure {
            rule: Some(r.rule.name().to_string()),
            message: r.to_string(),
        }
    }
}

fn fail(message: impl Into<String>) -> Failure {
    Failure {
        rule: None,
        message: message.into(),
    }
}

/// Whether an event is raw: `rNNNN`, or a PMU event given by terms (`cpu/event=0x3c/`).
fn is_raw(spec: &EventSpec) -> bool {
    match &spec.source {
        Source::Raw => true,
        Source::Pmu(_) => spec.name.contains('='),
        _ => false,
    }
}

impl Broker {
    /// A broker; restores registrations from the journal when there is one, each checked again
    /// against `cfg.policy` (a registration it no longer allows is refused, audited with the
    /// rule, and its consumer told why when it asks for it).
    pub fn new(cfg: Config) -> Result<Broker, ServerError> {
        let audit_path = cfg.audit.clone().or_else(|| cfg.policy.audit_log.clone());
        let audit = AuditLog::open(audit_path.as_deref()).map_err(|error| ServerError::Audit {
            path: audit_path.clone().unwrap_or_default(),
            error,
        })?;
        let cpus = target::online_cpus(&cfg.roots);
        let ncpus = cpus.iter().max().map_or(1, |m| m + 1);
        let mut state = State {
            sched: Scheduler::new(cfg.slots, ncpus, cfg.policy.reserved_system_share),
            kernel: BTreeMap::new(),
            key_of: HashMap::new(),
            regs: BTreeMap::new(),
            revoked: BTreeMap::new(),
            task_sets: HashMap::new(),
            journal: None,
            next_id: 1,
            next_key: 1,
            epoch: Instant::now(),
            last_reap: Instant::now(),
            cpus,
        };
        let broker_tree = PmuTree::new(&cfg.sysfs_root);
        let mut restored = Vec::new();
        let mut exclusive = None;
        if let Some(p) = &cfg.journal {
            let (j, st) = Journal::open(p)?;
            state.next_id = st.max_id + 1;
            state.journal = Some(j);
            restored = st.regs.into_values().collect::<Vec<_>>();
            if let Some((id, until)) = st.exclusive {
                let now = wall_ns();
                if until > now {
                    exclusive = Some((id, until - now));
                }
            }
        }
        let broker = Broker {
            state: Mutex::new(state),
            policy: cfg.policy,
            audit,
            tree: broker_tree,
            roots: cfg.roots,
            slice: cfg.slice,
            kick: (Mutex::new(false), Condvar::new()),
        };
        {
            let mut st = broker.lock();
            for (rec, cp) in restored {
                let peer = Peer {
                    uid: rec.uid,
                    gid: rec.gid,
                    pid: rec.pid,
                };
                // A registration whose process is gone, or that no longer opens, is dropped
                // (and journaled as such); the others continue from their checkpoint. A process
                // now holding the number with another start time is another process: the
                // consumer is gone (until session 30 the number alone was checked, and a new
                // process given a dead consumer's pid kept its registrations).
                let same_process = match rec.pid_start {
                    Some(s) => target::start_time(&broker.roots, rec.pid).ok() == Some(s),
                    None => broker.roots.proc_root.join(rec.pid.to_string()).exists(),
                };
                if !same_process {
                    broker.journal(&mut st, &Record::Unregister { id: rec.id });
                    continue;
                }
                // Restored registrations are checked against the policy in force now: one that
                // a tightened policy no longer allows is refused (audited with the rule) and
                // its consumer is told so when it comes back for it.
                if let Err(f) = broker.install(&mut st, &peer, rec.clone(), cp, true) {
                    say!(
                        "broker: dropping registration {} on restart: {}",
                        rec.id,
                        f.message
                    );
                    if let Some(rule) = &f.rule {
                        let what = format!(
                            "restore registration {}: register '{}' on {} share {} class {}",
                            rec.id, rec.events, rec.target, rec.share, rec.class
                        );
                        broker.audit(&peer, "refuse", Some(rule), &what);
                    }
                    st.revoked.insert(
                        rec.id,
                        Revoked {
                            uid: rec.uid,
                            rule: f.rule,
                            message: f.message,
                        },
                    );
                    broker.journal(&mut st, &Record::Unregister { id: rec.id });
                }
            }
            if let Some((id, left_ns)) = exclusive {
                // The grant keeps its wall-clock end across the restart.
                let _ = st.sched.grant_exclusive(id, left_ns);
            }
            broker.replan(&mut st);
        }
        Ok(broker)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking connection thread must not take the broker down with it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn journal(&self, st: &mut State, r: &Record) {
        self.journal_many(st, std::slice::from_ref(r));
    }

    /// Append records in one write (then compact now and then).
    fn journal_many(&self, st: &mut State, rs: &[Record]) {
        let Some(j) = st.journal.as_mut() else {
            return;
        };
        if let Err(e) = j.append_many(rs) {
            say!("broker: {e}");
        }
        if j.since_compaction() >= COMPACT_EVERY {
            // Every read appends a checkpoint: rewrite the live state now and then.
            let mut live = Vec::new();
            for reg in st.regs.values() {
                live.push(Record::Register(reg.rec.clone()));
                live.push(Record::Checkpoint {
                    id: reg.rec.id,
                    cp: reg.last.clone(),
                });
            }
            let now = st.sched.now_ns();
            if let Some((id, until)) = st.sched.exclusive() {
                live.push(Record::Exclusive {
                    id,
                    until_wall_ns: wall_ns() + until.saturating_sub(now),
                });
            }
            if let Some(j) = st.journal.as_mut() {
                if let Err(e) = j.compact(&live) {
                    say!("broker: {e}");
                }
            }
        }
    }

    fn audit(&self, peer: &Peer, action: &str, rule: Option<&str>, what: &str) {
        let rec = AuditRecord {
            time_ns: wall_ns(),
            action,
            uid: peer.uid,
            gid: peer.gid,
            pid: peer.pid,
            rule,
            what,
        };
        if let Err(e) = self.audit.record(&rec) {
            say!("broker: audit log: {e}");
        }
    }

    fn now_ns(st: &State) -> u64 {
        st.epoch.elapsed().as_nanos() as u64
    }

    /// Read kernel counter `key` and credit what it counted since its last read to the
    /// consumers in `running` that use it.
    /// Unless `force`d (every pull read, every change of the running set), a counter read less
    /// than [`COALESCE`] ago is not read again for a push: the
    /// running set has not changed since (every change forces a read), so what it counts
    /// meanwhile is credited correctly at the next read. This is what lets 100 consumers of one
    /// counter cost about what one does.
    fn sync_key(st: &mut State, key: u64, running: Option<&BTreeSet<UnitId>>, force: bool) {
        let Some(k) = st.kernel.get_mut(&key) else {
            return;
        };
        if !force && k.last_read.is_some_and(|t| t.elapsed() < COALESCE) {
            return;
        }
        k.last_read = Some(Instant::now());
        let (raw, running_ns) = match k.set.read_all() {
            Ok(r) => r
                .first()
                .and_then(|r| r.value)
                .map_or((k.last_raw, k.last_running_ns), |v| {
                    (v.raw, v.time_running_ns)
                }),
            Err(e) => {
                say!("broker: reading {} on {}: {e}", k.event, k.target);
                (k.last_raw, k.last_running_ns)
            }
        };
        // A counter never goes backwards; a smaller value (target gone) credits nothing.
        let delta = raw.saturating_sub(k.last_raw);
        k.last_raw = k.last_raw.max(raw);
        let delta_running = running_ns.saturating_sub(k.last_running_ns);
        k.last_running_ns = k.last_running_ns.max(running_ns);
        if delta == 0 && delta_running == 0 {
            return;
        }
        // `None`: the scheduler's current running set (no copy of it on the read path).
        let sched = &st.sched;
        for (id, r) in st.regs.iter_mut() {
            if !r.keys.contains(&key) {
                continue;
            }
            let ran = match running {
                Some(set) => sched.key_running_in(set, *id, key),
                None => sched.key_running(*id, key),
            };
            if ran {
                for e in &mut r.events {
                    if e.key == Ok(key) {
                        e.raw_here = e.raw_here.saturating_add(delta);
                        e.counted_here_ns = e.counted_here_ns.saturating_add(delta_running);
                    }
                }
            }
        }
    }

    /// A slice boundary: account time, choose who runs, move counts and enable states.
    fn replan(&self, st: &mut State) {
        let now = Self::now_ns(st);
        st.sched.advance_to(now);
        let old = st.sched.running().clone();
        let new = st.sched.replan().clone();
        self.apply_plan(st, &old, &new);
    }

    fn apply_plan(&self, st: &mut State, old: &BTreeSet<UnitId>, new: &BTreeSet<UnitId>) {
        if old == new {
            // Same running set: every counter keeps its state; reads credit lazily.
            return;
        }
        let keys = st.sched.keys_of(old.symmetric_difference(new));
        for key in keys {
            Self::sync_key(st, key, Some(old), true);
            let want = st.sched.key_wanted(new, key);
            if let Some(k) = st.kernel.get_mut(&key) {
                if want != k.enabled {
                    let r = if want {
                        k.set.enable()
                    } else {
                        k.set.disable()
                    };
                    match r {
                        Ok(()) => k.enabled = want,
                        Err(e) => say!("broker: {} on {}: {e}", k.event, k.target),
                    }
                }
            }
        }
    }

    /// Replan without advancing time (right after a registration, so it starts running at the
    /// instant its enabled time starts).
    fn replan_now(&self, st: &mut State) {
        let old = st.sched.running().clone();
        let new = st.sched.replan().clone();
        self.apply_plan(st, &old, &new);
    }

    /// How long the ticker may sleep: a slice while slicing is needed, else a second (the
    /// reaping period; a registration or a grant that needs slicing wakes it at once).
    pub fn next_tick_in(&self) -> Duration {
        if self.lock().sched.settled() {
            Duration::from_secs(1)
        } else {
            self.slice
        }
    }

    /// Wake the ticker now.
    fn kick(&self) {
        let (m, c) = &self.kick;
        *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
        c.notify_all();
    }

    /// Sleep until `d` has passed or the ticker is kicked.
    fn wait_kick(&self, d: Duration) {
        let (m, c) = &self.kick;
        let mut kicked = m.lock().unwrap_or_else(|p| p.into_inner());
        if !*kicked {
            kicked = match c.wait_timeout(kicked, d) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        *kicked = false;
    }

    /// One scheduling tick (the ticker thread calls this every slice).
    pub fn tick(&self) {
        let mut st = self.lock();
        // Looking for exited registrants costs a stat per registration: once a second is enough.
        if st.last_reap.elapsed() >= Duration::from_secs(1) {
            st.last_reap = Instant::now();
            self.reap(&mut st);
        }
        // Without contention or a grant, a slice boundary changes nothing: skip it (reads
        // account time themselves), so an uncontended broker costs no work per slice.
        if st.sched.settled() {
            return;
        }
        self.replan(&mut st);
    }

    /// Drop registrations whose registering process has exited.
    fn reap(&self, st: &mut State) {
        let gone: Vec<u64> = st
            .regs
            .values()
            .filter(|r| !self.roots.proc_root.join(r.rec.pid.to_string()).exists())
            .map(|r| r.rec.id)
            .collect();
        for id in gone {
            self.remove(st, id);
        }
    }

    fn remove(&self, st: &mut State, id: u64) {
        let running = st.sched.running().clone();
        let Some(reg) = st.regs.get(&id) else {
            return;
        };
        let keys = reg.keys.clone();
        for &k in &keys {
            Self::sync_key(st, k, Some(&running), true);
        }
        st.regs.remove(&id);
        let _ = st.sched.remove(id);
        for k in keys {
            let drop_it = st.kernel.get_mut(&k).is_some_and(|kc| {
                kc.users -= 1;
                kc.users == 0
            });
            if drop_it {
                if let Some(kc) = st.kernel.remove(&k) {
                    st.key_of.remove(&(kc.event, kc.identity));
                }
                continue;
            }
            // Still shared: keep it enabled only if a running unit of another registration uses
            // it (`id` is already out of the scheduler).
            let want = st.sched.key_wanted(&running, k);
            if let Some(kc) = st.kernel.get_mut(&k) {
                if kc.enabled && !want && kc.set.disable().is_ok() {
                    kc.enabled = false;
                }
            }
        }
        self.journal(st, &Record::Unregister { id });
    }

    /// Open (or share) the counters of a registration and add it to the scheduler.
    fn install(
        &self,
        st: &mut State,
        peer: &Peer,
        rec: RegRecord,
        base: Checkpoint,
        restored: bool,
    ) -> Result<usize, Failure> {
        let resolved =
            target::resolve(&rec.target, peer.pid, &self.roots).map_err(|e| fail(e.to_string()))?;
        let mut rec = rec;
        match &rec.target_identity {
            // A task named by its number (`tid:N@START`) that now resolves to a task with
            // another start time: the number was given to a new task while the broker was
            // down. Counting it would hand the consumer another task's counts under the same
            // registration.
            Some(old) if restored && old.contains('@') && *old != resolved.identity => {
                return Err(fail(format!(
                    "target '{}' now names another task than the one registered ({} then, {} \
                     now: its number was reused while the broker was down); register again",
                    rec.target, old, resolved.identity
                )));
            }
            Some(_) => {}
            None => rec.target_identity = Some(resolved.identity.clone()),
        }
        let list = parse_event_list(&rec.events, &self.tree).map_err(|e| fail(e.to_string()))?;
        if list.is_empty() {
            return Err(fail("no events given"));
        }
        // Each event once: a repeat would be a second series under the same labels in every
        // reading and in /metrics (OpenMetrics requires label sets to be unique).
        if let Some(dup) = list.repeated() {
            return Err(fail(format!(
                "event '{}' is listed twice in '{}': name each event once per registration",
                dup.name, rec.events
            )));
        }
        let class = match rec.class.as_str() {
            "user" => Class::User,
            "system" => Class::System,
            other => return Err(fail(format!("unknown class '{other}' (user or system)"))),
        };
        {
            let soft_ok = self.policy.software_kernel_ok;
            let access = Access {
                other_owners: resolved
                    .owners
                    .iter()
                    .copied()
                    .filter(|&o| o != peer.uid)
                    .collect(),
                cpus: resolved.cpus.clone(),
                smt_cpus: target::smt_cpus(&self.roots, &resolved.cpus),
                kernel_events: list
                    .events()
                    .filter(|s| !(s.exclude_kernel || soft_ok && s.source == Source::Software))
                    .map(|s| s.name.clone())
                    .collect(),
                raw_events: list
                    .events()
                    .filter(|s| is_raw(s))
                    .map(|s| s.name.clone())
                    .collect(),
                system_class: class == Class::System,
            };
            self.policy.check(peer, &access)?;
        }
        // A per-CPU target is one scheduling unit per CPU, each with its own kernel counters
        // (event on `cpus:N`, shared with any other registration of that event on that CPU);
        // a task target is one unit whose counters follow the tasks on every CPU.
        // Each scope: its CPU, what to open, its label and its identity (see `Kernel`).
        let scopes: Vec<(Option<usize>, Target, String, String)> = if resolved.cpus.is_empty() {
            vec![(
                None,
                resolved.target.clone(),
                resolved.key.clone(),
                resolved.identity.clone(),
            )]
        } else {
            // In CPU order, the order of the scheduler's per-CPU units (events are unit-major).
            let mut cpus = resolved.cpus.clone();
            cpus.sort_unstable();
            cpus.dedup();
            cpus.into_iter()
                .map(|c| {
                    let key = format!("cpus:{c}");
                    (Some(c), Target::Cpus(vec![c]), key.clone(), key)
                })
                .collect()
        };
        let nspec = list.events().count();
        let mut events = Vec::new();
        let mut opened_here = Vec::new();
        let mut shared = 0;
        let mut keys_by_cpu: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
        for (cpu, scope_target, scope_key, scope_identity) in &scopes {
            for spec in list.events() {
                let kk = (spec.name.clone(), scope_identity.clone());
                let key = match st.key_of.get(&kk) {
                    Some(&k) => {
                        shared += 1;
                        Ok(k)
                    }
                    None => {
                        let one = EventList {
                            groups: vec![Group {
                                members: vec![spec.clone()],
                                braced: false,
                            }],
                        };
                        match CounterSet::open_exact(&one, scope_target, &self.tree) {
                            Ok(set) => {
                                match set.read_all().ok().and_then(|r| r.into_iter().next()) {
                                    Some(r) if r.status == Status::Counting => {
                                        let k = st.next_key;
                                        st.next_key += 1;
                                        st.kernel.insert(
                                            k,
                                            Kernel {
                                                event: spec.name.clone(),
                                                target: scope_key.clone(),
                                                identity: scope_identity.clone(),
                                                cpu: *cpu,
                                                set,
                                                enabled: false,
                                                last_raw: r.value.map_or(0, |v| v.raw),
                                                last_running_ns: r
                                                    .value
                                                    .map_or(0, |v| v.time_running_ns),
                                                last_read: None,
                                                users: 0,
                                            },
                                        );
                                        st.key_of.insert(kk, k);
                                        opened_here.push(k);
                                        Ok(k)
                                    }
                                    Some(r) => Err(match r.status {
                                        Status::NotSupported(why) => why,
                                        Status::Counting => String::new(),
                                    }),
                                    None => Err("not readable".to_string()),
                                }
                            }
                            Err(e) => {
                                for k in opened_here {
                                    if let Some(kc) = st.kernel.remove(&k) {
                                        st.key_of.remove(&(kc.event, kc.identity));
                                    }
                                }
                                return Err(fail(e.to_string()));
                            }
                        }
                    }
                };
                if let Some(c) = cpu {
                    let on_cpu = keys_by_cpu.entry(*c).or_default();
                    if let Ok(k) = &key {
                        on_cpu.insert(*k);
                    }
                }
                events.push(RegEvent {
                    spec: spec.clone(),
                    key,
                    raw_here: 0,
                    counted_here_ns: 0,
                });
            }
        }
        let keys: BTreeSet<u64> = events.iter().filter_map(|e| e.key.clone().ok()).collect();
        let unit_cpus: Vec<usize> = keys_by_cpu.keys().copied().collect();
        let demand = if resolved.cpus.is_empty() {
            // One task set per canonical task target: its counters take slots only where and
            // while its tasks run, so different targets do not compete with each other.
            let n = st.task_sets.len() as u64;
            let task = *st.task_sets.entry(resolved.identity.clone()).or_insert(n);
            Demand::task(
                rec.uid,
                class,
                rec.share,
                task,
                keys.clone(),
                st.cpus.iter().copied().collect(),
            )
        } else {
            Demand::per_cpu(rec.uid, class, rec.share, keys_by_cpu)
        };
        // Account up to now first, so the consumer's enabled time starts exactly here.
        let now = Self::now_ns(st);
        st.sched.advance_to(now);
        if let Err(e) = st.sched.add(rec.id, demand) {
            for k in opened_here {
                if let Some(kc) = st.kernel.remove(&k) {
                    st.key_of.remove(&(kc.event, kc.identity));
                }
            }
            return Err(fail(e.to_string()));
        }
        for k in &keys {
            if let Some(kc) = st.kernel.get_mut(k) {
                kc.users += 1;
            }
        }
        let mut base = base;
        if restored {
            // Restored: the time the broker was down counts as enabled, not running.
            base.enabled_ns = base
                .enabled_ns
                .max(wall_ns().saturating_sub(rec.registered_wall_ns));
        }
        st.regs.insert(
            rec.id,
            Reg {
                rec,
                events,
                nspec,
                unit_cpus,
                last: base.clone(),
                base,
                keys,
                resolved_target: resolved.key.clone(),
            },
        );
        Ok(shared)
    }

    /// A registration's counts now. `fresh`: read its counters whatever the coalescing window
    /// (pull reads, checkpoints); pushes coalesce.
    fn reading(&self, st: &mut State, id: u64, fresh: bool) -> Reading {
        self.readings(st, &[id], fresh)
            .pop()
            .flatten()
            .unwrap_or_else(|| Self::empty_reading(id))
    }

    /// What a registration that vanished between the ownership check and the read reads as.
    fn empty_reading(id: u64) -> Reading {
        Reading {
            id,
            enabled_ns: 0,
            running_ns: 0,
            confidence: 0.0,
            events: Vec::new(),
            cpus: Vec::new(),
        }
    }

    /// Several registrations' counts at one instant: time is advanced once, every kernel
    /// counter they use is read once (however many of them share it), and their checkpoints go
    /// to the journal in one write. `None` for an id that is not registered.
    fn readings(&self, st: &mut State, ids: &[u64], fresh: bool) -> Vec<Option<Reading>> {
        let now = Self::now_ns(st);
        st.sched.advance_to(now);
        let mut keys = BTreeSet::new();
        for id in ids {
            if let Some(r) = st.regs.get(id) {
                keys.extend(r.keys.iter().copied());
            }
        }
        for k in keys {
            Self::sync_key(st, k, None, fresh);
        }
        let mut out = Vec::with_capacity(ids.len());
        let mut records = Vec::with_capacity(ids.len());
        for &id in ids {
            let r = Self::compose(st, id);
            if let Some((_, cp)) = &r {
                records.push(Record::Checkpoint { id, cp: cp.clone() });
            }
            out.push(r.map(|(reading, _)| reading));
        }
        // Journaled before the clients see them: a restart continues from at least these.
        self.journal_many(st, &records);
        out
    }

    /// A registration's reading from what is already credited (no counter is read here), and
    /// the checkpoint it reports; it becomes the registration's floor (never reported lower).
    fn compose(st: &mut State, id: u64) -> Option<(Reading, Checkpoint)> {
        let acc = st.sched.accounting(id);
        let r = st.regs.get_mut(&id)?;
        let nunits = r.unit_cpus.len().max(1);
        let (acc_enabled, acc_units) = match acc {
            Some(a) => (a.enabled_ns, a.units_running_ns),
            None => (0, vec![0; nunits]),
        };
        // Per unit: what earlier lives of the broker reported, plus this life's.
        let units_running: Vec<u64> = (0..nunits)
            .map(|u| {
                let base = match r.base.units_running_ns.get(u) {
                    Some(&b) => b,
                    None => r.base.running_ns,
                };
                let last = match r.last.units_running_ns.get(u) {
                    Some(&l) => l,
                    None if nunits == 1 => r.last.running_ns,
                    None => 0,
                };
                (base + acc_units.get(u).copied().unwrap_or(0)).max(last)
            })
            .collect();
        let running_ns = (units_running.iter().sum::<u64>() / nunits as u64).max(
            // Rounding of the mean never makes it go backwards.
            if nunits == 1 { r.last.running_ns } else { 0 },
        );
        let enabled_ns = (r.base.enabled_ns + acc_enabled)
            .max(r.last.enabled_ns)
            .max(units_running.iter().copied().max().unwrap_or(0));
        // Each event's total: the journal's base plus this broker's share, never below the
        // last total reported.
        let total = |base: &[u64], last: &[u64], i: usize, here: u64| {
            (base.get(i).copied().unwrap_or(0) + here).max(last.get(i).copied().unwrap_or(0))
        };
        let raws: Vec<u64> = (r.events.iter().enumerate())
            .map(|(i, e)| total(&r.base.raw, &r.last.raw, i, e.raw_here))
            .collect();
        let counted: Vec<u64> = (r.events.iter().enumerate())
            .map(|(i, e)| total(&r.base.counted_ns, &r.last.counted_ns, i, e.counted_here_ns))
            .collect();
        let nspec = r.nspec.max(1);
        let mut events = Vec::with_capacity(r.nspec);
        for j in 0..r.nspec {
            let mut raw = 0u64;
            let mut counted_ns = 0u64;
            let mut scaled = Some(0.0);
            let mut reason = None;
            for (u, &unit_running) in units_running.iter().enumerate() {
                let i = u * nspec + j;
                let Some(e) = r.events.get(i) else { continue };
                if let Err(why) = &e.key {
                    reason.get_or_insert_with(|| why.clone());
                    continue;
                }
                raw = raw.saturating_add(raws[i]);
                counted_ns = counted_ns.saturating_add(counted[i]);
                // Each unit scaled by its own coverage (each CPU is sliced on its own).
                scaled = match scaled {
                    Some(sum) if unit_running > 0 => {
                        Some(sum + raws[i] as f64 * enabled_ns as f64 / unit_running as f64)
                    }
                    _ => None,
                };
            }
            let Some(e) = r.events.get(j) else { continue };
            events.push(EventCount {
                event: e.spec.name.clone(),
                supported: reason.is_none(),
                scaled: if reason.is_none() { scaled } else { None },
                counted_ns: reason.is_none().then_some(counted_ns),
                reason,
                raw,
                unit_scale: e.spec.scale,
                unit: e.spec.unit.clone(),
            });
        }
        let cpus: Vec<CpuReading> = r
            .unit_cpus
            .iter()
            .enumerate()
            .map(|(u, &cpu)| CpuReading {
                cpu,
                running_ns: units_running[u],
                raw: raws
                    .get(u * nspec..(u + 1) * nspec)
                    .map(<[u64]>::to_vec)
                    .unwrap_or_default(),
            })
            .collect();
        let cp = Checkpoint {
            enabled_ns,
            running_ns,
            raw: raws,
            counted_ns: counted,
            units_running_ns: if r.unit_cpus.is_empty() {
                Vec::new()
            } else {
                units_running
            },
        };
        r.last = cp.clone();
        let reading = Reading {
            id,
            enabled_ns,
            running_ns,
            confidence: if enabled_ns == 0 {
                1.0
            } else {
                running_ns as f64 / enabled_ns as f64
            },
            events,
            cpus,
        };
        Some((reading, cp))
    }

    fn owned(&self, st: &State, peer: &Peer, id: u64) -> Result<(), Failure> {
        match st.regs.get(&id) {
            None => match st.revoked.get(&id) {
                // Its owner learns why it is gone; anyone else that it does not exist.
                Some(v) if v.uid == peer.uid || peer.uid == 0 => Err(Failure {
                    rule: v.rule.clone(),
                    message: format!(
                        "registration {id} was dropped when the broker restarted: {}",
                        v.message
                    ),
                }),
                _ => Err(fail(format!("no registration {id}"))),
            },
            Some(r) if r.rec.uid != peer.uid && peer.uid != 0 => Err(Refusal {
                rule: crate::access::Rule::NotOwner,
                detail: format!("registration {id} belongs to uid {}", r.rec.uid),
            }
            .into()),
            Some(_) => Ok(()),
        }
    }

    /// Handle one request from `peer` (everything but subscriptions' pushes).
    pub fn handle(&self, peer: &Peer, req: &Request) -> Response {
        match self.handle_inner(peer, req) {
            Ok(r) => r,
            Err(f) => {
                if let Some(rule) = &f.rule {
                    self.audit(peer, "refuse", Some(rule), &describe(req));
                }
                Response::Error {
                    rule: f.rule,
                    message: f.message,
                    closing: false,
                }
            }
        }
    }

    fn handle_inner(&self, peer: &Peer, req: &Request) -> Result<Response, Failure> {
        match req {
            Request::Hello { version } => {
                if *version != proto::VERSION {
                    return Err(fail(format!(
                        "protocol version {version} is not supported (this broker speaks {})",
                        proto::VERSION
                    )));
                }
                Ok(Response::Hello {
                    version: proto::VERSION,
                    uid: peer.uid,
                    gid: peer.gid,
                    pid: peer.pid,
                })
            }
            Request::Register {
                events,
                target,
                share,
                class,
            } => {
                let mut st = self.lock();
                let id = st.next_id;
                let rec = RegRecord {
                    id,
                    uid: peer.uid,
                    gid: peer.gid,
                    pid: peer.pid,
                    events: events.clone(),
                    target: target.clone(),
                    share: *share,
                    class: class.clone().unwrap_or_else(|| "user".into()),
                    registered_wall_ns: wall_ns(),
                    pid_start: target::start_time(&self.roots, peer.pid).ok(),
                    target_identity: None,
                };
                let shared = self.install(&mut st, peer, rec, Checkpoint::default(), false)?;
                st.next_id += 1;
                // Enabled time starts when counting can start (after parsing and opening), and
                // the consumer is scheduled at once: a consumer alone counts 100 % of its time.
                self.replan_now(&mut st);
                let now = wall_ns();
                let rec = match st.regs.get_mut(&id) {
                    Some(r) => {
                        r.rec.registered_wall_ns = now;
                        r.rec.clone()
                    }
                    None => return Err(fail("registration vanished")),
                };
                self.journal(&mut st, &Record::Register(rec));
                drop(st);
                // It may have made the slots contended: slicing starts now, not in a second.
                self.kick();
                self.audit(peer, "grant", None, &describe(req));
                Ok(Response::Registered {
                    id,
                    shared_counters: shared,
                })
            }
            Request::Read { id } => {
                let mut st = self.lock();
                self.owned(&st, peer, *id)?;
                Ok(Response::Reading(self.reading(&mut st, *id, true)))
            }
            Request::ReadMany { ids } => {
                if ids.len() > proto::MAX_READ_MANY {
                    return Err(fail(format!(
                        "read_many of {} ids exceeds the limit of {}",
                        ids.len(),
                        proto::MAX_READ_MANY
                    )));
                }
                let mut st = self.lock();
                for id in ids {
                    self.owned(&st, peer, *id)?;
                }
                let readings = self
                    .readings(&mut st, ids, true)
                    .into_iter()
                    .zip(ids)
                    .map(|(r, &id)| r.unwrap_or_else(|| Self::empty_reading(id)))
                    .collect();
                Ok(Response::Readings { readings })
            }
            Request::SubscribeShared { id, interval_ms } => {
                self.policy.check_interval(*interval_ms)?;
                let st = self.lock();
                self.owned(&st, peer, *id)?;
                let n = st.regs.get(id).map_or(0, |r| r.nspec);
                if n > crate::shm::MAX_SHARED_EVENTS {
                    return Err(fail(format!(
                        "registration {id} has {n} events; a shared slot carries at most {}",
                        crate::shm::MAX_SHARED_EVENTS
                    )));
                }
                // The connection's thread allocates the slot and answers (with the page).
                Ok(Response::Ok)
            }
            Request::Subscribe { id, interval_ms } => {
                self.policy.check_interval(*interval_ms)?;
                let st = self.lock();
                self.owned(&st, peer, *id)?;
                Ok(Response::Ok)
            }
            Request::Unregister { id } => {
                let mut st = self.lock();
                self.owned(&st, peer, *id)?;
                self.remove(&mut st, *id);
                self.replan(&mut st);
                Ok(Response::Ok)
            }
            Request::GrantExclusive { id, duration_ms } => {
                self.policy.check_exclusive(peer, *duration_ms)?;
                let mut st = self.lock();
                self.owned(&st, peer, *id)?;
                let now = Self::now_ns(&st);
                st.sched.advance_to(now);
                st.sched
                    .grant_exclusive(*id, duration_ms.saturating_mul(1_000_000))
                    .map_err(|e| fail(e.to_string()))?;
                let until_wall_ns = wall_ns() + duration_ms.saturating_mul(1_000_000);
                self.journal(
                    &mut st,
                    &Record::Exclusive {
                        id: *id,
                        until_wall_ns,
                    },
                );
                self.replan(&mut st);
                drop(st);
                self.kick();
                self.audit(peer, "exclusive", None, &describe(req));
                Ok(Response::Ok)
            }
            Request::Status {} => {
                let mut st = self.lock();
                let now = Self::now_ns(&st);
                st.sched.advance_to(now);
                // Others' registrations would tell a user what others measure: root sees all.
                let registrations = st
                    .regs
                    .values()
                    .filter(|r| peer.uid == 0 || r.rec.uid == peer.uid)
                    .map(|r| RegistrationInfo {
                        id: r.rec.id,
                        uid: r.rec.uid,
                        events: r.rec.events.clone(),
                        target: r.rec.target.clone(),
                        share: r.rec.share,
                        class: r.rec.class.clone(),
                        running_ns: r.base.running_ns
                            + st.sched.accounting(r.rec.id).map_or(0, |a| a.running_ns),
                    })
                    .collect();
                Ok(Response::Status {
                    slots: st.sched.slots(),
                    cpus: st.cpus.len(),
                    kernel_counters: st.kernel.len(),
                    registrations,
                })
            }
        }
    }

    /// Push reading for a subscription (checks ownership again: it may have been removed).
    pub fn push(&self, peer: &Peer, id: u64) -> Option<Reading> {
        self.push_many(&[(*peer, id)]).pop().flatten()
    }

    /// Push readings for several subscriptions at one instant, under one lock: each shared
    /// kernel counter is read once for all of them, time is accounted once, and their
    /// checkpoints are journaled in one write. `None` where the registration is gone or no
    /// longer the subscriber's.
    pub fn push_many(&self, subs: &[(Peer, u64)]) -> Vec<Option<Reading>> {
        let mut st = self.lock();
        // Two subscriptions to one registration share its reading.
        let ids: Vec<u64> = subs
            .iter()
            .filter(|(peer, id)| self.owned(&st, peer, *id).is_ok())
            .map(|(_, id)| *id)
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .collect();
        let got: HashMap<u64, Reading> = ids
            .iter()
            .copied()
            .zip(self.readings(&mut st, &ids, false))
            .filter_map(|(id, r)| Some((id, r?)))
            .collect();
        subs.iter()
            .map(|(peer, id)| {
                self.owned(&st, peer, *id).ok()?;
                got.get(id).cloned()
            })
            .collect()
    }

    /// Kernel counters open (after deduplication).
    pub fn kernel_counters(&self) -> usize {
        self.lock().kernel.len()
    }

    /// The scheduling slice.
    pub fn slice(&self) -> Duration {
        self.slice
    }

    /// Readings for a metrics exporter: per consumer (labels `cpu`, `consumer`, `target` as
    /// resolved, so `self` reads `pid:N`) and
    /// per kernel counter (`consumer` empty): (event, labels, raw, enabled_ns, running_ns).
    /// A per-CPU target gives one series per CPU (`cpu="N"`, with that CPU's own running time,
    /// since each CPU is multiplexed on its own); a task target one series with `cpu="all"`.
    pub fn metrics_readings(&self) -> Vec<MetricReading> {
        let mut st = self.lock();
        let ids: Vec<u64> = st.regs.keys().copied().collect();
        let targets: Vec<String> = ids
            .iter()
            .filter_map(|id| st.regs.get(id).map(|r| r.resolved_target.clone()))
            .collect();
        let readings = self.readings(&mut st, &ids, false);
        let mut out = Vec::new();
        for ((id, target), r) in ids.iter().zip(targets).zip(readings) {
            let Some(r) = r else { continue };
            let labels = |cpu: String| {
                vec![
                    ("cpu".to_string(), cpu),
                    ("consumer".to_string(), id.to_string()),
                    ("target".to_string(), target.clone()),
                ]
            };
            if r.cpus.is_empty() {
                for e in r.events.iter().filter(|e| e.supported) {
                    out.push((
                        e.event.clone(),
                        labels("all".into()),
                        e.raw,
                        r.enabled_ns,
                        r.running_ns,
                    ));
                }
                continue;
            }
            for c in &r.cpus {
                for (e, &raw) in r.events.iter().zip(&c.raw) {
                    if e.supported {
                        out.push((
                            e.event.clone(),
                            labels(c.cpu.to_string()),
                            raw,
                            r.enabled_ns,
                            c.running_ns,
                        ));
                    }
                }
            }
        }
        for k in st.kernel.values() {
            if let Ok(rs) = k.set.read_all() {
                if let Some(v) = rs.first().and_then(|r| r.value) {
                    let cpu = k.cpu.map_or_else(|| "all".to_string(), |c| c.to_string());
                    out.push((
                        k.event.clone(),
                        vec![
                            ("cpu".into(), cpu),
                            ("consumer".into(), String::new()),
                            ("target".into(), k.target.clone()),
                        ],
                        v.raw,
                        v.time_enabled_ns,
                        v.time_running_ns,
                    ));
                }
            }
        }
        out
    }

    /// Checkpoint every registration (on a clean stop).
    pub fn checkpoint_all(&self) {
        let ids: Vec<u64> = self.lock().regs.keys().copied().collect();
        for id in ids {
            let mut st = self.lock();
            let _ = self.reading(&mut st, id, true);
        }
    }
}

fn describe(req: &Request) -> String {
    match req {
        Request::Register {
            events,
            target,
            share,
            class,
        } => format!(
            "register '{events}' on {target} share {share} class {}",
            class.as_deref().unwrap_or("user")
        ),
        Request::GrantExclusive { id, duration_ms } => {
            format!("exclusive {id} for {duration_ms} ms")
        }
        Request::Subscribe { id, interval_ms } => format!("subscribe {id} every {interval_ms} ms"),
        Request::SubscribeShared { id, interval_ms } => {
            format!("subscribe {id} every {interval_ms} ms (shared page)")
        }
        Request::Read { id } => format!("read {id}"),
        Request::ReadMany { ids } => format!("read {} registrations", ids.len()),
        Request::Unregister { id } => format!("unregister {id}"),
        Request::Hello { version } => format!("hello {version}"),
        Request::Status {} => "status".into(),
    }
}

/// The peer's credentials from `SO_PEERCRED`.
pub fn peer_cred(s: &UnixStream) -> io::Result<Peer> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a valid ucred of `len` bytes; the descriptor is a Unix socket we own.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Peer {
        uid: cred.uid,
        gid: cred.gid,
        pid: cred.pid,
    })
}

/// A connection's writing half, shared by its thread (answers) and the pusher (pushes) so lines
/// never interleave.
type Writer = Arc<Mutex<UnixStream>>;

fn send(w: &Writer, r: &Response) -> bool {
    let mut s = w.lock().unwrap_or_else(|p| p.into_inner());
    s.write_all(&proto::encode(r)).is_ok()
}

/// Where a subscription's readings go.
#[derive(Clone)]
enum Sink {
    /// Sent as `push` lines on the connection.
    Socket(Writer),
    /// Written into a slot of the connection's shared page: no syscall per push.
    Page(Arc<SharedPage>, usize),
}

struct Sub {
    conn: u64,
    peer: Peer,
    id: u64,
    interval: Duration,
    due: Instant,
    sink: Sink,
}

/// Every subscription of every connection, served by one thread. Push times are aligned on a
/// grid (multiples of the interval since the pusher started), so all subscriptions of the same
/// interval fall due together: one wake-up takes the broker lock once, reads each shared kernel
/// counter once for all of them, and writes each connection's due pushes in one `write(2)`.
/// 100 subscribers at 10 Hz thus cost 10 wake-ups and 10 reads per counter a second, not 1000.
pub struct Pusher {
    subs: Mutex<Vec<Sub>>,
    /// Wakes the push thread when a subscription is added (its first push may be due before
    /// the thread's planned wake-up) and on stop: without subscriptions it sleeps a second.
    wake: Condvar,
    /// Bumped (under the lock) by every wake: a wake that comes between a `push_due` and the
    /// `wait` after it is not lost.
    generation: AtomicU64,
    epoch: Instant,
}

impl Default for Pusher {
    fn default() -> Self {
        Pusher {
            subs: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

/// The first point of the grid `epoch + k * interval` strictly after `now`.
fn next_on_grid(epoch: Instant, interval: Duration, now: Instant) -> Instant {
    let step = interval.as_nanos().max(1);
    let k = now.saturating_duration_since(epoch).as_nanos() / step + 1;
    // k * step fits a u64 of nanoseconds for any uptime below 584 years.
    epoch + Duration::from_nanos(u64::try_from(k * step).unwrap_or(u64::MAX))
}

impl Pusher {
    fn lock(&self) -> MutexGuard<'_, Vec<Sub>> {
        self.subs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, conn: u64, peer: Peer, id: u64, interval: Duration, sink: Sink) {
        let due = next_on_grid(self.epoch, interval, Instant::now());
        let mut v = self.lock();
        v.retain(|s| !(s.conn == conn && s.id == id));
        v.push(Sub {
            conn,
            peer,
            id,
            interval,
            due,
            sink,
        });
        self.generation.fetch_add(1, Ordering::Relaxed);
        drop(v);
        self.wake.notify_all();
    }

    /// The wake count, to pass to [`Pusher::wait`]. No lock: a wake bumps it under the lock,
    /// and `wait` compares it under the lock before it sleeps.
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Sleep until `d` has passed or a wake (a subscription added, [`Pusher::stop`]) has come
    /// since `generation` was taken.
    fn wait(&self, generation: u64, d: Duration) {
        let v = self.lock();
        if self.generation.load(Ordering::Relaxed) == generation {
            let _ = self.wake.wait_timeout(v, d);
        }
    }

    /// Wake the push thread to see the stop flag.
    fn stop(&self) {
        let _v = self.lock();
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.wake.notify_all();
    }

    fn remove(&self, conn: u64, id: Option<u64>) {
        self.lock()
            .retain(|s| !(s.conn == conn && id.map_or(true, |i| s.id == i)));
    }

    /// Push what is due; returns how long until the next push (a second without
    /// subscriptions: an idle broker does not wake for them).
    fn push_due(&self, broker: &Broker) -> Duration {
        let now = Instant::now();
        let mut v = self.lock();
        let due: Vec<usize> = (0..v.len()).filter(|&i| v[i].due <= now).collect();
        if !due.is_empty() {
            let asks: Vec<(Peer, u64)> = due.iter().map(|&i| (v[i].peer, v[i].id)).collect();
            let readings = broker.push_many(&asks);
            // Each connection's pushes in one buffer, written at once.
            let mut out: BTreeMap<u64, (Writer, Vec<u8>)> = BTreeMap::new();
            let mut dead_conns = BTreeSet::new();
            let mut dead = BTreeSet::new();
            for (&i, r) in due.iter().zip(readings) {
                let s = &mut v[i];
                match r {
                    Some(r) => {
                        match &s.sink {
                            Sink::Socket(w) => out
                                .entry(s.conn)
                                .or_insert_with(|| (w.clone(), Vec::new()))
                                .1
                                .extend(proto::encode(&Response::Push(r))),
                            Sink::Page(page, slot) => {
                                let raw: Vec<u64> = r.events.iter().map(|e| e.raw).collect();
                                page.write(*slot, r.id, r.enabled_ns, r.running_ns, &raw);
                            }
                        }
                        // Catch up without bursts after a stall.
                        s.due = next_on_grid(self.epoch, s.interval, now);
                    }
                    None => {
                        dead.insert(i);
                    }
                }
            }
            for (conn, (w, bytes)) in out {
                let mut stream = w.lock().unwrap_or_else(|p| p.into_inner());
                if stream.write_all(&bytes).is_err() {
                    dead_conns.insert(conn);
                }
            }
            let mut i = 0;
            v.retain(|s| {
                let keep = !dead.contains(&i) && !dead_conns.contains(&s.conn);
                i += 1;
                keep
            });
        }
        let now = Instant::now();
        v.iter()
            .map(|s| s.due.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_secs(1))
    }
}

/// Serve one connection until it closes, the peer misbehaves, or `stop` is set.
pub fn serve_connection(
    broker: &Broker,
    pusher: &Pusher,
    conn: u64,
    mut stream: UnixStream,
    stop: &AtomicBool,
) {
    let Ok(peer) = peer_cred(&stream) else {
        return;
    };
    let Ok(w) = stream.try_clone() else {
        return;
    };
    // A consumer that stops reading must not stall the pusher for everyone.
    let _ = w.set_write_timeout(Some(Duration::from_secs(1)));
    let writer: Writer = Arc::new(Mutex::new(w));
    serve_lines(broker, pusher, conn, &peer, &mut stream, &writer, stop);
    pusher.remove(conn, None);
    // Other descriptors of this socket live on (the one `run` keeps to shut it down on stop):
    // shut it down so the peer sees the end now, not when the last descriptor is closed.
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn serve_lines(
    broker: &Broker,
    pusher: &Pusher,
    conn: u64,
    peer: &Peer,
    stream: &mut UnixStream,
    writer: &Writer,
    stop: &AtomicBool,
) {
    let mut lines = LineBuffer::new();
    // The connection's shared page and its slots by registration, made on first use.
    let mut page: Option<Arc<SharedPage>> = None;
    let mut slots: BTreeMap<u64, usize> = BTreeMap::new();
    let mut limiter = RateLimiter::new(broker.policy.rate_per_s, broker.policy.rate_burst);
    let epoch = Instant::now();
    let mut chunk = [0u8; 8192];
    // Reads block without a timeout (an idle consumer costs no wake-ups): on stop, `run` shuts
    // the socket down, which ends the read.
    while !stop.load(Ordering::Relaxed) {
        // Wait in poll(POLLIN), not in a blocking read: the kernel wakes every task sleeping on
        // the socket whenever the peer consumes a push (write space, EPOLLOUT), and only a poll
        // waiter filters that out. Blocked in read, each connection thread woke once per push.
        let mut p = libc::pollfd {
            fd: stream.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on a descriptor we own; no timeout (a stop shuts it down).
        if unsafe { libc::poll(&mut p, 1, -1) } < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => lines.push(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        loop {
            let line = match lines.next_line() {
                Ok(Some(l)) if proto::is_blank(&l) => continue,
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(e) => {
                    let _ = send(
                        writer,
                        &Response::Error {
                            rule: None,
                            message: e.to_string(),
                            closing: true,
                        },
                    );
                    return;
                }
            };
            if let Err(r) = limiter.take(epoch.elapsed().as_nanos() as u64) {
                broker.audit(peer, "refuse", Some(r.rule.name()), "request");
                let f: Failure = r.into();
                if !send(
                    writer,
                    &Response::Error {
                        rule: f.rule,
                        message: f.message,
                        closing: false,
                    },
                ) {
                    return;
                }
                continue;
            }
            let req = match proto::decode_request(&line) {
                Ok(r) => r,
                Err(e) => {
                    // Malformed: say why and close; the broker serves everyone else on.
                    let _ = send(
                        writer,
                        &Response::Error {
                            rule: None,
                            message: e.to_string(),
                            closing: true,
                        },
                    );
                    return;
                }
            };
            let mut resp = broker.handle(peer, &req);
            if let (Request::SubscribeShared { id, interval_ms }, Response::Ok) = (&req, &resp) {
                match share_slot(&mut page, &mut slots, *id) {
                    Ok((p, slot, fresh)) => {
                        let answer = proto::encode(&Response::SharedSlot {
                            id: *id,
                            slot,
                            page_attached: fresh,
                        });
                        let sent = {
                            let s = writer.lock().unwrap_or_else(|p| p.into_inner());
                            if fresh {
                                crate::shm::send_with_fd(s.as_raw_fd(), &answer, p.fd()).is_ok()
                            } else {
                                (&*s).write_all(&answer).is_ok()
                            }
                        };
                        if !sent {
                            return;
                        }
                        let interval = Duration::from_millis(*interval_ms);
                        pusher.add(conn, *peer, *id, interval, Sink::Page(p, slot));
                    }
                    Err(message) => {
                        if !send(
                            writer,
                            &Response::Error {
                                rule: None,
                                message,
                                closing: false,
                            },
                        ) {
                            return;
                        }
                    }
                }
                continue;
            }
            // A refused hello (a version this broker does not speak) ends the connection: the
            // reply says so, so a client does not wait on a connection about to close.
            let closing =
                matches!(resp, Response::Error { .. }) && matches!(req, Request::Hello { .. });
            if let Response::Error { closing: c, .. } = &mut resp {
                *c = closing;
            }
            // Answer first, then start pushing, so the `ok` precedes the first push.
            if !send(writer, &resp) || closing {
                return;
            }
            match (&req, &resp) {
                (Request::Subscribe { id, interval_ms }, Response::Ok) => {
                    let interval = Duration::from_millis(*interval_ms);
                    pusher.add(conn, *peer, *id, interval, Sink::Socket(writer.clone()));
                }
                (Request::Unregister { id }, Response::Ok) => pusher.remove(conn, Some(*id)),
                _ => {}
            }
        }
    }
}

/// The slot of registration `id` in the connection's page, making the page on first use:
/// `(page, slot, whether the page is new and must be sent)`.
fn share_slot(
    page: &mut Option<Arc<SharedPage>>,
    slots: &mut BTreeMap<u64, usize>,
    id: u64,
) -> Result<(Arc<SharedPage>, usize, bool), String> {
    let fresh = page.is_none();
    if fresh {
        let p = SharedPage::create().map_err(|e| format!("cannot create a shared page: {e}"))?;
        *page = Some(Arc::new(p));
    }
    let p = page.clone().ok_or("no shared page")?;
    let next = slots.len();
    let slot = match slots.get(&id) {
        Some(&s) => s,
        None if next < crate::shm::SLOTS => {
            slots.insert(id, next);
            next
        }
        None => {
            return Err(format!(
                "at most {} shared subscriptions per connection",
                crate::shm::SLOTS
            ))
        }
    };
    Ok((p, slot, fresh))
}

/// How long [`bind`] waits for a listener already on the socket to answer `hello`: long enough
/// for a broker on a loaded machine, bounded so start-up never hangs on a silent program.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the peer on `s` answers a `hello` as a broker does: any protocol response, a
/// refusal included (a broker of another protocol version is still a broker). Silence until
/// [`PROBE_TIMEOUT`], an end of connection, or a line that is not a response says it is not.
fn answers_as_broker(mut s: UnixStream) -> bool {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let _ = s.set_write_timeout(Some(PROBE_TIMEOUT));
    let hello = proto::encode(&Request::Hello {
        version: proto::VERSION,
    });
    if s.write_all(&hello).is_err() {
        return false;
    }
    let mut lines = LineBuffer::new();
    let mut chunk = [0u8; 4096];
    loop {
        match lines.next_line() {
            Ok(Some(l)) => return proto::decode_response(&l).is_ok(),
            Ok(None) => {}
            Err(_) => return false,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => lines.push(&chunk[..n]),
            // A stop signal during start-up: the daemon's loop sees it; keep waiting here.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Bind the socket: create its directory, refuse if a broker answers there, replace a stale
/// socket, and let anyone connect (the policy decides what they may do).
pub fn bind(path: &Path) -> Result<UnixListener, ServerError> {
    let err = |what, error| ServerError::Socket {
        path: path.to_path_buf(),
        what,
        error,
    };
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !target::is_dir(dir) {
            std::fs::create_dir_all(dir).map_err(|e| err("creating its directory", e))?;
        }
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !m.file_type().is_socket() {
            return Err(err(
                "exists and is not a socket",
                io::Error::from(io::ErrorKind::AlreadyExists),
            ));
        }
        if let Ok(s) = UnixStream::connect(path) {
            return Err(if answers_as_broker(s) {
                ServerError::InUse(path.to_path_buf())
            } else {
                ServerError::Occupied(path.to_path_buf())
            });
        }
        std::fs::remove_file(path).map_err(|e| err("removing the stale socket", e))?;
    }
    let l = UnixListener::bind(path).map_err(|e| err("binding", e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| err("setting permissions", e))?;
    Ok(l)
}

/// Run the broker on `listener` until `stop` is set: a ticker thread and one thread per
/// connection. On return every registration is checkpointed.
pub fn run(broker: Arc<Broker>, listener: UnixListener, stop: Arc<AtomicBool>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let ticker = {
        let (b, s) = (broker.clone(), stop.clone());
        std::thread::Builder::new()
            .name("broker-tick".into())
            .spawn(move || {
                // Uncontended, it wakes once a second (to reap), not every slice.
                while !s.load(Ordering::Relaxed) {
                    b.wait_kick(b.next_tick_in());
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    b.tick();
                }
            })?
    };
    let pusher = Arc::new(Pusher::default());
    let push_thread = {
        let (b, s, p) = (broker.clone(), stop.clone(), pusher.clone());
        std::thread::Builder::new()
            .name("broker-push".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    let generation = p.generation();
                    let wait = p.push_due(&b);
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    p.wait(generation, wait.max(Duration::from_micros(100)));
                }
            })?
    };
    // Each connection: its uid, its thread, and a handle to shut it down on stop.
    let mut conns: Vec<(Option<u32>, std::thread::JoinHandle<()>, Option<UnixStream>)> = Vec::new();
    let mut next_conn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            // A stop wakes this loop with a connection of its own (`wake_listener`).
            Ok(_) if stop.load(Ordering::Relaxed) => break,
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                conns.retain(|(_, h, _)| !h.is_finished());
                // One thread per connection: cap them, overall and per uid, so one local user
                // cannot exhaust the broker's threads and starve everyone else.
                let uid = peer_cred(&stream).map(|p| p.uid).ok();
                let of_uid = conns.iter().filter(|(u, _, _)| *u == uid).count();
                if conns.len() >= MAX_CONNECTIONS || of_uid >= MAX_CONNECTIONS_PER_UID {
                    let mut st = stream;
                    let _ = st.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = st.write_all(&proto::encode(&Response::Error {
                        rule: None,
                        message: format!(
                            "too many connections ({} at most, {} per uid)",
                            MAX_CONNECTIONS, MAX_CONNECTIONS_PER_UID
                        ),
                        closing: true,
                    }));
                    continue;
                }
                let (b, s, p) = (broker.clone(), stop.clone(), pusher.clone());
                next_conn += 1;
                let conn = next_conn;
                let handle = stream.try_clone().ok();
                match std::thread::Builder::new()
                    .name("broker-conn".into())
                    .spawn(move || serve_connection(&b, &p, conn, stream, &s))
                {
                    Ok(h) => conns.push((uid, h, handle)),
                    Err(e) => say!("broker: cannot start a connection thread: {e}"),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; a signal interrupts it (EINTR) and we re-check stop.
                // Whoever sets `stop` wakes us with a connection (`wake_listener`); the
                // timeout is only the backstop for a stop set without one, so an idle broker
                // wakes here once a second.
                unsafe { libc::poll(&mut p, 1, 1000) };
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                say!("broker: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    broker.kick();
    pusher.stop();
    let _ = ticker.join();
    let _ = push_thread.join();
    for (_, _, s) in &conns {
        if let Some(s) = s {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    for (_, h, _) in conns {
        let _ = h.join();
    }
    broker.checkpoint_all();
    Ok(())
}

/// Start the OpenMetrics exporter on `addr` (`HOST:PORT`): `GET /metrics` answers with
/// `readings` as raw `_total` counters, each with its enabled/running time, coverage and a
/// multiplexing flag beside it (crate `counterpoint-openmetrics`). The exporter runs until the
/// returned handle is dropped.
pub fn start_metrics(
    addr: &str,
    readings: Arc<dyn Fn() -> Vec<MetricReading> + Send + Sync>,
) -> Result<counterpoint_openmetrics::ExporterHandle, ServerError> {
    let fail = |message: String| ServerError::Metrics {
        addr: addr.to_string(),
        message,
    };
    let sock: std::net::SocketAddr = {
        use std::net::ToSocketAddrs;
        addr.to_socket_addrs()
            .map_err(|e| fail(format!("not HOST:PORT ({e})")))?
            .next()
            .ok_or_else(|| fail("resolves to no address".into()))?
    };
    let source: counterpoint_openmetrics::Source = Arc::new(move || {
        let rs: Vec<counterpoint_openmetrics::CounterReading> = readings()
            .into_iter()
            .map(|(event, labels, raw, enabled_ns, running_ns)| {
                counterpoint_openmetrics::CounterReading {
                    event,
                    labels,
                    raw,
                    enabled_ns,
                    running_ns,
                }
            })
            .collect();
        counterpoint_openmetrics::counter_families(&rs)
    });
    counterpoint_openmetrics::serve(sock, source).map_err(|e| fail(e.to_string()))
}
