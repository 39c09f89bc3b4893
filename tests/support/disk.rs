//! A disk that fills up: a small tmpfs mounted for a test (a spool with no
//! room left), unmounted when the test ends.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A small tmpfs mounted for a test (a spool on a disk that can fill up),
/// unmounted on drop. Needs root, as the suite does.
pub struct SmallDisk {
    pub dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB at `dir` (created).
    pub fn mount(dir: &Path, mib: u64) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0755"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(out.status.success(), "mount a tmpfs at {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
        SmallDisk { dir: dir.to_path_buf() }
    }

    /// Fills the disk until a write fails with ENOSPC (a file `filler`).
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.dir.join("filler")).expect("create the filler");
        let block = vec![0u8; 64 * 1024];
        let mut size = block.len();
        // Large blocks first, then smaller, to the last page.
        while size >= 512 {
            match f.write_all(&block[..size]) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => size /= 2,
                Err(e) => panic!("filling {}: {e}", self.dir.display()),
            }
        }
        let _ = f.sync_all();
    }

    /// Frees what [`SmallDisk::fill`] took.
    pub fn free(&self) {
        std::fs::remove_file(self.dir.join("filler")).expect("remove the filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a process of the test may still hold a file there.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
