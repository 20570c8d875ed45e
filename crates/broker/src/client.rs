//! The Rust client: connect, register, read, subscribe. Blocking, one connection.
//!
//! ```no_run
//! use counterpoint_broker::client::Client;
//! let mut c = Client::connect(&counterpoint_broker::server::default_socket())?;
//! let id = c.register("task-clock,context-switches", "self", 1, None)?;
//! let r = c.read(id)?;
//! for e in &r.events {
//!     println!("{} raw {} scaled {:?} ({:.0}% counted)", e.event, e.raw, e.scaled,
//!              100.0 * r.confidence);
//! }
//! # Ok::<(), counterpoint_broker::client::ClientError>(())
//! ```

use crate::proto::{self, LineBuffer, ProtoError, Reading, Request, Response};
use crate::shm::{SharedPage, SharedValues};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Client errors.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Cannot connect.
    #[error("cannot connect to the broker at {}: {error}", .path.display())]
    Connect {
        /// Socket.
        path: PathBuf,
        /// Error.
        error: io::Error,
    },
    /// I/O on the connection.
    #[error("broker connection: {0}")]
    Io(#[from] io::Error),
    /// The broker closed the connection.
    #[error("the broker closed the connection")]
    Closed,
    /// An undecodable response.
    #[error("bad response from the broker: {0}")]
    Proto(#[from] ProtoError),
    /// The broker refused or failed.
    #[error("broker: {message}")]
    Refused {
        /// The policy rule, when a rule refused.
        rule: Option<String>,
        /// Its message.
        message: String,
    },
    /// A response of the wrong kind.
    #[error("unexpected response from the broker: {0}")]
    Unexpected(String),
}

/// A connection to the broker.
pub struct Client {
    stream: UnixStream,
    lines: LineBuffer,
    pushes: VecDeque<Reading>,
    /// uid, gid, pid as the broker sees us.
    pub identity: (u32, u32, i32),
    timeout: Duration,
    /// Descriptors received with answers (the shared page), not yet taken.
    fds: Vec<OwnedFd>,
    /// The connection's shared page, once the broker sent it.
    page: Option<Arc<SharedPage>>,
}

/// A subscription's readings in the shared page: read at any rate, no syscall, no wake-up.
#[derive(Clone)]
pub struct SharedView {
    page: Arc<SharedPage>,
    slot: usize,
    id: u64,
}

impl SharedView {
    /// The latest reading the broker published, `None` before its first update.
    pub fn read(&self) -> Option<SharedValues> {
        self.page
            .read(self.slot)
            .filter(|v| v.pushes > 0 && v.id == self.id)
    }

    /// The registration it shows.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// Why a connection to `path` failed when something other than a socket is there (the
/// kernel says only "Connection refused"); `None` for a socket or nothing.
fn not_a_socket(path: &Path) -> Option<io::Error> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    (!t.is_socket()).then(|| {
        io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("not a socket ({})", counterpoint_host::files::kind(t)),
        )
    })
}

impl Client {
    /// Connect and say hello.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|error| ClientError::Connect {
            path: path.to_path_buf(),
            error: not_a_socket(path).unwrap_or(error),
        })?;
        let mut c = Client {
            stream,
            lines: LineBuffer::new(),
            pushes: VecDeque::new(),
            identity: (0, 0, 0),
            timeout: Duration::from_secs(30),
            fds: Vec::new(),
            page: None,
        };
        match c.call(&Request::Hello {
            version: proto::VERSION,
        })? {
            Response::Hello { uid, gid, pid, .. } => c.identity = (uid, gid, pid),
            other => return Err(ClientError::Unexpected(format!("{other:?}"))),
        }
        Ok(c)
    }

    fn next_response(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Response>, ClientError> {
        self.stream.set_read_timeout(timeout)?;
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(line) = self.lines.next_line()? {
                return Ok(Some(proto::decode_response(&line)?));
            }
            // recvmsg rather than read: an answer may carry the shared page's descriptor.
            match crate::shm::recv_with_fds(self.stream.as_raw_fd(), &mut chunk, &mut self.fds) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => self.lines.push(&chunk[..n]),
                Err(e)
                    if timeout.is_some()
                        && matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Send a request and wait for its response (pushes meanwhile are queued).
    pub fn call(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.stream.write_all(&proto::encode(req))?;
        loop {
            // A broker that stops answering must not hang its clients.
            match self.next_response(Some(self.timeout))? {
                Some(Response::Push(r)) => self.pushes.push_back(r),
                Some(Response::Error { rule, message, .. }) => {
                    return Err(ClientError::Refused { rule, message })
                }
                Some(r) => return Ok(r),
                None => {
                    return Err(ClientError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no answer from the broker within {:?}", self.timeout),
                    )))
                }
            }
        }
    }

    /// How long [`Client::call`] waits for an answer (30 s by default).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(Duration::from_millis(1));
    }

    /// Register an event set on a target; returns its id.
    pub fn register(
        &mut self,
        events: &str,
        target: &str,
        share: u32,
        class: Option<&str>,
    ) -> Result<u64, ClientError> {
        match self.call(&Request::Register {
            events: events.into(),
            target: target.into(),
            share,
            class: class.map(Into::into),
        })? {
            Response::Registered { id, .. } => Ok(id),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// Read a registration now.
    pub fn read(&mut self, id: u64) -> Result<Reading, ClientError> {
        match self.call(&Request::Read { id })? {
            Response::Reading(r) => Ok(r),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// Read several registrations at once, in the order given (any number: sent as requests of
    /// at most [`proto::MAX_READ_MANY`] ids).
    pub fn read_many(&mut self, ids: &[u64]) -> Result<Vec<Reading>, ClientError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(proto::MAX_READ_MANY) {
            match self.call(&Request::ReadMany {
                ids: chunk.to_vec(),
            })? {
                Response::Readings { readings } if readings.len() == chunk.len() => {
                    out.extend(readings)
                }
                other => return Err(ClientError::Unexpected(format!("{other:?}"))),
            }
        }
        Ok(out)
    }

    /// Ask for a push every `interval_ms`.
    pub fn subscribe(&mut self, id: u64, interval_ms: u64) -> Result<(), ClientError> {
        self.expect_ok(&Request::Subscribe { id, interval_ms })
    }

    /// Have registration `id`'s readings written into the connection's shared page every
    /// `interval_ms` instead of pushed: the broker updates the slot once per interval, and the
    /// returned view reads it whenever the caller likes without a syscall.
    pub fn subscribe_shared(
        &mut self,
        id: u64,
        interval_ms: u64,
    ) -> Result<SharedView, ClientError> {
        match self.call(&Request::SubscribeShared { id, interval_ms })? {
            Response::SharedSlot {
                id: got,
                slot,
                page_attached,
            } if got == id => {
                if page_attached || self.page.is_none() {
                    let fd = self.fds.pop().ok_or_else(|| {
                        ClientError::Unexpected("shared slot without the page's descriptor".into())
                    })?;
                    self.fds.clear();
                    self.page = Some(Arc::new(SharedPage::open(fd)?));
                }
                let page = self
                    .page
                    .clone()
                    .ok_or_else(|| ClientError::Unexpected("no shared page".into()))?;
                Ok(SharedView { page, slot, id })
            }
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// The next pushed reading, waiting at most `timeout`.
    pub fn next_push(&mut self, timeout: Duration) -> Result<Option<Reading>, ClientError> {
        if let Some(r) = self.pushes.pop_front() {
            return Ok(Some(r));
        }
        match self.next_response(Some(timeout.max(Duration::from_millis(1))))? {
            Some(Response::Push(r)) => Ok(Some(r)),
            Some(Response::Error { rule, message, .. }) => {
                Err(ClientError::Refused { rule, message })
            }
            Some(other) => Err(ClientError::Unexpected(format!("{other:?}"))),
            None => Ok(None),
        }
    }

    /// End a registration.
    pub fn unregister(&mut self, id: u64) -> Result<(), ClientError> {
        self.expect_ok(&Request::Unregister { id })
    }

    /// Root: exclusive use for `duration_ms`.
    pub fn grant_exclusive(&mut self, id: u64, duration_ms: u64) -> Result<(), ClientError> {
        self.expect_ok(&Request::GrantExclusive { id, duration_ms })
    }

    /// The broker's status.
    pub fn status(&mut self) -> Result<Response, ClientError> {
        self.call(&Request::Status {})
    }

    fn expect_ok(&mut self, req: &Request) -> Result<(), ClientError> {
        match self.call(req)? {
            Response::Ok => Ok(()),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }
}

/// A broker to use if one answers at `path` (or the default socket): the function `top` and
/// the agent can call to count through the broker when one runs and directly otherwise.
pub fn try_connect(path: Option<&Path>) -> Option<Client> {
    let p = path.map_or_else(crate::server::default_socket, Path::to_path_buf);
    Client::connect(&p).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    #[test]
    fn shared_subscriptions_appear_in_the_page_without_pushes() {
        use crate::server::{self, Broker, Config};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s.sock");
        let listener = server::bind(&path).unwrap();
        let b = Arc::new(Broker::new(Config::default()).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let srv = {
            let (b, s) = (b.clone(), stop.clone());
            std::thread::spawn(move || server::run(b, listener, s))
        };
        let mut c = Client::connect(&path).unwrap();
        let a = c
            .register("task-clock,context-switches", "self", 1, None)
            .unwrap();
        let other = c.register("page-faults", "self", 1, None).unwrap();
        let va = c.subscribe_shared(a, 10).unwrap();
        let vo = c.subscribe_shared(other, 10).unwrap();
        assert_eq!((va.id(), vo.id()), (a, other));
        // Wait (bounded) for a few updates: they come without a message on the socket.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while seen.len() < 3 {
            assert!(std::time::Instant::now() < deadline, "no shared updates");
            if let Some(v) = va.read() {
                if seen
                    .last()
                    .map_or(true, |l: &SharedValues| l.pushes != v.pushes)
                {
                    seen.push(v);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for w in seen.windows(2) {
            assert!(w[1].pushes > w[0].pushes);
            assert!(w[1].enabled_ns >= w[0].enabled_ns);
            assert_eq!(w[1].raw.len(), 2);
            assert!(w[1].raw[0] >= w[0].raw[0], "{:?}", seen);
        }
        // The second subscription has its own slot in the same page.
        while vo.read().is_none() {
            assert!(std::time::Instant::now() < deadline, "no shared update");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(vo.read().unwrap().raw.len(), 1);
        // Nothing was pushed on the socket meanwhile.
        assert!(c.next_push(Duration::from_millis(1)).unwrap().is_none());
        // An unknown registration: refused.
        assert!(c.subscribe_shared(999_999, 10).is_err());
        stop.store(true, Ordering::SeqCst);
        drop(c);
        srv.join().unwrap().unwrap();
    }

    #[test]
    fn a_silent_broker_times_out_instead_of_hanging() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        let fake = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let hello = Response::Hello {
                version: proto::VERSION,
                uid: 1,
                gid: 2,
                pid: 3,
            };
            (&s).write_all(&proto::encode(&hello)).unwrap();
            // Then read the next request and never answer it.
            line.clear();
            r.read_line(&mut line).unwrap();
            // Returned, so the connection stays open (silent) until the test joins.
            (line, s)
        });
        let mut c = Client::connect(&path).unwrap();
        assert_eq!(c.identity, (1, 2, 3));
        c.set_timeout(Duration::from_millis(50));
        match c.read(7) {
            Err(ClientError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("{other:?}"),
        }
        assert!(fake.join().unwrap().0.contains("\"op\":\"read\""));
    }
}
