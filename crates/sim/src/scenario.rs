//! Scenarios: a machine, a workload, a policy, a duration and a seed.
//!
//! A [`Scenario`] is the resolved form the engine runs (programs looked up in the catalog). It is
//! built either from a TOML file ([`Scenario::from_toml_str`], with errors that name the file,
//! line and field path) or programmatically ([`Scenario::builder`]), which is how experiments
//! make random mixes.

use crate::catalog::Catalog;
use crate::spec::{MachineSpec, Model, Program, SchedParams, Server};
use counterpoint_core::CpuSet;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What one task runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// One program.
    Program(Program),
    /// Programs run one after another (a MASA "shell").
    Shell(Vec<Program>),
    /// A request stream.
    Server(Server),
}

impl Workload {
    /// A short label: the program, `shell(a,b,..)` or `server(name)`.
    pub fn label(&self) -> String {
        match self {
            Workload::Program(p) => p.name.clone(),
            Workload::Shell(ps) => format!(
                "shell({})",
                ps.iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Workload::Server(s) => format!("server({})", s.name),
        }
    }
}

/// One task of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Task name (unique within the scenario when `count` > 1: `name#k`).
    pub name: String,
    /// What the task runs.
    pub workload: Workload,
    /// Initial affinity; `None` = every CPU.
    pub affinity: Option<CpuSet>,
    /// Start over when the work is done (keeps contention constant, as the seeds' runs do).
    pub repeat: bool,
    /// Arrival time.
    pub start_ms: u64,
}

/// A resolved scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Scenario name.
    pub name: String,
    /// The machine, resolved from the catalog.
    pub machine: MachineSpec,
    /// Baseline scheduler parameters.
    pub sched: SchedParams,
    /// Simulation tick.
    pub tick_us: u64,
    /// Simulated duration.
    pub duration_ms: u64,
    /// Interval between policy decisions and time-series points.
    pub epoch_ms: u64,
    /// Seed for every random choice (arrivals, jitter, request streams).
    pub seed: u64,
    /// Policy named by the scenario (`linux` = baseline).
    pub policy: String,
    /// Tasks, in id order.
    pub tasks: Vec<TaskSpec>,
}

/// Most simulated task-ticks (tasks x duration in ticks) a scenario file may ask for unless the
/// caller lifts the budget (`simulate --force`). The engine retires a few million task-ticks per
/// second on one core in a release build (`counterpoint bench sim`), so the budget is minutes of
/// work; `duration_ms = 1e15` (years) is refused before anything is allocated.
pub const TASK_TICK_BUDGET: u64 = 2_000_000_000;

/// Most tasks a scenario file may declare in all (`count` summed): each is built up front, so
/// `count = 4e9` is refused instead of aborting on allocation. Not lifted by `--force`.
pub const MAX_TASKS: u64 = 100_000;

/// The coarsest tick a scenario may ask for, µs: a 100 Hz kernel's (Linux's coarsest `HZ`).
/// The tick holds a warming task's miss ratio for its whole length, so coarser ticks are not
/// converged, and at 20-50 ms they broke NP <= 1 (twolf beside three co-runners on x5650-2s
/// 1.00107 at 50 ms, a web-clip server beside twolf 1.0125 at 20 ms; physics probe, session 22:
/// 100 ms was accepted until then).
pub const MAX_TICK_US: u64 = 10_000;
/// Most time-series points (tasks x epochs) a scenario file may ask for: every epoch keeps a
/// point per task (about 90 bytes), so `epoch_ms = 1` over hours of many tasks would exhaust
/// memory at the end of a long run; refused up front instead. At the limit the series holds
/// about 180 MB, and `simulate --json` / `--out` build the result's text besides (a few times
/// that); the largest shipped scenario, scale-1024, has 1e6 points. Not lifted by `--force`:
/// a longer `epoch_ms` keeps the run and shrinks its series.
pub const MAX_SERIES_POINTS: u64 = 2_000_000;
/// Largest scenario file read from disk, in bytes (the shipped ones are a few KB); a string
/// handed to `from_toml_str` is the caller's to bound.
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// What a scenario file may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Refuse beyond this many task-ticks; `None` = no budget (`--force`).
    pub task_tick_budget: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            task_tick_budget: Some(TASK_TICK_BUDGET),
        }
    }
}

impl Limits {
    /// No cost budget (the hard limits that keep arithmetic and memory sound still apply).
    pub fn unbounded() -> Self {
        Self {
            task_tick_budget: None,
        }
    }
}

/// Why a scenario could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ScenarioError {
    /// The file (or the name given to [`Scenario::from_toml_str`]).
    pub file: String,
    /// 1-based line; 0 when the file could not be read.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Field path, e.g. `task[2].cpus` (`<document>` when unknown).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ScenarioError {
    /// `file:line:column: field: message`; without a position (an unreadable file) just
    /// `file: message`; about the whole document (at 1:1), `file:1:1: message`.
    fn render(&self) -> String {
        if self.line == 0 && self.path == "<document>" {
            format!("{}: {}", self.file, self.message)
        } else if self.path == "<document>" {
            format!(
                "{}:{}:{}: {}",
                self.file, self.line, self.column, self.message
            )
        } else if self.line == 0 {
            // A scenario built in code: no position, but the field.
            format!("{}: {}: {}", self.file, self.path, self.message)
        } else {
            format!(
                "{}:{}:{}: {}: {}",
                self.file, self.line, self.column, self.path, self.message
            )
        }
    }
}

/// The TOML form of a task.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    name: Option<String>,
    program: Option<toml::Spanned<String>>,
    shell: Option<toml::Spanned<Vec<String>>>,
    server: Option<toml::Spanned<String>>,
    cpus: Option<toml::Spanned<String>>,
    #[serde(default = "yes")]
    repeat: bool,
    #[serde(default)]
    start_ms: u64,
    #[serde(default = "one")]
    count: toml::Spanned<u64>,
}

fn yes() -> bool {
    true
}
fn one() -> toml::Spanned<u64> {
    toml::Spanned::new(0..0, 1)
}

/// The TOML form of a scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    /// Catalog machine name.
    machine: toml::Spanned<String>,
    #[serde(default)]
    sched: Option<SchedParams>,
    #[serde(default = "tick")]
    tick_us: toml::Spanned<u64>,
    duration_ms: toml::Spanned<u64>,
    #[serde(default = "epoch")]
    epoch_ms: toml::Spanned<u64>,
    #[serde(default)]
    seed: u64,
    #[serde(default = "linux")]
    policy: String,
    /// Physics: `v1` or `v2` (default: the machine's, `v1` in the catalog).
    #[serde(default)]
    model: Option<Model>,
    #[serde(default)]
    task: Vec<toml::Spanned<TaskFile>>,
}

fn tick() -> toml::Spanned<u64> {
    toml::Spanned::new(0..0, 1000)
}
fn epoch() -> toml::Spanned<u64> {
    toml::Spanned::new(0..0, 100)
}
fn linux() -> String {
    "linux".into()
}

/// 1-based line and column of a byte offset.
fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |p| offset - p - 1) + 1;
    (line, col)
}

/// The field path at a byte offset of a scenario document, down into inline arrays and tables
/// (`task[1].cpus` in `task = [{...}, {..., cpus = 7}]`, which read as `task`; CLI probe,
/// session 27): walked over the parsed document's spans, or, for a document that does not
/// parse, read off the lines ([`line_path_at`]).
fn path_at(src: &str, offset: usize) -> String {
    spanned_path_at(src, offset).unwrap_or_else(|| line_path_at(src, offset))
}

/// The path of the innermost key or value whose span holds `offset`, if the document parses
/// and one does (a header or a position between values has none).
fn spanned_path_at(src: &str, offset: usize) -> Option<String> {
    use toml_edit::{Item, Value};
    fn holds_at(span: Option<std::ops::Range<usize>>, offset: usize) -> bool {
        span.is_some_and(|s| s.contains(&offset))
    }
    // Below a value: the array index or inline key that holds the offset, recursively.
    fn inside(v: &Value, offset: usize, path: &mut String) {
        let holds = |span| holds_at(span, offset);
        match v {
            Value::Array(a) => {
                if let Some((i, e)) = a.iter().enumerate().find(|(_, e)| holds(e.span())) {
                    path.push_str(&format!("[{i}]"));
                    inside(e, offset, path);
                }
            }
            Value::InlineTable(t) => {
                for (k, e) in t.iter() {
                    let key_span = t.key(k).and_then(|k| k.span());
                    if holds(key_span) || holds(e.span()) {
                        path.push('.');
                        path.push_str(k);
                        inside(e, offset, path);
                        return;
                    }
                    // A dotted key (`a.b = 1`) makes a table without a span of its own.
                    if e.span().is_none() && e.is_inline_table() {
                        let mut below = String::new();
                        inside(e, offset, &mut below);
                        if !below.is_empty() {
                            path.push('.');
                            path.push_str(k);
                            path.push_str(&below);
                            return;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    fn table(t: &toml_edit::Table, prefix: &str, offset: usize) -> Option<String> {
        let holds = |span| holds_at(span, offset);
        for (k, item) in t.iter() {
            let here = if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            };
            let found = match item {
                Item::Value(v) => {
                    let key_span = t.key(k).and_then(|k| k.span());
                    (holds(key_span) || holds(v.span())).then(|| {
                        let mut path = here;
                        inside(v, offset, &mut path);
                        path
                    })
                }
                Item::Table(sub) => table(sub, &here, offset),
                Item::ArrayOfTables(a) => a
                    .iter()
                    .enumerate()
                    .find_map(|(i, sub)| table(sub, &format!("{here}[{i}]"), offset)),
                Item::None => None,
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }
    let doc = toml_edit::ImDocument::parse(src).ok()?;
    table(doc.as_table(), "", offset)
}

/// The field path at a byte offset read off the lines: the enclosing table header (with the
/// index of an array-of-tables entry) and the key on that line.
fn line_path_at(src: &str, offset: usize) -> String {
    let offset = offset.min(src.len());
    let mut table = String::new();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut pos = 0usize;
    let mut key = None;
    for line in src.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim();
        if start > offset {
            break;
        }
        // A header that is not closed is named as written (`[[tasks]` read as `tasks][0]`).
        let closed = |open: &str, close: &str| {
            t.strip_prefix(open)
                .and_then(|r| r.split_once(close))
                .map(|p| p.0.trim().to_string())
        };
        if t.starts_with("[[") {
            if let Some(name) = closed("[[", "]]") {
                let n = counts.entry(name.clone()).or_insert(0);
                table = format!("{name}[{n}]");
                *n += 1;
            } else {
                table = t.to_string();
            }
            key = None;
        } else if t.starts_with('[') {
            table = closed("[", "]").unwrap_or_else(|| t.to_string());
            key = None;
        } else if let Some((k, _)) = t.split_once('=') {
            if !t.starts_with('#') {
                key = Some(k.trim().trim_matches('"').to_string());
            }
        }
        if offset < pos {
            break;
        }
    }
    match (table.is_empty(), key) {
        (true, Some(k)) => k,
        (false, Some(k)) => format!("{table}.{k}"),
        (false, None) => table,
        (true, None) => "<document>".into(),
    }
}

/// The field a check of [`check_times`] refuses (the file parser turns it into a position).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeField {
    /// A key of the `[sched]` table.
    SchedKey(&'static str),
    TickUs,
    DurationMs,
    EpochMs,
}

impl TimeField {
    /// The field path as errors name it.
    fn path(self) -> String {
        match self {
            TimeField::SchedKey(k) => format!("sched.{k}"),
            TimeField::TickUs => "tick_us".into(),
            TimeField::DurationMs => "duration_ms".into(),
            TimeField::EpochMs => "epoch_ms".into(),
        }
    }
}

/// Offset of the first `[[name]]` header line in `src`, if any.
fn table_array_offset(src: &str, name: &str) -> Option<usize> {
    let header = format!("[[{name}]]");
    let mut off = 0;
    for line in src.split_inclusive('\n') {
        let t = line.trim();
        if t == header
            || t.starts_with(&format!("{header} "))
            || t.starts_with(&format!("{header}#"))
        {
            return Some(off + (line.len() - line.trim_start().len()));
        }
        off += line.len();
    }
    None
}

/// `text` with every run of more than 24 digits cut to its first 6 and its length: toml
/// spells `duration_ms = 1e300` back as a float of 301 digits.
fn shorten_digits(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(512));
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() > 24 {
            out.push_str(&format!("{}... ({} digits)", &run[..6], run.len()));
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            run.push(ch);
        } else {
            flush(&mut run, &mut out);
            out.push(ch);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Whether `ms` milliseconds fit in a u64 of nanoseconds (the engine's unit).
fn fits_ns(ms: u64) -> bool {
    ms.checked_mul(1_000_000).is_some()
}

/// The checks of a scenario's times and scheduler parameters, made the same way for a file
/// ([`Scenario::from_toml_str_with`]) and for a scenario built in code
/// ([`ScenarioBuilder::build`]): the first failing one, with the field it is about.
fn check_times(
    tick_us: u64,
    duration_ms: u64,
    epoch_ms: u64,
    sched: &SchedParams,
) -> Result<(), (TimeField, String)> {
    sched
        .check()
        .map_err(|(key, m)| (TimeField::SchedKey(key), m))?;
    if !(10..=MAX_TICK_US).contains(&tick_us) {
        return Err((
            TimeField::TickUs,
            format!(
                "tick_us must be between 10 and {MAX_TICK_US} (a 100 Hz kernel's tick, the \
                 coarsest Linux has), got {tick_us}"
            ),
        ));
    }
    if duration_ms == 0 {
        return Err((
            TimeField::DurationMs,
            "duration_ms must be at least 1".into(),
        ));
    }
    // Times become nanoseconds in the engine: refuse what would not fit in a u64.
    if !fits_ns(epoch_ms) {
        return Err((
            TimeField::EpochMs,
            format!(
                "epoch_ms {epoch_ms} is too large (at most {} ms)",
                u64::MAX / 1_000_000
            ),
        ));
    }
    if epoch_ms == 0 || epoch_ms * 1000 < tick_us {
        return Err((
            TimeField::EpochMs,
            format!("epoch_ms must be at least one tick ({tick_us} us), got {epoch_ms}"),
        ));
    }
    // The engine advances whole ticks: a duration or an epoch that is not a whole number
    // of them would silently become another one.
    for (field, name, ms) in [
        (TimeField::DurationMs, "duration_ms", duration_ms),
        (TimeField::EpochMs, "epoch_ms", epoch_ms),
    ] {
        if (u128::from(ms) * 1000) % u128::from(tick_us) != 0 {
            return Err((
                field,
                format!(
                    "{name} {ms} is not a whole number of ticks ({tick_us} us each): \
                     the engine would run {} us; use a multiple of the tick",
                    (u128::from(ms) * 1000).div_ceil(u128::from(tick_us)) * u128::from(tick_us)
                ),
            ));
        }
    }
    for (name, ms) in [
        ("timeslice_ms", sched.timeslice_ms),
        ("balance_interval_ms", sched.balance_interval_ms),
    ] {
        if ms * 1000.0 < tick_us as f64 {
            return Err((
                TimeField::SchedKey(name),
                format!("{name} must be at least one tick ({tick_us} us), got {ms}"),
            ));
        }
    }
    Ok(())
}

/// Why a task starting at `start_ms` is refused in a run of `duration_ms` at `tick_us`, if it
/// is: at or after the end of the run, or between two ticks. The engine admits a task at a
/// tick, so a start between ticks would silently become the next tick, while its progress
/// and time per program would still be reckoned from the time written (physics probe, session
/// 25: gzip alone starting at 1 ms with 2 ms ticks reported progress 0.947).
fn start_refused(start_ms: u64, duration_ms: u64, tick_us: u64) -> Option<String> {
    if start_ms >= duration_ms {
        return Some(format!(
            "start_ms {start_ms} is at or after the end of the run (duration_ms {duration_ms}): \
             the task would never run"
        ));
    }
    if (u128::from(start_ms) * 1000) % u128::from(tick_us.max(1)) != 0 {
        return Some(format!(
            "start_ms {start_ms} is not a whole number of ticks ({tick_us} us each): the task \
             would start at {} us; use a multiple of the tick",
            (u128::from(start_ms) * 1000).div_ceil(u128::from(tick_us.max(1)))
                * u128::from(tick_us)
        ));
    }
    None
}

impl Scenario {
    /// Check a resolved scenario as a scenario file is checked (times, scheduler parameters,
    /// tasks, affinities, the limits that keep the engine's arithmetic and memory sound; not
    /// the file's cost budget, [`Limits`]): what [`ScenarioBuilder::build`] calls. The error
    /// names the scenario and the field (no line: there is no file).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let refuse = |path: String, message: String| ScenarioError {
            file: format!("scenario {:?}", self.name),
            line: 0,
            column: 0,
            path,
            message,
        };
        check_times(self.tick_us, self.duration_ms, self.epoch_ms, &self.sched)
            .map_err(|(field, m)| refuse(field.path(), m))?;
        if !fits_ns(self.duration_ms) {
            return Err(refuse(
                "duration_ms".into(),
                format!(
                    "duration_ms {} is too large (at most {} ms)",
                    self.duration_ms,
                    u64::MAX / 1_000_000
                ),
            ));
        }
        if self.tasks.is_empty() {
            return Err(refuse(
                "task".into(),
                "a scenario needs at least one task".into(),
            ));
        }
        if self.tasks.len() as u64 > MAX_TASKS {
            return Err(refuse(
                "task".into(),
                format!("{} tasks: more than {MAX_TASKS} tasks", self.tasks.len()),
            ));
        }
        let all = self
            .machine
            .topology()
            .map_err(|e| refuse("machine".into(), e.to_string()))?
            .all_cpus();
        for (i, t) in self.tasks.iter().enumerate() {
            if !fits_ns(t.start_ms) {
                return Err(refuse(
                    format!("task[{i}].start_ms"),
                    format!(
                        "start_ms {} is too large (at most {} ms)",
                        t.start_ms,
                        u64::MAX / 1_000_000
                    ),
                ));
            }
            if let Some(why) = start_refused(t.start_ms, self.duration_ms, self.tick_us) {
                return Err(refuse(format!("task[{i}].start_ms"), why));
            }
            if t.name.trim().is_empty() {
                return Err(refuse(
                    format!("task[{i}].name"),
                    "a task's name must not be empty".into(),
                ));
            }
            if let Workload::Shell(ps) = &t.workload {
                if ps.is_empty() {
                    return Err(refuse(
                        format!("task[{i}].shell"),
                        "a shell needs at least one program".into(),
                    ));
                }
            }
            if let Some(set) = &t.affinity {
                if set.is_empty() {
                    return Err(refuse(format!("task[{i}].cpus"), "empty CPU list".into()));
                }
                if !set.is_subset(&all) {
                    return Err(refuse(
                        format!("task[{i}].cpus"),
                        format!(
                            "CPU list {:?} names CPUs the machine {} does not have (it has {})",
                            set.to_list(),
                            self.machine.name,
                            all.to_list()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Load a scenario file within the default [`Limits`].
    pub fn from_file(path: &Path, catalog: &Catalog) -> Result<Self, ScenarioError> {
        Self::from_file_with(path, catalog, Limits::default())
    }

    /// Load a scenario file within `limits`.
    pub fn from_file_with(
        path: &Path,
        catalog: &Catalog,
        limits: Limits,
    ) -> Result<Self, ScenarioError> {
        let file = path.display().to_string();
        let refuse = |message: String| ScenarioError {
            file: file.clone(),
            line: 0,
            column: 0,
            path: "<document>".into(),
            message,
        };
        // A scenario is a page of TOML: refuse a huge file before reading it (the parser's
        // error path copies its whole input).
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| {
                use std::io::Read;
                f.take(MAX_SCENARIO_BYTES + 1).read_to_end(&mut bytes)
            })
            .map_err(|e| refuse(format!("cannot read: {e}")))?;
        if bytes.len() as u64 > MAX_SCENARIO_BYTES {
            return Err(refuse(format!(
                "larger than {} MiB: not a scenario file",
                MAX_SCENARIO_BYTES >> 20
            )));
        }
        let src = String::from_utf8(bytes)
            .map_err(|e| refuse(format!("cannot read: not UTF-8 text ({e})")))?;
        Self::from_toml_str_with(&src, &file, catalog, limits)
    }

    /// Parse and validate scenario TOML within the default [`Limits`]; `file` names the source
    /// in errors.
    pub fn from_toml_str(src: &str, file: &str, catalog: &Catalog) -> Result<Self, ScenarioError> {
        Self::from_toml_str_with(src, file, catalog, Limits::default())
    }

    /// Simulated task-ticks the scenario asks for: tasks x duration in ticks (what the engine's
    /// time grows with; the solo reference runs double it at most).
    pub fn task_ticks(&self) -> u128 {
        let ticks = u128::from(self.duration_ms) * 1000 / u128::from(self.tick_us.max(1));
        ticks * self.tasks.len() as u128
    }

    /// Parse and validate scenario TOML within `limits`.
    pub fn from_toml_str_with(
        src: &str,
        file: &str,
        catalog: &Catalog,
        limits: Limits,
    ) -> Result<Self, ScenarioError> {
        let err_at = |offset: usize, message: String| {
            let (line, column) = line_col(src, offset);
            ScenarioError {
                file: file.to_string(),
                line,
                column,
                path: path_at(src, offset),
                message,
            }
        };
        // An error about the document as a whole (a missing top-level key, no task) has no
        // field to name: the first key's name there read as the culprit (`1:1: name: missing
        // field machine`, a probe found).
        let err_doc = |message: String| ScenarioError {
            file: file.to_string(),
            line: 1,
            column: 1,
            path: "<document>".into(),
            message,
        };
        let parsed: ScenarioFile = toml::from_str(src).map_err(|e| {
            // `[[sched]]` (an array of tables, as `[[task]]` is) read as "sched[0]: invalid
            // type: map, expected f64"; named for what it is (CLI probe, session 27).
            if let Some(off) = table_array_offset(src, "sched") {
                return err_at(
                    off,
                    "`[[sched]]` is an array of tables; the scheduler takes one table, `[sched]`"
                        .into(),
                );
            }
            // toml's message repeats the location and a source excerpt; keep the reason only.
            let reason = e.message().trim();
            let reason = if reason.is_empty() {
                "invalid TOML".to_string()
            } else {
                shorten_digits(reason)
            };
            // toml spans a missing top-level key over the top-level table, from offset 0.
            let whole = |s: &std::ops::Range<usize>| {
                s.start == 0 && (s.end >= src.trim_end().len() || reason.starts_with("missing"))
            };
            match e.span() {
                Some(s) if !whole(&s) => err_at(s.start, reason),
                _ => err_doc(reason),
            }
        })?;
        let machine_name = parsed.machine.get_ref();
        let mut machine = catalog.machine(machine_name).ok_or_else(|| {
            err_at(
                parsed.machine.span().start,
                format!(
                    "unknown machine {machine_name:?}; the catalog has: {}",
                    catalog.machine_names().join(", ")
                ),
            )
        })?;
        if let Some(m) = parsed.model {
            machine.model = m;
        }
        let sched = parsed.sched.unwrap_or_default();
        let (tick_us, duration_ms, epoch_ms) = (
            *parsed.tick_us.get_ref(),
            *parsed.duration_ms.get_ref(),
            *parsed.epoch_ms.get_ref(),
        );
        // The same checks as a scenario built in code; here the field becomes a position.
        check_times(tick_us, duration_ms, epoch_ms, &sched).map_err(|(field, message)| {
            let sched_at = src.find("[sched]").unwrap_or(0);
            let off = match field {
                // The key inside the `[sched]` table (not a comment or a name elsewhere).
                TimeField::SchedKey(name) => src[sched_at..]
                    .match_indices(name)
                    .map(|(i, _)| sched_at + i)
                    .find(|&i| src[i + name.len()..].trim_start().starts_with('='))
                    .unwrap_or(sched_at),
                TimeField::TickUs => parsed.tick_us.span().start,
                TimeField::DurationMs => parsed.duration_ms.span().start,
                TimeField::EpochMs => parsed.epoch_ms.span().start,
            };
            err_at(off, message)
        })?;
        let topo = machine
            .topology()
            .map_err(|e| err_at(parsed.machine.span().start, e.to_string()))?;
        let all = topo.all_cpus();
        // Where `key` is written inside task entry `t` (the entry's start if it is not).
        let key_in = |t: &toml::Spanned<TaskFile>, key: &str| {
            let (a, b) = (t.span().start.min(src.len()), t.span().end.min(src.len()));
            src.get(a..b)
                .and_then(|text| text.find(key))
                .map_or(a, |o| a + o)
        };
        // Count the tasks before building any (a huge `count` must not allocate).
        let mut total_tasks = 0u64;
        for (i, t) in parsed.task.iter().enumerate() {
            total_tasks = total_tasks.saturating_add(*t.get_ref().count.get_ref());
            if total_tasks > MAX_TASKS {
                let off = key_in(t, "count");
                return Err(ScenarioError {
                    path: format!("task[{i}].count"),
                    ..err_at(
                        off,
                        format!(
                            "count {} brings the scenario to more than {MAX_TASKS} tasks",
                            t.get_ref().count.get_ref()
                        ),
                    )
                });
            }
            if !fits_ns(t.get_ref().start_ms) {
                return Err(ScenarioError {
                    path: format!("task[{i}].start_ms"),
                    ..err_at(
                        key_in(t, "start_ms"),
                        format!(
                            "start_ms {} is too large (at most {} ms)",
                            t.get_ref().start_ms,
                            u64::MAX / 1_000_000
                        ),
                    )
                });
            }
        }
        if let Some(budget) = limits.task_tick_budget {
            let ticks = u128::from(duration_ms) * 1000 / u128::from(tick_us);
            let cost = ticks * u128::from(total_tasks);
            if cost > u128::from(budget) {
                return Err(err_at(
                    parsed.duration_ms.span().start,
                    format!(
                        "the scenario asks for {cost} simulated task-ticks ({total_tasks} task{} x \
                         {ticks} ticks), beyond the budget of {budget}; shorten duration_ms or \
                         run fewer tasks (`counterpoint simulate --force` runs it anyway; \
                         `bench sim` times only scenarios within the budget)",
                        if total_tasks == 1 { "" } else { "s" }
                    ),
                ));
            }
        }
        let epochs = u128::from(duration_ms) / u128::from((*parsed.epoch_ms.get_ref()).max(1));
        let points = epochs * u128::from(total_tasks);
        if points > u128::from(MAX_SERIES_POINTS) {
            // At the file's epoch_ms, or at duration_ms when the epoch is the default.
            let given = parsed.epoch_ms.span();
            let off = if given.end > given.start {
                given.start
            } else {
                parsed.duration_ms.span().start
            };
            return Err(err_at(
                off,
                format!(
                    "the time series would hold {points} points ({total_tasks} tasks x {epochs} \
                     epochs), more than {MAX_SERIES_POINTS}; raise epoch_ms or shorten \
                     duration_ms"
                ),
            ));
        }
        if !fits_ns(duration_ms) {
            return Err(err_at(
                parsed.duration_ms.span().start,
                format!(
                    "duration_ms {duration_ms} is too large (at most {} ms)",
                    u64::MAX / 1_000_000
                ),
            ));
        }
        let mut tasks = Vec::with_capacity(total_tasks as usize);
        for (i, t) in parsed.task.iter().enumerate() {
            if let Some(why) = start_refused(t.get_ref().start_ms, duration_ms, tick_us) {
                return Err(ScenarioError {
                    path: format!("task[{i}].start_ms"),
                    ..err_at(key_in(t, "start_ms"), why)
                });
            }
            if t.get_ref()
                .name
                .as_deref()
                .is_some_and(|n| n.trim().is_empty())
            {
                return Err(ScenarioError {
                    path: format!("task[{i}].name"),
                    ..err_at(
                        key_in(t, "name"),
                        "a task's name must not be empty (leave it out for the workload's)".into(),
                    )
                });
            }
            let span = t.span();
            let t = t.get_ref();
            let kinds = [t.program.is_some(), t.shell.is_some(), t.server.is_some()];
            if kinds.iter().filter(|k| **k).count() != 1 {
                return Err(ScenarioError {
                    path: format!("task[{i}]"),
                    ..err_at(
                        span.start,
                        "a task needs exactly one of `program`, `shell` or `server`".into(),
                    )
                });
            }
            let unknown = |s: &toml::Spanned<String>, what: &str, names: Vec<String>| {
                err_at(
                    s.span().start,
                    format!(
                        "unknown {what} {:?}; the catalog has: {}",
                        s.get_ref(),
                        names.join(", ")
                    ),
                )
            };
            let workload = if let Some(p) = &t.program {
                Workload::Program(
                    catalog
                        .program(p.get_ref())
                        .ok_or_else(|| unknown(p, "program", catalog.program_names()))?,
                )
            } else if let Some(s) = &t.server {
                Workload::Server(
                    catalog
                        .server(s.get_ref())
                        .ok_or_else(|| unknown(s, "server", catalog.server_names()))?,
                )
            } else if let Some(sh) = &t.shell {
                let mut ps = Vec::new();
                for name in sh.get_ref() {
                    ps.push(catalog.program(name).ok_or_else(|| {
                        err_at(
                            sh.span().start,
                            format!(
                                "unknown program {name:?} in shell; the catalog has: {}",
                                catalog.program_names().join(", ")
                            ),
                        )
                    })?);
                }
                if ps.is_empty() {
                    return Err(err_at(
                        sh.span().start,
                        "a shell needs at least one program".into(),
                    ));
                }
                Workload::Shell(ps)
            } else {
                unreachable!("exactly one kind checked above")
            };
            let affinity = match &t.cpus {
                None => None,
                Some(c) => {
                    let set = CpuSet::parse_list(c.get_ref())
                        .map_err(|e| err_at(c.span().start, e.to_string()))?;
                    if set.is_empty() {
                        return Err(err_at(c.span().start, "empty CPU list".into()));
                    }
                    if !set.is_subset(&all) {
                        return Err(err_at(
                            c.span().start,
                            format!(
                                "CPU list {:?} names CPUs the machine {} does not have (it has {})",
                                c.get_ref(),
                                machine.name,
                                all.to_list()
                            ),
                        ));
                    }
                    Some(set)
                }
            };
            let count = *t.count.get_ref();
            if count == 0 {
                // At the `count` key's value, not the task's header (CLI probe, session 27).
                return Err(ScenarioError {
                    path: format!("task[{i}].count"),
                    ..err_at(t.count.span().start, "count must be at least 1".into())
                });
            }
            for k in 0..count {
                let base = t.name.clone().unwrap_or_else(|| workload.label());
                let name = if count > 1 {
                    format!("{base}#{k}")
                } else {
                    base
                };
                tasks.push(TaskSpec {
                    name,
                    workload: workload.clone(),
                    affinity: affinity.clone(),
                    repeat: t.repeat,
                    start_ms: t.start_ms,
                });
            }
        }
        if tasks.is_empty() {
            return Err(err_doc("a scenario needs at least one [[task]]".into()));
        }
        Ok(Scenario {
            name: parsed.name,
            machine,
            sched,
            tick_us,
            duration_ms,
            epoch_ms,
            seed: parsed.seed,
            policy: parsed.policy,
            tasks,
        })
    }

    /// Start a scenario programmatically on a catalog machine.
    pub fn builder(catalog: &Catalog, machine: &str) -> Result<ScenarioBuilder, String> {
        let m = catalog.machine(machine).ok_or_else(|| {
            format!(
                "unknown machine {machine:?}; the catalog has: {}",
                catalog.machine_names().join(", ")
            )
        })?;
        Ok(ScenarioBuilder {
            catalog: catalog.clone(),
            scenario: Scenario {
                name: "programmatic".into(),
                machine: m,
                sched: SchedParams::default(),
                tick_us: 1000,
                duration_ms: 1000,
                epoch_ms: 100,
                seed: 0,
                policy: "linux".into(),
                tasks: Vec::new(),
            },
        })
    }
}

/// Builds a [`Scenario`] in code: machine, then tasks by catalog name.
#[derive(Clone, Debug)]
pub struct ScenarioBuilder {
    catalog: Catalog,
    scenario: Scenario,
}

impl ScenarioBuilder {
    /// Set the scenario name.
    pub fn name(mut self, name: &str) -> Self {
        self.scenario.name = name.into();
        self
    }
    /// Set the simulated duration.
    pub fn duration_ms(mut self, ms: u64) -> Self {
        self.scenario.duration_ms = ms;
        self
    }
    /// Set the interval between policy decisions.
    pub fn epoch_ms(mut self, ms: u64) -> Self {
        self.scenario.epoch_ms = ms;
        self
    }
    /// Set the simulation tick.
    pub fn tick_us(mut self, us: u64) -> Self {
        self.scenario.tick_us = us;
        self
    }
    /// Set the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.scenario.seed = seed;
        self
    }
    /// Choose the physics (`v1` or `v2`).
    pub fn model(mut self, model: Model) -> Self {
        self.scenario.machine.model = model;
        self
    }
    /// Set the baseline scheduler's parameters.
    pub fn sched(mut self, sched: SchedParams) -> Self {
        self.scenario.sched = sched;
        self
    }
    /// Add a repeating task running catalog program or server `name`, optionally pinned.
    pub fn task(mut self, name: &str, affinity: Option<CpuSet>) -> Result<Self, String> {
        let workload = if let Some(p) = self.catalog.program(name) {
            Workload::Program(p)
        } else if let Some(s) = self.catalog.server(name) {
            Workload::Server(s)
        } else {
            return Err(format!("unknown program or server {name:?}"));
        };
        self.scenario.tasks.push(TaskSpec {
            name: name.into(),
            workload,
            affinity,
            repeat: true,
            start_ms: 0,
        });
        Ok(self)
    }
    /// Add a fully specified task.
    pub fn task_spec(mut self, spec: TaskSpec) -> Self {
        self.scenario.tasks.push(spec);
        self
    }
    /// The scenario, checked as a scenario file is ([`Scenario::validate`]): a duration or an
    /// epoch that is not a whole number of ticks, a timeslice shorter than a tick, no task,
    /// ... are refused here too.
    pub fn build(self) -> Result<Scenario, ScenarioError> {
        self.scenario.validate()?;
        Ok(self.scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_of_offsets() {
        let src = "name = \"x\"\n[[task]]\nprogram = \"gzip\"\n[[task]]\ncpus = \"9\"\n";
        let off = src.find("cpus").unwrap();
        assert_eq!(path_at(src, off), "task[1].cpus");
        assert_eq!(path_at(src, 0), "name");
        assert_eq!(line_col(src, off), (5, 1));
        // Inline arrays and tables are named down to the key (they read as `task`).
        let src =
            "name = \"x\"\ntask = [ { program = \"mcf\" }, { program = \"gcc\", cpus = 7 } ]\n";
        let off = src.find('7').unwrap();
        assert_eq!(path_at(src, off), "task[1].cpus");
        assert_eq!(path_at(src, src.find("gcc").unwrap()), "task[1].program");
        let src = "[sched]\ntimeslice_ms = [1, \"x\"]\n";
        assert_eq!(
            path_at(src, src.find("\"x").unwrap()),
            "sched.timeslice_ms[1]"
        );
        let src = "t = [ { a.b = 1, c = 2 } ]\n";
        assert_eq!(path_at(src, src.find('1').unwrap()), "t[0].a.b");
        assert_eq!(path_at(src, src.find('2').unwrap()), "t[0].c");
        // A document that does not parse is still read off its lines.
        let src = "name = \"x\"\n[[task]]\nprogram = \n";
        assert_eq!(
            path_at(src, src.find("program").unwrap()),
            "task[0].program"
        );
    }

    #[test]
    fn long_numbers_in_messages_are_cut() {
        let huge = format!("floating point `1{}`, expected u64", "0".repeat(300));
        assert_eq!(
            shorten_digits(&huge),
            "floating point `100000... (301 digits)`, expected u64"
        );
        assert_eq!(shorten_digits("got 123456, at 7"), "got 123456, at 7");
    }

    #[test]
    fn sched_errors_point_at_their_key() {
        let src = "name = \"t\"\nmachine = \"zhang-smp\"\nduration_ms = 100\n[[task]]\n\
                   program = \"gzip\"\n[sched]\ntimeslice_jitter = 0.1\ntimeslice_ms = 0\n";
        let e = Scenario::from_toml_str(src, "s.toml", &Catalog::builtin()).unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (8, "sched.timeslice_ms"), "{e}");
        let e = Scenario::from_toml_str(
            &src.replace("timeslice_ms = 0", "timeslice_jitter = 2")
                .replace("timeslice_jitter = 0.1\n", ""),
            "s.toml",
            &Catalog::builtin(),
        )
        .unwrap_err();
        assert_eq!(e.path, "sched.timeslice_jitter", "{e}");
    }
}
