//! `counterpoint bench broker`: the broker's fairness, cost and read latency, measured (never
//! asserted). (a) three consumers with shares 1:2:5 on one slot: counted-time ratio; (b) 100
//! consumers x 4 events pushed at 10 Hz: the broker's CPU time per wall second (a `counterpoint
//! daemon` child, from /proc/PID/stat); (c) read latency p50/p99 through the socket against a
//! direct read(2) of the same event. `--fuzz N` runs N random inputs through the decoder.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_broker::client::Client;
use counterpoint_broker::proto;
use counterpoint_counters::count::read_fd;
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use super::bench_stop as stop;

#[derive(Args)]
#[command(after_help = "\
Two modes:
  measured runs  (a) shares, (b) cost, (c) read latency: --seconds, --consumers, --reads, --shared
  --fuzz N       the request decoder only: none of the above (refused with it)
Both take --json.

Examples:
  counterpoint bench broker --seconds 2 --consumers 10 --reads 1000
  counterpoint bench broker --fuzz 1000000 --json")]
pub struct BenchBrokerArgs {
    /// Seconds of wall time for the share run (a) and for the cost run (b) each, 0.1 to 600
    /// (decimal: 0.5 is half a second). Not with --fuzz.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds)]
    seconds: f64,
    /// Consumers in the cost run (b), 1 to 1000. Not with --fuzz.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    consumers: u64,
    /// Reads per latency series (c), 10 to 10000000. Not with --fuzz.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    reads: u64,
    /// Only fuzz the request decoder with N random inputs, 1 to 100000000 (nothing else; a few
    /// million inputs a second). Goes with --json only: --seconds, --consumers, --reads and
    /// --shared set the measured runs (a)-(c), which --fuzz does not run, and are refused with
    /// it.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..=100_000_000),
        conflicts_with_all = ["seconds", "consumers", "reads", "shared"]
    )]
    fuzz: Option<u64>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Cost run (b) through shared pages (`subscribe_shared`): the broker writes each reading
    /// into the consumer's page, which the consumer reads at 10 Hz, instead of sending it. Not
    /// with --fuzz.
    #[arg(long)]
    shared: bool,
}

/// `--seconds` bounds: at least one 10 Hz push period, at most ten minutes.
const MIN_SECONDS: f64 = 0.1;
const MAX_SECONDS: f64 = 600.0;

/// clap's parser for `--seconds`: a decimal number of seconds from 0.1 to 600.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (MIN_SECONDS..=MAX_SECONDS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected seconds from {MIN_SECONDS} to {MAX_SECONDS} (decimal, e.g. 0.5 or 10)"
        )),
    }
}

/// A `counterpoint daemon` child on a private socket; killed and reaped on drop.
struct Daemon {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(slots: usize, slice_ms: u64) -> Result<Daemon> {
        let dir = tempfile::tempdir().context("creating a socket directory")?;
        let socket = dir.path().join("broker.sock");
        // The latency series reads back to back: lift the per-connection rate limit.
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, "rate_per_s = 1e9\nrate_burst = 1e9\n")
            .context("writing the bench policy")?;
        let exe = std::env::current_exe().context("finding our own executable")?;
        let child = Command::new(exe)
            .args(["daemon", "--slots", &slots.to_string(), "--slice-ms"])
            .arg(slice_ms.to_string())
            .arg("--socket")
            .arg(&socket)
            .arg("--policy")
            .arg(&policy)
            .stderr(Stdio::null())
            .spawn()
            .context("starting counterpoint daemon")?;
        let mut d = Daemon {
            child,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Client::connect(&d.socket).is_err() {
            stop::check()?;
            if Instant::now() > deadline {
                bail!("the daemon did not come up on {}", d.socket.display());
            }
            if let Ok(Some(st)) = d.child.try_wait() {
                bail!("the daemon exited: {st}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// (utime, stime) of the daemon, in clock ticks.
    fn cpu_ticks(&self) -> Result<(u64, u64)> {
        let path = format!("/proc/{}/stat", self.child.id());
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let after = text
            .rsplit_once(')')
            .map(|(_, r)| r)
            .context("malformed /proc stat")?;
        let f: Vec<&str> = after.split_whitespace().collect();
        let num = |i: usize| -> Result<u64> {
            f.get(i)
                .and_then(|s| s.parse().ok())
                .with_context(|| format!("{path}: field {}", i + 3))
        };
        // Fields 14 and 15 of stat(5); `after` starts at field 3.
        Ok((num(11)?, num(12)?))
    }

    /// Time on CPU of all the daemon's threads, in ns (`schedstat`'s first field): exact where
    /// `stat`'s user/system times come in 10 ms ticks.
    fn on_cpu_ns(&self) -> Result<u64> {
        super::overhead::run_time_ns(self.child.id())
            .with_context(|| format!("listing /proc/{}/task", self.child.id()))
    }

    /// Context switches of all the daemon's threads: (voluntary, involuntary). Where the CPU
    /// time goes when it is mostly the kernel's: a thread woken for nothing is a voluntary
    /// switch, a writer preempted by the consumer it woke an involuntary one.
    fn context_switches(&self) -> Result<(u64, u64)> {
        let dir = format!("/proc/{}/task", self.child.id());
        let mut total = (0, 0);
        for t in std::fs::read_dir(&dir).with_context(|| format!("listing {dir}"))? {
            let Ok(t) = t else { continue };
            // A thread that ended meanwhile has nothing more to count.
            let Ok(text) = std::fs::read_to_string(t.path().join("status")) else {
                continue;
            };
            for line in text.lines() {
                let field = |name: &str| {
                    line.strip_prefix(name)
                        .and_then(|v| v.trim().parse::<u64>().ok())
                };
                if let Some(v) = field("voluntary_ctxt_switches:") {
                    total.0 += v;
                } else if let Some(v) = field("nonvoluntary_ctxt_switches:") {
                    total.1 += v;
                }
            }
        }
        Ok(total)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SIGTERM stops the daemon cleanly; one that does not end within 5 s is killed (a stop
        // signal must not leave the bench waiting for ever). Reaped before the directory goes.
        stop::end(&mut self.child, libc::SIGTERM, Duration::from_secs(5));
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Busy for `d`, or until a stop signal.
fn spin(d: Duration) -> Result<()> {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        stop::check()?;
        x = std::hint::black_box(x.wrapping_add(1));
    }
    Ok(())
}

/// (a): three consumers on one slot, shares 1, 2, 5; returns their running_ns.
fn shares(socket: &Path, seconds: f64) -> Result<Vec<u64>> {
    let evs = ["task-clock", "cpu-clock", "page-faults"];
    let mut clients = Vec::new();
    for (ev, share) in evs.iter().zip([1, 2, 5]) {
        let mut c = Client::connect(socket)?;
        let id = c.register(ev, "self", share, None)?;
        clients.push((c, id));
    }
    spin(Duration::from_secs_f64(seconds))?;
    let mut out = Vec::new();
    for (c, id) in &mut clients {
        out.push(c.read(*id)?.running_ns);
        c.unregister(*id)?;
    }
    Ok(out)
}

/// What run (b) measured.
struct Cost {
    cpu_pct: f64,
    on_cpu_pct: f64,
    user_pct: f64,
    sys_pct: f64,
    pushes: u64,
    kernel: usize,
    voluntary_per_s: f64,
    involuntary_per_s: f64,
}

/// (b): `n` consumers of four events pushed at 10 Hz; the daemon's CPU % of one core.
fn cost(d: &Daemon, n: u64, seconds: f64, shared: bool) -> Result<Cost> {
    let target = format!("pid:{}", std::process::id());
    let mut handles = Vec::new();
    let (tx, rx) = std::sync::mpsc::channel::<Result<u64>>();
    let ready = std::sync::Arc::new(std::sync::Barrier::new(n as usize + 1));
    for _ in 0..n {
        let (socket, target, tx, ready) =
            (d.socket.clone(), target.clone(), tx.clone(), ready.clone());
        handles.push(std::thread::spawn(move || {
            let run = || -> Result<u64> {
                let mut c = Client::connect(&socket)?;
                let id = c.register(
                    "task-clock,context-switches,page-faults,cpu-migrations",
                    &target,
                    1,
                    None,
                )?;
                let view = if shared {
                    Some(c.subscribe_shared(id, 100)?)
                } else {
                    c.subscribe(id, 100)?;
                    None
                };
                ready.wait();
                let end = Instant::now() + Duration::from_secs_f64(seconds);
                let mut pushes = 0;
                match view {
                    // Read the page at the consumer's own rate: updates counted as the broker
                    // numbered them (first to last seen).
                    Some(v) => {
                        let mut first = None;
                        while Instant::now() < end && stop::stopped_by().is_none() {
                            std::thread::sleep(Duration::from_millis(100));
                            if let Some(r) = v.read() {
                                let f = *first.get_or_insert(r.pushes);
                                pushes = r.pushes - f + 1;
                            }
                        }
                    }
                    None => {
                        while Instant::now() < end && stop::stopped_by().is_none() {
                            if c.next_push(Duration::from_millis(200))?.is_some() {
                                pushes += 1;
                            }
                        }
                    }
                }
                c.unregister(id)?;
                Ok(pushes)
            };
            let r = run();
            if r.is_err() {
                // Do not leave the others waiting at the barrier.
                ready.wait();
            }
            let _ = tx.send(r);
        }));
    }
    drop(tx);
    ready.wait();
    let mut c = Client::connect(&d.socket)?;
    let kernel = match c.status()? {
        proto::Response::Status {
            kernel_counters, ..
        } => kernel_counters,
        _ => 0,
    };
    let t0 = d.cpu_ticks()?;
    let c0 = d.context_switches()?;
    let n0 = d.on_cpu_ns()?;
    let w0 = Instant::now();
    // On a stop signal the consumers end within 200 ms: they are joined before returning.
    if let Err(e) = stop::sleep(Duration::from_secs_f64(seconds)) {
        drop(rx);
        for h in handles {
            let _ = h.join();
        }
        return Err(e);
    }
    let t1 = d.cpu_ticks()?;
    let c1 = d.context_switches()?;
    let n1 = d.on_cpu_ns()?;
    let wall = w0.elapsed().as_secs_f64();
    let (user, sys) = (t1.0 - t0.0, t1.1 - t0.1);
    let mut pushes = 0;
    for r in rx {
        pushes += r?;
    }
    for h in handles {
        let _ = h.join();
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let pct = |t: u64| 100.0 * t as f64 / hz / wall;
    Ok(Cost {
        cpu_pct: pct(user + sys),
        on_cpu_pct: 100.0 * n1.saturating_sub(n0) as f64 / 1e9 / wall,
        user_pct: pct(user),
        sys_pct: pct(sys),
        pushes,
        kernel,
        voluntary_per_s: c1.0.saturating_sub(c0.0) as f64 / wall,
        involuntary_per_s: c1.1.saturating_sub(c0.1) as f64 / wall,
    })
}

/// (c): ns per read through the socket and by read(2), sorted.
fn latency(socket: &Path, reads: u64) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut c = Client::connect(socket)?;
    let id = c.register("task-clock", "self", 1, None)?;
    let mut via = Vec::with_capacity(reads as usize);
    for _ in 0..reads {
        stop::check()?;
        let t = Instant::now();
        std::hint::black_box(c.read(id)?);
        via.push(t.elapsed().as_nanos() as u64);
    }
    c.unregister(id)?;
    let tree = PmuTree::new("/sys");
    let list = parse_event_list("task-clock", &tree)?;
    let mut set = CounterSet::open(&list, &Target::process(std::process::id() as i32)?, &tree)?;
    set.enable()?;
    let fd = set.first_fd(0).context("task-clock did not open")?;
    let mut direct = Vec::with_capacity(reads as usize);
    for _ in 0..reads {
        stop::check()?;
        let t = Instant::now();
        std::hint::black_box(read_fd(fd)?);
        direct.push(t.elapsed().as_nanos() as u64);
    }
    via.sort_unstable();
    direct.sort_unstable();
    Ok((via, direct))
}

fn fuzz(n: u64) -> (u64, u64) {
    let seeds: [&[u8]; 4] = [
        br#"{"op":"register","events":"task-clock,{cs,faults}:u","target":"pid:1","share":3}"#,
        br#"{"op":"subscribe","id":1,"interval_ms":10}"#,
        br#"{"op":"grant_exclusive","id":2,"duration_ms":1000}"#,
        br#"{"op":"hello","version":1}"#,
    ];
    let mut s: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut ok = 0;
    for i in 0..n {
        let mut v: Vec<u8> = if i % 3 == 0 {
            (0..next() % 80).map(|_| next() as u8).collect()
        } else {
            seeds[(next() % 4) as usize].to_vec()
        };
        for _ in 0..1 + next() % 3 {
            if v.is_empty() {
                break;
            }
            let at = (next() % v.len() as u64) as usize;
            match next() % 3 {
                0 => v[at] = next() as u8,
                1 => {
                    v.remove(at);
                }
                _ => v.insert(at, b"{}[]\":,0"[(next() % 8) as usize]),
            }
        }
        if proto::decode_request(&v).is_ok() {
            ok += 1;
        }
    }
    (n, ok)
}

pub fn run(args: BenchBrokerArgs) -> Result<ExitCode> {
    if let Some(n) = args.fuzz {
        let t = Instant::now();
        let (n, ok) = fuzz(n);
        let seconds = t.elapsed().as_secs_f64();
        if args.json {
            let v = serde_json::json!({
                "fuzz_inputs": n,
                "decoded_valid": ok,
                "panics": 0,
                "seconds": seconds,
            });
            outln!("{v}")?;
        } else {
            outln!(
                "fuzz: {n} inputs through the request decoder without a panic ({ok} decoded as valid requests) in {seconds:.1} s"
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    // A stop signal ends the runs early: the daemon is stopped and reaped and its directory
    // removed (on the way out of `measure`), then the stop is reported.
    stop::catch()?;
    let mut progress = Progress::default();
    let r = measure(&args, &mut progress);
    match stop::stopped_by() {
        // Whatever failed after a stop (a daemon the terminal's Ctrl-C ended too) was the stop.
        Some(sig) => {
            let mut finished = Vec::new();
            if let Some(w) = progress.shares_error {
                finished.push(format!(
                    "(a) shares 1:2:5, worst relative error {:.2} %",
                    100.0 * w
                ));
            }
            if let Some(c) = progress.cost_pct {
                finished.push(format!("(b) broker CPU {c:.2} % of one core"));
            }
            let done = if finished.is_empty() {
                "no run had finished".to_string()
            } else {
                format!("finished: {}", finished.join("; "))
            };
            let _ = writeln!(
                std::io::stderr(),
                "counterpoint bench broker: stopped by {} during {}: {done}; its daemon was stopped and its temporary directory removed",
                stop::signal_name(sig),
                progress.phase
            );
            Ok(stop::exit_code(sig))
        }
        None => r,
    }
}

/// How far [`measure`] got (for the line a stop prints).
#[derive(Default)]
struct Progress {
    phase: &'static str,
    /// (a)'s worst relative error, once (a) finished.
    shares_error: Option<f64>,
    /// (b)'s broker CPU % of one core, once (b) finished.
    cost_pct: Option<f64>,
}

fn measure(args: &BenchBrokerArgs, progress: &mut Progress) -> Result<ExitCode> {
    progress.phase = "(a) the share run";
    let d1 = Daemon::start(1, 5)?;
    let r = shares(&d1.socket, args.seconds)?;
    drop(d1);
    let total: u64 = r.iter().sum::<u64>().max(1);
    let want = [1.0 / 8.0, 2.0 / 8.0, 5.0 / 8.0];
    let got: Vec<f64> = r.iter().map(|&x| x as f64 / total as f64).collect();
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g / w - 1.0).abs())
        .fold(0.0, f64::max);
    progress.shares_error = Some(worst);
    progress.phase = "(b) the cost run";
    let d2 = Daemon::start(4, 20)?;
    let c = cost(&d2, args.consumers, args.seconds, args.shared)?;
    let mode = if args.shared {
        "written to shared pages"
    } else {
        "pushed"
    };
    progress.cost_pct = Some(c.cpu_pct);
    progress.phase = "(c) the latency series";
    let (via, direct) = latency(&d2.socket, args.reads)?;
    drop(d2);
    let (v50, v99, d50, d99) = (
        percentile(&via, 0.5),
        percentile(&via, 0.99),
        percentile(&direct, 0.5),
        percentile(&direct, 0.99),
    );
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "shares": {"running_ns": r, "fractions": got, "worst_relative_error": worst},
                "cost": {"consumers": args.consumers, "events_each": 4, "hz": 10,
                         "mode": if args.shared { "shared_page" } else { "socket_push" },
                         "broker_cpu_percent_of_one_core": c.cpu_pct,
                         "broker_on_cpu_percent_schedstat": c.on_cpu_pct,
                         "user_percent": c.user_pct, "system_percent": c.sys_pct, "pushes": c.pushes,
                         "kernel_counters": c.kernel, "seconds": args.seconds,
                         "voluntary_context_switches_per_s": c.voluntary_per_s,
                         "involuntary_context_switches_per_s": c.involuntary_per_s},
                "latency_ns": {"socket_p50": v50, "socket_p99": v99, "direct_p50": d50, "direct_p99": d99,
                               "reads": args.reads},
            })
        )?;
    } else {
        outln!(
            "(a) shares 1:2:5 on one slot, {} s: counted time {:.3} : {:.3} : {:.3} (of 1:2:5 = 0.125 : 0.250 : 0.625); worst relative error {:.2} %",
            args.seconds, got[0], got[1], got[2], 100.0 * worst
        )?;
        outln!(
            "(b) {} consumers x 4 events {mode} at 10 Hz, {} s: broker CPU {:.2} % of one core (user {:.2} %, system {:.2} %; on-CPU time by schedstat {:.2} %); {} pushes; {} kernel counters (deduplicated); broker context switches {:.0}/s voluntary, {:.0}/s involuntary",
            args.consumers, args.seconds, c.cpu_pct, c.user_pct, c.sys_pct, c.on_cpu_pct, c.pushes,
            c.kernel, c.voluntary_per_s, c.involuntary_per_s
        )?;
        outln!(
            "(c) read latency over {} reads: socket p50 {} ns p99 {} ns; direct read(2) p50 {} ns p99 {} ns",
            args.reads, v50, v99, d50, d99
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
