//! The objects loaded at startup (the executable and its libraries), snapshotted once in the
//! constructor with `dl_iterate_phdr`, so that a report written from a signal handler — where
//! `dladdr` may not be called — can still say which object and offset a call site is in (the
//! driver then names it with `addr2line`). Objects loaded later with `dlopen` are not in the
//! snapshot; their call sites stay raw addresses in signal-time reports.

use core::ffi::{c_int, c_void};

/// Objects kept; a process with more at startup keeps the first ones.
pub const MAX_OBJECTS: usize = 256;
const NAME_BYTES: usize = 512;

#[derive(Clone, Copy)]
struct Object {
    lo: usize,
    hi: usize,
    bias: usize,
    name: [u8; NAME_BYTES],
    name_len: usize,
}

static mut OBJECTS: [Object; MAX_OBJECTS] = [Object {
    lo: 0,
    hi: 0,
    bias: 0,
    name: [0; NAME_BYTES],
    name_len: 0,
}; MAX_OBJECTS];
static mut COUNT: usize = 0;

unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    _data: *mut c_void,
) -> c_int {
    let info = &*info;
    let n = COUNT;
    if n >= MAX_OBJECTS {
        return 1;
    }
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for i in 0..usize::from(info.dlpi_phnum) {
        let ph = &*info.dlpi_phdr.add(i);
        if ph.p_type == libc::PT_LOAD {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            lo = lo.min(start);
            hi = hi.max(start + ph.p_memsz as usize);
        }
    }
    if lo >= hi {
        return 0;
    }
    let o = &mut (*core::ptr::addr_of_mut!(OBJECTS))[n];
    o.lo = lo;
    o.hi = hi;
    o.bias = info.dlpi_addr as usize;
    // The executable has an empty name: use its path.
    let name: &[u8] = if info.dlpi_name.is_null() {
        b""
    } else {
        core::ffi::CStr::from_ptr(info.dlpi_name).to_bytes()
    };
    if name.is_empty() {
        let r = libc::readlink(
            c"/proc/self/exe".as_ptr(),
            o.name.as_mut_ptr() as *mut libc::c_char,
            NAME_BYTES,
        );
        o.name_len = if r > 0 { r as usize } else { 0 };
    } else {
        let l = name.len().min(NAME_BYTES);
        o.name[..l].copy_from_slice(&name[..l]);
        o.name_len = l;
    }
    COUNT = n + 1;
    0
}

/// This library's own address range (for skipping its frames in captured stacks).
static SELF_LO: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
static SELF_HI: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Take the snapshot (constructor time, before any program thread exists).
pub(crate) fn snapshot() {
    // SAFETY: the callback only writes the static table; called once, single-threaded.
    unsafe { libc::dl_iterate_phdr(Some(visit), core::ptr::null_mut()) };
    let me = snapshot as *const () as usize;
    // SAFETY: written above, before any other thread exists.
    let objs = unsafe { &*core::ptr::addr_of!(OBJECTS) };
    if let Some(o) = objs[..unsafe { COUNT }]
        .iter()
        .find(|o| o.lo <= me && me < o.hi)
    {
        SELF_LO.store(o.lo, core::sync::atomic::Ordering::Relaxed);
        SELF_HI.store(o.hi, core::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether `addr` is inside this library.
pub(crate) fn in_self(addr: usize) -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    SELF_LO.load(Relaxed) <= addr && addr < SELF_HI.load(Relaxed)
}

/// The object containing `addr` and the offset of `addr` in it (relative to its load bias, as
/// `addr2line` expects), from the snapshot. Async-signal-safe: reads static memory only.
pub(crate) fn lookup(addr: usize) -> Option<(&'static [u8], usize)> {
    // SAFETY: written once before any other thread exists, read-only afterwards.
    unsafe {
        let objs = &*core::ptr::addr_of!(OBJECTS);
        objs[..COUNT]
            .iter()
            .find(|o| o.lo <= addr && addr < o.hi && o.name_len > 0)
            .map(|o| (&o.name[..o.name_len], addr - o.bias))
    }
}
