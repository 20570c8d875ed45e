//! Counterpoint's counter broker: hardware (and software) performance counters as a shared,
//! protected resource. Consumers connect to `counterpoint daemon` over a Unix socket, are
//! identified by `SO_PEERCRED`, and register event sets on a target with a share; the broker
//! time-multiplexes them onto a per-CPU budget of counter slots in slices proportional to the
//! shares, each CPU on its own for per-CPU targets ([`sched`]), opens each (event, target) kernel counter once however many consumers
//! ask for it, checks every request against an access policy ([`access`]) and journals
//! registrations so counts survive a restart ([`journal`]). [`client::Client`] is the Rust API.
//!
//! The scheduler is pure and runs in virtual time:
//!
//! ```
//! use counterpoint_broker::sched::{Class, Demand, Scheduler};
//! let mut s = Scheduler::new(1, 1, 0.0); // one slot on one CPU
//! for (id, share) in [(1, 1), (2, 3)] {
//!     // A task target's one unit: key `id` on CPU 0.
//!     let d = Demand::joint(1000, Class::User, share, [id].into(), [0].into());
//!     s.add(id, d).unwrap();
//! }
//! s.replan();
//! for i in 1..=400 { s.tick(i * 1_000_000); } // 400 slices of 1 ms
//! assert_eq!(s.accounting(1).unwrap().running_ns, 100_000_000);
//! assert_eq!(s.accounting(2).unwrap().running_ns, 300_000_000);
//! ```
#![warn(missing_docs)]

pub mod access;
pub mod client;
pub mod fallback;
pub mod hostsource;
pub mod journal;
pub mod proto;
pub mod sched;
pub mod server;
pub mod shm;
pub mod target;
