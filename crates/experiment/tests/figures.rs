//! Every bar chart of the report: rendered (parsed by usvg) and checked by geometry — the
//! legend outside the data, categories named on the axis, the y range showing differences.

mod svgcheck;

use counterpoint_experiment::report::{bar_y_range, draw_bars_with};
use counterpoint_experiment::result::FigureOptions;
use counterpoint_experiment::{leak, BarFigure, BarSeries, NoProgress};

fn series(name: &str, values: &[f64]) -> BarSeries {
    BarSeries {
        name: name.into(),
        values: values.iter().map(|v| Some(*v)).collect(),
        errors: values.iter().map(|_| Some(0.01)).collect(),
    }
}

fn check(fig: &BarFigure) -> svgcheck::Figure {
    check_with(fig, &FigureOptions::default())
}

fn check_with(fig: &BarFigure, options: &FigureOptions) -> svgcheck::Figure {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(&fig.file);
    draw_bars_with(&path, fig, options).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    if let Ok(d) = std::env::var("FIGURES_KEEP") {
        std::fs::write(std::path::Path::new(&d).join(&fig.file), &svg).unwrap();
    }
    let f = svgcheck::parse(&svg);
    let names: Vec<&str> = fig.series.iter().map(|s| s.name.as_str()).collect();
    let cats: Vec<&str> = fig.categories.iter().map(|s| s.as_str()).collect();
    f.check_bar_chart(&names, &cats);
    f
}

#[test]
fn close_values_get_a_cut_axis_said_in_its_label() {
    // NP-like values 0.80-0.92: from zero the differences would be invisible.
    let fig = BarFigure {
        file: "np.svg".into(),
        title: "NP".into(),
        y_label: "normalized performance".into(),
        categories: vec!["linux".into(), "ipc-pair".into(), "bus-pair".into()],
        series: vec![
            series("ours (mean over seeds)", &[0.822, 0.910, 0.921]),
            series("paper", &[0.818, 0.829, 0.883]),
        ],
    };
    let f = check(&fig);
    let (lo, hi, cut) = bar_y_range(0.808, 0.931);
    assert!(cut && lo > 0.0 && lo < 0.808 && hi > 0.931);
    assert!(f
        .texts
        .iter()
        .any(|t| t.0.starts_with("normalized performance (axis from") && t.0.ends_with("not 0)")));
}

#[test]
fn spread_values_start_at_a_marked_zero_and_negatives_work() {
    let (lo, _, cut) = bar_y_range(0.1, 1.0);
    assert_eq!((lo, cut), (0.0, false));
    let (lo, hi, cut) = bar_y_range(-2.0, 6.0);
    assert!(lo < -2.0 && hi > 6.0 && !cut);
    let fig = BarFigure {
        file: "gain.svg".into(),
        title: "gain (%)".into(),
        y_label: "gain over the baseline (%)".into(),
        categories: vec!["test case 1".into(), "test case 2".into()],
        series: vec![
            series("masa", &[1.9, 0.1]),
            series("masa-no-new-excess", &[3.3, -1.4]),
            series("masa-own-metric", &[1.9, 0.4]),
            series("paper", &[2.9, 6.2]),
        ],
    };
    let f = check(&fig);
    assert!(f.text("gain over the baseline (%)").is_some());
}

#[test]
fn many_series_with_long_names_keep_the_legend_outside() {
    let names = [
        "linux (default scheduler)",
        "spread",
        "di",
        "ipc-pair-user",
        "bus-pair-user",
        "a rather long series name for the legend",
    ];
    let fig = BarFigure {
        file: "many.svg".into(),
        title: "distance".into(),
        y_label: "distance from the oracle (%)".into(),
        categories: vec![
            "SMP bus".into(),
            "2x2 SMT".into(),
            "4-package 32-thread".into(),
        ],
        series: names
            .iter()
            .enumerate()
            .map(|(i, n)| series(n, &[5.0 + i as f64, 0.1 * i as f64, 2.0]))
            .collect(),
    };
    check(&fig);
}

/// DI's distances: no mix below 0, intervals that reach below it. With a floor at 0 the
/// error bars stop there and the axis does not go negative (it went to -0.5; report audit,
/// session 29); without one, both do.
#[test]
fn a_floor_stops_the_error_bars_and_the_axis() {
    let fig = BarFigure {
        file: "di.svg".into(),
        title: "Distance from the oracle (%)".into(),
        y_label: "1 - NP/NP_oracle (%)".into(),
        categories: vec!["SMP bus".into(), "2x2 SMT".into()],
        series: vec![BarSeries {
            name: "di".into(),
            values: vec![Some(1.55), Some(0.09)],
            errors: vec![Some(1.99), Some(0.21)],
        }],
    };
    let dir = tempfile::tempdir().unwrap();
    let negative_ticks = |options: &FigureOptions| {
        let path = dir.path().join("di.svg");
        draw_bars_with(&path, &fig, options).unwrap();
        let f = svgcheck::parse(&std::fs::read_to_string(&path).unwrap());
        f.check_bar_chart(&["di"], &["SMP bus", "2x2 SMT"]);
        f.texts
            .iter()
            .filter(|t| t.0.starts_with('-') && t.0[1..].parse::<f64>().is_ok())
            .count()
    };
    assert!(negative_ticks(&FigureOptions::default()) > 0);
    let floor = FigureOptions {
        floor: Some(0.0),
        ..Default::default()
    };
    assert_eq!(negative_ticks(&floor), 0);
}

/// The leak figure shows every column of its table (it left out "per-core, no difference")
/// and names its x axis, under the intervals (report audit, session 29).
#[test]
fn the_leak_figure_passes() {
    let r = leak::run(&[1], &NoProgress).unwrap();
    for fig in &r.figures {
        let options = r.figure_options.get(&fig.file).cloned().unwrap_or_default();
        let f = check_with(fig, &options);
        let names: Vec<&str> = fig.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "per-core counts",
                "per-task (policy)",
                "per-core, no difference",
                "per-task, no difference"
            ]
        );
        let x_label = options.x_label.as_deref().expect("an x axis label");
        let (_, y) = f.text(x_label).expect("the x label is drawn");
        let (_, y_category) = f.text("250 ns").expect("a category");
        assert!(y > y_category + 10.0, "{y} vs {y_category}");
    }
}

/// Every bar ends at or below the top labelled tick, and at or above the lowest when the axis
/// goes negative (replica's one-socket libquantum bar, 270.3, stood above the top label 250).
#[test]
fn no_bar_ends_past_the_last_number_on_the_axis() {
    for (values, errors) in [
        (vec![0.38, 4.12, 33.09, 270.3, 7.69], vec![0.0; 5]),
        (vec![0.89, 2.32, 17.89, 0.01, 0.01], vec![0.5; 5]),
        (
            vec![1.9, -1.4, 6.2, 0.4, 3.3],
            vec![2.2, 3.8, 0.0, 0.6, 1.6],
        ),
        (vec![0.822, 0.910, 0.921, 0.9, 0.85], vec![0.01; 5]),
    ] {
        let fig = BarFigure {
            file: "ticks.svg".into(),
            title: "overhead".into(),
            y_label: "overhead over native, %".into(),
            categories: ["a", "b", "c", "d", "e"].map(String::from).to_vec(),
            series: vec![BarSeries {
                name: "ours".into(),
                values: values.iter().map(|v| Some(*v)).collect(),
                errors: errors.iter().map(|e| Some(*e)).collect(),
            }],
        };
        let f = check(&fig);
        let ticks: Vec<f64> = f.texts.iter().filter_map(|t| t.0.parse().ok()).collect();
        let top = ticks.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let bottom = ticks.iter().copied().fold(f64::INFINITY, f64::min);
        for (v, e) in values.iter().zip(&errors) {
            assert!(v + e <= top + 1e-9, "{} above the top tick {top}", v + e);
            if bottom < 0.0 {
                assert!(
                    v - e >= bottom - 1e-9,
                    "{} below the lowest tick {bottom}",
                    v - e
                );
            }
        }
    }
}

#[test]
fn the_committed_figures_in_docs_pass() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/experiments");
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("docs/experiments exists") {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("svg") {
            continue;
        }
        n += 1;
        let f = svgcheck::parse(&std::fs::read_to_string(&path).unwrap());
        let legend = f
            .legend_auto()
            .unwrap_or_else(|| panic!("{}: no legend frame", path.display()));
        let swatches = f
            .filled
            .iter()
            .filter(|(b, _)| legend.contains(b.x0, b.y0) && legend.contains(b.x1, b.y1))
            .count();
        let bars = f.bars(&legend, swatches);
        assert!(!bars.is_empty(), "{}: no bars", path.display());
        for b in &bars {
            assert!(
                !legend.overlaps(b) && b.x1 <= legend.x0,
                "{}: bar {b:?} vs legend {legend:?}",
                path.display()
            );
        }
    }
    assert!(n >= 9, "only {n} figures in docs/experiments");
}

/// The targets of the Markdown images `![alt](target)` in `text`, web addresses left out.
fn image_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("![") {
        rest = &rest[i + 2..];
        let Some(j) = rest.find("](") else { break };
        let Some(k) = rest[j + 2..].find(')') else {
            break;
        };
        let target = &rest[j + 2..j + 2 + k];
        if !target.starts_with("http") {
            out.push(target.to_string());
        }
        rest = &rest[j + 2 + k..];
    }
    out
}

#[test]
fn every_image_the_docs_show_is_in_the_repository() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).expect("docs exists") {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) == Some("md") {
            pages.push(path);
        }
    }
    let (mut n, mut missing) = (0, Vec::new());
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in image_targets(&text) {
            n += 1;
            // Relative to the page, as a Markdown viewer resolves it.
            if !page.parent().unwrap().join(&target).is_file() {
                missing.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(n >= 10, "only {n} images in the docs");
    assert!(
        missing.is_empty(),
        "images not in the repository: {missing:#?}"
    );
}

#[test]
fn image_targets_are_read_from_markdown() {
    let text = "a ![x](one.svg) b ![y (z)](dir/two.svg)\n![w](https://e.org/p.png) ![v](";
    assert_eq!(image_targets(text), ["one.svg", "dir/two.svg"]);
}
