//! Testdata, cached per host: one directory per problem and checksum under
//! `$OJ_SPOOL/testdata/<pid>/<checksum>/`, filled once under a per-problem
//! lock and never changed after, so a claim judging against one version is
//! never pulled from under by a download of the next.
//!
//! The checksum is the hub's and opaque: the cache asks for it on every
//! claim (rejudges usually follow testdata edits) and downloads only when it
//! names a version not here. Normal-OJ kept this key in the backend's shared
//! Redis while the files lived on each host's disk, so a second host could
//! find the key and no files; here key and files live together.

use crate::archive;
use crate::hub::{FetchError, HubClient};
pub use ojrunner_protocol::testdata::{case_file, check_cases};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Marks a version directory as complete (written last, before the rename).
const COMPLETE: &str = ".complete";

/// How long a prep waits for another to finish downloading the same problem.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Whether the testdata a claim needed was here already (a phase's label:
/// [`crate::phase::Phase::Testdata`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    Hit,
    Miss,
}

impl Cached {
    pub fn as_str(self) -> &'static str {
        match self {
            Cached::Hit => "hit",
            Cached::Miss => "miss",
        }
    }
}

/// The per-host testdata cache.
#[derive(Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    pub fn new(spool: &Path) -> Cache {
        Cache { root: spool.join("testdata") }
    }

    /// The directory holding problem `pid`'s current testdata, downloading it
    /// if this host does not have that version yet (a miss).
    pub fn ensure(&self, hub: &HubClient, pid: i64) -> Result<(PathBuf, Cached), FetchError> {
        let checksum = hub.checksum(pid)?;
        let dir = self.root.join(pid.to_string());
        let version = dir.join(version_key(&checksum));
        if version.join(COMPLETE).exists() {
            return Ok((version, Cached::Hit));
        }
        std::fs::create_dir_all(&dir).map_err(|e| FetchError::ours(format!("{}: {e}", dir.display())))?;
        // Root only: a judged program must not open the answers by path.
        std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| FetchError::ours(format!("{}: {e}", self.root.display())))?;
        let _lock = lock(&self.root.join(format!("{pid}.lock")))?;
        // Another prep may have filled it while this one waited.
        if version.join(COMPLETE).exists() {
            return Ok((version, Cached::Hit));
        }
        let tag = format!("{}-{}", std::process::id(), crate::spool::now_ms());
        let zip = dir.join(format!(".download-{tag}.zip"));
        let tmp = dir.join(format!(".unpack-{tag}"));
        let result = (|| {
            hub.testdata(pid, &zip, archive::TESTDATA.max_bytes)?;
            archive::extract(&zip, &tmp, archive::TESTDATA).map_err(|e| {
                let why = format!("problem {pid} testdata: {e}");
                match e.1 {
                    archive::Blame::Archive => FetchError::unusable(why),
                    archive::Blame::Ours => FetchError::ours(why),
                }
            })?;
            // The hub's meta, kept beside the files for whoever debugs them.
            if let Ok(meta) = hub.meta(pid) {
                let _ = std::fs::write(tmp.join(".meta.json"), meta.to_string());
            }
            std::fs::write(tmp.join(COMPLETE), checksum.as_bytes()).map_err(|e| FetchError::ours(format!("{e}")))?;
            let _ = std::fs::remove_dir_all(&version);
            std::fs::rename(&tmp, &version).map_err(|e| FetchError::ours(format!("{}: {e}", version.display())))
        })();
        let _ = std::fs::remove_file(&zip);
        let _ = std::fs::remove_dir_all(&tmp);
        result.map(|_| {
            log::info!("problem {pid}: testdata version {checksum} cached");
            (version, Cached::Miss)
        })
    }
}

impl Cache {
    /// Removes the versions of problem `pid` other than `current` and those
    /// a held claim still judges against. Best effort.
    pub fn prune(&self, pid: i64, current: &Path, in_use: &[PathBuf]) {
        let dir = self.root.join(pid.to_string());
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            // A download's leftovers (.download-/.unpack-<pid>-<ms>) go once
            // their claimd is gone (it stopped mid-download); another's
            // download in progress is not ours.
            if let Some(owner) = downloader(&name.to_string_lossy()) {
                if !Path::new("/proc").join(owner).exists() {
                    let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
                    log::info!("problem {pid}: {} of a download that died removed", name.to_string_lossy());
                }
                continue;
            }
            if p == current || in_use.contains(&p) || name.to_string_lossy().starts_with('.') || !p.is_dir() {
                continue;
            }
            if std::fs::remove_dir_all(&p).is_ok() {
                log::info!("problem {pid}: old testdata version {} removed", name.to_string_lossy());
            }
        }
    }
}

/// The pid of the process that named a download's file or directory
/// (`.download-<pid>-<ms>.zip`, `.unpack-<pid>-<ms>`, as [`Cache::ensure`]
/// does).
fn downloader(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(".download-").or_else(|| name.strip_prefix(".unpack-"))?;
    let pid = rest.split('-').next()?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(pid)
}

/// A directory name for a checksum: the checksum itself when it is a tame
/// token (an md5 hex is), else a hash of it.
fn version_key(checksum: &str) -> String {
    let tame = !checksum.is_empty()
        && checksum.len() <= 64
        && checksum.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if tame {
        return checksum.to_string();
    }
    // FNV-1a: only needs to be stable and spread, not secret.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in checksum.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    format!("h{h:016x}")
}

/// Takes the per-problem lock, waiting at most [`LOCK_WAIT`].
fn lock(path: &Path) -> Result<std::fs::File, FetchError> {
    let end = Instant::now() + LOCK_WAIT;
    loop {
        match ojrunner_daemon::lock::try_exclusive(path).map_err(|e| FetchError::ours(e.to_string()))? {
            Some(held) => return Ok(held),
            None if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
            None => return Err(FetchError::ours(format!("{}: still locked after {LOCK_WAIT:?}", path.display()))),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn checksums_become_safe_directory_names() {
        assert_eq!(super::version_key("d41d8cd98f00b204e9800998ecf8427e"), "d41d8cd98f00b204e9800998ecf8427e");
        let k = super::version_key("../../etc");
        assert!(k.starts_with('h') && !k.contains('/'), "{k}");
        assert_ne!(super::version_key("a/b"), super::version_key("a/c"));
    }

    #[test]
    fn prune_removes_a_dead_downloads_leftovers_and_no_live_ones() {
        let root = ojrunner_daemon::test_dir("ojrunner-prune");
        let dir = root.join("7");
        let current = dir.join("v2");
        std::fs::create_dir_all(&current).unwrap();
        // No process has pid 2^22 + 1 (above pid_max's ceiling); this one lives.
        let dead = [dir.join(".download-4194305-1.zip"), dir.join(".unpack-4194305-1")];
        let live = dir.join(format!(".unpack-{}-1", std::process::id()));
        std::fs::write(&dead[0], "zip").unwrap();
        std::fs::create_dir(&dead[1]).unwrap();
        std::fs::create_dir(&live).unwrap();
        super::Cache { root: root.clone() }.prune(7, &current, &[]);
        assert!(dead.iter().all(|p| !p.exists()), "a dead download's leftovers stay");
        assert!(live.exists() && current.exists(), "a live download or the current version went");
        assert_eq!(super::downloader(".unpack-12-34"), Some("12"));
        assert_eq!(super::downloader(".unpack-x-34"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
