//! `counterpoint daemon`: the counter broker (crates/broker) on a Unix socket.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_broker::access::Policy;
use counterpoint_broker::server::{self, Broker, Config};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
#[command(after_help = "\
Examples:
  counterpoint daemon                                   default socket, default policy
  counterpoint daemon --socket /tmp/cp.sock --policy policy.toml --slots 2 --journal /tmp/cp.journal
  counterpoint stat --daemon /tmp/cp.sock -e task-clock,cs -p 1234 -- sleep 1

Socket: /run/counterpoint/broker.sock for root, $XDG_RUNTIME_DIR/counterpoint/broker.sock
otherwise. Slots: the PMU's general-purpose counters (CPUID leaf 0xA) unless --slots; 4 when
the CPU reports none.

Signals: SIGTERM, SIGINT, SIGHUP (a closed terminal) and SIGQUIT stop it cleanly: every
registration checkpointed, the socket removed, exit 0. SIGPIPE is ignored (a consumer gone
mid-write ends only its connection). Other signals (SIGUSR1, SIGUSR2, ...) keep their default
action and kill it as SIGKILL does: the journal keeps the counts, and the socket file left
behind is replaced as stale by the next start. See docs/broker.md.")]
pub struct DaemonArgs {
    /// Socket path (at most 107 bytes: a Unix socket address holds 108 including the
    /// terminating NUL). Its directory is created; a stale socket there is replaced; anything
    /// else there is refused and left untouched.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Access policy (TOML); the documented defaults without it.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Counter slots per CPU, 1 to 64 (the budget, applied to software events too).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    slots: Option<u64>,
    /// Scheduling slice in milliseconds, 1 to 10000.
    #[arg(long, value_name = "MS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    slice_ms: u64,
    /// Journal of registrations (counts survive a restart).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Audit log, JSON lines (overrides the policy's `audit_log`): a new file, or an audit log
    /// to append to; an existing file whose first line is not an audit record is refused and
    /// left untouched.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Serve OpenMetrics on HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
    /// Root of the sysfs tree used to resolve event names (an existing directory).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: PathBuf,
}

static STOP: AtomicBool = AtomicBool::new(false);
/// The write end of the stop pipe (-1 until made): the handler writes a byte to it, so the
/// thread that turns a signal into a stop sleeps in `read(2)` instead of polling the flag.
static STOP_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    let fd = STOP_PIPE.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a local. A full pipe (many
        // signals) already holds a wake-up.
        unsafe { libc::write(fd, std::ptr::addr_of!(b).cast(), 1) };
    }
}

/// The stop pipe's read end (the write end goes to `STOP_PIPE`, for the handler).
fn stop_pipe() -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let mut fds = [-1; 2];
    // SAFETY: pipe2 fills the two-element array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        bail!(
            "cannot make the stop pipe: {}",
            std::io::Error::last_os_error()
        );
    }
    // The read end blocks (the watcher sleeps in it); the write end stays non-blocking so a
    // handler never blocks on a full pipe.
    // SAFETY: fcntl on a descriptor just made.
    unsafe { libc::fcntl(fds[0], libc::F_SETFL, 0) };
    STOP_PIPE.store(fds[1], Ordering::SeqCst);
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else (the write end
    // lives for the process, in `STOP_PIPE`).
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[0]) })
}

/// Sleep until a stop signal has come (or the pipe fails, then poll the flag).
fn wait_for_stop(pipe: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    while !STOP.load(Ordering::SeqCst) {
        let mut b = 0u8;
        // SAFETY: reads one byte into a local from a descriptor we own.
        let n = unsafe { libc::read(pipe.as_raw_fd(), std::ptr::addr_of_mut!(b).cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The signals that stop the daemon cleanly. SIGHUP with them: a daemon left in a terminal that
/// closes must not die with its socket file behind; SIGQUIT as other daemons take it (a
/// graceful stop), and as the stop signals of `experiment` include it.
const STOP_SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Catch [`STOP_SIGNALS`] and ignore SIGPIPE (`main` sets it to its default, which would kill
/// the daemon when it writes to a consumer that has gone: an EPIPE, handled per connection).
/// Before anything starts, so a stop during start-up is not a death either.
fn install_signals() -> Result<()> {
    let h = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for (sig, action) in STOP_SIGNALS
        .iter()
        // One ignored by whoever started us (`nohup`'s SIGHUP) stays ignored.
        .filter(|&&s| !counterpoint_host::signals::ignored(s))
        .map(|&s| (s, h))
        .chain([(libc::SIGPIPE, libc::SIG_IGN)])
    {
        // SAFETY: the handler only stores to an atomic; SIG_IGN needs nothing.
        if unsafe { libc::signal(sig, action) } == libc::SIG_ERR {
            let e = std::io::Error::last_os_error();
            bail!("cannot set the action of signal {sig}: {e}");
        }
    }
    Ok(())
}

/// The listening socket systemd passed (fd 3), if this process was socket-activated.
fn systemd_listener() -> Option<std::os::unix::net::UnixListener> {
    use std::os::fd::FromRawFd;
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    let fds: u32 = std::env::var("LISTEN_FDS").ok()?.parse().ok()?;
    if pid != std::process::id() || fds < 1 {
        return None;
    }
    // SAFETY: fd 3 is ours by the sd_listen_fds protocol (checked LISTEN_PID); we take it once.
    let l = unsafe { std::os::unix::net::UnixListener::from_raw_fd(3) };
    // Not a Unix socket (misconfigured unit): refuse rather than misuse the descriptor.
    l.local_addr().ok()?;
    Some(l)
}

/// The longest socket path: `sun_path` holds 108 bytes on Linux, the terminating NUL included.
const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Refuse, before anything starts, a socket path that cannot be bound, each with its reason:
/// too long for a Unix socket address, under a path whose nearest existing part is not a
/// directory, or already taken by something that is not a socket (left untouched). A socket
/// there (stale or live) is the broker's own business ([`server::bind`]).
fn check_socket_path(path: &Path) -> Result<()> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        bail!(
            "socket {}: {len} bytes, too long for a Unix socket path (at most \
             {MAX_SOCKET_PATH_BYTES} bytes: sun_path holds 108 including the terminating NUL)",
            path.display()
        );
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !m.file_type().is_socket() {
            bail!(
                "socket {}: exists and is not a socket ({}); left untouched: remove it or \
                 choose another --socket",
                path.display(),
                counterpoint_host::files::kind(m.file_type())
            );
        }
        return Ok(());
    }
    // The nearest part of the path that exists must be a directory (the rest is created).
    let existing = super::nearest_existing_ancestor(path);
    if let Ok(m) = std::fs::metadata(existing) {
        if !m.is_dir() {
            bail!(
                "socket {}: {} is not a directory ({}), so the socket cannot be created under \
                 it",
                path.display(),
                existing.display(),
                counterpoint_host::files::kind(m.file_type())
            );
        }
    }
    Ok(())
}

/// Refuse an existing non-empty audit log whose first line is not an audit record (a JSON
/// object with `time_ns` and `action`, as [`counterpoint_broker::access::AuditRecord`] writes):
/// a typo must not append JSON lines to an unrelated file. Nothing is written or created here.
fn check_audit_log(flag: &str, path: &Path) -> Result<()> {
    use std::io::{BufRead, BufReader, Read};
    let Ok(m) = std::fs::metadata(path) else {
        // Missing: created by the broker (an unusable directory is its error).
        return Ok(());
    };
    if m.is_dir() {
        bail!("{flag} {}: a directory, not a file", path.display());
    }
    if !m.is_file() || m.len() == 0 {
        // /dev/null and the like, or an empty file: nothing to mistake.
        return Ok(());
    }
    let file = std::fs::File::open(path).with_context(|| format!("{flag} {}", path.display()))?;
    // A record is a few hundred bytes: a first line longer than 64 KiB is not one.
    let mut first = Vec::new();
    BufReader::new(file.take(64 << 10))
        .read_until(b'\n', &mut first)
        .with_context(|| format!("{flag} {}", path.display()))?;
    let is_record = serde_json::from_slice::<serde_json::Value>(&first)
        .ok()
        .and_then(|v| {
            let o = v.as_object()?;
            Some(o.get("time_ns")?.is_u64() && o.get("action")?.is_string())
        })
        .unwrap_or(false);
    if !is_record {
        bail!(
            "{flag} {}: not a counterpoint audit log (its first line is not an audit record, \
             a JSON object with time_ns and action); refusing to append to it: give a new path \
             or remove the file",
            path.display()
        );
    }
    Ok(())
}

pub fn run(args: DaemonArgs) -> Result<ExitCode> {
    install_signals()?;
    let policy = match &args.policy {
        Some(p) => Policy::load(p)?,
        None => Policy::default(),
    };
    // Refused before anything starts: a sysfs root that is not a directory (event names would
    // resolve against nothing), an audit log that is another file, a socket path that cannot
    // be bound.
    super::check_sysfs_root(&args.sysfs_root)?;
    match (&args.audit, &policy.audit_log) {
        (Some(a), _) => check_audit_log("--audit", a)?,
        (None, Some(a)) => check_audit_log("audit_log (from --policy)", a)?,
        (None, None) => {}
    }
    let (slots, source) = match (args.slots, server::pmu_slots()) {
        (Some(n), _) => (n as usize, "--slots"),
        (None, Some(n)) => (n, "CPUID leaf 0xA"),
        (None, None) => (4, "default: no PMU reported"),
    };
    let socket = args.socket.clone().unwrap_or_else(server::default_socket);
    // Socket activation (dist/counterpointd.socket): systemd passes the listening socket as
    // fd 3 with LISTEN_PID/LISTEN_FDS; it owns the path, so we do not remove it on exit.
    let activated = systemd_listener();
    if activated.is_none() {
        check_socket_path(&socket)?;
    }
    let cfg = Config {
        slots,
        slice: Duration::from_millis(args.slice_ms),
        policy,
        journal: args.journal.clone(),
        audit: args.audit.clone(),
        sysfs_root: args.sysfs_root.clone(),
        ..Config::default()
    };
    let broker = Arc::new(Broker::new(cfg)?);
    // Kept until the daemon ends: dropping the handle stops the exporter.
    let _exporter = match &args.metrics_addr {
        Some(addr) => {
            let b = broker.clone();
            let h = server::start_metrics(addr, Arc::new(move || b.metrics_readings()))?;
            eprintln!(
                "counterpoint daemon: OpenMetrics on http://{}/metrics",
                h.addr()
            );
            Some(h)
        }
        None => None,
    };
    let listener = match activated.as_ref() {
        Some(l) => l
            .try_clone()
            .context("using the socket passed by systemd")?,
        None => server::bind(&socket)?,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let s = stop.clone();
        let pipe = stop_pipe()?;
        let wake = listener.local_addr().ok();
        std::thread::spawn(move || {
            wait_for_stop(&pipe);
            s.store(true, Ordering::SeqCst);
            // The accept loop sleeps in poll(2) on the socket: a connection of our own wakes
            // it to see the flag (else it sees it within its one-second backstop).
            if let Some(path) = wake.as_ref().and_then(|a| a.as_pathname()) {
                let _ = std::os::unix::net::UnixStream::connect(path);
            }
        })
    };
    eprintln!(
        "counterpoint daemon: listening on {} ({slots} slots per CPU, {source}; slice {} ms)",
        socket.display(),
        args.slice_ms
    );
    let served = server::run(broker, listener, stop.clone());
    // A return without a signal (an accept error): release the watcher.
    if !STOP.load(Ordering::SeqCst) {
        on_stop(0);
    }
    let _ = watcher.join();
    let removed = if activated.is_some() {
        Ok(())
    } else {
        std::fs::remove_file(&socket)
    };
    served.context("serving")?;
    removed.with_context(|| format!("removing {}", socket.display()))?;
    // Not eprintln!: after SIGHUP stderr may be a terminal that is gone (EIO), and a panic
    // there would turn a clean stop into exit 101.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "counterpoint daemon: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Where `top` and the agent count: through the broker at `socket` (the default socket when
/// `None`) if one answers there, else with their own perf_event groups (`None`). The line says
/// which, and why when a broker was not used.
pub fn host_counter_source(
    socket: Option<&std::path::Path>,
    system: bool,
) -> (
    Option<Box<dyn counterpoint_host::perf::CounterSource>>,
    String,
) {
    let path = socket.map_or_else(server::default_socket, std::path::Path::to_path_buf);
    match counterpoint_broker::hostsource::BrokerSource::connect(&path) {
        Ok(b) => (
            Some(Box::new(if system { b.system_class() } else { b })),
            format!("counting through the broker at {}", path.display()),
        ),
        Err(e) => (None, format!("counting directly (no broker: {e})")),
    }
}
