//! A minimal HTTP/1.1 client on std for the tests (one request per connection).

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response: status code, headers (names lower-cased) and body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Send `raw` as is and read the answer until the server closes.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> io::Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    // Hang guards, not assertions about speed.
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_write_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(raw)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    parse_response(&buf)
}

/// Send `raw`, shut the write side (the client is done sending) and read until the server
/// closes. `Ok(None)` when the server closed without a byte.
pub fn exchange_then_shutdown(addr: SocketAddr, raw: &[u8]) -> io::Result<Option<Response>> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    // Hang guards, not assertions about speed.
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_write_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(raw)?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    if buf.is_empty() {
        return Ok(None);
    }
    parse_response(&buf).map(Some)
}

/// `GET path` with extra header lines (each `Name: value`).
pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> io::Result<Response> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    exchange(addr, req.as_bytes())
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

pub fn parse_response(buf: &[u8]) -> io::Result<Response> {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of response head"))?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("head not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = buf[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Response {
        status,
        headers,
        body: String::from_utf8(body).map_err(|_| bad("body not UTF-8"))?,
    })
}

fn dechunk(mut b: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("chunk size line"))?;
        let size_text = std::str::from_utf8(&b[..eol]).map_err(|_| bad("chunk size"))?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| bad("chunk size"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err(bad("short chunk"));
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}
