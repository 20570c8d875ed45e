//! `burn --kind replica`: a live replica group to place (seed 001's workload, synthetic).
//!
//! N processes (forked, named `cp-replica`, so `--targets comm:cp-replica` selects the group)
//! each chase pointers through their own working set (a random ring of cache lines of
//! `ws_bytes`: every step is one dependent load, so the group's pressure on a shared LLC is
//! the sum of the working sets) and meet at a barrier in shared memory every `sync_every`
//! instructions. The barrier is a real futex (`FUTEX_WAIT`/`FUTEX_WAKE` on a word in a
//! `MAP_SHARED` page): the last to arrive wakes the others, so every meeting costs each
//! waiting replica one sleep and one wake-up, the notification of seed 001.
//!
//! Instructions are not counted here (no PMU on the machine this was built on): one step of the
//! chase loop is taken as [`INSNS_PER_STEP`] instructions (an estimate of the compiled loop:
//! load, add, compare, branch), so `sync_every` instructions are `sync_every / 4` steps.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Estimated instructions per chase step (see the module docs).
pub const INSNS_PER_STEP: u64 = 4;

/// The name the replica processes take (`comm`).
pub const COMM: &str = "cp-replica";

/// What a replica group should do.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaBurnSpec {
    /// Processes.
    pub replicas: usize,
    /// Instructions between meetings (converted to steps at [`INSNS_PER_STEP`]).
    pub sync_every_insns: u64,
    /// Working set per replica.
    pub ws_bytes: usize,
    /// How long.
    pub duration: Duration,
}

/// What one replica did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplicaStats {
    /// Its pid.
    pub pid: i32,
    /// Meetings it took part in during the measured phase (the start line excluded).
    pub syncs: u64,
    /// Chase steps done during the measured phase.
    pub steps: u64,
}

/// The group's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplicaBurnResult {
    /// Per replica.
    pub replicas: Vec<ReplicaStats>,
    /// Wall time from the replicas' first meeting (once every one has filled its working
    /// set) to the last one's exit: the measured phase only.
    pub elapsed_s: f64,
    /// Meetings per second (the group's, i.e. of replica 0).
    pub syncs_per_s: f64,
    /// Steps per meeting actually used.
    pub steps_per_sync: u64,
    /// Working set per replica.
    pub ws_bytes: usize,
}

/// Why the group could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaBurnError {
    /// Bad parameters.
    #[error("{0}")]
    Invalid(String),
    /// mmap or fork failed.
    #[error("{what}: {source}")]
    Os {
        /// The call.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A replica died or exited badly.
    #[error("replica pid {pid} ended abnormally ({status})")]
    Child {
        /// Its pid.
        pid: i32,
        /// How.
        status: String,
    },
}

/// The page the replicas share.
#[repr(C)]
struct Shared {
    /// Replicas arrived at the current meeting.
    arrived: AtomicU32,
    /// Meeting generation: the futex word.
    generation: AtomicU32,
    stop: AtomicBool,
    /// `CLOCK_MONOTONIC` (ns) when the start line was crossed, set by the first replica to
    /// leave it (0 until then): the measured phase starts there for every replica and for the
    /// parent's clock alike.
    start_ns: AtomicU64,
    /// Per replica (up to [`MAX_REPLICAS`]): syncs, steps.
    syncs: [AtomicU64; MAX_REPLICAS],
    steps: [AtomicU64; MAX_REPLICAS],
}

/// Largest working set per replica.
pub const MAX_WS_BYTES: usize = 1 << 30;

/// Most replicas one group may have.
pub const MAX_REPLICAS: usize = 64;

fn futex(word: &AtomicU32, op: i32, val: u32, timeout: Option<&libc::timespec>) {
    let ts = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` lives in a mapping that outlives every process using it; a shared (not
    // PRIVATE) futex because the waiters are different processes. Errors (EAGAIN, EINTR,
    // ETIMEDOUT) only send the caller back to re-check the word.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, ts);
    }
}

/// Sense-reversing barrier over `n` processes; false when stopped.
fn meet(sh: &Shared, n: u32) -> bool {
    let gen = sh.generation.load(Ordering::Acquire);
    if sh.arrived.fetch_add(1, Ordering::AcqRel) + 1 == n {
        sh.arrived.store(0, Ordering::Release);
        sh.generation.fetch_add(1, Ordering::AcqRel);
        futex(&sh.generation, libc::FUTEX_WAKE, u32::MAX >> 1, None);
        return !sh.stop.load(Ordering::Acquire);
    }
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    while sh.generation.load(Ordering::Acquire) == gen {
        if sh.stop.load(Ordering::Acquire) {
            return false;
        }
        futex(&sh.generation, libc::FUTEX_WAIT, gen, Some(&ts));
    }
    !sh.stop.load(Ordering::Acquire)
}

/// Fill `v` (8 u64 per 64-byte line) with a random ring over its lines: `v[i * 8]` holds the
/// next line's index. Allocation-free (slot 1 of each line holds the shuffle), so a forked
/// child of a multi-threaded parent can run it. Looks at `stop` every [`STOP_CHECK_STEPS`]
/// lines (a large working set takes seconds to fill): false when stopped before the end.
fn fill_ring(v: &mut [u64], seed: u64, stop: &AtomicBool) -> bool {
    let lines = v.len() / 8;
    let stopped = |i: usize| i as u64 % STOP_CHECK_STEPS == 0 && stop.load(Ordering::Acquire);
    for i in 0..lines {
        if stopped(i) {
            return false;
        }
        v[i * 8 + 1] = i as u64;
    }
    let mut x = seed | 1;
    for i in (1..lines).rev() {
        if stopped(i) {
            return false;
        }
        // xorshift64: a fixed, cheap shuffle (no statistical claims needed).
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % (i as u64 + 1)) as usize;
        v.swap(i * 8 + 1, j * 8 + 1);
    }
    for w in 0..lines {
        if stopped(w) {
            return false;
        }
        let from = v[w * 8 + 1] as usize;
        let to = v[((w + 1) % lines) * 8 + 1];
        v[from * 8] = to;
    }
    true
}

/// A private anonymous mapping of `bytes` (each replica's own memory: touched after the fork,
/// so never shared copy-on-write with the others).
fn private_buffer(bytes: usize) -> Option<&'static mut [u64]> {
    // SAFETY: a fresh private anonymous mapping, zero-filled, never unmapped (the process
    // `_exit`s when done).
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(std::slice::from_raw_parts_mut(p as *mut u64, bytes / 8))
    }
}

/// A replica's exit code when its working set could not be mapped.
const EXIT_NO_MEMORY: i32 = 2;

/// Why a replica ended badly, in words: its exit code's meaning or the signal that killed it.
fn child_status_text(reaped: bool, status: i32, ws_bytes: usize) -> String {
    if !reaped {
        return "it could not be waited for".to_string();
    }
    if libc::WIFEXITED(status) {
        return match libc::WEXITSTATUS(status) {
            EXIT_NO_MEMORY => format!(
                "its working set of {ws_bytes} bytes could not be mapped: memory limited \
                 (ulimit -v, a cgroup)?"
            ),
            code => format!("exit code {code}"),
        };
    }
    if libc::WIFSIGNALED(status) {
        return format!("killed by signal {}", libc::WTERMSIG(status));
    }
    format!("wait status {status:#x}")
}

fn replica_main(sh: &Shared, me: usize, n: u32, steps_per_sync: u64, ws_bytes: usize) -> i32 {
    // Named for `--targets comm:cp-replica`; ends with the parent.
    const NAME: &[u8] = b"cp-replica\0";
    // SAFETY: prctl with a NUL-terminated name of at most 16 bytes, and a signal number.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, NAME.as_ptr() as libc::c_ulong, 0, 0, 0);
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    let lines = (ws_bytes / 64).max(2);
    let Some(r) = private_buffer(lines * 64) else {
        return EXIT_NO_MEMORY;
    };
    if !fill_ring(r, 0x9e37_79b9_7f4a_7c15 ^ me as u64, &sh.stop) {
        return 0;
    }
    // The start line: a first meeting (not counted) once every replica has filled its working
    // set; the parent starts the clock when it has happened.
    if !meet(sh, n) {
        return 0;
    }
    let _ = sh
        .start_ns
        .compare_exchange(0, monotonic_ns(), Ordering::AcqRel, Ordering::Acquire);
    let mut at = 0u64;
    'run: loop {
        // In chunks, so a stop is seen within a chunk even when meetings are rare.
        let mut left = steps_per_sync;
        while left > 0 {
            let chunk = left.min(STOP_CHECK_STEPS);
            for _ in 0..chunk {
                at = r[at as usize * 8];
            }
            std::hint::black_box(at);
            sh.steps[me].fetch_add(chunk, Ordering::Relaxed);
            left -= chunk;
            if sh.stop.load(Ordering::Acquire) {
                break 'run;
            }
        }
        if !meet(sh, n) {
            break;
        }
        sh.syncs[me].fetch_add(1, Ordering::Relaxed);
    }
    0
}

/// Chase steps (or lines filled) between two looks at the stop flag.
const STOP_CHECK_STEPS: u64 = 1 << 16;

/// `CLOCK_MONOTONIC` in ns: one clock for the parent and its forked replicas (and
/// async-signal-safe, so a child of a multi-threaded parent may read it).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Whether replica `pid` has ended, without reaping it (the `waitpid` after the run does): a
/// pid that is no longer our child (ECHILD) has nothing left to wait for.
fn has_ended(pid: i32) -> bool {
    crate::exits::has_ended(pid).unwrap_or(true)
}

/// Run the group for its duration and collect what each replica did. `stop` ends it early.
pub fn run(
    spec: ReplicaBurnSpec,
    stop: &AtomicBool,
) -> Result<ReplicaBurnResult, ReplicaBurnError> {
    if spec.replicas < 2 || spec.replicas > MAX_REPLICAS {
        return Err(ReplicaBurnError::Invalid(format!(
            "--replicas {}: between 2 and {MAX_REPLICAS}",
            spec.replicas
        )));
    }
    if spec.sync_every_insns < INSNS_PER_STEP {
        return Err(ReplicaBurnError::Invalid(format!(
            "--sync-every {}: at least {INSNS_PER_STEP} instructions (one chase step)",
            spec.sync_every_insns
        )));
    }
    // Each replica writes its whole working set: a cap keeps a typo from exhausting memory
    // (an LLC study needs a few times the LLC at most).
    if spec.ws_bytes < 128 || spec.ws_bytes > MAX_WS_BYTES {
        return Err(ReplicaBurnError::Invalid(format!(
            "--ws-bytes {}: between 128 B and 1 GiB per replica",
            spec.ws_bytes
        )));
    }
    let len = std::mem::size_of::<Shared>();
    // SAFETY: a fresh anonymous shared mapping, zero-filled: a valid `Shared` (atomics of zero).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(ReplicaBurnError::Os {
            what: "mmap of the shared barrier page",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: the mapping is `len` bytes, page aligned, and lives until the munmap below.
    let sh: &Shared = unsafe { &*(p as *const Shared) };
    let n = spec.replicas as u32;
    let steps_per_sync = spec.sync_every_insns / INSNS_PER_STEP;
    let mut pids = Vec::new();
    let mut fork_err = None;
    for me in 0..spec.replicas {
        // SAFETY: the child only touches the shared page, its own heap and a few syscalls,
        // then `_exit`s without running the parent's destructors.
        match unsafe { libc::fork() } {
            -1 => {
                fork_err = Some(std::io::Error::last_os_error());
                break;
            }
            0 => {
                let code = replica_main(sh, me, n, steps_per_sync, spec.ws_bytes);
                // SAFETY: leaving the child without unwinding into the parent's state.
                unsafe { libc::_exit(code) };
            }
            pid => pids.push(pid),
        }
    }
    // Setup: every replica fills its working set (seconds for a large one), then they meet at
    // the start line (generation 0 -> 1). The clock starts there, so the duration is the
    // measured phase's; a replica that ends during setup (out of memory) or a stop ends the
    // wait, and the group is stopped without a measured phase.
    let mut started = fork_err.is_none();
    while started && sh.start_ns.load(Ordering::Acquire) == 0 {
        if stop.load(Ordering::Relaxed) || pids.iter().any(|&pid| has_ended(pid)) {
            started = false;
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // The measured phase starts at the start line, however late the poll above noticed it
    // (on a loaded machine, tens of ms): the meetings counted and the time are the same span.
    let start_ns = match sh.start_ns.load(Ordering::Acquire) {
        0 => monotonic_ns(),
        t => t,
    };
    let since_start = Duration::from_nanos(monotonic_ns().saturating_sub(start_ns));
    let start = Instant::now()
        .checked_sub(since_start)
        .unwrap_or_else(Instant::now);
    if started {
        let deadline = start + spec.duration;
        // A replica that ends early (killed, out of memory) ends the phase: the others would
        // only wait for it at their next meeting.
        while Instant::now() < deadline
            && !stop.load(Ordering::Relaxed)
            && !pids.iter().any(|&pid| has_ended(pid))
        {
            std::thread::sleep(Duration::from_millis(20).min(deadline - Instant::now()));
        }
    }
    // The measured phase ends here: its time and its meetings are read now, before the
    // replicas leave and are reaped (until session 30 the clock ran on through the leaving and
    // the waits, and meetings per second came out low: 3 meetings in 0.654 s of a 0.5 s run;
    // CLI probe).
    let elapsed_s = start.elapsed().as_secs_f64();
    let counted: Vec<(u64, u64)> = (0..pids.len())
        .map(|i| {
            (
                sh.syncs[i].load(Ordering::Relaxed),
                sh.steps[i].load(Ordering::Relaxed),
            )
        })
        .collect();
    // Stop: every replica leaves at its next meeting; wake the ones asleep in one.
    sh.stop.store(true, Ordering::Release);
    sh.generation.fetch_add(1, Ordering::AcqRel);
    futex(&sh.generation, libc::FUTEX_WAKE, u32::MAX >> 1, None);
    let mut bad = None;
    for &pid in &pids {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        let ok = r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if !ok && bad.is_none() {
            bad = Some(ReplicaBurnError::Child {
                pid,
                status: child_status_text(r == pid, status, spec.ws_bytes),
            });
        }
    }
    let replicas: Vec<ReplicaStats> = pids
        .iter()
        .zip(&counted)
        .map(|(&pid, &(syncs, steps))| ReplicaStats { pid, syncs, steps })
        .collect();
    // SAFETY: every child has exited; nothing refers to the page any more.
    unsafe { libc::munmap(p, len) };
    if let Some(e) = fork_err {
        return Err(ReplicaBurnError::Os {
            what: "fork",
            source: e,
        });
    }
    if let Some(e) = bad {
        return Err(e);
    }
    let syncs0 = replicas.first().map_or(0, |r| r.syncs);
    Ok(ReplicaBurnResult {
        syncs_per_s: syncs0 as f64 / elapsed_s,
        replicas,
        elapsed_s,
        steps_per_sync,
        ws_bytes: spec.ws_bytes,
    })
}

#[cfg(test)]
mod tests {
    /// A replica's end is said in words: a working set it could not map, a signal.
    #[test]
    fn a_replicas_end_is_said_in_words() {
        let exited = |code: i32| code << 8;
        let t = super::child_status_text(true, exited(super::EXIT_NO_MEMORY), 1 << 30);
        assert!(t.contains("1073741824 bytes could not be mapped"), "{t}");
        assert_eq!(super::child_status_text(true, exited(3), 64), "exit code 3");
        assert_eq!(
            super::child_status_text(true, libc::SIGKILL, 64),
            "killed by signal 9"
        );
    }

    use super::*;

    #[test]
    fn ring_visits_every_line_once() {
        let mut r = vec![0u64; 8 * 100];
        assert!(fill_ring(&mut r, 7, &AtomicBool::new(false)));
        let mut seen = [false; 100];
        let mut at = 0u64;
        for _ in 0..100 {
            assert!(!seen[at as usize], "line {at} twice");
            seen[at as usize] = true;
            at = r[at as usize * 8];
        }
        assert_eq!(at, 0, "a single cycle through all lines");
    }

    #[test]
    fn replicas_meet_the_same_number_of_times() {
        // Deterministic facts only: every replica joins every meeting (counts differ by at
        // most the one in progress at stop), whatever the machine's load.
        let stop = AtomicBool::new(false);
        let r = run(
            ReplicaBurnSpec {
                replicas: 3,
                sync_every_insns: 4_000,
                ws_bytes: 64 << 10,
                duration: Duration::from_millis(200),
            },
            &stop,
        )
        .expect("runs");
        assert_eq!(r.replicas.len(), 3);
        let s: Vec<u64> = r.replicas.iter().map(|x| x.syncs).collect();
        let (lo, hi) = (s.iter().min().copied(), s.iter().max().copied());
        assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{s:?}");
        for x in &r.replicas {
            assert!(x.steps >= x.syncs * 1_000);
        }
    }

    #[test]
    fn a_stop_ends_the_fill() {
        let mut r = vec![0u64; 8 * 100];
        assert!(!fill_ring(&mut r, 7, &AtomicBool::new(true)));
    }

    #[test]
    fn a_group_that_never_meets_still_stops() {
        let stop = AtomicBool::new(false);
        let r = run(
            ReplicaBurnSpec {
                replicas: 2,
                sync_every_insns: u64::MAX,
                ws_bytes: 4096,
                duration: Duration::from_millis(50),
            },
            &stop,
        )
        .expect("runs and stops");
        assert!(r.replicas.iter().all(|x| x.syncs == 0));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let stop = AtomicBool::new(false);
        let base = ReplicaBurnSpec {
            replicas: 2,
            sync_every_insns: 4_000,
            ws_bytes: 4096,
            duration: Duration::from_millis(1),
        };
        for spec in [
            ReplicaBurnSpec {
                replicas: 1,
                ..base
            },
            ReplicaBurnSpec {
                sync_every_insns: 1,
                ..base
            },
            ReplicaBurnSpec {
                ws_bytes: 8,
                ..base
            },
        ] {
            assert!(matches!(
                run(spec, &stop),
                Err(ReplicaBurnError::Invalid(_))
            ));
        }
    }
}
