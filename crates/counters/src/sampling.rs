//! Instruction-pointer sampling with the software `cpu-clock` event (no PMU needed): one
//! sampling event per thread, each writing (ip, tid, time) records into its ring buffer every
//! `period_ns` of the thread's CPU time, with the kernel's user/kernel mode flag. Where tracefs
//! shows the `raw_syscalls:sys_enter`/`sys_exit` tracepoints and they are asked for, each thread
//! also records its system-call entries (with the number) and exits, and every kernel sample is
//! attributed to the call in progress at its time (merged by timestamp). The SchedTask heatmaps
//! (docs/schedtask.md) are built from these samples.

use counterpoint_core::heatmap::PAGE_BYTES;
use counterpoint_core::superfunction::{CodeHeatmap, ThreadCode};
use perf_event::events::{Software, Tracepoint};
use perf_event::{data, Builder, SampleFlag, Sampler};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// Ring-buffer size per thread: 1 + 2^k pages; 16 data pages hold ~2,000 samples.
const RING_BYTES: usize = 17 * 4096;
/// Ring-buffer sizes of the syscall tracepoints per thread: entries (~96 bytes with the raw
/// data) get 256 data pages, ~10,900 of them; exits (32 bytes) 64 pages, ~8,200. A thread doing
/// 4 KiB reads of /dev/zero makes a few hundred thousand calls per second: 20 ms of them.
const TP_ENTER_RING_BYTES: usize = 257 * 4096;
const TP_EXIT_RING_BYTES: usize = 65 * 4096;
/// Records read from one buffer per drain, at most: more than a full buffer holds (the
/// smallest record, an exit, is 24 bytes), so everything present when a drain starts is read,
/// but a thread writing faster than the drain reads cannot keep it looping.
const MAX_CLOCK_RECORDS: usize = RING_BYTES / 24 + 1;
const MAX_TP_RECORDS: usize = TP_ENTER_RING_BYTES / 24 + 1;
/// Tracepoint events kept for samples not yet drained, per thread (beyond, the oldest are
/// applied to the thread's state without a sample to attribute).
const MAX_PENDING: usize = 8192;
/// `PERF_RECORD_MISC_CPUMODE_MASK` and the kernel mode value.
const CPUMODE_MASK: u16 = 7;
const CPUMODE_KERNEL: u16 = 1;

/// Why sampling could not start.
#[derive(Debug, thiserror::Error)]
pub enum SamplingError {
    /// `/proc/PID/task` could not be listed.
    #[error("cannot list the threads of process {pid} (/proc/{pid}/task): {source}")]
    Threads {
        /// The process.
        pid: u32,
        /// The OS error.
        source: io::Error,
    },
    /// perf_event_open or the ring-buffer mapping failed.
    #[error("cannot open a cpu-clock sampling event on thread {tid}: {source}")]
    Open {
        /// The thread.
        tid: u32,
        /// The OS error.
        source: io::Error,
    },
    /// A syscall tracepoint would not open on a thread.
    #[error("cannot open the raw_syscalls tracepoints on thread {tid}: {source}")]
    OpenTracepoint {
        /// The thread.
        tid: u32,
        /// The OS error.
        source: io::Error,
    },
    /// Every thread exited before its event opened.
    #[error("process {pid} has no thread left to sample")]
    NoThreads {
        /// The process.
        pid: u32,
    },
}

/// Why system calls are not visible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TracefsError {
    /// No tracefs under either usual mount point.
    #[error(
        "per-system-call attribution needs the raw_syscalls tracepoints, and tracefs is not \
         mounted (neither {root}/kernel/tracing/events nor {root}/kernel/debug/tracing/events \
         exists; as root: mount -t tracefs nodev {root}/kernel/tracing)"
    )]
    NotMounted {
        /// The sysfs root looked under.
        root: String,
    },
    /// tracefs is there but a file is missing or unreadable.
    #[error("{path}: {reason}")]
    Bad {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// The `raw_syscalls` tracepoints as tracefs describes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallTracepoints {
    /// Tracepoint id of `raw_syscalls:sys_enter`.
    pub enter_id: u64,
    /// Tracepoint id of `raw_syscalls:sys_exit`.
    pub exit_id: u64,
    /// Byte offset of the `id` field (the syscall number, a `long`) in a `sys_enter` entry.
    pub id_offset: usize,
}

/// The byte offset of the `long id` field in a tracepoint `format` file.
pub fn parse_id_offset(format: &str) -> Option<usize> {
    format.lines().find_map(|l| {
        let l = l.trim();
        let field = l.strip_prefix("field:")?;
        let (decl, rest) = field.split_once(';')?;
        if decl.split_whitespace().last()? != "id" {
            return None;
        }
        let off = rest.trim().strip_prefix("offset:")?.split(';').next()?;
        off.trim().parse().ok()
    })
}

impl SyscallTracepoints {
    /// From the running kernel's tracefs (`/sys/kernel/tracing` or `/sys/kernel/debug/tracing`).
    pub fn find() -> Result<Self, TracefsError> {
        Self::find_under(Path::new("/sys"))
    }

    /// From tracefs under the sysfs root `root` (a fixture in the tests).
    pub fn find_under(root: &Path) -> Result<Self, TracefsError> {
        let base = ["kernel/tracing/events", "kernel/debug/tracing/events"]
            .iter()
            .map(|b| root.join(b))
            .find(|p| p.is_dir())
            .ok_or_else(|| TracefsError::NotMounted {
                root: root.display().to_string(),
            })?;
        let read = |rel: &str| {
            let p = base.join(rel);
            std::fs::read_to_string(&p).map_err(|e| TracefsError::Bad {
                path: p.display().to_string(),
                reason: e.to_string(),
            })
        };
        let id = |rel: &str| -> Result<u64, TracefsError> {
            let text = read(rel)?;
            text.trim().parse().map_err(|_| TracefsError::Bad {
                path: base.join(rel).display().to_string(),
                reason: format!("{:?} is not a tracepoint id", text.trim()),
            })
        };
        let enter_id = id("raw_syscalls/sys_enter/id")?;
        let exit_id = id("raw_syscalls/sys_exit/id")?;
        let format = read("raw_syscalls/sys_enter/format")?;
        let id_offset = parse_id_offset(&format).ok_or_else(|| TracefsError::Bad {
            path: base
                .join("raw_syscalls/sys_enter/format")
                .display()
                .to_string(),
            reason: "no `long id` field".into(),
        })?;
        Ok(Self {
            enter_id,
            exit_id,
            id_offset,
        })
    }
}

/// One sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpSample {
    /// The thread.
    pub tid: u32,
    /// Instruction pointer (virtual address).
    pub ip: u64,
    /// Whether the thread was in the kernel.
    pub kernel: bool,
    /// The system call in progress (kernel samples, syscalls visible; `None` outside one).
    pub syscall: Option<u32>,
    /// Syscall records of this thread were lost around this kernel sample: `syscall` is not
    /// to be trusted (the sample counts as plain kernel).
    pub syscall_unknown: bool,
}

/// A tracepoint event of one thread: `Some(nr)` entered call `nr`, `None` returned.
type SysEvent = (u64, Option<u32>);

/// The samplers of one thread and the syscall it is in.
struct ThreadSampler {
    clock: Sampler,
    sys: Option<(Sampler, Sampler)>,
    /// The syscall in progress after the last applied event.
    current: Option<u32>,
    /// Tracepoint events later than the last sample drained, in time order.
    pending: Vec<SysEvent>,
}

/// Attribute `samples` (time, ip, kernel; in time order) to the syscalls in progress, given
/// tracepoint events `events` (any order; merged into `pending`), updating `current`. Events
/// after the last sample stay pending (a later sample may fall before them); `max_pending`
/// bounds them.
pub fn attribute(
    samples: &[(u64, u64, bool)],
    events: &mut Vec<SysEvent>,
    pending: &mut Vec<SysEvent>,
    current: &mut Option<u32>,
    max_pending: usize,
) -> Vec<Option<u32>> {
    pending.append(events);
    pending.sort_by_key(|e| e.0);
    let mut applied = 0;
    let mut out = Vec::with_capacity(samples.len());
    for &(t, _, kernel) in samples {
        while applied < pending.len() && pending[applied].0 <= t {
            *current = pending[applied].1;
            applied += 1;
        }
        out.push(if kernel { *current } else { None });
    }
    let extra = (pending.len() - applied).saturating_sub(max_pending);
    for e in &pending[applied..applied + extra] {
        *current = e.1;
    }
    pending.drain(..applied + extra);
    out
}

/// `cpu-clock` IP samplers on any set of threads (of any processes), with per-thread syscall
/// attribution where the tracepoints are given. Threads are added as they are seen
/// ([`Self::watch`]) and dropped when gone ([`Self::retain`]).
pub struct CodeSampler {
    period_ns: u64,
    kernel: bool,
    syscalls: Option<SyscallTracepoints>,
    enabled: bool,
    threads: BTreeMap<u32, ThreadSampler>,
    /// Sample records the kernel reported lost (ring buffer full).
    pub lost: u64,
    /// Tracepoint records lost: some samples' syscalls may be misattributed.
    pub lost_syscall_events: u64,
}

impl CodeSampler {
    /// Sample every `period_ns` of each thread's CPU time (at least 10 µs); kernel samples
    /// when `kernel`; syscall attribution with `syscalls`. New threads start sampling at once.
    pub fn new(period_ns: u64, kernel: bool, syscalls: Option<SyscallTracepoints>) -> Self {
        Self {
            period_ns: period_ns.max(10_000),
            kernel,
            syscalls,
            enabled: true,
            threads: BTreeMap::new(),
            lost: 0,
            lost_syscall_events: 0,
        }
    }

    /// The sampling period, ns.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Whether kernel samples carry the syscall in progress.
    pub fn syscalls_visible(&self) -> bool {
        self.syscalls.is_some() && self.kernel
    }

    /// Threads sampled.
    pub fn threads(&self) -> Vec<u32> {
        self.threads.keys().copied().collect()
    }

    fn open(&self, tid: u32) -> Result<Option<ThreadSampler>, SamplingError> {
        let gone = |e: &io::Error| e.raw_os_error() == Some(libc::ESRCH);
        let mut flags = SampleFlag::IP | SampleFlag::TID;
        if self.syscalls.is_some() {
            flags |= SampleFlag::TIME;
        }
        let clock = Builder::new(Software::CPU_CLOCK)
            .observe_pid(tid as i32)
            .any_cpu()
            .sample_period(self.period_ns)
            .sample(flags)
            .exclude_kernel(!self.kernel)
            .exclude_hv(true)
            .enabled(false)
            .build()
            .and_then(|c| c.sampled(RING_BYTES));
        let clock = match clock {
            Ok(c) => c,
            // The thread exited between the listing and the open.
            Err(e) if gone(&e) => return Ok(None),
            Err(source) => return Err(SamplingError::Open { tid, source }),
        };
        let sys = match (self.syscalls, self.kernel) {
            (Some(tp), true) => {
                let open = |id: u64, raw: bool, bytes: usize| {
                    let mut f = SampleFlag::TID | SampleFlag::TIME;
                    if raw {
                        f |= SampleFlag::RAW;
                    }
                    // Tracepoints fire in the kernel: perf-event2's default excludes it.
                    Builder::new(Tracepoint::with_id(id))
                        .observe_pid(tid as i32)
                        .any_cpu()
                        .exclude_kernel(false)
                        .sample_period(1)
                        .sample(f)
                        .enabled(false)
                        .build()
                        .and_then(|c| c.sampled(bytes))
                };
                match open(tp.enter_id, true, TP_ENTER_RING_BYTES)
                    .and_then(|a| open(tp.exit_id, false, TP_EXIT_RING_BYTES).map(|b| (a, b)))
                {
                    Ok(p) => Some(p),
                    Err(e) if gone(&e) => return Ok(None),
                    Err(source) => return Err(SamplingError::OpenTracepoint { tid, source }),
                }
            }
            _ => None,
        };
        Ok(Some(ThreadSampler {
            clock,
            sys,
            current: None,
            pending: Vec::new(),
        }))
    }

    /// Start sampling thread `tid` if it is not sampled yet. `Ok(false)`: it has exited.
    pub fn watch(&mut self, tid: u32) -> Result<bool, SamplingError> {
        if self.threads.contains_key(&tid) {
            return Ok(true);
        }
        let Some(mut t) = self.open(tid)? else {
            return Ok(false);
        };
        if self.enabled {
            // Tracepoints first: a sample is never taken before its thread's events are.
            if let Some((a, b)) = &mut t.sys {
                a.enable()
                    .map_err(|source| SamplingError::OpenTracepoint { tid, source })?;
                b.enable()
                    .map_err(|source| SamplingError::OpenTracepoint { tid, source })?;
            }
            t.clock
                .enable()
                .map_err(|source| SamplingError::Open { tid, source })?;
        }
        self.threads.insert(tid, t);
        Ok(true)
    }

    /// Stop sampling (and close) the threads `keep` refuses.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.threads.retain(|&t, _| keep(t));
    }

    /// Start every thread's samplers.
    pub fn enable(&mut self) -> io::Result<()> {
        for t in self.threads.values_mut() {
            if let Some((a, b)) = &mut t.sys {
                a.enable()?;
                b.enable()?;
            }
            t.clock.enable()?;
        }
        self.enabled = true;
        Ok(())
    }

    /// Stop every thread's samplers.
    pub fn disable(&mut self) -> io::Result<()> {
        for t in self.threads.values_mut() {
            t.clock.disable()?;
            if let Some((a, b)) = &mut t.sys {
                a.disable()?;
                b.disable()?;
            }
        }
        self.enabled = false;
        Ok(())
    }

    /// Move every sample waiting in the ring buffers into `out`, each kernel sample with the
    /// syscall in progress where visible (call often enough that the buffers do not fill).
    pub fn drain(&mut self, out: &mut Vec<IpSample>) {
        let id_offset = self.syscalls.map_or(8, |s| s.id_offset);
        for (&tid, t) in &mut self.threads {
            let mut samples: Vec<(u64, u64, bool)> = Vec::new();
            for _ in 0..MAX_CLOCK_RECORDS {
                let Some(rec) = t.clock.next_record() else {
                    break;
                };
                let kernel = rec.misc() & CPUMODE_MASK == CPUMODE_KERNEL;
                match rec.parse_record() {
                    Ok(data::Record::Sample(smp)) => {
                        if let Some(ip) = smp.ip() {
                            samples.push((smp.time().unwrap_or(0), ip, kernel));
                        }
                    }
                    Ok(data::Record::Lost(l)) => self.lost += l.lost,
                    _ => {}
                };
            }
            let Some((enter, exit)) = &mut t.sys else {
                out.extend(samples.into_iter().map(|(_, ip, kernel)| IpSample {
                    tid,
                    ip,
                    kernel,
                    syscall: None,
                    syscall_unknown: false,
                }));
                continue;
            };
            // Read after the samples: every event before the last sample is in by now.
            let mut events: Vec<SysEvent> = Vec::new();
            let lost_before = self.lost_syscall_events;
            for (s, is_enter) in [(enter, true), (exit, false)] {
                for _ in 0..MAX_TP_RECORDS {
                    let Some(rec) = s.next_record() else {
                        break;
                    };
                    match rec.parse_record() {
                        Ok(data::Record::Sample(smp)) => {
                            let time = smp.time().unwrap_or(0);
                            if !is_enter {
                                events.push((time, None));
                                continue;
                            }
                            let nr = smp
                                .raw()
                                .and_then(|r| r.get(id_offset..id_offset + 8))
                                .and_then(|b| b.try_into().ok())
                                .map(i64::from_ne_bytes)
                                .and_then(|n| u32::try_from(n).ok());
                            events.push((time, nr));
                        }
                        Ok(data::Record::Lost(l)) => self.lost_syscall_events += l.lost,
                        _ => {}
                    };
                }
            }
            // Records lost since the last drain: this drain's kernel samples may fall in the gap
            // (the loss record says how many, not when).
            let unknown = self.lost_syscall_events > lost_before;
            let calls = attribute(
                &samples,
                &mut events,
                &mut t.pending,
                &mut t.current,
                MAX_PENDING,
            );
            out.extend(
                samples
                    .into_iter()
                    .zip(calls)
                    .map(|((_, ip, kernel), syscall)| IpSample {
                        tid,
                        ip,
                        kernel,
                        syscall,
                        syscall_unknown: unknown && kernel,
                    }),
            );
        }
    }
}

/// `cpu-clock` IP samplers on every thread of a process present when it opens.
pub struct IpSampler {
    inner: CodeSampler,
}

/// The thread ids of `pid`, ascending.
pub fn threads_of(pid: u32) -> Result<Vec<u32>, SamplingError> {
    let pid_i32 = i32::try_from(pid).map_err(|_| SamplingError::Threads {
        pid,
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })?;
    let tids = crate::tasks::thread_ids(std::path::Path::new("/proc"), pid_i32)
        .map_err(|source| SamplingError::Threads { pid, source })?;
    // thread_ids keeps only positive ids, so each fits a u32.
    Ok(tids.into_iter().map(|t| t.unsigned_abs()).collect())
}

impl IpSampler {
    /// Open (disabled) one sampler per thread of `pid`, sampling every `period_ns` of each
    /// thread's CPU time; kernel samples too when `kernel` (refused by the kernel when
    /// `perf_event_paranoid` forbids them). Threads that exit before their event opens are
    /// skipped.
    pub fn open_pid(pid: u32, period_ns: u64, kernel: bool) -> Result<Self, SamplingError> {
        Self::open_pid_with(pid, period_ns, kernel, None)
    }

    /// [`Self::open_pid`], attributing kernel samples to system calls with `syscalls`.
    pub fn open_pid_with(
        pid: u32,
        period_ns: u64,
        kernel: bool,
        syscalls: Option<SyscallTracepoints>,
    ) -> Result<Self, SamplingError> {
        let mut inner = CodeSampler::new(period_ns, kernel, syscalls);
        inner.enabled = false;
        for tid in threads_of(pid)? {
            inner.watch(tid)?;
        }
        if inner.threads.is_empty() {
            return Err(SamplingError::NoThreads { pid });
        }
        Ok(Self { inner })
    }

    /// Threads sampled.
    pub fn threads(&self) -> Vec<u32> {
        self.inner.threads()
    }

    /// Whether kernel samples carry the syscall in progress.
    pub fn syscalls_visible(&self) -> bool {
        self.inner.syscalls_visible()
    }

    /// Sample records lost (ring buffer full).
    pub fn lost(&self) -> u64 {
        self.inner.lost
    }

    /// Tracepoint records lost.
    pub fn lost_syscall_events(&self) -> u64 {
        self.inner.lost_syscall_events
    }

    /// Start sampling.
    pub fn enable(&mut self) -> io::Result<()> {
        self.inner.enable()
    }

    /// Stop sampling.
    pub fn disable(&mut self) -> io::Result<()> {
        self.inner.disable()
    }

    /// Move every record waiting in the ring buffers into `out` (call often enough that the
    /// buffers do not fill: ~2,000 samples per thread).
    pub fn drain(&mut self, out: &mut Vec<IpSample>) {
        self.inner.drain(out)
    }
}

/// One line of `/proc/PID/maps`: an executable mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// Device (major << 32 | minor) of the file.
    pub dev: u64,
    /// Inode of the file (0: anonymous).
    pub inode: u64,
    /// The mapped file (or `[vdso]`, or empty for anonymous code).
    pub path: String,
}

/// The executable mappings of a `/proc/PID/maps` text (lines that do not parse are skipped:
/// the file is the kernel's, its format fixed).
pub fn parse_code_maps(text: &str) -> Vec<CodeMapping> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            if !perms.contains('x') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let start = u64::from_str_radix(a, 16).ok()?;
            let end = u64::from_str_radix(b, 16).ok()?;
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let (maj, min) = f.next()?.split_once(':')?;
            let dev =
                (u64::from_str_radix(maj, 16).ok()? << 32) | u64::from_str_radix(min, 16).ok()?;
            let inode = f.next()?.parse().ok()?;
            let path = f.next().unwrap_or("").to_string();
            Some(CodeMapping {
                start,
                end,
                offset,
                dev,
                inode,
                path,
            })
        })
        .collect()
}

/// The mapping holding `ip`, if any.
pub fn mapping_of(maps: &[CodeMapping], ip: u64) -> Option<&CodeMapping> {
    maps.iter().find(|m| ip >= m.start && ip < m.end)
}

/// The page number a user `ip` stands for in a heatmap. The paper hashes physical pages; a
/// file-backed code page is one page-cache page, shared by every process that maps the file,
/// so (device, inode, page of the file) names it wherever it is mapped (two processes running
/// the same binary or library compare equal despite address-space randomization). Anonymous
/// code (JIT) falls back to its virtual page.
pub fn user_page(maps: &[CodeMapping], ip: u64) -> u64 {
    match mapping_of(maps, ip) {
        Some(m) if m.inode != 0 => {
            let file_page = (m.offset + (ip - m.start)) / PAGE_BYTES;
            // Spread files apart (Fibonacci hashing of the identity) and keep one file's pages
            // consecutive, as physical pages of one file often are.
            (m.inode ^ m.dev.rotate_left(17))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(file_page)
        }
        _ => ip / PAGE_BYTES,
    }
}

/// One thread's code from its samples, and the mapping (file) most of its user samples fall in.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadHeatmap {
    /// The thread and its heatmaps.
    pub code: ThreadCode,
    /// The mapping most of its user samples fall in.
    pub top_mapping: Option<String>,
}

/// Per-thread code heatmaps of `samples`, ascending by thread id: user pages as
/// [`user_page`] names them through `maps`, kernel pages by their virtual page (kernel text
/// sits at a fixed offset from its physical pages, so they stand in one for one), kernel
/// samples per syscall when `syscalls_visible`.
pub fn thread_heatmaps(
    samples: &[IpSample],
    maps: &[CodeMapping],
    syscalls_visible: bool,
) -> Vec<ThreadHeatmap> {
    let mut by: BTreeMap<u32, (CodeHeatmap, BTreeMap<&str, u64>)> = BTreeMap::new();
    for s in samples {
        let (h, files) = by
            .entry(s.tid)
            .or_insert_with(|| (CodeHeatmap::new(syscalls_visible), BTreeMap::new()));
        if s.kernel && s.syscall_unknown {
            h.add_unattributed(s.ip / PAGE_BYTES);
        } else if s.kernel {
            h.add(true, s.ip / PAGE_BYTES, s.syscall);
        } else {
            h.add(false, user_page(maps, s.ip), None);
            let name = mapping_of(maps, s.ip).map_or("?", |m| m.path.as_str());
            *files.entry(name).or_default() += 1;
        }
    }
    by.into_iter()
        .map(|(tid, (code, files))| ThreadHeatmap {
            code: ThreadCode {
                tid: u64::from(tid),
                code,
            },
            top_mapping: files
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                .map(|(f, _)| f.to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_maps_keep_executable_lines_only() {
        let text = "\
55d0c0a00000-55d0c0a28000 r--p 00000000 08:01 1234 /usr/bin/find
55d0c0a28000-55d0c0a5c000 r-xp 00028000 08:01 1234 /usr/bin/find
7f00aa000000-7f00aa1d0000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6
7ffc11ff0000-7ffc11ff2000 r-xp 00000000 00:00 0 [vdso]
7f00bb000000-7f00bb001000 rwxp 00000000 00:00 0
garbage line
";
        let m = parse_code_maps(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].start, 0x55d0c0a28000);
        assert_eq!(m[0].path, "/usr/bin/find");
        assert_eq!(
            (m[0].offset, m[0].dev, m[0].inode),
            (0x28000, (8 << 32) | 1, 1234)
        );
        assert_eq!(m[2].path, "[vdso]");
        assert_eq!(m[3].path, "");
        assert_eq!(m[3].inode, 0);
        assert_eq!(
            mapping_of(&m, 0x7f00aa000100).map(|x| x.path.as_str()),
            Some("/usr/lib/libc.so.6")
        );
        assert!(mapping_of(&m, 0x1000).is_none());
    }

    #[test]
    fn one_file_page_is_one_page_wherever_it_is_mapped() {
        // libc mapped at two addresses (two processes, randomized); the same file page
        // (offset 0x1000 + 0x234 -> file page 1) gives the same heatmap page.
        let a = parse_code_maps("7f0000000000-7f0000100000 r-xp 00001000 08:01 99 /lib/libc\n");
        let b = parse_code_maps("7f5500000000-7f5500100000 r-xp 00001000 08:01 99 /lib/libc\n");
        assert_eq!(user_page(&a, 0x7f0000000234), user_page(&b, 0x7f5500000234));
        // The next page of the file is the next page number.
        assert_eq!(
            user_page(&a, 0x7f0000001000),
            user_page(&a, 0x7f0000000000).wrapping_add(1)
        );
        // Another inode is elsewhere; anonymous code is its virtual page.
        let c = parse_code_maps("7f0000000000-7f0000100000 r-xp 00001000 08:01 100 /lib/libm\n");
        assert_ne!(user_page(&a, 0x7f0000000234), user_page(&c, 0x7f0000000234));
        assert_eq!(user_page(&[], 0x40_1234), 0x401);
    }

    #[test]
    fn heatmaps_split_user_and_kernel_per_thread() {
        let maps = parse_code_maps(
            "400000-401000 r-xp 0 0:0 0 /bin/a\n500000-502000 r-xp 0 0:0 0 /lib/b\n",
        );
        let s = |tid, ip, kernel| IpSample {
            tid,
            ip,
            kernel,
            syscall: None,
            syscall_unknown: false,
        };
        let samples = [
            // Thread 7 (anonymous mappings here: inode 0, so virtual pages): pages 0x400
            // (= 1024 -> 1024 + 2 = 1026 mod 512 = 2) twice, 0x501 (1281 + 2 = 1283 mod 512 =
            // 259) once in user mode; one kernel page 0xffffffff81000000 >> 12.
            s(7, 0x400010, false),
            s(7, 0x400ff0, false),
            s(7, 0x501000, false),
            s(7, 0xffff_ffff_8100_0040, true),
            // Thread 3: only /lib/b.
            s(3, 0x500000, false),
        ];
        let h = thread_heatmaps(&samples, &maps, false);
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].code.tid, h[1].code.tid), (3, 7));
        let t7 = &h[1].code.code;
        assert_eq!((t7.user_samples, t7.kernel_samples), (3, 1));
        assert_eq!(t7.user.bits().collect::<Vec<_>>(), vec![2, 259]);
        assert_eq!(t7.kernel.popcount(), 1);
        assert_eq!(h[1].top_mapping.as_deref(), Some("/bin/a"));
        assert_eq!(h[0].top_mapping.as_deref(), Some("/lib/b"));
        // 0x500 = 1280 -> 1282 mod 512 = 258: no common page with thread 7's user pages.
        assert_eq!(h[0].code.code.combined().overlap(&t7.combined()), 0);
    }

    #[test]
    fn a_thread_doing_only_syscalls_gets_kernel_pages_per_call() {
        let s = |ip, syscall| IpSample {
            tid: 9,
            ip,
            kernel: true,
            syscall,
            syscall_unknown: false,
        };
        let lost = IpSample {
            syscall_unknown: true,
            ..s(0xffff_ffff_8100_6040, Some(0))
        };
        let samples = [
            s(0xffff_ffff_8100_0040, Some(0)),
            s(0xffff_ffff_8100_1040, Some(0)),
            s(0xffff_ffff_8100_1040, Some(1)),
            s(0xffff_ffff_8100_5040, None),
            lost,
        ];
        let h = thread_heatmaps(&samples, &[], true);
        let c = &h[0].code.code;
        assert!(c.user.is_empty());
        // The sample whose syscall records were lost counts as plain kernel.
        assert_eq!((c.kernel.popcount(), c.unattributed_samples), (4, 1));
        assert_eq!(c.syscalls.len(), 2);
        assert_eq!((c.syscalls[0].nr, c.syscalls[0].samples), (0, 2));
        assert_eq!(c.syscalls[0].kernel.popcount(), 2);
        assert_eq!(c.outside_syscall_samples, 1);
        assert_eq!(
            c.dominant().map(|d| d.to_string()).as_deref(),
            Some("syscall:read")
        );
    }

    #[test]
    fn samples_take_the_syscall_in_progress_at_their_time() {
        // Thread enters read (0) at t=10, leaves at 20, enters write (1) at 30.
        let mut events = vec![(30, Some(1)), (10, Some(0)), (20, None)];
        let mut pending = Vec::new();
        let mut cur = None;
        // Samples at 5 (kernel, before any call), 15 (in read), 25 (user), 26 (kernel,
        // between calls).
        let samples = [(5, 0, true), (15, 0, true), (25, 0, false), (26, 0, true)];
        let got = attribute(&samples, &mut events, &mut pending, &mut cur, 100);
        assert_eq!(got, vec![None, Some(0), None, None]);
        // The entry at 30 is after the last sample: kept for the next batch.
        assert_eq!(pending, vec![(30, Some(1))]);
        assert_eq!(cur, None);
        let got = attribute(
            &[(35, 0, true)],
            &mut Vec::new(),
            &mut pending,
            &mut cur,
            100,
        );
        assert_eq!(got, vec![Some(1)]);
        assert!(pending.is_empty());
        // The bound: beyond max_pending the oldest are applied without a sample.
        let mut events = vec![(40, None), (50, Some(2)), (60, None)];
        attribute(&[], &mut events, &mut pending, &mut cur, 1);
        assert_eq!((pending.len(), cur), (1, Some(2)));
    }

    #[test]
    fn tracepoint_ids_and_the_id_offset_come_from_tracefs() {
        let format = "name: sys_enter\nID: 22\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n";
        assert_eq!(parse_id_offset(format), Some(8));
        assert_eq!(parse_id_offset("field:int common_pid;\toffset:4;"), None);
        let dir = tempfile::tempdir().expect("tempdir");
        let err = SyscallTracepoints::find_under(dir.path()).unwrap_err();
        assert!(err.to_string().contains("mount -t tracefs"), "{err}");
        let ev = dir.path().join("kernel/tracing/events/raw_syscalls");
        for (name, id) in [("sys_enter", "22"), ("sys_exit", "21")] {
            std::fs::create_dir_all(ev.join(name)).expect("mkdir");
            std::fs::write(ev.join(name).join("id"), format!("{id}\n")).expect("id");
        }
        let err = SyscallTracepoints::find_under(dir.path()).unwrap_err();
        assert!(err.to_string().contains("sys_enter/format"), "{err}");
        std::fs::write(ev.join("sys_enter/format"), format).expect("format");
        assert_eq!(
            SyscallTracepoints::find_under(dir.path()),
            Ok(SyscallTracepoints {
                enter_id: 22,
                exit_id: 21,
                id_offset: 8
            })
        );
    }

    #[test]
    fn a_missing_process_is_a_typed_error() {
        // PID 0 never has a /proc entry.
        match IpSampler::open_pid(0, 1_000_000, false) {
            Err(SamplingError::Threads { pid: 0, .. }) => {}
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("sampled pid 0"),
        }
    }
}
