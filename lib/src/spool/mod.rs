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
//! each step one `BEGIN IMMEDIATE` transaction guarded by the states it
//! leaves: a stage acting on a claim that moved under it changes nothing.
//! The states and the moves are one typed table, [`MOVES`] (`state.rs`),
//! from which every guard's `state IN (…)` is made. The outcome of a
//! claim (`complete` or `abort` body) is written in the same transaction
//! that moves it to `judged`/`aborted`, so an outcome is never lost and
//! never written twice.
//!
//! The drain latch lives here too: once set, [`Spool::start`] refuses, in
//! the same transaction that would have started a claim, so no stage and no
//! restarted stage can start judging after a drain began.
//!
//! So do the runner's metrics: each phase of a claim is timed in the
//! transaction that ends it ([`crate::phase`]), and each counter
//! ([`Counter`](crate::counter::Counter)) is bumped in the transaction of
//! the event it counts, so both survive every restart, and pruning old
//! claims never makes a counter go back.
//!
//! The parts, each an `impl Spool` of its own over one connection:
//!
//! | part | what it owns |
//! |---|---|
//! | this file | the [`Spool`] handle: making, opening, [`Spool::gone`], the schema and its migrations, the one way to write (a `BEGIN IMMEDIATE` transaction), the identity and the control values (the drain latch) |
//! | `state.rs` | the state machine as data: [`ClaimState`], [`Transition`], [`MOVES`] |
//! | `claims.rs` | claims, their case results, and the one function that moves a claim (`move_in`) |
//! | `outbox.rs` | the outcomes owed to the hub, and those given up on |
//! | `events.rs` | progress events waiting to be sent, bounded per claim |
//! | `metric_rows.rs` | the spool's metric rows: counters and phase timings (the `/metrics` text is [`crate::metrics`]) |
//! | `error.rs` | [`SpoolError`], by what a caller does about it ([`SpoolError::retry`]: later, skip the row, or stop) |
//! | `dir.rs` | the directory around the database: the beat file, the claim reserve, the claims' work directories |

mod claims;
mod dir;
mod error;
mod events;
mod metric_rows;
mod outbox;
mod state;
#[cfg(test)]
mod tests;

pub use claims::ClaimRow;
pub use dir::{BEAT_FILE, RESERVE_BYTES, RESERVE_FILE};
pub use error::{Result, Retry, SpoolError};
pub use events::{EventRow, MAX_EVENTS_PER_CLAIM};
pub use outbox::OutboxItem;
pub use state::{ClaimState, Move, Transition, MOVES};

use crate::protocol::{Registration, RunnerConfig};
use claims::discard_in;
use error::Context;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use state::sql_list;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema this code reads and writes (`PRAGMA user_version`): 2 added
/// `phases` and `counters`; a spool of 1 is migrated when a stage opens it.
pub const SCHEMA_VERSION: i64 = 2;

/// The name of the database file inside the spool directory.
pub const DB_FILE: &str = "spool.db";

/// What the runner knows of itself at the hub (not the sandbox's
/// `Identity`, the uid and gid a program runs as).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerIdentity {
    pub runner_id: String,
    pub token: String,
    pub config: RunnerConfig,
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
            return Err(SpoolError::Unusable(format!(
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
            return Err(SpoolError::Gone(format!(
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
        // Two stages started at once on a new spool both switch it.
        ojrunner_daemon::sqlite::wal(&conn, Duration::from_secs(30)).ctx("journal_mode")?;
        // Rows here acknowledge the hub (a claim taken, a result owed): a
        // power cut must not forget them.
        conn.pragma_update(None, "synchronous", "FULL").ctx("synchronous")?;
        conn.pragma_update(None, "foreign_keys", "ON").ctx("foreign_keys")?;
        if !create {
            let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ctx("read schema version")?;
            if v < 1 {
                return Err(SpoolError::Unusable(format!(
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
            return Err(SpoolError::Unusable(format!("spool: no database at {}", db.display())));
        }
        let conn = Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ctx(&format!("open {} read-only", db.display()))?;
        conn.busy_timeout(Duration::from_secs(10)).ctx("busy_timeout")?;
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ctx("read schema version")?;
        // An older runner's spool is read as it is (the tables it lacks are
        // empty); a newer one's is not this program's to read.
        if !(1..=SCHEMA_VERSION).contains(&v) {
            return Err(SpoolError::Unusable(format!(
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
            return Err(SpoolError::Unusable(format!(
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
            return Err(SpoolError::Gone(format!("spool: {what}: {why}")));
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
                .prepare(&format!(
                    "SELECT claim_id FROM claims WHERE state IN {} AND runner_id != ?",
                    sql_list(&ClaimState::HELD)
                ))?
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
}
