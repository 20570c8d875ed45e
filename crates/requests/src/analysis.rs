//! A run's analysis: clustering with and without counters, the scatter, the projection, and
//! the files `run-pg --out` and `experiment requests` write.

use crate::attrib::{write_csv, write_json_lines};
use crate::classify::{cluster, scatter_svg, Clustering, FeatureSet};
use crate::project::{project, ClassProjection};
use crate::run::RunOutput;
use crate::RequestsError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Per template: requests and mean features.
#[derive(Clone, Debug, Serialize)]
pub struct TemplateStats {
    /// Requests.
    pub requests: usize,
    /// Mean wall time (ms).
    pub wall_ms: f64,
    /// Mean task-clock (ms).
    pub cpu_ms: f64,
    /// Mean context switches.
    pub context_switches: f64,
    /// Mean page faults.
    pub page_faults: f64,
}

/// Everything derived from a run.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// Per template.
    pub templates: BTreeMap<String, TemplateStats>,
    /// Clustering on wall time alone.
    pub time_only: Clustering,
    /// Clustering on wall time and the counters.
    pub time_and_counters: Clustering,
    /// Per class projection.
    pub projection: Vec<ClassProjection>,
    /// The scatter's y feature.
    pub scatter_y: String,
    /// What a PMU would add (stated, not measured).
    pub pmu_note: String,
    /// The SVG text of the scatter (not serialized).
    #[serde(skip)]
    pub scatter_svg: String,
}

/// Analyze a run.
pub fn analyze(out: &RunOutput) -> Result<Analysis, RequestsError> {
    let mut templates: BTreeMap<String, TemplateStats> = BTreeMap::new();
    for r in &out.rows {
        let t = templates.entry(r.class.clone()).or_insert(TemplateStats {
            requests: 0,
            wall_ms: 0.0,
            cpu_ms: 0.0,
            context_switches: 0.0,
            page_faults: 0.0,
        });
        t.requests += 1;
        t.wall_ms += r.wall_ns as f64 / 1e6;
        t.cpu_ms += r.get("task-clock") / 1e6;
        t.context_switches += r.get("context-switches");
        t.page_faults += r.get("page-faults");
    }
    for t in templates.values_mut() {
        let n = t.requests.max(1) as f64;
        t.wall_ms /= n;
        t.cpu_ms /= n;
        t.context_switches /= n;
        t.page_faults /= n;
    }
    let time_only = cluster(&out.rows, FeatureSet::Time)?;
    let time_and_counters = cluster(&out.rows, FeatureSet::TimeAndCounters)?;
    let projection = project(&out.rows)?;
    let (svg, y) = scatter_svg(&out.rows)?;
    let pmu_note = if out.unsupported.is_empty() {
        "hardware events counted: LLC misses and memory transactions are features".to_string()
    } else {
        format!(
            "not counted here ({}): with a PMU, LLC misses and memory-bus transactions per \
             request would be clustering features (the paper's bandwidth axis) and would replace \
             the projection's assumed IPC and MPKI; not measured here, so no ARI is claimed for them",
            out.unsupported.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    Ok(Analysis {
        templates,
        time_only,
        time_and_counters,
        projection,
        scatter_y: y,
        pmu_note,
        scatter_svg: svg,
    })
}

impl Analysis {
    /// A Markdown section.
    pub fn to_markdown(&self, out: &RunOutput) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "PostgreSQL {} (private cluster), TPC-H-shaped data at scale {} ({} line items), {} \
             client(s), {} requests, seed {}; per request the backend's {} (measured).\n\n",
            out.server_version,
            out.scale,
            out.table_rows.get("lineitem").copied().unwrap_or(0),
            out.clients,
            out.rows.len(),
            out.seed,
            out.events.join(", ")
        ));
        s.push_str("| template | requests | wall ms | task-clock ms | context switches | page faults |\n|---|---|---|---|---|---|\n");
        for (n, t) in &self.templates {
            s.push_str(&format!(
                "| {n} | {} | {:.2} | {:.2} | {:.2} | {:.1} |\n",
                t.requests, t.wall_ms, t.cpu_ms, t.context_switches, t.page_faults
            ));
        }
        s.push_str("\n| features | k (silhouette) | ARI vs templates | ARI at k = templates |\n|---|---|---|---|\n");
        for c in [&self.time_only, &self.time_and_counters] {
            s.push_str(&format!(
                "| {} | {} ({:.3}) | {:.3} | {:.3} |\n",
                c.features.join(" + "),
                c.k,
                c.silhouette_by_k.get(&c.k).copied().unwrap_or(0.0),
                c.ari,
                c.ari_at_template_count
            ));
        }
        s.push_str(&format!("\n{}.\n\n", self.pmu_note));
        s.push_str(&format!(
            "Projection (simulated `{}`; faster CPU ×{}, same memory; bandwidth ×{}). Classes from \
             this run are estimated from software features plus an assumption (IPC {}, MPKI floor \
             {}, 64 lines per page fault); `catalog:` rows are the simulator's calibrated TPC-H \
             profiles, for contrast.\n\n| class | task-clock ms | faults per CPU ms | MPKI (est.) | speed-up faster CPU | speed-up 2× bandwidth | rests on |\n|---|---|---|---|---|---|---|\n",
            crate::project::BASE_MACHINE,
            crate::project::FASTER_CPU,
            crate::project::MORE_BANDWIDTH,
            crate::project::ASSUMED_IPC,
            crate::project::ASSUMED_MPKI_FLOOR
        ));
        for p in &self.projection {
            s.push_str(&format!(
                "| {} | {:.2} | {:.2} | {:.2} | {:.3} | {:.3} | {} |\n",
                p.class,
                p.cpu_ms,
                p.faults_per_cpu_ms,
                p.mpki_estimated,
                p.speedup_faster_cpu,
                p.speedup_more_bandwidth,
                p.rests_on
            ));
        }
        s
    }

    /// Write `requests.jsonl`, `requests.csv`, `analysis.json`, `requests.md` and
    /// `requests-fig3.svg` into `dir`.
    pub fn write(&self, out: &RunOutput, dir: &Path) -> Result<(), RequestsError> {
        let io = |what: &str, e: std::io::Error| {
            RequestsError::Io(format!("writing {}", dir.join(what).display()), e)
        };
        std::fs::create_dir_all(dir).map_err(|e| io("", e))?;
        let mut buf = Vec::new();
        write_json_lines(&mut buf, &out.rows).map_err(|e| io("requests.jsonl", e))?;
        std::fs::write(dir.join("requests.jsonl"), &buf).map_err(|e| io("requests.jsonl", e))?;
        let mut buf = Vec::new();
        write_csv(&mut buf, &out.rows, &out.events).map_err(|e| io("requests.csv", e))?;
        std::fs::write(dir.join("requests.csv"), &buf).map_err(|e| io("requests.csv", e))?;
        let json = serde_json::json!({
            "run": {
                "server_version": out.server_version, "scale": out.scale, "clients": out.clients,
                "seed": out.seed, "events": out.events, "unsupported": out.unsupported,
                "table_rows": out.table_rows, "accounting": out.accounting, "wall_ns": out.wall_ns,
            },
            "analysis": self,
        });
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| io("analysis.json", std::io::Error::other(e)))?;
        std::fs::write(dir.join("analysis.json"), text).map_err(|e| io("analysis.json", e))?;
        std::fs::write(dir.join("requests.md"), self.to_markdown(out))
            .map_err(|e| io("requests.md", e))?;
        std::fs::write(dir.join("requests-fig3.svg"), &self.scatter_svg)
            .map_err(|e| io("requests-fig3.svg", e))?;
        Ok(())
    }
}
