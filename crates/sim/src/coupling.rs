//! Multi-socket coupling under model v2: sockets with their own memory controllers still
//! share coherence. Every LLC miss on one socket must be snooped at the others (source
//! snooping over QPI on Westmere-EP; directory-filtered over UPI on Skylake-SP), and each
//! snoop occupies the remote socket's uncore — the LLC tag lookup, ring and home agent that
//! the remote socket's own misses pass through on their way to its controller. So a
//! memory-heavy socket slows its neighbour's misses without moving a byte of data to it.
//!
//! Modelled as exogenous load on each socket's memory queue: socket `b` carries, besides its
//! own traffic, `snoop_bytes_per_line` for every line the other sockets move (a snoop request
//! and its data-less response, in bytes of queue occupancy). Pure functions; the engine calls
//! [`snoop_load`] once per solve of a socket's queue with the others' last solved demand.

/// Queue occupancy (bytes per cycle) that socket `b` carries for the other sockets' snoops,
/// given every socket's own demand in bytes per cycle (`demand[b]` itself is not counted):
/// `snoop_bytes_per_line / line_bytes x sum_{a != b} demand[a]`. Non-negative; symmetric in
/// the sense that swapping two sockets' demands swaps their loads; zero with one socket or no
/// snoop cost.
pub fn snoop_load(demand: &[f64], b: usize, line_bytes: f64, snoop_bytes_per_line: f64) -> f64 {
    if demand.len() < 2 || snoop_bytes_per_line <= 0.0 || line_bytes <= 0.0 {
        return 0.0;
    }
    let others: f64 = demand
        .iter()
        .enumerate()
        .filter(|&(a, _)| a != b)
        .map(|(_, d)| d.max(0.0))
        .sum();
    snoop_load_of(others, line_bytes, snoop_bytes_per_line)
}

/// [`snoop_load`] from the sum of the other sockets' demand (the engine's allocation-free
/// form).
#[inline]
pub fn snoop_load_of(others_demand: f64, line_bytes: f64, snoop_bytes_per_line: f64) -> f64 {
    if snoop_bytes_per_line <= 0.0 || line_bytes <= 0.0 {
        return 0.0;
    }
    others_demand.max(0.0) * snoop_bytes_per_line / line_bytes
}

/// The snoop load the queue accepts: at most `max_share` of its bandwidth, so a socket
/// flooded with snoops still serves its own misses (the uncore arbitrates between the two;
/// an unbounded exogenous load would leave no solution).
pub fn bounded_snoop_load(load: f64, bandwidth: f64, max_share: f64) -> f64 {
    load.clamp(0.0, bandwidth * max_share.clamp(0.0, 1.0))
}

/// Largest share of a queue's bandwidth snoops may take (see [`bounded_snoop_load`]).
pub const MAX_SNOOP_SHARE: f64 = 0.5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_counts_only_the_other_sockets() {
        let d = [10.0, 2.0, 0.0];
        assert_eq!(snoop_load(&d, 0, 64.0, 16.0), 0.5);
        assert_eq!(snoop_load(&d, 1, 64.0, 16.0), 2.5);
        assert_eq!(snoop_load(&d, 2, 64.0, 16.0), 3.0);
        assert_eq!(snoop_load(&[10.0], 0, 64.0, 16.0), 0.0);
        assert_eq!(snoop_load(&d, 0, 64.0, 0.0), 0.0);
    }

    #[test]
    fn bound_keeps_half_the_queue() {
        assert_eq!(bounded_snoop_load(10.0, 4.0, MAX_SNOOP_SHARE), 2.0);
        assert_eq!(bounded_snoop_load(1.0, 4.0, MAX_SNOOP_SHARE), 1.0);
        assert_eq!(bounded_snoop_load(-1.0, 4.0, MAX_SNOOP_SHARE), 0.0);
    }
}
