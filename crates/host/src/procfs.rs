//! Reading processes and threads from `/proc`: identity, kernel-thread detection, CPU time,
//! context switches and migrations per thread.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// `PF_KTHREAD` from the kernel's `include/linux/sched.h`: set on every kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of `/proc/PID/stat` we use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub flags: u64,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Start time in clock ticks since boot: with the PID, identifies a process across PID reuse.
    pub starttime_ticks: u64,
    /// CPU the task last ran on.
    pub processor: Option<u32>,
    /// Threads in the process (field 20; 0 when absent).
    pub num_threads: u32,
}

/// Parse the text of a `stat` file. `comm` may hold spaces and parentheses, so fields are
/// counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); field n is rest[n - 3].
    let field = |n: usize| rest.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    Some(Stat {
        comm,
        state: rest.first()?.chars().next()?,
        ppid: field(4)? as u32,
        flags: field(9)?,
        utime_ticks: field(14)?,
        stime_ticks: field(15)?,
        starttime_ticks: field(22)?,
        processor: field(39).map(|p| p as u32),
        num_threads: field(20).unwrap_or(0) as u32,
    })
}

/// Whether process `pid` with `stat` is a kernel thread (see [`Proc::is_kernel_thread`]; no
/// stat: counted as one, so it is never touched).
pub fn is_kernel_stat(pid: u32, stat: Option<&Stat>) -> bool {
    match stat {
        Some(s) => s.flags & PF_KTHREAD != 0 || pid == 2 || s.ppid == 2,
        None => true,
    }
}

/// Root of the proc filesystem (a fixture directory in tests).
#[derive(Clone, Debug)]
pub struct Proc {
    pub root: PathBuf,
}

impl Default for Proc {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/proc"),
        }
    }
}

/// Per-thread scheduler counters, cumulative since the thread started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadTimes {
    /// Time on a CPU, ns (what perf's task-clock counts).
    pub runtime_ns: u64,
    /// Context switches, voluntary and involuntary.
    pub switches: u64,
    /// Migrations between CPUs, when the kernel reports them (`/proc/.../sched`).
    pub migrations: Option<u64>,
}

impl Proc {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn pid_dir(&self, pid: u32) -> PathBuf {
        self.root.join(pid.to_string())
    }

    fn thread_dir(&self, pid: u32, tid: u32) -> PathBuf {
        self.pid_dir(pid).join("task").join(tid.to_string())
    }

    /// Every numeric entry of `/proc`, sorted.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        numeric_entries(&self.root)
    }

    /// Thread ids of a process, sorted (empty when it has exited).
    pub fn threads(&self, pid: u32) -> Vec<u32> {
        let Ok(pid) = i32::try_from(pid) else {
            return Vec::new();
        };
        counterpoint_counters::tasks::thread_ids(&self.root, pid)
            .map(|t| t.into_iter().map(|t| t as u32).collect())
            .unwrap_or_default()
    }

    /// Whether thread `tid` of `pid` still exists (a zombie thread counts as existing).
    pub fn thread_alive(&self, pid: u32, tid: u32) -> bool {
        self.thread_dir(pid, tid).exists()
    }

    /// A process's `stat`, read from its leader thread's own file (`task/PID/stat`): the
    /// process-wide file makes the kernel loop over every thread to sum times and faults, which
    /// for a process of 500 threads was a tenth of the agent's steady-state CPU. Every field
    /// used here (comm, state, ppid, flags, start time, CPU, thread count) is the same in both;
    /// only `utime`/`stime` are the leader's alone. Falls back to `PID/stat` (fixture trees).
    pub fn stat(&self, pid: u32) -> Option<Stat> {
        let mut text = String::new();
        reread_to_string(&self.open_stat(pid)?, &mut text).ok()?;
        parse_stat(&text)
    }

    /// Open a process's `stat` (the leader's, as [`Proc::stat`] reads it) for repeated reads
    /// with [`reread_to_string`]: a file kept open is not looked up again each interval, and
    /// it names the process it was opened for (a read after that process is gone fails, even
    /// if its pid was given to another). See [`KeptStats`].
    pub fn open_stat(&self, pid: u32) -> Option<fs::File> {
        fs::File::open(self.thread_dir(pid, pid).join("stat"))
            .or_else(|_| fs::File::open(self.pid_dir(pid).join("stat")))
            .ok()
    }

    pub fn thread_stat(&self, pid: u32, tid: u32) -> Option<Stat> {
        parse_stat(&fs::read_to_string(self.thread_dir(pid, tid).join("stat")).ok()?)
    }

    /// Kernel threads carry `PF_KTHREAD`; kthreadd (2) and its children are kernel threads too.
    /// Unreadable processes count as kernel threads, so they are never touched.
    pub fn is_kernel_thread(&self, pid: u32) -> bool {
        is_kernel_stat(pid, self.stat(pid).as_ref())
    }

    /// Real user id (first number of `Uid:` in `status`).
    pub fn uid(&self, pid: u32) -> Option<u32> {
        let status = fs::read_to_string(self.pid_dir(pid).join("status")).ok()?;
        status_field(&status, "Uid")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// The process (thread group) task `tid` belongs to: `Tgid:` of its `status`. A thread
    /// that is not its group's leader is not listed in `/proc`, but `/proc/TID` still names it.
    pub fn tgid(&self, tid: u32) -> Option<u32> {
        let status = fs::read_to_string(self.pid_dir(tid).join("status")).ok()?;
        status_field(&status, "Tgid")?.parse().ok()
    }

    /// `Cpus_allowed_list` of a thread, as the kernel prints it.
    pub fn cpus_allowed_list(&self, pid: u32, tid: u32) -> Option<String> {
        let status = fs::read_to_string(self.thread_dir(pid, tid).join("status")).ok()?;
        status_field(&status, "Cpus_allowed_list").map(str::to_string)
    }

    /// The cgroup v2 path of a process (the `0::` line), if any.
    pub fn cgroup_v2_path(&self, pid: u32) -> Option<String> {
        let text = fs::read_to_string(self.pid_dir(pid).join("cgroup")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_string))
    }

    /// Cheap per-interval counters from `/proc/PID/task/TID/schedstat` (one short line: on-CPU
    /// ns, run-queue wait ns, times scheduled in, which stands for context switches); no
    /// migrations. Falls back to [`Proc::thread_times`] when schedstat reads as all zero.
    pub fn thread_times_fast(&self, pid: u32, tid: u32) -> Option<ThreadTimes> {
        let text = fs::read_to_string(self.thread_dir(pid, tid).join("schedstat")).ok()?;
        let v: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        match v.as_slice() {
            [run, _, count, ..] if *run > 0 || v.iter().any(|&x| x > 0) => Some(ThreadTimes {
                runtime_ns: *run,
                switches: *count,
                migrations: None,
            }),
            _ => self.thread_times(pid, tid),
        }
    }

    /// Open a thread's `schedstat` for repeated reads with [`read_schedstat_at`].
    pub fn open_schedstat(&self, pid: u32, tid: u32) -> Option<fs::File> {
        fs::File::open(self.thread_dir(pid, tid).join("schedstat")).ok()
    }

    /// Scheduler counters of one thread: `/proc/PID/task/TID/sched` where the kernel has it
    /// (ns runtime, migrations), else `stat` (clock-tick runtime) and `status` (switches).
    pub fn thread_times(&self, pid: u32, tid: u32) -> Option<ThreadTimes> {
        let dir = self.thread_dir(pid, tid);
        if let Ok(text) = fs::read_to_string(dir.join("sched")) {
            if let Some(t) = parse_sched(&text) {
                return Some(t);
            }
        }
        let st = self.thread_stat(pid, tid)?;
        let status = fs::read_to_string(dir.join("status")).ok()?;
        let n = |k| {
            status_field(&status, k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Some(ThreadTimes {
            runtime_ns: (st.utime_ticks + st.stime_ticks) * (1_000_000_000 / clock_ticks()),
            switches: n("voluntary_ctxt_switches") + n("nonvoluntary_ctxt_switches"),
            migrations: None,
        })
    }
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Processes' `stat` files kept open between reads (see [`Proc::open_stat`]), and the buffer
/// their text is read into.
#[derive(Debug, Default)]
pub struct KeptStats {
    files: std::collections::BTreeMap<u32, fs::File>,
    text: String,
}

impl KeptStats {
    /// `pid`'s `stat` through its kept file (opened on first use; opened again once when a
    /// read fails, for a pid now naming another process).
    pub fn stat(&mut self, proc_: &Proc, pid: u32) -> Option<Stat> {
        for _ in 0..2 {
            let f = match self.files.entry(pid) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(proc_.open_stat(pid)?),
            };
            if reread_to_string(f, &mut self.text).is_ok() {
                if let Some(st) = parse_stat(&self.text) {
                    return Some(st);
                }
            }
            self.files.remove(&pid);
        }
        None
    }

    /// Keep the files of the processes `keep` holds, close the others.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.files.retain(|&p, _| keep(p));
    }
}

/// Re-read an open file from its start (procfs regenerates it on each read), whole.
pub fn reread_to_string(mut f: &fs::File, out: &mut String) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    out.clear();
    f.seek(SeekFrom::Start(0))?;
    f.read_to_string(out)?;
    Ok(())
}

/// Re-read an open `schedstat` file (seek to 0, one read: procfs regenerates it), the agent's
/// cheap per-interval path. `None` when the thread is gone or the read fails. A zero runtime is
/// a valid reading (a thread whose time has not been accounted yet).
pub fn read_schedstat_at(mut f: &fs::File) -> Option<ThreadTimes> {
    use std::io::{Read, Seek, SeekFrom};
    let mut buf = [0u8; 128];
    f.seek(SeekFrom::Start(0)).ok()?;
    let n = f.read(&mut buf).ok()?;
    let text = std::str::from_utf8(buf.get(..n)?).ok()?;
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match v.as_slice() {
        [run, _, count, ..] => Some(ThreadTimes {
            runtime_ns: *run,
            switches: *count,
            migrations: None,
        }),
        _ => None,
    }
}

/// Parse `/proc/.../sched` (CONFIG_SCHED_DEBUG): `se.sum_exec_runtime` is in ms with 6 decimals.
pub fn parse_sched(text: &str) -> Option<ThreadTimes> {
    let mut runtime_ns = None;
    let mut switches = None;
    let mut migrations = None;
    for line in text.lines() {
        let mut it = line.splitn(2, ':');
        let key = it.next().unwrap_or("").trim();
        let val = it.next().unwrap_or("").trim();
        match key {
            "se.sum_exec_runtime" => runtime_ns = parse_ms_as_ns(val),
            "nr_switches" => switches = val.parse().ok(),
            "se.nr_migrations" => migrations = val.parse().ok(),
            _ => {}
        }
    }
    Some(ThreadTimes {
        runtime_ns: runtime_ns?,
        switches: switches?,
        migrations,
    })
}

/// "1234.567890" ms → ns, exactly (no float rounding).
fn parse_ms_as_ns(v: &str) -> Option<u64> {
    let (int, frac) = v.split_once('.').unwrap_or((v, "0"));
    let int: u64 = int.parse().ok()?;
    let mut frac_digits: String = frac.chars().take(6).collect();
    while frac_digits.len() < 6 {
        frac_digits.push('0');
    }
    let frac: u64 = frac_digits.parse().ok()?;
    Some(int * 1_000_000 + frac)
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

fn numeric_entries(dir: &Path) -> io::Result<Vec<u32>> {
    let mut out: Vec<u32> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_comm() {
        let text = "123 (a) b (c)) S 1 123 123 0 -1 4194560 10 0 0 0 7 3 0 0 20 0 1 0 555 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(text).expect("parses");
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.flags, 4194560);
        assert_eq!((s.utime_ticks, s.stime_ticks), (7, 3));
        assert_eq!(s.starttime_ticks, 555);
        assert_eq!(s.processor, Some(1));
        assert_eq!(s.num_threads, 1);
    }

    #[test]
    fn parses_sched_runtime_exactly() {
        let text = "x (1, #threads: 1)\n---\nse.sum_exec_runtime : 1500.000250\n\
                    se.nr_migrations : 4\nnr_switches : 17\n";
        let t = parse_sched(text).expect("parses");
        assert_eq!(t.runtime_ns, 1_500_000_250);
        assert_eq!(t.switches, 17);
        assert_eq!(t.migrations, Some(4));
    }

    #[test]
    fn own_process_is_a_user_task() {
        let p = Proc::default();
        let me = std::process::id();
        assert!(!p.is_kernel_thread(me));
        assert!(p.threads(me).contains(&me));
        let slow = p.thread_times(me, me).expect("sched or stat");
        let fast = p.thread_times_fast(me, me).expect("schedstat");
        // Same clock, read a moment apart: the later read is not smaller.
        assert!(fast.runtime_ns >= slow.runtime_ns / 2 && fast.runtime_ns > 0);
        // kthreadd is a kernel thread wherever it is visible.
        if p.stat(2).is_some() {
            assert!(p.is_kernel_thread(2));
        }
    }
}
