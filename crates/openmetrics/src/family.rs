//! Metric families and the mapping from counter readings to them.

use crate::text::sanitize_metric_name;

/// One counter as read from the kernel: the raw count and the times it was enabled and running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterReading {
    /// Event name as the user spelled it (`task-clock`, `cs:u`, `cpu/event=0x3c/`).
    pub event: String,
    /// Labels identifying the series (`cpu`, `consumer`, `pid`, ...), in output order.
    pub labels: Vec<(String, String)>,
    /// The count as read, not scaled for multiplexing.
    pub raw: u64,
    /// Nanoseconds the counter was enabled.
    pub enabled_ns: u64,
    /// Nanoseconds the counter was actually on the PMU (less than enabled when multiplexed).
    pub running_ns: u64,
}

/// The OpenMetrics type of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic; exposed as `NAME_total`.
    Counter,
    /// A value that can go up and down; exposed as `NAME`.
    Gauge,
}

/// One series of a family: its labels and current value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Label names and values, in output order.
    pub labels: Vec<(String, String)>,
    /// The value (`NaN` is written as `NaN`, infinities as `+Inf`/`-Inf`).
    pub value: f64,
}

/// A metric family: name, help, type, optional unit and its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// Family name (without `_total` for counters; sanitized when rendered).
    pub name: String,
    /// One-line description (escaped when rendered).
    pub help: String,
    /// Counter or gauge.
    pub kind: Kind,
    /// Unit (`seconds`, ...); the rendered name ends in `_UNIT`.
    pub unit: Option<String>,
    /// The series.
    pub samples: Vec<Sample>,
}

/// Fraction of the enabled time the counter ran, in [0, 1].
///
/// When the counter has not been enabled yet (`enabled_ns == 0`) nothing was missed: no enabled
/// time went uncounted and the raw count is the whole count, so the coverage is 1. This keeps
/// an alert on `coverage < 1` ("this value is an estimate") quiet for counters that were just
/// opened. Running time above enabled time (rounding when times are summed) is clamped to 1.
pub(crate) fn coverage(r: &CounterReading) -> f64 {
    if r.enabled_ns == 0 || r.running_ns >= r.enabled_ns {
        1.0
    } else {
        r.running_ns as f64 / r.enabled_ns as f64
    }
}

/// The scaled estimate `raw * enabled / running`, the raw count when the counter always ran,
/// and `NaN` when it was enabled but never ran (there is no estimate to give).
pub(crate) fn scaled(r: &CounterReading) -> f64 {
    if r.enabled_ns == 0 || r.running_ns >= r.enabled_ns {
        r.raw as f64
    } else if r.running_ns == 0 {
        f64::NAN
    } else {
        r.raw as f64 * (r.enabled_ns as f64 / r.running_ns as f64)
    }
}

/// Whether `event` (perf's spelling, modifiers after `:` aside) counts nanoseconds: the
/// software clocks `task-clock` and `cpu-clock`.
fn counts_nanoseconds(event: &str) -> bool {
    let name = event.split(':').next().unwrap_or(event).trim();
    matches!(name, "task-clock" | "cpu-clock")
}

/// Families for a set of readings. For each event (named after it, sanitized to the metric
/// grammar, `counterpoint_` in front; `E` below):
///
/// | family | type | value |
/// |---|---|---|
/// | `counterpoint_E` (`_total`) | counter | the raw count (for the software clocks `task-clock` and `cpu-clock`, which count nanoseconds: in seconds, `counterpoint_E_seconds_total`) |
/// | `counterpoint_E_enabled_seconds` (`_total`) | counter | time enabled |
/// | `counterpoint_E_running_seconds` (`_total`) | counter | time running |
/// | `counterpoint_E_coverage` | gauge | running / enabled (1 when enabled is 0) |
/// | `counterpoint_E_scaled` | gauge | raw × enabled / running (`NaN` if it never ran; `_scaled_seconds` for the clocks) |
/// | `counterpoint_E_multiplexed` | gauge | 1 when the scaled estimate differs from the raw count |
///
/// The scaled estimate is a gauge, not a counter, because it is not monotonic: a counter that
/// was multiplexed during a busy phase and then ran alone can see its extrapolation fall. Every
/// sample carries the reading's labels and `event="<name as given>"` (unless the reading
/// already has an `event` label), so two events whose names sanitize alike stay distinct
/// series of one family. Readings of one event with different labels become samples of the
/// same families, in input order; events appear in order of first occurrence.
pub fn counter_families(readings: &[CounterReading]) -> Vec<Family> {
    // Group by sanitized name, keeping first-seen order (few events: a linear scan is fine).
    let mut groups: Vec<(String, Vec<&CounterReading>)> = Vec::new();
    for r in readings {
        let base = format!("counterpoint_{}", sanitize_metric_name(&r.event));
        match groups.iter_mut().find(|(name, _)| *name == base) {
            Some((_, rs)) => rs.push(r),
            None => groups.push((base, vec![r])),
        }
    }
    let mut out = Vec::with_capacity(groups.len() * 6);
    for (base, rs) in groups {
        let mut events: Vec<&str> = Vec::new();
        for r in &rs {
            if !events.contains(&r.event.as_str()) {
                events.push(&r.event);
            }
        }
        let events = events.join(", ");
        let labels = |r: &CounterReading| {
            let mut l = r.labels.clone();
            if !l.iter().any(|(k, _)| k == "event") {
                l.push(("event".to_string(), r.event.clone()));
            }
            l
        };
        let family = |suffix: &str,
                      help: String,
                      kind: Kind,
                      unit: Option<&str>,
                      value: &dyn Fn(&CounterReading) -> f64| Family {
            name: format!("{base}{suffix}"),
            help,
            kind,
            unit: unit.map(str::to_string),
            samples: rs
                .iter()
                .map(|r| Sample {
                    labels: labels(r),
                    value: value(r),
                })
                .collect(),
        };
        // The software clocks count nanoseconds: exposed in seconds, Prometheus's base unit,
        // with the unit in the name (`_seconds_total`; promtool refuses `nanoseconds`). A unit
        // conversion only: still the kernel's count, not scaled for multiplexing.
        let clock = rs.iter().all(|r| counts_nanoseconds(&r.event));
        // A division, so that a count of nanoseconds gives the nearest double to its seconds.
        let (unit, counts_per_unit, in_unit) = if clock {
            (
                Some("seconds"),
                1e9,
                " in seconds (the kernel counts nanoseconds)",
            )
        } else {
            (None, 1.0, "")
        };
        out.push(family(
            "",
            format!("Raw count of {events} as read from the kernel{in_unit}, not scaled for multiplexing (see _coverage)."),
            Kind::Counter,
            unit,
            &|r| r.raw as f64 / counts_per_unit,
        ));
        out.push(family(
            "_enabled_seconds",
            format!("Time {events} was enabled."),
            Kind::Counter,
            Some("seconds"),
            &|r| r.enabled_ns as f64 / 1e9,
        ));
        out.push(family(
            "_running_seconds",
            format!("Time {events} was counting on the PMU (less than enabled when multiplexed)."),
            Kind::Counter,
            Some("seconds"),
            &|r| r.running_ns as f64 / 1e9,
        ));
        out.push(family(
            "_coverage",
            format!("Fraction of the enabled time {events} was counted: running / enabled (1 before it was enabled)."),
            Kind::Gauge,
            None,
            &coverage,
        ));
        out.push(family(
            "_scaled",
            format!("Estimate of {events} extrapolated to the enabled time: raw * enabled / running (NaN if it never ran){in_unit}; not monotonic."),
            Kind::Gauge,
            unit,
            &|r| scaled(r) / counts_per_unit,
        ));
        out.push(family(
            "_multiplexed",
            format!("1 when {events} ran for less than its enabled time, so the scaled estimate differs from the raw count."),
            Kind::Gauge,
            None,
            &|r| if coverage(r) < 1.0 { 1.0 } else { 0.0 },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(event: &str, raw: u64, enabled_ns: u64, running_ns: u64) -> CounterReading {
        CounterReading {
            event: event.into(),
            labels: vec![],
            raw,
            enabled_ns,
            running_ns,
        }
    }

    #[test]
    fn coverage_and_scaled_cases() {
        let full = reading("x", 10, 100, 100);
        assert_eq!((coverage(&full), scaled(&full)), (1.0, 10.0));
        let half = reading("x", 10, 100, 50);
        assert_eq!((coverage(&half), scaled(&half)), (0.5, 20.0));
        let never_enabled = reading("x", 0, 0, 0);
        assert_eq!(
            (coverage(&never_enabled), scaled(&never_enabled)),
            (1.0, 0.0)
        );
        let never_ran = reading("x", 0, 100, 0);
        assert_eq!(coverage(&never_ran), 0.0);
        assert!(scaled(&never_ran).is_nan());
        let over = reading("x", 7, 100, 101);
        assert_eq!((coverage(&over), scaled(&over)), (1.0, 7.0));
    }

    #[test]
    fn six_families_per_event_in_order_with_event_label() {
        let mut a = reading("cs:u", 5, 2_000_000_000, 1_000_000_000);
        a.labels.push(("cpu".into(), "1".into()));
        let b = reading("cs-u", 6, 1, 1);
        let c = reading("task-clock", 7, 1, 1);
        let fams = counter_families(&[a, b, c]);
        let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "counterpoint_cs_u",
                "counterpoint_cs_u_enabled_seconds",
                "counterpoint_cs_u_running_seconds",
                "counterpoint_cs_u_coverage",
                "counterpoint_cs_u_scaled",
                "counterpoint_cs_u_multiplexed",
                "counterpoint_task_clock",
                "counterpoint_task_clock_enabled_seconds",
                "counterpoint_task_clock_running_seconds",
                "counterpoint_task_clock_coverage",
                "counterpoint_task_clock_scaled",
                "counterpoint_task_clock_multiplexed",
            ]
        );
        // Both spellings share the family and stay apart through the event label.
        assert_eq!(fams[0].samples.len(), 2);
        assert_eq!(
            fams[0].samples[0].labels,
            vec![("cpu".into(), "1".into()), ("event".into(), "cs:u".into())]
        );
        assert_eq!(
            fams[0].samples[1].labels,
            vec![("event".into(), "cs-u".into())]
        );
        assert!(fams[0].help.contains("cs:u, cs-u"));
        assert_eq!(fams[1].samples[0].value, 2.0);
        assert_eq!(fams[2].samples[0].value, 1.0);
        assert_eq!(fams[3].samples[0].value, 0.5);
        assert_eq!(fams[4].samples[0].value, 10.0);
        assert_eq!(fams[5].samples[0].value, 1.0);
        assert_eq!(fams[5].samples[1].value, 0.0);
        // task-clock counts nanoseconds: its count and estimate are in seconds, and say so.
        assert_eq!(fams[6].unit.as_deref(), Some("seconds"));
        assert_eq!(fams[6].samples[0].value, 7e-9);
        assert_eq!(fams[10].unit.as_deref(), Some("seconds"));
        assert_eq!(fams[3].unit, None);
        assert!(fams[0].unit.is_none());
        assert_eq!(fams[1].unit.as_deref(), Some("seconds"));
        assert_eq!(fams[0].kind, Kind::Counter);
        assert_eq!(fams[3].kind, Kind::Gauge);
    }

    #[test]
    fn an_event_label_given_by_the_caller_is_kept() {
        let mut r = reading("x", 1, 1, 1);
        r.labels.push(("event".into(), "mine".into()));
        let fams = counter_families(&[r]);
        assert_eq!(
            fams[0].samples[0].labels,
            vec![("event".into(), "mine".into())]
        );
    }
}
