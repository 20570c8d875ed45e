//! Counters on the calling thread with their control page mapped: the user-space read where
//! the kernel allows it, `read(2)` otherwise.
//!
//! Events are parsed and opened by `counterpoint-counters` (perf's syntax, sysfs PMUs, the one
//! place that opens perf events); only the read is ours, because it is the hot path.

use crate::page::{
    read_page, Cpu, HardwareCpu, PageRead, PerfEventMmapPage, Reading, CAP_USER_RDPMC,
};
use counterpoint_counters::count::OpenFailure;
use counterpoint_counters::page::ControlPage;
use counterpoint_counters::selfcount::open_on_calling_thread;
use counterpoint_counters::{parse_event_list, EventSpec, PmuTree};
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Why self-monitoring could not start or read.
#[derive(Debug, thiserror::Error)]
pub enum SelfmonError {
    /// The event list does not parse on this machine.
    #[error(transparent)]
    Spec(#[from] counterpoint_counters::SpecError),
    /// The machine cannot count the event (no PMU, unknown to the kernel, ...).
    #[error("event '{event}' is not supported: {reason}")]
    NotSupported {
        /// The event as named in the list.
        event: String,
        /// Why, in the words of the counter layer.
        reason: String,
    },
    /// Opening failed for another reason (permissions, limits).
    #[error(transparent)]
    Count(#[from] counterpoint_counters::CountError),
    /// `read(2)` of a counter failed.
    #[error("reading '{event}': {source}")]
    Read {
        /// The event.
        event: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The event list was empty.
    #[error("no events given")]
    NoEvents,
    /// `init` came after regions started with another list.
    #[error("self-monitoring is already running with events '{0}'; init must come before the first region")]
    AlreadyStarted(String),
    /// A second `init` with another list.
    #[error("self-monitoring was already initialised with events '{0}'; init may be called again only with the same list")]
    AlreadyInitialised(String),
    /// An event named twice in one list (its column would appear twice in every report).
    #[error("event '{event}' is listed twice in '{list}': name each event once")]
    Repeated {
        /// The event.
        event: String,
        /// The list as given.
        list: String,
    },
    /// A region handle that is not open on the calling thread.
    #[error("region handle {0} is not open on this thread")]
    BadHandle(i64),
    /// A request boundary that does not match (end without begin on this thread, ...).
    #[error("request {0}: {1}")]
    BadRequest(u64, &'static str),
    /// A NULL or non-UTF-8 region name or path.
    #[error("region name is not valid UTF-8 or is NULL")]
    BadName,
    /// Writing a report failed.
    #[error("writing the report to {path}: {source}")]
    Write {
        /// Where.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Parse a perf-style event list against this machine's PMUs (groups are flattened: each
/// self-monitoring counter is read on its own).
pub fn parse_events(list: &str) -> Result<Vec<EventSpec>, SelfmonError> {
    let parsed = parse_event_list(list, &PmuTree::new("/sys"))?;
    if parsed.is_empty() {
        return Err(SelfmonError::NoEvents);
    }
    // User-only (`task-clock:u`) where this user may not count kernel mode, as perf does.
    let parsed = counterpoint_counters::selfcount::countable_on_calling_thread(&parsed);
    if let Some(dup) = parsed.repeated() {
        return Err(SelfmonError::Repeated {
            event: dup.name.clone(),
            list: list.to_string(),
        });
    }
    Ok(parsed.events().cloned().collect())
}

/// One event counting the calling thread. Not `Send`: the user-space read is only meaningful
/// on the thread the counter belongs to.
pub struct SelfCounter {
    name: String,
    fd: OwnedFd,
    page: Option<ControlPage>,
    _not_send: PhantomData<*const ()>,
}

impl SelfCounter {
    /// Open `spec` on the calling thread, counting from now, and map its control page (if the
    /// mapping fails, reads use `read(2)`).
    pub fn open(spec: &EventSpec) -> Result<Self, SelfmonError> {
        let fd = open_on_calling_thread(spec).map_err(|f| match f {
            OpenFailure::NotSupported(reason) => SelfmonError::NotSupported {
                event: spec.name.clone(),
                reason,
            },
            OpenFailure::Fatal(e) => SelfmonError::Count(e),
        })?;
        // If the mapping fails, reads use `read(2)`.
        let page = ControlPage::map(fd.as_raw_fd());
        Ok(SelfCounter {
            name: spec.name.clone(),
            fd,
            page,
            _not_send: PhantomData,
        })
    }

    /// The event's name as given in the list.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The perf event descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Give up a counter inherited through `fork`: its descriptor (the child's copy, which
    /// would count the *parent's* thread) is closed, but its control page is not unmapped,
    /// because perf mappings are not copied into a child (`VM_DONTCOPY`) and the address may
    /// already belong to another mapping of the child.
    pub fn abandon_after_fork(mut self) {
        if let Some(m) = self.page.take() {
            std::mem::forget(m);
        }
        drop(self);
    }

    /// Whether reads take the user-space path now: the kernel allows `rdpmc` for this event
    /// (never on a machine without a hardware PMU; software events never have it) and this CPU
    /// has a user-space read we implement (x86-64).
    pub fn user_space_capable(&self) -> bool {
        match &self.page {
            // SAFETY: the mapping is live while self is.
            Some(m) => m.capabilities() & CAP_USER_RDPMC != 0 && HardwareCpu.has_rdpmc(),
            None => false,
        }
    }

    /// The current count: from user space when the page allows it, else `read(2)`.
    pub fn read(&self) -> Result<Reading, SelfmonError> {
        if let Some(m) = &self.page {
            // SAFETY: the page is mapped for as long as self lives; the kernel writes it with
            // the seqlock protocol read_page implements.
            if let PageRead::Counted(r) =
                unsafe { read_page(m.as_ptr().cast::<PerfEventMmapPage>(), &HardwareCpu) }
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
