//! CPU identifiers and sets, with the kernel's list format (`0-3,8,10-11`) used by sysfs,
//! cgroup `cpuset.cpus`, `taskset -c` and `perf stat -C`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A logical CPU (hardware thread) number as the kernel numbers it.
pub type CpuId = u32;

/// An ordered set of CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct CpuSet(BTreeSet<CpuId>);

/// Why a CPU list string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetParseError {
    /// A token that is not a number.
    #[error("bad CPU number {token:?} in CPU list {list:?}")]
    BadNumber {
        /// The whole list.
        list: String,
        /// The bad token.
        token: String,
    },
    /// A range whose start exceeds its end.
    #[error("reversed range {token:?} in CPU list {list:?} (start must not exceed end)")]
    ReversedRange {
        /// The whole list.
        list: String,
        /// The bad range.
        token: String,
    },
    /// A CPU above [`MAX_CPU_ID`].
    #[error("CPU list {list:?} names CPU {cpu}, above the limit of {max}")]
    TooLarge {
        /// The whole list.
        list: String,
        /// The CPU named.
        cpu: u64,
        /// The limit.
        max: u32,
    },
}

/// Largest CPU number accepted from text; the kernel's NR_CPUS tops out at 8192.
pub const MAX_CPU_ID: CpuId = 8191;

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self(BTreeSet::new())
    }
    /// Parse the kernel list format. The empty string (and a lone newline, as sysfs writes an
    /// empty `offline` file) is the empty set.
    pub fn parse_list(list: &str) -> Result<Self, CpuSetParseError> {
        let trimmed = list.trim();
        let mut set = BTreeSet::new();
        if trimmed.is_empty() {
            return Ok(Self(set));
        }
        let num = |tok: &str| -> Result<CpuId, CpuSetParseError> {
            let v: u64 = tok
                .trim()
                .parse()
                .map_err(|_| CpuSetParseError::BadNumber {
                    list: trimmed.to_string(),
                    token: tok.to_string(),
                })?;
            if v > MAX_CPU_ID as u64 {
                return Err(CpuSetParseError::TooLarge {
                    list: trimmed.to_string(),
                    cpu: v,
                    max: MAX_CPU_ID,
                });
            }
            Ok(v as CpuId)
        };
        for token in trimmed.split(',') {
            match token.split_once('-') {
                Some((a, b)) => {
                    // A side missing (`-1`, `3-`): the whole token is what is wrong, not "".
                    let side = |t: &str| {
                        if t.trim().is_empty() {
                            Err(CpuSetParseError::BadNumber {
                                list: trimmed.to_string(),
                                token: token.to_string(),
                            })
                        } else {
                            num(t)
                        }
                    };
                    let (a, b) = (side(a)?, side(b)?);
                    if a > b {
                        return Err(CpuSetParseError::ReversedRange {
                            list: trimmed.to_string(),
                            token: token.to_string(),
                        });
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(num(token)?);
                }
            }
        }
        Ok(Self(set))
    }
    /// `{cpu}`.
    pub fn single(cpu: CpuId) -> Self {
        Self(BTreeSet::from([cpu]))
    }
    /// Add `cpu`; false if it was there.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        self.0.insert(cpu)
    }
    /// Remove `cpu`; false if it was not there.
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        self.0.remove(&cpu)
    }
    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        self.0.contains(&cpu)
    }
    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// No CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The CPUs, ascending.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.0.iter().copied()
    }
    /// The lowest CPU.
    pub fn first(&self) -> Option<CpuId> {
        self.0.first().copied()
    }
    /// CPUs in both.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        Self(self.0.intersection(&other.0).copied().collect())
    }
    /// CPUs in either.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        Self(self.0.union(&other.0).copied().collect())
    }
    /// CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        Self(self.0.difference(&other.0).copied().collect())
    }
    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }
    /// The kernel list format, with runs collapsed (`0-3,8`).
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if end == start {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl Extend<CpuId> for CpuSet {
    fn extend<I: IntoIterator<Item = CpuId>>(&mut self, iter: I) {
        self.0.extend(iter)
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_list(s)
    }
}

impl From<CpuSet> for String {
    fn from(s: CpuSet) -> String {
        s.to_list()
    }
}

impl TryFrom<String> for CpuSet {
    type Error = CpuSetParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse_list(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_lists() {
        let s = CpuSet::parse_list("0-3,8,10-11\n").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert!(CpuSet::parse_list("\n").unwrap().is_empty());
    }

    #[test]
    fn rejects_bad_lists() {
        assert!(matches!(
            CpuSet::parse_list("0-x"),
            Err(CpuSetParseError::BadNumber { .. })
        ));
        // A negative number or a range with no end names the whole token (it named "").
        for (list, token) in [("-1", "-1"), ("2,3-", "3-")] {
            match CpuSet::parse_list(list) {
                Err(e @ CpuSetParseError::BadNumber { .. }) => assert_eq!(
                    e.to_string(),
                    format!("bad CPU number {token:?} in CPU list {list:?}")
                ),
                other => panic!("{list}: {other:?}"),
            }
        }
        assert!(matches!(
            CpuSet::parse_list("3-1"),
            Err(CpuSetParseError::ReversedRange { .. })
        ));
        assert!(matches!(
            CpuSet::parse_list("0,99999"),
            Err(CpuSetParseError::TooLarge { .. })
        ));
        assert!(CpuSet::parse_list("1,,2").is_err());
    }

    proptest! {
        #[test]
        fn list_round_trips(cpus in proptest::collection::btree_set(0u32..300, 0..40)) {
            let set: CpuSet = cpus.iter().copied().collect();
            let back = CpuSet::parse_list(&set.to_list()).unwrap();
            prop_assert_eq!(back, set);
        }
    }
}
