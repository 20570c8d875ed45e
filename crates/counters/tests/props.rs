//! Invariants: format encoding round-trips and rejects values too wide; the event-list parser is
//! total (any input gives a value or an error, never a panic).

use counterpoint_counters::pmu::Format;
use counterpoint_counters::{parse_event_list, PmuTree};
use proptest::prelude::*;
use std::path::PathBuf;

/// Extract a value back out of an encoded word (inverse of `Format::encode`).
fn decode(f: &Format, word: u64) -> u64 {
    let mut out = 0u64;
    let mut shift = 0u32;
    for &(lo, hi) in &f.ranges {
        let n = hi - lo + 1;
        let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        out |= ((word >> lo) & mask) << shift;
        shift += n;
    }
    out
}

proptest! {
    #[test]
    fn two_range_format_round_trips(a in 0u32..64, b in 0u32..64, c in 0u32..64, d in 0u32..64, v in any::<u64>()) {
        let mut bits = [a, b, c, d];
        bits.sort_unstable();
        prop_assume!(bits[1] < bits[2]);
        let text = format!("config:{}-{},{}-{}", bits[0], bits[1], bits[2], bits[3]);
        let f = Format::parse(&text).unwrap();
        let width = f.width_bits();
        let fits = width >= 64 || v >> width == 0;
        match f.encode(v) {
            Some(word) => {
                prop_assert!(fits);
                prop_assert_eq!(decode(&f, word), v);
                prop_assert_eq!(word & !f.mask(), 0);
            }
            None => prop_assert!(!fits),
        }
    }

    #[test]
    fn parser_is_total(s in "[{}/,:=a-zA-Z0-9_ -]{0,40}") {
        let tree = PmuTree::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pmu/intel"));
        let _ = parse_event_list(&s, &tree);
    }

    #[test]
    fn generic_lists_round_trip_count(names in proptest::collection::vec(prop::sample::select(vec!["cycles", "task-clock", "cs", "LLC-load-misses", "r1c2", "page-faults:u"]), 1..8)) {
        let list = names.join(",");
        let parsed = parse_event_list(&list, &PmuTree::new("/nonexistent")).unwrap();
        prop_assert_eq!(parsed.len(), names.len());
        let got: Vec<&str> = parsed.events().map(|e| e.name.as_str()).collect();
        prop_assert_eq!(got, names);
    }
}

fn fixture(name: &str) -> PmuTree {
    PmuTree::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/pmu")
            .join(name),
    )
}

proptest! {
    #[test]
    fn parser_is_total_on_any_text(s in "\\PC{0,60}") {
        for t in ["intel", "amd", "hybrid", "vm"] {
            let _ = parse_event_list(&s, &fixture(t));
        }
    }

    /// Abstract events with modifiers round-trip their names on every fixture: resolved to a
    /// vendor event where the tree names a known CPU, unavailable with a reason where not.
    #[test]
    fn abstract_lists_round_trip(
        names in proptest::collection::vec(
            prop::sample::select(vec!["mem-transactions", "fp-ops", "llc-misses", "fp-ops:u", "mem-transactions:k", "task-clock"]),
            1..6),
        tree in prop::sample::select(vec!["intel", "amd", "hybrid", "vm"]),
    ) {
        let list = names.join(",");
        let parsed = parse_event_list(&list, &fixture(tree)).unwrap();
        let got: Vec<&str> = parsed.events().map(|e| e.name.as_str()).collect();
        prop_assert_eq!(&got, &names);
        for e in parsed.events() {
            let base = e.name.split(':').next().unwrap_or("");
            prop_assert_eq!(e.canonical.as_str(), base);
            if base != "task-clock" {
                // Only the PMU-less tree lacks vendor events.
                prop_assert_eq!(e.unavailable.is_some(), tree == "vm", "{:?}", e);
            }
        }
    }
}

#[test]
fn regression_corpus() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/event-list-corpus.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let tree = fixture("intel");
    let mut n = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (want, list) = line.split_once('\t').unwrap_or((line, ""));
        let got = parse_event_list(list, &tree);
        assert_eq!(got.is_ok(), want == "ok", "{list:?}: {got:?}");
        n += 1;
    }
    assert!(n >= 20);
}
