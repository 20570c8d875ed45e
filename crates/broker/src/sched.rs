//! The scheduler: a pure, deterministic function of its inputs in virtual time (nanoseconds
//! passed in by the caller), so it is tested without clocks.
//!
//! Consumers (registrations) need counter *keys* — one per (event, target) kernel counter,
//! shared by every consumer that asked for the same event on the same target. A consumer's
//! demand is made of *units*, each a set of keys on a set of CPUs that must be counted together:
//! a task target is one unit spanning every CPU (the task's counter counts wherever the task
//! runs, so it holds a slot on all of them at once); a per-CPU target (`cpus:0-3`) is one unit
//! per CPU, each with that CPU's own kernel counters, scheduled on its CPU independently of the
//! others. Each CPU has a budget of `slots` keys at once, applied to software events too.
//!
//! Time is cut into slices; at each slice the scheduler admits units in stride order (lowest
//! *pass* first) while every CPU of the unit has room for its keys that are not already admitted
//! there; a unit's pass grows by `elapsed / weight` while it runs, so on each CPU counted time
//! is proportional to weight. Weights are per consumer: system consumers share
//! `reserved_system` of the time, users the rest, fairly per uid, then by share within a uid. An
//! exclusive grant (root, bounded) admits one consumer's units alone until it expires.

use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Scheduling errors.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchedError {
    /// The consumer needs more distinct counters on one CPU than there are slots.
    #[error(
        "{keys} distinct events need {keys} counter slots on CPU {cpu}, but only {slots} exist"
    )]
    TooManyEvents {
        /// Distinct keys of the unit.
        keys: usize,
        /// Slots per CPU.
        slots: usize,
        /// The CPU.
        cpu: usize,
    },
    /// No such consumer.
    #[error("no registration {0}")]
    Unknown(u64),
    /// A CPU outside the machine.
    #[error("CPU {cpu} is not one of the {cpus} scheduled CPUs")]
    BadCpu {
        /// The CPU.
        cpu: usize,
        /// How many there are.
        cpus: usize,
    },
    /// Share 0 or too large.
    #[error("share {0} is outside 1..=1000")]
    BadShare(u32),
    /// A demand without units, or a unit without CPUs.
    #[error("a demand needs at least one unit, and every unit at least one CPU")]
    Empty,
}

/// Consumer class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// A system consumer (the placement agent): the reserved share.
    System,
    /// A user's consumer.
    User,
}

/// Keys counted together on a set of CPUs: running or not as one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Kernel counter keys (deduplicated (event, target) pairs).
    pub keys: BTreeSet<u64>,
    /// CPUs on which the keys take a slot.
    pub cpus: BTreeSet<usize>,
    /// `None`: CPU-context keys, holding their slots on `cpus` all the time. `Some(t)`: keys of
    /// task set `t` (one canonical task target), which the kernel puts on a CPU's counters only
    /// while one of those tasks runs there. A CPU runs one task at a time, so different task
    /// sets never compete with each other for slots; each competes with the CPU-context keys of
    /// the CPUs it may run on, and with the other keys of its own task set.
    pub task: Option<u64>,
}

/// What the scheduler needs to know about a consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Demand {
    /// Owner (fair share is per uid).
    pub uid: u32,
    /// Class.
    pub class: Class,
    /// Relative share among the owner's consumers (1..=1000).
    pub share: u32,
    /// What must be counted together, scheduled independently of each other.
    pub units: Vec<Unit>,
}

impl Demand {
    /// CPU-context keys holding a slot on every CPU in `cpus` at once, in one unit.
    pub fn joint(
        uid: u32,
        class: Class,
        share: u32,
        keys: BTreeSet<u64>,
        cpus: BTreeSet<usize>,
    ) -> Demand {
        Demand::one_unit(uid, class, share, keys, cpus, None)
    }

    /// A task target: the keys of task set `task`, whose tasks may run on `cpus`, in one unit.
    pub fn task(
        uid: u32,
        class: Class,
        share: u32,
        task: u64,
        keys: BTreeSet<u64>,
        cpus: BTreeSet<usize>,
    ) -> Demand {
        Demand::one_unit(uid, class, share, keys, cpus, Some(task))
    }

    fn one_unit(
        uid: u32,
        class: Class,
        share: u32,
        keys: BTreeSet<u64>,
        cpus: BTreeSet<usize>,
        task: Option<u64>,
    ) -> Demand {
        Demand {
            uid,
            class,
            share,
            units: vec![Unit { keys, cpus, task }],
        }
    }

    /// A per-CPU target: on each CPU its own keys, scheduled on that CPU alone.
    pub fn per_cpu(
        uid: u32,
        class: Class,
        share: u32,
        keys_by_cpu: BTreeMap<usize, BTreeSet<u64>>,
    ) -> Demand {
        Demand {
            uid,
            class,
            share,
            units: keys_by_cpu
                .into_iter()
                .map(|(cpu, keys)| Unit {
                    keys,
                    cpus: [cpu].into(),
                    task: None,
                })
                .collect(),
        }
    }
}

/// A unit of a consumer: (consumer id, index in its demand's units).
pub type UnitId = (u64, usize);

#[derive(Clone, Debug)]
struct UnitState {
    pass: f64,
    running_ns: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    demand: Demand,
    units: Vec<UnitState>,
    enabled_ns: u64,
}

/// The scheduler state.
#[derive(Clone, Debug)]
pub struct Scheduler {
    slots: usize,
    cpus: usize,
    reserved_system: f64,
    entries: BTreeMap<u64, Entry>,
    running: BTreeSet<UnitId>,
    exclusive: Option<(u64, u64)>,
    now_ns: u64,
    /// [`Scheduler::weights`], recomputed only when consumers come or go.
    weights: Option<BTreeMap<u64, f64>>,
    /// Whether some CPU is asked for more keys than it has slots (recomputed only when
    /// consumers come or go): when not, every unit runs all the time and slices change nothing.
    contended: Option<bool>,
    /// Units present.
    units: usize,
}

/// Accounting of one consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accounting {
    /// Virtual time since it was added.
    pub enabled_ns: u64,
    /// Virtual time it was running: for a consumer of several units (per-CPU), the mean over
    /// its units (so `running_ns / enabled_ns` is its mean coverage).
    pub running_ns: u64,
    /// Virtual running time of each unit, in demand order.
    pub units_running_ns: Vec<u64>,
}

/// Keys in use: per CPU for CPU-context keys, per task set for task keys (with the CPUs its
/// tasks may run on). On CPU `c` the slots taken are its CPU-context keys plus, at worst, the
/// keys of the largest task set that may run there.
struct Occupancy {
    cpu: Vec<BTreeSet<u64>>,
    task: BTreeMap<u64, (BTreeSet<u64>, BTreeSet<usize>)>,
}

impl Occupancy {
    fn new(cpus: usize) -> Self {
        Occupancy {
            cpu: vec![BTreeSet::new(); cpus],
            task: BTreeMap::new(),
        }
    }

    /// Keys of the largest task set that may run on `c`, other than `except`.
    fn task_on(&self, c: usize, except: Option<u64>) -> usize {
        self.task
            .iter()
            .filter(|(t, (_, cpus))| Some(**t) != except && cpus.contains(&c))
            .map(|(_, (keys, _))| keys.len())
            .max()
            .unwrap_or(0)
    }

    fn fits(&self, u: &Unit, slots: usize) -> bool {
        match u.task {
            None => u
                .cpus
                .iter()
                .all(|&c| self.cpu[c].union(&u.keys).count() + self.task_on(c, None) <= slots),
            Some(t) => {
                let (mine, cpus) = match self.task.get(&t) {
                    Some((k, c)) => (
                        k.union(&u.keys).count(),
                        c.union(&u.cpus).copied().collect(),
                    ),
                    None => (u.keys.len(), u.cpus.clone()),
                };
                // Adding to task set t raises the worst case on every CPU its tasks may run on.
                cpus.iter().all(|&c: &usize| {
                    let others = self.task_on(c, Some(t));
                    self.cpu[c].len() + mine.max(others) <= slots
                })
            }
        }
    }

    fn add(&mut self, u: &Unit) {
        match u.task {
            None => {
                for &c in &u.cpus {
                    self.cpu[c].extend(u.keys.iter().copied());
                }
            }
            Some(t) => {
                let e = self.task.entry(t).or_default();
                e.0.extend(u.keys.iter().copied());
                e.1.extend(u.cpus.iter().copied());
            }
        }
    }

    fn per_cpu(&self) -> Vec<usize> {
        (0..self.cpu.len())
            .map(|c| self.cpu[c].len() + self.task_on(c, None))
            .collect()
    }
}

impl Scheduler {
    /// `slots` counters per CPU on `cpus` CPUs; `reserved_system` in [0, 1] is the fraction of
    /// time system consumers share when users also want time.
    pub fn new(slots: usize, cpus: usize, reserved_system: f64) -> Self {
        Scheduler {
            slots: slots.max(1),
            cpus: cpus.max(1),
            reserved_system: reserved_system.clamp(0.0, 1.0),
            entries: BTreeMap::new(),
            running: BTreeSet::new(),
            exclusive: None,
            now_ns: 0,
            weights: None,
            contended: None,
            units: 0,
        }
    }

    /// Slots per CPU.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// CPUs.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Virtual now.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Add a consumer at the current time. Its units join with the smallest pass of the units
    /// present, so they neither starve nor monopolize. It runs from the next
    /// [`Scheduler::replan`].
    pub fn add(&mut self, id: u64, demand: Demand) -> Result<(), SchedError> {
        if demand.share == 0 || demand.share > 1000 {
            return Err(SchedError::BadShare(demand.share));
        }
        if demand.units.is_empty() || demand.units.iter().any(|u| u.cpus.is_empty()) {
            return Err(SchedError::Empty);
        }
        for u in &demand.units {
            if let Some(&cpu) = u.cpus.iter().find(|&&c| c >= self.cpus) {
                return Err(SchedError::BadCpu {
                    cpu,
                    cpus: self.cpus,
                });
            }
            if u.keys.len() > self.slots {
                return Err(SchedError::TooManyEvents {
                    keys: u.keys.len(),
                    slots: self.slots,
                    cpu: u.cpus.iter().next().copied().unwrap_or(0),
                });
            }
        }
        let pass = self
            .entries
            .values()
            .flat_map(|e| e.units.iter().map(|u| u.pass))
            .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.min(p))))
            .unwrap_or(0.0);
        self.weights = None;
        self.contended = None;
        self.units += demand.units.len();
        let units = vec![
            UnitState {
                pass,
                running_ns: 0
            };
            demand.units.len()
        ];
        self.entries.insert(
            id,
            Entry {
                demand,
                units,
                enabled_ns: 0,
            },
        );
        Ok(())
    }

    /// Remove a consumer (its accounting is dropped).
    pub fn remove(&mut self, id: u64) -> Result<(), SchedError> {
        let e = self.entries.remove(&id).ok_or(SchedError::Unknown(id))?;
        self.units -= e.units.len();
        self.weights = None;
        self.contended = None;
        self.running.retain(|&(i, _)| i != id);
        if matches!(self.exclusive, Some((e, _)) if e == id) {
            self.exclusive = None;
        }
        Ok(())
    }

    /// Give `id` the counters alone from now until `now + duration_ns`.
    pub fn grant_exclusive(&mut self, id: u64, duration_ns: u64) -> Result<(), SchedError> {
        if !self.entries.contains_key(&id) {
            return Err(SchedError::Unknown(id));
        }
        self.exclusive = Some((id, self.now_ns.saturating_add(duration_ns)));
        Ok(())
    }

    /// The exclusive grant in force: (consumer, end time).
    pub fn exclusive(&self) -> Option<(u64, u64)> {
        self.exclusive
    }

    /// The weight of each consumer (sums to 1 over consumers present).
    pub fn weights(&self) -> BTreeMap<u64, f64> {
        let sys_total: u64 = self
            .entries
            .values()
            .filter(|e| e.demand.class == Class::System)
            .map(|e| u64::from(e.demand.share))
            .sum();
        let mut per_uid: BTreeMap<u32, u64> = BTreeMap::new();
        for e in self
            .entries
            .values()
            .filter(|e| e.demand.class == Class::User)
        {
            *per_uid.entry(e.demand.uid).or_default() += u64::from(e.demand.share);
        }
        let (sys_frac, user_frac) = match (sys_total > 0, !per_uid.is_empty()) {
            (true, true) => (self.reserved_system, 1.0 - self.reserved_system),
            (true, false) => (1.0, 0.0),
            _ => (0.0, 1.0),
        };
        let users = per_uid.len().max(1) as f64;
        self.entries
            .iter()
            .map(|(&id, e)| {
                let s = f64::from(e.demand.share);
                let w = match e.demand.class {
                    Class::System => sys_frac * s / sys_total as f64,
                    Class::User => user_frac / users * s / per_uid[&e.demand.uid] as f64,
                };
                // A zero weight (reserved share 0 or 1) still runs when there is room, last.
                (id, w.max(1e-9))
            })
            .collect()
    }

    /// Account the time from the last call to `now_ns`: enabled for everyone, running (and pass)
    /// for the units running. Time never goes backwards: an earlier `now_ns` is ignored.
    pub fn advance_to(&mut self, now_ns: u64) {
        if now_ns <= self.now_ns {
            return;
        }
        let dt = now_ns - self.now_ns;
        let weights = match self.weights.take() {
            Some(w) => w,
            None => self.weights(),
        };
        for e in self.entries.values_mut() {
            e.enabled_ns += dt;
        }
        for &(id, u) in &self.running {
            if let Some(st) = self.entries.get_mut(&id).and_then(|e| e.units.get_mut(u)) {
                st.running_ns += dt;
                st.pass += dt as f64 / weights[&id];
            }
        }
        self.weights = Some(weights);
        self.now_ns = now_ns;
        if matches!(self.exclusive, Some((_, until)) if until <= now_ns) {
            self.exclusive = None;
        }
    }

    /// Whether the slot budget is short anywhere: some CPU is asked for more distinct keys, by
    /// all units together, than it has slots.
    pub fn contended(&mut self) -> bool {
        if let Some(c) = self.contended {
            return c;
        }
        let mut wanted = Occupancy::new(self.cpus);
        for e in self.entries.values() {
            for u in &e.demand.units {
                wanted.add(u);
            }
        }
        let c = wanted.per_cpu().iter().any(|&w| w > self.slots);
        self.contended = Some(c);
        c
    }

    /// Whether a slice boundary can change nothing: no exclusive grant, no contention, and every
    /// unit already running. Then the caller may skip the tick (time is accounted at the next
    /// read or change).
    pub fn settled(&mut self) -> bool {
        self.exclusive.is_none() && !self.contended() && self.running.len() == self.units
    }

    /// Choose which units run from now on (until the next call). Returns the running set.
    pub fn replan(&mut self) -> &BTreeSet<UnitId> {
        if self.exclusive.is_none() && !self.contended() {
            // Everyone fits: everyone runs (no ordering needed).
            if self.running.len() != self.units {
                self.running = self
                    .entries
                    .iter()
                    .flat_map(|(&id, e)| (0..e.units.len()).map(move |u| (id, u)))
                    .collect();
            }
            return &self.running;
        }
        let mut running = BTreeSet::new();
        if let Some((id, _)) = self.exclusive {
            if let Some(e) = self.entries.get(&id) {
                running.extend((0..e.units.len()).map(|u| (id, u)));
            }
            self.running = running;
            return &self.running;
        }
        let mut order: Vec<(f64, UnitId)> = self
            .entries
            .iter()
            .flat_map(|(&id, e)| {
                e.units
                    .iter()
                    .enumerate()
                    .map(move |(u, s)| (s.pass, (id, u)))
            })
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut used = Occupancy::new(self.cpus);
        for (_, (id, u)) in order {
            let unit = &self.entries[&id].demand.units[u];
            if used.fits(unit, self.slots) {
                used.add(unit);
                running.insert((id, u));
            }
        }
        self.running = running;
        &self.running
    }

    /// `advance_to(now_ns)` then `replan()`: one slice boundary.
    pub fn tick(&mut self, now_ns: u64) -> &BTreeSet<UnitId> {
        self.advance_to(now_ns);
        self.replan()
    }

    /// Which units run now.
    pub fn running(&self) -> &BTreeSet<UnitId> {
        &self.running
    }

    /// Whether some unit of `id` runs now.
    pub fn is_running(&self, id: u64) -> bool {
        self.running
            .range((id, 0)..=(id, usize::MAX))
            .next()
            .is_some()
    }

    /// Whether a running unit of `id` counts `key` now.
    pub fn key_running(&self, id: u64, key: u64) -> bool {
        self.key_running_in(&self.running, id, key)
    }

    /// Whether, with `running` as the running set, a unit of `id` counted `key` (the set before
    /// a change of plan, when crediting what the counters counted under it).
    pub fn key_running_in(&self, running: &BTreeSet<UnitId>, id: u64, key: u64) -> bool {
        let Some(e) = self.entries.get(&id) else {
            return false;
        };
        running
            .range((id, 0)..=(id, usize::MAX))
            .any(|&(_, u)| e.demand.units.get(u).is_some_and(|x| x.keys.contains(&key)))
    }

    /// Whether some unit in `running` counts `key` (the kernel counter must then be enabled).
    pub fn key_wanted(&self, running: &BTreeSet<UnitId>, key: u64) -> bool {
        running.iter().any(|&(id, u)| {
            self.entries
                .get(&id)
                .and_then(|e| e.demand.units.get(u))
                .is_some_and(|x| x.keys.contains(&key))
        })
    }

    /// The keys of the units in `units` (those whose counters a change of plan touches).
    pub fn keys_of<'a>(&self, units: impl IntoIterator<Item = &'a UnitId>) -> BTreeSet<u64> {
        let mut keys = BTreeSet::new();
        for &(id, u) in units {
            if let Some(x) = self.entries.get(&id).and_then(|e| e.demand.units.get(u)) {
                keys.extend(x.keys.iter().copied());
            }
        }
        keys
    }

    /// A consumer's virtual accounting.
    pub fn accounting(&self, id: u64) -> Option<Accounting> {
        self.entries.get(&id).map(|e| {
            let units_running_ns: Vec<u64> = e.units.iter().map(|u| u.running_ns).collect();
            let n = units_running_ns.len().max(1) as u64;
            Accounting {
                enabled_ns: e.enabled_ns,
                running_ns: units_running_ns.iter().sum::<u64>() / n,
                units_running_ns,
            }
        })
    }

    /// Consumers present.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries.keys().copied()
    }

    /// A consumer's demand.
    pub fn demand(&self, id: u64) -> Option<&Demand> {
        self.entries.get(&id).map(|e| &e.demand)
    }

    /// Slots in use on each CPU by the running units, at worst (its CPU-context keys plus the
    /// largest task set that may run there): the over-commit invariant.
    pub fn slots_used(&self) -> Vec<usize> {
        let mut used = Occupancy::new(self.cpus);
        for &(id, u) in &self.running {
            used.add(&self.entries[&id].demand.units[u]);
        }
        used.per_cpu()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn demand(uid: u32, class: Class, share: u32, keys: &[u64], cpus: &[usize]) -> Demand {
        Demand::joint(
            uid,
            class,
            share,
            keys.iter().copied().collect(),
            cpus.iter().copied().collect(),
        )
    }

    /// A per-CPU demand: `(cpu, keys)` pairs.
    fn per_cpu(uid: u32, share: u32, units: &[(usize, &[u64])]) -> Demand {
        Demand::per_cpu(
            uid,
            Class::User,
            share,
            units
                .iter()
                .map(|(c, k)| (*c, k.iter().copied().collect()))
                .collect(),
        )
    }

    fn run(s: &mut Scheduler, slices: u64, len_ns: u64) {
        for _ in 0..slices {
            let now = s.now_ns() + len_ns;
            s.tick(now);
            let used = s.slots_used();
            assert!(used.iter().all(|&u| u <= s.slots()), "over-commit {used:?}");
        }
    }

    fn units(s: &Scheduler, id: u64) -> Vec<u64> {
        s.accounting(id).unwrap().units_running_ns
    }

    #[test]
    fn shares_1_2_5_on_one_slot() {
        let mut s = Scheduler::new(1, 1, 0.0);
        for (id, share) in [(1, 1), (2, 2), (3, 5)] {
            s.add(id, demand(1000, Class::User, share, &[id], &[0]))
                .unwrap();
        }
        s.replan();
        run(&mut s, 8000, 1_000_000);
        let r: Vec<u64> = (1..=3)
            .map(|id| s.accounting(id).unwrap().running_ns)
            .collect();
        assert_eq!(r.iter().sum::<u64>(), 8000 * 1_000_000);
        assert_eq!(
            r,
            vec![1000 * 1_000_000, 2000 * 1_000_000, 5000 * 1_000_000]
        );
    }

    #[test]
    fn same_event_same_target_is_one_slot() {
        // 100 consumers of the same four keys fit in four slots: all run all the time.
        let mut s = Scheduler::new(4, 2, 0.0);
        for id in 0..100 {
            s.add(
                id,
                demand(1000 + id as u32, Class::User, 1, &[1, 2, 3, 4], &[0, 1]),
            )
            .unwrap();
        }
        s.replan();
        run(&mut s, 10, 1000);
        for id in 0..100 {
            let a = s.accounting(id).unwrap();
            assert_eq!(a.running_ns, a.enabled_ns);
        }
    }

    #[test]
    fn each_cpu_is_sliced_on_its_own() {
        // One slot per CPU. Consumer 1 counts CPUs 0 and 1 (keys 10 on CPU 0, 11 on CPU 1),
        // consumer 2 (another uid, equal weight) only CPU 0 (key 20). CPU 1 has no contention:
        // consumer 1 counts it all the time; CPU 0 is split 1:1. Summed over CPUs (the old,
        // all-or-nothing scheduler) consumer 1 would have run half the time on both.
        let mut s = Scheduler::new(1, 2, 0.0);
        s.add(1, per_cpu(1000, 1, &[(0, &[10]), (1, &[11])]))
            .unwrap();
        s.add(2, per_cpu(1001, 1, &[(0, &[20])])).unwrap();
        s.replan();
        run(&mut s, 1000, 1000);
        assert_eq!(units(&s, 1), vec![500 * 1000, 1000 * 1000]);
        assert_eq!(units(&s, 2), vec![500 * 1000]);
        // Mean coverage over its CPUs: (0.5 + 1) / 2.
        assert_eq!(s.accounting(1).unwrap().running_ns, 750 * 1000);
        assert_eq!(s.accounting(1).unwrap().enabled_ns, 1000 * 1000);
    }

    #[test]
    fn per_cpu_shares_follow_weights_on_every_cpu() {
        // Two slots per CPU, three consumers of two keys each on CPUs 0-1, shares 1:1:2 of one
        // uid: on each CPU one consumer runs at a time, in time 1:1:2 (250/250/500 of 1000).
        let mut s = Scheduler::new(2, 2, 0.0);
        for (id, share) in [(1u64, 1), (2, 1), (3, 2)] {
            let k = id * 10;
            s.add(
                id,
                per_cpu(7, share, &[(0, &[k, k + 1]), (1, &[k + 2, k + 3])]),
            )
            .unwrap();
        }
        s.replan();
        run(&mut s, 1000, 1000);
        for cpu in 0..2 {
            let got: Vec<u64> = (1..=3).map(|id| units(&s, id)[cpu]).collect();
            assert_eq!(got, vec![250 * 1000, 250 * 1000, 500 * 1000], "CPU {cpu}");
        }
    }

    #[test]
    fn a_task_unit_needs_every_cpu_at_once() {
        // A task counter (key 1 of task set 7, CPUs 0-1) against a per-CPU consumer of CPU 0
        // (key 2), one slot: the task may run on CPU 0, so its unit runs only when CPU 0's slot
        // is free; each gets half.
        let mut s = Scheduler::new(1, 2, 0.0);
        s.add(
            1,
            Demand::task(1000, Class::User, 1, 7, [1].into(), [0, 1].into()),
        )
        .unwrap();
        s.add(2, per_cpu(1001, 1, &[(0, &[2])])).unwrap();
        s.replan();
        let mut both = 0;
        for _ in 0..1000 {
            let now = s.now_ns() + 1000;
            let r = s.tick(now);
            both += usize::from(r.len() == 2);
        }
        assert_eq!(both, 0, "never both: they compete for CPU 0's one slot");
        assert_eq!(units(&s, 1), vec![500 * 1000]);
        assert_eq!(units(&s, 2), vec![500 * 1000]);
        assert!(s.key_running(1, 1) != s.key_running(2, 2));
    }

    #[test]
    fn an_uncontended_plan_is_settled_until_someone_contends() {
        let mut s = Scheduler::new(2, 2, 0.0);
        s.add(1, demand(1000, Class::User, 1, &[1, 2], &[0, 1]))
            .unwrap();
        s.add(2, per_cpu(1000, 1, &[(1, &[1])])).unwrap();
        assert!(!s.settled(), "a new consumer is not running yet");
        s.replan();
        assert!(s.settled());
        assert_eq!(s.running().len(), 2);
        // A third key on CPU 1 exceeds its two slots: slicing is needed again.
        s.add(3, per_cpu(1001, 1, &[(1, &[3])])).unwrap();
        assert!(s.contended() && !s.settled());
        run(&mut s, 100, 1000);
        assert!(units(&s, 3)[0] > 0 && units(&s, 3)[0] < 100 * 1000);
        s.remove(3).unwrap();
        s.replan();
        assert!(s.settled());
    }

    #[test]
    fn different_tasks_never_compete_for_slots() {
        // 100 consumers of four events each on 100 different tasks, four slots: a CPU runs one
        // task at a time, so every task's four counters fit, and nobody is multiplexed.
        let mut s = Scheduler::new(4, 2, 0.0);
        for id in 0..100u64 {
            let keys = (0..4).map(|k| id * 4 + k).collect();
            s.add(
                id,
                Demand::task(1000, Class::User, 1, id, keys, [0, 1].into()),
            )
            .unwrap();
        }
        assert!(!s.contended());
        s.replan();
        run(&mut s, 10, 1000);
        for id in 0..100 {
            let a = s.accounting(id).unwrap();
            assert_eq!(a.running_ns, a.enabled_ns);
        }
        // Five events on one task need five slots while it runs: refused at four.
        assert!(s
            .add(
                200,
                Demand::task(1000, Class::User, 1, 5, [900, 901].into(), [0].into())
            )
            .is_ok());
        assert!(s.contended(), "task set 5 now wants 6 keys on CPU 0");
    }

    #[test]
    fn a_task_set_shares_a_cpu_with_that_cpus_own_counters() {
        // Two slots. Task set 1 wants keys 1 and 2; CPU 0's own counter (key 3) leaves it one
        // slot there, so they alternate; CPU 1's own counter (key 4) alone fits beside either.
        let mut s = Scheduler::new(2, 2, 0.0);
        s.add(
            1,
            Demand::task(1000, Class::User, 1, 1, [1, 2].into(), [0, 1].into()),
        )
        .unwrap();
        s.add(2, per_cpu(1001, 1, &[(0, &[3]), (1, &[4])])).unwrap();
        assert!(s.contended());
        s.replan();
        run(&mut s, 1000, 1000);
        let task = units(&s, 1)[0];
        let cpu0 = units(&s, 2)[0];
        assert_eq!(
            task + cpu0,
            1000 * 1000,
            "never both on CPU 0, never neither"
        );
        assert_eq!(task, 500 * 1000);
        assert!(units(&s, 2)[1] >= 500 * 1000);
    }

    #[test]
    fn system_reserve_and_per_user_fairness() {
        let mut s = Scheduler::new(1, 1, 0.2);
        s.add(1, demand(0, Class::System, 1, &[1], &[0])).unwrap();
        // uid 1000 has three consumers, uid 1001 one: the users split 0.8 evenly.
        for id in 2..=4 {
            s.add(id, demand(1000, Class::User, 1, &[id], &[0]))
                .unwrap();
        }
        s.add(5, demand(1001, Class::User, 1, &[5], &[0])).unwrap();
        let w = s.weights();
        assert!((w[&1] - 0.2).abs() < 1e-12);
        assert!((w[&5] - 0.4).abs() < 1e-12);
        assert!((w[&2] + w[&3] + w[&4] - 0.4).abs() < 1e-12);
        s.replan();
        run(&mut s, 3000, 1000);
        let r = |id| s.accounting(id).unwrap().running_ns;
        assert_eq!(r(1), 600 * 1000);
        assert_eq!(r(5), 1200 * 1000);
    }

    #[test]
    fn exclusive_grant_runs_alone_then_ends() {
        let mut s = Scheduler::new(4, 2, 0.0);
        for id in 1..=3 {
            s.add(id, demand(1000, Class::User, 1, &[id], &[0]))
                .unwrap();
        }
        s.add(4, per_cpu(1000, 1, &[(0, &[40]), (1, &[41])]))
            .unwrap();
        s.replan();
        assert_eq!(s.running().len(), 5);
        s.grant_exclusive(4, 5000).unwrap();
        s.replan();
        for _ in 0..4 {
            let now = s.now_ns() + 1000;
            assert_eq!(
                s.tick(now).iter().copied().collect::<Vec<_>>(),
                vec![(4, 0), (4, 1)]
            );
        }
        let now = s.now_ns() + 1000;
        assert_eq!(s.tick(now).len(), 5);
        assert_eq!(s.exclusive(), None);
    }

    #[test]
    fn refusals_are_typed() {
        let mut s = Scheduler::new(2, 2, 0.0);
        assert_eq!(
            s.add(1, demand(1, Class::User, 1, &[1, 2, 3], &[0])),
            Err(SchedError::TooManyEvents {
                keys: 3,
                slots: 2,
                cpu: 0
            })
        );
        assert_eq!(
            s.add(1, per_cpu(1, 1, &[(0, &[1]), (1, &[2, 3, 4])])),
            Err(SchedError::TooManyEvents {
                keys: 3,
                slots: 2,
                cpu: 1
            })
        );
        assert_eq!(
            s.add(1, demand(1, Class::User, 0, &[1], &[0])),
            Err(SchedError::BadShare(0))
        );
        assert_eq!(
            s.add(1, demand(1, Class::User, 1, &[1], &[5])),
            Err(SchedError::BadCpu { cpu: 5, cpus: 2 })
        );
        assert_eq!(s.add(1, per_cpu(1, 1, &[])), Err(SchedError::Empty));
        assert_eq!(s.grant_exclusive(9, 1), Err(SchedError::Unknown(9)));
    }

    proptest! {
        #[test]
        fn counted_time_is_proportional_to_shares(shares in proptest::collection::vec(1u32..=20, 1..6)) {
            let mut s = Scheduler::new(1, 1, 0.0);
            for (i, &sh) in shares.iter().enumerate() {
                s.add(i as u64, demand(7, Class::User, sh, &[i as u64], &[0])).unwrap();
            }
            s.replan();
            let total: u64 = shares.iter().map(|&x| u64::from(x)).sum();
            let slices = total * 50;
            run(&mut s, slices, 1000);
            let n = shares.len() as f64;
            for (i, &sh) in shares.iter().enumerate() {
                let got = s.accounting(i as u64).unwrap().running_ns as f64;
                let want = (slices * 1000) as f64 * f64::from(sh) / total as f64;
                // Within rounding: stride scheduling lags by at most a few slices.
                prop_assert!((got - want).abs() <= n * 1000.0, "consumer {i}: {got} vs {want}");
            }
        }

        #[test]
        fn per_cpu_time_is_proportional_to_shares_on_each_cpu(
            shares in proptest::collection::vec((1u32..=20, 0usize..3), 1..6),
        ) {
            // Per-CPU consumers with random shares, each on a random CPU (one slot each, keys
            // all distinct): on every CPU, counted time splits by share among that CPU's own.
            let mut s = Scheduler::new(1, 3, 0.0);
            for (i, &(sh, cpu)) in shares.iter().enumerate() {
                let key = [i as u64];
                s.add(i as u64, per_cpu(7, sh, &[(cpu, &key[..])])).unwrap();
            }
            s.replan();
            let slices = 2000u64;
            run(&mut s, slices, 1000);
            for cpu in 0..3 {
                let here: Vec<(usize, u32)> = shares.iter().enumerate()
                    .filter(|(_, &(_, c))| c == cpu).map(|(i, &(sh, _))| (i, sh)).collect();
                let total: u64 = here.iter().map(|&(_, sh)| u64::from(sh)).sum();
                let n = here.len() as f64;
                for &(i, sh) in &here {
                    let got = units(&s, i as u64)[0] as f64;
                    let want = (slices * 1000) as f64 * f64::from(sh) / total as f64;
                    prop_assert!((got - want).abs() <= n * 1000.0, "CPU {cpu} consumer {i}: {got} vs {want}");
                }
            }
        }

        #[test]
        fn no_slot_is_ever_overcommitted(
            slots in 1usize..5,
            consumers in proptest::collection::vec(
                (0u32..3, 1u32..10, proptest::collection::btree_set(0u64..8, 1..4),
                 proptest::collection::btree_set(0usize..4, 1..4), any::<bool>()), 1..12),
            grant in proptest::option::of((0usize..12, 1u64..20_000)),
        ) {
            let mut s = Scheduler::new(slots, 4, 0.25);
            let mut added = Vec::new();
            for (i, (uid, share, keys, cpus, split)) in consumers.into_iter().enumerate() {
                let class = if uid == 0 { Class::System } else { Class::User };
                let d = if uid == 2 {
                    // A task set per (uid, share % 2): its keys are its own (1000 + ...).
                    let keys = keys.iter().map(|k| 1000 * (1 + u64::from(share % 2)) + k).collect();
                    Demand::task(uid, class, share, u64::from(share % 2), keys, cpus)
                } else if split {
                    // Per-CPU keys: key k on CPU c is 100 * c + k.
                    let by_cpu = cpus.iter().map(|&c| {
                        (c, keys.iter().map(|k| 100 * c as u64 + k).collect())
                    }).collect();
                    Demand::per_cpu(uid, class, share, by_cpu)
                } else {
                    Demand::joint(uid, class, share, keys, cpus)
                };
                if s.add(i as u64, d).is_ok() { added.push(i as u64); }
            }
            if let Some((g, dur)) = grant {
                if let Some(&id) = added.get(g % added.len().max(1)) {
                    s.grant_exclusive(id, dur).unwrap();
                }
            }
            s.replan();
            for _ in 0..200 {
                let now = s.now_ns() + 1000;
                s.tick(now);
                let used = s.slots_used();
                prop_assert!(used.iter().all(|&u| u <= slots));
                if let Some((id, until)) = s.exclusive() {
                    prop_assert!(until > s.now_ns());
                    prop_assert!(s.running().iter().all(|&(i, _)| i == id));
                }
                for &id in &added {
                    let a = s.accounting(id).unwrap();
                    prop_assert!(a.units_running_ns.iter().all(|&r| r <= a.enabled_ns));
                }
            }
        }
    }
}
