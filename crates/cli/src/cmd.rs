//! One module per subcommand.

pub mod metrics;

// [mod: counters]

// [mod: sim]

// [mod: policy]

// [mod: host]

// [mod: selfmon]
