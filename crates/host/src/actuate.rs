//! The two other actuators of the live host (docs/design.md, "The live host"): a cgroup v2 group's `cpuset.cpus`, and core-scheduling
//! cookies (`prctl(PR_SCHED_CORE)`) that keep untrusted or interfering tasks off each other's
//! SMT siblings. Neither is driven by the agent yet (only per-thread affinity is, journaled);
//! both return the previous state so a caller can restore it.

use counterpoint_core::cpuset::CpuSet;
use std::fs;
use std::path::Path;

/// Actuator failures.
#[derive(Debug, thiserror::Error)]
pub enum ActuateError {
    /// The group's `cpuset.cpus` could not be read or written.
    #[error("{path}: {reason}")]
    Cgroup {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    #[error("refusing an empty cpuset for {path} ({requested} has no online CPU)")]
    /// The requested set has no online CPU.
    Empty {
        /// The file.
        path: String,
        /// The set asked for.
        requested: String,
    },
    #[error("core scheduling refused by the kernel for pid {pid}: {reason}")]
    /// `prctl(PR_SCHED_CORE)` was refused.
    CoreSched {
        /// The process.
        pid: u32,
        /// The kernel's reason.
        reason: String,
    },
}

/// Write `cpus ∩ online` to `DIR/cpuset.cpus` (cgroup v2); returns the previous value.
pub fn set_cgroup_cpus(dir: &Path, cpus: &CpuSet, online: &CpuSet) -> Result<String, ActuateError> {
    let file = dir.join("cpuset.cpus");
    let path = file.display().to_string();
    let effective = cpus.intersection(online);
    if effective.is_empty() {
        return Err(ActuateError::Empty {
            path,
            requested: cpus.to_list(),
        });
    }
    let previous = fs::read_to_string(&file)
        .map_err(|e| ActuateError::Cgroup {
            path: path.clone(),
            reason: format!("cannot read (is the cpuset controller enabled for this group?): {e}"),
        })?
        .trim()
        .to_string();
    fs::write(&file, format!("{}\n", effective.to_list())).map_err(|e| ActuateError::Cgroup {
        path,
        reason: format!("cannot write: {e}"),
    })?;
    Ok(previous)
}

const PR_SCHED_CORE: libc::c_int = 62;
const PR_SCHED_CORE_CREATE: libc::c_ulong = 1;
const PIDTYPE_TGID: libc::c_ulong = 1;

/// Give process `pid` (all its threads) a new core-scheduling cookie of its own, so only its
/// own threads share a core with it. The kernel refuses without CONFIG_SCHED_CORE or on a
/// machine without SMT: the error says which.
pub fn create_core_cookie(pid: u32) -> Result<(), ActuateError> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            PR_SCHED_CORE,
            PR_SCHED_CORE_CREATE,
            pid as libc::c_ulong,
            PIDTYPE_TGID,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    let reason = match e.raw_os_error() {
        Some(libc::EINVAL) => {
            "EINVAL: kernel without core scheduling (CONFIG_SCHED_CORE)".to_string()
        }
        Some(libc::ENODEV) => "ENODEV: no SMT on this machine, core scheduling is moot".to_string(),
        Some(libc::EPERM) => "EPERM: needs ptrace access to the target".to_string(),
        Some(libc::ESRCH) => "ESRCH: no such process".to_string(),
        _ => e.to_string(),
    };
    Err(ActuateError::CoreSched { pid, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_write_keeps_online_cpus_and_returns_previous() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("cpuset.cpus"), "0-3\n").expect("w");
        let online = CpuSet::parse_list("0-1").expect("list");
        let prev = set_cgroup_cpus(dir.path(), &CpuSet::parse_list("1-5").expect("l"), &online)
            .expect("write");
        assert_eq!(prev, "0-3");
        let now = fs::read_to_string(dir.path().join("cpuset.cpus")).expect("r");
        assert_eq!(now.trim(), "1");
        let err = set_cgroup_cpus(dir.path(), &CpuSet::single(7), &online).expect_err("empty");
        assert!(matches!(err, ActuateError::Empty { .. }));
        let err = set_cgroup_cpus(Path::new("/nonexistent/cg"), &CpuSet::single(0), &online)
            .expect_err("missing");
        assert!(err.to_string().contains("cpuset controller"), "{err}");
    }

    #[test]
    fn core_cookie_succeeds_or_says_why() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let r = create_core_cookie(child.id());
        let _ = child.kill();
        let _ = child.wait();
        if let Err(e) = r {
            let s = e.to_string();
            assert!(s.contains("core scheduling refused"), "{s}");
            assert!(s.contains(':'), "{s}");
        }
        let err = create_core_cookie(999_999_999).expect_err("no such pid");
        assert!(err.to_string().contains("999999999"), "{err}");
    }
}
