//! `counterpoint top`: what the agent sees, per task: CPU %, context switches and migrations per
//! second always; IPC, LLC MPKI and bandwidth only where a hardware PMU counts them (never
//! here: shown as "n/a (no PMU)", not invented); the current placement per CPU.
//!
//! On a terminal it is a live ratatui view (sortable with keys, `q`/Esc quits, the terminal is
//! restored on every exit path including a panic). When stdout is not a terminal, or with
//! `--once` / `--json`, it prints plain text tables or JSON documents, one per interval.
//!
//! The module is split by concern: [`model`] (rows, snapshots, sorting), [`render`] (text, JSON,
//! the live frame) and [`live`] (terminal handling and keys).

mod live;
mod model;
mod render;

use anyhow::Result;
use clap::Args;
use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_host::{Host, TargetSpec};
use live::run_live;
use model::{snapshot, sort_rows, SortKey};
use render::{json_doc, print_text, NO_HEATMAPS};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct TopArgs {
    /// Which processes (same syntax as `agent --targets`).
    #[arg(long, default_value = "all")]
    targets: String,
    /// Refresh interval: rates are counted over it [default: 1s; 200ms with --once, so a
    /// one-shot look returns quickly; give --interval for a longer, steadier window].
    #[arg(long)]
    interval: Option<String>,
    /// Initial sort column: pid, comm, cpu, cs, migrations, ipc, mpki, bw (keys change it live).
    #[arg(long, default_value = "cpu")]
    sort: String,
    /// Reverse the initial sort order.
    #[arg(long)]
    reverse: bool,
    /// Print one interval and exit (no live view).
    #[arg(long)]
    once: bool,
    /// JSON output, one document per interval (no live view).
    #[arg(long)]
    json: bool,
    /// Stop after this many intervals (text/JSON output; 1 or more; `--once` is `--count 1`).
    #[arg(long, value_parser = parse_count, conflicts_with = "once")]
    count: Option<u64>,
    /// Rows to print in text/JSON output, 1 to 100000 (the live view shows all and scrolls).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    rows: u64,
    /// Count through the broker (`counterpoint daemon`) at SOCKET, or at the default socket
    /// without it; when none answers there, count directly. The default socket is tried
    /// even without this flag.
    // Absent: None; bare: Some(None), the default socket; with SOCKET: Some(Some(SOCKET)).
    #[arg(long, value_name = "SOCKET", num_args = 0..=1)]
    daemon: Option<Option<PathBuf>>,
    /// Never use a broker: open this process's own counters.
    #[arg(long, conflicts_with = "daemon")]
    direct: bool,
    /// Sample every watched thread's instruction pointer (software cpu-clock, no PMU needed)
    /// and show each process's and thread's dominant SuperFunction (SchedTask, seed 004): user
    /// code, kernel, or with --syscalls the system call in progress / irq. Costs one sampling
    /// event (and a 68 KiB buffer) per thread: narrow --targets on a busy machine.
    #[arg(long)]
    heatmaps: bool,
    /// With --heatmaps: one sample per this many µs of each thread's CPU time (10 µs to 10 s,
    /// as `heatmap --period-us`).
    #[arg(long, default_value_t = 1000, requires = "heatmaps",
          value_parser = clap::value_parser!(u64).range(super::HEATMAP_PERIOD_US_MIN..=super::HEATMAP_PERIOD_US_MAX))]
    heatmap_period_us: u64,
    /// With --heatmaps: attribute kernel samples to the system call in progress
    /// (raw_syscalls tracepoints; needs tracefs mounted; each call of a watched thread then
    /// writes two records).
    #[arg(long, requires = "heatmaps")]
    syscalls: bool,
}

/// The counting window when none is given: a live view refreshes each second, as htop and perf
/// top do; a one-shot look (`--once`) only needs a short window, and its cost is mostly opening
/// the per-thread counters, so 200 ms keeps it under a second even with thousands of threads.
fn default_interval(once: bool) -> &'static str {
    if once {
        "200ms"
    } else {
        "1s"
    }
}

/// `--count`: how many intervals, at least one (0 would still print one).
fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a number of intervals, 1 or more".into()),
    }
}

/// A pid list none of whose processes can be watched (none exists, or they are kernel threads,
/// which have no user threads to count) is refused with the agent's message naming why (`top`
/// would print an empty table under "no task matches"; CLI probe, session 25: `--targets
/// pid:2`, kthreadd); some left out are shown by what remains.
fn refuse_missing_pids(targets: &TargetSpec, text: &str) -> Result<()> {
    if let TargetSpec::Pids(pids) = targets {
        let proc_ = counterpoint_host::procfs::Proc::default();
        let (missing, kernel) = counterpoint_host::agent::unwatchable_pids(&proc_, pids);
        if let Some(err) = counterpoint_host::agent::no_watchable_pid(text, pids, &missing, &kernel)
        {
            return Err(err.into());
        }
    }
    Ok(())
}

/// Whether the host counts the hardware events IPC and MPKI are made of.
fn host_has_pmu(host: &Host) -> bool {
    let ev = host.counted_events();
    ev.contains(&event::INSTRUCTIONS) && ev.contains(&event::CYCLES)
}

pub fn run(args: TopArgs) -> Result<ExitCode> {
    let interval = args
        .interval
        .as_deref()
        .unwrap_or(default_interval(args.once));
    let interval_ns = super::parse_interval(interval)?;
    let key = SortKey::parse(&args.sort)?;
    let targets = TargetSpec::parse(&args.targets)?;
    // A thread id stands for its process, as in the agent (`TargetSpec::threads_as_processes`).
    let (targets, threads) =
        targets.threads_as_processes(&counterpoint_host::procfs::Proc::default());
    for (tid, pid) in threads {
        eprintln!("counterpoint top: pid:{tid} is a thread of process {pid}: showing the process");
    }
    refuse_missing_pids(&targets, &args.targets)?;
    let mut source = None;
    if !args.direct {
        let socket = args.daemon.as_ref().and_then(Option::as_deref);
        let (s, line) = super::daemon::host_counter_source(socket, false);
        if s.is_none() && args.daemon.is_some() {
            // Asked for a broker and none answered: say so (otherwise the default socket was
            // only tried, and the counters line says how counting goes).
            eprintln!("counterpoint top: {line}");
        }
        source = s;
    }
    let mut host = Host::with_source(targets, None, source)?;
    host.set_detailed(true);
    // The hardware columns are hidden without a PMU: sorting by one would order the rows by
    // a value nobody sees (every row n/a). Refused, naming what is there to sort by.
    if !key.shown(host_has_pmu(&host)) {
        anyhow::bail!(
            "--sort {}: {} needs a hardware PMU (cycles, instructions, LLC misses), which this \
             host lacks, so the column is not shown; sort by pid, comm, cpu, cs or migrations",
            args.sort,
            key.header()
        );
    }
    let code_note = args.heatmaps.then(|| {
        let st = host.enable_code_heatmaps(counterpoint_host::code::CodeSamplingConfig {
            period_ns: args.heatmap_period_us * 1000,
            syscalls: args.syscalls,
        });
        let failures = match host.code_sampling_failures() {
            (0, _) => String::new(),
            (n, why) => format!(
                "; {n} threads could not be sampled ({})",
                why.unwrap_or_default()
            ),
        };
        format!(
            "dominant type of the sampled instruction pointers (one per {} µs of CPU time); \
             system calls {}{}{failures}",
            st.period_ns / 1000,
            match &st.syscalls_missing {
                None => "attributed (raw_syscalls tracepoints)".to_string(),
                Some(why) => format!("not visible: {why}"),
            },
            st.kernel_refused
                .as_ref()
                .map(|k| format!("; {k}"))
                .unwrap_or_default()
        )
    });
    let live = !args.once && !args.json && args.count.is_none() && std::io::stdout().is_terminal();
    if live {
        return run_live(host, interval_ns, key, args.reverse, code_note);
    }
    let count = if args.once { Some(1) } else { args.count };
    let online = host.online().clone();
    let pmu = host_has_pmu(&host);
    let mut n = 0u64;
    let rows = usize::try_from(args.rows).unwrap_or(usize::MAX);
    loop {
        let obs = host.advance(interval_ns)?;
        n += 1;
        let mut s = snapshot(&obs, &online, pmu, host.counter_sources());
        s.code_note = code_note.clone();
        sort_rows(&mut s.rows, key, args.reverse);
        if n == 1 && s.rows.is_empty() {
            // As the agent's `no_targets` warning: an empty table alone reads as an idle host.
            eprintln!(
                "counterpoint: warning: no task matches --targets {}",
                args.targets
            );
        }
        if args.json {
            outln!("{}", json_doc(&s, rows, key, args.reverse))?;
        } else {
            print_text(&s, rows, key, args.reverse, n)?;
            // The SuperFunction column is off: said once, after the first table (the first
            // line of the output is the interval's header, as in every later interval).
            if n == 1 && code_note.is_none() {
                outln!("{NO_HEATMAPS}")?;
            }
        }
        if count.is_some_and(|c| n >= c) {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::model::Row;
    use super::render::{counted_cell, fmt_bw, hw_cell, NO_PMU};
    use super::*;
    use counterpoint_core::cpuset::CpuSet;

    #[test]
    fn once_defaults_to_a_short_window_and_live_to_a_second() {
        assert_eq!(parse_window(default_interval(true)), 200_000_000);
        assert_eq!(parse_window(default_interval(false)), 1_000_000_000);
    }

    fn parse_window(s: &str) -> u64 {
        match super::super::parse_interval(s) {
            Ok(ns) => ns,
            Err(e) => panic!("default interval {s:?} does not parse: {e}"),
        }
    }

    fn row(pid: u64, name: &str, cpu: f64, mig: Option<f64>) -> Row {
        Row {
            pid,
            name: name.into(),
            cpu_pct: cpu,
            cs_per_s: 0.0,
            counted: true,
            mig_per_s: mig,
            ipc: None,
            llc_mpki: None,
            bw_bytes_per_s: None,
            counted_fraction: 1.0,
            affinity: CpuSet::default(),
            last_cpu: None,
            superfn: None,
            thread_superfns: Vec::new(),
        }
    }

    fn pids(rows: &[Row]) -> Vec<u64> {
        rows.iter().map(|r| r.pid).collect()
    }

    #[test]
    fn sorting_cycles_and_reverses() {
        let mut rs = vec![
            row(3, "b", 10.0, None),
            row(1, "c", 90.0, Some(2.0)),
            row(2, "a", 50.0, Some(5.0)),
        ];
        sort_rows(&mut rs, SortKey::Cpu, false);
        assert_eq!(pids(&rs), [1, 2, 3]);
        sort_rows(&mut rs, SortKey::Cpu, true);
        assert_eq!(pids(&rs), [3, 2, 1]);
        sort_rows(&mut rs, SortKey::Pid, false);
        assert_eq!(pids(&rs), [1, 2, 3]);
        sort_rows(&mut rs, SortKey::Pid, true);
        assert_eq!(pids(&rs), [3, 2, 1]);
        sort_rows(&mut rs, SortKey::Comm, false);
        assert_eq!(pids(&rs), [2, 3, 1]);
        // Missing values go last in both directions.
        sort_rows(&mut rs, SortKey::Migrations, false);
        assert_eq!(pids(&rs), [2, 1, 3]);
        sort_rows(&mut rs, SortKey::Migrations, true);
        assert_eq!(pids(&rs), [1, 2, 3]);
        assert_eq!(SortKey::Bandwidth.step(1), SortKey::Pid);
        assert_eq!(SortKey::Pid.step(-1), SortKey::Bandwidth);
        assert!(SortKey::parse("colour").is_err());
    }

    fn view(pmu: bool, key: SortKey) -> live::View {
        live::View::new(key, false, pmu)
    }

    /// The live view's keys never select a column that is not on screen: without a PMU the
    /// hardware ones (IPC, LLC MPKI, MEM BW) are skipped by s/S and refused by their digit.
    #[test]
    fn sort_keys_skip_hidden_hardware_columns() {
        use live::{on_key, KeyOutcome};
        use ratatui::crossterm::event::{KeyCode, KeyModifiers};
        let none = KeyModifiers::NONE;
        let mut v = view(false, SortKey::Migrations);
        assert_eq!(
            on_key(&mut v, KeyCode::Char('s'), none),
            KeyOutcome::Changed
        );
        assert_eq!(
            v.key,
            SortKey::Pid,
            "next after MIG/s wraps past the hidden columns"
        );
        assert_eq!(
            on_key(&mut v, KeyCode::Char('S'), none),
            KeyOutcome::Changed
        );
        assert_eq!(v.key, SortKey::Migrations);
        // A full turn either way visits the five shown columns only.
        for code in [KeyCode::Tab, KeyCode::BackTab] {
            let mut seen = Vec::new();
            for _ in 0..SortKey::ALL.len() {
                on_key(&mut v, code, none);
                seen.push(v.key);
            }
            assert!(seen.iter().all(|k| !k.is_hardware()), "{seen:?}");
        }
        for digit in ['6', '7', '8'] {
            let mut v = view(false, SortKey::Cpu);
            on_key(&mut v, KeyCode::Char(digit), none);
            assert_eq!(v.key, SortKey::Cpu, "{digit} left the sort alone");
            let status = v.status.clone().expect("a refused key says why");
            assert!(
                status.contains("hardware PMU") && status.contains("1-5"),
                "{status}"
            );
            assert_eq!(render::footer_text(&v), status);
            // The next key clears the message.
            on_key(&mut v, KeyCode::Char('1'), none);
            assert_eq!((v.key, v.status.as_deref()), (SortKey::Pid, None));
        }
        // With a PMU every column is shown and reachable.
        let mut v = view(true, SortKey::Migrations);
        on_key(&mut v, KeyCode::Char('s'), none);
        assert_eq!(v.key, SortKey::Ipc);
        on_key(&mut v, KeyCode::Char('8'), none);
        assert_eq!((v.key, v.status.as_deref()), (SortKey::Bandwidth, None));
        assert_eq!(on_key(&mut v, KeyCode::Char('q'), none), KeyOutcome::Quit);
    }

    #[test]
    fn hardware_cells_never_invent_numbers() {
        assert_eq!(hw_cell(None, false, |x| x.to_string()), NO_PMU);
        assert_eq!(hw_cell(None, true, |x| x.to_string()), "-");
        assert_eq!(hw_cell(Some(1.5), true, |x| format!("{x:.2}")), "1.50");
        assert_eq!(fmt_bw(2.5e9), "2.50 GB/s");
    }

    /// A task whose CPU time was not counted over the interval (its counters reopened after a
    /// broker stopped) shows "-" and counted 0, not 0.0 % counted 100 (CLI probe, session 23).
    #[test]
    fn a_task_not_counted_shows_no_zero() {
        use counterpoint_core::observation::{Observation, TaskObservation};
        use counterpoint_core::{event, CounterValue, Sample, TaskId};
        let task = |pid: u64, clock: Option<u64>| {
            let mut sample = Sample::new(Some(TaskId(pid)), 1_000_000_000);
            if let Some(ns) = clock {
                sample.set(event::TASK_CLOCK, CounterValue::exact(ns, 1_000_000_000));
            }
            TaskObservation {
                id: TaskId(pid),
                name: format!("t{pid}"),
                affinity: CpuSet::default(),
                cpu: None,
                sample,
                runnable: true,
                finished: false,
                code: None,
            }
        };
        let obs = Observation {
            time_ns: 1_000_000_000,
            interval_ns: 1_000_000_000,
            tasks: vec![task(1, Some(500_000_000)), task(2, None)],
            cpus: Vec::new(),
            memory_utilization: Vec::new(),
        };
        let snap = model::snapshot(&obs, &CpuSet::default(), false, Default::default());
        let (counted, missing) = (&snap.rows[0], &snap.rows[1]);
        assert!(counted.counted && (counted.cpu_pct - 50.0).abs() < 1e-9);
        assert_eq!(counted.counted_fraction, 1.0);
        assert!(!missing.counted);
        assert_eq!(missing.counted_fraction, 0.0);
        let doc = render::json_doc(&snap, 2, SortKey::Pid, false);
        assert_eq!(doc["tasks"][0]["cpu_percent"], 50.0);
        assert!(doc["tasks"][1]["cpu_percent"].is_null(), "{doc}");
        assert!(doc["tasks"][1]["context_switches_per_s"].is_null(), "{doc}");
    }

    /// A task new in the interval (not counted, CNT% 0) was said to have been multiplexed,
    /// even on a host without hardware counters (CLI probe, session 25): only a task counted
    /// over part of the interval calls for that note; one not counted gets its own.
    #[test]
    fn a_task_not_counted_is_not_called_multiplexed() {
        use render::{count_notes, MULTIPLEXED_NOTE, NOT_COUNTED_NOTE};
        let counted = row(1, "a", 10.0, None);
        let mut new = row(2, "b", 0.0, None);
        new.counted = false;
        new.counted_fraction = 0.0;
        let mut half = row(3, "c", 5.0, None);
        half.counted_fraction = 0.5;
        assert!(count_notes(std::slice::from_ref(&counted)).is_empty());
        assert_eq!(
            count_notes(&[counted.clone(), new.clone()]),
            [NOT_COUNTED_NOTE]
        );
        assert_eq!(count_notes(&[counted, half.clone()]), [MULTIPLEXED_NOTE]);
        assert_eq!(
            count_notes(&[new, half]),
            [MULTIPLEXED_NOTE, NOT_COUNTED_NOTE]
        );
    }

    #[test]
    fn coverage_is_shown_as_a_percentage() {
        assert_eq!(counted_cell(1.0), "100");
        assert_eq!(counted_cell(0.25), "25");
        assert_eq!(counted_cell(1.5), "100");
    }
}
