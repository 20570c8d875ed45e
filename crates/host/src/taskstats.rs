//! Whether any thread of a process ran since the last look, in one kernel round trip: the
//! kernel's per-thread-group taskstats over generic netlink (`TASKSTATS_CMD_GET` with
//! `TASKSTATS_CMD_ATTR_TGID`, `include/uapi/linux/taskstats.h`).
//!
//! The host reads one perf_event group per thread each interval; for a process of 500
//! sleeping threads those reads were most of the agent's cost, and every one of them returned
//! what the previous interval did. The kernel sums, over the live threads of a group (and, for
//! the CPU fields, the ones that exited), the times each was switched in (`cpu_count`), the
//! time on a CPU (`cpu_run_virtual_total`, the scheduler's `sum_exec_runtime`, ns) and the
//! voluntary and involuntary switches. The software events the host counts (task-clock,
//! context switches, migrations, which the kernel counts at switch-in) and hardware events
//! change only while a thread runs. A thread that starts to run is switched in, which moves
//! `cpu_count`; one that keeps running moves `sum_exec_runtime` only when the scheduler
//! updates it (each tick; on a tickless `nohz_full` CPU as seldom as once a second). So the host
//! gates only a process that its last real read found idle: an unchanged [`RunSignature`],
//! an unchanged thread list and no movement at the last read mean every thread's counters are
//! where they were, and the last readings are reused instead of reading each thread.
//!
//! The signature also holds the tick-charged user and system time (`ac_utime + ac_stime`),
//! which every kernel fills. Kernels before 5.14 leave the delay-accounting block (`cpu_count`,
//! `cpu_run_virtual_total`) at zero when delay accounting is off; the gate then rests on the
//! switch counts and that time, and stays sound: after a read that found the process idle, a
//! thread that runs and stops has switched out (a switch count moves), and one that is still
//! running is charged at its CPU's next tick (the time moves). At worst its counts are read one
//! interval late; none is lost, as the counters are cumulative. [`Taskstats::precise`] says
//! which case holds, and the agent's start line states it.
//!
//! The kernel asks for `CAP_NET_ADMIN` (the command is `GENL_ADMIN_PERM`) and
//! `CONFIG_TASKSTATS`; without them [`Taskstats::open`] says why and the host reads every
//! thread as before. The socket code is a few dozen lines of libc: the netlink crates bring a
//! family of packet types for one request and one reply.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `NETLINK_GENERIC`.
const NETLINK_GENERIC: libc::c_int = 16;
/// The generic netlink controller's family id, and its "get family" command and attributes.
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// `NLMSG_ERROR`, `NLM_F_REQUEST`.
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
/// Taskstats commands and attributes.
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_ATTR_TGID: u16 = 2;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_TGID: u16 = 5;
/// Offsets in `struct taskstats` (stable ABI: fields are only ever appended).
const OFF_CPU_COUNT: usize = 16;
const OFF_CPU_RUN_VIRTUAL_TOTAL: usize = 72;
const OFF_AC_UTIME: usize = 152;
const OFF_AC_STIME: usize = 160;
const OFF_NVCSW: usize = 272;
const OFF_NIVCSW: usize = 280;
/// The shortest `struct taskstats` that holds every field used (version 2 added the switch
/// counts).
const MIN_STATS_BYTES: usize = OFF_NIVCSW + 8;

/// Taskstats failures.
#[derive(Debug, thiserror::Error)]
pub enum TaskstatsError {
    /// The netlink socket could not be opened or used.
    #[error("netlink socket: {0}")]
    Socket(#[source] io::Error),
    /// The kernel has no taskstats family.
    #[error("the kernel has no TASKSTATS generic netlink family (CONFIG_TASKSTATS off, or hidden in this network namespace)")]
    NoFamily,
    /// The kernel refused the query (no `CAP_NET_ADMIN`).
    #[error("taskstats needs CAP_NET_ADMIN (the kernel refused: {0})")]
    Denied(io::Error),
    /// The thread group no longer exists.
    #[error("process {0} is gone")]
    Gone(u32),
    /// Any other error the kernel returned.
    #[error("the kernel answered with error {0}")]
    Kernel(io::Error),
    /// A reply this code cannot read.
    #[error("malformed taskstats reply: {0}")]
    Malformed(&'static str),
}

/// What the kernel summed over a thread group: equal values at two looks mean no thread of the
/// group was on a CPU in between (to within one scheduler tick of a thread that kept running).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSignature {
    /// Times a thread of the group was switched in.
    pub switched_in: u64,
    /// Time on a CPU, ns (`sum_exec_runtime` summed).
    pub run_ns: u64,
    /// Voluntary plus involuntary context switches.
    pub switches: u64,
    /// User plus system time, µs, as the scheduler tick charges it (`ac_utime + ac_stime`):
    /// coarse, but filled by every kernel, and a thread that keeps running is charged at
    /// its CPU's ticks.
    pub tick_cpu_us: u64,
}

impl RunSignature {
    /// Whether the delay-accounting block (`switched_in`, `run_ns`) is filled. Kernels before
    /// 5.14 leave it zero when delay accounting is off; the gate then rests on the switch
    /// counts and the tick-charged CPU time alone.
    pub fn has_delay_fields(&self) -> bool {
        self.switched_in > 0 || self.run_ns > 0
    }
}

/// An open taskstats netlink socket.
pub struct Taskstats {
    fd: OwnedFd,
    family: u16,
    seq: u32,
    /// Whether this kernel fills the delay-accounting block (see [`RunSignature`]).
    delay_fields: bool,
}

impl Taskstats {
    /// Open the socket, find the family and check, on this process, that the kernel answers.
    pub fn open() -> Result<Self, TaskstatsError> {
        // SAFETY: plain socket(2); the descriptor is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_GENERIC,
            )
        };
        if raw < 0 {
            return Err(TaskstatsError::Socket(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // A reply that never comes must not hang the agent.
        let tv = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: setsockopt reads a timeval we own for its stated size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(TaskstatsError::Socket(io::Error::last_os_error()));
        }
        let mut t = Self {
            fd,
            family: 0,
            delay_fields: false,
            seq: 0,
        };
        let reply = t.request(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            CTRL_ATTR_FAMILY_NAME,
            b"TASKSTATS\0",
        )?;
        t.family = match reply {
            Reply::Data(d) => parse_family_id(&d)?,
            Reply::Error(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(TaskstatsError::NoFamily)
            }
            Reply::Error(e) => return Err(TaskstatsError::Kernel(e)),
        };
        // Whether the delay-accounting block is filled (it is on kernels since 5.14 whatever
        // `kernel.task_delayacct` says). Either field alone is enough: a freshly started
        // process can show no `sum_exec_runtime` yet, as the scheduler has not updated it.
        t.delay_fields = t.signature(std::process::id())?.has_delay_fields();
        Ok(t)
    }

    /// Whether signatures carry the precise fields (`switched_in`, `run_ns`) or only the switch
    /// counts and tick-charged CPU time (kernels before 5.14 with delay accounting off).
    pub fn precise(&self) -> bool {
        self.delay_fields
    }

    /// The run signature of thread group `tgid` now.
    pub fn signature(&mut self, tgid: u32) -> Result<RunSignature, TaskstatsError> {
        match self.request(
            self.family,
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_TGID,
            &tgid.to_ne_bytes(),
        )? {
            Reply::Data(d) => parse_tgid_stats(&d),
            Reply::Error(e) => match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => Err(TaskstatsError::Denied(e)),
                Some(libc::ESRCH) => Err(TaskstatsError::Gone(tgid)),
                _ => Err(TaskstatsError::Kernel(e)),
            },
        }
    }

    /// Send one generic netlink request with one attribute; return the reply to it (replies
    /// to earlier sequence numbers, left by a timed-out call, are skipped).
    fn request(
        &mut self,
        family: u16,
        cmd: u8,
        attr: u16,
        value: &[u8],
    ) -> Result<Reply, TaskstatsError> {
        self.seq = self.seq.wrapping_add(1);
        let msg = build_request(family, cmd, attr, value, self.seq);
        // SAFETY: send reads `msg` for its length; the kernel is the default destination.
        let sent = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if sent < 0 {
            return Err(TaskstatsError::Socket(io::Error::last_os_error()));
        }
        let mut buf = vec![0u8; 8192];
        for _ in 0..16 {
            // SAFETY: recv writes at most buf.len() bytes into our buffer.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(TaskstatsError::Socket(e));
            }
            let (seq, reply) = parse_reply(&buf[..n as usize])?;
            if seq == self.seq {
                return Ok(reply);
            }
        }
        Err(TaskstatsError::Malformed("no reply to the request"))
    }
}

/// A reply: a generic netlink message's attributes, or the kernel's error.
#[derive(Debug)]
enum Reply {
    Data(Vec<u8>),
    Error(io::Error),
}

fn put_u16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_ne_bytes());
}

fn put_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_ne_bytes());
}

/// `nlmsghdr` + `genlmsghdr` + one attribute, padded to 4 bytes.
fn build_request(family: u16, cmd: u8, attr: u16, value: &[u8], seq: u32) -> Vec<u8> {
    let attr_len = 4 + value.len();
    let padded = (attr_len + 3) & !3;
    let total = 16 + 4 + padded;
    let mut m = Vec::with_capacity(total);
    put_u32(&mut m, total as u32);
    put_u16(&mut m, family);
    put_u16(&mut m, NLM_F_REQUEST);
    put_u32(&mut m, seq);
    put_u32(&mut m, 0);
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    put_u16(&mut m, attr_len as u16);
    put_u16(&mut m, attr);
    m.extend_from_slice(value);
    m.resize(total, 0);
    m
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// One netlink message: its sequence number and what it says.
fn parse_reply(b: &[u8]) -> Result<(u32, Reply), TaskstatsError> {
    let bad = TaskstatsError::Malformed;
    let len = u32_at(b, 0).ok_or(bad("short header"))? as usize;
    if len < 16 || len > b.len() {
        return Err(bad("message length"));
    }
    let kind = u16_at(b, 4).ok_or(bad("short header"))?;
    let seq = u32_at(b, 8).ok_or(bad("short header"))?;
    if kind == NLMSG_ERROR {
        let errno = i32::from_ne_bytes(
            b.get(16..20)
                .ok_or(bad("short error"))?
                .try_into()
                .map_err(|_| bad("short error"))?,
        );
        return Ok((seq, Reply::Error(io::Error::from_raw_os_error(-errno))));
    }
    // Attributes follow the 4-byte generic netlink header.
    let attrs = b.get(20..len).ok_or(bad("no generic header"))?;
    Ok((seq, Reply::Data(attrs.to_vec())))
}

/// Attributes as (type, payload), nested flag stripped.
fn attributes(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>, TaskstatsError> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16_at(b, 0).ok_or(TaskstatsError::Malformed("attribute"))? as usize;
        let kind = u16_at(b, 2).ok_or(TaskstatsError::Malformed("attribute"))? & 0x3fff;
        if len < 4 || len > b.len() {
            return Err(TaskstatsError::Malformed("attribute length"));
        }
        out.push((kind, &b[4..len]));
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    Ok(out)
}

fn parse_family_id(attrs: &[u8]) -> Result<u16, TaskstatsError> {
    attributes(attrs)?
        .into_iter()
        .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, v)| u16_at(v, 0))
        .ok_or(TaskstatsError::Malformed("no family id"))
}

/// The `struct taskstats` in a reply to a TGID query: `AGGR_TGID { TGID, STATS }`.
fn tgid_stats_block(attrs: &[u8]) -> Result<&[u8], TaskstatsError> {
    let aggr = attributes(attrs)?
        .into_iter()
        .find(|(k, _)| *k == TASKSTATS_TYPE_AGGR_TGID)
        .ok_or(TaskstatsError::Malformed("no per-group aggregate"))?
        .1;
    let stats = attributes(aggr)?
        .into_iter()
        .find(|(k, _)| *k == TASKSTATS_TYPE_STATS)
        .ok_or(TaskstatsError::Malformed("no stats"))?
        .1;
    if stats.len() < MIN_STATS_BYTES {
        return Err(TaskstatsError::Malformed("stats older than version 2"));
    }
    Ok(stats)
}

/// The signature in a reply to a TGID query.
fn parse_tgid_stats(attrs: &[u8]) -> Result<RunSignature, TaskstatsError> {
    let stats = tgid_stats_block(attrs)?;
    let f = |off| u64_at(stats, off).ok_or(TaskstatsError::Malformed("stats"));
    Ok(RunSignature {
        switched_in: f(OFF_CPU_COUNT)?,
        run_ns: f(OFF_CPU_RUN_VIRTUAL_TOTAL)?,
        switches: f(OFF_NVCSW)?.wrapping_add(f(OFF_NIVCSW)?),
        tick_cpu_us: f(OFF_AC_UTIME)?.wrapping_add(f(OFF_AC_STIME)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        put_u16(&mut v, (4 + value.len()) as u16);
        put_u16(&mut v, kind);
        v.extend_from_slice(value);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    fn stats(count: u64, run_ns: u64, nv: u64, niv: u64) -> Vec<u8> {
        let mut s = vec![0u8; 328];
        s[..2].copy_from_slice(&16u16.to_ne_bytes());
        s[OFF_CPU_COUNT..OFF_CPU_COUNT + 8].copy_from_slice(&count.to_ne_bytes());
        s[OFF_CPU_RUN_VIRTUAL_TOTAL..OFF_CPU_RUN_VIRTUAL_TOTAL + 8]
            .copy_from_slice(&run_ns.to_ne_bytes());
        s[OFF_NVCSW..OFF_NVCSW + 8].copy_from_slice(&nv.to_ne_bytes());
        s[OFF_NIVCSW..OFF_NIVCSW + 8].copy_from_slice(&niv.to_ne_bytes());
        s[OFF_AC_UTIME..OFF_AC_UTIME + 8].copy_from_slice(&20_000u64.to_ne_bytes());
        s[OFF_AC_STIME..OFF_AC_STIME + 8].copy_from_slice(&10_000u64.to_ne_bytes());
        s
    }

    #[test]
    fn a_request_is_header_generic_header_and_one_padded_attribute() {
        let m = build_request(
            31,
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_TGID,
            &[7, 0, 0, 0],
            9,
        );
        // 16 (nlmsghdr) + 4 (genlmsghdr) + 8 (attribute of a u32).
        assert_eq!(m.len(), 28);
        assert_eq!(u32_at(&m, 0), Some(28));
        assert_eq!(u16_at(&m, 4), Some(31));
        assert_eq!(u16_at(&m, 6), Some(NLM_F_REQUEST));
        assert_eq!(u32_at(&m, 8), Some(9));
        assert_eq!(&m[16..20], &[TASKSTATS_CMD_GET, 1, 0, 0]);
        assert_eq!(u16_at(&m, 20), Some(8));
        assert_eq!(u16_at(&m, 22), Some(TASKSTATS_CMD_ATTR_TGID));
        assert_eq!(u32_at(&m, 24), Some(7));
        // A 10-byte name pads to 12.
        let f = build_request(GENL_ID_CTRL, 3, 2, b"TASKSTATS\0", 1);
        assert_eq!(f.len(), 16 + 4 + 16);
    }

    #[test]
    fn the_signature_is_read_from_the_nested_aggregate() {
        let mut inner = attr(2, &42u32.to_ne_bytes());
        inner.extend(attr(TASKSTATS_TYPE_STATS, &stats(5, 1_000, 3, 4)));
        // NLA_F_NESTED (0x8000), were a kernel to set it, is stripped.
        let outer = attr(TASKSTATS_TYPE_AGGR_TGID | 0x8000, &inner);
        assert_eq!(
            parse_tgid_stats(&outer).expect("parse"),
            RunSignature {
                switched_in: 5,
                run_ns: 1_000,
                switches: 7,
                tick_cpu_us: 30_000,
            }
        );
    }

    /// A kernel without the delay-accounting block still gives a signature that moves when
    /// a thread is charged a tick, and says it is not the precise kind.
    #[test]
    fn without_delay_fields_the_tick_time_and_switches_still_tell() {
        let reply = |utime: u64| {
            let mut st = stats(0, 0, 3, 4);
            st[OFF_AC_UTIME..OFF_AC_UTIME + 8].copy_from_slice(&utime.to_ne_bytes());
            let mut inner = attr(2, &42u32.to_ne_bytes());
            inner.extend(attr(TASKSTATS_TYPE_STATS, &st));
            attr(TASKSTATS_TYPE_AGGR_TGID, &inner)
        };
        let a = parse_tgid_stats(&reply(20_000)).expect("parse");
        let b = parse_tgid_stats(&reply(24_000)).expect("parse");
        assert!(!a.has_delay_fields());
        assert_ne!(a, b, "a tick charged to a thread must change the signature");
        assert_eq!(b.tick_cpu_us, 34_000);
    }

    #[test]
    fn short_or_missing_parts_are_errors_not_panics() {
        assert!(parse_tgid_stats(&[]).is_err());
        let inner = attr(TASKSTATS_TYPE_STATS, &[0u8; 100]);
        assert!(matches!(
            parse_tgid_stats(&attr(TASKSTATS_TYPE_AGGR_TGID, &inner)),
            Err(TaskstatsError::Malformed(_))
        ));
        // An attribute claiming more bytes than there are.
        assert!(attributes(&[200, 0, 1, 0, 0, 0, 0, 0]).is_err());
        assert!(parse_reply(&[1, 2, 3]).is_err());
        let mut err = Vec::new();
        put_u32(&mut err, 36);
        put_u16(&mut err, NLMSG_ERROR);
        put_u16(&mut err, 0);
        put_u32(&mut err, 5);
        put_u32(&mut err, 0);
        err.extend_from_slice(&(-libc::EPERM).to_ne_bytes());
        err.resize(36, 0);
        match parse_reply(&err).expect("error message") {
            (5, Reply::Error(e)) => assert_eq!(e.raw_os_error(), Some(libc::EPERM)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn family_id_is_found_among_the_controllers_attributes() {
        let mut a = attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0");
        a.extend(attr(CTRL_ATTR_FAMILY_ID, &31u16.to_ne_bytes()));
        assert_eq!(parse_family_id(&a).expect("id"), 31);
        assert!(parse_family_id(&attr(CTRL_ATTR_FAMILY_NAME, b"x\0")).is_err());
    }

    /// On the real kernel (skipped with the reason where taskstats is refused): a stopped
    /// child cannot run, so its signature stays; once reaped, its group is gone.
    #[test]
    fn a_stopped_process_keeps_its_signature() {
        let mut ts = match Taskstats::open() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("SKIPPED a_stopped_process_keeps_its_signature: {e}");
                return;
            }
        };
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "kill -STOP $$; i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done",
            ])
            .spawn()
            .expect("spawn sh");
        let pid = child.id();
        // Wait until it has stopped itself (state T in /proc).
        let stopped = (0..12_000).any(|_| {
            let s = crate::procfs::Proc::default().stat(pid);
            if s.is_some_and(|s| s.state == 'T') {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            false
        });
        assert!(stopped, "child never stopped");
        let a = ts.signature(pid).expect("signature");
        let b = ts.signature(pid).expect("signature");
        assert_eq!(a, b, "a stopped process ran");
        // SAFETY: kill on our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
        let _ = child.wait();
        // Reaped: the group is gone.
        assert!(ts.signature(pid).is_err());
        assert!(a.switched_in > 0 && a.run_ns > 0);
    }

    /// On the real kernel: the offsets this module reads are those of this kernel's
    /// `struct taskstats` (the pid field, between them, holds the pid asked for).
    #[test]
    fn the_struct_layout_matches_this_kernel() {
        const OFF_AC_PID: usize = 128;
        let mut ts = match Taskstats::open() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("SKIPPED the_struct_layout_matches_this_kernel: {e}");
                return;
            }
        };
        let me = std::process::id();
        // A per-thread query (`TASKSTATS_CMD_ATTR_PID` = 1, answered in `AGGR_PID` = 4) fills
        // the basic accounting fields, `ac_pid` and `ac_comm` among them, which lie between
        // the fields read here.
        let reply = ts
            .request(ts.family, TASKSTATS_CMD_GET, 1, &me.to_ne_bytes())
            .expect("request");
        let Reply::Data(d) = reply else {
            panic!("the kernel answered a query about this thread with an error");
        };
        let aggr = attributes(&d).expect("attributes");
        let (_, inner) = aggr.iter().find(|(k, _)| *k == 4).expect("AGGR_PID");
        let inner = attributes(inner).expect("inner");
        let (_, stats) = inner
            .iter()
            .find(|(k, _)| *k == TASKSTATS_TYPE_STATS)
            .expect("stats");
        assert!(stats.len() >= MIN_STATS_BYTES);
        let pid = u32::from_ne_bytes(stats[OFF_AC_PID..OFF_AC_PID + 4].try_into().expect("4"));
        assert_eq!(
            pid, me,
            "ac_pid: the offsets do not match this kernel's struct"
        );
        let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
        let comm = comm.trim_end().as_bytes();
        assert_eq!(&stats[80..80 + comm.len()], comm, "ac_comm at 80");
        let sig = parse_tgid_stats(&{
            let reply = ts
                .request(
                    ts.family,
                    TASKSTATS_CMD_GET,
                    TASKSTATS_CMD_ATTR_TGID,
                    &me.to_ne_bytes(),
                )
                .expect("request");
            match reply {
                Reply::Data(d) => d,
                Reply::Error(e) => panic!("TGID query: {e}"),
            }
        })
        .expect("parse");
        assert!(sig.switches > 0, "this process has switched at least once");
    }
}
