//! Per-request attribution (seed 000 §2.2): counter deltas of the thread serving a request are
//! attributed to that request, by id.
//!
//! A *segment* is the stretch between `begin(id, class)` and `end(id)` on one thread. Each
//! boundary is one read of the thread's counters on the regions' read path (the control page
//! where the kernel allows `rdpmc`, else `read(2)`); the segment's deltas are added to the
//! request with that id. A request that hops threads (an event loop handing it to a worker, a
//! thread pool resuming it) is stitched by id: end the segment on the old thread, begin one with
//! the same id on the new thread. Its wall time runs from its first begin to its last end; its
//! counts are the sum over segments; `threads` says how many threads served it. A segment must
//! end on the thread that began it (only that thread can read its own counters).
//!
//! Finished requests stay in a global table until [`take_requests`] drains it (servers call it
//! periodically so the table stays small).

use crate::counter::SelfmonError;
use crate::page::Reading;
use crate::region::{event_names, read_thread_counters, region_delta};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Instant;

/// One request, stitched over its segments.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequestRecord {
    /// The caller's request id.
    pub id: u64,
    /// Its class (template, endpoint...) as given at its first begin.
    pub class: String,
    /// Segments that ended.
    pub segments: u64,
    /// Distinct threads that served it.
    pub threads: usize,
    /// Segments still open (begun, not yet ended) when the record was taken.
    pub open_segments: u64,
    /// First begin to last end.
    pub wall_ns: u64,
    /// Sum of the segments' own wall times (time a thread was serving it).
    pub served_ns: u64,
    /// Counter deltas summed over segments, by event.
    pub counts: BTreeMap<String, u64>,
    /// Per event, segments whose delta was lost (failed read, count went backwards).
    pub lost: BTreeMap<String, u64>,
}

struct Entry {
    class: String,
    first_begin: Instant,
    last_end: Option<Instant>,
    segments: u64,
    open: u64,
    served_ns: u64,
    tids: BTreeSet<i64>,
    counts: Vec<u64>,
    lost: Vec<u64>,
}

static TABLE: Mutex<Option<HashMap<u64, Entry>>> = Mutex::new(None);

struct OpenSegment {
    id: u64,
    start: Instant,
    start_counts: Vec<Option<Reading>>,
}

thread_local! {
    static OPEN: RefCell<Vec<OpenSegment>> = const { RefCell::new(Vec::new()) };
}

thread_local! {
    // The thread id, asked once per thread (a system call per boundary would double its cost).
    static TID: i64 = {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) }
    };
}

fn gettid() -> i64 {
    TID.try_with(|t| *t).unwrap_or(-1)
}

/// Begin a segment of request `id` (class `class`) on the calling thread: one counter read.
/// A request already open on this thread is refused (end it first).
pub fn begin(id: u64, class: &str) -> Result<(), SelfmonError> {
    let already = OPEN
        .try_with(|o| o.borrow().iter().any(|s| s.id == id))
        .map_err(|_| SelfmonError::BadRequest(id, "thread is exiting"))?;
    if already {
        return Err(SelfmonError::BadRequest(
            id,
            "a segment of it is already open on this thread",
        ));
    }
    let start_counts = read_thread_counters().unwrap_or_default();
    let start = Instant::now();
    {
        let mut t = TABLE
            .lock()
            .map_err(|_| SelfmonError::BadRequest(id, "request table poisoned"))?;
        let e = t
            .get_or_insert_with(HashMap::new)
            .entry(id)
            .or_insert_with(|| Entry {
                class: class.to_string(),
                first_begin: start,
                last_end: None,
                segments: 0,
                open: 0,
                served_ns: 0,
                tids: BTreeSet::new(),
                counts: vec![0; start_counts.len()],
                lost: vec![0; start_counts.len()],
            });
        e.open += 1;
        e.tids.insert(gettid());
    }
    OPEN.try_with(|o| {
        o.borrow_mut().push(OpenSegment {
            id,
            start,
            start_counts,
        })
    })
    .map_err(|_| SelfmonError::BadRequest(id, "thread is exiting"))
}

/// End the calling thread's segment of request `id`: one counter read; the deltas go to the
/// request.
pub fn end(id: u64) -> Result<(), SelfmonError> {
    let seg = OPEN
        .try_with(|o| {
            let mut o = o.borrow_mut();
            let i = o.iter().position(|s| s.id == id)?;
            Some(o.remove(i))
        })
        .ok()
        .flatten()
        .ok_or(SelfmonError::BadRequest(
            id,
            "no segment of it is open on this thread",
        ))?;
    let counts = read_thread_counters().unwrap_or_default();
    let now = Instant::now();
    let mut t = TABLE
        .lock()
        .map_err(|_| SelfmonError::BadRequest(id, "request table poisoned"))?;
    let Some(e) = t.get_or_insert_with(HashMap::new).get_mut(&id) else {
        // Drained by take_requests while this segment was open: the segment is dropped.
        return Err(SelfmonError::BadRequest(
            id,
            "its record was taken while the segment was open",
        ));
    };
    e.open = e.open.saturating_sub(1);
    e.segments += 1;
    let ns = u64::try_from(now.duration_since(seg.start).as_nanos()).unwrap_or(u64::MAX);
    e.served_ns = e.served_ns.saturating_add(ns);
    e.last_end = Some(e.last_end.map_or(now, |l| l.max(now)));
    let n = counts.len().min(seg.start_counts.len());
    // A thread whose counters failed to open reads nothing: the sizes are aligned here.
    if e.counts.len() < n {
        e.counts.resize(n, 0);
        e.lost.resize(n, 0);
    }
    for (i, (a, b)) in seg.start_counts.iter().zip(&counts).enumerate() {
        match region_delta(*a, *b) {
            Some(d) => e.counts[i] = e.counts[i].saturating_add(d),
            None => e.lost[i] += 1,
        }
    }
    Ok(())
}

fn record(id: u64, e: &Entry, names: &[String]) -> RequestRecord {
    let wall_ns = e.last_end.map_or(0, |l| {
        u64::try_from(l.duration_since(e.first_begin).as_nanos()).unwrap_or(u64::MAX)
    });
    let by_name = |v: &[u64]| -> BTreeMap<String, u64> {
        names.iter().cloned().zip(v.iter().copied()).collect()
    };
    RequestRecord {
        id,
        class: e.class.clone(),
        segments: e.segments,
        threads: e.tids.len(),
        open_segments: e.open,
        wall_ns,
        served_ns: e.served_ns,
        counts: by_name(&e.counts),
        lost: by_name(&e.lost),
    }
}

/// Every request seen so far (finished or not), by id; the table is left as it is.
pub fn requests() -> Vec<RequestRecord> {
    let (names, _) = event_names();
    let t = TABLE.lock().ok();
    let mut out: Vec<RequestRecord> = t
        .as_ref()
        .and_then(|t| t.as_ref())
        .map(|m| m.iter().map(|(id, e)| record(*id, e, &names)).collect())
        .unwrap_or_default();
    out.sort_by_key(|r| r.id);
    out
}

/// Remove and return the requests with no open segment (finished), by id; requests still being
/// served stay.
pub fn take_requests() -> Vec<RequestRecord> {
    let (names, _) = event_names();
    let Ok(mut t) = TABLE.lock() else {
        return Vec::new();
    };
    let Some(m) = t.as_mut() else {
        return Vec::new();
    };
    let done: Vec<u64> = m
        .iter()
        .filter(|(_, e)| e.open == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut out: Vec<RequestRecord> = done
        .into_iter()
        .filter_map(|id| m.remove(&id).map(|e| record(id, &e, &names)))
        .collect();
    out.sort_by_key(|r| r.id);
    out
}

/// JSON lines, one request per line.
pub fn to_json_lines(records: &[RequestRecord]) -> String {
    let mut s = String::new();
    for r in records {
        if let Ok(line) = serde_json::to_string(r) {
            s.push_str(&line);
            s.push('\n');
        }
    }
    s
}

/// A segment of a request on the calling thread; it ends when dropped.
///
/// ```
/// use counterpoint_selfmon::request::{take_requests, Request};
///
/// {
///     let _r = Request::begin(7, "checkout")?;
///     std::hint::black_box((0..1000u64).sum::<u64>());
/// }
/// let done = take_requests();
/// let r = done.iter().find(|r| r.id == 7).expect("request 7");
/// assert_eq!((r.class.as_str(), r.segments, r.threads), ("checkout", 1, 1));
/// # Ok::<(), counterpoint_selfmon::SelfmonError>(())
/// ```
pub struct Request {
    id: u64,
    _not_send: PhantomData<*const ()>,
}

impl Request {
    /// Begin a segment of request `id`; to stitch a request that moved threads, begin it
    /// again with the same id on the new thread.
    pub fn begin(id: u64, class: &str) -> Result<Request, SelfmonError> {
        begin(id, class)?;
        Ok(Request {
            id,
            _not_send: PhantomData,
        })
    }

    /// The request id.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        let _ = end(self.id);
    }
}
