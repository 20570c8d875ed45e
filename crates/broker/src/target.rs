//! Targets as consumers write them (`self`, `pid:N`, `tid:N`, `thread-tree:N`, `cgroup:PATH`,
//! `user:NAME`, `cpus:LIST`), resolved to a counters target, a canonical key (for deduplication) and the
//! facts the access policy needs (owners of the tasks, CPUs, SMT siblings).

use counterpoint_core::cpuset::CpuSet;
use counterpoint_counters::Target;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Target errors.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TargetError {
    /// Unknown form.
    #[error("bad target '{0}': expected self, pid:N, tid:N, thread-tree:N, cgroup:PATH, user:NAME or cpus:LIST")]
    Syntax(String),
    /// A known form with an argument it cannot take (a reversed range, a task id of 0): the
    /// reason named, not only the forms (CLI probe, session 27).
    #[error("bad target '{target}': {reason}")]
    BadArgument {
        /// The target as written.
        target: String,
        /// What is wrong with its argument.
        reason: String,
    },
    /// Task not found.
    #[error("no such task {0}")]
    NoSuchTask(i32),
    /// Cgroup unreadable or empty.
    #[error("cgroup {path}: {reason}")]
    Cgroup {
        /// The cgroup.
        path: String,
        /// Why.
        reason: String,
    },
    /// Unknown user.
    #[error("unknown user '{0}'")]
    NoSuchUser(String),
    /// User without tasks.
    #[error("user '{0}' has no tasks to count")]
    NoTasks(String),
    /// CPU not online.
    #[error("CPU {cpu} is not online (online: {online})")]
    Offline {
        /// The CPU.
        cpu: usize,
        /// Online CPUs.
        online: String,
    },
}

/// A resolved target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// What to open.
    pub target: Target,
    /// Canonical text (same tasks or CPUs → same key): what readings and metrics are
    /// labelled with.
    pub key: String,
    /// What kernel counters are shared by: `key`, and for a task named by its number (`self`,
    /// `pid:`, `tid:`, `thread-tree:`) that task's start time too (`tid:N@START`, START in
    /// clock ticks since boot, `stat` field 22), so that a new task given the number of one
    /// that ended gets counters of its own. Until session 29 it was `key` alone: a
    /// registration kept on a thread that had ended (the live host keeps its families'
    /// `thread-tree:` registrations for a process's life) gave the next task with that id the
    /// dead thread's counter, which never moved again.
    pub identity: String,
    /// Uids owning the tasks (empty for CPUs).
    pub owners: Vec<u32>,
    /// CPUs for a per-CPU target (empty for tasks).
    pub cpus: Vec<usize>,
}

/// Where procfs and sysfs are (tests use fixtures).
#[derive(Clone, Debug)]
pub struct Roots {
    /// `/proc`.
    pub proc_root: PathBuf,
    /// `/sys`.
    pub sys_root: PathBuf,
    /// The cgroup v2 mount, for relative cgroup paths.
    pub cgroup_root: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc_root: "/proc".into(),
            sys_root: "/sys".into(),
            cgroup_root: "/sys/fs/cgroup".into(),
        }
    }
}

/// Task `id`'s start time (clock ticks since boot, `stat` field 22; a thread's own, also
/// through `/proc/TID/stat` for a thread that does not lead its process).
pub fn start_time(roots: &Roots, id: i32) -> Result<u64, TargetError> {
    let text = std::fs::read_to_string(roots.proc_root.join(id.to_string()).join("stat"))
        .map_err(|_| TargetError::NoSuchTask(id))?;
    // Fields are counted from the last `)`: the command name may hold spaces and parentheses.
    text.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(22 - 3))
        .and_then(|f| f.parse().ok())
        .ok_or(TargetError::NoSuchTask(id))
}

/// `key` of task `id` as an identity: `key@START` (see [`Resolved::identity`]).
fn task_identity(roots: &Roots, key: &str, id: i32) -> Result<String, TargetError> {
    Ok(format!("{key}@{}", start_time(roots, id)?))
}

fn owner(roots: &Roots, pid: i32) -> Result<u32, TargetError> {
    std::fs::metadata(roots.proc_root.join(pid.to_string()))
        .map(|m| m.uid())
        .map_err(|_| TargetError::NoSuchTask(pid))
}

fn threads(roots: &Roots, pids: &[i32]) -> Vec<i32> {
    let mut tids = Vec::new();
    for &p in pids {
        // A process that exited meanwhile has no threads to count.
        if let Ok(t) = counterpoint_counters::tasks::thread_ids(&roots.proc_root, p) {
            tids.extend(t);
        }
    }
    tids.sort_unstable();
    tids.dedup();
    tids
}

/// Online CPUs.
pub fn online_cpus(roots: &Roots) -> Vec<usize> {
    std::fs::read_to_string(roots.sys_root.join("devices/system/cpu/online"))
        .ok()
        .and_then(|t| CpuSet::parse_list(t.trim()).ok())
        .map(|s| s.iter().map(|c| c as usize).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n).collect()
        })
}

/// CPUs among `cpus` that have an SMT sibling (from `topology/thread_siblings_list`).
pub fn smt_cpus(roots: &Roots, cpus: &[usize]) -> Vec<usize> {
    cpus.iter()
        .copied()
        .filter(|c| {
            let p = roots.sys_root.join(format!(
                "devices/system/cpu/cpu{c}/topology/thread_siblings_list"
            ));
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| CpuSet::parse_list(t.trim()).ok())
                .is_some_and(|s| s.len() > 1)
        })
        .collect()
}

fn uid_of_user(name: &str) -> Result<u32, TargetError> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[0] == name).then(|| f[2].parse::<u32>().ok())?
        })
        .next()
        .ok_or_else(|| TargetError::NoSuchUser(name.to_string()))
}

/// Resolve `text` for a peer whose pid is `peer_pid`.
pub fn resolve(text: &str, peer_pid: i32, roots: &Roots) -> Result<Resolved, TargetError> {
    let syntax = || TargetError::Syntax(text.to_string());
    let bad = |reason: String| TargetError::BadArgument {
        target: text.to_string(),
        reason,
    };
    let task_id = |what: &str, arg: &str| -> Result<i32, TargetError> {
        match arg.parse::<i32>() {
            Ok(id) if id > 0 => Ok(id),
            _ => Err(bad(format!(
                "{what} {arg:?} is not a {what} (a positive integer)"
            ))),
        }
    };
    let (kind, arg) = match text.split_once(':') {
        Some((k, a)) => (k, a),
        None if text == "self" => ("self", ""),
        None => return Err(syntax()),
    };
    let tasks = |pids: Vec<i32>, key: String, identity: String| -> Result<Resolved, TargetError> {
        let mut owners = Vec::new();
        for &p in &pids {
            owners.push(owner(roots, p)?);
        }
        owners.sort_unstable();
        owners.dedup();
        let tids = threads(roots, &pids);
        if tids.is_empty() {
            return Err(TargetError::NoSuchTask(pids.first().copied().unwrap_or(0)));
        }
        Ok(Resolved {
            target: Target::Threads(tids),
            key,
            identity,
            owners,
            cpus: Vec::new(),
        })
    };
    let process = |pid: i32| -> Result<Resolved, TargetError> {
        let key = format!("pid:{pid}");
        let identity = task_identity(roots, &key, pid)?;
        tasks(vec![pid], key, identity)
    };
    match kind {
        "self" => process(peer_pid),
        "pid" => process(task_id("process id", arg)?),
        "tid" => {
            let tid = task_id("thread id", arg)?;
            let uid = owner(roots, tid)?;
            let key = format!("tid:{tid}");
            Ok(Resolved {
                target: Target::Threads(vec![tid]),
                identity: task_identity(roots, &key, tid)?,
                key,
                owners: vec![uid],
                cpus: Vec::new(),
            })
        }
        // Thread N and the threads it starts later, theirs and so on, not the processes they
        // fork: what the live host counts per original thread of a process.
        "thread-tree" => {
            let tid = task_id("thread id", arg)?;
            let uid = owner(roots, tid)?;
            let key = format!("thread-tree:{tid}");
            Ok(Resolved {
                target: Target::ThreadTrees(vec![tid]),
                identity: task_identity(roots, &key, tid)?,
                key,
                owners: vec![uid],
                cpus: Vec::new(),
            })
        }
        "cgroup" => {
            // Below the cgroup root only (`..` and links out refused), as `--targets`.
            let path = counterpoint_host::targets::cgroup_dir(&roots.cgroup_root, arg).map_err(
                |reason| TargetError::Cgroup {
                    path: arg.to_string(),
                    reason,
                },
            )?;
            let err = |reason: String| TargetError::Cgroup {
                path: path.display().to_string(),
                reason,
            };
            let procs = std::fs::read_to_string(path.join("cgroup.procs")).map_err(|e| {
                err(format!(
                    "reading cgroup.procs: {e} (is cgroup v2 mounted at {}?)",
                    roots.cgroup_root.display()
                ))
            })?;
            let pids: Vec<i32> = procs
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if pids.is_empty() {
                return Err(err("no processes".into()));
            }
            // Processes that exit between listing and stat are dropped, not errors.
            let live: Vec<i32> = pids
                .into_iter()
                .filter(|&p| owner(roots, p).is_ok())
                .collect();
            let key = format!("cgroup:{}", path.display());
            tasks(live, key.clone(), key)
        }
        "user" => {
            let uid = uid_of_user(arg)?;
            let mut pids = Vec::new();
            if let Ok(rd) = std::fs::read_dir(&roots.proc_root) {
                for e in rd.flatten() {
                    let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
                    else {
                        continue;
                    };
                    if e.metadata().is_ok_and(|m| m.uid() == uid) {
                        pids.push(pid);
                    }
                }
            }
            pids.sort_unstable();
            if pids.is_empty() {
                return Err(TargetError::NoTasks(arg.to_string()));
            }
            let tids = threads(roots, &pids);
            Ok(Resolved {
                target: Target::Threads(tids),
                key: format!("user:{uid}"),
                identity: format!("user:{uid}"),
                owners: vec![uid],
                cpus: Vec::new(),
            })
        }
        "cpus" => {
            let set = CpuSet::parse_list(arg).map_err(|e| bad(e.to_string()))?;
            let online = online_cpus(roots);
            let cpus: Vec<usize> = set.iter().map(|c| c as usize).collect();
            if cpus.is_empty() {
                return Err(bad("an empty CPU list".to_string()));
            }
            if let Some(&cpu) = cpus.iter().find(|c| !online.contains(c)) {
                let online = CpuSet::parse_list(
                    &online
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                )
                .map(|s| s.to_list())
                .unwrap_or_default();
                return Err(TargetError::Offline { cpu, online });
            }
            Ok(Resolved {
                target: Target::Cpus(cpus.clone()),
                key: format!("cpus:{}", set.to_list()),
                identity: format!("cpus:{}", set.to_list()),
                owners: Vec::new(),
                cpus,
            })
        }
        _ => Err(syntax()),
    }
}

/// Whether a path names a regular directory (for the socket's parent).
pub fn is_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_and_pid_resolve_to_our_threads_and_uid() {
        let roots = Roots::default();
        let me = std::process::id() as i32;
        let r = resolve("self", me, &roots).unwrap();
        assert_eq!(r.key, format!("pid:{me}"));
        // SAFETY: geteuid has no preconditions.
        assert_eq!(r.owners, vec![unsafe { libc::geteuid() }]);
        assert!(matches!(&r.target, Target::Threads(t) if t.contains(&me)));
        assert_eq!(resolve(&format!("pid:{me}"), 1, &roots).unwrap().key, r.key);
    }

    #[test]
    fn cpus_are_canonical_and_checked() {
        let roots = Roots::default();
        let r = resolve("cpus:0", 1, &roots).unwrap();
        assert_eq!(r.key, "cpus:0");
        assert_eq!(r.cpus, vec![0]);
        assert!(matches!(
            resolve("cpus:4000", 1, &roots),
            Err(TargetError::Offline { cpu: 4000, .. })
        ));
    }

    #[test]
    fn smt_siblings_come_from_sysfs_topology() {
        let d = tempfile::tempdir().unwrap();
        for (cpu, sib) in [(0, "0,2"), (1, "1"), (2, "0,2")] {
            let t = d
                .path()
                .join(format!("devices/system/cpu/cpu{cpu}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("thread_siblings_list"), format!("{sib}\n")).unwrap();
        }
        std::fs::write(d.path().join("devices/system/cpu/online"), "0-2\n").unwrap();
        let roots = Roots {
            sys_root: d.path().to_path_buf(),
            ..Roots::default()
        };
        assert_eq!(online_cpus(&roots), vec![0, 1, 2]);
        assert_eq!(smt_cpus(&roots, &[0, 1, 2]), vec![0, 2]);
        assert_eq!(smt_cpus(&roots, &[1, 7]), Vec::<usize>::new());
    }

    #[test]
    fn bad_targets_are_typed() {
        let roots = Roots::default();
        for bad in ["", "me", "disk:1"] {
            assert!(
                matches!(resolve(bad, 1, &roots), Err(TargetError::Syntax(_))),
                "{bad}"
            );
        }
        // A known form with a bad argument names what is wrong with it (it listed the forms).
        for (bad, why) in [
            (
                "pid:x",
                "process id \"x\" is not a process id (a positive integer)",
            ),
            ("pid:-3", "process id \"-3\" is not a process id"),
            ("tid:0", "thread id \"0\" is not a thread id"),
            ("thread-tree:0", "thread id \"0\" is not a thread id"),
            ("cpus:", "an empty CPU list"),
            ("cpus:1-0", "reversed range \"1-0\""),
            ("cpus:0-99999", "above"),
        ] {
            match resolve(bad, 1, &roots) {
                Err(e @ TargetError::BadArgument { .. }) => {
                    let text = e.to_string();
                    assert!(text.starts_with(&format!("bad target '{bad}': ")), "{text}");
                    assert!(text.contains(why), "{bad}: {text}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert_eq!(
            resolve("pid:999999999", 1, &roots),
            Err(TargetError::NoSuchTask(999_999_999))
        );
        assert!(matches!(
            resolve("user:no-such-user-here", 1, &roots),
            Err(TargetError::NoSuchUser(_))
        ));
    }

    /// `thread-tree:N` is thread N alone, with its own key, opened so that the threads it
    /// starts count and the processes it forks do not.
    #[test]
    fn a_thread_tree_is_one_thread_with_its_own_key() {
        let roots = Roots::default();
        let me = std::process::id() as i32;
        let r = resolve(&format!("thread-tree:{me}"), me, &roots).unwrap();
        assert_eq!(r.target, Target::ThreadTrees(vec![me]));
        assert_eq!(r.key, format!("thread-tree:{me}"));
        assert_ne!(
            r.key,
            resolve(&format!("tid:{me}"), me, &roots).unwrap().key
        );
        assert_eq!(
            resolve("thread-tree:999999999", 1, &roots),
            Err(TargetError::NoSuchTask(999_999_999))
        );
    }

    /// A task named by its number shares counters by its number and its start time: the
    /// same key (what readings are labelled with), another identity once the number names a
    /// task that started later (a reused id). Through a procfs root whose `stat` the test
    /// writes.
    #[test]
    fn a_task_is_identified_by_its_start_time_too() {
        let root = tempfile::tempdir().unwrap();
        let roots = Roots {
            proc_root: root.path().to_path_buf(),
            ..Roots::default()
        };
        let id = 4242;
        let dir = root.path().join(id.to_string());
        std::fs::create_dir_all(dir.join("task").join(id.to_string())).unwrap();
        let stat = |start: u64| {
            // comm with a space and a parenthesis: fields are counted from the last `)`.
            let mut f = vec!["0".to_string(); 50];
            f[22 - 4] = start.to_string(); // field 22; f[0] is field 4
            std::fs::write(
                dir.join("stat"),
                format!("{id} (a (b) c) S {}\n", f.join(" ")),
            )
            .unwrap();
        };
        stat(1000);
        let mut before = Vec::new();
        for form in ["tid", "thread-tree", "pid"] {
            let r = resolve(&format!("{form}:{id}"), 1, &roots).unwrap();
            assert_eq!(r.key, format!("{form}:{id}"));
            assert_eq!(r.identity, format!("{form}:{id}@1000"));
            before.push(r);
        }
        assert_eq!(
            resolve("self", id, &roots).unwrap().identity,
            "pid:4242@1000"
        );
        stat(2000);
        for (form, old) in ["tid", "thread-tree", "pid"].into_iter().zip(before) {
            let r = resolve(&format!("{form}:{id}"), 1, &roots).unwrap();
            assert_eq!(r.key, old.key);
            assert_ne!(r.identity, old.identity, "{form}");
        }
        // CPUs are their key.
        let r = resolve("cpus:0", 1, &roots).unwrap();
        assert_eq!(r.identity, r.key);
    }

    #[test]
    fn user_target_lists_that_users_tasks() {
        let roots = Roots::default();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let r = resolve(&format!("user:{uid}"), 1, &roots).unwrap();
        assert_eq!(r.owners, vec![uid]);
        let me = std::process::id() as i32;
        assert!(matches!(&r.target, Target::Threads(t) if t.contains(&me)));
    }
}
