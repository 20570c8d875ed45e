//! `linux`: the baseline. The machine's own scheduler decides everything; the policy never acts
//! and, as a pick-next hook, takes the head of the run queue as the kernel would.

use counterpoint_core::action::Action;
use counterpoint_core::machine::{PickContext, PickNext, Policy};
use counterpoint_core::observation::Observation;
use counterpoint_core::topology::Topology;

/// Epoch-level baseline: no actions.
#[derive(Clone, Debug, Default)]
pub struct Linux;

impl Policy for Linux {
    fn name(&self) -> &str {
        "linux"
    }
    fn required_events(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn decide(&mut self, _topology: &Topology, _observation: &Observation) -> Vec<Action> {
        Vec::new()
    }
    fn reads_observations(&self) -> bool {
        false
    }
}

/// Kernel-level baseline: run-queue order.
#[derive(Clone, Debug, Default)]
pub struct LinuxPick;

impl PickNext for LinuxPick {
    fn name(&self) -> &str {
        "linux"
    }
    fn pick(&mut self, _ctx: &PickContext<'_>) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_core::machine::TaskStats;
    use counterpoint_core::task::TaskId;
    use counterpoint_core::testutils::{observation, task, topo};

    #[test]
    fn never_acts_and_takes_the_queue_head() {
        let t = topo(1, 2, 1);
        let all = t.online_cpus();
        let obs = observation(&t, vec![task(1, 0, &all, &[]), task(2, 0, &all, &[])]);
        assert!(Linux.decide(&t, &obs).is_empty());
        assert!(Linux.required_events().is_empty());
        // It never reads an observation, so a simulated machine need not build one.
        assert!(!Linux.reads_observations());
        let s = |id| TaskStats {
            task: TaskId(id),
            ipc: 1.0,
            bus_utilization: 0.1 * id as f64,
            llc_mpki: 0.0,
            fp_fraction: 0.0,
        };
        let ready = [s(3), s(1), s(2)];
        let ctx = PickContext {
            cpu: 0,
            now_ns: 0,
            topology: &t,
            ready: &ready,
            others: &[(1, Some(s(9)))],
            bus_peak_transactions_per_s: 1e8,
        };
        assert_eq!(LinuxPick.pick(&ctx), 0);
    }
}
