//! Files a test writes: a scratch directory of its own, removed when the
//! test ends (kept with `OJ_KEEP_TMP`), and the small files put in it.

use std::path::{Path, PathBuf};

/// A scratch directory removed on drop (unless `OJ_KEEP_TMP` is set).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::var_os("OJ_TEST_TMP").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let p = base.join(format!("ojt-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        // Judged programs run as unprivileged users and must reach their
        // work directories below this one.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("OJ_KEEP_TMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A fresh `dir/src` holding one source file, `name` with `text` (what a
/// judge stages as a submission); its path.
pub fn source_dir(dir: &Path, name: &str, text: &str) -> PathBuf {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join(name), text).unwrap();
    src
}

/// [`source_dir`], staged as the judge stages a submission (a root-owned
/// copy on the workspaces' file system).
pub fn staged_source(dir: &Path, name: &str, text: &str) -> ojrunner::workspace::Workspace {
    ojrunner::workspace::Workspace::stage(&source_dir(dir, name, text)).unwrap()
}

/// Drops `path`'s pages from the host's page cache (written to disk first;
/// root's advice): its next reader reads them in, charged to that reader's
/// memory group.
pub fn uncache(path: &Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice on a descriptor `f` keeps open; no pointer.
    assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
}
