//! Event lists in `perf stat -e` syntax, resolved to `perf_event_attr` settings.
//!
//! Accepted: generic hardware names (`cycles`, `instructions`, ...), software names
//! (`task-clock`, `cs`, ...), hardware-cache names (`L1-dcache-loads`, `LLC-load-misses`, ...),
//! raw `rNNNN` (hex), tracepoints `sys:name`, `pmu/term=value,.../` and `pmu/named-event/`
//! (resolved through [`PmuTree`]), a bare PMU event name (`tsc`), modifiers `:u`, `:k`, `:h`
//! (combinable; after a PMU event also `/u`), and groups `{a,b,c}` (with optional `:mods`)
//! mixed with plain events, separated by commas. Commas inside `/.../` belong to the PMU terms.

use crate::pmu::{ConfigWord, Pmu, PmuError, PmuTree};
use counterpoint_core::cpuset::CpuSet;
use thiserror::Error;

/// `PERF_TYPE_HARDWARE`: generic hardware events.
pub const TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`: the kernel's software events.
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`.
pub const TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_HW_CACHE`: generic cache events.
pub const TYPE_HW_CACHE: u32 = 3;
/// `PERF_TYPE_RAW`: the core PMU's raw encoding.
pub const TYPE_RAW: u32 = 4;

/// Errors in an event list. Each names the offending piece of the list.
#[derive(Debug, Error)]
pub enum SpecError {
    #[error("unknown event '{name}'{}", suggest(.suggestions))]
    /// No event has this name.
    UnknownEvent {
        /// The name as written.
        name: String,
        /// Close names, closest first.
        suggestions: Vec<String>,
    },
    #[error("unknown event '{name}': tracepoints need tracefs, and {root}/kernel/tracing/events is not there (mount -t tracefs nodev {root}/kernel/tracing)")]
    /// A tracepoint was asked for and tracefs is not mounted.
    NoTracefs {
        /// The event as written.
        name: String,
        /// The sysfs root looked at.
        root: String,
    },
    #[error("malformed group in '{list}': {reason}")]
    /// A `{...}` group does not parse.
    MalformedGroup {
        /// The whole list.
        list: String,
        /// What is wrong.
        reason: String,
    },
    #[error("malformed event list '{list}': {reason}")]
    /// The list does not parse.
    Syntax {
        /// The whole list.
        list: String,
        /// What is wrong.
        reason: String,
    },
    #[error("bad modifier '{modifier}' in '{event}' (allowed: u, k, h, p)")]
    /// An unknown `:modifier`.
    BadModifier {
        /// The event as written.
        event: String,
        /// The modifier.
        modifier: char,
    },
    #[error("modifier '{modifier}' repeated in '{event}' (u, k and h at most once each, p up to three times, as perf stat)")]
    /// A `:modifier` given more times than it means anything (`task-clock:uuu`).
    RepeatedModifier {
        /// The event as written.
        event: String,
        /// The modifier.
        modifier: char,
    },
    #[error("bad value '{value}' for term '{term}' in '{event}' (expected decimal or 0x hex)")]
    /// A term's value is not a number.
    BadValue {
        /// The event as written.
        event: String,
        /// The term.
        term: String,
        /// The value as written.
        value: String,
    },
    /// The PMU tree could not resolve the event.
    #[error(transparent)]
    Pmu(#[from] PmuError),
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" (did you mean: {}?)", s.join(", "))
    }
}

/// Where an event comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A generic hardware event.
    Hardware,
    /// A software event.
    Software,
    /// A generic cache event.
    HwCache,
    /// A raw `rNNNN` event.
    Raw,
    /// A tracepoint.
    Tracepoint,
    /// A dynamic PMU from sysfs, by name.
    Pmu(String),
}

/// One resolved event.
#[derive(Clone, Debug, PartialEq)]
pub struct EventSpec {
    /// The name as `perf stat` prints it (as written, with modifiers).
    pub name: String,
    /// Generic spelling used by metrics (`cs` → `context-switches`); the name otherwise.
    pub canonical: String,
    /// Where it comes from.
    pub source: Source,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `perf_event_attr.config1`.
    pub config1: u64,
    /// `perf_event_attr.config2`.
    pub config2: u64,
    /// Do not count user mode.
    pub exclude_user: bool,
    /// Do not count kernel mode.
    pub exclude_kernel: bool,
    /// Do not count the hypervisor.
    pub exclude_hv: bool,
    /// Multiplier from counts to the printed unit (`.scale`; 1e-6 for the ns clocks → msec).
    pub scale: f64,
    /// Printed unit (`msec`, `Joules`, ...), if any.
    pub unit: Option<String>,
    /// CPUs the event's PMU covers, when it says (hybrid cores, uncore).
    pub cpus: Option<CpuSet>,
    /// Why this event cannot be counted here, decided before any open (an abstract event with no
    /// vendor event on this machine); it is reported as not supported with this reason.
    pub unavailable: Option<String>,
}

impl EventSpec {
    fn new(name: &str, canonical: &str, source: Source, type_: u32, config: u64) -> Self {
        EventSpec {
            name: name.to_string(),
            canonical: canonical.to_string(),
            source,
            type_,
            config,
            config1: 0,
            config2: 0,
            exclude_user: false,
            exclude_kernel: false,
            exclude_hv: false,
            scale: 1.0,
            unit: None,
            cpus: None,
            unavailable: None,
        }
    }
}

/// A group of events scheduled together (`{a,b}`), or one plain event (`braced == false`).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// The events, the leader first.
    pub members: Vec<EventSpec>,
    /// Whether it was written in braces (a real group) rather than a lone event.
    pub braced: bool,
}

/// A parsed `-e` list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventList {
    /// The groups and lone events, in order.
    pub groups: Vec<Group>,
}

impl EventList {
    /// Every event in order.
    pub fn events(&self) -> impl Iterator<Item = &EventSpec> {
        self.groups.iter().flat_map(|g| g.members.iter())
    }
    /// How many events.
    pub fn len(&self) -> usize {
        self.events().count()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Append another list (repeated `-e`).
    pub fn extend(&mut self, other: EventList) {
        self.groups.extend(other.groups);
    }
    /// The first event named a second time (`cs` in `cs,{cs:u,cs}`; `cs` and `cs:u` are two
    /// events). `perf stat` counts a repeat twice; a consumer whose output is keyed by the
    /// event name (the broker's series, selfmon's columns) refuses it instead.
    pub fn repeated(&self) -> Option<&EventSpec> {
        let mut seen = std::collections::BTreeSet::new();
        self.events().find(|s| !seen.insert(s.name.as_str()))
    }
}

/// Generic hardware events: (name, config, canonical).
pub const HARDWARE: &[(&str, u64, &str)] = &[
    ("cycles", 0, "cycles"),
    ("cpu-cycles", 0, "cycles"),
    ("instructions", 1, "instructions"),
    ("cache-references", 2, "cache-references"),
    ("cache-misses", 3, "cache-misses"),
    ("branches", 4, "branches"),
    ("branch-instructions", 4, "branches"),
    ("branch-misses", 5, "branch-misses"),
    ("bus-cycles", 6, "bus-cycles"),
    ("stalled-cycles-frontend", 7, "stalled-cycles-frontend"),
    ("idle-cycles-frontend", 7, "stalled-cycles-frontend"),
    ("stalled-cycles-backend", 8, "stalled-cycles-backend"),
    ("idle-cycles-backend", 8, "stalled-cycles-backend"),
    ("ref-cycles", 9, "ref-cycles"),
];

/// Software events: (name, config, canonical).
pub const SOFTWARE: &[(&str, u64, &str)] = &[
    ("cpu-clock", 0, "cpu-clock"),
    ("task-clock", 1, "task-clock"),
    ("page-faults", 2, "page-faults"),
    ("faults", 2, "page-faults"),
    ("context-switches", 3, "context-switches"),
    ("cs", 3, "context-switches"),
    ("cpu-migrations", 4, "cpu-migrations"),
    ("migrations", 4, "cpu-migrations"),
    ("minor-faults", 5, "minor-faults"),
    ("major-faults", 6, "major-faults"),
    ("alignment-faults", 7, "alignment-faults"),
    ("emulation-faults", 8, "emulation-faults"),
    ("dummy", 9, "dummy"),
    ("bpf-output", 10, "bpf-output"),
    ("cgroup-switches", 11, "cgroup-switches"),
];

const CACHES: &[(&str, u64)] = &[
    ("L1-dcache", 0),
    ("L1-icache", 1),
    ("LLC", 2),
    ("dTLB", 3),
    ("iTLB", 4),
    ("branch", 5),
    ("node", 6),
];
const CACHE_OPS: &[(&str, &str, u64)] = &[
    ("loads", "load", 0),
    ("stores", "store", 1),
    ("prefetches", "prefetch", 2),
];

/// `<cache>-<op>s` (accesses) or `<cache>-<op>-misses` → config.
fn hw_cache(name: &str) -> Option<u64> {
    for &(cache, id) in CACHES {
        let Some(rest) = name.strip_prefix(cache).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        for &(access, op_name, op) in CACHE_OPS {
            if rest == access {
                return Some(id | (op << 8));
            }
            if rest.strip_suffix("-misses") == Some(op_name) {
                return Some(id | (op << 8) | (1 << 16));
            }
        }
    }
    None
}

/// Every generic name (hardware, software, cache), for suggestions and `list`.
pub fn known_names() -> Vec<String> {
    let mut v: Vec<String> = HARDWARE
        .iter()
        .chain(SOFTWARE.iter())
        .map(|(n, _, _)| n.to_string())
        .collect();
    v.extend(crate::alias::ABSTRACT.iter().map(|n| n.to_string()));
    for (cache, _) in CACHES {
        for (access, op, _) in CACHE_OPS {
            v.push(format!("{cache}-{access}"));
            v.push(format!("{cache}-{op}-misses"));
        }
    }
    v
}

/// Levenshtein edit distance (chars).
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Up to five close matches for `name` among `candidates`, closest first.
pub fn close_matches(name: &str, candidates: &[String]) -> Vec<String> {
    // At most a third of the name's characters changed (two for short names), and never all
    // of them: `r` is not a typo of `cs`.
    let len = name.chars().count();
    let limit = (len / 3).max(2).min(len.saturating_sub(1));
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .map(|c| (levenshtein(&lower, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, c)| c.clone()).collect()
}

/// Parse an event list against the PMUs of `tree`.
pub fn parse_event_list(list: &str, tree: &PmuTree) -> Result<EventList, SpecError> {
    let syntax = |reason: &str| SpecError::Syntax {
        list: list.to_string(),
        reason: reason.to_string(),
    };
    let group_err = |reason: &str| SpecError::MalformedGroup {
        list: list.to_string(),
        reason: reason.to_string(),
    };
    let mut out = EventList::default();
    let items = split_top(list).map_err(|e| match e {
        SplitError::Group(r) => group_err(r),
        SplitError::Syntax(r) => syntax(r),
    })?;
    for item in items {
        if let Some(inner) = item.strip_prefix('{') {
            let close = inner
                .rfind('}')
                .ok_or_else(|| group_err("'{' without '}'"))?;
            let body = &inner[..close];
            let mods = &inner[close + 1..];
            let mods = if mods.is_empty() {
                ""
            } else {
                mods.strip_prefix(':')
                    .ok_or_else(|| group_err("text after '}' must be ':modifiers'"))?
            };
            if body.trim().is_empty() {
                return Err(group_err("empty group '{}'"));
            }
            let mut members = Vec::new();
            for ev in split_top(body).map_err(|e| match e {
                SplitError::Group(r) => group_err(r),
                SplitError::Syntax(r) => syntax(r),
            })? {
                if ev.contains('{') || ev.contains('}') {
                    return Err(group_err("groups cannot be nested"));
                }
                let mut evs = parse_event(&ev, tree)?;
                for e in &mut evs {
                    apply_modifiers(e, mods, &ev)?;
                    if !mods.is_empty() {
                        e.name = format!("{}:{mods}", e.name);
                    }
                }
                members.extend(evs);
            }
            out.groups.push(Group {
                members,
                braced: true,
            });
        } else {
            if item.contains('}') {
                return Err(group_err("'}' without '{'"));
            }
            for e in parse_event(&item, tree)? {
                out.groups.push(Group {
                    members: vec![e],
                    braced: false,
                });
            }
        }
    }
    Ok(out)
}

enum SplitError {
    Group(&'static str),
    Syntax(&'static str),
}

/// Split on commas outside braces and outside `pmu/.../`; items are trimmed and non-empty.
fn split_top(s: &str) -> Result<Vec<String>, SplitError> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut in_slash = false;
    for c in s.chars() {
        match c {
            '{' if !in_slash => {
                depth += 1;
                if depth > 1 {
                    return Err(SplitError::Group("groups cannot be nested"));
                }
                cur.push(c);
            }
            '}' if !in_slash => {
                depth -= 1;
                if depth < 0 {
                    return Err(SplitError::Group("'}' without '{'"));
                }
                cur.push(c);
            }
            '/' => {
                in_slash = !in_slash;
                cur.push(c);
            }
            ',' if depth == 0 && !in_slash => {
                let t = cur.trim().to_string();
                if t.is_empty() {
                    return Err(SplitError::Syntax("empty event between commas"));
                }
                items.push(t);
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if depth != 0 {
        return Err(SplitError::Group("'{' without '}'"));
    }
    if in_slash {
        return Err(SplitError::Syntax("unterminated 'pmu/.../'"));
    }
    let t = cur.trim().to_string();
    if t.is_empty() {
        return Err(SplitError::Syntax(if items.is_empty() {
            "no events"
        } else {
            "empty event after a comma"
        }));
    }
    items.push(t);
    Ok(items)
}

fn apply_modifiers(e: &mut EventSpec, mods: &str, event: &str) -> Result<(), SpecError> {
    let (mut u, mut k, mut h) = (false, false, false);
    let mut precise = 0;
    for m in mods.chars() {
        let repeated = match m {
            'u' => std::mem::replace(&mut u, true),
            'k' => std::mem::replace(&mut k, true),
            'h' => std::mem::replace(&mut h, true),
            // Precise-IP matters only for sampling; accepted so perf lists work unchanged.
            'p' => {
                precise += 1;
                precise > 3
            }
            other => {
                return Err(SpecError::BadModifier {
                    event: event.to_string(),
                    modifier: other,
                })
            }
        };
        // perf refuses `:uuu` ("Bad modifier"); it was counted as `:u` (CLI probe, session 27).
        if repeated {
            return Err(SpecError::RepeatedModifier {
                event: event.to_string(),
                modifier: m,
            });
        }
    }
    if u || k || h {
        // perf's rule: naming any privilege level excludes the ones not named.
        e.exclude_user |= !u;
        e.exclude_kernel |= !k;
        e.exclude_hv |= !h;
    }
    Ok(())
}

/// Parse one event (no braces); a bare PMU event name present on several PMUs (hybrid) yields
/// one event per PMU.
fn parse_event(item: &str, tree: &PmuTree) -> Result<Vec<EventSpec>, SpecError> {
    if let Some(slash) = item.find('/') {
        return parse_pmu_event(item, slash, tree).map(|e| vec![e]);
    }
    if item.ends_with(':') {
        return Err(SpecError::Syntax {
            list: item.to_string(),
            reason: "nothing after ':' (modifiers are u, k, h, p)".into(),
        });
    }
    let mut parts = item.splitn(2, ':');
    let base = parts.next().unwrap_or("");
    let rest = parts.next();
    if crate::alias::ABSTRACT.contains(&base) {
        return abstract_event(item, base, rest, tree).map(|e| vec![e]);
    }
    if let Some(mut e) = generic(base) {
        if let Some(mods) = rest {
            apply_modifiers(&mut e, mods, item)?;
        }
        e.name = item.to_string();
        return Ok(hybrid_expand(e, tree));
    }
    if let Some(rest) = rest {
        // Tracepoint `sys:name[:mods]`.
        let (name, mods) = match rest.split_once(':') {
            Some((n, m)) => (n, m),
            None => (rest, ""),
        };
        if let Some(id) = tree.tracepoint_id(base, name) {
            let canonical = format!("{base}:{name}");
            let mut e = EventSpec::new(item, &canonical, Source::Tracepoint, TYPE_TRACEPOINT, id);
            apply_modifiers(&mut e, mods, item)?;
            return Ok(vec![e]);
        }
        if generic(base).is_none() && !tree.has_tracefs() {
            return Err(SpecError::NoTracefs {
                name: item.to_string(),
                root: tree.root().display().to_string(),
            });
        }
        return Err(unknown(item, tree));
    }
    // A bare PMU event alias (`tsc`, `energy-pkg`).
    let found = tree.find_event(base);
    if found.is_empty() {
        return Err(unknown(item, tree));
    }
    let mut out = Vec::new();
    for (pmu, _) in found {
        let spelled = format!("{}/{base}/", pmu.name);
        let slash = pmu.name.len();
        out.push(parse_pmu_event(&spelled, slash, tree)?);
    }
    Ok(out)
}

/// Core PMUs of a hybrid machine (`cpu_core`, `cpu_atom`, ...), each with its CPUs.
fn hybrid_core_pmus(tree: &PmuTree) -> Vec<Pmu> {
    tree.list()
        .into_iter()
        .filter(|n| matches!(n.as_str(), "cpu_core" | "cpu_atom" | "cpu_lowpower"))
        .filter_map(|n| tree.pmu(&n).ok())
        .collect()
}

/// On a hybrid machine a generic hardware or cache event is one event per core PMU, selected by
/// the PMU type in bits 32-63 of `config` (the kernel's extended hardware type), as perf does.
/// An abstract event (`mem-transactions`, `fp-ops`, `llc-misses`) through the alias table: the
/// vendor event under Counterpoint's name, or an unavailable spec with the reason.
fn abstract_event(
    item: &str,
    base: &str,
    mods: Option<&str>,
    tree: &PmuTree,
) -> Result<EventSpec, SpecError> {
    let mut e = match crate::alias::resolve(base, tree) {
        Ok((text, _)) => {
            let mut v = parse_event(&text, tree)?;
            if v.len() != 1 {
                return Err(SpecError::Syntax {
                    list: item.to_string(),
                    reason: format!("alias '{text}' did not resolve to one event"),
                });
            }
            v.remove(0)
        }
        Err(reason) => {
            let mut e = EventSpec::new(item, base, Source::Raw, TYPE_RAW, 0);
            e.unavailable = Some(reason);
            e
        }
    };
    e.canonical = base.to_string();
    if let Some(m) = mods {
        apply_modifiers(&mut e, m, item)?;
    }
    e.name = item.to_string();
    Ok(e)
}

fn hybrid_expand(e: EventSpec, tree: &PmuTree) -> Vec<EventSpec> {
    if !matches!(e.type_, TYPE_HARDWARE | TYPE_HW_CACHE) {
        return vec![e];
    }
    let pmus = hybrid_core_pmus(tree);
    if pmus.is_empty() {
        return vec![e];
    }
    pmus.into_iter()
        .map(|p| {
            let mut x = e.clone();
            x.config |= u64::from(p.type_) << 32;
            x.name = format!("{}/{}/", p.name, e.name);
            x.cpus = p.cpus.clone();
            x
        })
        .collect()
}

fn unknown(name: &str, tree: &PmuTree) -> SpecError {
    let mut candidates = known_names();
    let pmu_events = tree.all_event_spellings();
    // Bare alias names too, so `ts` suggests `tsc` as well as `msr/tsc/`.
    for s in &pmu_events {
        if let Some(n) = s.trim_end_matches('/').rsplit('/').next() {
            candidates.push(n.to_string());
        }
    }
    candidates.extend(pmu_events);
    candidates.sort();
    candidates.dedup();
    SpecError::UnknownEvent {
        name: name.to_string(),
        suggestions: close_matches(name, &candidates),
    }
}

fn generic(name: &str) -> Option<EventSpec> {
    if let Some(&(_, config, canon)) = HARDWARE.iter().find(|(n, _, _)| *n == name) {
        return Some(EventSpec::new(
            name,
            canon,
            Source::Hardware,
            TYPE_HARDWARE,
            config,
        ));
    }
    if let Some(&(_, config, canon)) = SOFTWARE.iter().find(|(n, _, _)| *n == name) {
        let mut e = EventSpec::new(name, canon, Source::Software, TYPE_SOFTWARE, config);
        if config <= 1 {
            // The clocks count nanoseconds; perf prints them in msec.
            e.scale = 1e-6;
            e.unit = Some("msec".into());
        }
        return Some(e);
    }
    if let Some(config) = hw_cache(name) {
        return Some(EventSpec::new(
            name,
            name,
            Source::HwCache,
            TYPE_HW_CACHE,
            config,
        ));
    }
    if let Some(hex) = name.strip_prefix('r') {
        if !hex.is_empty() && hex.len() <= 16 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            let config = u64::from_str_radix(hex, 16).ok()?;
            return Some(EventSpec::new(name, name, Source::Raw, TYPE_RAW, config));
        }
    }
    None
}

fn parse_value(v: &str) -> Option<u64> {
    let v = v.trim();
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        v.parse().ok()
    }
}

/// Perf's meta terms: they configure the event, not its encoding; we keep only `name`.
const META_TERMS: &[&str] = &[
    "period",
    "freq",
    "time",
    "call-graph",
    "stack-size",
    "percore",
    "aux-output",
    "metric-id",
    "overwrite",
    "no-overwrite",
    "max-stack",
    "inherit",
    "no-inherit",
];

/// `pmu/terms/[mods]` where `slash` is the index of the first '/'.
fn parse_pmu_event(item: &str, slash: usize, tree: &PmuTree) -> Result<EventSpec, SpecError> {
    let pmu_name = &item[..slash];
    let rest = &item[slash + 1..];
    let close = rest.rfind('/').ok_or_else(|| SpecError::Syntax {
        list: item.to_string(),
        reason: "unterminated 'pmu/.../'".into(),
    })?;
    let body = &rest[..close];
    let mods = rest[close + 1..].trim_start_matches(':');
    let pmu = tree.pmu(pmu_name)?;
    let mut e = EventSpec::new(item, item, Source::Pmu(pmu.name.clone()), pmu.type_, 0);
    e.cpus = pmu.cpus.clone();
    let terms: Vec<&str> = body
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if terms.is_empty() {
        return Err(SpecError::Syntax {
            list: item.to_string(),
            reason: format!("no terms inside '{pmu_name}/.../'"),
        });
    }
    for (i, term) in terms.iter().enumerate() {
        if i == 0 && !term.contains('=') && !pmu.formats.contains_key(*term) {
            // A named event: its terms first, then any overrides after it.
            let alias = pmu.event(term)?.ok_or_else(|| {
                let names: Vec<String> = pmu
                    .event_names()
                    .into_iter()
                    .map(|n| format!("{pmu_name}/{n}/"))
                    .collect();
                SpecError::UnknownEvent {
                    name: item.to_string(),
                    suggestions: close_matches(&format!("{pmu_name}/{term}/"), &names),
                }
            })?;
            for t in alias
                .terms
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
            {
                apply_term(&mut e, &pmu, t, item)?;
            }
            if let Some(s) = alias.scale {
                e.scale = s;
            }
            e.unit = alias.unit;
            continue;
        }
        apply_term(&mut e, &pmu, term, item)?;
    }
    apply_modifiers(&mut e, mods, item)?;
    Ok(e)
}

fn apply_term(e: &mut EventSpec, pmu: &Pmu, term: &str, item: &str) -> Result<(), SpecError> {
    let (key, value) = match term.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (term, None),
    };
    if key == "name" {
        if let Some(v) = value {
            e.name = v.to_string();
            e.canonical = v.to_string();
        }
        return Ok(());
    }
    if META_TERMS.contains(&key) {
        return Ok(());
    }
    let parse = |v: Option<&str>| -> Result<u64, SpecError> {
        match v {
            None => Ok(1),
            Some(v) => parse_value(v).ok_or_else(|| SpecError::BadValue {
                event: item.to_string(),
                term: key.to_string(),
                value: v.to_string(),
            }),
        }
    };
    let (word, bits, mask) = match key {
        "config" => (ConfigWord::Config, parse(value)?, u64::MAX),
        "config1" => (ConfigWord::Config1, parse(value)?, u64::MAX),
        "config2" => (ConfigWord::Config2, parse(value)?, u64::MAX),
        _ => {
            let v = parse(value)?;
            let (word, bits) = pmu.encode_term(key, v)?;
            let mask = pmu.formats.get(key).map(|f| f.mask()).unwrap_or(0);
            (word, bits, mask)
        }
    };
    // A later term replaces an earlier value of the same bits (overrides after an alias).
    let slot = match word {
        ConfigWord::Config => &mut e.config,
        ConfigWord::Config1 => &mut e.config1,
        ConfigWord::Config2 => &mut e.config2,
    };
    *slot = (*slot & !mask) | bits;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_tree() -> PmuTree {
        PmuTree::new("/nonexistent-counterpoint-root")
    }

    #[test]
    fn a_repeated_event_is_found_by_its_name() {
        let t = empty_tree();
        let first = |l: &str| {
            parse_event_list(l, &t)
                .unwrap()
                .repeated()
                .map(|s| s.name.clone())
        };
        assert_eq!(first("cs,{cs:u,cs}").as_deref(), Some("cs"));
        assert_eq!(first("cs,cs:u"), None);
        assert_eq!(first("task-clock,page-faults"), None);
    }

    #[test]
    fn generic_and_cache_names() {
        let t = empty_tree();
        let l =
            parse_event_list("cycles,instructions,cs,LLC-load-misses,L1-dcache-loads", &t).unwrap();
        let v: Vec<_> = l.events().collect();
        assert_eq!((v[0].type_, v[0].config), (TYPE_HARDWARE, 0));
        assert_eq!((v[1].type_, v[1].config), (TYPE_HARDWARE, 1));
        assert_eq!((v[2].type_, v[2].config), (TYPE_SOFTWARE, 3));
        assert_eq!(v[2].canonical, "context-switches");
        assert_eq!((v[3].type_, v[3].config), (TYPE_HW_CACHE, 2 | (1 << 16)));
        assert_eq!((v[4].type_, v[4].config), (TYPE_HW_CACHE, 0));
        assert_eq!(
            hw_cache("dTLB-store-misses"),
            Some(3 | (1 << 8) | (1 << 16))
        );
        assert_eq!(hw_cache("node-prefetches"), Some(6 | (2 << 8)));
        assert_eq!(hw_cache("LLC-misses"), None);
    }

    #[test]
    fn modifiers_combine() {
        let t = empty_tree();
        let l = parse_event_list("cycles:u,instructions:k,branches:uk,cache-misses", &t).unwrap();
        let v: Vec<_> = l.events().collect();
        assert!(!v[0].exclude_user && v[0].exclude_kernel && v[0].exclude_hv);
        assert!(v[1].exclude_user && !v[1].exclude_kernel);
        assert!(!v[2].exclude_user && !v[2].exclude_kernel && v[2].exclude_hv);
        assert!(!v[3].exclude_user && !v[3].exclude_kernel && !v[3].exclude_hv);
        assert_eq!(v[0].name, "cycles:u");
        assert!(matches!(
            parse_event_list("cycles:x", &t),
            Err(SpecError::BadModifier { modifier: 'x', .. })
        ));
        // Once each, as perf stat: `:uuu` is refused, `:ppp` is the most precise there is.
        assert!(matches!(
            parse_event_list("task-clock:uuu", &t),
            Err(SpecError::RepeatedModifier { modifier: 'u', .. })
        ));
        assert!(matches!(
            parse_event_list("cycles:ukk", &t),
            Err(SpecError::RepeatedModifier { modifier: 'k', .. })
        ));
        assert!(parse_event_list("cycles:uppp", &t).is_ok());
        assert!(matches!(
            parse_event_list("cycles:pppp", &t),
            Err(SpecError::RepeatedModifier { modifier: 'p', .. })
        ));
    }

    #[test]
    fn raw_hex() {
        let t = empty_tree();
        let l = parse_event_list("r01c2,r3c", &t).unwrap();
        let v: Vec<_> = l.events().collect();
        assert_eq!((v[0].type_, v[0].config), (TYPE_RAW, 0x1c2));
        assert_eq!(v[1].config, 0x3c);
        // `ref-cycles` starts with r but is not hex.
        assert_eq!(
            parse_event_list("ref-cycles", &t).unwrap().groups[0].members[0].type_,
            0
        );
        assert!(parse_event_list("rxyz", &t).is_err());
    }

    #[test]
    fn groups_and_plain_mixed() {
        let t = empty_tree();
        let l = parse_event_list("task-clock,{cycles,instructions}:u,cs", &t).unwrap();
        assert_eq!(l.groups.len(), 3);
        assert!(!l.groups[0].braced);
        assert!(l.groups[1].braced);
        assert_eq!(l.groups[1].members.len(), 2);
        assert!(l.groups[1].members[1].exclude_kernel);
        assert_eq!(l.len(), 4);
    }

    #[test]
    fn malformed_groups() {
        let t = empty_tree();
        for bad in [
            "{cycles,instructions",
            "cycles}",
            "{}",
            "{ }",
            "{a,{b}}",
            "{cycles}x",
        ] {
            assert!(
                matches!(
                    parse_event_list(bad, &t),
                    Err(SpecError::MalformedGroup { .. })
                ),
                "{bad}"
            );
        }
        for bad in ["", "cycles,,cs", "cycles,"] {
            assert!(
                matches!(parse_event_list(bad, &t), Err(SpecError::Syntax { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_event_suggests() {
        let t = empty_tree();
        match parse_event_list("task-clok", &t) {
            Err(SpecError::UnknownEvent { name, suggestions }) => {
                assert_eq!(name, "task-clok");
                assert_eq!(suggestions[0], "task-clock");
            }
            other => panic!("{other:?}"),
        }
        match parse_event_list("LLC-load-miss", &t) {
            Err(e @ SpecError::UnknownEvent { .. }) => {
                assert!(e.to_string().contains("LLC-load-misses"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_suggestion_keeps_part_of_the_name() {
        let names: Vec<String> = ["cs", "cycles", "instructions"].map(String::from).into();
        assert!(close_matches("r", &names).is_empty());
        assert_eq!(close_matches("cyles", &names), ["cycles"]);
        assert_eq!(close_matches("cz", &names), ["cs"]);
    }

    #[test]
    fn levenshtein_basics() {
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("cycles", "cycles"), 0);
    }

    #[test]
    fn clocks_print_in_msec() {
        let l = parse_event_list("task-clock", &empty_tree()).unwrap();
        let e = &l.groups[0].members[0];
        assert_eq!(e.unit.as_deref(), Some("msec"));
        assert!((e.scale - 1e-6).abs() < 1e-18);
    }
}
