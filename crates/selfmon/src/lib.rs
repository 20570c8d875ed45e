//! Self-monitoring in the manner of LiMiT (seed 003): a thread counts its own events and reads
//! them without a system call where the hardware allows it. [`page`] implements the kernel's
//! seqlock protocol over the perf_event control page (`rdpmc(index - 1)` sign-extended to
//! `pmc_width`, plus `offset`, with the TSC time conversion), generic over the instructions so
//! that a synthetic page driven by a writer thread can test it; [`counter`] opens events on the
//! calling thread (parsed by `counterpoint-counters`, opened with `perf-event2`) and falls back
//! to `read(2)` whenever `cap_user_rdpmc` is 0 or `index` is 0 — always on a machine without a
//! hardware PMU, where software events still count; [`region`] accumulates named, nested
//! regions per thread and reports them merged; [`ffi`] is the C ABI behind
//! `include/counterpoint.h` (shared and static libraries are built from this crate).

pub mod counter;
pub mod ffi;
pub mod page;
pub mod region;

pub use counter::{parse_events, SelfCounter, SelfmonError};
pub use ffi::report_at_exit;
pub use page::{PageRead, Reading};
pub use region::{init, report, Region, RegionReport, Report};
