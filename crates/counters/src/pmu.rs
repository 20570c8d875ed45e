//! PMUs as the kernel describes them in sysfs: `bus/event_source/devices/<pmu>/` with `type`
//! (the `perf_event_attr.type` to use), `format/<term>` (which bits of `config`, `config1` or
//! `config2` a term sets, e.g. `config:0-7,32-35`), `events/<name>` (named events as term lists,
//! e.g. `event=0x3c,umask=0x01`, with optional `.scale` and `.unit`) and `cpus`/`cpumask`.
//!
//! The tree is rooted at a parameter (normally `/sys`) so tests run on fixture trees of machines
//! we do not have.

use counterpoint_core::cpuset::CpuSet;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Errors reading or interpreting a PMU sysfs tree.
#[derive(Debug, Error)]
pub enum PmuError {
    #[error("unknown PMU '{pmu}' (PMUs present: {})", .available.join(", "))]
    /// No such PMU under `bus/event_source/devices`.
    UnknownPmu {
        /// The PMU asked for.
        pmu: String,
        /// The PMUs present.
        available: Vec<String>,
    },
    #[error("cannot read {}: {error}", .path.display())]
    /// A sysfs file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    #[error("{}: malformed content '{content}': {reason}", .path.display())]
    /// A sysfs file's content does not parse.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it holds.
        content: String,
        /// What is wrong with it.
        reason: String,
    },
    #[error("PMU '{pmu}' has no format term '{term}' (terms: {})", .available.join(", "))]
    /// The PMU has no such `format/` term.
    UnknownTerm {
        /// The PMU.
        pmu: String,
        /// The term asked for.
        term: String,
        /// The terms it has.
        available: Vec<String>,
    },
    #[error("value {value:#x} too wide for term '{term}' of PMU '{pmu}' ({bits} bits)")]
    /// A term's value does not fit its bit ranges.
    ValueTooWide {
        /// The PMU.
        pmu: String,
        /// The term.
        term: String,
        /// The value given.
        value: u64,
        /// How many bits the term has.
        bits: u32,
    },
}

/// Which attribute word a format field lands in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigWord {
    /// `perf_event_attr.config`.
    Config,
    /// `perf_event_attr.config1`.
    Config1,
    /// `perf_event_attr.config2`.
    Config2,
}

/// One format term: bit ranges (inclusive, low to high significance of the value) in one word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// The attribute word the bits are in.
    pub word: ConfigWord,
    /// Bit ranges `(low, high)`, inclusive, the value's low bits first.
    pub ranges: Vec<(u32, u32)>,
}

impl Format {
    /// Parse `config:0-7,32-35`, `config1:0-63`, `config:18`.
    pub fn parse(text: &str) -> Result<Format, String> {
        let text = text.trim();
        let (word, bits) = text
            .split_once(':')
            .ok_or_else(|| "expected '<config|config1|config2>:<bits>'".to_string())?;
        let word = match word {
            "config" => ConfigWord::Config,
            "config1" => ConfigWord::Config1,
            "config2" => ConfigWord::Config2,
            other => return Err(format!("unknown attribute word '{other}'")),
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_bit(a)?, parse_bit(b)?),
                None => {
                    let b = parse_bit(part)?;
                    (b, b)
                }
            };
            if lo > hi {
                return Err(format!("bit range {lo}-{hi} is reversed"));
            }
            ranges.push((lo, hi));
        }
        Ok(Format { word, ranges })
    }

    /// Total number of value bits the term can hold.
    pub fn width_bits(&self) -> u32 {
        self.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// Place `value` into the word's bits; `None` if it does not fit.
    pub fn encode(&self, value: u64) -> Option<u64> {
        let width = self.width_bits();
        if width < 64 && value >> width != 0 {
            return None;
        }
        let mut out = 0u64;
        let mut rest = value;
        for &(lo, hi) in &self.ranges {
            let n = hi - lo + 1;
            let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            out |= (rest & mask) << lo;
            rest = if n >= 64 { 0 } else { rest >> n };
        }
        Some(out)
    }

    /// Mask of every bit the term occupies in its word.
    pub fn mask(&self) -> u64 {
        self.encode(if self.width_bits() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.width_bits()) - 1
        })
        .unwrap_or(0)
    }
}

fn parse_bit(s: &str) -> Result<u32, String> {
    let b: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("bad bit number '{s}'"))?;
    if b > 63 {
        return Err(format!("bit {b} beyond 63"));
    }
    Ok(b)
}

/// A named event of a PMU (`events/<name>`), with its scale and unit if given.
#[derive(Clone, Debug, PartialEq)]
pub struct EventAlias {
    /// The term list (`event=0x3c,umask=0x01`).
    pub terms: String,
    /// `.scale`: multiplier from counts to the unit.
    pub scale: Option<f64>,
    /// `.unit`: the printed unit.
    pub unit: Option<String>,
}

/// One PMU read from sysfs.
#[derive(Clone, Debug)]
pub struct Pmu {
    /// The directory name (`cpu`, `msr`, `cpu_core`).
    pub name: String,
    /// `type`: the `perf_event_attr.type` for its events.
    pub type_: u32,
    /// `format/` terms by name.
    pub formats: BTreeMap<String, Format>,
    /// CPUs the PMU covers (hybrid `cpus`, uncore `cpumask`), when the kernel says.
    pub cpus: Option<CpuSet>,
    dir: PathBuf,
}

impl Pmu {
    /// Names of the PMU's named events (without `.scale`/`.unit` companions).
    pub fn event_names(&self) -> Vec<String> {
        let mut out: Vec<String> = list_dir(&self.dir.join("events"))
            .into_iter()
            .filter(|n| {
                !n.ends_with(".scale")
                    && !n.ends_with(".unit")
                    && !n.ends_with(".snapshot")
                    && !n.ends_with(".per-pkg")
            })
            .collect();
        out.sort();
        out
    }

    /// The named event `name`, if the PMU has it.
    pub fn event(&self, name: &str) -> Result<Option<EventAlias>, PmuError> {
        if name.contains('/') || name.starts_with('.') {
            return Ok(None);
        }
        let path = self.dir.join("events").join(name);
        if !path.is_file() {
            return Ok(None);
        }
        let terms = read_trim(&path)?;
        let scale_path = self.dir.join("events").join(format!("{name}.scale"));
        let scale = if scale_path.is_file() {
            let s = read_trim(&scale_path)?;
            Some(s.parse::<f64>().map_err(|_| PmuError::Malformed {
                path: scale_path.clone(),
                content: s.clone(),
                reason: "not a number".into(),
            })?)
        } else {
            None
        };
        let unit_path = self.dir.join("events").join(format!("{name}.unit"));
        let unit = if unit_path.is_file() {
            Some(read_trim(&unit_path)?).filter(|u| !u.is_empty())
        } else {
            None
        };
        Ok(Some(EventAlias { terms, scale, unit }))
    }

    /// Encode `term=value` into `(word, bits)` using the PMU's format files.
    pub fn encode_term(&self, term: &str, value: u64) -> Result<(ConfigWord, u64), PmuError> {
        let fmt = self
            .formats
            .get(term)
            .ok_or_else(|| PmuError::UnknownTerm {
                pmu: self.name.clone(),
                term: term.to_string(),
                available: self.formats.keys().cloned().collect(),
            })?;
        let bits = fmt.encode(value).ok_or_else(|| PmuError::ValueTooWide {
            pmu: self.name.clone(),
            term: term.to_string(),
            value,
            bits: fmt.width_bits(),
        })?;
        Ok((fmt.word, bits))
    }
}

/// A sysfs tree holding `bus/event_source/devices/`.
#[derive(Clone, Debug)]
pub struct PmuTree {
    root: PathBuf,
}

impl Default for PmuTree {
    fn default() -> Self {
        Self::new("/sys")
    }
}

impl PmuTree {
    /// `root` is the sysfs mount point (`/sys` on a live system, a fixture directory in tests).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The sysfs root the tree reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn devices(&self) -> PathBuf {
        self.root.join("bus/event_source/devices")
    }

    /// Names of the PMUs present, sorted.
    pub fn list(&self) -> Vec<String> {
        let mut v = list_dir(&self.devices());
        v.sort();
        v
    }

    /// Read one PMU; unknown names list the PMUs present.
    pub fn pmu(&self, name: &str) -> Result<Pmu, PmuError> {
        let dir = self.devices().join(name);
        if name.is_empty() || name.contains('/') || name.starts_with('.') || !dir.is_dir() {
            return Err(PmuError::UnknownPmu {
                pmu: name.to_string(),
                available: self.list(),
            });
        }
        let type_path = dir.join("type");
        let type_text = read_trim(&type_path)?;
        let type_: u32 = type_text.parse().map_err(|_| PmuError::Malformed {
            path: type_path.clone(),
            content: type_text.clone(),
            reason: "not an unsigned integer".into(),
        })?;
        let mut formats = BTreeMap::new();
        for term in list_dir(&dir.join("format")) {
            let path = dir.join("format").join(&term);
            let text = read_trim(&path)?;
            let fmt = Format::parse(&text).map_err(|reason| PmuError::Malformed {
                path: path.clone(),
                content: text.clone(),
                reason,
            })?;
            formats.insert(term, fmt);
        }
        let mut cpus = None;
        for f in ["cpus", "cpumask"] {
            let path = dir.join(f);
            if path.is_file() {
                let text = read_trim(&path)?;
                cpus = Some(CpuSet::parse_list(&text).map_err(|e| PmuError::Malformed {
                    path: path.clone(),
                    content: text.clone(),
                    reason: e.to_string(),
                })?);
                break;
            }
        }
        Ok(Pmu {
            name: name.to_string(),
            type_,
            formats,
            cpus,
            dir,
        })
    }

    /// PMUs that have a named event `name`, as (pmu, alias).
    pub fn find_event(&self, name: &str) -> Vec<(Pmu, EventAlias)> {
        let mut out = Vec::new();
        for p in self.list() {
            if let Ok(pmu) = self.pmu(&p) {
                if let Ok(Some(alias)) = pmu.event(name) {
                    out.push((pmu, alias));
                }
            }
        }
        out
    }

    /// Every `pmu/event/` spelling present, for close-match suggestions.
    pub fn all_event_spellings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.list() {
            if let Ok(pmu) = self.pmu(&p) {
                for e in pmu.event_names() {
                    out.push(format!("{p}/{e}/"));
                }
            }
        }
        out
    }

    /// Whether tracefs (with its `events/` directory) is visible under the root.
    pub fn has_tracefs(&self) -> bool {
        ["kernel/tracing/events", "kernel/debug/tracing/events"]
            .iter()
            .any(|d| self.root.join(d).is_dir())
    }

    /// Tracepoint id of `sys:name` from tracefs under the same root.
    pub fn tracepoint_id(&self, sys: &str, name: &str) -> Option<u64> {
        if sys.contains('/') || name.contains('/') || sys.starts_with('.') || name.starts_with('.')
        {
            return None;
        }
        for base in ["kernel/tracing/events", "kernel/debug/tracing/events"] {
            let p = self.root.join(base).join(sys).join(name).join("id");
            if let Ok(text) = fs::read_to_string(&p) {
                if let Ok(id) = text.trim().parse() {
                    return Some(id);
                }
            }
        }
        None
    }
}

fn read_trim(path: &Path) -> Result<String, PmuError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|error| PmuError::Io {
            path: path.to_path_buf(),
            error,
        })
}

fn list_dir(dir: &Path) -> Vec<String> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_split_format_and_encodes() {
        let f = Format::parse("config:0-7,32-35").unwrap();
        assert_eq!(f.width_bits(), 12);
        assert_eq!(f.encode(0x3c), Some(0x3c));
        assert_eq!(f.encode(0x1ab), Some(0xab | (0x1 << 32)));
        assert_eq!(f.encode(0xfff), Some(0xff | (0xf << 32)));
        assert_eq!(f.encode(0x1000), None);
        assert_eq!(f.mask(), 0xff | (0xf << 32));
    }

    #[test]
    fn parses_single_bit_and_full_width() {
        let f = Format::parse("config:18").unwrap();
        assert_eq!(f.encode(1), Some(1 << 18));
        assert_eq!(f.encode(2), None);
        let g = Format::parse("config1:0-63").unwrap();
        assert_eq!(g.word, ConfigWord::Config1);
        assert_eq!(g.encode(u64::MAX), Some(u64::MAX));
    }

    #[test]
    fn rejects_bad_formats() {
        assert!(Format::parse("config").is_err());
        assert!(Format::parse("config3:0-7").is_err());
        assert!(Format::parse("config:7-0").is_err());
        assert!(Format::parse("config:0-64").is_err());
        assert!(Format::parse("config:a-b").is_err());
    }
}
