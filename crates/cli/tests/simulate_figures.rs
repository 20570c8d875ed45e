//! `simulate --out` figures, rendered (usvg) and checked by geometry: task names under the NP
//! bars, legends of the line charts in their own column right of every line.

#[path = "../../experiment/tests/svgcheck/mod.rs"]
mod svgcheck;

use std::process::Command;

fn simulate(scenario: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new(env!("CARGO_BIN_EXE_counterpoint"))
        .current_dir(root)
        .args(["simulate", scenario, "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn simulate_figures_name_tasks_and_keep_legends_off_the_data() {
    let dir = simulate("scenarios/masa-table1-mixed.toml");
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    let result: serde_json::Value = serde_json::from_str(&read("result.json")).unwrap();
    let tasks: Vec<String> = result["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tasks.len() >= 2);

    // NP bars: one bar per task, each task named below the bars.
    let np = svgcheck::parse(&read("np.svg"));
    let bars: Vec<_> = np.filled.iter().filter(|(_, c)| c != "#FFFFFF").collect();
    assert_eq!(bars.len(), tasks.len());
    let lowest = bars
        .iter()
        .map(|(b, _)| b.y1)
        .fold(f64::NEG_INFINITY, f64::max);
    for t in &tasks {
        let (_, y) = np.text(t).unwrap_or_else(|| panic!("task {t} not named"));
        assert!(y >= lowest, "{t} label inside the bars");
    }
    assert!(np
        .texts
        .iter()
        .any(|t| t.0.starts_with("normalized performance")));

    // Lines: the legend frame holds every series name and lies right of every line.
    for (file, names) in [
        ("ipc.svg", tasks.clone()),
        ("bus.svg", vec!["bus 0".to_string()]),
    ] {
        let f = svgcheck::parse(&read(file));
        let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let legend = f.legend(&refs);
        assert!(!f.polylines.is_empty());
        for p in &f.polylines {
            if legend.contains(p.x0, p.y0) && legend.contains(p.x1, p.y1) {
                continue; // a legend swatch
            }
            assert!(
                p.x1 <= legend.x0,
                "{file}: {p:?} reaches the legend {legend:?}"
            );
        }
        assert!(
            f.text("simulated time (s)").is_some(),
            "{file}: x axis unnamed"
        );
    }
}
