//! `schedtask`: SchedTask's allocation (seed 004, Kallurkar & Sarangi; docs/schedtask.md) made
//! an epoch-level affinity policy: tasks that execute the same code pages share cores, so each
//! core's instruction cache holds fewer distinct footprints.
//!
//! Each interval the observation carries every task's sampled code heatmap
//! ([`TaskObservation::code`], filled by the host only for policies that ask:
//! [`Policy::wants_code_heatmaps`]). The policy
//!
//! 1. **groups** tasks by overlap: tasks are taken from the most to the least CPU time; each
//!    joins the group whose heatmap (the union of its members') is most similar to its own, if
//!    that similarity is at least [`SchedTask::join_similarity`]; otherwise it starts a group.
//!    The paper's overlap is `popcount(A AND B)`; the similarity divides it by
//!    `popcount(A OR B)` (Jaccard), so maps of different sizes compare on one scale and a task
//!    with one or two hot pages does not join a large group on one chance collision of the
//!    512-bit hash.
//! 2. **allocates cores as TAlloc does**: each group gets cores in proportion to its share of
//!    last interval's CPU time (whole cores by largest remainder, at least one each while there
//!    are as many cores as groups). With more groups than cores, the busiest groups seed one core
//!    each and every other group joins the core whose groups overlap its heatmap most (the
//!    paper's packing of fractional types by the overlap table); ties go to the least loaded.
//! 3. **pins** every task of a group to its group's cores (all their SMT siblings). Groups are
//!    laid out over the cores in the order of their lowest task id, so a steady workload keeps
//!    the same cores from one interval to the next.
//!
//! A task's map is the union of its last [`SchedTask::history_intervals`] intervals' maps:
//! sampling sees a few hundred instructions of a task per interval, so one interval's map is a
//! random subset of its pages. Tasks without a heatmap, or with fewer than
//! [`SchedTask::min_samples`] samples over those intervals (idle, or just started), are left
//! alone. With a single group every task gets every core (what the paper's allocation gives
//! one type), so a homogeneous workload is not pinned.
//! On a live host a task is a process: its threads share one affinity, and their heatmaps are
//! merged. The simulator's observations carry no heatmaps, so there the policy does nothing.

use crate::signal;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_core::heatmap::PageHeatmap;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::{Observation, TaskObservation};
use counterpoint_core::superfunction::CodeHeatmap;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::{BTreeMap, VecDeque};

/// The SchedTask affinity policy.
#[derive(Clone, Debug)]
pub struct SchedTask {
    /// A task joins a group when overlap / union of its map and the group's is at least this.
    pub join_similarity: f64,
    /// Samples a task needs over its remembered intervals to be grouped (fewer: its map says
    /// too little).
    pub min_samples: u64,
    /// A task's map is the union of its last this many intervals' maps (1 = the paper's
    /// per-epoch reset). Sampling sees a few hundred of a task's instructions per interval
    /// where the paper's hardware sees all of them, so one interval's map is a small random
    /// subset of the pages and two tasks running the same code would look unlike.
    pub history_intervals: usize,
    /// Per task, its last intervals' (map, samples), newest last.
    history: BTreeMap<TaskId, VecDeque<(PageHeatmap, u64)>>,
    reasons: BTreeMap<TaskId, String>,
    last: Vec<Group>,
}

impl Default for SchedTask {
    fn default() -> Self {
        Self {
            join_similarity: 0.3,
            min_samples: 20,
            history_intervals: 5,
            history: BTreeMap::new(),
            reasons: BTreeMap::new(),
            last: Vec::new(),
        }
    }
}

/// One group of tasks with overlapping code, and the cores it was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Members, ascending.
    pub tasks: Vec<TaskId>,
    /// Union of the members' heatmaps (user and kernel pages).
    pub map: PageHeatmap,
    /// The members' code merged (for the dominant SuperFunction).
    pub code: CodeHeatmap,
    /// CPU time of the members over the interval, ns.
    pub time_ns: f64,
    /// Per member, its similarity (overlap / union) to the group's map when it joined (1 for
    /// the task that started the group).
    pub join_similarity: BTreeMap<TaskId, f64>,
    /// Indices into the topology's cores.
    pub cores: Vec<usize>,
}

/// CPU time of a task over the interval: task-clock, else its samples times the period.
fn time_ns(t: &TaskObservation) -> f64 {
    t.sample.get(event::TASK_CLOCK).unwrap_or_else(|| {
        t.code
            .as_ref()
            .map_or(0.0, |c| (c.total.samples() * c.period_ns) as f64)
    })
}

impl SchedTask {
    /// The groups and core allocation for `observation` on `topology` (what [`Policy::decide`]
    /// applies; public for tests and logs).
    pub fn plan(&mut self, topology: &Topology, observation: &Observation) -> Vec<Group> {
        // Remember this interval's maps; forget tasks no longer observed with a map.
        let keep = self.history_intervals.max(1);
        self.history.retain(|id, _| {
            observation
                .task(*id)
                .is_some_and(|t| signal::is_live(t) && t.code.is_some())
        });
        for t in observation.tasks.iter().filter(|t| signal::is_live(t)) {
            if let Some(c) = &t.code {
                let h = self.history.entry(t.id).or_default();
                h.push_back((c.total.combined(), c.total.samples()));
                while h.len() > keep {
                    h.pop_front();
                }
            }
        }
        let history = &self.history;
        let mut cands: Vec<(&TaskObservation, &CodeHeatmap, f64, PageHeatmap)> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .filter_map(|t| {
                let c = &t.code.as_ref()?.total;
                let h = history.get(&t.id)?;
                let mut map = PageHeatmap::new();
                for (m, _) in h {
                    map.union_with(m);
                }
                let samples: u64 = h.iter().map(|e| e.1).sum();
                (samples >= self.min_samples && !map.is_empty()).then(|| (t, c, time_ns(t), map))
            })
            .collect();
        cands.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.id.cmp(&b.0.id)));
        let mut groups: Vec<Group> = Vec::new();
        for (t, code, time, map) in cands {
            let best = groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let mut union = g.map;
                    union.union_with(&map);
                    let both = f64::from(g.map.overlap(&map));
                    (i, both / f64::from(union.popcount().max(1)))
                })
                .fold(None::<(usize, f64)>, |acc, (i, s)| match acc {
                    Some((_, bs)) if bs >= s => acc,
                    _ => Some((i, s)),
                });
            match best {
                Some((i, share)) if share >= self.join_similarity => {
                    let g = &mut groups[i];
                    g.tasks.push(t.id);
                    g.map.union_with(&map);
                    g.code.merge(code);
                    g.time_ns += time;
                    g.join_similarity.insert(t.id, share);
                }
                _ => groups.push(Group {
                    tasks: vec![t.id],
                    map,
                    code: code.clone(),
                    time_ns: time,
                    join_similarity: BTreeMap::from([(t.id, 1.0)]),
                    cores: Vec::new(),
                }),
            }
        }
        for g in &mut groups {
            g.tasks.sort();
        }
        groups.sort_by_key(|g| g.tasks[0]);
        let ncores = topology.cores().len();
        allocate(&mut groups, ncores);
        groups
    }
}

/// TAlloc over `n` cores: cores in proportion to time, contiguous, in group order.
fn allocate(groups: &mut [Group], n: usize) {
    if groups.is_empty() || n == 0 {
        return;
    }
    let total: f64 = groups.iter().map(|g| g.time_ns).sum();
    let ideal: Vec<f64> = groups
        .iter()
        .map(|g| {
            if total > 0.0 {
                g.time_ns / total * n as f64
            } else {
                n as f64 / groups.len() as f64
            }
        })
        .collect();
    if groups.len() <= n {
        let mut count: Vec<usize> = ideal.iter().map(|x| (x.floor() as usize).max(1)).collect();
        // Largest remainder first; ties to the earlier group.
        while count.iter().sum::<usize>() < n {
            let i = (0..groups.len())
                .max_by(|&a, &b| {
                    (ideal[a] - count[a] as f64)
                        .total_cmp(&(ideal[b] - count[b] as f64))
                        .then(b.cmp(&a))
                })
                .unwrap_or(0);
            count[i] += 1;
        }
        // The minimum of one core may overshoot: take back from the most over-served.
        while count.iter().sum::<usize>() > n {
            let i = (0..groups.len())
                .filter(|&i| count[i] > 1)
                .max_by(|&a, &b| {
                    (count[a] as f64 - ideal[a])
                        .total_cmp(&(count[b] as f64 - ideal[b]))
                        .then(b.cmp(&a))
                });
            match i {
                Some(i) => count[i] -= 1,
                None => break,
            }
        }
        let mut next = 0;
        for (g, c) in groups.iter_mut().zip(count) {
            g.cores = (next..next + c).collect();
            next += c;
        }
        return;
    }
    // More groups than cores: the busiest seed the cores (in group order), the others join the
    // core whose groups overlap them most, ties to the least loaded, then the lower core.
    let mut by_time: Vec<usize> = (0..groups.len()).collect();
    by_time.sort_by(|&a, &b| {
        groups[b]
            .time_ns
            .total_cmp(&groups[a].time_ns)
            .then(a.cmp(&b))
    });
    let mut seeds: Vec<usize> = by_time[..n].to_vec();
    seeds.sort();
    let mut core_map: Vec<PageHeatmap> = Vec::with_capacity(n);
    let mut core_load: Vec<f64> = Vec::with_capacity(n);
    for (c, &gi) in seeds.iter().enumerate() {
        groups[gi].cores = vec![c];
        core_map.push(groups[gi].map);
        core_load.push(groups[gi].time_ns);
    }
    for &gi in &by_time[n..] {
        let m = groups[gi].map;
        let c = (0..n)
            .max_by(|&a, &b| {
                core_map[a]
                    .overlap(&m)
                    .cmp(&core_map[b].overlap(&m))
                    .then(core_load[b].total_cmp(&core_load[a]))
                    .then(b.cmp(&a))
            })
            .unwrap_or(0);
        groups[gi].cores = vec![c];
        core_map[c].union_with(&m);
        core_load[c] += groups[gi].time_ns;
    }
}

impl Policy for SchedTask {
    fn name(&self) -> &str {
        "schedtask"
    }

    fn required_events(&self) -> Vec<&'static str> {
        vec![event::TASK_CLOCK]
    }

    fn wants_code_heatmaps(&self) -> bool {
        true
    }

    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action> {
        self.reasons.clear();
        let groups = self.plan(topology, observation);
        let cores = topology.cores();
        let total: f64 = groups.iter().map(|g| g.time_ns).sum();
        let mut actions = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            let mut cpus = CpuSet::default();
            for &c in &g.cores {
                if let Some(set) = cores.get(c) {
                    cpus = cpus.union(set);
                }
            }
            if cpus.is_empty() {
                continue;
            }
            let share = if total > 0.0 {
                100.0 * g.time_ns / total
            } else {
                0.0
            };
            let members: Vec<String> = g.tasks.iter().map(|t| t.to_string()).collect();
            for &t in &g.tasks {
                let joined = g.join_similarity.get(&t).copied().unwrap_or(1.0);
                let why = format!(
                    "group {} of {} (tasks {}; dominant {}; {} code-page bits, this task's \
                     overlap/union with the group {:.2}): {:.0}% of the grouped CPU time last \
                     interval -> {} of {} cores (CPUs {})",
                    gi + 1,
                    groups.len(),
                    members.join(","),
                    g.code.dominant_label(),
                    g.map.popcount(),
                    joined,
                    share,
                    g.cores.len(),
                    cores.len(),
                    cpus.to_list()
                );
                self.reasons.insert(t, why);
                actions.push(Action::SetAffinity {
                    task: t,
                    cpus: cpus.clone(),
                });
            }
        }
        self.last = groups;
        actions
    }

    fn reason(&self, action: &Action) -> Option<String> {
        match action {
            Action::SetAffinity { task, .. } => self.reasons.get(task).cloned(),
            Action::Swap { .. } => None,
        }
    }
}

impl SchedTask {
    /// The groups of the last [`Policy::decide`].
    pub fn last_groups(&self) -> &[Group] {
        &self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::superfunction::{SuperFunction, TaskCode, ThreadCode};
    use counterpoint_core::testutils::{observation, task, topo};

    const KTEXT: u64 = 0xffff_ffff_8100_0000 >> 12; // a kernel text page number

    /// A task that used `cpus` of a CPU, whose samples hit `pages` (kernel pages when
    /// `kernel`, inside syscall `nr`), 30 samples each.
    fn coded(id: u64, cpus: f64, pages: &[u64], kernel: bool, nr: Option<u32>) -> TaskObservation {
        let all: CpuSet = "0-3".parse().unwrap();
        let mut t = task(id, 0, &all, &[(event::TASK_CLOCK, cpus * 1e9)]);
        let mut c = CodeHeatmap::new(true);
        for &p in pages {
            for _ in 0..30 {
                c.add(kernel, p, nr);
            }
        }
        t.code = Some(TaskCode::from_threads(
            vec![ThreadCode { tid: id, code: c }],
            true,
            1_000_000,
        ));
        t
    }

    fn affinity_of(actions: &[Action], id: u64) -> Option<String> {
        actions.iter().find_map(|a| match a {
            Action::SetAffinity { task, cpus } if task.0 == id => Some(cpus.to_list()),
            _ => None,
        })
    }

    #[test]
    fn overlapping_tasks_share_cores_in_proportion_to_their_time() {
        let t = topo(1, 4, 1);
        // Two "file servers" in read(2) over the same 6 kernel pages (bits 131-136; one has a
        // 7th, bit 171), and two compute tasks in the same 3 user pages (bits 2-4): two groups.
        let ks: Vec<u64> = (0..6).map(|i| KTEXT + i).collect();
        let mut ks7 = ks.clone();
        ks7.push(KTEXT + 40);
        let us = [0x400u64, 0x401, 0x402];
        let obs = observation(
            &t,
            vec![
                coded(10, 0.5, &ks, true, Some(0)),
                coded(11, 0.5, &ks7, true, Some(0)),
                coded(20, 1.0, &us, false, None),
                coded(21, 1.0, &us, false, None),
            ],
        );
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        let g = p.last_groups();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].tasks, vec![TaskId(10), TaskId(11)]);
        assert_eq!(g[1].tasks, vec![TaskId(20), TaskId(21)]);
        assert_eq!(g[0].code.dominant(), Some(SuperFunction::Syscall(0)));
        assert_eq!(g[1].code.dominant(), Some(SuperFunction::User));
        // 1 of 3 CPU-seconds -> 4/3 cores -> 1; the compute group 8/3 -> 3 (largest remainder).
        assert_eq!((g[0].cores.len(), g[1].cores.len()), (1, 3));
        assert_eq!(affinity_of(&actions, 10).as_deref(), Some("0"));
        assert_eq!(affinity_of(&actions, 11).as_deref(), Some("0"));
        assert_eq!(affinity_of(&actions, 20).as_deref(), Some("1-3"));
        let why = p.reason(&actions[0]).unwrap();
        assert!(
            why.contains("dominant syscall") && why.contains("1 of 4 cores"),
            "{why}"
        );
        // Task 10 started the group (equal times: lower id first); task 11 joined it with
        // overlap 6 over a union of 7.
        assert!((g[0].join_similarity[&TaskId(11)] - 6.0 / 7.0).abs() < 1e-9);
    }

    #[test]
    fn disjoint_code_never_groups_and_one_group_gets_every_core() {
        let t = topo(1, 2, 1);
        let obs = observation(
            &t,
            vec![
                coded(1, 1.0, &[0x400, 0x401], false, None),
                coded(2, 1.0, &[0x400, 0x401], false, None),
            ],
        );
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        assert_eq!(p.last_groups().len(), 1);
        assert_eq!(affinity_of(&actions, 1).as_deref(), Some("0-1"));
        // Pages 0x400 and 0x1000 hash to bits 2 and 8: no overlap, two groups, one core each
        // (a fresh policy: the first one remembers the tasks' earlier pages).
        let mut p = SchedTask::default();
        let obs = observation(
            &t,
            vec![
                coded(1, 1.0, &[0x400], false, None),
                coded(2, 1.0, &[0x1000], false, None),
            ],
        );
        let actions = p.decide(&t, &obs);
        assert_eq!(p.last_groups().len(), 2);
        assert_eq!(affinity_of(&actions, 1).as_deref(), Some("0"));
        assert_eq!(affinity_of(&actions, 2).as_deref(), Some("1"));
    }

    #[test]
    fn a_small_map_does_not_join_a_large_group_on_one_shared_bit() {
        let t = topo(1, 2, 1);
        // A kernel-heavy task on 20 pages (bits 131-150) and a loop on 2 user pages, one of
        // which (0x400 + 129 = 0x481 -> 1153 + 2 = 1155 mod 512 = 131) collides with it:
        // overlap 1, union 21.
        let big: Vec<u64> = (0..20).map(|i| KTEXT + i).collect();
        let obs = observation(
            &t,
            vec![
                coded(1, 1.0, &big, true, Some(0)),
                coded(2, 1.0, &[0x481, 0x402], false, None),
            ],
        );
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        assert_eq!(p.last_groups().len(), 2);
        assert_eq!(affinity_of(&actions, 1).as_deref(), Some("0"));
        assert_eq!(affinity_of(&actions, 2).as_deref(), Some("1"));
    }

    #[test]
    fn maps_accumulate_over_intervals_until_same_code_looks_alike() {
        let t = topo(1, 2, 1);
        // Two tasks running the same 8 pages (bits 2-9), each interval sampled on a different
        // half: overlap 0 at first; after two intervals each map holds all 8 pages.
        let pages: Vec<u64> = (0x400..0x408).collect();
        let (lo, hi) = (&pages[..4], &pages[4..]);
        let mut p = SchedTask::default();
        let first = observation(
            &t,
            vec![
                coded(1, 1.0, lo, false, None),
                coded(2, 1.0, hi, false, None),
            ],
        );
        p.decide(&t, &first);
        assert_eq!(p.last_groups().len(), 2);
        let second = observation(
            &t,
            vec![
                coded(1, 1.0, hi, false, None),
                coded(2, 1.0, lo, false, None),
            ],
        );
        let actions = p.decide(&t, &second);
        assert_eq!(p.last_groups().len(), 1);
        assert_eq!(affinity_of(&actions, 1).as_deref(), Some("0-1"));
        // With the paper's per-epoch reset they never meet.
        let mut reset = SchedTask {
            history_intervals: 1,
            ..SchedTask::default()
        };
        reset.decide(&t, &first);
        reset.decide(&t, &second);
        assert_eq!(reset.last_groups().len(), 2);
    }

    #[test]
    fn more_groups_than_cores_pack_by_overlap() {
        let t = topo(1, 2, 1);
        // Three groups: A (busiest; pages -> bits 2-5) and B (bits 258-261) seed the two
        // cores; C (bits 260, 261, 385-390) shares 2 bits with B and none with A, so it joins
        // B's core.
        let a = [0x400u64, 0x401, 0x402, 0x403];
        let b = [0x500u64, 0x501, 0x502, 0x503];
        let c = [0x502u64, 0x503, 0x380, 0x381, 0x382, 0x383, 0x384, 0x385];
        let obs = observation(
            &t,
            vec![
                coded(1, 0.9, &a, false, None),
                coded(2, 0.6, &b, false, None),
                coded(3, 0.3, &c, false, None),
            ],
        );
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        let g = p.last_groups();
        // C vs B: overlap 2, union 10: 0.2 < 0.3, its own group.
        assert_eq!(g.len(), 3);
        assert_eq!(affinity_of(&actions, 1).as_deref(), Some("0"));
        assert_eq!(affinity_of(&actions, 2).as_deref(), Some("1"));
        assert_eq!(affinity_of(&actions, 3).as_deref(), Some("1"));
    }

    #[test]
    fn tasks_without_maps_or_samples_are_left_alone() {
        let t = topo(1, 2, 1);
        let all: CpuSet = "0-1".parse().unwrap();
        let plain = task(5, 0, &all, &[]);
        let mut few = coded(6, 1.0, &[0x400], false, None);
        if let Some(c) = few.code.as_mut() {
            c.total.user_samples = 3; // below min_samples
        }
        let obs = observation(&t, vec![plain, few, coded(7, 1.0, &[0x400], false, None)]);
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        assert!(affinity_of(&actions, 5).is_none());
        assert!(affinity_of(&actions, 6).is_none());
        assert_eq!(affinity_of(&actions, 7).as_deref(), Some("0-1"));
        // The simulator's observations carry no maps: nothing to do.
        let obs = observation(&t, vec![task(1, 0, &all, &[]), task(2, 1, &all, &[])]);
        assert!(p.decide(&t, &obs).is_empty());
        assert!(p.wants_code_heatmaps());
    }

    #[test]
    fn the_plan_is_deterministic_and_stable_over_intervals() {
        let t = topo(1, 4, 1);
        let make = || {
            observation(
                &t,
                vec![
                    coded(3, 1.0, &[0x400, 0x401], false, None),
                    coded(1, 1.0, &[KTEXT, KTEXT + 1], true, Some(1)),
                    coded(2, 1.0, &[KTEXT, KTEXT + 1], true, Some(1)),
                    coded(4, 1.0, &[0x400, 0x401], false, None),
                ],
            )
        };
        let mut p = SchedTask::default();
        let a1 = p.decide(&t, &make());
        let a2 = p.decide(&t, &make());
        assert_eq!(a1, a2);
        // Group order by lowest task id: the kernel group (1, 2) gets CPUs 0-1.
        assert_eq!(affinity_of(&a1, 1).as_deref(), Some("0-1"));
        assert_eq!(affinity_of(&a1, 4).as_deref(), Some("2-3"));
    }
}
