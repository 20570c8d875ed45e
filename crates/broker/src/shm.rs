//! Pushes without a syscall per push: a shared-memory page per connection, like the mmap page
//! of a perf event. The broker creates a `memfd` for a connection on its first
//! `subscribe_shared`, passes it once with `SCM_RIGHTS`, and from then on writes each due
//! reading into the subscription's slot of that page (once per pusher tick, a few stores); the
//! consumer maps it read-only and reads the slot whenever it likes, never waking the broker and
//! never being woken by it.
//!
//! Each slot is [`SLOT_WORDS`] 64-bit words, all accessed atomically (the two processes share
//! them): a sequence number (odd while the broker writes: a seqlock), the registration id, its
//! enabled and running times, the event count, how many pushes the slot has had, and up to
//! [`MAX_SHARED_EVENTS`] raw counts in registration order.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// 64-bit words per slot.
pub const SLOT_WORDS: usize = 32;
/// Header words before the raw counts: seq, id, enabled, running, events, pushes.
const HEADER: usize = 6;
/// Most events a shared slot carries.
pub const MAX_SHARED_EVENTS: usize = SLOT_WORDS - HEADER;
/// Slots per connection's page (so at most this many shared subscriptions per connection).
pub const SLOTS: usize = 64;
/// The page's size in bytes.
pub const PAGE_BYTES: usize = SLOTS * SLOT_WORDS * 8;

/// One slot's values as last published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedValues {
    /// Registration id (0: the slot was never written).
    pub id: u64,
    /// The registration's enabled time, in ns.
    pub enabled_ns: u64,
    /// Its running time, in ns.
    pub running_ns: u64,
    /// Pushes written to this slot so far (a reader sees whether a new one came).
    pub pushes: u64,
    /// Raw counts, in registration order.
    pub raw: Vec<u64>,
}

/// A mapping of a shared page.
pub struct SharedPage {
    ptr: *mut AtomicU64,
    fd: OwnedFd,
}

// SAFETY: the mapping is only accessed through atomics; the pointer stays valid until Drop.
unsafe impl Send for SharedPage {}
// SAFETY: as above.
unsafe impl Sync for SharedPage {}

fn map(fd: &OwnedFd, prot: libc::c_int) -> io::Result<*mut AtomicU64> {
    // SAFETY: a fresh shared mapping of PAGE_BYTES of a descriptor we hold; checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_BYTES,
            prot,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

impl SharedPage {
    /// The broker's side: a new zeroed page, writable.
    pub fn create() -> io::Result<SharedPage> {
        // SAFETY: a NUL-terminated name; flags are constants.
        let raw = unsafe { libc::memfd_create(c"counterpoint-push".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor memfd_create just returned, owned from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE_BYTES as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ptr = map(&fd, libc::PROT_READ | libc::PROT_WRITE)?;
        Ok(SharedPage { ptr, fd })
    }

    /// The consumer's side: map a page received from the broker, read-only. Refuses a
    /// descriptor smaller than a page (not the broker's).
    pub fn open(fd: OwnedFd) -> io::Result<SharedPage> {
        // SAFETY: fstat fills a struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if (st.st_size as u64) < PAGE_BYTES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("shared page of {} bytes, expected {PAGE_BYTES}", st.st_size),
            ));
        }
        let ptr = map(&fd, libc::PROT_READ)?;
        Ok(SharedPage { ptr, fd })
    }

    /// The descriptor (to pass to the consumer).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn word(&self, slot: usize, i: usize) -> &AtomicU64 {
        debug_assert!(slot < SLOTS && i < SLOT_WORDS);
        // SAFETY: in bounds of the PAGE_BYTES mapping (slot < SLOTS, i < SLOT_WORDS, callers
        // check), 8-aligned (page-aligned base), alive as long as `self`.
        unsafe { &*self.ptr.add(slot * SLOT_WORDS + i) }
    }

    /// Publish `v` in `slot` (the broker; one writer per page). Events beyond
    /// [`MAX_SHARED_EVENTS`] are not carried (refused at subscription).
    pub fn write(&self, slot: usize, id: u64, enabled_ns: u64, running_ns: u64, raw: &[u64]) {
        if slot >= SLOTS {
            return;
        }
        let seq = self.word(slot, 0);
        let s = seq.load(Ordering::Relaxed);
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let n = raw.len().min(MAX_SHARED_EVENTS);
        self.word(slot, 1).store(id, Ordering::Relaxed);
        self.word(slot, 2).store(enabled_ns, Ordering::Relaxed);
        self.word(slot, 3).store(running_ns, Ordering::Relaxed);
        self.word(slot, 4).store(n as u64, Ordering::Relaxed);
        let pushes = self.word(slot, 5);
        pushes.store(pushes.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        for (i, r) in raw.iter().take(n).enumerate() {
            self.word(slot, HEADER + i).store(*r, Ordering::Relaxed);
        }
        seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The values last published in `slot`: a consistent copy (retried while the broker is
    /// writing it). `None` for a slot out of range.
    pub fn read(&self, slot: usize) -> Option<SharedValues> {
        if slot >= SLOTS {
            return None;
        }
        let seq = self.word(slot, 0);
        loop {
            let s1 = seq.load(Ordering::Acquire);
            if s1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let n = (self.word(slot, 4).load(Ordering::Relaxed) as usize).min(MAX_SHARED_EVENTS);
            let v = SharedValues {
                id: self.word(slot, 1).load(Ordering::Relaxed),
                enabled_ns: self.word(slot, 2).load(Ordering::Relaxed),
                running_ns: self.word(slot, 3).load(Ordering::Relaxed),
                pushes: self.word(slot, 5).load(Ordering::Relaxed),
                raw: (0..n)
                    .map(|i| self.word(slot, HEADER + i).load(Ordering::Relaxed))
                    .collect(),
            };
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return Some(v);
            }
        }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in create/open, once.
        unsafe { libc::munmap(self.ptr.cast(), PAGE_BYTES) };
    }
}

/// Send `bytes` on `sock` with `fd` attached (`SCM_RIGHTS`).
pub fn send_with_fd(sock: RawFd, bytes: &[u8], fd: RawFd) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; zeroed is a valid start.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds one cmsg of one fd, as CMSG_SPACE sized it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
    }
    let mut sent = 0usize;
    while sent == 0 {
        // SAFETY: msg points at live buffers for the call.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent = n as usize;
    }
    // The descriptor went with the first bytes; the rest (if the socket took only part) plainly.
    if sent < bytes.len() {
        // SAFETY: a borrowed descriptor used for one write; not closed here.
        let mut s = std::mem::ManuallyDrop::new(unsafe {
            std::os::unix::net::UnixStream::from_raw_fd(sock)
        });
        io::Write::write_all(&mut *s, &bytes[sent..])?;
    }
    Ok(())
}

/// Receive into `buf` from `sock`, keeping any descriptors that came along in `fds`.
pub fn recv_with_fds(sock: RawFd, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a few descriptors; the broker sends one per connection.
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE((4 * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg points at live buffers for the call.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: walking the control messages the kernel wrote into cbuf.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_passed_over_a_socket_reads_what_the_broker_wrote() {
        let page = SharedPage::create().unwrap();
        page.write(3, 42, 1000, 500, &[7, 8, 9]);
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        send_with_fd(a.as_raw_fd(), b"hello\n", page.fd()).unwrap();
        let mut buf = [0u8; 64];
        let mut fds = Vec::new();
        let n = recv_with_fds(b.as_raw_fd(), &mut buf, &mut fds).unwrap();
        assert_eq!(&buf[..n], b"hello\n");
        assert_eq!(fds.len(), 1);
        let view = SharedPage::open(fds.pop().unwrap()).unwrap();
        let v = view.read(3).unwrap();
        assert_eq!(
            v,
            SharedValues {
                id: 42,
                enabled_ns: 1000,
                running_ns: 500,
                pushes: 1,
                raw: vec![7, 8, 9]
            }
        );
        // Later writes show through the mapping; untouched slots read as never written.
        page.write(3, 42, 2000, 1500, &[10, 11, 12]);
        let v = view.read(3).unwrap();
        assert_eq!((v.pushes, v.enabled_ns, v.raw), (2, 2000, vec![10, 11, 12]));
        assert_eq!(view.read(0).unwrap().id, 0);
        assert!(view.read(SLOTS).is_none());
        // A descriptor that is not a page is refused.
        let small = std::fs::File::open("/dev/null").unwrap();
        assert!(SharedPage::open(small.into()).is_err());
    }

    #[test]
    fn readers_never_see_a_torn_slot() {
        let page = std::sync::Arc::new(SharedPage::create().unwrap());
        let w = {
            let p = page.clone();
            std::thread::spawn(move || {
                for k in 1..=20_000u64 {
                    p.write(0, 1, k, k, &[k, k, k, k]);
                }
            })
        };
        let mut last = 0;
        while last < 20_000 {
            let v = page.read(0).unwrap();
            if v.id == 0 {
                continue;
            }
            // Every field from one write.
            assert!(v.raw.iter().all(|&r| r == v.enabled_ns), "{v:?}");
            assert_eq!(v.running_ns, v.enabled_ns);
            assert!(v.enabled_ns >= last);
            last = v.enabled_ns;
        }
        w.join().unwrap();
    }
}
