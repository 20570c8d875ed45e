//! Projection to other machines (seed 000 §2.2: "on a faster CPU with the same memory,
//! memory-heavy Q3 gains less than Q6").
//!
//! Per class, a profile for the simulated machine is built from the class's measured features
//! and a **stated assumption**, because this VM has no PMU (no cycles, instructions or LLC
//! misses to read):
//! - instructions per request = task-clock × 2.8 GHz × an assumed IPC of 1.0 (`cpi_core` 0.8
//!   plus the memory stalls the model adds);
//! - LLC misses per kilo-instruction = an assumed floor of 1.0 plus 64 per page fault per
//!   kilo-instruction (a minor fault hands the backend a fresh 4 KiB page the kernel zeroes:
//!   64 cache lines written to memory), every LLC access a miss (`miss_curve` m = 1), `mlp` 2.
//!
//! So the projection rests on **task-clock and page faults** only; where a PMU exists the
//! class's measured CPI and LLC misses would replace both assumptions. Each class runs alone on
//! the base machine (catalog `zhang-smp`: 2.8 GHz, 110 ns memory, 2 GB/s sustained shared bus),
//! on a CPU 1.5× faster with the same memory, and with 2× the memory bandwidth; the speed-up is
//! the ratio of instructions retired per simulated second. For contrast the catalog's
//! PMU-calibrated TPC-H classes (`tpch` server: Q1, Q3, Q6, Q12) are projected the same way.
//! The simulator engine is used as is (scenario builder and `run`).

use crate::attrib::RequestRow;
use crate::RequestsError;
use counterpoint_sim::{
    run, Catalog, MissCurve, Phase, Profile, Program, Scenario, TaskSpec, Workload,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// Base machine of the projection.
pub const BASE_MACHINE: &str = "zhang-smp";
/// Faster-CPU variant: clock × this, memory unchanged.
pub const FASTER_CPU: f64 = 1.5;
/// More-bandwidth variant: peak bandwidth × this.
pub const MORE_BANDWIDTH: f64 = 2.0;
/// Assumed IPC when converting task-clock into instructions (no PMU).
pub const ASSUMED_IPC: f64 = 1.0;
/// Assumed LLC misses per kilo-instruction besides those implied by page faults.
pub const ASSUMED_MPKI_FLOOR: f64 = 1.0;
/// Cache lines per 4 KiB page a fault brings in.
pub const LINES_PER_FAULT: f64 = 64.0;

/// One class's projection.
#[derive(Clone, Debug, Serialize)]
pub struct ClassProjection {
    /// Class (template, or `catalog:Qn` for the calibrated profiles).
    pub class: String,
    /// Requests in the class.
    pub requests: usize,
    /// Mean task-clock per request (ms).
    pub cpu_ms: f64,
    /// Page faults per ms of task-clock.
    pub faults_per_cpu_ms: f64,
    /// The LLC MPKI given to the simulator (estimated: see the module's assumption).
    pub mpki_estimated: f64,
    /// Speed-up on the faster CPU, same memory.
    pub speedup_faster_cpu: f64,
    /// Speed-up with more memory bandwidth.
    pub speedup_more_bandwidth: f64,
    /// The features the profile rests on.
    pub rests_on: String,
}

fn profile_from_mpki(mpki: f64, cpi_core: f64) -> Profile {
    Profile {
        cpi_core,
        llc_apki: mpki,
        miss_curve: MissCurve::PowerLaw {
            m_ref: 1.0,
            c_ref_bytes: 1.0,
            alpha: 0.0,
            m_min: 1.0,
        },
        mlp: 2.0,
        fp_fraction: 0.02,
        code_pages: 0,
        // Projected under the first model: v2 needs a CPI breakdown these features lack.
        v2: None,
    }
}

/// Instructions per simulated second for `profile` alone on `machine_tweak(base)`.
fn ips(
    catalog: &Catalog,
    profile: &Profile,
    tweak: impl Fn(&mut Scenario),
) -> Result<f64, RequestsError> {
    let prog = Program {
        name: "class".into(),
        phases: vec![Phase {
            instructions: 1_000_000_000,
            profile: profile.clone(),
        }],
    };
    let mut sc = Scenario::builder(catalog, BASE_MACHINE)
        .map_err(RequestsError::Sim)?
        .name("requests-projection")
        .duration_ms(200)
        .tick_us(1000)
        .task_spec(TaskSpec {
            name: "class".into(),
            workload: Workload::Program(prog),
            affinity: None,
            repeat: true,
            start_ms: 0,
        })
        .build()
        .map_err(|e| RequestsError::Sim(e.to_string()))?;
    tweak(&mut sc);
    let r = run(&sc, 1, None, None, 100_000_000).map_err(|e| RequestsError::Sim(e.to_string()))?;
    if r.duration_ns == 0 {
        return Err(RequestsError::Sim("the projection ran for no time".into()));
    }
    Ok(r.throughput_instructions_per_s)
}

fn speedups(catalog: &Catalog, p: &Profile) -> Result<(f64, f64), RequestsError> {
    let base = ips(catalog, p, |_| {})?;
    let cpu = ips(catalog, p, |s| s.machine.freq_ghz *= FASTER_CPU)?;
    let bw = ips(catalog, p, |s| {
        s.machine.peak_bandwidth_gb_per_s *= MORE_BANDWIDTH
    })?;
    if base <= 0.0 {
        return Err(RequestsError::Sim(
            "no instructions retired on the base machine".into(),
        ));
    }
    Ok((cpu / base, bw / base))
}

/// Project every class of `rows` (by template), then the catalog's calibrated TPC-H classes.
pub fn project(rows: &[RequestRow]) -> Result<Vec<ClassProjection>, RequestsError> {
    let catalog = Catalog::builtin();
    let base = catalog
        .machine(BASE_MACHINE)
        .ok_or_else(|| RequestsError::Sim(format!("no machine {BASE_MACHINE} in the catalog")))?;
    let mut by_class: BTreeMap<&str, Vec<&RequestRow>> = BTreeMap::new();
    for r in rows {
        by_class.entry(r.class.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for (class, rs) in by_class {
        let n = rs.len() as f64;
        let cpu_ns: f64 = rs.iter().map(|r| r.get("task-clock")).sum::<f64>() / n;
        let faults: f64 = rs.iter().map(|r| r.get("page-faults")).sum::<f64>() / n;
        let instructions = cpu_ns * base.freq_ghz * ASSUMED_IPC;
        let mpki = ASSUMED_MPKI_FLOOR
            + if instructions > 0.0 {
                LINES_PER_FAULT * faults / (instructions / 1000.0)
            } else {
                0.0
            };
        let (c, b) = speedups(&catalog, &profile_from_mpki(mpki, 0.8))?;
        out.push(ClassProjection {
            class: class.to_string(),
            requests: rs.len(),
            cpu_ms: cpu_ns / 1e6,
            faults_per_cpu_ms: if cpu_ns > 0.0 {
                faults / (cpu_ns / 1e6)
            } else {
                0.0
            },
            mpki_estimated: mpki,
            speedup_faster_cpu: c,
            speedup_more_bandwidth: b,
            rests_on: "task-clock, page-faults + assumed IPC 1.0 and MPKI floor 1.0".into(),
        });
    }
    if let Some(server) = catalog.server("tpch") {
        for rc in server.classes {
            let (c, b) = speedups(&catalog, &rc.profile)?;
            let cap = base.llc_bytes as f64;
            out.push(ClassProjection {
                class: format!("catalog:{}", rc.name),
                requests: 0,
                cpu_ms: 0.0,
                faults_per_cpu_ms: 0.0,
                mpki_estimated: rc.profile.llc_apki * rc.profile.miss_curve.miss_ratio(cap),
                speedup_faster_cpu: c,
                speedup_more_bandwidth: b,
                rests_on: "the simulator's calibrated TPC-H profile (the kind a PMU would measure; not from this run)".into(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_bound_profile_gains_less_from_a_faster_cpu() {
        let catalog = Catalog::builtin();
        let (cpu_light, bw_light) = speedups(&catalog, &profile_from_mpki(0.5, 0.8)).unwrap();
        let (cpu_heavy, bw_heavy) = speedups(&catalog, &profile_from_mpki(30.0, 0.8)).unwrap();
        assert!(cpu_light > cpu_heavy, "{cpu_light} vs {cpu_heavy}");
        assert!(cpu_light <= FASTER_CPU + 1e-9 && cpu_heavy >= 1.0 - 1e-9);
        assert!(bw_heavy >= bw_light - 1e-9, "{bw_heavy} vs {bw_light}");
    }
}
