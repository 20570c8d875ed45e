//! Every terminating signal the agent can catch ends it through the restore path: the handler
//! only records the signal and raises a stop flag; the loop sees the flag within one sleep slice
//! and restores every affinity before exiting.
//!
//! Not caught: `SIGKILL` and `SIGSTOP` (impossible; the journal covers a kill, restored on the
//! next start or by `agent --restore-only`), and the synchronous faults `SIGSEGV`, `SIGBUS`,
//! `SIGFPE`, `SIGILL`, `SIGTRAP`, `SIGSYS` (returning from their handler re-runs the faulting
//! instruction; the journal covers those crashes too).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The terminating signals with a fixed number (real-time signals are added at install).
pub const TERMINATING: &[libc::c_int] = &[
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGSTKFLT,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
];

/// A signal handler could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot install a handler for signal {signal}: {error}")]
pub struct SignalError {
    /// The signal number.
    pub signal: i32,
    /// The OS error (in the message, not a `source`: said once in a chain).
    pub error: std::io::Error,
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work: two atomic stores. The first signal is the one reported.
    let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Every signal [`install`] catches: [`TERMINATING`] and the real-time signals.
pub fn caught() -> Vec<libc::c_int> {
    let mut v = TERMINATING.to_vec();
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

/// Catch every terminating signal (see the module comment). `SA_RESTART` keeps interrupted
/// system calls going; the stop flag is what ends the loop.
pub fn install() -> Result<(), SignalError> {
    for sig in caught() {
        if let Err(error) = catch(sig) {
            // glibc reserves the first real-time signals for itself: skip those it refuses.
            if sig >= libc::SIGRTMIN() {
                continue;
            }
            return Err(SignalError { signal: sig, error });
        }
    }
    Ok(())
}

/// Whether `sig` is ignored (`SIG_IGN`) now. A signal ignored when a command starts was
/// ignored on purpose by whoever started it: `nohup` ignores SIGHUP so a hang-up does not end
/// the command, a non-interactive shell ignores SIGINT and SIGQUIT for its background jobs so
/// a Ctrl-C meant for the foreground does not reach them. A handler installed over it undid
/// that (CLI probe, session 29: `simulate ... &` in a script died on the script's Ctrl-C), so
/// every command's stop handlers leave an ignored signal ignored.
pub fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: a query only (no new action); `old` is a zeroed sigaction the kernel fills.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    (unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0)
        && old.sa_sigaction == libc::SIG_IGN
}

/// Point each of `signals` at `handler` with `signal(2)`, except one [`ignored`] (it stays
/// ignored): the stop handlers of commands that keep their own flag.
///
/// # Safety
/// `handler` must be async-signal-safe (atomics only, as a stop flag).
pub unsafe fn handle_unless_ignored(signals: &[libc::c_int], handler: extern "C" fn(libc::c_int)) {
    for &sig in signals {
        if !ignored(sig) {
            // SAFETY: the caller vouches for the handler.
            unsafe { libc::signal(sig, handler as libc::sighandler_t) };
        }
    }
}

/// Point `sig` at the handler that records it and raises the stop flag, unless it is
/// [`ignored`].
fn catch(sig: libc::c_int) -> std::io::Result<()> {
    // SIGPIPE excepted: Rust's runtime ignores it before `main`, whatever the parent did.
    if sig != libc::SIGPIPE && ignored(sig) {
        return Ok(());
    }
    // SAFETY: a zeroed sigaction is valid; we set the handler, an empty mask and flags.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: sa_mask is ours; sigemptyset only writes to it.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: the handler only stores to atomics, which is async-signal-safe.
    if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The signals a user sends to end a command (Ctrl-C, `kill`, a closed terminal, Ctrl-\\), for
/// commands that stop early and clean up but keep every other signal's default (a closed
/// stdout still ends them by `SIGPIPE`).
pub const INTERRUPTING: &[libc::c_int] =
    &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Catch only `signals` (as [`install`] does every terminating signal): each raises the stop
/// flag and is recorded.
pub fn install_only(signals: &[libc::c_int]) -> Result<(), SignalError> {
    for &sig in signals {
        catch(sig).map_err(|error| SignalError { signal: sig, error })?;
    }
    Ok(())
}

/// Whether a stop was asked for (by a signal or [`request_stop`]).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Ask the loop to stop (e.g. after a failed log write).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// The flag itself, for [`crate::Host::set_stop_flag`].
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// The first signal received, if any.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The conventional name of a signal (`SIGTERM`), or its number.
pub fn name(sig: i32) -> String {
    let fixed = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGSTKFLT, "SIGSTKFLT"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGIO, "SIGIO"),
        (libc::SIGPWR, "SIGPWR"),
        (libc::SIGKILL, "SIGKILL"),
    ];
    match fixed.iter().find(|(n, _)| *n == sig) {
        Some((_, s)) => (*s).to_string(),
        None if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) => {
            format!("SIGRTMIN+{}", sig - libc::SIGRTMIN())
        }
        None => format!("signal {sig}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal ignored at start stays ignored: `nohup`'s SIGHUP, a background job's SIGINT.
    /// SIGWINCH stands in for them (nothing else in this process touches it, and no terminal
    /// sends it here).
    #[test]
    fn a_signal_ignored_at_start_stays_ignored() {
        let sig = libc::SIGWINCH;
        // SAFETY: setting one signal's disposition; no handler runs.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
        assert!(ignored(sig));
        install_only(&[sig]).expect("install");
        assert!(
            ignored(sig),
            "the stop handler replaced an inherited ignore"
        );
        // Not ignored: caught.
        // SAFETY: as above.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        install_only(&[sig]).expect("install");
        assert!(!ignored(sig));
        // SAFETY: back to the default, so a stray SIGWINCH cannot raise the stop flag.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }

    #[test]
    fn names_and_the_caught_set() {
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
        assert_eq!(name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        let c = caught();
        for s in [libc::SIGQUIT, libc::SIGUSR1, libc::SIGALRM, libc::SIGPIPE] {
            assert!(c.contains(&s), "{s}");
        }
        for s in [libc::SIGKILL, libc::SIGSEGV, libc::SIGSTOP] {
            assert!(!c.contains(&s), "{s}");
        }
    }
}
