//! A one-endpoint HTTP/1.1 exporter on std.
//!
//! Why std and not a crate such as `tiny_http`: the exporter answers one `GET` per scrape and
//! closes the connection, which is about a hundred lines, and writing them here lets every
//! bound be explicit (request head size, per-connection time, concurrent connections) without a
//! dependency tree for the daemon to carry. One accept thread; each connection gets its own
//! short-lived thread, at most [`MAX_CONNECTIONS`] at once (more are answered `503` and closed),
//! so a slow or silent client cannot hold up a scrape for longer than [`IO_TIMEOUT`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::family::Family;
use crate::text::{render, render_prometheus_text};

/// Content type of the OpenMetrics 1.0 text format.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the Prometheus text format 0.0.4.
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Largest request head (request line and headers) read; larger gets `431`.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Time a connection may take to send its request and receive the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; the next ones get `503`.
pub const MAX_CONNECTIONS: usize = 16;

/// A running exporter. Dropping it (or [`ExporterHandle::stop`]) stops the accept thread;
/// connections in flight finish on their own threads within [`IO_TIMEOUT`].
pub struct ExporterHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ExporterHandle {
    /// The address it listens on (with the port chosen when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting and wait for the accept thread to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // accept(2) has no timeout on std: wake it with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            let _ = thread.join();
        }
        // Otherwise leave the thread detached: it ends at its next accept.
    }
}

impl Drop for ExporterHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The families to expose, built at each scrape.
pub type Source = Arc<dyn Fn() -> Vec<Family> + Send + Sync>;

/// Listen on `addr` and answer `GET /metrics` (and `HEAD`) with `source()` rendered as
/// OpenMetrics 1.0, or as the Prometheus text format 0.0.4 when the `Accept` header asks for
/// `text/plain` and not for `application/openmetrics-text`. Other paths get `404`, other
/// methods `405`, malformed requests `400`. A panic in `source` is answered `500`.
pub fn serve(addr: SocketAddr, source: Source) -> io::Result<ExporterHandle> {
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let thread = std::thread::Builder::new()
        .name("openmetrics-accept".into())
        .spawn({
            let stop = stop.clone();
            move || accept_loop(listener, source, stop)
        })?;
    Ok(ExporterHandle {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// Decrements the active-connection count when a connection thread ends, even by panic.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, source: Source, stop: Arc<AtomicBool>) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let conn = listener.accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let mut stream = match conn {
            Ok((stream, _)) => stream,
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = respond(
                &mut stream,
                503,
                "Service Unavailable",
                &[],
                b"busy\n",
                false,
            );
            continue;
        }
        let guard = Active(active.clone());
        let source = source.clone();
        // If no thread can be made the connection is dropped (closed) with the guard.
        let _ = std::thread::Builder::new()
            .name("openmetrics-conn".into())
            .spawn(move || {
                let _guard = guard;
                handle(stream, &source);
            });
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Metrics { head_only: bool, openmetrics: bool },
    NotFound,
    MethodNotAllowed,
    Bad,
}

/// Parse a request head (without the blank line). Total: any bytes give a `Request`.
/// Lines end in CRLF or, leniently (RFC 9112 §2.2), a bare LF; a bare CR elsewhere is `Bad`.
fn parse_request(head: &[u8]) -> Request {
    let head = String::from_utf8_lossy(head);
    let lines: Vec<&str> = head
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if lines.iter().any(|l| l.contains('\r')) {
        return Request::Bad;
    }
    let mut lines = lines.into_iter();
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Request::Bad;
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Request::Bad;
    }
    let mut accept = String::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Request::Bad;
        };
        if name.trim().eq_ignore_ascii_case("accept") {
            accept.push_str(&value.to_ascii_lowercase());
            accept.push(',');
        }
    }
    let path = target.split('?').next().unwrap_or(target);
    if path != "/metrics" {
        return Request::NotFound;
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Request::MethodNotAllowed,
    };
    let openmetrics =
        accept.contains("application/openmetrics-text") || !accept.contains("text/plain");
    Request::Metrics {
        head_only,
        openmetrics,
    }
}

/// Length of the request head in `buf` (without the terminator of its last line and the
/// blank line), once the blank line has arrived. Lines may end in CRLF or a bare LF.
fn head_len(buf: &[u8]) -> Option<usize> {
    buf.iter().enumerate().find_map(|(i, &b)| {
        let rest = &buf[i + 1..];
        (b == b'\n' && (rest.starts_with(b"\n") || rest.starts_with(b"\r\n"))).then(|| {
            if i > 0 && buf[i - 1] == b'\r' {
                i - 1
            } else {
                i
            }
        })
    })
}

/// How reading a request head ended.
enum Head {
    Complete(Vec<u8>),
    /// Larger than [`MAX_REQUEST_BYTES`] without its end.
    TooLarge,
    /// The client shut its side before the end of the head, having sent this much.
    Truncated(usize),
}

/// Read up to the end of the request head, within [`MAX_REQUEST_BYTES`] and [`IO_TIMEOUT`].
fn read_head(stream: &mut TcpStream) -> io::Result<Head> {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_len(&buf) {
            buf.truncate(end);
            return Ok(Head::Complete(buf));
        }
        if buf.len() >= MAX_REQUEST_BYTES {
            return Ok(Head::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(Head::Truncated(buf.len()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn handle(mut stream: TcpStream, source: &Source) {
    let head = match read_head(&mut stream) {
        Ok(Head::Complete(head)) => head,
        Ok(Head::TooLarge) => {
            let _ = respond(
                &mut stream,
                431,
                "Request Header Fields Too Large",
                &[],
                b"request head too large\n",
                false,
            );
            return;
        }
        // Connected and closed without a byte: nobody to answer.
        Ok(Head::Truncated(0)) => return,
        // Half a request, then the client shut its side: it may still read the answer.
        Ok(Head::Truncated(_)) => {
            let _ = respond(
                &mut stream,
                400,
                "Bad Request",
                &[],
                b"request ended before the blank line\n",
                false,
            );
            return;
        }
        // Timed out or reset: nothing useful to say.
        Err(_) => return,
    };
    let _ = match parse_request(&head) {
        Request::Metrics {
            head_only,
            openmetrics,
        } => match catch_unwind(AssertUnwindSafe(|| source())) {
            Ok(families) => {
                let (body, ctype) = if openmetrics {
                    (render(&families), OPENMETRICS_CONTENT_TYPE)
                } else {
                    (
                        render_prometheus_text(&families),
                        PROMETHEUS_TEXT_CONTENT_TYPE,
                    )
                };
                respond(
                    &mut stream,
                    200,
                    "OK",
                    &[("Content-Type", ctype)],
                    body.as_bytes(),
                    head_only,
                )
            }
            Err(_) => respond(
                &mut stream,
                500,
                "Internal Server Error",
                &[],
                b"the metrics source failed\n",
                head_only,
            ),
        },
        Request::NotFound => respond(
            &mut stream,
            404,
            "Not Found",
            &[],
            b"only /metrics is served here\n",
            false,
        ),
        Request::MethodNotAllowed => respond(
            &mut stream,
            405,
            "Method Not Allowed",
            &[("Allow", "GET, HEAD")],
            b"GET or HEAD only\n",
            false,
        ),
        Request::Bad => respond(
            &mut stream,
            400,
            "Bad Request",
            &[],
            b"malformed request\n",
            false,
        ),
    };
}

fn respond(
    stream: &mut TcpStream,
    code: u16,
    reason: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {code} {reason}\r\n");
    let mut has_type = false;
    for (k, v) in headers {
        has_type |= k.eq_ignore_ascii_case("content-type");
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !has_type {
        head.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()?;
    // Half-close so the client sees the end even if it sent more than we read.
    stream.shutdown(Shutdown::Write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Total: any bytes give a classification, never a panic.
        #[test]
        fn parse_request_is_total(head in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = parse_request(&head);
        }

        /// Arbitrary request lines of the right shape never reach /metrics unless they name it.
        #[test]
        fn only_the_metrics_path_is_served(method in "[A-Z]{1,7}", path in "/[ -~&&[^ ?]]{0,20}") {
            let r = parse_request(format!("{method} {path} HTTP/1.1\r\nHost: x").as_bytes());
            if path != "/metrics" {
                prop_assert!(matches!(r, Request::NotFound | Request::Bad));
            }
        }
    }

    #[test]
    fn requests_are_classified() {
        let m = |h: &str| parse_request(h.as_bytes());
        assert_eq!(
            m("GET /metrics HTTP/1.1\r\nHost: x"),
            Request::Metrics {
                head_only: false,
                openmetrics: true
            }
        );
        assert_eq!(
            m("GET /metrics?x=1 HTTP/1.0\r\naccept: text/plain;version=0.0.4"),
            Request::Metrics {
                head_only: false,
                openmetrics: false
            }
        );
        // Prometheus' own scrape header prefers OpenMetrics.
        assert_eq!(
            m("HEAD /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
            Request::Metrics {
                head_only: true,
                openmetrics: true
            }
        );
        assert_eq!(m("GET / HTTP/1.1"), Request::NotFound);
        assert_eq!(m("POST /metrics HTTP/1.1"), Request::MethodNotAllowed);
        assert_eq!(m("GET /metrics"), Request::Bad);
        assert_eq!(m("GET /metrics HTTP/1.1 extra"), Request::Bad);
        assert_eq!(m("GET metrics HTTP/1.1"), Request::Bad);
        assert_eq!(m("GET /metrics HTTP/1.1\r\nno colon"), Request::Bad);
        assert_eq!(m("\u{0}\u{ff}"), Request::Bad);
        assert_eq!(m(""), Request::Bad);
        // Bare LF line ends are accepted (RFC 9112 §2.2); a bare CR is not.
        assert_eq!(
            m("GET /metrics HTTP/1.1\nAccept: text/plain"),
            Request::Metrics {
                head_only: false,
                openmetrics: false
            }
        );
        assert_eq!(m("GET /metrics HTTP/1.1\rHost: x"), Request::Bad);
        assert_eq!(m("GET /metrics HTTP/1.1\r\nHost: x\ry"), Request::Bad);
    }

    #[test]
    fn the_head_ends_at_a_blank_line_after_crlf_or_bare_lf() {
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r\n"), Some(14));
        assert_eq!(head_len(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(head_len(b"GET / HTTP/1.1\r\nA: b\n\r\nbody"), Some(20));
        assert_eq!(head_len(b"GET / HTTP/1.1\nA: b\r\n\n"), Some(19));
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r"), None);
        assert_eq!(head_len(b"GET / HTTP/1.1\r\r\n"), None);
        assert_eq!(head_len(b""), None);
    }
}
