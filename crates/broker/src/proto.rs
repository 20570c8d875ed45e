//! The wire protocol: newline-delimited JSON, one request or response per line, at most
//! [`MAX_LINE_BYTES`] bytes. Every request names the protocol version it speaks in `hello`;
//! the broker answers every request with exactly one response, and pushes `reading` responses
//! on its own for subscriptions.
//!
//! The decoder ([`decode_request`]) is total: any byte string gives a request or a
//! [`ProtoError`], never a panic (fuzzed by proptest and by a million-input test).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// Longest accepted line (request or response), newline excluded.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Most ids in one `read_many`: its answer (about 300 bytes per reading of three events) stays
/// well inside [`MAX_LINE_BYTES`].
pub const MAX_READ_MANY: usize = 64;

/// Why a line is not a request.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtoError {
    /// The line is longer than [`MAX_LINE_BYTES`].
    #[error("request of {len} bytes exceeds the limit of {MAX_LINE_BYTES} bytes")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// Not UTF-8.
    #[error("request is not UTF-8 (byte {at})")]
    NotUtf8 {
        /// Offset of the first bad byte.
        at: usize,
    },
    /// Not a request object (JSON syntax, unknown `op`, missing or mistyped field).
    #[error("malformed request: {0}")]
    Malformed(String),
}

/// What a consumer asks the broker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// First message: the client's protocol version.
    Hello {
        /// Version spoken by the client.
        version: u32,
    },
    /// Count an event set on a target.
    Register {
        /// Event list in `counterpoint stat -e` syntax (`task-clock,cs:u`).
        events: String,
        /// `self`, `pid:N`, `tid:N`, `cgroup:PATH`, `user:NAME` or `cpus:LIST`.
        target: String,
        /// Relative share of counter time (1..=1000).
        #[serde(default = "default_share")]
        share: u32,
        /// `user` (default) or `system` (the placement agent: the reserved share).
        #[serde(default)]
        class: Option<String>,
    },
    /// Current counts of a registration.
    Read {
        /// Registration id.
        id: u64,
    },
    /// Current counts of several registrations at once (at most [`MAX_READ_MANY`]), in the order
    /// asked: one request, one rate-limit token, for a consumer that holds many registrations
    /// (`top` and the agent hold one per watched thread).
    ReadMany {
        /// Registration ids.
        ids: Vec<u64>,
    },
    /// Push readings of a registration every `interval_ms`.
    Subscribe {
        /// Registration id.
        id: u64,
        /// Push period.
        interval_ms: u64,
    },
    /// Like `subscribe`, but the readings are written into a shared-memory page instead of
    /// being sent (see `shm`): the answer names the slot, and the first one on a connection
    /// carries the page's descriptor (`SCM_RIGHTS`).
    SubscribeShared {
        /// Registration id.
        id: u64,
        /// Update period.
        interval_ms: u64,
    },
    /// Stop counting a registration.
    Unregister {
        /// Registration id.
        id: u64,
    },
    /// Root only: registration `id` alone uses the counters for `duration_ms`.
    GrantExclusive {
        /// Registration id.
        id: u64,
        /// How long (bounded by the policy).
        duration_ms: u64,
    },
    /// Broker state: slots, registrations, kernel counters. A struct variant with no fields,
    /// not a unit variant: serde's internally tagged unit variants ignore extra fields, and
    /// `{"op":"status","extra":1}` must be refused like any other unknown field.
    Status {},
}

fn default_share() -> u32 {
    1
}

/// One event's counts as a consumer sees them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventCount {
    /// The event as registered (`task-clock`, `cs:u`).
    pub event: String,
    /// Whether it is counted; `false` with `reason` when the kernel does not support it.
    pub supported: bool,
    /// Why not, when not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Events counted while this consumer was scheduled.
    pub raw: u64,
    /// `raw * enabled_ns / running_ns` (the estimate over the whole enabled time); `null` when
    /// the consumer never ran.
    pub scaled: Option<f64>,
    /// The kernel counter's own running time while this consumer was scheduled, in ns (summed
    /// over the CPUs of a per-CPU target): what `perf stat` prints in its run-time column. For
    /// a task target it is the task's time on a CPU in those windows (0 for a task that never
    /// ran), not wall time. Absent from a broker that predates it; `null` when not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_ns: Option<u64>,
    /// The event's unit scale (1e-6 for the ns clocks shown in msec), as the parser gives it.
    pub unit_scale: f64,
    /// The unit after `unit_scale`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// Counts of one registration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Registration id.
    pub id: u64,
    /// Time since registration (including broker downtime), in ns.
    pub enabled_ns: u64,
    /// Time this consumer was scheduled on the counters, in ns.
    pub running_ns: u64,
    /// Confidence = `running_ns / enabled_ns` in [0, 1]: the fraction of the enabled time the
    /// counts were measured rather than extrapolated (1 = exact).
    pub confidence: f64,
    /// Per event (for a per-CPU target, summed over its CPUs; `scaled` is then the sum of the
    /// per-CPU estimates, each scaled by its own CPU's coverage).
    pub events: Vec<EventCount>,
    /// Per CPU, for a per-CPU target (`cpus:LIST`): each CPU is time-multiplexed on its own, so
    /// each has its own running time and coverage. Empty for task targets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuReading>,
}

/// One CPU's part of a per-CPU registration's reading.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuReading {
    /// The CPU.
    pub cpu: usize,
    /// Time the registration was scheduled on this CPU, in ns (enabled time is the reading's).
    pub running_ns: u64,
    /// Per event, in registration order: counted on this CPU while scheduled there.
    pub raw: Vec<u64>,
}

/// A summary of one registration in `status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegistrationInfo {
    /// Id.
    pub id: u64,
    /// Owner uid.
    pub uid: u32,
    /// Events as registered.
    pub events: String,
    /// Target as registered.
    pub target: String,
    /// Share.
    pub share: u32,
    /// `user` or `system`.
    pub class: String,
    /// Time scheduled, ns.
    pub running_ns: u64,
}

/// The broker's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    /// Answer to `hello`.
    Hello {
        /// Broker's version.
        version: u32,
        /// The caller as the kernel identified it.
        uid: u32,
        /// Gid.
        gid: u32,
        /// Pid.
        pid: i32,
    },
    /// Answer to `register`.
    Registered {
        /// The new registration's id.
        id: u64,
        /// Kernel counters it shares with other registrations (deduplicated).
        shared_counters: usize,
    },
    /// Answer to `read`.
    Reading(Reading),
    /// Answer to `subscribe_shared`: where its readings appear.
    SharedSlot {
        /// Registration id.
        id: u64,
        /// Slot in the connection's shared page.
        slot: usize,
        /// Whether this message carries the page's descriptor (the first on a connection).
        page_attached: bool,
    },
    /// Answer to `read_many`, in the order of its ids.
    Readings {
        /// One reading per id.
        readings: Vec<Reading>,
    },
    /// Pushed for a subscription (never an answer to a request).
    Push(Reading),
    /// Success without data (`subscribe`, `unregister`, `grant_exclusive`).
    Ok,
    /// Answer to `status`.
    Status {
        /// Counter slots per CPU.
        slots: usize,
        /// CPUs scheduled.
        cpus: usize,
        /// Kernel counters open (after deduplication).
        kernel_counters: usize,
        /// Registrations.
        registrations: Vec<RegistrationInfo>,
    },
    /// A refusal or failure. `rule` names the policy rule for refusals.
    Error {
        /// The policy rule, when a rule refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        /// One line.
        message: String,
        /// Whether the broker closes the connection after this.
        #[serde(default)]
        closing: bool,
    },
}

/// Decode one line (without its newline) into a request. Never panics.
pub fn decode_request(line: &[u8]) -> Result<Request, ProtoError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(ProtoError::TooLong { len: line.len() });
    }
    let text = std::str::from_utf8(line).map_err(|e| ProtoError::NotUtf8 {
        at: e.valid_up_to(),
    })?;
    // serde_json bounds nesting (128 levels), so deep input cannot exhaust the stack.
    serde_json::from_str(text).map_err(|e| ProtoError::Malformed(e.to_string()))
}

/// Whether a line is blank (empty or ASCII whitespace only, a `\r` of a CRLF client included):
/// the broker skips such lines without an answer, as line protocols usually do, rather than
/// closing the connection over them.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Decode one response line. Never panics.
pub fn decode_response(line: &[u8]) -> Result<Response, ProtoError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(ProtoError::TooLong { len: line.len() });
    }
    let text = std::str::from_utf8(line).map_err(|e| ProtoError::NotUtf8 {
        at: e.valid_up_to(),
    })?;
    serde_json::from_str(text).map_err(|e| ProtoError::Malformed(e.to_string()))
}

/// Encode a message as one line, newline included.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail (no maps with non-string keys, no I/O).
    let mut v = serde_json::to_vec(msg).unwrap_or_else(|e| {
        format!("{{\"type\":\"error\",\"message\":\"encoding: {e}\"}}").into_bytes()
    });
    v.push(b'\n');
    v
}

/// Splits a byte stream into lines, enforcing the size limit while a line is still incomplete
/// (a peer that never sends a newline cannot make us buffer without bound).
#[derive(Debug, Default)]
pub struct LineBuffer {
    buf: Vec<u8>,
}

impl LineBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }
    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
    /// The next complete line (without newline), `Ok(None)` if none yet, or an error when the
    /// pending line already exceeds the limit.
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, ProtoError> {
        match self.buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                if line.len() > MAX_LINE_BYTES {
                    return Err(ProtoError::TooLong { len: line.len() });
                }
                Ok(Some(line))
            }
            None if self.buf.len() > MAX_LINE_BYTES => Err(ProtoError::TooLong {
                len: self.buf.len(),
            }),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn requests_round_trip() {
        let reqs = vec![
            Request::Hello { version: 1 },
            Request::Register {
                events: "task-clock,cs:u".into(),
                target: "pid:42".into(),
                share: 5,
                class: Some("system".into()),
            },
            Request::Read { id: 7 },
            Request::Subscribe {
                id: 7,
                interval_ms: 100,
            },
            Request::Unregister { id: 7 },
            Request::GrantExclusive {
                id: 7,
                duration_ms: 500,
            },
            Request::Status {},
        ];
        for r in reqs {
            let line = encode(&r);
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(decode_request(&line[..line.len() - 1]), Ok(r));
        }
    }

    #[test]
    fn share_defaults_to_one_and_unknown_fields_are_refused() {
        let r = decode_request(br#"{"op":"register","events":"cs","target":"self"}"#).unwrap();
        assert!(matches!(r, Request::Register { share: 1, .. }));
        assert!(matches!(
            decode_request(br#"{"op":"read","id":1,"extra":2}"#),
            Err(ProtoError::Malformed(_))
        ));
        assert!(matches!(
            decode_request(br#"{"op":"fly"}"#),
            Err(ProtoError::Malformed(_))
        ));
    }

    #[test]
    fn every_op_refuses_an_unknown_field() {
        let ops = [
            r#""op":"hello","version":1"#,
            r#""op":"register","events":"cs","target":"self""#,
            r#""op":"read","id":1"#,
            r#""op":"read_many","ids":[1]"#,
            r#""op":"subscribe","id":1,"interval_ms":10"#,
            r#""op":"subscribe_shared","id":1,"interval_ms":10"#,
            r#""op":"unregister","id":1"#,
            r#""op":"grant_exclusive","id":1,"duration_ms":10"#,
            r#""op":"status""#,
        ];
        for op in ops {
            let good = format!("{{{op}}}");
            assert!(decode_request(good.as_bytes()).is_ok(), "{good}");
            let bad = format!("{{{op},\"extra\":1}}");
            match decode_request(bad.as_bytes()) {
                Err(ProtoError::Malformed(m)) => assert!(m.contains("unknown field"), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // Status is still `{"op":"status"}` on the wire.
        assert_eq!(encode(&Request::Status {}), b"{\"op\":\"status\"}\n");
    }

    #[test]
    fn oversized_and_binary_lines_are_errors() {
        let big = vec![b' '; MAX_LINE_BYTES + 1];
        assert_eq!(
            decode_request(&big),
            Err(ProtoError::TooLong {
                len: MAX_LINE_BYTES + 1
            })
        );
        assert_eq!(
            decode_request(b"{\xff}"),
            Err(ProtoError::NotUtf8 { at: 1 })
        );
        let deep = "[".repeat(100_000);
        assert!(decode_request(deep.as_bytes()).is_err());
    }

    #[test]
    fn line_buffer_splits_and_bounds() {
        let mut b = LineBuffer::new();
        b.push(b"{\"op\":\"status\"}\n{\"op\"");
        assert_eq!(
            b.next_line().unwrap().unwrap(),
            b"{\"op\":\"status\"}".to_vec()
        );
        assert_eq!(b.next_line().unwrap(), None);
        b.push(&vec![b'x'; MAX_LINE_BYTES]);
        assert!(matches!(b.next_line(), Err(ProtoError::TooLong { .. })));
    }

    /// Random mutations of valid requests, plus random bytes: the decoder never panics. Run
    /// with this many inputs by `cargo test -p counterpoint-broker --release fuzz_million --
    /// --ignored`; the default run uses 100,000 to keep debug test time low.
    fn fuzz(n: u64) -> u64 {
        let seeds: Vec<Vec<u8>> = [
            r#"{"op":"hello","version":1}"#,
            r#"{"op":"register","events":"task-clock,{cs,faults}:u","target":"cgroup:/sys/fs/cgroup/a","share":3,"class":"system"}"#,
            r#"{"op":"read","id":18446744073709551615}"#,
            r#"{"op":"subscribe","id":1,"interval_ms":10}"#,
            r#"{"op":"grant_exclusive","id":2,"duration_ms":1000}"#,
            r#"{"op":"status"}"#,
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            // xorshift64*: deterministic, no dependency.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut ok = 0u64;
        for i in 0..n {
            let mut input = if i % 4 == 0 {
                let len = (next() % 64) as usize;
                (0..len).map(|_| next() as u8).collect()
            } else {
                seeds[(next() % seeds.len() as u64) as usize].clone()
            };
            let edits = 1 + next() % 4;
            for _ in 0..edits {
                if input.is_empty() {
                    input.push(next() as u8);
                }
                let at = (next() % input.len() as u64) as usize;
                match next() % 5 {
                    0 => input[at] = next() as u8,
                    1 => {
                        input.remove(at);
                    }
                    2 => input.insert(at, b"{}[]\":,0-9e\\"[(next() % 12) as usize]),
                    3 => input.truncate(at),
                    _ => {
                        let dup = input[at..].to_vec();
                        input.extend_from_slice(&dup);
                    }
                }
            }
            if decode_request(&input).is_ok() {
                ok += 1;
            }
        }
        ok
    }

    #[test]
    fn fuzz_hundred_thousand_inputs() {
        let ok = fuzz(100_000);
        // Some mutations keep a valid request, most do not: both paths are exercised.
        assert!(ok > 0 && ok < 100_000, "{ok} valid");
    }

    #[test]
    #[ignore = "a million inputs: run in release (see docs/broker.md)"]
    fn fuzz_million() {
        let ok = fuzz(1_000_000);
        println!("fuzz: 1000000 inputs decoded without panic, {ok} valid requests");
    }

    proptest! {
        #[test]
        fn decoder_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }

        #[test]
        fn decoder_is_total_on_near_json(s in r#"[{}\[\]":,a-z0-9 _-]{0,200}"#) {
            let _ = decode_request(s.as_bytes());
        }
    }
}
