//! The one `read(2)` of a perf descriptor, the bare `perf_event_open` of the per-thread groups,
//! and (with the `scripted` feature) the seams where a scripted PMU answers. `perf-event2`'s
//! `hooks` feature intercepts `perf_event_open` and the ioctls but not `read(2)`, which this
//! crate makes itself.

use perf_event_open_sys::bindings::perf_event_attr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `PERF_FLAG_FD_CLOEXEC`.
const FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// `perf_event_open(attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC)`, through perf-event2's
/// hooks when the `scripted` feature is on (so a scripted PMU sees it), else straight to the
/// kernel. Unlike `Builder::build` it issues no `PERF_EVENT_IOC_ID` afterwards: a group read
/// without `PERF_FORMAT_ID` does not need ids, and with hundreds of threads every system call at
/// open time counts.
pub fn perf_event_open(
    attr: &mut perf_event_attr,
    pid: libc::pid_t,
    cpu: libc::c_int,
    group_fd: RawFd,
) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a complete perf_event_attr (its `size` set by perf-event2's Builder);
    // the kernel reads at most `size` bytes and may write `size` back (E2BIG).
    #[cfg(feature = "scripted")]
    let fd = unsafe {
        perf_event::hooks::sys::perf_event_open(attr, pid, cpu, group_fd, FLAG_FD_CLOEXEC)
    };
    // SAFETY: as above.
    #[cfg(not(feature = "scripted"))]
    let fd =
        unsafe { perf_event_open_sys::perf_event_open(attr, pid, cpu, group_fd, FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

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
