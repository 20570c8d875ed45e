//! `counterpoint-lockprof`: a pthread lock profiler loaded with `LD_PRELOAD` (LiMiT's lock case
//! study, DESIGN.md §6). It interposes the pthread mutex, rwlock, condition-variable and spinlock
//! entry points, forwards each call to the real glibc function found with `dlsym(RTLD_NEXT)`
//! (`dlvsym` for the versioned `pthread_cond_*@GLIBC_2.3.2`), and accounts per lock address and
//! per call site: acquisitions, contended acquisitions (a `trylock` failed first), wait and hold
//! time from the TSC, plus LiMiT's free / locking / held / unlocking split per thread.
//!
//! Accounting is thread-local and allocation-free: every thread claims one slot of a static
//! table (an atomic compare-and-swap, once), and writes only its own slot with relaxed atomic
//! loads/stores (plain `mov`s on x86-64), so the fast path takes no global lock. At process exit
//! (an `atexit` handler) or on a fatal signal (SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT) the slots are
//! written as JSON to `$COUNTERPOINT_LOCKPROF_OUT/lockprof.<pid>.json` with `write(2)` from a
//! stack buffer, so the same code is async-signal-safe. There is no hardware PMU here, so the
//! report carries no counter deltas inside critical sections (it says so in `pmu`).
//!
//! The call site is the interposed function's return address: small assembly trampolines
//! (x86-64 only) load `[rsp]` into the next free argument register and tail-jump into Rust.

#![allow(clippy::missing_safety_doc)]
// Under `cfg(test)` the constructor is not registered, so the lifecycle code is unused.
#![cfg_attr(test, allow(dead_code))]

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("counterpoint-lockprof supports x86-64 Linux only");

pub mod report;

use core::cell::{Cell, UnsafeCell};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Lock kinds as written to the report.
pub const KIND_MUTEX: u64 = 1;
pub const KIND_RDLOCK: u64 = 2;
pub const KIND_WRLOCK: u64 = 3;
pub const KIND_SPIN: u64 = 4;
pub const KIND_COND: u64 = 5;

/// Name of a lock kind in the report.
pub fn kind_name(kind: u64) -> &'static str {
    match kind {
        KIND_MUTEX => "mutex",
        KIND_RDLOCK => "rwlock-read",
        KIND_WRLOCK => "rwlock-write",
        KIND_SPIN => "spin",
        KIND_COND => "cond-wait",
        _ => "unknown",
    }
}

/// Threads that can be tracked at once; later threads run unprofiled and are counted.
pub const MAX_THREADS: usize = 512;
/// (lock, call site, kind) entries per thread; events beyond it are counted as overflow.
pub const ENTRIES_PER_THREAD: usize = 512;
/// Locks one thread can hold at once and still be timed.
pub const HOLD_STACK: usize = 32;

#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[inline(always)]
fn bump(a: &AtomicU64, by: u64) {
    // Only the owning thread writes its slot: load+store avoids a locked instruction.
    a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
}

#[inline(always)]
fn raise_max(a: &AtomicU64, v: u64) {
    if v > a.load(Relaxed) {
        a.store(v, Relaxed);
    }
}

/// Statistics of one (lock, call site, kind) in one thread.
pub struct Entry {
    pub lock: AtomicUsize,
    pub site: AtomicUsize,
    pub kind: AtomicU64,
    pub acquisitions: AtomicU64,
    pub contentions: AtomicU64,
    pub wait_total: AtomicU64,
    pub wait_max: AtomicU64,
    pub hold_count: AtomicU64,
    pub hold_total: AtomicU64,
    pub hold_max: AtomicU64,
}

impl Entry {
    const fn new() -> Self {
        Entry {
            lock: AtomicUsize::new(0),
            site: AtomicUsize::new(0),
            kind: AtomicU64::new(0),
            acquisitions: AtomicU64::new(0),
            contentions: AtomicU64::new(0),
            wait_total: AtomicU64::new(0),
            wait_max: AtomicU64::new(0),
            hold_count: AtomicU64::new(0),
            hold_total: AtomicU64::new(0),
            hold_max: AtomicU64::new(0),
        }
    }
    fn clear(&self) {
        for a in [
            &self.kind,
            &self.acquisitions,
            &self.contentions,
            &self.wait_total,
            &self.wait_max,
            &self.hold_count,
            &self.hold_total,
            &self.hold_max,
        ] {
            a.store(0, Relaxed);
        }
        self.site.store(0, Relaxed);
        self.lock.store(0, Relaxed);
    }
}

#[derive(Clone, Copy)]
struct Hold {
    lock: usize,
    since: u64,
    entry: usize,
}

/// Owner-only state (never read by the flushing thread).
struct Private {
    depth: usize,
    held_since: u64,
    stack: [Hold; HOLD_STACK],
}

/// One thread's accounting.
pub struct Slot {
    pub in_use: AtomicBool,
    pub tid: AtomicU64,
    pub start_tsc: AtomicU64,
    /// Ticks spent inside lock calls (waiting + the call itself).
    pub locking: AtomicU64,
    /// Ticks spent inside unlock calls.
    pub unlocking: AtomicU64,
    /// Ticks with at least one lock held (includes nested lock/unlock calls).
    pub held: AtomicU64,
    /// Lock/unlock call ticks that fell inside a held interval (subtracted from `held`).
    pub nested_calls: AtomicU64,
    pub lock_calls: AtomicU64,
    pub overflow_events: AtomicU64,
    pub unmatched_unlocks: AtomicU64,
    pub entries: [Entry; ENTRIES_PER_THREAD],
    private: UnsafeCell<Private>,
}

// SAFETY: `private` is only touched by the thread owning the slot (or the single thread left
// after fork); everything else is atomic.
unsafe impl Sync for Slot {}

impl Slot {
    const fn new() -> Self {
        Slot {
            in_use: AtomicBool::new(false),
            tid: AtomicU64::new(0),
            start_tsc: AtomicU64::new(0),
            locking: AtomicU64::new(0),
            unlocking: AtomicU64::new(0),
            held: AtomicU64::new(0),
            nested_calls: AtomicU64::new(0),
            lock_calls: AtomicU64::new(0),
            overflow_events: AtomicU64::new(0),
            unmatched_unlocks: AtomicU64::new(0),
            entries: [const { Entry::new() }; ENTRIES_PER_THREAD],
            private: UnsafeCell::new(Private {
                depth: 0,
                held_since: 0,
                stack: [Hold {
                    lock: 0,
                    since: 0,
                    entry: 0,
                }; HOLD_STACK],
            }),
        }
    }

    fn reset_counters(&self) {
        for a in [
            &self.locking,
            &self.unlocking,
            &self.held,
            &self.nested_calls,
            &self.lock_calls,
            &self.overflow_events,
            &self.unmatched_unlocks,
        ] {
            a.store(0, Relaxed);
        }
        for e in &self.entries {
            e.clear();
        }
    }

    /// Find or create the entry for (lock, site, kind); `None` when the table is full.
    #[inline(always)]
    fn entry(&self, lock: usize, site: usize, kind: u64) -> Option<usize> {
        find_entry(&self.entries, lock, site, kind)
    }
}

/// Open-addressing lookup/insert in an entry table (only its owner inserts).
#[inline(always)]
fn find_entry(entries: &[Entry], lock: usize, site: usize, kind: u64) -> Option<usize> {
    let n = entries.len();
    // Table sizes are powers of two: a mask instead of a division on the fast path.
    debug_assert!(n.is_power_of_two());
    let mask = n - 1;
    let key = (lock as u64) ^ (site as u64).rotate_left(21) ^ kind;
    let mut i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
    for _ in 0..n {
        let e = &entries[i];
        let l = e.lock.load(Relaxed);
        if l == lock && e.site.load(Relaxed) == site && e.kind.load(Relaxed) == kind {
            return Some(i);
        }
        if l == 0 {
            // Publish key fields before `lock` so a concurrent flush sees a whole key.
            e.site.store(site, Relaxed);
            e.kind.store(kind, Relaxed);
            e.lock.store(lock, core::sync::atomic::Ordering::Release);
            return Some(i);
        }
        i = (i + 1) & mask;
    }
    None
}

/// Entries merged from exited threads.
pub const RETIRED_ENTRIES: usize = 8192;
/// Per-thread summaries kept for exited threads (later ones are counted, not listed).
pub const RETIRED_THREADS: usize = 4096;

/// LiMiT split of one exited thread, in TSC ticks.
pub struct ThreadSummary {
    pub tid: AtomicU64,
    pub total: AtomicU64,
    pub locking: AtomicU64,
    pub unlocking: AtomicU64,
    pub held: AtomicU64,
    pub lock_calls: AtomicU64,
    pub overflow_events: AtomicU64,
    pub unmatched_unlocks: AtomicU64,
}

/// Accounting of exited threads, merged at thread exit under `busy` (not on the fast path).
pub struct Retired {
    pub busy: AtomicBool,
    pub entries: [Entry; RETIRED_ENTRIES],
    pub threads: [ThreadSummary; RETIRED_THREADS],
    pub nthreads: AtomicUsize,
    pub threads_unlisted: AtomicU64,
    pub overflow_events: AtomicU64,
}

pub static RETIRED: Retired = Retired {
    busy: AtomicBool::new(false),
    entries: [const { Entry::new() }; RETIRED_ENTRIES],
    threads: [const {
        ThreadSummary {
            tid: AtomicU64::new(0),
            total: AtomicU64::new(0),
            locking: AtomicU64::new(0),
            unlocking: AtomicU64::new(0),
            held: AtomicU64::new(0),
            lock_calls: AtomicU64::new(0),
            overflow_events: AtomicU64::new(0),
            unmatched_unlocks: AtomicU64::new(0),
        }
    }; RETIRED_THREADS],
    nthreads: AtomicUsize::new(0),
    threads_unlisted: AtomicU64::new(0),
    overflow_events: AtomicU64::new(0),
};

/// Take the retire lock; with `bounded` (signal handler) give up after a while instead of
/// risking a deadlock with the interrupted holder.
pub(crate) fn retired_lock(bounded: bool) -> bool {
    let mut spins = 0u32;
    while RETIRED
        .busy
        .compare_exchange_weak(false, true, core::sync::atomic::Ordering::Acquire, Relaxed)
        .is_err()
    {
        spins += 1;
        if bounded && spins > 1_000_000 {
            return false;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
    true
}

pub(crate) fn retired_unlock() {
    RETIRED
        .busy
        .store(false, core::sync::atomic::Ordering::Release);
}

/// Thread exit (pthread key destructor): merge this thread's slot into `RETIRED` and free the
/// slot for a later thread.
extern "C" fn thread_exit(arg: *mut c_void) {
    let s = arg as *const Slot;
    if s.is_null() {
        return;
    }
    // SAFETY: the value set in claim_slot, a pointer into SLOTS.
    let s = unsafe { &*s };
    MY_SLOT.with(|c| c.set(core::ptr::null()));
    let now = rdtsc();
    retired_lock(false);
    if !report::FLUSHED.load(Relaxed) {
        for e in s.entries.iter() {
            let lock = e.lock.load(Relaxed);
            if lock == 0 {
                continue;
            }
            match find_entry(
                &RETIRED.entries,
                lock,
                e.site.load(Relaxed),
                e.kind.load(Relaxed),
            ) {
                Some(i) => {
                    let r = &RETIRED.entries[i];
                    bump(&r.acquisitions, e.acquisitions.load(Relaxed));
                    bump(&r.contentions, e.contentions.load(Relaxed));
                    bump(&r.wait_total, e.wait_total.load(Relaxed));
                    raise_max(&r.wait_max, e.wait_max.load(Relaxed));
                    bump(&r.hold_count, e.hold_count.load(Relaxed));
                    bump(&r.hold_total, e.hold_total.load(Relaxed));
                    raise_max(&r.hold_max, e.hold_max.load(Relaxed));
                }
                None => bump(&RETIRED.overflow_events, e.acquisitions.load(Relaxed)),
            }
        }
        let n = RETIRED.nthreads.load(Relaxed);
        if n < RETIRED_THREADS {
            let t = &RETIRED.threads[n];
            t.tid.store(s.tid.load(Relaxed), Relaxed);
            t.total
                .store(now.wrapping_sub(s.start_tsc.load(Relaxed)), Relaxed);
            t.locking.store(s.locking.load(Relaxed), Relaxed);
            t.unlocking.store(s.unlocking.load(Relaxed), Relaxed);
            t.held.store(
                s.held
                    .load(Relaxed)
                    .saturating_sub(s.nested_calls.load(Relaxed)),
                Relaxed,
            );
            t.lock_calls.store(s.lock_calls.load(Relaxed), Relaxed);
            t.overflow_events
                .store(s.overflow_events.load(Relaxed), Relaxed);
            t.unmatched_unlocks
                .store(s.unmatched_unlocks.load(Relaxed), Relaxed);
            RETIRED.nthreads.store(n + 1, Relaxed);
        } else {
            bump(&RETIRED.threads_unlisted, 1);
        }
        s.reset_counters();
        // SAFETY: the owning thread is exiting; nobody else touches `private`.
        unsafe { (*s.private.get()).depth = 0 };
        s.in_use.store(false, core::sync::atomic::Ordering::Release);
    }
    retired_unlock();
}

/// Key whose destructor runs `thread_exit`; u32::MAX until created.
static EXIT_KEY: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(u32::MAX);

pub static SLOTS: [Slot; MAX_THREADS] = [const { Slot::new() }; MAX_THREADS];
/// Threads that found no free slot.
pub static THREADS_UNTRACKED: AtomicU64 = AtomicU64::new(0);
/// TSC and CLOCK_MONOTONIC at load time, for calibration at flush.
pub static INIT_TSC: AtomicU64 = AtomicU64::new(0);
pub static INIT_MONO_NS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static MY_SLOT: Cell<*const Slot> = const { Cell::new(core::ptr::null()) };
    static NO_SLOT: Cell<bool> = const { Cell::new(false) };
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
}

#[inline(always)]
fn my_slot() -> Option<&'static Slot> {
    let p = MY_SLOT.with(|c| c.get());
    if !p.is_null() {
        // SAFETY: points into the static SLOTS.
        return Some(unsafe { &*p });
    }
    claim_slot()
}

#[cold]
fn claim_slot() -> Option<&'static Slot> {
    if NO_SLOT.with(|c| c.get()) {
        return None;
    }
    for s in SLOTS.iter() {
        if s.in_use
            .compare_exchange(false, true, core::sync::atomic::Ordering::AcqRel, Relaxed)
            .is_ok()
        {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
            s.tid.store(tid, Relaxed);
            s.start_tsc.store(rdtsc(), Relaxed);
            MY_SLOT.with(|c| c.set(s as *const Slot));
            let key = EXIT_KEY.load(Relaxed);
            if key != u32::MAX {
                // A non-null value makes the destructor run at thread exit.
                // SAFETY: key from pthread_key_create; setspecific of a low key does not allocate.
                unsafe { libc::pthread_setspecific(key, s as *const Slot as *const c_void) };
            }
            return Some(s);
        }
    }
    NO_SLOT.with(|c| c.set(true));
    THREADS_UNTRACKED.fetch_add(1, Relaxed);
    None
}

// ---------------------------------------------------------------------------------------------
// Real functions.

struct Real {
    mutex_lock: AtomicUsize,
    mutex_trylock: AtomicUsize,
    mutex_timedlock: AtomicUsize,
    mutex_unlock: AtomicUsize,
    rw_rdlock: AtomicUsize,
    rw_wrlock: AtomicUsize,
    rw_tryrdlock: AtomicUsize,
    rw_trywrlock: AtomicUsize,
    rw_timedrdlock: AtomicUsize,
    rw_timedwrlock: AtomicUsize,
    rw_unlock: AtomicUsize,
    cond_wait: AtomicUsize,
    cond_timedwait: AtomicUsize,
    spin_lock: AtomicUsize,
    spin_trylock: AtomicUsize,
    spin_unlock: AtomicUsize,
}

static REAL: Real = Real {
    mutex_lock: AtomicUsize::new(0),
    mutex_trylock: AtomicUsize::new(0),
    mutex_timedlock: AtomicUsize::new(0),
    mutex_unlock: AtomicUsize::new(0),
    rw_rdlock: AtomicUsize::new(0),
    rw_wrlock: AtomicUsize::new(0),
    rw_tryrdlock: AtomicUsize::new(0),
    rw_trywrlock: AtomicUsize::new(0),
    rw_timedrdlock: AtomicUsize::new(0),
    rw_timedwrlock: AtomicUsize::new(0),
    rw_unlock: AtomicUsize::new(0),
    cond_wait: AtomicUsize::new(0),
    cond_timedwait: AtomicUsize::new(0),
    spin_lock: AtomicUsize::new(0),
    spin_trylock: AtomicUsize::new(0),
    spin_unlock: AtomicUsize::new(0),
};
static RESOLVED: AtomicBool = AtomicBool::new(false);

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
fn resolve() -> bool {
    if RESOLVED.load(core::sync::atomic::Ordering::Acquire) {
        return true;
    }
    if RESOLVING.with(|c| c.replace(true)) {
        return false;
    }
    // SAFETY: dlsym/dlvsym with NUL-terminated names.
    unsafe {
        let r = &REAL;
        r.mutex_lock
            .store(next_sym(b"pthread_mutex_lock\0", None), Relaxed);
        r.mutex_trylock
            .store(next_sym(b"pthread_mutex_trylock\0", None), Relaxed);
        r.mutex_timedlock
            .store(next_sym(b"pthread_mutex_timedlock\0", None), Relaxed);
        r.mutex_unlock
            .store(next_sym(b"pthread_mutex_unlock\0", None), Relaxed);
        r.rw_rdlock
            .store(next_sym(b"pthread_rwlock_rdlock\0", None), Relaxed);
        r.rw_wrlock
            .store(next_sym(b"pthread_rwlock_wrlock\0", None), Relaxed);
        r.rw_tryrdlock
            .store(next_sym(b"pthread_rwlock_tryrdlock\0", None), Relaxed);
        r.rw_trywrlock
            .store(next_sym(b"pthread_rwlock_trywrlock\0", None), Relaxed);
        r.rw_timedrdlock
            .store(next_sym(b"pthread_rwlock_timedrdlock\0", None), Relaxed);
        r.rw_timedwrlock
            .store(next_sym(b"pthread_rwlock_timedwrlock\0", None), Relaxed);
        r.rw_unlock
            .store(next_sym(b"pthread_rwlock_unlock\0", None), Relaxed);
        // The default dlsym version of pthread_cond_* is the pre-2.3.2 compat ABI on some
        // glibc builds; ask for the current one explicitly.
        r.cond_wait.store(
            next_sym(b"pthread_cond_wait\0", Some(b"GLIBC_2.3.2\0")),
            Relaxed,
        );
        r.cond_timedwait.store(
            next_sym(b"pthread_cond_timedwait\0", Some(b"GLIBC_2.3.2\0")),
            Relaxed,
        );
        r.spin_lock
            .store(next_sym(b"pthread_spin_lock\0", None), Relaxed);
        r.spin_trylock
            .store(next_sym(b"pthread_spin_trylock\0", None), Relaxed);
        r.spin_unlock
            .store(next_sym(b"pthread_spin_unlock\0", None), Relaxed);
    }
    RESOLVED.store(true, core::sync::atomic::Ordering::Release);
    RESOLVING.with(|c| c.set(false));
    true
}

macro_rules! real {
    ($field:ident) => {{
        let p = REAL.$field.load(Relaxed);
        if p == 0 {
            if !resolve() {
                return 0;
            }
            REAL.$field.load(Relaxed)
        } else {
            p
        }
    }};
}

type F1 = unsafe extern "C" fn(*mut c_void) -> c_int;
type F2 = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
type F3 = unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void) -> c_int;

#[inline(always)]
unsafe fn call1(p: usize, a: *mut c_void) -> c_int {
    // SAFETY: p is the address of a real pthread function of this signature.
    core::mem::transmute::<usize, F1>(p)(a)
}
#[inline(always)]
unsafe fn call2(p: usize, a: *mut c_void, b: *const c_void) -> c_int {
    core::mem::transmute::<usize, F2>(p)(a, b)
}
#[inline(always)]
unsafe fn call3(p: usize, a: *mut c_void, b: *mut c_void, c: *const c_void) -> c_int {
    core::mem::transmute::<usize, F3>(p)(a, b, c)
}

// ---------------------------------------------------------------------------------------------
// Accounting.

#[inline(always)]
fn acquired(s: &Slot, lock: usize, site: usize, kind: u64, t0: u64, t1: u64, contended: bool) {
    // SAFETY: owner-only state of this thread's slot.
    let p = unsafe { &mut *s.private.get() };
    let wait = t1.wrapping_sub(t0);
    bump(&s.lock_calls, 1);
    bump(&s.locking, wait);
    if p.depth > 0 {
        bump(&s.nested_calls, wait);
    }
    let idx = match s.entry(lock, site, kind) {
        Some(i) => {
            let e = &s.entries[i];
            bump(&e.acquisitions, 1);
            if contended {
                bump(&e.contentions, 1);
            }
            bump(&e.wait_total, wait);
            raise_max(&e.wait_max, wait);
            i
        }
        None => {
            bump(&s.overflow_events, 1);
            usize::MAX
        }
    };
    push_hold(s, p, lock, t1, idx);
}

#[inline(always)]
fn push_hold(s: &Slot, p: &mut Private, lock: usize, t: u64, idx: usize) {
    if p.depth < HOLD_STACK {
        p.stack[p.depth] = Hold {
            lock,
            since: t,
            entry: idx,
        };
        if p.depth == 0 {
            p.held_since = t;
        }
        p.depth += 1;
    } else {
        bump(&s.overflow_events, 1);
    }
}

/// End the hold of `lock` at `t`; returns the entry index of its acquisition.
#[inline(always)]
fn release(s: &Slot, lock: usize, t: u64) -> Option<usize> {
    // SAFETY: owner-only state of this thread's slot.
    let p = unsafe { &mut *s.private.get() };
    let mut i = p.depth;
    while i > 0 {
        i -= 1;
        if p.stack[i].lock == lock {
            let h = p.stack[i];
            let hold = t.wrapping_sub(h.since);
            if h.entry != usize::MAX {
                let e = &s.entries[h.entry];
                bump(&e.hold_count, 1);
                bump(&e.hold_total, hold);
                raise_max(&e.hold_max, hold);
            }
            p.stack.copy_within(i + 1..p.depth, i);
            p.depth -= 1;
            if p.depth == 0 {
                bump(&s.held, t.wrapping_sub(p.held_since));
            }
            return Some(h.entry);
        }
    }
    bump(&s.unmatched_unlocks, 1);
    None
}

#[inline(always)]
fn unlocked(s: &Slot, t2: u64, t3: u64) {
    let d = t3.wrapping_sub(t2);
    bump(&s.unlocking, d);
    // SAFETY: owner-only state.
    if unsafe { (*s.private.get()).depth } > 0 {
        bump(&s.nested_calls, d);
    }
}

/// Lock with trylock first so that contention is observed without kernel help.
#[inline(always)]
unsafe fn lock_via_try(
    lock: *mut c_void,
    site: usize,
    kind: u64,
    try_fn: usize,
    lock_fn: usize,
) -> c_int {
    let Some(s) = my_slot() else {
        return call1(lock_fn, lock);
    };
    let t0 = rdtsc();
    let mut r = call1(try_fn, lock);
    let mut contended = false;
    if r == libc::EBUSY {
        contended = true;
        r = call1(lock_fn, lock);
    }
    let t1 = rdtsc();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(s, lock as usize, site, kind, t0, t1, contended);
    } else {
        bump(&s.locking, t1.wrapping_sub(t0));
    }
    r
}

#[inline(always)]
unsafe fn try_only(lock: *mut c_void, site: usize, kind: u64, try_fn: usize) -> c_int {
    let Some(s) = my_slot() else {
        return call1(try_fn, lock);
    };
    let t0 = rdtsc();
    let r = call1(try_fn, lock);
    let t1 = rdtsc();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(s, lock as usize, site, kind, t0, t1, false);
    } else {
        bump(&s.locking, t1.wrapping_sub(t0));
    }
    r
}

#[inline(always)]
unsafe fn timed(
    lock: *mut c_void,
    abstime: *const c_void,
    site: usize,
    kind: u64,
    try_fn: usize,
    timed_fn: usize,
) -> c_int {
    let Some(s) = my_slot() else {
        return call2(timed_fn, lock, abstime);
    };
    let t0 = rdtsc();
    let mut r = call1(try_fn, lock);
    let mut contended = false;
    if r == libc::EBUSY {
        contended = true;
        r = call2(timed_fn, lock, abstime);
    }
    let t1 = rdtsc();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(s, lock as usize, site, kind, t0, t1, contended);
    } else {
        bump(&s.locking, t1.wrapping_sub(t0));
    }
    r
}

#[inline(always)]
unsafe fn unlock_with(lock: *mut c_void, unlock_fn: usize) -> c_int {
    let Some(s) = my_slot() else {
        return call1(unlock_fn, lock);
    };
    let t2 = rdtsc();
    release(s, lock as usize, t2);
    let r = call1(unlock_fn, lock);
    let t3 = rdtsc();
    unlocked(s, t2, t3);
    r
}

unsafe extern "C" fn lp_mutex_lock(m: *mut c_void, site: usize) -> c_int {
    let t = real!(mutex_trylock);
    let l = real!(mutex_lock);
    lock_via_try(m, site, KIND_MUTEX, t, l)
}
unsafe extern "C" fn lp_mutex_trylock(m: *mut c_void, site: usize) -> c_int {
    let t = real!(mutex_trylock);
    try_only(m, site, KIND_MUTEX, t)
}
unsafe extern "C" fn lp_mutex_timedlock(m: *mut c_void, ts: *const c_void, site: usize) -> c_int {
    let t = real!(mutex_trylock);
    let l = real!(mutex_timedlock);
    timed(m, ts, site, KIND_MUTEX, t, l)
}
unsafe extern "C" fn lp_mutex_unlock(m: *mut c_void, _site: usize) -> c_int {
    let u = real!(mutex_unlock);
    unlock_with(m, u)
}
unsafe extern "C" fn lp_rw_rdlock(l: *mut c_void, site: usize) -> c_int {
    let t = real!(rw_tryrdlock);
    let f = real!(rw_rdlock);
    lock_via_try(l, site, KIND_RDLOCK, t, f)
}
unsafe extern "C" fn lp_rw_wrlock(l: *mut c_void, site: usize) -> c_int {
    let t = real!(rw_trywrlock);
    let f = real!(rw_wrlock);
    lock_via_try(l, site, KIND_WRLOCK, t, f)
}
unsafe extern "C" fn lp_rw_tryrdlock(l: *mut c_void, site: usize) -> c_int {
    let t = real!(rw_tryrdlock);
    try_only(l, site, KIND_RDLOCK, t)
}
unsafe extern "C" fn lp_rw_trywrlock(l: *mut c_void, site: usize) -> c_int {
    let t = real!(rw_trywrlock);
    try_only(l, site, KIND_WRLOCK, t)
}
unsafe extern "C" fn lp_rw_timedrdlock(l: *mut c_void, ts: *const c_void, site: usize) -> c_int {
    let t = real!(rw_tryrdlock);
    let f = real!(rw_timedrdlock);
    timed(l, ts, site, KIND_RDLOCK, t, f)
}
unsafe extern "C" fn lp_rw_timedwrlock(l: *mut c_void, ts: *const c_void, site: usize) -> c_int {
    let t = real!(rw_trywrlock);
    let f = real!(rw_timedwrlock);
    timed(l, ts, site, KIND_WRLOCK, t, f)
}
unsafe extern "C" fn lp_rw_unlock(l: *mut c_void, _site: usize) -> c_int {
    let u = real!(rw_unlock);
    unlock_with(l, u)
}
unsafe extern "C" fn lp_spin_lock(l: *mut c_void, site: usize) -> c_int {
    let t = real!(spin_trylock);
    let f = real!(spin_lock);
    lock_via_try(l, site, KIND_SPIN, t, f)
}
unsafe extern "C" fn lp_spin_trylock(l: *mut c_void, site: usize) -> c_int {
    let t = real!(spin_trylock);
    try_only(l, site, KIND_SPIN, t)
}
unsafe extern "C" fn lp_spin_unlock(l: *mut c_void, _site: usize) -> c_int {
    let u = real!(spin_unlock);
    unlock_with(l, u)
}

/// The mutex is released for the wait and re-held afterwards: its hold ends at entry and a new
/// hold (attributed to the original acquisition's entry) starts at return. The wait itself is
/// accounted as a `cond-wait` entry on the condition variable.
#[inline(always)]
unsafe fn cond_common(
    c: *mut c_void,
    m: *mut c_void,
    ts: *const c_void,
    site: usize,
    f: usize,
    timed: bool,
) -> c_int {
    let call = |c, m, ts| {
        if timed {
            call3(f, c, m, ts)
        } else {
            call2(f, c, m as *const c_void)
        }
    };
    let Some(s) = my_slot() else {
        return call(c, m, ts);
    };
    let t0 = rdtsc();
    let idx = release(s, m as usize, t0);
    let r = call(c, m, ts);
    let t1 = rdtsc();
    let wait = t1.wrapping_sub(t0);
    match s.entry(c as usize, site, KIND_COND) {
        Some(i) => {
            let e = &s.entries[i];
            bump(&e.acquisitions, 1);
            if r != 0 {
                bump(&e.contentions, 1);
            }
            bump(&e.wait_total, wait);
            raise_max(&e.wait_max, wait);
        }
        None => bump(&s.overflow_events, 1),
    }
    // SAFETY: owner-only state.
    let p = &mut *s.private.get();
    push_hold(s, p, m as usize, t1, idx.unwrap_or(usize::MAX));
    r
}
unsafe extern "C" fn lp_cond_wait(c: *mut c_void, m: *mut c_void, site: usize) -> c_int {
    let f = real!(cond_wait);
    cond_common(c, m, core::ptr::null(), site, f, false)
}
unsafe extern "C" fn lp_cond_timedwait(
    c: *mut c_void,
    m: *mut c_void,
    ts: *const c_void,
    site: usize,
) -> c_int {
    let f = real!(cond_timedwait);
    cond_common(c, m, ts, site, f, true)
}

// Exported entry points: each loads its return address ([rsp] at entry) into the first unused
// argument register and tail-jumps to the Rust implementation, which returns to the caller.
macro_rules! trampolines {
    ($($name:ident => $target:ident, $reg:literal;)*) => {
        $(
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!(
                    concat!("mov ", $reg, ", [rsp]"),
                    "jmp {t}",
                    t = sym $target,
                )
            }
        )*
    };
}

trampolines! {
    pthread_mutex_lock => lp_mutex_lock, "rsi";
    pthread_mutex_trylock => lp_mutex_trylock, "rsi";
    pthread_mutex_timedlock => lp_mutex_timedlock, "rdx";
    pthread_mutex_unlock => lp_mutex_unlock, "rsi";
    pthread_rwlock_rdlock => lp_rw_rdlock, "rsi";
    pthread_rwlock_wrlock => lp_rw_wrlock, "rsi";
    pthread_rwlock_tryrdlock => lp_rw_tryrdlock, "rsi";
    pthread_rwlock_trywrlock => lp_rw_trywrlock, "rsi";
    pthread_rwlock_timedrdlock => lp_rw_timedrdlock, "rdx";
    pthread_rwlock_timedwrlock => lp_rw_timedwrlock, "rdx";
    pthread_rwlock_unlock => lp_rw_unlock, "rsi";
    pthread_spin_lock => lp_spin_lock, "rsi";
    pthread_spin_trylock => lp_spin_trylock, "rsi";
    pthread_spin_unlock => lp_spin_unlock, "rsi";
    pthread_cond_wait => lp_cond_wait, "rdx";
    pthread_cond_timedwait => lp_cond_timedwait, "rcx";
}

// ---------------------------------------------------------------------------------------------
// Lifecycle: constructor, fork, exit, fatal signals.

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
    INIT_TSC.store(rdtsc(), Relaxed);
    INIT_MONO_NS.store(mono_ns(), Relaxed);
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
    report::FLUSHED.store(false, Relaxed);
}

extern "C" fn at_exit() {
    report::flush(None);
}

extern "C" fn on_fatal(sig: c_int) {
    report::flush(Some(sig));
    // SA_RESETHAND restored the default action: re-raise so the process dies as it would have.
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(sig) };
}

extern "C" fn init() {
    INIT_TSC.store(rdtsc(), Relaxed);
    INIT_MONO_NS.store(mono_ns(), Relaxed);
    resolve();
    report::init_path();
    // SAFETY: registering plain extern "C" handlers.
    unsafe {
        let mut key: libc::pthread_key_t = 0;
        if libc::pthread_key_create(&mut key, Some(thread_exit)) == 0 {
            EXIT_KEY.store(key, Relaxed);
        }
        libc::pthread_atfork(None, None, Some(atfork_child));
        libc::atexit(at_exit);
        for sig in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGABRT,
        ] {
            let mut old: libc::sigaction = core::mem::zeroed();
            if libc::sigaction(sig, core::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_DFL
            {
                let mut sa: libc::sigaction = core::mem::zeroed();
                sa.sa_sigaction = on_fatal as *const () as usize;
                sa.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, core::ptr::null_mut());
            }
        }
    }
}

// Run `init` when the library is loaded (before main), only in the preloaded cdylib: the rlib
// used by tests must not install handlers into the test harness.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
