//! The exported `pthread_*` entry points, generated from one table by [`interpose!`]: each is a
//! naked trampoline that loads its return address (`[rsp]` at entry: the call site) into the
//! first unused argument register and tail-jumps to its implementation, which forwards to the
//! real function through the accounting in `account.rs` and returns straight to the caller.

use core::ffi::{c_int, c_void};

use crate::account::{as_fn, cond_notify, cond_wait, lock_via_try, try_only, unlock_with};
use crate::real::real;
use crate::{KIND_BROADCAST, KIND_MUTEX, KIND_RDLOCK, KIND_SIGNAL, KIND_SPIN, KIND_WRLOCK};

type F1 = unsafe extern "C" fn(*mut c_void) -> c_int;
type F2 = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
type F2Clock = unsafe extern "C" fn(*mut c_void, c_int, *const c_void) -> c_int;
type Cond2 = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Cond3 = unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void) -> c_int;
type Cond4 = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, *const c_void) -> c_int;

/// The register that receives the call site: the one after the function's own arguments.
macro_rules! site_register {
    ($a:ident) => {
        "rsi"
    };
    ($a:ident $b:ident) => {
        "rdx"
    };
    ($a:ident $b:ident $c:ident) => {
        "rcx"
    };
    ($a:ident $b:ident $c:ident $d:ident) => {
        "r8"
    };
}

/// `name(arg: type, ...; site) => body;` defines the exported `name` (a trampoline) and its
/// implementation `name::imp(arg..., site)`, whose body sees the arguments and the call site.
macro_rules! interpose {
    ($($name:ident($($arg:ident: $ty:ty),+; $site:ident) => $body:expr;)*) => {
        $(
            #[allow(non_snake_case)]
            mod $name {
                use super::*;
                #[allow(unused_variables)]
                pub(super) unsafe extern "C" fn imp($($arg: $ty,)+ $site: usize) -> c_int {
                    $body
                }
            }
            #[doc = concat!("Interposed `", stringify!($name), "` (see the module documentation).")]
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!(
                    concat!("mov ", site_register!($($arg)+), ", [rsp]"),
                    "jmp {t}",
                    t = sym $name::imp,
                )
            }
        )*
    };
}

interpose! {
    pthread_mutex_lock(m: *mut c_void; site) => {
        let (t, l) = (real!(mutex_trylock), real!(mutex_lock));
        lock_via_try(m, site, KIND_MUTEX, t, || as_fn::<F1>(l)(m))
    };
    pthread_mutex_trylock(m: *mut c_void; site) =>
        try_only(m, site, KIND_MUTEX, real!(mutex_trylock));
    pthread_mutex_timedlock(m: *mut c_void, ts: *const c_void; site) => {
        let (t, l) = (real!(mutex_trylock), real!(mutex_timedlock));
        lock_via_try(m, site, KIND_MUTEX, t, || as_fn::<F2>(l)(m, ts))
    };
    pthread_mutex_clocklock(m: *mut c_void, clock: c_int, ts: *const c_void; site) => {
        let (t, l) = (real!(mutex_trylock), real!(mutex_clocklock));
        lock_via_try(m, site, KIND_MUTEX, t, || as_fn::<F2Clock>(l)(m, clock, ts))
    };
    pthread_mutex_unlock(m: *mut c_void; site) => {
        let u = real!(mutex_unlock);
        unlock_with(m, || as_fn::<F1>(u)(m))
    };
    pthread_rwlock_rdlock(l: *mut c_void; site) => {
        let (t, f) = (real!(rw_tryrdlock), real!(rw_rdlock));
        lock_via_try(l, site, KIND_RDLOCK, t, || as_fn::<F1>(f)(l))
    };
    pthread_rwlock_wrlock(l: *mut c_void; site) => {
        let (t, f) = (real!(rw_trywrlock), real!(rw_wrlock));
        lock_via_try(l, site, KIND_WRLOCK, t, || as_fn::<F1>(f)(l))
    };
    pthread_rwlock_tryrdlock(l: *mut c_void; site) =>
        try_only(l, site, KIND_RDLOCK, real!(rw_tryrdlock));
    pthread_rwlock_trywrlock(l: *mut c_void; site) =>
        try_only(l, site, KIND_WRLOCK, real!(rw_trywrlock));
    pthread_rwlock_timedrdlock(l: *mut c_void, ts: *const c_void; site) => {
        let (t, f) = (real!(rw_tryrdlock), real!(rw_timedrdlock));
        lock_via_try(l, site, KIND_RDLOCK, t, || as_fn::<F2>(f)(l, ts))
    };
    pthread_rwlock_timedwrlock(l: *mut c_void, ts: *const c_void; site) => {
        let (t, f) = (real!(rw_trywrlock), real!(rw_timedwrlock));
        lock_via_try(l, site, KIND_WRLOCK, t, || as_fn::<F2>(f)(l, ts))
    };
    pthread_rwlock_clockrdlock(l: *mut c_void, clock: c_int, ts: *const c_void; site) => {
        let (t, f) = (real!(rw_tryrdlock), real!(rw_clockrdlock));
        lock_via_try(l, site, KIND_RDLOCK, t, || as_fn::<F2Clock>(f)(l, clock, ts))
    };
    pthread_rwlock_clockwrlock(l: *mut c_void, clock: c_int, ts: *const c_void; site) => {
        let (t, f) = (real!(rw_trywrlock), real!(rw_clockwrlock));
        lock_via_try(l, site, KIND_WRLOCK, t, || as_fn::<F2Clock>(f)(l, clock, ts))
    };
    pthread_rwlock_unlock(l: *mut c_void; site) => {
        let u = real!(rw_unlock);
        unlock_with(l, || as_fn::<F1>(u)(l))
    };
    pthread_spin_lock(l: *mut c_void; site) => {
        let (t, f) = (real!(spin_trylock), real!(spin_lock));
        lock_via_try(l, site, KIND_SPIN, t, || as_fn::<F1>(f)(l))
    };
    pthread_spin_trylock(l: *mut c_void; site) =>
        try_only(l, site, KIND_SPIN, real!(spin_trylock));
    pthread_spin_unlock(l: *mut c_void; site) => {
        let u = real!(spin_unlock);
        unlock_with(l, || as_fn::<F1>(u)(l))
    };
    pthread_cond_wait(c: *mut c_void, m: *mut c_void; site) => {
        let f = real!(cond_wait);
        cond_wait(c, m, site, || as_fn::<Cond2>(f)(c, m))
    };
    pthread_cond_timedwait(c: *mut c_void, m: *mut c_void, ts: *const c_void; site) => {
        let f = real!(cond_timedwait);
        cond_wait(c, m, site, || as_fn::<Cond3>(f)(c, m, ts))
    };
    pthread_cond_clockwait(
        c: *mut c_void, m: *mut c_void, clock: c_int, ts: *const c_void; site
    ) => {
        let f = real!(cond_clockwait);
        cond_wait(c, m, site, || as_fn::<Cond4>(f)(c, m, clock, ts))
    };
    pthread_cond_signal(c: *mut c_void; site) => {
        let f = real!(cond_signal);
        cond_notify(c, site, KIND_SIGNAL, || as_fn::<F1>(f)(c))
    };
    pthread_cond_broadcast(c: *mut c_void; site) => {
        let f = real!(cond_broadcast);
        cond_notify(c, site, KIND_BROADCAST, || as_fn::<F1>(f)(c))
    };
}

// Initialisation: the real call, then the creating stack is recorded (`locks::created`), so a
// dynamically created lock is shown where it was made, not only where it was first taken.
// Plain functions: their call site is not needed (the stack has it).

type Init2 = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
type SpinInit = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// Interposed `pthread_mutex_init`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_init(m: *mut c_void, attr: *const c_void) -> c_int {
    let f = real!(mutex_init);
    let r = as_fn::<Init2>(f)(m, attr);
    if r == 0 {
        crate::locks::created(m as usize);
    }
    r
}

/// Interposed `pthread_rwlock_init`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_init(l: *mut c_void, attr: *const c_void) -> c_int {
    let f = real!(rw_init);
    let r = as_fn::<Init2>(f)(l, attr);
    if r == 0 {
        crate::locks::created(l as usize);
    }
    r
}

/// Interposed `pthread_spin_init`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_init(l: *mut c_void, pshared: c_int) -> c_int {
    let f = real!(spin_init);
    let r = as_fn::<SpinInit>(f)(l, pshared);
    if r == 0 {
        crate::locks::created(l as usize);
    }
    r
}
