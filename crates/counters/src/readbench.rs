//! Cost of reading a counter: our layer's read against a raw `read(2)` on the same fd, the
//! `perf-event2` crate's own read, a group of three in one read, and whether a user-space read
//! (rdpmc through the mmap page) exists on this machine. Used by `counterpoint bench read` and
//! the criterion bench; it measures, it never asserts a time.

use crate::count::{read_fd, read_group_fd};
use crate::spec::{parse_event_list, TYPE_SOFTWARE};
use crate::PmuTree;
use counterpoint_core::sample::CounterValue;
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, Group, ReadFormat};
use serde::Serialize;
use std::hint::black_box;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// Counters on this thread for the read benchmark.
pub struct ReadFixture {
    /// `task-clock` alone.
    pub single: Counter,
    /// The group's leader (`task-clock`).
    pub group: Group,
    /// The group's members (`cpu-clock`, `page-faults`).
    pub members: Vec<Counter>,
    /// Counting user mode only: kernel-mode counting was refused to this user.
    pub user_only: bool,
}

/// Open task-clock alone, and a group {task-clock, cpu-clock, page-faults}, on this thread;
/// user-only (`:u`, `ReadFixture::user_only`) where the kernel refuses kernel-mode counting to
/// this user, as `perf` retries (until session 30 `bench read` failed there: "Permission
/// denied").
pub fn open_fixture() -> io::Result<ReadFixture> {
    match open_fixture_with(false) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => open_fixture_with(true),
        r => r,
    }
}

fn open_fixture_with(user_only: bool) -> io::Result<ReadFixture> {
    let tree = PmuTree::default();
    let spec = parse_event_list("task-clock", &tree)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut spec = spec.groups[0].members[0].clone();
    debug_assert_eq!(spec.type_, TYPE_SOFTWARE);
    spec.exclude_kernel |= user_only;
    spec.exclude_hv |= user_only;
    let mut single = crate::count::builder_for(&spec).build()?;
    single.enable()?;
    // perf-event2's builder counts user mode only by default: the group opens for any user,
    // as it always did (only the single counter takes the spec's kernel-mode counting).
    let mut group = Builder::new(Software::TASK_CLOCK)
        .read_format(
            ReadFormat::GROUP | ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING,
        )
        .build_group()?;
    let mut members = Vec::new();
    for ev in [Software::CPU_CLOCK, Software::PAGE_FAULTS] {
        members.push(group.add(&Builder::new(ev))?);
    }
    group.enable()?;
    Ok(ReadFixture {
        single,
        group,
        members,
        user_only,
    })
}

/// Our layer's single read.
#[inline(never)]
pub fn ours(c: &Counter) -> io::Result<CounterValue> {
    read_fd(c.as_raw_fd())
}

/// A bare `read(2)` of the same 24 bytes on the same fd.
#[inline(never)]
pub fn raw(c: &Counter) -> isize {
    let mut buf = [0u64; 3];
    // SAFETY: buf is 24 writable bytes.
    unsafe { libc::read(c.as_raw_fd(), buf.as_mut_ptr().cast(), 24) }
}

/// The group of three in one read.
#[inline(never)]
pub fn group3(g: &Group) -> io::Result<usize> {
    let mut out = [CounterValue::default(); 3];
    read_group_fd(g.as_counter().as_raw_fd(), &mut out)
}

/// What the machine offers for reading counters without a system call.
#[derive(Clone, Debug, Serialize)]
pub struct UserSpacePath {
    /// Whether `rdpmc` from the mmap page works here.
    pub available: bool,
    /// Why (or why not), in words.
    pub explanation: String,
    /// `cap_user_rdpmc` from task-clock's mmap page (always 0 for software events).
    pub software_cap_user_rdpmc: Option<bool>,
    /// Whether a hardware counter (cycles) could be opened at all.
    pub hardware_counter_opens: bool,
}

/// Probe for rdpmc: open `cycles` (its mmap page would carry `cap_user_rdpmc`) and look at
/// task-clock's mmap page.
pub fn probe_user_space() -> UserSpacePath {
    // perf-event2's builder counts user mode only by default, so this opens under
    // perf_event_paranoid 2; a refusal (paranoid 3 and up, an LSM, seccomp) is not the
    // absence of a PMU, and is said so (since session 30).
    let hw = Builder::new(Hardware::CPU_CYCLES).build();
    let refused = matches!(&hw, Err(e) if e.kind() == io::ErrorKind::PermissionDenied);
    let (hardware_counter_opens, hw_cap) = match hw {
        Ok(c) => (true, mmap_cap_user_rdpmc(&c)),
        Err(_) => (false, None),
    };
    let sw_cap = Builder::new(Software::TASK_CLOCK)
        .build()
        .ok()
        .and_then(|c| mmap_cap_user_rdpmc(&c));
    let available = hw_cap == Some(true);
    let explanation = if refused {
        "unknown: this user may not open a hardware counter at all (perf_event_paranoid); run \
         as root to see whether rdpmc is possible"
            .to_string()
    } else if !hardware_counter_opens {
        "none here: no hardware PMU on this machine (cycles cannot be opened), so there is no \
         counter rdpmc could read; software events are read with read(2) only"
            .to_string()
    } else if available {
        "cap_user_rdpmc = 1 on the cycles mmap page: rdpmc is possible (not benchmarked here)"
            .to_string()
    } else {
        "none here: the hardware counter's mmap page has cap_user_rdpmc = 0".to_string()
    };
    UserSpacePath {
        available,
        explanation,
        software_cap_user_rdpmc: sw_cap,
        hardware_counter_opens,
    }
}

/// Map the counter's first page and read `cap_user_rdpmc` (bit 2 of `capabilities`).
fn mmap_cap_user_rdpmc(c: &Counter) -> Option<bool> {
    crate::page::ControlPage::map(c.as_raw_fd()).map(|p| p.capabilities() & (1 << 2) != 0)
}

/// Median ns per operation of each path.
#[derive(Clone, Debug, Serialize)]
pub struct ReadBench {
    /// Timed rounds.
    pub rounds: usize,
    /// Reads per round and path.
    pub iterations_per_round: usize,
    /// This crate's read, ns.
    pub ours_ns: f64,
    /// A bare `read(2)` of the same fd, ns.
    pub raw_read_ns: f64,
    /// `ours_ns / raw_read_ns` per round, median.
    pub ours_over_raw: f64,
    /// perf-event2's `Counter::read_full`, ns.
    pub perf_event2_read_full_ns: f64,
    /// A group of three in one read, ns.
    pub group3_ns: f64,
    /// The user-space read path.
    pub user_space: UserSpacePath,
    /// The counters count user mode only (`task-clock:u`): kernel-mode counting was refused to
    /// this user.
    pub user_only: bool,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn time_ns(iters: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// Interleave the paths round by round so load from other processes hits them alike.
pub fn measure(rounds: usize, iters: usize) -> io::Result<ReadBench> {
    let mut fx = open_fixture()?;
    let (mut o, mut r, mut p, mut g, mut ratio) = (vec![], vec![], vec![], vec![], vec![]);
    // Warm up.
    for _ in 0..1000 {
        black_box(ours(&fx.single)?);
        black_box(raw(&fx.single));
    }
    for round in 0..rounds {
        let time_ours = || {
            time_ns(iters, || {
                black_box(ours(black_box(&fx.single)).ok());
            })
        };
        let time_raw = || {
            time_ns(iters, || {
                black_box(raw(black_box(&fx.single)));
            })
        };
        // Alternate which path goes first so neither always gets the warmer cache.
        let (a, b) = if round % 2 == 0 {
            let a = time_ours();
            (a, time_raw())
        } else {
            let b = time_raw();
            (time_ours(), b)
        };
        o.push(a);
        r.push(b);
        ratio.push(a / b);
        p.push(time_ns(iters, || {
            black_box(fx.single.read_full().ok());
        }));
        g.push(time_ns(iters, || {
            black_box(group3(black_box(&fx.group)).ok());
        }));
    }
    black_box(&mut fx.members);
    Ok(ReadBench {
        rounds,
        iterations_per_round: iters,
        ours_ns: median(&mut o),
        raw_read_ns: median(&mut r),
        ours_over_raw: median(&mut ratio),
        perf_event2_read_full_ns: median(&mut p),
        group3_ns: median(&mut g),
        user_space: probe_user_space(),
        user_only: fx.user_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_reads_agree() {
        let fx = open_fixture().unwrap();
        let v = ours(&fx.single).unwrap();
        assert!(v.time_enabled_ns > 0);
        assert_eq!(raw(&fx.single), 24);
        assert_eq!(group3(&fx.group).unwrap(), 3);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
