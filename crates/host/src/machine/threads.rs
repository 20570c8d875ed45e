//! Thread-level placement on the live host ([`Action::SetThreadAffinity`]): one thread of a
//! process gets its own CPU set through `sched_setaffinity(tid)`, with the same safety net as a
//! process-level change (journaled before the call, restored at exit, on a signal, by
//! `agent --restore` and at the next start after a crash; a process someone else re-pinned is
//! left alone; kernel threads are never touched; never an empty or offline set).
//!
//! A thread that has exited (or whose id no longer names a thread of that process) is not an
//! error: nothing is changed, its journal entry (if it was never changed before) is dropped,
//! and the skip is reported by the next [`Host::sweep`] so the agent can log it.
//!
//! [`Action::SetThreadAffinity`]: counterpoint_core::action::Action::SetThreadAffinity

use super::{Host, HostError};
use crate::affinity::{self, AffinityError};
use counterpoint_core::cpuset::CpuSet;

/// A thread-level change that found its thread gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedThread {
    /// The process.
    pub pid: u32,
    /// The thread that was not there.
    pub tid: u64,
    /// The set it would have got.
    pub cpus: CpuSet,
}

impl Host {
    /// Set thread `tid` of process `pid` to `cpus` (∩ online), journaling it first. `Ok(None)`
    /// when the thread has exited (skipped, reported by the next sweep); `Ok(Some(set))` with
    /// the set applied.
    pub fn set_thread_affinity(
        &mut self,
        pid: u32,
        tid: u64,
        cpus: &CpuSet,
    ) -> Result<Option<CpuSet>, HostError> {
        let effective = self.may_pin(pid, u32::try_from(tid).unwrap_or(u32::MAX), cpus)?;
        let journal = self.journal.as_mut().ok_or(HostError::NoJournal)?;
        let skipped = SkippedThread {
            pid,
            tid,
            cpus: effective.clone(),
        };
        // Only a thread of `pid`: a reused id in another process is not ours to move (and an
        // id beyond a pid_t names no thread at all).
        let Some(tid) = u32::try_from(tid)
            .ok()
            .filter(|&t| self.proc_.thread_stat(pid, t).is_some())
        else {
            self.skipped_threads.push(skipped);
            return Ok(None);
        };
        journal.before_thread_change(pid, tid, &effective)?;
        // Not journaled (it left the process since, or its start time could not be read):
        // not changed, as nothing could put it back.
        if journal.pending(tid) != Some(&effective) {
            journal.after_change(tid, None)?;
            self.skipped_threads.push(skipped);
            return Ok(None);
        }
        match affinity::set(tid, &effective, &self.online) {
            Ok(s) => {
                journal.after_change(tid, Some(&s))?;
                Ok(Some(s))
            }
            Err(AffinityError::Gone { .. }) => {
                journal.after_change(tid, None)?;
                self.skipped_threads.push(skipped);
                Ok(None)
            }
            Err(e) => {
                journal.after_change(tid, None)?;
                Err(e.into())
            }
        }
    }
}
