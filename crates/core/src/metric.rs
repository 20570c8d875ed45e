//! Load metrics as formulas over events, defined once for every consumer.
//!
//! A [`Metric`] is an expression over event counts and the interval length. `stat` prints the
//! metrics whose events it counted; the agent and the simulator compute policy inputs with the
//! same formulas, so "IPC" means one thing everywhere.

use crate::event;
use crate::sample::Sample;
use serde::Serialize;

/// Expression over scaled event counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Expr {
    /// Scaled count of an event.
    Event(&'static str),
    /// Length of the interval in seconds.
    Seconds,
    /// A constant.
    Const(f64),
    /// Sum.
    Add(Box<Expr>, Box<Expr>),
    /// Difference.
    Sub(Box<Expr>, Box<Expr>),
    /// Product.
    Mul(Box<Expr>, Box<Expr>),
    /// Division; undefined (None) when the divisor is zero.
    Div(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// The scaled count of event `name`.
    pub fn ev(name: &'static str) -> Self {
        Expr::Event(name)
    }
    /// `a / b`.
    pub fn over(a: Expr, b: Expr) -> Self {
        Expr::Div(Box::new(a), Box::new(b))
    }
    /// `a * b`.
    pub fn times(a: Expr, b: Expr) -> Self {
        Expr::Mul(Box::new(a), Box::new(b))
    }
    /// Evaluate with `lookup` giving each event's scaled count; `None` if an event is missing or
    /// a divisor is zero.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<f64>, seconds: f64) -> Option<f64> {
        Some(match self {
            Expr::Event(name) => lookup(name)?,
            Expr::Seconds => seconds,
            Expr::Const(c) => *c,
            Expr::Add(a, b) => a.eval(lookup, seconds)? + b.eval(lookup, seconds)?,
            Expr::Sub(a, b) => a.eval(lookup, seconds)? - b.eval(lookup, seconds)?,
            Expr::Mul(a, b) => a.eval(lookup, seconds)? * b.eval(lookup, seconds)?,
            Expr::Div(a, b) => {
                let d = b.eval(lookup, seconds)?;
                if d == 0.0 {
                    return None;
                }
                a.eval(lookup, seconds)? / d
            }
        })
    }
    /// Event names the expression reads, in order of first appearance.
    pub fn events(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }
    fn collect(&self, out: &mut Vec<&'static str>) {
        match self {
            Expr::Event(n) => {
                if !out.contains(n) {
                    out.push(n)
                }
            }
            Expr::Seconds | Expr::Const(_) => {}
            Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) | Expr::Div(a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Event(n) => write!(f, "{n}"),
            Expr::Seconds => write!(f, "seconds"),
            Expr::Const(c) => write!(f, "{c}"),
            Expr::Add(a, b) => write!(f, "({a} + {b})"),
            Expr::Sub(a, b) => write!(f, "({a} - {b})"),
            Expr::Mul(a, b) => write!(f, "{a} * {b}"),
            Expr::Div(a, b) => match **b {
                Expr::Event(_) | Expr::Seconds | Expr::Const(_) => write!(f, "{a} / {b}"),
                _ => write!(f, "{a} / ({b})"),
            },
        }
    }
}

/// A named load metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metric {
    /// Short identifier (`ipc`, `llc_mpki`, ...), used in JSON and by policies.
    pub name: &'static str,
    /// Unit or description printed after the value, as `perf stat` does after `#`.
    pub unit: &'static str,
    /// The formula.
    pub expr: Expr,
}

impl Metric {
    /// Events the formula reads.
    pub fn events(&self) -> Vec<&'static str> {
        self.expr.events()
    }
    /// Evaluate over a sample (scaled values; interval from the sample).
    pub fn eval_sample(&self, sample: &Sample) -> Option<f64> {
        self.expr
            .eval(&|e| sample.get(e), sample.interval_ns as f64 / 1e9)
    }
}

/// Bytes moved per LLC miss in the bandwidth estimate (one cache line).
pub const CACHE_LINE_BYTES: f64 = 64.0;

/// Instructions per cycle.
pub fn ipc() -> Metric {
    Metric {
        name: "ipc",
        unit: "insn per cycle",
        expr: Expr::over(Expr::ev(event::INSTRUCTIONS), Expr::ev(event::CYCLES)),
    }
}
/// Cycles per instruction.
pub fn cpi() -> Metric {
    Metric {
        name: "cpi",
        unit: "cycles per insn",
        expr: Expr::over(Expr::ev(event::CYCLES), Expr::ev(event::INSTRUCTIONS)),
    }
}
/// LLC misses per thousand instructions.
pub fn llc_mpki() -> Metric {
    Metric {
        name: "llc_mpki",
        unit: "LLC misses per 1k insn",
        expr: Expr::over(
            Expr::times(Expr::ev(event::CACHE_MISSES), Expr::Const(1000.0)),
            Expr::ev(event::INSTRUCTIONS),
        ),
    }
}
/// Memory bandwidth estimate from LLC misses, one cache line each.
pub fn mem_bandwidth() -> Metric {
    Metric {
        name: "mem_bandwidth_bytes_per_s",
        unit: "bytes/s memory (LLC misses x 64 B)",
        expr: Expr::over(
            Expr::times(Expr::ev(event::CACHE_MISSES), Expr::Const(CACHE_LINE_BYTES)),
            Expr::Seconds,
        ),
    }
}
/// Floating-point operations per instruction.
pub fn fp_intensity() -> Metric {
    Metric {
        name: "fp_intensity",
        unit: "FP ops per insn",
        expr: Expr::over(Expr::ev(event::FP_OPS), Expr::ev(event::INSTRUCTIONS)),
    }
}
/// Context switches per second.
pub fn context_switch_rate() -> Metric {
    Metric {
        name: "context_switches_per_s",
        unit: "context switches/s",
        expr: Expr::over(Expr::ev(event::CONTEXT_SWITCHES), Expr::Seconds),
    }
}
/// CPUs utilized: task-clock (ns) over wall time.
pub fn cpu_utilization() -> Metric {
    Metric {
        name: "cpu_utilization",
        unit: "CPUs utilized",
        expr: Expr::over(
            Expr::ev(event::TASK_CLOCK),
            Expr::times(Expr::Seconds, Expr::Const(1e9)),
        ),
    }
}

/// All standard metrics, in display order.
pub fn standard() -> Vec<Metric> {
    vec![
        ipc(),
        cpi(),
        llc_mpki(),
        mem_bandwidth(),
        fp_intensity(),
        context_switch_rate(),
        cpu_utilization(),
    ]
}

/// Metrics that could be computed from a given set of available events.
pub fn available<'a>(available_events: impl Fn(&str) -> bool + 'a) -> Vec<Metric> {
    standard()
        .into_iter()
        .filter(|m| m.events().iter().all(|e| available_events(e)))
        .collect()
}

/// Evaluated metrics of one sample, by name (sorted for stable output).
pub type MetricValues = std::collections::BTreeMap<&'static str, f64>;

/// Evaluate every standard metric the sample has events for.
pub fn evaluate_all(sample: &Sample) -> MetricValues {
    standard()
        .iter()
        .filter_map(|m| m.eval_sample(sample).map(|v| (m.name, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::CounterValue;

    #[test]
    fn computes_ipc_and_mpki() {
        let mut s = Sample::new(None, 1_000_000_000);
        s.set(event::CYCLES, CounterValue::exact(2_000, 1_000_000_000));
        s.set(
            event::INSTRUCTIONS,
            CounterValue::exact(3_000, 1_000_000_000),
        );
        s.set(event::CACHE_MISSES, CounterValue::exact(6, 1_000_000_000));
        let m = evaluate_all(&s);
        assert!((m["ipc"] - 1.5).abs() < 1e-12);
        assert!((m["llc_mpki"] - 2.0).abs() < 1e-12);
        assert!((m["mem_bandwidth_bytes_per_s"] - 384.0).abs() < 1e-9);
        assert!(!m.contains_key("fp_intensity"));
    }

    #[test]
    fn formulas_print_readably() {
        assert_eq!(
            llc_mpki().expr.to_string(),
            "cache-misses * 1000 / instructions"
        );
        assert_eq!(
            cpu_utilization().expr.to_string(),
            "task-clock / (seconds * 1000000000)"
        );
    }

    #[test]
    fn zero_divisor_is_undefined() {
        let mut s = Sample::new(None, 1_000);
        s.set(event::CYCLES, CounterValue::exact(0, 1_000));
        s.set(event::INSTRUCTIONS, CounterValue::exact(10, 1_000));
        assert_eq!(ipc().eval_sample(&s), None);
    }

    #[test]
    fn availability_filters_by_events() {
        let sw = available(event::is_software);
        let names: Vec<_> = sw.iter().map(|m| m.name).collect();
        assert_eq!(names, vec!["context_switches_per_s", "cpu_utilization"]);
    }
}
