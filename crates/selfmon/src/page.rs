//! The perf_event control page (`struct perf_event_mmap_page`) and the kernel's seqlock read
//! protocol (include/uapi/linux/perf_event.h): read `index`, `offset` and the time fields inside
//! a `lock` sequence, take the hardware count with `rdpmc(index - 1)` sign-extended from
//! `pmc_width` bits, and retry if the kernel rewrote the page meanwhile.
//!
//! Every field is loaded atomically (relaxed) between an acquire load of `lock` and an acquire
//! fence before `lock` is checked again: the reader/writer pattern a seqlock needs under Rust's
//! memory model (plain or volatile loads racing with a writer would be a data race). The
//! instruction-level access (`rdpmc`, `rdtsc`) sits behind [`Cpu`] so that tests can drive a
//! synthetic page from a writer thread with a fake counter.

use std::sync::atomic::{fence, AtomicI64, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// `capabilities` bit: `rdpmc` may be used from user space for this event.
pub const CAP_USER_RDPMC: u64 = 1 << 2;
/// `capabilities` bit: `time_mult/shift/offset` convert TSC cycles to the event's time base.
pub const CAP_USER_TIME: u64 = 1 << 3;
/// `capabilities` bit: `time_zero` is valid.
pub const CAP_USER_TIME_ZERO: u64 = 1 << 4;
/// `capabilities` bit: the TSC is narrower than 64 bits; `time_cycles`/`time_mask` extend it.
pub const CAP_USER_TIME_SHORT: u64 = 1 << 5;

/// The leading part of `struct perf_event_mmap_page` that the read protocol uses; the kernel
/// maps a whole page, so reading this prefix of it is in bounds.
#[repr(C)]
#[derive(Debug, Default)]
pub struct PerfEventMmapPage {
    /// Layout version.
    pub version: u32,
    /// Oldest compatible layout.
    pub compat_version: u32,
    /// Seqlock sequence (odd while the kernel writes).
    pub lock: u32,
    /// Hardware counter + 1, or 0 when not on one.
    pub index: u32,
    /// Add to the counter value.
    pub offset: i64,
    /// Time enabled at the last update.
    pub time_enabled: u64,
    /// Time running at the last update.
    pub time_running: u64,
    /// `CAP_USER_*` bits.
    pub capabilities: u64,
    /// Counter width in bits.
    pub pmc_width: u16,
    /// TSC to ns: shift.
    pub time_shift: u16,
    /// TSC to ns: multiplier.
    pub time_mult: u32,
    /// TSC to ns: offset.
    pub time_offset: u64,
    /// TSC value of time 0.
    pub time_zero: u64,
    /// Header size.
    pub size: u32,
    /// Padding.
    pub reserved_1: u32,
    /// With `cap_user_time_short`: the base cycle count.
    pub time_cycles: u64,
    /// With `cap_user_time_short`: the counter mask.
    pub time_mask: u64,
}

// The kernel ABI: these offsets are fixed by include/uapi/linux/perf_event.h.
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(PerfEventMmapPage, lock) == 8);
    assert!(offset_of!(PerfEventMmapPage, index) == 12);
    assert!(offset_of!(PerfEventMmapPage, offset) == 16);
    assert!(offset_of!(PerfEventMmapPage, time_enabled) == 24);
    assert!(offset_of!(PerfEventMmapPage, time_running) == 32);
    assert!(offset_of!(PerfEventMmapPage, capabilities) == 40);
    assert!(offset_of!(PerfEventMmapPage, pmc_width) == 48);
    assert!(offset_of!(PerfEventMmapPage, time_shift) == 50);
    assert!(offset_of!(PerfEventMmapPage, time_mult) == 52);
    assert!(offset_of!(PerfEventMmapPage, time_offset) == 56);
    assert!(offset_of!(PerfEventMmapPage, time_zero) == 64);
    assert!(offset_of!(PerfEventMmapPage, size) == 72);
    assert!(offset_of!(PerfEventMmapPage, time_cycles) == 80);
    assert!(offset_of!(PerfEventMmapPage, time_mask) == 88);
};

/// The instructions the read protocol needs, so tests can substitute a fake counter.
pub trait Cpu {
    /// Whether this CPU has the user-space counter read [`Cpu::rdpmc`] implements. Where it
    /// does not, the page's `cap_user_rdpmc` (which RISC-V sets by default and arm64 on request)
    /// must not be trusted: the read takes the syscall path.
    fn has_rdpmc(&self) -> bool;
    /// `rdpmc` of hardware counter `counter` (the page's `index - 1`, passed in ECX).
    fn rdpmc(&self, counter: u32) -> u64;
    /// Whether [`Cpu::rdtsc`] reads the clock the page's time fields convert.
    fn has_tsc(&self) -> bool;
    /// `rdtsc`.
    fn rdtsc(&self) -> u64;
}

/// The real instructions. `rdpmc` faults unless the kernel set `cap_user_rdpmc` for the event,
/// and [`read_page`] only executes it in that case. Only x86-64 is implemented; elsewhere
/// [`Cpu::has_rdpmc`] and [`Cpu::has_tsc`] are false and every read is a `read(2)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct HardwareCpu;

impl Cpu for HardwareCpu {
    fn has_rdpmc(&self) -> bool {
        cfg!(target_arch = "x86_64")
    }
    #[cfg(target_arch = "x86_64")]
    fn rdpmc(&self, counter: u32) -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: only reached when the kernel advertised cap_user_rdpmc for this counter.
        // Not `nomem`: the asm must stay between the two loads of `lock` (an asm block that may
        // touch memory is not moved across the atomic loads around it).
        unsafe {
            std::arch::asm!("rdpmc", in("ecx") counter, out("eax") lo, out("edx") hi,
                options(nostack, preserves_flags));
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn rdpmc(&self, _counter: u32) -> u64 {
        // Never called: has_rdpmc() is false here.
        0
    }
    fn has_tsc(&self) -> bool {
        cfg!(target_arch = "x86_64")
    }
    #[cfg(target_arch = "x86_64")]
    fn rdtsc(&self) -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: rdtsc has no preconditions on x86_64; not `nomem`, as for rdpmc.
        unsafe {
            std::arch::asm!("rdtsc", out("eax") lo, out("edx") hi,
                options(nostack, preserves_flags));
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn rdtsc(&self) -> u64 {
        // Never called: has_tsc() is false here.
        0
    }
}

/// A count with the times the kernel reports beside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reading {
    /// The count.
    pub value: u64,
    /// Time the event was enabled.
    pub time_enabled_ns: u64,
    /// Time it was counting (less when multiplexed).
    pub time_running_ns: u64,
}

impl Reading {
    /// The value extrapolated to the whole enabled time (multiplexing), or `None` if the event
    /// never ran.
    pub fn scaled(&self) -> Option<u64> {
        scale(self.value, self.time_enabled_ns, self.time_running_ns)
    }
}

/// Outcome of a user-space read attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageRead {
    /// Read entirely in user space.
    Counted(Reading),
    /// The page does not allow a user-space read now (`cap_user_rdpmc` is 0, or `index` is 0
    /// because the event is not on a hardware counter: software event, or multiplexed out);
    /// the caller must `read(2)` the file descriptor.
    Syscall,
}

/// Sign-extend the low `width` bits of `raw` (a hardware counter is `pmc_width` bits wide).
pub fn sign_extend(raw: u64, width: u16) -> i64 {
    let width = if width == 0 || width > 64 { 64 } else { width };
    let shift = 64 - u32::from(width);
    ((raw << shift) as i64) >> shift
}

/// `value * enabled / running` without overflow; `None` when the event never ran.
pub fn scale(value: u64, enabled: u64, running: u64) -> Option<u64> {
    if running == 0 {
        return None;
    }
    let v = u128::from(value) * u128::from(enabled) / u128::from(running);
    Some(u64::try_from(v).unwrap_or(u64::MAX))
}

/// Extend a short cycle count as the kernel documents for `cap_user_time_short`:
/// `cyc = time_cycles + ((cyc - time_cycles) & time_mask)`.
pub fn extend_short_cycles(cycles: u64, time_cycles: u64, time_mask: u64) -> u64 {
    time_cycles.wrapping_add(cycles.wrapping_sub(time_cycles) & time_mask)
}

/// Time elapsed since the kernel last wrote the page, from TSC cycles, by the formula in
/// perf_event.h (`quot = cyc >> shift; rem = cyc & mask; delta = offset + quot * mult +
/// ((rem * mult) >> shift)`), with the kernel's wrapping arithmetic.
pub fn tsc_delta_ns(cycles: u64, time_mult: u32, time_shift: u16, time_offset: u64) -> u64 {
    let shift = u32::from(time_shift.min(63));
    let quot = cycles >> shift;
    let rem = cycles & ((1u64 << shift) - 1);
    let mult = u64::from(time_mult);
    time_offset
        .wrapping_add(quot.wrapping_mul(mult))
        .wrapping_add(rem.wrapping_mul(mult) >> shift)
}

/// Run the seqlock read protocol on `page`.
///
/// # Safety
/// `page` must point to a live, suitably aligned `PerfEventMmapPage` (a mapped control page or
/// a synthetic one) for the duration of the call; concurrent writers must use atomic stores.
pub unsafe fn read_page<C: Cpu>(page: *const PerfEventMmapPage, cpu: &C) -> PageRead {
    // SAFETY (all from_ptr calls): fields are naturally aligned (repr(C), offsets asserted) and
    // the caller guarantees the page is live; the writer side uses atomic stores.
    let p = page as *mut PerfEventMmapPage;
    let lock = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*p).lock));
    let index_a = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*p).index));
    let offset_a = AtomicI64::from_ptr(std::ptr::addr_of_mut!((*p).offset));
    let enabled_a = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*p).time_enabled));
    let running_a = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*p).time_running));
    let caps_a = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*p).capabilities));
    let width_a = AtomicU16::from_ptr(std::ptr::addr_of_mut!((*p).pmc_width));
    let shift_a = AtomicU16::from_ptr(std::ptr::addr_of_mut!((*p).time_shift));
    let mult_a = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*p).time_mult));
    let toff_a = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*p).time_offset));
    let tcyc_a = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*p).time_cycles));
    let tmask_a = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*p).time_mask));
    loop {
        let seq = lock.load(Ordering::Acquire);
        if seq & 1 == 1 {
            // A writer on another CPU is mid-update (the kernel itself only updates the page
            // while this thread is not running, but a synthetic writer can be caught here).
            std::hint::spin_loop();
            continue;
        }
        let index = index_a.load(Ordering::Relaxed);
        let caps = caps_a.load(Ordering::Relaxed);
        let mut enabled = enabled_a.load(Ordering::Relaxed);
        let mut running = running_a.load(Ordering::Relaxed);
        let usable = caps & CAP_USER_RDPMC != 0 && index != 0 && cpu.has_rdpmc();
        let mut value = 0u64;
        if usable {
            let width = width_a.load(Ordering::Relaxed);
            let raw = cpu.rdpmc(index - 1);
            let offset = offset_a.load(Ordering::Relaxed);
            value = offset.wrapping_add(sign_extend(raw, width)) as u64;
            if caps & CAP_USER_TIME != 0 && cpu.has_tsc() {
                let mut cyc = cpu.rdtsc();
                if caps & CAP_USER_TIME_SHORT != 0 {
                    cyc = extend_short_cycles(
                        cyc,
                        tcyc_a.load(Ordering::Relaxed),
                        tmask_a.load(Ordering::Relaxed),
                    );
                }
                let delta = tsc_delta_ns(
                    cyc,
                    mult_a.load(Ordering::Relaxed),
                    shift_a.load(Ordering::Relaxed),
                    toff_a.load(Ordering::Relaxed),
                );
                enabled = enabled.wrapping_add(delta);
                running = running.wrapping_add(delta);
            }
        }
        // Order every load above before the re-check of the sequence.
        fence(Ordering::Acquire);
        if lock.load(Ordering::Relaxed) != seq {
            continue;
        }
        if !usable {
            return PageRead::Syscall;
        }
        return PageRead::Counted(Reading {
            value,
            time_enabled_ns: enabled,
            time_running_ns: running,
        });
    }
}

/// The writer side of the protocol for synthetic pages (tests, benchmarks): bump `lock` to odd,
/// apply `update`, bump it to even, with the fences a seqlock writer needs.
///
/// # Safety
/// `page` must be a live, aligned page that no one else writes concurrently.
pub unsafe fn write_page(page: *mut PerfEventMmapPage, update: impl FnOnce(&PageWriter)) {
    let lock = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*page).lock));
    let seq = lock.load(Ordering::Relaxed);
    lock.store(seq.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    update(&PageWriter { page });
    lock.store(seq.wrapping_add(2), Ordering::Release);
}

/// Atomic field stores inside [`write_page`].
pub struct PageWriter {
    page: *mut PerfEventMmapPage,
}

impl PageWriter {
    /// `index`.
    pub fn index(&self, v: u32) {
        // SAFETY: see write_page.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.page).index)) }
            .store(v, Ordering::Relaxed);
    }
    /// `offset`.
    pub fn offset(&self, v: i64) {
        // SAFETY: see write_page.
        unsafe { AtomicI64::from_ptr(std::ptr::addr_of_mut!((*self.page).offset)) }
            .store(v, Ordering::Relaxed);
    }
    /// `time_enabled` and `time_running`.
    pub fn times(&self, enabled: u64, running: u64) {
        // SAFETY: see write_page.
        unsafe {
            AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page).time_enabled))
                .store(enabled, Ordering::Relaxed);
            AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page).time_running))
                .store(running, Ordering::Relaxed);
        }
    }
    /// `capabilities`.
    pub fn capabilities(&self, v: u64) {
        // SAFETY: see write_page.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page).capabilities)) }
            .store(v, Ordering::Relaxed);
    }
    /// `pmc_width`.
    pub fn pmc_width(&self, v: u16) {
        // SAFETY: see write_page.
        unsafe { AtomicU16::from_ptr(std::ptr::addr_of_mut!((*self.page).pmc_width)) }
            .store(v, Ordering::Relaxed);
    }
    /// `time_cycles` and `time_mask` (with `cap_user_time_short`).
    pub fn time_short(&self, cycles: u64, mask: u64) {
        // SAFETY: see write_page.
        unsafe {
            AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page).time_cycles))
                .store(cycles, Ordering::Relaxed);
            AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page).time_mask))
                .store(mask, Ordering::Relaxed);
        }
    }
    /// `time_mult`, `time_shift` and `time_offset`.
    pub fn time_conversion(&self, mult: u32, shift: u16, offset: u64) {
        // SAFETY: see write_page.
        unsafe {
            AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.page).time_mult))
                .store(mult, Ordering::Relaxed);
            AtomicU16::from_ptr(std::ptr::addr_of_mut!((*self.page).time_shift))
                .store(shift, Ordering::Relaxed);
            AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page).time_offset))
                .store(offset, Ordering::Relaxed);
        }
    }
}

/// Hardware counters a [`FakeCpu`] has; `rdpmc` of any other index returns [`BAD_COUNTER`].
pub const FAKE_COUNTERS: usize = 4;
/// What a [`FakeCpu`] returns for a counter index it does not have.
pub const BAD_COUNTER: u64 = 0x5a5a_5a5a_5a5a_5a5a;

/// A fake CPU for synthetic pages: `rdpmc(c)` returns the value a writer stored for hardware
/// counter `c` (so a wrong index reads another counter's value), `rdtsc` the stored TSC, and
/// an optional hook runs after each `rdpmc`, between the reader's two loads of `lock` (a
/// scripted writer).
#[derive(Default)]
pub struct FakeCpu {
    /// Hardware counters by index (`rdpmc` ECX).
    pub counters: [AtomicU64; FAKE_COUNTERS],
    /// The TSC.
    pub tsc: AtomicU64,
    /// `rdpmc` executions so far.
    pub rdpmc_calls: AtomicU64,
    /// Called after each `rdpmc` with the call number (1-based).
    pub after_rdpmc: Option<Box<dyn Fn(u64) + Send + Sync>>,
}

impl std::fmt::Debug for FakeCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCpu")
            .field("counters", &self.counters)
            .field("tsc", &self.tsc)
            .finish_non_exhaustive()
    }
}

impl Cpu for FakeCpu {
    fn has_rdpmc(&self) -> bool {
        true
    }
    fn rdpmc(&self, counter: u32) -> u64 {
        let v = self
            .counters
            .get(counter as usize)
            .map_or(BAD_COUNTER, |c| c.load(Ordering::Relaxed));
        let n = self.rdpmc_calls.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(hook) = &self.after_rdpmc {
            hook(n);
        }
        v
    }
    fn has_tsc(&self) -> bool {
        true
    }
    fn rdtsc(&self) -> u64 {
        self.tsc.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_extension_at_the_counter_width() {
        assert_eq!(sign_extend(0x7fff_ffff_ffff, 48), 0x7fff_ffff_ffff);
        assert_eq!(sign_extend(0xffff_ffff_ffff, 48), -1);
        assert_eq!(sign_extend(0x8000_0000, 32), -(1i64 << 31));
        assert_eq!(
            sign_extend(0x1_0000_0005, 32),
            5,
            "bits above the width are ignored"
        );
        assert_eq!(sign_extend(u64::MAX, 64), -1);
        assert_eq!(sign_extend(7, 0), 7, "width 0 is treated as 64");
    }

    #[test]
    fn scaling_extrapolates_and_refuses_never_ran() {
        assert_eq!(scale(1000, 200, 100), Some(2000));
        assert_eq!(scale(u64::MAX, 2, 2), Some(u64::MAX));
        assert_eq!(scale(5, 10, 0), None);
        let r = Reading {
            value: 300,
            time_enabled_ns: 90,
            time_running_ns: 30,
        };
        assert_eq!(r.scaled(), Some(900));
    }

    #[test]
    fn time_formula_matches_a_hand_computed_example() {
        // shift 10, mult 1536 (1.5 ns per cycle), offset 1000: 4096 cycles -> 1000 + 6144.
        assert_eq!(tsc_delta_ns(4096, 1536, 10, 1000), 7144);
        // rem part: 4097 cycles -> quot 4, rem 1 -> 1000 + 4*1536 + (1536 >> 10) = 7145.
        assert_eq!(tsc_delta_ns(4097, 1536, 10, 1000), 7145);
        // a "negative" offset wraps as in the kernel.
        assert_eq!(tsc_delta_ns(1024, 1024, 10, 0u64.wrapping_sub(24)), 1000);
    }

    #[test]
    fn user_space_read_with_rdpmc_and_time() {
        let mut page = Box::<PerfEventMmapPage>::default();
        let cpu = FakeCpu::default();
        // index 3 reads hardware counter 2 (ECX = index - 1); the others hold decoys.
        cpu.counters[2].store(0xffff_ffff_fff0, Ordering::Relaxed); // -16 at 48 bits
        cpu.counters[3].store(7, Ordering::Relaxed);
        cpu.counters[1].store(9, Ordering::Relaxed);
        cpu.tsc.store(2048, Ordering::Relaxed);
        let p: *mut PerfEventMmapPage = &mut *page;
        // SAFETY: p is live and only this thread writes it.
        unsafe {
            write_page(p, |w| {
                w.index(3);
                w.offset(1016);
                w.pmc_width(48);
                w.capabilities(CAP_USER_RDPMC | CAP_USER_TIME);
                w.times(500, 400);
                w.time_conversion(1024, 10, 0);
            });
            assert_eq!(
                read_page(p, &cpu),
                PageRead::Counted(Reading {
                    value: 1000,
                    time_enabled_ns: 500 + 2048,
                    time_running_ns: 400 + 2048,
                })
            );
        }
    }

    /// An architecture whose page may claim `cap_user_rdpmc` but where we have no `rdpmc`.
    struct NoRdpmc;
    impl Cpu for NoRdpmc {
        fn has_rdpmc(&self) -> bool {
            false
        }
        fn rdpmc(&self, _counter: u32) -> u64 {
            panic!("rdpmc executed on a CPU without it")
        }
        fn has_tsc(&self) -> bool {
            false
        }
        fn rdtsc(&self) -> u64 {
            panic!("rdtsc executed on a CPU without it")
        }
    }

    #[test]
    fn cap_user_rdpmc_without_the_instruction_takes_the_syscall() {
        let mut page = Box::<PerfEventMmapPage>::default();
        let p: *mut PerfEventMmapPage = &mut *page;
        // SAFETY: p is live and only this thread writes it.
        unsafe {
            write_page(p, |w| {
                w.index(1);
                w.offset(1000);
                w.capabilities(CAP_USER_RDPMC | CAP_USER_TIME);
            });
            // Before: value = offset + 0 from the stub, i.e. a wrong count of 1000.
            assert_eq!(read_page(p, &NoRdpmc), PageRead::Syscall);
        }
    }

    #[test]
    fn short_time_counter_is_extended_with_time_cycles_and_mask() {
        // A 32-bit cycle counter that wrapped: raw 0x10 after time_cycles 0xffff_fff0.
        assert_eq!(
            extend_short_cycles(0x10, 0xffff_fff0, 0xffff_ffff),
            0x1_0000_0010
        );
        assert_eq!(extend_short_cycles(0x1234, 0, u64::MAX), 0x1234);
        let mut page = Box::<PerfEventMmapPage>::default();
        let cpu = FakeCpu::default();
        cpu.counters[0].store(100, Ordering::Relaxed);
        // A 32-bit TSC reading 0x10 after time_cycles 0xffff_fff0: 0x20 cycles have passed,
        // so with time_offset = -time_cycles (1 ns per cycle) the delta is 0x20 ns.
        cpu.tsc.store(0x10, Ordering::Relaxed);
        let p: *mut PerfEventMmapPage = &mut *page;
        // SAFETY: p is live and only this thread writes it.
        unsafe {
            write_page(p, |w| {
                w.index(1);
                w.capabilities(CAP_USER_RDPMC | CAP_USER_TIME | CAP_USER_TIME_SHORT);
                w.pmc_width(48);
                w.times(1000, 1000);
                w.time_conversion(1, 0, 0u64.wrapping_sub(0xffff_fff0));
                w.time_short(0xffff_fff0, 0xffff_ffff);
            });
            match read_page(p, &cpu) {
                PageRead::Counted(r) => {
                    assert_eq!(r.value, 100);
                    assert_eq!(r.time_enabled_ns, 1000 + 0x20);
                    assert_eq!(r.time_running_ns, 1000 + 0x20);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn multiplexed_out_or_no_rdpmc_needs_the_syscall() {
        let mut page = Box::<PerfEventMmapPage>::default();
        let cpu = FakeCpu::default();
        let p: *mut PerfEventMmapPage = &mut *page;
        // SAFETY: p is live and only this thread writes it.
        unsafe {
            write_page(p, |w| {
                w.index(0);
                w.capabilities(CAP_USER_RDPMC);
            });
            assert_eq!(read_page(p, &cpu), PageRead::Syscall);
            write_page(p, |w| {
                w.index(2);
                w.capabilities(0);
            });
            assert_eq!(read_page(p, &cpu), PageRead::Syscall);
        }
    }
}
