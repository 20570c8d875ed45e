//! Counterpoint's placement policies, written against `counterpoint-core` only so the same code
//! drives the simulated machine and a live Linux host.
//!
//! Two levels of hook (docs/policies.md): epoch-level [`Policy`]s see one
//! [`Observation`](counterpoint_core::Observation) per interval and answer with affinity
//! [`Action`](counterpoint_core::Action)s — what a user-space daemon can do; pick-next hooks
//! ([`PickNext`]) choose which ready task a CPU runs at each context switch — what a kernel
//! scheduler does, available in the simulator only. Each policy is a module with its paper's
//! algorithm and parameters: [`linux`] (baseline), [`zhang`] (`bus-pair`, `ipc-pair` and their
//! `-affinity` forms), [`masa`], [`di`] (Distributed Intensity), [`spread`] (software-only),
//! [`oracle`] (the best static placement under a cost), [`schedtask`] (SchedTask's grouping
//! by code-page overlap, from live heatmaps). The [`registry`] is the one list of
//! them: names, levels, required events, descriptions and constructors. The [`driver`] is the
//! one observe → decide → act loop that runs an epoch-level policy on any
//! [`Machine`](counterpoint_core::Machine), live or simulated.
//!
//! ```
//! use counterpoint_policy::driver::{Driver, DriverConfig, NoObserver};
//! use counterpoint_policy::registry::{self, Context};
//! use counterpoint_core::testutils::ScriptedMachine;
//!
//! // `spread` from the registry, on a scripted 2-package machine with two busy tasks.
//! let mut policy = registry::build_epoch("spread", &mut Context::default()).unwrap();
//! let mut machine = ScriptedMachine::new(2, 2, 1, 2);
//! let config = DriverConfig { max_intervals: Some(3), ..DriverConfig::new(1_000_000_000) };
//! let report = Driver::new(config)
//!     .run(&mut machine, policy.as_mut(), &mut NoObserver)
//!     .unwrap();
//! assert_eq!(report.intervals, 3);
//! // The two hungry tasks end up on different packages.
//! let [a, b] = [&machine.affinity[0], &machine.affinity[1]];
//! assert_eq!((a.len(), b.len()), (1, 1));
//! assert_ne!(a.first().unwrap() / 2, b.first().unwrap() / 2);
//! ```

#![warn(missing_docs)]

pub mod di;
pub mod linux;
pub mod masa;
pub mod oracle;
pub mod registry;
pub mod replica;
pub mod schedtask;
pub mod signal;
pub mod spread;
pub mod tree;
pub mod zhang;

/// The observe → decide → act loop (defined in `counterpoint-core` so the simulator, which
/// does not depend on this crate, runs policies through the same code).
pub use counterpoint_core::driver;

use counterpoint_core::machine::{PickNext, Policy};

pub use di::Di;
pub use linux::{Linux, LinuxPick};
pub use masa::{Calibration, CalibrationEntry, LimitCheck, LoadMetric, Masa, MasaParams};
pub use oracle::{FnCost, Oracle, OracleResult, OracleSearch, PlacementCost};
pub use registry::{
    build, build_epoch, build_live, live_names, lookup, missing_events, names, BuildError, Built,
    CalibrationSource, Context, Entry, Level, REGISTRY,
};
pub use schedtask::SchedTask;
pub use spread::Spread;
pub use zhang::{ComplementPick, Multiplexed, PairMetric, PairingPolicy};

/// An epoch-level policy with default parameters and no context: the registry's
/// [`build_epoch`] with an empty [`Context`] (so `masa` and `oracle`, which need one, are
/// refused with the reason).
pub fn by_name(name: &str) -> Result<Box<dyn Policy + Send>, BuildError> {
    build_epoch(name, &mut Context::default())
}

/// Events a named policy needs, from its registry entry (so a host can refuse it before
/// starting).
pub fn required_events(name: &str) -> Result<Vec<&'static str>, BuildError> {
    Ok(lookup(name)?.events.to_vec())
}

/// Names of the kernel-level pick-next hooks.
pub fn pick_names() -> Vec<&'static str> {
    registry::names_at(Level::PickNext)
}

/// A kernel-level pick-next hook by name; an epoch-level name is refused with the hooks'.
pub fn pick_by_name(name: &str) -> Result<Box<dyn PickNext + Send>, BuildError> {
    match build(name, &mut Context::default())? {
        Built::PickNext(p) => Ok(p),
        Built::Epoch(_) => Err(BuildError::WrongLevel {
            name: lookup(name)?.name,
            level: Level::Epoch.label(),
            why: format!("pick-next hooks: {}", pick_names().join(", ")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_name_and_pick_by_name_go_through_the_registry() {
        assert_eq!(by_name("di").unwrap().name(), "di");
        assert_eq!(pick_by_name("bus-pair").unwrap().name(), "bus-pair");
        assert!(pick_by_name("di").is_err());
        assert!(by_name("ipc-pair").is_err());
        assert!(by_name("masa").is_err());
    }
}
