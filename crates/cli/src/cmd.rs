//! One module per subcommand.

pub mod bench;
pub mod metrics;

// [mod: counters]

// [mod: sim]

// [mod: policy]

// [mod: host]

// [mod: selfmon]

// [mod: lockprof]
pub mod lockprof;
