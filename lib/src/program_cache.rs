//! The cache of compiled checkers and interactors (`<spool>/checkers`): a
//! directory per key, `<key>/<binary>`, with `<key>.lock` held while the key
//! is looked up or built and `<key>.build` while it is built (see
//! `Judge::prepare_checker`).
//!
//! A key covers the testdata's path, the source and the compile command, so
//! a changed checker, a removed problem or a new Rust (whose hasher makes the
//! keys) leaves old entries behind, for ever on a judge that runs for years.
//! [`prune`] removes the ones not used for [`KEEP`]; a hit refreshes its
//! entry's time ([`touch`]). Lookups hold `.prune.lock` shared ([`enter`]);
//! pruning takes it exclusively and skips its turn while any lookup is under
//! way, so no entry goes while it is being used or built, and no key's lock
//! file is unlinked while someone waits on it.

use std::fs::File;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How long an entry is kept after its last use.
pub const KEEP: Duration = Duration::from_secs(30 * 24 * 3600);

/// The cache-wide lock, held shared through a lookup (or a build).
pub struct Lookup(#[allow(dead_code)] File);

/// Takes the cache-wide lock shared: [`prune`] waits its turn.
pub fn enter(cache: &Path) -> io::Result<Lookup> {
    let f = prune_lock(cache)?;
    f.lock_shared()?;
    Ok(Lookup(f))
}

/// Marks the entry `dir` used now.
pub fn touch(dir: &Path) {
    if let Err(e) = File::open(dir).and_then(|d| d.set_modified(SystemTime::now())) {
        log::warn!("cache entry {}: cannot mark it used: {e}", dir.display());
    }
}

/// Removes the entries of `cache` not used for `keep` (their directory, lock
/// and unfinished build); how many. Does nothing while a lookup is under way.
pub fn prune(cache: &Path, keep: Duration) -> usize {
    let Ok(lock) = prune_lock(cache) else { return 0 };
    if lock.try_lock().is_err() {
        return 0;
    }
    let mut keys = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let key = name.strip_suffix(".lock").or_else(|| name.strip_suffix(".build")).unwrap_or(&name);
        keys.insert(key.to_string());
    }
    let now = SystemTime::now();
    let mut removed = 0;
    for key in keys {
        let (dir, lock, build) =
            (cache.join(&key), cache.join(format!("{key}.lock")), cache.join(format!("{key}.build")));
        // The entry's last use; without a directory (a build that died), its lock's.
        let used =
            [&dir, &lock, &build].iter().find_map(|p| std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok());
        match used.and_then(|t| now.duration_since(t).ok()) {
            Some(age) if age >= keep => {}
            _ => continue,
        }
        let gone = [std::fs::remove_dir_all(&dir), std::fs::remove_dir_all(&build), std::fs::remove_file(&lock)];
        match gone.into_iter().find(|r| r.as_ref().is_err_and(|e| e.kind() != io::ErrorKind::NotFound)) {
            Some(Err(e)) => log::warn!("checker cache: removing {key}: {e}"),
            _ => removed += 1,
        }
    }
    if removed > 0 {
        log::info!("checker cache: removed {removed} entries unused for {} days", keep.as_secs() / 86400);
    }
    removed
}

fn prune_lock(cache: &Path) -> io::Result<File> {
    ojrunner_daemon::lock::open(&cache.join(".prune.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ojr-cache-{}-{:?}", std::process::id(), std::time::Instant::now()));
        std::fs::create_dir(&d).unwrap();
        d
    }

    fn age(p: &Path, days: u64) {
        let t = SystemTime::now() - Duration::from_secs(days * 86400);
        File::open(p).unwrap().set_modified(t).unwrap();
    }

    /// An entry as a lookup leaves it: its directory with a binary, its lock.
    fn entry(cache: &Path, key: &str, days: u64) {
        std::fs::create_dir(cache.join(key)).unwrap();
        std::fs::write(cache.join(key).join("main"), "binary").unwrap();
        std::fs::write(cache.join(format!("{key}.lock")), "").unwrap();
        age(&cache.join(key), days);
        age(&cache.join(format!("{key}.lock")), days);
    }

    #[test]
    fn entries_unused_for_the_keep_go_and_the_others_stay() {
        let c = cache();
        entry(&c, "old", 40);
        entry(&c, "recent", 3);
        // A build that died: its scratch and lock, no entry.
        std::fs::create_dir(c.join("dead.build")).unwrap();
        std::fs::write(c.join("dead.lock"), "").unwrap();
        age(&c.join("dead.lock"), 31);
        assert_eq!(prune(&c, KEEP), 2);
        let mut left: Vec<String> =
            std::fs::read_dir(&c).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, [".prune.lock", "recent", "recent.lock"]);
        // A hit makes an old entry new again.
        entry(&c, "reused", 40);
        touch(&c.join("reused"));
        assert_eq!(prune(&c, KEEP), 0);
        assert!(c.join("reused/main").is_file());
        std::fs::remove_dir_all(&c).unwrap();
    }

    #[test]
    fn nothing_goes_while_a_lookup_is_under_way() {
        let c = cache();
        entry(&c, "old", 40);
        let lookup = enter(&c).unwrap();
        assert_eq!(prune(&c, KEEP), 0);
        assert!(c.join("old/main").is_file());
        drop(lookup);
        assert_eq!(prune(&c, KEEP), 1);
        std::fs::remove_dir_all(&c).unwrap();
    }
}
