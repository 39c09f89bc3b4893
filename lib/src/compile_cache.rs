//! The cache of compiled submissions (`<spool>/programs` for the runner,
//! `judge-exec run --cache DIR`): a submission compiled once is never
//! compiled again while its entry lasts. A hit copies the files its compile
//! left (the binary, Java's classes, Python's bytecode, and the sources)
//! into the new workspace, and the compiler does not run: a rejudge (the
//! hub hands the same sources again) compiles nothing.
//!
//! # The key
//!
//! SHA-256 over: this format's version; the language's name; the compile
//! command, its placeholders filled; the compiler's identity; and every
//! file of the staged workspace before the compile (its path, its mode, the
//! SHA-256 of its bytes). SHA-256, not the checker cache's SipHash: a key
//! is made of a contestant's bytes, and a collision found on purpose would
//! hand another submission's program to a judge.
//!
//! The compiler's identity is the command's program (a bare name is looked
//! up in `/usr/bin:/bin`, the sandbox's `PATH`), its links followed (Debian's
//! `/usr/bin/g++` is `x86_64-linux-gnu-g++-12`), and that file's device,
//! inode, size, modification and change times, read at every compile (a
//! `stat`, microseconds). An upgrade writes the program anew (dpkg unpacks
//! a new file and renames it over the old: a new inode and new times), so
//! the next compile misses; so does a rebuild of the same version, which
//! `--version` would not tell, and `--version` would cost a process per
//! compile. An upgrade of only the compiler's headers or libraries (a
//! `libstdc++-dev` without its `g++`) is not seen: remove the cache after
//! one (ojrunner(7)). A program that cannot be resolved is not cached.
//!
//! # An entry
//!
//! `<key>/manifest` (JSON: every directory and file, with its mode, size and
//! SHA-256) and `<key>/tree/` (the files: root's, 0444, or 0555 when the
//! compile left them executable; the cache directory is root's, 0700: no
//! slot uid can reach it, and a run sees only its workspace's copy, bound
//! read-only). It is written in `<key>.build` and renamed into place, all
//! under `<key>.lock` held exclusively, so a crash mid-build leaves no entry
//! that looks whole (the next build of the key, or [`CompileCache::prune`],
//! removes the `.build`). A lookup holds the same lock while it copies, so
//! concurrent claims of one source compile once: the others wait, then hit.
//! Every file copied out is checked against the manifest: a file missing,
//! short, changed or added (a corrupt entry) makes a miss, and the entry
//! goes; never a wrong program.
//!
//! Only a successful compile is cached. A compile error may be the
//! machine's, not the source's (the OOM killer, a time limit on a loaded
//! machine, a fork refused): cached, it would be every rejudge's CE. Nor is
//! a tree with anything but regular files and directories (a link, a
//! FIFO), one deeper than 16 levels, or one larger than the budget.
//!
//! # Eviction
//!
//! The cache holds at most its budget (bytes of its files, a manifest's
//! included). Each store adds its entry's bytes to a running total
//! (`.total`); when the total passes the budget, entries go least recently
//! used first (a hit refreshes its directory's modification time) until it
//! holds at most 90 % of its budget (so that a full cache is walked once per
//! tenth of its budget stored), and the total is counted anew; an entry
//! whose lock is held (being copied out or built) is skipped. (Walking
//! every entry at each store would cost about 32 µs per entry: seconds per
//! store for a full 1 GiB cache.) A lock file is unlinked only by a holder
//! of its lock, and a locker that finds its file unlinked under it takes
//! the lock again (`lock_key`).

// Directories deeper than the workspace copies are not cached.
use crate::workspace::MAX_DEPTH;
use ojrunner_daemon::lock;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The budget when none is given: 1 GiB (about 500 C++ programs of 2 MB).
pub const DEFAULT_BUDGET: u64 = 1 << 30;

/// The key format's version: a change of what a key covers bumps it.
const VERSION: &str = "ojrunner compile cache 1";

/// A cache of compiled programs: its directory and its byte budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileCache {
    pub dir: PathBuf,
    /// Bytes of files the cache keeps at most.
    pub budget: u64,
}

/// One file or directory of a tree, relative to its root.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Item {
    path: String,
    /// `None`: a directory.
    file: Option<FileItem>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FileItem {
    mode: u32,
    size: u64,
    sha256: String,
}

/// A key's lock, held while its entry is copied out or built.
pub struct Held(#[allow(dead_code)] File);

impl CompileCache {
    /// `None` when `budget` is 0 (no cache).
    pub fn new(dir: PathBuf, budget: u64) -> Option<CompileCache> {
        (budget > 0).then_some(CompileCache { dir, budget })
    }

    /// The key of compiling `src_dir` (the staged workspace, before the
    /// compile) in language `lang` with `argv`; `None`: not cacheable (the
    /// compiler cannot be resolved, or the tree has something else than
    /// files and directories).
    pub fn key(lang: &str, argv: &[String], src_dir: &Path) -> Option<String> {
        let identity = toolchain_identity(argv.first()?)?;
        let tree = walk(src_dir).ok()??;
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(VERSION.as_bytes());
        part(lang.as_bytes());
        part(&serde_json::to_vec(argv).ok()?);
        part(identity.as_bytes());
        for (item, path) in &tree {
            part(item.path.as_bytes());
            match &item.file {
                None => part(b"dir"),
                Some(f) => {
                    part(&f.mode.to_le_bytes());
                    part(hash_file(path).ok()?.as_bytes());
                }
            }
        }
        Some(hex(&h.finalize()))
    }

    /// Takes `key`'s lock (waiting while another holds it), making the
    /// cache's directory if need be.
    pub fn lock(&self, key: &str) -> io::Result<Held> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir)?;
        set_mode(&self.dir, 0o700)?;
        Ok(Held(lock_key(&self.dir.join(format!("{key}.lock")), true)?.expect("a blocking lock")))
    }

    /// Copies the entry of `key` into `into` (the workspace), under the
    /// key's lock (`_held`): true on a hit. A corrupt entry is removed.
    pub fn fetch(&self, key: &str, into: &Path, _held: &Held) -> bool {
        let entry = self.dir.join(key);
        if !entry.is_dir() {
            return false;
        }
        match restore(&entry, into) {
            Ok(()) => {
                crate::program_cache::touch(&entry);
                true
            }
            Err(e) => {
                log::warn!("compile cache: entry {key} is unusable ({e}); compiling");
                let _ = std::fs::remove_dir_all(&entry);
                false
            }
        }
    }

    /// Stores what the compile left in `from` as the entry of `key`, under
    /// the key's lock (`_held`); then prunes. A tree that cannot be cached
    /// is left out (logged at debug); a failure to write is logged.
    pub fn store(&self, key: &str, from: &Path, _held: &Held) {
        let build = self.dir.join(format!("{key}.build"));
        let _ = std::fs::remove_dir_all(&build);
        match self.build(&build, from) {
            Ok(true) => {
                let entry = self.dir.join(key);
                let _ = std::fs::remove_dir_all(&entry);
                let added = du(&build);
                match std::fs::rename(&build, &entry) {
                    Ok(()) => self.account(added),
                    Err(e) => log::warn!("compile cache: storing {key}: {e}"),
                }
            }
            Ok(false) => log::debug!("compile cache: {key} not cached (links, FIFOs or too large)"),
            Err(e) => log::warn!("compile cache: storing {key}: {e}"),
        }
        let _ = std::fs::remove_dir_all(&build);
    }

    /// Adds `added` bytes to the cache's running total (`.total`, under
    /// `.total.lock`), and prunes when it passes the budget (or is not
    /// known): the walk of every entry runs only then, not at each store.
    /// A total that a crash left short only delays a prune; the prune
    /// writes the exact total.
    fn account(&self, added: u64) {
        let Ok(_lock) = lock::exclusive(&self.dir.join(".total.lock")) else { return };
        let path = self.dir.join(".total");
        let known = std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse::<u64>().ok());
        match known.map(|t| t.saturating_add(added)) {
            Some(total) if total <= self.budget => {
                let _ = std::fs::write(&path, total.to_string());
            }
            _ => {
                self.prune_locked();
            }
        }
    }

    /// Writes `from`'s tree and its manifest into `build`; false: it is not
    /// one to cache.
    fn build(&self, build: &Path, from: &Path) -> io::Result<bool> {
        let Some(tree) = walk(from)? else { return Ok(false) };
        let size: u64 = tree.iter().filter_map(|(i, _)| i.file.as_ref()).map(|f| f.size).sum();
        if size > self.budget {
            return Ok(false);
        }
        let mut dirs = std::fs::DirBuilder::new();
        dirs.mode(0o755);
        dirs.create(build)?;
        dirs.create(build.join("tree"))?;
        let mut manifest = Vec::with_capacity(tree.len());
        for (item, path) in tree {
            let to = build.join("tree").join(&item.path);
            let Some(f) = &item.file else {
                dirs.create(&to)?;
                manifest.push(item);
                continue;
            };
            let bytes = read_nofollow(path.as_path())?;
            let mode = if f.mode & 0o111 != 0 { 0o555 } else { 0o444 };
            write_new(&to, &bytes, mode)?;
            let file = Some(FileItem { mode, size: bytes.len() as u64, sha256: hex(&Sha256::digest(&bytes)) });
            manifest.push(Item { path: item.path, file });
        }
        write_new(&build.join("manifest"), &serde_json::to_vec(&manifest).map_err(io::Error::other)?, 0o444)?;
        Ok(true)
    }

    /// Removes entries, least recently used first, until the cache holds at
    /// most 90 % of its budget (when it holds more than all of it),
    /// skipping those in use; and unfinished builds no one
    /// holds. How many entries went.
    pub fn prune(&self) -> usize {
        match lock::exclusive(&self.dir.join(".total.lock")) {
            Ok(_lock) => self.prune_locked(),
            Err(_) => 0,
        }
    }

    /// [`CompileCache::prune`], `.total.lock` held; writes the total left.
    fn prune_locked(&self) -> usize {
        let mut entries = Vec::new();
        let mut total = 0u64;
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(key) = name.strip_suffix(".build") {
                if let Ok(Some(_held)) = lock_key(&self.dir.join(format!("{key}.lock")), false) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
                continue;
            }
            if name.contains('.') || !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let used = e.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            let size = du(&e.path());
            total += size;
            entries.push((used, size, name));
        }
        entries.sort();
        let mut removed = 0;
        // Down to the low water mark when over: a full cache is walked
        // once per tenth of its budget stored, not at every store.
        let low = if total > self.budget { self.budget / 10 * 9 } else { self.budget };
        for (_, size, key) in entries {
            if total <= low {
                break;
            }
            let lock = self.dir.join(format!("{key}.lock"));
            let Ok(Some(_held)) = lock_key(&lock, false) else { continue };
            match std::fs::remove_dir_all(self.dir.join(&key)) {
                Ok(()) => {
                    total -= size;
                    removed += 1;
                    let _ = std::fs::remove_file(&lock);
                }
                Err(e) => log::warn!("compile cache: removing {key}: {e}"),
            }
        }
        let _ = std::fs::write(self.dir.join(".total"), total.to_string());
        if removed > 0 {
            log::info!("compile cache: {removed} least recently used entries removed; {total} bytes kept");
        }
        removed
    }
}

/// Opens `path` and locks it (exclusively), waiting when `wait`; `None`:
/// held by another (only without `wait`). A file unlinked by a pruner
/// between the open and the lock is let go and opened again, so that two
/// lockers never hold two files of one name.
fn lock_key(path: &Path, wait: bool) -> io::Result<Option<File>> {
    loop {
        let f = match wait {
            true => lock::exclusive(path)?,
            false => match lock::try_exclusive(path)? {
                Some(f) => f,
                None => return Ok(None),
            },
        };
        let held = f.metadata()?;
        match std::fs::symlink_metadata(path) {
            Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => return Ok(Some(f)),
            _ => continue,
        }
    }
}

/// The program of a compile command and its file's identity (see the
/// module doc); `None` when it cannot be found.
fn toolchain_identity(program: &str) -> Option<String> {
    let found = if program.starts_with('/') {
        PathBuf::from(program)
    } else {
        ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(program)).find(|p| p.is_file())?
    };
    let real = std::fs::canonicalize(&found).ok()?;
    let m = std::fs::metadata(&real).ok()?;
    Some(format!(
        "{} dev {} ino {} size {} mtime {}.{} ctime {}.{}",
        real.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// Every directory and regular file below `root`, in name order, with its
/// path; `None`: something else is there (a link, a FIFO, a name that is not
/// UTF-8, a tree too deep): not a tree to cache.
fn walk(root: &Path) -> io::Result<Option<Vec<(Item, PathBuf)>>> {
    fn go(root: &Path, dir: &Path, depth: usize, out: &mut Vec<(Item, PathBuf)>) -> io::Result<bool> {
        let mut names: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let path = e.path();
            let Some(rel) = path.strip_prefix(root).ok().and_then(|p| p.to_str()).map(String::from) else {
                return Ok(false);
            };
            let m = std::fs::symlink_metadata(&path)?;
            if m.is_dir() && depth < MAX_DEPTH {
                out.push((Item { path: rel, file: None }, path.clone()));
                if !go(root, &path, depth + 1, out)? {
                    return Ok(false);
                }
            } else if m.is_file() {
                let file = FileItem { mode: m.permissions().mode() & 0o777, size: m.len(), sha256: String::new() };
                out.push((Item { path: rel, file: Some(file) }, path));
            } else {
                return Ok(false);
            }
        }
        Ok(true)
    }
    let mut out = Vec::new();
    Ok(go(root, root, 0, &mut out)?.then_some(out))
}

/// Copies the entry `entry` into `into`, each file checked against the
/// manifest, and no file in the tree that the manifest does not name.
fn restore(entry: &Path, into: &Path) -> io::Result<()> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let manifest: Vec<Item> =
        serde_json::from_slice(&read_nofollow(&entry.join("manifest"))?).map_err(|e| bad(format!("manifest: {e}")))?;
    let tree = entry.join("tree");
    let found = walk(&tree)?.ok_or_else(|| bad("not a plain tree".into()))?;
    let names: Vec<&str> = found.iter().map(|(i, _)| i.path.as_str()).collect();
    let listed: Vec<&str> = manifest.iter().map(|i| i.path.as_str()).collect();
    if names != listed {
        return Err(bad("the tree is not the manifest's".into()));
    }
    for item in &manifest {
        if item.path.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(bad(format!("{:?}: not a plain path", item.path)));
        }
        let to = into.join(&item.path);
        let Some(f) = &item.file else {
            match std::fs::symlink_metadata(&to) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(bad(format!("{}: not a directory in the workspace", item.path))),
                Err(_) => std::fs::DirBuilder::new().mode(0o755).create(&to)?,
            }
            continue;
        };
        let bytes = read_nofollow(&tree.join(&item.path))?;
        if bytes.len() as u64 != f.size || hex(&Sha256::digest(&bytes)) != f.sha256 {
            return Err(bad(format!("{}: not as the manifest says", item.path)));
        }
        match std::fs::symlink_metadata(&to) {
            Ok(m) if m.is_dir() => return Err(bad(format!("{}: a directory in the workspace", item.path))),
            Ok(_) => std::fs::remove_file(&to)?,
            Err(_) => {}
        }
        write_new(&to, &bytes, f.mode & 0o555)?;
    }
    Ok(())
}

/// Bytes of the regular files below `dir`.
fn du(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => n += du(&e.path()),
            Ok(t) if t.is_file() => n += e.metadata().map_or(0, |m| m.len()),
            _ => {}
        }
    }
    n
}

fn hash_file(p: &Path) -> io::Result<String> {
    Ok(hex(&Sha256::digest(read_nofollow(p)?)))
}

fn read_nofollow(p: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = File::options().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(p)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: not a regular file", p.display())));
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Creates `p` (never through a link) holding `bytes`, with exactly `mode`.
fn write_new(p: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut f = File::options().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).mode(0o600).open(p)?;
    f.write_all(bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(tag: &str, files: &[(&str, &str)]) -> PathBuf {
        let d = ojrunner_daemon::test_dir(tag);
        for (name, text) in files {
            let p = d.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn gcc() -> Vec<String> {
        ["/usr/bin/gcc", "-O2", "main.c", "-o", "main"].map(String::from).to_vec()
    }

    #[test]
    fn the_key_follows_language_command_toolchain_and_every_file() {
        let a = tree("ojcc-key-a", &[("main.c", "int main(){}"), ("lib/x.h", "1")]);
        let k = |lang: &str, argv: &[String], dir: &Path| CompileCache::key(lang, argv, dir).unwrap();
        let base = k("c11", &gcc(), &a);
        assert_eq!(base, k("c11", &gcc(), &a), "a key is stable");
        assert_ne!(base, k("c17", &gcc(), &a), "language");
        let mut o3 = gcc();
        o3[1] = "-O3".into();
        assert_ne!(base, k("c11", &o3, &a), "command");
        let mut cc = gcc();
        cc[0] = "/usr/bin/g++".into();
        assert_ne!(base, k("c11", &cc, &a), "toolchain");
        std::fs::write(a.join("lib/x.h"), "2").unwrap();
        assert_ne!(base, k("c11", &gcc(), &a), "a header beside the source");
        std::fs::write(a.join("lib/x.h"), "1").unwrap();
        assert_eq!(base, k("c11", &gcc(), &a));
        set_mode(&a.join("main.c"), 0o755).unwrap();
        assert_ne!(base, k("c11", &gcc(), &a), "a mode");
        // A toolchain replaced as a package upgrade replaces it: a new file.
        let tools = tree("ojcc-key-tool", &[("cc", "#!/bin/sh\n")]);
        let cc = tools.join("cc");
        let argv = vec![cc.to_str().unwrap().to_string()];
        let before = k("c11", &argv, &a);
        std::fs::write(tools.join("cc.new"), "#!/bin/sh\n").unwrap();
        std::fs::rename(tools.join("cc.new"), &cc).unwrap();
        assert_ne!(before, k("c11", &argv, &a), "an upgraded compiler");
        // Not cacheable: an unknown program, a link in the tree.
        assert_eq!(CompileCache::key("c11", &["/nonexistent/cc".into()], &a), None);
        assert!(CompileCache::key("c11", &["sh".into()], &a).is_some(), "found in /usr/bin:/bin");
        std::os::unix::fs::symlink("/etc/passwd", a.join("link")).unwrap();
        assert_eq!(CompileCache::key("c11", &gcc(), &a), None);
        for d in [a, tools] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn an_entry_comes_back_whole_read_only_and_a_corrupt_one_is_a_miss() {
        let cache = CompileCache { dir: ojrunner_daemon::test_dir("ojcc-entry").join("c"), budget: 1 << 20 };
        let built = tree("ojcc-entry-src", &[("main.c", "src"), ("main", "binary"), ("pkg/A.class", "cls")]);
        set_mode(&built.join("main"), 0o777).unwrap();
        let held = cache.lock("k1").unwrap();
        assert!(!cache.fetch("k1", &built, &held), "nothing stored yet");
        cache.store("k1", &built, &held);
        let ws = tree("ojcc-entry-ws", &[("main.c", "src")]);
        assert!(cache.fetch("k1", &ws, &held));
        assert_eq!(std::fs::read_to_string(ws.join("main")).unwrap(), "binary");
        assert_eq!(std::fs::read_to_string(ws.join("pkg/A.class")).unwrap(), "cls");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&ws.join("main")), 0o555, "executable, and nobody's to write");
        assert_eq!(mode(&cache.dir.join("k1/tree/main")), 0o555);
        assert_eq!(mode(&cache.dir.join("k1/tree/main.c")), 0o444);
        assert_eq!(mode(&cache.dir), 0o700, "no slot uid reaches the cache");
        // A file of the entry altered, or one added: a miss, and the entry goes.
        std::fs::remove_file(cache.dir.join("k1/tree/main")).unwrap();
        std::fs::write(cache.dir.join("k1/tree/main"), "evil").unwrap();
        let ws2 = tree("ojcc-entry-ws2", &[("main.c", "src")]);
        assert!(!cache.fetch("k1", &ws2, &held));
        assert!(!cache.dir.join("k1").exists());
        cache.store("k1", &built, &held);
        std::fs::write(cache.dir.join("k1/tree/extra"), "x").unwrap();
        assert!(!cache.fetch("k1", &ws2, &held));
        // An unfinished build (a crash) is never read, and goes when unheld.
        cache.store("k1", &built, &held);
        std::fs::create_dir(cache.dir.join("k2.build")).unwrap();
        std::fs::write(cache.dir.join("k2.build/manifest"), "[]").unwrap();
        let held2 = cache.lock("k2").unwrap();
        assert!(!cache.fetch("k2", &ws2, &held2));
        cache.prune();
        assert!(cache.dir.join("k2.build").exists(), "a build under way stays");
        drop(held2);
        cache.prune();
        assert!(!cache.dir.join("k2.build").exists());
        // A tree with a link is not stored.
        std::os::unix::fs::symlink("/etc/passwd", built.join("link")).unwrap();
        let held3 = cache.lock("k3").unwrap();
        cache.store("k3", &built, &held3);
        assert!(!cache.dir.join("k3").exists());
        drop((held, held3));
        for d in [cache.dir.parent().unwrap().to_path_buf(), built, ws, ws2] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn the_least_recently_used_go_first_to_fit_the_budget_never_one_in_use() {
        let root = ojrunner_daemon::test_dir("ojcc-lru");
        // Each entry: 1000 bytes of binary and its manifest (125): 1125.
        let cache = CompileCache { dir: root.join("c"), budget: 3400 };
        let src = tree("ojcc-lru-src", &[("main", &"x".repeat(1000))]);
        let ago = |key: &str, secs: u64| {
            let t = SystemTime::now() - std::time::Duration::from_secs(secs);
            File::open(cache.dir.join(key)).unwrap().set_modified(t).unwrap();
        };
        for (key, secs) in [("a", 40), ("b", 30), ("c", 20)] {
            let held = cache.lock(key).unwrap();
            cache.store(key, &src, &held);
            ago(key, secs);
        }
        let left = |k: &str| cache.dir.join(k).exists();
        assert!(left("a") && left("b") && left("c"), "three fit");
        // Over 2500, down to 2250 (90 %).
        let cache = CompileCache { budget: 2500, ..cache.clone() };
        // A hit makes `a` the most recent; `b` is in use: `c` goes.
        let ws = tree("ojcc-lru-ws", &[]);
        assert!(cache.fetch("a", &ws, &cache.lock("a").unwrap()));
        let busy = cache.lock("b").unwrap();
        assert_eq!(cache.prune(), 1);
        assert!(left("a") && left("b") && !left("c"), "c, least recently used but for b in use, goes");
        assert!(!cache.dir.join("c.lock").exists());
        let total: u64 = std::fs::read_to_string(cache.dir.join(".total")).unwrap().parse().unwrap();
        assert_eq!(total, 2 * 1125, "counted anew: two entries, at most 90 % of the budget");
        drop(busy);
        let held = cache.lock("d").unwrap();
        cache.store("d", &src, &held);
        drop(held);
        assert_eq!((left("a"), left("b"), left("d")), (true, false, true), "then b");
        // A tree larger than the whole budget is not stored.
        std::fs::write(src.join("main"), "x".repeat(4000)).unwrap();
        let held = cache.lock("e").unwrap();
        cache.store("e", &src, &held);
        assert!(!left("e"));
        drop(held);
        for d in [root, src, ws] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
