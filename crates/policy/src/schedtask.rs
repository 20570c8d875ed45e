//! `schedtask`: SchedTask's allocation (seed 004, Kallurkar & Sarangi; docs/schedtask.md) made
//! an epoch-level affinity policy over *threads*: threads that execute the same code pages share
//! cores, whichever process they belong to, so each core's instruction cache holds fewer
//! distinct footprints; a process whose threads run different code (I/O threads beside a
//! compute pool) is split across cores.
//!
//! Each interval the observation carries every task's sampled code heatmap with one map per
//! thread ([`TaskObservation::code`], [`TaskCode::threads`], filled by the host only for
//! policies that ask: [`Policy::wants_code_heatmaps`]). The policy
//!
//! 1. **groups** threads by overlap: threads are taken from the most to the least CPU time;
//!    each joins the group whose heatmap (the union of its members') is most similar to its
//!    own, if that similarity is at least [`SchedTask::join_similarity`]; otherwise it starts a
//!    group. The paper's overlap is `popcount(A AND B)`; the similarity divides it by
//!    `popcount(A OR B)` (Jaccard), so maps of different sizes compare on one scale and a
//!    thread with one or two hot pages does not join a large group on one chance collision of
//!    the 512-bit hash.
//! 2. **allocates cores as TAlloc does**: each group gets cores in proportion to its share of
//!    the CPU time (whole cores by largest remainder, at least one each while there are as
//!    many cores as groups). With more groups than cores, the busiest groups seed one core
//!    each and every other group joins the core whose groups overlap its heatmap most (the
//!    paper's packing of fractional types by the overlap table); ties go to the least loaded.
//! 3. **pins** each thread to its group's cores (all their SMT siblings) with
//!    [`Action::SetThreadAffinity`]; a process whose grouped threads all landed in one group
//!    gets one [`Action::SetAffinity`] instead (one action, and its idle threads go along, as
//!    a whole process would). Groups are laid out over the cores in the order of their lowest
//!    (task, thread), so a steady workload keeps the same cores from one interval to the next.
//!
//! A thread's map is the union of its last [`SchedTask::history_intervals`] intervals' maps
//! (sampling sees a few hundred instructions of a thread per interval, so one interval's map is
//! a random subset of its pages), and its CPU time is the mean over the same intervals (a
//! thread's share of its task's task-clock by its share of the task's samples; samples times
//! the period without task-clock), so one noisy interval does not move cores between groups.
//! Threads with fewer than [`SchedTask::min_samples`] samples over those intervals, or without
//! a map, are left alone; a thread with no sample for that many intervals (exited, or asleep)
//! is forgotten. With a single group every thread gets every core (what the paper's allocation
//! gives one type), so a homogeneous workload is not pinned. The simulator's observations
//! carry no heatmaps, so there the policy does nothing.

use crate::signal;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_core::heatmap::PageHeatmap;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::Observation;
use counterpoint_core::superfunction::CodeHeatmap;
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A thread: its task (process) and its thread id.
pub type ThreadKey = (TaskId, u64);

/// One interval of a thread's history.
#[derive(Clone, Copy, Debug)]
struct Seen {
    user: PageHeatmap,
    kernel: PageHeatmap,
    user_samples: u64,
    kernel_samples: u64,
    /// Estimated CPU time over the interval, ns.
    time_ns: f64,
}

/// The SchedTask affinity policy.
#[derive(Clone, Debug)]
pub struct SchedTask {
    /// A thread joins a group when overlap / union of its map and the group's is at least
    /// this.
    pub join_similarity: f64,
    /// Samples a thread needs over its remembered intervals to be grouped (fewer: its map
    /// says too little).
    pub min_samples: u64,
    /// A thread's user (or kernel) pages are part of its map only when user (kernel) mode
    /// holds at least this share of its samples over the remembered intervals.
    pub min_mode_share: f64,
    /// A thread's map is the union of its last this many intervals' maps (1 = the paper's
    /// per-epoch reset). Sampling sees a few hundred of a thread's instructions per interval
    /// where the paper's hardware sees all of them, so one interval's map is a small random
    /// subset of the pages and two threads running the same code would look unlike. Also how
    /// long a thread without samples is remembered.
    pub history_intervals: usize,
    /// With more groups than cores, a group that seeded a core last interval ranks for a
    /// seed with its CPU time times this (ours: 1.5), so load noise does not swap seeds.
    pub seed_stickiness: f64,
    /// Per thread, its last intervals, newest last.
    history: BTreeMap<ThreadKey, VecDeque<Seen>>,
    /// The first threads of the groups that seeded the cores last interval.
    seeds: BTreeSet<ThreadKey>,
    /// Reasons of the last decision: per task (`None`, a process-level action) or thread.
    reasons: BTreeMap<(TaskId, Option<u64>), String>,
    last: Vec<Group>,
}

impl Default for SchedTask {
    fn default() -> Self {
        Self {
            join_similarity: 0.3,
            min_samples: 20,
            min_mode_share: 0.1,
            history_intervals: 5,
            seed_stickiness: 1.5,
            history: BTreeMap::new(),
            seeds: BTreeSet::new(),
            reasons: BTreeMap::new(),
            last: Vec::new(),
        }
    }
}

/// One group of threads with overlapping code, and the cores it was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Members, ascending.
    pub threads: Vec<ThreadKey>,
    /// Union of the members' heatmaps (user and kernel pages).
    pub map: PageHeatmap,
    /// The members' code of the last interval merged (for the dominant SuperFunction).
    pub code: CodeHeatmap,
    /// Estimated CPU time of the members per interval, ns.
    pub time_ns: f64,
    /// Per member, its similarity (overlap / union) to the group's map when it joined (1 for
    /// the thread that started the group).
    pub join_similarity: BTreeMap<ThreadKey, f64>,
    /// Indices into the topology's cores.
    pub cores: Vec<usize>,
}

impl Group {
    /// The tasks with a member in this group, ascending.
    pub fn tasks(&self) -> Vec<TaskId> {
        let s: BTreeSet<TaskId> = self.threads.iter().map(|t| t.0).collect();
        s.into_iter().collect()
    }
}

/// A grouping candidate.
struct Candidate<'a> {
    key: ThreadKey,
    code: Option<&'a CodeHeatmap>,
    time_ns: f64,
    map: PageHeatmap,
}

impl SchedTask {
    /// Threads remembered now (bounded: a thread without samples for
    /// [`Self::history_intervals`] intervals, or whose task is gone, is forgotten).
    pub fn remembered_threads(&self) -> usize {
        self.history.len()
    }

    /// Remember this interval's per-thread maps and times; forget threads of tasks no longer
    /// observed with a map, threads the source no longer lists as alive, and threads with no
    /// sample over the whole history.
    fn remember(&mut self, observation: &Observation) {
        let keep = self.history_intervals.max(1);
        let live: BTreeMap<TaskId, _> = observation
            .tasks
            .iter()
            .filter(|t| signal::is_live(t))
            .filter_map(|t| Some((t.id, (t, t.code.as_ref()?))))
            .collect();
        self.history.retain(|k, _| live.contains_key(&k.0));
        for (&id, (t, code)) in &live {
            if !code.thread_affinity.is_empty() {
                // The source lists the task's live threads (the live host does): an exited
                // thread is forgotten at once, not placed for intervals more (its id may name
                // another thread by then) nor counted in its group's time.
                let gone: Vec<ThreadKey> = self
                    .history
                    .range((id, 0)..=(id, u64::MAX))
                    .map(|(k, _)| *k)
                    .filter(|k| !code.thread_affinity.contains_key(&k.1))
                    .collect();
                for k in gone {
                    self.history.remove(&k);
                }
            }
            let total = code.total.samples();
            // The task's CPU time, split among its threads by their samples.
            let task_ns = t.sample.get(event::TASK_CLOCK);
            let mut seen_now = BTreeSet::new();
            // Nor is one that exited after its samples (the sampled threads are those listed
            // at the start of the interval; the live ones at its end).
            let alive = |tid: &u64| {
                code.thread_affinity.is_empty() || code.thread_affinity.contains_key(tid)
            };
            for th in code.threads.iter().filter(|th| alive(&th.tid)) {
                let n = th.code.samples();
                let time_ns = match task_ns {
                    Some(ns) if total > 0 => ns * n as f64 / total as f64,
                    _ => (n * code.period_ns) as f64,
                };
                let h = self.history.entry((id, th.tid)).or_default();
                h.push_back(Seen {
                    user: th.code.user,
                    kernel: th.code.kernel,
                    user_samples: th.code.user_samples,
                    kernel_samples: th.code.kernel_samples,
                    time_ns,
                });
                seen_now.insert(th.tid);
            }
            // Threads of this task without samples this interval age by one empty interval.
            for (k, h) in self.history.range_mut((id, 0)..=(id, u64::MAX)) {
                if !seen_now.contains(&k.1) {
                    h.push_back(Seen {
                        user: PageHeatmap::new(),
                        kernel: PageHeatmap::new(),
                        user_samples: 0,
                        kernel_samples: 0,
                        time_ns: 0.0,
                    });
                }
            }
        }
        for h in self.history.values_mut() {
            while h.len() > keep {
                h.pop_front();
            }
        }
        self.history
            .retain(|_, h| h.iter().any(|s| s.user_samples + s.kernel_samples > 0));
    }

    /// The groups and core allocation for `observation` on `topology` (what [`Policy::decide`]
    /// applies; public for tests and logs).
    pub fn plan(&mut self, topology: &Topology, observation: &Observation) -> Vec<Group> {
        self.remember(observation);
        // This interval's code of each thread, for the groups' dominant kinds.
        let mut now: BTreeMap<ThreadKey, &CodeHeatmap> = BTreeMap::new();
        for t in observation.tasks.iter().filter(|t| signal::is_live(t)) {
            if let Some(c) = &t.code {
                for th in &c.threads {
                    now.insert((t.id, th.tid), &th.code);
                }
            }
        }
        let mut cands: Vec<Candidate<'_>> = self
            .history
            .iter()
            .filter_map(|(&key, h)| {
                let (mut user, mut kernel) = (PageHeatmap::new(), PageHeatmap::new());
                for s in h {
                    user.union_with(&s.user);
                    kernel.union_with(&s.kernel);
                }
                let user_samples: u64 = h.iter().map(|s| s.user_samples).sum();
                let kernel_samples: u64 = h.iter().map(|s| s.kernel_samples).sum();
                let samples = user_samples + kernel_samples;
                // A mode with a small share of the thread's samples is other SuperFunctions
                // landing in it (a compute thread's timer interrupts and page faults): its few
                // scattered pages would make two threads running the same code look unlike.
                let min = self.min_mode_share * samples as f64;
                let mut map = PageHeatmap::new();
                if user_samples as f64 >= min {
                    map.union_with(&user);
                }
                if kernel_samples as f64 >= min {
                    map.union_with(&kernel);
                }
                let time_ns = h.iter().map(|s| s.time_ns).sum::<f64>() / h.len().max(1) as f64;
                (samples >= self.min_samples && !map.is_empty()).then(|| Candidate {
                    key,
                    code: now.get(&key).copied(),
                    time_ns,
                    map,
                })
            })
            .collect();
        cands.sort_by(|a, b| b.time_ns.total_cmp(&a.time_ns).then(a.key.cmp(&b.key)));
        let mut groups: Vec<Group> = Vec::new();
        for c in cands {
            let best = groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let mut union = g.map;
                    union.union_with(&c.map);
                    let both = f64::from(g.map.overlap(&c.map));
                    (i, both / f64::from(union.popcount().max(1)))
                })
                .fold(None::<(usize, f64)>, |acc, (i, s)| match acc {
                    Some((_, bs)) if bs >= s => acc,
                    _ => Some((i, s)),
                });
            match best {
                Some((i, share)) if share >= self.join_similarity => {
                    let g = &mut groups[i];
                    g.threads.push(c.key);
                    g.map.union_with(&c.map);
                    if let Some(code) = c.code {
                        g.code.merge(code);
                    }
                    g.time_ns += c.time_ns;
                    g.join_similarity.insert(c.key, share);
                }
                _ => groups.push(Group {
                    threads: vec![c.key],
                    map: c.map,
                    code: c.code.cloned().unwrap_or_else(|| CodeHeatmap::new(false)),
                    time_ns: c.time_ns,
                    join_similarity: BTreeMap::from([(c.key, 1.0)]),
                    cores: Vec::new(),
                }),
            }
        }
        for g in &mut groups {
            g.threads.sort();
        }
        groups.sort_by_key(|g| g.threads[0]);
        let ncores = topology.cores().len();
        self.seeds = allocate(&mut groups, ncores, &self.seeds, self.seed_stickiness);
        groups
    }
}

/// TAlloc over `n` cores: cores in proportion to time, contiguous, in group order.
/// With more groups than cores, the groups that seeded a core last time (by their first
/// thread, in `prev_seeds`) rank with their time times `stickiness`; the seeds' first threads
/// are returned (empty otherwise).
fn allocate(
    groups: &mut [Group],
    n: usize,
    prev_seeds: &BTreeSet<ThreadKey>,
    stickiness: f64,
) -> BTreeSet<ThreadKey> {
    if groups.is_empty() || n == 0 {
        return BTreeSet::new();
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
        return BTreeSet::new();
    }
    // More groups than cores: the busiest seed the cores (in group order), the others join the
    // core whose groups overlap them most, ties to the least loaded, then the lower core.
    // A seed keeps its core unless another group is clearly busier: the ranking by time
    // alone flipped with load noise live and moved the packed groups with it.
    let rank = |g: &Group| {
        if prev_seeds.contains(&g.threads[0]) {
            g.time_ns * stickiness
        } else {
            g.time_ns
        }
    };
    let mut by_time: Vec<usize> = (0..groups.len()).collect();
    by_time.sort_by(|&a, &b| {
        rank(&groups[b])
            .total_cmp(&rank(&groups[a]))
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
    seeds.iter().map(|&gi| groups[gi].threads[0]).collect()
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
        // Per task, the groups its threads landed in.
        let mut task_groups: BTreeMap<TaskId, BTreeSet<usize>> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            for k in &g.threads {
                task_groups.entry(k.0).or_default().insert(gi);
            }
        }
        let mut actions = Vec::new();
        let mut whole_done: BTreeSet<TaskId> = BTreeSet::new();
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
            const SHOWN: usize = 8;
            let mut members: Vec<String> = g
                .threads
                .iter()
                .take(SHOWN)
                .map(|(t, tid)| format!("{t}/{tid}"))
                .collect();
            if g.threads.len() > SHOWN {
                members.push(format!("{} more", g.threads.len() - SHOWN));
            }
            let head = format!(
                "group {} of {} (threads {}; dominant {}; {} code-page bits",
                gi + 1,
                groups.len(),
                members.join(","),
                g.code.dominant_label(),
                g.map.popcount(),
            );
            let tail = format!(
                "{share:.0}% of the grouped CPU time (estimated per thread from its samples) -> \
                 {} of {} cores (CPUs {})",
                g.cores.len(),
                cores.len(),
                cpus.to_list()
            );
            for &(t, tid) in &g.threads {
                let whole = task_groups.get(&t).is_some_and(|s| s.len() == 1);
                if whole {
                    // Every grouped thread of the task is here: one process-level action.
                    if !whole_done.insert(t) {
                        continue;
                    }
                    let mine: Vec<String> = g
                        .threads
                        .iter()
                        .filter(|k| k.0 == t)
                        .map(|k| format!("{:.2}", g.join_similarity.get(k).copied().unwrap_or(1.0)))
                        .collect();
                    self.reasons.insert(
                        (t, None),
                        format!(
                            "{head}, this task's threads' overlap/union with the group {}; \
                             all its sampled threads in this group, so the whole process): {tail}",
                            mine.join(",")
                        ),
                    );
                    actions.push(Action::SetAffinity {
                        task: t,
                        cpus: cpus.clone(),
                    });
                } else {
                    let joined = g.join_similarity.get(&(t, tid)).copied().unwrap_or(1.0);
                    self.reasons.insert(
                        (t, Some(tid)),
                        format!(
                            "{head}, this thread's overlap/union with the group {joined:.2}; \
                             its process is split over {} groups): {tail}",
                            task_groups.get(&t).map_or(0, |s| s.len())
                        ),
                    );
                    actions.push(Action::SetThreadAffinity {
                        task: t,
                        tid,
                        cpus: cpus.clone(),
                    });
                }
            }
        }
        self.last = groups;
        actions
    }

    fn reason(&self, action: &Action) -> Option<String> {
        match action {
            Action::SetAffinity { task, .. } => self.reasons.get(&(*task, None)).cloned(),
            Action::SetThreadAffinity { task, tid, .. } => {
                self.reasons.get(&(*task, Some(*tid))).cloned()
            }
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
    use counterpoint_core::observation::TaskObservation;
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
        assert_eq!(g[0].tasks(), vec![TaskId(10), TaskId(11)]);
        assert_eq!(g[1].tasks(), vec![TaskId(20), TaskId(21)]);
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
        assert!((g[0].join_similarity[&(TaskId(11), 11)] - 6.0 / 7.0).abs() < 1e-9);
        // One thread per task: every task is placed whole, with one process-level action.
        assert!(actions
            .iter()
            .all(|a| matches!(a, Action::SetAffinity { .. })));
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
            c.threads[0].code.user_samples = 3; // below min_samples
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

    /// One thread's samples: `per_page` samples on each of `pages` (kernel pages inside
    /// syscall `nr` when `kernel`).
    fn thread(tid: u64, pages: &[u64], per_page: u64, kernel: bool, nr: Option<u32>) -> ThreadCode {
        let mut c = CodeHeatmap::new(true);
        for &p in pages {
            for _ in 0..per_page {
                c.add(kernel, p, nr);
            }
        }
        ThreadCode { tid, code: c }
    }

    /// A process that used `cpus` of a CPU, with these threads.
    fn process(id: u64, cpus: f64, threads: Vec<ThreadCode>) -> TaskObservation {
        let all: CpuSet = "0-3".parse().unwrap();
        let mut t = task(id, 0, &all, &[(event::TASK_CLOCK, cpus * 1e9)]);
        t.code = Some(TaskCode::from_threads(threads, true, 1_000_000));
        t
    }

    fn thread_affinity_of(actions: &[Action], id: u64, thread: u64) -> Option<String> {
        actions.iter().find_map(|a| match a {
            Action::SetThreadAffinity { task, tid, cpus } if task.0 == id && *tid == thread => {
                Some(cpus.to_list())
            }
            _ => None,
        })
    }

    const IO: [u64; 4] = [KTEXT, KTEXT + 1, KTEXT + 2, KTEXT + 3];
    const CALC: [u64; 4] = [0x400, 0x401, 0x402, 0x403];

    /// A process with two I/O threads (101, 102: the kernel's read path) and two compute
    /// threads (103, 104: their own user pages), `io` and `calc` samples per page.
    fn roles(io: u64, calc: u64, io_pages: &[u64], calc_pages: &[u64]) -> TaskObservation {
        process(
            100,
            2.0,
            vec![
                thread(101, io_pages, io, true, Some(0)),
                thread(102, io_pages, io, true, Some(0)),
                thread(103, calc_pages, calc, false, None),
                thread(104, calc_pages, calc, false, None),
            ],
        )
    }

    #[test]
    fn a_process_with_two_roles_is_split_across_cores() {
        let t = topo(1, 4, 1);
        let obs = observation(&t, vec![roles(30, 30, &IO, &CALC)]);
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        let g = p.last_groups();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].threads, vec![(TaskId(100), 101), (TaskId(100), 102)]);
        assert_eq!(g[1].threads, vec![(TaskId(100), 103), (TaskId(100), 104)]);
        assert_eq!(g[0].code.dominant(), Some(SuperFunction::Syscall(0)));
        assert_eq!(g[1].code.dominant(), Some(SuperFunction::User));
        // Equal samples: the task's 2 CPU-seconds split 1 : 1, so 2 cores each.
        assert!((g[0].time_ns - 1e9).abs() < 1.0, "{}", g[0].time_ns);
        assert_eq!(actions.len(), 4);
        assert_eq!(
            thread_affinity_of(&actions, 100, 101).as_deref(),
            Some("0-1")
        );
        assert_eq!(
            thread_affinity_of(&actions, 100, 102).as_deref(),
            Some("0-1")
        );
        assert_eq!(
            thread_affinity_of(&actions, 100, 103).as_deref(),
            Some("2-3")
        );
        assert_eq!(
            thread_affinity_of(&actions, 100, 104).as_deref(),
            Some("2-3")
        );
        assert!(
            affinity_of(&actions, 100).is_none(),
            "a split process is not set whole"
        );
        let why = p.reason(&actions[0]).unwrap();
        assert!(
            why.contains("split over 2 groups") && why.contains("threads 100/101,100/102"),
            "{why}"
        );
        // The same plan on one package of 2 cores: one core each.
        let t2 = topo(1, 2, 1);
        let mut p = SchedTask::default();
        let actions = p.decide(&t2, &observation(&t2, vec![roles(30, 30, &IO, &CALC)]));
        assert_eq!(thread_affinity_of(&actions, 100, 101).as_deref(), Some("0"));
        assert_eq!(thread_affinity_of(&actions, 100, 104).as_deref(), Some("1"));
    }

    #[test]
    fn threads_running_the_same_code_share_cores_across_processes() {
        let t = topo(1, 4, 1);
        // Processes 1 and 2 each have a compute thread (1, 2) and an I/O thread (11, 22);
        // process 3 runs only the compute code, in two threads.
        let obs = observation(
            &t,
            vec![
                process(
                    1,
                    1.0,
                    vec![
                        thread(1, &CALC, 30, false, None),
                        thread(11, &IO, 30, true, Some(0)),
                    ],
                ),
                process(
                    2,
                    1.0,
                    vec![
                        thread(2, &CALC, 30, false, None),
                        thread(22, &IO, 30, true, Some(0)),
                    ],
                ),
                process(
                    3,
                    1.0,
                    vec![
                        thread(3, &CALC, 30, false, None),
                        thread(33, &CALC, 30, false, None),
                    ],
                ),
            ],
        );
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        let g = p.last_groups();
        assert_eq!(g.len(), 2);
        assert_eq!(
            g[0].threads,
            vec![
                (TaskId(1), 1),
                (TaskId(2), 2),
                (TaskId(3), 3),
                (TaskId(3), 33)
            ]
        );
        assert_eq!(g[1].threads, vec![(TaskId(1), 11), (TaskId(2), 22)]);
        // Compute: 2 of 3 CPU-seconds -> 8/3 cores -> 3 (largest remainder); I/O 1.
        let calc = thread_affinity_of(&actions, 1, 1);
        assert_eq!(calc.as_deref(), Some("0-2"));
        assert_eq!(thread_affinity_of(&actions, 2, 2), calc);
        assert_eq!(thread_affinity_of(&actions, 1, 11).as_deref(), Some("3"));
        assert_eq!(thread_affinity_of(&actions, 2, 22).as_deref(), Some("3"));
        // Process 3's threads all landed in one group: one process-level action, no thread's.
        assert_eq!(affinity_of(&actions, 3).as_deref(), Some("0-2"));
        assert!(thread_affinity_of(&actions, 3, 3).is_none());
        assert!(thread_affinity_of(&actions, 3, 33).is_none());
        let whole = actions
            .iter()
            .find(|a| matches!(a, Action::SetAffinity { .. }))
            .unwrap();
        assert!(p.reason(whole).unwrap().contains("the whole process"));
        assert_eq!(actions.len(), 5);
    }

    #[test]
    fn thread_placement_is_stable_across_intervals() {
        let t = topo(1, 4, 1);
        let mut p = SchedTask::default();
        let mut first: Option<Vec<Action>> = None;
        // The samples per page swing ±5 around 30 between the roles, and each interval
        // samples only half of each role's pages (alternating halves).
        for (i, d) in [0i64, 5, -5, 4, -3, 5, -5, 2].iter().enumerate() {
            let (io, calc) = ((30 + d) as u64, (30 - d) as u64);
            let half = if i % 2 == 0 { 0..2 } else { 2..4 };
            let (io_pages, calc_pages) = if i == 0 {
                (&IO[..], &CALC[..])
            } else {
                (&IO[half.clone()], &CALC[half])
            };
            let obs = observation(&t, vec![roles(io, calc, io_pages, calc_pages)]);
            let actions = p.decide(&t, &obs);
            assert_eq!(p.last_groups().len(), 2, "interval {i}");
            match &first {
                None => first = Some(actions),
                Some(f) => assert_eq!(&actions, f, "interval {i}: the plan moved"),
            }
        }
    }

    #[test]
    fn threads_never_seen_again_are_forgotten() {
        let t = topo(1, 2, 1);
        let mut p = SchedTask::default();
        let three = process(
            1,
            1.0,
            vec![
                thread(1, &CALC, 30, false, None),
                thread(11, &IO, 30, true, Some(0)),
                thread(12, &IO, 30, true, Some(0)),
            ],
        );
        p.decide(&t, &observation(&t, vec![three]));
        assert_eq!(p.remembered_threads(), 3);
        // Thread 12 is not sampled again: remembered (and still placed, it may only sleep)
        // while its samples are in the history, forgotten after `history_intervals` empty ones.
        let two = || {
            process(
                1,
                1.0,
                vec![
                    thread(1, &CALC, 30, false, None),
                    thread(11, &IO, 30, true, Some(0)),
                ],
            )
        };
        for i in 1..p.history_intervals {
            let actions = p.decide(&t, &observation(&t, vec![two()]));
            assert_eq!(p.remembered_threads(), 3, "after {i} empty intervals");
            assert!(thread_affinity_of(&actions, 1, 12).is_some());
        }
        let actions = p.decide(&t, &observation(&t, vec![two()]));
        assert_eq!(p.remembered_threads(), 2);
        assert!(thread_affinity_of(&actions, 1, 12).is_none());
        // The process gone: nothing remembered.
        p.decide(
            &t,
            &observation(&t, vec![coded(2, 1.0, &CALC, false, None)]),
        );
        assert_eq!(p.remembered_threads(), 1);
    }

    #[test]
    fn a_few_interrupt_pages_do_not_keep_two_compute_threads_apart() {
        let t = topo(1, 2, 1);
        // Two compute threads on the same user page, each with two kernel samples on kernel
        // pages of its own (timer interrupts, faults): overlap 1 of 5 bits with their kernel
        // pages (0.2), 1 of 1 without them. An I/O process alone on the kernel read path.
        let calc = |tid: u64, k: u64| {
            let mut th = thread(tid, &[0x400], 300, false, None);
            th.code.add(true, KTEXT + 100 + k, None);
            th.code.add(true, KTEXT + 101 + k, None);
            th
        };
        let obs = observation(
            &t,
            vec![
                process(1, 1.0, vec![calc(1, 0), calc(2, 10)]),
                process(3, 1.0, vec![thread(3, &IO, 30, true, Some(0))]),
            ],
        );
        let mut p = SchedTask::default();
        let actions = p.decide(&t, &obs);
        assert_eq!(p.last_groups().len(), 2);
        assert_eq!(affinity_of(&actions, 1).as_deref(), Some("0"));
        assert_eq!(affinity_of(&actions, 3).as_deref(), Some("1"));
        // Counting every sampled page, the two compute threads stay apart.
        let mut every = SchedTask {
            min_mode_share: 0.0,
            ..SchedTask::default()
        };
        every.decide(&t, &obs);
        assert_eq!(every.last_groups().len(), 3);
    }

    #[test]
    fn seeds_keep_their_cores_through_time_noise() {
        let t = topo(1, 2, 1);
        // Three groups on two cores: A (bits 2-5) and B (bits 258-261) seed the cores; C
        // (bits 2, 3 and six others: 2 of 10 with A, below the join threshold) packs with A.
        let a = [0x400u64, 0x401, 0x402, 0x403];
        let b = [0x500u64, 0x501, 0x502, 0x503];
        let c = [0x400u64, 0x401, 0x380, 0x381, 0x382, 0x383, 0x384, 0x385];
        let obs = |tb: f64, tc: f64| {
            observation(
                &t,
                vec![
                    coded(1, 1.0, &a, false, None),
                    coded(2, tb, &b, false, None),
                    coded(3, tc, &c, false, None),
                ],
            )
        };
        let run = |stickiness: f64| {
            let mut p = SchedTask {
                history_intervals: 1,
                seed_stickiness: stickiness,
                ..SchedTask::default()
            };
            let first = p.decide(&t, &obs(0.9, 0.5));
            assert_eq!(p.last_groups().len(), 3);
            assert_eq!(affinity_of(&first, 3).as_deref(), Some("0"));
            // B's time drops below C's by a fifth.
            let second = p.decide(&t, &obs(0.5, 0.6));
            affinity_of(&second, 3)
        };
        assert_eq!(run(1.5).as_deref(), Some("0"), "C moved off A's core");
        // Ranked by time alone, C seeds core 1 and moves.
        assert_eq!(run(1.0).as_deref(), Some("1"));
    }
}
