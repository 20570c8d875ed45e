//! Opt-in counter deltas inside critical sections (`COUNTERPOINT_LOCKPROF_EVENTS`, set by
//! `counterpoint lockprof --events LIST`): for every hold, each event is read when the lock is
//! acquired and again when it is released, and the difference is added to the acquisition's
//! entry. With a hardware PMU that is cycles or LLC misses while the lock is held; on any
//! machine software events (`task-clock`, `page-faults`, `context-switches`) work the same way.
//!
//! The events are parsed and opened, and read, by `counterpoint-selfmon` (its read path: the
//! user-space `rdpmc` read through the control page where the kernel allows it, `read(2)`
//! otherwise). Each thread opens its counters lazily on its first lock call while the feature is
//! on; a fork child reopens its own (the inherited descriptors count the parent's thread).
//! Without the variable nothing here runs: the fast path tests one static.
//!
//! The reads are placed outside the timed hold (after the acquisition's timestamp is replaced,
//! before the release's is taken), so hold times stay those of the program; the LiMiT split
//! and the wait times are unaffected, but the program does run slower (a `read(2)` costs
//! around a microsecond).

use core::cell::RefCell;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use counterpoint_selfmon::SelfCounter;

/// Events read at most (the first ones of a longer list; `lockprof --events` refuses more,
/// by `counterpoint_lockprof_report::MAX_EVENTS`, which a test keeps equal to this: the
/// library does not link the report crate).
pub const MAX_EVENTS: usize = 4;

/// Events in use (0: the feature is off).
pub(crate) static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Bumped in a fork child: counters opened before belong to the parent's thread.
static GENERATION: AtomicU64 = AtomicU64::new(0);

struct Config {
    specs: Vec<counterpoint_counters::EventSpec>,
    names: [[u8; 64]; MAX_EVENTS],
    name_lens: [usize; MAX_EVENTS],
    error: [u8; 512],
    error_len: usize,
}

static mut CONFIG: Option<Config> = None;

/// Environment variable with the event list.
pub const EVENTS_ENV: &str = "COUNTERPOINT_LOCKPROF_EVENTS";

/// Parse the list (constructor time: allocation is fine here).
pub(crate) fn init() {
    let Ok(list) = std::env::var(EVENTS_ENV) else {
        return;
    };
    if list.trim().is_empty() {
        return;
    }
    let mut c = Config {
        specs: Vec::new(),
        names: [[0; 64]; MAX_EVENTS],
        name_lens: [0; MAX_EVENTS],
        error: [0; 512],
        error_len: 0,
    };
    let mut error = String::new();
    match counterpoint_selfmon::parse_events(&list) {
        Ok(specs) => {
            if specs.len() > MAX_EVENTS {
                error = format!(
                    "only the first {MAX_EVENTS} events of {list:?} are read inside critical sections"
                );
            }
            for (i, s) in specs.into_iter().take(MAX_EVENTS).enumerate() {
                let n = s.name.len().min(64);
                c.names[i][..n].copy_from_slice(&s.name.as_bytes()[..n]);
                c.name_lens[i] = n;
                c.specs.push(s);
            }
        }
        Err(e) => error = format!("{EVENTS_ENV}={list:?}: {e}"),
    }
    let n = error.len().min(c.error.len());
    c.error[..n].copy_from_slice(&error.as_bytes()[..n]);
    c.error_len = n;
    let count = c.specs.len();
    // SAFETY: constructor time, before any other thread exists.
    unsafe { *core::ptr::addr_of_mut!(CONFIG) = Some(c) };
    COUNT.store(count, Relaxed);
}

fn config() -> Option<&'static Config> {
    // SAFETY: written once in the constructor, read-only afterwards.
    unsafe { (*core::ptr::addr_of!(CONFIG)).as_ref() }
}

/// Names of the events in use, for the report.
pub(crate) fn names() -> impl Iterator<Item = &'static [u8]> {
    config()
        .into_iter()
        .flat_map(|c| (0..c.specs.len()).map(move |i| &c.names[i][..c.name_lens[i]]))
}

/// Why events asked for are missing (parse error, open failure, truncated list); empty if none.
pub(crate) fn error() -> &'static [u8] {
    match config() {
        Some(c) => &c.error[..c.error_len],
        None => &[],
    }
}

/// The first open failure of any thread, kept for the report (written once).
static OPEN_ERROR: AtomicUsize = AtomicUsize::new(0);
static mut OPEN_ERROR_TEXT: [u8; 512] = [0; 512];

/// Why a counter could not be opened on some thread (empty if all opened).
pub(crate) fn open_error() -> &'static [u8] {
    let n = OPEN_ERROR.load(core::sync::atomic::Ordering::Acquire);
    // SAFETY: written before OPEN_ERROR was published and never again.
    unsafe { &(&*core::ptr::addr_of!(OPEN_ERROR_TEXT))[..n] }
}

struct Mine {
    generation: u64,
    counters: Vec<Option<SelfCounter>>,
}

thread_local! {
    static MINE: RefCell<Option<Mine>> = const { RefCell::new(None) };
}

/// After fork, in the child.
pub(crate) fn forked() {
    GENERATION.fetch_add(1, Relaxed);
}

/// Read every event on the calling thread into `out` (0 for an event that could not be opened
/// or read). Opens the thread's counters on first use.
#[cold]
#[inline(never)]
pub(crate) fn read_all(out: &mut [u64; MAX_EVENTS]) {
    let Some(cfg) = config() else { return };
    let generation = GENERATION.load(Relaxed);
    let _ = MINE.try_with(|m| {
        let Ok(mut m) = m.try_borrow_mut() else {
            return;
        };
        if m.as_ref().is_none_or(|m| m.generation != generation) {
            if let Some(old) = m.take() {
                // The descriptors count the parent's thread; the control pages were not
                // copied into this child.
                for c in old.counters.into_iter().flatten() {
                    c.abandon_after_fork();
                }
            }
            let counters = cfg
                .specs
                .iter()
                .map(|s| match SelfCounter::open(s) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        note_open_error(&e.to_string());
                        None
                    }
                })
                .collect();
            let counters: Vec<Option<SelfCounter>> = counters;
            // Touch every counter's control page once now: a first-touch page fault inside a
            // later reading would be counted by the events read before it (page-faults).
            for c in counters.iter().flatten() {
                let _ = c.read();
            }
            *m = Some(Mine {
                generation,
                counters,
            });
        }
        if let Some(m) = m.as_ref() {
            for (o, c) in out.iter_mut().zip(m.counters.iter()) {
                *o = c
                    .as_ref()
                    .and_then(|c| c.read().ok())
                    .map_or(0, |r| r.value);
            }
        }
    });
}

fn note_open_error(text: &str) {
    static CLAIMED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    if CLAIMED.swap(true, Relaxed) {
        return;
    }
    let n = text.len().min(512);
    // SAFETY: only the thread that claimed it writes, once, before publishing the length.
    unsafe {
        (&mut *core::ptr::addr_of_mut!(OPEN_ERROR_TEXT))[..n].copy_from_slice(&text.as_bytes()[..n])
    };
    OPEN_ERROR.store(n, core::sync::atomic::Ordering::Release);
}
