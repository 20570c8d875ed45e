//! `counterpoint calibrate`: MASA's load calibration. Each probe runs alone on one CPU, then every
//! pair co-runs on two CPUs (SMT siblings where the machine has them); ΔT is how much longer a
//! fixed amount of the probe's work takes next to the other probe. ΔL needs a hardware PMU and
//! is reported as unavailable where there is none. `--masa FILE` measures MASA's own table
//! (ΔT and ΔL for the L2 and FP probes) for `agent --masa-calibration FILE`.
//!
//! A slowdown is only interference when the probes had their CPUs: on a loaded machine (or a
//! VM whose host steals time) other tasks take the CPUs and the probes slow down for that
//! reason alone. Each run therefore also measures the share of its CPU the probe got (its
//! thread CPU time over wall time) and the CPUs' steal time; runs that got less than
//! [`FULL_CPU_SHARE`] are flagged, and ΔT per CPU-second (which theft does not inflate) is
//! printed next to ΔT per wall second. The 1-minute load average is checked before starting.
//! Progress (one line per run) goes to stderr.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_core::{event, CpuSet};
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use counterpoint_host::probe;
use counterpoint_host::probe::{ProbeKind, ProbeSizes};
use counterpoint_policy::{Calibration, CalibrationEntry, LoadMetric};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// The shortest run `calibrate` accepts: a run must finish many of a probe's work units and
/// see scheduler ticks, or every rate reads 0 and the table NaN (`--seconds 1e-7` printed one
/// with exit 0).
const MIN_CALIBRATE_SECONDS: f64 = 0.1;

/// The longest run `calibrate` accepts: its 14 runs then take 14 hours. A week per run (the
/// bound `burn` keeps for one run) started a 98-day calibration in silence (CLI probe,
/// session 30).
const MAX_CALIBRATE_SECONDS: f64 = 3600.0;

/// `--seconds` of `calibrate`: [`super::parse_run_seconds`], from [`MIN_CALIBRATE_SECONDS`] to
/// [`MAX_CALIBRATE_SECONDS`].
fn parse_calibrate_seconds(s: &str) -> Result<f64, String> {
    let v = super::parse_run_seconds(s)?;
    if v < MIN_CALIBRATE_SECONDS {
        return Err(format!(
            "{v} s is too short to measure a rate: at least {MIN_CALIBRATE_SECONDS} s per run"
        ));
    }
    if v > MAX_CALIBRATE_SECONDS {
        return Err(format!(
            "{v} s per run is {:.0} h for the 14 runs: at most {MAX_CALIBRATE_SECONDS} s (an hour) \
             per run",
            v * 14.0 / 3600.0
        ));
    }
    Ok(v)
}

#[derive(Args)]
#[command(after_help = "\
Progress goes to stderr, one line per run (4 solo runs, then 10 pairs). Ctrl-C or SIGTERM
stop early: the runs that finished are printed (the one in progress is dropped) and the exit
status is 128 + the signal's number; `--masa` then writes nothing.
Each run also measures the share of its CPU the probe got: a slowdown while other work takes
the CPUs (a loaded machine, a VM's steal time) is CPU theft, not interference, and is flagged.")]
pub struct CalibrateArgs {
    /// Seconds per run (4 solo runs + 10 pairs), decimal, from 0.1 to 3600 (an hour).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0,
          value_parser = parse_calibrate_seconds)]
    seconds: f64,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
    /// Instead of the ΔT table, measure MASA's load calibration (the L2 and FP probes solo and
    /// coupled, with the package's cache-miss and FP-op rates: ΔL needs a hardware PMU) and
    /// write it to FILE for `agent --policy masa --masa-calibration FILE`.
    #[arg(long, value_name = "FILE")]
    masa: Option<std::path::PathBuf>,
    /// Where the PMUs are described: whether this machine has one (the ΔL note), and `--masa`'s
    /// events.
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: std::path::PathBuf,
}

static STOP: AtomicBool = AtomicBool::new(false);
/// The stop signal that came (0 while none has).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int) {
    // Async-signal-safe: atomics and signal(2). The running probes see STOP and end their run;
    // a second Ctrl-C ends the command at once, as by default.
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
    // SAFETY: signal(2) is async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
    }
}

/// Ctrl-C or SIGTERM end the calibration early: the runs that finished are still printed (the
/// one in progress is cut short and dropped), as `perf stat` prints what it counted.
fn catch_stop_signals() {
    // SAFETY: the handler only stores to atomics.
    unsafe {
        counterpoint_host::signals::handle_unless_ignored(&[libc::SIGINT, libc::SIGTERM], on_stop)
    };
}

/// The signal that stopped the calibration, if one did.
fn stopped_by() -> Option<libc::c_int> {
    STOP.load(Ordering::SeqCst)
        .then(|| STOP_SIGNAL.load(Ordering::SeqCst))
}

/// A probe that got less of its CPU than this (thread CPU time / wall time) was preempted by
/// other work: its slowdown is CPU theft, not interference.
pub const FULL_CPU_SHARE: f64 = 0.9;

/// One pinned probe run: its work, and how much of its CPU it got.
#[derive(Clone, Copy, Debug)]
struct Measured {
    run: probe::ProbeRun,
    /// Thread CPU seconds over wall seconds, in [0, 1] (a little over 1 from rounding).
    cpu_share: f64,
    /// Fraction of the CPU's time the hypervisor stole during the run (VMs; 0 elsewhere).
    steal: f64,
}

impl Measured {
    /// Work per second of CPU the probe actually had.
    fn units_per_cpu_s(&self) -> f64 {
        self.run.units_per_s() / self.cpu_share.max(1e-9)
    }
    fn full(&self) -> bool {
        self.cpu_share >= FULL_CPU_SHARE && self.steal < 1.0 - FULL_CPU_SHARE
    }
}

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Per CPU (steal, total) jiffies from `/proc/stat`.
fn steal_jiffies(text: &str, cpu: u32) -> Option<(u64, u64)> {
    let name = format!("cpu{cpu}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    Some((v.get(7).copied().unwrap_or(0), v.iter().take(8).sum()))
}

fn read_steal(cpu: u32) -> Option<(u64, u64)> {
    steal_jiffies(&std::fs::read_to_string("/proc/stat").ok()?, cpu)
}

/// How far below zero a probe's ΔT per CPU-second may fall beside every co-runner before its
/// solo run is called disturbed: a co-runner cannot make a probe faster, and run-to-run noise
/// on a quiet machine stays within a few per cent.
const DISTURBED_BASELINE: f64 = -0.05;

/// Warnings for probes that ran faster beside every co-runner than alone (ΔT per CPU-second
/// below [`DISTURBED_BASELINE`] in each pair they took part in): their solo run, the baseline
/// of all their figures, was slowed by something else (CLI probe, session 30: every `fp` row
/// read −26 % with no warning).
fn disturbed_baselines(
    rows: impl Iterator<Item = (ProbeKind, ProbeKind, (f64, f64))>,
) -> Vec<String> {
    let rows: Vec<_> = rows.collect();
    let mut out = Vec::new();
    for k in ProbeKind::ALL {
        let mine: Vec<f64> = rows
            .iter()
            .flat_map(|&(a, b, (da, db))| {
                [(a == k).then_some(da), (b == k).then_some(db)]
                    .into_iter()
                    .flatten()
            })
            .collect();
        // A NaN (a run that measured nothing) is not a disturbed baseline either.
        if mine.is_empty() || !mine.iter().all(|&d| d < DISTURBED_BASELINE) {
            continue;
        }
        let lo = mine.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = mine.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.push(format!(
            "{} ran faster beside every co-runner than alone (ΔT/cpu {:.1} % to {:.1} %): a \
             co-runner cannot speed a probe up, so its solo run was slowed by something else \
             (other work, frequency changes); its ΔT figures are not interference: rerun on a \
             quiet machine",
            k.name(),
            lo * 100.0,
            hi * 100.0
        ));
    }
    out
}

/// The two CPUs to calibrate on, among those this process may run on (its affinity, as
/// `taskset` left it): a refusal naming both sets when fewer than two are usable.
fn two_cpus(topo: &counterpoint_core::topology::Topology) -> Result<(u32, u32, bool)> {
    let allowed = counterpoint_host::affinity::get(0)
        .context("reading this process's CPU affinity (the CPUs it may calibrate on)")?;
    probe::calibration_cpus(topo, &allowed).with_context(|| {
        format!(
            "calibration co-runs two probes and needs two online CPUs this process may run on \
             (online: {}; allowed by its affinity: {})",
            topo.online_cpus().to_list(),
            allowed.to_list()
        )
    })
}

/// Run `kind` pinned to `cpu` on a thread of its own, measuring its CPU share and steal.
fn pinned(
    cpu: u32,
    online: &CpuSet,
    kind: ProbeKind,
    sizes: ProbeSizes,
    d: Duration,
) -> Result<Measured> {
    counterpoint_host::affinity::set(0, &CpuSet::single(cpu), online)
        .with_context(|| format!("the {} probe could not be pinned to CPU {cpu}", kind.name()))?;
    let steal0 = read_steal(cpu);
    let (c0, t0) = (thread_cpu_s(), std::time::Instant::now());
    let run = probe::run(kind, sizes, d, &STOP)?;
    let (c1, wall) = (thread_cpu_s(), t0.elapsed().as_secs_f64());
    let steal = match (steal0, read_steal(cpu)) {
        (Some(a), Some(b)) if b.1 > a.1 => (b.0 - a.0) as f64 / (b.1 - a.1) as f64,
        _ => 0.0,
    };
    let share = if wall > 0.0 && c1.is_finite() && c0.is_finite() {
        ((c1 - c0) / wall).clamp(0.0, 1.0)
    } else {
        1.0
    };
    Ok(Measured {
        run,
        cpu_share: share,
        steal,
    })
}

/// `pinned` on a thread of its own: its result, or the thread's panic as an error.
fn joined(h: std::thread::ScopedJoinHandle<'_, Result<Measured>>) -> Result<Measured> {
    h.join()
        .map_err(|_| anyhow::anyhow!("a probe thread panicked"))?
}

/// The 1-minute load average, if readable.
fn loadavg_1min() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// ΔT: how much longer a fixed amount of work takes (solo rate / coupled rate - 1).
fn delta_t(solo: f64, co: f64) -> f64 {
    if co > 0.0 {
        solo / co - 1.0
    } else {
        f64::NAN
    }
}

/// The warning for a pair whose probes did not have their CPUs, if any.
fn theft_note(
    a: (&str, &Measured),
    b: (&str, &Measured),
    smt: bool,
    dt: (f64, f64),
) -> Option<String> {
    if a.1.full() && b.1.full() {
        return None;
    }
    let place = if smt {
        "SMT siblings"
    } else {
        "separate cores"
    };
    Some(format!(
        "{}+{} on {place}: ΔT {:.0} % / {:.0} % but the probes got only {:.0} % / {:.0} % of their CPUs \
         (steal {:.0} % / {:.0} %): other work took the CPUs; that is CPU theft, not interference",
        a.0,
        b.0,
        dt.0 * 100.0,
        dt.1 * 100.0,
        a.1.cpu_share * 100.0,
        b.1.cpu_share * 100.0,
        a.1.steal * 100.0,
        b.1.steal * 100.0,
    ))
}

pub fn run(args: CalibrateArgs) -> Result<ExitCode> {
    super::check_sysfs_root(&args.sysfs_root)?;
    let topo = counterpoint_host::sysfs::host_topology()?;
    catch_stop_signals();
    if let Some(path) = &args.masa {
        let table = masa_table(&topo, &args, Duration::from_secs_f64(args.seconds));
        if let Some(sig) = stopped_by() {
            // A table from cut-short runs would rank the metrics on noise: nothing is written.
            eprintln!(
                "calibrate: stopped by {} before MASA's calibration was complete: nothing written to {}",
                signal_name(sig),
                path.display()
            );
            return Ok(ExitCode::from(128 + sig as u8));
        }
        let table = table?;
        let text = serde_json::to_string_pretty(&table)? + "\n";
        counterpoint_experiment::report::write_atomic(path, text.as_bytes())
            .with_context(|| format!("--masa {}", path.display()))?;
        outln!("wrote MASA's load calibration to {}", path.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    let (c0, c1, smt) = two_cpus(&topo)?;
    let d = Duration::from_secs_f64(args.seconds);
    let online = topo.online_cpus();
    let sizes = ProbeSizes::for_topology(&topo);
    let mut warnings: Vec<String> = Vec::new();
    // A quiet baseline has (almost) nothing runnable: more than half a CPU's worth of other
    // work before we start will be in the way of the probes.
    if let Some(l) = loadavg_1min() {
        if l > 0.5 {
            warnings.push(format!(
                "the machine is loaded before calibrating (1-minute load average {l:.2} on {} CPUs): \
                 other work will take CPU time from the probes; ΔT per CPU-second discounts it",
                online.len()
            ));
        }
    }
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let n_pairs = ProbeKind::ALL.len() * (ProbeKind::ALL.len() + 1) / 2;
    let total = ProbeKind::ALL.len() + n_pairs;
    let mut step = 0;
    let mut progress = |what: &str| {
        step += 1;
        eprintln!(
            "[{step:>2}/{total}] {what} ({:.1} s; about {:.0} s left)",
            args.seconds,
            (total - step + 1) as f64 * args.seconds
        );
    };
    let mut solo: Vec<(ProbeKind, Measured)> = Vec::new();
    let mut pairs = Vec::new();
    let mut rows = Vec::new();
    'runs: for k in ProbeKind::ALL {
        progress(&format!("{} alone on CPU {c0}", k.name()));
        let m = std::thread::scope(|s| joined(s.spawn(|| pinned(c0, &online, k, sizes, d))))?;
        if stopped_by().is_some() {
            break 'runs;
        }
        if !m.full() {
            warnings.push(format!(
                "{} alone on CPU {c0} got only {:.0} % of its CPU (steal {:.0} %): the solo baseline is not quiet",
                k.name(),
                m.cpu_share * 100.0,
                m.steal * 100.0
            ));
        }
        solo.push((k, m));
    }
    let solo_of = |k: ProbeKind| solo.iter().find(|(x, _)| *x == k).map(|x| x.1);
    'pairs: for (i, &a) in ProbeKind::ALL.iter().enumerate() {
        if stopped_by().is_some() {
            break;
        }
        for &b in &ProbeKind::ALL[i..] {
            progress(&format!(
                "{} on CPU {c0} with {} on CPU {c1}",
                a.name(),
                b.name()
            ));
            let (ma, mb) = std::thread::scope(|s| {
                let ha = s.spawn(|| pinned(c0, &online, a, sizes, d));
                let hb = s.spawn(|| pinned(c1, &online, b, sizes, d));
                (joined(ha), joined(hb))
            });
            if stopped_by().is_some() {
                break 'pairs;
            }
            let (ma, mb) = (ma?, mb?);
            let (Some(sa), Some(sb)) = (solo_of(a), solo_of(b)) else {
                bail!("no solo run of {} or {}", a.name(), b.name());
            };
            let dt = (
                delta_t(sa.run.units_per_s(), ma.run.units_per_s()),
                delta_t(sb.run.units_per_s(), mb.run.units_per_s()),
            );
            let dt_cpu = (
                delta_t(sa.units_per_cpu_s(), ma.units_per_cpu_s()),
                delta_t(sb.units_per_cpu_s(), mb.units_per_cpu_s()),
            );
            let note = theft_note((a.name(), &ma), (b.name(), &mb), smt, dt);
            if let Some(n) = &note {
                warnings.push(n.clone());
            }
            pairs.push(probe::PairResult {
                a,
                b,
                delta_t_a: dt.0,
                delta_t_b: dt.1,
            });
            rows.push((a, b, dt, dt_cpu, ma, mb, note.is_some()));
        }
    }
    warnings.extend(disturbed_baselines(
        rows.iter().map(|(a, b, _, dt_cpu, ..)| (*a, *b, *dt_cpu)),
    ));
    let t = probe::CalibrationTable {
        cpus: (c0, c1),
        smt_siblings: smt,
        seconds_per_run: d.as_secs_f64(),
        sizes,
        solo_units_per_s: solo
            .iter()
            .map(|(k, m)| (*k, m.run.units_per_s()))
            .collect(),
        pairs,
        // This table times the probes only; ΔL (their event rates) is `--masa`'s measurement.
        // It said "no PMU" on every machine (CLI probe, session 30).
        delta_l: Some(
            if counterpoint_counters::count::has_hardware_pmu(&PmuTree::new(&args.sysfs_root)) {
                "ΔL (the probes' event rates) is not in this table: `calibrate --masa FILE` \
                 measures it with the PMU"
            } else {
                "no PMU: ΔL unavailable"
            }
            .to_string(),
        ),
    };
    let stopped = stopped_by();
    if let Some(sig) = stopped {
        let note = format!(
            "stopped by {} after {} of {total} runs: the run in progress was dropped, the table is incomplete",
            signal_name(sig),
            solo.len() + rows.len()
        );
        eprintln!("calibrate: {note}");
        warnings.push(note);
    }
    // A stopped calibration exits as the signal would have ended it, after printing.
    let status = match stopped {
        Some(sig) => ExitCode::from(128 + sig as u8),
        None => ExitCode::SUCCESS,
    };
    if args.json {
        let mut v = serde_json::to_value(&t)?;
        v["runs"] = serde_json::json!(rows
            .iter()
            .map(|(a, b, dt, dt_cpu, ma, mb, theft)| serde_json::json!({
                "a": a.name(), "b": b.name(),
                "delta_t_a": dt.0, "delta_t_b": dt.1,
                "delta_t_per_cpu_s_a": dt_cpu.0, "delta_t_per_cpu_s_b": dt_cpu.1,
                "cpu_share_a": ma.cpu_share, "cpu_share_b": mb.cpu_share,
                "steal_a": ma.steal, "steal_b": mb.steal,
                "cpu_theft": theft,
            }))
            .collect::<Vec<_>>());
        v["warnings"] = serde_json::json!(warnings);
        v["complete"] = serde_json::json!(stopped.is_none());
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(status);
    }
    outln!(
        "load calibration on CPUs {} and {} ({}), {:.1} s per run; l2 working set {} KiB, mem buffer {} MiB",
        t.cpus.0,
        t.cpus.1,
        if t.smt_siblings { "SMT siblings" } else { "separate cores, no SMT" },
        t.seconds_per_run,
        t.sizes.l2_working_set_bytes >> 10,
        t.sizes.mem_buffer_bytes >> 20
    )?;
    outln!(
        "{:<6} {:<6} {:>10} {:>10} {:>12} {:>12} {:>7} {:>7}",
        "a",
        "b",
        "ΔT a %",
        "ΔT b %",
        "ΔT/cpu a %",
        "ΔT/cpu b %",
        "CPU a%",
        "CPU b%"
    )?;
    for (a, b, dt, dt_cpu, ma, mb, theft) in &rows {
        outln!(
            "{:<6} {:<6} {:>10.1} {:>10.1} {:>12.1} {:>12.1} {:>7.0} {:>7.0}{}",
            a.name(),
            b.name(),
            dt.0 * 100.0,
            dt.1 * 100.0,
            dt_cpu.0 * 100.0,
            dt_cpu.1 * 100.0,
            ma.cpu_share * 100.0,
            mb.cpu_share * 100.0,
            if *theft { "  * CPU theft" } else { "" }
        )?;
    }
    outln!(
        "ΔT: slowdown per wall second; ΔT/cpu: per second of CPU the probe had (theft discounted); \
         CPU%: share of its CPU the probe got"
    )?;
    if let Some(note) = &t.delta_l {
        outln!("{note}")?;
    }
    if !warnings.is_empty() {
        outln!()?;
        for w in &warnings {
            outln!("warning: {w}")?;
        }
    }
    Ok(status)
}

fn signal_name(sig: libc::c_int) -> String {
    counterpoint_host::signals::name(sig)
}

/// MASA's method on this host: for each load metric its probe runs alone on one CPU, then two
/// copies on two logical CPUs of one core (SMT siblings where there are), while the CPUs'
/// events are counted; ΔT from the probes' work rates, ΔL from the event rates.
/// Why an event reads nothing, in words (not the enum's Debug form).
fn status_text(s: &counterpoint_counters::count::Status) -> &str {
    match s {
        counterpoint_counters::count::Status::NotSupported(why) => why,
        counterpoint_counters::count::Status::Counting => "counted, but no value read",
    }
}

fn masa_table(
    topo: &counterpoint_core::Topology,
    args: &CalibrateArgs,
    d: Duration,
) -> Result<Calibration> {
    let tree = PmuTree::new(&args.sysfs_root);
    let names = [event::CACHE_MISSES, event::FP_OPS];
    let list = parse_event_list(&names.join(","), &tree).with_context(|| {
        "MASA's calibration needs ΔL, the cache-miss and FP-op rates, from the PMU".to_string()
    })?;
    let (c0, c1, _) = two_cpus(topo)?;
    let online = topo.online_cpus();
    let sizes = ProbeSizes::for_topology(topo);
    // (work units/s per copy, events/s of each counted event over the CPUs) of one run.
    let measure = |cpus: &[u32], kind: ProbeKind| -> Result<(f64, Vec<f64>)> {
        let target = Target::Cpus(cpus.iter().map(|&c| c as usize).collect());
        let mut set = CounterSet::open(&list, &target, &tree)?;
        // An event that did not open is refused before any probe runs.
        if let Some(r) = set.read_all()?.into_iter().find(|r| r.value.is_none()) {
            bail!(
                "MASA's calibration needs ΔL from the PMU: {} cannot be counted here ({})",
                r.spec.name,
                status_text(&r.status)
            );
        }
        let t0 = std::time::Instant::now();
        set.enable()?;
        let runs: Vec<Option<f64>> = std::thread::scope(|s| {
            let handles: Vec<_> = cpus
                .iter()
                .map(|&c| {
                    let online = &online;
                    s.spawn(move || {
                        // Pin this thread (tid 0 = self) so the probe runs where it is counted.
                        counterpoint_host::affinity::set(0, &CpuSet::single(c), online).ok()?;
                        counterpoint_host::probe::run(kind, sizes, d, &STOP)
                            .ok()
                            .map(|r| r.units_per_s())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        set.disable()?;
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        let Some(rates) = runs.into_iter().collect::<Option<Vec<f64>>>() else {
            bail!("a {} probe could not be pinned or failed", kind.name());
        };
        let mut events = Vec::new();
        for r in set.read_all()? {
            match r.display_value() {
                Some(v) => events.push(v / secs),
                None => bail!(
                    "MASA's calibration needs ΔL from the PMU: {} cannot be counted here ({})",
                    r.spec.name,
                    status_text(&r.status)
                ),
            }
        }
        Ok((rates.iter().sum::<f64>() / rates.len() as f64, events))
    };
    let mut entries = Vec::new();
    for (i, (metric, kind)) in [
        (LoadMetric::L2Misses, ProbeKind::L2),
        (LoadMetric::FpUops, ProbeKind::Fp),
    ]
    .into_iter()
    .enumerate()
    {
        let (solo_rate, solo_ev) = measure(&[c0], kind)?;
        let (coupled_rate, coupled_ev) = measure(&[c0, c1], kind)?;
        entries.push(CalibrationEntry::from_rates(
            metric,
            kind.name(),
            solo_rate,
            coupled_rate,
            solo_ev[i],
            coupled_ev[i],
        ));
    }
    let table = Calibration { entries };
    // Refuse a table MASA could not rank (e.g. the coupled run did not raise the load).
    table
        .rank()
        .context("the measured calibration cannot be used")?;
    Ok(table)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_probe_faster_beside_every_co_runner_has_a_disturbed_baseline() {
        use super::{disturbed_baselines, ProbeKind::*};
        let rows = [
            (Int, Int, (0.01, 0.02)),
            (Int, Fp, (0.0, -0.26)),
            (Fp, Fp, (-0.27, -0.266)),
            (Fp, Mem, (-0.25, 0.3)),
        ];
        let w = disturbed_baselines(rows.into_iter());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("fp ran faster") && w[0].contains("-27.0 % to -25.0 %"),
            "{w:?}"
        );
        // One pair at or above the threshold: not called disturbed.
        let rows = [(Fp, Fp, (-0.27, -0.26)), (Fp, Int, (-0.04, 0.0))];
        assert!(disturbed_baselines(rows.into_iter()).is_empty());
    }

    use super::*;

    fn m(units: u64, share: f64, steal: f64) -> Measured {
        Measured {
            run: probe::ProbeRun {
                units,
                elapsed_s: 1.0,
            },
            cpu_share: share,
            steal,
        }
    }

    #[test]
    fn slowdown_from_lost_cpu_time_is_theft_not_interference() {
        // Solo: 100 units/s with the whole CPU. Co-run: 50 units/s but only half the CPU.
        let solo = m(100, 1.0, 0.0);
        let co = m(50, 0.5, 0.0);
        assert!((delta_t(solo.run.units_per_s(), co.run.units_per_s()) - 1.0).abs() < 1e-12);
        // Per CPU-second there is no slowdown at all.
        assert!(delta_t(solo.units_per_cpu_s(), co.units_per_cpu_s()).abs() < 1e-12);
        let note = theft_note(("int", &co), ("int", &co), false, (1.0, 1.0)).expect("flagged");
        assert!(note.contains("CPU theft, not interference"), "{note}");
        assert!(note.contains("separate cores"), "{note}");
        // Probes that had their CPUs: a slowdown is interference, no note.
        assert!(theft_note(("l2", &solo), ("mem", &solo), true, (0.3, 0.2)).is_none());
        // Steal time (a VM's host) counts as theft too.
        assert!(!m(100, 1.0, 0.3).full());
    }

    #[test]
    fn steal_is_read_per_cpu() {
        let text =
            "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 10 70 0 0 0 10 0 0\ncpu1 1 1 1 1 1 1 1 1 0 0\n";
        assert_eq!(steal_jiffies(text, 0), Some((10, 100)));
        assert_eq!(steal_jiffies(text, 1), Some((1, 8)));
        assert_eq!(steal_jiffies(text, 2), None);
    }
}
