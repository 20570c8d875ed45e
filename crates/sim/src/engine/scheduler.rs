//! The Linux-like baseline scheduler: per-CPU run queues with round-robin slices, wake-up
//! placement (idle core first), idle pull and periodic balancing by queue length, all within
//! each task's affinity, and the pick-next hook at every context switch.

use super::*;

pub(super) fn mask_of(set: &CpuSet, ncpu: usize) -> Vec<u64> {
    let mut m = vec![0u64; ncpu.div_ceil(64)];
    for c in set.iter() {
        if (c as usize) < ncpu {
            m[c as usize / 64] |= 1 << (c % 64);
        }
    }
    m
}

#[inline]
pub(super) fn allowed(mask: &[u64], cpu: u32) -> bool {
    mask[cpu as usize / 64] & (1 << (cpu % 64)) != 0
}

impl Simulation {
    /// Ticks of a slice `f` times the configured one (whole ticks: the scheduler acts on tick
    /// boundaries; at least one).
    fn slice_ticks(&self, f: f64) -> u64 {
        ((self.sched.timeslice_ms * 1e6 * f) / self.tick_ns as f64)
            .round()
            .max(1.0) as u64
    }

    pub(super) fn slice_ns(&mut self, c: usize) -> u64 {
        let j = self.sched.timeslice_jitter;
        let f = if j > 0.0 {
            1.0 + self.cpu_rngs[c].gen_range(-j..j)
        } else {
            1.0
        };
        let ticks = self.slice_ticks(f);
        let extra = match self.spec.model {
            Model::V1 => 0,
            Model::V2 => self.background_ticks(c, ticks),
        };
        (ticks + extra) * self.tick_ns
    }

    /// v2: the first slice of a new task. Linux 2.6's `sched_fork()` gives a forked child half
    /// of its parent's remaining slice (`p->time_slice = (current->time_slice + 1) >> 1`), and
    /// the parent — the shell or harness that starts the program — is anywhere in its own
    /// slice: so the first slice is `(r + 1) / 2` ticks with `r` uniform over a whole slice.
    /// Two CPUs' rotations therefore start at an offset that differs from run to run, and the
    /// background ticks then keep it (`background_ticks`).
    fn first_slice_ns(&mut self, c: usize) -> u64 {
        let whole = self.slice_ticks(1.0);
        let parent_left = self.cpu_rngs[c].gen_range(1..=whole);
        // `(r + 1) >> 1`, the kernel's rounding up.
        let ticks = parent_left.div_ceil(2);
        (ticks + self.background_ticks(c, ticks)) * self.tick_ns
    }

    /// v2: ticks of a slice of `ticks` that land while a woken daemon or kernel thread runs
    /// (each with probability `PhysicsV2::background_tick_share`: a binomial draw). A Linux 2.6
    /// O(1) slice counts the running task's own ticks (`scheduler_tick` decrements
    /// `time_slice` once per tick, whatever interrupt work the tick held); a tick charged to a
    /// preempting task delays the rotation by one tick. So a rotation's phase drifts by whole
    /// ticks, at the background's share of the CPU.
    fn background_ticks(&mut self, c: usize, ticks: u64) -> u64 {
        let share = self.spec.v2.background_tick_share;
        if share <= 0.0 {
            return 0;
        }
        // `share` is in (0, 1) (validated with the machine), so the distribution exists.
        match rand_distr::Binomial::new(ticks, share) {
            Ok(d) => self.cpu_rngs[c].sample(d),
            Err(_) => 0,
        }
    }

    /// Keep CPU `c`'s bit in `queued` (a non-empty run queue) after its queue changed.
    #[inline]
    pub(super) fn note_queue(&mut self, c: usize) {
        let bit = 1u64 << (c % 64);
        if self.cpus[c].queue.is_empty() {
            self.queued[c / 64] &= !bit;
        } else {
            self.queued[c / 64] |= bit;
        }
    }

    /// Take the running task off CPU `c`; it keeps its occupancy in the domain's idle pool.
    pub(super) fn switch_out(&mut self, c: usize, involuntary: bool) {
        let t = self.cpus[c].current;
        if t == NONE {
            return;
        }
        // Its deferred steady ticks first: the slice's statistics read its counters.
        self.flush_cpu(c);
        self.cpus[c].current = NONE;
        self.busy[c / 64] &= !(1u64 << (c % 64));
        self.mark_switch(self.cpus[c].bus as usize);
        let now = self.now_ns;
        let task = &mut self.tasks[t as usize];
        if involuntary {
            task.c.context_switches += 1;
        }
        // Last-value statistics of the slice just ended.
        let d_instr = task.c.instructions - task.slice_start.instructions;
        let d_cyc = task.c.cycles - task.slice_start.cycles;
        let d_miss = task.c.llc_misses - task.slice_start.llc_misses;
        let d_lines = task.c.mem_transactions - task.slice_start.mem_transactions;
        let d_fp = task.c.fp_ops - task.slice_start.fp_ops;
        let d_ns = now.saturating_sub(task.slice_start_ns);
        if d_cyc > 0.0 && d_ns > 0 {
            task.last_stats = Some(slice_stats(
                TaskId(t as u64),
                d_instr,
                d_cyc,
                d_miss,
                d_lines,
                d_fp,
                d_ns,
                self.spec.bus_bandwidth_gb_per_s() * 1e9 / self.spec.line_bytes as f64,
            ));
        }
        if task.state == State::Running {
            task.state = State::Queued;
        }
        // Park the lines in the domain's idle pool.
        if task.occ_domain != NONE && task.state != State::Done {
            let dom = &mut self.domains[task.occ_domain as usize];
            dom.idle_total += task.occ;
            task.occ /= dom.idle_scale;
            task.occ_gen = dom.generation;
        } else {
            task.occ = 0.0;
            task.occ_domain = NONE;
        }
    }

    /// Run task `t` on idle CPU `c`.
    pub(super) fn switch_in(&mut self, c: usize, t: u32) {
        debug_assert_eq!(self.cpus[c].current, NONE);
        let first = self.tasks[t as usize].last_cpu == NONE;
        let slice = if first && self.spec.model == Model::V2 {
            self.first_slice_ns(c)
        } else {
            self.slice_ns(c)
        };
        let now = self.now_ns;
        let d = self.cpus[c].domain;
        let task = &mut self.tasks[t as usize];
        if task.last_cpu != NONE && task.last_cpu != c as u32 {
            task.c.migrations += 1;
        }
        // Reclaim parked lines; a new cache domain means a cold start.
        if task.occ_domain == d {
            let dom = &mut self.domains[d as usize];
            let held = dom.parked(task.occ, task.occ_gen);
            dom.idle_total -= held;
            task.occ = held;
            // Its lines are the least recently used in the cache (the tasks that waited
            // since ran after it): until it has touched as many distinct bytes again, its
            // own misses replace them, not the waiting tasks' (`evict_waiting`).
            task.lru_hold = held;
            task.lru_refs0 = task.c.llc_references;
            task.lru_k = 0;
            task.lru_refs = if held > 0.0 {
                self.profs[task.prof as usize]
                    .fill
                    .acc_at(held, &mut task.lru_k)
            } else {
                0.0
            };
        } else {
            task.lru_hold = 0.0;
            if task.occ_domain != NONE {
                let dom = &mut self.domains[task.occ_domain as usize];
                let held = dom.parked(task.occ, task.occ_gen);
                dom.idle_total -= held;
            }
            task.occ = 0.0;
            task.occ_domain = d;
        }
        task.full = false;
        task.state = State::Running;
        task.cpu = c as u32;
        task.last_cpu = c as u32;
        task.slice_start = task.c;
        task.slice_start_ns = now;
        self.cpus[c].current = t;
        self.busy[c / 64] |= 1u64 << (c % 64);
        self.slice_end_ns[c] = now + slice;
        self.next_slice_end_ns = self.next_slice_end_ns.min(now + slice);
        self.ran_in_interval[t as usize] = true;
        if self.v2_fast() {
            // The switch is answered by a light update (`mark_switch`): its first iteration
            // reads this CPU's IPC for the SMT pressure on its siblings before it computes
            // one, so seed it with the new task's own rate at what it holds (the bus's last
            // latency) rather than leave its predecessor's there.
            let lat = self.buses[self.cpus[c].bus as usize].latency_cycles;
            let task = &self.tasks[t as usize];
            let p = &self.profs[task.prof as usize];
            let m = p.miss_ratio(task.occ);
            self.cpus[c].ipc = 1.0 / (p.cpi_core + p.api_per_mlp * m * lat);
        }
        self.mark_switch(self.cpus[c].bus as usize);
    }

    /// A context switch on bus `b`. The reference path and v1 re-solve the bus whole. The v2
    /// fast path answers it with a light update (the fixed point iterated from the last
    /// solution to `LIGHT_TOL`, the exact latency) and a settling solve once the bus's burst
    /// of warm-ups is over (at most `V2_PENDING_MAX_TICKS` later): a switched-in task is cold
    /// and warms up for about ten ticks, during which its rates move by far more than the
    /// light update's residual anyway (docs/sim.md, "fourth pass").
    fn mark_switch(&mut self, b: usize) {
        if self.v2_fast() {
            self.light = true;
            self.light_bus[b] = true;
            self.full_pending_ticks[b] = self.full_pending_ticks[b].max(1);
        } else {
            self.dirty = true;
            self.dirty_bus[b] = true;
        }
    }

    /// CPU `c` is free: run the next queued task (the pick-next hook chooses if present).
    pub(super) fn dispatch(&mut self, c: usize, pick: Option<&mut (dyn PickNext + '_)>) {
        if self.cpus[c].queue.is_empty() {
            return;
        }
        let idx = match pick {
            Some(p) if self.cpus[c].queue.len() > 1 => {
                // The hook reads the running tasks' current slices.
                self.flush_all();
                let ready: Vec<TaskStats> = self.cpus[c]
                    .queue
                    .iter()
                    .map(|&t| self.stats_of(t))
                    .collect();
                let others: Vec<(CpuId, Option<TaskStats>)> = (0..self.cpus.len())
                    .filter(|&o| o != c)
                    .map(|o| {
                        let cur = self.cpus[o].current;
                        (o as CpuId, (cur != NONE).then(|| self.running_stats(cur)))
                    })
                    .collect();
                let ctx = PickContext {
                    cpu: c as CpuId,
                    now_ns: self.now_ns,
                    topology: &self.topo,
                    ready: &ready,
                    others: &others,
                    bus_peak_transactions_per_s: self.spec.bus_bandwidth_gb_per_s() * 1e9
                        / self.spec.line_bytes as f64,
                };
                p.pick(&ctx).min(ready.len() - 1)
            }
            _ => 0,
        };
        let Some(t) = self.cpus[c].queue.remove(idx) else {
            return;
        };
        self.note_queue(c);
        self.switch_in(c, t);
    }

    pub(super) fn stats_of(&self, t: u32) -> TaskStats {
        self.tasks[t as usize].last_stats.unwrap_or(TaskStats {
            task: TaskId(t as u64),
            ipc: 0.0,
            bus_utilization: 0.0,
            llc_mpki: 0.0,
            fp_fraction: 0.0,
        })
    }

    /// Stats of a running task: its current slice so far if it has run a tick, else the last.
    pub(super) fn running_stats(&self, t: u32) -> TaskStats {
        let task = &self.tasks[t as usize];
        let d_cyc = task.c.cycles - task.slice_start.cycles;
        let d_ns = self.now_ns.saturating_sub(task.slice_start_ns);
        if d_cyc > 0.0 && d_ns > 0 {
            slice_stats(
                TaskId(t as u64),
                task.c.instructions - task.slice_start.instructions,
                d_cyc,
                task.c.llc_misses - task.slice_start.llc_misses,
                task.c.mem_transactions - task.slice_start.mem_transactions,
                task.c.fp_ops - task.slice_start.fp_ops,
                d_ns,
                self.spec.bus_bandwidth_gb_per_s() * 1e9 / self.spec.line_bytes as f64,
            )
        } else {
            self.stats_of(t)
        }
    }

    pub(super) fn nr_running(&self, c: usize) -> usize {
        self.cpus[c].queue.len() + usize::from(self.cpus[c].current != NONE)
    }

    /// Wake-up placement: a fully idle core first, then an idle sibling, then the shortest
    /// queue; among equals, the memory domain (bus or socket) with the fewest tasks, then the
    /// LLC domain with the fewest, as Linux's fork/exec balancing descends its scheduling
    /// domains to the idlest group at each level (a flat lowest-number rule had filled socket 0
    /// of a two-socket machine while socket 1 idled: two mcf on x5650-2s shared one memory
    /// controller, NP 0.842, where one per socket gives 1.000; policy probe, session 19); the
    /// previous CPU wins the remaining ties (cache affinity).
    pub(super) fn place(&self, t: u32) -> usize {
        let task = &self.tasks[t as usize];
        // Tasks per bus and per LLC domain, once per placement (not per candidate CPU).
        let mut on_bus = vec![0usize; self.buses.len()];
        let mut on_domain = vec![0usize; self.domains.len()];
        for c in 0..self.cpus.len() {
            let n = self.nr_running(c);
            on_bus[self.cpus[c].bus as usize] += n;
            on_domain[self.cpus[c].domain as usize] += n;
        }
        let mut best: Option<(PlaceKey, usize)> = None;
        let prev = task.last_cpu;
        for c in 0..self.cpus.len() {
            if !allowed(&task.mask, c as u32) {
                continue;
            }
            let nr = self.nr_running(c);
            let class = if nr == 0 {
                let (a, b) = (self.sib_off[c] as usize, self.sib_off[c + 1] as usize);
                if self.sib[a..b]
                    .iter()
                    .all(|&s| self.nr_running(s as usize) == 0)
                {
                    0
                } else {
                    1
                }
            } else {
                2
            };
            let key = (
                class,
                nr,
                on_bus[self.cpus[c].bus as usize],
                on_domain[self.cpus[c].domain as usize],
                usize::from(c as u32 != prev),
            );
            if best.map_or(true, |(k, _)| key < k) {
                best = Some((key, c));
            }
        }
        best.map_or(0, |b| b.1)
    }

    pub(super) fn enqueue(&mut self, t: u32, c: usize, pick: Option<&mut (dyn PickNext + '_)>) {
        self.tasks[t as usize].state = State::Queued;
        self.tasks[t as usize].cpu = c as u32;
        self.cpus[c].queue.push_back(t);
        self.note_queue(c);
        if self.cpus[c].current == NONE {
            self.dispatch(c, pick);
        }
    }

    pub(super) fn arrivals(&mut self, mut pick: Option<&mut (dyn PickNext + '_)>) {
        if self.now_ns < self.next_arrival_ns {
            return;
        }
        let mut next = u64::MAX;
        for t in 0..self.tasks.len() {
            if self.tasks[t].state != State::NotArrived {
                continue;
            }
            if self.tasks[t].start_ns <= self.now_ns {
                let c = self.place(t as u32);
                self.enqueue(t as u32, c, pick.as_deref_mut());
            } else {
                next = next.min(self.tasks[t].start_ns);
            }
        }
        self.next_arrival_ns = next;
    }

    /// An idle CPU pulls a queued task from the busiest CPU that has one it may run.
    pub(super) fn idle_pull(&mut self, c: usize, pick: Option<&mut (dyn PickNext + '_)>) {
        self.idle_pull_among(c, 0..self.cpus.len(), pick);
    }

    /// [`Self::idle_pull`] from the CPUs of `sources` only (those with a waiting task: the
    /// tick's idle balancing collects them once instead of every idle CPU scanning them all).
    pub(super) fn idle_pull_among(
        &mut self,
        c: usize,
        sources: impl IntoIterator<Item = usize>,
        pick: Option<&mut (dyn PickNext + '_)>,
    ) {
        let mut best: Option<(usize, usize, usize)> = None; // (nr, src, pos)
        for s in sources {
            if s == c || self.cpus[s].queue.is_empty() {
                continue;
            }
            let nr = self.nr_running(s);
            if nr < 2 {
                continue;
            }
            if let Some(pos) = self.cpus[s]
                .queue
                .iter()
                .rposition(|&t| allowed(&self.tasks[t as usize].mask, c as u32))
            {
                if best.map_or(true, |b| nr > b.0) {
                    best = Some((nr, s, pos));
                }
            }
        }
        if let Some((_, s, pos)) = best {
            if let Some(t) = self.cpus[s].queue.remove(pos) {
                self.note_queue(s);
                self.enqueue(t, c, pick);
            }
        }
    }

    /// Periodic balancing by run-queue length: move queued tasks from the longest queues to
    /// CPUs at least two shorter, affinity permitting.
    pub(super) fn balance(&mut self, mut pick: Option<&mut (dyn PickNext + '_)>) {
        let n = self.cpus.len();
        let mut moves = 0;
        while moves < n {
            // Busiest and idlest by nr_running.
            let mut order: Vec<(usize, usize)> = (0..n).map(|c| (self.nr_running(c), c)).collect();
            order.sort_unstable();
            let mut moved = false;
            'outer: for &(nr_dst, dst) in &order {
                for &(nr_src, src) in order.iter().rev() {
                    if nr_src < nr_dst + 2 {
                        break;
                    }
                    if let Some(pos) = self.cpus[src]
                        .queue
                        .iter()
                        .rposition(|&t| allowed(&self.tasks[t as usize].mask, dst as u32))
                    {
                        if let Some(t) = self.cpus[src].queue.remove(pos) {
                            self.note_queue(src);
                            self.enqueue(t, dst, pick.as_deref_mut());
                            moved = true;
                            break 'outer;
                        }
                    }
                }
            }
            if !moved {
                break;
            }
            moves += 1;
        }
    }

    /// Change a task's affinity, moving it if its CPU is no longer allowed.
    pub(super) fn set_affinity(&mut self, t: usize, cpus: CpuSet) -> Result<(), SimError> {
        let all = self.topo.all_cpus();
        if cpus.is_empty() || !cpus.is_subset(&all) {
            return Err(SimError::BadAction(format!(
                "CPU set {:?} for task {t} is empty or outside the machine's {}",
                cpus.to_list(),
                all.to_list()
            )));
        }
        let n = self.cpus.len();
        let task = &mut self.tasks[t];
        task.mask = mask_of(&cpus, n);
        task.affinity = cpus;
        let c = task.cpu;
        match task.state {
            State::Running if !allowed(&task.mask, c) => {
                self.switch_out(c as usize, true);
                self.dispatch(c as usize, None);
                let dst = self.place(t as u32);
                self.enqueue(t as u32, dst, None);
            }
            State::Queued if !allowed(&task.mask, c) => {
                if let Some(pos) = self.cpus[c as usize]
                    .queue
                    .iter()
                    .position(|&x| x == t as u32)
                {
                    self.cpus[c as usize].queue.remove(pos);
                    self.note_queue(c as usize);
                }
                let dst = self.place(t as u32);
                self.enqueue(t as u32, dst, None);
            }
            _ => {}
        }
        Ok(())
    }
}

/// A wake-up candidate's rank, lowest first: (idle class, tasks on the CPU, tasks on its bus,
/// tasks in its LLC domain, 1 unless it is the task's previous CPU).
type PlaceKey = (u32, usize, usize, usize, usize);
