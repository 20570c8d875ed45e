//! One SchedTask-model run per technique of one benchmark (development aid).
use counterpoint_sim::schedtask::{run, Options, Technique};
fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let b = std::env::args().nth(1).unwrap_or_else(|| "FileSrv".into());
    let o = Options::default();
    for t in Technique::all() {
        let s = std::time::Instant::now();
        match run(&b, t, &o, 1) {
            Ok(r) => println!(
                "{:32} ipc {:6.2} i {:.4} d {:.4} idle {:.3} os {:.3} bnc/ki {:.2} inv {} {:?}",
                r.technique,
                r.throughput_ipc,
                r.icache_hit_rate,
                r.dcache_hit_rate,
                r.idle_fraction,
                r.os_instruction_share,
                r.bounces_per_kinstr,
                r.invocations,
                s.elapsed()
            ),
            Err(e) => eprintln!("{e}"),
        }
    }
}
