//! SchedTask's SuperFunctions on a live host (seed 004; docs/schedtask.md): what a task's
//! sampled instruction pointers say it executed over one interval — its own code, the kernel on
//! behalf of a system call (by number, where the syscall tracepoints are visible), or the kernel
//! outside any system call (interrupts, faults, softirqs) — with a 512-bit page heatmap per kind.
//!
//! The sampler that fills these lives in `counters` and the host attaches them to its
//! observations only when the policy asks ([`crate::Policy::wants_code_heatmaps`]); the
//! simulator leaves them empty. Each sample is one `cpu-clock` tick of the thread's CPU time,
//! so sample counts are proportional to time spent.
//!
//! ```
//! use counterpoint_core::superfunction::{CodeHeatmap, SuperFunction};
//!
//! let mut c = CodeHeatmap::new(true);
//! c.add(false, 0x401, None); // a user code page
//! c.add(true, 0x000f_ffff_fff8_1000, Some(0)); // kernel text pages, inside read(2)
//! c.add(true, 0x000f_ffff_fff8_1001, Some(0));
//! assert_eq!(c.dominant(), Some(SuperFunction::Syscall(0)));
//! assert_eq!(c.dominant().unwrap().to_string(), "syscall:read");
//! ```

use crate::cpuset::CpuSet;
use crate::heatmap::PageHeatmap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A kind of execution, as SchedTask splits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuperFunction {
    /// The application's own (user-mode) code.
    User,
    /// Kernel code, system call or not unknown (the syscall tracepoints were not visible).
    Kernel,
    /// Kernel code inside system call number `.0` (x86-64 numbering on x86-64).
    Syscall(u32),
    /// Kernel code outside any system call: interrupts, faults, softirqs (known only where the
    /// syscall tracepoints are visible).
    Interrupt,
}

impl fmt::Display for SuperFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SuperFunction::User => f.write_str("user"),
            SuperFunction::Kernel => f.write_str("kernel"),
            SuperFunction::Syscall(nr) => match syscall_name(*nr) {
                Some(n) => write!(f, "syscall:{n}"),
                None => write!(f, "syscall:{nr}"),
            },
            SuperFunction::Interrupt => f.write_str("irq/fault"),
        }
    }
}

/// The name of system call `nr` on this architecture, for the common ones (others print as
/// their number). x86-64 only: elsewhere every call prints as its number.
pub fn syscall_name(nr: u32) -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        // arch/x86/entry/syscalls/syscall_64.tbl, 0..=62, then a few common later ones.
        const LOW: [&str; 63] = [
            "read",
            "write",
            "open",
            "close",
            "stat",
            "fstat",
            "lstat",
            "poll",
            "lseek",
            "mmap",
            "mprotect",
            "munmap",
            "brk",
            "rt_sigaction",
            "rt_sigprocmask",
            "rt_sigreturn",
            "ioctl",
            "pread64",
            "pwrite64",
            "readv",
            "writev",
            "access",
            "pipe",
            "select",
            "sched_yield",
            "mremap",
            "msync",
            "mincore",
            "madvise",
            "shmget",
            "shmat",
            "shmctl",
            "dup",
            "dup2",
            "pause",
            "nanosleep",
            "getitimer",
            "alarm",
            "setitimer",
            "getpid",
            "sendfile",
            "socket",
            "connect",
            "accept",
            "sendto",
            "recvfrom",
            "sendmsg",
            "recvmsg",
            "shutdown",
            "bind",
            "listen",
            "getsockname",
            "getpeername",
            "socketpair",
            "setsockopt",
            "getsockopt",
            "clone",
            "fork",
            "vfork",
            "execve",
            "exit",
            "wait4",
            "kill",
        ];
        if let Some(n) = LOW.get(nr as usize) {
            return Some(n);
        }
        let n = match nr {
            72 => "fcntl",
            74 => "fsync",
            78 => "getdents",
            79 => "getcwd",
            87 => "unlink",
            89 => "readlink",
            96 => "gettimeofday",
            202 => "futex",
            217 => "getdents64",
            228 => "clock_gettime",
            230 => "clock_nanosleep",
            231 => "exit_group",
            232 => "epoll_wait",
            257 => "openat",
            262 => "newfstatat",
            270 => "pselect6",
            271 => "ppoll",
            281 => "epoll_pwait",
            288 => "accept4",
            318 => "getrandom",
            332 => "statx",
            _ => return None,
        };
        Some(n)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = nr;
        None
    }
}

/// Samples and kernel pages of one system call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallCode {
    /// The system call number.
    pub nr: u32,
    /// Kernel samples taken while the call was in progress.
    pub samples: u64,
    /// The kernel code pages they hit.
    pub kernel: PageHeatmap,
}

/// One thread's or one task's sampled code over an interval: user and kernel heatmaps, sample
/// counts per [`SuperFunction`], and per system call where visible.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeHeatmap {
    /// User code pages (virtual: the threads of one process share them).
    pub user: PageHeatmap,
    /// Kernel code pages (kernel text sits at a fixed offset from its physical pages).
    pub kernel: PageHeatmap,
    /// Samples in user mode.
    pub user_samples: u64,
    /// Samples in the kernel.
    pub kernel_samples: u64,
    /// Whether kernel samples were attributed to system calls (the tracepoints were open);
    /// when false, [`Self::syscalls`] is empty and every kernel sample is [`SuperFunction::Kernel`].
    pub syscalls_visible: bool,
    /// Per system call, ascending by number.
    pub syscalls: Vec<SyscallCode>,
    /// Kernel samples outside any system call (only counted when `syscalls_visible`).
    pub outside_syscall_samples: u64,
    /// Kernel samples whose system call is unknown although syscalls are visible (the
    /// tracepoint records around them were lost): counted as [`SuperFunction::Kernel`].
    #[serde(default)]
    pub unattributed_samples: u64,
}

impl CodeHeatmap {
    /// Empty; `syscalls_visible` says whether kernel samples will carry a syscall number.
    pub fn new(syscalls_visible: bool) -> Self {
        Self {
            user: PageHeatmap::new(),
            kernel: PageHeatmap::new(),
            user_samples: 0,
            kernel_samples: 0,
            syscalls_visible,
            syscalls: Vec::new(),
            outside_syscall_samples: 0,
            unattributed_samples: 0,
        }
    }

    /// Add one kernel sample on `page` whose system call is unknown (see
    /// [`Self::unattributed_samples`]).
    pub fn add_unattributed(&mut self, page: u64) {
        self.kernel_samples += 1;
        self.kernel.insert_page(page);
        if self.syscalls_visible {
            self.unattributed_samples += 1;
        }
    }

    /// Add one sample on code page `page` (a physical page number, or a stand-in that is the
    /// same wherever the physical page is: see `counters::sampling`); `syscall` is the call in
    /// progress (ignored for user samples and when syscalls are not visible).
    pub fn add(&mut self, kernel: bool, page: u64, syscall: Option<u32>) {
        if !kernel {
            self.user_samples += 1;
            self.user.insert_page(page);
            return;
        }
        self.kernel_samples += 1;
        self.kernel.insert_page(page);
        if !self.syscalls_visible {
            return;
        }
        match syscall {
            None => self.outside_syscall_samples += 1,
            Some(nr) => {
                let i = match self.syscalls.binary_search_by_key(&nr, |s| s.nr) {
                    Ok(i) => i,
                    Err(i) => {
                        self.syscalls.insert(
                            i,
                            SyscallCode {
                                nr,
                                samples: 0,
                                kernel: PageHeatmap::new(),
                            },
                        );
                        i
                    }
                };
                self.syscalls[i].samples += 1;
                self.syscalls[i].kernel.insert_page(page);
            }
        }
    }

    /// Add `other`'s samples and pages (a task from its threads). Visibility is kept only if
    /// both saw the syscalls.
    pub fn merge(&mut self, other: &CodeHeatmap) {
        self.user.union_with(&other.user);
        self.kernel.union_with(&other.kernel);
        self.user_samples += other.user_samples;
        self.kernel_samples += other.kernel_samples;
        self.outside_syscall_samples += other.outside_syscall_samples;
        self.unattributed_samples += other.unattributed_samples;
        self.syscalls_visible &= other.syscalls_visible;
        if !self.syscalls_visible {
            self.syscalls.clear();
            self.outside_syscall_samples = 0;
            self.unattributed_samples = 0;
            return;
        }
        for s in &other.syscalls {
            match self.syscalls.binary_search_by_key(&s.nr, |x| x.nr) {
                Ok(i) => {
                    self.syscalls[i].samples += s.samples;
                    self.syscalls[i].kernel.union_with(&s.kernel);
                }
                Err(i) => self.syscalls.insert(i, s.clone()),
            }
        }
    }

    /// All samples.
    pub fn samples(&self) -> u64 {
        self.user_samples + self.kernel_samples
    }

    /// User and kernel pages together (what SchedTask's overlap compares).
    pub fn combined(&self) -> PageHeatmap {
        let mut m = self.user;
        m.union_with(&self.kernel);
        m
    }

    /// Samples per SuperFunction, most first (ties in [`SuperFunction`] order); kinds with
    /// no sample are left out.
    pub fn breakdown(&self) -> Vec<(SuperFunction, u64)> {
        let mut v = vec![(SuperFunction::User, self.user_samples)];
        if self.syscalls_visible {
            v.extend(
                self.syscalls
                    .iter()
                    .map(|s| (SuperFunction::Syscall(s.nr), s.samples)),
            );
            v.push((SuperFunction::Interrupt, self.outside_syscall_samples));
            v.push((SuperFunction::Kernel, self.unattributed_samples));
        } else {
            v.push((SuperFunction::Kernel, self.kernel_samples));
        }
        v.retain(|e| e.1 > 0);
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The kind with the most samples (`None` without samples).
    pub fn dominant(&self) -> Option<SuperFunction> {
        self.breakdown().first().map(|e| e.0)
    }

    /// The dominant kind and its share of the samples, e.g. `syscall:read 62%` (`-` without
    /// samples).
    pub fn dominant_label(&self) -> String {
        match self.breakdown().first() {
            Some((k, n)) => format!("{k} {:.0}%", 100.0 * *n as f64 / self.samples() as f64),
            None => "-".to_string(),
        }
    }
}

/// One thread's code within a task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCode {
    /// The thread id.
    pub tid: u64,
    /// Its samples over the interval.
    pub code: CodeHeatmap,
}

/// A task's sampled code over an interval: the union of its threads, and each thread's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCode {
    /// The task as a whole.
    pub total: CodeHeatmap,
    /// Per thread with samples, ascending by thread id.
    pub threads: Vec<ThreadCode>,
    /// Sampling period, ns of a thread's CPU time per sample.
    pub period_ns: u64,
    /// Each listed thread's affinity at the end of the interval, by thread id, where the
    /// source reads it (a live host does, for thread-level placement to tell a change from
    /// a no-op); empty otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub thread_affinity: BTreeMap<u64, CpuSet>,
}

impl TaskCode {
    /// The task from its threads' maps (sorted by tid here).
    pub fn from_threads(
        mut threads: Vec<ThreadCode>,
        syscalls_visible: bool,
        period_ns: u64,
    ) -> Self {
        threads.sort_by_key(|t| t.tid);
        let mut total = CodeHeatmap::new(syscalls_visible);
        for t in &threads {
            total.merge(&t.code);
        }
        Self {
            total,
            threads,
            period_ns,
            thread_affinity: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_and_unknown_numbers_print_as_numbers() {
        assert_eq!(SuperFunction::User.to_string(), "user");
        assert_eq!(SuperFunction::Kernel.to_string(), "kernel");
        assert_eq!(SuperFunction::Interrupt.to_string(), "irq/fault");
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(SuperFunction::Syscall(1).to_string(), "syscall:write");
            assert_eq!(SuperFunction::Syscall(257).to_string(), "syscall:openat");
            assert_eq!(syscall_name(62), Some("kill"));
            assert_eq!(syscall_name(63), None);
        }
        assert_eq!(SuperFunction::Syscall(9999).to_string(), "syscall:9999");
    }

    #[test]
    fn a_thread_doing_only_syscalls_gets_kernel_pages_and_a_syscall_type() {
        let mut c = CodeHeatmap::new(true);
        // Kernel pages 0xffffffff81000 and ..81001 (bits 131, 132), in read (0) and write (1).
        for _ in 0..3 {
            c.add(true, 0x000f_ffff_fff8_1000, Some(0));
        }
        c.add(true, 0x000f_ffff_fff8_1001, Some(1));
        c.add(true, 0x000f_ffff_fff8_1001, None);
        assert!(c.user.is_empty());
        assert_eq!(c.kernel.popcount(), 2);
        assert_eq!((c.user_samples, c.kernel_samples), (0, 5));
        assert_eq!(c.syscalls.len(), 2);
        assert_eq!((c.syscalls[0].nr, c.syscalls[0].samples), (0, 3));
        assert_eq!(c.syscalls[0].kernel.popcount(), 1);
        assert_eq!(c.outside_syscall_samples, 1);
        assert_eq!(c.dominant(), Some(SuperFunction::Syscall(0)));
        assert_eq!(
            c.breakdown(),
            vec![
                (SuperFunction::Syscall(0), 3),
                (SuperFunction::Syscall(1), 1),
                (SuperFunction::Interrupt, 1)
            ]
        );
        assert_eq!(c.dominant_label().split(' ').nth(1), Some("60%"));
    }

    #[test]
    fn without_tracepoints_kernel_samples_are_just_kernel() {
        let mut c = CodeHeatmap::new(false);
        c.add(true, 0x000f_ffff_fff8_1000, Some(0));
        c.add(true, 0x000f_ffff_fff8_1000, None);
        c.add(false, 0x400, None);
        assert!(c.syscalls.is_empty());
        assert_eq!(c.outside_syscall_samples, 0);
        assert_eq!(
            c.breakdown(),
            vec![(SuperFunction::Kernel, 2), (SuperFunction::User, 1)]
        );
        assert_eq!(CodeHeatmap::new(false).dominant(), None);
        assert_eq!(CodeHeatmap::new(false).dominant_label(), "-");
    }

    #[test]
    fn samples_whose_records_were_lost_count_as_plain_kernel() {
        let mut c = CodeHeatmap::new(true);
        c.add(true, 0x000f_ffff_fff8_1000, Some(0));
        c.add_unattributed(0x000f_ffff_fff8_1001);
        c.add_unattributed(0x000f_ffff_fff8_1001);
        assert_eq!((c.kernel_samples, c.unattributed_samples), (3, 2));
        assert_eq!(c.kernel.popcount(), 2);
        assert_eq!(c.syscalls[0].samples, 1);
        assert_eq!(c.dominant(), Some(SuperFunction::Kernel));
        // Not visible: nothing to tell apart, plain kernel anyway.
        let mut d = CodeHeatmap::new(false);
        d.add_unattributed(1);
        assert_eq!((d.kernel_samples, d.unattributed_samples), (1, 0));
        assert_eq!(d.dominant(), Some(SuperFunction::Kernel));
    }

    #[test]
    fn a_task_is_the_union_of_its_threads() {
        let mut a = CodeHeatmap::new(true);
        a.add(false, 0x400, None);
        a.add(true, 0x000f_ffff_fff8_1000, Some(0));
        let mut b = CodeHeatmap::new(true);
        b.add(true, 0x000f_ffff_fff8_1000, Some(0));
        b.add(true, 0x000f_ffff_fff8_1002, Some(4));
        let t = TaskCode::from_threads(
            vec![
                ThreadCode { tid: 9, code: b },
                ThreadCode { tid: 3, code: a },
            ],
            true,
            1_000_000,
        );
        assert_eq!(t.threads[0].tid, 3);
        assert_eq!((t.total.user_samples, t.total.kernel_samples), (1, 3));
        assert_eq!(t.total.kernel.popcount(), 2);
        assert_eq!(
            t.total
                .syscalls
                .iter()
                .map(|s| (s.nr, s.samples))
                .collect::<Vec<_>>(),
            vec![(0, 2), (4, 1)]
        );
        assert_eq!(t.total.combined().popcount(), 3);
        // One thread without visibility makes the whole task's syscalls unknown.
        let mut c = CodeHeatmap::new(false);
        c.add(true, 0x000f_ffff_fff8_1000, None);
        let t = TaskCode::from_threads(
            vec![ThreadCode { tid: 1, code: c }, t.threads[0].clone()],
            true,
            1,
        );
        assert!(!t.total.syscalls_visible && t.total.syscalls.is_empty());
        assert_eq!(t.total.dominant(), Some(SuperFunction::Kernel));
    }
}
