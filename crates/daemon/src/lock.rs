//! Lock files: a host-wide exclusive lock is an open file `flock`ed
//! (std's [`File::lock`]), released when the file is dropped or its holder
//! dies, so a crashed program never leaves a lock behind. The runner's
//! slots, workspaces, checker cache and testdata cache, and the hub's one
//! `serve` of a database, are all taken here.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` (created owner-only, 0600, if missing; never through a
/// symbolic link) and takes its exclusive lock, waiting while another
/// process holds it. The error names the file.
pub fn exclusive(path: &Path) -> io::Result<File> {
    let file = open(path)?;
    file.lock().map_err(named(path))?;
    Ok(file)
}

/// [`exclusive`], without the wait: `None` while another process holds it.
pub fn try_exclusive(path: &Path) -> io::Result<Option<File>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(named(path)(e)),
    }
}

/// Opens the lock file `path` (created 0600, never through a symbolic
/// link) and takes no lock: for a caller that takes a shared one.
pub fn open(path: &Path) -> io::Result<File> {
    File::options()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(named(path))
}

fn named(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_the_first_lets_go_and_a_link_is_refused() {
        let dir = crate::test_dir("lock");
        let (path, link) = (dir.join("a.lock"), dir.join("link.lock"));
        let first = exclusive(&path).unwrap();
        // Another open file description of the same file is another holder.
        let other = File::open(&path).unwrap();
        assert!(other.try_lock().is_err(), "the lock was not taken");
        drop(first);
        assert!(other.try_lock().is_ok(), "the lock outlived its file");
        drop(other);
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = exclusive(&link).unwrap_err();
        assert!(e.to_string().contains("link.lock"), "{e}");
        let held = exclusive(&path).unwrap();
        assert!(try_exclusive(&path).unwrap().is_none(), "held, yet taken without a wait");
        drop(held);
        assert!(try_exclusive(&path).unwrap().is_some(), "free, yet not taken");
    }
}
