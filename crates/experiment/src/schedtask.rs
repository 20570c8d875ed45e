//! SchedTask on the simulated 32-core machine (`counterpoint experiment schedtask`, seed 004):
//! instruction throughput, L1 i-/d-cache hit rates and core idleness of Linux, the four
//! baselines the paper compares (SelectiveOffload, FlexSC, RegionSched, SLICC), SchedTask and
//! three ablations (no stealing, random allocation, no overlap table), on the paper's eight
//! OS-intensive benchmarks. The model is `counterpoint_sim::schedtask`; the profiles and their
//! sources are in docs/sim-catalog.md (SchedTask section), the model in docs/schedtask.md.
//!
//! The paper's headline is SchedTask's +11.4 % average instruction throughput over the best of
//! the four baselines; its per-benchmark bars and its hit-rate and idleness figures are plots
//! whose values the seed (a slide deck) does not give, so only their direction is compared.
//! Every row here is a prediction of the model except the OS shares of FileSrv (90 %), ISCP and
//! DSS (20 %), which are inputs (calibrated by construction).
//!
//! A run is one 3 ms epoch of warm-up (caches, SchedTask's first profile) and one measured
//! epoch of the 32-core machine; a run averages over 10^4-10^5 SuperFunction invocations. To
//! keep `experiment all` under 20 s of CPU, `all` runs it over the first [`ALL_SEEDS`] seeds it
//! is given; `experiment schedtask --seeds N` runs all N.

use crate::progress::Progress;
use crate::result::{BarFigure, BarSeries, ExperimentResult, Table};
use crate::summary::{Summary, Verdict};
use counterpoint_sim::schedtask::{self, workload, Options, Outcome, Technique};
use rayon::prelude::*;

/// Seeds `experiment all` runs this experiment over (the first ones given): about 5 s each.
pub const ALL_SEEDS: usize = 2;
/// The paper's average gain over the best baseline, as a fraction (held in [`crate::paper`]).
pub const PAPER_AVERAGE_GAIN: f64 = crate::paper::SCHEDTASK_AVERAGE_GAIN;
/// The baselines SchedTask is compared with (the paper's "state of the art").
pub const BASELINES: [&str; 4] = ["selective-offload", "flexsc", "regionsched", "slicc"];

/// The runs [`sweep`] reports to its progress: every benchmark under every technique, once per
/// seed.
fn sweep_runs(techniques: usize, seeds: u64) -> u64 {
    (workload::BENCHMARKS.len() * techniques) as u64 * seeds
}

/// The runs [`run`] reports to its progress over `seeds` seeds.
pub fn planned_runs(seeds: u64) -> u64 {
    sweep_runs(Technique::all().len(), seeds)
}

/// Every run's outcome: `[benchmark][technique][seed]`.
pub fn sweep(
    o: &Options,
    seeds: &[u64],
    techniques: &[Technique],
    progress: &dyn Progress,
) -> Result<Vec<Vec<Vec<Outcome>>>, String> {
    let nb = workload::BENCHMARKS.len();
    let jobs: Vec<(usize, usize, u64)> = (0..nb)
        .flat_map(|b| {
            (0..techniques.len()).flat_map(move |t| seeds.iter().map(move |&s| (b, t, s)))
        })
        .collect();
    debug_assert_eq!(
        jobs.len() as u64,
        sweep_runs(techniques.len(), seeds.len() as u64)
    );
    progress.add_total(jobs.len() as u64);
    let outs: Vec<Result<Outcome, String>> = jobs
        .par_iter()
        .map(|&(b, t, s)| {
            let name = workload::BENCHMARKS[b].name;
            let r = schedtask::run(name, techniques[t], o, s).map_err(|e| e.to_string());
            progress.done(&format!("schedtask: {name} {}", techniques[t].label()));
            r
        })
        .collect();
    let mut grid = vec![vec![Vec::new(); techniques.len()]; nb];
    for (&(b, t, _), r) in jobs.iter().zip(outs) {
        grid[b][t].push(r?);
    }
    Ok(grid)
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

fn show_pct_interval(s: &Summary) -> String {
    match s.interval95() {
        Some((lo, hi)) => format!(
            "{:+.1} % [{:+.1}, {:+.1}]",
            100.0 * s.mean,
            100.0 * lo,
            100.0 * hi
        ),
        None => format!("{:+.1} % [one seed]", 100.0 * s.mean),
    }
}

/// The experiment.
pub fn run(seeds: &[u64], progress: &dyn Progress) -> Result<ExperimentResult, String> {
    let o = Options::default();
    let techniques = Technique::all();
    let labels: Vec<String> = techniques.iter().map(|t| t.label()).collect();
    let idx = |name: &str| labels.iter().position(|l| l == name);
    let grid = sweep(&o, seeds, &techniques, progress)?;
    let mut r = ExperimentResult::new(
        "schedtask",
        "SchedTask: SuperFunction scheduling on a 32-core machine (seed 004)",
        &format!(
            "{} cores at {} GHz (clock estimated), private 4-way {} KB L1 i- and d-cache and \
             4-way {} KB L2 per core, shared L3 as a fixed latency; each run {} ms of \
             simulated time: {} epoch(s) of {} ms to warm up, then {} measured",
            o.cores,
            o.freq_ghz,
            o.l1_bytes / 1024,
            o.l2_bytes / 1024,
            o.epoch_ms * f64::from(o.warmup_epochs + o.measure_epochs),
            o.warmup_epochs,
            o.epoch_ms,
            o.measure_epochs,
        ),
        seeds,
    );
    let linux = idx("linux").ok_or("no linux technique")?;
    let full = idx("schedtask").ok_or("no schedtask technique")?;
    let base_idx: Vec<usize> = BASELINES.iter().filter_map(|b| idx(b)).collect();
    let per_seed = |b: usize, t: usize, f: &dyn Fn(&Outcome) -> f64| -> Vec<f64> {
        grid[b][t].iter().map(f).collect()
    };
    // Record every metric.
    for (b, bench) in workload::BENCHMARKS.iter().enumerate() {
        for (t, label) in labels.iter().enumerate() {
            let key = format!("{label}@{}", bench.name);
            r.put(
                &key,
                "throughput_ipc",
                &per_seed(b, t, &|o| o.throughput_ipc),
            );
            r.put(
                &key,
                "icache_hit_rate",
                &per_seed(b, t, &|o| o.icache_hit_rate),
            );
            r.put(
                &key,
                "dcache_hit_rate",
                &per_seed(b, t, &|o| o.dcache_hit_rate),
            );
            r.put(&key, "idle_fraction", &per_seed(b, t, &|o| o.idle_fraction));
            r.put(
                &key,
                "bounces_per_kinstr",
                &per_seed(b, t, &|o| o.bounces_per_kinstr),
            );
        }
    }
    // Throughput relative to Linux, and SchedTask's gain over the best baseline.
    let ns = seeds.len();
    let ratio = |b: usize, t: usize| -> Vec<f64> {
        (0..ns)
            .map(|s| grid[b][t][s].throughput_ipc / grid[b][linux][s].throughput_ipc)
            .collect()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let shown = [
        "selective-offload",
        "flexsc",
        "regionsched",
        "slicc",
        "schedtask",
    ];
    let mut cols = vec!["benchmark", "linux IPC (32 cores)"];
    cols.extend(shown);
    cols.extend([
        "best baseline",
        "SchedTask gain over it (95 % CI)",
        "verdict",
    ]);
    let mut tp = Table::new(
        "Instruction throughput relative to Linux (mean over seeds), and SchedTask's gain over \
         the best of the four baselines per benchmark",
        &cols,
    );
    let mut gains_by_seed = vec![Vec::new(); ns];
    let mut gains_over_mean_by_seed = vec![Vec::new(); ns];
    for (b, bench) in workload::BENCHMARKS.iter().enumerate() {
        let lin = Summary::of(&per_seed(b, linux, &|o| o.throughput_ipc));
        let mut row = vec![
            bench.name.to_string(),
            lin.map_or("n/a".into(), |s| format!("{:.2}", s.mean)),
        ];
        for name in shown {
            row.push(idx(name).map_or("n/a".into(), |t| format!("{:.3}", mean(&ratio(b, t)))));
        }
        let best = base_idx
            .iter()
            .copied()
            .max_by(|&x, &y| mean(&ratio(b, x)).total_cmp(&mean(&ratio(b, y))))
            .ok_or("no baseline")?;
        let gains: Vec<f64> = (0..ns)
            .map(|s| grid[b][full][s].throughput_ipc / grid[b][best][s].throughput_ipc - 1.0)
            .collect();
        for (s, g) in gains.iter().enumerate() {
            gains_by_seed[s].push(*g);
        }
        // The other reading of the paper's "outperforms state of the art schedulers by around
        // 11.4 %": over the four baselines' mean, not the best of them.
        for (s, gm) in gains_over_mean_by_seed.iter_mut().enumerate() {
            let base_mean = base_idx
                .iter()
                .map(|&t| grid[b][t][s].throughput_ipc)
                .sum::<f64>()
                / base_idx.len() as f64;
            gm.push(grid[b][full][s].throughput_ipc / base_mean - 1.0);
        }
        let g = r.put(
            &format!("schedtask@{}", bench.name),
            "gain_over_best_baseline",
            &gains,
        );
        row.push(labels[best].clone());
        row.push(g.map_or("n/a".into(), |g| show_pct_interval(&g)));
        row.push(g.map_or("n/a".into(), |g| g.verdict().label().to_string()));
        tp.row(row);
    }
    let avg: Vec<f64> = gains_by_seed.iter().map(|g| mean(g)).collect();
    let avg_s = r.put("schedtask@average", "gain_over_best_baseline", &avg);
    let avg_mean: Vec<f64> = gains_over_mean_by_seed.iter().map(|g| mean(g)).collect();
    let avg_mean_s = r.put("schedtask@average", "gain_over_mean_baseline", &avg_mean);
    r.put_paper(
        "schedtask@average",
        "gain_over_best_baseline",
        PAPER_AVERAGE_GAIN,
    );
    let mut avg_row = vec!["average".to_string(), String::new()];
    avg_row.extend(shown.iter().map(|_| String::new()));
    avg_row.push("per benchmark".into());
    avg_row.push(avg_s.map_or("n/a".into(), |g| show_pct_interval(&g)));
    avg_row.push(format!(
        "{}; paper {}",
        avg_s.map_or("n/a", |g| g.verdict().label()),
        pct(PAPER_AVERAGE_GAIN)
    ));
    tp.row(avg_row);
    r.tables.push(tp);

    // Hit rates and idleness per technique.
    let metric_table = |title: &str, f: &dyn Fn(&Outcome) -> f64, digits: usize| {
        let mut cols = vec!["benchmark"];
        cols.extend(["linux"]);
        cols.extend(shown);
        let mut t = Table::new(title, &cols);
        for (b, bench) in workload::BENCHMARKS.iter().enumerate() {
            let mut row = vec![bench.name.to_string()];
            for name in std::iter::once("linux").chain(shown) {
                row.push(idx(name).map_or("n/a".into(), |ti| {
                    format!("{:.*}", digits, mean(&per_seed(b, ti, f)))
                }));
            }
            t.row(row);
        }
        t
    };
    r.tables.push(metric_table(
        "L1 i-cache hit rate (one fetch per 4 instructions; mean over seeds)",
        &|o| o.icache_hit_rate,
        4,
    ));
    r.tables.push(metric_table(
        "L1 d-cache hit rate (0.35 accesses per instruction; mean over seeds)",
        &|o| o.dcache_hit_rate,
        4,
    ));
    r.tables.push(metric_table(
        "Core idleness: share of core-cycles with nothing to run (mean over seeds)",
        &|o| o.idle_fraction,
        3,
    ));
    r.tables.push(metric_table(
        "Lines fetched from another core's cache per 1000 instructions (bounces; mean over seeds)",
        &|o| o.bounces_per_kinstr,
        2,
    ));

    // Ablations.
    let ablations = [
        "schedtask-no-stealing",
        "schedtask-random-alloc",
        "schedtask-no-overlap",
    ];
    let mut cols = vec!["benchmark"];
    cols.extend(ablations);
    let mut ab = Table::new(
        "Ablations: throughput relative to the full SchedTask (95 % CI over seeds)",
        &cols,
    );
    let mut ab_avg: Vec<Vec<f64>> = vec![vec![0.0; ns]; ablations.len()];
    for (b, bench) in workload::BENCHMARKS.iter().enumerate() {
        let mut row = vec![bench.name.to_string()];
        for (k, name) in ablations.iter().enumerate() {
            let Some(t) = idx(name) else {
                row.push("n/a".into());
                continue;
            };
            let rel: Vec<f64> = (0..ns)
                .map(|s| grid[b][t][s].throughput_ipc / grid[b][full][s].throughput_ipc - 1.0)
                .collect();
            for (s, v) in rel.iter().enumerate() {
                ab_avg[k][s] += v / workload::BENCHMARKS.len() as f64;
            }
            row.push(Summary::of(&rel).map_or("n/a".into(), |s| show_pct_interval(&s)));
        }
        ab.row(row);
    }
    let mut row = vec!["average".to_string()];
    let mut ab_summ = Vec::new();
    for (k, name) in ablations.iter().enumerate() {
        let s = r.put(
            &format!("{name}@average"),
            "change_vs_schedtask",
            &ab_avg[k],
        );
        row.push(s.map_or("n/a".into(), |s| show_pct_interval(&s)));
        ab_summ.push((name, s));
    }
    ab.row(row);
    r.tables.push(ab);

    // The OS shares: inputs for three benchmarks (the paper's), estimates for the rest.
    let mut os = Table::new(
        "Share of instructions executed in the OS: profile input vs measured (Linux)",
        &["benchmark", "profile", "source", "measured"],
    );
    for (b, bench) in workload::BENCHMARKS.iter().enumerate() {
        let m = mean(&per_seed(b, linux, &|o| o.os_instruction_share));
        let basis = if bench.os_share_source == workload::Source::Seed {
            r.put_paper(
                &format!("linux@{}", bench.name),
                "os_instruction_share",
                bench.os_share,
            );
            crate::paper::Basis::Calibrated
        } else {
            crate::paper::Basis::Predicted
        };
        r.put(
            &format!("linux@{}", bench.name),
            "os_instruction_share",
            &per_seed(b, linux, &|o| o.os_instruction_share),
        );
        os.row_with(
            basis,
            vec![
                bench.name.to_string(),
                format!("{:.2}", bench.os_share),
                match bench.os_share_source {
                    workload::Source::Seed => "seed (input)".into(),
                    workload::Source::Est => "estimated".into(),
                },
                format!("{m:.3}"),
            ],
        );
    }
    r.tables.push(os);

    // Findings.
    if let Some(g) = avg_s {
        let ci = match g.interval95() {
            Some((lo, hi)) => format!("95 % CI [{:+.1}, {:+.1}]", 100.0 * lo, 100.0 * hi),
            None => "no CI".to_string(),
        };
        r.findings.push(format!(
            "average gain of SchedTask over the best of SelectiveOffload, FlexSC, RegionSched \
             and SLICC per benchmark: {:+.1} % ({ci} over {} seed(s); {}); the paper reports \
             {} on its machine. Predicted, not fitted: no parameter was tuned towards the \
             paper's figure",
            100.0 * g.mean,
            ns,
            g.verdict().label(),
            pct(PAPER_AVERAGE_GAIN)
        ));
    }
    if let Some(g) = avg_mean_s {
        // The seed says only "outperforms state of the art schedulers by around 11.4 %" (the
        // paper's abstract: "mean: 11.4 percentage points"): which baseline it divides by is
        // a reading. The best of the four is the strict one above; this is the other (report
        // audit, session 30).
        r.findings.push(format!(
            "the same over the mean of the four baselines per benchmark (the other reading of \
             the paper's \"outperforms state of the art schedulers by around 11.4 %\", which \
             does not say against which): {} over {} seed(s) ({})",
            show_pct_interval(&g),
            ns,
            g.verdict().label()
        ));
    }
    let count =
        |f: &dyn Fn(usize) -> bool| (0..workload::BENCHMARKS.len()).filter(|&b| f(b)).count();
    let better_than_all = |b: usize, f: &dyn Fn(&Outcome) -> f64, higher: bool| {
        let st = mean(&per_seed(b, full, f));
        std::iter::once(linux)
            .chain(base_idx.iter().copied())
            .all(|t| {
                let v = mean(&per_seed(b, t, f));
                if higher {
                    st >= v
                } else {
                    st <= v
                }
            })
    };
    let nb = workload::BENCHMARKS.len();
    r.findings.push(format!(
        "the paper's reasons, checked: SchedTask has the highest i-cache hit rate of Linux and \
         the four baselines on {} of {nb} benchmarks, the highest d-cache hit rate on {} of \
         {nb}, and less idleness than every partitioning baseline (SelectiveOffload, FlexSC, \
         RegionSched) on {} of {nb}",
        count(&|b| better_than_all(b, &|o| o.icache_hit_rate, true)),
        count(&|b| better_than_all(b, &|o| o.dcache_hit_rate, true)),
        count(&|b| {
            let st = mean(&per_seed(b, full, &|o| o.idle_fraction));
            ["selective-offload", "flexsc", "regionsched"]
                .iter()
                .filter_map(|n| idx(n))
                .all(|t| st <= mean(&per_seed(b, t, &|o| o.idle_fraction)))
        }),
    ));
    let d_below_linux = count(&|b| {
        mean(&per_seed(b, full, &|o| o.dcache_hit_rate))
            < mean(&per_seed(b, linux, &|o| o.dcache_hit_rate))
    });
    r.findings.push(format!(
        "d-cache: SchedTask's hit rate is below Linux's on {d_below_linux} of {nb} benchmarks \
         (the paper reports it higher). In the model a SuperFunction moved off its thread's \
         core takes the thread's user buffer with it: copy_to_user/copy_from_user lines \
         written on one core come back as bounces on the other, which offsets the shared-data \
         locality of running each type on fewer cores; bounces per 1000 instructions are in \
         the table above"
    ));
    for (name, s) in ab_summ {
        if let Some(s) = s {
            let v = s.verdict();
            r.findings.push(format!(
                "ablation {name}: {} throughput vs the full scheduler on average ({})",
                show_pct_interval(&s),
                match v {
                    Verdict::Loss => "the component helps",
                    Verdict::Gain => "the component costs throughput in this model",
                    Verdict::NoMeasurableGain => "no measurable effect",
                    Verdict::OneSeed => "effect undecided: one seed",
                }
            ));
        }
    }
    r.findings.push(
        "what the model cannot express: no pipeline (a base CPI plus miss stalls), no L3 \
         contention or capacity (an L2 miss costs a fixed latency), no TLBs or branch \
         predictors, no prefetcher beyond a fixed exposed share of sequential misses, no \
         hardware cost of migrating a SuperFunction (the paper's hardware support is assumed \
         free), no request-level latency, and the baselines are characterizations from one \
         line each in the seed, not the published systems"
            .into(),
    );
    // Figure: throughput relative to Linux.
    let fig_names = [
        "selective-offload",
        "flexsc",
        "regionsched",
        "slicc",
        "schedtask",
    ];
    r.figures.push(BarFigure {
        file: "schedtask-throughput.svg".into(),
        title: "Instruction throughput relative to Linux, per benchmark".into(),
        y_label: "throughput / Linux".into(),
        categories: workload::BENCHMARKS
            .iter()
            .map(|b| b.name.to_string())
            .collect(),
        series: fig_names
            .iter()
            .filter_map(|n| idx(n).map(|t| (n, t)))
            .map(|(n, t)| {
                let sums: Vec<Option<Summary>> = (0..workload::BENCHMARKS.len())
                    .map(|b| Summary::of(&ratio(b, t)))
                    .collect();
                BarSeries {
                    name: n.to_string(),
                    values: sums.iter().map(|s| s.map(|s| s.mean)).collect(),
                    errors: sums
                        .iter()
                        .map(|s| {
                            // One seed: no interval, no error bar.
                            s.and_then(|s| s.half_width95())
                        })
                        .collect(),
                }
            })
            .collect(),
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    #[test]
    fn a_small_sweep_covers_every_benchmark_and_is_deterministic() {
        let o = Options {
            cores: 4,
            epoch_ms: 0.2,
            ..Options::default()
        };
        let t = [Technique::Linux, Technique::SCHEDTASK];
        let a = sweep(&o, &[1], &t, &NoProgress).unwrap();
        let b = sweep(&o, &[1], &t, &NoProgress).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), workload::BENCHMARKS.len());
        for bench in &a {
            for tech in bench {
                assert_eq!(tech.len(), 1);
                assert!(tech[0].instructions > 0);
            }
        }
    }
}
