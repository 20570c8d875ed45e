//! Counterpoint's Linux perf_event layer. It turns `perf stat`-style event lists (generic
//! hardware, software and cache names, `:u`/`:k`/`:h` modifiers, raw `rNNNN`, tracepoints and
//! `pmu/term=value,.../` or `pmu/named-event/` resolved through a PMU sysfs tree) into
//! `perf_event_attr` settings ([`spec`], [`pmu`]), opens them on a target (a command, threads of a
//! process, CPUs) with `perf-event2`, and reads them with time enabled/running so every value can
//! be scaled and its counted fraction shown ([`count`]). Events the machine cannot count are kept
//! and reported as not supported with the reason, never invented. Reads are one `read(2)` into a
//! stack buffer: the layer adds no allocation to the hot path.

pub mod count;
pub mod pmu;
pub mod readbench;
pub mod selfcount;
pub mod spec;

pub use count::{CountError, CounterSet, EventReading, Target};
pub use pmu::{Pmu, PmuError, PmuTree};
pub use spec::{parse_event_list, EventList, EventSpec, SpecError};
