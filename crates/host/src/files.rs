//! What kind of file a path names, for messages that refuse it ("exists and is not a socket
//! (a regular file)"). One wording for every command that checks a path's type.

use std::os::unix::fs::FileTypeExt;

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

#[cfg(test)]
mod tests {
    use super::kind;

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
