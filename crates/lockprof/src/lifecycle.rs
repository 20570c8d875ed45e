//! The profiler's life in the process: the constructor (resolution, thread-exit key, handlers),
//! `fork` (the child keeps only its own work), and every way a process ends or is replaced —
//! `exit` (an `atexit` handler), fatal and terminating signals (a handler that writes the report
//! and re-raises with the default action), and `exec` (the execve family is interposed: the
//! report is written just before, and removed again if the exec fails).

use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed, Ordering::SeqCst};

use crate::report::{self, Ending};
use crate::table::{rdtsc, thread_exit, EXIT_KEY, INIT_MONO_NS, INIT_TSC, MY_SLOT, RETIRED, SLOTS};

/// The process the tables belong to: set at load and in a forked child. A `vfork` child (which
/// shares our memory and runs no atfork handler) sees another pid and must not flush.
static OWNER_PID: AtomicI32 = AtomicI32::new(0);

/// Signals whose default action ends the process with a core dump (a crash): the report is
/// written without symbols (`dladdr` is not async-signal-safe).
pub const FATAL_SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Other signals whose default action ends the process (issue: a profile ended by SIGTERM was
/// lost). Handled only where the disposition is still the default at load; a program that
/// installs its own handler replaces ours and usually ends through `exit`, which reports.
pub const TERMINATING_SIGNALS: [c_int; 11] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGPIPE,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
];

pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The TSC and `CLOCK_MONOTONIC` read as one instant: the TSC on both sides of the clock read,
/// the closest of a few tries, its midpoint. A preemption between the two reads would skew the
/// TSC rate measured between two such instants; with a 2 ms interval (report.rs) one of tens of
/// µs would be 1 %.
pub(crate) fn clock_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let a = rdtsc();
        let m = mono_ns();
        let b = rdtsc();
        let gap = b.wrapping_sub(a);
        if gap < best.0 {
            best = (gap, a.wrapping_add(gap / 2), m);
        }
        // A clock read takes well under a microsecond: nothing came between these.
        if gap < 10_000 {
            break;
        }
    }
    (best.1, best.2)
}

/// Mark the start of the run (the TSC calibration's first instant).
fn mark_start() {
    let (tsc, mono) = clock_pair();
    INIT_TSC.store(tsc, Relaxed);
    INIT_MONO_NS.store(mono, Relaxed);
}

extern "C" fn atfork_child() {
    // The child has one thread (the forking one): drop the parent's data so the child's report
    // holds only what the child did, and restart calibration and thread time.
    let mine = MY_SLOT.with(|c| c.get());
    for s in SLOTS.iter() {
        s.reset_counters();
        if !core::ptr::eq(s, mine) {
            s.in_use.store(false, Relaxed);
        }
    }
    for e in RETIRED.entries.iter() {
        e.clear();
    }
    RETIRED.nthreads.store(0, Relaxed);
    RETIRED.threads_unlisted.store(0, Relaxed);
    RETIRED.overflow_events.store(0, Relaxed);
    // Another parent thread may have held it at fork time; it does not exist here.
    RETIRED.busy.store(false, Relaxed);
    mark_start();
    if !mine.is_null() {
        // SAFETY: points into SLOTS.
        let s = unsafe { &*mine };
        s.tid
            .store(unsafe { libc::syscall(libc::SYS_gettid) } as u64, Relaxed);
        s.start_tsc.store(rdtsc(), Relaxed);
        // Holds carried across fork stay on the stack; restart their clocks.
        let p = unsafe { &mut *s.private.get() };
        let now = rdtsc();
        for h in p.stack.iter_mut().take(p.depth) {
            h.since = now;
        }
        p.held_since = now;
    }
    crate::locks::forget_owners();
    crate::events::forked();
    report::FLUSHED.store(false, Relaxed);
    FORK_CHILD.store(true, Relaxed);
    // SAFETY: getpid has no preconditions.
    OWNER_PID.store(unsafe { libc::getpid() }, Relaxed);
}

/// Set in a forked child: a child that leaves with `_exit` or `exit` having locked nothing
/// writes no file (shells fork many of those).
static FORK_CHILD: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// `_exit` and `_Exit` end the process without `atexit` handlers (dash ends that way, and so do
/// many fork children): the report is written first, with `"ended_by": "_exit"`. glibc's own
/// `exit` reaches the kernel through an internal alias, not through these, so nothing is written
/// twice. A `vfork` child (another pid in our memory) only leaves.
unsafe fn before_quick_exit() {
    if OWNER_PID.load(Relaxed) != libc::getpid() {
        return;
    }
    if FORK_CHILD.load(Relaxed) && !crate::table::has_activity() {
        return;
    }
    report::flush(Ending::QuickExit);
}

unsafe fn quick_exit_with(real: usize, status: c_int) -> ! {
    if real != 0 {
        let f = core::mem::transmute::<usize, unsafe extern "C" fn(c_int) -> !>(real);
        f(status)
    }
    libc::syscall(libc::SYS_exit_group, status);
    // exit_group does not return.
    loop {
        libc::pause();
    }
}

/// Interposed `_exit`: the report is written, then the real `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    crate::real::resolve();
    before_quick_exit();
    quick_exit_with(crate::real::REAL.exit_now.load(Relaxed), status)
}

/// Interposed `_Exit` (C99's name for `_exit`).
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    crate::real::resolve();
    before_quick_exit();
    quick_exit_with(crate::real::REAL.exit_now_c99.load(Relaxed), status)
}

extern "C" fn at_exit() {
    // A fork child that locked nothing writes no file through `exit` either, as through
    // `_exit` and exec: bash's subshells and command substitutions end with `exit`, and a run
    // through pyenv's wrapper listed 41 processes, 40 with no lock (CLI probe, session 24).
    if FORK_CHILD.load(Relaxed) && !crate::table::has_activity() {
        return;
    }
    report::flush(Ending::Exit);
}

/// Set by the first signal handler that writes the report: a second ending signal, on any
/// thread (e.g. Ctrl-C reaching the program from the terminal and again from `counterpoint
/// lockprof`, which passes on a signal sent to it), waits for that handler to end the process
/// instead of ending it in the middle of the write.
static ENDING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: c_int) {
    if ENDING.swap(true, SeqCst) {
        // Another handler writes the report and then ends the process.
        loop {
            // SAFETY: pause is async-signal-safe.
            unsafe { libc::pause() };
        }
    }
    report::flush(Ending::Signal(sig));
    // The default action back, then re-raise so the process ends as it would have (status,
    // core dump) without us: `sig` is blocked in its own handler, so the raised signal waits
    // until it is unblocked here.
    // SAFETY: sigaction, raise and pthread_sigmask are async-signal-safe; the structures are
    // ours and initialised.
    unsafe {
        let mut dfl: libc::sigaction = core::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, core::ptr::null_mut());
        libc::raise(sig);
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut());
    }
}

/// Install `on_signal` for `sig` if its disposition is still the default. While it runs, every
/// signal it handles is blocked on its thread (other threads wait through [`ENDING`]).
unsafe fn handle_if_default(sig: c_int) {
    let mut old: libc::sigaction = core::mem::zeroed();
    if libc::sigaction(sig, core::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for other in FATAL_SIGNALS.iter().chain(TERMINATING_SIGNALS.iter()) {
            libc::sigaddset(&mut sa.sa_mask, *other);
        }
        libc::sigaction(sig, &sa, core::ptr::null_mut());
    }
}

pub(crate) extern "C" fn init() {
    mark_start();
    // SAFETY: getpid has no preconditions.
    OWNER_PID.store(unsafe { libc::getpid() }, Relaxed);
    crate::real::resolve();
    report::init();
    crate::objects::snapshot();
    crate::events::init();
    // SAFETY: registering plain extern "C" handlers.
    unsafe {
        let mut key: libc::pthread_key_t = 0;
        if libc::pthread_key_create(&mut key, Some(thread_exit)) == 0 {
            EXIT_KEY.store(key, Relaxed);
        }
        libc::pthread_atfork(None, None, Some(atfork_child));
        libc::atexit(at_exit);
        for sig in FATAL_SIGNALS.iter().chain(TERMINATING_SIGNALS.iter()) {
            handle_if_default(*sig);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// exec: the image (and our tables) are replaced without running atexit handlers.

/// Write the report before an exec; the returned guard removes it if the exec returns (fails).
fn before_exec() -> Option<report::Written> {
    // SAFETY: getpid has no preconditions.
    if OWNER_PID.load(Relaxed) != unsafe { libc::getpid() } {
        return None; // a vfork child: the tables are the parent's
    }
    report::flush(Ending::Exec)
}

fn exec_failed(written: Option<report::Written>) {
    if let Some(w) = written {
        // Keep errno for the caller: the exec's error is what it will look at.
        // SAFETY: __errno_location is always valid for the calling thread.
        let saved = unsafe { *libc::__errno_location() };
        report::unflush(w);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved };
    }
}

type ExecFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;

/// Resolve an exec function: -1 with `ENOSYS` if this libc lacks it.
macro_rules! real_exec {
    ($field:ident) => {{
        crate::real::resolve();
        let p = crate::real::REAL.$field.load(Relaxed);
        if p == 0 {
            *libc::__errno_location() = libc::ENOSYS;
            return -1;
        }
        p
    }};
}

/// Interposed `execve`: the report is written first.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let f = real_exec!(execve);
    let w = before_exec();
    let r = core::mem::transmute::<usize, ExecFn>(f)(path, argv, envp);
    exec_failed(w);
    r
}

/// Interposed `execvpe`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let f = real_exec!(execvpe);
    let w = before_exec();
    let r = core::mem::transmute::<usize, ExecFn>(f)(file, argv, envp);
    exec_failed(w);
    r
}

/// Interposed `execv`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    let f = real_exec!(execv);
    let w = before_exec();
    let r = core::mem::transmute::<usize, ExecvFn>(f)(path, argv);
    exec_failed(w);
    r
}

/// Interposed `execvp`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    let f = real_exec!(execvp);
    let w = before_exec();
    let r = core::mem::transmute::<usize, ExecvFn>(f)(file, argv);
    exec_failed(w);
    r
}

/// Interposed `fexecve`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let f = real_exec!(fexecve);
    let w = before_exec();
    let r = core::mem::transmute::<usize, FexecveFn>(f)(fd, argv, envp);
    exec_failed(w);
    r
}

// The variadic `execl`, `execlp` and `execle` cannot be defined in stable Rust, and glibc's
// versions call its internal `__execve`, not the interposed one. Each is a naked trampoline
// instead: it saves the argument registers (and `al`, the vector-register count of a variadic
// call), calls a helper that writes the report and returns the real function, restores them
// and tail-jumps to it with the caller's stack untouched, so the variadic arguments arrive as
// they were passed. If the exec fails the real function returns straight to the caller; the
// report written before it is then replaced at the next flush (see `report::flush`).

/// Helper of the `execl*` trampolines: the real function's address, or 0 with `errno` ENOSYS.
macro_rules! exec_variadic {
    ($($name:ident => $helper:ident, $field:ident;)*) => {
        $(
            extern "C" fn $helper() -> usize {
                crate::real::resolve();
                let p = crate::real::REAL.$field.load(Relaxed);
                if p == 0 {
                    // SAFETY: errno of this thread.
                    unsafe { *libc::__errno_location() = libc::ENOSYS };
                    return 0;
                }
                let _ = before_exec();
                p
            }

            #[doc = concat!("Interposed `", stringify!($name), "` (variadic; see above).")]
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!(
                    // 7 pushes after the return address: the stack is 16-byte aligned.
                    "push rdi", "push rsi", "push rdx", "push rcx", "push r8", "push r9",
                    "push rax",
                    "call {helper}",
                    "mov r11, rax",
                    "pop rax", "pop r9", "pop r8", "pop rcx", "pop rdx", "pop rsi", "pop rdi",
                    "test r11, r11",
                    "jz 2f",
                    "jmp r11",
                    "2:",
                    "mov eax, -1",
                    "ret",
                    helper = sym $helper,
                )
            }
        )*
    };
}

exec_variadic! {
    execl => execl_before, execl;
    execlp => execlp_before, execlp;
    execle => execle_before, execle;
}

// Run `init` when the library is loaded (before main), only in the preloaded cdylib: the rlib
// used by tests must not install handlers into the test harness.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
