//! The read protocol against a synthetic control page rewritten by a writer thread: readers
//! must never see a torn value (offset from one update, counter from another) nor a value
//! that goes backwards, including when the counter wraps at `pmc_width` and the event is
//! multiplexed out (`index` 0) now and then.

use counterpoint_selfmon::page::{
    read_page, sign_extend, write_page, FakeCpu, PageRead, PerfEventMmapPage, CAP_USER_RDPMC,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Every published count is a multiple of STEP; a torn read lands off the grid.
const STEP: i64 = 1_000_003;

struct Shared {
    page: *mut PerfEventMmapPage,
    cpu: FakeCpu,
}
// SAFETY: the page is only touched through atomics (write_page / read_page).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

fn run(width: u16, readers: usize, reads_per_reader: u64) -> (u64, u64) {
    let page = Box::into_raw(Box::<PerfEventMmapPage>::default());
    let shared = Arc::new(Shared {
        page,
        cpu: FakeCpu::default(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicU64::new(0));
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };

    let writer = {
        let (shared, stop, updates) =
            (Arc::clone(&shared), Arc::clone(&stop), Arc::clone(&updates));
        std::thread::spawn(move || {
            // xorshift: the raw counter jumps all over its width, top bit included, so both
            // positive and negative sign extensions (wraps) occur.
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut k: i64 = 1;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let raw = x & mask;
                k += 1 + (x % 3) as i64;
                let offset = k * STEP - sign_extend(raw, width);
                let index = match x % 8 {
                    0 => 0, // multiplexed out
                    1..=4 => 1,
                    _ => 2,
                };
                // SAFETY: the page is live until after the threads are joined.
                unsafe {
                    write_page(shared.page, |w| {
                        w.index(index);
                        w.offset(offset);
                        w.pmc_width(width);
                        w.capabilities(CAP_USER_RDPMC);
                        shared.cpu.counter.store(raw, Ordering::Relaxed);
                    });
                }
                updates.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let handles: Vec<_> = (0..readers)
        .map(|_| {
            let (shared, updates) = (Arc::clone(&shared), Arc::clone(&updates));
            std::thread::spawn(move || {
                let (mut last, mut counted, mut syscalls) = (i64::MIN, 0u64, 0u64);
                // Start once the writer runs, and overlap it for a good number of updates
                // whatever the scheduler does with the three threads.
                while updates.load(Ordering::Relaxed) == 0 {
                    std::thread::yield_now();
                }
                let start = updates.load(Ordering::Relaxed);
                let mut i = 0u64;
                while i < reads_per_reader || updates.load(Ordering::Relaxed) < start + 20_000 {
                    i += 1;
                    // SAFETY: the page is live until after the threads are joined.
                    match unsafe { read_page(shared.page, &shared.cpu) } {
                        PageRead::Counted(r) => {
                            let v = r.value as i64;
                            assert_eq!(v % STEP, 0, "torn read: {v} is off the grid");
                            assert!(v >= last, "went backwards: {v} after {last}");
                            last = v;
                            counted += 1;
                        }
                        PageRead::Syscall => syscalls += 1,
                    }
                }
                (counted, syscalls)
            })
        })
        .collect();
    let mut totals = (0, 0);
    for h in handles {
        let (c, s) = h.join().expect("reader thread");
        totals.0 += c;
        totals.1 += s;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer thread");
    assert!(updates.load(Ordering::Relaxed) > 0);
    // SAFETY: all threads are joined; the page came from Box::into_raw.
    drop(unsafe { Box::from_raw(page) });
    totals
}

#[test]
fn no_torn_or_backward_reads_at_48_bits() {
    // (How often index 0 is observed depends on scheduling; its handling is unit-tested.)
    let (counted, _syscalls) = run(48, 2, 200_000);
    assert!(counted > 0, "no user-space read succeeded");
}

#[test]
fn no_torn_or_backward_reads_at_32_bits() {
    let (counted, _) = run(32, 2, 200_000);
    assert!(counted > 0);
}

#[test]
fn no_torn_or_backward_reads_at_64_bits() {
    let (counted, _) = run(64, 1, 100_000);
    assert!(counted > 0);
}

proptest::proptest! {
    #[test]
    fn sign_extension_is_consistent_with_the_width(raw in proptest::num::u64::ANY, width in 1u16..=64) {
        let v = sign_extend(raw, width);
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        // Same low bits, and the value fits in `width` signed bits.
        proptest::prop_assert_eq!((v as u64) & mask, raw & mask);
        if width < 64 {
            proptest::prop_assert!(v >= -(1i64 << (width - 1)) && v < (1i64 << (width - 1)));
        }
    }
}
