//! How long each of MASA's shells (its test cases' `shell` tasks, as `scenarios/masa-testcase1.toml`
//! and `masa-testcase2.toml` list them) lasts alone on `masa-2x1` under each model: the sum of its
//! programs' instructions at each program's CPI alone (3 s, steady). MASA sized its shells to
//! last alike; the catalog's instruction counts were sized with v1's CPIs, so under v2's
//! measured CPIs they no longer do (docs/experiments.md, "Session 15").
//!
//! `cargo run --release -p counterpoint-sim --example masa_shells`

use counterpoint_sim::*;

fn fail(msg: String) -> ! {
    eprintln!("masa_shells: {msg}");
    std::process::exit(1)
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cat = Catalog::builtin();
    let machine = "masa-2x1";
    let ghz = cat
        .machine(machine)
        .unwrap_or_else(|| fail(format!("no machine {machine}")))
        .freq_ghz;
    let shells: [(&str, &[&str]); 5] = [
        ("Shell_0", &["INT", "gcc", "crafty", "eon", "gap", "bzip2"]),
        (
            "Shell_1",
            &["vpr", "mcf", "L2C", "perlbmk", "vortex", "twolf"],
        ),
        (
            "Shell_2",
            &[
                "wupwise", "mgrid", "FP", "art", "facerec", "lucas", "sixtrack",
            ],
        ),
        ("Shell_FP", &["FP"; 7]),
        ("Shell_L2C", &["L2C"; 5]),
    ];
    for model in [Model::V1, Model::V2] {
        let mut out = Vec::new();
        for (name, programs) in shells {
            let mut seconds = 0.0;
            for p in programs {
                let c = solo_counters(&cat, machine, p, model, 3000)
                    .unwrap_or_else(|e| fail(e.to_string()));
                let n = cat
                    .program(p)
                    .unwrap_or_else(|| fail(format!("no program {p}")))
                    .instructions() as f64;
                seconds += n * c.cycles / c.instructions.max(1.0) / (ghz * 1e9);
            }
            out.push(format!("{name} {seconds:.0} s"));
        }
        println!("{model:?} on {machine}: {}", out.join(", "));
    }
}
