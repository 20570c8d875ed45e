//! One module per subcommand.

pub mod bench;
pub mod metrics;

// [mod: counters]
pub mod heatmap;
pub mod stat;

// [mod: sim]
pub mod simulate;
pub mod simulate_plot;

// [mod: policy]
pub mod experiment;
pub mod policies;

// [mod: host]
pub mod agent;
pub mod burn;
pub mod calibrate;
pub mod overhead;
pub mod top;
pub mod topology;

// [mod: selfmon]
pub mod bench_selfmon;

// [mod: lockprof]
pub mod lockprof;

// [mod: broker]
pub mod bench_broker;
pub mod daemon;

// [mod: replica]
pub mod bench_c2c;
// [mods: requests]
pub mod requests;
