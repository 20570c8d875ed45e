//! Each program alone on a machine under model v2: its CPI broken into the non-memory
//! components the catalog gives it and the memory stall the run measures, its IPC and its bus
//! traffic, sorted by IPC. This is the table docs/sim-catalog.md quotes to show whether IPC
//! and bus use order the programs differently (the point of Zhang et al.'s IPC result).
//!
//! `cargo run --release -p counterpoint-sim --example solo_v2 [-- MACHINE [PROGRAM...]]`
//! (default: `zhang-smp` and Zhang's six programs); `SERVER/CLASS` (e.g. `tpch/Q3`) runs one
//! request class of a server back to back.

use counterpoint_core::CpuSet;
use counterpoint_sim::*;

fn fail(msg: String) -> ! {
    eprintln!("solo_v2: {msg}");
    std::process::exit(1)
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let machine = args.first().cloned().unwrap_or_else(|| "zhang-smp".into());
    let mut programs: Vec<String> = args.iter().skip(1).cloned().collect();
    if programs.is_empty() {
        programs = ["gzip", "parser", "swim", "mesa", "wupwise", "art"]
            .map(String::from)
            .to_vec();
    }
    let mut cat = Catalog::builtin();
    // Request classes become one-phase programs of their own.
    for name in &programs {
        if let Some((server, class)) = name.split_once('/') {
            let Some(rc) = cat
                .server(server)
                .and_then(|s| s.classes.into_iter().find(|c| c.name == class))
            else {
                fail(format!("no request class {name}"))
            };
            cat.set_program(Program {
                name: name.clone(),
                phases: vec![Phase {
                    instructions: rc.instructions,
                    profile: rc.profile,
                }],
            });
        }
    }
    let cat = cat;
    let Some(spec) = cat.machine(&machine) else {
        fail(format!("no machine {machine}"))
    };
    let mut rows = Vec::new();
    for name in &programs {
        let Some(prog) = cat.program(name) else {
            fail(format!("no program {name}"))
        };
        let Some(v) = prog.phases[0].profile.v2.clone() else {
            fail(format!("{name} has no v2 profile"))
        };
        let fp = prog.phases[0].profile.fp_fraction;
        let sc = Scenario::builder(&cat, &machine)
            .unwrap_or_else(|e| fail(e))
            .model(Model::V2)
            .duration_ms(3000)
            .task(name, Some(CpuSet::single(0)))
            .unwrap_or_else(|e| fail(e))
            .build()
            .unwrap();
        let mut sc = sc;
        for t in &mut sc.tasks {
            t.repeat = true;
        }
        let mut sim = Simulation::new(&sc, 1).unwrap_or_else(|e| fail(e.to_string()));
        sim.advance_quiet(3_000_000_000, None);
        let c = sim.counters(0).copied().unwrap_or_default();
        let cpi = c.cycles / c.instructions.max(1.0);
        let branch = v.branch_mpki / 1000.0 * spec.v2.branch_penalty_cycles;
        let fp_dep = fp * v.fp_dep_cycles;
        let hit = v.llc_apki / 1000.0 * spec.v2.llc_hit_cycles / v.mlp;
        let mem = cpi - v.base_cpi - branch - fp_dep - hit;
        let secs = c.task_clock_ns as f64 / 1e9;
        let bus_mb_s = c.mem_transactions * spec.line_bytes as f64 / secs.max(1e-9) / 1e6;
        let mpki = c.llc_misses / c.instructions.max(1.0) * 1000.0;
        // Devices' DMA on the task's behalf loads the bus but is not in its counters.
        let dma_mb_s = v.dma_lines_pki / 1000.0 * c.instructions * spec.line_bytes as f64
            / secs.max(1e-9)
            / 1e6;
        rows.push((
            name.clone(),
            v.base_cpi,
            branch,
            fp_dep,
            hit,
            mem,
            cpi,
            mpki,
            bus_mb_s,
            dma_mb_s,
        ));
    }
    rows.sort_by(|a, b| b.6.total_cmp(&a.6).reverse());
    println!(
        "{machine}, model v2, each program alone for 3 s (sorted by IPC, highest first)\n\
         program      base  branch  fp-dep  llc-hit  memory   CPI    IPC   LLC MPKI  bus MB/s  DMA MB/s"
    );
    for (n, base, br, fpd, hit, mem, cpi, mpki, bus, dma) in rows {
        println!(
            "{n:12} {base:5.2} {br:7.3} {fpd:7.3} {hit:8.3} {mem:7.3} {cpi:6.2} {:6.3} {mpki:9.2} {bus:9.0} {dma:9.0}",
            1.0 / cpi
        );
    }
}
