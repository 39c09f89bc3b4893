//! Runner identities: `register` mints a runner id and a bearer token;
//! every other runner call must carry the token of the runner in its path.
//! Tokens are compared in constant time and never logged.

use super::db;
use rusqlite::{params, Connection, OptionalExtension};

/// Registers a runner called `name`; its id and token.
/// (Inside the caller's transaction.)
pub fn register(tx: &Connection, name: &str) -> rusqlite::Result<(String, String)> {
    let id = format!("rn_{}", db::random_hex(8));
    let token = format!("rk_{}", db::random_hex(24));
    tx.execute(
        "INSERT INTO runners (id, name, token, registered_at, last_seen) VALUES (?1, ?2, ?3, ?4, ?4)",
        params![id, name, token, db::now_ms()],
    )?;
    Ok((id, token))
}

/// Whether `token` belongs to runner `id`.
pub fn authenticate(conn: &Connection, id: &str, token: &str) -> rusqlite::Result<bool> {
    let stored: Option<String> =
        conn.prepare_cached("SELECT token FROM runners WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?;
    Ok(stored.is_some_and(|s| same(s.as_bytes(), token.as_bytes())))
}

/// Records that runner `id` was heard from (inside the caller's transaction).
pub fn touch(tx: &Connection, id: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE runners SET last_seen = ?2 WHERE id = ?1")?.execute(params![id, db::now_ms()])?;
    Ok(())
}

/// Constant-time equality (the length is not a secret).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Records that a long poll of runner `id` waits until `until` (ms), or
/// that none does.
pub fn polling(conn: &Connection, id: &str, until: Option<i64>) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE runners SET polling_until = ?2 WHERE id = ?1")?.execute(params![id, until])?;
    Ok(())
}

/// One JSON line per runner, oldest first: `status --runners`.
pub fn list(conn: &Connection) -> rusqlite::Result<Vec<serde_json::Value>> {
    let now = db::now_ms();
    conn.prepare("SELECT id, name, registered_at, last_seen, polling_until FROM runners ORDER BY registered_at, id")?
        .query_map([], |r| {
            Ok(serde_json::json!({
                "runner_id": r.get::<_, String>(0)?, "name": r.get::<_, String>(1)?,
                "registered_at": r.get::<_, i64>(2)?, "last_seen": r.get::<_, i64>(3)?,
                "polling": r.get::<_, Option<i64>>(4)?.is_some_and(|t| t > now),
            }))
        })?
        .collect()
}
