//! Invariants of the host crate's pure parts, over arbitrary input.

use counterpoint_core::cpuset::CpuSet;
use counterpoint_host::duration::{parse_duration_ns, parse_interval_ns, DurationError};
use counterpoint_host::journal::{self, JournalData, ParseError, ThreadEntry, JOURNAL_VERSION};
use counterpoint_host::TargetSpec;
use proptest::prelude::*;

fn cpuset() -> impl Strategy<Value = CpuSet> {
    proptest::collection::btree_set(0u32..64, 0..8).prop_map(|s| s.into_iter().collect())
}

proptest! {
    /// `--targets` parsing never panics and a `pid:` list keeps exactly its positive numbers.
    #[test]
    fn targets_parse_total(s in ".{0,40}") {
        let _ = TargetSpec::parse(&s);
    }

    #[test]
    fn pid_lists_round_trip(pids in proptest::collection::vec(1u32..4_000_000, 1..10)) {
        let spec = format!("pid:{}", pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(","));
        match TargetSpec::parse(&spec) {
            Ok(TargetSpec::Pids(got)) => {
                let mut want = pids.clone();
                want.sort_unstable();
                want.dedup();
                prop_assert_eq!(got, want);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// What the journal writes, it reads back identically (the crash-recovery path).
    #[test]
    fn journal_data_round_trips(entries in proptest::collection::btree_map(
        1u32..100_000,
        (1u32..100_000, "[a-z]{0,15}", any::<u64>(), cpuset(), proptest::option::of(cpuset()), proptest::option::of(cpuset())),
        0..6,
    )) {
        let data = JournalData {
            version: JOURNAL_VERSION,
            threads: entries
                .into_iter()
                .map(|(tid, (pid, comm, st, original, applied, pending))| {
                    let user_set = if st % 3 == 0 { applied.clone() } else { None };
                    (tid, ThreadEntry {
                        pid, comm, starttime_ticks: st, original, applied, pending,
                        pinned_at_ticks: Some(st / 2), inherited_from: None, user_set,
                        thread_level: st % 2 == 0,
                    })
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&data).expect("serialize");
        let back: JournalData = serde_json::from_str(&text).expect("parse");
        prop_assert_eq!(back, data);
    }

    /// The journal parser is total: any bytes give a journal or a typed error, never a panic.
    #[test]
    fn journal_parse_total(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = journal::parse(&bytes);
    }

    /// Record-shaped garbage (right magic, random fields) is skipped or refused, never trusted.
    #[test]
    fn journal_parse_total_on_record_like_lines(
        seq in any::<u64>(), crc in "[0-9a-f]{0,9}", json in ".{0,80}", tail in ".{0,20}",
    ) {
        let text = format!("counterpoint-journal {seq} {crc} {json}\n{tail}");
        match journal::parse(text.as_bytes()) {
            Ok(p) => prop_assert_eq!(p.data.version, JOURNAL_VERSION),
            Err(ParseError::Corrupt(_)) | Err(ParseError::Version(_)) => {}
        }
    }

    /// The one duration parser is total, and what it accepts is within the bounds asked for.
    #[test]
    fn durations_parse_total_and_bounded(
        s in "[-+0-9.eEinfa ]{0,12}(ms|s|m|h|)", min in 0u64..1_000_000_000, span in 0u64..u64::MAX / 2,
    ) {
        let max = min.saturating_add(span);
        match parse_duration_ns("--x", &s, min, max) {
            Ok(ns) => prop_assert!(ns >= min && ns <= max, "{} -> {}", s, ns),
            Err(e) => prop_assert!(e.to_string().starts_with("--x "), "{}", e),
        }
    }

    /// Any text at all: a value or a typed error, never a panic.
    #[test]
    fn durations_parse_any_text(s in ".{0,24}") {
        let _ = parse_interval_ns(&s);
    }

    /// Whole milliseconds in range read back exactly; beyond the hour it says too large.
    #[test]
    fn milliseconds_round_trip(ms in 10u64..10_000_000) {
        let r = parse_interval_ns(&format!("{ms}ms"));
        if ms <= 3_600_000 {
            prop_assert_eq!(r, Ok(ms * 1_000_000));
        } else {
            prop_assert!(matches!(r, Err(DurationError::TooLarge { .. })), "{:?}", r);
        }
    }
}
