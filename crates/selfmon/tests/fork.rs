//! Regions across `fork` (issue 18 #10): the child inherits the thread state of the forking
//! thread but not its perf mappings (`VM_DONTCOPY`); its first region must not touch the
//! parent's page (that was a SIGSEGV), must not keep the inherited descriptors (they count the
//! parent's thread), and its report holds only its own regions.

use counterpoint_selfmon::{init, report, Region};

/// perf_event descriptors open in this process.
fn perf_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Runs in the child; returns the exit code (0 = all checks held).
fn child_checks() -> i32 {
    for _ in 0..5 {
        let _r = Region::begin("fork-child");
    }
    let r = report();
    if r.regions.len() != 1 || r.regions[0].name != "fork-child" {
        return 2;
    }
    if r.regions[0].entries != 5 || r.regions[0].threads != 1 {
        return 3;
    }
    if r.regions[0].lost.values().any(|&n| n != 0) {
        return 4;
    }
    // One event: one descriptor, the child's own (the inherited one was closed).
    if perf_fds() != 1 {
        return 5;
    }
    0
}

#[test]
fn a_forked_child_gets_its_own_counters_and_report() {
    init("task-clock").expect("init");
    for _ in 0..3 {
        let _r = Region::begin("fork-parent");
    }
    assert_eq!(perf_fds(), 1, "one counter on this thread");
    // SAFETY: the child only runs Rust code of this crate and leaves with _exit; glibc keeps
    // malloc usable in the child of a multithreaded fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(child_checks).unwrap_or(9);
        // SAFETY: leave without running the test harness's exit path.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status),
        "the child died on signal {} (status {status})",
        libc::WTERMSIG(status)
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "child check failed");
    // The parent is untouched: its regions, none of the child's, and it still counts.
    for _ in 0..2 {
        let _r = Region::begin("fork-parent");
    }
    let r = report();
    let parent = r
        .regions
        .iter()
        .find(|x| x.name == "fork-parent")
        .expect("parent region");
    assert_eq!(parent.entries, 5);
    assert!(r.regions.iter().all(|x| x.name != "fork-child"));
    assert_eq!(perf_fds(), 1);
}
