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
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
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
}

impl Client {
    /// Connect and say hello.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|error| ClientError::Connect {
            path: path.to_path_buf(),
            error,
        })?;
        let mut c = Client {
            stream,
            lines: LineBuffer::new(),
            pushes: VecDeque::new(),
            identity: (0, 0, 0),
            timeout: Duration::from_secs(30),
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
            match self.stream.read(&mut chunk) {
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
        self.call(&Request::Status)
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
