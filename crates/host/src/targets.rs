//! Which processes the agent watches: `all` (every user process), `pid:1,2,...`,
//! `comm:REGEX`, `cgroup:PATH` (cgroup v2, absolute or relative to `/sys/fs/cgroup`),
//! `user:NAME` (or a numeric uid).

use crate::procfs::{is_kernel_stat, Proc, Stat};
use regex::Regex;
use std::fs;
use std::path::{Path, PathBuf};

/// A parsed `--targets` value.
#[derive(Clone, Debug)]
pub enum TargetSpec {
    /// Every user process.
    All,
    /// These process ids.
    Pids(Vec<u32>),
    /// Processes whose name matches.
    Comm(Regex),
    /// Directory of a cgroup v2 group (its `cgroup.procs` lists the members).
    Cgroup(PathBuf),
    /// Processes of one user.
    User {
        /// The name as given.
        name: String,
        /// Its uid.
        uid: u32,
    },
}

/// Why a `--targets` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetsParseError {
    /// Not one of the known forms.
    #[error("--targets {0:?}: expected all, pid:1,2,..., comm:REGEX, cgroup:PATH or user:NAME")]
    UnknownKind(String),
    /// A `pid:` item is not a positive integer.
    #[error("--targets {spec:?}: {token:?} is not a process id (a positive integer)")]
    BadPid {
        /// The spec.
        spec: String,
        /// The bad item.
        token: String,
    },
    /// A `pid:` item is a positive integer too large for a process id (above 2^32 - 1).
    #[error("--targets {spec:?}: process id {token} is out of range (larger than any process id)")]
    PidOutOfRange {
        /// The spec.
        spec: String,
        /// The bad item.
        token: String,
    },
    /// Nothing after the kind.
    #[error("--targets {spec:?}: empty list")]
    Empty {
        /// The spec.
        spec: String,
    },
    /// The `comm:` regex does not compile.
    #[error("--targets {spec:?}: bad regular expression: {reason}")]
    BadRegex {
        /// The spec.
        spec: String,
        /// The regex error.
        reason: String,
    },
    /// A cgroup named outside the cgroup root.
    #[error("--targets {spec:?}: {reason}")]
    CgroupOutside {
        /// The spec.
        spec: String,
        /// Why (see [`cgroup_dir`]).
        reason: String,
    },
    /// No cgroup v2 group there.
    #[error("--targets {spec:?}: no cgroup v2 group at {path} (no cgroup.procs there; is cgroup v2 mounted at /sys/fs/cgroup?)")]
    NoCgroup {
        /// The spec.
        spec: String,
        /// Where the group was looked for.
        path: String,
    },
    /// No such user.
    #[error("--targets {spec:?}: no such user {name:?}")]
    NoUser {
        /// The spec.
        spec: String,
        /// The user.
        name: String,
    },
}

/// The regex crate's syntax error (several lines: the pattern, a caret line, the message) as one
/// line: the message and where it is (`unclosed group (at character 1 of "(")`).
fn regex_error_in_one_line(pattern: &str, e: &regex::Error) -> String {
    let text = e.to_string();
    if !text.contains('\n') {
        return text;
    }
    let lines: Vec<&str> = text.lines().collect();
    let what = lines
        .iter()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::trim)
        .unwrap_or("not a valid pattern");
    let caret = lines.iter().enumerate().skip(1).find_map(|(i, l)| {
        let t = l.trim();
        (!t.is_empty() && t.chars().all(|c| c == '^'))
            .then(|| (i, l.chars().take_while(|&c| c == ' ').count()))
    });
    let at = match caret {
        // One line of pattern, printed after four spaces.
        Some((_, col)) if !pattern.contains('\n') && col >= 4 => {
            format!(" (at character {} of {pattern:?})", col - 3)
        }
        // A pattern of several lines: its lines are numbered (`  2: ...`).
        Some((i, _)) => lines[i - 1]
            .trim_start()
            .split_once(": ")
            .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(|(n, _)| format!(" (on line {n} of the pattern)"))
            .unwrap_or_default(),
        None => String::new(),
    };
    format!("{what}{at}")
}

impl TargetSpec {
    /// Parse a `--targets` value (cgroups and users are checked to exist).
    pub fn parse(spec: &str) -> Result<Self, TargetsParseError> {
        if spec == "all" {
            return Ok(TargetSpec::All);
        }
        let (kind, rest) = spec
            .split_once(':')
            .ok_or_else(|| TargetsParseError::UnknownKind(spec.to_string()))?;
        let empty = || TargetsParseError::Empty {
            spec: spec.to_string(),
        };
        match kind {
            "pid" => {
                if rest.trim().is_empty() {
                    return Err(empty());
                }
                let mut pids = Vec::new();
                for tok in rest.split(',') {
                    let t = tok.trim();
                    match t.parse::<u32>() {
                        Ok(p) if p > 0 => pids.push(p),
                        // A positive integer, but too large for a pid (one that fits but names
                        // no process is refused as such when the targets are looked up).
                        _ if !t.is_empty()
                            && t.bytes().all(|b| b.is_ascii_digit())
                            && t.bytes().any(|b| b != b'0') =>
                        {
                            return Err(TargetsParseError::PidOutOfRange {
                                spec: spec.to_string(),
                                token: t.to_string(),
                            })
                        }
                        _ => {
                            return Err(TargetsParseError::BadPid {
                                spec: spec.to_string(),
                                token: tok.to_string(),
                            })
                        }
                    }
                }
                pids.sort_unstable();
                pids.dedup();
                Ok(TargetSpec::Pids(pids))
            }
            "comm" => {
                if rest.is_empty() {
                    return Err(empty());
                }
                Regex::new(rest)
                    .map(TargetSpec::Comm)
                    .map_err(|e| TargetsParseError::BadRegex {
                        spec: spec.to_string(),
                        reason: regex_error_in_one_line(rest, &e),
                    })
            }
            "cgroup" => {
                if rest.is_empty() {
                    return Err(empty());
                }
                let dir = cgroup_dir(Path::new(CGROUP_ROOT), rest).map_err(|reason| {
                    TargetsParseError::CgroupOutside {
                        spec: spec.to_string(),
                        reason,
                    }
                })?;
                if !dir.join("cgroup.procs").is_file() {
                    return Err(TargetsParseError::NoCgroup {
                        spec: spec.to_string(),
                        path: dir.display().to_string(),
                    });
                }
                Ok(TargetSpec::Cgroup(dir))
            }
            "user" => {
                if rest.is_empty() {
                    return Err(empty());
                }
                let uid = match rest.parse::<u32>() {
                    Ok(u) => Some(u),
                    Err(_) => nix::unistd::User::from_name(rest)
                        .ok()
                        .flatten()
                        .map(|u| u.uid.as_raw()),
                };
                let uid = uid.ok_or_else(|| TargetsParseError::NoUser {
                    spec: spec.to_string(),
                    name: rest.to_string(),
                })?;
                Ok(TargetSpec::User {
                    name: rest.to_string(),
                    uid,
                })
            }
            _ => Err(TargetsParseError::UnknownKind(spec.to_string())),
        }
    }

    /// A `pid:` list with every thread id replaced by its process's id (each thread id found
    /// so, with its process, is returned to be said): the agent and `top` watch, pin, adopt
    /// new threads of and restore whole processes, and a thread id taken from `top -H` or
    /// `ps -L` named the process only half (its threads born later were pinned by
    /// inheritance and never restored). Other kinds, and ids that name no task, are returned
    /// as they are.
    pub fn threads_as_processes(self, proc_: &Proc) -> (Self, Vec<(u32, u32)>) {
        let TargetSpec::Pids(pids) = self else {
            return (self, Vec::new());
        };
        let mut threads = Vec::new();
        let mut out: Vec<u32> = pids
            .into_iter()
            .map(|pid| match proc_.tgid(pid) {
                Some(tgid) if tgid != pid && tgid > 0 => {
                    threads.push((pid, tgid));
                    tgid
                }
                _ => pid,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        (TargetSpec::Pids(out), threads)
    }

    /// The user processes (never kernel threads, never `exclude`) this spec selects now, sorted.
    pub fn select(&self, proc_: &Proc, exclude: u32) -> Vec<u32> {
        self.select_with(proc_, exclude, &mut |pid| proc_.stat(pid))
    }

    /// [`TargetSpec::select`] with each candidate's `stat` from `stat` (the host's kept-open
    /// files, so a watched process's is not looked up by path every interval).
    pub fn select_with(
        &self,
        proc_: &Proc,
        exclude: u32,
        stat: &mut dyn FnMut(u32) -> Option<Stat>,
    ) -> Vec<u32> {
        let candidates: Vec<u32> = match self {
            TargetSpec::Pids(p) => p.clone(),
            TargetSpec::Cgroup(dir) => {
                let mut v: Vec<u32> = fs::read_to_string(dir.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                v.sort_unstable();
                v
            }
            _ => proc_.pids().unwrap_or_default(),
        };
        candidates
            .into_iter()
            .filter(|&pid| {
                if pid == exclude {
                    return false;
                }
                let st = stat(pid);
                match self {
                    TargetSpec::Comm(re) => {
                        !is_kernel_stat(pid, st.as_ref())
                            && st.is_some_and(|s| re.is_match(&s.comm))
                    }
                    _ => !is_kernel_stat(pid, st.as_ref()),
                }
            })
            .filter(|&pid| match self {
                TargetSpec::User { uid, .. } => proc_.uid(pid) == Some(*uid),
                _ => true,
            })
            .collect()
    }
}

/// Where cgroup v2 is mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The directory of the cgroup `name` under `root`: a path below `root` as written (absolute,
/// starting with `root`) or relative to it (`user.slice`, `/user.slice`). A `..` component is
/// refused, and so is a path that resolves (through a link) outside `root`: `cgroup:../../etc`
/// named `/etc` (CLI probe, session 29). Whether a group is there is the caller's check.
pub fn cgroup_dir(root: &Path, name: &str) -> Result<std::path::PathBuf, String> {
    let p = Path::new(name);
    if p.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(format!(
            "'..' in {name:?}: a cgroup is named below {} (as `user.slice` or `{}/user.slice`)",
            root.display(),
            root.display()
        ));
    }
    let dir = if p.starts_with(root) {
        p.to_path_buf()
    } else {
        root.join(name.trim_start_matches('/'))
    };
    if let (Ok(real), Ok(real_root)) = (dir.canonicalize(), root.canonicalize()) {
        if !real.starts_with(&real_root) {
            return Err(format!(
                "{} resolves to {}, outside {}",
                dir.display(),
                real.display(),
                root.display()
            ));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_is_named_below_the_root_only() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("a/b")).unwrap();
        assert_eq!(cgroup_dir(r, "a/b").unwrap(), r.join("a/b"));
        assert_eq!(cgroup_dir(r, "/a/b").unwrap(), r.join("a/b"));
        assert_eq!(
            cgroup_dir(r, &r.join("a").display().to_string()).unwrap(),
            r.join("a")
        );
        assert!(cgroup_dir(r, "../x").unwrap_err().contains("'..'"));
        assert!(cgroup_dir(r, "a/../../x").is_err());
        // A link out of the root is followed and refused.
        let out = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(out.path(), r.join("link")).unwrap();
        assert!(cgroup_dir(r, "link").unwrap_err().contains("outside"));
    }

    #[test]
    fn parses_each_kind() {
        assert!(matches!(TargetSpec::parse("all"), Ok(TargetSpec::All)));
        match TargetSpec::parse("pid:3,1,3") {
            Ok(TargetSpec::Pids(p)) => assert_eq!(p, vec![1, 3]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            TargetSpec::parse("comm:^burn$"),
            Ok(TargetSpec::Comm(_))
        ));
        assert!(matches!(
            TargetSpec::parse("user:root"),
            Ok(TargetSpec::User { uid: 0, .. })
        ));
        assert!(matches!(
            TargetSpec::parse("user:0"),
            Ok(TargetSpec::User { uid: 0, .. })
        ));
    }

    #[test]
    fn a_pid_above_the_largest_is_out_of_range_and_a_regex_error_is_one_line() {
        for big in ["99999999999999999999", "4294967296"] {
            let e = TargetSpec::parse(&format!("pid:1,{big}")).expect_err("too large");
            assert!(matches!(e, TargetsParseError::PidOutOfRange { .. }), "{e}");
            assert!(e.to_string().contains("out of range"), "{e}");
        }
        assert!(matches!(
            TargetSpec::parse("pid:4294967295"),
            Ok(TargetSpec::Pids(_))
        ));
        let e = TargetSpec::parse("comm:(")
            .expect_err("bad regex")
            .to_string();
        assert_eq!(
            e,
            "--targets \"comm:(\": bad regular expression: unclosed group (at character 1 of \"(\")"
        );
        let e = TargetSpec::parse("comm:ab[z-a]")
            .expect_err("bad regex")
            .to_string();
        assert!(!e.contains('\n') && e.contains("at character 4"), "{e}");
        let e = TargetSpec::parse("comm:a\n(")
            .expect_err("bad regex")
            .to_string();
        assert!(!e.contains('\n') && e.contains("on line 2"), "{e}");
    }

    /// A thread id in `pid:` stands for its process; a process id and an id that names no
    /// task stay as they are.
    #[test]
    fn a_thread_id_stands_for_its_process() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32)
                .expect("send");
            let _ = done_rx.recv();
        });
        let tid = rx.recv().expect("tid");
        assert_ne!(tid, me);
        let proc_ = Proc::default();
        let absent = u32::MAX - 1;
        let (spec, threads) = TargetSpec::Pids(vec![tid, absent]).threads_as_processes(&proc_);
        match spec {
            TargetSpec::Pids(p) => assert_eq!(p, {
                let mut v = vec![me, absent];
                v.sort_unstable();
                v
            }),
            other => panic!("{other:?}"),
        }
        assert_eq!(threads, vec![(tid, me)]);
        let (spec, threads) = TargetSpec::Pids(vec![me, tid]).threads_as_processes(&proc_);
        assert!(matches!(spec, TargetSpec::Pids(p) if p == vec![me]));
        assert_eq!(threads, vec![(tid, me)]);
        let (spec, threads) = TargetSpec::All.threads_as_processes(&proc_);
        assert!(matches!(spec, TargetSpec::All) && threads.is_empty());
        done_tx.send(()).expect("send");
        t.join().expect("join");
    }

    #[test]
    fn errors_name_the_bad_part() {
        let e = TargetSpec::parse("pid:1,x2").expect_err("bad pid");
        assert_eq!(
            e,
            TargetsParseError::BadPid {
                spec: "pid:1,x2".into(),
                token: "x2".into()
            }
        );
        assert!(e.to_string().contains("\"x2\""));
        assert!(matches!(
            TargetSpec::parse("pid:0"),
            Err(TargetsParseError::BadPid { .. })
        ));
        assert!(matches!(
            TargetSpec::parse("pid:"),
            Err(TargetsParseError::Empty { .. })
        ));
        assert!(matches!(
            TargetSpec::parse("comm:(("),
            Err(TargetsParseError::BadRegex { .. })
        ));
        assert!(matches!(
            TargetSpec::parse("cgroup:/no/such/group"),
            Err(TargetsParseError::NoCgroup { .. })
        ));
        assert!(matches!(
            TargetSpec::parse("cgroup:../../etc"),
            Err(TargetsParseError::CgroupOutside { .. })
        ));
        assert!(matches!(
            TargetSpec::parse("user:no-such-user-xyz"),
            Err(TargetsParseError::NoUser { .. })
        ));
        assert!(matches!(
            TargetSpec::parse("bogus:1"),
            Err(TargetsParseError::UnknownKind(_))
        ));
        assert!(matches!(
            TargetSpec::parse("1234"),
            Err(TargetsParseError::UnknownKind(_))
        ));
    }

    #[test]
    fn selection_excludes_self_and_kernel_threads() {
        let p = Proc::default();
        let me = std::process::id();
        let all = TargetSpec::All.select(&p, me);
        assert!(!all.contains(&me));
        assert!(!all.contains(&2));
        let mine = TargetSpec::Pids(vec![me, 2]).select(&p, 0);
        assert_eq!(mine, vec![me]);
    }
}
