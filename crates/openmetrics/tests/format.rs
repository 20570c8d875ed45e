//! The text formats: a golden file for fixed readings, escaping, `# EOF`, and properties that
//! no input yields a line outside the OpenMetrics grammar.

use counterpoint_openmetrics::{
    counter_families, escape_label_value, render, render_prometheus_text, CounterReading, Family,
    Kind, Sample,
};
use proptest::prelude::*;
use regex::Regex;
use std::path::PathBuf;
use std::sync::OnceLock;

fn reading(event: &str, labels: &[(&str, &str)], raw: u64, en: u64, run: u64) -> CounterReading {
    CounterReading {
        event: event.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        raw,
        enabled_ns: en,
        running_ns: run,
    }
}

/// The fixed input of the golden file: a fully counted software event on two CPUs, a
/// multiplexed hardware event, one never enabled, one enabled but never scheduled, an odd
/// event name and label values that need escaping.
fn golden_readings() -> Vec<CounterReading> {
    vec![
        reading(
            "task-clock",
            &[("cpu", "0")],
            1_500_000_000,
            1_500_000_000,
            1_500_000_000,
        ),
        reading(
            "task-clock",
            &[("cpu", "1")],
            250_000_000,
            1_500_000_000,
            1_500_000_000,
        ),
        reading(
            "cycles",
            &[("consumer", "agent")],
            3_000_000,
            2_000_000_000,
            500_000_000,
        ),
        reading("cache-misses", &[("consumer", "new")], 0, 0, 0),
        reading(
            "instructions",
            &[("consumer", "starved")],
            0,
            1_000_000_000,
            0,
        ),
        reading(
            "cpu/event=0x3c,umask=0x0/u",
            &[("consumer", "a \"quoted\" \\ name\nwith newline")],
            42,
            10,
            10,
        ),
    ]
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/counters.om")
}

#[test]
fn golden_openmetrics_text() {
    let text = render(&counter_families(&golden_readings()));
    let path = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("write golden file");
    }
    // The golden file is part of the repository: a missing one is a failure, not a skip.
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(text, want, "render differs from {}", path.display());
    check_openmetrics(&text).unwrap();
}

#[test]
fn golden_values_mean_what_the_docs_say() {
    let text = render(&counter_families(&golden_readings()));
    let has = |line: &str| {
        assert!(
            text.lines().any(|l| l == line),
            "missing line {line:?} in\n{text}"
        )
    };
    // Raw count, never scaled, as a _total counter.
    has("counterpoint_cycles_total{consumer=\"agent\",event=\"cycles\"} 3000000");
    has("counterpoint_cycles_coverage{consumer=\"agent\",event=\"cycles\"} 0.25");
    has("counterpoint_cycles_scaled{consumer=\"agent\",event=\"cycles\"} 12000000");
    has("counterpoint_cycles_multiplexed{consumer=\"agent\",event=\"cycles\"} 1");
    has("counterpoint_cycles_enabled_seconds_total{consumer=\"agent\",event=\"cycles\"} 2");
    has("counterpoint_cycles_running_seconds_total{consumer=\"agent\",event=\"cycles\"} 0.5");
    has("# UNIT counterpoint_cycles_running_seconds seconds");
    has("# TYPE counterpoint_cycles counter");
    has("# TYPE counterpoint_cycles_coverage gauge");
    // Fully counted: coverage 1, estimate equal to the raw count, not flagged.
    has("counterpoint_task_clock_coverage{cpu=\"1\",event=\"task-clock\"} 1");
    // The software clocks count nanoseconds: in seconds, the unit in the name (probe, session
    // 22: `counterpoint_task_clock_total` held nanoseconds and said nothing of it).
    has("counterpoint_task_clock_scaled_seconds{cpu=\"1\",event=\"task-clock\"} 0.25");
    has("counterpoint_task_clock_seconds_total{cpu=\"0\",event=\"task-clock\"} 1.5");
    has("# UNIT counterpoint_task_clock_seconds seconds");
    has("counterpoint_task_clock_multiplexed{cpu=\"1\",event=\"task-clock\"} 0");
    // Never enabled: nothing missed. Never ran: coverage 0, no estimate.
    has("counterpoint_cache_misses_coverage{consumer=\"new\",event=\"cache-misses\"} 1");
    has("counterpoint_instructions_coverage{consumer=\"starved\",event=\"instructions\"} 0");
    has("counterpoint_instructions_scaled{consumer=\"starved\",event=\"instructions\"} NaN");
    // Sanitized name, escaped label value, original spelling kept in the event label.
    has("counterpoint_cpu_event_0x3c_umask_0x0_u_total{consumer=\"a \\\"quoted\\\" \\\\ name\\nwith newline\",event=\"cpu/event=0x3c,umask=0x0/u\"} 42");
    assert!(text.ends_with("\n# EOF\n"));
    assert_eq!(text.matches("# EOF").count(), 1);
}

#[test]
fn prometheus_text_has_the_same_samples_without_eof_or_unit() {
    let fams = counter_families(&golden_readings());
    let om = render(&fams);
    let prom = render_prometheus_text(&fams);
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(samples(&om), samples(&prom));
    assert!(!prom.contains("# EOF") && !prom.contains("# UNIT"));
    assert!(prom.contains("# TYPE counterpoint_cycles_total counter\n"));
    assert!(prom.contains("# TYPE counterpoint_cycles_coverage gauge\n"));
}

/// Prometheus' own parser and linter, where installed (`promtool check metrics` reads the
/// 0.0.4 text format on stdin).
#[test]
fn promtool_accepts_the_prometheus_text() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("skipped: promtool not installed (scripts/setup.d/prometheus.sh installs it)");
        return;
    };
    let text = render_prometheus_text(&counter_families(&golden_readings()));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success(),
        "promtool check metrics failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- an OpenMetrics line checker, written from the 1.0 ABNF ----

struct Grammar {
    name: Regex,
    sample: Regex,
    label: Regex,
    help: Regex,
}

fn grammar() -> &'static Grammar {
    static G: OnceLock<Grammar> = OnceLock::new();
    G.get_or_init(|| {
        let value = r"(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|NaN|[+-]Inf)";
        let escaped = r#"(?:[^"\\\n]|\\[n"\\])*"#;
        Grammar {
            name: Regex::new(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$").unwrap(),
            sample: Regex::new(&format!(
                r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{(.*)\}})? ({value})$"
            ))
            .unwrap(),
            label: Regex::new(&format!(
                r#"^([a-zA-Z_][a-zA-Z0-9_]*)="({escaped})"(?:,|$)"#
            ))
            .unwrap(),
            help: Regex::new(&format!(r"^{escaped}$")).unwrap(),
        }
    })
}

/// Check every line and the structure: metadata before samples, sample names belonging to the
/// current family (`_total` for counters), unit suffixes, labels unique and not reserved, one
/// final `# EOF`.
fn check_openmetrics(text: &str) -> Result<(), String> {
    let g = grammar();
    let body = text
        .strip_suffix("# EOF\n")
        .ok_or_else(|| "does not end in \"# EOF\\n\"".to_string())?;
    let mut family: Option<(String, String)> = None; // (name, type)
    let mut seen_families: Vec<String> = Vec::new();
    for (i, line) in body.split_terminator('\n').enumerate() {
        let err = |m: &str| Err(format!("line {}: {m}: {line:?}", i + 1));
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let Some((name, kind)) = rest.split_once(' ') else {
                return err("TYPE without a type");
            };
            if !g.name.is_match(name) || !["counter", "gauge"].contains(&kind) {
                return err("bad TYPE");
            }
            if seen_families.iter().any(|f| f == name) {
                return err("family repeated");
            }
            seen_families.push(name.to_string());
            family = Some((name.to_string(), kind.to_string()));
        } else if let Some(rest) = line.strip_prefix("# UNIT ") {
            let Some((name, unit)) = rest.split_once(' ') else {
                return err("UNIT without a unit");
            };
            if family.as_ref().map(|f| f.0.as_str()) != Some(name)
                || !name.ends_with(&format!("_{unit}"))
                || unit.is_empty()
                || !unit.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return err("bad UNIT");
            }
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            if family.as_ref().map(|f| f.0.as_str()) != Some(name) || !g.help.is_match(help) {
                return err("bad HELP");
            }
        } else if line.starts_with('#') {
            return err("unknown comment line");
        } else {
            let Some(c) = g.sample.captures(line) else {
                return err("not a sample line");
            };
            let Some((fname, kind)) = &family else {
                return err("sample before any TYPE");
            };
            let want = if kind == "counter" {
                format!("{fname}_total")
            } else {
                fname.clone()
            };
            if c[1] != want {
                return err("sample name not of its family");
            }
            if let Some(labels) = c.get(2) {
                let mut rest = labels.as_str();
                let mut names: Vec<String> = Vec::new();
                while !rest.is_empty() {
                    let Some(m) = g.label.captures(rest) else {
                        return err("bad label");
                    };
                    let n = m[1].to_string();
                    if n.starts_with("__") || names.contains(&n) {
                        return err("reserved or repeated label name");
                    }
                    names.push(n);
                    rest = &rest[m[0].len()..];
                }
                if labels.as_str().ends_with(',') {
                    return err("trailing comma");
                }
            }
        }
    }
    Ok(())
}

fn unescape(v: &str) -> String {
    let mut out = String::new();
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some(c) => out.push(c),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_checker_rejects_what_it_should() {
    assert!(check_openmetrics("# EOF\n").is_ok());
    assert!(check_openmetrics("").is_err());
    assert!(check_openmetrics("# TYPE a counter\na 1\n# EOF\n").is_err());
    assert!(check_openmetrics("# TYPE a gauge\na{x=\"\"\"} 1\n# EOF\n").is_err());
    assert!(check_openmetrics("# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n# EOF\n").is_err());
    assert!(check_openmetrics("# TYPE a gauge\na inf\n# EOF\n").is_err());
    assert!(check_openmetrics("# TYPE a-b gauge\n# EOF\n").is_err());
    assert!(check_openmetrics("# TYPE a_s gauge\n# UNIT a_s bytes\n# EOF\n").is_err());
    assert!(check_openmetrics("# TYPE a gauge\na{x=\"1\"} -2.5e3\n# EOF\n").is_ok());
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z_:/=,.\\-\"\\\\\n ]{0,12}",
        Just(String::new()),
        Just("__reserved".to_string()),
        Just("total".to_string()),
    ]
}

fn arb_family() -> impl Strategy<Value = Family> {
    (
        arb_string(),
        arb_string(),
        prop_oneof![Just(Kind::Counter), Just(Kind::Gauge)],
        proptest::option::of(arb_string()),
        proptest::collection::vec(
            (
                proptest::collection::vec((arb_string(), arb_string()), 0..4),
                prop_oneof![
                    any::<f64>(),
                    Just(f64::NAN),
                    Just(f64::INFINITY),
                    Just(-0.0)
                ],
            ),
            0..4,
        ),
    )
        .prop_map(|(name, help, kind, unit, samples)| Family {
            name,
            help,
            kind,
            unit,
            samples: samples
                .into_iter()
                .map(|(labels, value)| Sample { labels, value })
                .collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any one family renders to valid lines (several families may legitimately collide in
    /// name, which is the caller's to avoid and is not a line-level property).
    #[test]
    fn render_never_writes_an_invalid_line(f in arb_family()) {
        let text = render(std::slice::from_ref(&f));
        prop_assert!(check_openmetrics(&text).is_ok(), "{:?}\n{}", check_openmetrics(&text), text);
        let sample_lines = text.lines().filter(|l| !l.starts_with('#')).count();
        prop_assert_eq!(sample_lines, f.samples.len());
        // 0.0.4: every line is metadata or a sample of the same grammar.
        let prom = render_prometheus_text(std::slice::from_ref(&f));
        for line in prom.lines().filter(|l| !l.starts_with('#')) {
            prop_assert!(grammar().sample.is_match(line), "{}", line);
        }
    }

    #[test]
    fn label_values_round_trip(v in any::<String>()) {
        prop_assert_eq!(unescape(&escape_label_value(&v)), v);
    }

    /// Whatever the readings, the families render valid text, the raw count is exposed
    /// unchanged and the coverage lies in [0, 1].
    #[test]
    fn counter_families_are_valid_and_honest(
        rs in proptest::collection::vec(
            (arb_string(), proptest::collection::vec((arb_string(), arb_string()), 0..3),
             any::<u64>(), any::<u64>(), any::<u64>()),
            0..5)
    ) {
        // One reading per event name, so no two samples share labels.
        let mut readings: Vec<CounterReading> = Vec::new();
        for (event, labels, raw, en, run) in rs {
            if readings.iter().any(|r| r.event == event) { continue; }
            readings.push(CounterReading { event, labels, raw, enabled_ns: en, running_ns: run });
        }
        let fams = counter_families(&readings);
        for f in &fams {
            let text = render(std::slice::from_ref(f));
            prop_assert!(check_openmetrics(&text).is_ok(), "{:?}\n{}", check_openmetrics(&text), text);
            if f.name.ends_with("_coverage") {
                for s in &f.samples {
                    prop_assert!((0.0..=1.0).contains(&s.value));
                }
            }
        }
        // The raw count is exposed unchanged (readings with their own `event` label aside).
        for r in readings.iter().filter(|r| !r.labels.iter().any(|(k, _)| k == "event")) {
            let exposed = fams.iter()
                .filter(|f| f.kind == Kind::Counter && f.help.starts_with("Raw count"))
                .flat_map(|f| &f.samples)
                .find(|s| s.labels.last() == Some(&("event".to_string(), r.event.clone())));
            prop_assert_eq!(exposed.map(|s| s.value), Some(r.raw as f64));
        }
        let all = render(&fams);
        prop_assert!(all.ends_with("# EOF\n"));
    }
}
