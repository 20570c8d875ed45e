//! The broker in process: deduplication, multiplexing under a slot budget, policy refusals by
//! rule for a fabricated peer, subscriptions, exclusive grants. Counts and structure only.

use counterpoint_broker::access::{Peer, Policy};
use counterpoint_broker::client::{Client, ClientError};
use counterpoint_broker::proto::{Request, Response};
use counterpoint_broker::server::{self, Broker, Config};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn me() -> Peer {
    Peer {
        // SAFETY: no preconditions.
        uid: unsafe { libc::geteuid() },
        gid: unsafe { libc::getegid() },
        pid: std::process::id() as i32,
    }
}

/// A broker on `journal`, as a restarted daemon would open it.
fn broker_on(journal: &std::path::Path) -> Broker {
    Broker::new(Config {
        slots: 4,
        journal: Some(journal.to_path_buf()),
        ..Config::default()
    })
    .unwrap()
}

/// This process's start time, as the broker records it.
fn my_start_time() -> u64 {
    counterpoint_broker::target::start_time(
        &counterpoint_broker::target::Roots::default(),
        std::process::id() as i32,
    )
    .unwrap()
}

fn broker(slots: usize) -> Broker {
    Broker::new(Config {
        slots,
        ..Config::default()
    })
    .unwrap()
}

fn register(b: &Broker, peer: &Peer, events: &str, target: &str, share: u32) -> Response {
    b.handle(
        peer,
        &Request::Register {
            events: events.into(),
            target: target.into(),
            share,
            class: None,
        },
    )
}

fn id_of(r: Response) -> u64 {
    match r {
        Response::Registered { id, .. } => id,
        other => panic!("{other:?}"),
    }
}

fn reading(b: &Broker, peer: &Peer, id: u64) -> counterpoint_broker::proto::Reading {
    match b.handle(peer, &Request::Read { id }) {
        Response::Reading(r) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn hundred_consumers_of_the_same_events_share_four_kernel_counters() {
    let b = broker(4);
    let p = me();
    let mut ids = Vec::new();
    for i in 0..100 {
        let r = register(
            &b,
            &p,
            "task-clock,page-faults,context-switches,cpu-migrations",
            "self",
            1,
        );
        if i > 0 {
            assert!(
                matches!(
                    r,
                    Response::Registered {
                        shared_counters: 4,
                        ..
                    }
                ),
                "{r:?}"
            );
        }
        ids.push(id_of(r));
    }
    assert_eq!(b.kernel_counters(), 4);
    b.tick();
    for &id in &ids {
        let r = reading(&b, &p, id);
        // All fit in the budget: every consumer runs all the time.
        assert_eq!(r.enabled_ns, r.running_ns);
        assert_eq!(r.confidence, 1.0);
        assert!(r.events.iter().all(|e| e.supported));
    }
    for &id in &ids[..99] {
        assert_eq!(b.handle(&p, &Request::Unregister { id }), Response::Ok);
    }
    assert_eq!(b.kernel_counters(), 4);
    assert_eq!(
        b.handle(&p, &Request::Unregister { id: ids[99] }),
        Response::Ok
    );
    assert_eq!(b.kernel_counters(), 0);
}

#[test]
fn over_budget_consumers_are_multiplexed_and_scaled() {
    let b = broker(1);
    let p = me();
    let a = id_of(register(&b, &p, "task-clock", "self", 1));
    let c = id_of(register(&b, &p, "cpu-clock", "self", 1));
    // Only one of the two runs at any moment.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(1));
        b.tick();
    }
    let (ra, rc) = (reading(&b, &p, a), reading(&b, &p, c));
    for r in [&ra, &rc] {
        assert!(r.running_ns <= r.enabled_ns);
        assert!((0.0..=1.0).contains(&r.confidence));
        let e = &r.events[0];
        if r.running_ns > 0 {
            let want = e.raw as f64 * r.enabled_ns as f64 / r.running_ns as f64;
            assert!((e.scaled.unwrap() - want).abs() < 1e-6 * want.max(1.0));
        }
    }
    // The two never ran together: their running times cannot both cover the whole span.
    assert!(ra.running_ns + rc.running_ns <= ra.enabled_ns.max(rc.enabled_ns) + 1_000_000);
    // Counts never go backwards between reads.
    let again = reading(&b, &p, a);
    assert!(again.events[0].raw >= ra.events[0].raw);
    assert!(again.running_ns >= ra.running_ns);
}

#[test]
fn policy_refusals_name_their_rule_for_an_unprivileged_peer() {
    let b = broker(4);
    let user = Peer {
        uid: 4242,
        gid: 4242,
        pid: std::process::id() as i32,
    };
    let rule = |r: Response| match r {
        Response::Error { rule, .. } => rule,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        rule(register(&b, &user, "task-clock", "pid:1", 1)).as_deref(),
        Some("own-tasks-only")
    );
    assert_eq!(
        rule(register(&b, &user, "task-clock", "cpus:0", 1)).as_deref(),
        Some("system-wide")
    );
    let r = b.handle(
        &user,
        &Request::Register {
            events: "task-clock".into(),
            target: "user:4242".into(),
            share: 1,
            class: Some("system".into()),
        },
    );
    // uid 4242 has no tasks here: the target fails first, with a plain error.
    assert!(matches!(r, Response::Error { .. }));
    // Someone else's registration.
    let root_id = id_of(register(&b, &me(), "task-clock", "self", 1));
    if me().uid != user.uid {
        match b.handle(&user, &Request::Status {}) {
            Response::Status { registrations, .. } => assert!(registrations.is_empty()),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            rule(b.handle(&user, &Request::Read { id: root_id })).as_deref(),
            Some("not-owner")
        );
        assert_eq!(
            rule(b.handle(
                &user,
                &Request::GrantExclusive {
                    id: root_id,
                    duration_ms: 10
                }
            ))
            .as_deref(),
            Some("exclusive-root-only")
        );
    }
    let policy = Policy::default();
    assert_eq!(
        rule(b.handle(
            &me(),
            &Request::Subscribe {
                id: root_id,
                interval_ms: policy.min_interval_ms - 1
            }
        ))
        .as_deref(),
        Some("min-interval")
    );
}

#[test]
fn exclusive_grant_stops_the_others_until_it_ends() {
    if me().uid != 0 {
        println!("skipped: exclusive grants are root's");
        return;
    }
    let b = broker(4);
    let p = me();
    let a = id_of(register(&b, &p, "task-clock", "self", 1));
    let c = id_of(register(&b, &p, "page-faults", "self", 1));
    assert_eq!(
        b.handle(
            &p,
            &Request::GrantExclusive {
                id: a,
                duration_ms: 10_000
            }
        ),
        Response::Ok
    );
    let before = reading(&b, &p, c);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(1));
        b.tick();
    }
    let after = reading(&b, &p, c);
    // c did not run during a's grant; a ran all the time since the grant.
    assert_eq!(after.running_ns, before.running_ns);
    assert!(after.enabled_ns > before.enabled_ns);
    let ra = reading(&b, &p, a);
    assert_eq!(ra.running_ns, ra.enabled_ns);
}

#[test]
fn subscriptions_push_over_the_socket() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("s.sock");
    let listener = server::bind(&path).unwrap();
    let b = Arc::new(broker(4));
    let stop = Arc::new(AtomicBool::new(false));
    let srv = {
        let (b, s) = (b.clone(), stop.clone());
        std::thread::spawn(move || server::run(b, listener, s))
    };
    let mut c = Client::connect(&path).unwrap();
    assert_eq!(c.identity.2, std::process::id() as i32);
    let id = c.register("task-clock", "self", 1, None).unwrap();
    c.subscribe(id, 20).unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        if let Some(r) = c.next_push(Duration::from_secs(5)).unwrap() {
            got.push(r);
        }
    }
    assert!(got.iter().all(|r| r.id == id));
    assert!(got
        .windows(2)
        .all(|w| w[1].events[0].raw >= w[0].events[0].raw));
    // A read in between pushes still gets its own answer.
    assert_eq!(c.read(id).unwrap().id, id);
    match c.register("no-such-event", "self", 1, None) {
        Err(ClientError::Refused { message, .. }) => {
            assert!(message.contains("unknown event"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    srv.join().unwrap().unwrap();
}

#[test]
fn a_policy_tightened_across_a_restart_refuses_restored_registrations() {
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("journal");
    let audit = d.path().join("audit.jsonl");
    // uid 4242 counts our process (owned by someone else) under a grant...
    let user = Peer {
        uid: 4242,
        gid: 4242,
        pid: std::process::id() as i32,
    };
    let target = format!("pid:{}", std::process::id());
    let lenient = Policy::parse(
        "[[grant]]\nuid = 4242\nallow = [\"other-users\"]\n",
        std::path::Path::new("lenient.toml"),
    )
    .unwrap();
    let cfg = |policy: Policy| Config {
        slots: 4,
        policy,
        journal: Some(journal.clone()),
        audit: Some(audit.clone()),
        ..Config::default()
    };
    let (theirs, mine) = {
        let b = Broker::new(cfg(lenient)).unwrap();
        let theirs = id_of(register(&b, &user, "task-clock", &target, 1));
        let mine = id_of(register(&b, &me(), "task-clock", "self", 1));
        assert!(reading(&b, &user, theirs).events[0].supported);
        b.checkpoint_all();
        (theirs, mine)
    };
    // ...then the grant is withdrawn and the broker restarts on the same journal.
    let b = Broker::new(cfg(Policy::default())).unwrap();
    match b.handle(&user, &Request::Read { id: theirs }) {
        Response::Error { rule, message, .. } => {
            assert_eq!(rule.as_deref(), Some("own-tasks-only"));
            assert!(message.contains("restarted"), "{message}");
        }
        other => panic!("the restored registration was not refused: {other:?}"),
    }
    // Only its owner learns why; the registration allowed by both policies continues.
    if me().uid != user.uid && me().uid != 0 {
        assert!(matches!(
            b.handle(&me(), &Request::Read { id: theirs }),
            Response::Error { rule: None, .. }
        ));
    }
    assert!(reading(&b, &me(), mine).events[0].supported);
    let log = std::fs::read_to_string(&audit).unwrap();
    let refusal = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| {
            v["action"] == "refuse" && v["what"].as_str().is_some_and(|w| w.starts_with("restore"))
        })
        .unwrap_or_else(|| panic!("no restore refusal in the audit log:\n{log}"));
    assert_eq!(refusal["rule"], "own-tasks-only");
    assert_eq!(refusal["uid"], 4242);
    // The refusal is journaled: a third start does not restore it either.
    drop(b);
    let b = Broker::new(cfg(Policy::default())).unwrap();
    assert!(matches!(
        b.handle(&user, &Request::Read { id: theirs }),
        Response::Error { .. }
    ));
}

#[test]
fn each_cpu_of_a_per_cpu_target_is_multiplexed_on_its_own() {
    if me().uid != 0 || num_cpus() < 2 {
        println!("skipped: per-CPU counting needs root and two CPUs");
        return;
    }
    let b = broker(1);
    let p = me();
    // One slot per CPU. `a` counts CPUs 0 and 1, `c` only CPU 0: CPU 1 is uncontended.
    let a = id_of(register(&b, &p, "cpu-clock", "cpus:0-1", 1));
    let c = id_of(register(&b, &p, "task-clock", "cpus:0", 1));
    // The same event on the same CPU is one kernel counter, whatever the CPU list.
    let shared = register(&b, &p, "cpu-clock", "cpus:1", 1);
    assert!(
        matches!(
            shared,
            Response::Registered {
                shared_counters: 1,
                ..
            }
        ),
        "{shared:?}"
    );
    b.handle(&p, &Request::Unregister { id: id_of(shared) });
    assert_eq!(b.kernel_counters(), 3);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(1));
        b.tick();
    }
    let ra = reading(&b, &p, a);
    let rc = reading(&b, &p, c);
    assert_eq!(
        ra.cpus.iter().map(|x| x.cpu).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert!(rc.cpus.len() == 1 && rc.cpus[0].cpu == 0);
    // CPU 1: counted all the time; CPU 0: shared with `c`, so less.
    assert_eq!(ra.cpus[1].running_ns, ra.enabled_ns);
    assert!(ra.cpus[0].running_ns < ra.cpus[1].running_ns);
    assert!(rc.running_ns > 0 && rc.running_ns < rc.enabled_ns);
    // The totals are the per-CPU sums, each CPU scaled by its own coverage.
    let e = &ra.events[0];
    assert_eq!(e.raw, ra.cpus[0].raw[0] + ra.cpus[1].raw[0]);
    let want: f64 = ra
        .cpus
        .iter()
        .map(|x| x.raw[0] as f64 * ra.enabled_ns as f64 / x.running_ns as f64)
        .sum();
    assert!((e.scaled.unwrap() - want).abs() <= 1e-9 * want.max(1.0));
    // Metrics: one series per CPU for the per-CPU consumer, with that CPU's running time.
    let m = b.metrics_readings();
    let series = |consumer: &str, cpu: &str| {
        m.iter()
            .find(|(_, labels, ..)| {
                labels.contains(&("consumer".into(), consumer.into()))
                    && labels.contains(&("cpu".into(), cpu.into()))
            })
            .cloned()
    };
    let (a0, a1) = (
        series(&a.to_string(), "0").expect("consumer a on cpu 0"),
        series(&a.to_string(), "1").expect("consumer a on cpu 1"),
    );
    assert!(a0.4 < a1.4, "CPU 0 ran less than CPU 1: {a0:?} {a1:?}");
    assert!(series(&a.to_string(), "all").is_none());
    assert!(series("", "1").is_some(), "kernel counters carry their CPU");
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A hello in a version the broker does not speak is refused and the connection closed: the
/// reply says `closing: true`, and the connection then ends (no line after it).
#[test]
fn a_refused_hello_says_the_connection_is_closing() {
    use std::io::{BufRead, BufReader, Write};
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("s.sock");
    let listener = server::bind(&path).unwrap();
    let b = Arc::new(broker(4));
    let stop = Arc::new(AtomicBool::new(false));
    let srv = {
        let (b, s) = (b.clone(), stop.clone());
        std::thread::spawn(move || server::run(b, listener, s))
    };
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    // A hang guard, not a timing claim.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"{\"op\":\"hello\",\"version\":99}\n").unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["type"], "error", "{line}");
    assert!(v["message"].as_str().unwrap().contains("99"), "{line}");
    assert_eq!(v["closing"], true, "{line}");
    let mut rest = String::new();
    assert_eq!(
        r.read_line(&mut rest).unwrap(),
        0,
        "after the refusal: {rest}"
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    srv.join().unwrap().unwrap();
}

/// A consumer's metric series carry its target as resolved: `self` is the registering
/// process's `pid:N`, the same label its kernel counter's series has (probe, session 22: it was
/// `target="self"`, which tells a scraper nothing).
#[test]
fn metrics_label_a_self_target_with_its_pid() {
    let b = broker(4);
    let p = me();
    let id = id_of(register(&b, &p, "task-clock", "self", 1));
    let want = format!("pid:{}", p.pid);
    let m = b.metrics_readings();
    let target_of = |consumer: &str| {
        m.iter()
            .find(|(_, labels, ..)| labels.contains(&("consumer".into(), consumer.into())))
            .and_then(|(_, labels, ..)| labels.iter().find(|(k, _)| k == "target"))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(target_of(&id.to_string()).as_deref(), Some(want.as_str()));
    assert_eq!(target_of("").as_deref(), Some(want.as_str()));
}

/// Blank lines are skipped without an answer (probe, session 23: one closed the connection as
/// `malformed request: EOF while parsing`), and an unknown field is refused with
/// `closing: true` on every op, `status` included (it was accepted there alone).
#[test]
fn blank_lines_are_skipped_and_an_unknown_field_closes_even_on_status() {
    use std::io::{BufRead, BufReader, Write};
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("s.sock");
    let listener = server::bind(&path).unwrap();
    let b = Arc::new(broker(4));
    let stop = Arc::new(AtomicBool::new(false));
    let srv = {
        let (b, s) = (b.clone(), stop.clone());
        std::thread::spawn(move || server::run(b, listener, s))
    };
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    // A hang guard, not a timing claim.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"\n\r\n  \t\n{\"op\":\"status\"}\n").unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    // The first answer is the status: the blank lines got none.
    assert_eq!(v["type"], "status", "{line}");
    s.write_all(b"{\"op\":\"status\",\"extra\":1}\n").unwrap();
    line.clear();
    r.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["type"], "error", "{line}");
    assert_eq!(v["closing"], true, "{line}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `extra`"),
        "{line}"
    );
    let mut rest = String::new();
    assert_eq!(
        r.read_line(&mut rest).unwrap(),
        0,
        "after the refusal: {rest}"
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    srv.join().unwrap().unwrap();
}

/// A program that listens on the socket but does not speak the protocol is not called a broker
/// (probe, session 23: "a broker is already running there"); the socket is still refused and
/// left in place. One answers with a line that is not a response, one closes at once.
#[test]
fn a_listener_that_is_not_a_broker_is_named_as_such() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    for answer in [Some(&b"HTTP/1.0 400 Bad Request\r\n"[..]), None] {
        let path = d.path().join("other.sock");
        let _ = std::fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            if let Some(a) = answer {
                let _ = s.write_all(a);
            }
        });
        let e = server::bind(&path).unwrap_err();
        assert!(matches!(e, server::ServerError::Occupied(_)), "{e}");
        assert!(
            e.to_string().starts_with(&format!(
                "something is already listening on {} (not answering as a broker)",
                path.display()
            )),
            "{e}"
        );
        peer.join().unwrap();
        assert!(path.exists(), "the other program's socket was removed");
    }
    // A broker there is still called one.
    let path = d.path().join("b.sock");
    let listener = server::bind(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let srv = {
        let s = stop.clone();
        std::thread::spawn(move || server::run(Arc::new(broker(4)), listener, s))
    };
    let e = server::bind(&path).unwrap_err();
    assert!(matches!(e, server::ServerError::InUse(_)), "{e}");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    srv.join().unwrap().unwrap();
}

#[test]
fn an_event_listed_twice_is_refused_by_name() {
    let b = broker(4);
    let p = me();
    for list in ["cs,cs", "{cs,cs:u},cs"] {
        match register(&b, &p, list, "self", 1) {
            Response::Error { message, .. } => {
                assert!(message.contains("'cs' is listed twice"), "{message}")
            }
            other => panic!("{list}: {other:?}"),
        }
    }
    // The same event under two modifiers is two events: accepted, each its own series.
    let id = id_of(register(&b, &p, "cs,cs:u", "self", 1));
    let names: Vec<String> = reading(&b, &p, id)
        .events
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(names, ["cs", "cs:u"]);
}

/// Kernel counters are shared by the task, not by its number: a registration on a thread id
/// that now names a task started later (the id was reused) gets counters of its own, where it
/// used to share the ended task's, which never moved again (the live host keeps its
/// families' `thread-tree:` registrations on threads that ended). The broker resolves targets
/// through a procfs root whose `stat` the test writes (start time, field 22), on this test's
/// own thread id, which the kernel counters are opened on.
#[test]
fn a_reused_thread_id_gets_counters_of_its_own() {
    let root = tempfile::tempdir().unwrap();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    let dir = root.path().join(tid.to_string());
    std::fs::create_dir_all(dir.join("task").join(tid.to_string())).unwrap();
    let stat = |start: u64| {
        let mut f = vec!["0".to_string(); 50];
        f[22 - 4] = start.to_string(); // field 22; f[0] is field 4
        std::fs::write(dir.join("stat"), format!("{tid} (t) S {}\n", f.join(" "))).unwrap();
    };
    let b = Broker::new(Config {
        roots: counterpoint_broker::target::Roots {
            proc_root: root.path().to_path_buf(),
            ..Default::default()
        },
        ..Config::default()
    })
    .unwrap();
    let p = me();
    for form in ["tid", "thread-tree"] {
        let target = format!("{form}:{tid}");
        stat(1000);
        let first = register(&b, &p, "task-clock", &target, 1);
        if let Response::Error { message, .. } = &first {
            if message.contains("permission denied opening") {
                println!("skipped a_reused_thread_id_gets_counters_of_its_own: {message}");
                return;
            }
        }
        let again = register(&b, &p, "task-clock", &target, 1);
        assert!(
            matches!(
                again,
                Response::Registered {
                    shared_counters: 1,
                    ..
                }
            ),
            "{form}: the same task shares: {again:?}"
        );
        assert_eq!(b.kernel_counters(), 1, "{form}");
        // The id now names a task that started later.
        stat(2000);
        let reused = register(&b, &p, "task-clock", &target, 1);
        assert!(
            matches!(
                reused,
                Response::Registered {
                    shared_counters: 0,
                    ..
                }
            ),
            "{form}: a new task under the same id shared the old one's counter: {reused:?}"
        );
        assert_eq!(b.kernel_counters(), 2, "{form}");
        for r in [first, again, reused] {
            assert_eq!(
                b.handle(&p, &Request::Unregister { id: id_of(r) }),
                Response::Ok
            );
        }
        assert_eq!(b.kernel_counters(), 0, "{form}");
    }
}

/// A journaled registration is tied to the task its target named and to the process that made
/// it, by number *and* start time: across a restart, a target whose number now names a task
/// with another start time is refused (saying so), a consumer whose pid now belongs to another
/// process is gone, and a registration whose tasks are the same continues.
#[test]
fn a_restart_refuses_a_target_or_consumer_whose_number_was_reused() {
    use counterpoint_broker::journal::{Journal, Record, RegRecord};
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("journal");
    let me_pid = std::process::id() as i32;
    let start = my_start_time();
    let p = me();
    let rec = |id: u64, pid_start: u64, identity: String| RegRecord {
        id,
        uid: p.uid,
        gid: p.gid,
        pid: me_pid,
        events: "task-clock".into(),
        target: format!("pid:{me_pid}"),
        share: 1,
        class: "user".into(),
        registered_wall_ns: 1,
        pid_start: Some(pid_start),
        target_identity: Some(identity),
    };
    {
        let (mut j, _) = Journal::open(&journal).unwrap();
        // 1: the target's number was another task's when registered (start time 1 tick).
        j.append(&Record::Register(rec(1, start, format!("pid:{me_pid}@1"))))
            .unwrap();
        // 2: made by another process that had our pid (started at another time).
        j.append(&Record::Register(rec(
            2,
            start + 1,
            format!("pid:{me_pid}@{start}"),
        )))
        .unwrap();
        // 3: the same consumer and the same task.
        j.append(&Record::Register(rec(
            3,
            start,
            format!("pid:{me_pid}@{start}"),
        )))
        .unwrap();
    }
    let b = broker_on(&journal);
    match b.handle(&p, &Request::Read { id: 1 }) {
        Response::Error { message, .. } => {
            assert!(
                message.contains("restarted")
                    && message.contains("now names another task")
                    && message.contains(&format!("pid:{me_pid}@1 then")),
                "{message}"
            );
        }
        other => panic!("a target whose number was reused was restored: {other:?}"),
    }
    match b.handle(&p, &Request::Read { id: 2 }) {
        Response::Error { message, .. } => {
            assert!(!message.contains("restarted"), "{message}");
        }
        other => panic!("a registration of a process that is gone was restored: {other:?}"),
    }
    assert!(reading(&b, &p, 3).events[0].supported);
    // The compacted journal keeps what survived, with its identities.
    drop(b);
    let (_, st) = Journal::open(&journal).unwrap();
    assert_eq!(st.regs.keys().copied().collect::<Vec<_>>(), vec![3]);
    assert_eq!(
        st.regs[&3].0.target_identity.as_deref(),
        Some(format!("pid:{me_pid}@{start}").as_str())
    );
}

/// A new registration journals its consumer's and its target's start times.
#[test]
fn a_registration_journals_the_start_times_it_was_made_with() {
    use counterpoint_broker::journal::Journal;
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("journal");
    let p = me();
    let start = my_start_time();
    {
        let b = broker_on(&journal);
        id_of(register(&b, &p, "task-clock", "self", 1));
    }
    let (_, st) = Journal::open(&journal).unwrap();
    let (rec, _) = st.regs.values().next().expect("a journaled registration");
    assert_eq!(rec.pid_start, Some(start));
    assert_eq!(
        rec.target_identity.as_deref(),
        Some(format!("pid:{}@{start}", p.pid).as_str())
    );
}
