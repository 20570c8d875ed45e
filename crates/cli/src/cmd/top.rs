//! `counterpoint top`: what the agent sees, per task: CPU %, context switches and migrations per
//! second always; IPC, LLC MPKI and bandwidth only where a hardware PMU counts them (never
//! here: shown as "n/a (no PMU)", not invented); the current placement per CPU.
//!
//! On a terminal it is a live ratatui view (sortable with keys, `q`/Esc quits, the terminal is
//! restored on every exit path including a panic). When stdout is not a terminal, or with
//! `--once` / `--json`, it prints plain text tables or JSON documents, one per interval.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_core::metric;
use counterpoint_core::observation::Observation;
use counterpoint_host::machine::CounterSources;
use counterpoint_host::{Host, TargetSpec};
use serde_json::json;
use std::cmp::Ordering as CmpOrdering;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Args)]
pub struct TopArgs {
    /// Which processes (same syntax as `agent --targets`).
    #[arg(long, default_value = "all")]
    targets: String,
    /// Refresh interval.
    #[arg(long, default_value = "1s")]
    interval: String,
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
    /// Stop after this many intervals (text/JSON output).
    #[arg(long)]
    count: Option<u64>,
    /// Rows to print in text/JSON output (the live view shows all and scrolls).
    #[arg(long, default_value_t = 20)]
    rows: usize,
}

/// A sortable column of the task table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SortKey {
    Pid,
    Comm,
    Cpu,
    Cs,
    Migrations,
    Ipc,
    Mpki,
    Bandwidth,
}

impl SortKey {
    const ALL: [SortKey; 8] = [
        SortKey::Pid,
        SortKey::Comm,
        SortKey::Cpu,
        SortKey::Cs,
        SortKey::Migrations,
        SortKey::Ipc,
        SortKey::Mpki,
        SortKey::Bandwidth,
    ];

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pid" => SortKey::Pid,
            "comm" => SortKey::Comm,
            "cpu" => SortKey::Cpu,
            "cs" => SortKey::Cs,
            "migrations" | "mig" => SortKey::Migrations,
            "ipc" => SortKey::Ipc,
            "mpki" => SortKey::Mpki,
            "bw" | "bandwidth" => SortKey::Bandwidth,
            other => {
                bail!("--sort {other:?}: expected pid, comm, cpu, cs, migrations, ipc, mpki or bw")
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SortKey::Pid => "pid",
            SortKey::Comm => "comm",
            SortKey::Cpu => "cpu",
            SortKey::Cs => "cs",
            SortKey::Migrations => "migrations",
            SortKey::Ipc => "ipc",
            SortKey::Mpki => "mpki",
            SortKey::Bandwidth => "bw",
        }
    }

    fn header(self) -> &'static str {
        match self {
            SortKey::Pid => "PID",
            SortKey::Comm => "COMM",
            SortKey::Cpu => "CPU%",
            SortKey::Cs => "CS/s",
            SortKey::Migrations => "MIG/s",
            SortKey::Ipc => "IPC",
            SortKey::Mpki => "LLC MPKI",
            SortKey::Bandwidth => "MEM BW",
        }
    }

    fn step(self, by: isize) -> Self {
        let n = Self::ALL.len() as isize;
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as isize;
        Self::ALL[((i + by).rem_euclid(n)) as usize]
    }
}

/// One task's view of one interval.
#[derive(Clone, Debug)]
struct Row {
    pid: u64,
    name: String,
    cpu_pct: f64,
    cs_per_s: f64,
    mig_per_s: Option<f64>,
    ipc: Option<f64>,
    llc_mpki: Option<f64>,
    bw_bytes_per_s: Option<f64>,
    counted_fraction: f64,
    affinity: CpuSet,
    last_cpu: Option<u32>,
}

/// One CPU: how busy, which target tasks last ran there (and used > 1 % CPU), which are pinned
/// to a set that includes it.
#[derive(Clone, Debug)]
struct CpuLine {
    cpu: u32,
    busy_fraction: f64,
    running: Vec<(u64, String)>,
    pinned: Vec<(u64, String)>,
}

/// Everything one refresh shows.
#[derive(Clone, Debug)]
struct Snapshot {
    interval_ns: u64,
    rows: Vec<Row>,
    cpus: Vec<CpuLine>,
    /// Whether hardware events were counted (IPC etc. available).
    pmu: bool,
    /// perf_event or /proc, per thread.
    sources: CounterSources,
}

/// Running above this share of a CPU in the interval counts as "running on" its last CPU.
const RUNNING_PCT: f64 = 1.0;

fn snapshot(obs: &Observation, online: &CpuSet, pmu: bool, sources: CounterSources) -> Snapshot {
    let secs = (obs.interval_ns as f64 / 1e9).max(1e-9);
    let (ipc, mpki, bw) = (metric::ipc(), metric::llc_mpki(), metric::mem_bandwidth());
    let rows: Vec<Row> = obs
        .tasks
        .iter()
        .map(|t| Row {
            pid: t.id.0,
            name: t.name.clone(),
            cpu_pct: t.sample.get(event::TASK_CLOCK).unwrap_or(0.0) / obs.interval_ns.max(1) as f64
                * 100.0,
            cs_per_s: t.sample.get(event::CONTEXT_SWITCHES).unwrap_or(0.0) / secs,
            mig_per_s: t.sample.get(event::CPU_MIGRATIONS).map(|m| m / secs),
            ipc: ipc.eval_sample(&t.sample),
            llc_mpki: mpki.eval_sample(&t.sample),
            bw_bytes_per_s: bw.eval_sample(&t.sample),
            counted_fraction: t.sample.counted_fraction(),
            affinity: t.affinity.clone(),
            last_cpu: t.cpu,
        })
        .collect();
    let cpus = obs
        .cpus
        .iter()
        .map(|c| {
            let mut running: Vec<&Row> = rows
                .iter()
                .filter(|r| r.last_cpu == Some(c.cpu) && r.cpu_pct > RUNNING_PCT)
                .collect();
            running.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
            let pinned = rows
                .iter()
                .filter(|r| r.affinity != *online && r.affinity.contains(c.cpu))
                .map(|r| (r.pid, r.name.clone()))
                .collect();
            CpuLine {
                cpu: c.cpu,
                busy_fraction: c.busy_fraction,
                running: running.iter().map(|r| (r.pid, r.name.clone())).collect(),
                pinned,
            }
        })
        .collect();
    Snapshot {
        interval_ns: obs.interval_ns,
        rows,
        cpus,
        pmu,
        sources,
    }
}

fn sources_text(c: &CounterSources) -> String {
    let mut t = format!(
        "counters: perf_event on {} threads, /proc on {}",
        c.perf_threads, c.proc_threads
    );
    if let Some(r) = &c.perf_off_reason {
        t.push_str(&format!(" (perf_event off: {r})"));
    }
    t
}

/// `None` sorts last whatever the direction.
fn cmp_opt(a: Option<f64>, b: Option<f64>, descending: bool) -> CmpOrdering {
    match (a, b) {
        (Some(x), Some(y)) if descending => y.total_cmp(&x),
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => CmpOrdering::Less,
        (None, Some(_)) => CmpOrdering::Greater,
        (None, None) => CmpOrdering::Equal,
    }
}

/// Sort rows: pid and comm ascending, rates and ratios descending; `reverse` flips that.
/// Ties are broken by pid so the order is stable between refreshes.
fn sort_rows(rows: &mut [Row], key: SortKey, reverse: bool) {
    let natural_desc = !matches!(key, SortKey::Pid | SortKey::Comm);
    let desc = natural_desc != reverse;
    rows.sort_by(|a, b| {
        let o = match key {
            SortKey::Pid => CmpOrdering::Equal,
            SortKey::Comm => a.name.cmp(&b.name),
            SortKey::Cpu => cmp_opt(Some(a.cpu_pct), Some(b.cpu_pct), desc),
            SortKey::Cs => cmp_opt(Some(a.cs_per_s), Some(b.cs_per_s), desc),
            SortKey::Migrations => cmp_opt(a.mig_per_s, b.mig_per_s, desc),
            SortKey::Ipc => cmp_opt(a.ipc, b.ipc, desc),
            SortKey::Mpki => cmp_opt(a.llc_mpki, b.llc_mpki, desc),
            SortKey::Bandwidth => cmp_opt(a.bw_bytes_per_s, b.bw_bytes_per_s, desc),
        };
        let o = if key == SortKey::Comm && desc {
            o.reverse()
        } else {
            o
        };
        let by_pid = if key == SortKey::Pid && desc {
            b.pid.cmp(&a.pid)
        } else {
            a.pid.cmp(&b.pid)
        };
        o.then(by_pid)
    });
}

const NO_PMU: &str = "n/a (no PMU)";

/// A hardware-derived value: the number, "n/a (no PMU)" without a PMU, "-" when a PMU exists but
/// the event did not count in this interval.
fn hw_cell(v: Option<f64>, pmu: bool, fmt: impl Fn(f64) -> String) -> String {
    match v {
        Some(x) => fmt(x),
        None if !pmu => NO_PMU.to_string(),
        None => "-".to_string(),
    }
}

fn fmt_bw(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB/s", b / 1e6)
    } else {
        format!("{:.0} kB/s", b / 1e3)
    }
}

fn opt_num(v: Option<f64>) -> String {
    v.map(|m| format!("{m:.1}")).unwrap_or_else(|| "-".into())
}

fn task_list(v: &[(u64, String)]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(|(p, n)| format!("{p} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_text(s: &Snapshot, rows: usize, key: SortKey, reverse: bool, n: u64) {
    println!(
        "interval {n}: {:.2} s, {} tasks, sorted by {}{}",
        s.interval_ns as f64 / 1e9,
        s.rows.len(),
        key.name(),
        if reverse { " (reversed)" } else { "" }
    );
    for c in &s.cpus {
        println!(
            "cpu{}: {:5.1} % busy  runs: {}  pinned here: {}",
            c.cpu,
            c.busy_fraction * 100.0,
            task_list(&c.running),
            task_list(&c.pinned)
        );
    }
    println!("{}", sources_text(&s.sources));
    if !s.pmu {
        println!("IPC / LLC MPKI / bandwidth: {NO_PMU}: this host has no hardware PMU");
    }
    println!(
        "{:>8} {:<16} {:>7} {:>9} {:>8} {:>12} {:>12} {:>12} {:>4} {:<10}",
        "PID", "COMM", "CPU%", "CS/s", "MIG/s", "IPC", "LLC MPKI", "MEM BW", "CPU", "AFFINITY"
    );
    for r in s.rows.iter().take(rows) {
        println!(
            "{:>8} {:<16} {:>7.1} {:>9.1} {:>8} {:>12} {:>12} {:>12} {:>4} {:<10}",
            r.pid,
            r.name,
            r.cpu_pct,
            r.cs_per_s,
            opt_num(r.mig_per_s),
            hw_cell(r.ipc, s.pmu, |x| format!("{x:.2}")),
            hw_cell(r.llc_mpki, s.pmu, |x| format!("{x:.2}")),
            hw_cell(r.bw_bytes_per_s, s.pmu, fmt_bw),
            r.last_cpu.map(|c| c.to_string()).unwrap_or("-".into()),
            r.affinity.to_list()
        );
    }
    println!();
}

fn json_doc(s: &Snapshot, rows: usize, key: SortKey, reverse: bool) -> serde_json::Value {
    let mut doc = json!({
        "interval_ns": s.interval_ns,
        "sort": key.name(),
        "reverse": reverse,
        "pmu": s.pmu,
        "counter_source": {
            "perf_threads": s.sources.perf_threads,
            "proc_threads": s.sources.proc_threads,
            "perf_off": s.sources.perf_off_reason,
        },
        "tasks": s.rows.iter().take(rows).map(|r| json!({
            "pid": r.pid, "comm": r.name, "cpu_percent": r.cpu_pct,
            "context_switches_per_s": r.cs_per_s, "migrations_per_s": r.mig_per_s,
            "ipc": r.ipc, "llc_mpki": r.llc_mpki, "mem_bandwidth_bytes_per_s": r.bw_bytes_per_s,
            "counted_fraction": r.counted_fraction,
            "affinity": r.affinity.to_list(), "last_cpu": r.last_cpu,
        })).collect::<Vec<_>>(),
        "cpus": s.cpus.iter().map(|c| json!({
            "cpu": c.cpu, "busy_fraction": c.busy_fraction,
            "running_pids": c.running.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            "pinned_pids": c.pinned.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    if !s.pmu {
        doc["unavailable"] = json!({
            "ipc": "no hardware PMU", "llc_mpki": "no hardware PMU", "bandwidth": "no hardware PMU"
        });
    }
    doc
}

/// Whether the host counts the hardware events IPC and MPKI are made of.
fn host_has_pmu(host: &Host) -> bool {
    let ev = host.counted_events();
    ev.contains(&event::INSTRUCTIONS) && ev.contains(&event::CYCLES)
}

pub fn run(args: TopArgs) -> Result<ExitCode> {
    let interval_ns = super::agent::parse_interval(&args.interval)?;
    let key = SortKey::parse(&args.sort)?;
    let targets = TargetSpec::parse(&args.targets)?;
    let mut host = Host::new(targets, None)?;
    host.set_detailed(true);
    let live = !args.once && !args.json && args.count.is_none() && std::io::stdout().is_terminal();
    if live {
        return run_live(host, interval_ns, key, args.reverse);
    }
    let count = if args.once { Some(1) } else { args.count };
    let online = host.online().clone();
    let pmu = host_has_pmu(&host);
    let mut n = 0u64;
    loop {
        let obs = host.advance(interval_ns)?;
        n += 1;
        let mut s = snapshot(&obs, &online, pmu, host.counter_sources());
        sort_rows(&mut s.rows, key, args.reverse);
        if args.json {
            println!("{}", json_doc(&s, args.rows, key, args.reverse));
        } else {
            print_text(&s, args.rows, key, args.reverse, n);
        }
        if count.is_some_and(|c| n >= c) {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The live view.

static LIVE_STOP: AtomicBool = AtomicBool::new(false);
/// Set by the main thread once the terminal is restored.
static LIVE_DONE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    LIVE_STOP.store(true, Ordering::SeqCst);
}

/// Puts the terminal back (raw mode off, main screen) however the live view ends.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// State of the live view between refreshes.
struct View {
    key: SortKey,
    reverse: bool,
    help: bool,
    selected: usize,
    latest: Option<Snapshot>,
    intervals: u64,
}

fn run_live(host: Host, interval_ns: u64, key: SortKey, reverse: bool) -> Result<ExitCode> {
    use ratatui::crossterm::event::{self as ev, Event, KeyCode, KeyEventKind, KeyModifiers};

    // SIGTERM/SIGINT end the view through the normal path, so the terminal is restored.
    // SIGHUP keeps its default (exit): the terminal is gone, there is nothing to restore, and
    // crossterm spins reading a hung-up tty, so the normal path would never run.
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_stop_signal as *const () as libc::sighandler_t);
        }
    }
    let online = host.online().clone();
    let pmu = host_has_pmu(&host);
    // Sampling blocks for an interval: it runs on its own thread so keys stay responsive.
    let (tx, rx) = mpsc::channel::<Result<Snapshot, String>>();
    let sampler = std::thread::spawn(move || {
        let mut host = host;
        host.set_stop_flag(&LIVE_STOP);
        while !LIVE_STOP.load(Ordering::SeqCst) {
            let msg = host
                .advance(interval_ns)
                .map(|obs| snapshot(&obs, &online, pmu, host.counter_sources()))
                .map_err(|e| e.to_string());
            let failed = msg.is_err();
            if tx.send(msg).is_err() || failed {
                return;
            }
        }
        // Asked to stop (a key or a signal): the main thread restores the terminal within
        // ~100 ms. If it is stuck (blocked in terminal input), restore it from here and exit.
        let t0 = std::time::Instant::now();
        while !LIVE_DONE.load(Ordering::SeqCst) {
            if t0.elapsed() > Duration::from_secs(2) {
                ratatui::restore();
                eprintln!("counterpoint top: stopped (the terminal did not answer)");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });

    let guard = TerminalGuard;
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let mut view = View {
        key,
        reverse,
        help: false,
        selected: 0,
        latest: None,
        intervals: 0,
    };
    let result = (|| -> Result<()> {
        let mut dirty = true;
        loop {
            if LIVE_STOP.load(Ordering::SeqCst) {
                return Ok(());
            }
            loop {
                match rx.try_recv() {
                    Ok(Ok(s)) => {
                        view.latest = Some(s);
                        view.intervals += 1;
                        dirty = true;
                    }
                    Ok(Err(e)) => return Err(anyhow!("sampling failed: {e}")),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        return Err(anyhow!("the sampling thread stopped"))
                    }
                }
            }
            if dirty {
                if let Some(s) = view.latest.as_mut() {
                    sort_rows(&mut s.rows, view.key, view.reverse);
                    view.selected = view.selected.min(s.rows.len().saturating_sub(1));
                }
                terminal
                    .draw(|f| draw(f, &view))
                    .context("drawing the view")?;
                dirty = false;
            }
            if !ev::poll(Duration::from_millis(100)).context("reading the terminal")? {
                continue;
            }
            match ev::read().context("reading the terminal")? {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    dirty = true;
                    match k.code {
                        KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                            return Ok(())
                        }
                        KeyCode::Char('s') | KeyCode::Right | KeyCode::Tab => {
                            view.key = view.key.step(1)
                        }
                        KeyCode::Char('S') | KeyCode::Left | KeyCode::BackTab => {
                            view.key = view.key.step(-1)
                        }
                        KeyCode::Char('r') => view.reverse = !view.reverse,
                        KeyCode::Char('?') | KeyCode::Char('h') => view.help = !view.help,
                        KeyCode::Down | KeyCode::Char('j') => view.selected += 1,
                        KeyCode::Up | KeyCode::Char('k') => {
                            view.selected = view.selected.saturating_sub(1)
                        }
                        KeyCode::PageDown => view.selected += 10,
                        KeyCode::PageUp => view.selected = view.selected.saturating_sub(10),
                        KeyCode::Home => view.selected = 0,
                        KeyCode::Char(c @ '1'..='8') => {
                            let i = c as usize - '1' as usize;
                            view.key = SortKey::ALL[i];
                        }
                        _ => dirty = false,
                    }
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
    })();
    LIVE_STOP.store(true, Ordering::SeqCst);
    drop(rx);
    drop(terminal);
    drop(guard);
    LIVE_DONE.store(true, Ordering::SeqCst);
    // The sampler sees the flag within 50 ms (the wait in `advance` is cut short).
    let _ = sampler.join();
    result.map(|()| ExitCode::SUCCESS)
}

fn draw(f: &mut ratatui::Frame, view: &View) {
    use ratatui::layout::{Constraint, Layout, Rect};
    use ratatui::style::{Color, Modifier, Style};
    use ratatui::text::{Line, Span};
    use ratatui::widgets::{
        Block, Borders, Cell, Clear, Paragraph, Row as TRow, Table, TableState,
    };

    let area = f.area();
    let cpu_lines = view.latest.as_ref().map_or(1, |s| s.cpus.len().max(1)) as u16;
    let [title_a, table_a, cpus_a, footer_a] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(cpu_lines.min(12) + 2),
        Constraint::Length(1),
    ])
    .areas(area);

    let Some(s) = view.latest.as_ref() else {
        f.render_widget(
            Paragraph::new("counterpoint top: measuring the first interval ..."),
            title_a,
        );
        f.render_widget(Paragraph::new(footer_text(view)), footer_a);
        return;
    };

    let total_cpu = s.rows.iter().fold(0.0, |a, r| a + r.cpu_pct);
    let pmu_note = if s.pmu {
        "hardware PMU: IPC, MPKI, bandwidth counted".to_string()
    } else {
        format!("IPC/MPKI/bandwidth {NO_PMU}")
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                "counterpoint top",
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                "  interval {:.2} s (#{})  {} tasks, {:.1} % CPU  {}",
                s.interval_ns as f64 / 1e9,
                view.intervals,
                s.rows.len(),
                total_cpu,
                pmu_note
            )),
        ])),
        title_a,
    );

    let mut head: Vec<Cell> = SortKey::ALL
        .iter()
        .map(|k| {
            let arrow = if *k == view.key {
                let natural_desc = !matches!(k, SortKey::Pid | SortKey::Comm);
                if natural_desc != view.reverse {
                    "▼"
                } else {
                    "▲"
                }
            } else {
                ""
            };
            let style = if *k == view.key {
                Style::new()
                    .add_modifier(Modifier::BOLD | Modifier::REVERSED)
                    .fg(Color::Yellow)
            } else {
                Style::new().add_modifier(Modifier::BOLD)
            };
            let text = format!("{}{arrow}", k.header());
            let line = if *k == SortKey::Comm {
                Line::from(text)
            } else {
                Line::from(text).right_aligned()
            };
            Cell::from(line).style(style)
        })
        .collect();
    let bold = Style::new().add_modifier(Modifier::BOLD);
    head.push(Cell::from(Line::from("CPU").right_aligned()).style(bold));
    head.push(Cell::from("AFFINITY").style(bold));
    let header = TRow::new(head);
    let rows = s.rows.iter().map(|r| {
        let num = |t: String| Cell::from(Line::from(t).right_aligned());
        TRow::new(vec![
            num(r.pid.to_string()),
            Cell::from(r.name.clone()),
            num(format!("{:.1}", r.cpu_pct)),
            num(format!("{:.1}", r.cs_per_s)),
            num(opt_num(r.mig_per_s)),
            num(hw_cell(r.ipc, s.pmu, |x| format!("{x:.2}"))),
            num(hw_cell(r.llc_mpki, s.pmu, |x| format!("{x:.2}"))),
            num(hw_cell(r.bw_bytes_per_s, s.pmu, fmt_bw)),
            num(r.last_cpu.map(|c| c.to_string()).unwrap_or("-".into())),
            Cell::from(r.affinity.to_list()),
        ])
    });
    let hw_w = if s.pmu { 10 } else { NO_PMU.len() as u16 };
    let widths = [
        Constraint::Length(8),
        Constraint::Length(16),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(8),
        Constraint::Length(hw_w),
        Constraint::Length(hw_w),
        Constraint::Length(hw_w),
        Constraint::Length(4),
        Constraint::Min(8),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::new().borders(Borders::TOP).title(" tasks "))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(Some(view.selected));
    f.render_stateful_widget(table, table_a, &mut state);

    let cpu_text: Vec<Line> = s
        .cpus
        .iter()
        .map(|c| {
            Line::from(vec![
                Span::styled(
                    format!("cpu{:<3}", c.cpu),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!(
                    " {:5.1} % busy  runs: {}  pinned here: {}",
                    c.busy_fraction * 100.0,
                    task_list(&c.running),
                    task_list(&c.pinned)
                )),
            ])
        })
        .collect();
    f.render_widget(
        Paragraph::new(cpu_text).block(
            Block::new()
                .borders(Borders::TOP)
                .title(" placement per CPU (target tasks last run there with > 1 % CPU) ")
                .title_bottom(format!(" {} ", sources_text(&s.sources))),
        ),
        cpus_a,
    );
    f.render_widget(Paragraph::new(footer_text(view)), footer_a);

    if view.help {
        let w = 62.min(area.width);
        let h = 14.min(area.height);
        let popup = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        let lines = vec![
            Line::from("s, Tab, →     next sort column"),
            Line::from("S, Shift-Tab, ← previous sort column"),
            Line::from("1..8          sort by PID, COMM, CPU%, CS/s, MIG/s,"),
            Line::from("              IPC, LLC MPKI, MEM BW"),
            Line::from("r             reverse the sort order"),
            Line::from("↑ ↓ j k PgUp PgDn Home  move the selection"),
            Line::from("? h           this help"),
            Line::from("q Esc Ctrl-C  quit"),
            Line::from(""),
            Line::from("IPC, LLC MPKI and MEM BW need a hardware PMU;"),
            Line::from(format!("without one they read \"{NO_PMU}\".")),
        ];
        f.render_widget(Clear, popup);
        f.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" help ")),
            popup,
        );
    }
}

fn footer_text(view: &View) -> String {
    format!(
        "sort: {} {} | s/S next/prev column  1-8 pick  r reverse  ↑↓ scroll  ? help  q/Esc quit",
        view.key.header(),
        if view.reverse { "(reversed)" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u64, name: &str, cpu: f64, mig: Option<f64>) -> Row {
        Row {
            pid,
            name: name.into(),
            cpu_pct: cpu,
            cs_per_s: 0.0,
            mig_per_s: mig,
            ipc: None,
            llc_mpki: None,
            bw_bytes_per_s: None,
            counted_fraction: 1.0,
            affinity: CpuSet::default(),
            last_cpu: None,
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

    #[test]
    fn hardware_cells_never_invent_numbers() {
        assert_eq!(hw_cell(None, false, |x| x.to_string()), NO_PMU);
        assert_eq!(hw_cell(None, true, |x| x.to_string()), "-");
        assert_eq!(hw_cell(Some(1.5), true, |x| format!("{x:.2}")), "1.50");
        assert_eq!(fmt_bw(2.5e9), "2.50 GB/s");
    }
}
