//! `replica`: placement of replica groups (seed 001, Döbel & Härtig).
//!
//! Replicas of one program meet at every system call; waking a replica costs more the farther
//! it is (seed 001: ~6,000 cycles on the socket, ~14,300 across sockets), so sync-heavy groups
//! want one socket. Replicas sharing a last-level cache each get a fraction of it, so
//! cache-heavy groups want different sockets. The policy weighs the two per group, each as a
//! fraction of the replicas' CPU time:
//!
//! - **sync saving** of one socket = meetings per CPU-second x (far - near notification);
//!   meetings are counted as context switches (a replica blocks at each meeting), or as futex
//!   calls where the source counts the `syscalls:sys_enter_futex` tracepoint — software
//!   events, so this half works without a PMU;
//! - **cache cost** of one socket = extra LLC misses per instruction x instructions per
//!   CPU-second x miss penalty. The extra misses are measured once the group has run in both
//!   placements (MPKI on one socket minus MPKI spread); before that, a fixed share
//!   ([`Replica::shared_miss_share`]) of the MPKI seen so far is assumed to come from sharing.
//!   Without `instructions` and LLC misses (no PMU) the cache side is unknown and a group goes
//!   on one socket only if its sync saving exceeds [`Replica::sync_only_threshold`].
//!
//! A replica group is the set of observed tasks with the same name (replicas are copies of one
//! program). One socket: every replica's affinity becomes the package where the group's first
//! replica runs. Spread: replica i (by task id) gets package i mod P. On a one-package machine
//! both are the same and the policy does nothing. A group is moved only when the two sides
//! differ by more than [`Replica::hysteresis`] of CPU time.

use crate::signal;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::{Observation, TaskObservation};
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::BTreeMap;

/// The futex tracepoint, preferred to context switches as the meeting count where counted.
pub const FUTEX_TRACEPOINT: &str = "syscalls:sys_enter_futex";

/// Where a group is or should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Every replica in one package.
    SameSocket,
    /// Replicas over packages.
    Spread,
}

impl Choice {
    /// As logged.
    pub fn name(self) -> &'static str {
        match self {
            Choice::SameSocket => "same-socket",
            Choice::Spread => "spread",
        }
    }
}

#[derive(Clone, Debug, Default)]
struct GroupMemory {
    mpki_same: Option<f64>,
    mpki_spread: Option<f64>,
}

/// The replica policy.
#[derive(Clone, Debug)]
pub struct Replica {
    /// One notification on the same socket, ns (seed 001: 6,000 cycles at 2.66 GHz).
    pub notify_near_ns: f64,
    /// One notification across sockets, ns (seed 001: 14,300 cycles at 2.66 GHz).
    pub notify_far_ns: f64,
    /// Cost of one LLC miss, ns (memory latency over overlap).
    pub miss_penalty_ns: f64,
    /// Before both placements were seen: share of the observed MPKI assumed to come from
    /// co-replicas in the same LLC.
    pub shared_miss_share: f64,
    /// Without cache counters: one socket when the sync saving is above this share of CPU time.
    pub sync_only_threshold: f64,
    /// Minimum difference (share of CPU time) between the two sides to move a group.
    pub hysteresis: f64,
    memory: BTreeMap<String, GroupMemory>,
    reasons: BTreeMap<TaskId, String>,
}

impl Default for Replica {
    fn default() -> Self {
        Replica {
            notify_near_ns: 6_000.0 / 2.66,
            notify_far_ns: 14_300.0 / 2.66,
            miss_penalty_ns: 60.0,
            shared_miss_share: 0.5,
            sync_only_threshold: 0.01,
            hysteresis: 0.002,
            memory: BTreeMap::new(),
            reasons: BTreeMap::new(),
        }
    }
}

/// What the policy read and concluded for one group (for logs and tests).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecision {
    /// The group (task name).
    pub name: String,
    /// Where it is now (`None`: some replica's CPU unknown).
    pub current: Option<Choice>,
    /// Meetings per CPU-second.
    pub syncs_per_cpu_s: f64,
    /// Sync saving of one socket, share of CPU time.
    pub sync_saving: f64,
    /// Cache cost of one socket, share of CPU time (`None`: no cache counters).
    pub cache_cost: Option<f64>,
    /// The choice.
    pub choice: Choice,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

impl Replica {
    /// The policy with other notification costs (e.g. from `bench c2c` on the machine it runs
    /// on), ns per notification on the same socket and across sockets.
    pub fn with_notify_ns(near_ns: f64, far_ns: f64) -> Self {
        Replica {
            notify_near_ns: near_ns,
            notify_far_ns: far_ns,
            ..Replica::default()
        }
    }

    /// Where a group runs now, from its replicas' last CPUs.
    fn current(topology: &Topology, group: &[&TaskObservation]) -> Option<Choice> {
        let pkgs: Option<Vec<u32>> = group
            .iter()
            .map(|t| t.cpu.and_then(|c| topology.cpu(c)).and_then(|c| c.package))
            .collect();
        let pkgs = pkgs?;
        let first = *pkgs.first()?;
        Some(if pkgs.iter().all(|&p| p == first) {
            Choice::SameSocket
        } else {
            Choice::Spread
        })
    }

    /// Weigh one group (and remember the MPKI of its current placement).
    pub fn weigh(
        &mut self,
        topology: &Topology,
        name: &str,
        group: &[&TaskObservation],
    ) -> GroupDecision {
        let current = Self::current(topology, group);
        let syncs = mean(group.iter().filter_map(|t| {
            signal::running_rate(&t.sample, FUTEX_TRACEPOINT)
                .or_else(|| signal::running_rate(&t.sample, event::CONTEXT_SWITCHES))
        }))
        .unwrap_or(0.0);
        let sync_saving = syncs * (self.notify_far_ns - self.notify_near_ns).max(0.0) / 1e9;
        let mpki = mean(group.iter().filter_map(|t| signal::llc_mpki(&t.sample)));
        let ips = mean(
            group
                .iter()
                .filter_map(|t| signal::running_rate(&t.sample, event::INSTRUCTIONS)),
        );
        let mem = self.memory.entry(name.to_string()).or_default();
        match (current, mpki) {
            (Some(Choice::SameSocket), Some(m)) => mem.mpki_same = Some(m),
            (Some(Choice::Spread), Some(m)) => mem.mpki_spread = Some(m),
            _ => {}
        }
        let extra_mpki = match (mem.mpki_same, mem.mpki_spread, mpki) {
            (Some(s), Some(p), _) => Some((s - p).max(0.0)),
            (_, _, Some(m)) => Some(self.shared_miss_share * m),
            _ => None,
        };
        let cache_cost = match (extra_mpki, ips) {
            (Some(x), Some(ips)) => Some(x / 1000.0 * ips * self.miss_penalty_ns / 1e9),
            _ => None,
        };
        let preferred = match cache_cost {
            Some(c) if sync_saving > c => Choice::SameSocket,
            Some(_) => Choice::Spread,
            None if sync_saving > self.sync_only_threshold => Choice::SameSocket,
            None => Choice::Spread,
        };
        let margin = (sync_saving - cache_cost.unwrap_or(self.sync_only_threshold)).abs();
        let choice = match current {
            Some(c) if c != preferred && margin < self.hysteresis => c,
            _ => preferred,
        };
        GroupDecision {
            name: name.to_string(),
            current,
            syncs_per_cpu_s: syncs,
            sync_saving,
            cache_cost,
            choice,
        }
    }

    /// The groups of an observation: live tasks by name, two or more each.
    pub fn groups(observation: &Observation) -> BTreeMap<String, Vec<&TaskObservation>> {
        let mut g: BTreeMap<String, Vec<&TaskObservation>> = BTreeMap::new();
        for t in observation.tasks.iter().filter(|t| signal::is_live(t)) {
            g.entry(t.name.clone()).or_default().push(t);
        }
        g.retain(|_, v| v.len() >= 2);
        for v in g.values_mut() {
            v.sort_by_key(|t| t.id);
        }
        g
    }
}

impl Policy for Replica {
    fn name(&self) -> &str {
        "replica"
    }

    fn required_events(&self) -> Vec<&'static str> {
        vec![event::TASK_CLOCK, event::CONTEXT_SWITCHES]
    }

    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action> {
        self.reasons.clear();
        let packages = topology.packages();
        let online = topology.online_cpus();
        let pkg_cpus: Vec<CpuSet> = packages
            .iter()
            .map(|&p| topology.package_cpus(p).intersection(&online))
            .filter(|s| !s.is_empty())
            .collect();
        if pkg_cpus.len() < 2 {
            // One package: one socket and spread are the same placement.
            return Vec::new();
        }
        let groups: Vec<(String, Vec<TaskObservation>)> = Self::groups(observation)
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().cloned().collect()))
            .collect();
        let mut actions = Vec::new();
        for (name, tasks) in groups {
            let refs: Vec<&TaskObservation> = tasks.iter().collect();
            let d = self.weigh(topology, &name, &refs);
            let why = format!(
                "group {name} ({} replicas): {:.0} meetings/CPU-s, one socket saves {:.3}% of CPU \
                 time in notifications and costs {} in LLC misses -> {}",
                tasks.len(),
                d.syncs_per_cpu_s,
                d.sync_saving * 100.0,
                d.cache_cost
                    .map_or("unknown (no cache counters)".to_string(), |c| format!(
                        "{:.3}%",
                        c * 100.0
                    )),
                d.choice.name()
            );
            let home = tasks
                .first()
                .and_then(|t| t.cpu)
                .and_then(|c| pkg_cpus.iter().position(|s| s.contains(c)))
                .unwrap_or(0);
            for (i, t) in tasks.iter().enumerate() {
                let target = match d.choice {
                    Choice::SameSocket => pkg_cpus[home].clone(),
                    Choice::Spread => pkg_cpus[(home + i) % pkg_cpus.len()].clone(),
                };
                if t.affinity != target {
                    self.reasons.insert(t.id, why.clone());
                    actions.push(Action::SetAffinity {
                        task: t.id,
                        cpus: target,
                    });
                }
            }
        }
        actions
    }

    fn reason(&self, action: &Action) -> Option<String> {
        match action {
            Action::SetAffinity { task, .. } => self.reasons.get(task).cloned(),
            Action::Swap { a, .. } => self.reasons.get(a).cloned(),
            // Never asked for by this policy.
            Action::SetThreadAffinity { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::cpuset::CpuId;
    use counterpoint_core::sample::{CounterValue, Sample};
    use counterpoint_core::topology::SymmetricSpec;

    fn topo() -> Topology {
        Topology::symmetric(&SymmetricSpec {
            packages: 2,
            cores_per_package: 6,
            threads_per_core: 1,
            ..SymmetricSpec::default()
        })
        .expect("topology")
    }

    /// One replica's second: `syncs` meetings, `ips` instructions, `mpki` LLC misses per kilo.
    fn task(
        id: u64,
        name: &str,
        cpu: CpuId,
        syncs: u64,
        ips: Option<f64>,
        mpki: f64,
    ) -> TaskObservation {
        let ns = 1_000_000_000;
        let mut s = Sample::new(Some(TaskId(id)), ns);
        s.set(event::TASK_CLOCK, CounterValue::exact(ns, ns));
        s.set(event::CONTEXT_SWITCHES, CounterValue::exact(syncs, ns));
        if let Some(ips) = ips {
            s.set(event::INSTRUCTIONS, CounterValue::exact(ips as u64, ns));
            s.set(
                event::CACHE_MISSES,
                CounterValue::exact((ips * mpki / 1000.0) as u64, ns),
            );
        }
        TaskObservation {
            id: TaskId(id),
            name: name.into(),
            affinity: CpuSet::single(cpu),
            cpu: Some(cpu),
            sample: s,
            runnable: true,
            finished: false,
            code: None,
        }
    }

    fn obs(tasks: Vec<TaskObservation>) -> Observation {
        Observation {
            time_ns: 1_000_000_000,
            interval_ns: 1_000_000_000,
            tasks,
            cpus: vec![],
            memory_utilization: vec![],
        }
    }

    fn targets(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                Action::SetAffinity { cpus, .. } | Action::SetThreadAffinity { cpus, .. } => {
                    cpus.to_list()
                }
                Action::Swap { .. } => "swap".into(),
            })
            .collect()
    }

    #[test]
    fn sync_heavy_low_mpki_group_goes_to_one_socket() {
        let t = topo();
        let mut p = Replica::default();
        // Spread over CPUs 0 (package 0) and 6, 1 (package 1, 0): 50,000 meetings per second,
        // 2e9 instructions per second, 0.1 MPKI.
        let o = obs(vec![
            task(1, "app", 0, 50_000, Some(2e9), 0.1),
            task(2, "app", 6, 50_000, Some(2e9), 0.1),
            task(3, "app", 1, 50_000, Some(2e9), 0.1),
        ]);
        let a = p.decide(&t, &o);
        // CPU 0 is package 0 (CPUs 0-5): every replica there; task 1 and 3 are already
        // restricted to a single CPU of it, so all three get the package set.
        assert_eq!(targets(&a), vec!["0-5", "0-5", "0-5"]);
        assert!(p.reason(&a[0]).expect("reason").contains("same-socket"));
    }

    #[test]
    fn cache_heavy_group_spreads() {
        let t = topo();
        let mut p = Replica::default();
        // All on package 0, 100 meetings per second, 25 MPKI at 1e9 instructions per second.
        let o = obs(vec![
            task(1, "lq", 0, 100, Some(1e9), 25.0),
            task(2, "lq", 1, 100, Some(1e9), 25.0),
            task(3, "lq", 2, 100, Some(1e9), 25.0),
        ]);
        let a = p.decide(&t, &o);
        assert_eq!(targets(&a), vec!["0-5", "6-11", "0-5"]);
        assert!(p.reason(&a[1]).expect("reason").contains("-> spread"));
    }

    #[test]
    fn measured_difference_replaces_the_assumed_share() {
        let t = topo();
        let mut p = Replica::default();
        // 2,000 meetings/s save 2000 * 3120 ns = 0.62 % of CPU time on one socket. On one
        // socket 1.0 MPKI at 1e9 instr/s: assumed extra 0.5 MPKI = 3 % -> spread.
        let same = obs(vec![
            task(1, "g", 0, 2_000, Some(1e9), 1.0),
            task(2, "g", 1, 2_000, Some(1e9), 1.0),
        ]);
        let d = p.weigh(&t, "g", &Replica::groups(&same)["g"]);
        assert_eq!(d.choice, Choice::Spread);
        // Spread it measures 0.95 MPKI: the real extra is 0.05 MPKI = 0.3 % < 0.62 % -> back.
        let spread = obs(vec![
            task(1, "g", 0, 2_000, Some(1e9), 0.95),
            task(2, "g", 6, 2_000, Some(1e9), 0.95),
        ]);
        let d = p.weigh(&t, "g", &Replica::groups(&spread)["g"]);
        assert_eq!(d.current, Some(Choice::Spread));
        let cost = d.cache_cost.expect("cost");
        assert!((cost - 0.05 / 1000.0 * 1e9 * 60e-9).abs() < 1e-9, "{cost}");
        assert_eq!(d.choice, Choice::SameSocket);
    }

    #[test]
    fn without_pmu_only_the_sync_rate_decides() {
        let t = topo();
        let mut p = Replica::default();
        let chatty = obs(vec![
            task(1, "a", 0, 20_000, None, 0.0),
            task(2, "a", 6, 20_000, None, 0.0),
        ]);
        let d = p.weigh(&t, "a", &Replica::groups(&chatty)["a"]);
        assert_eq!(d.cache_cost, None);
        assert_eq!(d.choice, Choice::SameSocket, "{d:?}");
        let quiet = obs(vec![
            task(3, "b", 0, 100, None, 0.0),
            task(4, "b", 1, 100, None, 0.0),
        ]);
        let d = p.weigh(&t, "b", &Replica::groups(&quiet)["b"]);
        assert_eq!(d.choice, Choice::Spread);
    }

    #[test]
    fn single_tasks_and_one_package_machines_are_left_alone() {
        let mut p = Replica::default();
        let o = obs(vec![
            task(1, "solo", 0, 50_000, Some(1e9), 0.1),
            task(2, "x", 1, 50_000, Some(1e9), 0.1),
        ]);
        assert!(p.decide(&topo(), &o).is_empty());
        let one = Topology::symmetric(&SymmetricSpec {
            packages: 1,
            cores_per_package: 4,
            threads_per_core: 1,
            ..SymmetricSpec::default()
        })
        .expect("topology");
        let o = obs(vec![
            task(1, "a", 0, 50_000, Some(1e9), 0.1),
            task(2, "a", 1, 50_000, Some(1e9), 0.1),
        ]);
        assert!(p.decide(&one, &o).is_empty());
    }
}
