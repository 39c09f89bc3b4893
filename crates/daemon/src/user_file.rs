//! Files a user names (token files, a language table, a source to submit,
//! a problem's `meta.json` and files): opened without blocking, taken only
//! if regular, and read with a bound, so that a FIFO, `/dev/zero` or a
//! file larger than its kind allows is a clear error at once, never a hang
//! or a process grown until it is killed. Every such read goes through
//! [`read_user_file`].

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most a token file holds (`--*-token-file`, `*_TOKEN_FILE`).
pub const TOKEN_MAX: u64 = 4 << 10;

/// The most a configuration file holds (a language table, an env file, a
/// file of an envdir).
pub const CONFIG_MAX: u64 = 1 << 20;

/// The bytes of the regular file `path`, at most `max` of them. A file of
/// another kind (a FIFO, a device, a socket, a directory) is refused
/// without waiting for a writer: it is opened `O_NONBLOCK`, checked with
/// `fstat`, and only then read (blocking again). `what` names the kind of
/// file in the error, which does not repeat the path (callers name it).
pub fn read_user_file(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    read(path, max, what, 0)
}

/// [`read_user_file`] of a file inside a tree a user gave (an ICPC
/// package's): a symbolic link is refused too, at the open itself
/// (`O_NOFOLLOW`), so a link put in a checked file's place is never read.
pub fn read_user_file_in_tree(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    read(path, max, what, libc::O_NOFOLLOW).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::new(io::ErrorKind::InvalidInput, format!("is a symbolic link (a {what} must be a regular file)"))
        } else {
            e
        }
    })
}

fn read(path: &Path, max: u64, what: &str, flags: i32) -> io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | flags).open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let other = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else {
        ""
    };
    if !kind.is_file() {
        let other = if other.is_empty() { "not a file" } else { other };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {other}, not a regular file (a {what} must be one)"),
        ));
    }
    clear_nonblock(&file)?;
    let too_large = || {
        io::Error::new(io::ErrorKind::InvalidData, format!("is larger than {max} bytes, the most a {what} may hold"))
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow while it is read: the bound holds all the same.
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_user_file`] as UTF-8 text.
pub fn read_user_text(path: &Path, max: u64, what: &str) -> io::Result<String> {
    String::from_utf8(read_user_file(path, max, what)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("is not UTF-8 text ({e})")))
}

fn clear_nonblock(file: &File) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_retain(fcntl(file, FcntlArg::F_GETFL)?);
    fcntl(file, FcntlArg::F_SETFL(flags & !OFlag::O_NONBLOCK))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_in_a_tree_is_never_read_through_a_link() {
        let dir = crate::test_dir("user-file-tree");
        std::fs::write(dir.join("f"), "data").unwrap();
        std::os::unix::fs::symlink(dir.join("f"), dir.join("link")).unwrap();
        assert_eq!(read_user_file_in_tree(&dir.join("f"), 10, "file").unwrap(), b"data");
        assert_eq!(read_user_file(&dir.join("link"), 10, "file").unwrap(), b"data", "a token file may be a link");
        let e = read_user_file_in_tree(&dir.join("link"), 10, "package file").unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
    use std::time::{Duration, Instant};

    #[test]
    fn fifos_devices_and_large_files_are_refused_at_once() {
        let dir = crate::test_dir("user-file");
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let started = Instant::now();
        let e = read_user_file(&fifo, TOKEN_MAX, "token file").unwrap_err();
        assert_eq!(e.to_string(), "is a FIFO, not a regular file (a token file must be one)");
        let e = read_user_file(Path::new("/dev/zero"), TOKEN_MAX, "token file").unwrap_err();
        assert!(e.to_string().starts_with("is a character device"), "{e}");
        assert!(read_user_file(&dir, TOKEN_MAX, "token file").unwrap_err().to_string().starts_with("is a directory"));
        assert!(started.elapsed() < Duration::from_secs(1), "no wait for a writer");
        let big = dir.join("big");
        std::fs::write(&big, vec![b'x'; 4097]).unwrap();
        let e = read_user_file(&big, TOKEN_MAX, "token file").unwrap_err();
        assert_eq!(e.to_string(), "is larger than 4096 bytes, the most a token file may hold");
        std::fs::write(&big, b"rk_1\n").unwrap();
        assert_eq!(read_user_text(&big, TOKEN_MAX, "token file").unwrap(), "rk_1\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
