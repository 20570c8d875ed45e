//! One group of counters on one thread, read whole with one `read(2)`: what the live host opens
//! for every thread it watches. Events are [`EventSpec`]s from the spec parser, so any event
//! `perf` accepts (generic, raw, `pmu/.../`, resolved aliases) can be asked for.

use crate::count::{builder_for, has_hardware_pmu};
use crate::page::ControlPage;
use crate::spec::{EventSpec, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW};
use crate::PmuTree;
use perf_event::ReadFormat;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Most events in one group (more rarely fit a PMU's counters at once anyway).
pub const MAX_GROUP: usize = 8;

/// Why a group did not open on a thread.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("perf_event_open({event}) for thread {tid}: {source}")]
    /// `perf_event_open` failed for one event.
    Open {
        /// The thread.
        tid: i32,
        /// The event, as its spec names it.
        event: String,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    #[error("reading the perf_event group of thread {tid}: {source}")]
    /// The group read failed (or was short).
    Read {
        /// The thread.
        tid: i32,
        /// What the read returned.
        #[source]
        source: io::Error,
    },
    #[error("a group needs 1 to {MAX_GROUP} events, not {0}")]
    /// An empty group, or more than [`MAX_GROUP`] events.
    Size(usize),
}

impl GroupError {
    /// Whether no thread at all can be expected to open this group (no perf_event in the
    /// kernel, or an event it does not know), as opposed to one thread's trouble (gone, out of
    /// descriptors, not permitted for this task's owner).
    pub fn is_global(&self) -> bool {
        let GroupError::Open { source, .. } = self else {
            return matches!(self, GroupError::Size(_));
        };
        matches!(
            source.raw_os_error(),
            Some(libc::ENOSYS | libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL)
        )
    }

    /// Whether the thread was gone (ESRCH: it exited, or is exiting, before the open).
    pub fn is_gone(&self) -> bool {
        matches!(self, GroupError::Open { source, .. } if source.raw_os_error() == Some(libc::ESRCH))
    }

    /// The kernel's answer for an event that does not open, in words.
    pub fn reason(&self) -> String {
        let GroupError::Open { source, .. } = self else {
            return self.to_string();
        };
        describe_open_error(source, None)
    }
}

/// An open failure in words; `spec` and `tree` (when known) let a missing PMU be named.
pub fn describe_open_error(e: &io::Error, hw_without_pmu: Option<bool>) -> String {
    let Some(code) = e.raw_os_error() else {
        return e.to_string();
    };
    let errno = nix::errno::Errno::from_raw(code);
    match code {
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV if hw_without_pmu == Some(true) => {
            format!("no hardware PMU on this machine ({errno})")
        }
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV => format!("not supported here ({errno})"),
        libc::EACCES | libc::EPERM => format!(
            "not permitted, see {} ({errno})",
            crate::count::PARANOID_PATH
        ),
        _ => errno.to_string(),
    }
}

/// Whether `spec` needs a hardware PMU that `tree` does not show.
pub fn lacks_pmu(spec: &EventSpec, tree: &PmuTree) -> bool {
    matches!(spec.type_, TYPE_HARDWARE | TYPE_HW_CACHE | TYPE_RAW) && !has_hardware_pmu(tree)
}

/// Cumulative values of one group since it was opened, in the order it was opened with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupReading {
    /// Counts in the order the group was opened with (the first `len` are valid).
    pub values: [u64; MAX_GROUP],
    /// How many events the group holds.
    pub len: usize,
    /// Time the group was enabled, and the part of it on a PMU: `running < enabled` when the
    /// kernel multiplexed the group; values then scale by `enabled / running`.
    pub time_enabled_ns: u64,
    /// See `time_enabled_ns`.
    pub time_running_ns: u64,
}

impl GroupReading {
    /// The fraction of the enabled time the group was counting (1 when never multiplexed).
    pub fn coverage(&self) -> f64 {
        if self.time_enabled_ns == 0 {
            1.0
        } else {
            self.time_running_ns as f64 / self.time_enabled_ns as f64
        }
    }
}

/// One thread's group: the leader's descriptor first, then the members'.
pub struct ThreadGroup {
    tid: i32,
    fds: Vec<OwnedFd>,
    /// The leader's control page, mapped read-only on request (see
    /// [`ThreadGroup::map_control_page`]).
    page: Option<ControlPage>,
}

impl ThreadGroup {
    /// Open `specs` (1 to [`MAX_GROUP`]) as one group on thread `tid`, any CPU, created enabled
    /// (the first read is the baseline), not inherited. Each spec keeps its own privilege
    /// filters; software events count kernel mode too (switches happen there).
    pub fn open(tid: i32, specs: &[EventSpec]) -> Result<Self, GroupError> {
        Self::open_with(tid, specs, false)
    }

    /// [`ThreadGroup::open`], inherited by the threads `tid` starts from now on, and by the
    /// threads those start, and so on (`inherit` with `inherit_thread`, Linux 5.13; EINVAL
    /// before): a read returns the thread's own counts plus those of every such descendant,
    /// alive or exited (the kernel folds an exiting child's counts into this event, and keeps
    /// doing so after `tid` itself has exited, as long as the descriptor is open). Processes
    /// `tid` forks are not followed. The kernel refuses to map the control page of such an
    /// event, so [`ThreadGroup::map_control_page`] is false for it.
    pub fn open_inherited(tid: i32, specs: &[EventSpec]) -> Result<Self, GroupError> {
        Self::open_with(tid, specs, true)
    }

    fn open_with(tid: i32, specs: &[EventSpec], inherit: bool) -> Result<Self, GroupError> {
        if specs.is_empty() || specs.len() > MAX_GROUP {
            return Err(GroupError::Size(specs.len()));
        }
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            // The attributes from perf-event2's Builder; the system call from `sys` (no ID
            // ioctl per counter).
            let mut b = builder_for(spec);
            // Threads only (`inherit_thread`): a forked process is a task of its own, counted
            // (or not) as one, never folded into the thread that forked it.
            b.enabled(true).inherit(inherit).inherit_thread(inherit);
            if i == 0 {
                b.read_format(
                    ReadFormat::GROUP
                        | ReadFormat::TOTAL_TIME_ENABLED
                        | ReadFormat::TOTAL_TIME_RUNNING,
                );
                // `read_format` adds PERF_FORMAT_ID to groups; values come in creation order
                // without it, which is all this read needs.
                b.attrs_mut().read_format &= !ReadFormat::ID.bits();
            }
            let group_fd = fds.first().map_or(-1, |f| f.as_raw_fd());
            let fd = crate::sys::perf_event_open(b.attrs_mut(), tid, -1, group_fd).map_err(
                |source| GroupError::Open {
                    tid,
                    event: spec.name.clone(),
                    source,
                },
            )?;
            fds.push(fd);
        }
        Ok(Self {
            tid,
            fds,
            page: None,
        })
    }

    /// Map the leader's control page so [`ThreadGroup::sched_seq`] can be read; false where
    /// the kernel refuses. Opt-in: the page counts against the user's `perf_event_mlock_kb`
    /// budget (for an unprivileged user), which `perf record` needs too.
    pub fn map_control_page(&mut self) -> bool {
        if self.page.is_none() {
            self.page = self
                .fds
                .first()
                .and_then(|f| ControlPage::map(f.as_raw_fd()));
        }
        self.page.is_some()
    }

    /// The leader's control-page sequence counter: the kernel bumps it each time the group is
    /// scheduled in or out with its thread, so an unchanged value between two looks means the
    /// thread was not switched in or out in between (it may still have run all along, if it
    /// was running at the first look). A memory load, no system call. `None` where the page
    /// could not be mapped.
    pub fn sched_seq(&self) -> Option<u32> {
        self.page.as_ref().map(ControlPage::seq)
    }

    /// The thread counted.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// How many events the group holds.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// Never: a group has a leader.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// One `read(2)` of the whole group into a stack buffer.
    pub fn read(&self) -> Result<GroupReading, GroupError> {
        let tid = self.tid;
        let leader = self.fds.first().ok_or(GroupError::Size(0))?;
        let mut buf = [0u64; 3 + MAX_GROUP];
        let n = crate::sys::read_words(leader.as_raw_fd(), &mut buf)
            .map_err(|source| GroupError::Read { tid, source })?;
        let words = n / 8;
        let nr = buf[0] as usize;
        if words < 3 || nr != self.fds.len() || words < 3 + nr {
            return Err(GroupError::Read {
                tid,
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "group read of {n} bytes, {nr} values for {} events",
                        self.fds.len()
                    ),
                ),
            });
        }
        let mut r = GroupReading {
            len: nr,
            time_enabled_ns: buf[1],
            time_running_ns: buf[2],
            ..Default::default()
        };
        r.values[..nr].copy_from_slice(&buf[3..3 + nr]);
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_event_list;

    fn specs(list: &str) -> Vec<EventSpec> {
        parse_event_list(list, &PmuTree::new("/nonexistent"))
            .unwrap()
            .events()
            .cloned()
            .collect()
    }

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    #[test]
    fn own_thread_group_reads_in_order() {
        let s = specs("task-clock,context-switches,cpu-migrations");
        let Ok(g) = ThreadGroup::open(gettid(), &s) else {
            eprintln!("skipped: perf_event_open refused here");
            return;
        };
        let a = g.read().unwrap();
        // Yield the CPU many times: each sched_yield with another runnable task, or each
        // sleep, is a switch; at least one of a hundred sleeps is counted whatever the load.
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        let b = g.read().unwrap();
        assert_eq!((a.len, b.len, g.len()), (3, 3, 3));
        // Software events are never multiplexed.
        assert!(b.values[1] > a.values[1], "{a:?} {b:?}");
        assert!(b.values[0] > a.values[0]);
        assert_eq!(b.time_enabled_ns, b.time_running_ns);
        assert_eq!(b.coverage(), 1.0);
    }

    #[test]
    fn gone_thread_and_bad_sizes_are_errors() {
        let s = specs("task-clock");
        let e = ThreadGroup::open(i32::MAX, &s)
            .err()
            .expect("no such thread");
        assert!(e.to_string().contains("task-clock"), "{e}");
        assert!(!e.is_global());
        assert!(matches!(
            ThreadGroup::open(gettid(), &[]),
            Err(GroupError::Size(0))
        ));
    }

    #[test]
    fn coverage_is_running_over_enabled() {
        let r = GroupReading {
            time_enabled_ns: 400,
            time_running_ns: 100,
            ..Default::default()
        };
        assert_eq!(r.coverage(), 0.25);
    }

    /// A thread that is switched in moves its group's control-page sequence; the value is read
    /// without a system call.
    #[test]
    fn a_thread_that_runs_moves_the_control_page_sequence() {
        let s = specs("task-clock,context-switches");
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<bool>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let _ = tid_tx.send(gettid());
            while let Ok(true) = go_rx.recv() {
                let _ = done_tx.send(());
            }
        });
        let tid = tid_rx.recv().expect("tid");
        let skip = |why: &str| {
            eprintln!("skipped a_thread_that_runs_moves_the_control_page_sequence: {why}");
            let _ = go_tx.send(false);
        };
        let Ok(mut g) = ThreadGroup::open(tid, &s) else {
            skip("perf_event_open refused here");
            let _ = h.join();
            return;
        };
        assert_eq!(g.sched_seq(), None, "no page before it is asked for");
        let Some(before) = g.map_control_page().then(|| g.sched_seq()).flatten() else {
            skip("the control page could not be mapped");
            let _ = h.join();
            return;
        };
        let a = g.read().expect("read");
        // Wake it: it is switched in to answer, and out again to wait.
        go_tx.send(true).expect("go");
        done_rx.recv().expect("done");
        let b = g.read().expect("read");
        assert!(b.values[0] > a.values[0], "it ran: {a:?} {b:?}");
        assert_ne!(g.sched_seq(), Some(before), "a switch-in rewrites the page");
        let _ = go_tx.send(false);
        h.join().expect("join");
    }

    /// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), ns.
    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes a timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Run on this thread until it has had `ns` of CPU (async-signal-safe: a forked child of
    /// this multi-threaded process runs it too).
    fn burn_cpu_ns(ns: u64) {
        let start = thread_cpu_ns();
        let mut x = 1u64;
        while thread_cpu_ns() - start < ns {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
    }

    /// The kernel facts the live host's per-process counting rests on, checked on this kernel:
    /// a group opened with `inherit` + `inherit_thread` on a thread counts, besides the thread
    /// itself, every thread it starts later, while that thread is alive and after it has
    /// exited, and also after the first thread has exited itself; it does not count a process
    /// the thread forks; and its control page cannot be mapped. Each check compares the
    /// group's task-clock with the CPU time the threads measured of themselves
    /// (`CLOCK_THREAD_CPUTIME_ID`) or the forked child's rusage: ratios of two measures of the
    /// same work, never a duration.
    #[test]
    fn an_inherited_group_counts_later_threads_not_forked_processes() {
        use std::sync::mpsc::{channel, Receiver, Sender};
        enum Cmd {
            /// Start a thread that burns, reports its CPU time and waits to be let go.
            Thread(Sender<u64>, Receiver<()>),
            /// Fork a child that burns; report (own CPU time before, after, child's CPU).
            Fork(Sender<(u64, u64, u64)>),
            /// Start a thread that waits, burns when told, reports and exits; then exit.
            Leave(Sender<(Sender<()>, Receiver<u64>, std::thread::JoinHandle<()>)>),
        }
        const BURN: u64 = 30_000_000;
        let s = specs("task-clock,context-switches");
        let (tid_tx, tid_rx) = channel();
        let (cmd_tx, cmd_rx) = channel::<Cmd>();
        let original = std::thread::spawn(move || {
            let _ = tid_tx.send((gettid(), thread_cpu_ns()));
            while let Ok(cmd) = cmd_rx.recv() {
                match cmd {
                    Cmd::Thread(report, release) => {
                        let h = std::thread::spawn(move || {
                            burn_cpu_ns(BURN);
                            let _ = report.send(thread_cpu_ns());
                            let _ = release.recv();
                        });
                        let _ = h.join();
                    }
                    Cmd::Fork(report) => {
                        let before = thread_cpu_ns();
                        // SAFETY: the child only burns (clock_gettime) and _exits.
                        let pid = unsafe { libc::fork() };
                        if pid == 0 {
                            burn_cpu_ns(BURN);
                            // SAFETY: _exit in the forked child.
                            unsafe { libc::_exit(0) };
                        }
                        // SAFETY: rusage is a plain struct we own; pid is our child.
                        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                        let mut status = 0;
                        // SAFETY: as above.
                        unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
                        let tv = |t: libc::timeval| {
                            t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000
                        };
                        let child = tv(ru.ru_utime) + tv(ru.ru_stime);
                        let _ = report.send((before, thread_cpu_ns(), child));
                    }
                    Cmd::Leave(report) => {
                        let (go_tx, go_rx) = channel::<()>();
                        let (cpu_tx, cpu_rx) = channel();
                        let h = std::thread::spawn(move || {
                            if go_rx.recv().is_ok() {
                                burn_cpu_ns(BURN);
                                let _ = cpu_tx.send(thread_cpu_ns());
                            }
                        });
                        let _ = report.send((go_tx, cpu_rx, h));
                        return;
                    }
                }
            }
        });
        let (tid, _) = tid_rx.recv().expect("tid");
        let mut g = match ThreadGroup::open_inherited(tid, &s) {
            Ok(g) => g,
            Err(e) => {
                drop(cmd_tx);
                let _ = original.join();
                // perf_event refused here (an unprivileged user under perf_event_paranoid 2
                // may not count kernel mode: EACCES), as the module's other tests skip; or a
                // kernel before 5.13, without inherit_thread, which no thread can open.
                let refused = matches!(&e, GroupError::Open { source, .. } if source.kind() == io::ErrorKind::PermissionDenied);
                assert!(refused || e.is_global(), "{e}");
                eprintln!(
                    "SKIPPED an_inherited_group_counts_later_threads_not_forked_processes: {e}"
                );
                return;
            }
        };
        assert!(
            !g.map_control_page(),
            "the kernel maps no page of an inherited event"
        );
        let tc = |g: &ThreadGroup| g.read().expect("read").values[0];
        let a = tc(&g);

        // A later thread, alive (blocked) when read: counted.
        let (report, cpu) = channel();
        let (release, released) = channel();
        cmd_tx.send(Cmd::Thread(report, released)).expect("cmd");
        let child_cpu = cpu.recv().expect("child cpu");
        let b = tc(&g);
        assert!(
            (b - a) as f64 >= 0.9 * child_cpu as f64,
            "a live later thread: counted {} ns of its {child_cpu} ns",
            b - a
        );
        // Exited (joined by the original): still counted, nothing taken away.
        release.send(()).expect("release");
        let (report, fork) = channel();
        cmd_tx.send(Cmd::Fork(report)).expect("cmd");
        let (own_before, own_after, forked_cpu) = fork.recv().expect("fork");
        let c = tc(&g);
        assert!(forked_cpu >= BURN, "the child burned {forked_cpu} ns");
        // The fork: the original's own time counts, the child's does not (it would add at
        // least BURN). Besides the original's own time, c - b holds only the joined thread's
        // exit and the join, a sliver next to the work it did.
        let own = own_after - own_before;
        assert!(
            ((c - b) as f64) < (own + forked_cpu / 2) as f64 + 0.1 * child_cpu as f64,
            "a forked process was folded in: counted {} ns, the original's own {own} ns, the child's {forked_cpu} ns",
            c - b
        );

        // The original leaves a thread behind and exits; that thread's work still counts.
        let (report, left) = channel();
        cmd_tx.send(Cmd::Leave(report)).expect("cmd");
        let (go, cpu, h) = left.recv().expect("left");
        original.join().expect("original");
        let d = tc(&g);
        go.send(()).expect("go");
        let left_cpu = cpu.recv().expect("cpu");
        h.join().expect("join");
        let e = tc(&g);
        assert!(
            (e - d) as f64 >= 0.9 * left_cpu as f64,
            "a thread that outlived the original: counted {} ns of its {left_cpu} ns",
            e - d
        );
    }
}
