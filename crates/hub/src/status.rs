//! `hubd status`: one JSON line per submission, in creation order, with what
//! the hub decided (state, verdict, tasks) and what it was told (every
//! complete and abort call, event lines), so a test can assert both the end
//! and the way there. Reads only: it runs beside a serving hub.

use rusqlite::Connection;
use serde_json::{json, Value};

/// The report, one value per submission.
pub fn submissions(conn: &Connection) -> rusqlite::Result<Vec<Value>> {
    // One read transaction: every figure from the same snapshot.
    let snapshot = conn.unchecked_transaction()?;
    let conn: &Connection = &snapshot;
    let mut rows: Vec<Value> = conn
        .prepare(
            "SELECT s.id, s.problem_id, s.language, s.current_job, j.state, j.attempts, j.verdict, j.score,
                    j.result, CASE j.state WHEN 'leased' THEN j.leased_by END, j.handouts,
                    CASE j.state WHEN 'leased' THEN j.deadline END, j.lost
             FROM submissions s LEFT JOIN jobs j ON j.id = s.current_job ORDER BY s.seq",
        )?
        .query_map([], |r| {
            Ok(json!({
                "submission_id": r.get::<_, String>(0)?,
                "problem_id": r.get::<_, i64>(1)?,
                "language": r.get::<_, i64>(2)?,
                "job_id": r.get::<_, Option<String>>(3)?,
                "state": r.get::<_, Option<String>>(4)?,
                "attempts": r.get::<_, Option<i64>>(5)?.unwrap_or(0),
                "verdict": r.get::<_, Option<String>>(6)?,
                "score": r.get::<_, Option<i64>>(7)?,
                "tasks": r.get::<_, Option<String>>(8)?.and_then(|t| serde_json::from_str::<Value>(&t).ok()),
                "leased_by": r.get::<_, Option<String>>(9)?,
                "handouts": r.get::<_, Option<i64>>(10)?.unwrap_or(0),
                "lease_left_ms": r.get::<_, Option<i64>>(11)?.map(|d| d - super::db::now_ms()),
                "lost": r.get::<_, Option<i64>>(12)?.unwrap_or(0),
            }))
        })?
        .collect::<Result<_, _>>()?;
    for row in &mut rows {
        let id = row["submission_id"].as_str().unwrap_or_default().to_string();
        let job = row["job_id"].as_str().unwrap_or_default().to_string();
        let count = |sql: &str, key: &str| conn.query_row(sql, [key], |r| r.get::<_, i64>(0));
        let aborts: Vec<Value> = conn
            .prepare(
                "SELECT c.job_id, c.reason, c.runner_id, c.answer FROM calls c JOIN jobs j ON j.id = c.job_id
                 WHERE j.submission_id = ?1 AND c.kind = 'abort' ORDER BY c.seq",
            )?
            .query_map([&id], |r| {
                Ok(json!({"job_id": r.get::<_, String>(0)?, "reason": r.get::<_, Option<String>>(1)?,
                          "runner_id": r.get::<_, String>(2)?, "answer": r.get::<_, i64>(3)?}))
            })?
            .collect::<Result<_, _>>()?;
        row["aborts"] = Value::Array(aborts);
        row["completes"] =
            count("SELECT COUNT(*) FROM calls WHERE job_id = ?1 AND kind = 'complete' AND landed", &job)?.into();
        row["complete_calls"] = count(
            "SELECT COUNT(*) FROM calls c JOIN jobs j ON j.id = c.job_id
             WHERE j.submission_id = ?1 AND c.kind = 'complete'",
            &id,
        )?
        .into();
        row["events"] = count("SELECT COUNT(*) FROM events WHERE job_id = ?1", &job)?.into();
    }
    Ok(rows)
}
