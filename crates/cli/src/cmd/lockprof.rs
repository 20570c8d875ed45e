//! `counterpoint lockprof [--top N] [--sort COL] [--min-*] [--frames N] [--pid PID | --process
//! NAME] [--json] [-o FILE] -- CMD ARGS`: run a program with the
//! lock profiler preloaded (`libcounterpoint_lockprof.so`), then print the profile the library
//! wrote (at exit, on a fatal or terminating signal, before each exec) as a lockstat-style table
//! or JSON. Reading, aggregating and formatting the report is `counterpoint-lockprof-report`'s;
//! this command only runs the program and prints.
//!
//! Output separation: the program's stdout and stderr are inherited untouched, and the table is
//! printed to our stdout after the program ends. With `--json` and no `-o`, the program's stdout
//! is redirected to our stderr so that stdout carries only the JSON document.
//! This binary deliberately does not link the `counterpoint-lockprof` crate: its exported
//! `pthread_*` symbols would interpose on this process too.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_lockprof_report::{
    aggregate, parse_duration_ns, read_all_processes_skipping_cut, summarize, Filter, SortKey,
};
use serde_json::json;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::Duration;

/// File name of the preload library.
pub const LIB_NAME: &str = "libcounterpoint_lockprof.so";

#[derive(Args)]
pub struct LockprofArgs {
    /// Show the first N locks in the sort order (all with --top 0).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Sort locks by this column of the table: count, cont, changes, wait-tot, wait-avg,
    /// wait-min, wait-p50, wait-p99, wait-max, hold-tot, hold-avg, hold-min, hold-p50,
    /// hold-p99, hold-max.
    #[arg(long, default_value = "wait-tot", value_parser = parse_sort)]
    sort: SortKey,
    /// Show only locks acquired at least N times.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_count: u64,
    /// Show only locks contended at least N times.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_contentions: u64,
    /// Show only locks that changed owner thread at least N times.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_changes: u64,
    /// Show only locks with at least this total wait (e.g. 10us, 1.5ms; a bare number is ns).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    min_wait: Option<u64>,
    /// Show only locks held at least this long in total.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    min_hold: Option<u64>,
    /// Read these events (perf syntax, e.g. task-clock,page-faults, or cycles,LLC-load-misses
    /// where a PMU exists) when each lock is acquired and released, and report their change
    /// while held (at most 4 events). Off by default: every hold then costs reads of each
    /// counter.
    #[arg(long, value_name = "LIST")]
    events: Option<String>,
    /// Print up to N frames of the stack where each lock was first taken.
    #[arg(long, value_name = "N", default_value_t = 0)]
    frames: usize,
    /// Show the process with this pid (a fork child) instead of the one started.
    #[arg(long, value_name = "PID", conflicts_with = "process")]
    pid: Option<u32>,
    /// Show another process of the run: N (its index in the process list, 0 = the one
    /// started) or NAME (its program's file name; the first such process in the list).
    #[arg(long, value_name = "N|NAME")]
    process: Option<String>,
    /// Print the report as JSON on stdout (the program's stdout then goes to stderr).
    #[arg(long)]
    json: bool,
    /// Write the report (table or JSON) to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Once the program has exited, wait up to this many seconds for the processes it started
    /// and left running (their profiles are written when they exit); 0 = do not wait. A stop
    /// signal sent to this command is passed on to them too; a second one ends the wait.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0,
          value_parser = parse_wait_seconds)]
    wait_descendants: f64,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

fn parse_sort(s: &str) -> Result<SortKey, String> {
    s.parse()
}

/// The preload library: `$COUNTERPOINT_LOCKPROF_LIB`, next to this executable, or in `../lib`.
pub fn find_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("COUNTERPOINT_LOCKPROF_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!(
            "COUNTERPOINT_LOCKPROF_LIB={} does not name a file",
            p.display()
        );
    }
    let exe = std::env::current_exe().context("locating the counterpoint executable")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let mut tried = Vec::new();
    for cand in [dir.join(LIB_NAME), dir.join("../lib").join(LIB_NAME)] {
        if cand.is_file() {
            return Ok(cand);
        }
        tried.push(cand.display().to_string());
    }
    bail!(
        "the lock profiler library {LIB_NAME} was not found (looked in {}); build it with \
         `cargo build -p counterpoint-lockprof` (same profile as this binary) or set \
         COUNTERPOINT_LOCKPROF_LIB to its path",
        tried.join(", ")
    )
}

/// Resolve CMD like the shell does (a name without '/' is searched in $PATH).
fn resolve_program(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        if p.is_file() {
            return Ok(p);
        }
        if p.is_dir() {
            bail!("{name} is a directory, not a program");
        }
        bail!("program not found: {name}");
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("program not found: {name} (not in $PATH)")
}

/// Whether an ELF executable is dynamically linked (has a PT_INTERP program header). `None`
/// when the file is not a 64-bit little-endian ELF (e.g. a script: its interpreter is dynamic).
pub fn elf_is_dynamic(bytes: &[u8]) -> Option<bool> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return None;
    }
    let u16at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64at = |o: usize| {
        bytes
            .get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let phoff = u64at(32)? as usize;
    let phentsize = u16at(54)? as usize;
    let phnum = u16at(56)? as usize;
    for i in 0..phnum {
        let off = phoff.checked_add(i.checked_mul(phentsize)?)?;
        let ptype = bytes.get(off..off + 4)?;
        if u32::from_le_bytes([ptype[0], ptype[1], ptype[2], ptype[3]]) == 3 {
            return Some(true); // PT_INTERP
        }
    }
    Some(false)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// The program's pid while it runs and is not yet reaped (0 otherwise): where a stop signal
/// sent to this command is forwarded. Unreaped, the pid cannot name another process.
static PROGRAM: AtomicI32 = AtomicI32::new(0);
/// A stop signal that came before the program's pid was known, to forward once it is.
static PENDING: AtomicI32 = AtomicI32::new(0);
/// How many stop signals came. The first asks the command to stop what it runs and still
/// collect the profiles (the program's, and those of the processes it left running, which the
/// wait reaps as they end); a second ends the wait at once.
static STOPS: AtomicU32 = AtomicU32::new(0);
/// The stop signal that sets the command's status (128+N): the first one a process sent, or
/// one that came while the program was not running. A terminal's during the run is the
/// program's to answer (it reached the whole foreground group): its exit status stands.
static STATUS_SIG: AtomicI32 = AtomicI32::new(0);
/// A stop signal a process sent (`kill PID`, `timeout`, a group kill): it reached this command
/// only, or not every process the program left running (a terminal's reached its foreground
/// group). The wait passes it on to them once the program has ended, so they end and write
/// their profiles, as on a terminal, instead of the command waiting the whole
/// `--wait-descendants` out or leaving them running unprofiled (CI, session 28).
static PASS_ON: AtomicI32 = AtomicI32::new(0);
/// The last stop signal that came (the one a second stop names).
static LAST_SIG: AtomicI32 = AtomicI32::new(0);
/// Whether this command leads its session: then the kernel's SIGHUP for a hung-up terminal
/// came to it alone.
static SESSION_LEADER: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Async-signal-safe only: atomics and kill(2).
    LAST_SIG.store(sig, Ordering::SeqCst);
    STOPS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo.
    let from_terminal = unsafe { super::child::sent_by_kernel(info) };
    let program = PROGRAM.load(Ordering::SeqCst);
    if program == 0 || !from_terminal {
        let _ = STATUS_SIG.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    }
    // A terminal's signal went to its whole foreground group, the program included; but the
    // kernel's SIGHUP for a terminal that hung up goes to the session's leader alone (this
    // command, when a tmux pane, `ssh -t` or `script` runs it directly: the program ran on
    // after the terminal was gone; CLI probe, session 28), so that one is passed on.
    if from_terminal && !(sig == libc::SIGHUP && SESSION_LEADER.load(Ordering::SeqCst)) {
        return;
    }
    // One sent by a process (`kill PID`) may have reached only us: passed on to the program
    // (a signal to our whole group reaches it twice: its profiler blocks the second while it
    // writes the profile, then the first ends it), and later to what it left running.
    PASS_ON.store(sig, Ordering::SeqCst);
    match program {
        0 => PENDING.store(sig, Ordering::SeqCst),
        pid => {
            // SAFETY: kill on our own unreaped child. SIGCONT after it, as timeout(1) does: a
            // stopped program would otherwise never act on it (the command waited for ever).
            unsafe {
                libc::kill(pid, sig);
                libc::kill(pid, libc::SIGCONT);
            }
        }
    }
}

/// A line on stderr that never panics (a closed stderr must not stop the cleanup).
fn note(msg: std::fmt::Arguments) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Check `--events LIST` on this machine before the program runs: every event must parse and
/// open (through the counters crate, on this thread, at once closed). A machine without a PMU
/// refuses `cycles` here instead of the program reporting counts of 0 never counted.
fn check_events(list: &str) -> Result<()> {
    let specs =
        counterpoint_selfmon::parse_events(list).with_context(|| format!("--events {list:?}"))?;
    // The library reads at most this many in each critical section: a longer list would lose
    // its tail only after the program had run.
    let max = counterpoint_lockprof_report::MAX_EVENTS;
    if specs.len() > max {
        bail!(
            "--events {list:?}: {} events, at most {max} are read inside critical sections",
            specs.len()
        );
    }
    for spec in &specs {
        counterpoint_selfmon::SelfCounter::open(spec)
            .with_context(|| format!("--events {list:?}: cannot count on this machine"))?;
    }
    Ok(())
}

/// A program that cannot be run ends the command as it would end a shell (and `stat`): the
/// message, then 127 when it was not found, 126 when it was found but cannot be executed (it
/// exited 2 for both; CLI probe, session 27).
fn not_run(err: anyhow::Error, found: bool) -> Result<ExitCode> {
    note(format_args!(
        "counterpoint: error: {}",
        super::error_chain(&err)
    ));
    Ok(ExitCode::from(if found { 126 } else { 127 }))
}

pub fn run(args: LockprofArgs) -> Result<ExitCode> {
    // The user's mistake (a wrong program) before the build's (no library).
    let prog = match resolve_program(&args.command[0]) {
        Ok(p) => p,
        Err(e) => {
            let found = Path::new(&args.command[0]).is_dir();
            return not_run(e, found);
        }
    };
    // Where the report goes, before the program runs: after it, a bad path lost the profile.
    if let Some(path) = &args.output {
        super::check_output_file("-o", path)?;
    }
    let lib = find_library()?;
    let head = std::fs::read(&prog).with_context(|| format!("reading {}", prog.display()))?;
    if elf_is_dynamic(&head) == Some(false) {
        bail!(
            "{} is statically linked: LD_PRELOAD interposition of pthread functions is impossible",
            prog.display()
        );
    }
    let outdir = tempfile::tempdir().context("creating a directory for the report")?;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", lib.display()),
        _ => lib.display().to_string(),
    };
    let mut cmd = Command::new(&prog);
    cmd.arg0(&args.command[0])
        .args(&args.command[1..])
        .env("LD_PRELOAD", preload)
        .env("COUNTERPOINT_LOCKPROF_OUT", outdir.path())
        .env_remove("COUNTERPOINT_LOCKPROF_EVENTS");
    if let Some(list) = &args.events {
        // Refuse a list this machine cannot count before running anything.
        check_events(list)?;
        cmd.env("COUNTERPOINT_LOCKPROF_EVENTS", list);
    }
    if args.json && args.output.is_none() {
        // Keep our stdout for the JSON document.
        cmd.stdout(Stdio::from(
            std::io::stderr()
                .as_fd_owned()
                .context("duplicating stderr for the program's stdout")?,
        ));
    }
    // Caught from before the start (a handler is reset to the default in the program at exec):
    // a stop signal ends the program, and this command prints what it profiled.
    // SAFETY: getsid and getpid have no preconditions.
    SESSION_LEADER.store(
        unsafe { libc::getsid(0) == libc::getpid() },
        Ordering::SeqCst,
    );
    super::child::catch_stop_signals(on_stop)?;
    // Processes the program starts and leaves behind are reparented to this command, so it
    // can wait for them and read their profiles too (a forked child still running when the
    // program exited was dropped, silently).
    // SAFETY: prctl with integer arguments on this process.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let found = e.kind() != std::io::ErrorKind::NotFound;
            return not_run(
                anyhow::Error::new(e).context(format!("starting {}", prog.display())),
                found,
            );
        }
    };
    let pid = child.id();
    PROGRAM.store(pid as i32, Ordering::SeqCst);
    let early = PENDING.swap(0, Ordering::SeqCst);
    if early != 0 {
        // SAFETY: kill on our own unreaped child (SIGCONT after it, as in the handler).
        unsafe {
            libc::kill(pid as i32, early);
            libc::kill(pid as i32, libc::SIGCONT);
        }
    }
    let ended = super::child::wait_unreaped(pid as libc::pid_t);
    // From here the pid may be reaped: nothing is forwarded to it any more.
    PROGRAM.store(0, Ordering::SeqCst);
    ended.context("waiting for the program")?;
    let status = child.wait().context("waiting for the program")?;
    let waited_from = std::time::Instant::now();
    let wait = wait_for_descendants(Duration::from_secs_f64(args.wait_descendants));
    // The processes the wait gave up on (every one still running under this command, not only
    // its children: a subshell's own children too).
    let left_running = if wait == Descendants::AllDone {
        Vec::new()
    } else {
        our_descendants()
    };
    if wait != Descendants::AllDone {
        let left = if left_running.is_empty() {
            "(gone since)".to_string()
        } else {
            named(&left_running)
        };
        match wait {
            Descendants::Stopped(sig) => note(format_args!(
                "counterpoint lockprof: stopped by {} ({sig}) {:.1} s into the wait for \
                 processes the program started and left running: {left}; their lock profiles \
                 are not in this report",
                signal_name(sig),
                waited_from.elapsed().as_secs_f64()
            )),
            _ => note(format_args!(
                "counterpoint lockprof: processes the program started were still running {} s \
                 after it exited: {left}; their lock profiles are not in this report \
                 (--wait-descendants)",
                args.wait_descendants
            )),
        }
    }
    // A closed stdout while printing is an EPIPE error, not a death by SIGPIPE that would leave
    // the temporary directory behind (the program is gone: nothing inherits this).
    // SAFETY: setting a signal disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }

    let (all, mut cut) = read_all_processes_skipping_cut(outdir.path())?;
    // One note and one entry per process (a process can leave several cut images).
    cut.dedup_by_key(|(p, _)| *p);
    for (p, e) in &cut {
        // The reason without the temporary file's path, gone when the command ends.
        let why = match e {
            counterpoint_lockprof_report::ReportError::Parse { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        note(format_args!(
            "counterpoint lockprof: the profile of process {p} was cut short (it was being \
             written when the command stopped, or the process was killed while writing it: \
             {why}); left out of this report"
        ));
    }
    // Each process once: a cut profile is "cut short" (with its name, if it was still
    // running); one still running when the wait ended is listed unless its profile was
    // written since (the directory is read after the list was taken).
    let comm_of = |p: u32| {
        left_running
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, c)| c.clone())
    };
    let mut missing: Vec<counterpoint_lockprof_report::MissingProfile> = cut
        .iter()
        .map(|(p, _)| counterpoint_lockprof_report::MissingProfile {
            pid: *p,
            comm: comm_of(*p),
            reason: "cut short".into(),
        })
        .collect();
    missing.extend(
        left_running
            .iter()
            .filter(|(p, _)| !all.contains_key(p) && !cut.iter().any(|(q, _)| q == p))
            .map(|(p, comm)| counterpoint_lockprof_report::MissingProfile {
                pid: *p,
                comm: Some(comm.clone()),
                reason: "still running".into(),
            }),
    );
    missing.sort_by_key(|m| m.pid);
    let have = all.contains_key(&pid);
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        // A program ended by SIGPIPE (its reader, e.g. `| head`, went away) is a normal end
        // of a pipeline: a shell says nothing of it, and neither does this command.
        (None, Some(s)) if s == libc::SIGPIPE => 128 + s,
        (None, Some(s)) => {
            note(format_args!(
                "counterpoint lockprof: the program was killed by {} ({s}){}",
                signal_name(s),
                if have {
                    "; the profile of what ran until then follows"
                } else {
                    ""
                }
            ));
            128 + s
        }
        _ => 1,
    };
    // Asked to stop (by a process, or while the program was not running): 128+N, as `stat`.
    let code = match STATUS_SIG.load(Ordering::SeqCst) {
        0 => code,
        sig => 128 + sig,
    };
    let exit = ExitCode::from(code.clamp(0, 255) as u8);
    let shown = match (args.pid, &args.process) {
        (Some(p), _) => {
            if !all.contains_key(&p) {
                bail!(
                    "no lock profile from pid {p}; processes with one: {}",
                    list_pids(&all)
                );
            }
            p
        }
        (None, Some(which)) => match pick_process(&all, pid, which) {
            Some(p) => p,
            None => bail!(
                "no lock profile from a process {which:?} (an index in the process list or a \
                 program name); processes with one: {}",
                list_pids(&all)
            ),
        },
        (None, None) => {
            if !have {
                // Still propagate the program's status: its run was not at fault. Profiles
                // the processes it started wrote are named, to be shown with --pid.
                let others = if all.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; processes of the run with one (show one with --pid): {}",
                        list_pids(&all)
                    )
                };
                let why = if cut.iter().any(|(p, _)| *p == pid) {
                    "its profile was cut short"
                } else {
                    "killed by SIGKILL, cleared LD_PRELOAD, or a fork child that took no lock"
                };
                note(format_args!(
                    "counterpoint lockprof: the program wrote no lock profile ({why}); exit \
                     status {code}{others}"
                ));
                return Ok(exit);
            }
            pid
        }
    };
    let reports = &all[&shown];
    let mut profile = aggregate(reports);
    profile.other_process_reports = all.len() - 1;
    profile.processes = process_order(&all, pid)
        .into_iter()
        .map(|p| {
            let mut s = summarize(p, &all[&p]);
            s.shown = p == shown;
            s
        })
        .collect();
    profile.sort(args.sort);
    profile.filter(&Filter {
        min_count: args.min_count,
        min_contentions: args.min_contentions,
        min_changes: args.min_changes,
        min_wait_ns: args.min_wait.unwrap_or(0),
        min_hold_ns: args.min_hold.unwrap_or(0),
    });
    profile.symbolize();
    profile.missing_profiles = missing;
    let text = if args.json {
        profile.to_json()?
    } else {
        profile.to_table(args.top, args.frames)
    };
    match &args.output {
        Some(path) => counterpoint_experiment::report::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing the report to {}", path.display()))?,
        None => super::write_stdout(&text)?,
    }
    Ok(exit)
}

/// `--wait-descendants`: a finite number of seconds from 0 to an hour.
fn parse_wait_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err("expected seconds from 0 to 3600, e.g. 10 or 0.5".into()),
    }
}

/// Reap the program's leftover descendants (this process is their subreaper) as they exit,
/// for at most `limit`: true when none is left.
/// How the wait for the program's leftover descendants ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Descendants {
    /// None is left.
    AllDone,
    /// Some still run at the end of `--wait-descendants`.
    StillRunning,
    /// A stop signal (its number) ended the wait.
    Stopped(i32),
}

fn wait_for_descendants(limit: Duration) -> Descendants {
    let deadline = std::time::Instant::now() + limit;
    // How many stop signals the wait took as the first request, once one came.
    let mut first_request: Option<u32> = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child of ours, without blocking.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r > 0 {
            continue;
        }
        if r < 0 {
            // ECHILD: none left (EINTR: look again).
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                return Descendants::AllDone;
            }
            continue;
        }
        // A stop signal after the first request was taken ends the wait.
        if first_request.is_some_and(|seen| STOPS.load(Ordering::SeqCst) > seen) {
            return Descendants::Stopped(LAST_SIG.load(Ordering::SeqCst));
        }
        // A process's stop signal, passed on to what the program left running: every process
        // under this command, children and theirs (a subshell's own child kept running when
        // only the subshell got it; CLI probe, session 28). They end and write their profiles;
        // the wait goes on for them.
        let sig = PASS_ON.swap(0, Ordering::SeqCst);
        // The signals that came by now are the first request, however many came together
        // (`kill -TERM; kill -HUP` is not "a second one"; CLI probe, session 28). Counted
        // after the swap (the handler counts a signal before it leaves it to pass on) and
        // before the line below, after which a user's next signal is a second one.
        if first_request.is_none() {
            let stops = STOPS.load(Ordering::SeqCst);
            if stops > 0 {
                first_request = Some(stops);
            }
        }
        if sig != 0 {
            let left = our_descendants();
            if !left.is_empty() {
                for (pid, _) in &left {
                    // SAFETY: kill(2). Our children are unreaped, so their pids are theirs; a
                    // grandchild's could in principle have been reused since /proc was read
                    // (microseconds ago), the risk every `pkill` takes. SIGCONT so that a
                    // stopped process acts on it.
                    unsafe {
                        libc::kill(*pid as i32, sig);
                        libc::kill(*pid as i32, libc::SIGCONT);
                    }
                }
                note(format_args!(
                    "counterpoint lockprof: {} ({sig}) passed on to the processes the program \
                     started and left running: {}; waiting for their profiles (another stop \
                     signal ends the wait)",
                    signal_name(sig),
                    named(&left)
                ));
            }
        }
        if std::time::Instant::now() >= deadline {
            return Descendants::StillRunning;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Processes as the notes name them: `4242 (fk), 4243 (sleep)`.
fn named(processes: &[(u32, String)]) -> String {
    processes
        .iter()
        .map(|(pid, comm)| format!("{pid} ({comm})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The processes under this one now (pid, command name), from /proc: its children (the
/// program's descendants were reparented to it, their subreaper) and theirs, down the tree.
/// A zombie has exited (only its status waits to be collected): not running.
fn our_descendants() -> Vec<(u32, String)> {
    let me = std::process::id();
    let proc_ = counterpoint_host::procfs::Proc::default();
    let stats: Vec<(u32, counterpoint_host::procfs::Stat)> = proc_
        .pids()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| Some((pid, proc_.stat(pid)?)))
        .collect();
    // Down the tree from this process, a generation at a time.
    let mut under = std::collections::BTreeSet::from([me]);
    loop {
        let before = under.len();
        for (pid, st) in &stats {
            if under.contains(&st.ppid) {
                under.insert(*pid);
            }
        }
        if under.len() == before {
            break;
        }
    }
    // `pids` is sorted, and so is the list.
    stats
        .into_iter()
        .filter(|(pid, st)| *pid != me && under.contains(pid) && st.state != 'Z')
        .map(|(pid, st)| (pid, st.comm))
        .collect()
}

type AllReports = std::collections::BTreeMap<u32, Vec<counterpoint_lockprof_report::Report>>;

/// The processes in list order: the one started first, then the others by pid.
fn process_order(all: &AllReports, started: u32) -> Vec<u32> {
    let mut v: Vec<u32> = all.keys().copied().filter(|p| *p != started).collect();
    if all.contains_key(&started) {
        v.insert(0, started);
    }
    v
}

/// `--process N|NAME`.
fn pick_process(all: &AllReports, started: u32, which: &str) -> Option<u32> {
    let order = process_order(all, started);
    if let Ok(i) = which.parse::<usize>() {
        return order.get(i).copied();
    }
    order.into_iter().find(|p| {
        all[p].iter().any(|r| {
            r.program
                .as_deref()
                .and_then(|prog| Path::new(prog).file_name())
                .is_some_and(|f| f == which)
        })
    })
}

fn list_pids(
    all: &std::collections::BTreeMap<u32, Vec<counterpoint_lockprof_report::Report>>,
) -> String {
    all.iter()
        .map(|(p, r)| {
            let prog = r
                .last()
                .and_then(|r| r.program.as_deref())
                .map(|p| p.rsplit('/').next().unwrap_or(p))
                .unwrap_or("?");
            format!("{p} ({prog})")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

trait OwnedFd {
    fn as_fd_owned(&self) -> std::io::Result<std::os::fd::OwnedFd>;
}
impl OwnedFd for std::io::Stderr {
    fn as_fd_owned(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.as_fd().try_clone_to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_detection() {
        assert_eq!(elf_is_dynamic(b"#!/bin/sh\necho hi\n"), None);
        let sh = std::fs::read("/bin/sh").unwrap();
        assert_eq!(elf_is_dynamic(&sh), Some(true));
        let mut fake = vec![0u8; 128];
        fake[..6].copy_from_slice(b"\x7fELF\x02\x01");
        assert_eq!(elf_is_dynamic(&fake), Some(false));
    }
}

/// `counterpoint bench lockprof`: lock+unlock cost with and without the profiler, and the
/// slowdown of a lock-heavy program, both measured in the same run (alternating rounds).
#[derive(Args)]
pub struct BenchLockprofArgs {
    /// Rounds of each measurement, 1 to 100 (medians are reported).
    #[arg(long, default_value_t = 7,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_ROUNDS))]
    rounds: usize,
    /// Lock+unlock pairs per timed repetition in the pair benchmark (1 to 50000000).
    #[arg(long, default_value_t = 2_000_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PAIRS))]
    pairs: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also run another build of the library (e.g. the one before a change) in the same
    /// alternating rounds, so both are measured under the same machine load.
    #[arg(long, value_name = "LIB")]
    compare_lib: Option<PathBuf>,
}

/// The most `bench lockprof --rounds` accepts: fourteen times the default; every round starts
/// five to seven programs.
const MAX_ROUNDS: u64 = 100;
/// The most `bench lockprof --pairs` accepts: 25 times the default. The pair program does 5.1
/// times this many pairs per run (about 40 ns each with a profiler), in every arm of every
/// round: the two bounds together stay under an hour on a 2-vCPU machine.
const MAX_PAIRS: u64 = 50_000_000;

/// `--compare-lib`'s file, checked before anything runs: a regular file that starts like an ELF
/// object (what ld.so can preload).
fn check_compare_lib(lib: &Path) -> Result<()> {
    use std::io::Read;
    let what = || format!("--compare-lib {}", lib.display());
    let meta = std::fs::metadata(lib).with_context(what)?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file (a shared library is expected)",
            what()
        );
    }
    let mut magic = Vec::with_capacity(4);
    std::fs::File::open(lib)
        .and_then(|f| f.take(4).read_to_end(&mut magic))
        .with_context(what)?;
    if magic != b"\x7fELF" {
        bail!(
            "{}: not an ELF shared library (it does not start with \\x7fELF)",
            what()
        );
    }
    Ok(())
}

/// ld.so's complaint on a child's stderr when an `LD_PRELOAD` entry could not be loaded (it
/// then runs the program without it).
fn preload_failure(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find(|l| l.contains("LD_PRELOAD") && l.contains("cannot be preloaded"))
}

const BENCH_PAIR_C: &str = include_str!("../../../lockprof/tests/c/bench_pair.c");
const MUTEX_GRID_C: &str = include_str!("../../../lockprof/tests/c/mutex_grid.c");
const HOLD_TIME_C: &str = include_str!("../../../lockprof/tests/c/hold_time.c");

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Run `cmd` to its end, its stdout and stderr captured in files under `dir` (no pipe to drain
/// while the wait polls for a stop signal); a stop kills and reaps it. `group`: it leads a
/// process group of its own, killed whole on a stop (`cc` and the compilers it starts).
fn bench_output(cmd: &mut Command, dir: &Path, group: bool) -> Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    cmd.stdout(std::fs::File::create(&out).context("creating a capture file")?)
        .stderr(std::fs::File::create(&err).context("creating a capture file")?);
    if group {
        cmd.process_group(0);
    }
    let mut child = cmd.spawn()?;
    let status = super::bench_stop::wait(&mut child, group)?;
    Ok(std::process::Output {
        status,
        stdout: std::fs::read(&out).context("reading a capture file")?,
        stderr: std::fs::read(&err).context("reading a capture file")?,
    })
}

pub fn bench(args: BenchLockprofArgs) -> Result<ExitCode> {
    if let Some(c) = &args.compare_lib {
        check_compare_lib(c)?;
    }
    // A stop signal ends the bench early: the program running is killed and reaped and the
    // build directory removed (on the way out of `bench_measure`), then the stop is reported.
    super::bench_stop::catch()?;
    let mut done = (0usize, 0usize);
    let r = bench_measure(&args, &mut done);
    match super::bench_stop::stopped_by() {
        Some(sig) => {
            note(format_args!(
                "counterpoint bench lockprof: stopped by {} after {} of {} rounds of lock+unlock \
                 and mutex_grid and {} of {} hold-time rounds: nothing reported; its programs \
                 were stopped and its temporary directory removed",
                super::bench_stop::signal_name(sig),
                done.0,
                args.rounds,
                done.1,
                args.rounds
            ));
            Ok(super::bench_stop::exit_code(sig))
        }
        None => r,
    }
}

/// The bench; `done` counts the finished rounds of each part.
fn bench_measure(args: &BenchLockprofArgs, done: &mut (usize, usize)) -> Result<ExitCode> {
    let lib = find_library()?;
    let dir = tempfile::tempdir().context("creating a build directory")?;
    let build = |name: &str, src: &str| -> Result<PathBuf> {
        let c = dir.path().join(format!("{name}.c"));
        std::fs::write(&c, src)?;
        let bin = dir.path().join(name);
        // Its output passes through (compiler messages), so only the wait is ours. The
        // compiler's own temporary files go to the build directory too: a stop that kills it
        // leaves none behind.
        let mut child = {
            use std::os::unix::process::CommandExt;
            Command::new("cc")
                .args(["-O2", "-pthread", "-o"])
                .arg(&bin)
                .arg(&c)
                .env("TMPDIR", dir.path())
                .process_group(0)
                .spawn()
                .context("running cc (is a C compiler installed?)")?
        };
        let st = super::bench_stop::wait(&mut child, true)?;
        if !st.success() {
            bail!("cc failed to build the {name} benchmark");
        }
        Ok(bin)
    };
    let pair = build("bench_pair", BENCH_PAIR_C)?;
    let grid = build("mutex_grid", MUTEX_GRID_C)?;
    let hold = build("hold_time", HOLD_TIME_C)?;
    // Arms: 0 without, 1 with this library, 2 with --compare-lib. Each library's reports go to
    // its own scratch directory, which nobody reads (the other build may write an older
    // format): a report there only shows that the library was loaded and ran.
    let reports = |arm: usize| dir.path().join(format!("reports-{arm}"));
    for arm in [1, 2] {
        std::fs::create_dir(reports(arm)).context("creating a report directory")?;
    }
    let run = |bin: &Path, a: &[String], arm: usize| -> Result<(String, f64)> {
        let mut cmd = Command::new(bin);
        cmd.args(a)
            .env_remove("LD_PRELOAD")
            .env_remove("COUNTERPOINT_LOCKPROF_EVENTS");
        let preload = match arm {
            1 => Some(lib.as_path()),
            2 => args.compare_lib.as_deref(),
            _ => None,
        };
        if let Some(l) = preload {
            cmd.env("LD_PRELOAD", l)
                .env("COUNTERPOINT_LOCKPROF_OUT", reports(arm));
        }
        let t0 = std::time::Instant::now();
        let out = bench_output(&mut cmd, dir.path(), false)
            .with_context(|| format!("running {}", bin.display()))?;
        let wall = t0.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("{} failed: {stderr}", bin.display());
        }
        if let Some(l) = preload {
            // ld.so runs the program without a library it cannot load: nothing was measured.
            let flag = if arm == 2 { "--compare-lib " } else { "" };
            if let Some(why) = preload_failure(&stderr) {
                bail!(
                    "{flag}{}: not preloaded into {}: {why}",
                    l.display(),
                    bin.display()
                );
            }
            let wrote = std::fs::read_dir(reports(arm))
                .context("reading a report directory")?
                .next()
                .is_some();
            if !wrote {
                bail!(
                    "{flag}{}: preloaded into {} but wrote no lock profile report: not a build \
                     of {LIB_NAME}",
                    l.display(),
                    bin.display()
                );
            }
        }
        Ok((String::from_utf8_lossy(&out.stdout).into_owned(), wall))
    };
    let arms = if args.compare_lib.is_some() { 3 } else { 2 };
    let mut pair_ns: Vec<Vec<f64>> = vec![Vec::new(); arms];
    let mut grid_s: Vec<Vec<f64>> = vec![Vec::new(); arms];
    let grid_args: Vec<String> = ["2", "500000", "1"].iter().map(|s| s.to_string()).collect();
    for _ in 0..args.rounds {
        for arm in 0..arms {
            let (o, _) = run(&pair, &[args.pairs.to_string()], arm)?;
            let ns: f64 = o
                .trim()
                .parse()
                .with_context(|| format!("bench_pair printed {o:?}"))?;
            pair_ns[arm].push(ns);
            let (_, wall) = run(&grid, &grid_args, arm)?;
            grid_s[arm].push(wall);
        }
        done.0 += 1;
    }
    // Hold-time accuracy (a timing, so measured here and never asserted in a test): two
    // threads each hold one mutex 40 times for 200 us; the profiler's mean hold against the
    // program's own CLOCK_MONOTONIC measurement of the time spent under the lock.
    let mut hold_err = Vec::new();
    for _ in 0..args.rounds {
        let rdir = tempfile::tempdir().context("creating a report directory")?;
        let mut cmd = Command::new(&hold);
        cmd.args(["2", "40", "200"])
            .env("LD_PRELOAD", &lib)
            .env("COUNTERPOINT_LOCKPROF_OUT", rdir.path());
        let out = bench_output(&mut cmd, dir.path(), false)
            .with_context(|| format!("running {}", hold.display()))?;
        if !out.status.success() {
            bail!("hold_time failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = text.split_whitespace().collect();
        let (Some(addr), Some(measured)) = (f.get(1), f.get(3).and_then(|m| m.parse::<f64>().ok()))
        else {
            bail!("hold_time printed {text:?}");
        };
        let found = counterpoint_lockprof_report::read_reports(rdir.path())?;
        let (mut total, mut count) = (0u64, 0u64);
        for e in found.reports.iter().flat_map(|r| &r.entries) {
            if e.lock == *addr && e.kind == "mutex" {
                total += e.hold_total_ns;
                count += e.hold_count;
            }
        }
        if count == 0 || measured <= 0.0 {
            bail!("hold_time: no holds recorded for lock {addr}");
        }
        let program_mean = measured / count as f64;
        hold_err.push((total as f64 / count as f64 - program_mean) / program_mean * 100.0);
        done.1 += 1;
    }
    let herr = median(&mut hold_err);
    let (b, p) = (median(&mut pair_ns[0]), median(&mut pair_ns[1]));
    let (gb, gp) = (median(&mut grid_s[0]), median(&mut grid_s[1]));
    let compare = args.compare_lib.as_ref().map(|c| {
        let (cp, cg) = (median(&mut pair_ns[2]), median(&mut grid_s[2]));
        (c.display().to_string(), cp, cg)
    });
    let mut v = json!({
        "rounds": args.rounds,
        "pairs_per_repetition": args.pairs,
        "lock_unlock_ns": {"without": b, "with": p, "added": p - b},
        "lock_heavy": {
            "program": "mutex_grid 2 threads x 500000 iterations, 1 mutex",
            "wall_s": {"without": gb, "with": gp},
            "slowdown": gp / gb,
        },
        "hold_time_error_percent": {
            "program": "hold_time 2 threads x 40 holds of 200 us",
            "median": herr,
        },
        "library": lib.display().to_string(),
    });
    if let Some((c, cp, cg)) = &compare {
        v["compare"] = json!({
            "library": c,
            "lock_unlock_ns": {"with": cp, "added": cp - b},
            "lock_heavy_wall_s": cg,
            "lock_heavy_slowdown": cg / gb,
        });
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        outln!("lock+unlock (uncontended, median of {} rounds): {b:.1} ns without, {p:.1} ns with the profiler, +{:.1} ns", args.rounds, p - b)?;
        outln!("lock-heavy mutex_grid 2x500000 on 1 mutex: {gb:.3} s without, {gp:.3} s with, slowdown x{:.2}", gp / gb)?;
        outln!("hold time of 2x40 programmed 200 us holds: profiler mean vs the program's own clock, median error {herr:+.2}%")?;
        outln!("library: {}", lib.display())?;
        if let Some((c, cp, cg)) = &compare {
            outln!(
                "compared, same rounds: {c}: {cp:.1} ns with it, +{:.1} ns; mutex_grid {cg:.3} s, slowdown x{:.2}",
                cp - b,
                cg / gb
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
