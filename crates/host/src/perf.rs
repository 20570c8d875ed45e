//! Per-thread counters through `perf_event_open` (events and attributes from the `perf-event2` crate): one group per thread
//! (`task-clock` leading `context-switches` and `cpu-migrations`, software events every kernel
//! has), opened when the thread is first seen and closed when it is gone, read with one `read`
//! per interval that also returns the group's `time_enabled` / `time_running`. Hardware events
//! (`cycles`, `instructions`, `cache-misses`) are probed once per process: where the kernel
//! refuses them (no PMU, as on this host) they are never opened again and policies that need
//! them are refused by name; where they open, each thread gets a second group for them, so they
//! are scaled by their own group's schedule when multiplexed.

use counterpoint_core::event;
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, ReadFormat};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// A perf event this module can open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerfEvent {
    Software(Software),
    Hardware(Hardware),
}

/// The software group: always countable (perf or, failing that, `/proc`).
pub const SOFTWARE_GROUP: [(&str, PerfEvent); 3] = [
    (event::TASK_CLOCK, PerfEvent::Software(Software::TASK_CLOCK)),
    (
        event::CONTEXT_SWITCHES,
        PerfEvent::Software(Software::CONTEXT_SWITCHES),
    ),
    (
        event::CPU_MIGRATIONS,
        PerfEvent::Software(Software::CPU_MIGRATIONS),
    ),
];

/// The hardware events tried once; the ones IPC, LLC MPKI and bandwidth are made of.
pub const HARDWARE_GROUP: [(&str, PerfEvent); 3] = [
    (event::CYCLES, PerfEvent::Hardware(Hardware::CPU_CYCLES)),
    (
        event::INSTRUCTIONS,
        PerfEvent::Hardware(Hardware::INSTRUCTIONS),
    ),
    (
        event::CACHE_MISSES,
        PerfEvent::Hardware(Hardware::CACHE_MISSES),
    ),
];

/// perf_event failures, naming the thread and the event.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error("perf_event_open({event}) for thread {tid}: {source}")]
    Open {
        tid: u32,
        event: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("reading the perf_event group of thread {tid}: {source}")]
    Read {
        tid: u32,
        #[source]
        source: io::Error,
    },
}

impl PerfError {
    /// Whether no thread at all can be expected to open (no perf_event support in the kernel,
    /// or the event unknown to it), as opposed to one thread's trouble (gone, out of
    /// descriptors, not permitted for this task's owner).
    pub fn is_global(&self) -> bool {
        let PerfError::Open { source, .. } = self else {
            return false;
        };
        matches!(
            source.raw_os_error(),
            Some(libc::ENOSYS | libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV)
        )
    }
}

fn builder(ev: PerfEvent) -> Builder<'static> {
    match ev {
        PerfEvent::Software(s) => Builder::new(s),
        PerfEvent::Hardware(h) => Builder::new(h),
    }
}

/// Most events in one group.
pub const MAX_GROUP: usize = 8;

/// One thread's perf group: the leader's descriptor first, then the members'.
pub struct ThreadGroup {
    tid: u32,
    fds: Vec<OwnedFd>,
    names: Vec<&'static str>,
}

/// Cumulative values of one group since it was opened, in the order of [`ThreadGroup::names`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupReading {
    pub values: [u64; MAX_GROUP],
    pub len: usize,
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
}

/// `perf_event_open(2)` on the attributes the crate's [`Builder`] made.
fn open_fd(builder: &mut Builder<'_>, tid: u32, group_fd: libc::c_int) -> io::Result<OwnedFd> {
    let attrs: *mut _ = builder.attrs_mut();
    // SAFETY: `attrs` points to a complete perf_event_attr whose `size` field the Builder set
    // to the struct's size; the kernel reads at most that much and may write `size` back (E2BIG).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attrs,
            tid as libc::pid_t,
            -1 as libc::c_int,
            group_fd,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// `PERF_FLAG_FD_CLOEXEC` from `linux/perf_event.h`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

impl ThreadGroup {
    /// Open `events` (at most [`MAX_GROUP`]) as one group on thread `tid` (any CPU), counting
    /// user and kernel mode (context switches and migrations happen in the kernel). Every
    /// event is created enabled, so no enabling `ioctl` is needed; the first read after
    /// opening is the baseline.
    ///
    /// The attributes come from `perf-event2`'s [`Builder`]; the system call is made here
    /// because `Builder::build` also issues a `PERF_EVENT_IOC_ID` ioctl per counter, which this
    /// group read (values in creation order, no ids) does not need: opening and closing are
    /// the agent's largest one-time cost with hundreds of threads, one kernel cross-call each.
    pub fn open(tid: u32, events: &[(&'static str, PerfEvent)]) -> Result<Self, PerfError> {
        let Some((lead_name, _)) = events.first() else {
            return Err(PerfError::Open {
                tid,
                event: "(none)",
                source: io::Error::new(io::ErrorKind::InvalidInput, "empty event group"),
            });
        };
        if events.len() > MAX_GROUP {
            return Err(PerfError::Open {
                tid,
                event: lead_name,
                source: io::Error::new(io::ErrorKind::InvalidInput, "too many events in a group"),
            });
        }
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(events.len());
        for (i, (name, ev)) in events.iter().enumerate() {
            let mut b = builder(*ev);
            b.include_kernel().enabled(true);
            if i == 0 {
                b.read_format(
                    ReadFormat::GROUP
                        | ReadFormat::TOTAL_TIME_ENABLED
                        | ReadFormat::TOTAL_TIME_RUNNING,
                );
                // `read_format` adds PERF_FORMAT_ID to groups; values come in creation order
                // without it.
                b.attrs_mut().read_format &= !ReadFormat::ID.bits();
            }
            let group_fd = fds.first().map_or(-1, |f| f.as_raw_fd());
            let fd = open_fd(&mut b, tid, group_fd).map_err(|source| PerfError::Open {
                tid,
                event: name,
                source,
            })?;
            fds.push(fd);
        }
        Ok(Self {
            tid,
            fds,
            names: events.iter().map(|(n, _)| *n).collect(),
        })
    }

    /// Event names, in the order of [`GroupReading::values`].
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// One `read(2)` of the whole group into a stack buffer: `nr, time_enabled, time_running`,
    /// then one value per event in creation order (the kernel's `PERF_FORMAT_GROUP` layout).
    pub fn read(&mut self) -> Result<GroupReading, PerfError> {
        let tid = self.tid;
        let mut buf = [0u64; 3 + MAX_GROUP];
        let Some(leader) = self.fds.first() else {
            return Err(PerfError::Read {
                tid,
                source: io::Error::new(io::ErrorKind::InvalidInput, "empty group"),
            });
        };
        // SAFETY: reading into a buffer we own, of the length we pass.
        let n = unsafe {
            libc::read(
                leader.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(PerfError::Read {
                tid,
                source: io::Error::last_os_error(),
            });
        }
        let words = n as usize / 8;
        let nr = buf[0] as usize;
        if words < 3 || nr != self.fds.len() || words < 3 + nr {
            return Err(PerfError::Read {
                tid,
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "group read of {n} bytes, {nr} values for {} events",
                        self.fds.len()
                    ),
                ),
            });
        }
        let mut r = GroupReading {
            len: nr,
            time_enabled_ns: buf[1],
            time_running_ns: buf[2],
            ..Default::default()
        };
        r.values[..nr].copy_from_slice(&buf[3..3 + nr]);
        Ok(r)
    }

    /// How many events the group holds.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// Never: a group has a leader.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

/// What perf_event can count on this host, found once per process by opening each event on the
/// calling thread and closing it again.
#[derive(Clone, Debug)]
pub struct Availability {
    /// `Err(reason)` when the software group cannot be opened (then `/proc` is used).
    pub software: Result<(), String>,
    /// Each hardware event and whether it opened (`Err(reason)` otherwise).
    pub hardware: Vec<(&'static str, Result<(), String>)>,
}

impl Availability {
    /// Hardware events that opened.
    pub fn hardware_events(&self) -> Vec<&'static str> {
        self.hardware
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| *n)
            .collect()
    }

    /// Hardware events that did not open, with the kernel's reason.
    pub fn missing_hardware(&self) -> Vec<(&'static str, String)> {
        self.hardware
            .iter()
            .filter_map(|(n, r)| r.as_ref().err().map(|e| (*n, e.clone())))
            .collect()
    }

    /// Every event a live host can put in its samples: the software group (by perf_event or
    /// `/proc`) and whichever hardware events opened.
    pub fn countable_events(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = SOFTWARE_GROUP.iter().map(|(n, _)| *n).collect();
        v.extend(self.hardware_events());
        v
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Probe once (cached): the software group, then each hardware event on its own.
pub fn availability() -> &'static Availability {
    static AVAIL: OnceLock<Availability> = OnceLock::new();
    AVAIL.get_or_init(|| {
        let tid = gettid();
        let software = ThreadGroup::open(tid, &SOFTWARE_GROUP)
            .map(drop)
            .map_err(|e| e.to_string());
        let hardware = HARDWARE_GROUP
            .iter()
            .map(|(name, ev)| {
                let r = ThreadGroup::open(tid, &[(*name, *ev)])
                    .map(drop)
                    .map_err(|e| match e {
                        PerfError::Open { source, .. } => describe_open_error(&source),
                        other => other.to_string(),
                    });
                (*name, r)
            })
            .collect();
        Availability { software, hardware }
    })
}

/// The kernel's answer for an event that does not open, in words (ENOENT/EOPNOTSUPP are what a
/// machine without that PMU event gives).
fn describe_open_error(e: &io::Error) -> String {
    let Some(code) = e.raw_os_error() else {
        return e.to_string();
    };
    let errno = nix::errno::Errno::from_raw(code);
    match code {
        libc::ENOENT | libc::EOPNOTSUPP => format!("not supported here ({errno})"),
        libc::EACCES | libc::EPERM => {
            format!("not permitted, see /proc/sys/kernel/perf_event_paranoid ({errno})")
        }
        _ => errno.to_string(),
    }
}

/// Raise the soft limit on open files to the hard limit: every watched thread holds one
/// descriptor per event. Returns the new soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read a plain struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if rl.rlim_cur < rl.rlim_max {
        rl.rlim_cur = rl.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(rl.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin_ms(ms: u64) {
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed().as_millis() < ms as u128 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn own_thread_counts_task_clock_and_switches() {
        let Ok(mut g) = ThreadGroup::open(gettid(), &SOFTWARE_GROUP) else {
            // perf_event refused here (paranoid without privileges): the /proc path is used.
            eprintln!("skipped: perf_event_open refused");
            return;
        };
        let a = g.read().expect("read");
        spin_ms(30);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = g.read().expect("read");
        assert_eq!(
            g.names(),
            [
                event::TASK_CLOCK,
                event::CONTEXT_SWITCHES,
                event::CPU_MIGRATIONS
            ]
        );
        assert_eq!((a.len, g.len()), (3, 3));
        let get = |r: &GroupReading, n: &str| {
            let i = g.names().iter().position(|k| *k == n).expect(n);
            r.values[i]
        };
        let run_ns = get(&b, event::TASK_CLOCK) - get(&a, event::TASK_CLOCK);
        // 30 ms of spinning, on a loaded machine maybe less of it on a CPU, never more than wall.
        assert!(run_ns > 5_000_000 && run_ns < 1_000_000_000, "{run_ns}");
        // The sleep is a voluntary switch.
        assert!(get(&b, event::CONTEXT_SWITCHES) > get(&a, event::CONTEXT_SWITCHES));
        // Software events are never multiplexed.
        assert_eq!(b.time_enabled_ns, b.time_running_ns);
        assert!(b.time_enabled_ns > a.time_enabled_ns);
    }

    #[test]
    fn a_gone_thread_does_not_open() {
        // Thread ids above pid_max do not exist.
        let e = ThreadGroup::open(u32::MAX / 2, &SOFTWARE_GROUP)
            .err()
            .expect("no such thread");
        assert!(e.to_string().contains("task-clock"), "{e}");
    }

    #[test]
    fn availability_names_every_hardware_event() {
        let a = availability();
        let names: Vec<_> = a.hardware.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [event::CYCLES, event::INSTRUCTIONS, event::CACHE_MISSES]
        );
        let countable = a.countable_events();
        assert!(countable.contains(&event::TASK_CLOCK));
        // Every hardware event is either countable or missing with a reason, never both.
        for (n, r) in &a.hardware {
            assert_eq!(countable.contains(n), r.is_ok());
        }
    }
}
