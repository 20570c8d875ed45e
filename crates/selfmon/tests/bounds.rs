//! What a region's report holds: its counts bounded by its time, its name kept on its row.

use counterpoint_selfmon::{init, report, Region};

/// The clock is taken before the counters at a region's start and after them at its end, so
/// a thread's task-clock in a region never exceeds the region's time (it did by about 800 ns
/// per entry when the reads were outside the time: `outer{ inner{} }` showed 881 ns of
/// task-clock in 100 ns). A physical bound, not a speed: the slack of 100 ns per entry is for
/// two clocks' granularity, far below the fault.
#[test]
fn a_region_counts_no_more_task_clock_than_it_lasts() {
    assert!(init("task-clock").is_ok());
    for _ in 0..2000 {
        let _outer = Region::begin("bound-outer");
        let _inner = Region::begin("bound-inner");
    }
    let r = report();
    for name in ["bound-outer", "bound-inner"] {
        let g = r.regions.iter().find(|x| x.name == name).expect(name);
        let clock = g.counts["task-clock"];
        assert!(
            clock <= g.total_ns + 100 * g.entries,
            "{name}: task-clock {clock} ns in {} ns over {} entries",
            g.total_ns,
            g.entries
        );
    }
}

/// A name with a newline or an escape stays on its row of the table (escaped there; the JSON
/// keeps it as it is).
#[test]
fn a_region_name_with_a_newline_keeps_its_table_row() {
    drop(Region::begin("two\nlines\u{1b}[31m"));
    let r = report();
    let table = r.to_table();
    assert!(table.contains("two\\nlines\\u{1b}[31m"), "{table}");
    assert!(!table.lines().any(|l| l.starts_with("lines")), "{table}");
    assert!(r.to_json().contains("two\\nlines\\u001b[31m"));
}
