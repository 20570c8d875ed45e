//! The paper's eight OS-intensive benchmarks as SuperFunction profiles, and the kernel code
//! modules their handlers run. Every number here is an estimate (docs/sim-catalog.md, the
//! SchedTask section, gives the reasoning) except the two OS shares the paper states: FileSrv
//! executes 90 % of its instructions in the OS, ISCP and DSS 20 % (seed 004, "Instruction
//! breakup"). The application segment length of each benchmark is derived from its OS share, so
//! those shares hold by construction (calibrated, not predicted).

use super::SimError;

/// Kernel code and data modules: (name, code pages, shared read-mostly data lines, lock lines).
/// Sizes are estimates of Linux 2.6.32 subsystems' hot paths (a few to a few dozen 4 KiB pages).
pub const MODULES: &[(&str, u32, u32, u32)] = &[
    ("entry", 4, 8, 0),
    ("sched", 12, 64, 2),
    ("vfs", 24, 128, 2),
    ("ext3", 24, 128, 2),
    ("filemap", 16, 64, 1),
    ("block", 16, 64, 2),
    ("scsi", 12, 32, 1),
    ("socket", 12, 64, 1),
    ("tcp", 32, 128, 2),
    ("ip", 12, 32, 1),
    ("netdev", 10, 32, 1),
    ("irq", 4, 8, 1),
    ("softirq", 4, 8, 1),
    ("mm", 16, 64, 2),
    ("namei", 16, 128, 1),
    ("jbd", 16, 64, 2),
    ("poll", 6, 32, 1),
];

/// What kind of SuperFunction a type is (the paper's decomposition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SfKind {
    /// The application's own code (one type per application).
    App,
    /// A system-call handler (one type per system call).
    Syscall,
    /// An interrupt handler (one type per IRQ line).
    Irq,
    /// A bottom half (softirq), one type per handler.
    BottomHalf,
}

/// Which device a blocking system call waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// Disk: `irq:disk`, then `bh:block`.
    Disk,
    /// Network: `irq:net`, then `bh:net_rx`.
    Net,
}

/// One kernel handler: its modules (with the share of each module's pages it runs), its mean
/// length, and its data behaviour.
#[derive(Clone, Copy, Debug)]
pub struct HandlerDef {
    /// Type name (`read`, `irq:disk`, ...).
    pub name: &'static str,
    /// Kind.
    pub kind: SfKind,
    /// (module, fraction of its code pages used).
    pub modules: &'static [(&'static str, f64)],
    /// Mean instructions per invocation (exponentially distributed).
    pub instructions: f64,
    /// Lines of the calling thread's user buffer it touches (copy to/from user).
    pub copy_lines: u32,
    /// Whether it writes the user buffer (`read`) rather than reading it (`write`).
    pub writes_buffer: bool,
    /// Lines of data never seen before (page-cache pages, packet payloads) per invocation.
    pub stream_lines: u32,
    /// The device it may block on.
    pub device: Option<Device>,
}

// A table-row constructor: one argument per column keeps HANDLERS one line per handler.
#[allow(clippy::too_many_arguments)]
const fn h(
    name: &'static str,
    kind: SfKind,
    modules: &'static [(&'static str, f64)],
    instructions: f64,
    copy_lines: u32,
    writes_buffer: bool,
    stream_lines: u32,
    device: Option<Device>,
) -> HandlerDef {
    HandlerDef {
        name,
        kind,
        modules,
        instructions,
        copy_lines,
        writes_buffer,
        stream_lines,
        device,
    }
}

use Device::{Disk, Net};
use SfKind::{BottomHalf, Irq, Syscall};

/// Every kernel handler the benchmarks use (estimates; see docs/sim-catalog.md).
pub const HANDLERS: &[HandlerDef] = &[
    h(
        "read",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.5),
            ("ext3", 0.3),
            ("filemap", 0.6),
        ],
        3000.0,
        32,
        true,
        32,
        Some(Disk),
    ),
    h(
        "pread",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.4),
            ("ext3", 0.3),
            ("filemap", 0.6),
        ],
        3000.0,
        32,
        true,
        32,
        Some(Disk),
    ),
    h(
        "write",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.5),
            ("ext3", 0.5),
            ("filemap", 0.5),
            ("jbd", 0.3),
        ],
        4000.0,
        32,
        false,
        32,
        None,
    ),
    h(
        "pwrite",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.4),
            ("ext3", 0.5),
            ("filemap", 0.5),
            ("jbd", 0.3),
        ],
        4000.0,
        32,
        false,
        32,
        None,
    ),
    h(
        "fsync",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.2),
            ("ext3", 0.5),
            ("jbd", 0.8),
            ("block", 0.6),
        ],
        12000.0,
        0,
        false,
        0,
        Some(Disk),
    ),
    h(
        "open",
        Syscall,
        &[("entry", 1.0), ("vfs", 0.4), ("namei", 0.8), ("ext3", 0.2)],
        4000.0,
        2,
        false,
        0,
        None,
    ),
    h(
        "close",
        Syscall,
        &[("entry", 1.0), ("vfs", 0.2)],
        900.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "stat",
        Syscall,
        &[("entry", 1.0), ("vfs", 0.2), ("namei", 0.7), ("ext3", 0.1)],
        2000.0,
        2,
        true,
        0,
        None,
    ),
    h(
        "getdents",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.3),
            ("ext3", 0.6),
            ("filemap", 0.2),
        ],
        6000.0,
        32,
        true,
        16,
        Some(Disk),
    ),
    h(
        "unlink",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.3),
            ("namei", 0.5),
            ("ext3", 0.5),
            ("jbd", 0.3),
        ],
        6000.0,
        1,
        false,
        0,
        None,
    ),
    h(
        "lseek",
        Syscall,
        &[("entry", 1.0), ("vfs", 0.1)],
        400.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "recv",
        Syscall,
        &[("entry", 1.0), ("socket", 0.7), ("tcp", 0.5), ("ip", 0.2)],
        3500.0,
        32,
        true,
        32,
        Some(Net),
    ),
    h(
        "send",
        Syscall,
        &[
            ("entry", 1.0),
            ("socket", 0.7),
            ("tcp", 0.6),
            ("ip", 0.6),
            ("netdev", 0.5),
        ],
        5000.0,
        32,
        false,
        0,
        None,
    ),
    h(
        "sendfile",
        Syscall,
        &[
            ("entry", 1.0),
            ("vfs", 0.3),
            ("filemap", 0.5),
            ("socket", 0.5),
            ("tcp", 0.6),
            ("ip", 0.5),
            ("netdev", 0.5),
        ],
        7000.0,
        0,
        false,
        64,
        None,
    ),
    h(
        "accept",
        Syscall,
        &[("entry", 1.0), ("socket", 0.6), ("tcp", 0.3), ("vfs", 0.2)],
        5000.0,
        1,
        true,
        0,
        Some(Net),
    ),
    h(
        "poll",
        Syscall,
        &[
            ("entry", 1.0),
            ("poll", 1.0),
            ("socket", 0.3),
            ("sched", 0.3),
        ],
        2500.0,
        4,
        true,
        0,
        Some(Net),
    ),
    h(
        "futex",
        Syscall,
        &[("entry", 1.0), ("sched", 0.6)],
        1000.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "mmap",
        Syscall,
        &[("entry", 1.0), ("mm", 0.6)],
        3000.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "irq:disk",
        Irq,
        &[("irq", 1.0), ("scsi", 0.8), ("block", 0.3)],
        2500.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "irq:net",
        Irq,
        &[("irq", 1.0), ("netdev", 0.8)],
        2000.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "bh:block",
        BottomHalf,
        &[
            ("softirq", 1.0),
            ("block", 0.7),
            ("scsi", 0.3),
            ("filemap", 0.2),
        ],
        4000.0,
        0,
        false,
        0,
        None,
    ),
    h(
        "bh:net_rx",
        BottomHalf,
        &[
            ("softirq", 1.0),
            ("netdev", 0.4),
            ("ip", 0.7),
            ("tcp", 0.6),
            ("socket", 0.3),
        ],
        6000.0,
        0,
        false,
        16,
        None,
    ),
];

/// The application side of a benchmark.
#[derive(Clone, Copy, Debug)]
pub struct AppDef {
    /// Process name (the App SuperFunction type is `app:NAME`).
    pub name: &'static str,
    /// Code pages of its hot path.
    pub code_pages: u32,
    /// Lines of data shared by its threads (read-mostly: tables, caches).
    pub shared_lines: u32,
    /// Private lines per thread (stack, heap working set).
    pub private_lines: u32,
    /// Never-seen data lines per 1000 instructions (scans, crypto input).
    pub stream_per_kinstr: f64,
}

/// Where a profile figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Stated in the seed (used as an input: calibrated by construction).
    Seed,
    /// Our estimate.
    Est,
}

/// One benchmark: its application, its system-call mix and the probability that each call
/// blocks, and its OS share of instructions.
#[derive(Clone, Copy, Debug)]
pub struct Benchmark {
    /// The paper's name.
    pub name: &'static str,
    /// What it runs.
    pub description: &'static str,
    /// Threads (all runnable unless blocked).
    pub threads: u32,
    /// Share of instructions executed in the OS (system calls, interrupts, bottom halves).
    pub os_share: f64,
    /// Whether `os_share` is the paper's or ours.
    pub os_share_source: Source,
    /// The application.
    pub app: AppDef,
    /// (system call, relative frequency, probability it blocks on its device).
    pub syscalls: &'static [(&'static str, f64, f64)],
    /// Mean device latency when a call blocks, µs.
    pub block_us: f64,
}

/// The eight benchmarks of seed 004 (profiles are estimates; see docs/sim-catalog.md).
pub const BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        name: "Apache",
        description: "Apache web server serving static files",
        threads: 64,
        os_share: 0.65,
        os_share_source: Source::Est,
        app: AppDef {
            name: "apache",
            code_pages: 120,
            shared_lines: 512,
            private_lines: 192,
            stream_per_kinstr: 0.5,
        },
        syscalls: &[
            ("accept", 1.0, 0.3),
            ("recv", 1.0, 0.3),
            ("stat", 1.0, 0.0),
            ("open", 1.0, 0.0),
            ("sendfile", 1.0, 0.0),
            ("send", 1.0, 0.0),
            ("close", 2.0, 0.0),
            ("poll", 1.0, 0.3),
        ],
        block_us: 40.0,
    },
    Benchmark {
        name: "ISCP",
        description: "scp receiving a file from a remote machine (sshd decrypts, writes the file)",
        threads: 64,
        os_share: 0.20,
        os_share_source: Source::Seed,
        app: AppDef {
            name: "sshd",
            code_pages: 48,
            shared_lines: 64,
            private_lines: 256,
            stream_per_kinstr: 2.0,
        },
        syscalls: &[("recv", 2.0, 0.4), ("write", 2.0, 0.0), ("poll", 1.0, 0.3)],
        block_us: 40.0,
    },
    Benchmark {
        name: "OSCP",
        description:
            "scp sending a local file to a remote machine (reads the file, encrypts, sends)",
        threads: 64,
        os_share: 0.35,
        os_share_source: Source::Est,
        app: AppDef {
            name: "ssh",
            code_pages: 48,
            shared_lines: 64,
            private_lines: 256,
            stream_per_kinstr: 2.0,
        },
        syscalls: &[("read", 2.0, 0.1), ("send", 2.0, 0.0), ("poll", 1.0, 0.2)],
        block_us: 100.0,
    },
    Benchmark {
        name: "DSS",
        description: "decision support, TPC-H query 2 on a database server",
        threads: 64,
        os_share: 0.20,
        os_share_source: Source::Seed,
        app: AppDef {
            name: "postgres",
            code_pages: 200,
            shared_lines: 2048,
            private_lines: 256,
            stream_per_kinstr: 3.0,
        },
        syscalls: &[
            ("read", 4.0, 0.05),
            ("lseek", 3.0, 0.0),
            ("mmap", 0.5, 0.0),
            ("futex", 1.0, 0.0),
            ("send", 0.5, 0.0),
        ],
        block_us: 100.0,
    },
    Benchmark {
        name: "OLTP",
        description: "sysbench OLTP on a database server",
        threads: 64,
        os_share: 0.50,
        os_share_source: Source::Est,
        app: AppDef {
            name: "mysqld",
            code_pages: 240,
            shared_lines: 2048,
            private_lines: 256,
            stream_per_kinstr: 1.0,
        },
        syscalls: &[
            ("recv", 1.0, 0.2),
            ("send", 1.0, 0.0),
            ("futex", 3.0, 0.0),
            ("pread", 2.0, 0.1),
            ("pwrite", 1.0, 0.0),
            ("fsync", 0.3, 0.9),
        ],
        block_us: 100.0,
    },
    Benchmark {
        name: "Find",
        description: "find walking a directory tree",
        threads: 64,
        os_share: 0.75,
        os_share_source: Source::Est,
        app: AppDef {
            name: "find",
            code_pages: 12,
            shared_lines: 32,
            private_lines: 128,
            stream_per_kinstr: 0.5,
        },
        syscalls: &[
            ("getdents", 1.0, 0.1),
            ("stat", 4.0, 0.0),
            ("open", 1.0, 0.0),
            ("close", 1.0, 0.0),
        ],
        block_us: 100.0,
    },
    Benchmark {
        name: "FileSrv",
        description: "sysbench fileio: random reads and writes to files",
        threads: 64,
        os_share: 0.90,
        os_share_source: Source::Seed,
        app: AppDef {
            name: "sysbench",
            code_pages: 8,
            shared_lines: 32,
            private_lines: 64,
            stream_per_kinstr: 0.2,
        },
        syscalls: &[
            ("pread", 3.0, 0.15),
            ("pwrite", 2.0, 0.0),
            ("lseek", 1.0, 0.0),
            ("fsync", 0.2, 0.9),
        ],
        block_us: 100.0,
    },
    Benchmark {
        name: "MailSrvIO",
        description: "filebench varmail: a mail server's file operations",
        threads: 64,
        os_share: 0.80,
        os_share_source: Source::Est,
        app: AppDef {
            name: "filebench",
            code_pages: 16,
            shared_lines: 64,
            private_lines: 128,
            stream_per_kinstr: 0.2,
        },
        syscalls: &[
            ("open", 2.0, 0.0),
            ("read", 2.0, 0.1),
            ("write", 1.5, 0.0),
            ("fsync", 0.5, 0.9),
            ("close", 2.0, 0.0),
            ("unlink", 0.5, 0.0),
            ("stat", 1.0, 0.0),
        ],
        block_us: 100.0,
    },
];

/// The benchmark called `name` (case-insensitive).
pub fn benchmark(name: &str) -> Result<&'static Benchmark, SimError> {
    BENCHMARKS
        .iter()
        .find(|b| b.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            SimError::Invalid(format!(
                "unknown SchedTask benchmark {name:?}; known: {}",
                BENCHMARKS
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The handler called `name`.
pub fn handler(name: &str) -> Result<&'static HandlerDef, SimError> {
    HANDLERS
        .iter()
        .find(|h| h.name == name)
        .ok_or_else(|| SimError::Invalid(format!("unknown kernel handler {name:?}")))
}

/// The module called `name`: (index, code pages, data lines, lock lines).
pub fn module(name: &str) -> Result<(usize, u32, u32, u32), SimError> {
    MODULES
        .iter()
        .enumerate()
        .find(|(_, m)| m.0 == name)
        .map(|(i, m)| (i, m.1, m.2, m.3))
        .ok_or_else(|| SimError::Invalid(format!("unknown kernel module {name:?}")))
}
