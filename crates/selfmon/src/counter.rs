//! Counters on the calling thread with their control page mapped: the user-space read where
//! the kernel allows it, `read(2)` otherwise.
//!
//! Events are parsed by `counterpoint-counters` (perf's syntax, sysfs PMUs) and opened with
//! `perf-event2`; only the read is ours, because it is the hot path.

use crate::page::{read_page, HardwareCpu, PageRead, PerfEventMmapPage, Reading, CAP_USER_RDPMC};
use counterpoint_counters::count::{
    builder_for, classify_open_error, has_hardware_pmu, read_paranoid, OpenFailure,
};
use counterpoint_counters::{parse_event_list, EventSpec, PmuTree};
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, RawFd};

/// Why self-monitoring could not start or read.
#[derive(Debug, thiserror::Error)]
pub enum SelfmonError {
    #[error(transparent)]
    Spec(#[from] counterpoint_counters::SpecError),
    #[error("event '{event}' is not supported: {reason}")]
    NotSupported { event: String, reason: String },
    #[error(transparent)]
    Count(#[from] counterpoint_counters::CountError),
    #[error("reading '{event}': {source}")]
    Read {
        event: String,
        source: std::io::Error,
    },
    #[error("no events given")]
    NoEvents,
    #[error("self-monitoring is already running with events '{0}'; init must come before the first region")]
    AlreadyStarted(String),
    #[error("region handle {0} is not open on this thread")]
    BadHandle(i64),
    #[error("region name is not valid UTF-8 or is NULL")]
    BadName,
    #[error("writing the report to {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// Parse a perf-style event list against this machine's PMUs (groups are flattened: each
/// self-monitoring counter is read on its own).
pub fn parse_events(list: &str) -> Result<Vec<EventSpec>, SelfmonError> {
    let parsed = parse_event_list(list, &PmuTree::new("/sys"))?;
    let specs: Vec<EventSpec> = parsed.events().cloned().collect();
    if specs.is_empty() {
        return Err(SelfmonError::NoEvents);
    }
    Ok(specs)
}

struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// One event counting the calling thread. Not `Send`: the user-space read is only meaningful
/// on the thread the counter belongs to.
pub struct SelfCounter {
    name: String,
    counter: perf_event::Counter,
    page: Option<Mapping>,
    _not_send: PhantomData<*const ()>,
}

impl SelfCounter {
    /// Open `spec` on the calling thread, counting from now, and map its control page (if the
    /// mapping fails, reads use `read(2)`).
    pub fn open(spec: &EventSpec) -> Result<Self, SelfmonError> {
        let mut b = builder_for(spec);
        b.observe_self().any_cpu().enabled(true);
        let counter = match b.build() {
            Ok(c) => c,
            Err(err) => {
                let tree = PmuTree::new("/sys");
                return Err(
                    match classify_open_error(
                        err,
                        spec,
                        None,
                        has_hardware_pmu(&tree),
                        read_paranoid(),
                    ) {
                        OpenFailure::NotSupported(reason) => SelfmonError::NotSupported {
                            event: spec.name.clone(),
                            reason,
                        },
                        OpenFailure::Fatal(e) => SelfmonError::Count(e),
                    },
                );
            }
        };
        // SAFETY: sysconf has no preconditions.
        let len = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        // SAFETY: mapping the first page of a perf_event fd read-only is the documented way to
        // get its control page; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                counter.as_raw_fd(),
                0,
            )
        };
        let page = (ptr != libc::MAP_FAILED).then_some(Mapping { ptr, len });
        Ok(SelfCounter {
            name: spec.name.clone(),
            counter,
            page,
            _not_send: PhantomData,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> RawFd {
        self.counter.as_raw_fd()
    }

    /// Whether the kernel currently allows `rdpmc` for this event (never on a machine without a
    /// hardware PMU; software events never have it).
    pub fn user_space_capable(&self) -> bool {
        match &self.page {
            // SAFETY: the mapping is live while self is.
            Some(m) => unsafe {
                let caps = std::ptr::read_volatile(std::ptr::addr_of!(
                    (*(m.ptr as *const PerfEventMmapPage)).capabilities
                ));
                caps & CAP_USER_RDPMC != 0
            },
            None => false,
        }
    }

    /// The current count: from user space when the page allows it, else `read(2)`.
    pub fn read(&self) -> Result<Reading, SelfmonError> {
        if let Some(m) = &self.page {
            // SAFETY: the page is mapped for as long as self lives; the kernel writes it with
            // the seqlock protocol read_page implements.
            if let PageRead::Counted(r) =
                unsafe { read_page(m.ptr as *const PerfEventMmapPage, &HardwareCpu) }
            {
                return Ok(r);
            }
        }
        self.read_syscall()
    }

    /// The count by `read(2)` of `{value, time_enabled, time_running}` into a stack buffer.
    pub fn read_syscall(&self) -> Result<Reading, SelfmonError> {
        read_fd(self.fd()).map_err(|source| SelfmonError::Read {
            event: self.name.clone(),
            source,
        })
    }
}

/// One `read(2)` of a counter opened with TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING.
pub fn read_fd(fd: RawFd) -> std::io::Result<Reading> {
    let mut buf = [0u64; 3];
    // SAFETY: buf is 24 writable bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if n as usize != std::mem::size_of_val(&buf) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("short read of {n} bytes from a perf_event fd"),
        ));
    }
    Ok(Reading {
        value: buf[0],
        time_enabled_ns: buf[1],
        time_running_ns: buf[2],
    })
}
