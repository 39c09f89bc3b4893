//! Injected outages, so tests can show a runner riding out a failing hub:
//! `hubd fault --status 503 --count N [--path-contains S]` makes the server
//! answer the next N matching requests with that status, unprocessed. Rules
//! live in the database because the command and the server are separate
//! processes; the server checks them on every request with one cheap read.

use super::db;
use rusqlite::{params, Connection, OptionalExtension};

/// Adds a rule: the next `count` requests whose path and query contain
/// `path_contains` (every request when `None`) are answered `status`.
pub fn add(conn: &mut Connection, status: u16, count: i64, path_contains: Option<&str>) -> rusqlite::Result<()> {
    let tx = db::immediate(conn)?;
    tx.execute(
        "INSERT INTO faults (status, remaining, path_contains) VALUES (?1, ?2, ?3)",
        params![status, count, path_contains],
    )?;
    tx.commit()
}

/// Removes every rule.
pub fn clear(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = db::immediate(conn)?;
    tx.execute("DELETE FROM faults", [])?;
    tx.commit()
}

/// The status to answer `url` with, if a rule claims it (using up one of the
/// rule's requests). With no rules this is a single read, no write lock.
pub fn take(conn: &mut Connection, url: &str) -> rusqlite::Result<Option<u16>> {
    let armed: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM faults WHERE remaining > 0)", [], |r| r.get(0))?;
    if !armed {
        return Ok(None);
    }
    let tx = db::immediate(conn)?;
    let status = tx
        .query_row(
            "UPDATE faults SET remaining = remaining - 1 WHERE id = (
                 SELECT id FROM faults WHERE remaining > 0 AND (path_contains IS NULL OR instr(?1, path_contains) > 0)
                 ORDER BY id LIMIT 1)
             RETURNING status",
            [url],
            |r| r.get(0),
        )
        .optional()?;
    tx.commit()?;
    Ok(status)
}
