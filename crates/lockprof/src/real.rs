//! The real functions behind the interposed ones, found with `dlsym(RTLD_NEXT)` (`dlvsym` for
//! the versioned `pthread_cond_*@GLIBC_2.3.2`) the first time any is needed. The table is
//! generated from one list so that adding an interposed function is one line here and one in
//! `interpose.rs`.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

macro_rules! real_functions {
    ($($field:ident = $sym:literal $(@ $ver:literal)?;)*) => {
        /// Address of each real function (0 until resolved, or if this libc lacks it).
        pub(crate) struct Real { $(pub(crate) $field: AtomicUsize,)* }
        pub(crate) static REAL: Real = Real { $($field: AtomicUsize::new(0),)* };
        /// # Safety
        /// Calls dlsym/dlvsym with NUL-terminated names.
        unsafe fn resolve_all() {
            $(
                REAL.$field.store(
                    next_sym(concat!($sym, "\0").as_bytes(), real_functions!(@ver $($ver)?)),
                    Relaxed,
                );
            )*
        }
    };
    (@ver) => { None };
    (@ver $v:literal) => { Some(concat!($v, "\0").as_bytes()) };
}

real_functions! {
    mutex_lock = "pthread_mutex_lock";
    mutex_trylock = "pthread_mutex_trylock";
    mutex_timedlock = "pthread_mutex_timedlock";
    mutex_clocklock = "pthread_mutex_clocklock";
    mutex_unlock = "pthread_mutex_unlock";
    mutex_init = "pthread_mutex_init";
    rw_init = "pthread_rwlock_init";
    spin_init = "pthread_spin_init";
    rw_rdlock = "pthread_rwlock_rdlock";
    rw_wrlock = "pthread_rwlock_wrlock";
    rw_tryrdlock = "pthread_rwlock_tryrdlock";
    rw_trywrlock = "pthread_rwlock_trywrlock";
    rw_timedrdlock = "pthread_rwlock_timedrdlock";
    rw_timedwrlock = "pthread_rwlock_timedwrlock";
    rw_clockrdlock = "pthread_rwlock_clockrdlock";
    rw_clockwrlock = "pthread_rwlock_clockwrlock";
    rw_unlock = "pthread_rwlock_unlock";
    // The default dlsym version of pthread_cond_* is the pre-2.3.2 compat ABI on some glibc
    // builds; ask for the current one explicitly.
    cond_wait = "pthread_cond_wait" @ "GLIBC_2.3.2";
    cond_timedwait = "pthread_cond_timedwait" @ "GLIBC_2.3.2";
    cond_clockwait = "pthread_cond_clockwait";
    cond_signal = "pthread_cond_signal" @ "GLIBC_2.3.2";
    cond_broadcast = "pthread_cond_broadcast" @ "GLIBC_2.3.2";
    exit_now = "_exit";
    exit_now_c99 = "_Exit";
    spin_lock = "pthread_spin_lock";
    spin_trylock = "pthread_spin_trylock";
    spin_unlock = "pthread_spin_unlock";
    execve = "execve";
    execv = "execv";
    execvp = "execvp";
    execvpe = "execvpe";
    fexecve = "fexecve";
    execl = "execl";
    execlp = "execlp";
    execle = "execle";
}

static RESOLVED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
}

unsafe fn next_sym(name: &[u8], version: Option<&[u8]>) -> usize {
    let p = match version {
        Some(v) => libc::dlvsym(
            libc::RTLD_NEXT,
            name.as_ptr() as *const libc::c_char,
            v.as_ptr() as *const libc::c_char,
        ),
        None => core::ptr::null_mut(),
    };
    let p = if p.is_null() {
        libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const libc::c_char)
    } else {
        p
    };
    p as usize
}

/// Resolve every real function. Returns false when called recursively (dlsym itself locked a
/// mutex), in which case the caller must behave as if the lock operation succeeded: only the
/// resolving thread can be inside dlsym's bootstrap, before any program thread exists.
#[cold]
pub(crate) fn resolve() -> bool {
    if RESOLVED.load(core::sync::atomic::Ordering::Acquire) {
        return true;
    }
    if RESOLVING.with(|c| c.replace(true)) {
        return false;
    }
    // SAFETY: dlsym/dlvsym with NUL-terminated names.
    unsafe { resolve_all() };
    RESOLVED.store(true, core::sync::atomic::Ordering::Release);
    RESOLVING.with(|c| c.set(false));
    true
}

/// The real function `$field`: resolved on first use; inside dlsym's own bootstrap the caller
/// returns 0 (success) at once; a function this libc does not have returns `ENOSYS`.
macro_rules! real {
    ($field:ident) => {{
        let p = $crate::real::REAL
            .$field
            .load(core::sync::atomic::Ordering::Relaxed);
        if p != 0 {
            p
        } else {
            if !$crate::real::resolve() {
                return 0;
            }
            let p = $crate::real::REAL
                .$field
                .load(core::sync::atomic::Ordering::Relaxed);
            if p == 0 {
                return libc::ENOSYS;
            }
            p
        }
    }};
}
pub(crate) use real;
