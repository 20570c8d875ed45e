//! Counterpoint's Linux perf_event layer: the only code in the project that opens a perf
//! descriptor or reads one. It turns `perf stat`-style event lists (generic hardware, software
//! and cache names, `:u`/`:k`/`:h` modifiers, raw `rNNNN`, tracepoints and `pmu/term=value,.../`
//! or `pmu/named-event/` resolved through a PMU sysfs tree, and Counterpoint's abstract
//! `mem-transactions`, `fp-ops` and `llc-misses` resolved per microarchitecture by [`alias`])
//! into `perf_event_attr` settings ([`spec`], [`pmu`]), opens them on a target (a command,
//! threads of a process, CPUs: [`count`]; one group per thread for the live host: [`group`]) with
//! `perf-event2`, and reads them with time enabled/running so every value can be scaled and its
//! counted fraction shown. Events the machine cannot count are kept and reported as not
//! supported with the reason, never invented. Reads are one `read(2)` into a stack buffer
//! ([`sys`]): the layer adds no allocation to the hot path. With the `scripted` feature a
//! scripted PMU (`scripted`) answers for hardware events on machines without one, for tests.
//!
//! ```
//! use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
//!
//! // This machine's PMUs; an abstract event with no vendor event here stays in the list,
//! // marked unavailable with the reason.
//! let tree = PmuTree::default();
//! let list = parse_event_list("task-clock,cs:u,mem-transactions", &tree)?;
//! assert_eq!(list.len(), 3);
//! assert_eq!(list.events().nth(1).map(|e| e.canonical.as_str()), Some("context-switches"));
//!
//! // Count this process's threads for a moment.
//! let me = Target::process(std::process::id() as i32)?;
//! match CounterSet::open(&list, &me, &tree) {
//!     Ok(mut set) => {
//!         set.enable()?;
//!         for r in set.read_all()? {
//!             // Scaled for multiplexing, with the share of time the counter ran.
//!             println!("{}: {:?} ({:?} %)", r.spec.name, r.display_value(), r.counted_percent());
//!         }
//!     }
//!     // perf_event_paranoid can refuse even software events to unprivileged users.
//!     Err(e) => println!("not counted here: {e}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod alias;
pub mod count;
pub mod group;
pub mod page;
pub mod pmu;
pub mod readbench;
pub mod sampling;
#[cfg(feature = "scripted")]
pub mod scripted;
pub mod selfcount;
pub mod spec;
pub mod sys;
pub mod tasks;

pub use count::{CountError, CounterSet, EventReading, Instance, InstanceReading, Target};
pub use pmu::{Pmu, PmuError, PmuTree};
pub use spec::{parse_event_list, EventList, EventSpec, SpecError};
