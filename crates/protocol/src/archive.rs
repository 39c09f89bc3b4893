//! Unpacking zips from strangers: submissions and testdata arrive as zips,
//! and a zip can say anything. Every entry's name is checked before a byte
//! is written (no absolute paths, no `..`, no symlinks, no name twice,
//! nothing odd), sizes are counted as bytes actually come out (headers lie),
//! and the whole unpacking is bounded in files and bytes. Names are read from
//! the central directory here, not only through the zip library, which keeps
//! one entry of a name that appears twice.
//!
//! A refusal is the archive's fault and final (the same bytes would be
//! refused again); a failure to write what it holds is the runner's
//! ([`Blame`]).

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

/// Why an archive was refused, or could not be unpacked.
#[derive(Debug)]
pub struct ArchiveError(pub String, pub Blame);

/// Whose fault an [`ArchiveError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blame {
    /// The archive's: hostile, broken or too big. Final.
    Archive,
    /// The runner's: its disk could not take what the archive holds.
    Ours,
}

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: String) -> Result<T, ArchiveError> {
    Err(refused(msg))
}

/// The archive's fault.
fn refused(msg: String) -> ArchiveError {
    ArchiveError(msg, Blame::Archive)
}

/// A failure writing under the destination: the runner's.
fn ours(what: &Path, e: std::io::Error) -> ArchiveError {
    ArchiveError(format!("{}: {e}", what.display()), Blame::Ours)
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
    let mut f = std::fs::File::open(zip).map_err(|e| ours(zip, e))?;
    // Every name, as the central directory lists it: a name twice is refused.
    let names = central_names(&mut f)?;
    if names.len() > bounds.max_files * 2 + 16 {
        return err(format!("{} entries (at most {} files)", names.len(), bounds.max_files));
    }
    let mut listed = std::collections::HashSet::new();
    for name in &names {
        if !listed.insert(name.as_slice()) {
            return err(format!("entry {:?}: appears twice", String::from_utf8_lossy(name)));
        }
    }
    let mut ar = zip::ZipArchive::new(f).map_err(|e| refused(format!("not a zip: {e}")))?;
    if ar.len() != names.len() {
        return err(format!("{} entries listed, {} readable", names.len(), ar.len()));
    }
    // Every name is checked before anything is written.
    let mut entries = Vec::new();
    for i in 0..ar.len() {
        let e = ar.by_index_raw(i).map_err(|e| refused(format!("entry {i}: {e}")))?;
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
    std::fs::create_dir_all(dest.parent().unwrap_or(Path::new("/"))).map_err(|e| ours(dest, e))?;
    std::fs::create_dir(dest).map_err(|e| ours(dest, e))?;
    let mut seen = std::collections::HashSet::new();
    let mut total: u64 = 0;
    let mut written = Vec::new();
    for (i, rel, is_dir) in entries {
        let target = dest.join(&rel);
        if is_dir {
            std::fs::create_dir_all(&target).map_err(|e| ours(&rel, e))?;
            continue;
        }
        if !seen.insert(rel.clone()) {
            return err(format!("entry {:?}: appears twice", rel.display()));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ours(&rel, e))?;
        }
        let mut entry = ar.by_index(i).map_err(|e| refused(format!("entry {:?}: {e}", rel.display())))?;
        // create_new: a name that resolves onto an existing path (a
        // directory entry made earlier, say) is refused, never overwritten.
        let mut out = match std::fs::OpenOptions::new().write(true).create_new(true).open(&target) {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return err(format!("entry {:?}: lands on a path already written: {e}", rel.display()))
            }
            Err(e) => return Err(ours(&rel, e)),
        };
        let room = bounds.max_bytes.saturating_sub(total);
        let n = copy(&mut (&mut entry).take(room + 1), &mut out, &rel)?;
        total += n;
        if total > bounds.max_bytes {
            return err(format!("unpacks to more than {} bytes", bounds.max_bytes));
        }
        let _ = std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644));
        written.push(rel);
    }
    Ok(written)
}

/// Copies an entry's bytes out: a read that fails is the archive's (bad
/// data), a write that fails is ours (a full disk).
fn copy(from: &mut impl Read, to: &mut std::fs::File, rel: &Path) -> Result<u64, ArchiveError> {
    use std::io::Write;
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0;
    loop {
        let got = match from.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return err(format!("entry {:?}: {e}", rel.display())),
        };
        to.write_all(&buf[..got]).map_err(|e| ours(rel, e))?;
        n += got as u64;
    }
}

/// The entry names of a zip's central directory, every one, in order.
fn central_names(f: &mut std::fs::File) -> Result<Vec<Vec<u8>>, ArchiveError> {
    use std::io::{Seek, SeekFrom};
    let io = |e: std::io::Error| refused(format!("not a zip: {e}"));
    let len = f.seek(SeekFrom::End(0)).map_err(io)?;
    // The end record is in the last 22 + 65535 (comment) bytes.
    let tail_len = len.min(22 + 65535);
    let mut tail = vec![0u8; tail_len as usize];
    f.seek(SeekFrom::Start(len - tail_len)).map_err(io)?;
    f.read_exact(&mut tail).map_err(io)?;
    let Some(end) = (0..tail.len().saturating_sub(21)).rev().find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
    else {
        return err("not a zip: no end of central directory".into());
    };
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as u64;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as u64;
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let (mut count, mut size, mut offset) = (u16_at(&tail, end + 10), u32_at(&tail, end + 12), u32_at(&tail, end + 16));
    if count == 0xffff || size == 0xffff_ffff || offset == 0xffff_ffff {
        // Zip64: the locator, just before the end record, says where the
        // zip64 end record is.
        let loc = end.checked_sub(20).filter(|&l| tail[l..l + 4] == [0x50, 0x4b, 0x06, 0x07]);
        let Some(loc) = loc else { return err("not a zip: zip64 end record not found".into()) };
        let mut rec = [0u8; 56];
        f.seek(SeekFrom::Start(u64_at(&tail, loc + 8))).map_err(io)?;
        f.read_exact(&mut rec).map_err(io)?;
        if rec[..4] != [0x50, 0x4b, 0x06, 0x06] {
            return err("not a zip: bad zip64 end record".into());
        }
        (count, size, offset) = (u64_at(&rec, 32), u64_at(&rec, 40), u64_at(&rec, 48));
    }
    if offset.checked_add(size).is_none_or(|e| e > len) || size > 64 << 20 {
        return err(format!("not a zip: central directory of {size} bytes at {offset}"));
    }
    let mut dir = vec![0u8; size as usize];
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    f.read_exact(&mut dir).map_err(io)?;
    let mut names = Vec::new();
    let mut i = 0;
    while i + 46 <= dir.len() && dir[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] {
        let (name, extra, comment) = (u16_at(&dir, i + 28), u16_at(&dir, i + 30), u16_at(&dir, i + 32));
        let start = i + 46;
        let Some(name) = dir.get(start..start + name as usize) else { break };
        names.push(name.to_vec());
        i = start + (name.len() as u64 + extra + comment) as usize;
    }
    if names.len() as u64 != count {
        return err(format!("not a zip: central directory lists {count} entries, holds {}", names.len()));
    }
    Ok(names)
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
        ojrunner_daemon::test_dir(&format!("ojzip-{tag}"))
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

    /// A zip holding `0000.in` twice, with different content: the zip
    /// library refuses to write one, so the second name is patched in.
    pub fn zip_with_a_name_twice(path: &Path) {
        zip_with(path, &[("0000.in", b"1 2\n"), ("0000.xx", b"5 5\n"), ("0000.out", b"3\n")], None);
        let mut bytes = std::fs::read(path).unwrap();
        let mut at = 0;
        while let Some(i) = bytes[at..].windows(7).position(|w| w == b"0000.xx") {
            bytes[at + i..at + i + 7].copy_from_slice(b"0000.in");
            at += i + 7;
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_name_twice_is_refused_though_the_zip_library_keeps_one() {
        let d = tmp("twice");
        let z = d.join("twice.zip");
        zip_with_a_name_twice(&z);
        let e = extract(&z, &d.join("out"), TESTDATA).unwrap_err();
        assert!(e.0.contains("\"0000.in\": appears twice"), "{e}");
        assert_eq!(e.1, Blame::Archive);
        assert!(!d.join("out").exists(), "nothing written");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_refused_archive_is_its_own_fault_a_failed_write_is_ours() {
        let d = tmp("blame");
        let z = d.join("a.zip");
        std::fs::write(&z, b"not a zip at all").unwrap();
        assert_eq!(extract(&z, &d.join("out1"), CODE).unwrap_err().1, Blame::Archive);
        zip_with(&z, &[("main.c", b"int main(){}")], None);
        // A destination that cannot be made (its parent is a file): ours.
        std::fs::write(d.join("file"), b"").unwrap();
        assert_eq!(extract(&z, &d.join("file/out"), CODE).unwrap_err().1, Blame::Ours);
        let _ = std::fs::remove_dir_all(d);
    }
}
