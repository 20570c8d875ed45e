//! Writing the report: JSON through `write(2)` from a stack buffer, with no allocation, so that
//! the same code runs from `atexit`, from a signal handler and just before `exec`. The format is
//! the `Report` type of `counterpoint-lockprof-report` (checked by the tests: every report the
//! library writes deserializes into it with unknown fields refused).
//!
//! Files: `lockprof.<pid>.json`, created exclusively; a process that already wrote one (an image
//! before `exec`, same pid) writes `lockprof.<pid>.<n>.json` with `segment` n.

use crate::kind_name;
use crate::table::{
    has_activity, rdtsc, Entry, INIT_MONO_NS, INIT_TSC, RETIRED, SLOTS, THREADS_UNTRACKED,
};
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

pub(crate) static FLUSHED: AtomicBool = AtomicBool::new(false);
/// The report was written before an exec whose outcome is unknown (see `flush`).
static EXEC_PENDING: AtomicBool = AtomicBool::new(false);
/// Its path.
static mut EXEC_PATH: [u8; 3200] = [0; 3200];

/// How the process (or this image of it) ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Exit,
    Signal(i32),
    Exec,
    QuickExit,
}

/// A report file written before an exec (removed again if the exec fails).
pub(crate) struct Written {
    path: [u8; 3200],
}

/// Why there are no counter deltas inside critical sections, decided at load.
static mut PMU: [u8; 256] = [0; 256];
static mut PMU_LEN: usize = 0;

/// Where core PMUs appear; the profiler looks here to say truthfully whether one exists.
const PMU_DIR: &core::ffi::CStr = c"/sys/bus/event_source/devices";

fn is_core_pmu(name: &[u8]) -> bool {
    name == b"cpu"
        || name == b"cpu_core"
        || name == b"cpu_atom"
        || name.starts_with(b"armv")
        || name.starts_with(b"arm_cortex")
}

/// Detect the core PMU (constructor time: allocation is fine here) and fix the `pmu` text.
fn init_pmu() {
    let mut found: Option<([u8; 64], usize)> = None;
    let mut readable = false;
    // SAFETY: opendir/readdir/closedir on a NUL-terminated path; entries are read before the
    // next readdir call.
    unsafe {
        let d = libc::opendir(PMU_DIR.as_ptr());
        if !d.is_null() {
            readable = true;
            loop {
                let e = libc::readdir(d);
                if e.is_null() {
                    break;
                }
                let name = core::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes();
                if is_core_pmu(name) {
                    let mut b = [0u8; 64];
                    let n = name.len().min(64);
                    b[..n].copy_from_slice(&name[..n]);
                    found = Some((b, n));
                    break;
                }
            }
            libc::closedir(d);
        }
    }
    let mut buf = [0u8; 256];
    let mut c = Cursor {
        buf: &mut buf,
        len: 0,
    };
    let _ = match (&found, readable) {
        (Some((b, n)), _) => write!(
            c,
            "present ({}): hardware events (cycles, LLC misses) are read inside critical sections when asked for (counterpoint lockprof --events LIST); the default profile times with the TSC only",
            core::str::from_utf8(&b[..*n]).unwrap_or("?")
        ),
        (None, true) => c.write_str(
            "none: no hardware PMU on this machine (no cpu, cpu_core, cpu_atom or armv* PMU in /sys/bus/event_source/devices), so no hardware counter deltas inside critical sections; software events (task-clock, page-faults, context-switches) work with --events",
        ),
        (None, false) => c.write_str(
            "unknown: /sys/bus/event_source/devices is not readable; no hardware counter deltas inside critical sections",
        ),
    };
    let n = c.len;
    // SAFETY: called once from the constructor, before any other thread exists.
    unsafe {
        let p = &mut *core::ptr::addr_of_mut!(PMU);
        p[..n].copy_from_slice(&buf[..n]);
        PMU_LEN = n;
    }
}

fn pmu_text() -> &'static str {
    // SAFETY: written once at load.
    unsafe {
        let p = &*core::ptr::addr_of!(PMU);
        core::str::from_utf8(&p[..PMU_LEN]).unwrap_or("")
    }
}

pub(crate) fn init() {
    init_path();
    init_pmu();
}

/// Report directory from `$COUNTERPOINT_LOCKPROF_OUT` (or the current directory), NUL-padded.
static mut DIR: [u8; 3072] = [0; 3072];
static mut DIR_LEN: usize = 0;

/// Environment variable naming the directory the report is written to.
pub const OUT_ENV: &str = "COUNTERPOINT_LOCKPROF_OUT";

fn init_path() {
    // SAFETY: called once from the constructor, before any other thread exists.
    unsafe {
        let v = libc::getenv(c"COUNTERPOINT_LOCKPROF_OUT".as_ptr());
        let dir: &[u8] = if v.is_null() {
            b"."
        } else {
            core::ffi::CStr::from_ptr(v).to_bytes()
        };
        let n = dir.len().min(3000);
        let d = &mut *core::ptr::addr_of_mut!(DIR);
        d[..n].copy_from_slice(&dir[..n]);
        DIR_LEN = n;
    }
}

struct FdWriter {
    fd: i32,
    buf: [u8; 8192],
    len: usize,
}

impl FdWriter {
    fn flush(&mut self) {
        let mut off = 0;
        while off < self.len {
            // SAFETY: writing our own initialised buffer.
            let n = unsafe {
                libc::write(
                    self.fd,
                    self.buf[off..].as_ptr() as *const libc::c_void,
                    self.len - off,
                )
            };
            if n <= 0 {
                break;
            }
            off += n as usize;
        }
        self.len = 0;
    }
}

impl Write for FdWriter {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for chunk in s.as_bytes().chunks(4096) {
            if self.len + chunk.len() > self.buf.len() {
                self.flush();
            }
            self.buf[self.len..self.len + chunk.len()].copy_from_slice(chunk);
            self.len += chunk.len();
        }
        Ok(())
    }
}

fn write_json_str(w: &mut FdWriter, bytes: &[u8]) -> core::fmt::Result {
    w.write_char('"')?;
    for &b in bytes {
        match b {
            b'"' => w.write_str("\\\"")?,
            b'\\' => w.write_str("\\\\")?,
            0..=0x1f | 0x7f..=0xff => write!(w, "\\u{:04x}", b)?,
            _ => w.write_char(b as char)?,
        }
    }
    w.write_char('"')
}

use crate::lifecycle::mono_ns;

/// The shortest interval the TSC rate is measured over at exit, when the process took locks.
const MIN_CALIBRATION_NS: u64 = 2_000_000;

/// The report format's version (2: `segment`, `ended_by`, `program`; 3: minima, histograms,
/// owner changes, condition-variable notifications, first-seen stacks, `_exit`).
pub const FORMAT_VERSION: u32 = 3;

/// Write the report once (again after `unflush`). From a signal handler `dladdr` (not
/// async-signal-safe) is skipped and call sites stay raw addresses. Before an exec, a process
/// that recorded nothing writes nothing.
pub(crate) fn flush(ending: Ending) -> Option<Written> {
    if FLUSHED.swap(true, Relaxed) {
        // Already written. Only a report written before an exec that evidently failed (this
        // image is still running: the `execl` family returns to its caller directly) is
        // replaced, by one with everything up to now (the tables are cumulative).
        if !EXEC_PENDING.swap(false, Relaxed) {
            return None;
        }
        // SAFETY: EXEC_PATH was written by the flush that set EXEC_PENDING; NUL-terminated.
        unsafe { libc::unlink(core::ptr::addr_of!(EXEC_PATH) as *const libc::c_char) };
    }
    if ending == Ending::Exec && !has_activity() {
        FLUSHED.store(false, Relaxed);
        return None;
    }
    let signal = match ending {
        Ending::Signal(s) => Some(s),
        _ => None,
    };
    // Calibrate TSC against CLOCK_MONOTONIC over the whole run. The elapsed time is the
    // program's own, read before any wait. A process that took locks and exits before
    // `MIN_CALIBRATION_NS` waits out the rest (a read of the clock jitters by about 100 ns:
    // 5e-5 of a 2 ms interval); one that took none has no time to convert and does not wait
    // (`lockprof -- make` must not hold every lock-free child: it held each 20 ms until
    // session 21).
    let t0 = INIT_TSC.load(Relaxed);
    let m0 = INIT_MONO_NS.load(Relaxed);
    let elapsed_ns = mono_ns().saturating_sub(m0).max(1);
    if matches!(ending, Ending::Exit | Ending::QuickExit) && crate::table::has_activity() {
        while mono_ns().saturating_sub(m0) < MIN_CALIBRATION_NS {}
    }
    let (t1, m1) = crate::lifecycle::clock_pair();
    let tsc_per_ns = t1.wrapping_sub(t0) as f64 / m1.saturating_sub(m0).max(1) as f64;
    let ns = |ticks: u64| -> u64 {
        if tsc_per_ns > 0.0 {
            (ticks as f64 / tsc_per_ns) as u64
        } else {
            0
        }
    };

    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut written = Written { path: [0u8; 3200] };
    let mut fd = -1;
    let mut segment = 0u32;
    while segment < 1000 {
        if !report_path(&mut written.path, pid, segment) {
            break;
        }
        // SAFETY: NUL-terminated path.
        fd = unsafe {
            libc::open(
                written.path.as_ptr() as *const libc::c_char,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o644,
            )
        };
        // SAFETY: errno of this thread.
        if fd >= 0 || unsafe { *libc::__errno_location() } != libc::EEXIST {
            break;
        }
        segment += 1;
    }
    if fd < 0 {
        return None;
    }
    let mut w = FdWriter {
        fd,
        buf: [0; 8192],
        len: 0,
    };
    // Exclude thread-exit merges while writing, so no thread is counted twice or missed.
    let locked = crate::table::retired_lock(signal.is_some());
    let _ = write_report(
        &mut w,
        ending,
        Header {
            pid,
            segment,
            elapsed_ns,
            tsc_per_ns,
        },
        &ns,
    );
    if locked {
        crate::table::retired_unlock();
    }
    w.flush();
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    if ending == Ending::Exec {
        // SAFETY: only the flushing thread (the one that set FLUSHED) writes it.
        unsafe { *core::ptr::addr_of_mut!(EXEC_PATH) = written.path };
        EXEC_PENDING.store(true, Relaxed);
    }
    Some(written)
}

/// Undo a flush whose exec failed: remove the file and let a later flush write it again.
pub(crate) fn unflush(w: Written) {
    EXEC_PENDING.store(false, Relaxed);
    // SAFETY: NUL-terminated path written by flush.
    unsafe { libc::unlink(w.path.as_ptr() as *const libc::c_char) };
    FLUSHED.store(false, Relaxed);
}

/// `<dir>/lockprof.<pid>.json` (segment 0) or `<dir>/lockprof.<pid>.<segment>.json`,
/// NUL-terminated, into `path`; false if it does not fit.
fn report_path(path: &mut [u8; 3200], pid: i32, segment: u32) -> bool {
    // SAFETY: DIR is written once at init.
    let (dir, dlen) = unsafe { (&*core::ptr::addr_of!(DIR), DIR_LEN) };
    let mut c = Cursor {
        buf: &mut path[..],
        len: 0,
    };
    // The directory is bytes (any path the OS accepts), the rest ASCII.
    let ok = c.write_bytes(&dir[..dlen]).is_ok()
        && if segment == 0 {
            write!(c, "/lockprof.{pid}.json\0").is_ok()
        } else {
            write!(c, "/lockprof.{pid}.{segment}.json\0").is_ok()
        };
    ok
}

struct Header {
    pid: i32,
    segment: u32,
    elapsed_ns: u64,
    tsc_per_ns: f64,
}

struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
}
impl Cursor<'_> {
    fn write_bytes(&mut self, b: &[u8]) -> core::fmt::Result {
        if self.len + b.len() > self.buf.len() {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
        Ok(())
    }
}

impl Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let b = s.as_bytes();
        if self.len + b.len() > self.buf.len() {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
        Ok(())
    }
}

fn write_report(
    w: &mut FdWriter,
    ending: Ending,
    h: Header,
    ns: &dyn Fn(u64) -> u64,
) -> core::fmt::Result {
    let now = rdtsc();
    let signal = match ending {
        Ending::Signal(s) => Some(s),
        _ => None,
    };
    write!(
        w,
        "{{\"version\":{},\"pid\":{},\"segment\":{},",
        FORMAT_VERSION, h.pid, h.segment
    )?;
    match ending {
        Ending::Signal(s) => write!(
            w,
            "\"ended_by\":\"signal\",\"complete\":false,\"signal\":{s},"
        )?,
        Ending::Exit => w.write_str("\"ended_by\":\"exit\",\"complete\":true,\"signal\":null,")?,
        Ending::Exec => w.write_str("\"ended_by\":\"exec\",\"complete\":true,\"signal\":null,")?,
        Ending::QuickExit => {
            w.write_str("\"ended_by\":\"_exit\",\"complete\":true,\"signal\":null,")?
        }
    }
    w.write_str("\"program\":")?;
    let mut exe = [0u8; 1024];
    // SAFETY: readlink into our buffer (async-signal-safe); it does not NUL-terminate.
    let n = unsafe {
        libc::readlink(
            c"/proc/self/exe".as_ptr(),
            exe.as_mut_ptr() as *mut libc::c_char,
            exe.len(),
        )
    };
    if n > 0 {
        write_json_str(w, &exe[..n as usize])?;
    } else {
        w.write_str("null")?;
    }
    let (elapsed_ns, tsc_per_ns) = (h.elapsed_ns, h.tsc_per_ns);
    write!(
        w,
        ",\"elapsed_ns\":{elapsed_ns},\"tsc_per_ns\":{tsc_per_ns:.6},\"pmu\":"
    )?;
    write_json_str(w, pmu_text().as_bytes())?;
    write!(
        w,
        ",\"threads_untracked\":{},\"exited_threads_unlisted\":{},\"exited_overflow_acquisitions\":{},",
        THREADS_UNTRACKED.load(Relaxed),
        RETIRED.threads_unlisted.load(Relaxed),
        RETIRED.overflow_events.load(Relaxed)
    )?;
    w.write_str("\"events\":[")?;
    for (i, name) in crate::events::names().enumerate() {
        if i > 0 {
            w.write_char(',')?;
        }
        write_json_str(w, name)?;
    }
    w.write_str("],\"events_error\":")?;
    let (e1, e2) = (crate::events::error(), crate::events::open_error());
    match (e1.is_empty(), e2.is_empty()) {
        (true, true) => w.write_str("null")?,
        (false, _) => write_json_str(w, e1)?,
        (true, false) => write_json_str(w, e2)?,
    }
    w.write_str(",\"threads\":[")?;
    let mut first = true;
    for s in SLOTS.iter() {
        if !s.in_use.load(Relaxed) {
            continue;
        }
        let total = now.wrapping_sub(s.start_tsc.load(Relaxed));
        let locking = s.locking.load(Relaxed);
        let unlocking = s.unlocking.load(Relaxed);
        let held = s
            .held
            .load(Relaxed)
            .saturating_sub(s.nested_calls.load(Relaxed));
        let free = total.saturating_sub(locking + unlocking + held);
        if !first {
            w.write_char(',')?;
        }
        first = false;
        write!(
            w,
            "{{\"tid\":{},\"exited\":false,\"total_ns\":{},\"free_ns\":{},\"locking_ns\":{},\"held_ns\":{},\"unlocking_ns\":{},\"lock_calls\":{},\"overflow_events\":{},\"unmatched_unlocks\":{}}}",
            s.tid.load(Relaxed),
            ns(total),
            ns(free),
            ns(locking),
            ns(held),
            ns(unlocking),
            s.lock_calls.load(Relaxed),
            s.overflow_events.load(Relaxed),
            s.unmatched_unlocks.load(Relaxed)
        )?;
    }
    for t in RETIRED.threads[..RETIRED.nthreads.load(Relaxed)].iter() {
        let total = t.total.load(Relaxed);
        let (locking, unlocking, held) = (
            t.locking.load(Relaxed),
            t.unlocking.load(Relaxed),
            t.held.load(Relaxed),
        );
        if !first {
            w.write_char(',')?;
        }
        first = false;
        write!(
            w,
            "{{\"tid\":{},\"exited\":true,\"total_ns\":{},\"free_ns\":{},\"locking_ns\":{},\"held_ns\":{},\"unlocking_ns\":{},\"lock_calls\":{},\"overflow_events\":{},\"unmatched_unlocks\":{}}}",
            t.tid.load(Relaxed),
            ns(total),
            ns(total.saturating_sub(locking + unlocking + held)),
            ns(locking),
            ns(held),
            ns(unlocking),
            t.lock_calls.load(Relaxed),
            t.overflow_events.load(Relaxed),
            t.unmatched_unlocks.load(Relaxed)
        )?;
    }
    w.write_str("],\"entries\":[")?;
    let mut first = true;
    for e in RETIRED.entries.iter() {
        write_entry(w, e, None, signal, ns, &mut first)?;
    }
    for s in SLOTS.iter() {
        if !s.in_use.load(Relaxed) {
            continue;
        }
        let tid = s.tid.load(Relaxed);
        for e in s.entries.iter() {
            write_entry(w, e, Some(tid), signal, ns, &mut first)?;
        }
    }
    write!(
        w,
        "],\"locks_untracked\":{},\"locks\":[",
        crate::locks::LOCKS_UNTRACKED.load(Relaxed)
    )?;
    let mut first = true;
    for l in crate::locks::LOCKS.iter() {
        let lock = l.lock.load(Relaxed);
        if lock == 0 {
            continue;
        }
        if !first {
            w.write_char(',')?;
        }
        first = false;
        write!(
            w,
            "{{\"lock\":\"{lock:#x}\",\"first_tid\":{},\"created\":{},\"frames\":[",
            l.first_tid.load(Relaxed),
            l.created.load(Relaxed) != 0
        )?;
        let n = l.nframes.load(Relaxed).min(crate::locks::MAX_FRAMES);
        for (i, f) in l.frames[..n].iter().enumerate() {
            let addr = f.load(Relaxed);
            if i > 0 {
                w.write_char(',')?;
            }
            write!(w, "{{\"addr\":\"{addr:#x}\"")?;
            where_is(w, addr, signal)?;
            w.write_char('}')?;
        }
        w.write_str("]}")?;
    }
    w.write_str("]}\n")
}

/// Object, offset and (outside a signal handler) dynamic symbol of a code address.
fn where_is(w: &mut FdWriter, addr: usize, signal: Option<i32>) -> core::fmt::Result {
    if signal.is_none() {
        symbol(w, addr)
    } else if let Some((object, offset)) = crate::objects::lookup(addr) {
        // No dladdr in a signal handler: the startup snapshot gives object and offset.
        w.write_str(",\"object\":")?;
        write_json_str(w, object)?;
        write!(w, ",\"object_offset\":\"{offset:#x}\"")
    } else {
        Ok(())
    }
}

/// A histogram as `[[bucket, count], ...]`, empty buckets left out, with its pending sample
/// (see `table::hist_defer`) counted.
fn write_hist(
    w: &mut FdWriter,
    h: &crate::table::Hist,
    pending: &core::sync::atomic::AtomicU64,
) -> core::fmt::Result {
    let p = pending.load(Relaxed);
    let extra = if p != 0 {
        Some(crate::table::hist_bucket(p - 1))
    } else {
        None
    };
    w.write_char('[')?;
    let mut first = true;
    for (i, b) in h.iter().enumerate() {
        let c = b.load(Relaxed) + u32::from(extra == Some(i));
        if c == 0 {
            continue;
        }
        if !first {
            w.write_char(',')?;
        }
        first = false;
        write!(w, "[{i},{c}]")?;
    }
    w.write_char(']')
}

/// One entry; `tid` is `None` for entries merged from exited threads.
fn write_entry(
    w: &mut FdWriter,
    e: &Entry,
    tid: Option<u64>,
    signal: Option<i32>,
    ns: &dyn Fn(u64) -> u64,
    first: &mut bool,
) -> core::fmt::Result {
    let lock = e.lock.load(core::sync::atomic::Ordering::Acquire);
    if lock == 0 {
        return Ok(());
    }
    let site = e.site.load(Relaxed);
    if !*first {
        w.write_char(',')?;
    }
    *first = false;
    match tid {
        Some(t) => write!(w, "{{\"tid\":{t},")?,
        None => w.write_str("{\"tid\":null,")?,
    }
    write!(
        w,
        "\"lock\":\"{lock:#x}\",\"site\":\"{site:#x}\",\"kind\":\"{}\",\"acquisitions\":{},\"contentions\":{},\"wait_total_ns\":{},\"wait_max_ns\":{},\"hold_count\":{},\"hold_total_ns\":{},\"hold_max_ns\":{}",
        kind_name(e.kind.load(Relaxed)),
        e.acquisitions.load(Relaxed),
        e.contentions.load(Relaxed),
        ns(e.wait_total.load(Relaxed)),
        ns(e.wait_max.load(Relaxed)),
        e.hold_count.load(Relaxed),
        ns(e.hold_total.load(Relaxed)),
        ns(e.hold_max.load(Relaxed)),
    )?;
    write!(
        w,
        ",\"wait_min_ns\":{},\"hold_min_ns\":{},\"owner_changes\":{},\"wait_hist\":",
        ns(e.wait_min.load(Relaxed)),
        ns(e.hold_min.load(Relaxed)),
        e.owner_changes.load(Relaxed),
    )?;
    write_hist(w, &e.wait_hist, &e.wait_pending)?;
    w.write_str(",\"hold_hist\":")?;
    write_hist(w, &e.hold_hist, &e.hold_pending)?;
    w.write_str(",\"event_deltas\":[")?;
    let n = crate::events::COUNT.load(Relaxed);
    for (i, d) in e.ev_delta.iter().take(n).enumerate() {
        if i > 0 {
            w.write_char(',')?;
        }
        write!(w, "{}", d.load(Relaxed))?;
    }
    w.write_char(']')?;
    where_is(w, site, signal)?;
    w.write_char('}')
}

/// Symbolize a call site with `dladdr`: the dynamic symbol (if any), the object and the offset
/// inside it (so the driver can ask `addr2line` for static functions `dladdr` cannot see).
fn symbol(w: &mut FdWriter, site: usize) -> core::fmt::Result {
    // SAFETY: dladdr fills the struct or returns 0.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    if unsafe { libc::dladdr(site as *const libc::c_void, &mut info) } == 0 {
        return Ok(());
    }
    if !info.dli_fname.is_null() {
        w.write_str(",\"object\":")?;
        // SAFETY: NUL-terminated string from the loader.
        write_json_str(
            w,
            unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }.to_bytes(),
        )?;
        write!(
            w,
            ",\"object_offset\":\"{:#x}\"",
            site - info.dli_fbase as usize
        )?;
    }
    if !info.dli_sname.is_null() {
        w.write_str(",\"symbol\":")?;
        write_json_str(
            w,
            unsafe { core::ffi::CStr::from_ptr(info.dli_sname) }.to_bytes(),
        )?;
        write!(
            w,
            ",\"symbol_offset\":\"{:#x}\"",
            site - info.dli_saddr as usize
        )?;
    }
    Ok(())
}
