//! How the live host counts a process's threads, on real processes (`tests/data/churn.py`):
//! threads that start and end between two reads are counted in full, and a process the target
//! forks is not counted as the target's. Every check compares what the host counted with what
//! the program measured of the same work (its threads' CPU clocks, its own process CPU clock,
//! its children's rusage): never a duration or a speed, so the machine's load does not matter.

use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_host::{Host, TargetSpec};
use std::time::Duration;

include!("common/churn.rs");

/// The helper program.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/churn.py");

/// How far above a process's own CPU clock (`CLOCK_PROCESS_CPUTIME_ID`) its task-clock may be
/// before it is taken for double counting. The two measure the same work differently:
/// task-clock is perf's clock while the task is on a CPU, which on a VM with paravirtual steal
/// accounting includes the time the hypervisor stole from the vCPU meanwhile (and interrupt
/// time), while the process clock is the scheduler's `sum_exec_runtime`, from which the
/// kernel subtracts both. The bound was 1.02, which a review (session 29) measured as about
/// 2.3 % of headroom on this loaded 2-vCPU VM: a few percent of stolen time would fail the
/// tests with nothing wrong. What the bound must catch is counting twice, a later thread's or a
/// forked child's work counted again, which puts the count near twice the process's own time
/// (1.9x and more in these tests). 1.5x leaves room for steal and still catches that.
const OVER_OWN_CPU: f64 = 1.5;

/// The host's task-clock for `pid` over the interval `advance` reads.
fn counted(host: &mut Host, pid: u32) -> u64 {
    let obs = host.advance(1_000_000).expect("advance");
    let t = obs
        .tasks
        .iter()
        .find(|t| t.id.0 == u64::from(pid))
        .expect("the helper is watched");
    let v = t.sample.values[event::TASK_CLOCK];
    assert_eq!(v.counted_fraction(), 1.0, "{:?}", t.sample);
    v.raw
}

/// A host on `pid` that counts through inherited groups, or `None` (skipped, saying why) where
/// this kernel or user cannot.
fn inheriting_host(pid: u32, test: &str) -> Option<Host> {
    let host = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
    let src = host.counter_sources();
    if let Some(why) = src.inherit_off.as_ref().or(src.per_thread_reason.as_ref()) {
        eprintln!("SKIPPED {test}: threads are counted one by one here: {why}");
        return None;
    }
    assert_eq!(src.inherited_processes, 1, "{src:?}");
    Some(host)
}

/// Twenty threads, each started, run and ended between two reads of the host (the first
/// read is before the first starts, the second after the last has been joined): none of
/// them is ever listed, and the host counts all of their CPU time. Before inherited groups
/// it counted none of it (a process of such threads showed 0.1 % CPU in `top` against 19 %
/// in /proc).
#[test]
fn threads_born_and_ended_between_two_reads_are_counted() {
    let Some((mut churn, cpu0)) = Churn::start(SCRIPT) else {
        eprintln!("SKIPPED threads_born_and_ended_between_two_reads_are_counted: no python3");
        return;
    };
    let pid = churn.pid();
    let Some(mut host) =
        inheriting_host(pid, "threads_born_and_ended_between_two_reads_are_counted")
    else {
        return;
    };
    let done = churn.ask("churn 20 10", "done");
    let threads_cpu = done[0];
    let n = counted(&mut host, pid);
    let cpu2 = churn.ask("cpu", "cpu")[0];
    // Everything the threads did is in, and nothing twice: the process's own CPU clock
    // (ended threads included) over a span that holds both reads bounds it from above.
    assert!(
        n as f64 >= 0.95 * threads_cpu as f64,
        "counted {n} ns of the threads' {threads_cpu} ns"
    );
    let process_cpu = cpu2 - cpu0;
    assert!(
        n as f64 <= OVER_OWN_CPU * process_cpu as f64,
        "counted {n} ns, more than the process's own {process_cpu} ns allows"
    );
}

/// A process the target forks, from its main thread and from a thread started after the
/// first read, is not counted as the target's: inheritance follows threads only. Each child
/// runs at least 50 ms of CPU; the target's count stays within its own CPU clock.
#[test]
fn a_forked_process_is_not_counted_in_its_parent() {
    let Some((mut churn, cpu0)) = Churn::start(SCRIPT) else {
        eprintln!("SKIPPED a_forked_process_is_not_counted_in_its_parent: no python3");
        return;
    };
    let pid = churn.pid();
    let Some(mut host) = inheriting_host(pid, "a_forked_process_is_not_counted_in_its_parent")
    else {
        return;
    };
    let forked = churn.ask("fork 50", "forked");
    let (children_cpu, _) = (forked[0], forked[1]);
    let n = counted(&mut host, pid);
    let own = churn.ask("cpu", "cpu")[0] - cpu0;
    assert!(
        children_cpu >= 100_000_000,
        "children ran {children_cpu} ns"
    );
    assert!(
        n as f64 <= OVER_OWN_CPU * own as f64,
        "counted {n} ns for a process whose own CPU time is {own} ns (its children's: {children_cpu} ns)"
    );
}

/// A thread that was read at one interval and ends before the next interval lists the
/// process's threads: what it did after that read is counted (it was lost when its counters
/// were closed without a last read). Thread by thread, the last read of its ended group gives
/// it; in a family its group, kept, has it. Compared with the thread's own CPU clock.
#[test]
fn a_thread_that_ends_between_two_reads_keeps_its_last_stretch() {
    for per_thread in [true, false] {
        let Some((mut churn, _)) = Churn::start(SCRIPT) else {
            eprintln!(
                "SKIPPED a_thread_that_ends_between_two_reads_keeps_its_last_stretch: no python3"
            );
            return;
        };
        let pid = churn.pid();
        let tid = churn.ask("hold 40", "held")[0];
        let mut host = Host::new(TargetSpec::Pids(vec![pid]), None).expect("host");
        if per_thread {
            host.count_thread_by_thread();
        } else if let Some(why) = host.counter_sources().inherit_off {
            eprintln!("SKIPPED a_thread_that_ends_between_two_reads_keeps_its_last_stretch (inherited): {why}");
            return;
        }
        let src = host.counter_sources();
        if src.perf_threads == 0 {
            eprintln!("SKIPPED a_thread_that_ends_between_two_reads_keeps_its_last_stretch: no perf_event groups ({src:?})");
            return;
        }
        // The main thread and the held one, each with a group, read at interval k.
        assert_eq!(src.perf_threads, 2, "{src:?}");
        assert_eq!(src.inherited_processes, usize::from(!per_thread), "{src:?}");
        counted(&mut host, pid);
        // It runs and ends; once it has left the process, interval k+1.
        let thread_cpu = churn.ask("release", "released")[0];
        let task = format!("/proc/{pid}/task/{tid}");
        let gone = (0..12_000).any(|_| {
            if !std::path::Path::new(&task).exists() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
            false
        });
        assert!(gone, "thread {tid} never left");
        let n = counted(&mut host, pid);
        assert!(
            n as f64 >= 0.95 * thread_cpu as f64,
            "per thread {per_thread}: counted {n} ns of the ended thread's {thread_cpu} ns"
        );
        // Thread by thread its group is closed now; a family keeps it while the process lives.
        let groups = host.counter_sources().perf_threads;
        assert_eq!(
            groups,
            if per_thread { 1 } else { 2 },
            "per thread {per_thread}"
        );
    }
}

/// The idle gate (taskstats) with a family: once the target is found idle and its read is
/// skipped, threads that start and end before the next look leave its thread list as it was
/// and its groups' counts moved without any listed thread running; the scheduler's sums for
/// the process (which include ended threads) moved, so it is read, and their work counted.
#[test]
fn the_idle_gate_does_not_hide_threads_born_and_ended_between_looks() {
    let Some((mut churn, _)) = Churn::start(SCRIPT) else {
        eprintln!(
            "SKIPPED the_idle_gate_does_not_hide_threads_born_and_ended_between_looks: no python3"
        );
        return;
    };
    let pid = churn.pid();
    let test = "the_idle_gate_does_not_hide_threads_born_and_ended_between_looks";
    let Some(mut host) = inheriting_host(pid, test) else {
        return;
    };
    let src = host.counter_sources();
    if let Some(why) = src.idle_gate_off {
        eprintln!("SKIPPED {test}: idle gate off: {why}");
        return;
    }
    // Without taskstats' delay-accounting fields the gate's signature sums live threads only,
    // so a family's process is never gated (docs/host.md, "The gates and families"): there is
    // nothing to test, and the wait below would only run out.
    if !src.idle_gate_precise {
        eprintln!(
            "SKIPPED {test}: this kernel's taskstats carry no precise run fields (delay accounting off): a family's process is never gated"
        );
        return;
    }
    // The helper waits on stdin: looks until one is skipped (bounded only against a hang).
    let start = std::time::Instant::now();
    while host.reads_skipped() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the idle helper was never gated"
        );
        counted(&mut host, pid);
    }
    let skipped = host.reads_skipped();
    let threads_cpu = churn.ask("churn 5 10", "done")[0];
    let n = counted(&mut host, pid);
    assert_eq!(host.reads_skipped(), skipped, "gated although threads ran");
    assert!(
        n as f64 >= 0.95 * threads_cpu as f64,
        "counted {n} ns of the threads' {threads_cpu} ns"
    );
}
