//! `counterpoint bench ...`: measurements of Counterpoint's own costs (counter reads, simulator
//! speed, self-monitoring regions and lock profiling). Each area adds its own sub-subcommand; a
//! bench measures and reports, it never asserts a time.

use anyhow::Result;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand)]
enum BenchWhat {
    // [bench: counters]
    /// ns per counter read: our layer vs raw read(2), a group of three, user-space path.
    Read(super::stat::BenchReadArgs),

    // [bench: sim]
    /// Simulator speed: simulated core-ticks per wall second (64 cores, 256 tasks).
    Sim(super::simulate::SimBenchArgs),
    /// SchedTask model speed: each benchmark under Linux and SchedTask (32 cores, 2 epochs).
    Schedtask(super::heatmap::BenchSchedtaskArgs),
    // [bench: selfmon]
    /// Self-monitoring costs: region begin/end, counter read (user space or read(2)), synthetic page.
    Selfmon(super::bench_selfmon::BenchSelfmonArgs),
    /// Per-request attribution: ns per request boundary, in process and external.
    Requests(super::requests::BenchRequestsArgs),

    // [bench: broker]
    /// The broker: shares 1:2:5 on one slot, 100 consumers x 4 events at 10 Hz, read latency.
    Broker(super::bench_broker::BenchBrokerArgs),

    // [bench: lockprof]
    /// Lock+unlock cost with and without the lock profiler; slowdown of a lock-heavy program.
    Lockprof(super::lockprof::BenchLockprofArgs),

    // [bench: replica]
    /// Core-to-core costs per CPU pair: cache-line ping-pong and futex wake-up, by distance.
    C2c(super::bench_c2c::BenchC2cArgs),
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    match args.what {
        // [bench-dispatch: counters]
        BenchWhat::Read(a) => super::stat::bench_read(a),

        // [bench-dispatch: sim]
        BenchWhat::Sim(args) => super::simulate::bench(args),
        BenchWhat::Schedtask(a) => super::heatmap::bench_schedtask(a),
        // [bench-dispatch: selfmon]
        BenchWhat::Selfmon(a) => super::bench_selfmon::bench(a),
        BenchWhat::Requests(a) => super::requests::bench(a),

        // [bench-dispatch: broker]
        BenchWhat::Broker(a) => super::bench_broker::run(a),

        // [bench-dispatch: lockprof]
        BenchWhat::Lockprof(a) => super::lockprof::bench(a),

        // [bench-dispatch: replica]
        BenchWhat::C2c(a) => super::bench_c2c::run(a),
    }
}
