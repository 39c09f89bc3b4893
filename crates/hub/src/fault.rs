//! Injected faults, so tests can show a runner riding out a failing or
//! hostile hub: `hubd fault --status 503 --count N [--path-contains S]`
//! makes the server answer the next N matching requests with that status,
//! unprocessed. A rule may also script the answer (a `Location` for a
//! redirect, a body such as a proxy's HTML page and its type) or spoil it:
//! `--cut-after B` sends only B bytes of the body (the hub's own answer when
//! no `--status` is given) and then closes the connection, after `--hang`
//! seconds when given. Rules live in the database because the command and
//! the server are separate processes; the server checks them on every
//! request with one cheap read.

use super::db;
use rusqlite::{params, Connection, OptionalExtension};
use std::time::Duration;

/// What a rule does to the requests it claims.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The status to answer, unprocessed; `None`: the hub answers as usual
    /// (and the answer is cut, see `cut_after`).
    pub status: Option<u16>,
    /// A `Location` header (a redirect).
    pub location: Option<String>,
    /// The body instead of `{"error": "injected fault"}`.
    pub body: Option<String>,
    /// The body's `Content-Type`.
    pub content_type: Option<String>,
    /// Send this many bytes of the body, then close the connection.
    pub cut_after: Option<u64>,
    /// Wait this long before the cut (a body that hangs).
    pub hang: Option<Duration>,
}

/// Adds a rule: the next `count` requests whose path and query contain
/// `path_contains` (every request when `None`) get `rule`.
pub fn add(conn: &mut Connection, rule: &Rule, count: i64, path_contains: Option<&str>) -> rusqlite::Result<()> {
    let tx = db::immediate(conn)?;
    tx.execute(
        "INSERT INTO faults (status, remaining, path_contains, location, body, content_type, cut_after, hang_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            rule.status.unwrap_or(0),
            count,
            path_contains,
            rule.location,
            rule.body,
            rule.content_type,
            rule.cut_after.map(|b| b as i64),
            rule.hang.map(|d| d.as_millis() as i64)
        ],
    )?;
    tx.commit()
}

/// Removes every rule.
pub fn clear(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = db::immediate(conn)?;
    tx.execute("DELETE FROM faults", [])?;
    tx.commit()
}

/// Whether any rule is armed: one cheap read, done before every request.
pub fn armed(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM faults WHERE remaining > 0)")?.query_row([], |r| r.get(0))
}

/// The rule for `url`, if one claims it (using up one of the rule's
/// requests), inside the caller's transaction.
pub fn take(tx: &Connection, url: &str) -> rusqlite::Result<Option<Rule>> {
    tx.query_row(
        "UPDATE faults SET remaining = remaining - 1 WHERE id = (
             SELECT id FROM faults WHERE remaining > 0 AND (path_contains IS NULL OR instr(?1, path_contains) > 0)
             ORDER BY id LIMIT 1)
         RETURNING status, location, body, content_type, cut_after, hang_ms",
        [url],
        |r| {
            Ok(Rule {
                status: Some(r.get::<_, u16>(0)?).filter(|s| *s != 0),
                location: r.get(1)?,
                body: r.get(2)?,
                content_type: r.get(3)?,
                cut_after: r.get::<_, Option<i64>>(4)?.map(|b| b.max(0) as u64),
                hang: r.get::<_, Option<i64>>(5)?.map(|ms| Duration::from_millis(ms.max(0) as u64)),
            })
        },
    )
    .optional()
}
