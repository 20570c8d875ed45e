//! The one policy registry: every policy the command line, the simulator, the experiments and
//! the agent can name, with its level, required events, description and paper, and its
//! constructor. Nothing else in the workspace matches on policy names; adding a policy is one
//! module plus one [`Entry`] in [`REGISTRY`].
//!
//! Two levels (docs/policies.md): a [`Level::PickNext`] policy is a kernel-level hook that
//! chooses the next task at each context switch (the simulator only); a [`Level::Epoch`]
//! policy observes each interval and answers with affinity actions (what a user-space daemon
//! can do, on the simulator and on a live host alike).
//!
//! Constructors take a [`Context`]: the machine's topology, MASA's calibration (measured on
//! the machine the policy runs on; the paper's Xeon table only when asked for), the oracle's
//! cost, and per-policy options.
//!
//! ```
//! use counterpoint_policy::registry::{self, Built, Context, Level};
//!
//! let entry = registry::lookup("bus-pair-affinity").unwrap();
//! assert_eq!(entry.level, Level::Epoch);
//! match registry::build("bus-pair-affinity", &mut Context::default()).unwrap() {
//!     Built::Epoch(p) => assert_eq!(p.name(), "bus-pair-affinity"),
//!     Built::PickNext(_) => unreachable!(),
//! }
//! // Unknown names are refused with the list, never replaced by `linux`.
//! let err = registry::build("fifo", &mut Context::default()).err().unwrap();
//! assert!(err.to_string().contains("known: linux, spread"));
//! ```

use crate::masa::{Calibration, CalibrationError, Masa, MasaParams};
use crate::oracle::{Oracle, OracleSearch, PlacementCost};
use crate::{ComplementPick, PairingPolicy};
use crate::{Di, Linux, Spread};
use counterpoint_core::event;
use counterpoint_core::machine::{PickNext, Policy};
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use serde::Serialize;

/// Where a policy acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Kernel-level hook: picks the next task at every context switch (simulator only).
    PickNext,
    /// Epoch-level: observes each interval, sets affinities (simulator and live host).
    Epoch,
}

impl Level {
    /// As printed by `counterpoint policies`.
    pub fn label(self) -> &'static str {
        match self {
            Level::PickNext => "pick-next",
            Level::Epoch => "epoch",
        }
    }
}

/// What a constructor needs beyond its defaults, so a caller prepares only that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Need {
    /// A load-calibration table measured on the machine ([`Context::calibration`]).
    Calibration,
    /// A placement cost to search ([`Context::oracle`]).
    PlacementCost,
}

/// MASA's calibration, as the caller has it.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CalibrationSource {
    /// None: `masa` refuses to start.
    #[default]
    None,
    /// Measured on the machine the policy runs on: the simulator's own calibration run, or a
    /// table measured on the host (`agent --masa-calibration FILE`).
    Measured(Calibration),
    /// The table the paper gives for its 2002 dual Xeon, explicitly asked for.
    PaperXeon,
}

/// The oracle's input: which tasks, and what a placement of them costs.
pub struct OracleInput<'a> {
    /// Task order of the placements the cost evaluates (`placement[i]` is the CPU of
    /// `tasks[i]`).
    pub tasks: Vec<TaskId>,
    /// The objective (lower is better), typically short simulated runs.
    pub cost: &'a mut dyn PlacementCost,
    /// Search settings (the evaluation cap).
    pub search: OracleSearch,
}

/// Options some policies take.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// `spread`: CPUs used (task-clock / wall time) from which a task counts as hungry.
    pub hungry_cpus: Option<f64>,
    /// `spread`: share of a CPU that non-target load must keep busy for the CPU to count as
    /// taken (above 1: never; for hosts whose other load should be ignored, e.g. tests on a
    /// loaded machine).
    pub foreign_cpus: Option<f64>,
}

/// Everything a constructor may use.
#[derive(Default)]
pub struct Context<'a> {
    /// The machine the policy will run on, where known.
    pub topology: Option<&'a Topology>,
    /// MASA's load calibration.
    pub calibration: CalibrationSource,
    /// The oracle's task list and cost.
    pub oracle: Option<OracleInput<'a>>,
    /// Per-policy options.
    pub options: Options,
}

/// A built policy, at its level.
pub enum Built {
    /// An epoch-level policy.
    Epoch(Box<dyn Policy + Send>),
    /// A kernel-level pick-next hook.
    PickNext(Box<dyn PickNext + Send>),
}

impl Built {
    /// The policy's name.
    pub fn name(&self) -> &str {
        match self {
            Built::Epoch(p) => p.name(),
            Built::PickNext(p) => p.name(),
        }
    }
    /// The epoch-level policy, or `None` for a pick-next hook.
    pub fn into_epoch(self) -> Option<Box<dyn Policy + Send>> {
        match self {
            Built::Epoch(p) => Some(p),
            Built::PickNext(_) => None,
        }
    }
}

/// Why a policy could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The name is not in the registry.
    #[error("unknown policy {name:?}; known: {}", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// Every registered name.
        known: Vec<&'static str>,
    },
    /// The policy exists at another level than the caller can run.
    #[error("policy {name:?} is a {level} policy; {why}")]
    WrongLevel {
        /// The policy.
        name: &'static str,
        /// Its level's label.
        level: &'static str,
        /// What the caller can run instead.
        why: String,
    },
    /// An epoch-level policy only the simulator can build (the oracle, on a live host).
    #[error("policy {name:?} runs only in the simulator: {why}")]
    SimulatorOnly {
        /// The policy.
        name: &'static str,
        /// Why, and what the caller can run instead.
        why: String,
    },
    /// `masa` without a calibration.
    #[error(
        "policy {name:?} needs a load calibration measured on this machine (the simulator \
         calibrates itself; on a host give the agent a table measured there with \
         --masa-calibration FILE), or the 2002 Xeon table when asked for explicitly \
         (--masa-calibration paper)"
    )]
    NeedsCalibration {
        /// The policy.
        name: &'static str,
    },
    /// The calibration table cannot be ranked.
    #[error("policy {name:?}: calibration table: {source}")]
    Calibration {
        /// The policy.
        name: &'static str,
        /// What is wrong with the table.
        source: CalibrationError,
    },
    /// `oracle` without a cost, or its search found nothing.
    #[error("policy \"oracle\": {0}")]
    Oracle(String),
    /// An option the policy does not take, or a bad value.
    #[error("policy {name:?}: {message}")]
    Option {
        /// The policy.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// One registered policy.
pub struct Entry {
    /// The name everything uses.
    pub name: &'static str,
    /// Where it acts.
    pub level: Level,
    /// Canonical events it counts (a host without them refuses it).
    pub events: &'static [&'static str],
    /// One line.
    pub description: &'static str,
    /// The paper it comes from (empty for ours).
    pub paper: &'static str,
    /// What its constructor needs from the [`Context`].
    pub needs: &'static [Need],
    /// Options of [`Options`] it takes (by option name, e.g. `hungry-cpus`).
    pub options: &'static [&'static str],
    /// The constructor.
    pub build: fn(&mut Context<'_>) -> Result<Built, BuildError>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("level", &self.level)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

const DOBEL: &str = "Döbel, Härtig: Where Have All the Cycles Gone? Investigating Runtime \
                     Overheads of OS-Assisted Replication (2013)";
const ZHANG: &str = "Zhang, Jiang, Shen: Processor Hardware Counter Statistics As A First-Class \
                     System Resource (HotOS 2007)";
const MASA: &str = "Nakajima, Pallipadi: Enhancements for Hyper-Threading Technology in the \
                    Operating System (WIESS 2002)";
const SCHEDTASK: &str = "Kallurkar, Sarangi: SchedTask: A Hardware-Assisted Task Scheduler \
                         (seed 004)";
const DI: &str = "Zhuravlev, Blagodurov, Fedorova: Addressing Shared Resource Contention in \
                  Multicore Processors via Scheduling (ASPLOS 2010)";

fn masa(ctx: &mut Context<'_>, log_only: bool) -> Result<Built, BuildError> {
    let name = if log_only { "masa-log" } else { "masa" };
    let params = MasaParams {
        log_only,
        ..MasaParams::default()
    };
    let m = match &ctx.calibration {
        CalibrationSource::None => return Err(BuildError::NeedsCalibration { name }),
        CalibrationSource::PaperXeon => {
            Masa::with_ranked(params, crate::masa::Calibration::paper_xeon())
        }
        CalibrationSource::Measured(c) => {
            Masa::new(params, c).map_err(|source| BuildError::Calibration { name, source })?
        }
    };
    Ok(Built::Epoch(Box::new(m)))
}

fn spread(ctx: &mut Context<'_>) -> Result<Built, BuildError> {
    let mut s = match ctx.options.hungry_cpus {
        None => Spread::default(),
        Some(h) if h > 0.0 && h.is_finite() => Spread::new(h),
        Some(h) => {
            return Err(BuildError::Option {
                name: "spread",
                message: format!("hungry-cpus {h}: must be a positive number"),
            })
        }
    };
    match ctx.options.foreign_cpus {
        None => {}
        Some(f) if f > 0.0 && f.is_finite() => s.foreign_saturation = f,
        Some(f) => {
            return Err(BuildError::Option {
                name: "spread",
                message: format!("foreign-cpus {f}: must be a positive number"),
            })
        }
    }
    Ok(Built::Epoch(Box::new(s)))
}

fn oracle(ctx: &mut Context<'_>) -> Result<Built, BuildError> {
    let input = ctx.oracle.as_mut().ok_or_else(|| {
        BuildError::Oracle(
            "needs a placement cost (the simulator provides one; a live host has none)".into(),
        )
    })?;
    let topology = ctx.topology.ok_or_else(|| {
        BuildError::Oracle("needs the machine's topology to search placements".into())
    })?;
    let found = input
        .search
        .search(topology, input.tasks.len(), input.cost)
        .ok_or_else(|| BuildError::Oracle("no placement of the tasks fits the machine".into()))?;
    Ok(Built::Epoch(Box::new(Oracle::from_result(
        &input.tasks,
        &found,
    ))))
}

/// Every policy, in the order `counterpoint policies` lists them.
pub const REGISTRY: &[Entry] = &[
    Entry {
        name: "linux",
        level: Level::Epoch,
        events: &[],
        description: "no action: the machine's own scheduler (the baseline)",
        paper: "",
        needs: &[],
        options: &[],
        build: |_| Ok(Built::Epoch(Box::new(Linux))),
    },
    Entry {
        name: "spread",
        level: Level::Epoch,
        events: &[event::TASK_CLOCK],
        description: "CPU-hungry tasks one per package, then one per core (software events only)",
        paper: "",
        needs: &[],
        options: &["hungry-cpus", "foreign-cpus"],
        build: spread,
    },
    Entry {
        name: "bus-pair",
        level: Level::PickNext,
        events: &[event::MEM_TRANSACTIONS, event::TASK_CLOCK],
        description: "at each switch, run the ready task whose bus utilization complements the other CPUs'",
        paper: ZHANG,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::PickNext(Box::new(ComplementPick::bus()))),
    },
    Entry {
        name: "ipc-pair",
        level: Level::PickNext,
        events: &[event::INSTRUCTIONS, event::CYCLES],
        description: "at each switch, run the ready task whose IPC complements the other CPUs' (Fedorova's pairing)",
        paper: ZHANG,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::PickNext(Box::new(ComplementPick::ipc()))),
    },
    Entry {
        name: "bus-pair-affinity",
        level: Level::Epoch,
        events: &[event::MEM_TRANSACTIONS, event::TASK_CLOCK],
        description: "user-space bus-utilization pairing: pin complementary tasks to co-run each epoch",
        paper: ZHANG,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::Epoch(Box::new(PairingPolicy::bus()))),
    },
    Entry {
        name: "ipc-pair-affinity",
        level: Level::Epoch,
        events: &[event::INSTRUCTIONS, event::CYCLES],
        description: "user-space IPC pairing: pin complementary tasks to co-run each epoch",
        paper: ZHANG,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::Epoch(Box::new(PairingPolicy::ipc()))),
    },
    Entry {
        name: "masa",
        level: Level::Epoch,
        events: &[event::INSTRUCTIONS, event::CACHE_MISSES, event::FP_OPS],
        description: "package load balancing by process swaps, metrics ranked by a calibration measured on the machine",
        paper: MASA,
        needs: &[Need::Calibration],
        options: &[],
        build: |ctx| masa(ctx, false),
    },
    Entry {
        name: "masa-log",
        level: Level::Epoch,
        events: &[event::INSTRUCTIONS, event::CACHE_MISSES, event::FP_OPS],
        description: "MASA in log-only mode: decisions logged, none applied",
        paper: MASA,
        needs: &[Need::Calibration],
        options: &[],
        build: |ctx| masa(ctx, true),
    },
    Entry {
        name: "di",
        level: Level::Epoch,
        events: &[event::CACHE_MISSES, event::INSTRUCTIONS],
        description: "Distributed Intensity: spread LLC-miss-heavy tasks across memory domains",
        paper: DI,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::Epoch(Box::new(Di::default()))),
    },
    Entry {
        name: "oracle",
        level: Level::Epoch,
        events: &[],
        description: "the best static placement, searched beforehand with a cost (the simulator's short runs)",
        paper: "",
        needs: &[Need::PlacementCost],
        options: &[],
        build: oracle,
    },
    Entry {
        name: "replica",
        level: Level::Epoch,
        events: &[event::TASK_CLOCK, event::CONTEXT_SWITCHES],
        description: "replica groups (same-named tasks) on one socket when sync-heavy, spread when cache-heavy",
        paper: DOBEL,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::Epoch(Box::new(crate::replica::Replica::default()))),
    },
    Entry {
        name: "schedtask",
        level: Level::Epoch,
        events: &[event::TASK_CLOCK],
        description: "threads whose sampled code pages overlap share cores (per-thread affinity, across processes), cores per group in proportion to CPU time (live heatmaps)",
        paper: SCHEDTASK,
        needs: &[],
        options: &[],
        build: |_| Ok(Built::Epoch(Box::new(crate::schedtask::SchedTask::default()))),
    },
];

/// Every registered name.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// Names of the policies at `level`.
pub fn names_at(level: Level) -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|e| e.level == level)
        .map(|e| e.name)
        .collect()
}

/// Whether a live host can run `e`: an epoch-level policy that needs no placement cost (the
/// oracle's cost is the simulator's short runs; pick-next hooks need the simulator's kernel).
pub fn runs_live(e: &Entry) -> bool {
    e.level == Level::Epoch && !e.needs.contains(&Need::PlacementCost)
}

/// Names of the policies a live host (the agent) can run, in registry order.
pub fn live_names() -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|e| runs_live(e))
        .map(|e| e.name)
        .collect()
}

/// The entry of `name`, or [`BuildError::Unknown`] with the list.
pub fn lookup(name: &str) -> Result<&'static Entry, BuildError> {
    REGISTRY
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| BuildError::Unknown {
            name: name.to_string(),
            known: names(),
        })
}

/// Build `name` from `ctx`, refusing options it does not take.
pub fn build(name: &str, ctx: &mut Context<'_>) -> Result<Built, BuildError> {
    let entry = lookup(name)?;
    for (given, option) in [
        (ctx.options.hungry_cpus.is_some(), "hungry-cpus"),
        (ctx.options.foreign_cpus.is_some(), "foreign-cpus"),
    ] {
        if given && !entry.options.contains(&option) {
            return Err(BuildError::Option {
                name: entry.name,
                message: format!("does not take {option} (only: spread)"),
            });
        }
    }
    (entry.build)(ctx)
}

/// Build an epoch-level policy (what the live agent runs); a pick-next hook is refused with
/// the epoch-level names.
pub fn build_epoch(
    name: &str,
    ctx: &mut Context<'_>,
) -> Result<Box<dyn Policy + Send>, BuildError> {
    let entry = lookup(name)?;
    if entry.level != Level::Epoch {
        return Err(BuildError::WrongLevel {
            name: entry.name,
            level: entry.level.label(),
            why: format!(
                "only the simulator can run it; epoch-level policies: {}",
                names_at(Level::Epoch).join(", ")
            ),
        });
    }
    Ok(build(name, ctx)?
        .into_epoch()
        .expect("an epoch-level entry builds an epoch-level policy"))
}

/// Build a policy a live host can run (what the agent runs): an unknown name, a pick-next
/// hook or the oracle is refused with [`live_names`] only, never with names the host could
/// not run either.
pub fn build_live(name: &str, ctx: &mut Context<'_>) -> Result<Box<dyn Policy + Send>, BuildError> {
    let live = || format!("the agent runs: {}", live_names().join(", "));
    let entry = REGISTRY
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| BuildError::Unknown {
            name: name.to_string(),
            known: live_names(),
        })?;
    if entry.level != Level::Epoch {
        return Err(BuildError::WrongLevel {
            name: entry.name,
            level: entry.level.label(),
            why: format!(
                "it picks the next task at each context switch, inside the scheduler, which an \
                 agent deciding once per interval cannot do (also with --source sim:): run it \
                 with `counterpoint simulate --policy {name} SCENARIO`; {}",
                live()
            ),
        });
    }
    if !runs_live(entry) {
        return Err(BuildError::SimulatorOnly {
            name: entry.name,
            why: format!(
                "its placement cost is the simulator's short runs, which the agent's loop has \
                 none of (also with --source sim:): run it with `counterpoint simulate --policy \
                 {name} SCENARIO`; {}",
                live()
            ),
        });
    }
    build_epoch(name, ctx)
}

/// The events of `name` that `available` says the host cannot count; empty = it can run.
pub fn missing_events(
    name: &str,
    available: impl Fn(&str) -> bool,
) -> Result<Vec<&'static str>, BuildError> {
    Ok(lookup(name)?
        .events
        .iter()
        .copied()
        .filter(|e| !available(e))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::FnCost;
    use counterpoint_core::cpuset::CpuId;
    use counterpoint_core::testutils::topo;

    fn built(name: &str) -> Built {
        let t = topo(2, 2, 1);
        let mut cost = FnCost(|p: &[CpuId]| p.iter().map(|c| *c as f64).sum::<f64>());
        let mut ctx = Context {
            topology: Some(&t),
            calibration: CalibrationSource::PaperXeon,
            oracle: Some(OracleInput {
                tasks: vec![TaskId(0), TaskId(1)],
                cost: &mut cost,
                search: OracleSearch::default(),
            }),
            options: Options::default(),
        };
        build(name, &mut ctx).unwrap()
    }

    #[test]
    fn every_entry_builds_names_itself_at_its_level_with_its_events() {
        for e in REGISTRY {
            let b = built(e.name);
            assert_eq!(b.name(), e.name);
            match b {
                Built::Epoch(p) => {
                    assert_eq!(e.level, Level::Epoch, "{}", e.name);
                    let mut got = p.required_events();
                    let mut want = e.events.to_vec();
                    got.sort();
                    want.sort();
                    assert_eq!(got, want, "{}: registry events vs the policy's", e.name);
                }
                Built::PickNext(_) => assert_eq!(e.level, Level::PickNext, "{}", e.name),
            }
        }
        let mut n = names();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), REGISTRY.len(), "names are unique");
    }

    #[test]
    fn live_refusals_list_only_what_a_live_host_runs() {
        let live = live_names();
        assert!(
            live.contains(&"spread") && live.contains(&"linux"),
            "{live:?}"
        );
        for name in ["oracle", "bus-pair", "ipc-pair"] {
            assert!(!live.contains(&name), "{live:?}");
        }
        for asked in ["nosuch", "oracle", "bus-pair"] {
            let msg = build_live(asked, &mut Context::default())
                .err()
                .unwrap()
                .to_string();
            assert!(msg.contains(&format!("{asked:?}")), "{msg}");
            // The list closes the message: exactly what a live host runs.
            let listed: Vec<&str> = msg.rsplit(": ").next().unwrap().split(", ").collect();
            assert_eq!(listed, live, "{asked}: {msg}");
        }
        assert!(build_live("spread", &mut Context::default()).is_ok());
    }

    #[test]
    fn unknown_names_and_wrong_levels_are_refused_with_the_list() {
        let msg = build("fifo", &mut Context::default())
            .err()
            .unwrap()
            .to_string();
        assert!(msg.contains("\"fifo\""), "{msg}");
        for n in names() {
            assert!(msg.contains(n), "{msg} lacks {n}");
        }
        let msg = build_epoch("bus-pair", &mut Context::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            msg.contains("pick-next") && msg.contains("bus-pair-affinity"),
            "{msg}"
        );
        // The old user-space names are not silently mapped.
        assert!(lookup("bus-pair-user").is_err());
    }

    #[test]
    fn masa_needs_a_calibration_and_oracle_a_cost() {
        let e = build("masa", &mut Context::default()).err().unwrap();
        assert!(matches!(e, BuildError::NeedsCalibration { name: "masa" }));
        let e = build("oracle", &mut Context::default()).err().unwrap();
        assert!(e.to_string().contains("placement cost"), "{e}");
    }

    #[test]
    fn options_go_only_to_policies_that_take_them() {
        let mut ctx = Context {
            options: Options {
                hungry_cpus: Some(0.5),
                foreign_cpus: Some(2.0),
            },
            ..Context::default()
        };
        assert!(build("spread", &mut ctx).is_ok());
        let mut only_foreign = Context {
            options: Options {
                foreign_cpus: Some(2.0),
                ..Options::default()
            },
            ..Context::default()
        };
        let e = build("di", &mut only_foreign)
            .err()
            .expect("di takes no foreign-cpus");
        assert!(e.to_string().contains("foreign-cpus"), "{e}");
        assert!(build("di", &mut ctx).is_err());
        ctx.options.hungry_cpus = Some(-1.0);
        assert!(build("spread", &mut ctx).is_err());
    }

    #[test]
    fn a_host_without_pmu_can_run_only_software_policies() {
        let runnable: Vec<&str> = names_at(Level::Epoch)
            .into_iter()
            .filter(|n| missing_events(n, event::is_software).unwrap().is_empty())
            .collect();
        assert_eq!(
            runnable,
            vec!["linux", "spread", "oracle", "replica", "schedtask"]
        );
    }
}
