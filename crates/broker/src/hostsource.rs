//! Counting for the live host ([`counterpoint_host::Host`], behind `top` and the agent) through
//! a broker: [`BrokerSource`] implements the host's [`CounterSource`] seam with one registration
//! per watched thread group (`tid:N`) on one connection, all of them read with one `read_many`
//! request per interval (so a host watching hundreds of threads costs the broker one request,
//! one rate-limit token, per interval rather than one per thread).
//!
//! A registration's counts start at zero when it is made (the broker reports counts since
//! registration), so a group opened in this interval reads zero until the next `read_many`
//! without a request of its own. A refusal by the access policy (another user's thread) fails
//! that thread's group only: the host then reads it from `/proc`, as it does when the kernel
//! refuses a direct group. A broken connection makes [`CounterSource::broken`] say so, and the
//! host goes back to its own perf_event groups.

use crate::client::{Client, ClientError};
use crate::proto::Reading;
use counterpoint_host::perf::{
    CounterSource, GroupReading, PerfError, PerfEvent, ThreadCounts, MAX_GROUP,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The connection and what the last `read_many` fetched, shared by the source and its groups.
struct Shared {
    client: Client,
    /// Registrations open now.
    live: BTreeSet<u64>,
    /// Made since the last refresh: they read zero until then.
    new: BTreeSet<u64>,
    /// What the last refresh fetched, by registration, taken by the groups' reads.
    fetched: BTreeMap<u64, Reading>,
    /// Why the connection is unusable, once it is.
    dead: Option<String>,
    /// The class registrations ask for (`system` for the agent), until the policy refuses it.
    class: Option<String>,
}

impl Shared {
    /// Note a failure: anything but a refusal means the connection cannot be trusted again.
    fn failed(&mut self, e: &ClientError) {
        if !matches!(e, ClientError::Refused { .. }) && self.dead.is_none() {
            self.dead = Some(e.to_string());
        }
    }
}

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic elsewhere while holding it leaves plain data behind, still consistent enough to
    // read or to fail cleanly with.
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The host's counter source over a broker connection.
pub struct BrokerSource {
    shared: Arc<Mutex<Shared>>,
    socket: PathBuf,
}

impl BrokerSource {
    /// Connect to the broker at `socket`.
    pub fn connect(socket: &Path) -> Result<BrokerSource, ClientError> {
        let client = Client::connect(socket)?;
        Ok(BrokerSource {
            shared: Arc::new(Mutex::new(Shared {
                client,
                live: BTreeSet::new(),
                new: BTreeSet::new(),
                fetched: BTreeMap::new(),
                dead: None,
                class: None,
            })),
            socket: socket.to_path_buf(),
        })
    }

    /// Register as the `system` class (the placement agent's reserved share). Where the policy
    /// refuses it (no `system-class` grant), the first refusal turns it off and registrations
    /// go on as a user's.
    pub fn system_class(self) -> Self {
        lock(&self.shared).class = Some("system".into());
        self
    }

    /// The socket it talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Registrations open now (one per watched thread group).
    pub fn registrations(&self) -> usize {
        lock(&self.shared).live.len()
    }
}

impl CounterSource for BrokerSource {
    fn describe(&self) -> String {
        format!("broker at {}", self.socket.display())
    }

    fn is_direct(&self) -> bool {
        false
    }

    fn open(
        &mut self,
        tid: u32,
        events: &[(&'static str, PerfEvent)],
    ) -> Result<Box<dyn ThreadCounts>, PerfError> {
        if events.is_empty() || events.len() > MAX_GROUP {
            return Err(PerfError::Size(events.len()));
        }
        let names: Vec<&'static str> = events.iter().map(|(n, _)| *n).collect();
        let list = names.join(",");
        let mut sh = lock(&self.shared);
        let open_err = |source: io::Error| PerfError::Open {
            tid: tid as i32,
            event: list.clone(),
            source,
        };
        if let Some(why) = &sh.dead {
            return Err(open_err(io::Error::other(why.clone())));
        }
        let target = format!("tid:{tid}");
        let class = sh.class.clone();
        let mut got = sh.client.register(&list, &target, 1, class.as_deref());
        if let Err(ClientError::Refused { rule: Some(r), .. }) = &got {
            if class.is_some() && r == "system-class" {
                sh.class = None;
                got = sh.client.register(&list, &target, 1, None);
            }
        }
        match got {
            Ok(id) => {
                sh.live.insert(id);
                sh.new.insert(id);
                Ok(Box::new(BrokerThread {
                    shared: self.shared.clone(),
                    id,
                    tid,
                    names,
                }))
            }
            Err(e) => {
                sh.failed(&e);
                let kind = if matches!(e, ClientError::Refused { .. }) {
                    io::ErrorKind::PermissionDenied
                } else {
                    io::ErrorKind::Other
                };
                Err(open_err(io::Error::new(kind, e.to_string())))
            }
        }
    }

    fn refresh(&mut self) {
        let mut sh = lock(&self.shared);
        sh.fetched.clear();
        sh.new.clear();
        if sh.dead.is_some() || sh.live.is_empty() {
            return;
        }
        let ids: Vec<u64> = sh.live.iter().copied().collect();
        match sh.client.read_many(&ids) {
            Ok(rs) => sh.fetched = rs.into_iter().map(|r| (r.id, r)).collect(),
            // A refusal (say, one registration revoked) leaves each group to read on its own.
            Err(e) => sh.failed(&e),
        }
    }

    fn broken(&self) -> Option<String> {
        lock(&self.shared).dead.clone()
    }
}

/// One thread's group, registered with the broker.
struct BrokerThread {
    shared: Arc<Mutex<Shared>>,
    id: u64,
    tid: u32,
    names: Vec<&'static str>,
}

impl BrokerThread {
    fn read_err(&self, why: String) -> PerfError {
        PerfError::Read {
            tid: self.tid as i32,
            source: io::Error::other(why),
        }
    }

    /// The broker's reading as a group reading: every event must be there and supported.
    fn convert(&self, r: &Reading) -> Result<GroupReading, PerfError> {
        let mut g = GroupReading {
            values: [0; MAX_GROUP],
            len: self.names.len(),
            time_enabled_ns: r.enabled_ns,
            time_running_ns: r.running_ns,
        };
        if r.events.len() != self.names.len() {
            return Err(self.read_err(format!(
                "broker registration {} answered {} events for {}",
                self.id,
                r.events.len(),
                self.names.len()
            )));
        }
        for (i, e) in r.events.iter().enumerate() {
            if !e.supported {
                return Err(self.read_err(format!(
                    "{}: {}",
                    e.event,
                    e.reason.as_deref().unwrap_or("not supported by the broker")
                )));
            }
            g.values[i] = e.raw;
        }
        Ok(g)
    }
}

impl ThreadCounts for BrokerThread {
    fn names(&self) -> &[&'static str] {
        &self.names
    }

    fn read(&mut self) -> Result<GroupReading, PerfError> {
        let shared = self.shared.clone();
        let mut sh = lock(&shared);
        if let Some(r) = sh.fetched.remove(&self.id) {
            return self.convert(&r);
        }
        if sh.new.contains(&self.id) {
            // Registered since the last refresh: its counts start here, at zero.
            return Ok(GroupReading {
                values: [0; MAX_GROUP],
                len: self.names.len(),
                time_enabled_ns: 0,
                time_running_ns: 0,
            });
        }
        if let Some(why) = &sh.dead {
            return Err(self.read_err(why.clone()));
        }
        match sh.client.read(self.id) {
            Ok(r) => self.convert(&r),
            Err(e) => {
                sh.failed(&e);
                Err(self.read_err(e.to_string()))
            }
        }
    }
}

impl Drop for BrokerThread {
    fn drop(&mut self) {
        let mut sh = lock(&self.shared);
        sh.live.remove(&self.id);
        sh.new.remove(&self.id);
        sh.fetched.remove(&self.id);
        if sh.dead.is_none() {
            // Best effort: the broker also drops a consumer's registrations when it exits.
            if let Err(e) = sh.client.unregister(self.id) {
                sh.failed(&e);
            }
        }
    }
}
