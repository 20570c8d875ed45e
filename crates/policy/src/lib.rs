//! Counterpoint's placement policies, written against `counterpoint-core` only so the same code
//! drives the simulated machine and a live Linux host.
//!
//! Two levels of hook (shared/DESIGN.md §4): epoch-level [`Policy`]s see one
//! [`Observation`](counterpoint_core::Observation) per interval and answer with affinity
//! [`Action`](counterpoint_core::Action)s — what a user-space daemon can do; pick-next hooks
//! ([`PickNext`]) choose which ready task a CPU runs at each context switch — what a kernel
//! scheduler does, available in the simulator only. Each policy is a module with its paper's
//! algorithm and parameters: [`linux`] (baseline), [`zhang`] (`ipc-pair`, `bus-pair`),
//! [`masa`], [`di`] (Distributed Intensity), [`spread`] (software-only), [`oracle`] (search for
//! the best static placement under a caller-supplied cost). [`by_name`] and [`pick_by_name`]
//! build them from the names the command line uses, and [`required_events`] lets a host
//! without a PMU refuse the hardware-metric policies before starting them.

pub mod di;
pub mod linux;
pub mod masa;
pub mod oracle;
pub mod signal;
pub mod spread;
pub mod tree;
pub mod zhang;

use counterpoint_core::machine::{PickNext, Policy};

pub use di::Di;
pub use linux::{Linux, LinuxPick};
pub use masa::{Calibration, CalibrationEntry, LoadMetric, Masa, MasaParams};
pub use oracle::{FnCost, Oracle, OracleResult, OracleSearch, PlacementCost};
pub use spread::Spread;
pub use zhang::{ComplementPick, PairMetric, PairingPolicy};

/// A policy name the registry does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {name:?}; known: {}", known.join(", "))]
pub struct UnknownPolicy {
    /// "policy" or "pick-next hook".
    pub kind: &'static str,
    pub name: String,
    pub known: Vec<&'static str>,
}

/// Epoch-level policies [`by_name`] can build, with a one-line description each.
pub const POLICIES: &[(&str, &str)] = &[
    ("linux", "no action: the machine's own scheduler (baseline)"),
    ("spread", "CPU-hungry tasks one per package, then one per core (task-clock only)"),
    ("ipc-pair", "user-space IPC pairing by affinity (Fedorova via Zhang et al.)"),
    ("bus-pair", "user-space bus-utilization pairing by affinity (Zhang et al.)"),
    ("masa", "MASA package load balancing by process swaps (Nakajima & Pallipadi)"),
    ("masa-log", "MASA in log-only mode: decisions logged, none applied"),
    ("di", "Distributed Intensity: spread LLC-miss-heavy tasks across memory domains (Zhuravlev et al.)"),
];

/// Pick-next hooks [`pick_by_name`] can build.
pub const PICKERS: &[(&str, &str)] = &[
    ("linux", "run-queue order (baseline)"),
    (
        "ipc-pair",
        "ready task whose IPC complements the other CPUs' (kernel-level)",
    ),
    (
        "bus-pair",
        "ready task whose bus utilization complements the other CPUs' (kernel-level)",
    ),
];

/// Names [`by_name`] accepts.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|(n, _)| *n).collect()
}

/// Names [`pick_by_name`] accepts.
pub fn pick_names() -> Vec<&'static str> {
    PICKERS.iter().map(|(n, _)| *n).collect()
}

/// Build an epoch-level policy with its default parameters. `masa` uses the calibration the
/// paper gives for its dual Xeon ([`Calibration::paper_xeon`]); build [`Masa::new`] with a
/// table measured on the target machine for anything else. The oracle needs a cost function
/// and is built with [`OracleSearch`] and [`Oracle::from_result`].
pub fn by_name(name: &str) -> Result<Box<dyn Policy + Send>, UnknownPolicy> {
    Ok(match name {
        "linux" => Box::new(Linux),
        "spread" => Box::new(Spread::default()),
        "ipc-pair" => Box::new(PairingPolicy::ipc()),
        "bus-pair" => Box::new(PairingPolicy::bus()),
        "masa" => Box::new(Masa::with_ranked(
            MasaParams::default(),
            Calibration::paper_xeon(),
        )),
        "masa-log" => Box::new(Masa::with_ranked(
            MasaParams {
                log_only: true,
                ..MasaParams::default()
            },
            Calibration::paper_xeon(),
        )),
        "di" => Box::new(Di::default()),
        _ => {
            return Err(UnknownPolicy {
                kind: "policy",
                name: name.to_string(),
                known: names(),
            })
        }
    })
}

/// Build a pick-next hook.
pub fn pick_by_name(name: &str) -> Result<Box<dyn PickNext + Send>, UnknownPolicy> {
    Ok(match name {
        "linux" => Box::new(LinuxPick),
        "ipc-pair" => Box::new(ComplementPick::ipc()),
        "bus-pair" => Box::new(ComplementPick::bus()),
        _ => {
            return Err(UnknownPolicy {
                kind: "pick-next hook",
                name: name.to_string(),
                known: pick_names(),
            })
        }
    })
}

/// Events a named policy needs (so a host can refuse it before starting).
pub fn required_events(name: &str) -> Result<Vec<&'static str>, UnknownPolicy> {
    by_name(name).map(|p| p.required_events())
}

/// The events of `name` that `available` says the host cannot count; empty = it can run.
pub fn missing_events(
    name: &str,
    available: impl Fn(&str) -> bool,
) -> Result<Vec<&'static str>, UnknownPolicy> {
    Ok(required_events(name)?
        .into_iter()
        .filter(|e| !available(e))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::event;

    #[test]
    fn every_listed_name_builds_and_names_itself() {
        for n in names() {
            let p = by_name(n).unwrap();
            assert_eq!(p.name(), n);
        }
        for n in pick_names() {
            assert_eq!(pick_by_name(n).unwrap().name(), n);
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = by_name("fifo").err().unwrap();
        let msg = e.to_string();
        assert!(msg.contains("\"fifo\""), "{msg}");
        assert!(msg.contains("bus-pair") && msg.contains("spread") && msg.contains("di"));
        let e = pick_by_name("masa").err().unwrap();
        assert!(e.to_string().contains("ipc-pair"));
    }

    #[test]
    fn a_host_without_pmu_can_run_only_software_policies() {
        let runnable: Vec<&str> = names()
            .into_iter()
            .filter(|n| missing_events(n, event::is_software).unwrap().is_empty())
            .collect();
        assert_eq!(runnable, vec!["linux", "spread"]);
        assert_eq!(
            missing_events("ipc-pair", event::is_software).unwrap(),
            vec![event::INSTRUCTIONS, event::CYCLES]
        );
    }
}
