//! The live agent: MASA's user-level daemon made safe. Every interval it observes the targets,
//! asks a [`Policy`] for actions and applies them (or only logs them in a dry run). Every
//! affinity change is journaled before it is made; the safety net sweeps each interval for
//! threads and children born pinned and for tasks someone else re-pinned; every terminating
//! signal it can catch, the end of `--max-intervals`, an error, or a log it can no longer write
//! ends it through one restore path. A journal left by a killed agent is restored at start.
//!
//! The observe → decide → act step is one function, [`step`], run by [`run_loop`] on any
//! [`Machine`] (the host, or the simulator in real time). Decisions and lifecycle events are
//! [`Logger`] lines: text, or one JSON object per line (`--log-json`), same fields.

use crate::journal::{Journal, JournalError, RestoreReport};
use crate::machine::{Host, HostError};
use crate::signals::{self, SignalError};
use crate::targets::TargetSpec;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::driver::{
    Decision, Driver, DriverConfig, DriverError, DriverReport, Observer, StopReason, Verdict,
};
use counterpoint_core::machine::{Machine, Policy};
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

/// Environment variable for the tests: panic in the loop after this many intervals (a policy
/// bug), to show that the affinities are still restored.
pub const PANIC_AT_ENV: &str = "COUNTERPOINT_TEST_PANIC_AT_INTERVAL";

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Shown with `COUNTERPOINT_LOG=debug`.
    Debug,
    /// Decisions and lifecycle.
    Info,
    /// Something the user should know (a target missing, a task left alone).
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// The agent's log: one line per event on a writer. A write that fails (a closed pipe, a full
/// disk) stops the agent through the restore path: an agent nobody can hear must not go on
/// changing affinities.
pub struct Logger {
    out: Box<dyn Write + Send>,
    /// The descriptor behind `out`, polled each interval: a pipe whose reader went away is
    /// noticed even when the agent has nothing to say.
    fd: Option<std::os::fd::RawFd>,
    json: bool,
    min: Level,
    failed: Option<String>,
}

/// UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` for a Unix time in milliseconds.
fn rfc3339_ms(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        unix_ms % 1000
    )
}

impl Logger {
    /// A logger on `out`; `json` for JSON lines; `min` the lowest level written.
    pub fn new(out: Box<dyn Write + Send>, json: bool, min: Level) -> Self {
        Self {
            out,
            fd: None,
            json,
            min,
            failed: None,
        }
    }

    /// A logger on stderr, which is also polled for a closed reader.
    pub fn stderr(json: bool, min: Level) -> Self {
        let mut l = Self::new(Box::new(std::io::stderr()), json, min);
        l.fd = Some(libc::STDERR_FILENO);
        l
    }

    /// Whether the log's reader is still there (a pipe's read end open): when it is gone the
    /// log counts as failed and a stop is asked for.
    pub fn check(&mut self) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let Some(fd) = self.fd else { return true };
        let mut p = libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        };
        // SAFETY: one pollfd we own, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n > 0 && p.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
            self.failed = Some("the log's reader went away (closed pipe)".to_string());
            signals::request_stop();
            return false;
        }
        true
    }

    /// Why the log can no longer be written, if it cannot.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// One line: `event` names it, `fields` carry its data (flattened to the top level of the
    /// JSON object; `key=value` in text).
    pub fn emit(&mut self, level: Level, event: &str, message: &str, fields: &[(&str, Value)]) {
        if level < self.min || self.failed.is_some() {
            return;
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let line = if self.json {
            let mut m = serde_json::Map::new();
            m.insert("timestamp".into(), json!(rfc3339_ms(now_ms)));
            m.insert("level".into(), json!(level.as_str()));
            m.insert("message".into(), json!(message));
            m.insert("event".into(), json!(event));
            for (k, v) in fields {
                m.insert((*k).to_string(), v.clone());
            }
            Value::Object(m).to_string()
        } else {
            let mut s = format!(
                "{} {:>5} {message} event={event:?}",
                rfc3339_ms(now_ms),
                level.as_str()
            );
            for (k, v) in fields {
                match v {
                    Value::String(t) => s.push_str(&format!(" {k}={t:?}")),
                    other => s.push_str(&format!(" {k}={other}")),
                }
            }
            s
        };
        let r = self
            .out
            .write_all(line.as_bytes())
            .and_then(|_| self.out.write_all(b"\n"))
            .and_then(|_| self.out.flush());
        if let Err(e) = r {
            self.failed = Some(e.to_string());
            signals::request_stop();
        }
    }
}

/// Agent failures.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The journal could not be opened, read or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The host failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The agent may not change the targets' affinities.
    #[error("insufficient privileges for the target processes; nothing was changed: {0}")]
    Permission(HostError),
    /// Signal handlers could not be installed.
    #[error(transparent)]
    Signal(#[from] SignalError),
    /// `--targets` names processes none of which exists.
    #[error("--targets {spec}: {missing}; refusing to start with nothing to watch")]
    NoTargets {
        /// The spec as given.
        spec: String,
        /// Why each listed pid cannot be watched (`no such process (PIDS)`, `kernel thread ...`).
        missing: String,
    },
    /// The loop panicked (a bug); the affinities were restored.
    #[error("the agent loop panicked ({0}); affinities were restored")]
    Panicked(String),
    /// The machine the loop runs on failed (e.g. the simulator).
    #[error("{0}")]
    Machine(Box<dyn std::error::Error + Send + Sync>),
}

/// How the loop runs.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// Observation interval.
    pub interval_ns: u64,
    /// A task changed is not changed again for this many intervals (hysteresis).
    pub min_residency: u32,
    /// Log decisions without applying them.
    pub dry_run: bool,
    /// Stop after this many intervals.
    pub max_intervals: Option<u64>,
    /// Sleep one interval of wall time after each one (a simulated machine does not wait).
    pub real_time: bool,
}

/// How the agent ended.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The signal that stopped it.
    pub signal: Option<i32>,
    /// The log could no longer be written (why).
    pub log_failed: Option<String>,
    /// What restoring did (none for a dry run or a simulated machine).
    pub restore: Option<RestoreReport>,
}

/// One task's (or thread's) move within an action, for the decision log.
struct Move {
    task: u64,
    /// The thread, for a thread-level action.
    tid: Option<u64>,
    from: String,
    to: String,
    /// Share of one CPU the task used in the interval, when observed.
    cpus_used: Option<f64>,
}

fn moves(action: &Action, obs: &Observation, online: &CpuSet) -> Vec<Move> {
    let used = |t: TaskId| {
        obs.task(t).and_then(|o| {
            o.sample
                .get(counterpoint_core::event::TASK_CLOCK)
                .map(|ns| ns / o.sample.interval_ns.max(1) as f64)
        })
    };
    let aff = |t: TaskId| {
        obs.task(t)
            .map(|o| o.affinity.to_list())
            .unwrap_or_default()
    };
    match action {
        Action::SetAffinity { task, cpus } => vec![Move {
            task: task.0,
            tid: None,
            from: aff(*task),
            to: cpus.intersection(online).to_list(),
            cpus_used: used(*task),
        }],
        Action::SetThreadAffinity { task, tid, cpus } => vec![Move {
            task: task.0,
            tid: Some(*tid),
            // The thread's own set where the observation has it, else its process's.
            from: obs
                .task(*task)
                .and_then(|o| o.code.as_ref())
                .and_then(|c| c.thread_affinity.get(tid))
                .map(|a| a.to_list())
                .unwrap_or_else(|| aff(*task)),
            to: cpus.intersection(online).to_list(),
            // A thread's share of its process's CPU time is the policy's to say.
            cpus_used: None,
        }],
        Action::Swap { a, b } => vec![
            Move {
                task: a.0,
                tid: None,
                from: aff(*a),
                to: aff(*b),
                cpus_used: used(*a),
            },
            Move {
                task: b.0,
                tid: None,
                from: aff(*b),
                to: aff(*a),
                cpus_used: used(*b),
            },
        ],
    }
}

/// The agent's side of the one driver loop ([`counterpoint_core::driver`]): paces a
/// simulated machine in wall time, logs every decision by its verdict, and says which apply
/// errors are transient.
struct AgentObserver<'a, E> {
    cfg: &'a LoopConfig,
    log: &'a mut Logger,
    transient: &'a dyn Fn(&E) -> bool,
    /// Failures already reported (task, reason): a repeat is logged at debug level only.
    reported: &'a mut std::collections::BTreeSet<(u64, String)>,
    /// The policy's reasons for the actions of the current interval.
    reasons: &'a std::cell::RefCell<Vec<(Action, String)>>,
    /// Dry run: the decisions said, to say each once.
    said: &'a mut Said,
}

/// Dry run: per task (and thread, for a thread-level action), the target set last said and
/// the interval it was (re)proposed in. A decision proposed again in the next interval with
/// the same target is not news: a dry run changes nothing, so the policy asks for it every
/// interval.
#[derive(Debug, Default)]
struct Said {
    last: std::collections::BTreeMap<(u64, Option<u64>), (String, u64)>,
    /// The interval of the last call (older entries are dropped once per interval).
    interval: u64,
}

impl Said {
    /// Whether proposing `to` for `key` in `interval` repeats the previous interval's
    /// proposal; remembered for the next interval.
    fn repeat(&mut self, key: (u64, Option<u64>), to: &str, interval: u64) -> bool {
        if interval != self.interval {
            // Only the previous interval's proposals can be repeated: forget older ones, or
            // a dry run over a thread pool remembers every thread it ever saw.
            self.last.retain(|_, (_, last)| *last + 1 >= interval);
        }
        let repeat = self
            .last
            .get(&key)
            .is_some_and(|(t, last)| t == to && last + 1 == interval);
        self.last.insert(key, (to.to_string(), interval));
        self.interval = interval;
        repeat
    }
}

/// The policy being run, keeping its reasons for the actions of each interval for the log.
struct Explained<'a> {
    inner: &'a mut dyn Policy,
    reasons: &'a std::cell::RefCell<Vec<(Action, String)>>,
}

impl Policy for Explained<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn required_events(&self) -> Vec<&'static str> {
        self.inner.required_events()
    }
    fn decide(
        &mut self,
        topology: &counterpoint_core::topology::Topology,
        observation: &Observation,
    ) -> Vec<Action> {
        let actions = self.inner.decide(topology, observation);
        *self.reasons.borrow_mut() = actions
            .iter()
            .filter_map(|a| self.inner.reason(a).map(|r| (a.clone(), r)))
            .collect();
        actions
    }
    fn reason(&self, action: &Action) -> Option<String> {
        self.inner.reason(action)
    }
    fn wants_code_heatmaps(&self) -> bool {
        self.inner.wants_code_heatmaps()
    }
}

/// The fields every decision line carries (`held`, `decision`, `action_failed`), then `extra`.
fn move_fields(
    d: &Decision<'_>,
    m: &Move,
    dry_run: bool,
    extra: Vec<(&'static str, Value)>,
) -> Vec<(&'static str, Value)> {
    let mut f = vec![
        ("interval", json!(d.interval)),
        ("policy", json!(d.policy)),
        ("action", json!(action_kind(d.action))),
        ("task", json!(m.task)),
    ];
    if let Some(tid) = m.tid {
        f.push(("tid", json!(tid)));
    }
    f.extend([
        ("from", json!(m.from)),
        ("to", json!(m.to)),
        ("dry_run", json!(dry_run)),
    ]);
    f.extend(extra);
    f
}

fn action_kind(action: &Action) -> &'static str {
    match action {
        Action::SetAffinity { .. } => "set_affinity",
        Action::SetThreadAffinity { .. } => "set_thread_affinity",
        Action::Swap { .. } => "swap",
    }
}

impl<M: Machine> Observer<M> for AgentObserver<'_, M::Error> {
    fn observed(&mut self, _machine: &M, _interval: u64, _observation: &Observation) {
        if self.cfg.real_time {
            let t0 = std::time::Instant::now();
            let want = std::time::Duration::from_nanos(self.cfg.interval_ns);
            while t0.elapsed() < want && !signals::stop_requested() {
                std::thread::sleep((want - t0.elapsed()).min(std::time::Duration::from_millis(50)));
            }
        }
    }

    fn decision(&mut self, d: &Decision<'_>) -> Result<(), M::Error> {
        let online = d.topology.online_cpus();
        match d.verdict {
            Verdict::Unchanged => {
                for m in moves(d.action, d.observation, &online) {
                    let mut f = vec![
                        ("interval", json!(d.interval)),
                        ("task", json!(m.task)),
                        ("cpus", json!(m.to)),
                    ];
                    if let Some(tid) = m.tid {
                        f.push(("tid", json!(tid)));
                    }
                    self.log.emit(
                        Level::Debug,
                        "unchanged",
                        "task already has the affinity the policy wants",
                        &f,
                    );
                }
            }
            Verdict::HeldBack { task, tid, since } => {
                for m in moves(d.action, d.observation, &online) {
                    let what = match tid {
                        Some(t) => format!("thread {t} of task {}", task.0),
                        None => format!("task {}", task.0),
                    };
                    let reason = format!(
                        "minimum residency: {what} was moved at interval {since}, {} interval(s) required",
                        self.cfg.min_residency
                    );
                    let fields =
                        move_fields(d, &m, self.cfg.dry_run, vec![("reason", json!(reason))]);
                    self.log
                        .emit(Level::Info, "held", "decision held back", &fields);
                }
            }
            Verdict::DryRun => self.log_decision(d, false),
            // Logged once applied; the host journals inside `apply`, before the change.
            Verdict::Apply => {}
        }
        Ok(())
    }

    fn applied(&mut self, d: &Decision<'_>) {
        self.log_decision(d, true);
    }

    fn failed(&mut self, d: &Decision<'_>, e: &M::Error) -> bool {
        if !(self.transient)(e) {
            return false;
        }
        let online = d.topology.online_cpus();
        // Forget the failures of tasks no longer observed, so the memory stays bounded by the
        // tasks alive (a reused pid then reports its first failure again, rightly).
        let live: std::collections::BTreeSet<u64> =
            d.observation.tasks.iter().map(|t| t.id.0).collect();
        self.reported.retain(|(t, _)| live.contains(t));
        for m in moves(d.action, d.observation, &online) {
            let first = self.reported.insert((m.task, e.to_string()));
            let fields = move_fields(
                d,
                &m,
                self.cfg.dry_run,
                vec![("reason", json!(e.to_string()))],
            );
            self.log.emit(
                if first { Level::Warn } else { Level::Debug },
                "action_failed",
                "action not applied; the agent goes on",
                &fields,
            );
        }
        true
    }
}

impl<E> AgentObserver<'_, E> {
    fn log_decision(&mut self, d: &Decision<'_>, applied: bool) {
        let online = d.topology.online_cpus();
        let policy_reason = self
            .reasons
            .borrow()
            .iter()
            .find(|(a, _)| a == d.action)
            .map(|(_, r)| r.clone());
        for m in moves(d.action, d.observation, &online) {
            let reason = match (&policy_reason, m.cpus_used) {
                (Some(r), _) => format!("{}: {r}", d.policy),
                (None, Some(u)) => format!(
                    "{} placement; task used {u:.2} CPUs in the interval",
                    d.policy
                ),
                (None, None) => format!("{} placement", d.policy),
            };
            let msg = match (applied, m.tid.is_some()) {
                (true, false) => "moved task",
                (true, true) => "moved thread",
                (false, false) => "would move task (dry run)",
                (false, true) => "would move thread (dry run)",
            };
            // A dry run's decision is said once; while the policy keeps proposing the same
            // move every interval (nothing is applied, so nothing changes) it is debug only.
            let mut level = Level::Info;
            if !applied && self.said.repeat((m.task, m.tid), &m.to, d.interval) {
                level = Level::Debug;
            }
            let fields = move_fields(
                d,
                &m,
                !applied,
                vec![("reason", json!(reason)), ("applied", json!(applied))],
            );
            self.log.emit(level, "decision", msg, &fields);
        }
    }
}

/// What runs after each interval (the host's safety-net sweep).
pub type AfterStep<'a, M> =
    dyn FnMut(&mut M, &mut Logger) -> Result<(), <M as Machine>::Error> + 'a;

/// The observe → decide → act loop on any [`Machine`], through the one driver
/// ([`counterpoint_core::driver::Driver`], the same loop `simulate` and the experiments use),
/// until a stop (signal, failed log write), `max_intervals`, every task finished, or an error.
/// `transient` says which apply errors are logged and skipped (a task that exited, a task
/// someone else owns); `after_step` runs after each interval (the host's safety-net sweep).
pub fn run_loop<M: Machine>(
    machine: &mut M,
    policy: &mut dyn Policy,
    cfg: &LoopConfig,
    log: &mut Logger,
    transient: &dyn Fn(&M::Error) -> bool,
    after_step: &mut AfterStep<'_, M>,
) -> Result<DriverReport, M::Error> {
    let mut driver = Driver::new(DriverConfig {
        interval_ns: cfg.interval_ns,
        min_residency_intervals: cfg.min_residency,
        dry_run: cfg.dry_run,
        max_intervals: cfg.max_intervals,
    })
    .with_stop_flag(signals::stop_flag());
    let mut report = DriverReport::new();
    let mut reported = std::collections::BTreeSet::new();
    let reasons = std::cell::RefCell::new(Vec::new());
    let mut said = Said::default();
    let mut policy = Explained {
        inner: policy,
        reasons: &reasons,
    };
    let panic_at: Option<u64> = std::env::var(PANIC_AT_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    report.stop = loop {
        if !log.check() {
            break StopReason::Stopped;
        }
        if panic_at == Some(driver.intervals()) {
            panic!("test hook {PANIC_AT_ENV}={}", driver.intervals());
        }
        let mut observer = AgentObserver {
            cfg,
            log: &mut *log,
            transient,
            reported: &mut reported,
            reasons: &reasons,
            said: &mut said,
        };
        let stepped = driver.step(machine, &mut policy, &mut observer, &mut report);
        match stepped {
            Ok(None) => {}
            Ok(Some(reason)) => break reason,
            Err(DriverError::Machine(e)) => return Err(e),
            // The interval was checked positive when it was parsed.
            Err(DriverError::ZeroInterval) => break StopReason::Stopped,
        }
        after_step(machine, log)?;
    };
    if report.stop == StopReason::AllFinished {
        log.emit(
            Level::Info,
            "all_finished",
            "every task finished",
            &[("interval", json!(driver.intervals() + 1))],
        );
    }
    Ok(report)
}

/// Log a restore report: counts as fields, the per-thread detail as one JSON string.
pub fn log_restore(log: &mut Logger, event: &str, signal: Option<i32>, r: &RestoreReport) {
    let detail = json!({
        "restored": r.restored.iter().map(|(t, s)| json!({"tid": t, "cpus": s.to_list()})).collect::<Vec<_>>(),
        "left_alone": r.left_alone.iter().map(|(t, s)| json!({"tid": t, "cpus": s.to_list()})).collect::<Vec<_>>(),
        "gone": r.gone,
        "failed": r.failed.iter().map(|(t, e)| json!({"tid": t, "error": e})).collect::<Vec<_>>(),
    });
    let (level, msg) = if r.failed.is_empty() {
        (Level::Info, "affinities restored from the journal")
    } else {
        (Level::Error, "some affinities could not be restored")
    };
    let mut fields = signal_field(signal);
    fields.extend([
        ("restored", json!(r.restored.len())),
        ("left_alone", json!(r.left_alone.len())),
        ("gone", json!(r.gone.len())),
        ("failed", json!(r.failed.len())),
        ("detail", json!(detail.to_string())),
    ]);
    log.emit(level, event, msg, &fields);
    if let Some(e) = &r.clear_failed {
        log.emit(
            Level::Error,
            "clear_failed",
            "affinities are restored, but clearing the journal failed (the next start restores again, which is harmless)",
            &[("error", json!(e))],
        );
    }
}

/// The `signal` field of a stop line: the signal's name when one ended the agent, nothing when
/// it stopped on its own (`--max-intervals`, `--restore-only`; an empty name said nothing).
fn signal_field(signal: Option<i32>) -> Vec<(&'static str, Value)> {
    signal
        .map(|s| vec![("signal", json!(signals::name(s)))])
        .unwrap_or_default()
}

/// Restore what the journal at `path` records, and exit (`agent --restore-only`).
/// The journal must exist: a missing one is a wrong path, refused (nothing is created).
pub fn restore_only(path: &std::path::Path, log: &mut Logger) -> Result<Outcome, AgentError> {
    let mut j = Journal::open_existing(path)?;
    let online = crate::affinity::online_cpus();
    let r = j.restore_all(&online);
    log_restore(log, "restored", None, &r);
    Ok(Outcome {
        restore: Some(r),
        ..Default::default()
    })
}

/// What the agent on the host needs.
#[derive(Clone, Debug)]
pub struct HostAgentConfig {
    /// Which processes.
    pub targets: TargetSpec,
    /// The `--targets` text, for messages.
    pub targets_text: String,
    /// The journal.
    pub journal: PathBuf,
    /// The loop.
    pub loop_cfg: LoopConfig,
    /// Read every thread every interval, even of a process that did not run (turns the idle
    /// gate off; see [`crate::taskstats`]).
    pub read_every_thread: bool,
    /// How to sample code heatmaps, for a policy that reads them (others sample nothing).
    pub code: crate::code::CodeSamplingConfig,
}

/// The pids of `pids` that cannot be watched: those with no process (or a zombie), and those
/// that are kernel threads (no user threads to place or count), as text.
pub fn unwatchable_pids(proc_: &crate::procfs::Proc, pids: &[u32]) -> (Vec<String>, Vec<String>) {
    let (mut missing, mut kernel) = (Vec::new(), Vec::new());
    for &p in pids {
        match proc_.stat(p) {
            None => missing.push(p.to_string()),
            Some(st) if matches!(st.state, 'Z' | 'X') => missing.push(p.to_string()),
            Some(st) if crate::procfs::is_kernel_stat(p, Some(&st)) => kernel.push(p.to_string()),
            Some(_) => {}
        }
    }
    (missing, kernel)
}

/// The error for a pid list of which nothing can be watched (`unwatchable_pids` gave every
/// pid), naming why; `None` when some pid can be. `agent` and `top` say the same.
pub fn no_watchable_pid(
    spec: &str,
    pids: &[u32],
    missing: &[String],
    kernel: &[String],
) -> Option<AgentError> {
    if missing.len() + kernel.len() < pids.len() {
        return None;
    }
    let mut why = Vec::new();
    if !missing.is_empty() {
        why.push(format!("no such process ({})", missing.join(", ")));
    }
    if !kernel.is_empty() {
        why.push(format!(
            "kernel thread, no user threads to place or count ({})",
            kernel.join(", ")
        ));
    }
    Some(AgentError::NoTargets {
        spec: spec.to_string(),
        missing: why.join("; "),
    })
}

/// Refuse a pid list none of whose processes exists; warn about the missing ones, and about a
/// spec that selects nothing now.
fn check_targets(cfg: &HostAgentConfig, log: &mut Logger) -> Result<(), AgentError> {
    let proc_ = crate::procfs::Proc::default();
    if let TargetSpec::Pids(pids) = &cfg.targets {
        let (missing, kernel) = unwatchable_pids(&proc_, pids);
        if let Some(err) = no_watchable_pid(&cfg.targets_text, pids, &missing, &kernel) {
            return Err(err);
        }
        if !missing.is_empty() {
            log.emit(
                Level::Warn,
                "targets_missing",
                "some target processes do not exist",
                &[("missing", json!(missing.join(",")))],
            );
        }
        if !kernel.is_empty() {
            log.emit(
                Level::Warn,
                "targets_kernel",
                "some targets are kernel threads, which have no user threads to place: not watched",
                &[("kernel", json!(kernel.join(",")))],
            );
        }
    } else if cfg.targets.select(&proc_, std::process::id()).is_empty() {
        log.emit(
            Level::Warn,
            "no_targets",
            "no process matches the targets now: the agent watches nothing until one does",
            &[("targets", json!(cfg.targets_text))],
        );
    }
    Ok(())
}

/// The agent on this host: checks everything that can be refused before anything changes,
/// restores a journal left by a killed agent, runs the loop, and always restores at the end.
pub fn run_on_host(
    cfg: HostAgentConfig,
    policy: &mut dyn Policy,
    log: &mut Logger,
) -> Result<Outcome, AgentError> {
    run_on_host_with(cfg, None, policy, log)
}

/// [`run_on_host`], counting through `source` (a broker) when one is given.
pub fn run_on_host_with(
    cfg: HostAgentConfig,
    source: Option<Box<dyn crate::perf::CounterSource>>,
    policy: &mut dyn Policy,
    log: &mut Logger,
) -> Result<Outcome, AgentError> {
    // Caught from the start: a signal during start-up also ends through the restore path.
    signals::install()?;
    check_targets(&cfg, log)?;
    let online = crate::affinity::online_cpus();
    let journal = if cfg.loop_cfg.dry_run {
        None
    } else {
        let mut j = Journal::open(&cfg.journal)?;
        if j.has_entries() {
            log.emit(
                Level::Warn,
                "recovering",
                "a previous agent left changes in its journal; restoring them first",
                &[("journal", json!(j.path().display().to_string()))],
            );
            let r = j.restore_all(&online);
            log_restore(log, "recovered", None, &r);
        }
        Some(j)
    };
    let journal_path = journal.as_ref().map(|j| j.path().display().to_string());
    let mut host = Host::with_source(cfg.targets.clone(), journal, source)?;
    if cfg.read_every_thread {
        host.set_idle_gate(false);
    }
    if !cfg.loop_cfg.dry_run {
        host.check_permissions().map_err(AgentError::Permission)?;
    }
    host.set_stop_flag(signals::stop_flag());
    // The IP sampler runs only for a policy that reads its heatmaps.
    let code = policy
        .wants_code_heatmaps()
        .then(|| host.enable_code_heatmaps(cfg.code));
    let src = host.counter_sources();
    log.emit(
        Level::Info,
        "start",
        "agent started",
        &[
            ("policy", json!(policy.name())),
            ("interval_ns", json!(cfg.loop_cfg.interval_ns)),
            ("dry_run", json!(cfg.loop_cfg.dry_run)),
            ("targets", json!(cfg.targets_text)),
            (
                "journal",
                json!(journal_path.unwrap_or_else(|| {
                    "none (dry run: nothing is changed, so no journal is used)".to_string()
                })),
            ),
            ("online", json!(online.to_list())),
            ("pid", json!(std::process::id())),
            ("events", json!(host.counted_events().join(","))),
            ("counters", json!(src.via)),
            ("perf_threads", json!(src.perf_threads)),
            ("proc_threads", json!(src.proc_threads)),
            (
                "perf_off",
                json!(src.perf_off_reason.as_deref().unwrap_or("")),
            ),
            // Why threads are on /proc although perf_event works (a broker refusing groups).
            (
                "open_refused",
                json!(src.open_refused.as_deref().unwrap_or("")),
            ),
            (
                "threads",
                json!(src.thread_counting()),
            ),
            (
                "idle_gate",
                json!(match &src.idle_gate_off {
                    None if src.idle_gate_precise =>
                        "on: threads of a process that did not run are not read".to_string(),
                    None => "on: threads of a process that did not run are not read (by switch counts and tick-charged CPU time: this kernel's taskstats carry no delay-accounting fields)".to_string(),
                    Some(why) => format!("off: {why}"),
                }),
            ),
            (
                "thread_gate",
                json!(match (src.thread_gate, src.control_pages) {
                    (false, _) => "off: turned off".to_string(),
                    (true, 0) if src.inherited_processes > 0 => "off: inherited groups have no control page (each group of a process that ran is read)".to_string(),
                    (true, 0) => "off: no thread's control page could be mapped (each thread of a process that ran is read)".to_string(),
                    (true, n) => format!(
                        "on: {n} of {} threads: a thread idle at its last read whose control page shows no switch since is not read",
                        src.perf_threads + src.proc_threads
                    ),
                }),
            ),
            (
                "exit_watch",
                json!(match &src.exit_watch_off {
                    None => "on: a process whose thread exited is re-listed at once".to_string(),
                    Some(why) => format!(
                        "off: {why}; threads replaced at an unchanged count are found within {} intervals",
                        crate::machine::RELIST_INTERVALS
                    ),
                }),
            ),
            (
                "code_heatmaps",
                match &code {
                    None => json!("off (the policy reads none)"),
                    Some(c) => json!(format!(
                        "cpu-clock IP sampling every {} us of each thread's CPU time; syscalls {}{}",
                        c.period_ns / 1000,
                        match &c.syscalls_missing {
                            None => "visible (raw_syscalls tracepoints)".to_string(),
                            Some(why) => format!("not visible: {why}"),
                        },
                        c.kernel_refused
                            .as_ref()
                            .map(|k| format!("; {k}"))
                            .unwrap_or_default()
                    )),
                },
            ),
        ],
    );
    // Whether the fallback from a broker to direct counting was logged: the start line names
    // the broker, and a log that never said it went away misled (CLI probe, session 27).
    let mut fallback_logged = host.source_fallback().is_some();
    let mut journal_taken_logged = false;
    // A panic (a policy bug) must not skip the restore either: it is caught, the affinities are
    // put back, and it is reported as an error.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_loop(
            &mut host,
            policy,
            &cfg.loop_cfg,
            &mut *log,
            // A task that exited, refused, or belongs to the user now does not stop the agent;
            // journal errors do.
            &|e| matches!(e, HostError::Affinity(_) | HostError::UserOwned(_)),
            &mut |h, log| {
                if !fallback_logged {
                    if let Some(why) = h.source_fallback() {
                        log.emit(
                            Level::Warn,
                            "counters_fallback",
                            "the counter broker was given up: this agent counts with its own perf_event groups from now on",
                            &[("reason", json!(why)), ("counters", json!("perf_event"))],
                        );
                        fallback_logged = true;
                    }
                }
                let sweep = h.sweep()?;
                match &sweep.relink {
                    crate::journal::Relink::Linked => journal_taken_logged = false,
                    crate::journal::Relink::Recreated => log.emit(
                        Level::Warn,
                        "journal_recreated",
                        "the journal file was deleted while the agent ran: written again at its path",
                        &[("journal", json!(h.journal_path()))],
                    ),
                    crate::journal::Relink::Taken if !journal_taken_logged => {
                        journal_taken_logged = true;
                        log.emit(
                            Level::Warn,
                            "journal_taken",
                            "another file took the journal's path: this agent keeps its records on its own, deleted file and restores on stop, but --restore-only after a crash cannot find them",
                            &[("journal", json!(h.journal_path()))],
                        );
                    }
                    crate::journal::Relink::Taken => {}
                    crate::journal::Relink::Failed(why) if !journal_taken_logged => {
                        journal_taken_logged = true;
                        log.emit(
                            Level::Warn,
                            "journal_lost",
                            "the journal file was deleted and could not be written again: this agent keeps its records on its own, deleted file and restores on stop, but --restore-only after a crash cannot find them",
                            &[("journal", json!(h.journal_path())), ("reason", json!(why))],
                        );
                    }
                    crate::journal::Relink::Failed(_) => {}
                }
                for a in &sweep.adopted {
                    log.emit(
                        Level::Info,
                        "adopted",
                        "a thread or child born after a pin inherited our set: journaled",
                        &[
                            ("pid", json!(a.pid)),
                            ("tid", json!(a.tid)),
                            ("from_pid", json!(a.from_pid)),
                            ("original", json!(a.original.to_list())),
                        ],
                    );
                }
                for g in &sweep.skipped {
                    log.emit(
                        Level::Info,
                        "thread_gone",
                        "the thread had exited before its move: skipped (not an error)",
                        &[
                            ("pid", json!(g.pid)),
                            ("tid", json!(g.tid)),
                            ("to", json!(g.cpus.to_list())),
                        ],
                    );
                }
                for o in &sweep.overrides {
                    log.emit(
                    Level::Warn,
                    "user_override",
                    "someone else set this task's affinity after the agent did: left alone from now on, not restored",
                    &[
                        ("pid", json!(o.pid)),
                        ("tid", json!(o.tid)),
                        ("ours", json!(o.ours.to_list())),
                        ("theirs", json!(o.theirs.to_list())),
                    ],
                );
                }
                Ok(())
            },
        )
    }));
    let result = match caught {
        Ok(Ok(report)) => {
            // Only a host with `pid:` targets finishes by itself: every listed process ended.
            if report.stop == StopReason::MachineFinished {
                log.emit(
                    Level::Info,
                    "targets_gone",
                    "every target process has exited: nothing is left to watch; restoring and exiting",
                    &[("targets", json!(cfg.targets_text))],
                );
            }
            Ok(report)
        }
        Ok(Err(e)) => Err(AgentError::from(e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(AgentError::Panicked(what))
        }
    };
    if let Err(e) = &result {
        log.emit(
            Level::Error,
            "loop_failed",
            "the agent loop failed; restoring",
            &[("error", json!(e.to_string()))],
        );
    }
    let restore = host.restore();
    let signal = signals::received();
    if cfg.loop_cfg.dry_run {
        // No journal, nothing changed: say so rather than "restored from the journal".
        log.emit(
            Level::Info,
            "stopped",
            "dry run ended: nothing was changed, so there is nothing to restore",
            &signal_field(signal),
        );
    } else {
        log_restore(log, "restored", signal, &restore);
    }
    result?;
    Ok(Outcome {
        signal,
        log_failed: log.failed().map(str::to_string),
        restore: Some(restore),
    })
}

/// The same loop on a machine that is not the host (the simulator run in real time): nothing on
/// the host changes and no journal is used.
pub fn run_on_machine<M: Machine>(
    machine: &mut M,
    policy: &mut dyn Policy,
    cfg: &LoopConfig,
    log: &mut Logger,
    describe: &[(&str, Value)],
) -> Result<Outcome, AgentError> {
    signals::install()?;
    let mut fields = vec![
        ("policy", json!(policy.name())),
        ("interval_ns", json!(cfg.interval_ns)),
        ("dry_run", json!(cfg.dry_run)),
    ];
    fields.extend(describe.iter().cloned());
    log.emit(
        Level::Info,
        "start",
        "agent started on a simulated machine",
        &fields,
    );
    let report = run_loop(machine, policy, cfg, log, &|_| false, &mut |_, _| Ok(()))
        .map_err(|e| AgentError::Machine(Box::new(e)))?;
    // A simulated machine finishes when its scenario's duration is over.
    if report.stop == StopReason::MachineFinished {
        log.emit(
            Level::Info,
            "machine_finished",
            "the simulated machine reached the end of its scenario's duration",
            &[("intervals", json!(report.intervals))],
        );
    }
    let signal = signals::received();
    log.emit(
        Level::Info,
        "stopped",
        "agent stopped",
        &signal_field(signal),
    );
    Ok(Outcome {
        signal,
        log_failed: log.failed().map(str::to_string),
        restore: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn log_lines_in_both_formats() {
        let buf = Buf::default();
        let mut l = Logger::new(Box::new(buf.clone()), true, Level::Info);
        l.emit(
            Level::Info,
            "decision",
            "moved task",
            &[("task", json!(7)), ("to", json!("1"))],
        );
        l.emit(Level::Debug, "unchanged", "hidden", &[]);
        let text = String::from_utf8(buf.0.lock().expect("lock").clone()).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let v: Value = serde_json::from_str(lines[0]).expect("json");
        assert_eq!(v["event"], "decision");
        assert_eq!(v["task"], 7);
        assert_eq!(v["level"], "INFO");
        let buf = Buf::default();
        let mut l = Logger::new(Box::new(buf.clone()), false, Level::Debug);
        l.emit(
            Level::Warn,
            "held",
            "held back",
            &[("dry_run", json!(true)), ("to", json!("0"))],
        );
        let text = String::from_utf8(buf.0.lock().expect("lock").clone()).expect("utf8");
        assert!(
            text.contains("WARN held back event=\"held\" dry_run=true to=\"0\""),
            "{text}"
        );
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_ms(1_795_000_000_000), "2026-11-18T11:06:40.000Z");
    }

    #[test]
    fn a_dry_run_says_each_decision_once_with_the_policys_reason() {
        use counterpoint_core::testutils::ScriptedMachine;
        // Two hungry tasks on a 2-package machine; nothing is applied, so spread proposes the
        // same two moves every interval.
        let mut machine = ScriptedMachine::new(2, 1, 1, 2);
        let mut policy = counterpoint_policy::spread::Spread::default();
        let buf = Buf::default();
        let mut log = Logger::new(Box::new(buf.clone()), true, Level::Info);
        let cfg = LoopConfig {
            interval_ns: 1_000_000_000,
            min_residency: 3,
            dry_run: true,
            max_intervals: Some(5),
            real_time: false,
        };
        let report = run_loop(
            &mut machine,
            &mut policy,
            &cfg,
            &mut log,
            &|_| false,
            &mut |_, _| Ok(()),
        )
        .expect("loop");
        assert_eq!(report.intervals, 5);
        assert!(machine.applied.is_empty(), "a dry run applied something");
        let text = String::from_utf8(buf.0.lock().expect("lock").clone()).expect("utf8");
        let decisions: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .filter(|v| v["event"] == "decision")
            .collect();
        // Once per task, in interval 1, not five times.
        assert_eq!(decisions.len(), 2, "{text}");
        for d in &decisions {
            assert_eq!(d["interval"], 1, "{d}");
            let r = d["reason"].as_str().expect("reason");
            assert!(r.starts_with("spread: hungry: used 1.00 CPUs"), "{r}");
        }
        // At debug level the repeats are there (nothing is hidden, only demoted).
        let mut machine = ScriptedMachine::new(2, 1, 1, 2);
        let mut policy = counterpoint_policy::spread::Spread::default();
        let buf = Buf::default();
        let mut log = Logger::new(Box::new(buf.clone()), true, Level::Debug);
        run_loop(
            &mut machine,
            &mut policy,
            &cfg,
            &mut log,
            &|_| false,
            &mut |_, _| Ok(()),
        )
        .expect("loop");
        let text = String::from_utf8(buf.0.lock().expect("lock").clone()).expect("utf8");
        assert_eq!(text.matches("\"event\":\"decision\"").count(), 10, "{text}");
    }

    /// Places two threads of task 1 apart, with a reason per thread.
    struct SplitThreads;
    impl Policy for SplitThreads {
        fn name(&self) -> &str {
            "split"
        }
        fn required_events(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn decide(
            &mut self,
            _t: &counterpoint_core::topology::Topology,
            _o: &Observation,
        ) -> Vec<Action> {
            (0..2)
                .map(|i| Action::SetThreadAffinity {
                    task: TaskId(1),
                    tid: 10 + i,
                    cpus: CpuSet::single(i as u32),
                })
                .collect()
        }
        fn reason(&self, action: &Action) -> Option<String> {
            action
                .thread()
                .map(|t| format!("thread {t} runs role {}", t - 10))
        }
    }

    #[test]
    fn a_dry_run_says_each_thread_decision_once_with_its_reason() {
        use counterpoint_core::testutils::ScriptedMachine;
        let mut machine = ScriptedMachine::new(1, 2, 1, 1);
        let buf = Buf::default();
        let mut log = Logger::new(Box::new(buf.clone()), true, Level::Info);
        let cfg = LoopConfig {
            interval_ns: 1_000_000_000,
            min_residency: 3,
            dry_run: true,
            max_intervals: Some(4),
            real_time: false,
        };
        run_loop(
            &mut machine,
            &mut SplitThreads,
            &cfg,
            &mut log,
            &|_| false,
            &mut |_, _| Ok(()),
        )
        .expect("loop");
        assert!(machine.applied.is_empty());
        let text = String::from_utf8(buf.0.lock().expect("lock").clone()).expect("utf8");
        let decisions: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .filter(|v| v["event"] == "decision")
            .collect();
        // Two threads of one task: two decisions (one per thread, not one per task), once.
        assert_eq!(decisions.len(), 2, "{text}");
        for (i, d) in decisions.iter().enumerate() {
            assert_eq!(d["interval"], 1, "{d}");
            assert_eq!(d["action"], "set_thread_affinity", "{d}");
            assert_eq!(d["task"], 1, "{d}");
            assert_eq!(d["tid"], 10 + i as u64, "{d}");
            assert_eq!(d["to"], i.to_string(), "{d}");
            assert_eq!(d["message"], "would move thread (dry run)", "{d}");
            assert_eq!(
                d["reason"],
                format!("split: thread {} runs role {i}", 10 + i),
                "{d}"
            );
        }
    }

    /// A dry run over a thread pool proposes a new thread every interval: what was said
    /// intervals ago can no longer be repeated and is forgotten.
    #[test]
    fn said_decisions_are_repeats_only_in_the_next_interval_and_are_forgotten_after() {
        let mut s = Said::default();
        assert!(!s.repeat((1, Some(10)), "0", 1));
        assert!(s.repeat((1, Some(10)), "0", 2));
        assert!(!s.repeat((1, Some(10)), "1", 3), "a new target is news");
        assert!(
            !s.repeat((1, Some(10)), "1", 5),
            "after a gap it is news again"
        );
        assert!(
            !s.repeat((1, None), "1", 5),
            "the process is not its thread"
        );
        for i in 6..1000 {
            assert!(!s.repeat((1, Some(i)), "0", i));
        }
        assert!(s.last.len() <= 2, "{}", s.last.len());
    }
}
