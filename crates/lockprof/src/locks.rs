//! The process-wide table of locks (keyed by address only, whatever the call site or kind):
//! the thread that last acquired each lock, to count *owner changes* (mutrace's "changed"), and
//! the stack where the lock was first seen, captured once per lock.
//!
//! A thread's entry for (lock, site, kind) caches the lock's index here (`Entry::gidx`), so the
//! fast path costs one load of the previous owner and, only when the owner changes, one store.
//! The store is done while the lock is held, so for a mutex or a write lock it is serialized by
//! the lock itself; concurrent readers of an rwlock race on it harmlessly (the count is then
//! approximate, as it is in mutrace).
//!
//! **Stacks.** The first time any thread takes a lock, `_Unwind_Backtrace` (libgcc's unwinder,
//! driven by `.eh_frame`, which Debian binaries keep even when stripped and built without frame
//! pointers) records up to [`MAX_FRAMES`] return addresses. Frame-pointer walking was rejected:
//! distribution binaries omit frame pointers, and a walk over code without them reads garbage.
//! The unwinder may take libgcc's own mutex (interposed, so a thread-local guard stops the
//! recursion) and the loader's lock; it runs once per lock, never on the steady-state path.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Locks tracked for owner changes and first-seen stacks; later ones are counted only.
pub const MAX_LOCKS: usize = 16384;
/// Return addresses kept per first-seen stack.
pub const MAX_FRAMES: usize = 12;

/// One lock.
pub struct LockInfo {
    /// Address (0: free).
    pub lock: AtomicUsize,
    /// Thread id of the last acquirer.
    pub owner: AtomicU64,
    /// Thread that first took it.
    pub first_tid: AtomicU64,
    /// Frames recorded in `frames`.
    pub nframes: AtomicUsize,
    /// 1 when `frames` is where it was initialised (`pthread_*_init`), 0 when where it was
    /// first taken (statically initialised locks have no init call).
    pub created: AtomicU64,
    /// The stack where it was first seen (innermost first, the interposer excluded).
    pub frames: [AtomicUsize; MAX_FRAMES],
}

/// All locks seen.
pub static LOCKS: [LockInfo; MAX_LOCKS] = [const {
    LockInfo {
        lock: AtomicUsize::new(0),
        owner: AtomicU64::new(0),
        first_tid: AtomicU64::new(0),
        nframes: AtomicUsize::new(0),
        created: AtomicU64::new(0),
        frames: [const { AtomicUsize::new(0) }; MAX_FRAMES],
    }
}; MAX_LOCKS];

/// Locks that found the table full.
pub static LOCKS_UNTRACKED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
}

/// Index + 1 of `lock` in [`LOCKS`], inserting it (and capturing its stack) the first time; 0
/// when the table is full. Cold: called once per (thread, lock, site, kind) entry.
#[cold]
pub(crate) fn link(lock: usize, tid: u64) -> usize {
    let mask = MAX_LOCKS - 1;
    let mut i = ((lock as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask;
    for _ in 0..MAX_LOCKS {
        let l = &LOCKS[i];
        let cur = l.lock.load(core::sync::atomic::Ordering::Acquire);
        if cur == lock {
            return i + 1;
        }
        if cur == 0 {
            match l.lock.compare_exchange(
                0,
                lock,
                core::sync::atomic::Ordering::AcqRel,
                core::sync::atomic::Ordering::Acquire,
            ) {
                Ok(_) => {
                    l.first_tid.store(tid, Relaxed);
                    capture(l);
                    return i + 1;
                }
                Err(other) if other == lock => return i + 1,
                Err(_) => {}
            }
        }
        i = (i + 1) & mask;
    }
    LOCKS_UNTRACKED.fetch_add(1, Relaxed);
    0
}

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

extern "C" {
    fn _Unwind_Backtrace(
        trace: unsafe extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
}

struct Walk {
    frames: [usize; MAX_FRAMES],
    n: usize,
    seen: usize,
}

unsafe extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
    const URC_NO_REASON: c_int = 0;
    const URC_END_OF_STACK: c_int = 5;
    let w = &mut *(arg as *mut Walk);
    let ip = _Unwind_GetIP(ctx);
    if ip == 0 {
        return URC_END_OF_STACK;
    }
    w.seen += 1;
    if w.seen > 64 {
        return URC_END_OF_STACK;
    }
    // Skip the profiler's own frames (how many depends on inlining): the interposer's caller
    // is the first frame outside this library.
    if w.n == 0 && crate::objects::in_self(ip) {
        return URC_NO_REASON;
    }
    w.frames[w.n] = ip;
    w.n += 1;
    if w.n == MAX_FRAMES {
        URC_END_OF_STACK
    } else {
        URC_NO_REASON
    }
}

fn capture(l: &LockInfo) {
    // The unwinder may lock libgcc's object mutex through our interposer: that lock is new,
    // would land here again, and is left without a stack.
    if CAPTURING.with(|c| c.replace(true)) {
        return;
    }
    let mut w = Walk {
        frames: [0; MAX_FRAMES],
        n: 0,
        seen: 0,
    };
    // SAFETY: the callback only writes `w`, which outlives the call.
    unsafe { _Unwind_Backtrace(step, &mut w as *mut Walk as *mut c_void) };
    for (d, s) in l.frames.iter().zip(w.frames.iter()).take(w.n) {
        d.store(*s, Relaxed);
    }
    l.nframes.store(w.n, Relaxed);
    CAPTURING.with(|c| c.set(false));
}

/// A lock initialised by `pthread_*_init` at `lock`: (re)start its record with the creating
/// stack (the address may be a destroyed lock's, reused). Not on any lock path.
#[cold]
pub(crate) fn created(lock: usize) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
    let g = link(lock, tid);
    let Some(l) = LOCKS.get(g.wrapping_sub(1)) else {
        return;
    };
    l.owner.store(0, Relaxed);
    l.first_tid.store(tid, Relaxed);
    l.created.store(1, Relaxed);
    capture(l);
}

/// Record that thread `tid` acquired the lock at `gidx` (index + 1); true when the previous
/// owner was another thread (the very first acquisition is not a change).
#[inline(always)]
pub(crate) fn owner_changed(gidx: usize, tid: u64) -> bool {
    let Some(l) = LOCKS.get(gidx.wrapping_sub(1)) else {
        return false;
    };
    let prev = l.owner.load(Relaxed);
    if prev == tid {
        return false;
    }
    l.owner.store(tid, Relaxed);
    prev != 0
}

/// After fork: the locks still exist in the child, but only its one thread can own them now.
pub(crate) fn forget_owners() {
    for l in LOCKS.iter() {
        if l.lock.load(Relaxed) != 0 {
            l.owner.store(0, Relaxed);
        }
    }
}
