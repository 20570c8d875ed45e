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

/// Install `handler` for every signal of [`STOP_SIGNALS`], restarting interrupted calls; one
/// ignored at start stays ignored (`counterpoint_host::signals::ignored`: `nohup`, a shell's
/// background job), and so does it for the child, which inherits the ignore.
pub fn catch_stop_signals(handler: StopHandler) -> Result<()> {
    for sig in STOP_SIGNALS {
        if counterpoint_host::signals::ignored(sig) {
            continue;
        }
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

// The waits that keep a child's pid the command's until it reaps it (shared with the replica
// burn's parent).
pub use counterpoint_host::exits::{has_ended, wait_unreaped};
