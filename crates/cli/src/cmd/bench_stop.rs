//! Stop signals for the benches that start children and temporary directories (`bench broker`,
//! `bench lockprof`): SIGINT, SIGTERM or SIGHUP sets a flag that their loops, sleeps and waits
//! check, so the bench kills and reaps its children, removes its directories and exits
//! 128 + the signal. A second Ctrl-C from the terminal ends the bench at once.

use anyhow::Result;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The first stop signal that came (0 while none has).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Async-signal-safe only: atomics, signal(2) and raise(3).
    if SIGNAL
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        return;
    }
    // A second Ctrl-C (or hang-up) from the terminal ends the bench at once. A signal sent by
    // a process may come twice by design (`timeout` signals its child, then its whole group):
    // that one does not.
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo.
    if unsafe { super::child::sent_by_kernel(info) } {
        // SAFETY: signal(2) and raise(3) are async-signal-safe; the signal is blocked in its
        // handler, so it is delivered, with its default action, when the handler returns.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Catch SIGINT, SIGTERM and SIGHUP from now on.
pub fn catch() -> Result<()> {
    super::child::catch_stop_signals(on_stop)
}

/// The stop signal that came, if one did.
pub fn stopped_by() -> Option<libc::c_int> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// The error a stopped bench returns from where it was (its caller reports the stop).
#[derive(Debug)]
pub struct Stopped(pub libc::c_int);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {}", signal_name(self.0))
    }
}

impl std::error::Error for Stopped {}

/// `Err(Stopped)` once a stop signal came.
pub fn check() -> Result<()> {
    match stopped_by() {
        Some(sig) => Err(Stopped(sig).into()),
        None => Ok(()),
    }
}

/// Sleep for `d`, checking the stop flag every 50 ms at most.
pub fn sleep(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// Wait for `child` to end, polling (its pidfd wakes the wait as it exits, so a timed program's
/// wall time is not rounded up; 1 ms sleeps without pidfd). On a stop signal the child is killed
/// (with its process group when `group`: it was started as the leader of one) and reaped.
pub fn wait(child: &mut Child, group: bool) -> Result<ExitStatus> {
    // SAFETY: pidfd_open on our own unreaped child; the fd, if any, is ours to own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    // SAFETY: a fresh fd returned by pidfd_open.
    let pidfd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) });
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if let Some(sig) = stopped_by() {
            if group {
                // SAFETY: the group our unreaped child leads.
                unsafe {
                    libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            if group {
                // The rest of the group (reparented, then reaped by init) may still be ending:
                // it is given up to 2 s to be gone before the caller removes what it wrote.
                let deadline = Instant::now() + Duration::from_secs(2);
                // SAFETY: signal 0 only tests whether the group still has a member.
                while unsafe { libc::kill(-(child.id() as libc::pid_t), 0) } == 0
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            return Err(Stopped(sig).into());
        }
        match &pidfd {
            Some(fd) => {
                use std::os::fd::AsRawFd;
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // A signal interrupts poll (never restarted): the flag is seen at once.
                // SAFETY: one pollfd we own.
                unsafe {
                    libc::poll(&mut p, 1, 100);
                }
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Send `sig` to `child`, give it `grace` to end, then SIGKILL it; reaped either way.
pub fn end(child: &mut Child, sig: libc::c_int, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: signalling our own unreaped child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The status a process ended by `sig` has.
pub fn exit_code(sig: libc::c_int) -> ExitCode {
    ExitCode::from((128 + sig).clamp(0, 255) as u8)
}

/// The signal's name (`counterpoint_host::signals::name`, the table every command uses).
pub fn signal_name(sig: libc::c_int) -> String {
    counterpoint_host::signals::name(sig)
}
