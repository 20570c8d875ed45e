//! `counterpoint bench c2c`: the core-to-core cost matrix (cache-line ping-pong and futex
//! wake-up round trips per CPU pair, grouped by topology distance). The measurement is
//! `counterpoint_host::c2c`; this file parses arguments, prints and draws.

use anyhow::{Context, Result};
use clap::Args;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_host::c2c::{self, C2cOptions, C2cReport};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

#[derive(Args)]
#[command(after_help = "\
Per pair of CPUs, two threads pinned one on each CPU take turns:
  ping-pong  writing one cache line (a round trip is two line transfers)
  futex      waking each other through FUTEX_WAIT/FUTEX_WAKE (a round trip is two wake-ups)
Every round is timed with the TSC (rdtsc) when it is invariant, else CLOCK_MONOTONIC; medians
and 99th percentiles are over rounds, and pairs are grouped by topology distance (SMT sibling,
same LLC, same package, other package). Spinning threads make this a CPU burner for its length.
The --json output is also a notification-cost file for the simulator's replica model
(`counterpoint experiment replica --c2c FILE`).

Examples:
  counterpoint bench c2c
  counterpoint bench c2c --json > c2c.json
  counterpoint bench c2c --cpus 0-3 --rounds 5000 --svg c2c.svg")]
pub struct BenchC2cArgs {
    /// CPUs to measure (kernel list format, e.g. 0-3,8); default: every online CPU.
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Timed ping-pong rounds per pair (1 to 10,000,000).
    #[arg(long, default_value_t = 20_000)]
    rounds: usize,
    /// Timed futex rounds per pair (1 to 10,000,000; a futex round trip takes tens of
    /// microseconds on a VM, so 10,000,000 take minutes per pair).
    #[arg(long, default_value_t = 5_000)]
    futex_rounds: usize,
    /// Run even when the estimated time exceeds 30 minutes.
    #[arg(long)]
    force: bool,
    /// Print the whole report as JSON.
    #[arg(long)]
    json: bool,
    /// Write an SVG heat map of the matrix (both probes) to this file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

static STOP: AtomicBool = AtomicBool::new(false);

/// Pessimistic round-trip times for the estimate: a ping-pong round (two line transfers) and a
/// futex round (two wake-ups), as on a loaded VM (this one measured about 42 us per futex round
/// trip; bare metal is several times faster).
const PINGPONG_ROUND_S: f64 = 1e-6;
const FUTEX_ROUND_S: f64 = 50e-6;
/// Runs estimated beyond this need `--force`.
const BUDGET_S: f64 = 1800.0;

pub fn run(args: BenchC2cArgs) -> Result<ExitCode> {
    let max = c2c::MAX_ROUNDS;
    if !(1..=max).contains(&args.rounds) || !(1..=max).contains(&args.futex_rounds) {
        anyhow::bail!("--rounds and --futex-rounds: between 1 and {max}");
    }
    let topo = counterpoint_host::sysfs::host_topology().context("reading the CPU topology")?;
    let online = counterpoint_host::sysfs::online(&topo);
    let cpus = match &args.cpus {
        Some(s) => {
            let set = CpuSet::parse_list(s).map_err(|e| anyhow::anyhow!("--cpus {s:?}: {e}"))?;
            let off = set.difference(&online);
            if !off.is_empty() {
                anyhow::bail!(
                    "--cpus {s:?}: CPU(s) {} not online (online: {})",
                    off.to_list(),
                    online.to_list()
                );
            }
            set
        }
        None => online,
    };
    // Refused before the estimate line, not after it (`--cpus 0` printed "0 CPU pair(s), at
    // most under a second" and then refused; CLI probe, session 29). The first placed pair
    // ends the search: no list of every pair is made here.
    let list: Vec<_> = cpus.iter().collect();
    let placed_pair = list.iter().enumerate().any(|(i, &a)| {
        list[i + 1..]
            .iter()
            .any(|&b| c2c::distance(&topo, a, b).is_some())
    });
    if !placed_pair {
        return Err(c2c::C2cError::TooFewCpus(cpus.to_list()).into());
    }
    // The figure's place is checked before the pairs run (minutes on a big machine).
    if let Some(p) = &args.svg {
        super::check_output_file("--svg", p)?;
    }
    // Pairs grow as N(N-1)/2: estimated up front, refused past the budget without --force
    // (a probe ran 10^7 futex rounds on one pair for 8.5 minutes with no word of how long).
    let n = cpus.len() as f64;
    let pairs = n * (n - 1.0) / 2.0;
    let estimate_s =
        pairs * (args.rounds as f64 * PINGPONG_ROUND_S + args.futex_rounds as f64 * FUTEX_ROUND_S);
    if estimate_s > BUDGET_S && !args.force {
        anyhow::bail!(
            "{pairs} CPU pairs x ({} ping-pong + {} futex rounds) would take about {} \
             (estimated at {:.0} us per ping-pong and {:.0} us per futex round trip); pass \
             --force to run it, or fewer --cpus or rounds",
            args.rounds,
            args.futex_rounds,
            super::human_time(estimate_s),
            PINGPONG_ROUND_S * 1e6,
            FUTEX_ROUND_S * 1e6,
        );
    }
    if !args.json {
        let about = if estimate_s < 1.0 {
            "under a second".to_string()
        } else {
            format!("about {}", super::human_time(estimate_s))
        };
        eprintln!("{pairs} CPU pair(s), at most {about}");
    }
    let opts = C2cOptions {
        pingpong_rounds: args.rounds,
        futex_rounds: args.futex_rounds,
        ..C2cOptions::default()
    };
    let quiet = args.json;
    let report = c2c::run(&topo, &cpus, opts, &STOP, |i, n, a, b| {
        if !quiet {
            eprintln!("pair {}/{n}: CPU {a} <-> CPU {b}", i + 1);
        }
    })?;
    if let Some(p) = &args.svg {
        heat_map(p, &report).with_context(|| format!("writing {}", p.display()))?;
    }
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        render(&report)
    };
    super::write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.0}"))
}

fn render(r: &C2cReport) -> String {
    let mut s = String::from("topology (cpu: package/core/llc)\n");
    for p in &r.topology {
        let f = |v: Option<String>| v.unwrap_or_else(|| "?".into());
        s += &format!(
            "  cpu {:>3}: package {} core {} llc {}\n",
            p.cpu,
            f(p.package.map(|x| x.to_string())),
            f(p.core.map(|x| x.to_string())),
            f(p.llc.map(|x| x.to_string())),
        );
    }
    let c = &r.clock;
    s += &format!(
        "clock: ns from {}; TSC {}{}\n\n",
        c.ns_source,
        if c.tsc { "present" } else { "absent" },
        match (c.tsc, c.tsc_invariant, c.tsc_hz) {
            (true, true, Some(hz)) => format!(", invariant, {:.3} GHz measured", hz / 1e9),
            (true, false, _) => ", NOT invariant: cycles are not a time base here".into(),
            _ => String::new(),
        }
    );
    s += "pair      distance        ping-pong RTT ns (cycles)      futex RTT ns (cycles)\n";
    s += "                          median      p99                median       p99\n";
    for p in &r.pairs {
        s += &format!(
            "{:>3}-{:<3}  {:<14} {:>7.0} ({:>6}) {:>7.0} ({:>6})  {:>8.0} ({:>7}) {:>8.0} ({:>7})\n",
            p.a,
            p.b,
            p.distance.name(),
            p.pingpong.median_ns,
            opt(p.pingpong.median_cycles),
            p.pingpong.p99_ns,
            opt(p.pingpong.p99_cycles),
            p.futex.median_ns,
            opt(p.futex.median_cycles),
            p.futex.p99_ns,
            opt(p.futex.p99_cycles),
        );
    }
    s +=
        "\nby distance (median over pairs)  pairs  ping-pong median ns  futex median ns (cycles)\n";
    for g in &r.groups {
        s += &format!(
            "  {:<31} {:>5}  {:>19.0}  {:>10.0} ({})\n",
            g.distance.name(),
            g.pairs,
            g.pingpong_median_ns,
            g.futex_median_ns,
            opt(g.futex_median_cycles),
        );
    }
    s
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Two matrices side by side (ping-pong, futex), each with its colour scale to its right,
/// outside the cells.
fn heat_map(path: &Path, r: &C2cReport) -> Result<()> {
    let mut svg = String::new();
    heat_map_svg(&mut svg, r)?;
    counterpoint_experiment::report::write_atomic(path, svg.as_bytes())?;
    Ok(())
}

fn heat_map_svg(svg: &mut String, r: &C2cReport) -> Result<()> {
    let cpus: Vec<u32> = r.topology.iter().map(|p| p.cpu).collect();
    let n = cpus.len().max(1);
    let idx = |c: u32| cpus.iter().position(|&x| x == c).unwrap_or(0);
    let root = SVGBackend::with_string(svg, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let halves = root.split_evenly((1, 2));
    for (k, area) in halves.iter().enumerate() {
        let title = if k == 0 {
            "cache-line ping-pong RTT, median ns"
        } else {
            "futex wake-up RTT, median ns"
        };
        let val = |p: &c2c::PairResult| {
            if k == 0 {
                p.pingpong.median_ns
            } else {
                p.futex.median_ns
            }
        };
        let vals: Vec<f64> = r.pairs.iter().map(&val).collect();
        let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo, hi)
        } else {
            (lo.min(0.0), lo.max(0.0) + 1.0)
        };
        let colour = |v: f64| {
            let x = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
            RGBColor(
                (255.0 * x) as u8,
                (80.0 + 100.0 * (1.0 - x)) as u8,
                (255.0 * (1.0 - x)) as u8,
            )
        };
        let (plot, legend) = area.split_horizontally(480);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(40)
            // A segmented 0..m has m + 1 cells.
            .build_cartesian_2d((0..n - 1).into_segmented(), (0..n - 1).into_segmented())
            .map_err(err)?;
        // Labels at the cells' centres: the CPU of each row and column.
        let label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => cpus.get(*i).map_or(String::new(), |c| c.to_string()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("CPU")
            .y_desc("CPU")
            .axis_desc_style(("sans-serif", 14))
            .label_style(("sans-serif", 12))
            .x_labels(n.min(64))
            .y_labels(n.min(64))
            .x_label_formatter(&label)
            .y_label_formatter(&label)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(r.pairs.iter().flat_map(|p| {
                let (i, j, c) = (idx(p.a), idx(p.b), colour(val(p)));
                [(i, j), (j, i)].map(|(x, y)| {
                    Rectangle::new(
                        [
                            (SegmentValue::Exact(x), SegmentValue::Exact(y)),
                            (SegmentValue::Exact(x + 1), SegmentValue::Exact(y + 1)),
                        ],
                        c.filled(),
                    )
                })
            }))
            .map_err(err)?;
        // Colour scale, outside the matrix.
        let mut scale = ChartBuilder::on(&legend)
            .margin_top(40)
            .margin_bottom(45)
            .margin_right(10)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..1.0, lo..hi)
            .map_err(err)?;
        scale
            .configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_desc("ns")
            .axis_desc_style(("sans-serif", 14))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let steps = 50;
        scale
            .draw_series((0..steps).map(|s| {
                let a = lo + (hi - lo) * s as f64 / steps as f64;
                let b = lo + (hi - lo) * (s + 1) as f64 / steps as f64;
                Rectangle::new([(0.0, a), (1.0, b)], colour((a + b) / 2.0).filled())
            }))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
