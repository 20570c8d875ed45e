//! A threaded server under load with the lock profiler: Python's ThreadingHTTPServer on the
//! loopback, driven by a bounded number of concurrent requests. Every response must be the
//! file served, and the report must show the server's threads and locks.

mod common;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn counterpoint() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_counterpoint"))
}

fn get(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    // Generous: a loaded CI machine serves slowly; the timeout only keeps a dead server from
    // hanging the test.
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    write!(s, "GET /page.txt HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("send");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("receive");
    body
}

#[test]
fn threaded_http_server_under_load() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("skipped: /usr/bin/python3 missing");
        return;
    }
    common::ensure_lockprof_lib();
    let tmp = tempfile::tempdir().expect("tempdir");
    let content = "counterpoint lockprof server test\n".repeat(50);
    std::fs::write(tmp.path().join("page.txt"), &content).expect("write page");
    let report = tmp.path().join("report.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/threaded_server.py");
    let mut child = Command::new(counterpoint())
        .args(["lockprof", "--json", "-o"])
        .arg(&report)
        .arg("--")
        .arg(python)
        .arg(&script)
        .arg("600")
        .arg(tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start server under lockprof");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("read");
    let port: u16 = first
        .strip_prefix("port ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));

    // 8 client threads x 25 requests, all while the server runs.
    let clients: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || (0..25).map(|_| get(port)).collect::<Vec<_>>()))
        .collect();
    let mut ok = 0;
    for c in clients {
        for resp in c.join().expect("client") {
            assert!(resp.starts_with("HTTP/1.0 200"), "{resp}");
            assert!(resp.ends_with(&content), "body differs");
            ok += 1;
        }
    }
    assert_eq!(ok, 200);
    // The server stops when its stdin closes (never on a timer the clients could outlast).
    drop(child.stdin.take());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(rest, ["stopped"]);
    assert!(child.wait().expect("wait").success());

    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("report"))
        .expect("JSON report");
    let locks = v["locks"].as_array().expect("locks");
    let acquisitions: u64 = locks
        .iter()
        .filter_map(|l| l["acquisitions"].as_u64())
        .sum();
    assert!(
        acquisitions > 200,
        "{acquisitions} acquisitions for 200 requests"
    );
    let threads = v["threads"].as_array().map_or(0, Vec::len);
    assert!(
        threads > 8,
        "one thread per connection expected, saw {threads}"
    );
}
