//! `counterpoint requests`: per-request counter statistics (crates/requests, docs/requests.md).
//! `requests run-pg` runs the PostgreSQL TPC-H-shaped harness; `requests --pid PID` attributes
//! any server task's counters to requests delimited by `begin ID [CLASS]` / `end ID [ROWS]`
//! lines on stdin. `bench requests` measures the cost per boundary of both ways in.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use counterpoint_requests::analysis::analyze;
use counterpoint_requests::attrib::{
    line_too_long, BoundarySession, DEFAULT_EVENTS, MAX_LINE_BYTES,
};
use counterpoint_requests::run::{run_pg, RunConfig};
use std::io::{BufRead, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  counterpoint requests run-pg --scale 0.01 --clients 2 --requests 1000 --out req/\n  \
                  printf 'begin 1 login\\nend 1\\n' | counterpoint requests --pid 4242\n\n\
                  Input lines for --pid: `begin ID [CLASS]` just before the client sends request \
                  ID, `end ID [ROWS]` just after its reply (one request open at a time; `#` \
                  comments). One JSON line per request on stdout (or CSV with --csv): wall_ns, \
                  rows (null, or an empty CSV field, when `end` gave none), counts per event \
                  with coverage (0 to 1). task-clock and cpu-clock count ns (CSV column \
                  task-clock_ns); the other events are counts."
)]
pub struct RequestsArgs {
    #[command(subcommand)]
    cmd: Option<RequestsCmd>,
    /// Server process or thread whose counters are attributed to the requests on stdin.
    #[arg(long)]
    pid: Option<i32>,
    /// Events per request (perf syntax); hardware events the machine lacks are reported as not
    /// supported on stderr.
    #[arg(long, default_value = DEFAULT_EVENTS)]
    events: String,
    /// CSV instead of JSON lines.
    #[arg(long)]
    csv: bool,
}

#[derive(Subcommand)]
enum RequestsCmd {
    /// Start a private PostgreSQL, load TPC-H-shaped data, run the query mix from concurrent
    /// clients, attribute each backend's counters per request, cluster and project.
    RunPg(RunPgArgs),
}

#[derive(Args)]
struct RunPgArgs {
    /// TPC-H scale factor in [0.002, 1] (0.01 ≈ 60 000 line items, loads in seconds).
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    /// Concurrent client connections (one backend each).
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Requests over all clients.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Seed of the template choice and parameters.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Events per request (perf syntax).
    #[arg(long, default_value = DEFAULT_EVENTS)]
    events: String,
    /// Directory for requests.jsonl, requests.csv, analysis.json, requests.md, requests-fig3.svg.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the analysis as JSON on stdout instead of Markdown.
    #[arg(long)]
    json: bool,
}

pub fn run(args: RequestsArgs) -> Result<ExitCode> {
    match (args.cmd, args.pid) {
        (Some(RequestsCmd::RunPg(a)), _) => run_pg_cmd(a),
        (None, Some(pid)) => external(pid, &args.events, args.csv),
        (None, None) => bail!("give --pid PID (requests on stdin) or `run-pg`; see --help"),
    }
}

fn run_pg_cmd(a: RunPgArgs) -> Result<ExitCode> {
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    }
    let cfg = RunConfig {
        scale: a.scale,
        clients: a.clients,
        requests: a.requests,
        seed: a.seed,
        events: a.events,
        // Ctrl-C / SIGTERM end the run between requests, so the private cluster is stopped
        // and its directory removed instead of being left running.
        stop: Some(counterpoint_host::signals::stop_flag()),
    };
    counterpoint_host::signals::install().context("requests run-pg")?;
    let out = run_pg(&cfg).context("requests run-pg")?;
    let analysis = analyze(&out).context("analyzing the requests")?;
    if let Some(dir) = &a.out {
        analysis.write(&out, dir)?;
    }
    let text = if a.json {
        serde_json::to_string_pretty(&analysis)? + "\n"
    } else {
        analysis.to_markdown(&out)
    };
    super::write_stdout(&text)?;
    for (e, why) in &out.unsupported {
        eprintln!("counterpoint: {e}: not supported: {why}");
    }
    Ok(ExitCode::SUCCESS)
}

fn external(pid: i32, events: &str, csv: bool) -> Result<ExitCode> {
    let mut s = BoundarySession::new(pid, events)
        .with_context(|| format!("opening counters on task {pid}"))?;
    for (e, why) in s.counters().unsupported() {
        eprintln!("counterpoint: {e}: not supported: {why}");
    }
    // An event named twice would be two identical columns (one JSON key): refused.
    let all = s.counters().names();
    if let Some(dup) = all
        .iter()
        .enumerate()
        .find_map(|(i, n)| all[..i].contains(n).then_some(n))
    {
        bail!("--events {events:?}: {dup} is named twice");
    }
    let names: Vec<String> = all
        .iter()
        .filter(|n| !s.counters().unsupported().contains_key(*n))
        .cloned()
        .collect();
    // Nothing to count: every row would be empty. Said before any input is read.
    if names.is_empty() {
        bail!("--events {events:?}: none of these events can be counted here (see above)");
    }
    if csv {
        let mut header = Vec::new();
        counterpoint_requests::attrib::write_csv(&mut header, &[], &names)?;
        super::write_stdout(&header)?;
    }
    let mut measured = 0u64;
    let mut stdin = std::io::stdin().lock();
    let mut input = Vec::new();
    for lineno in 1.. {
        let Some(line) = read_bounded_line(&mut stdin, &mut input, lineno)? else {
            break;
        };
        let row = match s.line(line, lineno) {
            Ok(row) => row,
            // The server ended: say so and stop, rather than report zeros it never counted.
            Err(counterpoint_requests::RequestsError::TaskGone { tid }) => {
                eprintln!(
                    "counterpoint requests: task {tid} has exited (noticed at input line {}): \
                     stopping after {measured} measured request{}",
                    lineno,
                    if measured == 1 { "" } else { "s" }
                );
                return Ok(if measured == 0 {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                });
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(row) = row {
            measured += 1;
            let mut buf = Vec::new();
            if csv {
                counterpoint_requests::attrib::write_csv(&mut buf, &[row], &names)?;
                // Header already written: only the row.
                let body_at = buf
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(buf.len(), |i| i + 1);
                buf.drain(..body_at);
            } else {
                counterpoint_requests::attrib::write_json_lines(&mut buf, &[row])?;
            }
            super::write_stdout(&buf)?;
        }
    }
    // Said, not silently dropped: the client stopped between a request's begin and its end.
    if let Some(id) = s.open_request() {
        eprintln!(
            "counterpoint requests: the input ended with request {id} begun and not ended: \
             not measured ({measured} measured)"
        );
    }
    // As when the task exits first: no request measured is a failure (exit 1), not a success.
    if measured == 0 {
        eprintln!("counterpoint requests: no request measured (no begin/end pair in the input)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Read input line `lineno` into `buf` (reused) and return it without its line end, `None` at
/// the end of the input. At most [`MAX_LINE_BYTES`] bytes and the newline are buffered: a
/// longer line is refused as soon as that much of it was read, whatever its length.
fn read_bounded_line<'a>(
    input: &mut impl BufRead,
    buf: &'a mut Vec<u8>,
    lineno: usize,
) -> Result<Option<&'a str>> {
    buf.clear();
    // The line, its `\r` and its `\n`: a line of exactly the limit ending in `\r\n` fits.
    let limit = MAX_LINE_BYTES as u64 + 2;
    let n = input
        .by_ref()
        .take(limit)
        .read_until(b'\n', buf)
        .context("reading stdin")?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    if buf.len() > MAX_LINE_BYTES {
        return Err(line_too_long(lineno, &String::from_utf8_lossy(buf)).into());
    }
    std::str::from_utf8(buf)
        .map(Some)
        .map_err(|_| anyhow::anyhow!("input line {lineno}: not valid UTF-8"))
}

#[derive(Args)]
pub struct BenchRequestsArgs {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Timed rounds (median reported); 1 to 1000.
    #[arg(long, default_value_t = 11,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    rounds: usize,
    /// Request boundaries per round and path; 1 to 200000 (every request of a round is kept
    /// until it ends, about 1.4 KB each: at most about 300 MB).
    #[arg(long, default_value_t = 20_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=200_000))]
    iterations: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// ns per request boundary: in process (selfmon `cp_request_begin`/`end`, task-clock) and
/// external (one read of a server task's counters through the counters layer, default events
/// that are countable here, on a sleeping child process).
pub fn bench(a: BenchRequestsArgs) -> Result<ExitCode> {
    counterpoint_selfmon::init("task-clock").context("selfmon init")?;
    let mut child = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .context("starting `sleep` as the external task")?;
    let child_pid = child.id() as i32;
    let result = (|| -> Result<(f64, f64, usize)> {
        let ext = counterpoint_requests::attrib::TaskCounters::open(
            child_pid,
            "task-clock,context-switches,page-faults",
        )?;
        let (mut inproc, mut external) = (Vec::new(), Vec::new());
        let mut id = 0u64;
        for _ in 0..a.rounds {
            let t = Instant::now();
            for _ in 0..a.iterations {
                counterpoint_selfmon::request::begin(id, "bench")?;
                counterpoint_selfmon::request::end(id)?;
                id += 1;
            }
            // Two boundaries per request.
            inproc.push(t.elapsed().as_nanos() as f64 / (2 * a.iterations) as f64);
            let _ = counterpoint_selfmon::take_requests();
            let t = Instant::now();
            for _ in 0..a.iterations {
                std::hint::black_box(ext.read()?);
            }
            external.push(t.elapsed().as_nanos() as f64 / a.iterations as f64);
        }
        Ok((
            median(inproc),
            median(external),
            ext.names().len() - ext.unsupported().len(),
        ))
    })();
    let _ = child.kill();
    let _ = child.wait();
    let (inproc, external, n_ext) = result?;
    if a.json {
        outln!(
            "{}",
            serde_json::json!({"in_process_ns_per_boundary": inproc, "in_process_events": 1,
                "external_ns_per_boundary": external, "external_events": n_ext,
                "rounds": a.rounds, "iterations": a.iterations})
        )?;
    } else {
        outln!(
            "request boundary cost (median of {} rounds x {} requests):",
            a.rounds,
            a.iterations
        )?;
        outln!("  in process (selfmon request begin/end, 1 event, read(2) here): {inproc:.1} ns per boundary")?;
        outln!("  external (counters layer, {n_ext} events on another task):     {external:.1} ns per boundary")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines up to the limit pass with either line end; one byte more is refused.
    #[test]
    fn lines_are_bounded_after_their_line_end() {
        let at = "a".repeat(MAX_LINE_BYTES);
        for text in [format!("{at}\r\n"), format!("{at}\n"), at.clone()] {
            let mut buf = Vec::new();
            let line = read_bounded_line(&mut text.as_bytes(), &mut buf, 1).unwrap();
            assert_eq!(line.map(str::len), Some(MAX_LINE_BYTES));
        }
        for text in [format!("{at}a\n"), format!("{at}a\r\n"), format!("{at}aa")] {
            let mut buf = Vec::new();
            let e = read_bounded_line(&mut text.as_bytes(), &mut buf, 3).unwrap_err();
            assert!(e.to_string().contains("input line 3"), "{e}");
        }
        let mut buf = Vec::new();
        assert!(read_bounded_line(&mut &b""[..], &mut buf, 1)
            .unwrap()
            .is_none());
    }
}
