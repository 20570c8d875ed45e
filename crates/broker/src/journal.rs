//! Persistence: registrations, their cumulative counts and exclusive grants, in an append-only
//! journal of checksummed records, so a broker killed with `SIGKILL` and restarted continues
//! every registration's counts from the last value it reported.
//!
//! Each line is `counterpoint-broker SEQ CRC32 JSON` (CRC-32/IEEE of the JSON, 8 hex digits). A
//! torn or corrupted line fails its checksum and is skipped; replaying the valid records in
//! order gives the state. The broker writes a checkpoint *before* it answers a read with the
//! values it checkpoints, so no value a client saw is lost: after a restart the counts continue
//! from at least what the client last saw, and the downtime appears as enabled-but-not-running
//! time. The journal must be a regular file (opened with `O_NOFOLLOW`; a symlink, a directory or
//! a device is refused). Opening compacts it: the live state is written to `PATH.tmp`, synced and
//! renamed over the journal.
//!
//! One broker per journal: an exclusive `flock` on `REAL.lock` (REAL the journal's real path, so
//! two spellings of one file meet on one lock) is taken before the journal is read and held for
//! the journal's life. Not on the journal itself: compaction renames a new file over it, and a
//! lock on the old inode would not stop the next broker. A second broker is refused with the
//! holder's pid; it never compacts the journal under the first nor restores its registrations.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Journal errors.
#[derive(Debug, Error)]
pub enum JournalError {
    /// I/O on the journal.
    #[error("journal {}: {what}: {error}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The error.
        error: std::io::Error,
    },
    /// Not a regular file.
    #[error(
        "journal {}: {kind}, not a regular file (symbolic links, directories and devices are \
         refused)",
        .path.display()
    )]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead ("a directory", "a symbolic link", ...).
        kind: &'static str,
    },
    /// Another broker holds the journal's lock.
    #[error(
        "journal {}: locked by another broker{} (lock file {}); refusing to start: two \
         brokers on one journal would overwrite each other's journal and both count its \
         registrations (stop that broker or give another --journal)",
        .path.display(),
        .holder.map_or(String::new(), |p| format!(", pid {p}")),
        .lock.display()
    )]
    Locked {
        /// The journal as given.
        path: PathBuf,
        /// The lock file: the journal's real path and `.lock`.
        lock: PathBuf,
        /// The holder's pid when known: `/proc/locks`, else what the holder wrote in the lock file.
        holder: Option<u32>,
    },
    /// A file that does not begin with a journal line: opening would have compacted it to
    /// nothing, so it is refused and left as it is.
    #[error(
        "journal {}: not a counterpoint-broker journal (it does not begin with a \
         `counterpoint-broker` line); refusing to rewrite it: give a new path or remove the file",
        .path.display()
    )]
    NotAJournal {
        /// The file.
        path: PathBuf,
    },
}

/// A registration as journaled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegRecord {
    /// Id.
    pub id: u64,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Registering process (the registration ends when it is gone).
    pub pid: i32,
    /// Events as registered.
    pub events: String,
    /// Target as registered.
    pub target: String,
    /// Share.
    pub share: u32,
    /// `user` or `system`.
    pub class: String,
    /// Wall-clock registration time, ns since the epoch (enabled time counts from here).
    pub registered_wall_ns: u64,
    /// The registering process's start time (clock ticks since boot, `stat` field 22): on a
    /// restart a process now holding `pid` with another start time is a new process, and the
    /// registration's consumer is gone. Absent in journals written before session 30 (the
    /// number alone is checked then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start: Option<u64>,
    /// What the target resolved to at registration (`Resolved::identity`: for a task named by
    /// its number, the number and the task's start time): on a restart a target that now
    /// resolves to another task is refused instead of counting the task that took the number.
    /// Absent in journals written before session 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_identity: Option<String>,
}

/// Cumulative counts of a registration at some moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Enabled time reported.
    pub enabled_ns: u64,
    /// Running time reported (for a per-CPU registration, the mean over its CPUs).
    pub running_ns: u64,
    /// Raw count per event, in registration order; for a per-CPU registration per CPU then
    /// per event (CPU-major).
    pub raw: Vec<u64>,
    /// The kernel counters' own running time credited with `raw`, in ns, in `raw`'s layout
    /// (empty in a journal written before it was kept: counted from 0 again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted_ns: Vec<u64>,
    /// Running time per scheduling unit (one per CPU of a per-CPU registration; empty for a
    /// task target, whose one unit's running time is `running_ns`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units_running_ns: Vec<u64>,
}

/// One journal record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Record {
    /// A new registration.
    Register(RegRecord),
    /// Counts reported for `id`.
    Checkpoint {
        /// Registration.
        id: u64,
        /// The counts.
        cp: Checkpoint,
    },
    /// The registration ended.
    Unregister {
        /// Registration.
        id: u64,
    },
    /// An exclusive grant until a wall-clock time.
    Exclusive {
        /// Registration.
        id: u64,
        /// End, ns since the epoch.
        until_wall_ns: u64,
    },
}

/// The state a journal replays to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// Live registrations with their last checkpoint.
    pub regs: BTreeMap<u64, (RegRecord, Checkpoint)>,
    /// The exclusive grant, if one was made (it may have expired).
    pub exclusive: Option<(u64, u64)>,
    /// Records skipped as torn or corrupt.
    pub skipped: usize,
    /// The highest id ever used.
    pub max_id: u64,
}

impl State {
    fn apply(&mut self, r: Record) {
        match r {
            Record::Register(reg) => {
                self.max_id = self.max_id.max(reg.id);
                self.regs.insert(reg.id, (reg, Checkpoint::default()));
            }
            Record::Checkpoint { id, cp } => {
                if let Some((_, old)) = self.regs.get_mut(&id) {
                    // Never backwards, whatever order records come in.
                    old.enabled_ns = old.enabled_ns.max(cp.enabled_ns);
                    old.running_ns = old.running_ns.max(cp.running_ns);
                    if old.units_running_ns.len() != cp.units_running_ns.len() {
                        old.units_running_ns = cp.units_running_ns;
                    } else {
                        for (o, n) in old.units_running_ns.iter_mut().zip(cp.units_running_ns) {
                            *o = (*o).max(n);
                        }
                    }
                    if old.counted_ns.len() != cp.counted_ns.len() {
                        old.counted_ns = cp.counted_ns;
                    } else {
                        for (o, n) in old.counted_ns.iter_mut().zip(cp.counted_ns) {
                            *o = (*o).max(n);
                        }
                    }
                    if old.raw.len() != cp.raw.len() {
                        old.raw = cp.raw;
                    } else {
                        for (o, n) in old.raw.iter_mut().zip(cp.raw) {
                            *o = (*o).max(n);
                        }
                    }
                }
            }
            Record::Unregister { id } => {
                self.regs.remove(&id);
                if matches!(self.exclusive, Some((e, _)) if e == id) {
                    self.exclusive = None;
                }
            }
            Record::Exclusive { id, until_wall_ns } => self.exclusive = Some((id, until_wall_ns)),
        }
    }

    /// The records that rebuild this state.
    pub fn records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        for (reg, cp) in self.regs.values() {
            out.push(Record::Register(reg.clone()));
            out.push(Record::Checkpoint {
                id: reg.id,
                cp: cp.clone(),
            });
        }
        if let Some((id, until_wall_ns)) = self.exclusive {
            out.push(Record::Exclusive { id, until_wall_ns });
        }
        out
    }
}

/// CRC-32 (IEEE, reflected), bitwise: records are small and written rarely.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

const MAGIC: &str = "counterpoint-broker";

fn line(seq: u64, r: &Record) -> Vec<u8> {
    let json = serde_json::to_string(r).unwrap_or_default();
    format!("{MAGIC} {seq} {:08x} {json}\n", crc32(json.as_bytes())).into_bytes()
}

/// Replay journal text. Never fails: bad lines are counted in `skipped`.
pub fn replay(bytes: &[u8]) -> State {
    let mut st = State::default();
    for raw in bytes.split(|&b| b == b'\n') {
        if raw.is_empty() {
            continue;
        }
        match parse_line(raw) {
            Some(r) => st.apply(r),
            None => st.skipped += 1,
        }
    }
    st
}

fn parse_line(raw: &[u8]) -> Option<Record> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut parts = text.splitn(4, ' ');
    if parts.next()? != MAGIC {
        return None;
    }
    parts.next()?.parse::<u64>().ok()?;
    let crc = u32::from_str_radix(parts.next()?, 16).ok()?;
    let json = parts.next()?;
    if crc32(json.as_bytes()) != crc {
        return None;
    }
    serde_json::from_str(json).ok()
}

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    seq: u64,
    since_compaction: u64,
    /// The lock file, kept open: its `flock` is this broker's hold on the journal.
    _lock: File,
}

/// `path` with `suffix` appended to its file name (`j.journal` → `j.journal.tmp`; not
/// `with_extension`, which would make `j.tmp` for both `j.journal` and `j.log`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Take the journal's lock (see the module comment): `REAL.lock`, created if absent and never
/// removed (removing it would let the next two brokers lock two different files).
fn lock(path: &Path) -> Result<File, JournalError> {
    use counterpoint_host::journal::JournalError as HostError;
    let real = counterpoint_host::journal::resolve(path).map_err(|e| match e {
        HostError::NotRegular { kind, .. } => JournalError::NotRegular {
            path: path.to_path_buf(),
            kind,
        },
        HostError::Io { what, error, .. } => JournalError::Io {
            path: path.to_path_buf(),
            what,
            error,
        },
        other => JournalError::Io {
            path: path.to_path_buf(),
            what: "resolving its real path",
            error: std::io::Error::other(other.to_string()),
        },
    })?;
    let lock = with_suffix(&real, ".lock");
    let io = |what, error| JournalError::Io {
        path: lock.clone(),
        what,
        error,
    };
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&lock)
        .map_err(|e| io("opening its lock file", e))?;
    let m = f.metadata().map_err(|e| io("stat", e))?;
    if !m.file_type().is_file() {
        return Err(io(
            "its lock file",
            std::io::Error::other(format!(
                "{}, not a regular file",
                counterpoint_host::files::kind(m.file_type())
            )),
        ));
    }
    if !counterpoint_host::files::try_lock_exclusive(&f).map_err(|e| io("locking", e))? {
        // The kernel's word first; the pid the holder wrote where /proc/locks cannot tell
        // (a file system whose inode numbers differ from the lock's, as overlayfs may).
        let written = || {
            let mut text = String::new();
            (&f).read_to_string(&mut text).ok()?;
            text.trim().parse().ok()
        };
        return Err(JournalError::Locked {
            path: path.to_path_buf(),
            holder: counterpoint_host::files::flock_holder(&f).or_else(written),
            lock,
        });
    }
    // Our pid for the message that refuses the next broker; only a message, so a failure to
    // write it is not one to stop for.
    let pid = format!("{}\n", std::process::id());
    let _ = f
        .set_len(0)
        .and_then(|()| f.write_all_at(pid.as_bytes(), 0));
    Ok(f)
}

/// Write `records` to `PATH.tmp`, sync, rename over `path`.
fn write_compacted(path: &Path, records: &[Record]) -> Result<(), JournalError> {
    let io = |what, error| JournalError::Io {
        path: path.to_path_buf(),
        what,
        error,
    };
    let tmp = with_suffix(path, ".tmp");
    {
        let mut t = open_regular(&tmp, true)?;
        let mut buf = Vec::new();
        for (i, r) in records.iter().enumerate() {
            buf.extend(line(i as u64, r));
        }
        t.write_all(&buf)
            .map_err(|e| io("writing the compacted journal", e))?;
        t.sync_data().map_err(|e| io("syncing", e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io("renaming the compacted journal", e))
}

fn open_regular(path: &Path, truncate: bool) -> Result<File, JournalError> {
    let io = |what, error| JournalError::Io {
        path: path.to_path_buf(),
        what,
        error,
    };
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(JournalError::NotRegular {
                path: path.to_path_buf(),
                kind: counterpoint_host::files::kind(m.file_type()),
            });
        }
    }
    let f = OpenOptions::new()
        .read(true)
        .append(!truncate)
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                JournalError::NotRegular {
                    path: path.to_path_buf(),
                    kind: "a symbolic link",
                }
            } else {
                io("opening", e)
            }
        })?;
    let m = f.metadata().map_err(|e| io("stat", e))?;
    if !m.file_type().is_file() {
        return Err(JournalError::NotRegular {
            path: path.to_path_buf(),
            kind: counterpoint_host::files::kind(m.file_type()),
        });
    }
    Ok(f)
}

impl Journal {
    /// Lock, open (creating) and compact the journal; returns it with the state it held.
    /// Refused, touching nothing, while another broker holds it ([`JournalError::Locked`]).
    pub fn open(path: &Path) -> Result<(Journal, State), JournalError> {
        let io = |what, error| JournalError::Io {
            path: path.to_path_buf(),
            what,
            error,
        };
        // What the path is, first: a directory is named as one, a link refused unfollowed.
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_file() {
                return Err(JournalError::NotRegular {
                    path: path.to_path_buf(),
                    kind: counterpoint_host::files::kind(m.file_type()),
                });
            }
        }
        // Its first bytes before anything else: a file of another kind (a typo'd path, notes)
        // is refused before it is read whole or compacted away.
        {
            let mut head = Vec::new();
            open_regular(path, false)?
                .take(MAGIC.len() as u64)
                .read_to_end(&mut head)
                .map_err(|e| io("reading", e))?;
            // Empty (new) or a journal, possibly torn inside its first line.
            if !MAGIC.as_bytes().starts_with(&head) {
                return Err(JournalError::NotAJournal {
                    path: path.to_path_buf(),
                });
            }
        }
        // Before the state is read: another broker's journal must be neither compacted under
        // it nor restored here. (After the check above, so a file that is not a journal gets
        // no lock file beside it.)
        let lock = lock(path)?;
        let bytes = std::fs::read(path).map_err(|e| io("reading", e))?;
        let state = replay(&bytes);
        let records = state.records();
        write_compacted(path, &records)?;
        let file = open_regular(path, false)?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
                seq: records.len() as u64,
                since_compaction: 0,
                _lock: lock,
            },
            state,
        ))
    }

    /// Records appended since the last compaction.
    pub fn since_compaction(&self) -> u64 {
        self.since_compaction
    }

    /// Replace the journal by `records` (the live state), so a long-running broker's journal
    /// stays proportional to its registrations rather than to its reads.
    pub fn compact(&mut self, records: &[Record]) -> Result<(), JournalError> {
        write_compacted(&self.path, records)?;
        self.file = open_regular(&self.path, false)?;
        self.seq = records.len() as u64;
        self.since_compaction = 0;
        Ok(())
    }

    /// Append one record (one `write(2)`, so a crash tears at most this line). Not synced per
    /// record: a killed process loses nothing the kernel accepted; power loss is out of scope.
    pub fn append(&mut self, r: &Record) -> Result<(), JournalError> {
        let l = line(self.seq, r);
        self.seq += 1;
        self.since_compaction += 1;
        self.file.write_all(&l).map_err(|error| JournalError::Io {
            path: self.path.clone(),
            what: "appending",
            error,
        })
    }

    /// Append several records in one `write(2)` (the pusher's checkpoints of one wake-up):
    /// each line still carries its own checksum, so a crash tears at most the lines in flight.
    pub fn append_many(&mut self, rs: &[Record]) -> Result<(), JournalError> {
        if rs.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in rs {
            buf.extend(line(self.seq, r));
            self.seq += 1;
            self.since_compaction += 1;
        }
        self.file.write_all(&buf).map_err(|error| JournalError::Io {
            path: self.path.clone(),
            what: "appending",
            error,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(id: u64) -> RegRecord {
        RegRecord {
            pid_start: None,
            target_identity: None,
            id,
            uid: 1000,
            gid: 1000,
            pid: 42,
            events: "cs".into(),
            target: "self".into(),
            share: 1,
            class: "user".into(),
            registered_wall_ns: 5,
        }
    }

    #[test]
    fn replay_restores_and_compacts_and_skips_torn_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j");
        {
            let (mut j, st) = Journal::open(&p).unwrap();
            assert!(st.regs.is_empty());
            j.append(&Record::Register(reg(1))).unwrap();
            j.append(&Record::Register(reg(2))).unwrap();
            let cp = Checkpoint {
                enabled_ns: 10,
                running_ns: 7,
                raw: vec![99],
                ..Checkpoint::default()
            };
            // Two records in one write.
            j.append_many(&[
                Record::Checkpoint { id: 1, cp },
                Record::Unregister { id: 2 },
            ])
            .unwrap();
        }
        // A torn tail and a corrupted line.
        let mut text = std::fs::read(&p).unwrap();
        text.extend_from_slice(b"counterpoint-broker 9 00000000 {\"k\":\"unregister\",\"id\":1}\n");
        text.extend_from_slice(b"counterpoint-broker 10 12ab");
        std::fs::write(&p, text).unwrap();
        let (_, st) = Journal::open(&p).unwrap();
        assert_eq!(st.skipped, 2);
        assert_eq!(st.max_id, 2);
        assert_eq!(st.regs.len(), 1);
        assert_eq!(st.regs[&1].1.raw, vec![99]);
        assert_eq!(st.regs[&1].1.running_ns, 7);
        // Compaction kept the state.
        let (_, again) = Journal::open(&p).unwrap();
        assert_eq!(again.regs, st.regs);
        assert_eq!(again.skipped, 0);
    }

    #[test]
    fn a_file_that_is_not_a_journal_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "my notes\nline two\n").unwrap();
        let e = Journal::open(&path).unwrap_err();
        assert!(matches!(e, JournalError::NotAJournal { .. }), "{e}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "my notes\nline two\n"
        );
        // Nor is a lock file made beside it.
        assert!(!dir.path().join("notes.txt.lock").exists());
        // A journal torn inside its first line (a crash at its first write) still opens.
        let torn = dir.path().join("torn.journal");
        std::fs::write(&torn, "counterpoint-bro").unwrap();
        assert!(Journal::open(&torn).is_ok());
        // So does an empty file, and a new path.
        std::fs::write(dir.path().join("empty"), "").unwrap();
        assert!(Journal::open(&dir.path().join("empty")).is_ok());
        assert!(Journal::open(&dir.path().join("new")).is_ok());
    }

    #[test]
    fn compaction_keeps_the_state_and_shrinks_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j");
        let (mut j, _) = Journal::open(&p).unwrap();
        j.append(&Record::Register(reg(1))).unwrap();
        for n in 0..1000 {
            let cp = Checkpoint {
                enabled_ns: n,
                running_ns: n,
                raw: vec![n],
                ..Checkpoint::default()
            };
            j.append(&Record::Checkpoint { id: 1, cp }).unwrap();
        }
        let before = std::fs::metadata(&p).unwrap().len();
        let st = replay(&std::fs::read(&p).unwrap());
        j.compact(&st.records()).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() < before / 100);
        j.append(&Record::Unregister { id: 1 }).unwrap();
        let after = replay(&std::fs::read(&p).unwrap());
        assert!(after.regs.is_empty());
        assert_eq!(after.max_id, 1);
        assert_eq!(st.regs[&1].1.raw, vec![999]);
    }

    #[test]
    fn checkpoints_never_go_backwards() {
        let mut st = State::default();
        st.apply(Record::Register(reg(1)));
        for (e, r) in [(10, 5), (8, 3)] {
            st.apply(Record::Checkpoint {
                id: 1,
                cp: Checkpoint {
                    enabled_ns: e,
                    running_ns: r,
                    raw: vec![r],
                    counted_ns: vec![r * 2],
                    units_running_ns: vec![r, r + 1],
                },
            });
        }
        assert_eq!(st.regs[&1].1.raw, vec![5]);
        assert_eq!(st.regs[&1].1.counted_ns, vec![10]);
        assert_eq!(st.regs[&1].1.units_running_ns, vec![5, 6]);
        assert_eq!(st.regs[&1].1.enabled_ns, 10);
    }

    #[test]
    fn symlinks_and_devices_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real");
        std::fs::write(&target, b"").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            Journal::open(&link),
            Err(JournalError::NotRegular { .. })
        ));
        assert!(matches!(
            Journal::open(Path::new("/dev/null")),
            Err(JournalError::NotRegular { .. })
        ));
    }

    #[test]
    fn a_second_broker_on_the_journal_is_refused_whatever_the_spelling() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j");
        let (mut first, _) = Journal::open(&p).unwrap();
        first.append(&Record::Register(reg(1))).unwrap();
        let before = std::fs::read(&p).unwrap();
        // The same file through a symlinked directory and a `.` component: one real path.
        let alias = d.path().join("alias");
        std::os::unix::fs::symlink(d.path(), &alias).unwrap();
        for other in [p.clone(), alias.join("j"), d.path().join(".").join("j")] {
            let e = Journal::open(&other).unwrap_err();
            let JournalError::Locked { path, lock, holder } = &e else {
                panic!("{other:?}: {e}");
            };
            assert_eq!(path, &other);
            assert_eq!(lock.file_name().unwrap(), "j.lock");
            // This process holds it (through `first`), and the message says so.
            assert_eq!(*holder, Some(std::process::id()), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("pid {}", std::process::id())),
                "{msg}"
            );
            assert!(msg.contains(&other.display().to_string()), "{msg}");
        }
        // Refused before anything was read or compacted: the holder's journal is as it was.
        assert_eq!(std::fs::read(&p).unwrap(), before);
        first.append(&Record::Unregister { id: 1 }).unwrap();
        drop(first);
        // Released with the journal: the next broker opens it and sees the whole history.
        let (_, st) = Journal::open(&p).unwrap();
        assert!(st.regs.is_empty());
        assert_eq!(st.max_id, 1);
    }

    #[test]
    fn a_directory_is_refused_as_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let e = Journal::open(d.path()).unwrap_err();
        assert!(
            matches!(
                e,
                JournalError::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("a directory, not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn compaction_writes_beside_the_journal_under_its_whole_name() {
        // Two journals that differ only in their extension must not share a temporary file.
        assert_eq!(
            with_suffix(Path::new("/x/cp.journal"), ".tmp"),
            Path::new("/x/cp.journal.tmp")
        );
        let d = tempfile::tempdir().unwrap();
        let (mut a, _) = Journal::open(&d.path().join("cp.journal")).unwrap();
        let (mut b, _) = Journal::open(&d.path().join("cp.log")).unwrap();
        a.append(&Record::Register(reg(1))).unwrap();
        b.append(&Record::Register(reg(2))).unwrap();
        let sa = replay(&std::fs::read(d.path().join("cp.journal")).unwrap());
        a.compact(&sa.records()).unwrap();
        assert!(!d.path().join("cp.tmp").exists());
        assert!(!d.path().join("cp.journal.tmp").exists());
    }

    #[test]
    fn replay_is_total() {
        use proptest::prelude::*;
        proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..400))| {
            let _ = replay(&bytes);
        });
    }
}
