//! The accounting tables: one slot per live thread (claimed once with a compare-and-swap and
//! written only by its owner, with relaxed loads and stores), and the `RETIRED` table that
//! exited threads are merged into under a small spin lock (off the fast path).

use core::cell::{Cell, UnsafeCell};
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::{ENTRIES_PER_THREAD, HIST_BUCKETS, HOLD_STACK, MAX_THREADS};

#[inline(always)]
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[inline(always)]
pub(crate) fn bump(a: &AtomicU64, by: u64) {
    // Only the owning thread writes its slot: load+store avoids a locked instruction.
    a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
}

#[inline(always)]
pub(crate) fn raise_max(a: &AtomicU64, v: u64) {
    if v > a.load(Relaxed) {
        a.store(v, Relaxed);
    }
}

/// Lower a minimum; `first` when no value was recorded yet (the field still holds 0).
#[inline(always)]
pub(crate) fn lower_min(a: &AtomicU64, v: u64, first: bool) {
    if first || v < a.load(Relaxed) {
        a.store(v, Relaxed);
    }
}

/// Log-linear histogram bucket of a tick count: 0 and 1 have their own buckets, then every
/// power of two is split in two halves (bucket `2k` is [2^k, 1.5*2^k), `2k+1` is
/// [1.5*2^k, 2^(k+1))), so a percentile read from it is within 25% of the true value; the last
/// bucket takes everything from 2^39 ticks up. An `lzcnt` and two shifts: no loop, no branch
/// beyond the small-value one.
#[inline(always)]
pub fn hist_bucket(ticks: u64) -> usize {
    if ticks < 2 {
        return ticks as usize;
    }
    let k = 63 - ticks.leading_zeros() as usize;
    let half = ((ticks >> (k - 1)) & 1) as usize;
    (2 * k + half).min(HIST_BUCKETS - 1)
}

/// A per-entry histogram (owner-written, plain load+store like every other counter).
pub type Hist = [AtomicU32; HIST_BUCKETS];

#[inline(always)]
pub(crate) fn hist_add(h: &Hist, ticks: u64) {
    let b = &h[hist_bucket(ticks)];
    b.store(b.load(Relaxed).wrapping_add(1), Relaxed);
}

/// Record a sample one event late: bucket the *previous* sample (kept in `pending` as value+1,
/// 0 when none) and keep this one. Why: a bucket's address depends on the TSC just read, and the
/// real lock or unlock that follows is a locked instruction that waits for every earlier store;
/// bucketing the fresh sample there measured 8 ns per histogram on this machine, the deferred
/// form costs what a plain counter does. The flush and the thread-exit merge add the last
/// pending sample.
#[inline(always)]
pub(crate) fn hist_defer(h: &Hist, pending: &AtomicU64, ticks: u64) {
    let prev = pending.load(Relaxed);
    if prev != 0 {
        hist_add(h, prev - 1);
    }
    pending.store(ticks.saturating_add(1), Relaxed);
}

/// Statistics of one (lock, call site, kind) in one thread.
pub struct Entry {
    /// Lock address (0: free entry).
    pub lock: AtomicUsize,
    /// Call site (return address).
    pub site: AtomicUsize,
    /// `KIND_*`.
    pub kind: AtomicU64,
    /// Successful acquisitions.
    pub acquisitions: AtomicU64,
    /// Acquisitions whose trylock failed first (or waits that timed out).
    pub contentions: AtomicU64,
    /// TSC ticks spent acquiring.
    pub wait_total: AtomicU64,
    /// Longest acquisition, ticks.
    pub wait_max: AtomicU64,
    /// Holds ended by an unlock.
    pub hold_count: AtomicU64,
    /// TSC ticks held.
    pub hold_total: AtomicU64,
    /// Longest hold, ticks.
    pub hold_max: AtomicU64,
    /// Shortest acquisition, ticks (valid when `acquisitions > 0`).
    pub wait_min: AtomicU64,
    /// Shortest hold, ticks (valid when `hold_count > 0`).
    pub hold_min: AtomicU64,
    /// Acquisitions that took the lock from another thread than its previous owner.
    pub owner_changes: AtomicU64,
    /// Index + 1 of the lock in the process-wide `LOCKS` table (0: not linked).
    pub gidx: AtomicUsize,
    /// Wait times, bucketed by [`hist_bucket`].
    pub wait_hist: Hist,
    /// Hold times, bucketed by [`hist_bucket`].
    pub hold_hist: Hist,
    /// The latest wait, not yet bucketed (+1; 0: none), see [`hist_defer`].
    pub wait_pending: AtomicU64,
    /// The latest hold, not yet bucketed (+1; 0: none).
    pub hold_pending: AtomicU64,
    /// Sum over holds of each opt-in event's delta while held (see `events.rs`).
    pub ev_delta: [AtomicU64; crate::events::MAX_EVENTS],
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
            wait_min: AtomicU64::new(0),
            hold_min: AtomicU64::new(0),
            owner_changes: AtomicU64::new(0),
            gidx: AtomicUsize::new(0),
            wait_hist: [const { AtomicU32::new(0) }; HIST_BUCKETS],
            hold_hist: [const { AtomicU32::new(0) }; HIST_BUCKETS],
            wait_pending: AtomicU64::new(0),
            hold_pending: AtomicU64::new(0),
            ev_delta: [const { AtomicU64::new(0) }; crate::events::MAX_EVENTS],
        }
    }
    pub(crate) fn clear(&self) {
        // Unused entries are all zero: skipping them keeps a thread's exit from touching (and
        // committing) the pages of its whole table.
        if self.lock.load(Relaxed) == 0 {
            return;
        }
        for h in [&self.wait_hist, &self.hold_hist] {
            for b in h.iter() {
                b.store(0, Relaxed);
            }
        }
        self.gidx.store(0, Relaxed);
        for a in self.ev_delta.iter() {
            a.store(0, Relaxed);
        }
        for a in [
            &self.wait_pending,
            &self.hold_pending,
            &self.wait_min,
            &self.hold_min,
            &self.owner_changes,
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
pub(crate) struct Hold {
    pub(crate) lock: usize,
    pub(crate) since: u64,
    pub(crate) entry: usize,
}

/// Owner-only state (never read by the flushing thread).
pub(crate) struct Private {
    pub(crate) depth: usize,
    pub(crate) held_since: u64,
    pub(crate) stack: [Hold; HOLD_STACK],
    /// Event counts at each hold's acquisition (only with `--events`; apart from `stack` so
    /// the default path moves 24-byte holds).
    pub(crate) ev: [[u64; crate::events::MAX_EVENTS]; HOLD_STACK],
}

/// One thread's accounting.
pub struct Slot {
    /// Claimed by a live thread.
    pub in_use: AtomicBool,
    /// Kernel thread id.
    pub tid: AtomicU64,
    /// TSC when the thread claimed the slot.
    pub start_tsc: AtomicU64,
    /// Ticks spent inside lock calls (waiting + the call itself).
    pub locking: AtomicU64,
    /// Ticks spent inside unlock calls.
    pub unlocking: AtomicU64,
    /// Ticks with at least one lock held (includes nested lock/unlock calls).
    pub held: AtomicU64,
    /// Lock/unlock call ticks that fell inside a held interval (subtracted from `held`).
    pub nested_calls: AtomicU64,
    /// Lock calls that acquired.
    pub lock_calls: AtomicU64,
    /// Events that found no free entry.
    pub overflow_events: AtomicU64,
    /// Unlocks of a lock this thread was not seen to take.
    pub unmatched_unlocks: AtomicU64,
    /// The entry table.
    pub entries: [Entry; ENTRIES_PER_THREAD],
    pub(crate) private: UnsafeCell<Private>,
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
                ev: [[0; crate::events::MAX_EVENTS]; HOLD_STACK],
            }),
        }
    }

    pub(crate) fn reset_counters(&self) {
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
    pub(crate) fn entry(&self, lock: usize, site: usize, kind: u64) -> Option<usize> {
        find_entry(&self.entries, lock, site, kind)
    }
}

/// Open-addressing lookup/insert in an entry table (only its owner inserts).
#[inline(always)]
pub(crate) fn find_entry(entries: &[Entry], lock: usize, site: usize, kind: u64) -> Option<usize> {
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
    /// Kernel thread id.
    pub tid: AtomicU64,
    /// Ticks the thread lived.
    pub total: AtomicU64,
    /// Ticks inside lock calls.
    pub locking: AtomicU64,
    /// Ticks inside unlock calls.
    pub unlocking: AtomicU64,
    /// Ticks with a lock held.
    pub held: AtomicU64,
    /// Lock calls that acquired.
    pub lock_calls: AtomicU64,
    /// Events that found no free entry.
    pub overflow_events: AtomicU64,
    /// Unlocks of a lock this thread was not seen to take.
    pub unmatched_unlocks: AtomicU64,
}

/// Accounting of exited threads, merged at thread exit under `busy` (not on the fast path).
pub struct Retired {
    /// The merge lock.
    pub busy: AtomicBool,
    /// The entry table.
    pub entries: [Entry; RETIRED_ENTRIES],
    /// Exited threads, in exit order.
    pub threads: [ThreadSummary; RETIRED_THREADS],
    /// Used entries of `threads`.
    pub nthreads: AtomicUsize,
    /// Exited threads beyond `threads`.
    pub threads_unlisted: AtomicU64,
    /// Events that found no free entry.
    pub overflow_events: AtomicU64,
}

/// Exited threads, merged.
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
pub(crate) extern "C" fn thread_exit(arg: *mut c_void) {
    let s = arg as *const Slot;
    if s.is_null() {
        return;
    }
    // SAFETY: the value set in claim_slot, a pointer into SLOTS.
    let s = unsafe { &*s };
    MY_SLOT.with(|c| c.set(core::ptr::null()));
    let now = rdtsc();
    retired_lock(false);
    if !crate::report::FLUSHED.load(Relaxed) {
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
                    let acq = e.acquisitions.load(Relaxed);
                    let holds = e.hold_count.load(Relaxed);
                    if acq > 0 {
                        lower_min(
                            &r.wait_min,
                            e.wait_min.load(Relaxed),
                            r.acquisitions.load(Relaxed) == 0,
                        );
                    }
                    if holds > 0 {
                        lower_min(
                            &r.hold_min,
                            e.hold_min.load(Relaxed),
                            r.hold_count.load(Relaxed) == 0,
                        );
                    }
                    bump(&r.owner_changes, e.owner_changes.load(Relaxed));
                    for (d, s) in r.ev_delta.iter().zip(e.ev_delta.iter()) {
                        bump(d, s.load(Relaxed));
                    }
                    for (d, s) in r.wait_hist.iter().zip(e.wait_hist.iter()) {
                        d.store(d.load(Relaxed).wrapping_add(s.load(Relaxed)), Relaxed);
                    }
                    for (d, s) in r.hold_hist.iter().zip(e.hold_hist.iter()) {
                        d.store(d.load(Relaxed).wrapping_add(s.load(Relaxed)), Relaxed);
                    }
                    // The exited thread's last samples (retired entries bucket at once).
                    for (h, p) in [
                        (&r.wait_hist, &e.wait_pending),
                        (&r.hold_hist, &e.hold_pending),
                    ] {
                        let v = p.load(Relaxed);
                        if v != 0 {
                            hist_add(h, v - 1);
                        }
                    }
                    bump(&r.acquisitions, acq);
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
pub(crate) static EXIT_KEY: core::sync::atomic::AtomicU32 =
    core::sync::atomic::AtomicU32::new(u32::MAX);

/// One slot per live thread.
pub static SLOTS: [Slot; MAX_THREADS] = [const { Slot::new() }; MAX_THREADS];
/// Threads that found no free slot.
pub static THREADS_UNTRACKED: AtomicU64 = AtomicU64::new(0);
/// TSC and CLOCK_MONOTONIC at load time, for calibration at flush.
pub static INIT_TSC: AtomicU64 = AtomicU64::new(0);
/// CLOCK_MONOTONIC at load time.
pub static INIT_MONO_NS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    pub(crate) static MY_SLOT: Cell<*const Slot> = const { Cell::new(core::ptr::null()) };
    static NO_SLOT: Cell<bool> = const { Cell::new(false) };
}

#[inline(always)]
pub(crate) fn my_slot() -> Option<&'static Slot> {
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

/// Whether anything was recorded at all (a process that took no lock writes no report before
/// `exec`).
pub(crate) fn has_activity() -> bool {
    SLOTS
        .iter()
        .any(|s| s.in_use.load(Relaxed) && s.lock_calls.load(Relaxed) > 0)
        || RETIRED.nthreads.load(Relaxed) > 0
        || RETIRED.overflow_events.load(Relaxed) > 0
}

#[cfg(test)]
mod tests {
    use super::hist_bucket;
    use counterpoint_lockprof_report::{bucket_ticks, HIST_BUCKETS};

    /// The library's histogram buckets are the report crate's `bucket_ticks` ranges. (A unit
    /// test on purpose: an integration test linking this crate would run its constructor and
    /// interpose the test harness's own locks.)
    #[test]
    fn histogram_buckets_agree_with_the_reader() {
        assert_eq!(HIST_BUCKETS, crate::HIST_BUCKETS);
        for i in 0..HIST_BUCKETS - 1 {
            let (lo, hi) = bucket_ticks(i);
            assert_eq!(hist_bucket(lo), i, "low edge of {i}");
            assert_eq!(hist_bucket(hi - 1), i, "high edge of {i}");
        }
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    }
}
