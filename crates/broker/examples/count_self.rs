//! Count this process's task-clock and page faults through a running broker.
//!
//! ```text
//! counterpoint daemon --socket /tmp/cp.sock &
//! cargo run -p counterpoint-broker --example count_self -- /tmp/cp.sock
//! ```

use counterpoint_broker::client::Client;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let socket = std::env::args_os()
        .nth(1)
        .map_or_else(counterpoint_broker::server::default_socket, PathBuf::from);
    let mut c = Client::connect(&socket)?;
    println!("connected to {} as uid {}", socket.display(), c.identity.0);
    let id = c.register("task-clock,page-faults", "self", 1, None)?;
    // Some work: touch 64 MiB.
    let v = vec![1u8; 64 << 20];
    let sum: u64 = v.iter().step_by(4096).map(|&b| u64::from(b)).sum();
    let r = c.read(id)?;
    for e in &r.events {
        println!(
            "{:<12} raw {:>12} scaled {:>14.1}  (confidence {:.3})",
            e.event,
            e.raw,
            e.scaled.unwrap_or(0.0),
            r.confidence
        );
    }
    c.unregister(id)?;
    println!("(touched {sum} pages)");
    Ok(())
}
