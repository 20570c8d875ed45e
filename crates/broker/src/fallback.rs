//! Count through the broker when one is running, directly through `crates/counters` otherwise:
//! the one call `top` and the agent need ([`Counting::open`]), with the same readings either
//! way (`CounterValue`: raw, enabled, running, so scaling and coverage work unchanged).

use crate::client::{Client, ClientError};
use crate::target::{self, Roots, TargetError};
use counterpoint_core::sample::CounterValue;
use counterpoint_counters::count::{CountError, Status};
use counterpoint_counters::spec::SpecError;
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree};
use std::path::Path;
use thiserror::Error;

/// Why counting could not start or read.
#[derive(Debug, Error)]
pub enum FallbackError {
    /// Through the broker.
    #[error(transparent)]
    Broker(#[from] ClientError),
    /// Bad target.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Bad event list.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Direct counting.
    #[error(transparent)]
    Count(#[from] CountError),
}

/// An event set being counted, one way or the other.
pub enum Counting {
    /// Through a broker: the client and the registration.
    Broker {
        /// The connection.
        client: Client,
        /// The registration.
        id: u64,
    },
    /// Directly (no broker answered).
    Direct(CounterSet),
}

impl Counting {
    /// Count `events` on `target` (broker target syntax). Tries the broker at `socket` (or the
    /// default socket) first; if none answers, opens the counters directly. A broker that
    /// answers and refuses (policy) is an error, never silently bypassed.
    pub fn open(
        events: &str,
        target_text: &str,
        share: u32,
        socket: Option<&Path>,
    ) -> Result<Counting, FallbackError> {
        if let Some(mut client) = crate::client::try_connect(socket) {
            let id = client.register(events, target_text, share, None)?;
            return Ok(Counting::Broker { client, id });
        }
        let tree = PmuTree::new("/sys");
        let list = parse_event_list(events, &tree)?;
        let resolved = target::resolve(target_text, std::process::id() as i32, &Roots::default())?;
        let mut set = CounterSet::open(&list, &resolved.target, &tree)?;
        set.enable()?;
        Ok(Counting::Direct(set))
    }

    /// Whether a broker counts for us.
    pub fn via_broker(&self) -> bool {
        matches!(self, Counting::Broker { .. })
    }

    /// Current cumulative values per event, in list order (`None`: not supported here).
    pub fn read(&mut self) -> Result<Vec<(String, Option<CounterValue>)>, FallbackError> {
        match self {
            Counting::Broker { client, id } => {
                let r = client.read(*id)?;
                Ok(r.events
                    .into_iter()
                    .map(|e| {
                        let v = e.supported.then_some(CounterValue {
                            raw: e.raw,
                            time_enabled_ns: r.enabled_ns,
                            time_running_ns: r.running_ns,
                        });
                        (e.event, v)
                    })
                    .collect())
            }
            Counting::Direct(set) => Ok(set
                .read_all()?
                .into_iter()
                .map(|r| {
                    let v = if r.status == Status::Counting {
                        r.value
                    } else {
                        None
                    };
                    (r.spec.name, v)
                })
                .collect()),
        }
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Counting::Broker { client, id } = self {
            // Best effort: the broker also drops registrations of exited processes.
            let _ = client.unregister(*id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{self, Broker, Config};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn direct_without_a_broker_then_through_one() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s.sock");
        let mut direct = Counting::open("task-clock,page-faults", "self", 1, Some(&path)).unwrap();
        assert!(!direct.via_broker());
        let r = direct.read().unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, "task-clock");
        assert!(r[0].1.is_some());

        let listener = server::bind(&path).unwrap();
        let b = Arc::new(Broker::new(Config::default()).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let srv = {
            let (b, s) = (b.clone(), stop.clone());
            std::thread::spawn(move || server::run(b, listener, s))
        };
        let mut via = Counting::open("task-clock,page-faults", "self", 1, Some(&path)).unwrap();
        assert!(via.via_broker());
        let r = via.read().unwrap();
        assert_eq!(
            r.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            vec!["task-clock", "page-faults"]
        );
        assert!(r.iter().all(|(_, v)| v.is_some()));
        drop(via);
        assert_eq!(b.kernel_counters(), 0);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        srv.join().unwrap().unwrap();
    }
}
