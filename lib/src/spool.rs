//! The spool: one SQLite database shared by every stage of a runner, and
//! the durable truth of what the runner holds.
//!
//! Every claim is its own row keyed by a local claim id, never by `job_id`
//! alone: the hub may hand the same job again (after an abort or a lost
//! lease), and that is a new claim with its own directory, case results and
//! outcome. A claim moves
//!
//! ```text
//! claimed -> prepped -> started -> judged --\
//!    \          \                           +--> reported
//!     \----------\-----------> aborted ----/
//! (any live state) -> discarded   (superseded, lease lost, identity gone)
//! ```
//!
//! each step one `BEGIN IMMEDIATE` transaction whose `WHERE state = …`
//! guard is the fence: a stage acting on a claim that moved under it
//! changes nothing. The outcome of a claim (`complete` or `abort` body) is
//! written in the same transaction that moves it to `judged`/`aborted`, so
//! an outcome is never lost and never written twice.
//!
//! The drain latch lives here too: once set, [`Spool::start`] refuses, in
//! the same transaction that would have started a claim, so no stage and no
//! restarted stage can start judging after a drain began.
//!
//! So do the runner's metrics: each phase of a claim is timed in the
//! transaction that ends it ([`crate::phase`]), and each counter
//! ([`Counter`]) is bumped in the transaction of the event it counts, so
//! both survive every restart, and pruning old claims never makes a counter
//! go back.

use crate::counter::{self, Counter};
use crate::outcome::{self, OutcomeKind};
use crate::phase::{self, Phase, Timing};
use crate::protocol::{AbortReason, BadJob, CaseResult, Job, Outcome, Registration, RunnerConfig};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema this code reads and writes (`PRAGMA user_version`): 2 added
/// `phases` and `counters`; a spool of 1 is migrated when a stage opens it.
pub const SCHEMA_VERSION: i64 = 2;

/// Event lines kept per claim while the hub cannot take them.
pub const MAX_EVENTS_PER_CLAIM: i64 = 50_000;

/// The name of the database file inside the spool directory.
pub const DB_FILE: &str = "spool.db";

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

/// A spool error, with what was being done.
#[derive(Debug)]
pub struct SpoolError(pub String);

impl fmt::Display for SpoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpoolError {}

pub type Result<T> = std::result::Result<T, SpoolError>;

trait Context<T> {
    fn ctx(self, what: &str) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: &str) -> Result<T> {
        self.map_err(|e| SpoolError(format!("spool: {what}: {e}")))
    }
}

/// Where a claim is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClaimState {
    Claimed,
    Prepped,
    Started,
    Judged,
    Aborted,
    Reported,
    Discarded,
}

impl ClaimState {
    pub const ALL: [ClaimState; 7] = [
        ClaimState::Claimed,
        ClaimState::Prepped,
        ClaimState::Started,
        ClaimState::Judged,
        ClaimState::Aborted,
        ClaimState::Reported,
        ClaimState::Discarded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Claimed => "claimed",
            ClaimState::Prepped => "prepped",
            ClaimState::Started => "started",
            ClaimState::Judged => "judged",
            ClaimState::Aborted => "aborted",
            ClaimState::Reported => "reported",
            ClaimState::Discarded => "discarded",
        }
    }

    fn parse(s: &str) -> Result<ClaimState> {
        ClaimState::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| SpoolError(format!("spool: unknown claim state {s:?} (corrupt row?)")))
    }

    /// States in which the runner still holds the job at the hub: its lease
    /// must be kept, and it counts against capacity.
    pub fn holds_lease(self) -> bool {
        matches!(
            self,
            ClaimState::Claimed | ClaimState::Prepped | ClaimState::Started | ClaimState::Judged | ClaimState::Aborted
        )
    }
}

/// The SQL list of the states that hold a lease.
const HELD: &str = "('claimed','prepped','started','judged','aborted')";

/// One claim, as the spool keeps it (the hub's side of a claim is
/// `ojrunner-hub`'s `queue::Claim`).
#[derive(Clone, Debug)]
pub struct ClaimRow {
    pub id: i64,
    pub job_id: String,
    pub runner_id: String,
    pub state: ClaimState,
    /// The job, parsed from the payload the hub sent (stored as sent) when
    /// the row is read, so that no stage parses it on its own; a claim is
    /// only ever prepped with a payload that parsed.
    pub job: std::result::Result<Job, BadJob>,
    pub claimed_at: i64,
    pub testdata: Option<PathBuf>,
    pub note: String,
}

/// What the runner knows of itself at the hub (not the sandbox's
/// `Identity`, the uid and gid a program runs as).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerIdentity {
    pub runner_id: String,
    pub token: String,
    pub config: RunnerConfig,
}

/// An outcome waiting to be delivered.
#[derive(Clone, Debug)]
pub struct OutboxItem {
    pub claim_id: i64,
    pub job_id: String,
    pub runner_id: String,
    pub kind: OutcomeKind,
    pub body: String,
    pub created_at: i64,
    pub tries: i64,
}

/// One progress event waiting to be sent.
#[derive(Clone, Debug)]
pub struct EventRow {
    pub id: i64,
    pub claim_id: i64,
    pub body: String,
}

pub use ojrunner_daemon::clock::now_ms;

/// Which file a spool's database is: its device and inode. A spool whose
/// `spool.db` no longer is the file a stage opened was deleted or replaced
/// under it ([`Spool::gone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    fn of(m: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId { dev: m.dev(), ino: m.ino() }
    }

    /// As [`FileId`]'s `Display` writes it (`dev:ino`, runnerd's
    /// `OJ_SPOOL_ID` for its stages).
    pub fn parse(s: &str) -> Option<FileId> {
        let (dev, ino) = s.split_once(':')?;
        Some(FileId { dev: dev.parse().ok()?, ino: ino.parse().ok()? })
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.dev, self.ino)
    }
}

/// A connection to the spool of one runner.
///
/// A spool is made once, when the runner starts ([`Spool::create`]:
/// `runnerd`, or a stage started alone); every other connection opens the
/// database that exists ([`Spool::open`], [`Spool::open_as`]) and never
/// makes a new one: a new, empty spool under a running runner would forget
/// the jobs it holds while their leases are kept. Each connection knows
/// which file it opened, and every write first checks that `spool.db` is
/// still that file ([`Spool::gone`]: one `stat`).
pub struct Spool {
    conn: Connection,
    dir: PathBuf,
    /// The schema version of the database: [`SCHEMA_VERSION`], but for a
    /// spool of an older runner opened read-only (not migrated), whose
    /// newer tables read as empty.
    version: i64,
    /// The file this connection opened.
    id: FileId,
}

impl Spool {
    /// Makes the spool in `dir` if it is not there, and opens it, migrating
    /// its schema: only at a runner's start. The directory is 0711
    /// (sandboxed programs traverse it to reach their work directories,
    /// never list it) and the database 0600: it holds the runner's token.
    pub fn create(dir: &Path) -> Result<Spool> {
        std::fs::create_dir_all(dir).ctx(&format!("create {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
            .ctx(&format!("chmod {}", dir.display()))?;
        let db = dir.join(DB_FILE);
        let conn = Connection::open(&db).ctx(&format!("open {}", db.display()))?;
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600))
            .ctx(&format!("chmod {}", db.display()))?;
        Spool::ready(conn, dir, true)
    }

    /// Opens the spool that exists in `dir`, migrating an older schema;
    /// never makes one. A database missing, or empty (schema version 0),
    /// is an error.
    pub fn open(dir: &Path) -> Result<Spool> {
        let db = dir.join(DB_FILE);
        if !db.exists() {
            return Err(SpoolError(format!(
                "spool: no database at {} (only a runner's start makes one; it is not made again)",
                db.display()
            )));
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&db, flags).ctx(&format!("open {}", db.display()))?;
        Spool::ready(conn, dir, false)
    }

    /// [`Spool::open`], refusing a database that is not the file `id`: a
    /// stage's own threads, and the stages `runnerd` starts
    /// (`OJ_SPOOL_ID`), open the very spool the runner started with.
    pub fn open_as(dir: &Path, id: FileId) -> Result<Spool> {
        let s = Spool::open(dir)?;
        if s.id != id {
            return Err(SpoolError(format!(
                "spool: {} is not the database this runner started with (file {}, not {id}): it was replaced",
                dir.join(DB_FILE).display(),
                s.id
            )));
        }
        Ok(s)
    }

    fn ready(conn: Connection, dir: &Path, create: bool) -> Result<Spool> {
        let db = dir.join(DB_FILE);
        let id = FileId::of(&std::fs::metadata(&db).ctx(&format!("stat {}", db.display()))?);
        conn.busy_timeout(Duration::from_secs(30)).ctx("busy_timeout")?;
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)).ctx("journal_mode")?;
        // Rows here acknowledge the hub (a claim taken, a result owed): a
        // power cut must not forget them.
        conn.pragma_update(None, "synchronous", "FULL").ctx("synchronous")?;
        conn.pragma_update(None, "foreign_keys", "ON").ctx("foreign_keys")?;
        if !create {
            let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ctx("read schema version")?;
            if v < 1 {
                return Err(SpoolError(format!(
                    "spool: {} holds no spool (schema version {v}): only a runner's start makes one",
                    db.display()
                )));
            }
        }
        let mut s = Spool { conn, dir: dir.to_path_buf(), version: SCHEMA_VERSION, id };
        s.migrate()?;
        Ok(s)
    }

    /// The file this connection opened.
    pub fn file_id(&self) -> FileId {
        self.id
    }

    /// Why this spool is gone, if it is: its `spool.db` was deleted, or is
    /// another file now (replaced), under a running runner. One `stat`:
    /// cheap enough for every write and every loop of a stage. Nothing
    /// written now would be read by anyone; the stage stops (exit 100).
    pub fn gone(&self) -> Option<String> {
        let db = self.dir.join(DB_FILE);
        match std::fs::metadata(&db) {
            Ok(m) if FileId::of(&m) == self.id => None,
            Ok(m) => Some(format!(
                "spool {} was replaced while the runner ran (file {}, not {})",
                db.display(),
                FileId::of(&m),
                self.id
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Some(format!("spool {} was deleted while the runner ran", db.display()))
            }
            Err(_) => None,
        }
    }

    /// Opens the spool in `dir` to read it only: nothing is created or
    /// migrated (`runnerd status` runs beside a runner, or on a full disk).
    pub fn open_read_only(dir: &Path) -> Result<Spool> {
        let db = dir.join(DB_FILE);
        if !db.exists() {
            return Err(SpoolError(format!("spool: no database at {}", db.display())));
        }
        let conn = Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ctx(&format!("open {} read-only", db.display()))?;
        conn.busy_timeout(Duration::from_secs(10)).ctx("busy_timeout")?;
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ctx("read schema version")?;
        // An older runner's spool is read as it is (the tables it lacks are
        // empty); a newer one's is not this program's to read.
        if !(1..=SCHEMA_VERSION).contains(&v) {
            return Err(SpoolError(format!(
                "spool: {}: schema version {v}, not this program's {SCHEMA_VERSION}",
                db.display()
            )));
        }
        let id = FileId::of(&std::fs::metadata(&db).ctx(&format!("stat {}", db.display()))?);
        Ok(Spool { conn, dir: dir.to_path_buf(), version: v, id })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The work directory of a claim: its own, so two claims of one job
    /// never share a file.
    pub fn claim_dir(&self, claim_id: i64) -> PathBuf {
        self.dir.join("claims").join(claim_id.to_string())
    }

    fn migrate(&mut self) -> Result<()> {
        // The common case reads only: a stage starting on a full disk, or
        // beside a busy one, does not need to write.
        let v: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ctx("read schema version")?;
        if v == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).ctx("begin migration")?;
        let v: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).ctx("read schema version")?;
        if v > SCHEMA_VERSION {
            return Err(SpoolError(format!(
                "spool: schema version {v} is newer than this program's {SCHEMA_VERSION}: refusing to touch it"
            )));
        }
        if v < 1 {
            tx.execute_batch(
                "CREATE TABLE identity (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    runner_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    config TEXT NOT NULL,
                    registered_at INTEGER NOT NULL
                 );
                 CREATE TABLE control (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE claims (
                    claim_id INTEGER PRIMARY KEY AUTOINCREMENT,
                    job_id TEXT NOT NULL,
                    runner_id TEXT NOT NULL,
                    state TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    claimed_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    testdata TEXT,
                    note TEXT NOT NULL DEFAULT '',
                    events_lost INTEGER NOT NULL DEFAULT 0
                 );
                 CREATE INDEX claims_state ON claims(state);
                 CREATE INDEX claims_job ON claims(job_id);
                 CREATE TABLE case_results (
                    claim_id INTEGER NOT NULL REFERENCES claims(claim_id),
                    task INTEGER NOT NULL,
                    case_no INTEGER NOT NULL,
                    result TEXT NOT NULL,
                    PRIMARY KEY (claim_id, task, case_no)
                 );
                 CREATE TABLE outbox (
                    claim_id INTEGER PRIMARY KEY REFERENCES claims(claim_id),
                    kind TEXT NOT NULL,
                    body TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    next_try_at INTEGER NOT NULL,
                    tries INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT NOT NULL DEFAULT ''
                 );
                 CREATE TABLE dead_outcomes (
                    claim_id INTEGER PRIMARY KEY,
                    job_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    body TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    died_at INTEGER NOT NULL,
                    last_error TEXT NOT NULL
                 );
                 CREATE TABLE events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    claim_id INTEGER NOT NULL REFERENCES claims(claim_id),
                    body TEXT NOT NULL
                 );
                 CREATE INDEX events_claim ON events(claim_id, id);",
            )
            .ctx("create schema v1")?;
        }
        if v < 2 {
            tx.execute_batch(
                "CREATE TABLE phases (
                    claim_id INTEGER NOT NULL REFERENCES claims(claim_id),
                    phase TEXT NOT NULL,
                    item TEXT NOT NULL DEFAULT '',
                    label TEXT NOT NULL DEFAULT '',
                    ended_at INTEGER NOT NULL,
                    took_us INTEGER NOT NULL,
                    PRIMARY KEY (claim_id, phase, item)
                 );
                 CREATE INDEX phases_recent ON phases(phase, label, ended_at);
                 CREATE TABLE counters (
                    name TEXT NOT NULL,
                    labels TEXT NOT NULL DEFAULT '',
                    value INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (name, labels)
                 );",
            )
            .ctx("migrate schema to v2")?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION).ctx("write schema version")?;
        tx.commit().ctx("commit migration")
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction: the write lock is taken
    /// up front, so a read-then-write never fails half way with BUSY.
    fn write<T>(&mut self, what: &str, f: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<T>) -> Result<T> {
        if let Some(why) = self.gone() {
            return Err(SpoolError(format!("spool: {what}: {why}")));
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).ctx(what)?;
        let v = f(&tx).ctx(what)?;
        tx.commit().ctx(what)?;
        Ok(v)
    }

    // ---- identity ----------------------------------------------------------

    pub fn identity(&self) -> Result<Option<RunnerIdentity>> {
        let row: Option<(String, String, String)> = self
            .conn
            .query_row("SELECT runner_id, token, config FROM identity WHERE id = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()
            .ctx("read identity")?;
        match row {
            None => Ok(None),
            Some((runner_id, token, config)) => {
                let config = serde_json::from_str(&config).ctx("identity config (corrupt row)")?;
                Ok(Some(RunnerIdentity { runner_id, token, config }))
            }
        }
    }

    /// Records a fresh registration. Claims held under another identity can
    /// no longer be reported (the hub would refuse them): they are discarded.
    pub fn set_identity(&mut self, reg: &Registration) -> Result<Vec<i64>> {
        let config = serde_json::to_string(&reg.config).unwrap();
        self.write("record identity", |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO identity (id, runner_id, token, config, registered_at) VALUES (1, ?, ?, ?, ?)",
                params![reg.runner_id, reg.token, config, now_ms()],
            )?;
            let gone: Vec<i64> = tx
                .prepare(&format!("SELECT claim_id FROM claims WHERE state IN {HELD} AND runner_id != ?"))?
                .query_map([&reg.runner_id], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for id in &gone {
                discard_in(tx, *id, "held under a previous identity", "identity")?;
            }
            Ok(gone)
        })
    }

    /// Forgets the identity (the hub no longer knows it): the next `claimd`
    /// registers again.
    pub fn forget_identity(&mut self, runner_id: &str) -> Result<()> {
        self.write("forget identity", |tx| tx.execute("DELETE FROM identity WHERE runner_id = ?", [runner_id]))?;
        Ok(())
    }

    // ---- control values (the drain latch, heartbeat times) ------------------

    pub fn control(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM control WHERE key = ?", [key], |r| r.get(0))
            .optional()
            .ctx(&format!("read control {key}"))
    }

    pub fn set_control(&mut self, key: &str, value: Option<&str>) -> Result<()> {
        self.write(&format!("write control {key}"), |tx| match value {
            Some(v) => tx.execute("INSERT OR REPLACE INTO control (key, value) VALUES (?, ?)", [key, v]),
            None => tx.execute("DELETE FROM control WHERE key = ?", [key]),
        })?;
        Ok(())
    }

    /// Whether a drain has begun: from then on no claim starts judging.
    pub fn draining(&self) -> Result<bool> {
        Ok(self.control("draining")?.is_some())
    }

    /// Sets the drain latch (the drain's first act) or lifts it (a new run
    /// of the runner). Lifting a latch that is not set writes nothing.
    pub fn set_draining(&mut self, on: bool) -> Result<()> {
        if !on && !self.draining()? {
            return Ok(());
        }
        let stamp = now_ms().to_string();
        self.set_control("draining", on.then_some(stamp.as_str()))
    }

    // ---- the beat stamp ------------------------------------------------------

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
            Err(e) => return Err(SpoolError(format!("spool: read the beat stamp {}: {e}", path.display()))),
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
        let full = |why: String| SpoolError(format!("spool: the disk of {} is full: {why}", self.dir.display()));
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

    // ---- claims ------------------------------------------------------------

    /// Records a claim the hub just handed out. Any older claim of the same
    /// job still held here is superseded in the same transaction: the hub
    /// handed the job again, so the old claim's work must never be reported.
    /// Returns the new claim id and the ids superseded.
    pub fn insert_claim(&mut self, runner_id: &str, job_id: &str, payload: &str) -> Result<(i64, Vec<i64>)> {
        self.write("record claim", |tx| {
            let old: Vec<i64> = tx
                .prepare(&format!("SELECT claim_id FROM claims WHERE job_id = ? AND state IN {HELD}"))?
                .query_map([job_id], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for id in &old {
                discard_in(tx, *id, "superseded: the hub handed the job again", "superseded")?;
            }
            let now = now_ms();
            tx.execute(
                "INSERT INTO claims (job_id, runner_id, state, payload, claimed_at, updated_at) VALUES (?, ?, 'claimed', ?, ?, ?)",
                params![job_id, runner_id, payload, now, now],
            )?;
            let id = tx.last_insert_rowid();
            bump_in(tx, Counter::JobsClaimed, "", 1)?;
            Ok((id, old))
        })
    }

    pub fn claim(&self, claim_id: i64) -> Result<Option<ClaimRow>> {
        self.conn
            .query_row(&format!("{CLAIM_SELECT} WHERE claim_id = ?"), [claim_id], claim_row)
            .optional()
            .ctx("read claim")?
            .transpose()
    }

    /// Claims in `states`, oldest first.
    pub fn claims_in(&self, states: &[ClaimState]) -> Result<Vec<ClaimRow>> {
        let list = states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(",");
        let mut st = self
            .conn
            .prepare(&format!("{CLAIM_SELECT} WHERE state IN ({list}) ORDER BY claim_id"))
            .ctx("list claims")?;
        let rows = st.query_map([], claim_row).ctx("list claims")?;
        rows.map(|r| r.ctx("read claim row")?).collect()
    }

    /// How many claims hold a lease: what capacity counts.
    pub fn held_count(&self) -> Result<i64> {
        self.conn
            .query_row(&format!("SELECT count(*) FROM claims WHERE state IN {HELD}"), [], |r| r.get(0))
            .ctx("count held claims")
    }

    /// The jobs whose leases the runner keeps, each once however many claims
    /// it has.
    pub fn held_jobs(&self) -> Result<Vec<String>> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT DISTINCT job_id FROM claims WHERE state IN {HELD} ORDER BY job_id"))
            .ctx("list held jobs")?;
        let rows = st.query_map([], |r| r.get(0)).ctx("list held jobs")?;
        rows.collect::<rusqlite::Result<_>>().ctx("list held jobs")
    }

    /// Counts of claims by state.
    pub fn counts(&self) -> Result<BTreeMap<String, i64>> {
        let mut st = self.conn.prepare("SELECT state, count(*) FROM claims GROUP BY state").ctx("count claims")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).ctx("count claims")?;
        rows.collect::<rusqlite::Result<_>>().ctx("count claims")
    }

    /// claimed -> prepped, with where its testdata is and how long its
    /// prep's phases took. False if the claim moved meanwhile (aborted by a
    /// drain, superseded).
    pub fn mark_prepped(&mut self, claim_id: i64, testdata: &Path, timings: &[Timing]) -> Result<bool> {
        let td = testdata.to_string_lossy().into_owned();
        self.write("mark prepped", |tx| {
            let now = now_ms();
            if tx.execute(
                "UPDATE claims SET state = 'prepped', testdata = ?, updated_at = ? WHERE claim_id = ? AND state = 'claimed'",
                params![td, now, claim_id],
            )? != 1
            {
                return Ok(false);
            }
            for t in timings {
                time_in(tx, claim_id, now, t)?;
            }
            Ok(true)
        })
    }

    /// Hands a claim that has not started back to the hub: claimed or
    /// prepped -> aborted, with its `abort` queued in the same transaction.
    pub fn abort(&mut self, claim_id: i64, reason: AbortReason, note: &str) -> Result<bool> {
        self.write("abort claim", |tx| abort_in(tx, claim_id, reason, note))
    }

    /// The drain's scan: every claim not started goes back as
    /// `abort(drain)`. Returns the claims aborted.
    pub fn abort_unstarted(&mut self) -> Result<Vec<i64>> {
        self.write("abort unstarted claims", |tx| {
            let ids: Vec<i64> = tx
                .prepare("SELECT claim_id FROM claims WHERE state IN ('claimed','prepped') ORDER BY claim_id")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for id in &ids {
                abort_in(tx, *id, AbortReason::Drain, "drain: not started")?;
            }
            Ok(ids)
        })
    }

    /// prepped -> started, unless a drain has begun: the latch is read in
    /// the same transaction, so nothing starts after the drain's first act.
    pub fn start(&mut self, claim_id: i64) -> Result<bool> {
        self.write("start claim", |tx| {
            let draining: bool =
                tx.query_row("SELECT count(*) FROM control WHERE key = 'draining'", [], |r| r.get::<_, i64>(0))? > 0;
            if draining {
                return Ok(false);
            }
            // The wait for a worker ends now.
            advance(tx, claim_id, "prepped", "started", now_ms(), Phase::Queued)
        })
    }

    /// Stores one finished case (its progress event, the timings that end
    /// with it, its verdict counted), if the claim is still being judged.
    /// False means the claim moved (superseded): drop the work.
    pub fn record_case(
        &mut self,
        claim_id: i64,
        task: usize,
        case: usize,
        r: &CaseResult,
        event: &str,
        timings: &[Timing],
    ) -> Result<bool> {
        let result = serde_json::to_string(r).unwrap();
        let verdict = counter::labels(&[("verdict", r.status.as_str())]);
        self.write("record case", |tx| {
            if !is_in(tx, claim_id, "started")? {
                return Ok(false);
            }
            let fresh = tx.execute(
                "INSERT OR IGNORE INTO case_results (claim_id, task, case_no, result) VALUES (?, ?, ?, ?)",
                params![claim_id, task as i64, case as i64, result],
            )? == 1;
            if !fresh {
                // Judged again: the new result replaces the old; its verdict was counted once.
                tx.execute(
                    "UPDATE case_results SET result = ? WHERE claim_id = ? AND task = ? AND case_no = ?",
                    params![result, claim_id, task as i64, case as i64],
                )?;
            } else {
                bump_in(tx, Counter::CaseVerdicts, &verdict, 1)?;
            }
            let now = now_ms();
            for t in timings {
                time_in(tx, claim_id, now, t)?;
            }
            push_event(tx, claim_id, event)?;
            Ok(true)
        })
    }

    /// The cases of a claim judged so far: a restarted judge runs only the
    /// others.
    pub fn case_results(&self, claim_id: i64) -> Result<BTreeMap<(usize, usize), CaseResult>> {
        let mut st = self
            .conn
            .prepare("SELECT task, case_no, result FROM case_results WHERE claim_id = ?")
            .ctx("read case results")?;
        let rows = st
            .query_map([claim_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?)))
            .ctx("read case results")?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (t, c, body) = row.ctx("read case result")?;
            match serde_json::from_str(&body) {
                Ok(r) => {
                    out.insert((t as usize, c as usize), r);
                }
                // A corrupt row costs that case a rerun, not the job.
                Err(e) => {
                    log::warn!("claim {claim_id}: case {t:02}{c:02}: unreadable stored result ({e}); judging it again")
                }
            }
        }
        Ok(out)
    }

    /// started -> judged, queueing the `complete` in the same transaction.
    pub fn mark_judged(&mut self, claim_id: i64, outcome: &Outcome) -> Result<bool> {
        let body = outcome::complete_body(outcome);
        self.write("mark judged", |tx| {
            let now = now_ms();
            if !advance(tx, claim_id, "started", "judged", now, Phase::Judge)? {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO outbox (claim_id, kind, body, created_at, next_try_at) VALUES (?, ?, ?, ?, ?)",
                params![claim_id, OutcomeKind::Complete.row(), body, now, now],
            )?;
            bump_in(tx, Counter::JobsJudged, "", 1)?;
            Ok(true)
        })
    }

    // ---- the outbox ----------------------------------------------------------

    /// Outcomes due for a (re)try, oldest first.
    pub fn outbox_due(&self, now: i64) -> Result<Vec<OutboxItem>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT o.claim_id, c.job_id, c.runner_id, o.kind, o.body, o.created_at, o.tries
                 FROM outbox o JOIN claims c USING (claim_id)
                 WHERE o.next_try_at <= ? ORDER BY o.next_try_at, o.claim_id",
            )
            .ctx("read outbox")?;
        let rows = st
            .query_map([now], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })
            .ctx("read outbox")?;
        let mut out = Vec::new();
        for row in rows {
            let (claim_id, job_id, runner_id, kind, body, created_at, tries) = row.ctx("read outbox row")?;
            let Some(kind) = OutcomeKind::from_row(&kind) else {
                log::error!("claim {claim_id}: outbox row of unknown kind {kind:?} (corrupt row); skipped");
                continue;
            };
            out.push(OutboxItem { claim_id, job_id, runner_id, kind, body, created_at, tries });
        }
        Ok(out)
    }

    /// How many outcomes wait, and when the next one is due.
    pub fn outbox_len(&self) -> Result<(i64, Option<i64>)> {
        self.conn
            .query_row("SELECT count(*), min(next_try_at) FROM outbox", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .ctx("count outbox")
    }

    /// The hub answered finally: the outcome leaves the spool and the claim
    /// is reported (counted, and its report and whole time recorded).
    pub fn outbox_settle(&mut self, claim_id: i64, note: &str) -> Result<()> {
        self.write("settle outcome", |tx| {
            let owed: Option<(String, i64, i64)> = tx
                .query_row(
                    "SELECT o.kind, o.created_at, c.claimed_at FROM outbox o JOIN claims c USING (claim_id) WHERE claim_id = ?",
                    [claim_id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            tx.execute("DELETE FROM outbox WHERE claim_id = ?", [claim_id])?;
            tx.execute("DELETE FROM events WHERE claim_id = ?", [claim_id])?;
            let now = now_ms();
            let moved = tx.execute(
                &format!("UPDATE claims SET state = 'reported', note = ?, updated_at = ? WHERE claim_id = ? AND state IN {HELD}"),
                params![note, now, claim_id],
            )?;
            if let (1, Some((kind, owed_at, claimed_at))) = (moved, owed) {
                let outcome = OutcomeKind::from_row(&kind).map_or("abort", OutcomeKind::verb);
                bump_in(tx, Counter::JobsReported, &counter::labels(&[("outcome", outcome)]), 1)?;
                time_in(tx, claim_id, now, &Timing::labelled(Phase::Report, outcome, (now - owed_at) * 1000))?;
                time_in(tx, claim_id, now, &Timing::labelled(Phase::Total, outcome, (now - claimed_at) * 1000))?;
            }
            Ok(())
        })
    }

    /// The hub refused a `complete` (400): the claim goes back as
    /// `abort(rejected)` instead, in one transaction.
    pub fn outbox_reject(&mut self, claim_id: i64, note: &str) -> Result<()> {
        let body = outcome::abort_body(AbortReason::Rejected);
        let kind = OutcomeKind::Abort(AbortReason::Rejected).row();
        self.write("reject outcome", |tx| {
            let now = now_ms();
            tx.execute(
                "UPDATE outbox SET kind = ?, body = ?, next_try_at = ?, tries = 0, last_error = ? WHERE claim_id = ?",
                params![kind, body, now, note, claim_id],
            )?;
            let judged = is_in(tx, claim_id, "judged")?;
            tx.execute(
                "UPDATE claims SET state = 'aborted', note = ?, updated_at = ? WHERE claim_id = ?",
                params![note, now, claim_id],
            )?;
            if judged {
                bump_in(tx, Counter::JobsAborted, &counter::labels(&[("reason", AbortReason::Rejected.as_str())]), 1)?;
            }
            Ok(())
        })
    }

    /// Not delivered this time: try again at `next_try_at`.
    pub fn outbox_later(&mut self, claim_id: i64, next_try_at: i64, error: &str) -> Result<()> {
        self.write("postpone outcome", |tx| {
            tx.execute(
                "UPDATE outbox SET next_try_at = ?, tries = tries + 1, last_error = ? WHERE claim_id = ?",
                params![next_try_at, error, claim_id],
            )
        })?;
        Ok(())
    }

    /// Undeliverable for too long: moved aside (kept for an operator), and
    /// the claim ends.
    pub fn outbox_bury(&mut self, claim_id: i64, error: &str) -> Result<()> {
        self.write("bury outcome", |tx| {
            let now = now_ms();
            tx.execute(
                "INSERT OR REPLACE INTO dead_outcomes (claim_id, job_id, kind, body, created_at, died_at, last_error)
                 SELECT o.claim_id, c.job_id, o.kind, o.body, o.created_at, ?, ? FROM outbox o JOIN claims c USING (claim_id)
                 WHERE o.claim_id = ?",
                params![now, error, claim_id],
            )?;
            tx.execute("DELETE FROM outbox WHERE claim_id = ?", [claim_id])?;
            discard_in(tx, claim_id, &format!("outcome undeliverable: {error}"), "undeliverable")?;
            Ok(())
        })
    }

    pub fn dead_count(&self) -> Result<i64> {
        self.conn.query_row("SELECT count(*) FROM dead_outcomes", [], |r| r.get(0)).ctx("count dead outcomes")
    }

    // ---- metrics -------------------------------------------------------------

    /// Adds `by` to a counter for an event the spool records nothing else
    /// for (a hub's error, a lost sandbox run). `labels` as
    /// [`counter::labels`] writes them.
    pub fn bump(&mut self, counter: Counter, labels: &str, by: i64) -> Result<()> {
        self.write(&format!("count {}", counter.name()), |tx| bump_in(tx, counter, labels, by))
    }

    /// Every counter: name, labels, value (none in a spool older than them).
    pub fn counters(&self) -> Result<Vec<(String, String, i64)>> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let mut st =
            self.conn.prepare("SELECT name, labels, value FROM counters ORDER BY name, labels").ctx("read counters")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).ctx("read counters")?;
        rows.collect::<rusqlite::Result<_>>().ctx("read counters")
    }

    /// The most recent `limit` timings of `phase` with `label` (µs), newest
    /// first.
    pub fn recent_timings(&self, phase: Phase, label: &str, limit: usize) -> Result<Vec<i64>> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT took_us FROM phases WHERE phase = ? AND label = ? ORDER BY ended_at DESC LIMIT ?")
            .ctx("read timings")?;
        let rows = st.query_map(params![phase.as_str(), label, limit as i64], |r| r.get(0)).ctx("read timings")?;
        rows.collect::<rusqlite::Result<_>>().ctx("read timings")
    }

    /// When the oldest outcome still owed was written (ms), if one is.
    pub fn outbox_oldest(&self) -> Result<Option<i64>> {
        self.conn.query_row("SELECT min(created_at) FROM outbox", [], |r| r.get(0)).ctx("read the outbox's oldest")
    }

    // ---- events ------------------------------------------------------------

    /// Queues a progress event for a claim still held.
    pub fn add_event(&mut self, claim_id: i64, body: &str) -> Result<()> {
        self.add_events(claim_id, &[body])
    }

    /// Queues several progress events in one transaction.
    pub fn add_events(&mut self, claim_id: i64, bodies: &[&str]) -> Result<()> {
        self.write("queue events", |tx| bodies.iter().try_for_each(|b| push_event(tx, claim_id, b)))
    }

    /// Claims with events waiting.
    pub fn event_claims(&self) -> Result<Vec<(i64, String, String)>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT DISTINCT e.claim_id, c.job_id, c.runner_id FROM events e JOIN claims c USING (claim_id) ORDER BY e.claim_id",
            )
            .ctx("list event claims")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).ctx("list event claims")?;
        rows.collect::<rusqlite::Result<_>>().ctx("list event claims")
    }

    /// The next batch of a claim's events (oldest first) and how many were
    /// dropped for lack of room since the last batch went.
    pub fn events(&self, claim_id: i64, limit: usize) -> Result<(Vec<EventRow>, i64)> {
        let mut st = self
            .conn
            .prepare("SELECT id, claim_id, body FROM events WHERE claim_id = ? ORDER BY id LIMIT ?")
            .ctx("read events")?;
        let rows = st
            .query_map(params![claim_id, limit as i64], |r| {
                Ok(EventRow { id: r.get(0)?, claim_id: r.get(1)?, body: r.get(2)? })
            })
            .ctx("read events")?;
        let rows = rows.collect::<rusqlite::Result<Vec<_>>>().ctx("read events")?;
        let lost: i64 = self
            .conn
            .query_row("SELECT events_lost FROM claims WHERE claim_id = ?", [claim_id], |r| r.get(0))
            .optional()
            .ctx("read events lost")?
            .unwrap_or(0);
        Ok((rows, lost))
    }

    /// The hub took events up to `last_id` (and the lost-count line).
    pub fn events_sent(&mut self, claim_id: i64, last_id: i64) -> Result<()> {
        self.write("delete sent events", |tx| {
            tx.execute("DELETE FROM events WHERE claim_id = ? AND id <= ?", params![claim_id, last_id])?;
            tx.execute("UPDATE claims SET events_lost = 0 WHERE claim_id = ?", [claim_id])?;
            Ok(())
        })
    }

    /// The hub has no events channel for this job: drop its events.
    pub fn events_drop(&mut self, claim_id: i64) -> Result<()> {
        self.write("drop events", |tx| tx.execute("DELETE FROM events WHERE claim_id = ?", [claim_id]))?;
        Ok(())
    }

    /// Forgets claims that ended (reported, discarded) before `before_ms`,
    /// with their case results: the spool keeps what is owed, not history.
    pub fn prune_ended(&mut self, before_ms: i64) -> Result<usize> {
        self.write("prune ended claims", |tx| {
            let ended = "SELECT claim_id FROM claims WHERE state IN ('reported','discarded') AND updated_at < ?1";
            tx.execute(&format!("DELETE FROM case_results WHERE claim_id IN ({ended})"), [before_ms])?;
            tx.execute(&format!("DELETE FROM events WHERE claim_id IN ({ended})"), [before_ms])?;
            tx.execute(&format!("DELETE FROM phases WHERE claim_id IN ({ended})"), [before_ms])?;
            tx.execute("DELETE FROM claims WHERE state IN ('reported','discarded') AND updated_at < ?1", [before_ms])
        })
    }

    /// Discards the claims whose lease ran out while no heartbeat was even
    /// attempted for them (the runner was down: [`crate::lease::is_lost`]): the hub has reclaimed them,
    /// and their results would be stale. Every stage that acts on claims
    /// calls this first, so none sends or judges a claim the runner lost.
    /// Returns the claims discarded.
    pub fn drop_lost_claims(&mut self) -> Result<Vec<ClaimRow>> {
        let Some(id) = self.identity()? else { return Ok(Vec::new()) };
        let lease = crate::lease::assumed(id.config.heartbeat_interval_sec);
        let last_beat = self.last_beat()?;
        let now = now_ms();
        let held: Vec<ClaimRow> =
            self.claims_in(&ClaimState::ALL.into_iter().filter(|s| s.holds_lease()).collect::<Vec<_>>())?;
        let lost: Vec<ClaimRow> = held
            .into_iter()
            .filter(|c| c.runner_id == id.runner_id && crate::lease::is_lost(c.claimed_at, last_beat, lease, now))
            .collect();
        if lost.is_empty() {
            return Ok(lost);
        }
        self.write("drop lost claims", |tx| {
            let mut gone = Vec::new();
            for c in lost {
                let why = format!("lease lost: no heartbeat for {} s", (now - c.claimed_at.max(last_beat)) / 1000);
                if discard_in(tx, c.id, &why, "lease_lost")? {
                    gone.push(ClaimRow { note: why, ..c });
                }
            }
            Ok(gone)
        })
    }

    /// Discards, and logs, the claims whose lease the runner lost while it
    /// was down ([`Spool::drop_lost_claims`]), with their work directories.
    pub fn drop_lost(&mut self) {
        match self.drop_lost_claims() {
            Ok(lost) => {
                for c in lost {
                    log::warn!(
                        "job {} claim {}: {}; dropped without reporting (the hub has reclaimed it)",
                        c.job_id,
                        c.id,
                        c.note
                    );
                    let _ = std::fs::remove_dir_all(self.claim_dir(c.id));
                }
            }
            Err(e) => log::error!("{e}"),
        }
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

const CLAIM_SELECT: &str = "SELECT claim_id, job_id, runner_id, state, payload, claimed_at, testdata, note FROM claims";

fn claim_row(r: &rusqlite::Row) -> rusqlite::Result<Result<ClaimRow>> {
    let state: String = r.get(3)?;
    let testdata: Option<String> = r.get(6)?;
    Ok(ClaimState::parse(&state).map(|state| ClaimRow {
        id: r.get(0).unwrap_or_default(),
        job_id: r.get(1).unwrap_or_default(),
        runner_id: r.get(2).unwrap_or_default(),
        state,
        job: Job::parse(&r.get::<_, String>(4).unwrap_or_default()),
        claimed_at: r.get(5).unwrap_or_default(),
        testdata: testdata.map(PathBuf::from),
        note: r.get(7).unwrap_or_default(),
    }))
}

fn is_in(tx: &rusqlite::Transaction, claim_id: i64, state: &str) -> rusqlite::Result<bool> {
    let s: Option<String> =
        tx.query_row("SELECT state FROM claims WHERE claim_id = ?", [claim_id], |r| r.get(0)).optional()?;
    Ok(s.as_deref() == Some(state))
}

fn abort_in(tx: &rusqlite::Transaction, claim_id: i64, reason: AbortReason, note: &str) -> rusqlite::Result<bool> {
    let now = now_ms();
    if tx.execute(
        "UPDATE claims SET state = 'aborted', note = ?, updated_at = ? WHERE claim_id = ? AND state IN ('claimed','prepped')",
        params![note, now, claim_id],
    )? != 1
    {
        return Ok(false);
    }
    tx.execute(
        "INSERT OR REPLACE INTO outbox (claim_id, kind, body, created_at, next_try_at) VALUES (?, ?, ?, ?, ?)",
        params![claim_id, OutcomeKind::Abort(reason).row(), outcome::abort_body(reason), now, now],
    )?;
    bump_in(tx, Counter::JobsAborted, &counter::labels(&[("reason", reason.as_str())]), 1)?;
    Ok(true)
}

/// Ends a claim unreported; counted under `reason` if it was held.
fn discard_in(tx: &rusqlite::Transaction, claim_id: i64, why: &str, reason: &str) -> rusqlite::Result<bool> {
    let n = tx.execute(
        &format!(
            "UPDATE claims SET state = 'discarded', note = ?, updated_at = ? WHERE claim_id = ? AND state IN {HELD}"
        ),
        params![why, now_ms(), claim_id],
    )?;
    tx.execute("DELETE FROM outbox WHERE claim_id = ?", [claim_id])?;
    tx.execute("DELETE FROM events WHERE claim_id = ?", [claim_id])?;
    if n == 1 {
        bump_in(tx, Counter::JobsDiscarded, &counter::labels(&[("reason", reason)]), 1)?;
    }
    Ok(n == 1)
}

/// When a claim last moved (`updated_at`), if it is there.
/// Moves a claim `from` -> `to` at `now`, timing `phase` from when it last
/// moved; false (nothing done) if it is not in `from`.
fn advance(
    tx: &rusqlite::Transaction,
    claim_id: i64,
    from: &str,
    to: &str,
    now: i64,
    phase: Phase,
) -> rusqlite::Result<bool> {
    let since = tx
        .query_row("SELECT updated_at FROM claims WHERE claim_id = ? AND state = ?", params![claim_id, from], |r| {
            r.get::<_, i64>(0)
        })
        .optional()?;
    let Some(since) = since else { return Ok(false) };
    tx.execute("UPDATE claims SET state = ?, updated_at = ? WHERE claim_id = ?", params![to, now, claim_id])?;
    time_in(tx, claim_id, now, &Timing::new(phase, (now - since) * 1000))?;
    Ok(true)
}

/// Adds `by` to a counter (`labels` as [`counter::labels`] writes them).
fn bump_in(tx: &rusqlite::Transaction, counter: Counter, labels: &str, by: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO counters (name, labels, value) VALUES (?, ?, ?)
         ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value",
        params![counter.name(), labels, by],
    )?;
    Ok(())
}

/// Records one timing of a claim's phase, ended at `now` (ms), and counts
/// it in its histogram: once, however often a restarted stage records it.
fn time_in(tx: &rusqlite::Transaction, claim_id: i64, now: i64, t: &Timing) -> rusqlite::Result<()> {
    let fresh = tx.execute(
        "INSERT OR IGNORE INTO phases (claim_id, phase, item, label, ended_at, took_us) VALUES (?, ?, ?, ?, ?, ?)",
        params![claim_id, t.phase.as_str(), t.item, t.label, now, t.took_us],
    )? == 1;
    if fresh {
        let series = counter::phase_series(t.phase, t.label);
        let bucket = format!("{series},le=\"{}\"", phase::le(phase::bucket_of(t.took_us)));
        bump_in(tx, Counter::PhaseBucket, &bucket, 1)?;
        bump_in(tx, Counter::PhaseSumMicros, &series, t.took_us)?;
    }
    Ok(())
}

fn push_event(tx: &rusqlite::Transaction, claim_id: i64, body: &str) -> rusqlite::Result<()> {
    tx.execute("INSERT INTO events (claim_id, body) VALUES (?, ?)", params![claim_id, body])?;
    // Cheap test first: the count is only taken once the rowid says it may be over.
    let first: i64 = tx
        .query_row("SELECT min(id) FROM events WHERE claim_id = ?", [claim_id], |r| r.get::<_, Option<i64>>(0))?
        .unwrap_or(0);
    if tx.last_insert_rowid() - first < MAX_EVENTS_PER_CLAIM {
        return Ok(());
    }
    let n: i64 = tx.query_row("SELECT count(*) FROM events WHERE claim_id = ?", [claim_id], |r| r.get(0))?;
    if n > MAX_EVENTS_PER_CLAIM {
        // The oldest go first; a line in the next batch says how many.
        let over = n - MAX_EVENTS_PER_CLAIM;
        tx.execute(
            "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE claim_id = ? ORDER BY id LIMIT ?)",
            params![claim_id, over],
        )?;
        tx.execute("UPDATE claims SET events_lost = events_lost + ? WHERE claim_id = ?", params![over, claim_id])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Verdict;

    fn tmp(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("ojspool-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        p
    }

    const PAYLOAD: &str = r#"{"job_id":"jb_1","submission_id":"s","problem_id":1,"language":0,"code_url":"http://x/c.zip",
        "tasks":[{"taskScore":100,"memoryLimit":65536,"timeLimit":1000,"caseCount":1}]}"#;

    fn ok() -> CaseResult {
        CaseResult {
            status: Verdict::AC,
            exec_time: 1,
            memory_usage: 1,
            exit_code: 0,
            stdout: String::new(),
            stderr: String::new(),
        }
    }

    #[test]
    fn a_claim_walks_its_states_and_its_outcome_is_written_once() {
        let d = tmp("walk");
        let mut s = Spool::create(&d).unwrap();
        let (id, old) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        assert!(old.is_empty());
        assert_eq!(s.held_count().unwrap(), 1);
        assert!(!s.start(id).unwrap(), "a claim not prepped does not start");
        assert!(s.mark_prepped(id, Path::new("/td"), &[]).unwrap());
        assert!(s.start(id).unwrap());
        assert!(!s.start(id).unwrap(), "started once");
        assert!(s.record_case(id, 0, 0, &ok(), "{}", &[]).unwrap());
        let outcome = Outcome { tasks: vec![vec![ok()]] };
        assert!(s.mark_judged(id, &outcome).unwrap());
        assert!(!s.mark_judged(id, &outcome).unwrap(), "finished once");
        let due = s.outbox_due(now_ms()).unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].kind, OutcomeKind::Complete);
        s.outbox_settle(id, "204").unwrap();
        assert_eq!(s.claim(id).unwrap().unwrap().state, ClaimState::Reported);
        assert_eq!(s.outbox_len().unwrap().0, 0);
        assert_eq!(s.held_count().unwrap(), 0);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_claim_row_carries_its_job_parsed_or_why_it_cannot_be() {
        let d = tmp("parsed");
        let mut s = Spool::create(&d).unwrap();
        let (good, _) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        let (bad, _) = s.insert_claim("rn_1", "jb_2", r#"{"job_id":"jb_2","tasks":[]}"#).unwrap();
        let row = s.claim(good).unwrap().unwrap();
        let job = row.job.as_ref().expect("the payload parses");
        assert_eq!((job.job_id.as_str(), job.problem_id, job.tasks.len()), ("jb_1", 1, 1));
        // Kept as the hub sent it, refused as a job: prep ends it as prep_failed.
        assert!(s.claim(bad).unwrap().unwrap().job.is_err());
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn the_latch_stops_starts_and_the_scan_aborts_unstarted_claims_as_drain() {
        let d = tmp("latch");
        let mut s = Spool::create(&d).unwrap();
        let (a, _) = s.insert_claim("rn_1", "jb_a", PAYLOAD).unwrap();
        let (b, _) = s.insert_claim("rn_1", "jb_b", PAYLOAD).unwrap();
        let (c, _) = s.insert_claim("rn_1", "jb_c", PAYLOAD).unwrap();
        s.mark_prepped(b, Path::new("/td"), &[]).unwrap();
        s.mark_prepped(c, Path::new("/td"), &[]).unwrap();
        assert!(s.start(c).unwrap());
        s.set_draining(true).unwrap();
        assert!(!s.start(b).unwrap(), "nothing starts once the latch is set");
        assert_eq!(s.abort_unstarted().unwrap(), vec![a, b]);
        assert!(!s.mark_prepped(a, Path::new("/td"), &[]).unwrap(), "a prep finishing late changes nothing");
        let kinds: Vec<_> = s.outbox_due(now_ms()).unwrap().into_iter().map(|o| (o.claim_id, o.kind)).collect();
        assert_eq!(
            kinds,
            vec![(a, OutcomeKind::Abort(AbortReason::Drain)), (b, OutcomeKind::Abort(AbortReason::Drain))]
        );
        assert_eq!(s.claim(c).unwrap().unwrap().state, ClaimState::Started, "in flight goes on");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_job_claimed_again_supersedes_the_old_claim_and_its_late_work() {
        let d = tmp("gen");
        let mut s = Spool::create(&d).unwrap();
        let (g1, _) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        s.mark_prepped(g1, Path::new("/td"), &[]).unwrap();
        s.start(g1).unwrap();
        let (g2, old) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        assert_eq!(old, vec![g1]);
        assert_ne!(s.claim_dir(g1), s.claim_dir(g2));
        assert!(!s.record_case(g1, 0, 0, &ok(), "{}", &[]).unwrap(), "the old claim's late case is dropped");
        assert!(!s.mark_judged(g1, &Outcome { tasks: vec![vec![ok()]] }).unwrap(), "and its late outcome");
        assert_eq!(s.held_jobs().unwrap(), vec!["jb_1".to_string()], "the job is held once");
        assert_eq!(s.held_count().unwrap(), 1, "capacity counts claims");
        assert!(s.outbox_due(now_ms()).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn events_are_bounded_per_claim_and_count_what_was_lost() {
        let d = tmp("events");
        let mut s = Spool::create(&d).unwrap();
        let (id, _) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        let (other, _) = s.insert_claim("rn_1", "jb_2", PAYLOAD).unwrap();
        s.add_event(other, "{\"other\":true}").unwrap();
        let bodies: Vec<String> = (0..MAX_EVENTS_PER_CLAIM + 10).map(|i| format!("{{\"i\":{i}}}")).collect();
        s.add_events(id, &bodies.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        let (rows, lost) = s.events(id, 200).unwrap();
        assert_eq!((rows.len(), lost), (200, 10), "a batch of 200; ten lost, the oldest");
        assert_eq!(rows[0].body, "{\"i\":10}");
        s.events_sent(id, rows[199].id).unwrap();
        let (rows, lost) = s.events(id, 200).unwrap();
        assert_eq!((rows[0].body.as_str(), lost), ("{\"i\":210}", 0), "the lost count went with the batch");
        assert_eq!(s.events(other, 200).unwrap().0.len(), 1, "another claim's events are untouched");
        let _ = std::fs::remove_dir_all(d);
    }

    fn counter(s: &Spool, name: &str, labels: &str) -> i64 {
        s.counters().unwrap().into_iter().find(|(n, l, _)| n == name && l == labels).map_or(0, |r| r.2)
    }

    #[test]
    fn a_claims_life_is_counted_and_timed_once_and_pruning_never_takes_a_count_back() {
        let d = tmp("metrics");
        let mut s = Spool::create(&d).unwrap();
        let (id, _) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        let prep = [Timing::new(Phase::Code, 1_200), Timing::labelled(Phase::Testdata, "miss", 30_000)];
        assert!(s.mark_prepped(id, Path::new("/td"), &prep).unwrap());
        assert!(s.start(id).unwrap());
        let case = [Timing::new(Phase::Compile, 400_000), Timing::case(0, 0, Duration::from_micros(700))];
        assert!(s.record_case(id, 0, 0, &ok(), "{}", &case).unwrap());
        // The same case and compile again (a judge restarted): timed and counted once.
        assert!(s.record_case(id, 0, 0, &ok(), "{}", &case).unwrap());
        assert!(s.mark_judged(id, &Outcome { tasks: vec![vec![ok()]] }).unwrap());
        s.outbox_settle(id, "204").unwrap();
        let (a, _) = s.insert_claim("rn_1", "jb_2", PAYLOAD).unwrap();
        s.abort(a, AbortReason::PrepFailed, "bad").unwrap();
        let counts = |s: &Spool| {
            [
                counter(s, Counter::JobsClaimed.name(), ""),
                counter(s, Counter::JobsJudged.name(), ""),
                counter(s, Counter::JobsReported.name(), "outcome=\"complete\""),
                counter(s, Counter::JobsAborted.name(), "reason=\"prep_failed\""),
                counter(s, Counter::CaseVerdicts.name(), "verdict=\"AC\""),
                counter(s, Counter::PhaseBucket.name(), "phase=\"case\",le=\"0.001\""),
                counter(s, Counter::PhaseSumMicros.name(), "phase=\"compile\""),
            ]
        };
        assert_eq!(counts(&s), [2, 1, 1, 1, 1, 1, 400_000]);
        let phases: Vec<&str> = Phase::ALL
            .into_iter()
            .filter(|p| {
                let labels: &[&str] = p.label().map(|l| l.1).unwrap_or(&[""]);
                labels.iter().any(|l| !s.recent_timings(*p, l, 10).unwrap().is_empty())
            })
            .map(Phase::as_str)
            .collect();
        assert_eq!(phases, ["code", "testdata", "queued", "compile", "case", "judge", "report", "total"]);
        assert_eq!(s.recent_timings(Phase::Testdata, "miss", 10).unwrap(), [30_000]);
        assert_eq!(s.recent_timings(Phase::Case, "", 10).unwrap(), [700]);
        // Forgetting the claims forgets their timings, not the counts.
        s.prune_ended(now_ms() + 1).unwrap();
        assert!(s.recent_timings(Phase::Case, "", 10).unwrap().is_empty());
        assert_eq!(counts(&s), [2, 1, 1, 1, 1, 1, 400_000], "counters survive pruning");
        let text = crate::metrics::render(&s).unwrap();
        assert!(text.contains("ojrunner_jobs_claimed_total 2\n"), "{text}");
        assert!(text.contains("ojrunner_phase_seconds_count{phase=\"case\"} 1\n"), "{text}");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_rejected_result_is_counted_as_an_abort_once() {
        let d = tmp("rejected");
        let mut s = Spool::create(&d).unwrap();
        let (id, _) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        s.mark_prepped(id, Path::new("/td"), &[]).unwrap();
        s.start(id).unwrap();
        s.mark_judged(id, &Outcome { tasks: vec![vec![ok()]] }).unwrap();
        s.outbox_reject(id, "complete rejected: HTTP 400").unwrap();
        s.outbox_reject(id, "complete rejected: HTTP 400").unwrap();
        assert_eq!(counter(&s, Counter::JobsAborted.name(), "reason=\"rejected\""), 1);
        s.outbox_settle(id, "202").unwrap();
        assert_eq!(counter(&s, Counter::JobsReported.name(), "outcome=\"abort\""), 1);
        assert_eq!(s.recent_timings(Phase::Total, "abort", 10).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_spool_of_schema_1_is_migrated_keeping_its_claims_and_read_as_it_is_before() {
        let d = tmp("v1");
        let mut s = Spool::create(&d).unwrap();
        let (id, _) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
        drop(s);
        // What a runner of schema 1 left.
        let c = Connection::open(d.join(DB_FILE)).unwrap();
        c.execute_batch("DROP TABLE phases; DROP TABLE counters; PRAGMA user_version = 1;").unwrap();
        drop(c);
        let old = Spool::open_read_only(&d).unwrap();
        assert!(old.counters().unwrap().is_empty(), "read as it is, the tables it lacks empty");
        assert!(old.recent_timings(Phase::Case, "", 10).unwrap().is_empty());
        assert!(crate::metrics::render(&old).unwrap().contains("ojrunner_claims{state=\"claimed\"} 1\n"));
        drop(old);
        let mut s = Spool::create(&d).unwrap();
        let v: i64 = s.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        assert_eq!(s.claim(id).unwrap().unwrap().state, ClaimState::Claimed, "its claims kept");
        assert!(s.mark_prepped(id, Path::new("/td"), &[Timing::new(Phase::Code, 5)]).unwrap());
        assert_eq!(s.recent_timings(Phase::Code, "", 10).unwrap(), [5]);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn only_create_makes_a_spool_and_a_spool_deleted_or_replaced_is_gone() {
        let d = tmp("gone");
        assert!(Spool::open(&d).err().expect("no spool").0.contains("no database"));
        assert!(!d.join(DB_FILE).exists(), "open made nothing");
        let mut s = Spool::create(&d).unwrap();
        let again = Spool::open_as(&d, s.file_id()).unwrap();
        assert_eq!(s.gone(), None);
        s.set_control("k", Some("v")).unwrap();
        for f in ["spool.db", "spool.db-wal", "spool.db-shm"] {
            let _ = std::fs::remove_file(d.join(f));
        }
        assert!(s.gone().unwrap().contains("was deleted"), "{:?}", s.gone());
        assert!(s.set_control("k", None).unwrap_err().0.contains("was deleted"), "a write refused");
        assert!(Spool::open(&d).is_err() && !d.join(DB_FILE).exists(), "never made again by open");
        drop(Spool::create(&d).unwrap());
        assert!(again.gone().unwrap().contains("was replaced"), "{:?}", again.gone());
        assert!(Spool::open_as(&d, s.file_id()).err().expect("another file").0.contains("replaced"));
        std::fs::write(d.join(DB_FILE), b"").unwrap();
        assert!(Spool::open(&d).err().expect("empty").0.contains("holds no spool"));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let d = tmp("schema");
        drop(Spool::create(&d).unwrap());
        let c = Connection::open(d.join(DB_FILE)).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
        drop(c);
        let e = Spool::create(&d).err().expect("refused");
        assert!(e.0.contains("newer"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }
}
