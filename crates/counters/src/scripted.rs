//! A scripted PMU for tests (cargo feature `scripted`): the hardware path end to end on a
//! machine without a PMU.
//!
//! [`install`] puts hooks on the calling thread (perf-event2's `hooks` feature) that intercept
//! `perf_event_open` and the ioctls. Events the script claims (by their `perf_event_attr` type
//! and config, as the spec parser resolves them on a given PMU tree) open as a private memfd;
//! everything else goes to the kernel unchanged. Reads of those descriptors are answered by
//! this crate's read seam ([`crate::sys::read_words`]): each read of a counter (or group leader)
//! adds the script's per-read increment for that thread and event, and advances
//! `time_enabled` by [`Script::enabled_step_ns`] and `time_running` by the thread's coverage
//! share of it, so multiplexing (`running < enabled`) is exercised exactly.

use crate::spec::parse_event_list;
use crate::PmuTree;
use perf_event::hooks::sys::bindings::perf_event_attr;
use perf_event::hooks::{self, Hooks, RealHooks};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::os::raw::{c_char, c_int, c_uint, c_ulong};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// `PERF_FORMAT_GROUP`.
const FORMAT_GROUP: u64 = 8;

/// What the scripted PMU counts.
#[derive(Clone, Debug)]
pub struct Script {
    /// Claimed events: `(canonical name, type, config, config1)`.
    claims: Vec<(String, u32, u64, u64)>,
    /// Per `(thread, event name)`: how much each read adds.
    increments: HashMap<(i32, String), u64>,
    /// Per thread: the fraction of enabled time its counters run (1 = never multiplexed).
    coverage: HashMap<i32, f64>,
    /// Enabled time each read adds.
    pub enabled_step_ns: u64,
}

impl Script {
    /// A script that claims `events` (an event list resolved on `tree`).
    pub fn new(events: &str, tree: &PmuTree) -> Result<Self, crate::SpecError> {
        let list = parse_event_list(events, tree)?;
        let claims = list
            .events()
            .filter(|e| e.unavailable.is_none())
            .map(|e| (e.canonical.clone(), e.type_, e.config, e.config1))
            .collect();
        Ok(Self {
            claims,
            increments: HashMap::new(),
            coverage: HashMap::new(),
            enabled_step_ns: 100_000_000,
        })
    }

    /// Each read of `event` on thread `tid` adds `per_read`.
    pub fn count(mut self, tid: i32, event: &str, per_read: u64) -> Self {
        self.increments.insert((tid, event.to_string()), per_read);
        self
    }

    /// Thread `tid`'s counters run for `fraction` of the time they are enabled.
    pub fn coverage(mut self, tid: i32, fraction: f64) -> Self {
        self.coverage.insert(tid, fraction.clamp(0.0, 1.0));
        self
    }

    fn claim(&self, attr: &perf_event_attr) -> Option<(String, bool)> {
        self.claims
            .iter()
            .find(|(_, t, c, c1)| (*t, *c, *c1) == (attr.type_, attr.config, attr.config1))
            .map(|(n, t, ..)| (n.clone(), *t == crate::spec::TYPE_SOFTWARE))
    }
}

/// One scripted descriptor.
struct Fd {
    tid: i32,
    event: String,
    /// Software events are never multiplexed: coverage applies to the others only.
    software: bool,
    /// The memfd's inode: a recycled descriptor number with another inode is not ours.
    ino: u64,
    group_format: bool,
    /// Members, in creation order (leaders only).
    members: Vec<RawFd>,
    value: u64,
    enabled_ns: u64,
    running_ns: u64,
    id: u64,
}

struct State {
    script: Script,
    fds: HashMap<RawFd, Fd>,
    next_id: u64,
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<Option<State>> = Mutex::new(None);

fn inode(fd: RawFd) -> Option<u64> {
    // SAFETY: fstat writes into a zeroed struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_ino)
}

/// The scripted PMU is active until this is dropped (hooks cleared on this thread).
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::SeqCst);
        if let Ok(mut s) = STATE.lock() {
            *s = None;
        }
        // SAFETY: counters opened under the hooks are no longer read through the seam once
        // ACTIVE is false; the caller drops them before or with this guard.
        unsafe { hooks::clear_thread_hooks() };
    }
}

/// Install `script` for the calling thread's opens (reads are answered on any thread).
pub fn install(script: Script) -> Installed {
    if let Ok(mut s) = STATE.lock() {
        *s = Some(State {
            script,
            fds: HashMap::new(),
            next_id: 1,
        });
    }
    ACTIVE.store(true, Ordering::SeqCst);
    // SAFETY: the hooks pass every call they do not claim to the real system call.
    unsafe { hooks::set_thread_hooks(Box::new(ScriptHooks)) };
    Installed(())
}

/// Whether `fd` is a scripted descriptor (a memfd standing for a counter: it has no control
/// page to map, and mapping its empty file would fault on the first load).
pub(crate) fn owns(fd: RawFd) -> bool {
    if !ACTIVE.load(Ordering::Relaxed) {
        return false;
    }
    let Ok(guard) = STATE.lock() else {
        return false;
    };
    let Some(state) = guard.as_ref() else {
        return false;
    };
    inode(fd).is_some_and(|ino| state.fds.get(&fd).map(|f| f.ino) == Some(ino))
}

/// The read seam: `Some` for a scripted descriptor.
pub(crate) fn read(fd: RawFd, buf: &mut [u64]) -> Option<io::Result<usize>> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    let mut guard = STATE.lock().ok()?;
    let state = guard.as_mut()?;
    let ino = inode(fd)?;
    if state.fds.get(&fd).map(|f| f.ino) != Some(ino) {
        return None;
    }
    // Advance this counter, and a leader's members with it (one schedule for the group).
    let mut group = vec![fd];
    group.extend(state.fds[&fd].members.iter().copied());
    let step = state.script.enabled_step_ns;
    for g in &group {
        let Some(f) = state.fds.get(g) else { continue };
        let inc = state
            .script
            .increments
            .get(&(f.tid, f.event.clone()))
            .copied()
            .unwrap_or(0);
        let cov = match f.software {
            true => 1.0,
            false => state.script.coverage.get(&f.tid).copied().unwrap_or(1.0),
        };
        if let Some(f) = state.fds.get_mut(g) {
            // Counts only accrue while the counter is on the PMU: the increment is what ran.
            f.value += inc;
            f.enabled_ns += step;
            f.running_ns += (step as f64 * cov) as u64;
        }
    }
    let lead = &state.fds[&fd];
    let words: Vec<u64> = if lead.group_format {
        let mut w = vec![group.len() as u64, lead.enabled_ns, lead.running_ns];
        w.extend(
            group
                .iter()
                .filter_map(|g| state.fds.get(g))
                .map(|f| f.value),
        );
        w
    } else {
        vec![lead.value, lead.enabled_ns, lead.running_ns]
    };
    if words.len() > buf.len() {
        return Some(Err(io::Error::from_raw_os_error(libc::ENOSPC)));
    }
    buf[..words.len()].copy_from_slice(&words);
    Some(Ok(words.len() * 8))
}

struct ScriptHooks;

fn set_errno(e: c_int) -> c_int {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
    -1
}

impl ScriptHooks {
    fn with_ours<R>(fd: c_int, f: impl FnOnce(&mut Fd) -> R) -> Option<R> {
        let mut guard = STATE.lock().ok()?;
        let state = guard.as_mut()?;
        let ino = inode(fd)?;
        let entry = state.fds.get_mut(&fd)?;
        (entry.ino == ino).then(|| f(entry))
    }
}

impl Hooks for ScriptHooks {
    unsafe fn perf_event_open(
        &mut self,
        attrs: *mut perf_event_attr,
        pid: libc::pid_t,
        cpu: c_int,
        group_fd: c_int,
        flags: c_ulong,
    ) -> c_int {
        // SAFETY: the caller (perf-event2's Builder) passes a valid attr.
        let attr = unsafe { &*attrs };
        let claimed = STATE
            .lock()
            .ok()
            .and_then(|g| g.as_ref().and_then(|s| s.script.claim(attr)));
        let Some((event, software)) = claimed else {
            // SAFETY: forwarding the caller's arguments to the real system call.
            return unsafe { RealHooks.perf_event_open(attrs, pid, cpu, group_fd, flags) };
        };
        let tid = if pid == 0 {
            // SAFETY: gettid has no preconditions.
            unsafe { libc::syscall(libc::SYS_gettid) as i32 }
        } else {
            pid
        };
        // SAFETY: a NUL-terminated name; memfd_create returns a new descriptor or -1.
        let fd =
            unsafe { libc::memfd_create(c"counterpoint-scripted-pmu".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return -1;
        }
        let Some(ino) = inode(fd) else {
            return set_errno(libc::EBADF);
        };
        let Ok(mut guard) = STATE.lock() else {
            return set_errno(libc::EIO);
        };
        let Some(state) = guard.as_mut() else {
            return set_errno(libc::EIO);
        };
        if group_fd >= 0 {
            match state.fds.get_mut(&group_fd) {
                Some(leader) => leader.members.push(fd),
                // A scripted member under a real leader cannot be read as one group.
                None => {
                    // SAFETY: closing the memfd we just made.
                    unsafe { libc::close(fd) };
                    return set_errno(libc::EINVAL);
                }
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        state.fds.insert(
            fd,
            Fd {
                tid,
                event,
                software,
                ino,
                group_format: attr.read_format & FORMAT_GROUP != 0,
                members: Vec::new(),
                value: 0,
                enabled_ns: 0,
                running_ns: 0,
                id,
            },
        );
        fd
    }

    #[allow(non_snake_case)]
    unsafe fn ENABLE(&mut self, fd: c_int, arg: c_uint) -> c_int {
        match Self::with_ours(fd, |_| 0) {
            Some(r) => r,
            // SAFETY: forwarding to the real ioctl.
            None => unsafe { RealHooks.ENABLE(fd, arg) },
        }
    }

    #[allow(non_snake_case)]
    unsafe fn DISABLE(&mut self, fd: c_int, arg: c_uint) -> c_int {
        match Self::with_ours(fd, |_| 0) {
            Some(r) => r,
            // SAFETY: forwarding to the real ioctl.
            None => unsafe { RealHooks.DISABLE(fd, arg) },
        }
    }

    #[allow(non_snake_case)]
    unsafe fn RESET(&mut self, fd: c_int, arg: c_uint) -> c_int {
        match Self::with_ours(fd, |f| {
            f.value = 0;
            0
        }) {
            Some(r) => r,
            // SAFETY: forwarding to the real ioctl.
            None => unsafe { RealHooks.RESET(fd, arg) },
        }
    }

    #[allow(non_snake_case)]
    unsafe fn ID(&mut self, fd: c_int, arg: *mut u64) -> c_int {
        match Self::with_ours(fd, |f| f.id) {
            Some(id) => {
                // SAFETY: perf-event2 passes a pointer to a u64 it owns.
                unsafe { *arg = id };
                0
            }
            // SAFETY: forwarding to the real ioctl.
            None => unsafe { RealHooks.ID(fd, arg) },
        }
    }

    #[allow(non_snake_case)]
    unsafe fn SET_FILTER(&mut self, fd: c_int, arg: *mut c_char) -> c_int {
        // SAFETY: forwarding to the real ioctl.
        unsafe { RealHooks.SET_FILTER(fd, arg) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::{CounterSet, Target};
    use crate::group::ThreadGroup;
    use std::path::Path;

    fn intel() -> PmuTree {
        PmuTree::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pmu/intel"))
    }

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    // One test so the process-wide state is not shared between concurrently running tests.
    #[test]
    fn scripted_groups_counter_sets_and_multiplexing() {
        let me = gettid();
        let tree = intel();
        let script = Script::new("cycles,instructions,mem-transactions", &tree)
            .unwrap()
            .count(me, "cycles", 1000)
            .count(me, "instructions", 1500)
            .count(me, "mem-transactions", 7)
            .coverage(me, 0.25);
        let _pmu = install(script);
        let specs: Vec<_> = parse_event_list("cycles,instructions,mem-transactions", &tree)
            .unwrap()
            .events()
            .cloned()
            .collect();
        let g = ThreadGroup::open(me, &specs).expect("scripted group opens");
        let a = g.read().unwrap();
        let b = g.read().unwrap();
        assert_eq!(a.values[..3], [1000, 1500, 7]);
        assert_eq!(b.values[..3], [2000, 3000, 14]);
        assert_eq!(b.time_enabled_ns, 200_000_000);
        assert_eq!(b.time_running_ns, 50_000_000);
        assert_eq!(b.coverage(), 0.25);

        // The stat path: single counters, scaled by enabled/running, percentage shown.
        let list = parse_event_list("mem-transactions,task-clock", &tree).unwrap();
        let mut set = CounterSet::open(&list, &Target::Threads(vec![me]), &tree).unwrap();
        set.enable().unwrap();
        let r = set.read_all().unwrap();
        let mem = &r[0];
        assert_eq!(mem.spec.name, "mem-transactions");
        let v = mem.value.expect("counting");
        assert_eq!(
            (v.raw, v.time_enabled_ns, v.time_running_ns),
            (7, 100_000_000, 25_000_000)
        );
        assert_eq!(mem.display_value(), Some(28.0));
        assert_eq!(mem.counted_percent(), Some(25.0));
        // task-clock is a real software counter next to the scripted one.
        assert!(r[1].value.is_some());
    }
}
