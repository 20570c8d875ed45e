//! `counterpoint stat`: count events for a command, processes or CPUs, as `perf stat` does, with
//! the same `-x` column layout so existing parsers work. Output goes to stderr (like perf) unless
//! `-o FILE` is given, so the command's own stdout stays clean.

use super::error_chain;
use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::metric::{self, Metric};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_counters::count::{
    spawn_stopped, ChildExit, EventReading, Instance, InstanceReading, RunningChild, Status,
    StoppedChild,
};
use counterpoint_counters::spec::{EventList, EventSpec};
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// perf stat's default event set (the hardware ones are reported unsupported without a PMU).
pub const DEFAULT_EVENTS: &str =
    "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,branches,branch-misses";

#[derive(Args)]
#[command(after_help = "\
Examples:
  counterpoint stat -- ls -R /usr/share            perf's default set for one command
  counterpoint stat -e cycles,task-clock -- true   cycles: <not supported> (no hardware PMU here)
  counterpoint stat -x, -e task-clock,page-faults -- gzip -c big > /dev/null
  counterpoint stat -e '{task-clock,page-faults},cs:u' -p 1234 -- sleep 2
  counterpoint stat -a -I 1000 -e cpu-clock,context-switches      (Ctrl-C to stop)
  counterpoint stat -C 0-1 --json -e msr/tsc/,cpu-clock -- sleep 1

Events: perf names (cycles, instructions, cache-misses, LLC-load-misses, task-clock, cs, ...),
modifiers :u :k :h, raw rNNNN, sys:tracepoint, pmu/term=value,.../ and pmu/named-event/
resolved through /sys/bus/event_source/devices, groups {a,b,c}.
-x columns: value,unit,event,run time (ns),% running,metric value,metric unit.
The command's exit code is returned (128+N when killed by signal N); a command that cannot be
run gives 127 when it is not found and 126 when it cannot be executed, as in a shell.")]
pub struct StatArgs {
    /// Events to count (repeatable; comma-separated; groups in braces).
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    events: Vec<String>,
    /// Count these processes (comma-separated PIDs): every thread now, and what they create.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pid: Option<String>,
    /// The header naming `-p`'s ids, worked out when counting starts (`/proc/TID` is gone once
    /// a thread that ended the count has exited).
    #[arg(skip)]
    pid_header: Option<String>,
    /// Count every task on every online CPU.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Count every task on these CPUs (kernel list format, e.g. 0-3,6).
    #[arg(short = 'C', long = "cpu", value_name = "CPUS",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    cpus: Option<String>,
    /// Print counts every MS milliseconds (deltas), as `perf stat -I`.
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    interval_ms: Option<u64>,
    /// CSV-like output with this separator, in perf stat -x's column layout.
    #[arg(short = 'x', long = "field-separator", value_name = "SEP",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    separator: Option<String>,
    /// Print one JSON object (one per interval with -I).
    #[arg(long, conflicts_with = "separator")]
    json: bool,
    /// Write the counts to FILE instead of stderr.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Root of the sysfs tree used to resolve PMU names (fixture trees in tests).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: PathBuf,
    /// Run the command N times and print the mean of each count, with its spread
    /// (`+- x%`: the standard error of the mean relative to the mean, as perf prints it).
    /// Every run is made, whatever the command's exit; a run killed by a signal is named on
    /// stderr, and the exit status is the last run's. A stop signal to `stat` (Ctrl-C, or
    /// SIGTERM/SIGHUP passed on to the command) ends the repeats after the current run.
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1,
          value_parser = parse_repeat)]
    repeat: u32,
    /// One row per CPU instead of the sum (with -a or -C), as `perf stat -A`.
    #[arg(short = 'A', long = "no-aggr")]
    no_aggr: bool,
    /// One row per thread instead of the sum (with -p), as `perf stat --per-thread`.
    #[arg(long = "per-thread")]
    per_thread: bool,
    /// Count through the broker (`counterpoint daemon`) at SOCKET (default socket without it).
    // Absent: None; bare: Some(None), the default socket; with SOCKET: Some(Some(SOCKET)).
    #[arg(long, value_name = "SOCKET", num_args = 0..=1)]
    daemon: Option<Option<PathBuf>>,
    /// Command to run (after `--`); with -p/-a/-C it only sets how long to count.
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

/// A line on stderr that never panics (a closed stderr must not stop the report).
fn note(msg: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// The most runs `-r` makes (perf has no bound; a typo like `-r 1000000000` should not run
/// a command for ever).
const MAX_REPEAT: u32 = 100_000;

/// `-r N`: a whole number up to [`MAX_REPEAT`], a negative one refused with the range (clap's
/// own parser said "-1 is not in 0..=4294967295"). 0 passes here and is refused with the mode
/// (`check_modes`; with `--daemon`, where only 1 is taken, by that path's own message).
fn parse_repeat(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (0..=i64::from(MAX_REPEAT)).contains(&n) => Ok(n as u32),
        Ok(n) => Err(format!(
            "the number of runs must be from 1 to {MAX_REPEAT}, not {n}"
        )),
        Err(_) => Err(format!(
            "not a whole number: the number of runs must be from 1 to {MAX_REPEAT}"
        )),
    }
}

/// The stop signal that came (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

/// Whether SIGINT or SIGTERM came since [`install_stop_handler`] (for commands that end early
/// and still report what they gathered, as `heatmap` does).
pub(crate) fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst) != 0
}

extern "C" fn on_stop(sig: libc::c_int) {
    STOP.store(sig, Ordering::SeqCst);
}

pub(crate) fn install_stop_handler() {
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        counterpoint_host::signals::handle_unless_ignored(&[libc::SIGINT, libc::SIGTERM], on_stop)
    };
}

/// The command's pid while it runs and is not yet reaped (0 otherwise): where a stop signal
/// sent to `stat` is passed on. Unreaped, the pid cannot name another process.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A stop signal that came before the command's pid was stored, to pass on once it is.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Async-signal-safe only: atomics and kill(2). Any stop signal ends the repeats of -r.
    STOP.store(sig, Ordering::SeqCst);
    // A terminal's Ctrl-C or hang-up went to the whole foreground group, the command included;
    // one sent by a process (`kill PID`) only to us: it is passed on, and the counts of what
    // ran are printed when the command ends, as for Ctrl-C.
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo.
    if unsafe { super::child::sent_by_kernel(info) } {
        return;
    }
    match CHILD.load(Ordering::SeqCst) {
        0 => PENDING.store(sig, Ordering::SeqCst),
        // SAFETY: kill on our own unreaped child.
        pid => unsafe {
            libc::kill(pid, sig);
        },
    }
}

/// From now on a stop signal sent to `stat` goes to the command `pid` (forked, not reaped), so
/// nothing is left running when `stat` is stopped.
fn forward_stop_signals_to(pid: i32) -> Result<()> {
    CHILD.store(pid, Ordering::SeqCst);
    super::child::catch_stop_signals(on_forward)?;
    let early = PENDING.swap(0, Ordering::SeqCst);
    if early != 0 {
        // SAFETY: kill on our own unreaped child.
        unsafe {
            libc::kill(pid, early);
        }
    }
    Ok(())
}

/// Start the forked command, its stop signals passed on to it from before it runs.
fn start_forwarding(stopped: StoppedChild) -> Result<RunningChild> {
    forward_stop_signals_to(stopped.pid())?;
    let started = stopped.start();
    if started.is_err() {
        // Reaped by `start`: its pid is no longer ours.
        CHILD.store(0, Ordering::SeqCst);
    }
    Ok(started?)
}

/// perf stat's default set when counting CPUs (-a/-C): cpu-clock instead of task-clock.
pub const DEFAULT_EVENTS_SYSTEM_WIDE: &str =
    "cpu-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,branches,branch-misses";

/// Parse every `-e` (or perf's default set: the system-wide one when `system_wide`).
pub fn parse_events_for(events: &[String], tree: &PmuTree, system_wide: bool) -> Result<EventList> {
    let mut list = EventList::default();
    if events.is_empty() {
        let set = if system_wide {
            DEFAULT_EVENTS_SYSTEM_WIDE
        } else {
            DEFAULT_EVENTS
        };
        return Ok(parse_event_list(set, tree)?);
    }
    for e in events {
        list.extend(parse_event_list(e, tree)?);
    }
    Ok(list)
}

fn online_cpus() -> Result<Vec<usize>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let set = CpuSet::parse_list(text.trim()).with_context(|| format!("parsing {path}"))?;
    Ok(set.iter().map(|c| c as usize).collect())
}

fn build_target(args: &StatArgs) -> Result<Option<Target>> {
    let n = usize::from(args.pid.is_some())
        + usize::from(args.all_cpus)
        + usize::from(args.cpus.is_some());
    if n > 1 {
        bail!("choose one target: -p, -a or -C");
    }
    if let Some(p) = &args.pid {
        let mut tids = Vec::new();
        for part in p.split(',').map(str::trim) {
            let pid: i32 = part
                .parse()
                .ok()
                .filter(|&v: &i32| v > 0)
                .with_context(|| format!("-p: '{part}' is not a process id"))?;
            match Target::process(pid)? {
                // A thread named twice (`-p P,P`, or a process and one of its threads) is
                // counted once: twice, its counts were added up twice.
                Target::Threads(t) => {
                    for tid in t {
                        if !tids.contains(&tid) {
                            tids.push(tid);
                        }
                    }
                }
                other => return Ok(Some(other)),
            }
        }
        return Ok(Some(Target::Threads(tids)));
    }
    if args.all_cpus {
        return Ok(Some(Target::Cpus(online_cpus()?)));
    }
    if let Some(c) = &args.cpus {
        let set = CpuSet::parse_list(c).map_err(|e| anyhow::anyhow!("-C '{c}': {e}"))?;
        let online = online_cpus()?;
        let cpus: Vec<usize> = set.iter().map(|c| c as usize).collect();
        if let Some(bad) = cpus.iter().find(|c| !online.contains(c)) {
            bail!(
                "-C: CPU {bad} is not online (online: {})",
                CpuSet::from_iter(online.iter().map(|&c| c as u32))
            );
        }
        return Ok(Some(Target::Cpus(cpus)));
    }
    Ok(None)
}

/// Shell status of a process ended by SIGPIPE: what `stat` exits with when its own output is a
/// closed pipe, as a program with SIGPIPE at its default would.
const EXIT_SIGPIPE: u8 = 128 + libc::SIGPIPE as u8;

/// How long a command stopped by `stat` (closed output, error) gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// Whether `err` is a write to a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether process `pid` has ended: gone from `/proc`, or a zombie nobody reaped yet.
pub(super) fn process_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(text) => text
            .rfind(')')
            .and_then(|i| text[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// The processes of `-p`, to stop counting when every one has ended (as perf does).
/// perf's "process id 'P'", saying which ids are threads and whose: `-p` counts a thread's
/// whole process (as perf does), so a thread id reads "thread id 'T' (process P)".
fn process_ids_header(list: &str) -> String {
    let threads: Vec<(String, i32)> = list
        .split(',')
        .filter_map(|x| {
            let id: i32 = x.trim().parse().ok()?;
            let tgid = thread_group(id)?;
            (tgid != id).then(|| (x.trim().to_string(), tgid))
        })
        .collect();
    if threads.is_empty() {
        return format!("process id '{list}'");
    }
    let named: Vec<String> = threads
        .iter()
        .map(|(t, p)| format!("thread id '{t}' (process {p})"))
        .collect();
    if threads.len() == list.split(',').count() {
        named.join(", ")
    } else {
        format!("process id '{list}'; {}", named.join(", "))
    }
}

/// The process (thread group) thread `tid` belongs to, from `/proc/TID/status`.
fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn target_pids(args: &StatArgs) -> Vec<i32> {
    args.pid
        .as_deref()
        .map(|p| p.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// A permission error counting `-p` processes of another user is not about
/// `perf_event_paranoid` (lowering it does not help): the kernel asks for ptrace access to the
/// target. Say so, naming the owner; any other error is passed through.
fn explain_foreign_owner(e: counterpoint_counters::CountError, args: &StatArgs) -> anyhow::Error {
    let (event, errno) = match &e {
        counterpoint_counters::CountError::Permission { event, errno, .. } => {
            (event.clone(), *errno)
        }
        _ => return e.into(),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    // The user's name from /etc/passwd when listed there, else the number.
    let name = |uid: u32| {
        std::fs::read_to_string("/etc/passwd")
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    let f: Vec<&str> = l.split(':').collect();
                    (f.get(2) == Some(&uid.to_string().as_str())).then(|| f[0].to_string())
                })
            })
            .map_or_else(|| format!("uid {uid}"), |n| format!("{n} (uid {uid})"))
    };
    for pid in target_pids(args) {
        if let Some(owner) = foreign_owner(pid) {
            return anyhow::anyhow!(
                "-p {pid}: the process belongs to {}, not to you ({}): counting another user's \
                 process needs ptrace access to it (run as its owner, as root, or with \
                 CAP_SYS_PTRACE); lowering perf_event_paranoid does not lift that (opening \
                 '{event}' was refused: {errno})",
                name(owner),
                name(me)
            );
        }
    }
    e.into()
}

/// The owner of process `pid` when it is another user's and we are not root (where the
/// kernel's ptrace access check refuses us for ownership alone); `None` for our own, as root,
/// or when its `/proc` entry cannot be read.
pub(super) fn foreign_owner(pid: impl std::fmt::Display) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    (me != 0 && owner != me).then_some(owner)
}

/// Whether stderr is a pipe nobody reads any more (where an error message would go nowhere,
/// and printing it would fail).
fn stderr_gone() -> bool {
    let mut p = libc::pollfd {
        fd: libc::STDERR_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: polling one descriptor with a zero timeout; `p` is ours.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLERR != 0
}

// [stat --daemon: broker] counting through the broker lives in its own file.
#[path = "stat_daemon.rs"]
mod stat_daemon;

pub fn run(mut args: StatArgs) -> Result<ExitCode> {
    args.pid_header = args.pid.as_deref().map(process_ids_header);
    super::check_sysfs_root(&args.sysfs_root)?;
    let result = match args.daemon.clone() {
        Some(socket) => stat_daemon::run(&args, socket.as_deref()),
        None => match run_counting(args) {
            // An error nobody can read: end as quietly as a closed output does.
            Err(_) if stderr_gone() => return Ok(ExitCode::from(EXIT_SIGPIPE)),
            other => other,
        },
    };
    match result {
        Err(err) => match exec_failure_status(&err) {
            Some(code) => {
                note(format_args!("counterpoint: error: {}", error_chain(&err)));
                Ok(ExitCode::from(code))
            }
            None => Err(err),
        },
        ok => ok,
    }
}

/// A command that could not be run ends `stat` as it would end a shell: 127 when it was not
/// found (ENOENT), 126 when it was found but `exec` refused it (EACCES, ENOEXEC, ...). `None`
/// for every other error (exit 2).
fn exec_failure_status(err: &anyhow::Error) -> Option<u8> {
    err.chain().find_map(|c| match c.downcast_ref() {
        Some(counterpoint_counters::CountError::Exec { error, .. }) => error
            .raw_os_error()
            .map(|errno| if errno == libc::ENOENT { 127 } else { 126 }),
        _ => None,
    })
}

/// The `-o FILE` writer: a failed write names the file (`-o /dev/full`), keeping the error's kind
/// so that a closed pipe is still recognised.
struct NamedOutput {
    file: std::fs::File,
    name: String,
}

impl NamedOutput {
    fn new(file: std::fs::File, path: &std::path::Path) -> Self {
        NamedOutput {
            file,
            name: path.display().to_string(),
        }
    }

    fn label(&self, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), format!("writing {}: {e}", self.name))
    }
}

impl Write for NamedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf).map_err(|e| self.label(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().map_err(|e| self.label(e))
    }
}

/// The `-o FILE` writer of direct counting: the file is created (or truncated) only once the
/// count has begun (the first write or flush), so a command that cannot start, or counters
/// that do not open, leave an existing file as it was (perf truncates it at once).
struct LateOutput {
    path: PathBuf,
    file: Option<NamedOutput>,
}

impl LateOutput {
    fn new(path: &std::path::Path) -> Self {
        LateOutput {
            path: path.to_path_buf(),
            file: None,
        }
    }

    /// The file, created or truncated on the first call.
    fn open(&mut self) -> std::io::Result<&mut NamedOutput> {
        let out = match self.file.take() {
            Some(out) => out,
            None => {
                let file = std::fs::File::create(&self.path).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("creating {}: {e}", self.path.display()))
                })?;
                NamedOutput::new(file, &self.path)
            }
        };
        Ok(self.file.insert(out))
    }
}

impl Write for LateOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.open()?.write(buf)
    }

    /// Creates the file if no write did yet: `stat` flushes once the count has begun, so a
    /// bad `-o` path stops the command at once instead of after it ran.
    fn flush(&mut self) -> std::io::Result<()> {
        self.open()?.flush()
    }
}

/// How counts are split on output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggr {
    /// One sum over every thread or CPU.
    Global,
    /// One row per CPU (`-A` with `-a`/`-C`).
    PerCpu,
    /// One row per thread (`--per-thread` with `-p`).
    PerThread,
}

fn check_modes(args: &StatArgs) -> Result<Aggr> {
    if !(1..=MAX_REPEAT).contains(&args.repeat) {
        bail!(
            "-r {}: the number of runs must be from 1 to {MAX_REPEAT}",
            args.repeat
        );
    }
    if args.repeat > 1 {
        if args.command.is_empty() {
            bail!("-r {}: repeating needs a command after `--`", args.repeat);
        }
        if args.interval_ms.is_some() {
            bail!("-r and -I cannot be combined (as in perf stat)");
        }
    }
    if args.no_aggr && args.per_thread {
        bail!("choose one of -A/--no-aggr and --per-thread");
    }
    if args.no_aggr {
        if !args.all_cpus && args.cpus.is_none() {
            bail!("-A/--no-aggr counts per CPU: it needs system-wide mode (-a or -C CPUS)");
        }
        return Ok(Aggr::PerCpu);
    }
    if args.per_thread {
        if args.pid.is_none() {
            bail!("--per-thread counts per thread of the processes of -p PID");
        }
        return Ok(Aggr::PerThread);
    }
    Ok(Aggr::Global)
}

/// CPU time of reaped children so far (for `seconds user` / `seconds sys`).
fn children_cpu_time() -> (Duration, Duration) {
    // SAFETY: getrusage fills a plain struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn run_counting(args: StatArgs) -> Result<ExitCode> {
    let aggr = check_modes(&args)?;
    let tree = PmuTree::new(&args.sysfs_root);
    let system_wide = args.all_cpus || args.cpus.is_some();
    let list = parse_events_for(&args.events, &tree, system_wide)?;
    if let Some(ms) = args.interval_ms {
        if ms < 10 {
            bail!("-I {ms}: the interval must be at least 10 ms");
        }
    }
    if build_target(&args)?.is_none() && args.command.is_empty() {
        bail!("nothing to count: give a command after `--`, or -p PID, -a or -C CPUS");
    }
    // Created once the count has begun (see `LateOutput`): nothing is lost when it fails first.
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(LateOutput::new(p)),
        None => Box::new(std::io::stderr()),
    };
    let fmt = Format {
        sep: args.separator.clone(),
        json: args.json,
        aggr,
    };
    let mut runs: Vec<Measured> = Vec::new();
    let mut exit = None;
    for run in 1..=args.repeat {
        let (m, e) = match measure_once(&args, &list, &tree, &fmt, &mut out) {
            Ok(v) => v,
            Err(err) if is_broken_pipe(&err) => return Ok(ExitCode::from(EXIT_SIGPIPE)),
            Err(err) => return Err(err),
        };
        exit = e;
        if let Some(m) = m {
            runs.push(m);
        }
        // Said on stderr, as perf names each death; the counts of what ran until then are in
        // the report. Not SIGPIPE: `stat -- yes | head` is a normal end (shells say nothing).
        if let Some(ChildExit::Signal(sig)) = e.filter(|&e| e != ChildExit::Signal(libc::SIGPIPE)) {
            let which = if args.repeat > 1 {
                format!("run {run} of {}: ", args.repeat)
            } else {
                String::new()
            };
            note(format_args!(
                "counterpoint stat: {which}the command was killed by {} ({sig})",
                counterpoint_host::signals::name(sig)
            ));
        }
        // A stop signal to `stat` (Ctrl-C, or one passed on to the command) ends the repeats.
        if STOP.load(Ordering::SeqCst) != 0 {
            if run < args.repeat {
                note(format_args!(
                    "counterpoint stat: stopped by a signal after run {run} of {}: the report \
                     covers {run} run{}",
                    args.repeat,
                    if run == 1 { "" } else { "s" }
                ));
            }
            break;
        }
    }
    if !runs.is_empty() {
        let summary = summarize(&runs);
        let printed = print_counts(&mut out, &fmt, &summary, &args).and_then(|()| {
            out.flush()?;
            Ok(())
        });
        if let Err(err) = printed {
            if is_broken_pipe(&err) {
                return Ok(ExitCode::from(EXIT_SIGPIPE));
            }
            return Err(err);
        }
    }
    Ok(match exit {
        Some(e) => ExitCode::from(e.shell_code().clamp(0, 255) as u8),
        None => no_command_status(),
    })
}

/// The status of a count with no command (`-a`, `-C`, `-p`), its counts printed: 128+N when a
/// stop signal ended it, as perf stat's (it was 0; CLI probe, session 27), else 0. Direct and
/// through the broker alike.
fn no_command_status() -> ExitCode {
    match STOP.load(Ordering::SeqCst) {
        0 => ExitCode::SUCCESS,
        sig => ExitCode::from((128 + sig).clamp(0, 255) as u8),
    }
}

/// One whole measurement: the rows read at the end, the wall time, and the command's CPU time.
struct Measured {
    rows: Vec<Row>,
    wall: Duration,
    /// User and system time of the command (and what it waited for), when one was run.
    cpu: Option<(Duration, Duration)>,
}

/// Set up, count and (with -I) print one run. Returns the final counts (none with -I, which
/// printed as it went) and how the command ended.
fn measure_once(
    args: &StatArgs,
    list: &EventList,
    tree: &PmuTree,
    fmt: &Format,
    out: &mut Box<dyn Write>,
) -> Result<(Option<Measured>, Option<ChildExit>)> {
    let explicit = build_target(args)?;
    // Set up the target; a command is forked stopped so counting starts exactly at its exec.
    // If anything fails before it starts, dropping it kills and reaps it.
    let mut stopped = None;
    let target = match explicit {
        Some(t) => t,
        None => {
            let child = spawn_stopped(&args.command)?;
            let t = Target::Child(child.pid());
            stopped = Some(child);
            t
        }
    };
    let workload_only =
        matches!(target, Target::Threads(_) | Target::Cpus(_)) && !args.command.is_empty();
    if stopped.is_none() && !workload_only {
        // No command: a stop signal ends the count. Caught before the counters open, so one
        // that comes as they open ends the count too instead of killing the command unprinted
        // (it was caught after, and a signal sent once the fd table showed the counters could
        // land in between).
        install_stop_handler();
    }
    let mut set =
        CounterSet::open(list, &target, tree).map_err(|e| explain_foreign_owner(e, args))?;
    let cpu_before = children_cpu_time();
    let start = Instant::now();
    let mut child: Option<RunningChild> = None;
    if let Some(s) = stopped {
        child = Some(start_forwarding(s)?);
    } else {
        set.enable()?;
        if let (Some(pids), Target::Threads(first)) = (&args.pid, &target) {
            follow_setup_threads(&mut set, tree, pids, first)?;
        }
        if workload_only {
            // With -p/-a/-C the command only times the measurement.
            child = Some(start_forwarding(spawn_stopped(&args.command)?)?);
        }
    }
    // perf prints user/sys time for a command it counts, not for one that only times -p/-a/-C.
    let ran_command = child.is_some() && !workload_only;
    let mut session = Session {
        args,
        fmt,
        out,
        set,
        child,
        exit: None,
        start,
    };
    match session.count() {
        Ok(rows) => {
            let m = rows.map(|(rows, wall)| Measured {
                rows,
                wall,
                cpu: ran_command.then(|| {
                    let after = children_cpu_time();
                    (
                        after.0.saturating_sub(cpu_before.0),
                        after.1.saturating_sub(cpu_before.1),
                    )
                }),
            });
            Ok((m, session.exit))
        }
        Err(err) => {
            // Never leave the command we started running (or unreaped) behind us.
            if let (Some(c), None) = (&session.child, session.exit) {
                CHILD.store(0, Ordering::SeqCst);
                let _ = c.terminate(TERM_GRACE);
            }
            Err(err)
        }
    }
}

/// One line group of output: the counts of every event for one label (a CPU, a thread, or the
/// whole target when `label` is `None`).
#[derive(Clone, Debug)]
struct Row {
    label: Option<String>,
    readings: Vec<EventReading>,
}

/// A thread's `comm-tid` label as perf prints it (`?` when the thread is gone).
fn thread_label(tid: i32) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".into());
    format!("{comm}-{tid}")
}

/// Split per-instance readings into rows, one per instance, each with every event (an event
/// with no counter on that instance is `<not counted>` there).
fn rows_per_instance(base: &[EventReading], per: &[Vec<InstanceReading>], aggr: Aggr) -> Vec<Row> {
    let mut instances: Vec<Instance> = Vec::new();
    for r in per.iter().flatten() {
        if !instances.contains(&r.instance) {
            instances.push(r.instance);
        }
    }
    if aggr == Aggr::PerCpu {
        instances.sort();
    }
    instances
        .iter()
        .map(|inst| {
            let readings = base
                .iter()
                .zip(per)
                .map(|(b, ps)| {
                    let value = b.value.map(|_| {
                        ps.iter().filter(|p| p.instance == *inst).fold(
                            CounterValue::default(),
                            |mut s, p| {
                                s.raw = s.raw.wrapping_add(p.value.raw);
                                s.time_enabled_ns += p.value.time_enabled_ns;
                                s.time_running_ns += p.value.time_running_ns;
                                s
                            },
                        )
                    });
                    EventReading { value, ..b.clone() }
                })
                .collect();
            let label = match *inst {
                Instance::Cpu(c) => format!("CPU{c}"),
                Instance::Thread(t) => thread_label(t),
            };
            Row {
                label: Some(label),
                readings,
            }
        })
        .collect()
}

fn read_rows(set: &CounterSet, aggr: Aggr) -> Result<Vec<Row>> {
    let base = set.read_all()?;
    if aggr == Aggr::Global {
        return Ok(vec![Row {
            label: None,
            readings: base,
        }]);
    }
    let per = set.read_instances()?;
    Ok(rows_per_instance(&base, &per, aggr))
}

/// What is printed at the end: the mean of the runs, with the spread when there are several.
struct Summary {
    rows: Vec<Row>,
    /// Mean wall time.
    wall: Duration,
    runs: usize,
    /// Per row and event: the standard error of the mean relative to the mean, in percent
    /// (perf's `+- x%`); empty with one run.
    noise_pct: Vec<Vec<Option<f64>>>,
    /// Standard error of the mean wall time (seconds) and relative to it (percent).
    wall_noise: Option<(f64, f64)>,
    cpu: Option<(Duration, Duration)>,
}

/// Mean and standard error of the mean (perf's `stddev_stats`: the sample standard deviation
/// over sqrt(n)). `None` for fewer than two values.
pub fn mean_and_sem(xs: &[f64]) -> (f64, Option<f64>) {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return (0.0, None);
    }
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, None);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, Some((var / n).sqrt()))
}

/// Decimals for `MEAN +- SEM seconds time elapsed`, as perf picks them: two digits past the
/// first significant digit of the spread (perf's `get_precision(sd) + 2`).
fn elapsed_precision(sem_s: f64) -> usize {
    if sem_s > 1.0 {
        2
    } else if sem_s > 0.0 {
        // At most ns: a spread of float noise must not print 20 decimals.
        ((-sem_s.log10()).ceil() as usize + 2).min(9)
    } else {
        6
    }
}

/// Relative spread in percent, as perf prints it: none when the mean is zero.
fn relative_pct(mean: f64, sem: Option<f64>) -> Option<f64> {
    match sem {
        Some(s) if mean != 0.0 => Some(100.0 * s / mean.abs()),
        _ => None,
    }
}

fn summarize(runs: &[Measured]) -> Summary {
    let n = runs.len();
    let first = &runs[0];
    let walls: Vec<f64> = runs.iter().map(|m| m.wall.as_secs_f64()).collect();
    let (wall_mean, wall_sem) = mean_and_sem(&walls);
    let mut rows = Vec::new();
    let mut noise_pct = Vec::new();
    for (ri, row) in first.rows.iter().enumerate() {
        let mut readings = Vec::new();
        let mut noise = Vec::new();
        for (ei, r) in row.readings.iter().enumerate() {
            let same: Vec<&EventReading> = runs
                .iter()
                .filter_map(|m| m.rows.get(ri).and_then(|row| row.readings.get(ei)))
                .collect();
            let value = r.value.map(|_| {
                let vals: Vec<CounterValue> = same.iter().filter_map(|x| x.value).collect();
                let k = vals.len().max(1) as f64;
                let avg = |f: &dyn Fn(&CounterValue) -> u64| {
                    (vals.iter().map(|v| f(v) as f64).sum::<f64>() / k).round() as u64
                };
                CounterValue {
                    raw: avg(&|v| v.raw),
                    time_enabled_ns: avg(&|v| v.time_enabled_ns),
                    time_running_ns: avg(&|v| v.time_running_ns),
                }
            });
            let scaled: Vec<f64> = same.iter().filter_map(|x| x.display_value()).collect();
            let (m, sem) = mean_and_sem(&scaled);
            // perf prints the spread of aggregated counts only (not per CPU or thread).
            let aggregated = row.label.is_none();
            noise.push(if n > 1 && aggregated {
                relative_pct(m, sem)
            } else {
                None
            });
            readings.push(EventReading { value, ..r.clone() });
        }
        rows.push(Row {
            label: row.label.clone(),
            readings,
        });
        noise_pct.push(noise);
    }
    Summary {
        rows,
        wall: Duration::from_secs_f64(wall_mean.max(0.0)),
        runs: n,
        noise_pct: if n > 1 { noise_pct } else { Vec::new() },
        wall_noise: wall_sem.map(|s| (s, relative_pct(wall_mean, Some(s)).unwrap_or(0.0))),
        cpu: if n == 1 { first.cpu } else { None },
    }
}

/// A measurement under way: the counters, the command started (if any) and where to print.
struct Session<'a> {
    args: &'a StatArgs,
    fmt: &'a Format,
    out: &'a mut Box<dyn Write>,
    set: CounterSet,
    child: Option<RunningChild>,
    /// How the command ended, once it has.
    exit: Option<ChildExit>,
    start: Instant,
}

impl Session<'_> {
    /// Whether to stop waiting: the command ended, a stop signal came, or every `-p` process
    /// ended.
    fn poll_end(&mut self, pids: &[i32]) -> Result<bool> {
        if let Some(c) = &self.child {
            // With a command, only its end ends the count: a stop signal was passed on to it.
            // Checked without reaping, so that its pid stays ours until nothing is forwarded.
            if !super::child::has_ended(c.pid()).context("waiting for the command")? {
                return Ok(false);
            }
            CHILD.store(0, Ordering::SeqCst);
            self.exit = Some(c.wait()?);
            return Ok(true);
        }
        if STOP.load(Ordering::SeqCst) != 0 {
            return Ok(true);
        }
        // With a command, the command sets the duration; otherwise the processes' lives do.
        Ok(self.child.is_none() && !pids.is_empty() && pids.iter().all(|&p| process_ended(p)))
    }

    /// Count until the end; with -I print each interval and return `None`, otherwise return
    /// the final rows and the wall time.
    fn count(&mut self) -> Result<Option<(Vec<Row>, Duration)>> {
        // The count has begun: `-o FILE` is created now, so a bad path stops the command at
        // once rather than after it ran (stderr: nothing to do).
        self.out.flush()?;
        let pids = target_pids(self.args);
        let mut prev: Option<Vec<Row>> = None;
        match self.args.interval_ms {
            Some(ms) => {
                let step = Duration::from_millis(ms);
                let mut next = self.start + step;
                if self.fmt.sep.is_none() && !self.fmt.json {
                    writeln!(self.out, "{}", interval_header(self.fmt.aggr))?;
                }
                loop {
                    // Wait for the next tick, the end of what is counted or a stop signal.
                    let mut ended = false;
                    loop {
                        if self.poll_end(&pids)? {
                            ended = true;
                            break;
                        }
                        let now = Instant::now();
                        if now >= next {
                            break;
                        }
                        std::thread::sleep((next - now).min(Duration::from_millis(5)));
                    }
                    let now = Instant::now();
                    let cur = read_rows(&self.set, self.fmt.aggr)?;
                    let delta = row_deltas(&cur, prev.as_deref());
                    let wall = now.duration_since(self.start);
                    let span = match &prev {
                        Some(_) => now.duration_since(next - step).min(step),
                        None => wall.min(step),
                    };
                    let summary = Summary {
                        rows: delta,
                        wall: span,
                        runs: 1,
                        noise_pct: Vec::new(),
                        wall_noise: None,
                        cpu: None,
                    };
                    print_counts_at(self.out, self.fmt, &summary, Some(wall), self.args)?;
                    prev = Some(cur);
                    if ended {
                        break;
                    }
                    next += step;
                }
                self.out.flush()?;
                Ok(None)
            }
            None => {
                match &self.child {
                    Some(c) => {
                        let ended = super::child::wait_unreaped(c.pid());
                        // From here the pid may be reaped: nothing is forwarded to it any more.
                        CHILD.store(0, Ordering::SeqCst);
                        ended.context("waiting for the command")?;
                        self.exit = Some(c.wait()?);
                    }
                    None => {
                        while !self.poll_end(&pids)? {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                let wall = self.start.elapsed();
                Ok(Some((read_rows(&self.set, self.fmt.aggr)?, wall)))
            }
        }
    }
}

/// perf stat -I's column header.
fn interval_header(aggr: Aggr) -> &'static str {
    match aggr {
        Aggr::Global => "#           time             counts unit events",
        Aggr::PerCpu => "#           time CPU                    counts unit events",
        Aggr::PerThread => {
            "#           time             comm-pid                  counts unit events"
        }
    }
}

/// Threads created while the counters were being opened, by threads not yet watched, escape
/// inheritance: rescan `/proc/PID/task` and add them until a rescan finds nothing new. Once a
/// rescan is clean every live thread is watched or inherits from a watched one.
fn follow_setup_threads(
    set: &mut CounterSet,
    tree: &PmuTree,
    pids: &str,
    first: &[i32],
) -> Result<()> {
    let mut known: std::collections::BTreeSet<i32> = first.iter().copied().collect();
    for _ in 0..100 {
        let mut new = Vec::new();
        for part in pids.split(',').map(str::trim) {
            let Ok(pid) = part.parse::<i32>() else {
                continue;
            };
            // The process may have exited; its counts so far are kept.
            if let Ok(Target::Threads(tids)) = Target::process(pid) {
                new.extend(tids.into_iter().filter(|t| !known.contains(t)));
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        known.extend(new.iter().copied());
        set.add_threads(&new, tree)?;
    }
    Ok(())
}

/// Per row (matched by label), the counts since the previous reading.
fn row_deltas(cur: &[Row], prev: Option<&[Row]>) -> Vec<Row> {
    cur.iter()
        .map(|row| {
            let p = prev.and_then(|p| p.iter().find(|r| r.label == row.label));
            Row {
                label: row.label.clone(),
                readings: deltas(&row.readings, p.map(|p| p.readings.as_slice())),
            }
        })
        .collect()
}

fn deltas(cur: &[EventReading], prev: Option<&[EventReading]>) -> Vec<EventReading> {
    match prev {
        None => cur.to_vec(),
        Some(p) => cur
            .iter()
            .zip(p)
            .map(|(c, p)| EventReading {
                value: match (c.value, p.value) {
                    (Some(a), Some(b)) => Some(a.delta_since(&b)),
                    (a, _) => a,
                },
                ..c.clone()
            })
            .collect(),
    }
}

struct Format {
    sep: Option<String>,
    json: bool,
    aggr: Aggr,
}

/// A metric value printed on an event's line.
struct LineMetric {
    value: f64,
    unit: String,
    name: &'static str,
}

/// Whether `r` is a clock event (its count is nanoseconds of CPU time).
fn is_clock(r: &EventReading) -> bool {
    r.spec.type_ == counterpoint_counters::spec::TYPE_SOFTWARE
        && (r.spec.canonical == "task-clock" || r.spec.canonical == "cpu-clock")
}

/// Metrics per event line: the core metrics (attached to their first event); `CPUs utilized`
/// on a clock line; and, as perf prints them, other software counts as a rate per second of
/// CPU time counted by task-clock (or cpu-clock) in the same row, none without a clock.
fn line_metrics(readings: &[EventReading], span: Duration) -> Vec<Vec<LineMetric>> {
    let mut sample = Sample::new(None, span.as_nanos() as u64);
    // The same event asked for twice (or with other modifiers) counts the same thing again:
    // metrics use its first occurrence only.
    let mut seen: Vec<&EventSpec> = Vec::new();
    for r in readings {
        if seen
            .iter()
            .any(|s| s.canonical == r.spec.canonical && s.type_ == r.spec.type_)
        {
            continue;
        }
        seen.push(&r.spec);
        if let Some(v) = r.value {
            // Hybrid machines count one generic event per core PMU (different PMU types, same
            // canonical name): metrics use their sum.
            let sum = match sample.values.get(&r.spec.canonical) {
                Some(prev) => CounterValue {
                    raw: prev.raw.wrapping_add(v.raw),
                    time_enabled_ns: prev.time_enabled_ns + v.time_enabled_ns,
                    time_running_ns: prev.time_running_ns + v.time_running_ns,
                },
                None => v,
            };
            sample.set(&r.spec.canonical, sum);
        }
    }
    let secs = span.as_secs_f64();
    let mut out: Vec<Vec<LineMetric>> = readings.iter().map(|_| Vec::new()).collect();
    let core: Vec<Metric> = metric::standard();
    for m in &core {
        // perf prints software rates as K/sec per CPU second (below), not per wall second.
        if m.name == "context_switches_per_s" {
            continue;
        }
        let Some(first) = m.events().first().copied() else {
            continue;
        };
        let Some(idx) = readings
            .iter()
            .position(|r| r.spec.canonical == first && r.value.is_some())
        else {
            continue;
        };
        if let Some(v) = m.eval_sample(&sample) {
            out[idx].push(LineMetric {
                value: v,
                unit: m.unit.to_string(),
                name: m.name,
            });
        }
    }
    // The first clock counted (scaled ns of CPU time) is the rates' denominator.
    let clock = readings
        .iter()
        .position(|r| is_clock(r) && r.display_value().is_some());
    let clock_s = clock
        .and_then(|i| readings[i].value.and_then(|v| v.scaled()))
        .map(|ns| ns / 1e9);
    for (i, r) in readings.iter().enumerate() {
        if !out[i].is_empty() {
            continue;
        }
        if is_clock(r) {
            // cpu-clock: CPUs utilized as for task-clock (whose metric is the core one; a
            // repeated task-clock gets none, as above).
            if r.spec.canonical != "cpu-clock" {
                continue;
            }
            if let (Some(ns), true) = (r.value.and_then(|v| v.scaled()), secs > 0.0) {
                out[i].push(LineMetric {
                    value: ns / 1e9 / secs,
                    unit: "CPUs utilized".into(),
                    name: "cpu_utilization",
                });
            }
            continue;
        }
        let sw_count =
            r.spec.type_ == counterpoint_counters::spec::TYPE_SOFTWARE && r.spec.unit.is_none();
        if let (true, Some(v), Some(cs)) = (sw_count, r.display_value(), clock_s) {
            if cs <= 0.0 {
                continue;
            }
            let rate = v / cs;
            let (value, unit) = if rate >= 1e6 {
                (rate / 1e6, "M/sec")
            } else if rate >= 1e3 {
                (rate / 1e3, "K/sec")
            } else {
                (rate, "/sec")
            };
            out[i].push(LineMetric {
                value,
                unit: unit.to_string(),
                name: "rate_per_cpu_s",
            });
        }
    }
    out
}

fn value_text(r: &EventReading) -> String {
    match (&r.status, r.value) {
        (Status::NotSupported(_), _) | (_, None) => "<not supported>".into(),
        (_, Some(v)) => match v.scaled() {
            None => "<not counted>".into(),
            Some(x) => {
                let x = x * r.spec.scale;
                if r.spec.scale != 1.0 {
                    format!("{x:.2}")
                } else {
                    format!("{}", x.round() as u64)
                }
            }
        },
    }
}

/// Print the final counts.
fn print_counts(out: &mut dyn Write, fmt: &Format, s: &Summary, args: &StatArgs) -> Result<()> {
    print_counts_at(out, fmt, s, None, args)
}

/// Print counts: the final ones (`interval_ts` none) or one interval's.
// Event-major over rows, as perf prints -A: the event index addresses every row's vectors.
#[allow(clippy::needless_range_loop)]
fn print_counts_at(
    out: &mut dyn Write,
    fmt: &Format,
    s: &Summary,
    interval_ts: Option<Duration>,
    args: &StatArgs,
) -> Result<()> {
    let span = s.wall;
    let metrics: Vec<Vec<Vec<LineMetric>>> = s
        .rows
        .iter()
        .map(|row| line_metrics(&row.readings, span))
        .collect();
    let noise = |ri: usize, ei: usize| -> Option<f64> {
        s.noise_pct
            .get(ri)
            .and_then(|n| n.get(ei))
            .copied()
            .flatten()
    };
    let n_events = s.rows.first().map_or(0, |r| r.readings.len());
    if fmt.json {
        let mut events = Vec::new();
        for ei in 0..n_events {
            for (ri, row) in s.rows.iter().enumerate() {
                let r = &row.readings[ei];
                let ms = &metrics[ri][ei];
                let v = r.value.unwrap_or_default();
                events.push(serde_json::json!({
                    "event": r.spec.name,
                    "canonical": r.spec.canonical,
                    "cpu_or_thread": row.label,
                    "supported": r.status == Status::Counting,
                    "reason": match &r.status { Status::NotSupported(s) => Some(s.clone()), _ => None },
                    "value": r.display_value(),
                    "unit": r.spec.unit,
                    "raw": r.value.map(|v| v.raw),
                    "time_enabled_ns": r.value.map(|_| v.time_enabled_ns),
                    "time_running_ns": r.value.map(|_| v.time_running_ns),
                    "counted_percent": r.counted_percent(),
                    "variance_percent": noise(ri, ei),
                    "metrics": ms.iter().map(|m| serde_json::json!({"name": m.name, "value": m.value, "unit": m.unit})).collect::<Vec<_>>(),
                }));
            }
        }
        let obj = serde_json::json!({
            "command": args.command,
            "runs": s.runs,
            "interval_end_s": interval_ts.map(|t| t.as_secs_f64()),
            "elapsed_ns": span.as_nanos() as u64,
            "elapsed_sem_ns": s.wall_noise.map(|(sem, _)| (sem * 1e9) as u64),
            "user_ns": s.cpu.map(|c| c.0.as_nanos() as u64),
            "sys_ns": s.cpu.map(|c| c.1.as_nanos() as u64),
            "events": events,
        });
        writeln!(out, "{obj}")?;
        return Ok(());
    }
    let repeated = s.runs > 1;
    if let Some(sep) = &fmt.sep {
        let ts = interval_ts
            .map(|t| format!("{:.9}{sep}", t.as_secs_f64()))
            .unwrap_or_default();
        for ei in 0..n_events {
            for (ri, row) in s.rows.iter().enumerate() {
                let r = &row.readings[ei];
                let ms = &metrics[ri][ei];
                let prefix = match &row.label {
                    Some(l) => format!("{ts}{l}{sep}"),
                    None => ts.clone(),
                };
                let v = r.value.unwrap_or_default();
                let pct = r.counted_percent().unwrap_or(100.0);
                let (mv, mu) = match ms.first() {
                    Some(m) => (format!("{:.3}", m.value), m.unit.clone()),
                    None => (String::new(), String::new()),
                };
                // With -r perf adds the spread after the event name.
                let var = if repeated {
                    format!("{:.2}%{sep}", noise(ri, ei).unwrap_or(0.0))
                } else {
                    String::new()
                };
                writeln!(
                    out,
                    "{prefix}{}{sep}{}{sep}{}{sep}{var}{}{sep}{:.2}{sep}{mv}{sep}{mu}",
                    value_text(r),
                    r.spec.unit.as_deref().unwrap_or(""),
                    r.spec.name,
                    v.time_running_ns,
                    pct,
                )?;
                let empty_var = if repeated { sep.as_str() } else { "" };
                for m in ms.iter().skip(1) {
                    writeln!(
                        out,
                        "{prefix}{sep}{sep}{sep}{empty_var}{sep}{sep}{:.3}{sep}{}",
                        m.value, m.unit
                    )?;
                }
            }
        }
        return Ok(());
    }
    // Human format, after perf's columns.
    let ts = interval_ts
        .map(|t| format!("{:>16.9} ", t.as_secs_f64()))
        .unwrap_or_default();
    if interval_ts.is_none() {
        let what = match (&args.pid, &args.cpus, args.all_cpus) {
            (Some(p), _, _) => args
                .pid_header
                .clone()
                .unwrap_or_else(|| process_ids_header(p)),
            (_, Some(c), _) => format!("CPU(s) {c}"),
            (_, _, true) => "'system wide'".into(),
            _ => format!("'{}'", args.command.join(" ")),
        };
        let runs = if repeated {
            format!(" ({} runs)", s.runs)
        } else {
            String::new()
        };
        writeln!(out, "\n Performance counter stats for {what}{runs}:\n")?;
    }
    for ei in 0..n_events {
        for (ri, row) in s.rows.iter().enumerate() {
            let r = &row.readings[ei];
            let ms = &metrics[ri][ei];
            let label = match (&row.label, fmt.aggr) {
                (Some(l), Aggr::PerThread) => match l.rsplit_once('-') {
                    Some((comm, tid)) => format!("{comm:>16}-{tid:<8} "),
                    None => format!("{l:>25} "),
                },
                (Some(l), _) => format!("{l:<10} "),
                (None, _) => String::new(),
            };
            let unit = r.spec.unit.as_deref().unwrap_or("");
            let mut line = format!(
                "{ts}{label}{:>18} {unit:<4} {:<32}",
                value_text(r),
                r.spec.name
            );
            match ms.first() {
                Some(m) => line.push_str(&format!(" # {:>8.3} {:<23}", m.value, m.unit)),
                None => line.push_str(&" ".repeat(35)),
            }
            if let Some(pct) = noise(ri, ei).filter(|&p| p != 0.0) {
                line.push_str(&format!("  ( +-{pct:>6.2}% )"));
            }
            if let Some(v) = r.value {
                if v.multiplexed() {
                    line.push_str(&format!("  ({:.2}%)", 100.0 * v.counted_fraction()));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
            for m in ms.iter().skip(1) {
                writeln!(out, "{ts}{:>57} # {:>8.3} {}", "", m.value, m.unit)?;
            }
        }
    }
    if interval_ts.is_none() {
        // Each distinct reason once, naming its events.
        let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
        for r in s.rows.first().map(|r| r.readings.as_slice()).unwrap_or(&[]) {
            if let Status::NotSupported(why) = &r.status {
                match reasons.iter_mut().find(|(w, _)| w == why) {
                    Some((_, names)) => names.push(r.spec.name.clone()),
                    None => reasons.push((why.clone(), vec![r.spec.name.clone()])),
                }
            }
        }
        if !reasons.is_empty() {
            writeln!(out)?;
        }
        for (why, names) in reasons {
            writeln!(out, "   <not supported>: {}: {why}", names.join(", "))?;
        }
        match s.wall_noise {
            Some((sem_s, pct)) => {
                let p = elapsed_precision(sem_s);
                writeln!(
                    out,
                    "\n{:>18.p$} +- {sem_s:.p$} seconds time elapsed  ( +-{pct:>6.2}% )\n",
                    span.as_secs_f64()
                )?
            }
            None => writeln!(out, "\n{:>18.9} seconds time elapsed\n", span.as_secs_f64())?,
        }
        if let Some((user, sys)) = s.cpu {
            writeln!(out, "{:>18.9} seconds user", user.as_secs_f64())?;
            writeln!(out, "{:>18.9} seconds sys\n", sys.as_secs_f64())?;
        }
    }
    Ok(())
}

/// `counterpoint bench read`.
#[derive(Args)]
pub struct BenchReadArgs {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Timed rounds (median reported); 1 to 1000.
    #[arg(long, default_value_t = 21,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    rounds: usize,
    /// Reads per round and path; 1 to 1000000 (a read of all its paths costs about 3.5 us on
    /// a 2-vCPU VM, so both bounds together stay under an hour).
    #[arg(long, default_value_t = 100_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    iterations: usize,
}

/// ns per read: our layer vs raw read(2) on the same fd, perf-event2's read, a group of three,
/// and the user-space path (here: none).
pub fn bench_read(args: BenchReadArgs) -> Result<ExitCode> {
    let b = counterpoint_counters::readbench::measure(args.rounds, args.iterations)
        .context("opening task-clock counters on this thread")?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&b)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "counter read cost, {} on this thread (median of {} rounds x {} reads)",
        if b.user_only {
            "task-clock:u (user-only: kernel-mode counting is refused to this user)"
        } else {
            "task-clock"
        },
        b.rounds,
        b.iterations_per_round
    )?;
    outln!(
        "  our layer (one read(2), stack buffer)  {:>8.1} ns",
        b.ours_ns
    )?;
    outln!(
        "  raw read(2), same fd                   {:>8.1} ns",
        b.raw_read_ns
    )?;
    outln!(
        "  ours / raw (median per round)          {:>8.3}x",
        b.ours_over_raw
    )?;
    outln!(
        "  perf-event2 Counter::read_full         {:>8.1} ns",
        b.perf_event2_read_full_ns
    )?;
    outln!(
        "  group of three, one read(2)            {:>8.1} ns",
        b.group3_ns
    )?;
    outln!("  user-space read (rdpmc): {}", b.user_space.explanation)?;
    if let Some(cap) = b.user_space.software_cap_user_rdpmc {
        outln!(
            "    task-clock mmap page: cap_user_rdpmc = {}",
            u8::from(cap)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: StatArgs,
    }

    fn reading(list: &str, raw: u64, enabled: u64, running: u64) -> EventReading {
        let spec = parse_event_list(list, &PmuTree::new("/nonexistent"))
            .unwrap()
            .groups[0]
            .members[0]
            .clone();
        EventReading {
            spec,
            value: Some(CounterValue {
                raw,
                time_enabled_ns: enabled,
                time_running_ns: running,
            }),
            status: Status::Counting,
        }
    }

    fn render(args: &[&str], readings: &[EventReading]) -> String {
        let w = Wrap::parse_from(std::iter::once("stat").chain(args.iter().copied()));
        let fmt = Format {
            sep: w.args.separator.clone(),
            json: w.args.json,
            aggr: Aggr::Global,
        };
        let m = Measured {
            rows: vec![Row {
                label: None,
                readings: readings.to_vec(),
            }],
            wall: Duration::from_secs(1),
            cpu: None,
        };
        let mut out = Vec::new();
        print_counts(&mut out, &fmt, &summarize(&[m]), &w.args).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn multiplexed_counts_are_scaled_with_percentage() {
        // 4000 faults (scaled) over 0.5 s of task-clock: 8 K/sec of CPU time, as perf rates.
        let r = [
            reading("page-faults", 1000, 400, 100),
            reading("task-clock", 500_000_000, 10, 10),
        ];
        let csv = render(&["-x,", "--", "true"], &r);
        assert_eq!(
            csv.lines().next().unwrap(),
            "4000,,page-faults,100,25.00,8.000,K/sec"
        );
        let human = render(&["--", "true"], &r);
        let line = human.lines().find(|l| l.contains("page-faults")).unwrap();
        assert!(line.starts_with("              4000"), "{line}");
        assert!(line.ends_with("(25.00%)"), "{line}");
    }

    #[test]
    fn never_running_counter_is_not_counted() {
        let r = [reading("cs", 0, 400, 0)];
        let csv = render(&["-x,", "--", "true"], &r);
        assert!(csv.starts_with("<not counted>,,cs,0,0.00,"), "{csv}");
    }

    #[test]
    fn ipc_and_mpki_on_their_event_lines() {
        let r = [
            reading("cycles", 2000, 10, 10),
            reading("instructions", 3000, 10, 10),
            reading("cache-misses", 6, 10, 10),
        ];
        let csv = render(&["-x,", "--", "true"], &r);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "2000,,cycles,10,100.00,0.667,cycles per insn");
        assert_eq!(
            lines[1],
            "3000,,instructions,10,100.00,1.500,insn per cycle"
        );
        assert_eq!(
            lines[2],
            "6,,cache-misses,10,100.00,2.000,LLC misses per 1k insn"
        );
        // A second metric on the same event: an extra row, first five columns empty.
        assert_eq!(lines[3], ",,,,,384.000,bytes/s memory (LLC misses x 64 B)");
    }

    #[test]
    fn duplicate_event_is_not_summed_into_metrics() {
        // 0.5 s of task-clock over 1 s: 0.5 CPUs, whether asked for once or twice.
        let one = reading("task-clock", 500_000_000, 10, 10);
        let ms = line_metrics(&[one.clone(), one], Duration::from_secs(1));
        assert_eq!(ms[0].len(), 1);
        assert!((ms[0][0].value - 0.5).abs() < 1e-9, "{}", ms[0][0].value);
        assert!(ms[1].is_empty());
        // A user-only copy is not a hybrid sibling (same PMU): not summed either.
        let u = reading("task-clock:u", 100_000_000, 10, 10);
        let ms = line_metrics(
            &[reading("task-clock", 500_000_000, 10, 10), u],
            Duration::from_secs(1),
        );
        assert!((ms[0][0].value - 0.5).abs() < 1e-9, "{}", ms[0][0].value);
        assert!(ms[1].is_empty());
    }

    #[test]
    fn standard_error_of_the_mean_is_perfs() {
        // perf's stddev_stats: sample standard deviation / sqrt(n).
        let (m, sem) = mean_and_sem(&[1.0, 2.0, 3.0, 4.0]);
        assert!((m - 2.5).abs() < 1e-12);
        let sd = (5.0f64 / 3.0).sqrt();
        assert!((sem.unwrap() - sd / 2.0).abs() < 1e-12);
        assert_eq!(mean_and_sem(&[7.0]), (7.0, None));
        assert_eq!(relative_pct(0.0, Some(1.0)), None);
        assert!((relative_pct(2.0, Some(0.5)).unwrap() - 25.0).abs() < 1e-12);
    }

    #[test]
    fn repeated_runs_print_mean_and_spread() {
        let run = |faults: u64, wall_ms: u64| Measured {
            rows: vec![Row {
                label: None,
                readings: vec![
                    reading("task-clock", 1_000_000, 10, 10),
                    reading("page-faults", faults, 10, 10),
                ],
            }],
            wall: Duration::from_millis(wall_ms),
            cpu: None,
        };
        let s = summarize(&[run(100, 100), run(200, 100), run(300, 100)]);
        assert_eq!(s.rows[0].readings[1].value.unwrap().raw, 200);
        // sd 100, sem 100/sqrt(3) = 57.735, relative to 200: 28.87 %.
        assert!((s.noise_pct[0][1].unwrap() - 28.8675).abs() < 1e-3);
        // Constant task-clock: no spread printed.
        assert_eq!(s.noise_pct[0][0], Some(0.0));
        let w = Wrap::parse_from(["stat", "-r", "3", "--", "true"]);
        let fmt = Format {
            sep: None,
            json: false,
            aggr: Aggr::Global,
        };
        let mut out = Vec::new();
        print_counts(&mut out, &fmt, &s, &w.args).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("for 'true' (3 runs):"), "{text}");
        let pf = text.lines().find(|l| l.contains("page-faults")).unwrap();
        assert!(pf.ends_with("( +- 28.87% )"), "{pf}");
        // 200 faults per 1 ms of task-clock: 200 K/sec.
        assert!(pf.contains("#  200.000 K/sec"), "{pf}");
        let tc = text.lines().find(|l| l.contains("task-clock")).unwrap();
        assert!(!tc.contains("+-"), "{tc}");
        assert!(
            text.contains("       0.100000000 +- 0.000000000 seconds time elapsed"),
            "{text}"
        );
        // perf's decimals: 0.00577 -> 5, 0.000139 -> 6.
        assert_eq!(elapsed_precision(0.00577), 5);
        assert_eq!(elapsed_precision(0.000139), 6);
        assert_eq!(elapsed_precision(2.5), 2);
        assert_eq!(elapsed_precision(1e-17), 9);
    }

    #[test]
    fn per_instance_rows_split_by_cpu_in_order() {
        let base = vec![reading("cpu-clock", 30, 10, 10), reading("cs", 3, 10, 10)];
        let v = |raw| CounterValue {
            raw,
            time_enabled_ns: 5,
            time_running_ns: 5,
        };
        let per = vec![
            vec![
                InstanceReading {
                    instance: Instance::Cpu(1),
                    value: v(20),
                },
                InstanceReading {
                    instance: Instance::Cpu(0),
                    value: v(10),
                },
            ],
            vec![
                InstanceReading {
                    instance: Instance::Cpu(0),
                    value: v(1),
                },
                InstanceReading {
                    instance: Instance::Cpu(1),
                    value: v(2),
                },
            ],
        ];
        let rows = rows_per_instance(&base, &per, Aggr::PerCpu);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].label.as_deref(), Some("CPU0"));
        assert_eq!(rows[0].readings[0].value.unwrap().raw, 10);
        assert_eq!(rows[1].readings[1].value.unwrap().raw, 2);
        // A CPU's rate uses its own cpu-clock: 2 cs over 20 ns = 1e8/s.
        let ms = line_metrics(&rows[1].readings, Duration::from_secs(1));
        assert_eq!(ms[1][0].unit, "M/sec");
        assert!((ms[1][0].value - 100.0).abs() < 1e-9);
    }
}
