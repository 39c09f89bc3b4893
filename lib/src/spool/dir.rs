//! The spool directory around the database: the beat file, the claim
//! reserve, and the claims' work directories.

use super::{Context, Result, Spool, SpoolError};
use std::path::PathBuf;

/// The file whose modification time is the last heartbeat attempted
/// ([`Spool::note_beat`]): setting a time needs no free space, so a full
/// disk never makes a beat look missed.
pub const BEAT_FILE: &str = "beat";

/// The file holding the space set aside to record the next claim
/// ([`Spool::reserve`]).
pub const RESERVE_FILE: &str = "claim-reserve";

/// How much space is set aside to record a claim: a claim row, its
/// payload and SQLite's write-ahead log pages, many times over.
pub const RESERVE_BYTES: u64 = 1 << 20;

impl Spool {
    /// The work directory of a claim: its own, so two claims of one job
    /// never share a file.
    pub fn claim_dir(&self, claim_id: i64) -> PathBuf {
        self.dir.join("claims").join(claim_id.to_string())
    }

    /// Notes that a heartbeat is being attempted now: the modification time
    /// of [`BEAT_FILE`], which needs no free space to change (the file is
    /// made, empty, the first time).
    pub fn note_beat(&self) -> Result<()> {
        let path = self.dir.join(BEAT_FILE);
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ctx(&format!("open {}", path.display()))?;
        f.set_modified(std::time::SystemTime::now()).ctx(&format!("note the beat on {}", path.display()))
    }

    /// When a heartbeat was last attempted (ms since the epoch), 0 if never:
    /// the stamp of [`Spool::note_beat`], or the `last_beat_at` value an
    /// older leased kept in the database, whichever is later.
    pub fn last_beat(&self) -> Result<i64> {
        let path = self.dir.join(BEAT_FILE);
        let noted = match std::fs::metadata(&path).and_then(|m| m.modified()) {
            Ok(t) => t.duration_since(std::time::UNIX_EPOCH).map(ojrunner_daemon::clock::ms).unwrap_or(0),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(SpoolError::Io(format!("spool: read the beat stamp {}: {e}", path.display()))),
        };
        let older: i64 = self.control(crate::lease::LAST_BEAT_AT)?.and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(noted.max(older))
    }

    // ---- the claim reserve -----------------------------------------------------

    /// Makes sure [`RESERVE_BYTES`] are set aside in [`RESERVE_FILE`] to
    /// record the next claim (written out, not sparse), and as many again
    /// are free for the work it brings. An error means the disk cannot
    /// spare them now: claiming waits.
    pub fn reserve(&self) -> Result<()> {
        let full = |why: String| SpoolError::Full(format!("spool: the disk of {} is full: {why}", self.dir.display()));
        let stat = nix::sys::statvfs::statvfs(&self.dir).map_err(|e| full(format!("statvfs: {e}")))?;
        let free = stat.blocks_available() as u64 * stat.fragment_size() as u64;
        if free < RESERVE_BYTES {
            return Err(full(format!("{free} bytes free, fewer than {RESERVE_BYTES}")));
        }
        let path = self.dir.join(RESERVE_FILE);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() >= RESERVE_BYTES) {
            return Ok(());
        }
        let made = (|| {
            use std::io::Write;
            let mut f = std::fs::File::create(&path)?;
            let block = vec![0u8; 64 * 1024];
            for _ in 0..RESERVE_BYTES / block.len() as u64 {
                f.write_all(&block)?;
            }
            f.sync_all()
        })();
        made.map_err(|e| {
            let _ = std::fs::remove_file(&path);
            full(format!("cannot set {RESERVE_BYTES} bytes aside to record a claim: {e}"))
        })
    }

    /// Frees the reserve, so that a claim the full disk refused can be
    /// recorded. True if there was one to free.
    pub fn release_reserve(&self) -> bool {
        std::fs::remove_file(self.dir.join(RESERVE_FILE)).is_ok()
    }

    /// Removes work directories of claims that have ended. Best effort.
    pub fn sweep_dirs(&self) -> Result<usize> {
        let root = self.dir.join("claims");
        let Ok(entries) = std::fs::read_dir(&root) else { return Ok(0) };
        let mut n = 0;
        for e in entries.flatten() {
            let Some(id) = e.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
            let ended = match self.claim(id)? {
                None => true,
                Some(c) => !c.state.holds_lease(),
            };
            if ended && std::fs::remove_dir_all(e.path()).is_ok() {
                n += 1;
            }
        }
        Ok(n)
    }
}
