//! Thread affinity through `sched_getaffinity` / `sched_setaffinity`, and the checks that keep
//! a task off offline CPUs and never with an empty set.

use counterpoint_core::cpuset::{CpuId, CpuSet};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet as NixCpuSet};
use nix::unistd::Pid;

/// Why an affinity could not be read or set.
#[derive(Debug, thiserror::Error)]
pub enum AffinityError {
    /// The thread does not exist (any more).
    #[error("thread {tid} has exited")]
    Gone {
        /// The thread.
        tid: u32,
    },
    /// Changing it needs a privilege we lack.
    #[error("not permitted to change the affinity of thread {tid} (needs CAP_SYS_NICE or the same user)")]
    Permission {
        /// The thread.
        tid: u32,
    },
    /// The set has no online CPU.
    #[error("refusing to give thread {tid} an empty CPU set ({requested} has no online CPU; online: {online})")]
    Empty {
        /// The thread.
        tid: u32,
        /// The set asked for.
        requested: String,
        /// The online CPUs.
        online: String,
    },
    /// The CPU number does not fit a `cpu_set_t`.
    #[error("CPU {cpu} is beyond what sched_setaffinity can address here")]
    TooLarge {
        /// The CPU.
        cpu: CpuId,
    },
    /// Any other failure of the system call.
    #[error("sched_*affinity on thread {tid}: {source}")]
    Os {
        /// The thread.
        tid: u32,
        /// The OS error.
        source: nix::Error,
    },
}

fn classify(tid: u32, e: nix::Error) -> AffinityError {
    match e {
        nix::Error::ESRCH => AffinityError::Gone { tid },
        nix::Error::EPERM => AffinityError::Permission { tid },
        other => AffinityError::Os { tid, source: other },
    }
}

/// Current affinity of a thread.
pub fn get(tid: u32) -> Result<CpuSet, AffinityError> {
    let set = sched_getaffinity(Pid::from_raw(tid as i32)).map_err(|e| classify(tid, e))?;
    let max = NixCpuSet::count();
    Ok((0..max as CpuId)
        .filter(|&c| set.is_set(c as usize).unwrap_or(false))
        .collect())
}

/// Set a thread's affinity to `cpus ∩ online`; an empty result is refused before any call.
/// Returns the set actually applied.
pub fn set(tid: u32, cpus: &CpuSet, online: &CpuSet) -> Result<CpuSet, AffinityError> {
    let effective = cpus.intersection(online);
    if effective.is_empty() {
        return Err(AffinityError::Empty {
            tid,
            requested: cpus.to_list(),
            online: online.to_list(),
        });
    }
    let mut ns = NixCpuSet::new();
    for c in effective.iter() {
        ns.set(c as usize)
            .map_err(|_| AffinityError::TooLarge { cpu: c })?;
    }
    sched_setaffinity(Pid::from_raw(tid as i32), &ns).map_err(|e| classify(tid, e))?;
    Ok(effective)
}

/// Whether we may change `tid`'s affinity: sets it to exactly what it is now (a no-op for the
/// task), so a permission problem shows before anything changes.
pub fn probe_permission(tid: u32) -> Result<(), AffinityError> {
    let cur = sched_getaffinity(Pid::from_raw(tid as i32)).map_err(|e| classify(tid, e))?;
    sched_setaffinity(Pid::from_raw(tid as i32), &cur).map_err(|e| classify(tid, e))
}

/// Online CPUs from sysfs (`/sys/devices/system/cpu/online`), falling back to our own affinity.
pub fn online_cpus() -> CpuSet {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| CpuSet::parse_list(s.trim()).ok())
        .filter(|s| !s.is_empty())
        .or_else(|| get(std::process::id()).ok())
        .unwrap_or_else(|| CpuSet::single(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_empty_set_without_calling_the_kernel() {
        let online = CpuSet::parse_list("0-1").expect("list");
        let offline_only = CpuSet::parse_list("7").expect("list");
        // tid 0 would mean "the caller": the refusal must come first.
        let err = set(0, &offline_only, &online).expect_err("empty");
        assert!(matches!(err, AffinityError::Empty { .. }), "{err}");
    }

    #[test]
    fn reads_own_affinity() {
        let me = std::process::id();
        let s = get(me).expect("own affinity");
        assert!(!s.is_empty());
        assert!(s.is_subset(&online_cpus()) || online_cpus().is_subset(&s));
    }
}
