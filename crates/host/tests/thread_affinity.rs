//! Thread-level placement on a real child's threads ([`Action::SetThreadAffinity`]): a Python
//! process with three sleeping threads; two of its threads are placed apart, each journaled
//! first; a thread that is not there is skipped, not an error; a later process-level change
//! turns the thread records into process records without losing their originals; and the
//! journal left behind (as by a killed agent) puts every thread back; a task id beyond a pid is
//! refused, not truncated to another process's pid. Nothing here depends on
//! timing: the waits are hang guards for the child to start. Skipped, with the reason, where
//! there is no python3, only one CPU, or changing the child's affinity is not permitted.

use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::machine::Machine;
use counterpoint_core::task::TaskId;
use counterpoint_host::affinity::{self, AffinityError};
use counterpoint_host::{Host, Journal, JournalError, TargetSpec};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Three threads that sleep (and a main thread that sleeps), for two minutes at most.
const SLEEPERS: &str = r#"
import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
time.sleep(120)
"#;

fn threads_of(pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The journal a moment after it was closed: a child forked by another test between its fork
/// and exec may hold the lock's descriptor for that window (a hang guard of 30 s).
fn reopen(p: &Path) -> Journal {
    for _ in 0..600 {
        match Journal::open(p) {
            Err(JournalError::Locked { .. }) => std::thread::sleep(Duration::from_millis(50)),
            Ok(j) => return j,
            Err(e) => panic!("reopen {}: {e}", p.display()),
        }
    }
    panic!("{} stayed locked for 30 s after it was closed", p.display())
}

#[test]
fn threads_are_placed_apart_journaled_and_restored() {
    let online = affinity::online_cpus();
    if online.len() < 2 {
        eprintln!(
            "SKIPPED threads_are_placed_apart_journaled_and_restored: needs 2 online CPUs, have {}",
            online.to_list()
        );
        return;
    }
    let child = match Command::new("python3").args(["-c", SLEEPERS]).spawn() {
        Ok(c) => Kill(c),
        Err(e) => {
            eprintln!("SKIPPED threads_are_placed_apart_journaled_and_restored: no python3 ({e})");
            return;
        }
    };
    let pid = child.0.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while threads_of(pid).len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let tids = threads_of(pid);
    assert_eq!(
        tids.len(),
        4,
        "the child never started its threads: {tids:?}"
    );
    match affinity::probe_permission(pid) {
        Err(e @ AffinityError::Permission { .. }) => {
            eprintln!("SKIPPED threads_are_placed_apart_journaled_and_restored: {e}");
            return;
        }
        r => r.expect("probe"),
    }
    let original: Vec<CpuSet> = tids
        .iter()
        .map(|&t| affinity::get(t).expect("get"))
        .collect();
    let (c0, c1) = (
        CpuSet::single(online.first().expect("cpu")),
        CpuSet::single(online.iter().nth(1).expect("cpu")),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let jpath = dir.path().join("journal");
    let mut host = Host::new(
        TargetSpec::Pids(vec![pid]),
        Some(Journal::open(&jpath).expect("journal")),
    )
    .expect("host");
    let (a, b) = (tids[1], tids[2]);
    let task = TaskId(u64::from(pid));
    for (tid, cpus) in [(a, &c0), (b, &c1)] {
        host.apply(&Action::SetThreadAffinity {
            task,
            tid: u64::from(tid),
            cpus: cpus.clone(),
        })
        .expect("thread-level apply");
    }
    // Each thread its own set (the thread's, not the process's); the others untouched.
    assert_eq!(affinity::get(a).expect("get"), c0);
    assert_eq!(affinity::get(b).expect("get"), c1);
    assert_eq!(affinity::get(pid).expect("get"), original[0]);
    assert_eq!(affinity::get(tids[3]).expect("get"), original[3]);
    {
        let on_disk = reopen_data(&jpath);
        let ea = &on_disk.threads[&a];
        assert!(ea.thread_level, "{ea:?}");
        assert_eq!((ea.pid, &ea.original), (pid, &original[1]));
        assert_eq!(ea.applied.as_ref(), Some(&c0));
        assert_eq!(on_disk.threads[&b].applied.as_ref(), Some(&c1));
        assert!(
            !on_disk.threads.contains_key(&pid),
            "untouched threads are not journaled"
        );
    }
    // A thread that is not there (an id of no thread of this process) is skipped: no error,
    // nothing journaled, reported by the sweep.
    host.apply(&Action::SetThreadAffinity {
        task,
        tid: 4_000_000_000,
        cpus: c0.clone(),
    })
    .expect("a gone thread is not an error");
    let sweep = host.sweep().expect("sweep");
    assert_eq!(sweep.skipped.len(), 1, "{sweep:?}");
    assert_eq!(sweep.skipped[0].tid, 4_000_000_000);
    assert!(!reopen_data(&jpath).threads.contains_key(&4_000_000_000));
    // A process-level change afterwards: every thread gets it, the thread records become
    // process records, and each keeps its original from before the first change.
    host.apply(&Action::SetAffinity {
        task,
        cpus: c1.clone(),
    })
    .expect("process-level apply");
    for &t in &tids {
        assert_eq!(affinity::get(t).expect("get"), c1, "thread {t}");
    }
    let on_disk = reopen_data(&jpath);
    for (i, &t) in tids.iter().enumerate() {
        let e = &on_disk.threads[&t];
        assert!(!e.thread_level, "stale thread-level record: {e:?}");
        assert_eq!(e.original, original[i], "thread {t}");
        assert_eq!(e.applied.as_ref(), Some(&c1));
    }
    // A thread placed on its own again.
    host.apply(&Action::SetThreadAffinity {
        task,
        tid: u64::from(a),
        cpus: c0.clone(),
    })
    .expect("thread-level apply");
    assert_eq!(affinity::get(a).expect("get"), c0);
    assert!(reopen_data(&jpath).threads[&a].thread_level);
    // The agent dies without restoring: the journal it leaves puts every thread back.
    drop(host);
    let mut j = reopen(&jpath);
    let r = j.restore_all(&online);
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(r.restored.len(), 4, "{r:?}");
    for (i, &t) in tids.iter().enumerate() {
        assert_eq!(
            affinity::get(t).expect("get"),
            original[i].intersection(&online),
            "thread {t}"
        );
    }
    assert!(!j.has_entries());
}

/// The journal's contents as a second reader sees them on disk.
fn reopen_data(p: &Path) -> counterpoint_host::journal::JournalData {
    let bytes = std::fs::read(p).expect("read journal");
    counterpoint_host::journal::parse(&bytes)
        .expect("parse journal")
        .data
}

#[test]
fn thread_actions_need_the_journal_and_skip_kernel_threads() {
    // No journal: refused before anything changes.
    let me = std::process::id();
    let mut host = Host::new(TargetSpec::Pids(vec![me]), None).expect("host");
    let err = host
        .apply(&Action::SetThreadAffinity {
            task: TaskId(u64::from(me)),
            tid: u64::from(me),
            cpus: CpuSet::single(0),
        })
        .expect_err("no journal");
    assert!(err.to_string().contains("no journal"), "{err}");
    // kthreadd (pid 2) is a kernel thread: never touched.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut host = Host::new(
        TargetSpec::Pids(vec![me]),
        Some(Journal::open(&dir.path().join("j")).expect("journal")),
    )
    .expect("host");
    if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
        let err = host
            .apply(&Action::SetThreadAffinity {
                task: TaskId(2),
                tid: 2,
                cpus: CpuSet::single(0),
            })
            .expect_err("kernel thread");
        assert!(err.to_string().contains("kernel thread"), "{err}");
    }
}

/// A task id beyond a pid (a policy's bug) is refused, never cut down to another process's
/// pid: the process whose pid it would truncate to keeps its affinity.
#[test]
fn a_task_id_beyond_a_pid_is_refused_not_truncated() {
    let online = affinity::online_cpus();
    if online.len() < 2 {
        eprintln!("SKIPPED: needs 2 online CPUs");
        return;
    }
    let child = match Command::new("sleep").arg("120").spawn() {
        Ok(c) => Kill(c),
        Err(e) => {
            eprintln!("SKIPPED: no sleep ({e})");
            return;
        }
    };
    let pid = child.0.id();
    let before = affinity::get(pid).expect("get");
    let dir = tempfile::tempdir().expect("tempdir");
    let jpath = dir.path().join("j");
    let mut host = Host::new(
        TargetSpec::Pids(vec![pid]),
        Some(Journal::open(&jpath).expect("journal")),
    )
    .expect("host");
    let task = TaskId((1 << 32) + u64::from(pid));
    let c0 = CpuSet::single(online.first().expect("cpu"));
    for action in [
        Action::SetAffinity {
            task,
            cpus: c0.clone(),
        },
        Action::SetThreadAffinity {
            task,
            tid: u64::from(pid),
            cpus: c0.clone(),
        },
        Action::Swap { a: task, b: task },
    ] {
        let err = host.apply(&action).expect_err("not a pid");
        assert!(err.to_string().contains("not a process id"), "{err}");
    }
    assert_eq!(affinity::get(pid).expect("get"), before);
    drop(host);
    let mut j = reopen(&jpath);
    assert!(!j.has_entries(), "{:?}", j.data());
    j.restore_all(&online);
}
