//! Writing the report: JSON through `write(2)` from a stack buffer, with no allocation, so that
//! the same code runs from `atexit` and from a fatal-signal handler.

use crate::{kind_name, Entry, INIT_MONO_NS, INIT_TSC, RETIRED, SLOTS, THREADS_UNTRACKED};
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

pub static FLUSHED: AtomicBool = AtomicBool::new(false);

/// Report directory from `$COUNTERPOINT_LOCKPROF_OUT` (or the current directory), NUL-padded.
static mut DIR: [u8; 3072] = [0; 3072];
static mut DIR_LEN: usize = 0;

/// Environment variable naming the directory the report is written to.
pub const OUT_ENV: &str = "COUNTERPOINT_LOCKPROF_OUT";

pub(crate) fn init_path() {
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

/// File name of a process's report inside the report directory.
pub fn file_name(pid: u32) -> String {
    format!("lockprof.{pid}.json")
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

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Write the report once. `signal` is the fatal signal when called from the handler: then
/// `dladdr` (not async-signal-safe) is skipped and call sites stay raw addresses.
pub(crate) fn flush(signal: Option<i32>) {
    if FLUSHED.swap(true, Relaxed) {
        return;
    }
    // Calibrate TSC against CLOCK_MONOTONIC over the whole run (at least 20 ms).
    let t0 = INIT_TSC.load(Relaxed);
    let m0 = INIT_MONO_NS.load(Relaxed);
    let mut m1 = mono_ns();
    if signal.is_none() {
        while m1.saturating_sub(m0) < 20_000_000 {
            m1 = mono_ns();
        }
    }
    let t1 = crate::rdtsc();
    let elapsed_ns = m1.saturating_sub(m0).max(1);
    let tsc_per_ns = t1.wrapping_sub(t0) as f64 / elapsed_ns as f64;
    let ns = |ticks: u64| -> u64 {
        if tsc_per_ns > 0.0 {
            (ticks as f64 / tsc_per_ns) as u64
        } else {
            0
        }
    };

    let mut path = [0u8; 3200];
    // SAFETY: DIR is written once at init.
    let (dir, dlen) = unsafe { (&*core::ptr::addr_of!(DIR), DIR_LEN) };
    path[..dlen].copy_from_slice(&dir[..dlen]);
    let mut n = dlen;
    let pid = unsafe { libc::getpid() };
    let mut name = [0u8; 64];
    let nl = {
        let mut c = Cursor {
            buf: &mut name,
            len: 0,
        };
        let _ = write!(c, "/lockprof.{pid}.json");
        c.len
    };
    path[n..n + nl].copy_from_slice(&name[..nl]);
    n += nl;
    path[n] = 0;
    // SAFETY: NUL-terminated path.
    let fd = unsafe {
        libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return;
    }
    let mut w = FdWriter {
        fd,
        buf: [0; 8192],
        len: 0,
    };
    // Exclude thread-exit merges while writing, so no thread is counted twice or missed.
    let locked = crate::retired_lock(signal.is_some());
    let _ = write_report(&mut w, signal, pid, elapsed_ns, tsc_per_ns, &ns);
    if locked {
        crate::retired_unlock();
    }
    w.flush();
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
}

struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
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
    signal: Option<i32>,
    pid: i32,
    elapsed_ns: u64,
    tsc_per_ns: f64,
    ns: &dyn Fn(u64) -> u64,
) -> core::fmt::Result {
    let now = crate::rdtsc();
    write!(w, "{{\"version\":1,\"pid\":{pid},")?;
    match signal {
        Some(s) => write!(w, "\"complete\":false,\"signal\":{s},")?,
        None => write!(w, "\"complete\":true,\"signal\":null,")?,
    }
    write!(
        w,
        "\"elapsed_ns\":{elapsed_ns},\"tsc_per_ns\":{tsc_per_ns:.6},\"pmu\":\"none: no hardware PMU on this machine, no counter deltas inside critical sections\",\"threads_untracked\":{},\"exited_threads_unlisted\":{},\"exited_overflow_acquisitions\":{},",
        THREADS_UNTRACKED.load(Relaxed),
        RETIRED.threads_unlisted.load(Relaxed),
        RETIRED.overflow_events.load(Relaxed)
    )?;
    w.write_str("\"threads\":[")?;
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
    w.write_str("]}\n")
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
    if signal.is_none() {
        symbol(w, site)?;
    }
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
