//! Invariants of the host crate's pure parts, over arbitrary input.

use counterpoint_core::cpuset::CpuSet;
use counterpoint_host::journal::{JournalData, ThreadEntry};
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
            version: 1,
            threads: entries
                .into_iter()
                .map(|(tid, (pid, comm, st, original, applied, pending))| {
                    (tid, ThreadEntry { pid, comm, starttime_ticks: st, original, applied, pending })
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&data).expect("serialize");
        let back: JournalData = serde_json::from_str(&text).expect("parse");
        prop_assert_eq!(back, data);
    }
}
