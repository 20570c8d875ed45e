//! A one-endpoint HTTP/1.1 exporter on std.
//!
//! Why std and not a crate such as `tiny_http`: the exporter answers one `GET` per scrape and
//! closes the connection, which is about a hundred lines, and writing them here lets every
//! bound be explicit (request head size, per-connection time, concurrent connections) without a
//! dependency tree for the daemon to carry. One accept thread; each connection gets its own
//! short-lived thread, at most [`MAX_CONNECTIONS`] at once. When all are taken, a new
//! connection closes the oldest one still waiting for its request head (a client that
//! connected and sent nothing, or not all of its head); only when every one is being answered
//! is it answered `503` and closed. So idle or slow clients cannot hold up a scrape (until
//! session 29, 16 silent connections made every scrape `503` for up to [`IO_TIMEOUT`]).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
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
/// Connections held at once. One more closes the oldest still waiting for its request head;
/// when all of them are being answered it gets `503`.
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

/// Listen on `addr` and answer `GET /metrics` (and `HEAD`; the target in origin form
/// `/metrics` or absolute form `http://host:port/metrics`) with `source()` rendered as
/// OpenMetrics 1.0, or as the Prometheus text format 0.0.4 when the `Accept` header gives
/// `text/plain` a higher quality than `application/openmetrics-text` ([`negotiate`]). Other
/// paths get `404`, other methods `405`, malformed requests `400`, an `Accept` that refuses
/// both formats (`q=0`) `406`. A panic in `source` is answered `500`.
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

/// A connection holding one of the [`MAX_CONNECTIONS`] places.
struct Held {
    id: u64,
    /// A handle on its socket, to close it when a newer connection needs the place.
    stream: TcpStream,
    /// Its request head has been read: it is being answered and is never closed early.
    answering: bool,
}

/// The connections held, oldest first.
#[derive(Clone, Default)]
struct Places(Arc<Mutex<Vec<Held>>>);

impl Places {
    fn lock(&self) -> MutexGuard<'_, Vec<Held>> {
        // A panic while holding the lock leaves a list that is still whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place for connection `id`: a free one, else the oldest connection still waiting
    /// for its request head is shut (its thread sees the end of its input and ends). False
    /// when every place is being answered.
    fn take(&self, id: u64, stream: &TcpStream) -> bool {
        let mut held = self.lock();
        if held.len() >= MAX_CONNECTIONS {
            let Some(oldest) = held.iter().position(|h| !h.answering) else {
                return false;
            };
            let _ = held.remove(oldest).stream.shutdown(Shutdown::Both);
        }
        let Ok(stream) = stream.try_clone() else {
            return false;
        };
        held.push(Held {
            id,
            stream,
            answering: false,
        });
        true
    }

    /// Marks connection `id` as being answered; false when it lost its place meanwhile (it was
    /// shut for a newer one: it ends without an answer).
    fn answering(&self, id: u64) -> bool {
        let mut held = self.lock();
        match held.iter_mut().find(|h| h.id == id) {
            Some(h) => {
                h.answering = true;
                true
            }
            None => false,
        }
    }
}

/// Gives connection `id`'s place back when its thread ends, even by panic.
struct Place {
    places: Places,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.places.lock().retain(|h| h.id != self.id);
    }
}

fn accept_loop(listener: TcpListener, source: Source, stop: Arc<AtomicBool>) {
    let places = Places::default();
    let mut next_id = 0u64;
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
        let id = next_id;
        next_id += 1;
        if !places.take(id, &stream) {
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
        let place = Place {
            places: places.clone(),
            id,
        };
        let source = source.clone();
        // If no thread can be made the connection is dropped (closed) with its place.
        let _ = std::thread::Builder::new()
            .name("openmetrics-conn".into())
            .spawn(move || {
                let place = place;
                handle(stream, &source, &place);
            });
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Metrics {
        head_only: bool,
        openmetrics: bool,
    },
    /// `/metrics`, with an `Accept` that refuses both formats.
    NotAcceptable,
    NotFound,
    MethodNotAllowed,
    Bad,
}

/// The format an `Accept` header picks (its values joined by commas, lower-cased): `Some(true)`
/// OpenMetrics, `Some(false)` the Prometheus text format, `None` neither (`406`).
///
/// Each format takes the quality (`q`, 1 when not given) of the most specific media range
/// that matches it (`type/subtype`, then `type/*`, then `*/*`; of several equally specific,
/// the highest); `q=0` means not acceptable (RFC 9110 §12.4.2, §12.5.1). The higher quality
/// wins and a tie goes to OpenMetrics. A header that names neither format (`application/json`)
/// is disregarded, as RFC 9110 allows: OpenMetrics, as without a header. Media type
/// parameters other than `q` (`version=`) are not compared. A range whose `q` is not a number
/// from 0 to 1 is ignored.
fn negotiate(accept: &str) -> Option<bool> {
    // (specificity, q) of the best range for OpenMetrics and for the text format.
    let mut best: [Option<(u8, f64)>; 2] = [None, None];
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim();
        let Some((ty, sub)) = media.split_once('/') else {
            continue;
        };
        let (ty, sub) = (ty.trim(), sub.trim());
        let mut q = Some(1.0);
        for p in parts {
            if let Some((name, value)) = p.split_once('=') {
                if name.trim() == "q" {
                    q = value
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|q| (0.0..=1.0).contains(q));
                }
            }
        }
        let Some(q) = q else {
            continue;
        };
        for (i, (want_ty, want_sub)) in [("application", "openmetrics-text"), ("text", "plain")]
            .into_iter()
            .enumerate()
        {
            let specificity = match (ty, sub) {
                (t, s) if t == want_ty && s == want_sub => 2,
                (t, "*") if t == want_ty => 1,
                ("*", "*") => 0,
                _ => continue,
            };
            best[i] = match best[i] {
                Some((sp, _)) if sp > specificity => best[i],
                Some((sp, bq)) if sp == specificity => Some((sp, bq.max(q))),
                _ => Some((specificity, q)),
            };
        }
    }
    let [om, text] = best.map(|b| b.map(|(_, q)| q));
    if om.is_none() && text.is_none() {
        return Some(true);
    }
    let (om, text) = (om.unwrap_or(0.0), text.unwrap_or(0.0));
    if om == 0.0 && text == 0.0 {
        None
    } else {
        Some(om >= text)
    }
}

/// The path of a request target: origin form (`/metrics?x`) as is; absolute form
/// (`http://host:port/metrics?x`), which a server must accept (RFC 9112 §3.2.2), from the
/// first `/` after its authority (`/` when it has none). `None` for anything else (asterisk
/// form, authority form, an absolute form without a host or of another scheme).
fn target_path(target: &str) -> Option<&str> {
    if target.starts_with('/') {
        return Some(target);
    }
    let rest = ["http://", "https://"].iter().find_map(|scheme| {
        target
            .get(..scheme.len())
            .filter(|t| t.eq_ignore_ascii_case(scheme))
            .map(|_| &target[scheme.len()..])
    })?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    match &rest[end..] {
        r if r.starts_with('/') => Some(r),
        _ => Some("/"),
    }
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
    if !version.starts_with("HTTP/1.") || method.is_empty() {
        return Request::Bad;
    }
    let Some(target) = target_path(target) else {
        return Request::Bad;
    };
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
    match negotiate(&accept) {
        Some(openmetrics) => Request::Metrics {
            head_only,
            openmetrics,
        },
        None => Request::NotAcceptable,
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

fn handle(mut stream: TcpStream, source: &Source, place: &Place) {
    let head = match read_head(&mut stream) {
        // Shut for a newer connection just as its head arrived: it has no answer.
        Ok(Head::Complete(_)) if !place.places.answering(place.id) => return,
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
    // A HEAD request's answer has no body, errors included (RFC 9110 9.3.2: a body after a
    // HEAD answer would be read as the start of the next response).
    let is_head = head.starts_with(b"HEAD ");
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
        Request::NotAcceptable => respond(
            &mut stream,
            406,
            "Not Acceptable",
            &[],
            b"Accept refuses both formats served here: application/openmetrics-text \
              (OpenMetrics 1.0.0) and text/plain (Prometheus 0.0.4)\n",
            is_head,
        ),
        Request::NotFound => respond(
            &mut stream,
            404,
            "Not Found",
            &[],
            b"only /metrics is served here\n",
            is_head,
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
            is_head,
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

    /// q-values decide (CLI probe, session 29: `text/plain;q=0.1,
    /// application/openmetrics-text;q=0` got OpenMetrics); q=0 refuses; ties and headers
    /// that name neither format keep OpenMetrics, as before.
    #[test]
    fn accept_quality_values_are_honoured() {
        let om = Some(true);
        let text = Some(false);
        for (accept, want) in [
            ("", om),
            ("*/*", om),
            ("application/json", om),
            ("text/plain", text),
            ("text/plain;version=0.0.4", text),
            ("text/*", text),
            ("application/*", om),
            ("application/openmetrics-text", om),
            // Prometheus' own scrape header.
            ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", om),
            ("text/plain;q=0.1, application/openmetrics-text;q=0", text),
            ("text/plain; q=0.9, application/openmetrics-text; q=0.5", text),
            ("text/plain;q=0.5, application/openmetrics-text;q=0.5", om),
            ("text/plain, application/openmetrics-text", om),
            // The most specific range decides, whatever the wildcard says.
            ("*/*;q=1, text/plain;q=0", om),
            ("*/*;q=0.1, application/openmetrics-text;q=0", text),
            ("text/plain;q=0.2, */*;q=0.5", om),
            // Of two equally specific ranges, the higher quality.
            ("text/plain;version=0.0.4;q=0, text/plain;q=0.3", text),
            // A malformed quality ignores its range.
            ("text/plain;q=abc", om),
            ("text/plain;q=2", om),
            ("application/openmetrics-text;q=-1, text/plain", text),
            // Refused, both.
            ("text/plain;q=0, application/openmetrics-text;q=0", None),
            ("*/*;q=0", None),
            ("text/plain;q=0", None),
            ("application/openmetrics-text;q=0.000", None),
        ] {
            assert_eq!(negotiate(accept), want, "{accept:?}");
        }
        let m = |h: &str| parse_request(h.as_bytes());
        assert_eq!(
            m("GET /metrics HTTP/1.1\r\nAccept: text/plain;q=0\r\nAccept: application/openmetrics-text;q=0"),
            Request::NotAcceptable
        );
        assert_eq!(
            m("GET /metrics HTTP/1.1\r\nAccept: text/plain;q=0.1, application/openmetrics-text;q=0"),
            Request::Metrics {
                head_only: false,
                openmetrics: false
            }
        );
    }

    /// The absolute form, which a server must accept (RFC 9112 §3.2.2), is served by its
    /// path (it got 400; CLI probe, session 29).
    #[test]
    fn absolute_form_targets_are_served_by_their_path() {
        for (target, want) in [
            ("/metrics", Some("/metrics")),
            ("http://127.0.0.1:9464/metrics", Some("/metrics")),
            ("HTTP://host/metrics?x=1", Some("/metrics?x=1")),
            ("https://[::1]:9464/metrics", Some("/metrics")),
            ("http://host", Some("/")),
            ("http://host?x", Some("/")),
            ("http:///metrics", None),
            ("ftp://host/metrics", None),
            ("host:9464", None),
            ("*", None),
            ("metrics", None),
            ("http:", None),
        ] {
            assert_eq!(target_path(target), want, "{target:?}");
        }
        let m = |h: &str| parse_request(h.as_bytes());
        assert_eq!(
            m("GET http://localhost:9464/metrics HTTP/1.1\r\nHost: localhost:9464"),
            Request::Metrics {
                head_only: false,
                openmetrics: true
            }
        );
        assert_eq!(
            m("GET http://localhost:9464/other HTTP/1.1"),
            Request::NotFound
        );
        assert_eq!(m("GET http://localhost:9464 HTTP/1.1"), Request::NotFound);
        assert_eq!(m("GET ftp://h/metrics HTTP/1.1"), Request::Bad);
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
