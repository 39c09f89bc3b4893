//! Where a submission's files are while it is judged: a [`Workspace`].
//!
//! A jailed compile or run sees its directory at `/src` (`judge::SRC`), a
//! bind mount, and `/proc/self/mountinfo` shows that mount's root: the
//! directory's path within its host file system. Were it the claim's own
//! directory (`<spool>/claims/<id>/src`), every program could read the
//! spool's location and the claim's number there. So, as root, the judge
//! copies the submission's files into a directory of a file system of the
//! runner's own, [`ROOT`] (a tmpfs, mounted by the first judge of a boot),
//! under a random name: the root a program reads is `/<16 hex digits>`.
//!
//! The tmpfs has no size of its own to run out of: what a compiler writes
//! there counts as the compile's memory (its cgroup is charged), and the
//! judge copies only the submission's files. A workspace lives while its
//! claim is judged and is removed with its [`Workspace`]; each holds a lock
//! on `<name>.lock`, so that a judge that died leaves nothing for long: the
//! next workspace made on the host removes every one whose lock no one
//! holds.
//!
//! Helpers copy their mount namespace from the judge when they start
//! (`sandbox/helper.rs`), so the tmpfs must be there first: [`root`] is called before
//! each helper starts. Not root, a judge uses the directory where it is: its
//! runs are not jailed, and see host paths anyway.

use crate::language::Placeholders;
use ojrunner_daemon::lock;
use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the workspaces' file system is mounted (on the host).
pub const ROOT: &str = "/run/ojrunner/work";

/// Held while [`ROOT`] is mounted and while workspaces are named or swept.
const LOCK: &str = "/run/ojrunner/work.lock";

/// Directories deeper than this in a submission are not copied (claimd's
/// archive rules allow far fewer); the compile cache keeps as deep.
pub(crate) const MAX_DEPTH: usize = 16;

/// A submission's directory for one judging: a copy on [`ROOT`] (as root),
/// else the directory itself.
#[derive(Debug)]
pub struct Workspace {
    dir: PathBuf,
    /// The lock that marks the copy as in use (`None`: not a copy).
    lock: Option<File>,
    /// What the compile found in the source for the commands' placeholders
    /// (the Java class to run), for every run after it.
    placeholders: OnceLock<Placeholders>,
}

impl Workspace {
    /// The regular files and directories of `from`, copied into a new
    /// workspace of their own (as root); else `from` itself.
    pub fn stage(from: &Path) -> io::Result<Workspace> {
        let Some(root) = root() else {
            return Ok(Workspace { dir: from.to_path_buf(), lock: None, placeholders: OnceLock::new() });
        };
        let (dir, lock) = {
            let _naming = lock::exclusive(Path::new(LOCK))?;
            sweep(root);
            let name = random_name()?;
            let lock = lock::exclusive(&root.join(format!("{name}.lock")))?;
            (root.join(name), lock)
        };
        let ws = Workspace { dir, lock: Some(lock), placeholders: OnceLock::new() };
        std::fs::DirBuilder::new().mode(0o755).create(&ws.dir)?;
        copy_tree(from, &ws.dir, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("copying {}: {e}", from.display())))?;
        Ok(ws)
    }

    /// The directory: what the judge binds at `/src`.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Keeps what the compile found for the commands' placeholders; a
    /// compile again (a resumed claim) finds the same in the same source.
    pub fn found(&self, placeholders: Placeholders) {
        let _ = self.placeholders.set(placeholders);
    }

    /// What the compile found, if it ran.
    pub fn placeholders(&self) -> Option<&Placeholders> {
        self.placeholders.get()
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if self.lock.is_some() {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_file(self.dir.with_extension("lock"));
        }
    }
}

/// [`ROOT`], mounted if it was not, when this process is root; `None` when
/// it is not root or cannot mount (logged once: runs then see host paths).
pub fn root() -> Option<&'static Path> {
    static ROOT_READY: OnceLock<Option<&'static Path>> = OnceLock::new();
    *ROOT_READY.get_or_init(|| {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        match mount_root() {
            Ok(()) => Some(Path::new(ROOT)),
            Err(e) => {
                log::warn!("{ROOT}: {e}; jailed programs will see their directory's host path in mountinfo");
                None
            }
        }
    })
}

fn mount_root() -> io::Result<()> {
    let root = Path::new(ROOT);
    let parent = root.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(root)?;
    let _mounting = lock::exclusive(Path::new(LOCK))?;
    if std::fs::metadata(root)?.dev() != std::fs::metadata(parent)?.dev() {
        // Another judge of this boot mounted it.
        return std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711));
    }
    // Searchable, not listable: a run that is not jailed (no namespaces)
    // cannot find another submission's workspace by its random name.
    let flags = nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV;
    nix::mount::mount(Some("ojrunner-work"), ROOT, Some("tmpfs"), flags, Some("mode=0711")).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("mounting a tmpfs: {e}"))
    })
}

/// Removes the workspaces no live judge holds (their judge died).
fn sweep(root: &Path) {
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "lock") {
            continue;
        }
        let lock = path.with_extension("lock");
        let unheld = match File::open(&lock) {
            Ok(f) => f.try_lock().is_ok(),
            Err(_) => true,
        };
        if unheld {
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            let _ = std::fs::remove_file(&lock);
        }
    }
}

/// 16 random hex digits: a name that says nothing of the host.
fn random_name() -> io::Result<String> {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most bytes.len() bytes into `bytes`.
    if unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) } != bytes.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Copies `from`'s directories and regular files (with their modes) into
/// `to`; symbolic links and anything else are left out.
fn copy_tree(from: &Path, to: &Path, depth: usize) -> io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (kind, target) = (entry.file_type()?, to.join(entry.file_name()));
        if kind.is_dir() && depth < MAX_DEPTH {
            std::fs::DirBuilder::new().mode(0o755).create(&target)?;
            copy_tree(&entry.path(), &target, depth + 1)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_holds_a_copy_under_a_neutral_name_and_goes_with_its_value() {
        let from = ojrunner_daemon::test_dir("ojrunner-ws-test");
        std::fs::create_dir_all(from.join("pkg")).unwrap();
        std::fs::write(from.join("main.c"), "int main(){}\n").unwrap();
        std::fs::write(from.join("pkg/a.py"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", from.join("link")).unwrap();
        let ws = Workspace::stage(&from).unwrap();
        if nix::unistd::geteuid().is_root() {
            let dir = ws.path().to_path_buf();
            assert!(dir.starts_with(ROOT), "{}", dir.display());
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(ROOT).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o711, "{ROOT} must not be listable by a run's uid");
            let name = dir.file_name().unwrap().to_str().unwrap();
            assert!(name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            assert_eq!(std::fs::read_to_string(dir.join("pkg/a.py")).unwrap(), "x = 1\n");
            assert!(dir.join("main.c").is_file());
            assert!(std::fs::symlink_metadata(dir.join("link")).is_err(), "a link was copied");
            drop(ws);
            assert!(!dir.exists() && !dir.with_extension("lock").exists());
        } else {
            assert_eq!(ws.path(), from);
        }
        std::fs::remove_dir_all(&from).unwrap();
    }

    #[test]
    fn a_workspace_whose_judge_died_is_swept_and_a_live_one_is_not() {
        if !nix::unistd::geteuid().is_root() {
            return ojrunner_daemon::skip_test("the work file system mounts only as root");
        }
        let root = root().expect("the work file system mounts as root");
        // A dead judge's: its lock file exists, unheld.
        let dead = root.join(random_name().unwrap());
        std::fs::create_dir(&dead).unwrap();
        File::create(dead.with_extension("lock")).unwrap();
        let from = ojrunner_daemon::test_dir("ojrunner-ws-sweep");
        let live = Workspace::stage(&from).unwrap();
        assert!(!dead.exists(), "a dead judge's workspace was left");
        let other = Workspace::stage(&from).unwrap();
        assert!(live.path().exists() && other.path().exists(), "a live workspace was swept");
        std::fs::remove_dir_all(&from).unwrap();
    }
}
