//! Claims: their rows, their life from `claimed` to `reported` or
//! `discarded`, and the guarded transitions that move them.

use super::events::push_event;
use super::metric_rows::{bump_in, time_in};
use super::state::{sql_list, ClaimState, Transition};
use super::{now_ms, Context, Result, Spool, SpoolError};
use crate::counter::{self, Counter};
use crate::outcome::{self, OutcomeKind};
use crate::phase::{Phase, Timing};
use crate::protocol::{AbortReason, BadJob, CaseResult, Job, Outcome};
use rusqlite::{params, OptionalExtension};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

impl Spool {
    /// Records a claim the hub just handed out. Any older claim of the same
    /// job still held here is superseded in the same transaction: the hub
    /// handed the job again, so the old claim's work must never be reported.
    /// Returns the new claim id and the ids superseded.
    pub fn insert_claim(&mut self, runner_id: &str, job_id: &str, payload: &str) -> Result<(i64, Vec<i64>)> {
        self.write("record claim", |tx| {
            let old: Vec<i64> = tx
                .prepare(&format!(
                    "SELECT claim_id FROM claims WHERE job_id = ? AND state IN {}",
                    sql_list(&ClaimState::HELD)
                ))?
                .query_map([job_id], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for id in &old {
                discard_in(tx, *id, "superseded: the hub handed the job again", "superseded")?;
            }
            let now = now_ms();
            tx.execute(
                "INSERT INTO claims (job_id, runner_id, state, payload, claimed_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                params![job_id, runner_id, ClaimState::Claimed.as_str(), payload, now, now],
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
        let mut st = self
            .conn
            .prepare(&format!("{CLAIM_SELECT} WHERE state IN {} ORDER BY claim_id", sql_list(states)))
            .ctx("list claims")?;
        let rows = st.query_map([], claim_row).ctx("list claims")?;
        rows.map(|r| r.ctx("read claim row")?).collect()
    }

    /// How many claims hold a lease: what capacity counts.
    pub fn held_count(&self) -> Result<i64> {
        self.conn
            .query_row(
                &format!("SELECT count(*) FROM claims WHERE state IN {}", sql_list(&ClaimState::HELD)),
                [],
                |r| r.get(0),
            )
            .ctx("count held claims")
    }

    /// The jobs whose leases the runner keeps, each once however many claims
    /// it has.
    pub fn held_jobs(&self) -> Result<Vec<String>> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT DISTINCT job_id FROM claims WHERE state IN {} ORDER BY job_id",
                sql_list(&ClaimState::HELD)
            ))
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
            if move_in(tx, claim_id, Transition::Prep, now, None)?.is_none() {
                return Ok(false);
            }
            tx.execute("UPDATE claims SET testdata = ? WHERE claim_id = ?", params![td, claim_id])?;
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
                .prepare(&format!(
                    "SELECT claim_id FROM claims WHERE state IN {} ORDER BY claim_id",
                    sql_list(Transition::Abort.from())
                ))?
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
            advance(tx, claim_id, Transition::Start, now_ms(), Phase::Queued)
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
            if !is_in(tx, claim_id, ClaimState::Started)? {
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
            if !advance(tx, claim_id, Transition::Judge, now, Phase::Judge)? {
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

    /// Forgets claims that ended (reported, discarded) before `before_ms`,
    /// with their case results: the spool keeps what is owed, not history.
    pub fn prune_ended(&mut self, before_ms: i64) -> Result<usize> {
        self.write("prune ended claims", |tx| {
            let ended = format!("FROM claims WHERE state IN {} AND updated_at < ?1", sql_list(&ClaimState::ENDED));
            tx.execute(&format!("DELETE FROM case_results WHERE claim_id IN (SELECT claim_id {ended})"), [before_ms])?;
            tx.execute(&format!("DELETE FROM events WHERE claim_id IN (SELECT claim_id {ended})"), [before_ms])?;
            tx.execute(&format!("DELETE FROM phases WHERE claim_id IN (SELECT claim_id {ended})"), [before_ms])?;
            tx.execute(&format!("DELETE {ended}"), [before_ms])
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
        let held: Vec<ClaimRow> = self.claims_in(&ClaimState::HELD)?;
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
}

const CLAIM_SELECT: &str = "SELECT claim_id, job_id, runner_id, state, payload, claimed_at, testdata, note FROM claims";

fn claim_row(r: &rusqlite::Row) -> rusqlite::Result<Result<ClaimRow>> {
    let state: String = r.get(3)?;
    let testdata: Option<String> = r.get(6)?;
    let state = ClaimState::parse(&state)
        .ok_or_else(|| SpoolError::Corrupt(format!("spool: unknown claim state {state:?} (corrupt row?)")));
    Ok(state.map(|state| ClaimRow {
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

pub(super) fn is_in(tx: &rusqlite::Transaction, claim_id: i64, state: ClaimState) -> rusqlite::Result<bool> {
    let s: Option<String> =
        tx.query_row("SELECT state FROM claims WHERE claim_id = ?", [claim_id], |r| r.get(0)).optional()?;
    Ok(s.as_deref() == Some(state.as_str()))
}

/// Moves a claim by `t` at `now` if it is in a state `t` leaves (the
/// guard: [`Transition::from`]), to [`Transition::to`], noting why if
/// `note` says. Returns when it last moved before, or `None` (nothing
/// changed) if it is elsewhere: a stage acting on a claim that moved under
/// it. The only way a claim's state changes; what must go with the move
/// (its outcome queued, its counters) goes in the same transaction.
pub(super) fn move_in(
    tx: &rusqlite::Transaction,
    claim_id: i64,
    t: Transition,
    now: i64,
    note: Option<&str>,
) -> rusqlite::Result<Option<i64>> {
    let since: Option<i64> = tx
        .query_row(
            &format!("SELECT updated_at FROM claims WHERE claim_id = ? AND state IN {}", sql_list(t.from())),
            [claim_id],
            |r| r.get(0),
        )
        .optional()?;
    if since.is_some() {
        tx.execute(
            "UPDATE claims SET state = ?, note = coalesce(?, note), updated_at = ? WHERE claim_id = ?",
            params![t.to().as_str(), note, now, claim_id],
        )?;
    }
    Ok(since)
}

pub(super) fn abort_in(
    tx: &rusqlite::Transaction,
    claim_id: i64,
    reason: AbortReason,
    note: &str,
) -> rusqlite::Result<bool> {
    let now = now_ms();
    if move_in(tx, claim_id, Transition::Abort, now, Some(note))?.is_none() {
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
pub(super) fn discard_in(tx: &rusqlite::Transaction, claim_id: i64, why: &str, reason: &str) -> rusqlite::Result<bool> {
    let moved = move_in(tx, claim_id, Transition::Discard, now_ms(), Some(why))?.is_some();
    tx.execute("DELETE FROM outbox WHERE claim_id = ?", [claim_id])?;
    tx.execute("DELETE FROM events WHERE claim_id = ?", [claim_id])?;
    if moved {
        bump_in(tx, Counter::JobsDiscarded, &counter::labels(&[("reason", reason)]), 1)?;
    }
    Ok(moved)
}

/// Moves a claim by `t` at `now` ([`move_in`]), timing `phase` from when
/// it last moved; false (nothing done) if it is not in a state `t` leaves.
pub(super) fn advance(
    tx: &rusqlite::Transaction,
    claim_id: i64,
    t: Transition,
    now: i64,
    phase: Phase,
) -> rusqlite::Result<bool> {
    let Some(since) = move_in(tx, claim_id, t, now, None)? else { return Ok(false) };
    time_in(tx, claim_id, now, &Timing::new(phase, (now - since) * 1000))?;
    Ok(true)
}
