//! A counter read that fails inside a region (issue 18 #10): the region's delta is *lost*,
//! counted in `lost`, instead of the all-zero reading that made the delta wrap to near
//! `u64::MAX`. The failure is real: the thread's perf descriptor is replaced (dup2) by
//! /dev/null between the region's two reads, so the second `read(2)` returns 0 bytes.

use counterpoint_selfmon::{init, report, Region};
use std::os::fd::AsRawFd;

fn perf_fd() -> Option<i32> {
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .filter_map(Result::ok)
        .find(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
        })
        .and_then(|e| e.file_name().to_str()?.parse().ok())
}

#[test]
fn a_failed_read_is_lost_not_a_huge_count() {
    init("task-clock").expect("init");
    {
        let _warm = Region::begin("lost-warm"); // opens this thread's counter
    }
    let fd = perf_fd().expect("this thread's perf descriptor");
    {
        let _r = Region::begin("lost-broken");
        std::hint::black_box((0..10_000u64).sum::<u64>());
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        // SAFETY: replacing our own descriptor; selfmon keeps using the number.
        assert!(unsafe { libc::dup2(null.as_raw_fd(), fd) } >= 0);
    }
    let r = report();
    let broken = r
        .regions
        .iter()
        .find(|x| x.name == "lost-broken")
        .expect("region");
    assert_eq!(broken.entries, 1);
    assert_eq!(broken.lost["task-clock"], 1, "{broken:?}");
    assert_eq!(
        broken.counts["task-clock"], 0,
        "not a wrapped delta: {broken:?}"
    );
    let warm = r
        .regions
        .iter()
        .find(|x| x.name == "lost-warm")
        .expect("region");
    assert_eq!(warm.lost["task-clock"], 0);
    assert!(r
        .to_table()
        .contains("lost: task-clock in 1 of 1 entries of region lost-broken"));
}
