//! `counterpoint burn`: run one of MASA's probe programs (int, fp, l2, mem) on this thread, or
//! a replica group (`--kind replica`, seed 001) of forked processes meeting at a futex barrier.

use anyhow::{bail, Result};
use clap::Args;
use counterpoint_host::probe::{self, ProbeKind, ProbeSizes};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Args)]
#[command(after_help = "\
Runs on the calling thread for --seconds of wall time (a decimal number of seconds, e.g. 0.5),
then prints the work done in units (a fixed amount of work each; units/s compare runs of the same
kind only):
  int  65536 steps of a dependent integer multiply/xor/shift/add chain (the integer ALUs)
  fp   16384 rounds of eight independent multiply-then-add chains (the FP multiplier and adder)
  l2   16384 dependent loads in a random ring of half the L2 (L2 hits, L1 misses)
  mem  1 MiB read and written, streaming through a buffer 8x the LLC (at least 64 MiB)
  replica  --replicas N processes (named cp-replica) chasing pointers through their own
       --ws-bytes working set, meeting at a futex barrier in shared memory every --sync-every
       instructions (estimated at 4 per chase step: no PMU needed); prints meetings per second

Examples:
  counterpoint burn --kind int --seconds 2
  counterpoint burn --kind mem --seconds 0.5 --json
  taskset -c 1 counterpoint burn --kind l2 &   # a 10 s background load on CPU 1
  counterpoint burn --kind replica --replicas 3 --sync-every 100000 --ws-bytes 4M --seconds 5
  counterpoint agent --policy replica --targets comm:cp-replica   # place that group")]
pub struct BurnArgs {
    /// int (integer ALU chain), fp (multiply-add chains), l2 (L2-sized pointer chase), mem (streaming),
    /// replica (a group of processes meeting at a futex barrier).
    #[arg(long)]
    kind: String,
    /// replica only: processes in the group (2-64; default 3).
    #[arg(long, value_name = "N")]
    replicas: Option<usize>,
    /// replica only: instructions between meetings (estimated, 4 per chase step; default
    /// 1000000).
    #[arg(long, value_name = "INSNS")]
    sync_every: Option<u64>,
    /// replica only: working set per process, bytes (suffixes K, M, G: 4M; 128 B to 1 GiB;
    /// default 1M).
    #[arg(long, value_name = "BYTES")]
    ws_bytes: Option<String>,
    /// How long to run, in seconds of wall time (decimal: 0.25 is a quarter second).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0,
          value_parser = super::parse_run_seconds)]
    seconds: f64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// replica: the meminfo file whose MemTotal bounds the group's total working set (a fixture
    /// in tests; /proc/meminfo without it).
    #[arg(long, value_name = "FILE", hide = true)]
    meminfo: Option<PathBuf>,
}

static STOP: AtomicBool = AtomicBool::new(false);

pub fn run(args: BurnArgs) -> Result<ExitCode> {
    if args.kind == "replica" {
        return replica(args);
    }
    // An unknown kind first: its options' fit means nothing until the kind is known.
    let Some(kind) = ProbeKind::parse(&args.kind) else {
        bail!(
            "--kind {:?}: expected int, fp, l2, mem or replica",
            args.kind
        );
    };
    // The replica group's options would be ignored by the other kinds: refused, naming them.
    let ignored: Vec<&str> = [
        (args.replicas.is_some(), "--replicas"),
        (args.sync_every.is_some(), "--sync-every"),
        (args.ws_bytes.is_some(), "--ws-bytes"),
        (args.meminfo.is_some(), "--meminfo"),
    ]
    .into_iter()
    .filter_map(|(given, flag)| given.then_some(flag))
    .collect();
    if !ignored.is_empty() {
        bail!(
            "{}: only --kind replica uses {}; --kind {:?} would ignore {}",
            ignored.join(", "),
            if ignored.len() == 1 { "it" } else { "them" },
            args.kind,
            if ignored.len() == 1 { "it" } else { "them" }
        );
    }
    let topo = counterpoint_host::sysfs::host_topology()?;
    let sizes = ProbeSizes::for_topology(&topo);
    let r = probe::run(kind, sizes, Duration::from_secs_f64(args.seconds), &STOP)?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({"kind": kind, "units": r.units, "elapsed_s": r.elapsed_s,
                "units_per_s": r.units_per_s(), "sizes": sizes})
        )?;
    } else {
        outln!(
            "burn {}: {} units in {:.2} s ({:.1} units/s)",
            kind.name(),
            r.units,
            r.elapsed_s,
            r.units_per_s()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn replica(args: BurnArgs) -> Result<ExitCode> {
    use counterpoint_host::replica_burn::{self, ReplicaBurnSpec, MAX_REPLICAS, MAX_WS_BYTES};
    let replicas = args.replicas.unwrap_or(3);
    let ws_text = args.ws_bytes.as_deref().unwrap_or("1M");
    let meminfo = args
        .meminfo
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc/meminfo"));
    let Some(ws) = counterpoint_host::sysfs::parse_size_bytes(ws_text) else {
        bail!("--ws-bytes {ws_text:?}: expected a size such as 65536, 512K or 4M");
    };
    // The per-group bounds first (the group runner checks them again): a working set above the
    // per-replica cap is that, before it is too much for the machine's memory in all.
    if !(2..=MAX_REPLICAS).contains(&replicas) {
        bail!("--replicas {replicas}: between 2 and {MAX_REPLICAS}");
    }
    if ws < 128 || ws > MAX_WS_BYTES as u64 {
        bail!("--ws-bytes {ws_text}: between 128 B and 1 GiB per replica");
    }
    check_group_memory(replicas, ws, &meminfo)?;
    let spec = ReplicaBurnSpec {
        replicas,
        sync_every_insns: args.sync_every.unwrap_or(1_000_000),
        ws_bytes: usize::try_from(ws)?,
        duration: Duration::from_secs_f64(args.seconds),
    };
    let r = replica_burn::run(spec, &STOP)?;
    if args.json {
        outln!("{}", serde_json::to_string(&r)?)?;
    } else {
        let pids: Vec<String> = r.replicas.iter().map(|x| x.pid.to_string()).collect();
        outln!(
            "burn replica: {} processes (pids {}), {} B working set each, {} steps per meeting: \
             {:.0} meetings/s over {:.2} s",
            r.replicas.len(),
            pids.join(","),
            r.ws_bytes,
            r.steps_per_sync,
            r.syncs_per_s,
            r.elapsed_s
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The most a replica group may fill in all when the machine's memory cannot be read.
const FALLBACK_GROUP_BYTES: u64 = 8 << 30;

/// Physical memory in bytes: the `MemTotal:` line of a meminfo file (`None` when the file or
/// the line cannot be read).
fn mem_total_bytes(meminfo: &Path) -> Option<u64> {
    let text = super::read_input_file("--meminfo", meminfo).ok()?;
    text.lines().find_map(|l| {
        let mut w = l.strip_prefix("MemTotal:")?.split_whitespace();
        let kib: u64 = w.next()?.parse().ok()?;
        (w.next() == Some("kB")).then(|| kib.checked_mul(1024))?
    })
}

/// A size for a message: MiB below a GiB, GiB above.
fn size_text(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    if bytes < 1 << 30 {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{:.1} GiB", bytes as f64 / (1024.0 * MIB))
    }
}

/// Every replica fills its whole working set before it starts: refuse, before anything is
/// forked, a group whose total is more than the machine's memory (MemTotal of `meminfo`), or
/// more than [`FALLBACK_GROUP_BYTES`] when that cannot be read.
fn check_group_memory(replicas: usize, ws_bytes: u64, meminfo: &Path) -> Result<()> {
    let total = ws_bytes.saturating_mul(replicas as u64);
    let (limit, what) = match mem_total_bytes(meminfo) {
        Some(mem) => (
            mem,
            format!(
                "this machine's memory ({}, MemTotal in {})",
                size_text(mem),
                meminfo.display()
            ),
        ),
        None => (
            FALLBACK_GROUP_BYTES,
            format!(
                "{}, the limit used when MemTotal cannot be read from {}",
                size_text(FALLBACK_GROUP_BYTES),
                meminfo.display()
            ),
        ),
    };
    if total > limit {
        bail!(
            "--replicas {replicas} x --ws-bytes {}: {} of working sets in all, more than {what}; \
             every replica fills its whole working set (use fewer replicas or a smaller \
             --ws-bytes)",
            size_text(ws_bytes),
            size_text(total)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meminfo(text: &str) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let f = meminfo("MemTotal:       24684096 kB\nMemFree:        21393152 kB\n");
        assert_eq!(mem_total_bytes(f.path()), Some(24_684_096 * 1024));
        let f = meminfo("MemFree:        21393152 kB\n");
        assert_eq!(mem_total_bytes(f.path()), None);
        assert_eq!(mem_total_bytes(Path::new("/nonexistent/meminfo")), None);
    }

    #[test]
    fn group_larger_than_memory_is_refused() {
        // 1 GiB of memory: 2 x 256M fits, 2 x 1G does not.
        let f = meminfo("MemTotal: 1048576 kB\n");
        assert!(check_group_memory(2, 256 << 20, f.path()).is_ok());
        let e = check_group_memory(2, 1 << 30, f.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("2.0 GiB of working sets in all"), "{e}");
        assert!(e.contains("this machine's memory (1.0 GiB"), "{e}");
        // Unreadable: the fixed cap.
        let none = Path::new("/nonexistent/meminfo");
        assert!(check_group_memory(8, 1 << 30, none).is_ok());
        let e = check_group_memory(9, 1 << 30, none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the limit used when MemTotal cannot be read"),
            "{e}"
        );
    }
}
