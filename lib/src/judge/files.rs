//! The files the judge hands to a slot and takes back (see "Files and
//! owners" in [the module doc](super)): a slot's scratch directory, a run's
//! output files, the directory a checker or interactor sees of its case.

use super::Slot;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `<scratch>.judge/`: what a checker or interactor may see of one case.
/// Removed on drop.
pub(super) struct CheckDir {
    pub(super) path: PathBuf,
}

impl CheckDir {
    /// Makes the directory (root's, 0700) with copies of the input and the
    /// answer (0444).
    pub(super) fn new(scratch: &Path, input: &Path, answer: &Path) -> std::io::Result<CheckDir> {
        let mut name = scratch.file_name().unwrap_or_default().to_os_string();
        name.push(".judge");
        let path = scratch.with_file_name(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path).map_err(|e| annotate(e, &path))?,
            Ok(_) => std::fs::remove_file(&path).map_err(|e| annotate(e, &path))?,
            Err(_) => {}
        }
        std::fs::DirBuilder::new().mode(0o700).create(&path).map_err(|e| annotate(e, &path))?;
        let dir = CheckDir { path };
        for (from, to) in [(input, "input"), (answer, "answer")] {
            let mut src = File::open(from).map_err(|e| annotate(e, from))?;
            let mut dst = create_fresh(&dir.path.join(to), 0o444)?;
            std::io::copy(&mut src, &mut dst).map_err(|e| annotate(e, from))?;
        }
        Ok(dir)
    }

    /// Gives the directory (not the files in it) to the run's slot.
    pub(super) fn hand_to(&self, slot: &Slot) -> std::io::Result<()> {
        if let Some(id) = slot.identity() {
            std::os::unix::fs::chown(&self.path, Some(id.uid), Some(id.gid)).map_err(|e| annotate(e, &self.path))?;
        }
        Ok(())
    }
}

impl Drop for CheckDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Empties a slot's scratch directory.
pub(super) fn clear_scratch(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| annotate(e, dir))?.flatten() {
        let p = e.path();
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
        gone.map_err(|e| annotate(e, &p))?;
    }
    Ok(())
}

/// A run's stdout or stderr file: a memfd, the judge's alone, on no file
/// system (no path a program could link or swap, no disk: a file per case
/// on ext4, emptied and written again, cost a sixth of a judged A+B case).
/// The program never gets it: it writes to a pipe the judge copies into it
/// (`streams.rs`), capped at the output limit, and opens that pipe by name
/// (`/dev/stdout`) if it likes.
pub(super) fn run_output(name: &std::ffi::CStr) -> std::io::Result<File> {
    crate::sandbox::sys::memfd(name)
}

/// Creates `p` anew, never through a link a judged program may have left.
pub(super) fn create_fresh(p: &Path, mode: u32) -> std::io::Result<File> {
    // The last case's file, when it is still the judge's own (root's, a
    // regular file, one link: not swapped or linked by the program), is
    // emptied and reused: allocating a new inode per case on ext4 cost as
    // much CPU as the run itself.
    use std::os::unix::fs::MetadataExt;
    // (Opened read-write, a FIFO put in its place does not block.)
    let reuse = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW).open(p);
    if let Ok(f) = reuse {
        let ours = f.metadata().is_ok_and(|m| {
            m.is_file() && m.uid() == nix::unistd::geteuid().as_raw() && m.nlink() == 1 && m.mode() & 0o7777 == mode
        });
        if ours && f.set_len(0).is_ok() {
            return Ok(f);
        }
    }
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(annotate(e, p)),
        _ => {}
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(p)
        .map_err(|e| annotate(e, p))?;
    // Exactly `mode`, whatever the umask took off: the next case reuses
    // only a file whose mode is still this.
    if f.metadata().map_err(|e| annotate(e, p))?.mode() & 0o7777 != mode {
        f.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| annotate(e, p))?;
    }
    Ok(f)
}

pub(super) fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|e| annotate(e, p))
}

pub(super) fn annotate(e: std::io::Error, p: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// Gives `dir` and everything under it to `uid:gid` (symbolic links are not
/// followed: `lchown`).
pub(super) fn own_tree(dir: &Path, uid: u32, gid: u32, depth: usize) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).map_err(|e| annotate(e, dir))?;
    if depth > 32 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            own_tree(&path, uid, gid, depth + 1)?;
        } else {
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).map_err(|e| annotate(e, &path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::slot::is_root;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_fresh_file_reuses_only_the_judges_own_and_never_truncates_through_a_link() {
        let dir = ojrunner_daemon::test_dir("ojfresh");
        let out = dir.join("stdout");
        // The judge's own file from the last case: same inode, emptied.
        let mut f = create_fresh(&out, 0o644).unwrap();
        f.write_all(b"last case").unwrap();
        let inode = f.metadata().unwrap().ino();
        let f = create_fresh(&out, 0o644).unwrap();
        assert_eq!((f.metadata().unwrap().ino(), f.metadata().unwrap().len()), (inode, 0));
        // A second link to it (to the answer, say): left whole, a new file made.
        let answer = dir.join("answer");
        std::fs::write(&answer, "42\n").unwrap();
        std::fs::set_permissions(&answer, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::remove_file(&out).unwrap();
        std::fs::hard_link(&answer, &out).unwrap();
        let f = create_fresh(&out, 0o644).unwrap();
        assert_ne!(f.metadata().unwrap().ino(), std::fs::metadata(&answer).unwrap().ino());
        assert_eq!(std::fs::read_to_string(&answer).unwrap(), "42\n");
        // A symbolic link: not followed.
        std::fs::remove_file(&out).unwrap();
        std::os::unix::fs::symlink(&answer, &out).unwrap();
        create_fresh(&out, 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&answer).unwrap(), "42\n");
        assert!(!std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_slots_scratch_is_emptied_between_cases_but_for_the_output_files() {
        let dir = ojrunner_daemon::test_dir("ojclear");
        std::fs::create_dir_all(dir.join("left/deeper")).unwrap();
        for f in ["stdout", "left/deeper/file", "junk"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        if is_root() {
            // A directory the program locked itself out of: root removes it all the same.
            std::fs::set_permissions(dir.join("left"), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        clear_scratch(&dir).unwrap();
        let mut left: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
