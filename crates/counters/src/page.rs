//! A perf_event descriptor's control page (`struct perf_event_mmap_page`: the first page of
//! the descriptor, mapped read-only, with no ring buffer behind it). Three readers use it: the
//! agent's thread gate (the sequence counter moves whenever the event is scheduled in or out
//! with its thread), `selfmon`'s user-space reads (the seqlock protocol over the whole page)
//! and the read benchmark's `cap_user_rdpmc` probe.

use std::os::fd::RawFd;
use std::ptr::NonNull;

/// Byte offset of `lock`, the page's sequence counter (after `version` and `compat_version`).
const LOCK_OFFSET: usize = 8;
/// Byte offset of the `capabilities` word.
const CAPABILITIES_OFFSET: usize = 40;

/// One control page mapped read-only; unmapped on drop. For an unprivileged user the page
/// counts against `perf_event_mlock_kb` (which `perf record` needs too), so map only where it
/// is read.
pub struct ControlPage {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a read-only shared mapping, only ever read with volatile loads; which thread reads it
// does not matter.
unsafe impl Send for ControlPage {}

impl ControlPage {
    /// Map the first page of perf descriptor `fd`; `None` where the kernel refuses (an
    /// unprivileged user past its locked-memory allowance, for one) or where `fd` is a
    /// scripted counter, which has nothing behind its first page.
    pub fn map(fd: RawFd) -> Option<Self> {
        #[cfg(feature = "scripted")]
        if crate::scripted::owns(fd) {
            return None;
        }
        // SAFETY: sysconf has no preconditions.
        let len = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        // SAFETY: a fresh read-only shared mapping of an open descriptor; the result is
        // checked before use and unmapped once, in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(Self {
            ptr: NonNull::new(p.cast::<u8>())?,
            len,
        })
    }

    /// The page's first byte, for readers of the whole `perf_event_mmap_page`.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The sequence counter (`lock`): the kernel adds one before and one after each rewrite, so
    /// an odd value is a rewrite in progress and an unchanged even value means no rewrite (no
    /// schedule in or out of the event) in between.
    pub fn seq(&self) -> u32 {
        // SAFETY: the mapping is a page long and lives as long as self; the kernel writes the
        // aligned word concurrently, hence the volatile load.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(LOCK_OFFSET).cast::<u32>()) }
    }

    /// The `capabilities` word (bit 2: `cap_user_rdpmc`).
    pub fn capabilities(&self) -> u64 {
        // SAFETY: as in `seq`; the word is 8-byte aligned at offset 40.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(CAPABILITIES_OFFSET).cast::<u64>()) }
    }
}

impl Drop for ControlPage {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
