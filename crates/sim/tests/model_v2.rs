//! Property tests of the second model's invariants (docs/sim.md, "Model v2"): more co-runner
//! cache pressure never lowers a victim's misses, bus latency never falls as demand grows,
//! delivered bandwidth stays below the sustained figure, working-set curves never rise with
//! capacity, contention never beats running alone, and a run is a pure function of scenario
//! and seed.

use counterpoint_core::CpuSet;
use counterpoint_sim::*;
use proptest::prelude::*;

const PROGRAMS: &[&str] = &[
    "gzip", "parser", "swim", "mesa", "wupwise", "art", "mcf", "gcc", "twolf", "bzip2",
];

fn v2_scenario(machine: &str, cat: &Catalog, tasks: &[(&str, Option<u32>)], ms: u64) -> Scenario {
    let mut b = Scenario::builder(cat, machine)
        .unwrap()
        .model(Model::V2)
        .duration_ms(ms);
    for (p, pin) in tasks {
        b = b.task(p, pin.map(CpuSet::single)).unwrap();
    }
    b.build().unwrap()
}

/// Misses per instruction of task 0 over the second half of a run (warm caches).
fn victim_mpi(sc: &Scenario) -> f64 {
    let mut sim = Simulation::new(sc, 1).unwrap();
    sim.advance_quiet(300_000_000, None);
    let a = *sim.counters(0).unwrap();
    sim.advance_quiet(300_000_000, None);
    let b = *sim.counters(0).unwrap();
    (b.llc_misses - a.llc_misses) / (b.instructions - a.instructions)
}

/// `program` pinned alone on `zhang-smp` of `cat` under v2: its counters after `half_ns` and
/// after twice that (the second half is the steady state, with the cache warm).
fn steady_window(cat: &Catalog, program: &str, half_ns: u64) -> (Counters, Counters) {
    let ms = 2 * half_ns / 1_000_000;
    let sc = v2_scenario("zhang-smp", cat, &[(program, Some(0))], ms);
    let mut sim = Simulation::new(&sc, 1).unwrap();
    sim.advance_quiet(half_ns, None);
    let a = *sim.counters(0).unwrap();
    sim.advance_quiet(half_ns, None);
    (a, *sim.counters(0).unwrap())
}

/// `program`'s v2 profile (its first phase's) in `cat`.
fn v2_profile(cat: &Catalog, program: &str) -> ProfileV2 {
    cat.program(program).unwrap().phases[0]
        .profile
        .v2
        .clone()
        .unwrap()
}

/// The built-in catalog with `zhang-smp`'s v2 physics changed by `edit`.
fn zhang_smp_with(edit: impl FnOnce(&mut PhysicsV2)) -> Catalog {
    let mut cat = Catalog::builtin();
    let mut m = cat.machine("zhang-smp").unwrap();
    edit(&mut m.v2);
    cat.set_machine(m);
    cat
}

/// `program` with its v2 LLC access rate scaled by `k` (more cache pressure per instruction).
fn pressured(cat: &Catalog, program: &str, k: f64) -> Program {
    let mut p = cat.program(program).unwrap();
    p.name = format!("{program}-x{k}");
    for ph in &mut p.phases {
        if let Some(v) = &mut ph.profile.v2 {
            v.llc_apki *= k;
        }
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// On a shared L2, a co-runner that accesses the cache more never lowers the victim's
    /// misses (LRU sharing by access frequency, plus a slower bus).
    #[test]
    fn more_corunner_pressure_never_lowers_victim_misses(
        victim in 0usize..PROGRAMS.len(),
        other in 0usize..PROGRAMS.len(),
        k1 in 0.1f64..4.0,
        dk in 0.0f64..4.0,
    ) {
        let mut cat = Catalog::builtin();
        let lo = pressured(&cat, PROGRAMS[other], k1);
        let hi = pressured(&cat, PROGRAMS[other], k1 + dk);
        let (lo_name, hi_name) = (lo.name.clone(), hi.name.clone());
        cat.set_program(lo);
        cat.set_program(hi);
        let alone = victim_mpi(&v2_scenario("dualcore-shared-l2", &cat, &[(PROGRAMS[victim], Some(0))], 600));
        let m_lo = victim_mpi(&v2_scenario("dualcore-shared-l2", &cat, &[(PROGRAMS[victim], Some(0)), (&lo_name, Some(1))], 600));
        let m_hi = victim_mpi(&v2_scenario("dualcore-shared-l2", &cat, &[(PROGRAMS[victim], Some(0)), (&hi_name, Some(1))], 600));
        prop_assert!(m_lo >= alone * (1.0 - 1e-9), "alone {alone} with co-runner {m_lo}");
        prop_assert!(m_hi >= m_lo * (1.0 - 1e-9), "pressure x{k1}: {m_lo}, x{}: {m_hi}", k1 + dk);
    }

    /// Adding identical copies of a program (more demand, same mix shape) never lowers the
    /// bus latency; utilization stays below 1 and the bytes moved stay below the sustained
    /// bandwidth.
    #[test]
    fn bus_latency_grows_with_demand_and_bandwidth_stays_below_sustained(
        p in 0usize..PROGRAMS.len(),
        n in 1usize..8,
    ) {
        let cat = Catalog::builtin();
        let latency_and_bytes = |copies: usize| {
            let tasks: Vec<(&str, Option<u32>)> =
                (0..copies).map(|c| (PROGRAMS[p], Some(c as u32))).collect();
            let sc = v2_scenario("modern-2s-32c", &cat, &tasks, 200);
            // Pinned to package 0's first CPUs: all on one controller.
            let mut sim = Simulation::new(&sc, 1).unwrap();
            sim.advance_quiet(100_000_000, None);
            let lat = sim.bus_latency_cycles()[0];
            let rho = sim.bus_utilization()[0];
            let (mut d, mut bus) = (Vec::new(), Vec::new());
            let ns = sim.take_interval(&mut d, &mut bus);
            let bytes: f64 = d.iter().map(|c| c.mem_transactions * sc.machine.line_bytes as f64).sum();
            (lat, rho, bytes / ns as f64)
        };
        let (l1, r1, _) = latency_and_bytes(n);
        let (l2, r2, bw2) = latency_and_bytes(n + 1);
        let m = cat.machine("modern-2s-32c").unwrap();
        prop_assert!(l2 >= l1 * (1.0 - 1e-9), "{n} copies: {l1} cycles, {}: {l2}", n + 1);
        prop_assert!(r1 < 1.0 && r2 < 1.0);
        prop_assert!(bw2 <= m.v2.sustained_bandwidth_gb_per_s * (1.0 + 1e-9), "{bw2} GB/s");
    }

    /// The loaded-latency curve is non-decreasing in utilization and in how mixed the traffic
    /// is, starts at the unloaded latency, and is convex up to saturation.
    #[test]
    fn loaded_latency_curve_is_monotone_and_convex(
        u in 0.0f64..0.99,
        du in 0.0f64..0.2,
        mixed in 0.0f64..1.0,
        dm in 0.0f64..0.5,
    ) {
        let m = Catalog::builtin().machine("zhang-smp").unwrap();
        let l = |u: f64, x: f64| m.v2_loaded_latency_ns(u, x);
        prop_assert_eq!(l(0.0, mixed), m.mem_latency_ns);
        prop_assert!(l(u + du, mixed) >= l(u, mixed));
        prop_assert!(l(u, (mixed + dm).min(1.0)) >= l(u, mixed));
        let h = 0.004;
        if u >= h && l(u + h, mixed).is_finite() {
            prop_assert!(l(u + h, mixed) + l(u - h, mixed) >= 2.0 * l(u, mixed) * (1.0 - 1e-12));
        }
    }

    /// Working-set curves never rise with capacity.
    #[test]
    fn knee_curves_never_rise(p in 0usize..PROGRAMS.len(), c in 0.0f64..3.2e7, dc in 0.0f64..3.2e7) {
        let v = v2_profile(&Catalog::builtin(), PROGRAMS[p]);
        prop_assert!(v.miss_curve.miss_ratio(c + dc) <= v.miss_curve.miss_ratio(c));
        prop_assert!(v.miss_curve.miss_ratio(c) <= 1.0);
    }

    /// Contention never beats running alone, and the same scenario and seed give the same bytes.
    #[test]
    fn np_at_most_one_and_runs_are_deterministic(
        progs in prop::collection::vec(0usize..PROGRAMS.len(), 1..6),
        seed in 0u64..1000,
    ) {
        let cat = Catalog::builtin();
        let tasks: Vec<(&str, Option<u32>)> = progs.iter().map(|&p| (PROGRAMS[p], None)).collect();
        let sc = v2_scenario("masa-2x2ht", &cat, &tasks, 300);
        let a = run(&sc, seed, None, None, 50_000_000).unwrap();
        let b = run(&sc, seed, None, None, 50_000_000).unwrap();
        prop_assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
        for t in &a.tasks {
            if let Some(np) = t.np {
                prop_assert!(np <= 1.0 + 1e-9, "{} NP {np}", t.name);
            }
        }
    }
}

/// IPC and bus use are different signals under v2: a longer branch-misprediction penalty (a
/// non-memory cost) lowers a branchy program's IPC while its misses per instruction stay the
/// same, so IPC no longer mirrors bus use.
#[test]
fn ipc_moves_without_bus_use() {
    let solo = |penalty: f64| {
        let cat = zhang_smp_with(|v2| v2.branch_penalty_cycles = penalty);
        // Steady state: the second half, with the cache warm.
        let (a, b) = steady_window(&cat, "parser", 500_000_000);
        let instr = b.instructions - a.instructions;
        (
            instr / (b.cycles - a.cycles),
            (b.llc_misses - a.llc_misses) / instr * 1000.0,
        )
    };
    let (ipc_20, mpki_20) = solo(20.0);
    let (ipc_40, mpki_40) = solo(40.0);
    assert!(ipc_40 < ipc_20 * 0.95, "IPC {ipc_20} -> {ipc_40}");
    assert!(
        (mpki_40 - mpki_20).abs() <= 1e-9 * mpki_20,
        "MPKI {mpki_20} -> {mpki_40}"
    );
}

/// Under v2 a new task's first slice is half of its parent's remaining slice (Linux 2.6's
/// `sched_fork`), at most half a slice, so slice ends leave the 100 ms grid on any seed; under v1
/// every slice is 100 ms.
#[test]
fn v2_slices_drift_by_default() {
    let cat = Catalog::builtin();
    let mk = |model| {
        Scenario::builder(&cat, "zhang-smp")
            .unwrap()
            .model(model)
            .duration_ms(2000)
            .task("gzip", Some(CpuSet::single(0)))
            .unwrap()
            .task("mesa", Some(CpuSet::single(0)))
            .unwrap()
            .build()
            .unwrap()
    };
    let switches = |model| {
        let mut sim = Simulation::new(&mk(model), 3).unwrap();
        sim.advance_quiet(2_000_000_000, None);
        sim.counters(0).unwrap().context_switches
    };
    // Fixed 100 ms slices: 10 slices of gzip in 2 s; drifting slices change the count or keep
    // it, but the slice ends no longer land on multiples of 100 ms.
    assert_eq!(switches(Model::V1), 10);
    let mut sim = Simulation::new(&mk(Model::V2), 3).unwrap();
    let mut off_grid = false;
    let mut last = 0;
    for _ in 0..2000 {
        sim.advance_quiet(1_000_000, None);
        let cs = sim.counters(0).unwrap().context_switches;
        if cs != last {
            last = cs;
            off_grid |= sim.now_ns() % 100_000_000 != 0;
        }
    }
    assert!(off_grid, "v2 slices ended only on the 100 ms grid");
}

/// Slice lengths, in ticks, of two tasks sharing CPU 0 of zhang-smp under v2 with the given
/// background tick share, over `ms` of simulated time (a slice ends when either task's
/// involuntary context switches count moves).
fn v2_slice_ticks(share: f64, ms: u64, seed: u64) -> Vec<u64> {
    let cat = Catalog::builtin();
    let mut sc = Scenario::builder(&cat, "zhang-smp")
        .unwrap()
        .model(Model::V2)
        .duration_ms(ms)
        .task("gzip", Some(CpuSet::single(0)))
        .unwrap()
        .task("mesa", Some(CpuSet::single(0)))
        .unwrap()
        .build()
        .unwrap();
    sc.machine.v2.background_tick_share = share;
    let mut sim = Simulation::new(&sc, seed).unwrap();
    let tick = sim.tick_ns();
    let switches = |sim: &Simulation| {
        sim.counters(0).unwrap().context_switches + sim.counters(1).unwrap().context_switches
    };
    let (mut last, mut since) = (switches(&sim), 0u64);
    let mut out = Vec::new();
    for _ in 0..ms * 1_000_000 / tick {
        sim.advance_quiet(tick, None);
        since += 1;
        let now = switches(&sim);
        if now != last {
            last = now;
            out.push(since);
            since = 0;
        }
    }
    out
}

/// v2's slices drift the way a Linux 2.6 O(1) rotation does: after each task's first slice
/// (half of its parent's remaining slice: 1 to 50 ticks), by whole ticks that woken
/// background tasks take, never shorter than the 100-tick slice, on average by the
/// background's share of the slice; with no background they keep exactly 100 ticks.
#[test]
fn v2_slices_drift_by_whole_background_ticks() {
    for seed in 1..=5 {
        let first = v2_slice_ticks(0.0, 200, seed);
        assert!(
            first.len() >= 2 && first[..2].iter().all(|&t| (1..=50).contains(&t)),
            "first slices {first:?}"
        );
    }
    // Each task's first slice is its own; the rotation's slices follow them.
    let quiet = v2_slice_ticks(0.0, 20_000, 1);
    assert!(quiet.len() >= 190, "{} slices", quiet.len());
    assert!(quiet[2..].iter().all(|&t| t == 100), "{quiet:?}");
    let busy = v2_slice_ticks(0.02, 30_000, 1)[2..].to_vec();
    assert!(busy.len() >= 280, "{} slices", busy.len());
    assert!(
        busy.iter().all(|&t| t >= 100),
        "a slice shorter than 100 ticks: {busy:?}"
    );
    let extra = busy.iter().map(|&t| (t - 100) as f64).sum::<f64>() / busy.len() as f64;
    // Binomial(100, 0.02): mean 2 ticks, sd 1.4; the mean of ~290 slices is 2 +- 0.08.
    assert!((1.6..=2.4).contains(&extra), "mean extra ticks {extra}");
    assert!(busy.iter().any(|&t| t > 100) && busy.contains(&100));
}

/// CPI of task `i` per instruction over the second half of a run (warm caches).
fn steady_cpi(sc: &Scenario, i: usize) -> f64 {
    let mut sim = Simulation::new(sc, 1).unwrap();
    sim.advance_quiet(300_000_000, None);
    let a = *sim.counters(i).unwrap();
    sim.advance_quiet(300_000_000, None);
    let b = *sim.counters(i).unwrap();
    (b.cycles - a.cycles) / (b.instructions - a.instructions)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The prefetcher only hides latency: the effective overlap is never below the program's
    /// own, grows with the stream share and with how far ahead the prefetcher runs, and falls
    /// when the program sweeps more streams than the prefetcher tracks.
    #[test]
    fn prefetching_only_adds_overlap(
        p in 0usize..PROGRAMS.len(),
        s1 in 0.0f64..1.0, ds in 0.0f64..1.0,
        depth in 0.0f64..16.0, ddepth in 0.0f64..16.0,
        tracked in 1.0f64..64.0, extra in 0.0f64..64.0,
    ) {
        let cat = Catalog::builtin();
        let v = v2_profile(&cat, PROGRAMS[p]);
        let mut phys = cat.machine("zhang-smp").unwrap().v2;
        phys.prefetch_depth_lines = depth;
        phys.prefetch_streams = tracked;
        let with = |sf: f64, streams: f64, depth: f64| {
            let mut w = v.clone();
            w.stream_fraction = sf;
            w.streams = streams;
            let mut ph = phys;
            ph.prefetch_depth_lines = depth;
            (w.effective_mlp(&ph), w.prefetch_coverage(&ph))
        };
        let s2 = (s1 + ds).min(1.0);
        let (m1, c1) = with(s1, tracked, depth);
        let (m2, _) = with(s2, tracked, depth);
        let (m3, _) = with(s1, tracked, depth + ddepth);
        let (m4, c4) = with(s1, tracked + extra, depth);
        prop_assert!(m1 >= v.mlp * (1.0 - 1e-12));
        prop_assert!(m2 >= m1 * (1.0 - 1e-12));
        prop_assert!(m3 >= m1 * (1.0 - 1e-12));
        prop_assert!(m4 <= m1 * (1.0 + 1e-12));
        prop_assert!(c1 <= s1 + 1e-12 && c4 <= c1 + 1e-12);
    }

    /// A sector fetch only adds bus lines, and only for misses no stream uses: the lines per
    /// miss never fall as the machine fetches more per read, never rise with the stream share,
    /// and a pure stream (or a machine fetching one line) moves its line plus the write-back.
    #[test]
    fn sector_fetches_only_add_unused_lines(
        p in 0usize..PROGRAMS.len(),
        s1 in 0.0f64..1.0, ds in 0.0f64..1.0,
        read in 1.0f64..4.0, dread in 0.0f64..4.0,
    ) {
        let cat = Catalog::builtin();
        let v = v2_profile(&cat, PROGRAMS[p]);
        let lines = |sf: f64, read: f64| {
            let mut w = v.clone();
            w.stream_fraction = sf;
            let mut ph = cat.machine("zhang-smp").unwrap().v2;
            ph.lines_per_read = read;
            w.lines_per_miss(&ph)
        };
        let own = 1.0 + v.writeback_fraction;
        let s2 = (s1 + ds).min(1.0);
        prop_assert!(lines(s1, read) >= own - 1e-12);
        prop_assert!(lines(s1, read + dread) >= lines(s1, read) - 1e-12);
        prop_assert!(lines(s2, read) <= lines(s1, read) + 1e-12);
        prop_assert!((lines(1.0, read) - own).abs() < 1e-12);
        prop_assert!((lines(s1, 1.0) - own).abs() < 1e-12);
        // Exactly the unused share of the sector's other lines.
        let want = own + (read - 1.0) * (1.0 - s1);
        prop_assert!((lines(s1, read) - want).abs() < 1e-12);
        prop_assert!((lines(0.0, 2.0) - (own + 1.0)).abs() < 1e-12);
    }

    /// Snoop traffic never lowers a socket's latency, grows it as another socket moves more,
    /// and is symmetric: swapping two sockets' traffic swaps their latencies.
    #[test]
    fn snoops_never_lower_latency_and_couple_symmetrically(
        d in proptest::collection::vec(0.0f64..40.0, 2..5),
        more in 0.0f64..40.0,
        mixed in 0.0f64..0.5,
        snoop in 0.0f64..64.0,
    ) {
        let mut m = Catalog::builtin().machine("modern-2s-32c").unwrap();
        m.v2.snoop_bytes_per_line = snoop;
        for b in 0..d.len() {
            let alone = m.v2_loaded_latency_ns(d[b] / m.v2.sustained_bandwidth_gb_per_s, mixed);
            let coupled = m.v2_socket_latency_ns(&d, b, mixed);
            prop_assert!(coupled >= alone || (alone.is_infinite() && coupled.is_infinite()));
            let mut d2 = d.clone();
            let other = (b + 1) % d.len();
            d2[other] += more;
            let busier = m.v2_socket_latency_ns(&d2, b, mixed);
            prop_assert!(busier >= coupled || (coupled.is_infinite() && busier.is_infinite()));
        }
        let mut sw = d.clone();
        sw.swap(0, 1);
        let (a0, a1) = (m.v2_socket_latency_ns(&d, 0, mixed), m.v2_socket_latency_ns(&d, 1, mixed));
        let (b0, b1) = (m.v2_socket_latency_ns(&sw, 0, mixed), m.v2_socket_latency_ns(&sw, 1, mixed));
        prop_assert!(a0 == b1 || (a0 - b1).abs() <= 1e-12 * a0);
        prop_assert!(a1 == b0 || (a1 - b0).abs() <= 1e-12 * a1);
    }
}

/// In the engine, a memory-heavy socket slows a victim on the other socket through snoops
/// (it shares no cache and no controller with it), and not at all when snoops cost nothing;
/// identical loads on both sockets run at identical rates (the coupling is symmetric).
#[test]
fn sockets_couple_through_snoops_in_the_engine() {
    let victim_cpi = |snoop: f64, heavy: bool| {
        let mut cat = Catalog::builtin();
        let mut m = cat.machine("modern-2s-32c").unwrap();
        m.v2.snoop_bytes_per_line = snoop;
        cat.set_machine(m);
        // CPU 0 is on socket 0; CPUs 32.. are socket 1 (16 cores x 2 threads per socket).
        let mut tasks: Vec<(&str, Option<u32>)> = vec![("mcf", Some(0))];
        if heavy {
            for c in 0..16 {
                tasks.push(("swim", Some(32 + 2 * c)));
            }
        }
        steady_cpi(&v2_scenario("modern-2s-32c", &cat, &tasks, 600), 0)
    };
    let quiet = victim_cpi(8.0, false);
    let loud = victim_cpi(8.0, true);
    // Small (the victim's controller is far from saturation, so snoops add little queueing;
    // measured +2e-4 relative) but strictly positive.
    eprintln!("mcf on socket 0: CPI {quiet} alone, {loud} beside 16 swim on socket 1");
    assert!(loud > quiet, "victim CPI {quiet} -> {loud}");
    let quiet0 = victim_cpi(0.0, false);
    let loud0 = victim_cpi(0.0, true);
    assert!(
        (loud0 - quiet0).abs() <= 1e-9 * quiet0,
        "without snoops the sockets are independent: {quiet0} vs {loud0}"
    );
    // Symmetry: the same eight swim copies on each socket.
    let cat = Catalog::builtin();
    let mut tasks: Vec<(&str, Option<u32>)> = Vec::new();
    for c in 0..8 {
        tasks.push(("swim", Some(2 * c)));
        tasks.push(("swim", Some(32 + 2 * c)));
    }
    let sc = v2_scenario("modern-2s-32c", &cat, &tasks, 600);
    let (s0, s1) = (steady_cpi(&sc, 0), steady_cpi(&sc, 1));
    // Exactly equal: every socket's snoop load reads the others' demand as it stood when the
    // tick began, and the updates one socket asks of the others all come at the next tick, so
    // the order of the solves does not matter (until session 13 socket 0, solved first, saw
    // older demand: 1.3e-8 here, 1 % between packages of 32 swim on xeon-4s-32t).
    assert_eq!(s0, s1, "identical sockets, different CPIs");
    // Four sockets, the fast path, a saturated controller on every one: every copy retires
    // exactly the same.
    let mut tasks: Vec<(&str, Option<u32>)> = Vec::new();
    for c in 0..32 {
        tasks.push(("swim", Some(c)));
    }
    let sc = v2_scenario("xeon-4s-32t", &cat, &tasks, 300);
    let mut sim = Simulation::new(&sc, 1).unwrap();
    sim.advance_quiet(300_000_000, None);
    let first = sim.counters(0).unwrap().instructions;
    for t in 1..32 {
        assert_eq!(
            sim.counters(t).unwrap().instructions,
            first,
            "swim copy {t}"
        );
    }
}

/// Bytes per second moved and instructions retired by `k` copies of `program` pinned on the
/// first `k` CPUs of `cpus`, over the second half of a 400 ms run.
fn crowd(machine: &str, program: &str, cpus: &[u32], k: usize) -> (f64, f64) {
    let cat = Catalog::builtin();
    let tasks: Vec<(&str, Option<u32>)> = cpus[..k].iter().map(|&c| (program, Some(c))).collect();
    let sc = v2_scenario(machine, &cat, &tasks, 400);
    let mut sim = Simulation::new(&sc, 1).unwrap();
    let (mut d, mut bus) = (Vec::new(), Vec::new());
    sim.advance_quiet(200_000_000, None);
    sim.take_interval(&mut d, &mut bus);
    sim.advance_quiet(200_000_000, None);
    let ns = sim.take_interval(&mut d, &mut bus) as f64;
    let line = sc.machine.line_bytes as f64;
    let bytes: f64 = d.iter().map(|c| c.mem_transactions * line).sum();
    let instr: f64 = d.iter().map(|c| c.instructions).sum();
    (bytes / ns, instr)
}

/// Another copy of a memory-bound program on another core of the same bus never lowers the
/// bytes the bus moves nor the work the copies do together: the sustained bandwidth is a
/// many-stream (STREAM-class) figure, so interleaving the programs' streams costs nothing
/// beyond the queue. Until session 14 v2 also took a row-conflict loss per mix of programs:
/// two swims on `masa-2x1` moved 4.9 % fewer bytes than one, and twelve on `x5650-2s`'s
/// first socket 8 % fewer than four (physics probe). Where the copies also share a cache, only
/// a stream without a working set is checked: a third 462.libquantum on `x5650-2s`'s 12 MB L3
/// pushes all three past their 5 MB knee, and the copies then do less together than two did
/// (a cache cliff, which seed 001's replicas measure), though the bus moves far more.
#[test]
fn another_copy_never_lowers_bytes_moved_nor_work_done() {
    let cases: &[(&str, &[u32], &[&str])] = &[
        ("masa-2x1", &[0, 1], &["swim", "art", "462.libquantum"]),
        ("zhang-smp", &[0, 1], &["swim", "art", "462.libquantum"]),
        ("x5650-2s", &[0, 2, 4, 6, 8, 10], &["swim"]),
    ];
    for &(machine, cpus, programs) in cases {
        for &program in programs {
            let mut prev = crowd(machine, program, cpus, 1);
            for k in 2..=cpus.len() {
                let now = crowd(machine, program, cpus, k);
                assert!(
                    now.0 >= prev.0 * (1.0 - 1e-9) && now.1 >= prev.1 * (1.0 - 1e-9),
                    "{machine} {program}: {} copies move {} B/ns and retire {}, {k} copies {} and {}",
                    k - 1,
                    prev.0,
                    prev.1,
                    now.0,
                    now.1
                );
                prev = now;
            }
        }
    }
}

/// A program that follows another in a shell starts cold: it never runs faster than it does
/// alone (its data is in none of the lines its predecessor brought in). Until session 14 the
/// second program inherited the first one's occupancy: art after mcf finished 175 ms (0.25 %)
/// sooner than art alone on `bench-8` under v2.
#[test]
fn a_shells_next_program_starts_with_a_cold_cache() {
    let cat = Catalog::builtin();
    // Short copies of the catalog programs (a thousandth of their instructions), so that the
    // warm-up is a visible part of the run.
    let short = |name: &str| {
        let mut p = cat.program(name).unwrap();
        for ph in &mut p.phases {
            ph.instructions = (ph.instructions / 1000).max(1);
        }
        p
    };
    for model in [Model::V1, Model::V2] {
        let run = |work: Workload| {
            let sc = Scenario::builder(&cat, "bench-8")
                .unwrap()
                .model(model)
                .duration_ms(2_000)
                .task_spec(TaskSpec {
                    name: "shell".into(),
                    workload: work,
                    affinity: Some(CpuSet::single(0)),
                    repeat: false,
                    start_ms: 0,
                })
                .build()
                .unwrap();
            let mut sim = Simulation::new(&sc, 1).unwrap();
            sim.advance_quiet(2_000_000_000, None);
            sim.finish_ns(0).expect("the shell finishes within the run")
        };
        let mcf = run(Workload::Program(short("mcf")));
        let art = run(Workload::Program(short("art")));
        let both = run(Workload::Shell(vec![short("mcf"), short("art")]));
        // To a millionth: a program that starts mid-tick is timed by other tick boundaries
        // than one that starts alone at a boundary (since session 23 the rest of a crossing
        // tick runs at the new program's rate, and a warming tick retires until its counted
        // misses fill it: the shell then came within 23 ns of 165.6 ms, either side). The
        // inherited occupancy this test was written for cost 0.25 %.
        let sum = (mcf + art) as f64;
        assert!(
            both as f64 >= sum * (1.0 - 1e-6),
            "{model:?}: mcf {mcf} ns + art {art} ns alone, {both} ns one after the other"
        );
    }
}

/// Listing pinned tasks in another order across CPUs changes nothing but their numbers, with
/// drifting slices, jittered slices and servers' random requests: the scheduler draws from
/// each CPU's own stream and a server from its name's and affinity's. Until session 14 one generator served
/// the machine in event order, so a reordering acted as a new seed under v2 (wupwise's
/// instructions moved by 4.3 % on `zhang-smp`; physics probe).
#[test]
fn pinned_tasks_listed_in_another_order_run_alike() {
    let cat = Catalog::builtin();
    // Two servers of the same name, one per CPU: told apart by their affinity.
    let tasks: &[(&str, u32)] = &[
        ("gzip", 0),
        ("web-clip", 0),
        ("swim", 0),
        ("mesa", 1),
        ("wupwise", 1),
        ("web-clip", 1),
    ];
    for (model, jitter) in [(Model::V2, 0.0), (Model::V1, 0.1)] {
        let run = |order: &[usize]| {
            let mut b = Scenario::builder(&cat, "zhang-smp")
                .unwrap()
                .model(model)
                .duration_ms(1_000);
            b = b.sched(SchedParams {
                timeslice_jitter: jitter,
                ..SchedParams::default()
            });
            for &i in order {
                b = b
                    .task(tasks[i].0, Some(CpuSet::single(tasks[i].1)))
                    .unwrap();
            }
            let sc = b.build().unwrap();
            let mut sim = Simulation::new(&sc, 3).unwrap();
            sim.advance_quiet(1_000_000_000, None);
            let mut by_name: Vec<(String, u32, u64, u64)> = order
                .iter()
                .enumerate()
                .map(|(k, &i)| {
                    let c = sim.counters(k).unwrap();
                    let (name, cpu) = tasks[i];
                    (
                        name.to_string(),
                        cpu,
                        c.instructions as u64,
                        c.cycles as u64,
                    )
                })
                .collect();
            by_name.sort();
            by_name
        };
        // CPU 0's tasks after CPU 1's, each CPU's queue in the same order.
        assert_eq!(
            run(&[0, 1, 2, 3, 4, 5]),
            run(&[3, 4, 5, 0, 1, 2]),
            "{model:?}"
        );
    }
}

/// The engine moves the sector's unused lines over the bus: art alone on `zhang-smp` (NetBurst,
/// two lines a read) counts `lines_per_miss` bus lines per miss, and the same machine fetching
/// one line a read counts only the line and its write-back; the misses themselves (and so
/// the miss curve) are the same per instruction.
#[test]
fn netburst_reads_move_the_whole_sector() {
    let run = |read: f64| {
        let cat = zhang_smp_with(|v2| v2.lines_per_read = read);
        let (a, b) = steady_window(&cat, "art", 1_000_000_000);
        let misses = b.llc_misses - a.llc_misses;
        (
            (b.mem_transactions - a.mem_transactions) / misses,
            misses / (b.instructions - a.instructions),
        )
    };
    let cat = Catalog::builtin();
    let v = v2_profile(&cat, "art");
    let phys = cat.machine("zhang-smp").unwrap().v2;
    assert_eq!(phys.lines_per_read, 2.0);
    let (sector, mpi_sector) = run(2.0);
    let (single, mpi_single) = run(1.0);
    assert!((sector - v.lines_per_miss(&phys)).abs() < 1e-3, "{sector}");
    // art: a fifth of its misses in streams, 0.15 of its victims dirty.
    assert!((sector - (1.0 + 0.8 + 0.15)).abs() < 1e-3, "{sector}");
    assert!(
        (single - (1.0 + v.writeback_fraction)).abs() < 1e-3,
        "{single}"
    );
    assert!(sector > single + 0.5, "{sector} vs {single}");
    assert!((mpi_sector / mpi_single - 1.0).abs() < 1e-3);
}

/// A sectored LLC (one tag per two-line sector, opt-in) holds a scattered program's data at
/// half density: parser alone on `zhang-smp` (a tenth of its misses in streams) misses at its
/// curve's ratio for `1 MB / 1.9` of cache once warm, and the bus still moves the lines
/// `lines_per_miss` says per miss. Off (every catalog machine) it misses at the 1 MB ratio.
#[test]
fn a_sectored_llc_holds_scattered_data_at_half_density() {
    let run = |sectored: bool| {
        let cat = zhang_smp_with(|v2| {
            assert!(!v2.sectored_llc, "the catalog leaves sector capacity out");
            v2.sectored_llc = sectored;
        });
        let (a, b) = steady_window(&cat, "parser", 2_000_000_000);
        let refs = b.llc_references - a.llc_references;
        let misses = b.llc_misses - a.llc_misses;
        (
            misses / refs,
            (b.mem_transactions - a.mem_transactions) / misses,
        )
    };
    let cat = Catalog::builtin();
    let mut phys = cat.machine("zhang-smp").unwrap().v2;
    let llc = cat.machine("zhang-smp").unwrap().llc_bytes as f64;
    let v = v2_profile(&cat, "parser");
    assert_eq!(v.sector_footprint(&phys), 1.0);
    phys.sectored_llc = true;
    let k = v.sector_footprint(&phys);
    assert!((k - 1.9).abs() < 1e-12, "{k}");
    let (m_off, lines_off) = run(false);
    let (m_on, lines_on) = run(true);
    let want_off = v.miss_curve.miss_ratio(llc);
    let want_on = v.miss_curve.miss_ratio(llc / k);
    assert!(
        (m_off / want_off - 1.0).abs() < 1e-3,
        "{m_off} vs {want_off}"
    );
    assert!((m_on / want_on - 1.0).abs() < 1e-3, "{m_on} vs {want_on}");
    assert!(m_on > 1.2 * m_off, "{m_on} vs {m_off}");
    for l in [lines_off, lines_on] {
        assert!((l - v.lines_per_miss(&phys)).abs() < 1e-3, "{l}");
    }
}

/// Every NetBurst machine of the catalog reads a two-line sector; no other machine does; none
/// counts sectors as capacity.
#[test]
fn only_netburst_machines_read_sectors() {
    let cat = Catalog::builtin();
    let netburst = [
        "zhang-smp",
        "xeon-2800",
        "xeon-3460",
        "masa-2x2ht",
        "masa-2x1",
        "p4-1300",
        "p4-1700",
    ];
    let names = cat.machine_names();
    for n in netburst {
        assert!(names.iter().any(|m| m == n), "no machine {n}");
    }
    for name in names {
        let m = cat.machine(&name).unwrap();
        let want = if netburst.contains(&name.as_str()) {
            2.0
        } else {
            1.0
        };
        assert_eq!(m.v2.lines_per_read, want, "{name}");
        // Sector capacity was tried in session 17 and left off (docs/calibration.md).
        assert!(
            !m.v2.sectored_llc,
            "{name}: sector capacity is off in the catalog"
        );
        if want == 2.0 {
            assert_eq!(m.v2.prefetch_depth_lines, 4.0, "{name}: 256 bytes ahead");
        }
    }
}

/// [Zhang07]: "TPC-H query Q3, Q6, and Q12 all exhibit similar execution time, [but] vary in
/// their need for memory bandwidth". Each class alone on `zhang-smp` under v2, back to back:
/// the time of one request (instructions x CPI) within 3 % of the others', while Q3 moves
/// at least twice Q6's bytes per second.
#[test]
fn tpch_q3_q6_q12_take_similar_times() {
    let mut cat = Catalog::builtin();
    let server = cat.server("tpch").unwrap();
    let mut per_request = Vec::new();
    for class in ["Q3", "Q6", "Q12"] {
        let rc = server.classes.iter().find(|c| c.name == class).unwrap();
        let name = format!("tpch-{class}");
        cat.set_program(Program {
            name: name.clone(),
            phases: vec![Phase {
                instructions: rc.instructions,
                profile: rc.profile.clone(),
            }],
        });
        let c = solo_counters(&cat, "zhang-smp", &name, Model::V2, 3000).unwrap();
        let cycles_per_request = rc.instructions as f64 * c.cycles / c.instructions;
        let lines_per_cycle = c.mem_transactions / c.cycles;
        per_request.push((class, cycles_per_request, lines_per_cycle));
    }
    let times: Vec<f64> = per_request.iter().map(|r| r.1).collect();
    let (lo, hi) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| {
        (lo.min(t), hi.max(t))
    });
    assert!(hi / lo < 1.03, "cycles per request: {per_request:?}");
    let (q3, q6) = (per_request[0].2, per_request[1].2);
    assert!(q3 > 2.0 * q6, "bus lines per cycle: {per_request:?}");
}

/// Two identical sockets with identical pinned loads settle alike whichever started first, and
/// a queue carries no more than its bandwidth, own traffic and snoops together. A latency
/// update (another socket's demand moved) changed a socket's own demand without passing it on,
/// so with socket 1 started 300 ms late its 12 swim copies ran 7.4 % slower than socket 0's for
/// the whole run, and own traffic plus snoops came to 1.009 of the bandwidth (physics probe,
/// session 19).
#[test]
fn a_late_socket_settles_where_an_early_one_does() {
    let cat = Catalog::builtin();
    let swim = cat.program("swim").unwrap();
    let mut b = Scenario::builder(&cat, "x5650-2s")
        .unwrap()
        .model(Model::V2)
        .duration_ms(1500);
    for c in 0..24u32 {
        b = b.task_spec(TaskSpec {
            name: format!("swim{c}"),
            workload: Workload::Program(swim.clone()),
            affinity: Some(CpuSet::single(c)),
            repeat: true,
            start_ms: if c < 12 { 0 } else { 300 },
        });
    }
    let sc = b.build().unwrap();
    let topo = sc.machine.topology().unwrap();
    for c in 0..24u32 {
        assert_eq!(
            topo.cpu(c).and_then(|cpu| cpu.package),
            Some(if c < 12 { 0 } else { 1 }),
            "CPU {c} is not on the socket the test assumes"
        );
    }
    let mut sim = Simulation::new(&sc, 1).unwrap();
    let (mut d, mut bus) = (Vec::new(), Vec::new());
    sim.advance_quiet(1_200_000_000, None);
    sim.take_interval(&mut d, &mut bus);
    sim.advance_quiet(300_000_000, None);
    let ns = sim.take_interval(&mut d, &mut bus) as f64;
    let sum = |r: std::ops::Range<usize>, f: fn(&Counters) -> f64| d[r].iter().map(f).sum::<f64>();
    let (i0, i1) = (
        sum(0..12, |c| c.instructions),
        sum(12..24, |c| c.instructions),
    );
    eprintln!("last 300 ms: socket 0 {i0:.0} instructions, socket 1 {i1:.0}");
    assert!(
        (i1 / i0 - 1.0).abs() < 0.01,
        "socket 1 / socket 0 = {}",
        i1 / i0
    );
    let line = sc.machine.line_bytes as f64;
    let gb_per_s = |r: std::ops::Range<usize>| {
        d[r].iter().map(|c| c.mem_transactions).sum::<f64>() * line / ns
    };
    let (own0, own1) = (gb_per_s(0..12), gb_per_s(12..24));
    let snoop_share = sc.machine.v2.snoop_bytes_per_line / line;
    let bw = sc.machine.v2.sustained_bandwidth_gb_per_s;
    for (own, other) in [(own0, own1), (own1, own0)] {
        let carried = own + snoop_share * other;
        assert!(
            carried <= bw * (1.0 + 1e-3),
            "carried {carried} GB/s on a {bw} GB/s queue (own {own}, snoops of {other})"
        );
    }
}

/// Two sockets of identical pinned, warm tasks end in identical states whichever started
/// first. The socket that settled alone kept the cache shares of a latency without the other
/// socket's snoops: its later latency updates moved the latency but not the shares, and
/// pinned tasks never asked for the whole solve that would have (physics probe, session 22:
/// twolf 0.7 %, mcf 0.4 % off their twins over the last 500 ms of 20 s; the reference path
/// was symmetric). CPU `c` and `c + 12` are mirrors on x5650-2s (checked above).
#[test]
fn an_early_socket_of_pinned_tasks_settles_where_its_late_twin_does() {
    let cat = Catalog::builtin();
    let mix = [
        ("eon", 0),
        ("429.mcf", 1),
        ("swim", 2),
        ("swim", 3),
        ("art", 4),
        ("462.libquantum", 5),
        ("parser", 6),
        ("twolf", 7),
        ("mesa", 8),
        ("parser", 9),
        ("462.libquantum", 10),
        ("twolf", 11),
    ];
    let mut b = Scenario::builder(&cat, "x5650-2s")
        .unwrap()
        .model(Model::V2)
        .duration_ms(1000);
    for socket in 0..2u32 {
        for &(program, cpu) in &mix {
            b = b.task_spec(TaskSpec {
                name: format!("{program}@{}", cpu + 12 * socket),
                workload: Workload::Program(cat.program(program).unwrap()),
                affinity: Some(CpuSet::single(cpu + 12 * socket)),
                repeat: true,
                start_ms: 100 * u64::from(socket),
            });
        }
    }
    let sc = b.build().unwrap();
    let mut sim = Simulation::new(&sc, 1).unwrap();
    let (mut d, mut bus) = (Vec::new(), Vec::new());
    sim.advance_quiet(800_000_000, None);
    sim.take_interval(&mut d, &mut bus);
    sim.advance_quiet(200_000_000, None);
    sim.take_interval(&mut d, &mut bus);
    for (k, &(program, _)) in mix.iter().enumerate() {
        let (early, late) = (d[k].instructions, d[k + mix.len()].instructions);
        assert!(
            (late / early - 1.0).abs() < 1e-4,
            "{program}: late socket / early socket = {}",
            late / early
        );
    }
}

/// `machine` of the built-in catalog with its v2 physics changed by `edit`.
fn machine_with(machine: &str, edit: impl FnOnce(&mut PhysicsV2)) -> Catalog {
    let mut cat = Catalog::builtin();
    let mut m = cat.machine(machine).unwrap();
    edit(&mut m.v2);
    cat.set_machine(m);
    cat
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A thread beside a running SMT sibling keeps part of its window: its overlap never
    /// falls below one miss at a time nor rises above its own, is `1 + (mlp - 1) x share`
    /// (strictly less than its own when it overlaps at all), shrinks as the share does, and is
    /// its own at a share of 1; the prefetcher's lead is kept, so the whole effective overlap
    /// falls by the window's ratio exactly.
    #[test]
    fn a_smaller_window_only_removes_overlap(
        p in 0usize..PROGRAMS.len(),
        share in 0.01f64..1.0, dshare in 0.0f64..1.0,
        machine in prop::sample::select(vec!["masa-2x2ht", "x5650-2s", "modern-2s-32c"]),
    ) {
        let cat = Catalog::builtin();
        let v = v2_profile(&cat, PROGRAMS[p]);
        let mut phys = cat.machine(machine).unwrap().v2;
        phys.smt_window_share = share;
        let (m1, e1) = (v.smt_mlp(&phys), v.smt_effective_mlp(&phys));
        let mut wider = phys;
        wider.smt_window_share = (share + dshare).min(1.0);
        prop_assert!(m1 >= 1.0 && m1 <= v.mlp * (1.0 + 1e-12));
        prop_assert!((m1 - (1.0 + (v.mlp - 1.0) * share)).abs() <= 1e-12 * v.mlp);
        if v.mlp > 1.0 {
            prop_assert!(m1 < v.mlp);
        }
        let ratio = e1 / v.effective_mlp(&phys);
        prop_assert!((ratio - m1 / v.mlp).abs() <= 1e-12, "{} against {}", ratio, m1 / v.mlp);
        prop_assert!(e1 <= v.effective_mlp(&phys) * (1.0 + 1e-12));
        prop_assert!(v.smt_mlp(&wider) >= m1 * (1.0 - 1e-12));
        prop_assert!(v.smt_effective_mlp(&wider) >= e1 * (1.0 - 1e-12));
        prop_assert!(v.smt_core_cpi(0.3, &phys) >= v.core_cpi(0.3, &phys) * (1.0 - 1e-12));
        let mut whole = phys;
        whole.smt_window_share = 1.0;
        prop_assert_eq!(v.smt_mlp(&whole), v.mlp);
        prop_assert_eq!(v.smt_effective_mlp(&whole), v.effective_mlp(&whole));
    }
}

/// Hyper-Threading splits the window between two running threads (docs/sim.md, "SMT"): a
/// thread's memory overlap shrinks only while its sibling runs, by what its window found
/// beyond the first miss. A streaming thread (swim: independent array loads) loses more of
/// its speed to it than a pointer chaser (mcf), and a thread whose sibling is idle keeps its
/// whole window: its run is the same to the bit whatever the share.
#[test]
fn a_running_sibling_takes_half_the_window() {
    let half = Catalog::builtin();
    let whole = machine_with("x5650-2s", |v| v.smt_window_share = 1.0);
    assert_eq!(half.machine("x5650-2s").unwrap().v2.smt_window_share, 0.5);
    // CPUs 0 and 1 are the two threads of core 0; the sibling runs eon (compute, no misses).
    let slowdown = |program: &str| {
        let pair = |cat: &Catalog| {
            let sc = v2_scenario(
                "x5650-2s",
                cat,
                &[(program, Some(0)), ("eon", Some(1))],
                600,
            );
            steady_cpi(&sc, 0)
        };
        pair(&half) / pair(&whole)
    };
    let (swim, mcf) = (slowdown("swim"), slowdown("mcf"));
    assert!(swim > 1.02, "swim beside a running sibling: CPI x{swim}");
    assert!(mcf > 1.0, "mcf beside a running sibling: CPI x{mcf}");
    assert!(swim > mcf, "swim x{swim} against mcf x{mcf}");
    for program in ["swim", "mcf", "eon"] {
        let alone = |cat: &Catalog| {
            let sc = v2_scenario("x5650-2s", cat, &[(program, Some(0))], 600);
            steady_cpi(&sc, 0)
        };
        assert_eq!(alone(&half).to_bits(), alone(&whole).to_bits(), "{program}");
    }
}
