//! OpenMetrics exposition of hardware and software counter readings, done the way counters
//! need it: every event is exposed as the **raw** kernel count (a `_total` counter, never a
//! pre-computed rate), with its `time_enabled` and `time_running` beside it, its **coverage**
//! (`time_running / time_enabled`), the scaled estimate as a separate gauge and a flag saying when
//! that estimate differs from the raw count. Exporters that publish only a scaled (or only an
//! unscaled) number hide multiplexing from whoever reads the graph; here the reader sees how
//! much of the time each counter actually ran and can decide.
//!
//! The crate has three parts and no dependencies beyond std:
//! - [`counter_families`] turns [`CounterReading`]s (one per event and label set: per CPU, per
//!   consumer, per task) into metric [`Family`]s;
//! - [`render`] writes families as OpenMetrics 1.0 text (ending in `# EOF`), and
//!   [`render_prometheus_text`] as the Prometheus text format 0.0.4; both make any name valid
//!   and escape any label value, so arbitrary input never yields an invalid line;
//! - [`serve`] runs a small HTTP/1.1 exporter on a thread (`GET /metrics`), with bounded
//!   request size, time and concurrency; dropping the [`ExporterHandle`] stops it.
//!
//! ```
//! use counterpoint_openmetrics::{counter_families, render, CounterReading};
//!
//! // A counter that ran 3 of the 4 enabled milliseconds (multiplexed).
//! let readings = [CounterReading {
//!     event: "cache-misses".into(),
//!     labels: vec![("cpu".into(), "0".into())],
//!     raw: 300,
//!     enabled_ns: 4_000_000,
//!     running_ns: 3_000_000,
//! }];
//! let text = render(&counter_families(&readings));
//! assert!(text.contains("counterpoint_cache_misses_total{cpu=\"0\",event=\"cache-misses\"} 300\n"));
//! assert!(text.contains("counterpoint_cache_misses_coverage{cpu=\"0\",event=\"cache-misses\"} 0.75\n"));
//! assert!(text.contains("counterpoint_cache_misses_scaled{cpu=\"0\",event=\"cache-misses\"} 400\n"));
//! assert!(text.ends_with("# EOF\n"));
//!
//! // Serve it: GET http://ADDR/metrics.
//! let families = counter_families(&readings);
//! let exporter = counterpoint_openmetrics::serve(
//!     "127.0.0.1:0".parse()?,
//!     std::sync::Arc::new(move || families.clone()),
//! )?;
//! println!("scrape http://{}/metrics", exporter.addr());
//! drop(exporter); // stops the server thread
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod family;
mod server;
mod text;

pub use family::{counter_families, CounterReading, Family, Kind, Sample};
pub use server::{
    serve, ExporterHandle, Source, IO_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST_BYTES,
    OPENMETRICS_CONTENT_TYPE, PROMETHEUS_TEXT_CONTENT_TYPE,
};
pub use text::{
    escape_label_value, render, render_prometheus_text, sanitize_label_name, sanitize_metric_name,
};
