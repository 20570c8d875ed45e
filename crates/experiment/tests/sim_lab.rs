//! The simulator adapter: jobs become the scenarios they describe, run-once tasks get a
//! completion time, light runs report event totals, and bad names are refused by name.

use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_experiment::lab::{Job, JobTask, Lab, RunSpec};
use counterpoint_experiment::sim_lab::SimLab;
use counterpoint_policy::{Linux, LinuxPick, Spread};

fn custom(machine: &str, tasks: Vec<JobTask>, duration_ns: u64) -> Job {
    Job::Custom {
        machine: machine.into(),
        tasks,
        duration_ns,
        tick_ns: Some(10_000_000),
    }
}

#[test]
fn a_run_once_program_completes_and_its_instructions_are_counted() {
    let lab = SimLab::new().unwrap();
    let instructions = lab.catalog().program("gzip").unwrap().instructions() as f64;
    let job = custom(
        "masa-2x2ht",
        vec![JobTask::program("g", "gzip", Some(CpuSet::single(0))).once()],
        100_000_000_000_000,
    );
    let spec = RunSpec {
        seed: 1,
        epoch_ns: 1_000_000_000,
    };
    let out = lab.run(&job, spec, &mut Linux, &mut LinuxPick).unwrap();
    let t = &out.tasks[0];
    let done = t.completion_ns.expect("gzip finishes");
    // The run ends when the only task is done; completion is at epoch resolution.
    assert!(done <= out.elapsed_ns + 1_000_000_000 && done + 1_000_000_000 >= out.elapsed_ns);
    let counted = t.events[event::INSTRUCTIONS];
    assert!(
        (counted - instructions).abs() / instructions < 1e-6,
        "{counted} vs {instructions}"
    );
    // Alone on the machine: NP 1 within the solo run's resolution.
    assert!((t.np - 1.0).abs() < 0.02, "np {}", t.np);
}

#[test]
fn light_runs_apply_the_policy_and_report_totals() {
    let lab = SimLab::new().unwrap();
    let job = custom(
        "xeon-4s-32t",
        vec![
            JobTask::program("a", "mcf", None),
            JobTask::program("b", "swim", None),
        ],
        2_000_000_000,
    );
    let spec = RunSpec {
        seed: 3,
        epoch_ns: 100_000_000,
    };
    let out = lab.run_light(&job, spec, &mut Spread::default()).unwrap();
    assert_eq!(out.tasks.len(), 2);
    for t in &out.tasks {
        assert!(t.np.is_nan(), "light runs do not compute NP");
        assert!(t.events[event::TASK_CLOCK] > 1.5e9, "{t:?}");
        assert!(t.events[event::CACHE_MISSES] > 0.0);
        assert!(t.completion_ns.is_none(), "repeating tasks never complete");
    }
    assert_eq!(out.elapsed_ns, 2_000_000_000);
}

#[test]
fn unknown_names_are_refused_with_the_catalog() {
    let lab = SimLab::new().unwrap();
    let spec = RunSpec {
        seed: 1,
        epoch_ns: 100_000_000,
    };
    let bad_prog = custom("masa-2x2ht", vec![JobTask::program("x", "nosuch", None)], 1);
    let e = lab
        .run(&bad_prog, spec, &mut Linux, &mut LinuxPick)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"nosuch\"") && e.contains("gzip"), "{e}");
    let bad_machine = custom("cray-1", vec![JobTask::program("x", "gzip", None)], 1);
    let e = lab.topology(&bad_machine).unwrap_err().to_string();
    assert!(e.contains("\"cray-1\"") && e.contains("masa-2x2ht"), "{e}");
    let e = lab
        .topology(&Job::Scenario("no-such-scenario".into()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no-such-scenario.toml"), "{e}");
    // Mixes never draw the probe aliases (INT, FP, L2C, MEM duplicate SPEC programs).
    let progs = lab.mix_programs();
    assert!(progs.contains(&"mcf".to_string()));
    assert!(!progs.iter().any(|p| p == "INT" || p == "L2C"));
}
