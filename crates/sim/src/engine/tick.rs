//! Time: one tick retires instructions at the solved rates, warms caches, ends phases and
//! slices, and runs arrivals and the periodic balancer; `advance_*` step whole intervals.

use super::*;

impl Simulation {
    /// Advance one tick.
    pub(super) fn tick(&mut self, mut pick: Option<&mut (dyn PickNext + '_)>) {
        if self.record_crossings {
            self.crossings.clear();
        }
        if self.dirty || self.light {
            self.snap_bus_demands();
            for b in 0..self.buses.len() {
                if self.dirty_bus[b] || self.light_bus[b] || self.latency_bus[b] {
                    // The update changes every rate on the bus: steady CPUs retire their
                    // deferred ticks at the old rates first.
                    self.flush_bus(b);
                    self.buses[b].updated_pass = self.tick_passes;
                }
                if self.dirty_bus[b] {
                    self.solve(b);
                    self.solves += 1;
                    self.full_pending_ticks[b] = 0;
                } else if self.light_bus[b] {
                    self.light_update(b);
                    self.light_updates += 1;
                } else if self.latency_bus[b] {
                    self.latency_update(b);
                    self.latency_updates += 1;
                }
                if self.dirty_bus[b] || self.light_bus[b] || self.latency_bus[b] {
                    self.relazy_bus(b);
                }
                self.dirty_bus[b] = false;
                self.light_bus[b] = false;
                self.latency_bus[b] = false;
            }
            // A solve may ask the other sockets for a latency update, or a whole solve on the
            // reference path (snoop coupling, v2): all of them at the next tick, whether or not
            // this loop had passed them, so that identical sockets are treated alike.
            self.take_snoop_requests();
            self.dirty = self.dirty_bus.iter().any(|&d| d);
            self.light = self.light_bus.iter().any(|&l| l) || self.latency_bus.iter().any(|&l| l);
        }
        let tick_ns = self.tick_ns;
        let cyc = self.cycles_per_tick;
        for d in 0..self.domains.len() {
            self.scratch_dom_running[d] = 0.0;
        }
        self.scratch_bus_warming.fill(0);
        let mut finished_any = false;
        let v2_fast = self.v2_fast();
        // Both models' fast paths (v1 too since session 19: its buses are quiet for several
        // ticks at a time, so most of its CPUs retire lazily; bench-64 34.6 -> 43.5 M).
        let lazy_ok = !self.exact_warmup && self.lazy_retire;
        let pass = self.tick_passes;
        // The running CPUs in ascending order, as a walk of every CPU skipping the idle ones
        // visits them (the loop switches no task, so the set does not change under it).
        let mut busy = std::mem::take(&mut self.scratch_busy);
        busy.clone_from(&self.busy);
        // A loop over the set bits by hand: an iterator adapter cost v1's bench-64 a tenth
        // more instructions (every CPU runs there).
        for (w, &word) in busy.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                let c = w * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let skip = self.lazy_skip[c];
                if pass < skip.until {
                    // Steady: this tick is retired later with the others (`flush_cpu`); its
                    // lines still count against the waiting tasks' pool. The steady CPUs that
                    // follow in the same domain are added here too, in a register: the same
                    // additions in the same order as one by one through memory, where each
                    // waited on the last one's store.
                    let mut acc = self.scratch_dom_running[skip.domain as usize] + skip.occ;
                    while rest != 0 {
                        let next = self.lazy_skip[w * 64 + rest.trailing_zeros() as usize];
                        if pass >= next.until || next.domain != skip.domain {
                            break;
                        }
                        acc += next.occ;
                        rest &= rest - 1;
                    }
                    self.scratch_dom_running[skip.domain as usize] = acc;
                    continue;
                }
                let cur = self.cpus[c].current;
                debug_assert!(cur != NONE, "a busy bit on an idle CPU");
                if skip.until != 0 {
                    self.flush_cpu(c);
                }
                let (mut cpi, mut miss, share) =
                    (self.cpus[c].cpi, self.cpus[c].miss, self.cpus[c].share);
                let bus = self.cpus[c].bus as usize;
                let t = &mut self.tasks[cur as usize];
                {
                    // A task below its target whose rates are those of more than it holds (a full
                    // task's headroom let the solve count lines it has not brought in, past a knee:
                    // libquantum beside swim ran a tick at its warmed rate holding 4.28 of 5.24 MB,
                    // and gained half a millisecond on itself alone) runs this tick as a warming
                    // task: at the miss ratio of what it holds, its misses along its fill curve.
                    let p = &self.profs[t.prof as usize];
                    let target = p.target(share, self.footprint_sharing);
                    // Only a full task's solve counts headroom: a warming task's rates are those of
                    // its occupancy at the last update, never less than it holds now.
                    if t.full && t.occ < target * (1.0 - 1e-9) {
                        let held = share.min(t.occ);
                        let cpu = &self.cpus[c];
                        let m0 = if cpu.memo_prof == t.prof
                            && cpu.memo_held.to_bits() == held.to_bits()
                        {
                            cpu.memo_miss
                        } else {
                            p.miss_ratio(held)
                        };
                        // The holding the solve counted (`held_bytes`, the same expression): the
                        // tick climbs to it from what the task holds, its misses along the way
                        // above the ratio at the top.
                        let assumed = contention::held_bytes(t, p, share);
                        if miss < m0 * (1.0 - OPTIMISM_TOL) || assumed > t.occ * (1.0 + GROWTH_TOL)
                        {
                            t.full = false;
                            miss = m0;
                            cpi = own_rates(
                                &mut self.cpus[c],
                                (t.prof, held),
                                (self.scratch_cc[c], self.scratch_apm[c]),
                                self.buses[bus].latency_cycles,
                                m0,
                            );
                        }
                    }
                }
                let mut instr = cyc / cpi;
                // The profile the CPU's rates were solved for: a crossing scales its core CPI
                // (the sibling pressure of that solve) by the new phase's over this one's, even
                // after an earlier crossing in the same tick (review, session 23: a short
                // middle phase otherwise carried its CPI ratio into the next one).
                let solved_prof = t.prof;
                // Cycles a task that finished in this tick used (its phases' own rates).
                let mut done_cycles = cyc;
                let mut tick_instr = 0.0;
                let mut fp = 0.0;
                let mut refs = 0.0;
                let mut misses = 0.0;
                let mut transfers = 0.0;
                let mut crossed = false;
                // Whether this tick's misses followed the fill curve (a warming tick): they are
                // not the amounts of a steady tick, even one that ends full.
                let mut warmed = false;
                // The tick's misses before a new program started in it: those lines belong to the
                // finished program, not to the new one's occupancy (review, session 14).
                let mut misses_before_new = 0.0;
                // Retire, crossing phase boundaries at the current rates.
                loop {
                    let p = &self.profs[t.prof as usize];
                    let n = instr.min(t.phase_left);
                    tick_instr += n;
                    fp += n * p.fp;
                    refs += n * p.api;
                    misses += n * p.api * miss;
                    transfers += n * p.api * miss * p.lines_per_miss;
                    t.phase_left -= n;
                    instr -= n;
                    if t.phase_left > 0.0 {
                        break;
                    }
                    // Phase done: next phase, program completion, or the end.
                    crossed = true;
                    // Its re-touch was measured on the old phase's fill curve.
                    t.lru_hold = 0.0;
                    match next_phase(&mut t.src, t.repeat) {
                        Next::Phase(p, n, ended, new_process) => {
                            if self.record_crossings {
                                // Cycles used so far in the tick: the rest, `instr` at `cpi`.
                                let ns = (cyc - instr * cpi) / cyc * tick_ns as f64;
                                self.crossings.push((
                                    cur,
                                    t.c.instructions + tick_instr,
                                    t.c.task_clock_ns as f64 + ns,
                                ));
                            }
                            t.prof = p;
                            t.phase_left = n as f64;
                            if ended {
                                t.c.completions += 1;
                            }
                            if new_process {
                                start_cold(t);
                                misses_before_new = misses;
                            }
                            self.dirty = true;
                            self.dirty_bus[bus] = true;
                            // The rest of the tick runs the new phase at its own rate: its core
                            // CPI (the sibling pressure of the last solve kept), its miss ratio
                            // at what the task holds, the bus's latency as solved. It ran at
                            // the old phase's, so where a request boundary fell in a tick moved
                            // a server's work by up to a tick's difference of rates: a web-clip
                            // server beside mcf on another core did 1.4e-3 more work than alone
                            // at a 1 ms tick (physics probe, session 23).
                            if instr > 0.0 {
                                let held = share.min(t.occ);
                                let lat = self.buses[bus].latency_cycles;
                                if let Some((cpi_new, m_new)) = phase_rates(
                                    &self.profs,
                                    (self.scratch_cc[c], self.scratch_smt[c], lat),
                                    solved_prof,
                                    p,
                                    held,
                                ) {
                                    // The cycles left, in the new phase's instructions.
                                    instr *= cpi / cpi_new;
                                    (cpi, miss) = (cpi_new, m_new);
                                }
                            }
                        }
                        Next::Done => {
                            t.c.completions += 1;
                            t.state = State::Done;
                            // Finished part-way through the tick.
                            let used = ((cyc - instr * cpi) / cyc).clamp(0.0, 1.0);
                            done_cycles = used * cyc;
                            t.finish_ns =
                                Some(self.now_ns + (used * tick_ns as f64).round() as u64);
                            finished_any = true;
                            break;
                        }
                    }
                    if instr <= 0.0 {
                        break;
                    }
                }
                let p = &self.profs[t.prof as usize];
                // Under footprint sharing the share is what LRU leaves the task, used or not.
                let target = p.target(share, self.footprint_sharing);
                if !crossed && !t.full && t.occ < target * (1.0 - 1e-9) {
                    warmed = true;
                    // Within one phase a warming task's misses follow its fill curve, so they do
                    // not depend on how many instructions a tick holds (`FillTable`). A tick that
                    // crosses a phase runs its rest at the new phase's ratio (`phase_rates`; the bus is re-solved).
                    // The fill table's cell where this tick's accesses end (`warm_misses`):
                    // the next tick starts there.
                    let mut k_end = t.fill_k;
                    misses = p.warm_misses(
                        t.occ,
                        target,
                        refs,
                        p.fill_line_bytes,
                        &mut t.fill_k,
                        &mut k_end,
                    );
                    // The tick's instructions were timed at the miss ratio of what the task held
                    // at its start, but its misses fall as it fills: those instructions and
                    // misses take less than the tick, and the rest of it retires more. Without
                    // this a cold start cost a whole tick at the empty cache's rate (parser
                    // alone on zhang-smp lost 3.3 % of its work over 200 ms at a 10 ms tick
                    // against a 10 us one, 0.3 % at 1 ms; physics probe, session 23).
                    if t.state == State::Running && p.api > 0.0 && refs > 0.0 {
                        let lat = self.buses[bus].latency_cycles;
                        // Core cycles per access and stall cycles per miss, as the CPI was made.
                        let (cpa, spm) = (
                            self.scratch_cc[c] * p.inv_api,
                            self.scratch_apm[c] * lat * p.inv_api,
                        );
                        let mut r = refs;
                        // Stay inside the phase: its end is the next tick's crossing.
                        let r_max = refs + 0.999 * t.phase_left * p.api;
                        for k in 0..WARM_TIME_ITERS {
                            let used = r * cpa + misses * spm;
                            let gap = cyc - used;
                            // Every gap is closed: one left below a ten-thousandth of the tick
                            // (until session 24) added up over a slow warm-up, whose rates lag
                            // its miss ratio by up to the 0.5 % of a light update, and two
                            // sixtrack copies time-sharing a CPU of bench-8 resumed after each
                            // switch on freshly solved rates ahead of one alone (NP 1.0000015;
                            // now 1.0000006; physics probe). The closing step costs a lookup.
                            if gap <= 0.0 || r >= r_max {
                                break;
                            }
                            // Newton on the accesses: the time of `r` accesses is concave in `r`
                            // (each access misses at the ratio of what is held by then), so a
                            // step at the slope where this fill ends (the fill table's miss
                            // ratio there, a lookup from the warm-up's cell) does not overshoot
                            // the tick, up to the table's interpolation of that slope. Each step,
                            // the last included (the gap small, or the steps used up), reads the
                            // misses of all the tick's accesses off the fill curve, so that a
                            // warm-up's misses stay a function of its accesses whatever the
                            // ticks hold. Until session 27 the last step counted its accesses
                            // at that marginal ratio, which ran the occupancy ahead of the curve
                            // by the step's curvature, and a victim slowed by a co-runner on
                            // another cache took a few fewer warm-up misses than alone (gcc
                            // beside eon on masa-2x1, v2: 4e-8 of its misses per instruction;
                            // `invariant_scan`, three of 6000 cases); the lookup costs bench-64
                            // about 2 %. Left open, the gaps of a warm-up's ticks added up to
                            // tens of microseconds of lost work, and a shell's second program,
                            // which starts mid-tick, finished sooner than alone.
                            let last = gap <= cyc * WARM_TIME_TOL || k + 1 == WARM_TIME_ITERS;
                            let o_end = (t.occ + misses * p.fill_line_bytes).min(target);
                            let m_end = p.fill.miss_at(o_end, &mut k_end);
                            r = (r + gap / (cpa + m_end * spm)).min(r_max);
                            misses = p.warm_misses(
                                t.occ,
                                target,
                                r,
                                p.fill_line_bytes,
                                &mut t.fill_k,
                                &mut k_end,
                            );
                            if last {
                                break;
                            }
                        }
                        if r > refs {
                            let extra = (r - refs) * p.inv_api;
                            tick_instr += extra;
                            fp += extra * p.fp;
                            t.phase_left -= extra;
                            refs = r;
                        }
                    }
                    transfers = misses * p.lines_per_miss;
                    t.fill_k = k_end;
                }
                let used_cycles = if t.state == State::Done {
                    // Not `tick_instr * cpi`: the tick may have run phases at other rates.
                    done_cycles
                } else {
                    cyc
                };
                t.c.cycles += used_cycles;
                t.c.instructions += tick_instr;
                t.c.fp_ops += fp;
                t.c.llc_references += refs;
                t.c.llc_misses += misses;
                t.c.mem_transactions += transfers;
                // A task that finished part-way through the tick ran only for that part.
                let used_ns = if used_cycles < cyc {
                    (used_cycles / cyc * tick_ns as f64).round() as u64
                } else {
                    tick_ns
                };
                t.c.task_clock_ns += used_ns;
                // Warm-up: misses bring lines in until the task holds its share (or all it can use).
                let fill = (misses - misses_before_new) * p.fill_line_bytes;
                if t.full {
                    // A full task follows its share (the solve assumed so): down at once, up by what
                    // this tick's misses brought in. A share that grew by more than that (a co-runner
                    // left) makes it a warming task again, under the warming rule below from the
                    // next tick.
                    if target > t.occ
                        && t.occ + t.fill_bytes < target * (1.0 - 1e-9)
                        && fill > t.fill_bytes
                    {
                        // It grows past what the last solve counted it as holding (its occupancy
                        // plus the fills of its previous tick): its rates want that solve again,
                        // or they would stay those of the smaller holding (review, session 13).
                        self.full_pending_ticks[bus] = self.full_pending_ticks[bus].max(1);
                    }
                    t.occ = if target > t.occ {
                        (t.occ + fill).min(target)
                    } else {
                        t.occ.min(share)
                    };
                    t.full = t.occ >= target * (1.0 - 1e-9);
                    t.fill_bytes = fill;
                } else if t.occ < target * (1.0 - 1e-9) {
                    t.occ = (t.occ + fill).min(target);
                    // While the miss ratio still moves by more than 0.5 % a tick, the bus gets a
                    // light update (the reference path: a whole solve); once the share is filled,
                    // a light update if the ratio moved 0.5 % since the bus's last update (the
                    // shares follow the warm rates at once) and a whole solve at the end of the
                    // bus's burst of warm-ups, so that warm tasks run at exact steady-state rates.
                    let held = share.min(t.occ);
                    if !v2_fast && !self.exact_warmup && t.occ < target {
                        // v1, still filling: whether the miss ratio moved by 0.5 % since the bus's
                        // last update, read from the fill table's exact values at its grid points
                        // (`FillTable::miss_at`: about 1e-4 off on smooth stretches, a few 1e-3
                        // next to a kink, against a threshold of 5e-3, so near a kink a light
                        // update can come a tick early or late), instead of evaluating the curve at
                        // every tick of a warm-up; the light update evaluates it exactly.
                        let m_table = p.fill.miss_at(held, &mut t.fill_k);
                        let solved = self.cpus[c].miss_solved;
                        if light_due(m_table, solved) {
                            self.light = true;
                            self.light_bus[bus] = true;
                        } else if m_table != miss {
                            // Between light updates the task's own miss ratio and CPI follow
                            // what it holds (a local step, as v2's: the bus's latency and the
                            // core CPI as last solved). Its next tick is timed at them: timed at
                            // rates up to 0.5 % stale, the tick's time check closed a larger gap,
                            // by a step that stops short, and a task warming up alone lost about
                            // 1e-5 of its work against one whose rates a switch re-solved every
                            // tick (perlbmk time-sharing CPU 0 of bench-64 with eon at 1 ms
                            // slices had NP 1.00001 on both paths; physics probe, session 25).
                            own_rates(
                                &mut self.cpus[c],
                                (t.prof, held),
                                (self.scratch_cc[c], self.scratch_apm[c]),
                                self.buses[bus].latency_cycles,
                                p.miss_ratio(held),
                            );
                        }
                    } else {
                        let m_now = p.miss_ratio(held);
                        // The next solve of this CPU starts from this evaluation (contention.rs
                        // `miss_at`): a warming task holds exactly this much in it.
                        let cpu = &mut self.cpus[c];
                        (cpu.memo_prof, cpu.memo_held, cpu.memo_miss) = (t.prof, held, m_now);
                        if t.occ >= target {
                            t.full = true;
                            // The headroom the solve gives a full task (`held_bytes`): at least a
                            // whole tick of fills at its target's miss ratio, though this tick's
                            // fill was only the rest of the warm-up. (A share that then grows past
                            // occupancy plus headroom is the guard's case above.)
                            t.fill_bytes =
                                fill.max(refs * p.miss_ratio(target) * p.fill_line_bytes);
                            if !self.exact_warmup {
                                // Filled, on either fast path: the bus is re-solved whole once
                                // no task on it is still warming up (see below), so that warm
                                // tasks run at exact steady-state rates. Meanwhile its share
                                // must follow what filling did to its rates: a task switched in
                                // cold got a share for its cold access rate and filled it in a
                                // tick or two; without an update it ran on at that share until
                                // the burst's whole solve (parser, 5 ms slices beside a warming
                                // sibling on masa-2x2ht: a tick per slice at twice its CPI, 10 %
                                // of its work off the reference path; session 26).
                                self.full_pending_ticks[bus] = self.full_pending_ticks[bus].max(1);
                                if light_due(m_now, self.cpus[c].miss_solved) {
                                    self.light = true;
                                    self.light_bus[bus] = true;
                                }
                            }
                        }
                        if v2_fast {
                            // A phase change in this tick already made the bus dirty.
                            if m_now != miss && !self.dirty_bus[bus] {
                                // Local step: the warming task's own miss ratio and CPI at its new
                                // occupancy (the bus's latency and its core CPI as last solved); the
                                // bus's other tasks keep their rates until the drift of the rates
                                // from the bus's last update passes `V2_DRIFT_BOUND`, then the bus
                                // gets a light update.
                                own_rates(
                                    &mut self.cpus[c],
                                    (t.prof, held),
                                    (self.scratch_cc[c], self.scratch_apm[c]),
                                    self.buses[bus].latency_cycles,
                                    m_now,
                                );
                                let cpu = &mut self.cpus[c];
                                let touch = self.domains[cpu.domain as usize].touch_access;
                                let rates = p.rates(m_now, cpu.ipc);
                                account_drift(cpu, touch, &mut self.buses[bus], rates);
                                self.local_steps += 1;
                                if self.buses[bus].drift > V2_DRIFT_BOUND {
                                    self.light = true;
                                    self.light_bus[bus] = true;
                                }
                            }
                        } else if self.exact_warmup && (t.occ >= target || m_now != miss) {
                            // The reference path re-solves at every move of the miss ratio
                            // (until session 25 at a move of 0.5 %, which left it the same lag
                            // as the fast path's).
                            self.dirty = true;
                            self.dirty_bus[bus] = true;
                        }
                    }
                } else {
                    // Switched in with (or evicted down to) its whole target: full already.
                    t.occ = t.occ.min(share);
                    t.full = true;
                    t.fill_bytes = fill;
                }
                if !t.full {
                    self.scratch_bus_warming[bus] += 1;
                }
                self.scratch_dom_running[self.cpus[c].domain as usize] += t.occ;
                // Lazy retire: a task that ran this whole tick at the rates it keeps, is full and
                // holds exactly what it will hold next tick (its target, within its share)
                // retires the same amounts every tick until its bus is updated, it is switched out
                // or its phase ends: those ticks are retired at once later (`flush_cpu`), and this
                // loop skips it meanwhile. Passes up to `LazySkip::until` stay clear of the phase's end.
                // A bus already marked for an update (a phase ended in this tick, a local step
                // drifted too far) would flush it at the next tick: not worth entering.
                let steady = lazy_ok
                && (v2_fast || pass >= self.buses[bus].updated_pass + LAZY_QUIET_PASSES)
                // (On the v2 fast path, where this entry comes right after updates too, the
                // exactness test `lazy_retire_matches_retiring_every_tick` found `warmed` below.)
                && !self.dirty_bus[bus]
                && !self.light_bus[bus]
                && t.full
                && t.state == State::Running
                && t.occ >= target
                && t.occ <= share
                && tick_instr > 0.0
                // A warming tick's misses came from the fill curve, not `refs x miss`: a task
                // whose miss ratio stays where it was as it fills up (a working set that fits:
                // its curve at the floor) ended full at unchanged rates, and the lazy retire
                // repeated that tick's misses (1.4e-6 off the eager path's; session 25).
                && !warmed
                // A local warm-up step in this tick moved its rates for the next one.
                && self.cpus[c].cpi == cpi
                && self.cpus[c].miss == miss;
                let lazy_ticks = if steady {
                    lazy_ticks_left(t.phase_left / tick_instr)
                } else {
                    0
                };
                let cpu = &mut self.cpus[c];
                cpu.busy_ns_obs += used_ns;
                cpu.cycles_obs += used_cycles;
                cpu.instr_obs += tick_instr;
                if lazy_ticks >= 1 {
                    self.buses[bus].lazy_cpus += 1;
                    let cpu = &mut self.cpus[c];
                    cpu.lazy_from = pass + 1;
                    self.lazy_skip[c] = LazySkip {
                        until: pass + 1 + lazy_ticks,
                        occ: t.occ,
                        domain: cpu.domain,
                    };
                    cpu.lazy_tick = LazyTick {
                        instr: tick_instr,
                        fp,
                        refs,
                        misses,
                        transfers,
                    };
                }
            }
        }
        self.scratch_busy = busy;
        self.tick_passes += 1;
        self.evict_waiting();
        let pending_max = if v2_fast {
            V2_PENDING_MAX_TICKS
        } else {
            FULL_PENDING_MAX_TICKS
        };
        for b in 0..self.buses.len() {
            self.buses[b].rho_obs_sum += self.buses[b].rho;
            // One whole solve per burst of warm-ups: tasks that filled their shares while others
            // on the bus still warm up wait for the last of them (their rates meanwhile follow
            // the light updates), or at most `FULL_PENDING_MAX_TICKS` (v2 fast path:
            // `V2_PENDING_MAX_TICKS`, where a switch, too, waits here for its solve).
            if self.full_pending_ticks[b] > 0 {
                if self.scratch_bus_warming[b] == 0 || self.full_pending_ticks[b] >= pending_max {
                    self.full_pending_ticks[b] = 0;
                    self.dirty = true;
                    self.dirty_bus[b] = true;
                } else {
                    self.full_pending_ticks[b] += 1;
                }
            }
        }
        self.now_ns += tick_ns;
        self.obs_ticks += 1;
        if finished_any {
            for c in 0..self.cpus.len() {
                let cur = self.cpus[c].current;
                if cur != NONE && self.tasks[cur as usize].state == State::Done {
                    self.switch_out(c, false);
                    self.dispatch(c, pick.as_deref_mut());
                    if self.cpus[c].current == NONE {
                        self.idle_pull(c, pick.as_deref_mut());
                    }
                }
            }
        }
        // Slice expiry, on the CPUs running a task (a switch here changes only its own CPU,
        // so the set taken first is the one a walk of every CPU would find busy), when one
        // may end: the walk recomputes the earliest end, and a slice begun meanwhile
        // (`dispatch`, here or anywhere) lowers it.
        let mut busy = std::mem::take(&mut self.scratch_busy);
        if self.now_ns >= self.next_slice_end_ns {
            self.next_slice_end_ns = u64::MAX;
            busy.clone_from(&self.busy);
        } else {
            busy.fill(0);
        }
        for (w, &word) in busy.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                let c = w * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                if self.cpus[c].current != NONE && self.slice_end_ns[c] > self.now_ns {
                    self.next_slice_end_ns = self.next_slice_end_ns.min(self.slice_end_ns[c]);
                    continue;
                }
                if self.cpus[c].current != NONE {
                    if self.cpus[c].queue.is_empty() {
                        let slice = self.slice_ns(c);
                        self.slice_end_ns[c] = self.now_ns + slice;
                        self.next_slice_end_ns = self.next_slice_end_ns.min(self.now_ns + slice);
                    } else {
                        let t = self.cpus[c].current;
                        self.switch_out(c, true);
                        self.cpus[c].queue.push_back(t);
                        self.note_queue(c);
                        self.tasks[t as usize].state = State::Queued;
                        self.tasks[t as usize].cpu = c as u32;
                        self.dispatch(c, pick.as_deref_mut());
                    }
                }
            }
        }
        self.scratch_busy = busy;
        // An idle CPU pulls a waiting task it may run (the kernel's idle balancing at the
        // tick): otherwise a task queued behind a pinned co-runner waits while a CPU idles,
        // whenever the periodic balancer happens to run while it is the one running.
        // The CPUs with a waiting task are collected once (usually none): a queue of pinned
        // tasks beside many idle CPUs then costs each idle CPU a look at those queues only.
        let running: u32 = self.busy.iter().map(|w| w.count_ones()).sum();
        if (running as usize) < self.cpus.len() {
            let mut sources = std::mem::take(&mut self.scratch_sources);
            sources.clear();
            // The CPUs with a waiting task, in ascending order (a bit each: walking every CPU's
            // queue was most of a tick on a large, mostly idle machine).
            sources.extend(cpus_in(&self.queued));
            if !sources.is_empty() {
                for c in 0..self.cpus.len() {
                    if self.cpus[c].current == NONE {
                        self.idle_pull_among(c, sources.iter().copied(), pick.as_deref_mut());
                    }
                }
            }
            self.scratch_sources = sources;
        }
        self.arrivals(pick.as_deref_mut());
        if self.now_ns >= self.next_balance_ns {
            self.next_balance_ns = self.now_ns + self.ms_to_ns(self.sched.balance_interval_ms);
            self.balance(pick);
        }
        debug_assert!(
            self.cpu_bits_agree(),
            "busy or queued bits, lazy skips or slice ends out of step"
        );
    }

    /// Whether `busy` and `queued` say what the CPUs hold, and `lazy_skip` (a lazy CPU runs a
    /// task, in its domain, at the occupancy recorded) and `next_slice_end_ns` what they stand
    /// for (checked after every tick in debug builds, so
    /// every test run checks the copies the tick reads instead of the CPUs).
    fn cpu_bits_agree(&self) -> bool {
        self.cpus.iter().enumerate().all(|(c, cpu)| {
            let bit = |bits: &[u64]| bits[c / 64] >> (c % 64) & 1 == 1;
            let skip = &self.lazy_skip[c];
            // The lazy skip's copy of the CPU (`LazySkip`), and no running slice ending before
            // the walk that would end it (`next_slice_end_ns`).
            let lazy_agrees = skip.until == 0
                || (cpu.current != NONE
                    && skip.domain == cpu.domain
                    && skip.occ.to_bits() == self.tasks[cpu.current as usize].occ.to_bits());
            let slice_agrees = cpu.current == NONE
                || (self.next_slice_end_ns <= self.slice_end_ns[c]
                    && self.slice_end_ns[c] > self.now_ns);
            bit(&self.busy) == (cpu.current != NONE)
                && bit(&self.queued) != cpu.queue.is_empty()
                && lazy_agrees
                && slice_agrees
        })
    }

    /// Advance by `interval_ns` (whole ticks), consulting `pick` at every context switch.
    pub fn advance_with(
        &mut self,
        interval_ns: u64,
        mut pick: Option<&mut (dyn PickNext + '_)>,
    ) -> Observation {
        let ticks = interval_ns.div_ceil(self.tick_ns).max(1);
        for _ in 0..ticks {
            self.tick(pick.as_deref_mut());
        }
        self.flush_all();
        self.observe()
    }

    /// Advance by `interval_ns` without building an [`Observation`]; read the interval with
    /// [`Self::take_interval`]. What `run` uses when no epoch-level policy needs observations.
    pub fn advance_quiet(&mut self, interval_ns: u64, mut pick: Option<&mut (dyn PickNext + '_)>) {
        let ticks = interval_ns.div_ceil(self.tick_ns).max(1);
        for _ in 0..ticks {
            self.tick(pick.as_deref_mut());
        }
        // Every counter a caller can read is exact between calls.
        self.flush_all();
    }

    /// Counter deltas of every task since the last observation (into `deltas`, indexed by task)
    /// and mean bus utilizations (into `bus`); resets the interval as [`Machine::advance`]'s
    /// observation does. Returns the interval length.
    pub fn take_interval(&mut self, deltas: &mut Vec<Counters>, bus: &mut Vec<f64>) -> u64 {
        deltas.clear();
        // A task that has not run since the last interval has no delta: its counters are not
        // even read (with thousands of waiting tasks this loop was a fifth of the time).
        for (i, t) in self.tasks.iter_mut().enumerate() {
            if self.ran_in_interval[i] {
                deltas.push(t.c.since(&t.obs_base));
                t.obs_base = t.c;
            } else {
                deltas.push(Counters::default());
            }
        }
        self.ran_in_interval.fill(false);
        for c in &self.cpus {
            if c.current != NONE {
                self.ran_in_interval[c.current as usize] = true;
            }
        }
        for c in &mut self.cpus {
            c.busy_ns_obs = 0;
            c.cycles_obs = 0.0;
            c.instr_obs = 0.0;
        }
        let ticks = self.obs_ticks.max(1) as f64;
        bus.clear();
        for b in &mut self.buses {
            bus.push(b.rho_obs_sum / ticks);
            b.rho_obs_sum = 0.0;
        }
        let interval = self.now_ns - self.obs_start_ns;
        self.obs_start_ns = self.now_ns;
        self.obs_ticks = 0;
        interval
    }
}

/// How far below the miss ratio of what a full task holds its solved miss ratio may be before
/// the tick runs it at the former: a knee's cliff (libquantum's ratio fell 99 % across the
/// headroom, h264ref's 95 %), not the few per cent a share that grew a little moves a smooth
/// curve by (at 0.5 %, bench-64 under v2 took 17 % more local warm-up steps and about a fifth
/// longer, every result moving a little; at one half it runs as before).
const OPTIMISM_TOL: f64 = 0.5;
/// How far above what a full task holds the holding its solve counted may be before the tick
/// runs it as a warming task whatever its miss ratios: a share that jumped (a co-runner's
/// re-division, or a warm-up's last tick of fills counted as headroom) is climbed along the
/// fill curve, not at the top's ratio. At a 5 ms tick a task ran a whole tick at the rates of
/// 3.09 MB while it climbed there from 2.07 and beat running alone (NP 1.0028; docs/sim.md,
/// "Limits"). Small moves of a full task's share stay cheap.
const GROWTH_TOL: f64 = 0.1;
/// A warming task's tick retires more when the instructions and misses counted take less than
/// the tick by more than this share of it (its misses fell as it filled), in at most
/// `WARM_TIME_ITERS` Newton steps along the fill curve: a cold start converges in two or
/// three. A smaller gap is closed by one step at the fill table's marginal miss ratio, the
/// tick's misses then read off the fill curve for all its accesses. At 1e-3 the checks cost
/// bench-64 12 % more instructions under v1 for nothing a 1 ms tick shows; 3e-2 and 1e-1 give
/// the same solo work to 0.03 % (docs/sim.md, "Limits").
const WARM_TIME_TOL: f64 = 1e-1;
const WARM_TIME_ITERS: usize = 4;

/// v1: passes since its bus's last update before a steady CPU enters the lazy retire from an
/// eager tick: a bus updated every other tick or so (context switches spread over its CPUs)
/// would flush it at once, and a flush costs about what retiring the tick eagerly does. The
/// v2 fast path does not wait: its CPUs already steady at an update are re-armed there
/// (`relazy_bus`), and the flush of one entered from an eager tick is as cheap.
const LAZY_QUIET_PASSES: u64 = 2;

impl Simulation {
    /// Retire CPU `c`'s deferred steady ticks (lazy retire, `tick`): the passes since
    /// `lazy_from`, each the amounts of its last eager tick, as products instead of a sum of
    /// equal terms. Ends the CPU's lazy span.
    pub(super) fn flush_cpu(&mut self, c: usize) {
        if self.lazy_skip[c].until == 0 {
            return;
        }
        self.lazy_skip[c].until = 0;
        let cpu = &mut self.cpus[c];
        debug_assert!(
            cpu.current == NONE
                || self.lazy_skip[c].occ.to_bits()
                    == self.tasks[cpu.current as usize].occ.to_bits(),
            "a lazy task's occupancy moved"
        );
        self.buses[cpu.bus as usize].lazy_cpus -= 1;
        let k = self.tick_passes.saturating_sub(cpu.lazy_from);
        // `switch_out` flushes before it clears `current`: deferred ticks always have a task.
        debug_assert!(
            k == 0 || cpu.current != NONE,
            "deferred ticks on an idle CPU"
        );
        if k == 0 || cpu.current == NONE {
            return;
        }
        let kf = k as f64;
        let lt = cpu.lazy_tick;
        let cycles = kf * self.cycles_per_tick;
        let ns = k * self.tick_ns;
        cpu.busy_ns_obs += ns;
        cpu.cycles_obs += cycles;
        cpu.instr_obs += kf * lt.instr;
        let t = &mut self.tasks[cpu.current as usize];
        t.phase_left -= kf * lt.instr;
        t.c.cycles += cycles;
        t.c.instructions += kf * lt.instr;
        t.c.fp_ops += kf * lt.fp;
        t.c.llc_references += kf * lt.refs;
        t.c.llc_misses += kf * lt.misses;
        t.c.mem_transactions += kf * lt.transfers;
        t.c.task_clock_ns += ns;
    }

    /// `flush_cpu` for every CPU of bus `b`.
    pub(super) fn flush_bus(&mut self, b: usize) {
        if self.buses[b].lazy_cpus == 0 {
            return;
        }
        for k in 0..self.buses[b].cpus.len() {
            let c = self.buses[b].cpus[k] as usize;
            self.flush_cpu(c);
        }
    }

    /// v2 fast path, after an update of bus `b` (its CPUs flushed): every CPU whose task stays
    /// steady at the new rates (full, at its target, no phase end near) retires lazily from
    /// this pass on, with the amounts its eager tick would retire, instead of running eager
    /// ticks first. An update changes a steady task's rates, not whether it is steady, unless
    /// its share grew past what it holds; a bus of 16 CPUs under v2 is updated about every
    /// other tick, so without this most of its CPUs ran eagerly (bench-64: 36 of 51 eager
    /// CPU-ticks a tick were steady CPUs waiting out `LAZY_QUIET_PASSES`; docs/sim.md,
    /// "Session 25").
    ///
    /// Exactly what the eager tick does for such a task (tick.rs above), in the same
    /// arithmetic: the retire at `cyc / cpi` inside one phase, the occupancy following a share
    /// that shrank, the fill of the tick as its headroom.
    pub(super) fn relazy_bus(&mut self, b: usize) {
        // v1's buses are quiet for several ticks at a time: its CPUs reach the lazy retire on
        // their own, and re-entering it at each update cost v1 more than it saved (bench-64:
        // 40 -> 33 M core-ticks/s).
        if !self.v2_fast() || !self.lazy_retire {
            return;
        }
        let pass = self.tick_passes;
        let cyc = self.cycles_per_tick;
        for k in 0..self.buses[b].cpus.len() {
            let c = self.buses[b].cpus[k] as usize;
            let cur = self.cpus[c].current;
            if cur == NONE || self.lazy_skip[c].until != 0 {
                continue;
            }
            let (cpi, miss, share) = (self.cpus[c].cpi, self.cpus[c].miss, self.cpus[c].share);
            let t = &mut self.tasks[cur as usize];
            if !t.full || t.state != State::Running {
                continue;
            }
            let p = &self.profs[t.prof as usize];
            let target = p.target(share, self.footprint_sharing);
            // A share above what it holds: the eager tick grows it.
            let at_target = t.occ >= target;
            if !at_target {
                continue;
            }
            let instr = cyc / cpi;
            // A phase that ends in this pass or the next ones: the eager tick crosses it.
            let inside = instr > 0.0 && instr < t.phase_left;
            if !inside {
                continue;
            }
            let lazy_ticks = lazy_ticks_left((t.phase_left - instr) / instr);
            if lazy_ticks < 1 {
                continue;
            }
            let refs = instr * p.api;
            let misses = refs * miss;
            t.occ = t.occ.min(share);
            t.fill_bytes = misses * p.fill_line_bytes;
            let lazy_tick = LazyTick {
                instr,
                fp: instr * p.fp,
                refs,
                misses,
                transfers: misses * p.lines_per_miss,
            };
            let occ = t.occ;
            let cpu = &mut self.cpus[c];
            cpu.lazy_from = pass;
            cpu.lazy_tick = lazy_tick;
            self.lazy_skip[c] = LazySkip {
                until: pass + 1 + lazy_ticks,
                occ,
                domain: cpu.domain,
            };
            self.buses[b].lazy_cpus += 1;
        }
    }

    /// `flush_cpu` for every CPU: before counters are read from outside the tick. Bus by bus,
    /// skipping buses without a lazy CPU: a call per CPU was most of a solo run's time on a
    /// large machine (bench-1024: a server's solo reference ran a tick and then this over
    /// 1024 mostly idle CPUs). Each flush touches only its own CPU and task, so the order of
    /// the flushes does not matter.
    pub(super) fn flush_all(&mut self) {
        for b in 0..self.buses.len() {
            self.flush_bus(b);
        }
    }
}

/// A CPU's CPI and miss ratio for profile `new` (a phase that began inside the tick) where its
/// rates were solved for profile `old`, holding `held` bytes: `(cc, smt, latency)` are the CPU's core CPI and whether its
/// sibling ran at the last solve, and its bus's latency in cycles (the sibling pressure and
/// the latency are kept). `None` for a profile without a core CPI. Out of line: it runs once
/// per crossing, and inlined it slowed the retire loop of every tick.
#[cold]
#[inline(never)]
fn phase_rates(
    profs: &[Prof],
    (cc, smt, lat): (f64, bool, f64),
    old: u32,
    new: u32,
    held: f64,
) -> Option<(f64, f64)> {
    let (old, new) = (&profs[old as usize], &profs[new as usize]);
    let (cc_old, cc_new, apm_new) = if smt {
        (old.cpi_core_smt, new.cpi_core_smt, new.api_per_mlp_smt)
    } else {
        (old.cpi_core, new.cpi_core, new.api_per_mlp)
    };
    if cc_old <= 0.0 {
        return None;
    }
    let m_new = new.miss_ratio(held);
    Some((cc_new * (cc / cc_old) + apm_new * m_new * lat, m_new))
}

/// Passes a steady CPU may retire lazily with `ticks` more of its ticks left in its phase:
/// `floor(ticks) - 1` (one kept clear of the phase's end), at most 10^15, 0 for anything
/// below 2 or not a number. A conversion instead of `f64::floor`, which without SSE 4.1 is a
/// library call on every steady tick.
#[inline]
fn lazy_ticks_left(ticks: f64) -> u64 {
    if ticks >= 2.0 {
        (ticks.min(1e15 + 1.0) as u64) - 1
    } else {
        0
    }
}

/// A CPU's own rates at miss ratio `m`, the rest of its bus unchanged (a local step): its core
/// CPI and stall cycles per miss-cycle `(cc, apm)` as last solved, its bus's latency `lat`.
/// `m` is profile `prof`'s ratio holding `held` bytes, which the next solve of this CPU starts
/// from (contention.rs `miss_at`). Returns the CPI.
#[inline]
fn own_rates(
    cpu: &mut Cpu,
    (prof, held): (u32, f64),
    (cc, apm): (f64, f64),
    lat: f64,
    m: f64,
) -> f64 {
    let cpi = cc + apm * m * lat;
    (cpu.miss, cpu.cpi, cpu.ipc) = (m, cpi, 1.0 / cpi);
    (cpu.memo_prof, cpu.memo_held, cpu.memo_miss) = (prof, held, m);
    cpi
}

/// v2 fast path, after a local step of CPU `cpu`'s rates: its drift from the bus's last
/// update (its LLC access rate against its domain's `touch_access`, its bus lines weighted by
/// the latency's elasticity), added to the bus's account (`V2_DRIFT_BOUND`).
#[inline]
fn account_drift(cpu: &mut Cpu, touch_access: f64, bus: &mut Bus, (r, n): (f64, f64)) {
    let drift = relative(r - cpu.touch_rate, touch_access)
        + bus.touch_gain * relative(n - cpu.touch_lines, bus.touch_lines);
    bus.drift += drift - cpu.drift;
    cpu.drift = drift;
}

/// Whether a task's miss ratio `m` has moved far enough from the one its bus was last solved
/// at (`Cpu::miss_solved`) for a light update: 0.5 %.
#[inline]
fn light_due(m: f64, solved: f64) -> bool {
    (m - solved).abs() > 0.005 * solved
}

impl Simulation {
    /// CPU `c`'s rates at what its task holds once its own fills went back to its old lines
    /// (`evict_waiting`): the tick's warm-up step had set them for the holding it grew to.
    /// The reference path re-solves the bus at the next tick; the fast paths take a local
    /// step, as the tick's warm-up does (v2 keeps its drift account).
    fn rates_at_holding(&mut self, c: usize, prof: u32, occ: f64) {
        let held = self.cpus[c].share.min(occ);
        let p = &self.profs[prof as usize];
        let m = p.miss_ratio(held);
        if m == self.cpus[c].miss {
            return;
        }
        let bus = self.cpus[c].bus as usize;
        if self.exact_warmup {
            self.dirty = true;
            self.dirty_bus[bus] = true;
            return;
        }
        own_rates(
            &mut self.cpus[c],
            (prof, held),
            (self.scratch_cc[c], self.scratch_apm[c]),
            self.buses[bus].latency_cycles,
            m,
        );
        if self.v2_fast() {
            let cpu = &mut self.cpus[c];
            let touch = self.domains[cpu.domain as usize].touch_access;
            let rates = p.rates(m, cpu.ipc);
            account_drift(cpu, touch, &mut self.buses[bus], rates);
        }
    }

    /// Lines filled by running tasks evict lines of tasks waiting in the same domain, in LRU
    /// order: a task that came back holding lines of its own (`Task::lru_hold`) was the least
    /// recently used of all (every waiting task ran after it), so until it has touched that
    /// many distinct bytes again (a cold start's fill curve over its references since the
    /// switch-in: re-touched lines and new ones), its misses replace its own old lines and
    /// its holding stays where it came back. Only beyond that do fills evict the waiting
    /// tasks' lines (the pool). Until session 30 every fill evicted the pool: gzip
    /// time-sharing one CPU of bench-8 with mcf at 1 ms slices lost its 200 KB set to mcf's
    /// 459 KB of fills per slice in a 16 MB cache, NP 0.855 where LRU keeps the set (physics
    /// probe).
    fn evict_waiting(&mut self) {
        for d in 0..self.domains.len() {
            let mut over =
                self.scratch_dom_running[d] + self.domains[d].idle_total - self.domains[d].capacity;
            if over <= 0.0 {
                continue;
            }
            for k in 0..self.domains[d].cpus.len() {
                let c = self.domains[d].cpus[k] as usize;
                let cur = self.cpus[c].current;
                if cur == NONE || over <= 0.0 {
                    continue;
                }
                let t = &mut self.tasks[cur as usize];
                // A task the tick has just called full keeps its fills: the fast paths' rates
                // follow a full task's solved share, and knocking it back put random scenarios
                // up to 1.2e-1 off the reference path (review, session 30). So where one tick
                // fills a task's target the rule depends on the tick (docs/sim.md).
                if t.lru_hold <= 0.0 || t.full {
                    continue;
                }
                let since = t.c.llc_references - t.lru_refs0;
                let touched = self.profs[t.prof as usize].fill.occ_at(since, &mut t.lru_k);
                if since >= t.lru_refs {
                    // It has touched as much as it held (in this tick, or the share it came
                    // back to cut the re-touch short): its old lines are all re-touched or
                    // replaced, it holds what it touched, and from the next tick on it grows as
                    // any warming task. Ending here at the footprint, not at what it grew to,
                    // keeps the rule continuous: a task whose footprint crossed its old holding
                    // by a few bytes in a tick would otherwise keep a whole tick's fills.
                    t.lru_hold = 0.0;
                }
                let floor = t.lru_hold.max(touched);
                if t.occ > floor {
                    let back = (t.occ - floor).min(over);
                    t.occ -= back;
                    over -= back;
                    let (prof, occ) = (t.prof, t.occ);
                    self.rates_at_holding(c, prof, occ);
                }
            }
            let dom = &mut self.domains[d];
            if over > 0.0 && dom.idle_total > 0.0 {
                let keep = (dom.idle_total - over).max(0.0);
                if keep < 1.0 {
                    // Every waiting task's lines are gone: a new generation of the pool (a
                    // scale of 0 would have turned the next parked occupancy into inf / NaN and
                    // handed a returning task the whole pool).
                    dom.idle_total = 0.0;
                    dom.idle_scale = 1.0;
                    dom.generation += 1;
                } else {
                    dom.idle_scale *= keep / dom.idle_total;
                    dom.idle_total = keep;
                }
            }
        }
    }
}

/// A new process starts cold: none of the cache lines the finished program brought in hold its
/// data (physics probe, session 14: a shell's second program had inherited the first one's
/// occupancy and ran 0.25 % faster than alone). Out of line: inlined into the tick's retire
/// loop it cost the v1 fast path about 5 % (`bench sim`), though it runs once per program.
#[cold]
#[inline(never)]
fn start_cold(t: &mut Task) {
    t.occ = 0.0;
    t.full = false;
    t.fill_bytes = 0.0;
    t.lru_hold = 0.0;
}

/// The CPUs whose bit is set in `bits` (one bit per CPU, 64 to a word), in ascending order.
#[inline]
fn cpus_in(bits: &[u64]) -> impl Iterator<Item = usize> + '_ {
    bits.iter().enumerate().flat_map(|(w, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                w * 64 + b
            })
        })
    })
}

/// `|d| / total`, infinite when the total is 0 and `d` is not (a bus or domain that carried
/// nothing at its last update has moved by any amount).
#[inline]
fn relative(d: f64, total: f64) -> f64 {
    if total > 0.0 {
        d.abs() / total
    } else if d != 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}
