//! The job lifecycle, one step per call, after
//! Normal-OJ's dispatch queue (`reference/normal-oj.md` §6):
//!
//! ```text
//! enqueue ─► pending ─claim─► leased ─complete─► done
//!              ▲                │ └─ lease expiry ─► orphan ─reclaim─► leased
//!              └── abort (tail) ┘                    └─ attempts ≥ max ─► done (JE)
//! ```
//!
//! Every claim or reclaim adds an attempt; `abort(drain)` refunds it, the
//! other reasons keep it; at the limit the job ends as JE. A handout that
//! never reached its runner (see `LOST`) is refunded when its lease lapses.
//! Expiry is the only
//! orphan test, and it is made when someone asks for work (there is no
//! background sweeper to die). A job that is no longer its submission's
//! current job (a rejudge superseded it) is never handed out again, and its
//! result is answered 204 and dropped.
//!
//! Each step runs inside a transaction its caller opens (`BEGIN IMMEDIATE`,
//! or a savepoint of the server's group commit, see `store`): the steps
//! themselves neither begin nor commit.

use super::db::from_row;
use super::{db, problem, result};
use ojrunner_protocol::AbortReason;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;

/// The lease rules the hub enforces.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub lease_ttl_ms: i64,
    pub max_attempts: i64,
}

/// A job just claimed: what its payload is made of.
#[derive(Debug)]
pub struct Claim {
    pub job_id: String,
    pub submission_id: String,
    pub problem_id: i64,
    pub language: i64,
    pub attempts: i64,
    /// The problem's stored meta text.
    pub meta: String,
    /// The problem's checker (`None`: "diff").
    pub checker: Option<String>,
    pub raw_payload: Option<String>,
}

/// Queues a new job for `submission` at the tail and makes it current; a
/// job of that submission still pending is superseded (it will never run).
pub fn enqueue(tx: &Connection, submission: &str, raw_payload: Option<&str>) -> rusqlite::Result<String> {
    let id = format!("jb_{}", db::random_hex(8));
    tx.execute("UPDATE jobs SET state = 'superseded' WHERE submission_id = ?1 AND state = 'pending'", [submission])?;
    tx.execute(
        "INSERT INTO jobs (id, submission_id, state, queue_seq, raw_payload, created_at)
         VALUES (?1, ?2, 'pending', ?3, ?4, ?5)",
        params![id, submission, next_queue_seq(tx)?, raw_payload, db::now_ms()],
    )?;
    tx.execute("UPDATE submissions SET current_job = ?1 WHERE id = ?2", [&id, submission])?;
    Ok(id)
}

fn next_queue_seq(tx: &Connection) -> rusqlite::Result<i64> {
    tx.query_row("SELECT COALESCE(MAX(queue_seq), 0) + 1 FROM jobs", [], |r| r.get(0))
}

/// Back to the tail of the queue, lease cleared.
fn requeue(tx: &Connection, job_id: &str) -> rusqlite::Result<()> {
    let seq = next_queue_seq(tx)?;
    tx.execute(
        "UPDATE jobs SET state = 'pending', leased_by = NULL, deadline = NULL, queue_seq = ?2 WHERE id = ?1",
        params![job_id, seq],
    )?;
    Ok(())
}

/// Ends a job whose attempts are spent: JE, score 0, no task results.
fn finalise_je(tx: &Connection, job_id: &str, attempts: i64) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE jobs SET state = 'done', verdict = 'JE', score = 0, result = NULL, leased_by = NULL,
         deadline = NULL, finished_at = ?2 WHERE id = ?1",
        params![job_id, db::now_ms()],
    )?;
    log::warn!("job {job_id} finalised as JE after {attempts} attempts");
    Ok(())
}

/// What a claim found.
#[derive(Debug, Default)]
pub struct Scan {
    /// The job leased, if any.
    pub claim: Option<Claim>,
    /// Leases found expired (each reclaimed, dropped or finalised).
    pub lapsed: usize,
    /// Of those, the jobs finalised as JE, their attempts spent.
    pub finalised: usize,
}

/// `next-job`: scans for orphans (finalising the spent ones), then leases
/// the oldest reclaimable orphan, or else the oldest pending current job.
pub fn claim(tx: &Connection, runner: &str, policy: &Policy) -> rusqlite::Result<Scan> {
    let now = db::now_ms();
    let orphans: Vec<(String, i64, bool, bool)> = tx
        .prepare_cached(&format!(
            "SELECT j.id, j.attempts, s.current_job IS j.id, {LOST}
             FROM jobs j JOIN submissions s ON s.id = j.submission_id LEFT JOIN runners r ON r.id = j.leased_by
             WHERE j.state = 'leased' AND j.deadline < ?1 ORDER BY j.deadline"
        ))?
        .query_map(params![now, policy.lease_ttl_ms / 2, policy.max_attempts], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<Result<_, _>>()?;
    let mut scan = Scan::default();
    let mut pick = None;
    // Each lapse dealt with here counts; the rest wait for the next asks.
    for (id, attempts, current, lost) in orphans {
        if lost {
            // The handout that lapsed never reached its runner: not an attempt.
            tx.execute("UPDATE jobs SET attempts = attempts - 1, lost = lost + 1 WHERE id = ?1", [&id])?;
        }
        let attempts = attempts - i64::from(lost);
        if !current {
            tx.execute("UPDATE jobs SET state = 'superseded', leased_by = NULL WHERE id = ?1", [&id])?;
        } else if attempts >= policy.max_attempts {
            finalise_je(tx, &id, attempts)?;
            scan.finalised += 1;
        } else if pick.is_none() {
            let how = if lost { "its handout never reached the runner, attempt refunded" } else { "lease expired" };
            log::info!("job {id}: {how}, reclaimed by {runner}");
            pick = Some(id);
        } else {
            if lost {
                // Refunded once: the lapse is this handout's, whoever reclaims it.
                tx.execute("UPDATE jobs SET owned = 1 WHERE id = ?1", [&id])?;
            }
            continue;
        }
        scan.lapsed += 1;
    }
    if pick.is_none() {
        pick = tx
            .prepare_cached(
                "SELECT j.id FROM jobs j JOIN submissions s ON s.current_job = j.id
                 WHERE j.state = 'pending' ORDER BY j.queue_seq LIMIT 1",
            )?
            .query_row([], |r| r.get(0))
            .optional()?;
    }
    let Some(job_id) = pick else {
        return Ok(scan);
    };
    tx.execute(
        "UPDATE jobs SET state = 'leased', leased_by = ?2, deadline = ?3, attempts = attempts + 1,
                         handouts = handouts + 1, leased_at = ?4, owned = 0 WHERE id = ?1",
        params![job_id, runner, now.saturating_add(policy.lease_ttl_ms), now],
    )?;
    scan.claim = Some(tx.query_row(
        "SELECT j.id, s.id, s.problem_id, s.language, j.attempts, COALESCE(p.meta, '{\"tasks\": []}'), j.raw_payload,
                p.checker
         FROM jobs j JOIN submissions s ON s.id = j.submission_id LEFT JOIN problems p ON p.id = s.problem_id
         WHERE j.id = ?1",
        [&job_id],
        |r| Ok(from_row!(r => Claim { job_id, submission_id, problem_id, language, attempts, meta, raw_payload, checker })),
    )?);
    Ok(scan)
}

/// The `next-job` body for `claim`. A raw payload override is sent as
/// stored, with `{{job_id}}`, `{{submission_id}}` and `{{code_url}}`
/// replaced (a test cannot know the job id when it submits).
pub fn payload(claim: &Claim, base_url: &str) -> String {
    let code_url = format!("{base_url}/code/{}.zip", ojrunner_protocol::segment(&claim.job_id));
    if let Some(raw) = &claim.raw_payload {
        return raw
            .replace("{{job_id}}", &claim.job_id)
            .replace("{{submission_id}}", &claim.submission_id)
            .replace("{{code_url}}", &code_url);
    }
    let tasks = serde_json::from_str::<serde_json::Value>(&claim.meta)
        .ok()
        .and_then(|m| m.get("tasks").cloned())
        .unwrap_or_else(|| json!([]));
    json!({
        "job_id": claim.job_id, "submission_id": claim.submission_id, "problem_id": claim.problem_id,
        "language": claim.language, "code_url": code_url,
        "checker": claim.checker.as_deref().unwrap_or("diff"), "tasks": tasks,
    })
    .to_string()
}

/// Whether a lapsed lease was a lost handout, as SQL over `jobs j` and the
/// holder `runners r` (?2: the grace, half a lease; ?3: the cap).
///
/// A runner's heartbeat lists every job it holds, from the moment it
/// records the claim until its outcome lands. So when the holder, alive
/// and beating, sent its list at least half a lease after the handout and
/// never once named the job (nor sent its events), the answer that carried
/// the job was lost on the way: a cut connection, a partition during a long
/// poll, a claimd killed mid-read. Such a lapse is the network's, not the
/// job's, and is not an attempt. A holder that stopped beating (a runner
/// that died, perhaps of this job) gives no such proof: its lapse counts.
/// At most `max_attempts` handouts of a job are refunded so, so that a
/// payload that kills every claimd before it records still ends as JE.
/// The grace is where a mistake is cheap: a job taken for lost is only
/// judged again, and the first holder's late result is refused (409).
const LOST: &str = "j.owned = 0 AND j.lost < ?3 AND j.leased_at IS NOT NULL
                    AND r.last_beat IS NOT NULL AND r.last_beat > j.leased_at + ?2";

/// `heartbeat`: renews each listed job this runner holds (an unlisted job
/// is left to expire: its worker is gone, or it never came) and marks it
/// owned. Returns how many were renewed.
pub fn heartbeat(tx: &Connection, runner: &str, job_ids: &[String], policy: &Policy) -> rusqlite::Result<usize> {
    let now = db::now_ms();
    tx.execute("UPDATE runners SET last_seen = ?2, last_beat = ?2 WHERE id = ?1", params![runner, now])?;
    let mut renewed = 0;
    for id in job_ids {
        renewed += tx.execute(
            "UPDATE jobs SET deadline = ?3, owned = 1 WHERE id = ?1 AND state = 'leased' AND leased_by = ?2",
            params![id, runner, now.saturating_add(policy.lease_ttl_ms)],
        )?;
    }
    Ok(renewed)
}

/// What became of a `complete` call.
#[derive(Debug, PartialEq)]
pub enum Landing {
    Landed,
    /// The same runner sent it again after it landed (its answer was lost).
    Duplicate,
    /// The job is no longer current: dropped.
    Stale,
    Unknown,
    /// Another runner holds or finished the job, or it went back to the queue.
    Conflict,
    Rejected(String),
}

impl Landing {
    pub fn code(&self) -> u16 {
        match self {
            Landing::Landed | Landing::Duplicate | Landing::Stale => 204,
            Landing::Unknown => 404,
            Landing::Conflict => 409,
            Landing::Rejected(_) => 400,
        }
    }
}

/// The parts of a job the ownership checks look at.
struct Holder {
    state: String,
    leased_by: Option<String>,
    completed_by: Option<String>,
    attempts: i64,
    current: bool,
    problem_id: i64,
}

fn holder(tx: &Connection, job_id: &str) -> rusqlite::Result<Option<Holder>> {
    tx.query_row(
        "SELECT j.state, j.leased_by, j.completed_by, j.attempts, s.current_job IS j.id, s.problem_id
         FROM jobs j JOIN submissions s ON s.id = j.submission_id WHERE j.id = ?1",
        [job_id],
        |r| Ok(from_row!(r => Holder { state, leased_by, completed_by, attempts, current, problem_id })),
    )
    .optional()
}

fn record_call(tx: &Connection, job: &str, runner: &str, kind: &str, reason: Option<&str>, answer: u16, landed: bool) {
    let at = db::now_ms();
    let recorded = tx.execute(
        "INSERT INTO calls (job_id, runner_id, kind, reason, answer, landed, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![job, runner, kind, reason, answer, landed, at],
    );
    if let Err(e) = recorded {
        log::error!("recording {kind} of job {job} by {runner}: {e}");
    }
}

/// `complete`: lands the result if `runner` holds the job (even past its
/// deadline, as long as nobody reclaimed it) and it fits the meta.
pub fn complete(tx: &Connection, runner: &str, job_id: &str, body: &str) -> rusqlite::Result<Landing> {
    let landing = match holder(tx, job_id)? {
        None => Landing::Unknown,
        Some(h) if !h.current => Landing::Stale,
        Some(h) if h.state == "done" && h.completed_by.as_deref() == Some(runner) => Landing::Duplicate,
        Some(h) if h.state == "leased" && h.leased_by.as_deref() == Some(runner) => {
            let meta = problem::meta_and_checksum(tx, h.problem_id)?.map(|m| m.0).unwrap_or_default();
            match result::judge(body, &problem::tasks_of(&meta)) {
                Ok(v) => {
                    tx.execute(
                        "UPDATE jobs SET state = 'done', completed_by = ?2, verdict = ?3, score = ?4, result = ?5,
                         leased_by = NULL, deadline = NULL, finished_at = ?6 WHERE id = ?1",
                        params![job_id, runner, v.status.as_str(), v.score, v.tasks.to_string(), db::now_ms()],
                    )?;
                    log::info!("job {job_id}: result from {runner} landed: {} {}", v.status, v.score);
                    Landing::Landed
                }
                Err(why) => Landing::Rejected(why.0),
            }
        }
        Some(_) => Landing::Conflict,
    };
    match &landing {
        Landing::Stale => {
            // Whoever ran it is done with it: it must not come back as an orphan.
            tx.execute(
                "UPDATE jobs SET state = 'superseded', leased_by = NULL WHERE id = ?1 AND state = 'leased'",
                [job_id],
            )?;
            log::info!("job {job_id}: stale result dropped (from {runner}; no longer current)");
        }
        Landing::Rejected(why) => log::warn!("job {job_id}: result from {runner} rejected: {why}"),
        Landing::Landed => {}
        other => log::info!("job {job_id}: complete from {runner} answered {} ({other:?})", other.code()),
    }
    record_call(tx, job_id, runner, "complete", None, landing.code(), landing == Landing::Landed);
    Ok(landing)
}

/// What became of an `abort` call.
#[derive(Debug, PartialEq)]
pub enum Handback {
    Requeued,
    FinalisedJe,
    /// The job is no longer current; it is dropped, not requeued.
    Superseded,
    Unknown,
    Conflict,
}

impl Handback {
    pub fn code(&self) -> u16 {
        match self {
            Handback::Requeued | Handback::FinalisedJe | Handback::Superseded => 202,
            Handback::Unknown => 404,
            Handback::Conflict => 409,
        }
    }
}

/// `abort`: hands a held job back. `drain` refunds the claim's attempt;
/// `prep_failed` and `rejected` keep it, and end the job as JE at the limit.
pub fn abort(
    tx: &Connection,
    runner: &str,
    job_id: &str,
    reason: AbortReason,
    policy: &Policy,
) -> rusqlite::Result<Handback> {
    let handback = match holder(tx, job_id)? {
        None => Handback::Unknown,
        Some(h) if h.state != "leased" || h.leased_by.as_deref() != Some(runner) => Handback::Conflict,
        Some(h) if !h.current => {
            tx.execute("UPDATE jobs SET state = 'superseded', leased_by = NULL WHERE id = ?1", [job_id])?;
            Handback::Superseded
        }
        Some(h) if reason == AbortReason::Drain => {
            tx.execute("UPDATE jobs SET attempts = MAX(attempts - 1, 0) WHERE id = ?1", [job_id])?;
            requeue(tx, job_id)?;
            log::info!("job {job_id}: drained by {runner}, requeued (attempt refunded, {} left)", h.attempts - 1);
            Handback::Requeued
        }
        Some(h) if h.attempts >= policy.max_attempts => {
            finalise_je(tx, job_id, h.attempts)?;
            Handback::FinalisedJe
        }
        Some(h) => {
            requeue(tx, job_id)?;
            log::info!(
                "job {job_id}: aborted by {runner} ({}), requeued after {} attempts",
                reason.as_str(),
                h.attempts
            );
            Handback::Requeued
        }
    };
    if matches!(handback, Handback::Unknown | Handback::Conflict) {
        log::info!("job {job_id}: abort({}) from {runner} answered {}", reason.as_str(), handback.code());
    }
    record_call(tx, job_id, runner, "abort", Some(reason.as_str()), handback.code(), false);
    Ok(handback)
}

/// `events`: stores each event line of a job `runner` holds now. False:
/// it holds no such job (unknown, finished, handed back, reclaimed), so
/// stale progress never mixes with the current holder's.
pub fn add_events(tx: &Connection, runner: &str, job_id: &str, events: &[serde_json::Value]) -> rusqlite::Result<bool> {
    let held = matches!(holder(tx, job_id)?, Some(h) if h.state == "leased" && h.leased_by.as_deref() == Some(runner));
    if held {
        let now = db::now_ms();
        tx.execute("UPDATE jobs SET owned = 1 WHERE id = ?1", [job_id])?;
        let mut insert = tx.prepare_cached("INSERT INTO events (job_id, body, at) VALUES (?1, ?2, ?3)")?;
        for e in events {
            insert.execute(params![job_id, e.to_string(), now])?;
        }
    }
    Ok(held)
}

/// On start: the hub's own outage must not turn healthy leases into orphans
/// (runners could not beat while it was down), so every lease gets at least
/// a full TTL from now. Returns how many leases there were.
pub fn extend_leases(conn: &mut Connection, policy: &Policy) -> rusqlite::Result<usize> {
    let tx = db::immediate(conn)?;
    let n = tx.execute(
        "UPDATE jobs SET deadline = MAX(COALESCE(deadline, 0), ?1) WHERE state = 'leased'",
        [db::now_ms().saturating_add(policy.lease_ttl_ms)],
    )?;
    tx.commit()?;
    Ok(n)
}
