//! Counting on this machine: software events count, hardware events are reported unsupported.

use counterpoint_counters::count::{read_fd, spawn_stopped, ChildExit, Status};
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn child_counts_task_clock_and_reports_cycles_unsupported() {
    let tree = PmuTree::default();
    let list = parse_event_list("cycles,task-clock,page-faults", &tree).unwrap();
    let child = spawn_stopped(&args(&[
        "sh",
        "-c",
        "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; exit 3",
    ]))
    .unwrap();
    let set = CounterSet::open(&list, &Target::Child(child.pid()), &tree).unwrap();
    let running = child.start().unwrap();
    assert_eq!(running.wait().unwrap(), ChildExit::Code(3));
    let r = set.read_all().unwrap();
    if counterpoint_counters::count::has_hardware_pmu(&tree) {
        assert_eq!(r[0].status, Status::Counting);
    } else {
        assert_eq!(
            r[0].status,
            Status::NotSupported("no hardware PMU on this machine".into())
        );
        assert!(r[0].value.is_none());
    }
    let tc = r[1].value.unwrap();
    assert!(tc.raw > 100_000, "task-clock {} ns", tc.raw);
    assert_eq!(tc.time_enabled_ns, tc.time_running_ns);
    assert!(r[1].display_value().unwrap() > 0.1); // msec
    assert_eq!(r[1].counted_percent(), Some(100.0));
    assert!(r[2].value.unwrap().raw > 10);
}

#[test]
fn exec_failure_is_an_error() {
    let child = spawn_stopped(&args(&["/nonexistent/counterpoint-no-such-program"])).unwrap();
    let err = child.start().err().expect("exec must fail");
    assert!(err.to_string().contains("cannot run"), "{err}");
}

#[test]
fn killed_child_reports_signal() {
    let child = spawn_stopped(&args(&["sh", "-c", "kill -9 $$"])).unwrap();
    let running = child.start().unwrap();
    assert_eq!(running.wait().unwrap().shell_code(), 137);
}

#[test]
fn process_target_follows_children_created_later() {
    // The shell forks `dd` after the counters are attached (it waits for a line the test
    // writes once they are: a `sleep 0.3` let a stalled test attach after the fork); inherit
    // must count it.
    let mut sh = std::process::Command::new("sh")
        .args([
            "-c",
            "read _; dd if=/dev/zero of=/dev/null bs=64k count=20000 2>/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tree = PmuTree::default();
    let list = parse_event_list("task-clock", &tree).unwrap();
    let target = Target::process(sh.id() as i32).unwrap();
    let mut set = CounterSet::open(&list, &target, &tree).unwrap();
    set.enable().unwrap();
    release(&mut sh);
    sh.wait().unwrap();
    let r = set.read_all().unwrap();
    let ns = r[0].value.unwrap().raw;
    // dd copying 1.3 GB through /dev/null takes far more than 20 ms of CPU; sh alone ~1 ms.
    assert!(ns > 20_000_000, "task-clock {ns} ns");
}

#[test]
fn missing_pid_is_an_error() {
    // PIDs above pid_max never exist.
    let err = Target::process(i32::MAX).unwrap_err();
    assert!(err.to_string().contains("no such process"), "{err}");
}

#[test]
fn per_cpu_counts_and_raw_read_matches_layout() {
    let tree = PmuTree::default();
    let list = parse_event_list("cpu-clock", &tree).unwrap();
    let mut set = CounterSet::open(&list, &Target::Cpus(vec![0]), &tree).unwrap();
    set.enable().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let r = set.read_all().unwrap();
    let v = r[0].value.unwrap();
    // cpu-clock per CPU runs with wall time: at least most of the 30 ms.
    assert!(v.raw > 20_000_000, "cpu-clock {} ns", v.raw);
    let direct = read_fd(set.first_fd(0).unwrap()).unwrap();
    assert!(direct.raw >= v.raw);
}

#[test]
fn added_threads_are_counted() {
    let mut idle = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    // The loop starts once the thread is added (a line from the test): started at once, a
    // stalled test missed most of it, or found it gone.
    let mut busy = std::process::Command::new("sh")
        .args([
            "-c",
            "read _; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tree = PmuTree::default();
    let list = parse_event_list("task-clock", &tree).unwrap();
    let mut set = CounterSet::open(&list, &Target::Threads(vec![idle.id() as i32]), &tree).unwrap();
    set.enable().unwrap();
    let added = set
        .add_threads(&[busy.id() as i32, i32::MAX], &tree)
        .unwrap();
    assert_eq!(added, 1, "the missing tid is skipped");
    release(&mut busy);
    busy.wait().unwrap();
    let ns = set.read_all().unwrap()[0].value.unwrap().raw;
    idle.kill().ok();
    idle.wait().ok();
    // The shell loop runs for well over 20 ms of CPU; the sleeping process for ~0.
    assert!(ns > 20_000_000, "task-clock {ns} ns");
}

/// Lets a shell waiting in `read _` on its piped stdin go on.
fn release(sh: &mut std::process::Child) {
    use std::io::Write;
    let mut stdin = sh.stdin.take().expect("piped stdin");
    stdin.write_all(b"go\n").expect("write to the shell");
}
