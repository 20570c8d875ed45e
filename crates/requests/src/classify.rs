//! Request classes from time alone against time plus counters (seed 000 §2.2, Figure 3).
//!
//! Features per request (each column standardized to mean 0, standard deviation 1):
//! - *time*: `ln(wall ms)`.
//! - *time + counters*: `ln(wall ms)`, `ln(task-clock ms)` (the backend's own CPU time, which
//!   other load does not stretch as it stretches wall time), `ln(1 + page faults)`,
//!   `ln(1 + context switches)`, and where a PMU counts them `ln(1 + LLC misses)` and
//!   `ln(1 + memory transactions)`.
//!
//! k-means (linfa, k-means++ start from a fixed seed) for k = 2..=10; k is the one with the
//! largest mean silhouette (ties: the smaller k). Agreement with the templates is the adjusted
//! Rand index (Hubert & Arabie): 1 is identical partitions, 0 what chance gives.

use crate::attrib::RequestRow;
use crate::RequestsError;
use linfa::prelude::*;
use linfa_clustering::KMeans;
use ndarray::Array2;
use serde::Serialize;
use std::collections::BTreeMap;

/// Which features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FeatureSet {
    /// Wall time only.
    Time,
    /// Wall time and every counter available.
    TimeAndCounters,
}

/// The feature columns of `set` that these rows have.
pub fn feature_names(rows: &[RequestRow], set: FeatureSet) -> Vec<&'static str> {
    let mut names = vec!["ln_wall_ms"];
    if set == FeatureSet::TimeAndCounters {
        let has = |e: &str| rows.iter().any(|r| r.counts.contains_key(e));
        if has("task-clock") {
            names.push("ln_task_clock_ms");
        }
        if has("page-faults") {
            names.push("ln_page_faults");
        }
        if has("context-switches") {
            names.push("ln_context_switches");
        }
        if has("llc-misses") {
            names.push("ln_llc_misses");
        }
        if has("mem-transactions") {
            names.push("ln_mem_transactions");
        }
    }
    names
}

fn value(r: &RequestRow, feature: &str) -> f64 {
    let wall_ms = (r.wall_ns as f64 / 1e6).max(1e-6);
    match feature {
        "ln_wall_ms" => wall_ms.ln(),
        "ln_page_faults" => r.get("page-faults").ln_1p(),
        "ln_context_switches" => r.get("context-switches").ln_1p(),
        // task-clock counts ns.
        "ln_task_clock_ms" => (r.get("task-clock") / 1e6).max(1e-6).ln(),
        "ln_llc_misses" => r.get("llc-misses").ln_1p(),
        "ln_mem_transactions" => r.get("mem-transactions").ln_1p(),
        _ => 0.0,
    }
}

/// Standardized feature matrix (rows × features).
pub fn features(rows: &[RequestRow], names: &[&str]) -> Array2<f64> {
    let mut x = Array2::zeros((rows.len(), names.len()));
    for (i, r) in rows.iter().enumerate() {
        for (j, f) in names.iter().enumerate() {
            x[[i, j]] = value(r, f);
        }
    }
    for mut col in x.columns_mut() {
        let n = col.len().max(1) as f64;
        let mean = col.sum() / n;
        let sd = (col.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        // A constant column carries no information: zero it rather than divide by zero.
        col.mapv_inplace(|v| if sd > 0.0 { (v - mean) / sd } else { 0.0 });
    }
    x
}

/// k-means labels for `k` clusters.
pub fn kmeans(x: &Array2<f64>, k: usize) -> Result<Vec<usize>, RequestsError> {
    let ds = DatasetBase::from(x.clone());
    let model = KMeans::params(k)
        .max_n_iterations(300)
        .tolerance(1e-6)
        .fit(&ds)
        .map_err(|e| RequestsError::Cluster(e.to_string()))?;
    Ok(model.predict(x).to_vec())
}

/// Mean silhouette of a labelling (points in singleton clusters count 0).
pub fn silhouette(x: &Array2<f64>, labels: &[usize]) -> f64 {
    let n = labels.len();
    if n < 2 {
        return 0.0;
    }
    let k = labels.iter().max().map_or(0, |m| m + 1);
    let size: Vec<usize> = (0..k)
        .map(|c| labels.iter().filter(|&&l| l == c).count())
        .collect();
    let dist = |i: usize, j: usize| -> f64 {
        x.row(i)
            .iter()
            .zip(x.row(j).iter())
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let mut total = 0.0;
    for i in 0..n {
        if size[labels[i]] <= 1 {
            continue;
        }
        let mut sums = vec![0.0; k];
        for j in 0..n {
            if j != i {
                sums[labels[j]] += dist(i, j);
            }
        }
        let a = sums[labels[i]] / (size[labels[i]] - 1) as f64;
        let b = (0..k)
            .filter(|&c| c != labels[i] && size[c] > 0)
            .map(|c| sums[c] / size[c] as f64)
            .fold(f64::INFINITY, f64::min);
        if b.is_finite() && a.max(b) > 0.0 {
            total += (b - a) / a.max(b);
        }
    }
    total / n as f64
}

/// Adjusted Rand index of two labellings of the same items.
pub fn adjusted_rand_index<A: Ord + Clone, B: Ord + Clone>(a: &[A], b: &[B]) -> f64 {
    let n = a.len().min(b.len());
    let mut table: BTreeMap<(A, B), u64> = BTreeMap::new();
    let mut ra: BTreeMap<A, u64> = BTreeMap::new();
    let mut rb: BTreeMap<B, u64> = BTreeMap::new();
    for i in 0..n {
        *table.entry((a[i].clone(), b[i].clone())).or_default() += 1;
        *ra.entry(a[i].clone()).or_default() += 1;
        *rb.entry(b[i].clone()).or_default() += 1;
    }
    let c2 = |m: u64| (m * m.saturating_sub(1)) as f64 / 2.0;
    let index: f64 = table.values().map(|&m| c2(m)).sum();
    let sa: f64 = ra.values().map(|&m| c2(m)).sum();
    let sb: f64 = rb.values().map(|&m| c2(m)).sum();
    let total = c2(n as u64);
    if total == 0.0 {
        return 1.0;
    }
    let expected = sa * sb / total;
    let max = (sa + sb) / 2.0;
    if (max - expected).abs() < f64::EPSILON {
        return 1.0;
    }
    (index - expected) / (max - expected)
}

/// One clustering.
#[derive(Clone, Debug, Serialize)]
pub struct Clustering {
    /// Features used.
    pub set: FeatureSet,
    /// Their columns.
    pub features: Vec<&'static str>,
    /// Chosen k (largest mean silhouette).
    pub k: usize,
    /// Mean silhouette per k tried.
    pub silhouette_by_k: BTreeMap<usize, f64>,
    /// Adjusted Rand index of the chosen clustering against the templates.
    pub ari: f64,
    /// Adjusted Rand index with k = the number of templates (for comparison, not chosen).
    pub ari_at_template_count: f64,
    /// Cluster of each request, in row order.
    pub labels: Vec<usize>,
}

/// Cluster `rows` on `set`, k chosen by silhouette over 2..=10.
pub fn cluster(rows: &[RequestRow], set: FeatureSet) -> Result<Clustering, RequestsError> {
    if rows.len() < 11 {
        return Err(RequestsError::Invalid(format!(
            "clustering needs at least 11 requests, got {}",
            rows.len()
        )));
    }
    let names = feature_names(rows, set);
    let x = features(rows, &names);
    let truth: Vec<&str> = rows.iter().map(|r| r.class.as_str()).collect();
    let mut best: Option<(usize, f64, Vec<usize>)> = None;
    let mut by_k = BTreeMap::new();
    for k in 2..=10 {
        let labels = kmeans(&x, k)?;
        let s = silhouette(&x, &labels);
        by_k.insert(k, s);
        if best.as_ref().map_or(true, |(_, bs, _)| s > *bs + 1e-12) {
            best = Some((k, s, labels));
        }
    }
    let (k, _, labels) = best.ok_or_else(|| RequestsError::Cluster("no k tried".into()))?;
    let templates = truth
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let at_t = kmeans(&x, templates.max(2))?;
    Ok(Clustering {
        set,
        features: names,
        k,
        silhouette_by_k: by_k,
        ari: adjusted_rand_index(&labels, &truth),
        ari_at_template_count: adjusted_rand_index(&at_t, &truth),
        labels,
    })
}

/// The Figure 3 analogue: wall time (ms, log axis) against the best memory-intensity feature
/// available (memory transactions per µs of CPU where a PMU counts them, else page faults per
/// ms of task-clock), one colour per template, legend outside the data area. Returns the SVG
/// text and the y feature's label.
pub fn scatter_svg(rows: &[RequestRow]) -> Result<(String, String), RequestsError> {
    use plotters::prelude::*;
    let has_mem = rows
        .iter()
        .any(|r| r.counts.contains_key("mem-transactions"));
    type Feature = Box<dyn Fn(&RequestRow) -> f64>;
    let (ylabel, yval): (String, Feature) = if has_mem {
        (
            "memory transactions per µs of CPU".into(),
            Box::new(|r: &RequestRow| {
                r.get("mem-transactions") / (r.get("task-clock") / 1e3).max(1e-9)
            }),
        )
    } else {
        (
            "page faults per ms of task-clock (no PMU: memory transactions not countable)".into(),
            Box::new(|r: &RequestRow| r.get("page-faults") / (r.get("task-clock") / 1e6).max(1e-9)),
        )
    };
    let pts: Vec<(String, f64, f64)> = rows
        .iter()
        .map(|r| (r.class.clone(), (r.wall_ns as f64 / 1e6).max(1e-3), yval(r)))
        .collect();
    let classes: Vec<String> = pts
        .iter()
        .map(|p| p.0.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let (xmin, xmax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let ymax = pts.iter().fold(0.0f64, |a, p| a.max(p.2)).max(1e-6);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 540)).into_drawing_area();
        let err =
            |e: &dyn std::fmt::Display| RequestsError::Invalid(format!("drawing the scatter: {e}"));
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (plot, legend) = root.split_horizontally(720);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                "Requests: wall time vs memory intensity",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((xmin * 0.8..xmax * 1.25).log_scale(), 0.0..ymax * 1.08)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("wall time per request (ms, log)")
            .y_desc(ylabel.as_str())
            .draw()
            .map_err(|e| err(&e))?;
        for (ci, c) in classes.iter().enumerate() {
            let color = Palette99::pick(ci).to_rgba();
            chart
                .draw_series(
                    pts.iter()
                        .filter(|p| &p.0 == c)
                        .map(|p| Circle::new((p.1, p.2), 3, color.filled())),
                )
                .map_err(|e| err(&e))?;
        }
        // Legend in its own area to the right: it never covers a point.
        for (ci, c) in classes.iter().enumerate() {
            let y = 60 + 24 * ci as i32;
            let color = Palette99::pick(ci).to_rgba();
            legend
                .draw(&Circle::new((20, y), 5, color.filled()))
                .map_err(|e| err(&e))?;
            legend
                .draw(&Text::new(c.clone(), (34, y - 7), ("sans-serif", 15)))
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok((svg, ylabel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ari_is_one_for_relabelled_partitions_and_near_zero_for_unrelated() {
        let a = [0, 0, 1, 1, 2, 2];
        let b = ["x", "x", "y", "y", "z", "z"];
        assert!((adjusted_rand_index(&a, &b) - 1.0).abs() < 1e-12);
        // Hand-computed: contingency {1,1,1,1,1,1} vs rows (3,3), cols (2,2,2): index 0,
        // expected 6·3/15 = 1.2, max 4.5 → -1.2/3.3.
        let c = [0, 1, 2, 0, 1, 2];
        let d = [0, 0, 0, 1, 1, 1];
        assert!((adjusted_rand_index(&c, &d) - (-1.2 / 3.3)).abs() < 1e-12);
    }

    #[test]
    fn silhouette_prefers_the_true_grouping() {
        let x = Array2::from_shape_vec((6, 1), vec![0.0, 0.1, 0.2, 10.0, 10.1, 10.2]).unwrap();
        let good = silhouette(&x, &[0, 0, 0, 1, 1, 1]);
        let bad = silhouette(&x, &[0, 1, 0, 1, 0, 1]);
        assert!(good > 0.9 && bad < 0.0, "{good} {bad}");
    }

    fn row(id: u64, class: &str, wall_ms: f64, faults: f64) -> RequestRow {
        let mut counts = BTreeMap::new();
        counts.insert(
            "page-faults".to_string(),
            crate::attrib::Delta {
                value: faults,
                coverage: 1.0,
            },
        );
        counts.insert(
            "task-clock".to_string(),
            // CPU time varies independently of wall time (which other load stretches).
            crate::attrib::Delta {
                value: (5.0 + 0.1 * ((id * 53) % 7) as f64) * 1e6,
                coverage: 1.0,
            },
        );
        RequestRow {
            id,
            client: 0,
            server_tid: 1,
            class: class.into(),
            start_ns: 0,
            wall_ns: (wall_ms * 1e6) as u64,
            rows: Some(1),
            counts,
        }
    }

    #[test]
    fn a_counter_separates_classes_that_time_alone_cannot() {
        // Two templates with the same times, one faulting 100x more: the paper's Q3 vs Q6.
        let rows: Vec<RequestRow> = (0..40)
            .map(|i| {
                let t = 10.0 + 0.1 * ((i * 37) % 11) as f64;
                if i % 2 == 0 {
                    row(i, "scan", t, 5.0 + (i % 3) as f64)
                } else {
                    row(i, "hash", t, 500.0 + (i % 3) as f64)
                }
            })
            .collect();
        let time = cluster(&rows, FeatureSet::Time).unwrap();
        let both = cluster(&rows, FeatureSet::TimeAndCounters).unwrap();
        assert!(time.ari_at_template_count < 0.2, "{time:?}");
        assert!(both.ari_at_template_count > 0.9, "{both:?}");
        assert!(both.ari > time.ari, "{} vs {}", both.ari, time.ari);
        let (svg, y) = scatter_svg(&rows).unwrap();
        assert!(svg.contains("<svg") && y.contains("page faults"));
    }

    #[test]
    fn the_scatter_keeps_its_legend_outside_the_data() {
        let rows: Vec<RequestRow> = (0..30)
            .map(|i| {
                row(
                    i,
                    ["Q1", "Q3", "Q6"][(i % 3) as usize],
                    5.0 + i as f64,
                    (i * 7 % 40) as f64,
                )
            })
            .collect();
        let (svg, _) = scatter_svg(&rows).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let num = |n: &roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
        let circles: Vec<(f64, f64)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle"))
            .filter_map(|n| Some((num(&n, "cx")?, num(&n, "r")?)))
            .collect();
        let data: Vec<f64> = circles.iter().filter(|c| c.1 < 4.0).map(|c| c.0).collect();
        assert_eq!(data.len(), 30, "one point per request");
        let data_right = data.iter().cloned().fold(f64::MIN, f64::max);
        for name in ["Q1", "Q3", "Q6"] {
            let t = doc
                .descendants()
                .find(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(name))
                .unwrap_or_else(|| panic!("legend entry {name}"));
            assert!(
                num(&t, "x").unwrap() > data_right,
                "{name} overlaps the data"
            );
        }
    }
}
