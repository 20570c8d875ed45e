//! The threads of a process, from `/proc/PID/task`: the one place the crate family lists them
//! (`stat -p`'s rescan, the live host's task discovery, `agent-overhead`).

use std::io;
use std::path::Path;

/// Thread ids of process `pid` under the procfs root `proc_root`, ascending. An error when the
/// process does not exist (`NotFound`) or its task directory cannot be read.
pub fn thread_ids(proc_root: &Path, pid: i32) -> io::Result<Vec<i32>> {
    let dir = proc_root.join(pid.to_string()).join("task");
    let mut tids: Vec<i32> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        // Entries that are not thread ids (there are none today) are not threads.
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .filter(|&t: &i32| t > 0)
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_numeric_entries_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["10", "12", "11", "x"] {
            std::fs::create_dir_all(dir.path().join("10/task").join(t)).unwrap();
        }
        assert_eq!(thread_ids(dir.path(), 10).unwrap(), vec![10, 11, 12]);
        let e = thread_ids(dir.path(), 9).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn own_process_has_this_thread() {
        let tids = thread_ids(Path::new("/proc"), std::process::id() as i32).unwrap();
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        assert!(tids.contains(&me), "{tids:?} lacks {me}");
    }
}
