//! The OpenMetrics 1.0 and Prometheus 0.0.4 text formats.
//!
//! Both writers accept any [`Family`]: names are sanitized to the metric-name grammar, label
//! names to the label-name grammar (a later label whose sanitized name repeats an earlier one
//! is dropped, since a repeated label name makes the whole line invalid), and label values and
//! help text are escaped. What they cannot check line by line is left to the caller: two
//! families with the same name, or two samples with the same labels.

use std::fmt::Write as _;

use crate::family::{Family, Kind};

/// Replace every character outside `[a-zA-Z0-9_]` with `_`, collapse runs of `_`, trim them at
/// both ends, and put `_` in front of a leading digit (or return `_` for an empty result). The
/// result matches `[a-zA-Z_][a-zA-Z0-9_]*` and contains no `__` (a prefix Prometheus reserves),
/// so it is both a valid metric name and a valid label name. Colons, legal in metric names,
/// are replaced because Prometheus reserves them for recording rules.
pub fn sanitize_metric_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '_' };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A label name: the same rules as [`sanitize_metric_name`].
pub fn sanitize_label_name(name: &str) -> String {
    sanitize_metric_name(name)
}

/// Escape a label value for either format: `\` as `\\`, `"` as `\"`, newline as `\n`.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text for 0.0.4, which escapes only `\` and newline (a `"` stays as is).
fn escape_help_prometheus(help: &str) -> String {
    let mut out = String::with_capacity(help.len());
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A value in the grammar both formats share: integers without a fraction, other finite values
/// in Rust's shortest round-trip form (exponent for very large or small ones), `NaN`, `+Inf`,
/// `-Inf`.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else if v.fract() == 0.0 && v.abs() < 1e16 {
        // Exact: below 2^53 every integer is representable and Display prints no fraction.
        format!("{v}")
    } else {
        format!("{v:?}")
    }
}

/// The rendered family name and unit: sanitized; a counter's trailing `_total` removed (the
/// sample adds it back); the unit appended when the name does not already end in it, because
/// OpenMetrics requires a family with a unit to be named `..._UNIT`.
fn family_name(f: &Family) -> (String, Option<String>) {
    let mut name = sanitize_metric_name(&f.name);
    if f.kind == Kind::Counter {
        if let Some(stripped) = name.strip_suffix("_total") {
            if !stripped.is_empty() {
                name = stripped.to_string();
            }
        }
    }
    let unit = f
        .unit
        .as_deref()
        .filter(|u| !u.is_empty())
        .map(sanitize_metric_name)
        .map(|u| u.trim_start_matches('_').to_string())
        .filter(|u| !u.is_empty());
    if let Some(u) = &unit {
        if !name.ends_with(&format!("_{u}")) {
            name = format!("{name}_{u}");
        }
    }
    (name, unit)
}

fn write_labels(out: &mut String, labels: &[(String, String)]) {
    if labels.is_empty() {
        return;
    }
    let mut seen: Vec<String> = Vec::with_capacity(labels.len());
    out.push('{');
    for (k, v) in labels {
        let k = sanitize_label_name(k);
        if seen.contains(&k) {
            continue;
        }
        if !seen.is_empty() {
            out.push(',');
        }
        let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
        seen.push(k);
    }
    out.push('}');
}

fn write_samples(out: &mut String, sample_name: &str, f: &Family) {
    for s in &f.samples {
        out.push_str(sample_name);
        write_labels(out, &s.labels);
        out.push(' ');
        out.push_str(&format_value(s.value));
        out.push('\n');
    }
}

/// OpenMetrics 1.0 text (`application/openmetrics-text; version=1.0.0`), ending in `# EOF`.
pub fn render(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        let (name, unit) = family_name(f);
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# TYPE {name} {kind}");
        if let Some(u) = unit {
            let _ = writeln!(out, "# UNIT {name} {u}");
        }
        if !f.help.is_empty() {
            let _ = writeln!(out, "# HELP {name} {}", escape_label_value(&f.help));
        }
        let sample_name = match f.kind {
            Kind::Counter => format!("{name}_total"),
            Kind::Gauge => name,
        };
        write_samples(&mut out, &sample_name, f);
    }
    out.push_str("# EOF\n");
    out
}

/// The Prometheus text format 0.0.4 (`text/plain; version=0.0.4`): the same samples, metadata
/// named after the sample (`..._total` for counters), no `UNIT` line and no `# EOF`.
pub fn render_prometheus_text(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        let (name, _) = family_name(f);
        let (sample_name, kind) = match f.kind {
            Kind::Counter => (format!("{name}_total"), "counter"),
            Kind::Gauge => (name, "gauge"),
        };
        if !f.help.is_empty() {
            let _ = writeln!(
                out,
                "# HELP {sample_name} {}",
                escape_help_prometheus(&f.help)
            );
        }
        let _ = writeln!(out, "# TYPE {sample_name} {kind}");
        write_samples(&mut out, &sample_name, f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Sample;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize_metric_name("task-clock"), "task_clock");
        assert_eq!(sanitize_metric_name("cs:u"), "cs_u");
        assert_eq!(
            sanitize_metric_name("cpu/event=0x3c,umask=1/"),
            "cpu_event_0x3c_umask_1"
        );
        assert_eq!(sanitize_metric_name("__x__y__"), "x_y");
        assert_eq!(sanitize_metric_name("1st"), "_1st");
        assert_eq!(sanitize_metric_name(""), "_");
        assert_eq!(sanitize_metric_name("---"), "_");
        assert_eq!(sanitize_metric_name("Ünïcode"), "n_code");
    }

    #[test]
    fn values_are_formatted_in_the_grammar() {
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(12345.0), "12345");
        assert_eq!(format_value(0.75), "0.75");
        assert_eq!(format_value(-2.5), "-2.5");
        assert_eq!(format_value(1e300), "1e300");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(u64::MAX as f64), "1.8446744073709552e19");
    }

    #[test]
    fn escaping_and_repeated_labels() {
        let f = Family {
            name: "x_total".into(),
            help: "a \"quoted\" \\ help\nline".into(),
            kind: Kind::Counter,
            unit: None,
            samples: vec![Sample {
                labels: vec![
                    ("a-b".into(), "q\"b\\n\nx".into()),
                    ("a_b".into(), "dropped".into()),
                ],
                value: 1.0,
            }],
        };
        let om = render(std::slice::from_ref(&f));
        assert_eq!(
            om,
            "# TYPE x counter\n# HELP x a \\\"quoted\\\" \\\\ help\\nline\n\
             x_total{a_b=\"q\\\"b\\\\n\\nx\"} 1\n# EOF\n"
        );
        let prom = render_prometheus_text(&[f]);
        assert_eq!(
            prom,
            "# HELP x_total a \"quoted\" \\\\ help\\nline\n# TYPE x_total counter\n\
             x_total{a_b=\"q\\\"b\\\\n\\nx\"} 1\n"
        );
    }

    #[test]
    fn unit_is_appended_when_missing() {
        let f = |name: &str| Family {
            name: name.into(),
            help: String::new(),
            kind: Kind::Gauge,
            unit: Some("seconds".into()),
            samples: vec![],
        };
        assert_eq!(
            render(&[f("up")]),
            "# TYPE up_seconds gauge\n# UNIT up_seconds seconds\n# EOF\n"
        );
        assert_eq!(
            render(&[f("up_seconds")]),
            "# TYPE up_seconds gauge\n# UNIT up_seconds seconds\n# EOF\n"
        );
        assert_eq!(render(&[]), "# EOF\n");
    }
}
