//! Regions from Rust: nesting, threads merged (including exited ones), handles.

use counterpoint_selfmon::{init, region, report, Region};

#[test]
fn nested_regions_over_threads_merge_exactly() {
    init("task-clock").expect("init");
    let threads: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..100 {
                    let _outer = Region::begin("rs-outer");
                    for _ in 0..2 {
                        let _inner = Region::begin("rs-inner");
                        std::hint::black_box((0..2000u64).sum::<u64>());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let r = report();
    let get = |n: &str| r.regions.iter().find(|x| x.name == n).expect(n).clone();
    let (outer, inner) = (get("rs-outer"), get("rs-inner"));
    assert_eq!(outer.entries, 300);
    assert_eq!(inner.entries, 600);
    assert_eq!(outer.threads, 3);
    assert!(
        outer.total_ns >= inner.total_ns,
        "outer is inclusive of inner"
    );
    assert!(outer.max_ns as f64 >= outer.mean_ns);
    assert!(outer.counts["task-clock"] >= inner.counts["task-clock"]);
    let table = r.to_table();
    assert!(
        table.contains("rs-outer") && table.contains("task-clock"),
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
    assert!(json["regions"].is_array());
}

#[test]
fn ending_an_outer_region_ends_the_inner_ones_and_bad_handles_are_refused() {
    std::thread::spawn(|| {
        let outer = region::begin("rs-h-outer").expect("begin");
        let _inner = region::begin("rs-h-inner").expect("begin");
        region::end(outer).expect("end outer");
        assert!(region::end(outer).is_err(), "already ended");
        assert!(region::end(99).is_err());
    })
    .join()
    .expect("thread");
    let r = report();
    let n = |name: &str| r.regions.iter().find(|x| x.name == name).map(|x| x.entries);
    assert_eq!(n("rs-h-outer"), Some(1));
    assert_eq!(n("rs-h-inner"), Some(1));
}

#[test]
fn a_second_init_with_other_events_is_refused() {
    init("task-clock").expect("same list is fine");
    let e = init("page-faults").expect_err("refused").to_string();
    // Which came first here, this init or another test's region, depends on the tests'
    // order in this process; each message is checked on its own in init.rs.
    assert!(
        e.contains("already running with events 'task-clock'")
            || e.contains("already initialised with events 'task-clock'"),
        "{e}"
    );
}
