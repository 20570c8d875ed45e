//! Opening parsed events on a target and reading them.
//!
//! Counters are opened with `perf-event2` (one `perf_event_open` per event and target instance,
//! groups through their leader) and read with one `read(2)` of `{value, time_enabled,
//! time_running}` into a stack buffer, so the hot path allocates nothing and costs what the
//! kernel costs. Targets:
//! - a command: the child is forked stopped before `exec` (it blocks on a pipe), counters are
//!   opened on it with `inherit` and `enable_on_exec`, then the child is released; counting starts
//!   at `exec` and covers every thread and process it creates;
//! - threads: every thread in `/proc/PID/task` at start, each with `inherit`, so threads and
//!   processes those threads create later are counted too (the kernel folds inherited counts into
//!   the parent counter); threads created during setup are picked up by rescanning
//!   ([`CounterSet::add_threads`]) until a rescan finds none;
//! - thread trees: threads with `inherit` and `inherit_thread`, so the threads they start later
//!   count, and the processes they fork do not (the live host through a broker);
//! - CPUs: one counter per CPU for every task on it (`-a`, `-C`).
//!
//! An event the kernel refuses with ENOENT/EOPNOTSUPP/ENODEV/EINVAL is kept as not supported with
//! the reason; permission errors are fatal and name `perf_event_paranoid`.

use crate::pmu::PmuTree;
use crate::spec::{EventList, EventSpec, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW};
use counterpoint_core::sample::CounterValue;
use perf_event::events::Raw;
use perf_event::{Builder, Counter, ReadFormat};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use thiserror::Error;

/// Where `perf_event_paranoid` lives; named in permission errors.
pub const PARANOID_PATH: &str = "/proc/sys/kernel/perf_event_paranoid";

/// Errors that stop counting altogether.
#[derive(Debug, Error)]
pub enum CountError {
    #[error("permission denied opening '{event}' ({errno}): {PARANOID_PATH} is {}; run as root or lower it (sysctl kernel.perf_event_paranoid=-1)", .paranoid.map(|p| p.to_string()).unwrap_or_else(|| "unreadable".into()))]
    /// The kernel refused permission (`EACCES`/`EPERM`).
    Permission {
        /// The event as written.
        event: String,
        /// `EACCES` or `EPERM`.
        errno: &'static str,
        /// `perf_event_paranoid`, if readable.
        paranoid: Option<i32>,
    },
    #[error("no such process: {pid}")]
    /// The target process does not exist (or exited).
    NoSuchProcess {
        /// The process id asked for.
        pid: i32,
    },
    #[error("cannot list threads of process {pid} in /proc/{pid}/task: {error}")]
    /// `/proc/PID/task` could not be listed.
    Threads {
        /// The process.
        pid: i32,
        /// What the listing failed with.
        error: io::Error,
    },
    #[error("cannot open '{event}': out of file descriptors (one per event and thread or CPU; the limit is {limit}, raise it with `ulimit -n`)")]
    /// Out of file descriptors (`EMFILE`/`ENFILE`).
    TooManyFiles {
        /// The event that did not open.
        event: String,
        /// The soft `RLIMIT_NOFILE`, as text (`unknown` if unreadable).
        limit: String,
    },
    #[error("cannot open '{event}': {error}")]
    /// Any other open failure.
    Open {
        /// The event that did not open.
        event: String,
        /// The kernel's error.
        error: io::Error,
    },
    #[error("cannot run '{program}': {error}")]
    /// The command could not be started.
    Exec {
        /// The program (first word of the command).
        program: String,
        /// Why `exec` failed.
        error: io::Error,
    },
    #[error("{what}: {error}")]
    /// A system call around counting failed.
    Os {
        /// What was being done.
        what: &'static str,
        /// The error.
        error: io::Error,
    },
    /// No command was given.
    #[error("empty command")]
    EmptyCommand,
}

/// What to count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A process started by us, not yet exec'd: counters inherit and enable on exec.
    Child(i32),
    /// These threads (and what they create afterwards).
    Threads(Vec<i32>),
    /// These threads and the threads they start afterwards, and those start, and so on, but
    /// not the processes any of them forks (`inherit_thread`, Linux 5.13; the kernel refuses
    /// it before, and the events are then not supported): the live host's per-process count,
    /// where each thread a process had when first read counts every thread started since.
    ThreadTrees(Vec<i32>),
    /// Every task on these CPUs.
    Cpus(Vec<usize>),
}

impl Target {
    /// Every thread of process `pid` now (from `/proc/PID/task`).
    pub fn process(pid: i32) -> Result<Target, CountError> {
        Self::process_in(Path::new("/proc"), pid)
    }

    /// As [`Target::process`] with the procfs root as a parameter (tests).
    pub fn process_in(proc_root: &Path, pid: i32) -> Result<Target, CountError> {
        let tids = crate::tasks::thread_ids(proc_root, pid).map_err(|error| {
            if error.kind() == io::ErrorKind::NotFound {
                CountError::NoSuchProcess { pid }
            } else {
                CountError::Threads { pid, error }
            }
        })?;
        if tids.is_empty() {
            return Err(CountError::NoSuchProcess { pid });
        }
        Ok(Target::Threads(tids))
    }
}

/// Whether sysfs shows a core hardware PMU (x86 `cpu`, hybrid `cpu_core`/`cpu_atom`, Arm).
pub fn has_hardware_pmu(tree: &PmuTree) -> bool {
    tree.list().iter().any(|p| {
        p == "cpu"
            || p == "cpu_core"
            || p == "cpu_atom"
            || p.starts_with("armv")
            || p.starts_with("arm_cortex")
    })
}

/// Reads `perf_event_paranoid`, if readable.
pub fn read_paranoid() -> Option<i32> {
    std::fs::read_to_string(PARANOID_PATH)
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// The soft limit on open descriptors, if known.
pub fn fd_limit() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes a plain struct we own.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0).then_some(rl.rlim_cur)
}

/// What an open failure means for one event.
#[derive(Debug)]
pub enum OpenFailure {
    /// Keep going; print `<not supported>` with this reason.
    NotSupported(String),
    /// Stop.
    Fatal(CountError),
}

/// Classify a `perf_event_open` error for `spec` (pure: the caller passes what it knows).
pub fn classify_open_error(
    err: io::Error,
    spec: &EventSpec,
    target_pid: Option<i32>,
    hw_pmu: bool,
    paranoid: Option<i32>,
) -> OpenFailure {
    let errno = err.raw_os_error().unwrap_or(0);
    let needs_pmu = matches!(spec.type_, TYPE_HARDWARE | TYPE_HW_CACHE | TYPE_RAW);
    match errno {
        libc::EACCES | libc::EPERM => OpenFailure::Fatal(CountError::Permission {
            event: spec.name.clone(),
            errno: if errno == libc::EACCES {
                "EACCES"
            } else {
                "EPERM"
            },
            paranoid,
        }),
        libc::ESRCH => OpenFailure::Fatal(CountError::NoSuchProcess {
            pid: target_pid.unwrap_or(-1),
        }),
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL if needs_pmu && !hw_pmu => {
            OpenFailure::NotSupported("no hardware PMU on this machine".into())
        }
        libc::ENOENT => {
            OpenFailure::NotSupported("the kernel does not know this event (ENOENT)".into())
        }
        libc::EOPNOTSUPP => OpenFailure::NotSupported(
            "the PMU cannot count this event with these settings (EOPNOTSUPP)".into(),
        ),
        libc::ENODEV => {
            OpenFailure::NotSupported("no such PMU device for this CPU (ENODEV)".into())
        }
        libc::EINVAL => {
            OpenFailure::NotSupported("the kernel rejected the event's attributes (EINVAL)".into())
        }
        libc::EMFILE | libc::ENFILE => OpenFailure::Fatal(CountError::TooManyFiles {
            event: spec.name.clone(),
            limit: fd_limit().map_or_else(|| "unknown".into(), |l| l.to_string()),
        }),
        _ => OpenFailure::Fatal(CountError::Open {
            event: spec.name.clone(),
            error: err,
        }),
    }
}

/// State of one event after opening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Opened: the event is being counted.
    Counting,
    /// Not countable here, with the reason.
    NotSupported(String),
}

/// One event's reading, summed over the target's instances.
#[derive(Clone, Debug, PartialEq)]
pub struct EventReading {
    /// The event.
    pub spec: EventSpec,
    /// `None` when the event is not supported.
    pub value: Option<CounterValue>,
    /// Whether it was counted.
    pub status: Status,
}

impl EventReading {
    /// Count scaled for multiplexing, then by the event's unit scale (`msec`, `Joules`).
    pub fn display_value(&self) -> Option<f64> {
        self.value
            .as_ref()
            .and_then(CounterValue::scaled)
            .map(|v| v * self.spec.scale)
    }
    /// Percentage of the enabled time the counter ran; `None` for a counter that was never
    /// enabled and counted nothing (e.g. an interval of `stat -I` in which the task did not
    /// run, which the text shows as `<not counted>`: "100 %" of no time said otherwise). One
    /// enabled but never run (multiplexed out) ran 0 % of its time.
    pub fn counted_percent(&self) -> Option<f64> {
        self.value
            .as_ref()
            .filter(|v| v.time_enabled_ns > 0 || v.time_running_ns > 0 || v.raw != 0)
            .map(|v| 100.0 * v.counted_fraction())
    }
}

/// One `read(2)` of `{value, time_enabled, time_running}` from a counter opened with
/// `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING` (and without `GROUP`). No allocation.
#[inline]
pub fn read_fd(fd: RawFd) -> io::Result<CounterValue> {
    let mut buf = [0u64; 3];
    let n = crate::sys::read_words(fd, &mut buf)?;
    if n != std::mem::size_of_val(&buf) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short counter read: {n} bytes"),
        ));
    }
    Ok(CounterValue {
        raw: buf[0],
        time_enabled_ns: buf[1],
        time_running_ns: buf[2],
    })
}

/// One `read(2)` of a whole group opened with `GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`
/// into a caller's stack buffer: `{nr, time_enabled, time_running, value[nr]}`. Fills `out` and
/// returns the number of members read.
#[inline]
pub fn read_group_fd(fd: RawFd, out: &mut [CounterValue]) -> io::Result<usize> {
    const MAX: usize = 16;
    let mut buf = [0u64; 3 + MAX];
    let n = crate::sys::read_words(fd, &mut buf)?;
    let nr = (buf[0] as usize).min(MAX).min(out.len());
    if n < (3 + nr) * 8 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short group read: {n} bytes"),
        ));
    }
    for (i, slot) in out.iter_mut().take(nr).enumerate() {
        *slot = CounterValue {
            raw: buf[3 + i],
            time_enabled_ns: buf[1],
            time_running_ns: buf[2],
        };
    }
    Ok(nr)
}

/// Builder configured for `spec` (type, config words, privilege filters, time fields).
pub fn builder_for(spec: &EventSpec) -> Builder<'static> {
    let mut b = Builder::new(
        Raw::new(spec.config)
            .config1(spec.config1)
            .config2(spec.config2),
    );
    b.attrs_mut().type_ = spec.type_;
    b.exclude_user(spec.exclude_user)
        .exclude_kernel(spec.exclude_kernel)
        .exclude_hv(spec.exclude_hv)
        .read_format(ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING)
        .enabled(false);
    b
}

/// The list as `perf` retries it when the kernel refuses kernel-mode counting to an
/// unprivileged user (`perf_event_paranoid` >= 2): every event that counts user mode and did not
/// already exclude the kernel becomes user-only (`:u`). `None` when nothing would change.
pub fn user_only(list: &EventList) -> Option<EventList> {
    let mut out = list.clone();
    let mut changed = false;
    for g in &mut out.groups {
        for e in &mut g.members {
            if e.exclude_user || e.exclude_kernel || e.type_ == crate::spec::TYPE_TRACEPOINT {
                continue;
            }
            e.exclude_kernel = true;
            e.exclude_hv = true;
            if !e.name.contains(':') {
                e.name.push_str(":u");
            }
            changed = true;
        }
    }
    changed.then_some(out)
}

/// Record why member `i` of a group of `len` did not open; a leader's reason covers the members.
fn note_not_supported(reasons: &mut [Option<String>], i: usize, len: usize, name: &str, r: String) {
    if i == 0 && len > 1 {
        for (j, slot) in reasons.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = Some(if j == 0 {
                    r.clone()
                } else {
                    format!("group leader '{name}' not supported: {r}")
                });
            }
        }
    } else if reasons[i].is_none() {
        reasons[i] = Some(r);
    }
}

/// Open counters for an event list on a target.
pub struct CounterSet {
    /// The list actually opened (after a user-only fallback, the `:u` one).
    list: EventList,
    specs: Vec<EventSpec>,
    status: Vec<Status>,
    /// Per event, one counter per target instance (thread or CPU) that opened, with the
    /// instance it counts (for `--per-thread` and `-A`).
    counters: Vec<Vec<(Instance, Counter)>>,
}

/// One target instance a counter was opened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Instance {
    /// A thread (or the started command), by id.
    Thread(i32),
    /// A CPU, by number.
    Cpu(usize),
}

/// One event's value on one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceReading {
    /// The thread or CPU.
    pub instance: Instance,
    /// Its count.
    pub value: CounterValue,
}

impl CounterSet {
    /// Open every event on the target. Unsupported events are kept with their reason. Where the
    /// kernel refuses permission, the list is retried user-only as `perf` does ([`user_only`]);
    /// the readings' names then carry `:u`.
    pub fn open(
        list: &EventList,
        target: &Target,
        tree: &PmuTree,
    ) -> Result<CounterSet, CountError> {
        let first = Self::open_exact(list, target, tree);
        if let Err(CountError::Permission { .. }) = &first {
            if let Some(u) = user_only(list) {
                return Self::open_exact(&u, target, tree);
            }
        }
        first
    }

    /// As [`CounterSet::open`] without the user-only retry.
    pub fn open_exact(
        list: &EventList,
        target: &Target,
        tree: &PmuTree,
    ) -> Result<CounterSet, CountError> {
        let hw_pmu = has_hardware_pmu(tree);
        let paranoid = read_paranoid();
        let mut specs = Vec::new();
        let mut status = Vec::new();
        let mut counters: Vec<Vec<(Instance, Counter)>> = Vec::new();
        let instances: Vec<(Option<i32>, Option<usize>)> = match target {
            Target::Child(pid) => vec![(Some(*pid), None)],
            Target::Threads(t) | Target::ThreadTrees(t) => {
                t.iter().map(|&p| (Some(p), None)).collect()
            }
            Target::Cpus(c) => c.iter().map(|&c| (None, Some(c))).collect(),
        };
        let on_child = matches!(target, Target::Child(_));
        let follow = !matches!(target, Target::Cpus(_));
        let threads_only = matches!(target, Target::ThreadTrees(_));
        for group in &list.groups {
            let base = specs.len();
            for m in &group.members {
                specs.push(m.clone());
                status.push(Status::Counting);
                counters.push(Vec::new());
            }
            let mut reasons: Vec<Option<String>> = vec![None; group.members.len()];
            for &(pid, cpu) in &instances {
                let inst = match (pid, cpu) {
                    (_, Some(c)) => Instance::Cpu(c),
                    (Some(p), None) => Instance::Thread(p),
                    (None, None) => Instance::Thread(-1),
                };
                let mut leader: Option<Counter> = None;
                for (i, spec) in group.members.iter().enumerate() {
                    if let (Some(cpu), Some(cpus)) = (cpu, &spec.cpus) {
                        // Hybrid and uncore PMUs only exist on some CPUs.
                        if !cpus.contains(cpu as u32) {
                            continue;
                        }
                    }
                    if let Some(r) = &spec.unavailable {
                        // Known before any open (no vendor event for an abstract name).
                        let r = r.clone();
                        note_not_supported(&mut reasons, i, group.members.len(), &spec.name, r);
                        continue;
                    }
                    let mut b = builder_for(spec);
                    match pid {
                        Some(p) => b.observe_pid(p),
                        None => b.any_pid(),
                    };
                    match cpu {
                        Some(c) => b.one_cpu(c),
                        None => b.any_cpu(),
                    };
                    b.inherit(follow)
                        .inherit_thread(threads_only)
                        .enable_on_exec(on_child);
                    let opened = if i == 0 {
                        b.build()
                    } else {
                        match leader.as_mut() {
                            Some(l) => b.build_with_group(l),
                            None => continue,
                        }
                    };
                    match opened {
                        Ok(c) => {
                            if i == 0 {
                                leader = Some(c);
                            } else {
                                counters[base + i].push((inst, c));
                            }
                        }
                        Err(e) => {
                            // A thread that exited between the scan and the open is not an error.
                            if e.raw_os_error() == Some(libc::ESRCH)
                                && matches!(target, Target::Threads(t) | Target::ThreadTrees(t) if t.len() > 1)
                            {
                                continue;
                            }
                            match classify_open_error(e, spec, pid, hw_pmu, paranoid) {
                                OpenFailure::Fatal(err) => return Err(err),
                                OpenFailure::NotSupported(r) => note_not_supported(
                                    &mut reasons,
                                    i,
                                    group.members.len(),
                                    &spec.name,
                                    r,
                                ),
                            }
                        }
                    }
                }
                if let Some(l) = leader {
                    counters[base].push((inst, l));
                }
            }
            for (i, r) in reasons.into_iter().enumerate() {
                if counters[base + i].is_empty() {
                    status[base + i] = Status::NotSupported(
                        r.unwrap_or_else(|| "no CPU of the target has this event's PMU".into()),
                    );
                }
            }
        }
        Ok(CounterSet {
            list: list.clone(),
            specs,
            status,
            counters,
        })
    }

    /// Open the same events on more threads (found by a rescan of `/proc/PID/task`), enable
    /// them and fold them into this set. Threads that exited meanwhile are skipped.
    pub fn add_threads(&mut self, tids: &[i32], tree: &PmuTree) -> Result<usize, CountError> {
        let mut added = 0;
        for &tid in tids {
            let mut more =
                match CounterSet::open_exact(&self.list, &Target::Threads(vec![tid]), tree) {
                    Ok(m) => m,
                    Err(CountError::NoSuchProcess { .. }) => continue,
                    Err(e) => return Err(e),
                };
            if more.specs.len() != self.specs.len() {
                return Err(CountError::Os {
                    what: "adding threads with a different event list",
                    error: io::Error::from(io::ErrorKind::InvalidInput),
                });
            }
            more.enable()?;
            for (i, cs) in more.counters.into_iter().enumerate() {
                if self.status[i] == Status::Counting {
                    self.counters[i].extend(cs);
                }
            }
            added += 1;
        }
        Ok(added)
    }

    /// Start counting now (threads and CPUs; a child starts at its `exec`).
    pub fn enable(&mut self) -> Result<(), CountError> {
        for (_, c) in self.counters.iter_mut().flatten() {
            c.enable().map_err(|error| CountError::Os {
                what: "enabling a counter",
                error,
            })?;
        }
        Ok(())
    }

    /// Stop counting (values stay readable).
    pub fn disable(&mut self) -> Result<(), CountError> {
        for (_, c) in self.counters.iter_mut().flatten() {
            c.disable().map_err(|error| CountError::Os {
                what: "disabling a counter",
                error,
            })?;
        }
        Ok(())
    }

    /// The events, in list order.
    pub fn specs(&self) -> &[EventSpec] {
        &self.specs
    }

    /// File descriptor of event `i`'s first instance (for benchmarks).
    pub fn first_fd(&self, i: usize) -> Option<RawFd> {
        self.counters.get(i)?.first().map(|(_, c)| c.as_raw_fd())
    }

    /// Read every event, summed over instances.
    pub fn read_all(&self) -> Result<Vec<EventReading>, CountError> {
        let mut out = Vec::with_capacity(self.specs.len());
        for (i, spec) in self.specs.iter().enumerate() {
            let value = match &self.status[i] {
                Status::Counting => {
                    let mut sum = CounterValue::default();
                    for (_, c) in &self.counters[i] {
                        let v = read_fd(c.as_raw_fd()).map_err(|error| CountError::Os {
                            what: "reading a counter",
                            error,
                        })?;
                        sum.raw = sum.raw.wrapping_add(v.raw);
                        sum.time_enabled_ns += v.time_enabled_ns;
                        sum.time_running_ns += v.time_running_ns;
                    }
                    Some(sum)
                }
                Status::NotSupported(_) => None,
            };
            out.push(EventReading {
                spec: spec.clone(),
                value,
                status: self.status[i].clone(),
            });
        }
        Ok(out)
    }
}

impl CounterSet {
    /// Read every event per instance (thread or CPU), in the order the instances were opened;
    /// an unsupported event has no instances.
    pub fn read_instances(&self) -> Result<Vec<Vec<InstanceReading>>, CountError> {
        self.counters
            .iter()
            .map(|cs| {
                cs.iter()
                    .map(|(instance, c)| {
                        read_fd(c.as_raw_fd())
                            .map(|value| InstanceReading {
                                instance: *instance,
                                value,
                            })
                            .map_err(|error| CountError::Os {
                                what: "reading a counter",
                                error,
                            })
                    })
                    .collect()
            })
            .collect()
    }

    /// Whether event `i` is counted (not `<not supported>`), with its status.
    pub fn status(&self, i: usize) -> Option<&Status> {
        self.status.get(i)
    }
}

/// A command forked and waiting, before `exec`, for [`StoppedChild::start`].
pub struct StoppedChild {
    pid: i32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    program: String,
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildExit {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ChildExit {
    /// Shell convention: the exit code, or 128 + signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            ChildExit::Code(c) => c,
            ChildExit::Signal(s) => 128 + s,
        }
    }
}

fn pipe_cloexec() -> Result<(OwnedFd, OwnedFd), CountError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(CountError::Os {
            what: "creating a pipe",
            error: io::Error::last_os_error(),
        });
    }
    // SAFETY: pipe2 returned two fresh fds we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Fork `argv` stopped before `exec`: the child waits on a pipe until [`StoppedChild::start`].
pub fn spawn_stopped(argv: &[String]) -> Result<StoppedChild, CountError> {
    let program = argv.first().ok_or(CountError::EmptyCommand)?.clone();
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| {
            CString::new(a.as_bytes()).map_err(|_| CountError::Exec {
                program: program.clone(),
                error: io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let (go_r, go_w) = pipe_cloexec()?;
    let (err_r, err_w) = pipe_cloexec()?;
    // SAFETY: the child only calls async-signal-safe functions (read, execvp, write, _exit) on
    // memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(CountError::Os {
            what: "fork",
            error: io::Error::last_os_error(),
        });
    }
    if pid == 0 {
        unsafe {
            // The parent's ends: holding the start pipe's write end here would keep this read
            // from ever seeing EOF when the parent gives up before starting us.
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            // The command gets the signal state a shell would give it: SIGPIPE default (Rust
            // and `stat` ignore it; `yes | head` must end `yes` by SIGPIPE) and nothing blocked.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            let mut b = 0u8;
            let n = libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
            if n == 1 {
                libc::execvp(ptrs[0], ptrs.as_ptr());
                let e = *libc::__errno_location();
                libc::write(err_w.as_raw_fd(), (&e as *const i32).cast(), 4);
                libc::_exit(127);
            }
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    Ok(StoppedChild {
        pid,
        go: Some(go_w),
        exec_err: err_r,
        program,
    })
}

impl StoppedChild {
    /// The child's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Let the child `exec`. Returns once it has exec'd, or the `exec` error.
    pub fn start(mut self) -> Result<RunningChild, CountError> {
        let go = self.go.take();
        if let Some(go) = &go {
            let b = [1u8];
            // SAFETY: writing one byte from a valid buffer.
            unsafe { libc::write(go.as_raw_fd(), b.as_ptr().cast(), 1) };
        }
        drop(go);
        let mut e = 0i32;
        // The error pipe closes on a successful exec (CLOEXEC) and carries errno otherwise.
        let n = loop {
            // SAFETY: reading 4 bytes into a local i32.
            let n =
                unsafe { libc::read(self.exec_err.as_raw_fd(), (&mut e as *mut i32).cast(), 4) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        let child = RunningChild { pid: self.pid };
        if n == 4 {
            let _ = child.wait();
            return Err(CountError::Exec {
                program: self.program.clone(),
                error: io::Error::from_raw_os_error(e),
            });
        }
        Ok(child)
    }
}

impl Drop for StoppedChild {
    fn drop(&mut self) {
        if self.go.is_some() {
            // Never started (counters failed to open): kill and reap it so nothing is left
            // behind and nobody waits on a child that will never run.
            self.go = None;
            // SAFETY: signalling and waiting for our own child, which is not reaped yet.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                let mut st = 0;
                while libc::waitpid(self.pid, &mut st, 0) < 0
                    && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
                {
                }
            }
        }
    }
}

/// A started command.
pub struct RunningChild {
    pid: i32,
}

impl RunningChild {
    /// The command's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Stop the command: SIGTERM, up to `grace` for it to end, then SIGKILL; always reaped.
    pub fn terminate(&self, grace: std::time::Duration) -> Result<ChildExit, CountError> {
        // SAFETY: signalling our own child, not reaped yet (so the pid cannot be reused).
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        let until = std::time::Instant::now() + grace;
        while std::time::Instant::now() < until {
            if let Some(e) = self.try_wait()? {
                return Ok(e);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: as above.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.wait()
    }

    /// Block until the child ends.
    pub fn wait(&self) -> Result<ChildExit, CountError> {
        loop {
            match self.wait_flags(0)? {
                Some(e) => return Ok(e),
                None => continue,
            }
        }
    }

    /// `Some` if the child has ended (without blocking).
    pub fn try_wait(&self) -> Result<Option<ChildExit>, CountError> {
        self.wait_flags(libc::WNOHANG)
    }

    fn wait_flags(&self, flags: i32) -> Result<Option<ChildExit>, CountError> {
        let mut st = 0;
        loop {
            // SAFETY: waiting for our own child with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut st, flags) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(CountError::Os {
                    what: "waitpid",
                    error: e,
                });
            }
            if r == 0 {
                return Ok(None);
            }
            if libc::WIFEXITED(st) {
                return Ok(Some(ChildExit::Code(libc::WEXITSTATUS(st))));
            }
            if libc::WIFSIGNALED(st) {
                return Ok(Some(ChildExit::Signal(libc::WTERMSIG(st))));
            }
            if flags & libc::WNOHANG != 0 {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_event_list;

    fn spec(name: &str) -> EventSpec {
        parse_event_list(name, &PmuTree::new("/nonexistent"))
            .unwrap()
            .groups[0]
            .members[0]
            .clone()
    }

    #[test]
    fn permission_names_paranoid_file_and_value() {
        let e = classify_open_error(
            io::Error::from_raw_os_error(libc::EACCES),
            &spec("cycles"),
            None,
            true,
            Some(2),
        );
        match e {
            OpenFailure::Fatal(err) => {
                let msg = err.to_string();
                assert!(
                    msg.contains("/proc/sys/kernel/perf_event_paranoid is 2"),
                    "{msg}"
                );
                assert!(msg.contains("EACCES") && msg.contains("'cycles'"), "{msg}");
                assert!(!msg.contains('\n'));
            }
            other => panic!("{other:?}"),
        }
        match classify_open_error(
            io::Error::from_raw_os_error(libc::EPERM),
            &spec("task-clock"),
            None,
            false,
            None,
        ) {
            OpenFailure::Fatal(err) => assert!(err.to_string().contains("is unreadable")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hardware_without_pmu_is_not_supported_with_reason() {
        for errno in [libc::ENOENT, libc::EOPNOTSUPP, libc::ENODEV] {
            match classify_open_error(
                io::Error::from_raw_os_error(errno),
                &spec("cycles"),
                None,
                false,
                Some(2),
            ) {
                OpenFailure::NotSupported(r) => assert_eq!(r, "no hardware PMU on this machine"),
                other => panic!("{other:?}"),
            }
        }
        match classify_open_error(
            io::Error::from_raw_os_error(libc::ENOENT),
            &spec("cycles"),
            None,
            true,
            Some(2),
        ) {
            OpenFailure::NotSupported(r) => assert!(r.contains("ENOENT")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify_open_error(
                io::Error::from_raw_os_error(libc::ESRCH),
                &spec("task-clock"),
                Some(77),
                false,
                Some(2)
            ),
            OpenFailure::Fatal(CountError::NoSuchProcess { pid: 77 })
        ));
    }

    #[test]
    fn process_threads_from_proc_fixture() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["10", "12", "11"] {
            std::fs::create_dir_all(dir.path().join("10/task").join(t)).unwrap();
        }
        assert_eq!(
            Target::process_in(dir.path(), 10).unwrap(),
            Target::Threads(vec![10, 11, 12])
        );
        assert!(matches!(
            Target::process_in(dir.path(), 99),
            Err(CountError::NoSuchProcess { pid: 99 })
        ));
    }

    #[test]
    fn user_only_fallback_is_perfs() {
        let t = PmuTree::new("/nonexistent");
        let l = parse_event_list("task-clock,cs:k,{cycles,page-faults}", &t).unwrap();
        let u = user_only(&l).expect("changes");
        let names: Vec<_> = u.events().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["task-clock:u", "cs:k", "cycles:u", "page-faults:u"]);
        for e in u.events().filter(|e| e.name != "cs:k") {
            assert!(e.exclude_kernel, "{e:?}");
        }
        let tc = u.events().next().unwrap();
        assert!(!tc.exclude_user && tc.exclude_hv);
        // `:k` stays kernel-only (and is refused again); nothing to change then.
        let k = parse_event_list("cs:k,task-clock:u", &t).unwrap();
        assert!(user_only(&k).is_none());
    }

    /// A reading of a counter that never ran is "not counted", not counted 100 % of the time
    /// (`stat -I --json` gave `counted_percent` 100 beside a null value).
    #[test]
    fn nothing_counted_has_no_counted_percent() {
        let reading = |enabled, running, raw| EventReading {
            spec: spec("task-clock"),
            value: Some(CounterValue {
                raw,
                time_enabled_ns: enabled,
                time_running_ns: running,
            }),
            status: Status::Counting,
        };
        let none = reading(0, 0, 0);
        assert_eq!((none.display_value(), none.counted_percent()), (None, None));
        assert_eq!(reading(100, 25, 10).counted_percent(), Some(25.0));
        assert_eq!(reading(100, 100, 0).counted_percent(), Some(100.0));
        // Enabled but multiplexed out all the time: it ran 0 % of it.
        assert_eq!(reading(400, 0, 0).counted_percent(), Some(0.0));
    }

    #[test]
    fn shell_code_of_signal() {
        assert_eq!(ChildExit::Signal(9).shell_code(), 137);
        assert_eq!(ChildExit::Code(3).shell_code(), 3);
    }
}
