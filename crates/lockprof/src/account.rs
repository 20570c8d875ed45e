//! What happens around each lock call: the TSC before and after, the acquisition recorded in
//! the thread's entry for (lock, call site, kind), the hold pushed on the thread's hold stack
//! and ended by the unlock, and LiMiT's locking / held / unlocking split.

use core::ffi::{c_int, c_void};

use crate::table::{bump, hist_defer, lower_min, my_slot, raise_max, rdtsc, Hold, Private, Slot};
use crate::{HOLD_STACK, KIND_COND};

#[inline(always)]
pub(crate) fn acquired(
    s: &Slot,
    lock: usize,
    site: usize,
    kind: u64,
    t0: u64,
    t1: u64,
    contended: bool,
) {
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
            let first = e.acquisitions.load(core::sync::atomic::Ordering::Relaxed) == 0;
            bump(&e.acquisitions, 1);
            if contended {
                bump(&e.contentions, 1);
            }
            bump(&e.wait_total, wait);
            raise_max(&e.wait_max, wait);
            lower_min(&e.wait_min, wait, first);
            hist_defer(&e.wait_hist, &e.wait_pending, wait);
            let mut g = e.gidx.load(core::sync::atomic::Ordering::Relaxed);
            let tid = s.tid.load(core::sync::atomic::Ordering::Relaxed);
            if g == 0 {
                g = crate::locks::link(lock, tid);
                // A full table: never look again (usize::MAX is out of range below).
                let g_or_none = if g == 0 { usize::MAX } else { g };
                e.gidx
                    .store(g_or_none, core::sync::atomic::Ordering::Relaxed);
                g = g_or_none;
            }
            if crate::locks::owner_changed(g, tid) {
                bump(&e.owner_changes, 1);
            }
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
pub(crate) fn push_hold(s: &Slot, p: &mut Private, lock: usize, t: u64, idx: usize) {
    if p.depth < HOLD_STACK {
        let d = p.depth;
        p.stack[d] = Hold {
            lock,
            since: t,
            entry: idx,
        };
        if d == 0 {
            p.held_since = t;
        }
        if crate::events::COUNT.load(core::sync::atomic::Ordering::Relaxed) > 0 {
            // Read the events, then restart the hold's clock: the read is not the program's.
            // The thread's held time restarts with it (it counted the read until session 21,
            // so with `--events` a thread's `held` was many times its holds' total).
            crate::events::read_all(&mut p.ev[d]);
            p.stack[d].since = rdtsc();
            if d == 0 {
                p.held_since = p.stack[d].since;
            }
            // The read belongs to the lock call, as the release's read belongs to the unlock
            // call (`unlocking`): until session 30 it fell in no part of the split and showed
            // as `free` (1.4 us per acquisition with two events: a thread's free time +68 %;
            // measurement probe).
            bump(&s.locking, p.stack[d].since.wrapping_sub(t));
        }
        p.depth = d + 1;
    } else {
        bump(&s.overflow_events, 1);
    }
}

/// End the hold of `lock` at `t`; returns the entry index of its acquisition.
#[inline(always)]
pub(crate) fn release(s: &Slot, lock: usize, t: u64) -> Option<usize> {
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
                let first = e.hold_count.load(core::sync::atomic::Ordering::Relaxed) == 0;
                bump(&e.hold_count, 1);
                bump(&e.hold_total, hold);
                raise_max(&e.hold_max, hold);
                lower_min(&e.hold_min, hold, first);
                hist_defer(&e.hold_hist, &e.hold_pending, hold);
                if crate::events::COUNT.load(core::sync::atomic::Ordering::Relaxed) > 0 {
                    let mut now = [0u64; crate::events::MAX_EVENTS];
                    crate::events::read_all(&mut now);
                    for ((d, n), b) in e.ev_delta.iter().zip(now.iter()).zip(p.ev[i].iter()) {
                        bump(d, n.saturating_sub(*b));
                    }
                }
            }
            // Usually the innermost hold ends: nothing to move then.
            if i + 1 < p.depth {
                p.stack.copy_within(i + 1..p.depth, i);
                p.ev.copy_within(i + 1..p.depth, i);
            }
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
pub(crate) fn unlocked(s: &Slot, t2: u64, t3: u64) {
    let d = t3.wrapping_sub(t2);
    bump(&s.unlocking, d);
    // SAFETY: owner-only state.
    if unsafe { (*s.private.get()).depth } > 0 {
        bump(&s.nested_calls, d);
    }
}

/// The real function's address as a callable of the given type.
///
/// # Safety
/// `p` is the non-zero address of a function of type `F`.
#[inline(always)]
pub(crate) unsafe fn as_fn<F: Copy>(p: usize) -> F {
    debug_assert_eq!(core::mem::size_of::<F>(), core::mem::size_of::<usize>());
    core::mem::transmute_copy::<usize, F>(&p)
}

pub(crate) type TryFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// A lock call: trylock first, so that contention is observed without kernel help, then the
/// blocking call (plain, timed or clock variant) if the lock was busy.
#[inline(always)]
pub(crate) unsafe fn lock_via_try(
    lock: *mut c_void,
    site: usize,
    kind: u64,
    try_fn: usize,
    blocking: impl FnOnce() -> c_int,
) -> c_int {
    let Some(s) = my_slot() else {
        return blocking();
    };
    let t0 = rdtsc();
    let mut r = as_fn::<TryFn>(try_fn)(lock);
    let mut contended = false;
    if r == libc::EBUSY {
        contended = true;
        r = blocking();
    }
    let t1 = rdtsc();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(s, lock as usize, site, kind, t0, t1, contended);
    } else {
        bump(&s.locking, t1.wrapping_sub(t0));
    }
    r
}

/// A trylock call: an acquisition if it succeeded, never contended.
#[inline(always)]
pub(crate) unsafe fn try_only(lock: *mut c_void, site: usize, kind: u64, try_fn: usize) -> c_int {
    let Some(s) = my_slot() else {
        return as_fn::<TryFn>(try_fn)(lock);
    };
    let t0 = rdtsc();
    let r = as_fn::<TryFn>(try_fn)(lock);
    let t1 = rdtsc();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(s, lock as usize, site, kind, t0, t1, false);
    } else {
        bump(&s.locking, t1.wrapping_sub(t0));
    }
    r
}

/// An unlock call: the hold ends just before the real unlock.
#[inline(always)]
pub(crate) unsafe fn unlock_with(lock: *mut c_void, unlock: impl FnOnce() -> c_int) -> c_int {
    let Some(s) = my_slot() else {
        return unlock();
    };
    let t2 = rdtsc();
    release(s, lock as usize, t2);
    let r = unlock();
    let t3 = rdtsc();
    unlocked(s, t2, t3);
    r
}

/// A condition-variable wait (plain, timed or clock variant). The mutex is released for the
/// wait and re-held afterwards: its hold ends at entry and a new hold (attributed to the
/// original acquisition's entry) starts at return. The wait itself is accounted as a
/// `cond-wait` entry on the condition variable; a timeout counts as a contention of it.
#[inline(always)]
pub(crate) unsafe fn cond_wait(
    c: *mut c_void,
    m: *mut c_void,
    site: usize,
    wait_fn: impl FnOnce() -> c_int,
) -> c_int {
    let Some(s) = my_slot() else {
        return wait_fn();
    };
    let t0 = rdtsc();
    let idx = release(s, m as usize, t0);
    let r = wait_fn();
    let t1 = rdtsc();
    let wait = t1.wrapping_sub(t0);
    match s.entry(c as usize, site, KIND_COND) {
        Some(i) => {
            let e = &s.entries[i];
            let first = e.acquisitions.load(core::sync::atomic::Ordering::Relaxed) == 0;
            bump(&e.acquisitions, 1);
            if r != 0 {
                bump(&e.contentions, 1);
            }
            bump(&e.wait_total, wait);
            raise_max(&e.wait_max, wait);
            lower_min(&e.wait_min, wait, first);
            hist_defer(&e.wait_hist, &e.wait_pending, wait);
        }
        None => bump(&s.overflow_events, 1),
    }
    // SAFETY: owner-only state.
    let p = &mut *s.private.get();
    push_hold(s, p, m as usize, t1, idx.unwrap_or(usize::MAX));
    r
}

/// A `pthread_cond_signal` or `pthread_cond_broadcast`: counted per (condition variable, call
/// site) in its own kind, so the report can put signals and broadcasts beside the waits.
#[inline(always)]
pub(crate) unsafe fn cond_notify(
    c: *mut c_void,
    site: usize,
    kind: u64,
    notify: impl FnOnce() -> c_int,
) -> c_int {
    let r = notify();
    if let Some(s) = my_slot() {
        match s.entry(c as usize, site, kind) {
            Some(i) => bump(&s.entries[i].acquisitions, 1),
            None => bump(&s.overflow_events, 1),
        }
    }
    r
}
