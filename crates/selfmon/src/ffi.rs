//! The C ABI (`include/counterpoint.h`). Every entry point returns 0 (or a handle ≥ 0) on
//! success and -1 on failure, with the reason in `cp_last_error()`; no panic crosses the
//! boundary.

use crate::counter::SelfmonError;
use crate::region;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::io::Write;
use std::sync::Mutex;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = c);
}

/// Run `f` at the C boundary: an error (or a caught panic) becomes -1 and the thread's last
/// error; a success clears it, as the header promises ("empty string if it did not").
fn guarded(f: impl FnOnce() -> Result<c_int, SelfmonError>) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => {
            // Only a write when there is something to clear: regions are the hot path.
            let _ = LAST_ERROR.try_with(|e| {
                if !e.borrow().is_empty() {
                    *e.borrow_mut() = CString::default();
                }
            });
            v
        }
        Ok(Err(e)) => {
            set_error(&e.to_string());
            -1
        }
        Err(_) => {
            set_error("internal error (panic caught at the C boundary)");
            -1
        }
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn opt_str<'a>(p: *const c_char) -> Result<Option<&'a str>, SelfmonError> {
    if p.is_null() {
        return Ok(None);
    }
    CStr::from_ptr(p)
        .to_str()
        .map(Some)
        .map_err(|_| SelfmonError::BadName)
}

/// Choose the events (perf syntax; NULL = "task-clock"). Call before the first region.
///
/// # Safety
/// `events` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cp_init(events: *const c_char) -> c_int {
    guarded(|| {
        let list = opt_str(events)?.unwrap_or(region::DEFAULT_EVENTS);
        region::init(list)?;
        Ok(0)
    })
}

/// The last error on this thread (empty if none). Valid until the next call on this thread.
#[no_mangle]
pub extern "C" fn cp_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// Begin a region; returns its handle (≥ 0) or -1.
///
/// # Safety
/// `name` is a NUL-terminated string (it is copied).
#[no_mangle]
pub unsafe extern "C" fn cp_region_begin(name: *const c_char) -> c_int {
    guarded(|| {
        let name = opt_str(name)?.ok_or(SelfmonError::BadName)?;
        let h = region::begin(name).ok_or(SelfmonError::BadHandle(-1))?;
        c_int::try_from(h).map_err(|_| SelfmonError::BadHandle(h as i64))
    })
}

/// End the region `handle` (and any still open inside it).
#[no_mangle]
pub extern "C" fn cp_region_end(handle: c_int) -> c_int {
    guarded(|| {
        let h = usize::try_from(handle).map_err(|_| SelfmonError::BadHandle(handle.into()))?;
        region::end(h)?;
        Ok(0)
    })
}

/// Begin a segment of request `id` (class `class`, copied; NULL = "") on the calling thread: one
/// counter read. A request that moves to another thread is ended here and begun there with the
/// same id; its segments are stitched by id.
///
/// # Safety
/// `class` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cp_request_begin(id: u64, class: *const c_char) -> c_int {
    guarded(|| {
        let class = opt_str(class)?.unwrap_or("");
        crate::request::begin(id, class)?;
        Ok(0)
    })
}

/// End the calling thread's segment of request `id`: one counter read, deltas to the request.
#[no_mangle]
pub extern "C" fn cp_request_end(id: u64) -> c_int {
    guarded(|| {
        crate::request::end(id)?;
        Ok(0)
    })
}

/// Write the finished requests as JSON lines to `path` (NULL = stdout; appended to a file) and
/// forget them; returns how many were written.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cp_requests_take(path: *const c_char) -> c_int {
    guarded(|| {
        let path = opt_str(path)?;
        let done = crate::request::take_requests();
        let text = crate::request::to_json_lines(&done);
        let res = match path {
            Some(p) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .and_then(|mut f| f.write_all(text.as_bytes())),
            None => std::io::stdout().write_all(text.as_bytes()),
        };
        res.map_err(|source| SelfmonError::Write {
            path: path.unwrap_or("stdout").into(),
            source,
        })?;
        Ok(c_int::try_from(done.len()).unwrap_or(c_int::MAX))
    })
}

fn write_to(path: Option<&str>, text: &str, default_stderr: bool) -> Result<c_int, SelfmonError> {
    let res = match path {
        Some(p) => std::fs::write(p, text),
        None if default_stderr => std::io::stderr().write_all(text.as_bytes()),
        None => std::io::stdout().write_all(text.as_bytes()),
    };
    res.map_err(|source| SelfmonError::Write {
        path: path
            .unwrap_or(if default_stderr { "stderr" } else { "stdout" })
            .into(),
        source,
    })?;
    Ok(0)
}

/// Write the table report to `path` (NULL = stderr).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cp_report(path: *const c_char) -> c_int {
    guarded(|| write_to(opt_str(path)?, &region::report().to_table(), true))
}

/// Write the JSON report to `path` (NULL = stdout).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cp_report_json(path: *const c_char) -> c_int {
    guarded(|| write_to(opt_str(path)?, &region::report().to_json(), false))
}

/// The at-exit target: the fork generation that registered it and the JSON path (if any).
static AT_EXIT_JSON: Mutex<Option<(u64, Option<String>)>> = Mutex::new(None);

extern "C" fn report_at_exit_hook() {
    let _ = std::panic::catch_unwind(|| {
        // try_lock: in a forked child a parent thread may have held it (it would never unlock).
        let target = AT_EXIT_JSON.try_lock().ok().and_then(|g| g.clone());
        let Some((generation, json_path)) = target else {
            return;
        };
        // A forked child inherits the registration but not the request: it would print the
        // parent's report again over the parent's file. It reports only if it asked itself.
        if generation != region::fork_generation() {
            return;
        }
        let r = region::report();
        let _ = std::io::stderr().write_all(r.to_table().as_bytes());
        if let Some(p) = json_path {
            if let Err(e) = std::fs::write(&p, r.to_json()) {
                let _ = writeln!(std::io::stderr(), "counterpoint selfmon: writing {p}: {e}");
            }
        }
    });
}

/// At process exit, print the table on stderr and, if `json_path` is not NULL, write the JSON.
/// A child created by `fork` does not report at exit unless it calls this itself (then to the
/// path it gives).
///
/// # Safety
/// `json_path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cp_report_at_exit(json_path: *const c_char) -> c_int {
    guarded(|| {
        let path = opt_str(json_path)?.map(str::to_string);
        let first = {
            let mut g = AT_EXIT_JSON
                .lock()
                .map_err(|_| SelfmonError::BadHandle(-1))?;
            let first = g.is_none();
            *g = Some((region::fork_generation(), path));
            first
        };
        if first {
            // SAFETY: registering a plain extern "C" fn with atexit.
            if libc::atexit(report_at_exit_hook) != 0 {
                return Err(SelfmonError::Write {
                    path: "atexit".into(),
                    source: std::io::Error::other("atexit registration failed"),
                });
            }
        }
        Ok(0)
    })
}

/// Rust callers: the same at-exit report.
pub fn report_at_exit(json_path: Option<&str>) -> Result<(), SelfmonError> {
    let c = json_path.map(|p| CString::new(p).map_err(|_| SelfmonError::BadName));
    let c = c.transpose()?;
    // SAFETY: c is NULL or a valid C string for the duration of the call.
    let rc = unsafe { cp_report_at_exit(c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())) };
    if rc == 0 {
        Ok(())
    } else {
        Err(SelfmonError::Write {
            path: "atexit".into(),
            source: std::io::Error::other("registration failed"),
        })
    }
}
