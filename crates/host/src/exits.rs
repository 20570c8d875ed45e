//! Which watched threads have exited, in one system call per interval: an epoll set of thread
//! pidfds (`pidfd_open(tid, PIDFD_THREAD)`, Linux 6.9 and later), each readable once its
//! thread has exited.
//!
//! The host lists `/proc/PID/task` only when a process's thread count changed (listing is the
//! dearest part of an interval for a process of many threads). A pool that replaces a thread by
//! another keeps its count, and a thread's perf_event group goes on reading its final counts
//! after the exit, so without this the newcomer would go uncounted until the next periodic
//! re-list where threads are counted one by one (a family's inherited groups count it anyway;
//! the list itself, for code heatmaps and the idle gate, is then what the watch keeps current). A counting perf_event descriptor cannot say it either: it polls as hung up from the
//! start when it has no ring buffer. Where the kernel has no thread pidfds, [`ThreadExits`]
//! says why and the host keeps its periodic re-list alone.
//!
//! Also here: whether a *child* process has ended, without reaping it ([`has_ended`],
//! [`wait_unreaped`]), so its pid stays the parent's while a stop signal may still be passed on.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `PIDFD_THREAD` (`include/uapi/linux/pidfd.h`): a pidfd for one thread, not its group.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// The exit watch over the host's threads.
pub struct ThreadExits {
    epoll: Option<OwnedFd>,
    /// Per watched thread: its process and its pidfd (closing it leaves the epoll set).
    fds: HashMap<u32, (u32, OwnedFd)>,
    /// Processes with a thread that exited (or was already gone when watched) since the last
    /// [`ThreadExits::take_exited`].
    pending: BTreeSet<u32>,
    off: Option<String>,
    /// Most pidfds held at once (`None` until first needed, then an eighth of the open-file
    /// limit): descriptors go to the counters first.
    budget: Option<usize>,
}

impl Default for ThreadExits {
    fn default() -> Self {
        Self::new()
    }
}

impl ThreadExits {
    /// An empty watch; off (with the reason) when epoll cannot be created.
    pub fn new() -> Self {
        // SAFETY: epoll_create1 takes flags only; the result is checked before use.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let (epoll, off) = if fd < 0 {
            (
                None,
                Some(format!("epoll_create1: {}", io::Error::last_os_error())),
            )
        } else {
            // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
            (Some(unsafe { OwnedFd::from_raw_fd(fd) }), None)
        };
        Self {
            epoll,
            fds: HashMap::new(),
            pending: BTreeSet::new(),
            off,
            budget: None,
        }
    }

    /// A watch that holds at most `n` pidfds (for tests; the default is an eighth of the
    /// open-file limit).
    pub fn with_budget(n: usize) -> Self {
        Self {
            budget: Some(n),
            ..Self::new()
        }
    }

    /// How many pidfds may be held: every counted thread already holds one descriptor per
    /// event, so the watch takes at most an eighth of the soft open-file limit (read once).
    fn fd_budget(&mut self) -> usize {
        *self.budget.get_or_insert_with(|| {
            let mut rl = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes a plain struct we own.
            if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
                return 0;
            }
            usize::try_from(rl.rlim_cur / 8).unwrap_or(usize::MAX)
        })
    }

    /// Why exits are not watched (`None` while they are).
    pub fn off_reason(&self) -> Option<&str> {
        self.off.as_deref()
    }

    /// Watch thread `tid` of process `pid` (again: no-op). A thread already gone counts as an
    /// exit of `pid`. A kernel without thread pidfds turns the watch off for good.
    pub fn watch(&mut self, pid: u32, tid: u32) {
        if self.epoll.is_none() || self.fds.contains_key(&tid) {
            return;
        }
        let budget = self.fd_budget();
        if self.fds.len() >= budget {
            self.turn_off(format!(
                "more threads than an eighth of the open-file limit ({budget} pidfds): the descriptors are kept for the counters"
            ));
            return;
        }
        // SAFETY: pidfd_open takes a pid and flags; the result is checked before use.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ESRCH) => {
                    self.pending.insert(pid);
                }
                // Before 6.9 a non-leader tid is refused with EINVAL (no PIDFD_THREAD), and
                // before 5.3 there is no pidfd_open at all.
                Some(libc::EINVAL) | Some(libc::ENOSYS) => self.turn_off(format!(
                    "the kernel has no thread pidfds (pidfd_open with PIDFD_THREAD: {e}; Linux 6.9 or later)"
                )),
                // Out of descriptors: give back every pidfd, the counters need them more.
                Some(libc::EMFILE) | Some(libc::ENFILE) => {
                    self.turn_off(format!("out of file descriptors ({e})"))
                }
                // Anything else: this thread goes unwatched, which only leaves it to the
                // periodic re-list.
                _ => {}
            }
            return;
        }
        // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        let Some(epoll) = self.epoll.as_ref() else {
            return;
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: u64::from(tid),
        };
        // SAFETY: both descriptors are open; `ev` lives across the call.
        let rc = unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        };
        if rc == 0 {
            self.fds.insert(tid, (pid, fd));
        }
    }

    /// Stop watching `tid` (it is no longer listed, or its counters were closed).
    pub fn forget(&mut self, tid: u32) {
        self.fds.remove(&tid);
    }

    /// Stop watching every thread (their counters were all closed).
    pub fn forget_all(&mut self) {
        self.fds.clear();
        self.pending.clear();
    }

    /// The processes with a thread that exited since the last call, without waiting. Each
    /// reported thread is forgotten, so a thread that lingers in `/proc` (an exited group
    /// leader stays listed while its process lives) is reported once.
    pub fn take_exited(&mut self) -> BTreeSet<u32> {
        let mut out = std::mem::take(&mut self.pending);
        let Some(epoll) = self.epoll.as_ref() else {
            return out;
        };
        let mut buf = [libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            // SAFETY: `buf` holds `buf.len()` events; timeout 0 never blocks.
            let n = unsafe {
                libc::epoll_wait(
                    epoll.as_raw_fd(),
                    buf.as_mut_ptr(),
                    buf.len() as libc::c_int,
                    0,
                )
            };
            if n <= 0 {
                // Nothing ready, or EINTR (the next interval asks again).
                break;
            }
            let n = n as usize;
            for ev in &buf[..n] {
                let tid = ev.u64 as u32;
                // Closing the reported pidfd takes it out of the set, so the next call
                // returns the others.
                if let Some((pid, _)) = self.fds.remove(&tid) {
                    out.insert(pid);
                }
            }
            if n < buf.len() {
                break;
            }
        }
        out
    }

    fn turn_off(&mut self, why: String) {
        self.off = Some(why);
        self.epoll = None;
        self.fds.clear();
    }
}

/// Wait until child `pid` has ended without reaping it: its pid stays the caller's (a stop
/// signal can still be passed on to it) until the caller reaps it.
pub fn wait_unreaped(pid: libc::pid_t) -> io::Result<()> {
    peek_exit(pid, 0).map(|_| ())
}

/// Whether child `pid` has ended, without waiting and without reaping it (see
/// [`wait_unreaped`]).
pub fn has_ended(pid: libc::pid_t) -> io::Result<bool> {
    peek_exit(pid, libc::WNOHANG)
}

/// `waitid(P_PID, pid, WEXITED | WNOWAIT | flags)`, retried on EINTR: whether child `pid` has
/// ended, leaving it waitable (with `WNOHANG` it does not block).
fn peek_exit(pid: libc::pid_t, flags: libc::c_int) -> io::Result<bool> {
    loop {
        // SAFETY: a zeroed siginfo is valid for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on the caller's own child; WNOWAIT leaves it waitable.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT | flags,
            )
        };
        if rc == 0 {
            // With WNOHANG and no change, si_pid is left 0.
            // SAFETY: waitid filled (or left zeroed) the siginfo.
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gettid() -> u32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as u32 }
    }

    /// A thread parked until its sender is dropped: (tid, sender, handle).
    fn parked() -> (
        u32,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let _ = tid_tx.send(gettid());
            let _ = go_rx.recv();
        });
        (tid_rx.recv().expect("tid"), go_tx, h)
    }

    /// A thread's exit is reported once, for its process; a live thread's is not; a thread
    /// already gone when watched counts as an exit.
    #[test]
    fn exits_are_reported_once_per_thread() {
        let mut w = ThreadExits::new();
        let pid = std::process::id();
        let (tid, go_tx, h) = parked();
        w.watch(pid, tid);
        w.watch(pid, gettid());
        if let Some(why) = w.off_reason() {
            eprintln!("SKIPPED exits_are_reported_once_per_thread: {why}");
            drop(go_tx);
            let _ = h.join();
            return;
        }
        assert!(w.take_exited().is_empty(), "no thread has exited yet");
        drop(go_tx);
        h.join().expect("join");
        // The join can return before the kernel marks the thread exited: wait for the
        // report (bounded), not for any duration.
        let mut seen = BTreeSet::new();
        for _ in 0..60_000 {
            seen = w.take_exited();
            if !seen.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(seen, BTreeSet::from([pid]));
        assert!(w.take_exited().is_empty(), "reported once");
        assert!(
            w.fds.contains_key(&gettid()),
            "this thread is still watched"
        );
        // A tid that no longer exists.
        w.watch(4242, tid);
        assert_eq!(w.take_exited(), BTreeSet::from([4242]));
    }

    /// Past its descriptor budget the watch turns itself off and gives back every pidfd.
    #[test]
    fn past_its_budget_the_watch_gives_its_descriptors_back() {
        let mut w = ThreadExits::with_budget(1);
        let pid = std::process::id();
        let (other, go_tx, h) = parked();
        w.watch(pid, gettid());
        if let Some(why) = w.off_reason() {
            eprintln!("SKIPPED past_its_budget_the_watch_gives_its_descriptors_back: {why}");
            drop(go_tx);
            let _ = h.join();
            return;
        }
        assert_eq!(w.fds.len(), 1);
        w.watch(pid, other);
        let why = w.off_reason().expect("off past the budget");
        assert!(why.contains("open-file limit"), "{why}");
        assert!(w.fds.is_empty(), "every pidfd given back");
        drop(go_tx);
        h.join().expect("join");
    }
}
