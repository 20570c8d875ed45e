//! SchedTask's live code heatmaps for the host's observations (docs/schedtask.md): the
//! `cpu-clock` IP sampler of `counters` on every watched thread, drained while the host waits,
//! and each interval's samples turned into a [`TaskCode`] per process (user pages named through
//! `/proc/PID/maps`, kernel pages by address, kernel samples per system call where the
//! `raw_syscalls` tracepoints are visible). Only run when the policy asks
//! ([`counterpoint_core::Policy::wants_code_heatmaps`]) or `top --heatmaps` does: other
//! policies pay nothing.

use counterpoint_core::superfunction::{TaskCode, ThreadCode};
use counterpoint_counters::sampling::SamplingError;
use counterpoint_counters::sampling::{
    parse_code_maps, thread_heatmaps, CodeSampler, IpSample, SyscallTracepoints,
};
use std::collections::{BTreeMap, BTreeSet};

/// How to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeSamplingConfig {
    /// One sample per this much of a thread's CPU time, ns.
    pub period_ns: u64,
    /// Attribute kernel samples to system calls (opens two tracepoints per thread, and costs
    /// the sampled threads a record per system-call entry and exit).
    pub syscalls: bool,
}

impl Default for CodeSamplingConfig {
    fn default() -> Self {
        Self {
            // 1,000 samples per CPU-second per thread: one interval of a busy thread already
            // shows most of its hot pages (two copies of one program then look alike).
            period_ns: 1_000_000,
            syscalls: false,
        }
    }
}

/// What the sampling could and could not do, for the start-up log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeSamplingStatus {
    /// Period, ns.
    pub period_ns: u64,
    /// Whether kernel samples carry the syscall number.
    pub syscalls_visible: bool,
    /// Why they do not (not asked for, or tracefs missing), when they do not.
    pub syscalls_missing: Option<String>,
    /// Set when the kernel refused kernel-mode samples (`perf_event_paranoid`): user code only.
    pub kernel_refused: Option<String>,
}

/// The host's sampler and the samples of the interval so far.
pub(crate) struct CodeSampling {
    sampler: CodeSampler,
    samples: Vec<IpSample>,
    status: CodeSamplingStatus,
    /// Threads whose sampler would not open (not retried while they live), and the last
    /// reason (reported, not fatal).
    failed: BTreeSet<u32>,
    pub(crate) last_error: Option<String>,
}

impl CodeSampling {
    pub(crate) fn new(cfg: CodeSamplingConfig) -> Self {
        let (tp, missing) = if cfg.syscalls {
            match SyscallTracepoints::find() {
                Ok(t) => (Some(t), None),
                Err(e) => (None, Some(e.to_string())),
            }
        } else {
            (
                None,
                Some("not asked for (per-system-call attribution is off)".to_string()),
            )
        };
        let sampler = CodeSampler::new(cfg.period_ns, true, tp);
        Self {
            status: CodeSamplingStatus {
                period_ns: sampler.period_ns(),
                syscalls_visible: sampler.syscalls_visible(),
                syscalls_missing: missing,
                kernel_refused: None,
            },
            sampler,
            samples: Vec::new(),
            failed: BTreeSet::new(),
            last_error: None,
        }
    }

    /// Threads whose sampler would not open.
    pub(crate) fn failed_threads(&self) -> u64 {
        self.failed.len() as u64
    }

    pub(crate) fn status(&self) -> &CodeSamplingStatus {
        &self.status
    }

    /// Sample `tid` from now on (no-op when it already is; an open failure is counted). When
    /// the kernel refuses kernel-mode samples, every thread is sampled in user mode from then
    /// on, and the status says so.
    pub(crate) fn watch(&mut self, tid: u32) {
        if self.failed.contains(&tid) {
            return;
        }
        match self.sampler.watch(tid) {
            Ok(_) => {}
            Err(SamplingError::Open { source, .. })
                if self.status.kernel_refused.is_none()
                    && matches!(source.raw_os_error(), Some(libc::EACCES | libc::EPERM)) =>
            {
                self.status.kernel_refused = Some(format!(
                    "kernel samples refused ({source}; perf_event_paranoid): user code only"
                ));
                self.status.syscalls_visible = false;
                let user_only = CodeSampler::new(self.status.period_ns, false, None);
                let threads = self.sampler.threads();
                self.sampler = user_only;
                for t in threads.into_iter().chain([tid]) {
                    if let Err(e) = self.sampler.watch(t) {
                        self.failed.insert(t);
                        self.last_error = Some(e.to_string());
                    }
                }
            }
            Err(e) => {
                self.failed.insert(tid);
                self.last_error = Some(e.to_string());
            }
        }
    }

    /// Move the ring buffers' records into the interval's samples (while the host waits, so
    /// the buffers do not fill).
    pub(crate) fn drain(&mut self) {
        self.sampler.drain(&mut self.samples);
    }

    /// The interval's code per process, for the threads listed in `threads` (pid -> tids);
    /// threads not listed any more stop being sampled.
    pub(crate) fn take(&mut self, threads: &BTreeMap<u32, Vec<u32>>) -> BTreeMap<u32, TaskCode> {
        self.drain();
        let pid_of: BTreeMap<u32, u32> = threads
            .iter()
            .flat_map(|(&pid, tids)| tids.iter().map(move |&t| (t, pid)))
            .collect();
        self.sampler.retain(|t| pid_of.contains_key(&t));
        self.failed.retain(|t| pid_of.contains_key(t));
        let mut by_pid: BTreeMap<u32, Vec<IpSample>> = BTreeMap::new();
        for s in self.samples.drain(..) {
            if let Some(&pid) = pid_of.get(&s.tid) {
                by_pid.entry(pid).or_default().push(s);
            }
        }
        let visible = self.status.syscalls_visible;
        let period = self.status.period_ns;
        let mut out = BTreeMap::new();
        for (pid, samples) in by_pid {
            // Mappings are read when there are user samples to name (a process that exited
            // since has none to read: its user pages fall back to virtual pages).
            let maps = if samples.iter().any(|s| !s.kernel) {
                std::fs::read_to_string(format!("/proc/{pid}/maps"))
                    .map(|t| parse_code_maps(&t))
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            let threads: Vec<ThreadCode> = thread_heatmaps(&samples, &maps, visible)
                .into_iter()
                .map(|h| h.code)
                .collect();
            out.insert(pid, TaskCode::from_threads(threads, visible, period));
        }
        // Processes whose threads all slept get an empty map (sampled, nothing ran).
        for &pid in threads.keys() {
            out.entry(pid)
                .or_insert_with(|| TaskCode::from_threads(Vec::new(), visible, period));
        }
        // Each listed thread's affinity now, so a thread-level action that is already in
        // place is filtered as a no-op (a thread that exited since is left out).
        for (pid, tids) in threads {
            if let Some(code) = out.get_mut(pid) {
                for &tid in tids {
                    if let Ok(a) = crate::affinity::get(tid) {
                        code.thread_affinity.insert(u64::from(tid), a);
                    }
                }
            }
        }
        out
    }
}
