//! MASA's load calibration measured on the simulated machine: probes alone and coupled.

use super::*;

/// Measure the load-calibration table on the simulated machine (one seed).
pub fn calibrate(lab: &dyn Lab, seed: u64) -> Result<Calibration, LabError> {
    let topo: Topology = topology_of(lab, true)?;
    let tree = MachineTree::new(&topo);
    let pkg0 = tree
        .packages
        .first()
        .map(|p| p.cpus())
        .filter(|c| c.len() >= 2)
        .ok_or_else(|| LabError(format!("{MACHINE}: package 0 needs two logical CPUs")))?;
    let mut entries = Vec::new();
    for (metric, probe) in [(LoadMetric::FpUops, FP), (LoadMetric::L2Misses, L2C)] {
        let solo = Job::Custom {
            machine: machine(true),
            tasks: vec![JobTask::program("solo", probe, Some(CpuSet::single(pkg0[0]))).once()],
            duration_ns: RUN_LIMIT_NS,
            tick_ns: Some(LONG_TICK_NS),
        };
        let coupled = Job::Custom {
            machine: machine(true),
            tasks: vec![
                JobTask::program("a", probe, Some(CpuSet::single(pkg0[0]))).once(),
                JobTask::program("b", probe, Some(CpuSet::single(pkg0[1]))).once(),
            ],
            duration_ns: RUN_LIMIT_NS,
            tick_ns: Some(LONG_TICK_NS),
        };
        let s = run_baseline(lab, &solo, seed)?;
        let c = run_baseline(lab, &coupled, seed)?;
        let ev = metric.event();
        let time = |o: &Outcome| -> Result<(f64, f64, f64), LabError> {
            let times: Vec<f64> = o
                .tasks
                .iter()
                .filter_map(|t| seconds(t.completion_ns))
                .collect();
            if times.len() != o.tasks.len() || times.is_empty() {
                return Err(LabError(format!(
                    "calibration probe {probe} did not finish"
                )));
            }
            let events: f64 = o
                .tasks
                .iter()
                .map(|t| t.events.get(ev).copied().unwrap_or(0.0))
                .sum();
            let mean = times.iter().sum::<f64>() / times.len() as f64;
            let longest = times.iter().copied().fold(0.0, f64::max);
            Ok((mean, events, longest))
        };
        let (ts, es, ls) = time(&s)?;
        let (tc, ec, lc) = time(&c)?;
        entries.push(CalibrationEntry {
            metric,
            probe: probe.to_string(),
            solo_time_s: ts,
            coupled_time_s: tc,
            solo_events_per_s: es / ls,
            coupled_events_per_s: ec / lc,
        });
    }
    Ok(Calibration { entries })
}
