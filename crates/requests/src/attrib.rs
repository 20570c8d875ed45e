//! External attribution: a server process's (or thread's) counters, opened through the counters
//! layer, read at each client-delimited request boundary; the delta between a request's two
//! readings is the request's.

use crate::RequestsError;
use counterpoint_core::sample::CounterValue;
use counterpoint_counters::count::Status;
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

/// What is counted per request: software events everywhere, hardware events where a PMU exists
/// (here they are listed as not supported with the reason, never invented).
pub const DEFAULT_EVENTS: &str =
    "task-clock,context-switches,page-faults,cycles,instructions,llc-misses,mem-transactions";

/// The counters of one server task, read at request boundaries.
pub struct TaskCounters {
    set: CounterSet,
    names: Vec<String>,
    unsupported: BTreeMap<String, String>,
}

/// One reading of every event (`None`: not supported).
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot(pub Vec<Option<CounterValue>>);

/// One event's delta over a request.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Delta {
    /// The count, scaled by the request's own running/enabled share when multiplexed.
    pub value: f64,
    /// Share of the request the counter ran (1.0 unless multiplexed).
    pub coverage: f64,
}

impl TaskCounters {
    /// Open `events` (perf syntax) on thread or process `tid` (its threads now; a PostgreSQL
    /// backend is one process with one thread). Events the machine cannot count are kept as
    /// unsupported with the reason.
    pub fn open(tid: i32, events: &str) -> Result<Self, RequestsError> {
        let tree = PmuTree::new("/sys");
        let list = parse_event_list(events, &tree)?;
        let target = Target::process(tid)?;
        let mut set = CounterSet::open(&list, &target, &tree)?;
        set.enable()?;
        let names: Vec<String> = set.specs().iter().map(|s| s.name.clone()).collect();
        let mut unsupported = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            if let Some(Status::NotSupported(why)) = set.status(i) {
                unsupported.insert(n.clone(), why.clone());
            }
        }
        Ok(TaskCounters {
            set,
            names,
            unsupported,
        })
    }

    /// Event names in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Events not counted here, with the reason.
    pub fn unsupported(&self) -> &BTreeMap<String, String> {
        &self.unsupported
    }

    /// One read of every event (one `read(2)` per counter).
    pub fn read(&self) -> Result<Snapshot, RequestsError> {
        Ok(Snapshot(
            self.set.read_all()?.into_iter().map(|r| r.value).collect(),
        ))
    }
}

/// Per-event deltas from `a` to `b`, by name; unsupported events are absent. A count that went
/// backwards is an error (never a wrapped number).
pub fn deltas(
    names: &[String],
    a: &Snapshot,
    b: &Snapshot,
) -> Result<BTreeMap<String, Delta>, RequestsError> {
    let mut out = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let (Some(Some(x)), Some(Some(y))) = (a.0.get(i), b.0.get(i)) else {
            continue;
        };
        if y.raw < x.raw {
            return Err(RequestsError::Backwards(name.clone()));
        }
        // Scaled by the request's own running/enabled share, as every reading is.
        let d = y.delta_since(x);
        let (value, coverage) = (d.scaled().unwrap_or(0.0), d.counted_fraction());
        out.insert(name.clone(), Delta { value, coverage });
    }
    Ok(out)
}

/// One request as attributed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestRow {
    /// Sequence number over the run.
    pub id: u64,
    /// Client (connection) that issued it.
    pub client: usize,
    /// The server task whose counters were read (a PostgreSQL backend's pid).
    pub server_tid: i32,
    /// Template or class label given by the client.
    pub class: String,
    /// Start of the request since the run began (client's clock).
    pub start_ns: u64,
    /// Client-side wall time from just before sending to just after the reply.
    pub wall_ns: u64,
    /// Rows the server returned; `None` when the client did not say (`end ID` without ROWS):
    /// JSON `null` and an empty CSV field, never a 0 that reads as "no rows" (CLI probe,
    /// session 29).
    pub rows: Option<u64>,
    /// Per event delta over the request.
    pub counts: BTreeMap<String, Delta>,
}

impl RequestRow {
    /// An event's value, 0 when it was not counted.
    pub fn get(&self, event: &str) -> f64 {
        self.counts.get(event).map_or(0.0, |d| d.value)
    }
}

/// Write rows as JSON lines.
pub fn write_json_lines(mut w: impl Write, rows: &[RequestRow]) -> std::io::Result<()> {
    for r in rows {
        serde_json::to_writer(&mut w, r)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Whether `event` (as spelled, modifiers after `:` aside) counts nanoseconds: the software
/// clocks `task-clock` and `cpu-clock` (perf prints them in msec; the kernel counts ns).
fn counts_nanoseconds(event: &str) -> bool {
    let name = event.split(':').next().unwrap_or(event).trim();
    matches!(name, "task-clock" | "cpu-clock")
}

/// The CSV column of `event`'s value: its name, with `_ns` for the clocks (`task-clock_ns`),
/// whose values are nanoseconds; other events are counts, without a unit.
pub fn csv_value_column(event: &str) -> String {
    if counts_nanoseconds(event) {
        format!("{event}_ns")
    } else {
        event.to_string()
    }
}

/// Write rows as CSV: fixed columns (`start_ns`, `wall_ns` in nanoseconds; `rows` empty when
/// the client did not give it), then per counted event its value (`EVENT`, or `EVENT_ns` for
/// the clocks: [`csv_value_column`]) and `EVENT_coverage` (the share of the request it ran, 0
/// to 1); both empty when the request has no value for it.
pub fn write_csv(mut w: impl Write, rows: &[RequestRow], events: &[String]) -> std::io::Result<()> {
    write!(w, "id,client,server_tid,class,start_ns,wall_ns,rows")?;
    for e in events {
        write!(w, ",{},{e}_coverage", csv_value_column(e))?;
    }
    writeln!(w)?;
    for r in rows {
        write!(
            w,
            "{},{},{},{},{},{},{}",
            r.id,
            r.client,
            r.server_tid,
            csv_field(&r.class),
            r.start_ns,
            r.wall_ns,
            r.rows.map_or(String::new(), |n| n.to_string())
        )?;
        for e in events {
            match r.counts.get(e) {
                Some(d) => write!(w, ",{},{}", d.value, d.coverage)?,
                None => write!(w, ",,")?,
            }
        }
        writeln!(w)?;
    }
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Whether a number failed to parse for being above `u64::MAX` (a whole number, only too
/// large): said so, not "not a whole number" (CLI probe, session 29).
fn too_large(e: &std::num::ParseIntError) -> bool {
    matches!(e.kind(), std::num::IntErrorKind::PosOverflow)
}

/// The longest boundary line accepted, in bytes (without its newline): a real one is a few
/// words; anything longer is refused ([`line_too_long`]) rather than buffered.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Characters of a bad input line (or word) quoted in an error message.
const QUOTED_CHARS: usize = 80;

/// The first [`QUOTED_CHARS`] characters of `text`, or `None` when it is no longer than that.
fn shortened(text: &str) -> Option<&str> {
    text.char_indices()
        .nth(QUOTED_CHARS)
        .map(|(cut, _)| &text[..cut])
}

/// `text` in quotes for an error message: whole when short, otherwise its first 80 characters,
/// an ellipsis and its length (`'aaaa…' (300000000 bytes)`), so a huge bad line does not make
/// a huge message.
fn quote_input(text: &str) -> String {
    match shortened(text) {
        Some(head) => format!("'{head}…' ({} bytes)", text.len()),
        None => format!("'{text}'"),
    }
}

/// The error for input line `lineno` when it is longer than [`MAX_LINE_BYTES`], quoting the
/// start of it (`start`: as much of the line as was read; its first 80 characters are shown).
pub fn line_too_long(lineno: usize, start: &str) -> RequestsError {
    let head = shortened(start).unwrap_or(start);
    RequestsError::Invalid(format!(
        "input line {lineno}: longer than {MAX_LINE_BYTES} bytes, refused (a boundary line is \
         `begin ID [CLASS]` or `end ID [ROWS]`; this one starts '{head}…')"
    ))
}

/// External attribution driven by boundary lines, for any server: `begin ID [CLASS]` just
/// before the client sends request ID, `end ID [ROWS]` just after its reply; `#` starts a
/// comment. One request at a time per counted task (a second `begin` while one is open is
/// refused: the task's counts cannot be split between two requests it serves at once).
pub struct BoundarySession {
    counters: TaskCounters,
    tid: i32,
    /// The task's `/proc` stat file, kept open: once the task has exited, reading it fails
    /// (even if its id is reused), so a dead server is noticed at the next boundary.
    stat: Option<std::fs::File>,
    t0: std::time::Instant,
    open: Option<(u64, String, Snapshot, std::time::Instant)>,
}

impl BoundarySession {
    /// Count `events` on `tid` from now.
    pub fn new(tid: i32, events: &str) -> Result<Self, RequestsError> {
        let counters = TaskCounters::open(tid, events)?;
        Ok(BoundarySession {
            counters,
            tid,
            stat: std::fs::File::open(format!("/proc/{tid}/stat")).ok(),
            t0: std::time::Instant::now(),
            open: None,
        })
    }

    /// The request begun and not yet ended, if any (at the end of the input: never measured).
    pub fn open_request(&self) -> Option<u64> {
        self.open.as_ref().map(|o| o.0)
    }

    /// The counters.
    pub fn counters(&self) -> &TaskCounters {
        &self.counters
    }

    /// Whether the counted task still runs: its kept-open stat file still reads, and it is
    /// not a zombie (`Z`) or dead (`X`). Without the file (no `/proc`), assumed alive.
    pub fn task_alive(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(f) = &self.stat else {
            return true;
        };
        let mut buf = [0u8; 512];
        match f.read_at(&mut buf, 0) {
            Ok(n) if n > 0 => {
                let text = String::from_utf8_lossy(&buf[..n]);
                // The state follows the last `)` (the name may hold any character).
                let state = text
                    .rfind(')')
                    .and_then(|i| text[i + 1..].split_whitespace().next());
                !matches!(state, Some("Z" | "X"))
            }
            _ => false,
        }
    }

    /// Handle one input line (`lineno` counts from 1, for messages); a finished request comes
    /// back on its `end` line. A boundary after the task has exited is
    /// [`RequestsError::TaskGone`]: its counters stopped, a delta would say 0 wrongly. A line
    /// longer than [`MAX_LINE_BYTES`] is refused; a bad one is quoted in the error only in part
    /// (its first 80 characters and its length) when long.
    pub fn line(&mut self, line: &str, lineno: usize) -> Result<Option<RequestRow>, RequestsError> {
        if line.len() > MAX_LINE_BYTES {
            return Err(line_too_long(lineno, line));
        }
        let bad = |msg: String| RequestsError::Invalid(format!("input line {lineno}: {msg}"));
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return Ok(None);
        }
        let mut w = line.split_whitespace();
        let verb = w.next().unwrap_or("");
        let id_word = w
            .next()
            .ok_or_else(|| bad(format!("{} needs a request id", quote_input(verb))))?;
        let id: u64 = id_word.parse().map_err(|e: std::num::ParseIntError| {
            bad(if too_large(&e) {
                format!(
                    "request id {} is too large (at most {})",
                    quote_input(id_word),
                    u64::MAX
                )
            } else {
                format!(
                    "request id in {} is not a non-negative integer",
                    quote_input(line)
                )
            })
        })?;
        if matches!(verb, "begin" | "end") && !self.task_alive() {
            return Err(RequestsError::TaskGone { tid: self.tid });
        }
        match verb {
            "begin" => {
                if let Some((open, ..)) = &self.open {
                    return Err(bad(format!(
                        "begin {id} while request {open} is still open on task {}",
                        self.tid
                    )));
                }
                let class = w.collect::<Vec<_>>().join(" ");
                let start = std::time::Instant::now();
                let snap = self.counters.read()?;
                self.open = Some((id, class, snap, start));
                Ok(None)
            }
            "end" => {
                let snap = self.counters.read()?;
                let now = std::time::Instant::now();
                let rows = match w.next() {
                    Some(r) => Some(r.parse::<u64>().map_err(|e| {
                        bad(if too_large(&e) {
                            format!(
                                "row count {} is too large (at most {})",
                                quote_input(r),
                                u64::MAX
                            )
                        } else {
                            format!(
                                "row count {} is not a whole number of rows (0 or more)",
                                quote_input(r)
                            )
                        })
                    })?),
                    None => None,
                };
                match self.open.take() {
                    Some((open, class, a, start)) if open == id => Ok(Some(RequestRow {
                        id,
                        client: 0,
                        server_tid: self.tid,
                        class,
                        start_ns: u64::try_from(start.duration_since(self.t0).as_nanos())
                            .unwrap_or(u64::MAX),
                        wall_ns: u64::try_from(now.duration_since(start).as_nanos())
                            .unwrap_or(u64::MAX),
                        rows,
                        counts: deltas(self.counters.names(), &a, &snap)?,
                    })),
                    Some((open, class, a, start)) => {
                        self.open = Some((open, class, a, start));
                        Err(bad(format!("end {id} but the open request is {open}")))
                    }
                    None => Err(bad(format!("end {id} without a begin"))),
                }
            }
            other => Err(bad(format!(
                "unknown word {} (expected begin or end)",
                quote_input(other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(raw: u64, e: u64, r: u64) -> Option<CounterValue> {
        Some(CounterValue {
            raw,
            time_enabled_ns: e,
            time_running_ns: r,
        })
    }

    #[test]
    fn deltas_scale_multiplexed_counts_and_refuse_backwards() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let s0 = Snapshot(vec![v(10, 100, 100), v(0, 0, 0), None]);
        let s1 = Snapshot(vec![v(25, 200, 200), v(50, 100, 50), None]);
        let d = deltas(&names, &s0, &s1).unwrap();
        assert_eq!(
            d["a"],
            Delta {
                value: 15.0,
                coverage: 1.0
            }
        );
        assert_eq!(
            d["b"],
            Delta {
                value: 100.0,
                coverage: 0.5
            }
        );
        assert!(!d.contains_key("c"));
        let back = deltas(&names, &s1, &s0).unwrap_err();
        assert!(back.to_string().contains("'a'"), "{back}");
    }

    #[test]
    fn boundary_lines_make_requests_and_refuse_nonsense() {
        let me = std::process::id() as i32;
        let mut s = match BoundarySession::new(me, "task-clock,page-faults") {
            Ok(s) => s,
            Err(e) => return eprintln!("skipped: counters unavailable: {e}"),
        };
        assert!(s.line("# a comment", 1).unwrap().is_none());
        assert!(s.line("begin 4 Q6 fast", 2).unwrap().is_none());
        std::hint::black_box((0..100_000u64).sum::<u64>());
        let r = s.line("end 4 1", 3).unwrap().expect("a request");
        assert_eq!((r.id, r.class.as_str(), r.rows), (4, "Q6 fast", Some(1)));
        assert!(r.counts.contains_key("task-clock"));
        let e = s.line("end 4", 7).unwrap_err().to_string();
        assert!(e.contains("line 7") && e.contains("without a begin"), "{e}");
        s.line("begin 5", 8).unwrap();
        let e = s.line("begin 6", 9).unwrap_err().to_string();
        assert!(e.contains("request 5 is still open"), "{e}");
        let e = s.line("start x", 10).unwrap_err().to_string();
        assert!(e.contains("line 10"), "{e}");
        // A long bad line is quoted in part; one over the limit is refused as such.
        let e = s.line(&"a".repeat(10_000), 11).unwrap_err().to_string();
        assert!(e.contains("(10000 bytes) needs a request id"), "{e}");
        assert!(e.len() < 200, "{e}");
        let e = s.line(&"a".repeat(MAX_LINE_BYTES + 1), 12).unwrap_err();
        assert!(e.to_string().contains("longer than 65536 bytes"), "{e}");
    }

    #[test]
    fn long_bad_input_is_quoted_in_part() {
        assert_eq!(quote_input("begin"), "'begin'");
        let long = "a".repeat(300_000);
        let q = quote_input(&long);
        assert_eq!(q, format!("'{}…' (300000 bytes)", "a".repeat(80)));
        // Cut on a character boundary.
        let wide = "é".repeat(100);
        assert_eq!(
            quote_input(&wide),
            format!("'{}…' (200 bytes)", "é".repeat(80))
        );
        let e = line_too_long(3, &long).to_string();
        assert!(
            e.starts_with("input line 3: longer than 65536 bytes"),
            "{e}"
        );
        assert!(e.len() < 300, "{e}");
    }

    #[test]
    fn csv_has_one_column_pair_per_event_and_quotes_classes() {
        let mut counts = BTreeMap::new();
        counts.insert(
            "task-clock".into(),
            Delta {
                value: 5.0,
                coverage: 1.0,
            },
        );
        let row = RequestRow {
            id: 1,
            client: 0,
            server_tid: 7,
            class: "Q1,a".into(),
            start_ns: 0,
            wall_ns: 9,
            rows: Some(4),
            counts,
        };
        // A row count not given is an empty field, not 0.
        let unsaid = RequestRow {
            rows: None,
            ..row.clone()
        };
        let mut out = Vec::new();
        write_csv(
            &mut out,
            &[row, unsaid],
            &["task-clock".into(), "cycles".into()],
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The clock's column names its unit (its values are ns).
        assert_eq!(
            lines[0],
            "id,client,server_tid,class,start_ns,wall_ns,rows,task-clock_ns,task-clock_coverage,cycles,cycles_coverage"
        );
        assert_eq!(lines[1], "1,0,7,\"Q1,a\",0,9,4,5,1,,");
        assert_eq!(lines[2], "1,0,7,\"Q1,a\",0,9,,5,1,,");
        assert_eq!(csv_value_column("cpu-clock:u"), "cpu-clock:u_ns");
        assert_eq!(csv_value_column("page-faults"), "page-faults");
    }

    /// An `end` without ROWS has no row count (not 0); a number past `u64::MAX` is said to be
    /// too large, naming the limit, not "not a whole number" (CLI probe, session 29).
    #[test]
    fn rows_not_given_are_absent_and_huge_numbers_too_large() {
        let me = std::process::id() as i32;
        let mut s = match BoundarySession::new(me, "task-clock") {
            Ok(s) => s,
            Err(e) => return eprintln!("skipped: counters unavailable: {e}"),
        };
        s.line("begin 1", 1).unwrap();
        let r = s.line("end 1", 2).unwrap().expect("a request");
        assert_eq!(r.rows, None);
        let mut json = Vec::new();
        write_json_lines(&mut json, &[r]).unwrap();
        assert!(String::from_utf8(json).unwrap().contains("\"rows\":null"));
        s.line("begin 2", 3).unwrap();
        let r = s.line("end 2 0", 4).unwrap().expect("a request");
        assert_eq!(r.rows, Some(0));
        s.line("begin 3", 5).unwrap();
        let e = s
            .line("end 3 99999999999999999999999", 6)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("input line 6: row count '99999999999999999999999' is too large (at most 18446744073709551615)"),
            "{e}"
        );
        let e = s.line("end 3 -5", 7).unwrap_err().to_string();
        assert!(e.contains("not a whole number of rows"), "{e}");
        let e = s
            .line("end 18446744073709551616", 8)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "request id '18446744073709551616' is too large (at most 18446744073709551615)"
            ),
            "{e}"
        );
    }
}
