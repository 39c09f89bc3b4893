//! Unpacking zips from strangers: submissions and testdata arrive as zips,
//! and a zip can say anything. Every entry's name is checked before a byte
//! is written (no absolute paths, no `..`, no symlinks, nothing odd), sizes
//! are counted as bytes actually come out (headers lie), and the whole
//! unpacking is bounded in files and bytes.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// How much an archive may unpack to.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_files: usize,
    pub max_bytes: u64,
}

/// A submission: Normal-OJ's backend caps code at 10^7 bytes.
pub const CODE: Bounds = Bounds { max_files: 1, max_bytes: 10_000_000 };

/// Testdata: generous, but bounded.
pub const TESTDATA: Bounds = Bounds { max_files: 10_000, max_bytes: 2 * 1024 * 1024 * 1024 };

/// Why an archive was refused.
#[derive(Debug)]
pub struct ArchiveError(pub String);

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: String) -> Result<T, ArchiveError> {
    Err(ArchiveError(msg))
}

/// Checks one entry name and returns it as a relative path that stays
/// inside the destination.
pub fn safe_name(name: &str) -> Result<PathBuf, ArchiveError> {
    if name.is_empty() || name.len() > 255 || name.contains('\0') || name.contains('\\') {
        return err(format!("entry {name:?}: not a plain relative name"));
    }
    let p = Path::new(name);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir => return err(format!("entry {name:?}: climbs out with '..'")),
            Component::RootDir | Component::Prefix(_) => return err(format!("entry {name:?}: absolute path")),
        }
    }
    if out.as_os_str().is_empty() {
        return err(format!("entry {name:?}: empty path"));
    }
    Ok(out)
}

/// Unpacks `zip` into `dest` (created, must not exist), within `bounds`.
/// Returns the regular files written, relative to `dest`.
pub fn extract(zip: &Path, dest: &Path, bounds: Bounds) -> Result<Vec<PathBuf>, ArchiveError> {
    let f = std::fs::File::open(zip).map_err(|e| ArchiveError(format!("{}: {e}", zip.display())))?;
    let mut ar = zip::ZipArchive::new(f).map_err(|e| ArchiveError(format!("not a zip: {e}")))?;
    if ar.len() > bounds.max_files * 2 + 16 {
        return err(format!("{} entries (at most {} files)", ar.len(), bounds.max_files));
    }
    // Every name is checked before anything is written.
    let mut entries = Vec::new();
    for i in 0..ar.len() {
        let e = ar.by_index_raw(i).map_err(|e| ArchiveError(format!("entry {i}: {e}")))?;
        let name = e.name().to_string();
        let rel = safe_name(&name)?;
        let mode = e.unix_mode().unwrap_or(0);
        let kind = mode & 0o170000;
        if kind == 0o120000 {
            return err(format!("entry {name:?}: a symbolic link"));
        }
        if kind != 0 && kind != 0o100000 && kind != 0o040000 {
            return err(format!("entry {name:?}: not a regular file or directory (mode {mode:o})"));
        }
        let is_dir = e.is_dir() || kind == 0o040000;
        entries.push((i, rel, is_dir));
    }
    let files = entries.iter().filter(|e| !e.2).count();
    if files > bounds.max_files {
        return err(format!("{files} files (at most {})", bounds.max_files));
    }
    std::fs::create_dir_all(dest.parent().unwrap_or(Path::new("/")))
        .map_err(|e| ArchiveError(format!("{}: {e}", dest.display())))?;
    std::fs::create_dir(dest).map_err(|e| ArchiveError(format!("{}: {e}", dest.display())))?;
    let mut seen = std::collections::HashSet::new();
    let mut total: u64 = 0;
    let mut written = Vec::new();
    for (i, rel, is_dir) in entries {
        let target = dest.join(&rel);
        if is_dir {
            std::fs::create_dir_all(&target).map_err(|e| ArchiveError(format!("{}: {e}", rel.display())))?;
            continue;
        }
        if !seen.insert(rel.clone()) {
            return err(format!("entry {:?}: appears twice", rel.display()));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ArchiveError(format!("{}: {e}", rel.display())))?;
        }
        let mut entry = ar.by_index(i).map_err(|e| ArchiveError(format!("entry {:?}: {e}", rel.display())))?;
        // create_new: a name that resolves onto an existing path (a
        // directory entry made earlier, say) is refused, never overwritten.
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| ArchiveError(format!("{}: {e}", rel.display())))?;
        let room = bounds.max_bytes.saturating_sub(total);
        let n = std::io::copy(&mut (&mut entry).take(room + 1), &mut out)
            .map_err(|e| ArchiveError(format!("entry {:?}: {e}", rel.display())))?;
        total += n;
        if total > bounds.max_bytes {
            return err(format!("unpacks to more than {} bytes", bounds.max_bytes));
        }
        let _ = std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644));
        written.push(rel);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_with(path: &Path, entries: &[(&str, &[u8])], symlink: Option<(&str, &str)>) {
        let f = std::fs::File::create(path).unwrap();
        let mut z = zip::ZipWriter::new(f);
        let o = zip::write::SimpleFileOptions::default();
        for (n, b) in entries {
            z.start_file(*n, o).unwrap();
            z.write_all(b).unwrap();
        }
        if let Some((n, t)) = symlink {
            z.add_symlink(n, t, o).unwrap();
        }
        z.finish().unwrap();
    }

    fn tmp(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("ojzip-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn names_that_leave_the_destination_are_refused() {
        assert!(safe_name("../x").is_err());
        assert!(safe_name("a/../../x").is_err());
        assert!(safe_name("/etc/passwd").is_err());
        assert!(safe_name("a\\..\\b").is_err());
        assert_eq!(safe_name("./a/b.in").unwrap(), PathBuf::from("a/b.in"));
    }

    #[test]
    fn hostile_zips_are_refused_and_write_nothing() {
        let d = tmp("hostile");
        let z = d.join("evil.zip");
        zip_with(&z, &[("../escape.c", b"x")], None);
        assert!(extract(&z, &d.join("out1"), CODE).unwrap_err().0.contains(".."));
        assert!(!d.join("out1").exists() && !d.join("escape.c").exists());
        zip_with(&z, &[], Some(("main.c", "/etc/shadow")));
        assert!(extract(&z, &d.join("out2"), CODE).unwrap_err().0.contains("symbolic link"));
        zip_with(&z, &[("main.c", &[b'a'; 2000][..])], None);
        let small = Bounds { max_files: 1, max_bytes: 1000 };
        assert!(extract(&z, &d.join("out3"), small).unwrap_err().0.contains("more than"));
        zip_with(&z, &[("a.c", b"1"), ("b.c", b"2")], None);
        assert!(extract(&z, &d.join("out4"), CODE).unwrap_err().0.contains("2 files"));
        std::fs::write(&z, b"not a zip at all").unwrap();
        assert!(extract(&z, &d.join("out5"), CODE).unwrap_err().0.contains("not a zip"));
        zip_with(&z, &[("main.c", b"int main(){}")], None);
        assert_eq!(extract(&z, &d.join("ok"), CODE).unwrap(), vec![PathBuf::from("main.c")]);
        let _ = std::fs::remove_dir_all(d);
    }
}
