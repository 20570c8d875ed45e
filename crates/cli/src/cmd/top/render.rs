//! Rendering a [`Snapshot`]: plain text tables, JSON documents, and the live view's frame.

use super::live::View;
use super::model::{Snapshot, SortKey};
use counterpoint_host::machine::CounterSources;
use serde_json::json;

pub(super) fn sources_text(c: &CounterSources) -> String {
    // perf_threads counts groups: a family's one per original thread covers every thread
    // started since.
    let mut t = format!(
        "counters: {} on {} groups, /proc on {} threads",
        c.via, c.perf_threads, c.proc_threads
    );
    if let Some(r) = &c.fallback_reason {
        t.push_str(&format!(" (broker given up: {r})"));
    }
    if let Some(r) = &c.perf_off_reason {
        t.push_str(&format!(" (perf_event off: {r})"));
    } else if let (Some(r), true) = (&c.open_refused, c.proc_threads > 0) {
        t.push_str(&format!(" (/proc where a group did not open: {r})"));
    }
    t.push_str(&threads_text(c));
    t
}

/// How threads started after a process's first read are counted, for the `counters:` line:
/// per process as each is counted now ([`CounterSources::thread_counting`]).
fn threads_text(c: &CounterSources) -> String {
    format!("; {}", c.thread_counting())
}

pub(super) const NO_PMU: &str = "n/a (no PMU)";

/// Said once when the SuperFunction column is off.
pub(super) const NO_HEATMAPS: &str = "SUPERFUNCTION: n/a (instruction-pointer sampling is off; \
     --heatmaps samples each thread's code with cpu-clock and shows its dominant type: user code, \
     kernel, or with --syscalls the system call in progress / irq)";

/// The header note said once (instead of a cell per row) when the hardware columns are hidden.
pub(super) const NO_PMU_NOTE: &str = "IPC, LLC MPKI, MEM BW: n/a (no PMU): this host has no \
     hardware PMU (cycles, instructions and LLC misses cannot be counted), so those columns are \
     not shown";

/// Said whenever a shown value was multiplexed: it is scaled, and CNT% says how much was seen.
pub(super) const MULTIPLEXED_NOTE: &str = "CNT% < 100: hardware counters were multiplexed; \
     their values are scaled by enabled/running time, CNT% is the share of the interval counted";

/// Said whenever a shown task was not counted over the interval at all (CNT% 0, `-`): nothing
/// was multiplexed, its counters did not run over the whole interval.
pub(super) const NOT_COUNTED_NOTE: &str = "CNT% 0, \"-\": not counted over this interval (a task \
     new since the last refresh, or whose counters were reopened); counted from the next one";

/// The notes the shown rows call for: multiplexing only for a task that was counted over part
/// of the interval; a task not counted at all was not multiplexed (a new process was said to be,
/// on a host with no hardware counter at all; CLI probe, session 25).
pub(super) fn count_notes(shown: &[super::model::Row]) -> Vec<&'static str> {
    let mut notes = Vec::new();
    if shown.iter().any(|r| r.counted && r.counted_fraction < 1.0) {
        notes.push(MULTIPLEXED_NOTE);
    }
    if shown.iter().any(|r| !r.counted) {
        notes.push(NOT_COUNTED_NOTE);
    }
    notes
}

/// A value of the task's software counters: "-" when they did not count over the interval.
fn counted_num(r: &super::model::Row, v: f64) -> String {
    if r.counted {
        format!("{v:.1}")
    } else {
        "-".to_string()
    }
}

/// The share of the interval the task's counters ran (the least of its events), in percent:
/// 100 unless the kernel multiplexed a hardware group (0 when they did not count at all).
pub(super) fn counted_cell(fraction: f64) -> String {
    format!("{:.0}", (fraction * 100.0).clamp(0.0, 100.0))
}

/// A hardware-derived value: the number, "n/a (no PMU)" without a PMU, "-" when a PMU exists but
/// the event did not count in this interval.
pub(super) fn hw_cell(v: Option<f64>, pmu: bool, fmt: impl Fn(f64) -> String) -> String {
    match v {
        Some(x) => fmt(x),
        None if !pmu => NO_PMU.to_string(),
        None => "-".to_string(),
    }
}

pub(super) fn fmt_bw(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB/s", b / 1e6)
    } else {
        format!("{:.0} kB/s", b / 1e3)
    }
}

pub(super) fn opt_num(v: Option<f64>) -> String {
    v.map(|m| format!("{m:.1}")).unwrap_or_else(|| "-".into())
}

pub(super) fn task_list(v: &[(u64, String)]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(|(p, n)| format!("{p} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `tid type share, ...` for a process's threads.
pub(super) fn thread_list(v: &[(u64, String)]) -> String {
    v.iter()
        .map(|(t, l)| format!("{t} {l}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn print_text(
    s: &Snapshot,
    rows: usize,
    key: SortKey,
    reverse: bool,
    n: u64,
) -> anyhow::Result<()> {
    outln!(
        "interval {n}: {:.2} s, {} tasks, sorted by {}{}",
        s.interval_ns as f64 / 1e9,
        s.rows.len(),
        key.name(),
        if reverse { " (reversed)" } else { "" }
    )?;
    for c in &s.cpus {
        outln!(
            "cpu{}: {:5.1} % busy  runs: {}  pinned here: {}",
            c.cpu,
            c.busy_fraction * 100.0,
            task_list(&c.running),
            task_list(&c.pinned)
        )?;
    }
    outln!("{}", sources_text(&s.sources))?;
    if !s.pmu {
        outln!("{NO_PMU_NOTE}")?;
    }
    for note in count_notes(&s.rows[..rows.min(s.rows.len())]) {
        outln!("{note}")?;
    }
    // Without a PMU the three hardware columns would read n/a on every row: hidden (the note
    // above says why once).
    let hw_head = if s.pmu {
        format!(" {:>12} {:>12} {:>12}", "IPC", "LLC MPKI", "MEM BW")
    } else {
        String::new()
    };
    if let Some(note) = &s.code_note {
        outln!("SUPERFUNCTION: {note}")?;
    }
    let sf_head = if s.code_note.is_some() {
        " SUPERFUNCTION".to_string()
    } else {
        String::new()
    };
    outln!(
        "{:>8} {:<16} {:>7} {:>9} {:>8}{hw_head} {:>5} {:>4} {:<10}{sf_head}",
        "PID",
        "COMM",
        "CPU%",
        "CS/s",
        "MIG/s",
        "CNT%",
        "CPU",
        "AFFINITY"
    )?;
    for r in s.rows.iter().take(rows) {
        let hw = if s.pmu {
            format!(
                " {:>12} {:>12} {:>12}",
                hw_cell(r.ipc, s.pmu, |x| format!("{x:.2}")),
                hw_cell(r.llc_mpki, s.pmu, |x| format!("{x:.2}")),
                hw_cell(r.bw_bytes_per_s, s.pmu, fmt_bw)
            )
        } else {
            String::new()
        };
        let sf = if s.code_note.is_some() {
            format!(" {}", r.superfn.as_deref().unwrap_or("-"))
        } else {
            String::new()
        };
        outln!(
            "{:>8} {} {:>7} {:>9} {:>8}{hw} {:>5} {:>4} {:<10}{sf}",
            r.pid,
            crate::cmd::pad_right(&crate::cmd::printable(&r.name), 16),
            counted_num(r, r.cpu_pct),
            counted_num(r, r.cs_per_s),
            opt_num(r.mig_per_s),
            counted_cell(r.counted_fraction),
            r.last_cpu.map(|c| c.to_string()).unwrap_or("-".into()),
            r.affinity.to_list()
        )?;
        // Each sampled thread's own type, when the process has more than one.
        if r.thread_superfns.len() > 1 {
            outln!("{:>8}   threads: {}", "", thread_list(&r.thread_superfns))?;
        }
    }
    outln!()?;
    Ok(())
}

pub(super) fn json_doc(
    s: &Snapshot,
    rows: usize,
    key: SortKey,
    reverse: bool,
) -> serde_json::Value {
    let mut doc = json!({
        "interval_ns": s.interval_ns,
        "sort": key.name(),
        "reverse": reverse,
        "pmu": s.pmu,
        "counter_source": {
            "kind": if s.sources.direct { "direct" } else { "broker" },
            "via": s.sources.via,
            "broker_given_up": s.sources.fallback_reason,
            "perf_threads": s.sources.perf_threads,
            "proc_threads": s.sources.proc_threads,
            "perf_off": s.sources.perf_off_reason,
            "open_refused": s.sources.open_refused,
            "inherited_processes": s.sources.inherited_processes,
            "per_thread_processes": s.sources.per_thread_processes,
            "inherit_off": s.sources.inherit_off,
            "per_thread_reason": s.sources.per_thread_reason,
            "unsure_threads": s.sources.unsure_threads,
        },
        "tasks": s.rows.iter().take(rows).map(|r| json!({
            "pid": r.pid, "comm": r.name, "cpu_percent": r.counted.then_some(r.cpu_pct),
            "context_switches_per_s": r.counted.then_some(r.cs_per_s),
            "migrations_per_s": r.mig_per_s,
            "ipc": r.ipc, "llc_mpki": r.llc_mpki, "mem_bandwidth_bytes_per_s": r.bw_bytes_per_s,
            "counted_fraction": r.counted_fraction,
            "affinity": r.affinity.to_list(), "last_cpu": r.last_cpu,
            "superfunction": r.superfn,
            "threads": r.thread_superfns.iter()
                .map(|(t, l)| json!({"tid": t, "superfunction": l}))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "cpus": s.cpus.iter().map(|c| json!({
            "cpu": c.cpu, "busy_fraction": c.busy_fraction,
            "running_pids": c.running.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            "pinned_pids": c.pinned.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    // Off: null here and the reason under "unavailable", as for the hardware columns.
    doc["superfunction"] = match &s.code_note {
        Some(n) => json!(n),
        None => serde_json::Value::Null,
    };
    let mut unavailable = serde_json::Map::new();
    if !s.pmu {
        for key in ["ipc", "llc_mpki", "bandwidth"] {
            unavailable.insert(key.into(), json!("no hardware PMU"));
        }
    }
    if s.code_note.is_none() {
        unavailable.insert(
            "superfunction".into(),
            json!(NO_HEATMAPS
                .trim_start_matches("SUPERFUNCTION: n/a (")
                .trim_end_matches(')')),
        );
    }
    if !unavailable.is_empty() {
        doc["unavailable"] = serde_json::Value::Object(unavailable);
    }
    doc
}

pub(super) fn draw(f: &mut ratatui::Frame, view: &View) {
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
        format!("IPC, LLC MPKI, MEM BW {NO_PMU}: columns hidden")
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
        .filter(|k| k.shown(s.pmu))
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
    head.push(Cell::from(Line::from("CNT%").right_aligned()).style(bold));
    head.push(Cell::from(Line::from("CPU").right_aligned()).style(bold));
    head.push(Cell::from("AFFINITY").style(bold));
    if s.code_note.is_some() {
        head.push(Cell::from("SUPERFUNCTION").style(bold));
    }
    let header = TRow::new(head);
    let rows = s.rows.iter().map(|r| {
        let num = |t: String| Cell::from(Line::from(t).right_aligned());
        let mut cells = vec![
            num(r.pid.to_string()),
            Cell::from(crate::cmd::printable(&r.name).into_owned()),
            num(counted_num(r, r.cpu_pct)),
            num(counted_num(r, r.cs_per_s)),
            num(opt_num(r.mig_per_s)),
        ];
        if s.pmu {
            cells.push(num(hw_cell(r.ipc, s.pmu, |x| format!("{x:.2}"))));
            cells.push(num(hw_cell(r.llc_mpki, s.pmu, |x| format!("{x:.2}"))));
            cells.push(num(hw_cell(r.bw_bytes_per_s, s.pmu, fmt_bw)));
        }
        cells.push(num(counted_cell(r.counted_fraction)));
        cells.push(num(r.last_cpu.map(|c| c.to_string()).unwrap_or("-".into())));
        cells.push(Cell::from(r.affinity.to_list()));
        if s.code_note.is_some() {
            cells.push(Cell::from(r.superfn.clone().unwrap_or_else(|| "-".into())));
        }
        TRow::new(cells)
    });
    let mut widths = vec![
        Constraint::Length(8),
        Constraint::Length(16),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(8),
    ];
    if s.pmu {
        widths.extend([Constraint::Length(10); 3]);
    }
    widths.extend([
        Constraint::Length(5),
        Constraint::Length(4),
        Constraint::Min(8),
    ]);
    if s.code_note.is_some() {
        widths.push(Constraint::Length(24));
    }
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
        let h = 16.min(area.height);
        let popup = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        let lines = vec![
            Line::from("s, Tab, →     next sort column"),
            Line::from("S, Shift-Tab, ← previous sort column"),
            Line::from(if view.pmu {
                "1..8          sort by PID, COMM, CPU%, CS/s, MIG/s,"
            } else {
                "1..5          sort by PID, COMM, CPU%, CS/s, MIG/s"
            }),
            Line::from(if view.pmu {
                "              IPC, LLC MPKI, MEM BW"
            } else {
                "              (6..8, the hardware columns, are hidden)"
            }),
            Line::from("r             reverse the sort order"),
            Line::from("↑ ↓ j k PgUp PgDn Home  move the selection"),
            Line::from("? h           this help"),
            Line::from("q Esc Ctrl-C  quit"),
            Line::from(""),
            Line::from("IPC, LLC MPKI and MEM BW need a hardware PMU;"),
            Line::from(format!("without one they are {NO_PMU} and hidden.")),
            Line::from("CNT% < 100: multiplexed hardware counters,"),
            Line::from("values scaled by enabled/running time."),
            Line::from("CNT% 0, \"-\": not counted over this interval"),
            Line::from("(a new task, or counters reopened)."),
        ];
        f.render_widget(Clear, popup);
        f.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" help ")),
            popup,
        );
    }
}

pub(super) fn footer_text(view: &View) -> String {
    if let Some(status) = &view.status {
        return status.clone();
    }
    format!(
        "sort: {} {} | s/S next/prev column  1-{} pick  r reverse  ↑↓ scroll  ? help  q/Esc quit",
        view.key.header(),
        if view.reverse { "(reversed)" } else { "" },
        SortKey::shown_count(view.pmu)
    )
}
