//! What both SQLite files, the runner's spool and the hub's queue, need
//! the same way when they are opened.

use rusqlite::{Connection, ErrorCode};
use std::time::{Duration, Instant};

/// Puts the database of `conn` in WAL mode, trying again while SQLite
/// answers BUSY, up to `patience`: two processes opening a new database at
/// once both switch it, and SQLite may answer one of them BUSY at once
/// rather than wait on its busy timeout (its deadlock guard).
pub fn wal(conn: &Connection, patience: Duration) -> rusqlite::Result<()> {
    let deadline = Instant::now() + patience;
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == ErrorCode::DatabaseBusy && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r.map(drop),
        }
    }
}
