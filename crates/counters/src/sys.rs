//! The one `read(2)` of a perf descriptor, and (with the `scripted` feature) the seam where a
//! scripted PMU answers for the descriptors it opened. `perf-event2`'s `hooks` feature
//! intercepts `perf_event_open` and the ioctls but not `read(2)`, which this crate makes itself.

use std::io;
use std::os::fd::RawFd;

/// Read up to `buf.len()` words from a perf descriptor; returns the number of bytes read.
#[inline]
pub fn read_words(fd: RawFd, buf: &mut [u64]) -> io::Result<usize> {
    #[cfg(feature = "scripted")]
    if let Some(r) = crate::scripted::read(fd, buf) {
        return r;
    }
    // SAFETY: buf is writable, owned by the caller, and we pass its exact length in bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(buf)) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
