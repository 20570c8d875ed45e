//! Commands that run a child and outlive it on a stop signal (`lockprof`, `agent-overhead`):
//! the handler installation, the test for a signal the kernel sent itself, and the wait that
//! keeps the child's pid ours until the command has done with it.

use anyhow::{Context, Result};

/// The signals that stop such a command: it passes them on, waits and cleans up.
pub const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A stop handler: called with the signal and its siginfo (`SA_SIGINFO`). It must be
/// async-signal-safe (atomics and `kill(2)` only).
pub type StopHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Whether the kernel sent the signal itself (a terminal's Ctrl-C or hang-up, which went to the
/// whole foreground group, the child included), rather than a process with `kill`.
///
/// # Safety
/// `info` is the pointer an `SA_SIGINFO` handler received (or null).
pub unsafe fn sent_by_kernel(info: *const libc::siginfo_t) -> bool {
    /// `si_code` of a signal the kernel sent.
    const SI_KERNEL: libc::c_int = 0x80;
    // SAFETY: the caller passes the kernel's siginfo or null.
    !info.is_null() && unsafe { (*info).si_code } == SI_KERNEL
}

/// Install `handler` for every signal of [`STOP_SIGNALS`], restarting interrupted calls.
pub fn catch_stop_signals(handler: StopHandler) -> Result<()> {
    for sig in STOP_SIGNALS {
        // SAFETY: a zeroed sigaction is valid; we set the handler, an empty mask and flags.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: sa_mask is ours; sigemptyset only writes to it.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: the handler is async-signal-safe by this function's contract.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("catching signal {sig}"));
        }
    }
    Ok(())
}

/// Wait until child `pid` has ended without reaping it: its pid stays ours (a stop signal can
/// still be passed on to it) until the caller reaps it.
pub fn wait_unreaped(pid: libc::pid_t) -> std::io::Result<()> {
    peek_exit(pid, 0).map(|_| ())
}

/// Whether child `pid` has ended, without waiting and without reaping it (see
/// [`wait_unreaped`]).
pub fn has_ended(pid: libc::pid_t) -> std::io::Result<bool> {
    peek_exit(pid, libc::WNOHANG)
}

/// `waitid(P_PID, pid, WEXITED | WNOWAIT | flags)`, retried on EINTR: whether child `pid` has
/// ended, leaving it waitable (with `WNOHANG` it does not block).
fn peek_exit(pid: libc::pid_t, flags: libc::c_int) -> std::io::Result<bool> {
    loop {
        // SAFETY: a zeroed siginfo is valid for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child; WNOWAIT leaves it waitable.
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
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
