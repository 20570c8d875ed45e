//! Events counting the calling thread, for self-monitoring (`counterpoint-selfmon`): opened
//! here so that the counter layer stays the only place that calls `perf_event_open`.

use crate::count::{
    builder_for, classify_open_error, has_hardware_pmu, read_paranoid, user_only, OpenFailure,
};
use crate::{CountError, EventList, EventSpec, PmuTree};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

/// Open `spec` on the calling thread (any CPU), counting from now, with
/// `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING` in its read format. The descriptor is close-on-exec
/// and can be mapped (`mmap`) for its control page.
pub fn open_on_calling_thread(spec: &EventSpec) -> Result<OwnedFd, OpenFailure> {
    let mut b = builder_for(spec);
    b.observe_self().any_cpu().enabled(true);
    match b.build() {
        // SAFETY: into_raw_fd hands over ownership of a valid, open descriptor.
        Ok(c) => Ok(unsafe { OwnedFd::from_raw_fd(c.into_raw_fd()) }),
        Err(err) => {
            let tree = PmuTree::new("/sys");
            Err(classify_open_error(
                err,
                spec,
                None,
                has_hardware_pmu(&tree),
                read_paranoid(),
            ))
        }
    }
}

/// `list` as the calling thread can count it: as given, or every event user-only (`:u`, named
/// so) when the kernel refuses kernel-mode counting to this user, as `perf` retries
/// (`perf_event_paranoid` 2 without `CAP_PERFMON`: the default of many distributions). Each
/// event is opened once to ask. Until session 30 self-monitoring failed there outright
/// ("permission denied opening 'task-clock'") where `perf stat` counts `task-clock:u`.
pub fn countable_on_calling_thread(list: &EventList) -> EventList {
    let refused = |l: &EventList| {
        l.events().any(|spec| {
            matches!(
                open_on_calling_thread(spec),
                Err(OpenFailure::Fatal(CountError::Permission { .. }))
            )
        })
    };
    if !refused(list) {
        return list.clone();
    }
    match user_only(list) {
        // Only where user-only counting is allowed: otherwise (perf_event_paranoid 3, an LSM,
        // seccomp) the list stays as given, and the error names the events as the user wrote
        // them, not their `:u` forms (review, session 30).
        Some(u) if !refused(&u) => u,
        _ => list.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::read_fd;
    use crate::{parse_event_list, PmuTree};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_software_event_counts_the_calling_thread() {
        let list = parse_event_list("task-clock", &PmuTree::new("/sys")).expect("parse");
        let spec = list.events().next().expect("one event").clone();
        let fd = match open_on_calling_thread(&spec) {
            Ok(fd) => fd,
            // A sandbox without perf_event_open at all: nothing to check here.
            Err(e) => return eprintln!("skipped: {e:?}"),
        };
        let a = read_fd(fd.as_raw_fd()).expect("read");
        std::hint::black_box((0..100_000u64).sum::<u64>());
        let b = read_fd(fd.as_raw_fd()).expect("read");
        assert!(b.raw > a.raw, "task-clock advances: {a:?} -> {b:?}");
        // FD_CLOEXEC is set by perf_event_open's flags.
        // SAFETY: fcntl on our own descriptor.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
        assert!(flags & libc::FD_CLOEXEC != 0);
    }
}
