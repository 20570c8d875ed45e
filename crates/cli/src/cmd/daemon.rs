//! `counterpoint daemon`: the counter broker (crates/broker) on a Unix socket.

use anyhow::{Context, Result};
use clap::Args;
use counterpoint_broker::access::Policy;
use counterpoint_broker::server::{self, Broker, Config};
use std::path::PathBuf;
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
the CPU reports none. SIGTERM/SIGINT stop it cleanly (socket removed). See docs/broker.md.")]
pub struct DaemonArgs {
    /// Socket path.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Access policy (TOML); the documented defaults without it.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Counter slots per CPU (the budget, applied to software events too).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    slots: Option<u64>,
    /// Scheduling slice in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    slice_ms: u64,
    /// Journal of registrations (counts survive a restart).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Audit log, JSON lines (overrides the policy's `audit_log`).
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Serve OpenMetrics on HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
    /// Root of the sysfs tree used to resolve event names.
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: PathBuf,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
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

pub fn run(args: DaemonArgs) -> Result<ExitCode> {
    let policy = match &args.policy {
        Some(p) => Policy::load(p)?,
        None => Policy::default(),
    };
    let (slots, source) = match (args.slots, server::pmu_slots()) {
        (Some(n), _) => (n as usize, "--slots"),
        (None, Some(n)) => (n, "CPUID leaf 0xA"),
        (None, None) => (4, "default: no PMU reported"),
    };
    let socket = args.socket.clone().unwrap_or_else(server::default_socket);
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
    // Socket activation (dist/counterpointd.socket): systemd passes the listening socket as
    // fd 3 with LISTEN_PID/LISTEN_FDS; it owns the path, so we do not remove it on exit.
    let activated = systemd_listener();
    let listener = match activated.as_ref() {
        Some(l) => l
            .try_clone()
            .context("using the socket passed by systemd")?,
        None => server::bind(&socket)?,
    };
    let h = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let s = stop.clone();
        std::thread::spawn(move || {
            while !STOP.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            s.store(true, Ordering::SeqCst);
        })
    };
    eprintln!(
        "counterpoint daemon: listening on {} ({slots} slots per CPU, {source}; slice {} ms)",
        socket.display(),
        args.slice_ms
    );
    let served = server::run(broker, listener, stop.clone());
    STOP.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    let removed = if activated.is_some() {
        Ok(())
    } else {
        std::fs::remove_file(&socket)
    };
    served.context("serving")?;
    removed.with_context(|| format!("removing {}", socket.display()))?;
    eprintln!("counterpoint daemon: stopped");
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
