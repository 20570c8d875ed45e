//! The host's code heatmaps on a real process: attached to the observation only once asked
//! for, and a process that spends its time in the kernel (`dd` from /dev/zero to /dev/null)
//! shows kernel samples on kernel pages. The test waits for samples (up to a generous deadline)
//! and asserts no speed.

use counterpoint_core::machine::Machine;
use counterpoint_core::superfunction::SuperFunction;
use counterpoint_host::code::CodeSamplingConfig;
use counterpoint_host::{Host, TargetSpec};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn heatmaps_only_when_asked_and_dd_runs_in_the_kernel() {
    let dd = Kill(
        Command::new("dd")
            .args(["if=/dev/zero", "of=/dev/null", "bs=1M"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn dd"),
    );
    let pid = dd.0.id();
    let mut host = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
    let obs = host.advance(50_000_000).expect("advance");
    let t = obs
        .tasks
        .iter()
        .find(|t| t.id.0 == u64::from(pid))
        .expect("dd");
    assert!(t.code.is_none(), "no policy asked: nothing is sampled");

    let status = host.enable_code_heatmaps(CodeSamplingConfig {
        period_ns: 200_000,
        syscalls: false,
    });
    if status.kernel_refused.is_some() || host.code_sampling_failures().0 > 0 {
        eprintln!("skipped: {status:?} {:?}", host.code_sampling_failures());
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut total = counterpoint_core::superfunction::CodeHeatmap::new(false);
    while total.samples() < 100 && Instant::now() < deadline {
        let obs = host.advance(200_000_000).expect("advance");
        let t = obs
            .tasks
            .iter()
            .find(|t| t.id.0 == u64::from(pid))
            .expect("dd");
        let code = t
            .code
            .as_ref()
            .expect("asked for: every task has a TaskCode");
        assert_eq!(code.period_ns, 200_000);
        // dd is one thread: the task's map is that thread's.
        assert!(code.threads.len() <= 1, "{:?}", code.threads);
        if let Some(th) = code.threads.first() {
            assert_eq!(th.tid, u64::from(pid));
            assert_eq!(th.code, code.total);
        }
        total.merge(&code.total);
    }
    assert!(
        total.samples() >= 100,
        "{} samples in 120 s",
        total.samples()
    );
    // 1 MiB cleared and discarded per pair of calls: kernel time dominates.
    assert!(
        total.kernel_samples > total.user_samples,
        "kernel {} user {}",
        total.kernel_samples,
        total.user_samples
    );
    assert!(!total.kernel.is_empty());
    assert_eq!(total.dominant(), Some(SuperFunction::Kernel));
}
