//! Counters on the calling thread against the real kernel. Without a hardware PMU every read
//! takes the `read(2)` fallback; software events still count.

use counterpoint_selfmon::{parse_events, SelfCounter, SelfmonError};

fn open(name: &str) -> SelfCounter {
    let spec = parse_events(name).expect("parse").remove(0);
    SelfCounter::open(&spec).expect("open")
}

#[test]
fn task_clock_advances_across_a_busy_loop() {
    let c = open("task-clock");
    let a = c.read().expect("read");
    let mut x = 0u64;
    for i in 0..5_000_000u64 {
        x = x.wrapping_mul(31).wrapping_add(i);
    }
    std::hint::black_box(x);
    let b = c.read().expect("read");
    // Any CPU time at all: how much the loop took is a speed, not asserted.
    assert!(b.value > a.value, "{a:?} -> {b:?}");
    assert!(b.time_enabled_ns >= a.time_enabled_ns);
    assert_eq!(
        b.time_running_ns, b.time_enabled_ns,
        "software events never multiplex"
    );
    // The same value through both paths (the syscall path is what read() used here).
    let s = c.read_syscall().expect("syscall");
    assert!(s.value >= b.value);
}

#[test]
fn page_faults_count_touched_pages() {
    let c = open("page-faults");
    let pages = 512;
    let before = c.read().expect("read").value;
    let mut v = vec![0u8; pages * 4096];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    std::hint::black_box(&v);
    let after = c.read().expect("read").value;
    assert!(
        after - before >= pages as u64 / 2,
        "{} faults for {pages} fresh pages",
        after - before
    );
}

#[test]
fn hardware_events_are_refused_plainly_without_a_pmu() {
    let spec = parse_events("cycles").expect("parse").remove(0);
    match SelfCounter::open(&spec) {
        Ok(c) => eprintln!(
            "cycles opened here (a PMU exists): user space {}",
            c.user_space_capable()
        ),
        Err(SelfmonError::NotSupported { event, reason }) => {
            assert_eq!(event, "cycles");
            assert!(reason.contains("no hardware PMU"), "{reason}");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn no_user_space_path_for_software_events() {
    assert!(!open("task-clock").user_space_capable());
}

#[test]
fn unknown_events_name_close_matches() {
    let e = parse_events("task-clok").expect_err("error").to_string();
    assert!(e.contains("task-clock"), "{e}");
}
