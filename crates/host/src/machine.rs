//! [`Host`]: the live machine behind the `Machine` trait. Observation reads per-thread scheduler
//! counters from `/proc` (task-clock as on-CPU ns, context switches, migrations; exact, so every
//! counted fraction is 1) and sums them per process; actions set the affinity of every thread of
//! a process, journaled first.

use crate::affinity::{self, AffinityError};
use crate::journal::{Journal, JournalError, RestoreReport};
use crate::procfs::{self, Proc, ThreadTimes};
use crate::sysfs::{self, SysfsError};
use crate::targets::TargetSpec;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_core::observation::{CpuObservation, Observation, TaskObservation};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_core::task::{TaskId, TaskInfo};
use counterpoint_core::topology::Topology;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Events this host counts without a PMU (cpu-migrations only in detailed mode).
pub const HOST_EVENTS: &[&str] = &[
    event::TASK_CLOCK,
    event::CONTEXT_SWITCHES,
    event::CPU_MIGRATIONS,
];

/// Host failures.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Affinity(#[from] AffinityError),
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    #[error("process {0} is a kernel thread: never touched")]
    KernelThread(u32),
    #[error("no journal is open: refusing to change affinities without the safety net")]
    NoJournal,
}

/// The live Linux host.
pub struct Host {
    proc_: Proc,
    topology: Topology,
    online: CpuSet,
    targets: TargetSpec,
    self_pid: u32,
    journal: Option<Journal>,
    prev: BTreeMap<u32, ThreadTimes>,
    prev_cpu: BTreeMap<CpuId, (u64, u64)>,
    started: Instant,
    stop: Option<&'static AtomicBool>,
    detailed: bool,
    /// Open `schedstat` files by thread id (closed when the thread is no longer seen).
    open_stats: BTreeMap<u32, std::fs::File>,
    /// When the counters in `prev` were read: deltas cover the time since then, which is longer
    /// than the wait in `advance` by whatever the caller did in between.
    prev_read: Instant,
}

impl Host {
    /// A host watching `targets`, changing affinities only through `journal` (none = observe
    /// only). The first snapshot is taken here, so the first interval has deltas.
    pub fn new(targets: TargetSpec, journal: Option<Journal>) -> Result<Self, HostError> {
        let topology = sysfs::host_topology()?;
        let online = topology.online_cpus();
        let mut h = Self {
            proc_: Proc::default(),
            topology,
            online,
            targets,
            self_pid: std::process::id(),
            journal,
            prev: BTreeMap::new(),
            prev_cpu: BTreeMap::new(),
            started: Instant::now(),
            stop: None,
            detailed: false,
            open_stats: BTreeMap::new(),
            prev_read: Instant::now(),
        };
        h.prev = h.snapshot_threads();
        h.prev_cpu = read_proc_stat_cpus();
        Ok(h)
    }

    /// A flag that cuts the wait in [`Machine::advance`] short (set from a signal handler).
    pub fn set_stop_flag(&mut self, flag: &'static AtomicBool) {
        self.stop = Some(flag);
    }

    /// The events this host puts in every task's sample (no hardware events without a PMU).
    pub fn counted_events(&self) -> Vec<&'static str> {
        HOST_EVENTS.to_vec()
    }

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
    pub fn restore(&mut self) -> Result<RestoreReport, HostError> {
        match self.journal.as_mut() {
            Some(j) => Ok(j.restore_all(&self.online)?),
            None => Ok(RestoreReport::default()),
        }
    }

    fn snapshot_threads(&mut self) -> BTreeMap<u32, ThreadTimes> {
        let mut out = BTreeMap::new();
        for pid in self.target_pids() {
            for tid in self.proc_.threads(pid) {
                if let Some(t) = self.read_times(pid, tid) {
                    out.insert(tid, t);
                }
            }
        }
        out
    }

    /// Set every thread of `pid` to `cpus` (∩ online), journaling each thread first.
    pub fn set_process_affinity(&mut self, pid: u32, cpus: &CpuSet) -> Result<CpuSet, HostError> {
        if self.proc_.is_kernel_thread(pid) {
            return Err(HostError::KernelThread(pid));
        }
        let effective = cpus.intersection(&self.online);
        if effective.is_empty() {
            return Err(AffinityError::Empty {
                tid: pid,
                requested: cpus.to_list(),
                online: self.online.to_list(),
            }
            .into());
        }
        let journal = self.journal.as_mut().ok_or(HostError::NoJournal)?;
        let tids = self.proc_.threads(pid);
        // One journal write before any thread changes, one after all of them.
        journal.before_change_all(pid, &tids, &effective)?;
        let mut outcomes = Vec::with_capacity(tids.len());
        let mut failure = None;
        for &tid in &tids {
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

    /// Detailed (`sched`, with migrations) or cheap (`schedstat`, kept open and re-read with
    /// one `pread` per interval) per-thread counters.
    fn read_times(&mut self, pid: u32, tid: u32) -> Option<ThreadTimes> {
        if self.detailed {
            return self.proc_.thread_times(pid, tid);
        }
        if !self.open_stats.contains_key(&tid) {
            match self.proc_.open_schedstat(pid, tid) {
                Some(f) => {
                    self.open_stats.insert(tid, f);
                }
                // Out of descriptors or gone: the one-shot path.
                None => return self.proc_.thread_times_fast(pid, tid),
            }
        }
        match self
            .open_stats
            .get(&tid)
            .and_then(procfs::read_schedstat_at)
        {
            Some(t) => Some(t),
            None => {
                self.open_stats.remove(&tid);
                self.proc_.thread_times_fast(pid, tid)
            }
        }
    }

    /// Read migrations too (`/proc/.../sched`, a longer file per thread) — for `top`; the agent
    /// keeps the cheap path.
    pub fn set_detailed(&mut self, detailed: bool) {
        self.detailed = detailed;
        self.prev_read = Instant::now();
        self.prev = self.snapshot_threads();
    }

    fn process_affinity(&self, pid: u32) -> Option<CpuSet> {
        affinity::get(pid).ok()
    }
}

/// Per-CPU (busy, total) jiffies from `/proc/stat`.
fn read_proc_stat_cpus() -> BTreeMap<CpuId, (u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
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
            std::thread::sleep((want - begin.elapsed()).min(Duration::from_millis(50)));
        }
        let read_at = Instant::now();
        let elapsed_ns = read_at.duration_since(self.prev_read).as_nanos() as u64;
        self.prev_read = read_at;
        let mut now = BTreeMap::new();
        let mut tasks = Vec::new();
        for pid in self.target_pids() {
            let Some(st) = self.proc_.stat(pid) else {
                continue;
            };
            let Some(aff) = self.process_affinity(pid) else {
                continue;
            };
            let (mut run_ns, mut cs, mut mig, mut have_mig) = (0u64, 0u64, 0u64, true);
            let runnable = st.state == 'R';
            for tid in self.proc_.threads(pid) {
                let Some(t) = self.read_times(pid, tid) else {
                    continue;
                };
                if let Some(p) = self.prev.get(&tid) {
                    run_ns += t.runtime_ns.saturating_sub(p.runtime_ns);
                    cs += t.switches.saturating_sub(p.switches);
                    match (t.migrations, p.migrations) {
                        (Some(a), Some(b)) => mig += a.saturating_sub(b),
                        _ => have_mig = false,
                    }
                }
                // A thread first seen now contributes from the next interval on.
                now.insert(tid, t);
            }
            let mut sample = Sample::new(Some(TaskId(pid as u64)), elapsed_ns);
            sample.set(event::TASK_CLOCK, CounterValue::exact(run_ns, elapsed_ns));
            sample.set(event::CONTEXT_SWITCHES, CounterValue::exact(cs, elapsed_ns));
            if have_mig {
                sample.set(event::CPU_MIGRATIONS, CounterValue::exact(mig, elapsed_ns));
            }
            tasks.push(TaskObservation {
                id: TaskId(pid as u64),
                name: st.comm,
                affinity: aff,
                cpu: st.processor,
                sample,
                runnable,
                finished: false,
            });
        }
        // Threads not seen this interval have exited: close their files.
        self.open_stats.retain(|tid, _| now.contains_key(tid));
        self.prev = now;
        let cpu_now = read_proc_stat_cpus();
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
        match action {
            Action::SetAffinity { task, cpus } => {
                self.set_process_affinity(task.0 as u32, cpus)?;
            }
            Action::Swap { a, b } => {
                let (pa, pb) = (a.0 as u32, b.0 as u32);
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
