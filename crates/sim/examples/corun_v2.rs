//! Each program beside each other on one machine under model v2: the victim's LLC misses per
//! kilo-instruction and its CPI co-running, relative to alone. On a shared LLC, published co-run
//! studies report that a cache-hungry co-runner can multiply some victims' misses several
//! times; this prints how far v2's sharing (by access frequency, over working-set curves) goes.
//!
//! `cargo run --release -p counterpoint-sim --example corun_v2 [-- [--footprint] MACHINE
//! [PROGRAM...]]` (default: `dualcore-shared-l2`, a 4 MB L2 shared by two cores, and ten SPEC
//! CPU2000 programs). Rows are victims, columns co-runners; each cell is `misses x / CPI x`.
//! `--footprint` divides the cache by the footprints' natural partition under LRU instead of
//! by frequency of access (`LlcSharing`, docs/sim.md).

use counterpoint_core::CpuSet;
use counterpoint_sim::*;

fn fail(msg: String) -> ! {
    eprintln!("corun_v2: {msg}");
    std::process::exit(1)
}

/// (MPKI, CPI) of task 0 over the second second of a 2 s run (warm caches), with `other`
/// beside it on CPU 1 when given.
fn victim(cat: &Catalog, machine: &str, program: &str, other: Option<&str>) -> (f64, f64) {
    let mut b = Scenario::builder(cat, machine)
        .unwrap_or_else(|e| fail(e))
        .model(Model::V2)
        .duration_ms(2000)
        .task(program, Some(CpuSet::single(0)))
        .unwrap_or_else(|e| fail(e));
    if let Some(o) = other {
        b = b
            .task(o, Some(CpuSet::single(1)))
            .unwrap_or_else(|e| fail(e));
    }
    let mut sc = b.build().unwrap();
    for t in &mut sc.tasks {
        t.repeat = true;
    }
    let mut sim = Simulation::new(&sc, 1).unwrap_or_else(|e| fail(e.to_string()));
    sim.advance_quiet(1_000_000_000, None);
    let a = sim.counters(0).copied().unwrap_or_default();
    sim.advance_quiet(1_000_000_000, None);
    let z = sim.counters(0).copied().unwrap_or_default();
    let instr = (z.instructions - a.instructions).max(1.0);
    (
        (z.llc_misses - a.llc_misses) / instr * 1000.0,
        (z.cycles - a.cycles) / instr,
    )
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let footprint = args.first().is_some_and(|a| a == "--footprint");
    if footprint {
        args.remove(0);
    }
    let machine = args
        .first()
        .cloned()
        .unwrap_or_else(|| "dualcore-shared-l2".into());
    let mut programs: Vec<String> = args.iter().skip(1).cloned().collect();
    if programs.is_empty() {
        programs = [
            "gzip", "parser", "mesa", "wupwise", "swim", "art", "mcf", "gcc", "twolf", "bzip2",
        ]
        .map(String::from)
        .to_vec();
    }
    let mut cat = Catalog::builtin();
    let Some(mut spec) = cat.machine(&machine) else {
        fail(format!("no machine {machine}"))
    };
    if footprint {
        spec.v2.llc_sharing = LlcSharing::Footprint;
        cat.set_machine(spec.clone());
    }
    if spec.packages * spec.cores_per_package * spec.threads_per_core < 2 {
        fail(format!("{machine} has fewer than two CPUs"));
    }
    print!(
        "{machine}, model v2 ({}): victim (row) misses x / CPI x beside co-runner (column)\n{:10}",
        if footprint {
            "footprint sharing"
        } else {
            "sharing by access frequency"
        },
        ""
    );
    for p in &programs {
        print!(" {p:>13}");
    }
    println!("   alone MPKI");
    let mut worst = (1.0f64, String::new());
    for v in &programs {
        let (m0, c0) = victim(&cat, &machine, v, None);
        print!("{v:10}");
        for o in &programs {
            let (m, c) = victim(&cat, &machine, v, Some(o));
            let mx = if m0 > 0.0 { m / m0 } else { f64::NAN };
            if mx > worst.0 {
                worst = (mx, format!("{v} beside {o}"));
            }
            print!(" {:>6.2}/{:<6.2}", mx, c / c0);
        }
        println!("   {m0:8.2}");
    }
    println!("largest miss increase: x{:.2} ({})", worst.0, worst.1);
}
