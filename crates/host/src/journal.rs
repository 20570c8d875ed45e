//! The safety net: a JSON journal of every thread's original affinity, written atomically
//! (temporary file, fsync, rename, fsync of the directory) *before* the first change, and held
//! under an exclusive `flock` so a second agent on the same journal refuses to start.
//!
//! Restoring walks the journal: a thread still running with the affinity we set (or were about
//! to set) gets its original back, limited to online CPUs and never empty; a thread whose
//! affinity differs changed it itself and is left alone; a thread that exited, or whose id was
//! reused by another thread (different start time), is simply dropped.

use crate::affinity;
use crate::procfs::Proc;
use counterpoint_core::cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Journal failures.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: another agent holds its lock ({lock}); refusing to start")]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("journal {path}: {what}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("journal {path} is not valid: {source}")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// One thread we changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadEntry {
    pub pid: u32,
    pub comm: String,
    /// The thread's start time (ticks since boot): tells a reused thread id apart.
    pub starttime_ticks: u64,
    /// Affinity before our first change.
    pub original: CpuSet,
    /// Last affinity we set and saw succeed.
    pub applied: Option<CpuSet>,
    /// Affinity we are about to set (written before the call, so a crash in between is safe).
    pub pending: Option<CpuSet>,
}

/// What the journal file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalData {
    pub version: u32,
    /// Keyed by thread id.
    pub threads: BTreeMap<u32, ThreadEntry>,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// (tid, restored set)
    pub restored: Vec<(u32, CpuSet)>,
    /// Threads that changed their own affinity since: (tid, their current set).
    pub left_alone: Vec<(u32, CpuSet)>,
    /// Threads that exited (or whose id now names another thread).
    pub gone: Vec<u32>,
    /// Threads we could not restore, with the reason.
    pub failed: Vec<(u32, String)>,
}

/// An open, locked journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    _lock: File,
    data: JournalData,
    proc_: Proc,
}

fn io_err<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> JournalError + 'a {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

impl Journal {
    /// Lock and load the journal at `path` (empty when absent), and prove it is writable by
    /// rewriting it, so an unwritable journal fails before anything is changed.
    pub fn open(path: &Path) -> Result<Self, JournalError> {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(path, "cannot create its lock file"))?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(JournalError::Locked {
                    path: path.to_path_buf(),
                    lock: lock_path,
                });
            }
            return Err(JournalError::Io {
                path: path.to_path_buf(),
                what: "cannot lock it",
                source: e,
            });
        }
        let data = match fs::read_to_string(path) {
            Ok(text) if text.trim().is_empty() => JournalData::default(),
            Ok(text) => serde_json::from_str(&text).map_err(|source| JournalError::Corrupt {
                path: path.to_path_buf(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => JournalData::default(),
            Err(e) => return Err(io_err(path, "cannot read it")(e)),
        };
        let j = Self {
            path: path.to_path_buf(),
            _lock: lock,
            data,
            proc_: Proc::default(),
        };
        j.save()?;
        Ok(j)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn data(&self) -> &JournalData {
        &self.data
    }

    /// Whether the journal records any change (a previous run did not restore).
    pub fn has_entries(&self) -> bool {
        !self.data.threads.is_empty()
    }

    /// Write the journal atomically.
    pub fn save(&self) -> Result<(), JournalError> {
        let p = &self.path;
        let mut tmp = p.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let text = serde_json::to_string_pretty(&JournalData {
            version: 1,
            threads: self.data.threads.clone(),
        })
        .map_err(|e| io_err(p, "cannot serialize it")(std::io::Error::other(e)))?;
        let mut f = File::create(&tmp).map_err(io_err(p, "cannot create its temporary file"))?;
        f.write_all(text.as_bytes())
            .map_err(io_err(p, "cannot write its temporary file"))?;
        f.sync_all().map_err(io_err(p, "cannot fsync it"))?;
        fs::rename(&tmp, p).map_err(io_err(p, "cannot rename the temporary file over it"))?;
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// Record that we are about to set `tid`'s affinity to `target`: the original is captured
    /// the first time, and the journal is on disk before this returns.
    pub fn before_change(
        &mut self,
        pid: u32,
        tid: u32,
        target: &CpuSet,
    ) -> Result<(), JournalError> {
        self.before_change_all(pid, &[tid], target)
    }

    /// [`Journal::before_change`] for several threads of one process, with one write.
    pub fn before_change_all(
        &mut self,
        pid: u32,
        tids: &[u32],
        target: &CpuSet,
    ) -> Result<(), JournalError> {
        for &tid in tids {
            if !self.data.threads.contains_key(&tid) {
                let original = match affinity::get(tid) {
                    Ok(s) => s,
                    // Gone already: nothing to journal; the set call will report it.
                    Err(_) => continue,
                };
                let st = self.proc_.thread_stat(pid, tid);
                self.data.threads.insert(
                    tid,
                    ThreadEntry {
                        pid,
                        comm: st.as_ref().map(|s| s.comm.clone()).unwrap_or_default(),
                        starttime_ticks: st.map(|s| s.starttime_ticks).unwrap_or(0),
                        original,
                        applied: None,
                        pending: None,
                    },
                );
            }
            if let Some(e) = self.data.threads.get_mut(&tid) {
                e.pending = Some(target.clone());
            }
        }
        self.save()
    }

    /// Record the outcome of a change announced with [`Journal::before_change`].
    pub fn after_change(&mut self, tid: u32, applied: Option<&CpuSet>) -> Result<(), JournalError> {
        self.after_change_all(&[(tid, applied.cloned())])
    }

    /// [`Journal::after_change`] for several threads, with one write.
    pub fn after_change_all(
        &mut self,
        outcomes: &[(u32, Option<CpuSet>)],
    ) -> Result<(), JournalError> {
        for (tid, applied) in outcomes {
            if let Some(e) = self.data.threads.get_mut(tid) {
                e.pending = None;
                if let Some(a) = applied {
                    e.applied = Some(a.clone());
                }
                if e.applied.is_none() {
                    self.data.threads.remove(tid);
                }
            }
        }
        self.save()
    }

    /// The affinity we last set on a thread, if we changed it.
    pub fn applied(&self, tid: u32) -> Option<&CpuSet> {
        self.data.threads.get(&tid).and_then(|e| e.applied.as_ref())
    }

    /// Put every journaled thread back (see the module comment), then empty the journal.
    pub fn restore_all(&mut self, online: &CpuSet) -> Result<RestoreReport, JournalError> {
        let mut report = RestoreReport::default();
        for (&tid, e) in &self.data.threads {
            let same_thread = self
                .proc_
                .thread_stat(e.pid, tid)
                .is_some_and(|s| e.starttime_ticks == 0 || s.starttime_ticks == e.starttime_ticks);
            if !same_thread {
                report.gone.push(tid);
                continue;
            }
            let current = match affinity::get(tid) {
                Ok(c) => c,
                Err(affinity::AffinityError::Gone { .. }) => {
                    report.gone.push(tid);
                    continue;
                }
                Err(err) => {
                    report.failed.push((tid, err.to_string()));
                    continue;
                }
            };
            let ours = e.applied.as_ref() == Some(&current) || e.pending.as_ref() == Some(&current);
            if !ours {
                if current != e.original {
                    report.left_alone.push((tid, current));
                }
                continue;
            }
            let mut target = e.original.intersection(online);
            if target.is_empty() {
                target = online.clone();
            }
            match affinity::set(tid, &target, online) {
                Ok(s) => report.restored.push((tid, s)),
                Err(affinity::AffinityError::Gone { .. }) => report.gone.push(tid),
                Err(err) => report.failed.push((tid, err.to_string())),
            }
        }
        self.data.threads.clear();
        self.save()?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_is_refused_while_the_first_holds_the_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        let first = Journal::open(&p).expect("first");
        let err = Journal::open(&p).expect_err("second must fail");
        assert!(matches!(err, JournalError::Locked { .. }), "{err}");
        drop(first);
        Journal::open(&p).expect("free again after drop");
    }

    #[test]
    fn corrupt_journal_is_reported_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        fs::write(&p, "{not json").expect("write");
        let err = Journal::open(&p).expect_err("corrupt");
        assert!(err.to_string().contains("j.json"), "{err}");
    }

    #[test]
    fn unwritable_directory_fails_at_open() {
        let err = Journal::open(Path::new("/proc/counterpoint-no/j.json")).expect_err("unwritable");
        assert!(matches!(err, JournalError::Io { .. }), "{err}");
    }

    #[test]
    fn entries_survive_reopen_and_dead_threads_are_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        {
            let mut j = Journal::open(&p).expect("open");
            j.data.threads.insert(
                999_999_999,
                ThreadEntry {
                    pid: 999_999_999,
                    comm: "gone".into(),
                    starttime_ticks: 1,
                    original: CpuSet::parse_list("0-1").expect("list"),
                    applied: Some(CpuSet::single(0)),
                    pending: None,
                },
            );
            j.save().expect("save");
        }
        let mut j = Journal::open(&p).expect("reopen");
        assert!(j.has_entries());
        let r = j
            .restore_all(&CpuSet::parse_list("0-1").expect("list"))
            .expect("restore");
        assert_eq!(r.gone, vec![999_999_999]);
        assert!(!j.has_entries());
        let text = fs::read_to_string(&p).expect("read");
        assert!(text.contains("\"threads\": {}"), "{text}");
    }
}
