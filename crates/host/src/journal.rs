//! The safety net: a journal of every thread's original affinity, on disk *before* the first
//! change, held under an exclusive `flock` so a second agent on the same journal refuses to
//! start.
//!
//! # The file
//! The journal is opened once, by its real path (symlinks resolved), and must be a regular file
//! (a device such as `/dev/null` is refused, never replaced). It is written in place, never
//! renamed over, so the lock (taken on the open file itself) names the same inode for as long as
//! the agent runs, whatever link a second agent comes through.
//!
//! It holds one or more record lines, each
//! `counterpoint-journal SEQ CRC32 JSON` where `CRC32` (8 hex digits, IEEE) covers the JSON and
//! the JSON is a [`JournalData`] (`"version": 2`). The valid record with the highest `SEQ` is
//! the journal. A save never overwrites the record it supersedes: the new record goes at the
//! start of the file when it fits before the current one (then the file is cut after it), else
//! after the current one; each write is followed by `fdatasync`. A crash (even `SIGKILL`
//! mid-write) therefore leaves either the old or the new record intact, and a torn record fails
//! its checksum and is skipped. An empty file is an empty journal, so clearing is a truncation
//! (which needs no free space). A plain JSON file with `"version": 1` (the format before
//! records) is still read; any other version is refused.
//!
//! # Restoring
//! Restoring walks the journal: a thread still running with the affinity we set (or were about
//! to set) gets its original back, limited to online CPUs and never empty; a thread whose
//! affinity differs, or that someone else changed while we ran (`user_set`), is left alone; a
//! thread that exited, or whose id was reused by another thread (different start time, or no
//! start time recorded to tell), is dropped and left alone whatever its set. Only entries
//! journaled for the process that has the pid now make a thread look born pinned. Threads and
//! child processes created after a pin inherit the pinned set; before
//! restoring (and each interval, see [`Journal::adopt_new_tasks`]) they are journaled with the
//! original of the process they inherited from.

use crate::affinity;
use crate::procfs::Proc;
use counterpoint_core::cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The record format this build writes.
pub const JOURNAL_VERSION: u32 = 2;
/// The first word of every record line.
const MAGIC: &str = "counterpoint-journal";
/// Environment variable for the fault-injection tests: at the N-th save of this process, write
/// half the record, sync it, and `SIGKILL` ourselves (a crash inside the write).
pub const TORN_WRITE_ENV: &str = "COUNTERPOINT_TEST_TORN_WRITE";

/// Journal failures.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Another process holds the journal's lock.
    #[error("journal {path}: another agent holds its lock; refusing to start")]
    Locked {
        /// The journal's real path.
        path: PathBuf,
    },
    /// The path names something other than a regular file.
    #[error("journal {path}: not a regular file ({kind}); refusing to use it")]
    NotRegular {
        /// The path as given.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// A system call on the journal failed.
    // The OS error is in the message and not a `source`, so an error chain does not say it twice.
    #[error("journal {path}: {what}: {error}")]
    Io {
        /// The journal's path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        error: std::io::Error,
    },
    /// A journal that must exist (restoring only) does not.
    #[error(
        "journal {path} does not exist; nothing was restored and nothing created (check the path: the journal of the agent that ran)"
    )]
    Missing {
        /// The path as given.
        path: PathBuf,
    },
    /// The file holds no valid record.
    #[error("journal {path} is corrupt ({reason}); check and move it away to start afresh")]
    Corrupt {
        /// The journal's path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The newest record has a version this build does not know.
    #[error(
        "journal {path} has version {found}; this build reads versions 1 and {JOURNAL_VERSION}"
    )]
    Version {
        /// The journal's path.
        path: PathBuf,
        /// The version found.
        found: u64,
    },
}

/// Why a journal's contents could not be parsed (see [`parse`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// No record and no plain JSON journal.
    #[error("{0}")]
    Corrupt(String),
    /// A known format with an unknown version.
    #[error("version {0}")]
    Version(u64),
}

/// One thread we changed (or that inherited our change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadEntry {
    /// The process the thread belongs to.
    pub pid: u32,
    /// The thread's name when journaled.
    pub comm: String,
    /// The thread's start time (ticks since boot): tells a reused thread id apart.
    pub starttime_ticks: u64,
    /// Affinity before our first change.
    pub original: CpuSet,
    /// Last affinity we set and saw succeed.
    pub applied: Option<CpuSet>,
    /// Affinity we are about to set (written before the call, so a crash in between is safe).
    pub pending: Option<CpuSet>,
    /// When (ticks since boot) we first set (or were about to set) this thread's affinity: a
    /// thread or child process started after it may have inherited our set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_at_ticks: Option<u64>,
    /// The process this thread inherited our set from (a thread or child created after a pin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited_from: Option<u32>,
    /// Someone else set this affinity after our change: never touched or restored again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_set: Option<CpuSet>,
    /// The last change was to this thread on its own (a thread-level action), not to its whole
    /// process; a later process-level change clears it. Restoring treats both alike.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thread_level: bool,
}

/// What the journal file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalData {
    /// Format version ([`JOURNAL_VERSION`]).
    pub version: u32,
    /// Keyed by thread id.
    pub threads: BTreeMap<u32, ThreadEntry>,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// (tid, restored set)
    pub restored: Vec<(u32, CpuSet)>,
    /// Threads whose affinity someone else set since: (tid, their current set).
    pub left_alone: Vec<(u32, CpuSet)>,
    /// Threads that exited (or whose id now names another thread).
    pub gone: Vec<u32>,
    /// Threads we could not restore, with the reason.
    pub failed: Vec<(u32, String)>,
    /// Restoring is done, but the journal could not be cleared (the next start restores again,
    /// which is harmless): the reason.
    pub clear_failed: Option<String>,
}

/// A thread or child process found carrying our set without being journaled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// Its process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The pinned process it inherited the set from.
    pub from_pid: u32,
    /// The original it will be restored to.
    pub original: CpuSet,
}

/// A task whose affinity someone else changed after we did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// Its process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// What we had set.
    pub ours: CpuSet,
    /// What it has now.
    pub theirs: CpuSet,
}

/// What [`Journal::relink`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Relink {
    /// The path names the open journal.
    #[default]
    Linked,
    /// The path had no file: a new one holds the current record.
    Recreated,
    /// Another file took the path: left alone; the records stay in memory and on the
    /// unlinked file.
    Taken,
    /// The path had no file and a new one could not be made (why): the records stay in memory
    /// and on the unlinked file.
    Failed(String),
}

/// An open, locked journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    data: JournalData,
    proc_: Proc,
    /// Highest record number in the file.
    seq: u64,
    /// Byte range of the current record (`None`: no record in the file).
    current: Option<(u64, u64)>,
    /// Bytes in the file.
    len: u64,
    saves: u64,
    torn_at: Option<u64>,
    /// The file does not end with a newline (a torn record, an old format): an append must
    /// start a line of its own.
    torn_tail: bool,
}

fn io_err<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> JournalError + 'a {
    move |error| JournalError::Io {
        path: path.to_path_buf(),
        what,
        error,
    }
}

/// CRC-32 (IEEE 802.3, reflected), bitwise: records are small and written rarely.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One record line (with its newline).
fn record_line(seq: u64, data: &JournalData) -> Result<Vec<u8>, serde_json::Error> {
    let json = serde_json::to_string(data)?;
    Ok(format!("{MAGIC} {seq} {:08x} {json}\n", crc32(json.as_bytes())).into_bytes())
}

/// A parsed journal: its data, the highest record number and that record's byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The journal's contents.
    pub data: JournalData,
    /// The record number (0 for an empty or version-1 file).
    pub seq: u64,
    /// Byte range of the record in the file, when it is a record.
    pub range: Option<(u64, u64)>,
}

fn version_of(json: &str) -> Option<u64> {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()?
        .get("version")?
        .as_u64()
}

/// A record line's number and JSON, if its checksum holds.
fn record_of(body: &[u8]) -> Option<(u64, &str)> {
    let text = std::str::from_utf8(body).ok()?;
    let mut it = text.splitn(4, ' ');
    let (Some(MAGIC), Some(seq), Some(crc), Some(json)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return None;
    };
    let seq = seq.parse::<u64>().ok()?;
    let crc = u32::from_str_radix(crc, 16).ok()?;
    (crc32(json.as_bytes()) == crc).then_some((seq, json))
}

/// Parse a journal file's bytes. Total: any input gives `Ok` or a [`ParseError`].
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Parsed {
            data: JournalData {
                version: JOURNAL_VERSION,
                ..Default::default()
            },
            seq: 0,
            range: None,
        });
    }
    let mut best: Option<(u64, u64, u64, &str)> = None;
    // Complete lines that are not valid records (damage, unless a valid record exists).
    let mut bad_lines = 0usize;
    let mut start = 0usize;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let begin = start;
        start += line.len();
        // A record is complete only with its newline: a torn tail is skipped.
        let Some(body) = line.strip_suffix(b"\n") else {
            continue;
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some((seq, json)) = record_of(body) else {
            bad_lines += 1;
            continue;
        };
        if best.map_or(true, |(s, ..)| seq > s) {
            best = Some((seq, begin as u64, start as u64, json));
        }
    }
    if let Some((seq, b, e, json)) = best {
        let version = version_of(json).unwrap_or(0);
        if version != JOURNAL_VERSION as u64 {
            return Err(ParseError::Version(version));
        }
        let data: JournalData = serde_json::from_str(json)
            .map_err(|e| ParseError::Corrupt(format!("record {seq}: {e}")))?;
        return Ok(Parsed {
            data,
            seq,
            range: Some((b, e)),
        });
    }
    // Only a torn first record (no newline yet): the change it announced was never made,
    // because a change is made only after its record is on disk.
    let trimmed = bytes.trim_ascii_start();
    let prefix = MAGIC.as_bytes();
    let magic_start = trimmed.starts_with(prefix) || prefix.starts_with(trimmed);
    if bad_lines == 0 && magic_start {
        return Ok(Parsed {
            data: JournalData {
                version: JOURNAL_VERSION,
                ..Default::default()
            },
            seq: 0,
            range: None,
        });
    }
    // No record: the version-1 format was one plain JSON object.
    let text = String::from_utf8_lossy(bytes);
    match version_of(&text) {
        Some(1) => {
            let data: JournalData = serde_json::from_str(&text)
                .map_err(|e| ParseError::Corrupt(format!("version 1 journal: {e}")))?;
            Ok(Parsed {
                data,
                seq: 0,
                range: None,
            })
        }
        Some(v) => Err(ParseError::Version(v)),
        None => Err(ParseError::Corrupt(
            "no record with a valid checksum".to_string(),
        )),
    }
}

/// The real path of a journal: the file a link points to, or, for a file that does not exist
/// yet, the name in its resolved directory. Refuses anything that is not a regular file.
pub fn resolve(path: &Path) -> Result<PathBuf, JournalError> {
    match fs::metadata(path) {
        Ok(m) => {
            let ft = m.file_type();
            if !ft.is_file() {
                return Err(JournalError::NotRegular {
                    path: path.to_path_buf(),
                    kind: crate::files::kind(ft),
                });
            }
            fs::canonicalize(path).map_err(io_err(path, "cannot resolve its real path"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                return Err(JournalError::NotRegular {
                    path: path.to_path_buf(),
                    kind: "a dangling symbolic link",
                });
            }
            let name = path.file_name().ok_or_else(|| JournalError::NotRegular {
                path: path.to_path_buf(),
                kind: "not a file name",
            })?;
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let dir = fs::canonicalize(dir).map_err(io_err(path, "cannot open its directory"))?;
            Ok(dir.join(name))
        }
        Err(e) => Err(io_err(path, "cannot inspect it")(e)),
    }
}

/// Whether the journal's entry `e`, kept under `tid`, is positively for another thread than
/// the one `tid` names in process `pid` now: that thread is readable and the entry is for
/// another process or a thread that started at another time (or has no start time to tell,
/// which could never be restored). An unreadable thread says
/// nothing: a transient `/proc` failure must not cost a live pinned thread its original.
fn is_other_thread(proc_: &Proc, pid: u32, tid: u32, e: &ThreadEntry) -> bool {
    proc_.thread_stat(pid, tid).is_some_and(|s| {
        e.pid != pid || e.starttime_ticks == 0 || s.starttime_ticks != e.starttime_ticks
    })
}

/// Whether the live thread `tid` of process `e.pid` is the very thread entry `e` was journaled
/// for: readable, and started at the entry's start time. An entry without a start time (0)
/// cannot be told from a later thread that reused the id, so it never matches: carrying the set
/// we gave is no proof (any process started with the whole machine's set carries it).
fn is_same_thread(proc_: &Proc, tid: u32, e: &ThreadEntry) -> bool {
    e.starttime_ticks != 0
        && proc_
            .thread_stat(e.pid, tid)
            .is_some_and(|s| s.starttime_ticks == e.starttime_ticks)
}

/// Whether entry `e` (kept under `tid`) was journaled for the process that has pid `e.pid`
/// now, which started at `process_start`, and not for an earlier process whose pid was
/// reused: every thread of a process starts at or after the process (its main thread, whose
/// id is the pid, exactly then), and a process that reuses a pid starts after every thread of
/// the one before. An entry without a start time proves nothing and does not count.
fn is_of_process(tid: u32, e: &ThreadEntry, process_start: u64) -> bool {
    e.starttime_ticks != 0
        && if tid == e.pid {
            e.starttime_ticks == process_start
        } else {
            e.starttime_ticks >= process_start
        }
}

/// Whether the thread of entry `e` has positively exited: no thread has id `tid` any more, or
/// its process's thread `tid` started at another time (the id was reused there).
fn has_exited(proc_: &Proc, tid: u32, e: &ThreadEntry) -> bool {
    matches!(
        affinity::get(tid),
        Err(affinity::AffinityError::Gone { .. })
    ) || is_other_thread(proc_, e.pid, tid, e)
}

/// Whether a task that started at `start` (ticks since boot) may have inherited a pin made at
/// `pinned_at`; unknown times say yes (adopting a task is safer than leaving it pinned). The same
/// tick counts as after: start times have a tick's resolution.
fn born_after(start: Option<u64>, pinned_at: Option<u64>) -> bool {
    match (start, pinned_at) {
        (Some(s), Some(t)) => s >= t,
        _ => true,
    }
}

/// Clock ticks since boot now (the unit of `/proc/PID/stat`'s start time).
fn now_ticks() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if rc != 0 || hz <= 0 {
        return 0;
    }
    let hz = hz as u64;
    ts.tv_sec as u64 * hz + ts.tv_nsec as u64 * hz / 1_000_000_000
}

impl Journal {
    /// Open (creating it if absent), lock and load the journal at `path`.
    pub fn open(path: &Path) -> Result<Self, JournalError> {
        Self::open_with(path, true)
    }

    /// Open, lock and load the journal at `path`, which must exist: restoring only, a missing
    /// journal is a wrong path (after a crash, a typo must not "restore" nothing and succeed).
    pub fn open_existing(path: &Path) -> Result<Self, JournalError> {
        Self::open_with(path, false)
    }

    fn open_with(path: &Path, create: bool) -> Result<Self, JournalError> {
        let real = resolve(path)?;
        if !create && fs::symlink_metadata(&real).is_err() {
            return Err(JournalError::Missing {
                path: path.to_path_buf(),
            });
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            // Resolved above: a link swapped in since is refused, not followed.
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(&real)
            .map_err(|e| {
                if !create && e.kind() == std::io::ErrorKind::NotFound {
                    // Gone between the check and the open.
                    JournalError::Missing {
                        path: path.to_path_buf(),
                    }
                } else {
                    io_err(&real, "cannot open it for writing")(e)
                }
            })?;
        let meta = file
            .metadata()
            .map_err(io_err(&real, "cannot inspect it"))?;
        if !meta.file_type().is_file() {
            return Err(JournalError::NotRegular {
                path: real,
                kind: "not a regular file",
            });
        }
        if !crate::files::try_lock_exclusive(&file).map_err(io_err(&real, "cannot lock it"))? {
            return Err(JournalError::Locked { path: real });
        }
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(io_err(&real, "cannot read it"))?;
        let parsed = parse(&bytes).map_err(|e| match e {
            ParseError::Corrupt(reason) => JournalError::Corrupt {
                path: real.clone(),
                reason,
            },
            ParseError::Version(found) => JournalError::Version {
                path: real.clone(),
                found,
            },
        })?;
        let torn_at = std::env::var(TORN_WRITE_ENV)
            .ok()
            .and_then(|v| v.parse().ok());
        Ok(Self {
            path: real,
            file,
            data: parsed.data,
            proc_: Proc::default(),
            seq: parsed.seq,
            current: parsed.range,
            len: bytes.len() as u64,
            saves: 0,
            torn_at,
            torn_tail: bytes.last().is_some_and(|&b| b != b'\n'),
        })
    }

    /// The journal's real path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the journal's path still names this open file, and if not what was done. A
    /// journal deleted while the agent ran (a temporary-file cleaner, a user tidying up) kept
    /// taking the agent's records on the unlinked file, and after a SIGKILL `--restore-only`
    /// found nothing to restore (CLI probe, session 27). A path with no file is given a new
    /// one, locked and written with the current record; a path some other file took is left
    /// alone (it may be another agent's), and this agent keeps its records in memory and on
    /// its unlinked file, which its own stop still restores from.
    pub fn relink(&mut self) -> Relink {
        use std::os::unix::fs::MetadataExt;
        let p = self.path.clone();
        let failed = |what: &str, e: std::io::Error| Relink::Failed(format!("{what}: {e}"));
        let ours = match self.file.metadata() {
            Ok(m) => m,
            Err(e) => return failed("cannot inspect the open journal", e),
        };
        match fs::symlink_metadata(&p) {
            Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => return Relink::Linked,
            Ok(_) => return Relink::Taken,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return failed("cannot inspect its path", e)
            }
            Err(_) => {}
        }
        // Every failure from here (its directory gone too, a read-only or full file system,
        // another agent creating the path first) leaves the agent on its unlinked file, as
        // before: it says so and carries on, and its own stop still restores.
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(&p)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Relink::Taken,
            Err(e) => return failed("cannot create it again", e),
        };
        match crate::files::try_lock_exclusive(&file) {
            Ok(true) => {}
            Ok(false) => return Relink::Taken,
            Err(e) => return failed("cannot lock it", e),
        }
        // Written whole into the new file before it replaces the old one: a failed write
        // leaves the agent on the old (unlinked) file, with its state as it was.
        let saved = (self.current, self.len, self.torn_tail);
        let old = std::mem::replace(&mut self.file, file);
        (self.current, self.len, self.torn_tail) = (None, 0, false);
        if let Err(e) = self.save() {
            self.file = old;
            (self.current, self.len, self.torn_tail) = saved;
            // The new, empty file would read as an empty journal: remove it.
            let _ = fs::remove_file(&p);
            return Relink::Failed(e.to_string());
        }
        Relink::Recreated
    }

    /// The journal's contents.
    pub fn data(&self) -> &JournalData {
        &self.data
    }

    /// Whether the journal records any change (a previous run did not restore).
    pub fn has_entries(&self) -> bool {
        !self.data.threads.is_empty()
    }

    /// Write the journal in place (see the module comment) and sync it.
    pub fn save(&mut self) -> Result<(), JournalError> {
        let p = self.path.clone();
        if self.data.threads.is_empty() {
            // Empty file = empty journal; truncation needs no free space.
            self.file
                .set_len(0)
                .and_then(|_| self.file.sync_data())
                .map_err(io_err(&p, "cannot clear it"))?;
            self.current = None;
            self.len = 0;
            self.torn_tail = false;
            return Ok(());
        }
        self.data.version = JOURNAL_VERSION;
        let seq = self.seq + 1;
        let mut line = record_line(seq, &self.data)
            .map_err(|e| io_err(&p, "cannot serialize it")(std::io::Error::other(e)))?;
        // Never overwrite the record this one supersedes.
        let mut at = match self.current {
            Some((start, _)) if line.len() as u64 <= start => 0,
            _ => self.len,
        };
        if at > 0 && self.torn_tail {
            // After a torn record or an old-format journal: start on a line of our own.
            line.insert(0, b'\n');
        }
        let n = line.len() as u64;
        self.saves += 1;
        if self.torn_at == Some(self.saves) {
            let half = &line[..line.len() / 2];
            let _ = self.file.write_all_at(half, at);
            let _ = self.file.sync_data();
            // SAFETY: raise has no preconditions; this is the test hook's crash.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
        self.file
            .write_all_at(&line, at)
            .and_then(|_| self.file.sync_data())
            .map_err(io_err(&p, "cannot write it"))?;
        if at == 0 {
            // The old record is after the new one: cut it off.
            self.file
                .set_len(n)
                .and_then(|_| self.file.sync_data())
                .map_err(io_err(&p, "cannot truncate it"))?;
            self.len = n;
        } else {
            self.len = at + n;
        }
        self.seq = seq;
        self.torn_tail = false;
        if line[0] == b'\n' {
            at += 1;
        }
        self.current = Some((at, self.len));
        Ok(())
    }

    /// The (original, applied, pinned at) sets we gave threads of `pid`, for telling a thread
    /// born pinned from one that was not: the main thread's entry first, then the others' in
    /// thread order, each distinct applied set once. A thread placed on its own (thread-level)
    /// gives the threads it starts its set, so its entry counts too. A thread the user re-pinned
    /// no longer speaks for the process.
    /// Only entries journaled for the process that has the pid now count (see
    /// [`is_of_process`]): a journal left by an agent that died, restored after the process
    /// exited and its pid was reused, must not make the new process's threads look born pinned.
    fn process_pins(&self, pid: u32) -> Vec<(CpuSet, CpuSet, Option<u64>)> {
        let Some(process_start) = self.proc_.stat(pid).map(|s| s.starttime_ticks) else {
            return Vec::new();
        };
        // The main thread's entry, when there is one, says which process the journal saw at
        // this pid: another start time, and no entry of the pid speaks for the process now.
        if self
            .data
            .threads
            .get(&pid)
            .is_some_and(|e| e.pid == pid && !is_of_process(pid, e, process_start))
        {
            return Vec::new();
        }
        // A pending set counts too: after a crash between a set call and the record of its
        // outcome, the thread may have started others with it.
        let pick = |(&tid, e): (&u32, &ThreadEntry)| {
            [e.applied.clone(), e.pending.clone()]
                .into_iter()
                .flatten()
                .filter(|_| e.user_set.is_none() && is_of_process(tid, e, process_start))
                .map(|a| (e.original.clone(), a, e.pinned_at_ticks))
                .collect::<Vec<_>>()
        };
        let main = self
            .data
            .threads
            .get_key_value(&pid)
            .filter(|(_, e)| e.pid == pid);
        let mut out: Vec<(CpuSet, CpuSet, Option<u64>)> = Vec::new();
        for p in main.map(pick).into_iter().flatten().chain(
            self.data
                .threads
                .iter()
                .filter(|(_, e)| e.pid == pid)
                .flat_map(pick),
        ) {
            if !out.iter().any(|o| o.1 == p.1) {
                out.push(p);
            }
        }
        out
    }

    /// Whether someone else changed a thread of `pid` after we did (we leave it alone).
    pub fn is_user_owned(&self, pid: u32) -> bool {
        self.data
            .threads
            .values()
            .any(|e| e.pid == pid && e.user_set.is_some())
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

    /// [`Journal::before_change`] for several threads of one process, with one write (a
    /// process-level change: a thread-level mark left by an earlier thread action is
    /// cleared). A thread not yet journaled that carries a set we gave its process was born
    /// after the pin: its original is the process's.
    pub fn before_change_all(
        &mut self,
        pid: u32,
        tids: &[u32],
        target: &CpuSet,
    ) -> Result<(), JournalError> {
        self.announce(pid, tids, target, false)
    }

    /// Record that we are about to set thread `tid` of `pid` on its own (a thread-level
    /// action) to `target`; as [`Journal::before_change`] otherwise.
    pub fn before_thread_change(
        &mut self,
        pid: u32,
        tid: u32,
        target: &CpuSet,
    ) -> Result<(), JournalError> {
        self.announce(pid, &[tid], target, true)
    }

    fn announce(
        &mut self,
        pid: u32,
        tids: &[u32],
        target: &CpuSet,
        thread_level: bool,
    ) -> Result<(), JournalError> {
        let pins = self.process_pins(pid);
        let now = now_ticks();
        for &tid in tids {
            // An entry left by a thread that exited, whose id now names this thread, says
            // nothing about it: journal it afresh (else restore would skip it as gone).
            if self
                .data
                .threads
                .get(&tid)
                .is_some_and(|e| is_other_thread(&self.proc_, pid, tid, e))
            {
                self.data.threads.remove(&tid);
            }
            if !self.data.threads.contains_key(&tid) {
                let current = match affinity::get(tid) {
                    Ok(s) => s,
                    // Gone already: nothing to journal; the set call will report it.
                    Err(_) => continue,
                };
                // Not a thread of `pid` (any more), or its start time cannot be read: not
                // journaled, so the caller does not change it (an entry without a start time
                // could never be restored).
                let Some(st) = self.proc_.thread_stat(pid, tid) else {
                    continue;
                };
                let start = Some(st.starttime_ticks);
                // Born from one of our pins: carries its set and started after it (a sibling
                // that already ran on that set, its program's own pin, keeps its own).
                let (original, inherited_from) = match pins
                    .iter()
                    .find(|p| p.1 == current && born_after(start, p.2))
                {
                    Some((orig, _, _)) => (orig.clone(), Some(pid)),
                    None => (current, None),
                };
                self.data.threads.insert(
                    tid,
                    ThreadEntry {
                        pid,
                        comm: st.comm,
                        starttime_ticks: st.starttime_ticks,
                        original,
                        applied: None,
                        pending: None,
                        pinned_at_ticks: None,
                        inherited_from,
                        user_set: None,
                        thread_level,
                    },
                );
            }
            if let Some(e) = self.data.threads.get_mut(&tid) {
                if e.user_set.is_none() {
                    e.pending = Some(target.clone());
                    e.thread_level = thread_level;
                    // Before the call: a thread or child born from the new set starts after
                    // it, even one born before the outcome is recorded (kept only if the
                    // change succeeds: an entry never applied is dropped).
                    e.pinned_at_ticks.get_or_insert(now);
                }
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
        let now = now_ticks();
        for (tid, applied) in outcomes {
            if let Some(e) = self.data.threads.get_mut(tid) {
                e.pending = None;
                if let Some(a) = applied {
                    e.applied = Some(a.clone());
                    e.pinned_at_ticks.get_or_insert(now);
                }
                if e.applied.is_none() {
                    self.data.threads.remove(tid);
                }
            }
        }
        self.save()
    }

    /// The set announced for `tid` and not yet recorded as done: a caller changes only a
    /// thread announced (journaled) with exactly the set it is about to give.
    pub fn pending(&self, tid: u32) -> Option<&CpuSet> {
        self.data.threads.get(&tid).and_then(|e| e.pending.as_ref())
    }

    /// The affinity we last set on a thread, if we changed it.
    pub fn applied(&self, tid: u32) -> Option<&CpuSet> {
        self.data.threads.get(&tid).and_then(|e| e.applied.as_ref())
    }

    /// Drop the entries of threads that have positively exited (no thread has the id, or it
    /// names a thread of the same process that started at another time; an unreadable thread
    /// is kept): there is nothing to restore for them, and a server that starts and ends
    /// threads would otherwise grow the journal (rewritten whole at every save) without
    /// bound. A user's re-pin is kept while its process lives, so that process stays theirs.
    /// Saved when anything was dropped; returns how many.
    pub fn forget_exited(&mut self) -> Result<usize, JournalError> {
        let before = self.data.threads.len();
        let proc_ = &self.proc_;
        self.data.threads.retain(|&tid, e| {
            let process_gone = || {
                matches!(
                    affinity::get(e.pid),
                    Err(affinity::AffinityError::Gone { .. })
                )
            };
            !has_exited(proc_, tid, e) || (e.user_set.is_some() && !process_gone())
        });
        let dropped = before - self.data.threads.len();
        if dropped > 0 {
            self.save()?;
        }
        Ok(dropped)
    }

    /// Find tasks that someone else re-pinned after our change: each is recorded (`user_set`)
    /// and never touched or restored again. Saved when anything was found.
    pub fn detect_overrides(&mut self) -> Result<Vec<Override>, JournalError> {
        let mut found = Vec::new();
        let proc_ = &self.proc_;
        for (&tid, e) in self.data.threads.iter_mut() {
            let (Some(ours), None, None) = (&e.applied, &e.pending, &e.user_set) else {
                continue;
            };
            // A thread id now naming another thread is not a user's change.
            if !is_same_thread(proc_, tid, e) {
                continue;
            }
            let Ok(current) = affinity::get(tid) else {
                continue;
            };
            if current != *ours {
                found.push(Override {
                    pid: e.pid,
                    tid,
                    ours: ours.clone(),
                    theirs: current.clone(),
                });
                e.user_set = Some(current);
            }
        }
        if !found.is_empty() {
            // Only the re-pinned threads are the user's: the process is not changed again
            // (`is_user_owned`), and its other threads still get their originals back.
            self.save()?;
        }
        Ok(found)
    }

    /// Journal the threads and child processes created after we pinned a process: they
    /// inherited our set and get the pinned process's original back at restore. A task counts
    /// when it carries exactly the set we gave its origin and (for a child process) started
    /// after the pin. Saved when anything was found.
    pub fn adopt_new_tasks(&mut self) -> Result<Vec<Adopted>, JournalError> {
        type Pins = Vec<(CpuSet, CpuSet, Option<u64>)>;
        let pinned: BTreeMap<u32, Pins> = self
            .data
            .threads
            .values()
            .map(|e| e.pid)
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .map(|pid| (pid, self.process_pins(pid)))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        if pinned.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        let pids = self.proc_.pids().unwrap_or_default();
        let mut ppid: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
        for &pid in &pids {
            if let Some(st) = self.proc_.stat(pid) {
                ppid.insert(pid, (st.ppid, st.starttime_ticks));
            }
        }
        for &pid in &pids {
            // The pinned process itself, or the nearest pinned ancestor of a child process
            // that started after the pin.
            let origin = if pinned.contains_key(&pid) {
                Some(pid)
            } else {
                let Some(&(_, start)) = ppid.get(&pid) else {
                    continue;
                };
                let mut cur = pid;
                let mut origin = None;
                for _ in 0..64 {
                    let Some(&(parent, _)) = ppid.get(&cur) else {
                        break;
                    };
                    if parent <= 1 {
                        break;
                    }
                    if let Some(pins) = pinned.get(&parent) {
                        if pins.iter().any(|p| p.2.map_or(true, |t| start >= t)) {
                            origin = Some(parent);
                        }
                        break;
                    }
                    cur = parent;
                }
                origin
            };
            let Some(origin) = origin else { continue };
            let child_start = (origin != pid)
                .then(|| ppid.get(&pid).map(|p| p.1))
                .flatten();
            for tid in self.proc_.threads(pid) {
                // Journaled already. An entry whose thread id now names another thread (its
                // start time differs) is not replaced here: that thread is not the one the
                // journal speaks of, whatever set it carries, so restoring reports it gone and
                // leaves it alone (a thread the agent moves is journaled afresh, `announce`).
                if self.data.threads.contains_key(&tid) {
                    continue;
                }
                let Ok(current) = affinity::get(tid) else {
                    continue;
                };
                // The set of the thread (or process) it was born from: any set we gave a
                // thread of its origin (a child process: one given before it started).
                // The thread itself started after that pin too: thread-level placement leaves
                // siblings alone, and one already on the set (its program's own pin) is not
                // ours.
                // A thread whose start time cannot be read now is looked at again next sweep:
                // an entry without one could never be restored.
                let Some(st) = self.proc_.thread_stat(pid, tid) else {
                    continue;
                };
                let start = Some(st.starttime_ticks);
                let Some((original, applied, at)) = pinned[&origin].iter().find(|p| {
                    p.1 == current && born_after(child_start, p.2) && born_after(start, p.2)
                }) else {
                    continue;
                };
                self.data.threads.insert(
                    tid,
                    ThreadEntry {
                        pid,
                        comm: st.comm.clone(),
                        starttime_ticks: st.starttime_ticks,
                        original: original.clone(),
                        applied: Some(applied.clone()),
                        pending: None,
                        pinned_at_ticks: *at,
                        inherited_from: Some(origin),
                        user_set: None,
                        thread_level: false,
                    },
                );
                found.push(Adopted {
                    pid,
                    tid,
                    from_pid: origin,
                    original: original.clone(),
                });
            }
        }
        if !found.is_empty() {
            self.save()?;
        }
        Ok(found)
    }

    /// Put every journaled thread back (see the module comment), then empty the journal.
    /// Threads and children born since the last sweep are adopted first, so they are restored
    /// too. Never fails: per-thread failures and a journal that could not be cleared are in the
    /// report.
    pub fn restore_all(&mut self, online: &CpuSet) -> RestoreReport {
        let mut report = RestoreReport::default();
        // A failed save only loses the on-disk copy; the entries are restored below anyway.
        let _ = self.adopt_new_tasks();
        for (&tid, e) in &self.data.threads {
            // Only the very thread journaled: a thread that reused the id (another start
            // time) is gone and left alone whatever its set, and so is every thread when the
            // record has no start time to tell them apart.
            if !is_same_thread(&self.proc_, tid, e) {
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
            let ours = e.user_set.is_none()
                && (e.applied.as_ref() == Some(&current) || e.pending.as_ref() == Some(&current));
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
        // Failed threads stay journaled, so a later restore can try again.
        let failed: BTreeSet<u32> = report.failed.iter().map(|(t, _)| *t).collect();
        self.data.threads.retain(|t, _| failed.contains(t));
        if let Err(e) = self.save() {
            report.clear_failed = Some(e.to_string());
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens a journal this test closed a moment ago. The lock belongs to the open file, and a
    /// process another test forks between its fork and exec holds a copy of every descriptor, so
    /// on a loaded machine the lock can outlive our `drop` by that window (seen under two CPU
    /// burners). Retry while it is `Locked`, for at most 30 s (a hang guard, not a timing claim).
    fn reopen(p: &Path) -> Journal {
        for _ in 0..600 {
            match Journal::open(p) {
                Err(JournalError::Locked { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                Ok(j) => return j,
                Err(e) => panic!("reopen {}: {e}", p.display()),
            }
        }
        panic!("{} stayed locked for 30 s after it was closed", p.display())
    }

    fn entry(pid: u32) -> ThreadEntry {
        ThreadEntry {
            pid,
            comm: "gone".into(),
            starttime_ticks: 1,
            original: CpuSet::parse_list("0-1").expect("list"),
            applied: Some(CpuSet::single(0)),
            pending: None,
            pinned_at_ticks: None,
            inherited_from: None,
            user_set: None,
            thread_level: false,
        }
    }

    #[test]
    fn second_open_is_refused_while_the_first_holds_the_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        let first = Journal::open(&p).expect("first");
        let err = Journal::open(&p).expect_err("second must fail");
        assert!(matches!(err, JournalError::Locked { .. }), "{err}");
        drop(first);
        reopen(&p);
    }

    #[test]
    fn a_symlink_reaches_the_same_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&p, &link).expect("symlink");
        let first = Journal::open(&p).expect("first");
        let err = Journal::open(&link).expect_err("through the link");
        assert!(matches!(err, JournalError::Locked { .. }), "{err}");
        drop(first);
        // Opened through the link, the journal is the real file; the link stays a link.
        let mut j = reopen(&link);
        assert_eq!(j.path(), fs::canonicalize(&p).expect("canon"));
        j.data.threads.insert(999_999_999, entry(999_999_999));
        j.save().expect("save");
        assert!(fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
        assert!(fs::read_to_string(&p).expect("read").contains("999999999"));
    }

    #[test]
    fn non_regular_files_are_refused_and_left_as_they_are() {
        let err = Journal::open(Path::new("/dev/null")).expect_err("/dev/null");
        assert!(matches!(err, JournalError::NotRegular { .. }), "{err}");
        assert!(err.to_string().contains("/dev/null"), "{err}");
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::metadata("/dev/null")
            .expect("meta")
            .file_type()
            .is_char_device());
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Journal::open(dir.path()).expect_err("directory");
        assert!(err.to_string().contains("a directory"), "{err}");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere/x"), &dangling).expect("symlink");
        let err = Journal::open(&dangling).expect_err("dangling");
        assert!(err.to_string().contains("dangling"), "{err}");
    }

    #[test]
    fn corrupt_journal_is_reported_once_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        fs::write(&p, "{not json").expect("write");
        let err = Journal::open(&p).expect_err("corrupt").to_string();
        assert!(err.contains("j.json"), "{err}");
        assert_eq!(err.matches("corrupt").count(), 1, "{err}");
        assert_eq!(err.matches("j.json").count(), 1, "{err}");
        // Left as it was, for a human to look at.
        assert_eq!(fs::read_to_string(&p).expect("read"), "{not json");
    }

    #[test]
    fn unknown_versions_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        fs::write(&p, r#"{"version": 99, "threads": {}}"#).expect("write");
        let err = Journal::open(&p).expect_err("v99");
        assert!(
            matches!(err, JournalError::Version { found: 99, .. }),
            "{err}"
        );
        let data = JournalData {
            version: 99,
            threads: BTreeMap::new(),
        };
        fs::write(&p, record_line(3, &data).expect("line")).expect("write");
        let err = Journal::open(&p).expect_err("v99 record");
        assert!(err.to_string().contains("version 99"), "{err}");
    }

    #[test]
    fn version_1_plain_json_is_still_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j.json");
        let v1 = r#"{"version": 1, "threads": {"999999999": {"pid": 999999999, "comm": "x",
            "starttime_ticks": 1, "original": "0-1", "applied": "0", "pending": null}}}"#;
        fs::write(&p, v1).expect("write");
        let mut j = Journal::open(&p).expect("v1");
        assert!(j.has_entries());
        let r = j.restore_all(&CpuSet::parse_list("0-1").expect("list"));
        assert_eq!(r.gone, vec![999_999_999]);
        assert_eq!(fs::read(&p).expect("read").len(), 0, "cleared");
    }

    /// A journal deleted under the agent is written again at its path (with what it holds),
    /// and a path another file took is left alone.
    #[test]
    fn a_deleted_journal_is_written_again_and_a_taken_path_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        j.data.threads.insert(900_000_001, entry(900_000_001));
        j.save().expect("save");
        assert_eq!(j.relink(), Relink::Linked);
        fs::remove_file(&p).expect("rm");
        assert_eq!(j.relink(), Relink::Recreated);
        let back = parse(&fs::read(&p).expect("read")).expect("parse");
        assert!(back.data.threads.contains_key(&900_000_001));
        // The new file is the journal now, and locked: a second agent is refused.
        assert!(matches!(
            Journal::open(&p),
            Err(JournalError::Locked { .. })
        ));
        assert_eq!(j.relink(), Relink::Linked);
        j.data.threads.insert(900_000_002, entry(900_000_002));
        j.save().expect("save");
        let back = parse(&fs::read(&p).expect("read")).expect("parse");
        assert_eq!(back.data.threads.len(), 2);
        // Someone else's file at the path: not touched.
        fs::remove_file(&p).expect("rm");
        fs::write(&p, b"theirs").expect("write");
        assert_eq!(j.relink(), Relink::Taken);
        assert_eq!(fs::read(&p).expect("read"), b"theirs");
        // Its whole directory gone: it cannot be made again, which is said, and the journal
        // goes on (on its unlinked file) instead of failing the agent.
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).expect("mkdir");
        let q = sub.join("j");
        let mut k = Journal::open(&q).expect("open");
        k.data.threads.insert(900_000_003, entry(900_000_003));
        k.save().expect("save");
        fs::remove_dir_all(&sub).expect("rm -r");
        match k.relink() {
            Relink::Failed(why) => assert!(why.contains("cannot create it again"), "{why}"),
            other => panic!("{other:?}"),
        }
        k.data.threads.insert(900_000_004, entry(900_000_004));
        k.save().expect("the unlinked file still takes records");
    }

    #[test]
    fn saves_never_overwrite_the_record_they_supersede() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        for i in 0..20u32 {
            j.data
                .threads
                .insert(900_000_000 + i, entry(900_000_000 + i));
            let before = fs::read(&p).expect("read");
            let old = parse(&before).expect("parse before");
            j.save().expect("save");
            let after = fs::read(&p).expect("read");
            let new = parse(&after).expect("parse after");
            assert_eq!(new.data.threads.len(), i as usize + 1);
            assert!(new.seq > old.seq);
            // The superseded record's bytes are untouched unless the file was cut after the
            // new one (which is then complete and synced).
            if let Some((b, e)) = old.range {
                let (nb, ne) = new.range.expect("range");
                assert!(ne <= b || nb >= e, "new {nb}..{ne} overlaps old {b}..{e}");
            }
            // Bounded: the file never holds more than a few records.
            assert!(after.len() < 4 * (new.range.expect("r").1 - new.range.expect("r").0) as usize);
        }
        drop(j);
        let j = reopen(&p);
        assert_eq!(j.data().threads.len(), 20);
    }

    #[test]
    fn a_torn_record_falls_back_to_the_previous_one() {
        let mut one = JournalData {
            version: JOURNAL_VERSION,
            ..Default::default()
        };
        one.threads.insert(5, entry(5));
        let mut two = one.clone();
        two.threads.insert(6, entry(6));
        let a = record_line(1, &one).expect("a");
        let b = record_line(2, &two).expect("b");
        for cut in 0..b.len() {
            let mut bytes = a.clone();
            bytes.extend_from_slice(&b[..cut]);
            let p = parse(&bytes).expect("parse");
            assert_eq!(p.data.threads.len(), 1, "cut at {cut}");
        }
        let mut bytes = a.clone();
        bytes.extend_from_slice(&b);
        assert_eq!(parse(&bytes).expect("parse").data.threads.len(), 2);
        // A flipped bit in the newest record: the checksum catches it.
        let mut flipped = bytes.clone();
        let i = a.len() + b.len() - 5;
        flipped[i] ^= 0x01;
        assert_eq!(parse(&flipped).expect("parse").data.threads.len(), 1);
    }

    #[test]
    fn a_torn_first_record_is_an_empty_journal_and_the_next_save_is_readable() {
        let mut d = JournalData {
            version: JOURNAL_VERSION,
            ..Default::default()
        };
        d.threads.insert(5, entry(5));
        let a = record_line(1, &d).expect("a");
        for cut in 1..a.len() {
            let p = parse(&a[..cut]).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            assert!(p.data.threads.is_empty());
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j");
        fs::write(&p, &a[..a.len() / 2]).expect("write");
        let mut j = Journal::open(&p).expect("torn first record");
        assert!(!j.has_entries());
        j.data.threads.insert(6, entry(6));
        j.save().expect("save");
        drop(j);
        let j = reopen(&p);
        assert_eq!(
            j.data().threads.keys().copied().collect::<Vec<_>>(),
            vec![6]
        );
        // A torn record after a valid one: the next save still starts its own line.
        let dir2 = tempfile::tempdir().expect("tempdir");
        let p2 = dir2.path().join("j");
        let mut bytes = a.clone();
        bytes.extend_from_slice(&record_line(2, &d).expect("b")[..40]);
        fs::write(&p2, &bytes).expect("write");
        let mut j = Journal::open(&p2).expect("torn tail");
        assert_eq!(j.data().threads.len(), 1);
        j.data.threads.insert(7, entry(7));
        j.save().expect("save");
        drop(j);
        assert_eq!(reopen(&p2).data().threads.len(), 2);
        // A complete line that fails its checksum, with no valid record, is damage.
        let mut bad = a.clone();
        bad[30] ^= 1;
        assert!(matches!(parse(&bad), Err(ParseError::Corrupt(_))));
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
            j.data.threads.insert(999_999_999, entry(999_999_999));
            j.save().expect("save");
        }
        let mut j = reopen(&p);
        assert!(j.has_entries());
        let r = j.restore_all(&CpuSet::parse_list("0-1").expect("list"));
        assert_eq!(r.gone, vec![999_999_999]);
        assert_eq!(r.clear_failed, None);
        assert!(!j.has_entries());
        assert_eq!(fs::read(&p).expect("read").len(), 0);
    }

    /// Tests that pin threads of this test process take this: each one's adoption sweep
    /// looks at every thread of the process and would adopt the other's pinned threads.
    static PINS_THIS_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The online CPUs, the first two as single sets, and a fresh journal in a temporary
    /// directory (kept alive by the returned guard); `None`, with the reason printed, where
    /// fewer than two CPUs are online.
    fn two_cpus_and_journal() -> Option<(CpuSet, CpuSet, CpuSet, tempfile::TempDir, Journal)> {
        let online = affinity::online_cpus();
        let (Some(a), Some(b)) = (online.first(), online.iter().nth(1)) else {
            eprintln!("SKIPPED: needs 2 online CPUs");
            return None;
        };
        let (c0, c1) = (CpuSet::single(a), CpuSet::single(b));
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::open(&dir.path().join("j")).expect("open");
        Some((online, c0, c1, dir, j))
    }

    fn pins_this_process() -> std::sync::MutexGuard<'static, ()> {
        PINS_THIS_PROCESS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn gettid() -> u32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    }

    /// A thread of this test process that starts one child thread when asked (the child
    /// inherits the parent's affinity of that moment); both end when this is dropped.
    struct ParentThread {
        tid: u32,
        tids: std::sync::mpsc::Receiver<u32>,
        go: Option<std::sync::mpsc::Sender<()>>,
        end: Option<std::sync::mpsc::Sender<()>>,
        handle: Option<std::thread::JoinHandle<()>>,
    }

    impl ParentThread {
        fn start() -> Self {
            let (tx, tids) = std::sync::mpsc::channel::<u32>();
            let (go, go_rx) = std::sync::mpsc::channel::<()>();
            let (end, end_rx) = std::sync::mpsc::channel::<()>();
            let handle = std::thread::spawn(move || {
                let _ = tx.send(gettid());
                if go_rx.recv().is_err() {
                    return;
                }
                let tx2 = tx.clone();
                let child = std::thread::spawn(move || {
                    let _ = tx2.send(gettid());
                    let _ = end_rx.recv();
                });
                let _ = child.join();
            });
            let tid = tids.recv().expect("parent tid");
            Self {
                tid,
                tids,
                go: Some(go),
                end: Some(end),
                handle: Some(handle),
            }
        }

        /// Start the child now; its tid.
        fn spawn_child(&mut self) -> u32 {
            if let Some(go) = &self.go {
                go.send(()).expect("go");
            }
            self.tids.recv().expect("child tid")
        }
    }

    impl Drop for ParentThread {
        fn drop(&mut self) {
            self.end.take();
            self.go.take();
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }

    /// On threads of this test process: a thread born from a pinned thread is adopted with the
    /// original of its process; a thread re-pinned by "someone else" is recorded and left alone.
    #[test]
    fn adoption_and_overrides_on_real_threads() {
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let mut parent = ParentThread::start();
        let ptid = parent.tid;
        let original = affinity::get(ptid).expect("get");
        j.before_change(pid, ptid, &c0).expect("before");
        let applied = affinity::set(ptid, &c0, &online).expect("set");
        j.after_change(ptid, Some(&applied)).expect("after");
        // Born after the pin: inherits it.
        let ctid = parent.spawn_child();
        let adopted = j.adopt_new_tasks().expect("adopt");
        assert!(
            adopted
                .iter()
                .any(|a| a.tid == ctid && a.original == original && a.from_pid == pid),
            "{adopted:?}"
        );
        // "Someone else" moves the child thread: recorded, the process is left alone.
        affinity::set(ctid, &c1, &online).expect("user");
        let o = j.detect_overrides().expect("detect");
        assert!(o.iter().any(|o| o.tid == ctid && o.theirs == c1), "{o:?}");
        assert!(j.is_user_owned(pid));
        let r = j.restore_all(&online);
        assert!(
            r.left_alone.iter().any(|(t, s)| *t == ctid && *s == c1),
            "{r:?}"
        );
        // The thread the user did not touch is still ours: it gets its original back.
        assert!(r.restored.iter().any(|(t, _)| *t == ptid), "{r:?}");
        assert_eq!(
            affinity::get(ptid).expect("get"),
            original.intersection(&online)
        );
        assert_eq!(affinity::get(ctid).expect("get"), c1);
    }

    /// Two threads of this test process placed apart on their own (thread-level); a thread
    /// born from the second inherits *its* set and is adopted with its original (not missed
    /// because the first thread's set is the one found for the process).
    #[test]
    fn a_thread_born_from_a_thread_placed_on_its_own_is_adopted() {
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let tx1 = tx.clone();
        let first = std::thread::spawn(move || {
            let _ = tx1.send(gettid());
            let _ = end_rx.recv();
        });
        let a = rx.recv().expect("tid");
        let second = std::thread::spawn(move || {
            let _ = tx.send(gettid());
            let _ = go_rx.recv();
            let tx2 = tx.clone();
            let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
            let child = std::thread::spawn(move || {
                let _ = tx2.send(gettid());
                let _ = stop_rx.recv();
            });
            // Wait for the test's word (the sender is dropped at the end) then stop the child.
            let _ = go_rx.recv();
            let _ = stop_tx.send(());
            let _ = child.join();
        });
        let b = rx.recv().expect("tid");
        let original = affinity::get(b).expect("get");
        for (tid, set) in [(a, &c0), (b, &c1)] {
            j.before_thread_change(pid, tid, set).expect("before");
            let applied = affinity::set(tid, set, &online).expect("set");
            j.after_change(tid, Some(&applied)).expect("after");
        }
        assert!(j.data().threads[&a].thread_level && j.data().threads[&b].thread_level);
        go_tx.send(()).expect("go");
        let c = rx.recv().expect("child tid");
        let adopted = j.adopt_new_tasks().expect("adopt");
        assert!(
            adopted
                .iter()
                .any(|x| x.tid == c && x.original == original && x.from_pid == pid),
            "{adopted:?}"
        );
        let r = j.restore_all(&online);
        for t in [a, b, c] {
            assert!(r.restored.iter().any(|(x, _)| *x == t), "{t}: {r:?}");
        }
        assert_eq!(
            affinity::get(c).expect("get"),
            original.intersection(&online)
        );
        drop(go_tx);
        let _ = end_tx.send(());
        first.join().expect("join");
        second.join().expect("join");
    }

    /// A thread of this test process that waits until its sender is dropped (or sent to).
    fn parked_thread() -> (
        u32,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let _ = tx.send(gettid());
            let _ = end_rx.recv();
        });
        let tid = rx.recv().expect("tid");
        (tid, end_tx, h)
    }

    /// The clock tick (the unit of start times) in which a thread started is over by the time
    /// this returns: a pin made after it is in a later tick than the thread's start. A lower
    /// bound on elapsed time (a loaded machine only makes it longer), not a timing claim.
    fn next_tick() {
        std::thread::sleep(std::time::Duration::from_millis(30));
    }

    /// Thread-level placement pins one thread of a process and leaves its siblings: a sibling
    /// that already ran on the same set (the program pinned it itself) was not born from our
    /// pin, so it is not adopted and keeps its own set at restore.
    #[test]
    fn a_sibling_already_on_the_set_we_give_a_thread_is_not_adopted() {
        let _serial = pins_this_process();
        let Some((online, _, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let (own, end_own, h_own) = parked_thread();
        let (ours, end_ours, h_ours) = parked_thread();
        // The program's own pin, before the agent ever looks.
        affinity::set(own, &c1, &online).expect("own pin");
        let original = affinity::get(ours).expect("get");
        next_tick();
        j.before_thread_change(pid, ours, &c1).expect("before");
        let applied = affinity::set(ours, &c1, &online).expect("set");
        j.after_change(ours, Some(&applied)).expect("after");
        let adopted = j.adopt_new_tasks().expect("adopt");
        assert!(adopted.iter().all(|a| a.tid != own), "{adopted:?}");
        let r = j.restore_all(&online);
        assert!(r.restored.iter().any(|(t, _)| *t == ours), "{r:?}");
        assert_eq!(
            affinity::get(ours).expect("get"),
            original.intersection(&online)
        );
        assert_eq!(affinity::get(own).expect("get"), c1, "{r:?}");
        drop((end_own, end_ours));
        h_own.join().expect("join");
        h_ours.join().expect("join");
    }

    /// A thread the agent moves on its own after placing a sibling: its original is the set it
    /// had, even when that equals the sibling's new set (it was not born from that pin).
    #[test]
    fn a_thread_moved_after_a_sibling_keeps_its_own_original() {
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let (own, end_own, h_own) = parked_thread();
        let (ours, end_ours, h_ours) = parked_thread();
        affinity::set(own, &c1, &online).expect("own pin");
        next_tick();
        for (tid, set) in [(ours, &c1), (own, &c0)] {
            j.before_thread_change(pid, tid, set).expect("before");
            let applied = affinity::set(tid, set, &online).expect("set");
            j.after_change(tid, Some(&applied)).expect("after");
        }
        assert_eq!(j.data().threads[&own].original, c1);
        let r = j.restore_all(&online);
        assert_eq!(affinity::get(own).expect("get"), c1, "{r:?}");
        drop((end_own, end_ours));
        h_own.join().expect("join");
        h_ours.join().expect("join");
    }

    /// A thread id the journal holds for a thread that exited (another process's, here a pid
    /// that does not exist) and that now names a live thread we move: the live thread is
    /// journaled afresh with its own original, and restored.
    #[test]
    fn a_reused_thread_id_is_journaled_afresh() {
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let (tid, end, h) = parked_thread();
        let original = affinity::get(tid).expect("get");
        let mut stale = entry(999_999_998);
        stale.original = c0.clone();
        j.data.threads.insert(tid, stale);
        j.before_thread_change(pid, tid, &c1).expect("before");
        let applied = affinity::set(tid, &c1, &online).expect("set");
        j.after_change(tid, Some(&applied)).expect("after");
        assert_eq!(j.data().threads[&tid].pid, pid);
        assert_eq!(j.data().threads[&tid].original, original);
        let r = j.restore_all(&online);
        assert!(r.restored.iter().any(|(t, _)| *t == tid), "{r:?}");
        assert_eq!(
            affinity::get(tid).expect("get"),
            original.intersection(&online)
        );
        drop(end);
        h.join().expect("join");
    }

    /// The sweep forgets threads that exited (the journal would otherwise grow with every
    /// thread a busy server starts and ends), but keeps a user's re-pin while its process
    /// lives: that process stays theirs.
    #[test]
    fn exited_threads_are_forgotten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        let pid = std::process::id();
        j.data.threads.insert(999_999_999, entry(999_999_999));
        let mut users = entry(pid);
        users.user_set = Some(CpuSet::single(0));
        j.data.threads.insert(999_999_997, users);
        let mut gone_users = entry(999_999_996);
        gone_users.user_set = Some(CpuSet::single(0));
        j.data.threads.insert(999_999_996, gone_users);
        assert_eq!(j.forget_exited().expect("forget"), 2);
        assert_eq!(
            j.data().threads.keys().copied().collect::<Vec<_>>(),
            vec![999_999_997]
        );
        assert!(j.is_user_owned(pid));
        drop(j);
        assert_eq!(reopen(&p).data().threads.len(), 1);
    }

    /// A thread the pinned thread starts after the set call but before the journal records
    /// the outcome (a tick later here) was born from our pin: it is adopted, not left pinned.
    #[test]
    fn a_thread_born_between_the_set_and_its_record_is_adopted() {
        let _serial = pins_this_process();
        let Some((online, _, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let mut parent = ParentThread::start();
        let ptid = parent.tid;
        let original = affinity::get(ptid).expect("get");
        j.before_thread_change(pid, ptid, &c1).expect("before");
        let applied = affinity::set(ptid, &c1, &online).expect("set");
        let ctid = parent.spawn_child();
        next_tick();
        j.after_change(ptid, Some(&applied)).expect("after");
        let adopted = j.adopt_new_tasks().expect("adopt");
        assert!(
            adopted
                .iter()
                .any(|a| a.tid == ctid && a.original == original),
            "{adopted:?}"
        );
        let r = j.restore_all(&online);
        assert_eq!(
            affinity::get(ctid).expect("get"),
            original.intersection(&online),
            "{r:?}"
        );
    }

    /// The agent dies between a thread's set call and the record of its outcome (the journal
    /// holds the change as pending), after the thread started another: recovery restores both.
    #[test]
    fn a_thread_born_from_a_pending_change_is_restored_after_a_crash() {
        let _serial = pins_this_process();
        let Some((online, _, c1, dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let mut parent = ParentThread::start();
        let ptid = parent.tid;
        let original = affinity::get(ptid).expect("get");
        j.before_thread_change(pid, ptid, &c1).expect("before");
        affinity::set(ptid, &c1, &online).expect("set");
        let ctid = parent.spawn_child();
        // The crash: no after_change.
        drop(j);
        let mut j = reopen(&dir.path().join("j"));
        let r = j.restore_all(&online);
        for t in [ptid, ctid] {
            assert_eq!(
                affinity::get(t).expect("get"),
                original.intersection(&online),
                "{t}: {r:?}"
            );
        }
    }

    /// A journal entry under the id of a live thread of this process, but for a thread that
    /// started at another time (an exited one whose id was reused): the live thread carries the
    /// set the entry says we applied, yet it is not the journaled thread. Restoring reports it
    /// gone and leaves its set alone; the sweep does not adopt it either.
    #[test]
    fn a_thread_whose_start_time_differs_is_gone_whatever_its_set() {
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let (tid, end, h) = parked_thread();
        affinity::set(tid, &c1, &online).expect("set");
        let start = Proc::default()
            .thread_stat(pid, tid)
            .expect("stat")
            .starttime_ticks;
        let mut stale = entry(pid);
        stale.starttime_ticks = start + 1;
        stale.original = c0.clone();
        stale.applied = Some(c1.clone());
        j.data.threads.insert(tid, stale);
        assert!(j.adopt_new_tasks().expect("adopt").is_empty());
        let r = j.restore_all(&online);
        assert_eq!(r.gone, vec![tid], "{r:?}");
        assert!(r.restored.is_empty(), "{r:?}");
        assert_eq!(affinity::get(tid).expect("get"), c1);
        drop(end);
        h.join().expect("join");
    }

    /// A child process stands for a process that reused the pid of one a dead agent pinned:
    /// the journal's entry for its main thread has an earlier start time. Neither it nor its
    /// set is touched, and the stale entry does not make it look born pinned.
    #[test]
    fn a_process_that_reused_a_journaled_pid_is_left_alone() {
        // The child is a descendant of this process: another test's sweep would adopt it.
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let Ok(child) = std::process::Command::new("sleep").arg("60").spawn() else {
            eprintln!("SKIPPED: cannot start sleep");
            return;
        };
        struct KillOnDrop(std::process::Child);
        impl Drop for KillOnDrop {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let child = KillOnDrop(child);
        let pid = child.0.id();
        affinity::set(pid, &c1, &online).expect("set");
        let start = Proc::default().stat(pid).expect("stat").starttime_ticks;
        let mut stale = entry(pid);
        stale.starttime_ticks = start.saturating_sub(1).max(1);
        stale.original = c0.clone();
        stale.applied = Some(c1.clone());
        stale.pinned_at_ticks = Some(1);
        j.data.threads.insert(pid, stale.clone());
        // An entry of another thread of that earlier process, with a start time that would
        // pass for one of the new process: the main thread's entry already says the process
        // is another one, so it makes nothing look born pinned either.
        let mut sibling = stale;
        sibling.starttime_ticks = start + 1;
        j.data.threads.insert(999_999_990, sibling);
        assert!(j.process_pins(pid).is_empty());
        assert!(j.adopt_new_tasks().expect("adopt").is_empty());
        let r = j.restore_all(&online);
        assert_eq!(r.gone, vec![pid, 999_999_990], "{r:?}");
        assert_eq!(affinity::get(pid).expect("get"), c1);
        drop(child);
    }

    /// An entry without a start time (0) cannot be told from a thread that reused its id: a
    /// live thread carrying its applied set is not restored, and no thread is adopted on its
    /// word.
    #[test]
    fn an_entry_without_a_start_time_is_never_applied() {
        let _serial = pins_this_process();
        let Some((online, c0, c1, _dir, mut j)) = two_cpus_and_journal() else {
            return;
        };
        let pid = std::process::id();
        let (tid, end, h) = parked_thread();
        let (other, end_other, h_other) = parked_thread();
        for t in [tid, other] {
            affinity::set(t, &c1, &online).expect("set");
        }
        let mut unknown = entry(pid);
        unknown.starttime_ticks = 0;
        unknown.original = c0.clone();
        unknown.applied = Some(c1.clone());
        j.data.threads.insert(tid, unknown);
        assert!(j.adopt_new_tasks().expect("adopt").is_empty());
        let r = j.restore_all(&online);
        assert_eq!(r.gone, vec![tid], "{r:?}");
        for t in [tid, other] {
            assert_eq!(affinity::get(t).expect("get"), c1, "{t}: {r:?}");
        }
        drop((end, end_other));
        h.join().expect("join");
        h_other.join().expect("join");
    }

    /// Restoring only, a journal that does not exist is refused and not created.
    #[test]
    fn open_existing_refuses_a_missing_journal_and_creates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("typo");
        let err = Journal::open_existing(&p).expect_err("missing");
        assert!(matches!(err, JournalError::Missing { .. }), "{err}");
        assert!(err.to_string().contains("typo"), "{err}");
        assert!(!p.exists());
        fs::write(&p, "").expect("write");
        let j = Journal::open_existing(&p).expect("an empty journal exists");
        assert!(!j.has_entries());
    }

    #[test]
    fn crc32_matches_the_reference_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }
}
