//! Instruction-pointer sampling with the software `cpu-clock` event (no PMU needed): one
//! sampling event per thread of a process, each writing (ip, tid) records into its ring
//! buffer every `period_ns` of the thread's CPU time, with the kernel's user/kernel mode flag.
//! The SchedTask heatmaps (docs/schedtask.md) are built from these samples.

use counterpoint_core::heatmap::PageHeatmap;
use perf_event::events::Software;
use perf_event::{data, Builder, SampleFlag, Sampler};
use std::io;

/// Ring-buffer size per thread: 1 + 2^k pages; 16 data pages hold ~1,000 samples.
const RING_BYTES: usize = 17 * 4096;
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
    /// Every thread exited before its event opened.
    #[error("process {pid} has no thread left to sample")]
    NoThreads {
        /// The process.
        pid: u32,
    },
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
}

/// `cpu-clock` IP samplers on every thread of a process.
pub struct IpSampler {
    samplers: Vec<(u32, Sampler)>,
    /// Records the kernel reported lost (ring buffer full).
    pub lost: u64,
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
        let mut samplers = Vec::new();
        for tid in threads_of(pid)? {
            let built = Builder::new(Software::CPU_CLOCK)
                .observe_pid(tid as i32)
                .any_cpu()
                .sample_period(period_ns.max(10_000))
                .sample(SampleFlag::IP | SampleFlag::TID)
                .exclude_kernel(!kernel)
                .exclude_hv(true)
                .enabled(false)
                .build()
                .and_then(|c| c.sampled(RING_BYTES));
            match built {
                Ok(s) => samplers.push((tid, s)),
                // The thread exited between the listing and the open.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(source) => return Err(SamplingError::Open { tid, source }),
            }
        }
        if samplers.is_empty() {
            return Err(SamplingError::NoThreads { pid });
        }
        Ok(Self { samplers, lost: 0 })
    }

    /// Threads sampled.
    pub fn threads(&self) -> Vec<u32> {
        self.samplers.iter().map(|s| s.0).collect()
    }

    /// Start sampling.
    pub fn enable(&mut self) -> io::Result<()> {
        for (_, s) in &mut self.samplers {
            s.enable()?;
        }
        Ok(())
    }

    /// Stop sampling.
    pub fn disable(&mut self) -> io::Result<()> {
        for (_, s) in &mut self.samplers {
            s.disable()?;
        }
        Ok(())
    }

    /// Move every record waiting in the ring buffers into `out` (call often enough that the
    /// buffers do not fill: ~1,000 samples per thread).
    pub fn drain(&mut self, out: &mut Vec<IpSample>) {
        for (tid, s) in &mut self.samplers {
            while let Some(rec) = s.next_record() {
                let kernel = rec.misc() & CPUMODE_MASK == CPUMODE_KERNEL;
                match rec.parse_record() {
                    Ok(data::Record::Sample(smp)) => {
                        if let Some(ip) = smp.ip() {
                            out.push(IpSample {
                                tid: smp.tid().unwrap_or(*tid),
                                ip,
                                kernel,
                            });
                        }
                    }
                    Ok(data::Record::Lost(l)) => self.lost += l.lost,
                    _ => {}
                }
            }
        }
    }
}

/// One line of `/proc/PID/maps`: an executable mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
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
            let path = f.nth(3).unwrap_or("").to_string();
            Some(CodeMapping { start, end, path })
        })
        .collect()
}

/// The mapping holding `ip`, if any.
pub fn mapping_of(maps: &[CodeMapping], ip: u64) -> Option<&CodeMapping> {
    maps.iter().find(|m| ip >= m.start && ip < m.end)
}

/// One thread's heatmaps from its samples: user pages (virtual page numbers of the process's
/// code: one address space, so threads compare exactly) and kernel pages (kernel text is
/// mapped at a fixed offset from its physical pages, so its virtual pages stand in one for one).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ThreadHeatmap {
    /// The thread.
    pub tid: u32,
    /// Samples in user mode.
    pub user_samples: u64,
    /// Samples in the kernel.
    pub kernel_samples: u64,
    /// User code pages.
    pub user: PageHeatmap,
    /// Kernel code pages.
    pub kernel: PageHeatmap,
    /// The mapping (file) most of its user samples fall in.
    pub top_mapping: Option<String>,
}

impl ThreadHeatmap {
    /// User and kernel pages together (what the overlap compares).
    pub fn combined(&self) -> PageHeatmap {
        let mut m = self.user;
        m.union_with(&self.kernel);
        m
    }
}

/// Per-thread heatmaps of `samples`, ascending by thread id; `maps` names each thread's most
/// sampled mapping.
pub fn thread_heatmaps(samples: &[IpSample], maps: &[CodeMapping]) -> Vec<ThreadHeatmap> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<u32, (ThreadHeatmap, BTreeMap<String, u64>)> = BTreeMap::new();
    for s in samples {
        let (h, files) = by.entry(s.tid).or_insert_with(|| {
            (
                ThreadHeatmap {
                    tid: s.tid,
                    user_samples: 0,
                    kernel_samples: 0,
                    user: PageHeatmap::new(),
                    kernel: PageHeatmap::new(),
                    top_mapping: None,
                },
                BTreeMap::new(),
            )
        });
        if s.kernel {
            h.kernel_samples += 1;
            h.kernel.insert_addr(s.ip);
        } else {
            h.user_samples += 1;
            h.user.insert_addr(s.ip);
            let name = mapping_of(maps, s.ip).map_or("?", |m| m.path.as_str());
            *files.entry(name.to_string()).or_default() += 1;
        }
    }
    by.into_values()
        .map(|(mut h, files)| {
            h.top_mapping = files
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(f, _)| f);
            h
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
        assert_eq!(m[2].path, "[vdso]");
        assert_eq!(m[3].path, "");
        assert_eq!(
            mapping_of(&m, 0x7f00aa000100).map(|x| x.path.as_str()),
            Some("/usr/lib/libc.so.6")
        );
        assert!(mapping_of(&m, 0x1000).is_none());
    }

    #[test]
    fn heatmaps_split_user_and_kernel_per_thread() {
        let maps = parse_code_maps(
            "400000-401000 r-xp 0 0:0 0 /bin/a\n500000-502000 r-xp 0 0:0 0 /lib/b\n",
        );
        let s = |tid, ip, kernel| IpSample { tid, ip, kernel };
        let samples = [
            // Thread 7: pages 0x400 (= 1024 -> 1024 + 2 = 1026 mod 512 = 2) twice, 0x501
            // (1281 + 2 = 1283 mod 512 = 259) once in user mode; one kernel page
            // 0xffffffff81000000 >> 12.
            s(7, 0x400010, false),
            s(7, 0x400ff0, false),
            s(7, 0x501000, false),
            s(7, 0xffff_ffff_8100_0040, true),
            // Thread 3: only /lib/b.
            s(3, 0x500000, false),
        ];
        let h = thread_heatmaps(&samples, &maps);
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].tid, h[1].tid), (3, 7));
        let t7 = &h[1];
        assert_eq!((t7.user_samples, t7.kernel_samples), (3, 1));
        assert_eq!(t7.user.bits().collect::<Vec<_>>(), vec![2, 259]);
        assert_eq!(t7.kernel.popcount(), 1);
        assert_eq!(t7.top_mapping.as_deref(), Some("/bin/a"));
        assert_eq!(h[0].top_mapping.as_deref(), Some("/lib/b"));
        // 0x500 = 1280 -> 1282 mod 512 = 258: no common page with thread 7's user pages.
        assert_eq!(h[0].combined().overlap(&t7.combined()), 0);
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
