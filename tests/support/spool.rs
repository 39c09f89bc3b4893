//! A runner's spool read from outside, read-only, as a test checks it: its
//! claims and their states, a count, the runner's id, its last beat; and
//! the waits on it (a claim judging, cases judged).

use super::wait::wait_for;
use std::path::Path;
use std::time::Duration;

/// One row of a runner's spool, as a test sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolClaim {
    pub claim_id: i64,
    pub job_id: String,
    pub state: String,
    pub note: String,
}

/// The claims in a runner's spool (read-only; empty if there is no spool yet).
pub fn spool_claims(spool: &Path) -> Vec<SpoolClaim> {
    let db = spool.join("spool.db");
    if !db.exists() {
        return Vec::new();
    }
    let Ok(c) = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Vec::new();
    };
    let _ = c.busy_timeout(Duration::from_secs(10));
    let Ok(mut st) = c.prepare("SELECT claim_id, job_id, state, note FROM claims ORDER BY claim_id") else {
        return Vec::new();
    };
    st.query_map([], |r| Ok(SpoolClaim { claim_id: r.get(0)?, job_id: r.get(1)?, state: r.get(2)?, note: r.get(3)? }))
        .map(|rows| rows.flatten().collect())
        .unwrap_or_default()
}

/// One integer from a runner's spool (`SELECT count(*) …`, say); None if
/// the spool is not there yet.
pub fn spool_int(spool: &Path, sql: &str) -> Option<i64> {
    let db = spool.join("spool.db");
    let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    let _ = c.busy_timeout(Duration::from_secs(10));
    c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0)).ok().flatten()
}

/// The runner id in a spool.
pub fn spool_runner_id(spool: &Path) -> Option<String> {
    let db = spool.join("spool.db");
    let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    let _ = c.busy_timeout(Duration::from_secs(10));
    c.query_row("SELECT runner_id FROM identity", [], |r| r.get(0)).ok()
}

/// When the runner last noted a heartbeat attempted (ms since the epoch),
/// read as `Spool::last_beat` reads it: the beat file's time, or the
/// [`ojrunner::lease::LAST_BEAT_AT`] control value, whichever is later.
pub fn spool_last_beat(spool: &Path) -> i64 {
    let file = std::fs::metadata(spool.join("beat"))
        .and_then(|m| m.modified())
        .map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64)
        .unwrap_or(0);
    let db = spool.join("spool.db");
    let row = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()
        .and_then(|c| {
            let sql = "SELECT value FROM control WHERE key = ?";
            c.query_row(sql, [ojrunner::lease::LAST_BEAT_AT], |r| r.get::<_, String>(0)).ok()
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    file.max(row)
}

/// Waits (at most a minute) until a runner on `spool` is judging a claim;
/// that claim.
pub fn judging_claim(spool: &Path) -> SpoolClaim {
    wait_for("the job to be judging", Duration::from_secs(60), || {
        spool_claims(spool).into_iter().find(|c| c.state == "started")
    })
}

/// Waits (at most a minute) until `spool` holds `n` case results.
pub fn wait_cases(spool: &Path, n: i64) {
    wait_for(&format!("{n} case(s) judged"), Duration::from_secs(60), || {
        (spool_int(spool, "SELECT count(*) FROM case_results").unwrap_or(0) >= n).then_some(())
    });
}
