//! Self-monitoring in the manner of LiMiT: a thread counts its own events and reads
//! them without a system call where the hardware allows it. [`page`] implements the kernel's
//! seqlock protocol over the perf_event control page (`rdpmc(index - 1)` sign-extended to
//! `pmc_width`, plus `offset`, with the TSC time conversion, `cap_user_time_short` included),
//! generic over the instructions so that a synthetic page driven by a writer can test it;
//! [`counter`] opens events on the calling thread through `counterpoint-counters` and falls back
//! to `read(2)` whenever `cap_user_rdpmc` is 0, `index` is 0, or the CPU has no user-space read
//! we implement (only x86-64 does) — always on a machine without a hardware PMU, where software
//! events still count; [`region`] accumulates named, nested regions per thread, reports them
//! merged, and starts afresh in a forked child; [`request`] attributes per-thread deltas to
//! requests by id, stitching requests that hop threads; [`ffi`] is the C ABI behind
//! `include/counterpoint.h` (shared and static libraries are built from this crate).
//!
//! # Example
//!
//! ```
//! use counterpoint_selfmon::{init, report, Region};
//!
//! init("task-clock")?;
//! for _ in 0..3 {
//!     let _outer = Region::begin("doc-outer");
//!     let _inner = Region::begin("doc-inner");
//!     std::hint::black_box((0..1000u64).sum::<u64>());
//! }
//! let r = report();
//! let outer = r.regions.iter().find(|x| x.name == "doc-outer").expect("region");
//! assert_eq!(outer.entries, 3);
//! // Without perf_event access the regions still have entries and times, and say why.
//! if r.counters_unavailable.is_none() {
//!     assert_eq!(outer.lost["task-clock"], 0);
//! }
//! # Ok::<(), counterpoint_selfmon::SelfmonError>(())
//! ```

#![warn(missing_docs)]

pub mod counter;
pub mod ffi;
pub mod page;
pub mod region;
pub mod request;

pub use counter::{parse_events, SelfCounter, SelfmonError};
pub use ffi::report_at_exit;
pub use page::{PageRead, Reading};
pub use region::{init, report, Region, RegionReport, Report};
pub use request::{take_requests, Request, RequestRecord};
