//! The hub's database: schema, migrations, and the conventions every writer
//! follows.
//!
//! `hubd serve` and the control commands (`submit`, `status`, `fault`, …)
//! share one SQLite file from separate processes, so: WAL (readers never
//! wait for the writer), a 10 s busy timeout, and `BEGIN IMMEDIATE` for every
//! transaction that may write (a deferred read-then-write transaction can
//! fail with SQLITE_BUSY however long the timeout). Times are integers,
//! milliseconds since the epoch, taken from the hub's clock only.

use crate::Failure;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// The schema this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i32 = 6;

/// The steps from one schema version to the next: `MIGRATIONS[v]` takes
/// version `v` to `v + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 -> 1: the first schema.
    "
    CREATE TABLE problems (
        id         INTEGER PRIMARY KEY,
        meta       TEXT NOT NULL,    -- {\"tasks\": [...]} exactly as json.dumps writes it
        testdata   BLOB NOT NULL,    -- the zip served by /testdata
        checksum   TEXT NOT NULL,    -- md5 hex of testdata ++ meta
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE submissions (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        id          TEXT NOT NULL UNIQUE,
        problem_id  INTEGER NOT NULL,
        language    INTEGER NOT NULL,
        code        BLOB NOT NULL,   -- the zip served at code_url
        current_job TEXT,            -- the only job whose result counts
        created_at  INTEGER NOT NULL
    );
    CREATE TABLE jobs (
        id            TEXT PRIMARY KEY,
        submission_id TEXT NOT NULL REFERENCES submissions(id),
        state         TEXT NOT NULL CHECK (state IN ('pending', 'leased', 'done', 'superseded')),
        queue_seq     INTEGER NOT NULL,  -- FIFO place; a requeue takes a new one (the tail)
        attempts      INTEGER NOT NULL DEFAULT 0,
        leased_by     TEXT,
        deadline      INTEGER,           -- lease expiry while leased
        raw_payload   TEXT,              -- sent instead of the generated payload (tests)
        completed_by  TEXT,              -- the runner whose result landed
        verdict       TEXT,
        score         INTEGER,
        result        TEXT,              -- per-task summary JSON, as `status` shows it
        created_at    INTEGER NOT NULL,
        finished_at   INTEGER
    );
    CREATE INDEX jobs_queue ON jobs(queue_seq);
    CREATE INDEX jobs_state ON jobs(state);
    CREATE INDEX jobs_submission ON jobs(submission_id);
    CREATE TABLE runners (
        id            TEXT PRIMARY KEY,
        name          TEXT NOT NULL,
        token         TEXT NOT NULL,
        registered_at INTEGER NOT NULL,
        last_seen     INTEGER NOT NULL
    );
    -- Every complete and abort call received, whatever it was answered.
    CREATE TABLE calls (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id    TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        kind      TEXT NOT NULL CHECK (kind IN ('complete', 'abort')),
        reason    TEXT,
        answer    INTEGER NOT NULL,
        landed    INTEGER NOT NULL DEFAULT 0,
        at        INTEGER NOT NULL
    );
    CREATE INDEX calls_job ON calls(job_id);
    CREATE TABLE events (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        body   TEXT NOT NULL,
        at     INTEGER NOT NULL
    );
    CREATE INDEX events_job ON events(job_id);
    CREATE TABLE faults (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        status        INTEGER NOT NULL,
        remaining     INTEGER NOT NULL,
        path_contains TEXT
    );
    ",
    // v2: how many times each job was handed out (claims and reclaims), so
    // attempts can be checked against drain refunds.
    "ALTER TABLE jobs ADD COLUMN handouts INTEGER NOT NULL DEFAULT 0;",
    // v3: when a runner's long poll ends, while one waits (tests wait for it).
    "ALTER TABLE runners ADD COLUMN polling_until INTEGER;",
    // v4: scripted fault answers (redirects, foreign bodies, cut or hanging
    // bodies); status 0 means the hub's own answer.
    "ALTER TABLE faults ADD COLUMN location TEXT;
     ALTER TABLE faults ADD COLUMN body TEXT;
     ALTER TABLE faults ADD COLUMN content_type TEXT;
     ALTER TABLE faults ADD COLUMN cut_after INTEGER;
     ALTER TABLE faults ADD COLUMN hang_ms INTEGER;",
    // v5: lost handouts. When a job was last handed out, whether its holder
    // has owned it since (listed it in a heartbeat, sent its events), how
    // many of its handouts never reached a runner; when each runner last
    // sent its list of held jobs.
    "ALTER TABLE jobs ADD COLUMN leased_at INTEGER;
     ALTER TABLE jobs ADD COLUMN owned INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE jobs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runners ADD COLUMN last_beat INTEGER;",
    // v6: a problem's checker, sent as its jobs' `checker` (an ICPC
    // package's validator); NULL is Normal-OJ's "diff".
    "ALTER TABLE problems ADD COLUMN checker TEXT;",
];

/// Opens (creating if need be) and migrates the database at `path`. Any
/// failure here is a configuration problem: the hub cannot work without it.
pub fn open(path: &Path) -> Result<Connection, Failure> {
    let bad = |e: rusqlite::Error| Failure::config(format!("database {}: {e}", path.display()));
    let mut conn = Connection::open(path).map_err(bad)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(bad)?;
    ojrunner_daemon::sqlite::wal(&conn, Duration::from_secs(10)).map_err(bad)?;
    // Answers to runners acknowledge results: they must survive a power cut.
    conn.pragma_update(None, "synchronous", "FULL").map_err(bad)?;
    conn.pragma_update(None, "foreign_keys", true).map_err(bad)?;
    migrate(&mut conn).map_err(|e| match e {
        Failure(ojrunner_daemon::exit::ExitCode::Failure, m) => {
            Failure::config(format!("database {}: {m}", path.display()))
        }
        other => other,
    })?;
    Ok(conn)
}

/// Brings the schema up to [`SCHEMA_VERSION`], one step per transaction, so
/// several processes opening a fresh file at once migrate it exactly once.
pub fn migrate(conn: &mut Connection) -> Result<(), Failure> {
    // The common case, without the write lock: read-only commands such as
    // `status` must not queue behind a busy hub.
    if conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i32>(0)).ok() == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    loop {
        let tx = immediate(conn).map_err(|e| Failure::runtime(format!("migration: {e}")))?;
        let version: i32 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| Failure::runtime(format!("reading the schema version: {e}")))?;
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        if !(0..SCHEMA_VERSION).contains(&version) {
            return Err(Failure::runtime(format!(
                "schema version {version} is not one this hubd knows (it writes {SCHEMA_VERSION})"
            )));
        }
        tx.execute_batch(MIGRATIONS[version as usize])
            .and_then(|_| tx.pragma_update(None, "user_version", version + 1))
            .and_then(|_| tx.commit())
            .map_err(|e| Failure::runtime(format!("migrating schema {version} to {}: {e}", version + 1)))?;
    }
}

/// Starts a transaction that takes the write lock at once (`BEGIN
/// IMMEDIATE`); it rolls back when dropped uncommitted.
pub fn immediate(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

pub use ojrunner_daemon::clock::now_ms;

/// `bytes` random bytes from the kernel, in hex: unguessable ids and tokens.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    let got = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if let Err(e) = got {
        // Without the kernel's randomness a token would be guessable: refuse.
        panic!("reading /dev/urandom: {e}");
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A struct from a row whose columns are its fields in the order written
/// (`from_row!(r => Claim { job_id, state })`): the `SELECT`'s order is the
/// struct's, with no index to miscount.
macro_rules! from_row {
    ($r:ident => $ty:ident { $($field:ident),+ $(,)? }) => {{
        let mut column = 0usize;
        $ty { $($field: { column += 1; $r.get(column - 1)? }),+ }
    }};
}
pub(crate) use from_row;

#[cfg(test)]
mod tests {
    #[test]
    fn a_fresh_database_is_migrated_once_and_reopens() {
        let dir = ojrunner_daemon::test_dir("hubd-db");
        let path = dir.join("hub.db");
        let conn = super::open(&path).unwrap();
        let v: i32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, super::SCHEMA_VERSION);
        drop(conn);
        super::open(&path).unwrap();
        conn_too_new(&path);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn commands_opening_a_new_database_at_once_all_open_it() {
        // `hubd serve` and `hubd problem add` started together on a new file.
        let dir = ojrunner_daemon::test_dir("hubd-db-race");
        for round in 0..60 {
            let path = dir.join(format!("hub-{round}.db"));
            let opened = ojrunner_daemon::at_once(4, move || super::open(&path).map(drop).map_err(|e| e.to_string()));
            assert_eq!(opened, [Ok(()), Ok(()), Ok(()), Ok(())], "round {round}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn conn_too_new(path: &std::path::Path) {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let e = super::open(path).unwrap_err();
        assert_eq!(e.exit_code(), ojrunner_daemon::ExitCode::Config, "{e}");
    }
}
