//! Per-request attribution: segments, stitching across threads, the C ABI. Deterministic:
//! page faults are forced by touching fresh anonymous pages, so each assertion is a lower bound
//! on work the test did itself, never a time.

use counterpoint_selfmon::request::{self, requests, take_requests, Request};
use counterpoint_selfmon::{init, SelfmonError};
use std::sync::Mutex;

// The request table is process-wide: these tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

const EVENTS: &str = "task-clock,page-faults";
const PAGES: usize = 64;

/// Whether counters open here (perf_event_paranoid may forbid even software events).
fn counting() -> bool {
    init(EVENTS).is_ok()
}

/// Touch `PAGES` fresh anonymous pages: at least one page fault each.
fn touch_fresh_pages() {
    let page = 4096;
    let len = PAGES * page;
    // SAFETY: a private anonymous mapping, written within its length, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        for i in 0..PAGES {
            std::ptr::write_volatile((p as *mut u8).add(i * page), 1);
        }
        libc::munmap(p, len);
    }
}

fn find(id: u64) -> request::RequestRecord {
    requests()
        .into_iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("request {id} missing"))
}

#[test]
fn one_segment_gets_its_threads_deltas() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let on = counting();
    {
        let _r = Request::begin(1001, "q-one").unwrap();
        touch_fresh_pages();
    }
    let r = find(1001);
    assert_eq!((r.class.as_str(), r.segments, r.threads), ("q-one", 1, 1));
    assert_eq!(r.open_segments, 0);
    // One segment: its wall time is the time served.
    assert_eq!(r.wall_ns, r.served_ns);
    if on {
        assert!(r.counts["page-faults"] >= PAGES as u64, "{r:?}");
        assert_eq!(r.lost["page-faults"], 0);
        assert!(r.counts["task-clock"] > 0);
    } else {
        eprintln!("counters unavailable here: only segments and times checked");
    }
}

#[test]
fn a_request_that_hops_threads_is_stitched_by_id() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let on = counting();
    // Begun on this thread, handed to a worker, finished back here: three segments, two threads.
    request::begin(2002, "hop").unwrap();
    touch_fresh_pages();
    request::end(2002).unwrap();
    std::thread::spawn(|| {
        let _r = Request::begin(2002, "ignored: the first class stays").unwrap();
        touch_fresh_pages();
    })
    .join()
    .unwrap();
    request::begin(2002, "hop").unwrap();
    touch_fresh_pages();
    request::end(2002).unwrap();
    // A request that did nothing, for contrast.
    request::begin(2003, "idle").unwrap();
    request::end(2003).unwrap();

    let r = find(2002);
    assert_eq!((r.class.as_str(), r.segments, r.threads), ("hop", 3, 2));
    assert!(r.wall_ns >= r.served_ns, "{r:?}");
    if on {
        assert!(r.counts["page-faults"] >= 3 * PAGES as u64, "{r:?}");
        let idle = find(2003);
        assert!(idle.counts["page-faults"] < PAGES as u64, "{idle:?}");
    }
}

#[test]
fn mismatched_boundaries_are_refused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(matches!(
        request::end(3003),
        Err(SelfmonError::BadRequest(3003, _))
    ));
    request::begin(3004, "x").unwrap();
    let twice = request::begin(3004, "x").unwrap_err();
    assert!(twice.to_string().contains("already open"), "{twice}");
    // Another thread cannot end this thread's segment: it cannot read this thread's counters.
    let other = std::thread::spawn(|| request::end(3004)).join().unwrap();
    assert!(other.is_err());
    request::end(3004).unwrap();
}

#[test]
fn take_drains_finished_requests_only() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = take_requests();
    request::begin(4004, "open").unwrap();
    {
        let _r = Request::begin(4005, "done").unwrap();
    }
    let taken = take_requests();
    assert!(taken.iter().any(|r| r.id == 4005));
    assert!(!taken.iter().any(|r| r.id == 4004), "open request taken");
    assert_eq!(find(4004).open_segments, 1);
    request::end(4004).unwrap();
    assert!(take_requests().iter().any(|r| r.id == 4004));
}

#[test]
fn the_c_abi_writes_json_lines() {
    use counterpoint_selfmon::ffi::{
        cp_last_error, cp_request_begin, cp_request_end, cp_requests_take,
    };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = take_requests();
    let dir = tempfile::tempdir().unwrap();
    let path = std::ffi::CString::new(dir.path().join("r.jsonl").to_str().unwrap()).unwrap();
    // SAFETY: valid C strings for the calls' duration.
    unsafe {
        assert_eq!(cp_request_begin(5005, c"Q6".as_ptr()), 0);
        touch_fresh_pages();
        assert_eq!(cp_request_end(5005), 0);
        assert_eq!(cp_request_end(5005), -1);
        let why = std::ffi::CStr::from_ptr(cp_last_error()).to_string_lossy();
        assert!(why.contains("request 5005"), "{why}");
        assert_eq!(cp_requests_take(path.as_ptr()), 1);
    }
    let text = std::fs::read_to_string(dir.path().join("r.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], 5005);
    assert_eq!(lines[0]["class"], "Q6");
    assert_eq!(lines[0]["segments"], 1);
}
