//! What kind of file a path names, for messages that refuse it ("exists and is not a socket
//! (a regular file)"). One wording for every command that checks a path's type. And the
//! exclusive `flock` the agent's and the broker's journals are held under, with the holder's
//! pid for the message that refuses a second process.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// `ft` as a message names it: "a regular file", "a directory", "a symbolic link" (from
/// `symlink_metadata`), "a character device", "a block device", "a FIFO", "a socket".
pub fn kind(ft: std::fs::FileType) -> &'static str {
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Take an exclusive `flock` on `file` without waiting: `Ok(true)` when taken (held until the
/// file's last descriptor is closed), `Ok(false)` when another open file description holds it.
pub fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// The pid holding a `flock` on `file`, as the kernel lists it in `/proc/locks`; `None` when it
/// cannot tell (no such lock listed, a holder in another pid namespace, no `/proc`). For a
/// message only: the lock itself is what refuses.
pub fn flock_holder(file: &File) -> Option<u32> {
    let m = file.metadata().ok()?;
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    flock_holder_in(&text, m.dev(), m.ino())
}

/// [`flock_holder`] on the text of `/proc/locks`: lines `N: FLOCK ADVISORY WRITE PID
/// MAJ:MIN:INODE START END` (device numbers in hex, the inode in decimal); waiters (`N: ->
/// FLOCK ...`) are not holders.
fn flock_holder_in(text: &str, dev: u64, ino: u64) -> Option<u32> {
    // The kernel prints the device as its major and minor numbers (MAJOR/MINOR of s_dev).
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            [_, "FLOCK", _, _, pid, id, ..] if *id == want => pid.parse().ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_exclusive_lock_is_refused_and_its_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let a = File::create(&path).unwrap();
        assert!(try_lock_exclusive(&a).unwrap());
        // Another open file description of the same file, even in this process, conflicts.
        let b = File::open(&path).unwrap();
        assert!(!try_lock_exclusive(&b).unwrap());
        assert_eq!(flock_holder(&b), Some(std::process::id()));
        drop(a);
        // Closing the last descriptor releases it. Another test of this binary spawning a
        // command may have forked in between: its child holds a copy of `a`'s descriptor (the
        // same open file description, so the same lock) until its exec closes it (O_CLOEXEC).
        // So the lock is free once that exec has happened, not necessarily at once (CI saw
        // the immediate retry fail once); wait for it, with a bound that only a hang reaches.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !try_lock_exclusive(&b).unwrap() {
            assert!(
                std::time::Instant::now() < deadline,
                "the lock outlived its last descriptor"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn proc_locks_lines_are_read_by_device_and_inode() {
        let dev = libc::makedev(0xfe, 0);
        let text = "1: FLOCK  ADVISORY  WRITE 27684 fe:00:10208494 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 99 fe:00:42 0 EOF\n\
                    3: POSIX  ADVISORY  WRITE 7 fe:00:43 0 EOF\n\
                    4: FLOCK  ADVISORY  WRITE 26404 fe:00:42 0 EOF\n";
        assert_eq!(flock_holder_in(text, dev, 10208494), Some(27684));
        // The waiter of line 2 is not the holder; line 4 is.
        assert_eq!(flock_holder_in(text, dev, 42), Some(26404));
        assert_eq!(flock_holder_in(text, dev, 43), None);
        assert_eq!(flock_holder_in(text, libc::makedev(8, 1), 42), None);
    }

    #[test]
    fn names_the_kinds_a_path_can_be() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let of = |p: &std::path::Path| kind(std::fs::symlink_metadata(p).unwrap().file_type());
        assert_eq!(of(&file), "a regular file");
        assert_eq!(of(dir.path()), "a directory");
        assert_eq!(of(std::path::Path::new("/dev/null")), "a character device");
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(of(&link), "a symbolic link");
    }
}
