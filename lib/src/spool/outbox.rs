//! The outbox: the outcomes owed to the hub, at most one a claim, and
//! those given up on (`dead_outcomes`).

use super::claims::{discard_in, move_in};
use super::metric_rows::{bump_in, time_in};
use super::state::Transition;
use super::{now_ms, Context, Result, Spool};
use crate::counter::{self, Counter};
use crate::outcome::{self, OutcomeKind};
use crate::phase::{Phase, Timing};
use crate::protocol::AbortReason;
use rusqlite::{params, OptionalExtension};

/// An outcome waiting to be delivered.
#[derive(Clone, Debug)]
pub struct OutboxItem {
    pub claim_id: i64,
    pub job_id: String,
    pub runner_id: String,
    pub kind: OutcomeKind,
    pub body: String,
    pub created_at: i64,
    pub tries: i64,
}

impl Spool {
    /// Outcomes due for a (re)try, oldest first.
    pub fn outbox_due(&self, now: i64) -> Result<Vec<OutboxItem>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT o.claim_id, c.job_id, c.runner_id, o.kind, o.body, o.created_at, o.tries
                 FROM outbox o JOIN claims c USING (claim_id)
                 WHERE o.next_try_at <= ? ORDER BY o.next_try_at, o.claim_id",
            )
            .ctx("read outbox")?;
        let rows = st
            .query_map([now], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })
            .ctx("read outbox")?;
        let mut out = Vec::new();
        for row in rows {
            let (claim_id, job_id, runner_id, kind, body, created_at, tries) = row.ctx("read outbox row")?;
            let Some(kind) = OutcomeKind::from_row(&kind) else {
                log::error!("claim {claim_id}: outbox row of unknown kind {kind:?} (corrupt row); skipped");
                continue;
            };
            out.push(OutboxItem { claim_id, job_id, runner_id, kind, body, created_at, tries });
        }
        Ok(out)
    }

    /// How many outcomes wait, and when the next one is due.
    pub fn outbox_len(&self) -> Result<(i64, Option<i64>)> {
        self.conn
            .query_row("SELECT count(*), min(next_try_at) FROM outbox", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .ctx("count outbox")
    }

    /// The hub answered finally: the outcome leaves the spool and the claim
    /// is reported (counted, and its report and whole time recorded).
    pub fn outbox_settle(&mut self, claim_id: i64, note: &str) -> Result<()> {
        self.write("settle outcome", |tx| {
            let owed: Option<(String, i64, i64)> = tx
                .query_row(
                    "SELECT o.kind, o.created_at, c.claimed_at FROM outbox o JOIN claims c USING (claim_id) WHERE claim_id = ?",
                    [claim_id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            tx.execute("DELETE FROM outbox WHERE claim_id = ?", [claim_id])?;
            tx.execute("DELETE FROM events WHERE claim_id = ?", [claim_id])?;
            let now = now_ms();
            let moved = move_in(tx, claim_id, Transition::Report, now, Some(note))?.is_some();
            if let (true, Some((kind, owed_at, claimed_at))) = (moved, owed) {
                let outcome = OutcomeKind::from_row(&kind).map_or("abort", OutcomeKind::verb);
                bump_in(tx, Counter::JobsReported, &counter::labels(&[("outcome", outcome)]), 1)?;
                time_in(tx, claim_id, now, &Timing::labelled(Phase::Report, outcome, (now - owed_at) * 1000))?;
                time_in(tx, claim_id, now, &Timing::labelled(Phase::Total, outcome, (now - claimed_at) * 1000))?;
            }
            Ok(())
        })
    }

    /// The hub refused a `complete` (400): the claim goes back as
    /// `abort(rejected)` instead, in one transaction.
    pub fn outbox_reject(&mut self, claim_id: i64, note: &str) -> Result<()> {
        let body = outcome::abort_body(AbortReason::Rejected);
        let kind = OutcomeKind::Abort(AbortReason::Rejected).row();
        self.write("reject outcome", |tx| {
            let now = now_ms();
            tx.execute(
                "UPDATE outbox SET kind = ?, body = ?, next_try_at = ?, tries = 0, last_error = ? WHERE claim_id = ?",
                params![kind, body, now, note, claim_id],
            )?;
            if move_in(tx, claim_id, Transition::Reject, now, Some(note))?.is_some() {
                bump_in(tx, Counter::JobsAborted, &counter::labels(&[("reason", AbortReason::Rejected.as_str())]), 1)?;
            }
            Ok(())
        })
    }

    /// Not delivered this time: try again at `next_try_at`.
    pub fn outbox_later(&mut self, claim_id: i64, next_try_at: i64, error: &str) -> Result<()> {
        self.write("postpone outcome", |tx| {
            tx.execute(
                "UPDATE outbox SET next_try_at = ?, tries = tries + 1, last_error = ? WHERE claim_id = ?",
                params![next_try_at, error, claim_id],
            )
        })?;
        Ok(())
    }

    /// Undeliverable for too long: moved aside (kept for an operator), and
    /// the claim ends.
    pub fn outbox_bury(&mut self, claim_id: i64, error: &str) -> Result<()> {
        self.write("bury outcome", |tx| {
            let now = now_ms();
            tx.execute(
                "INSERT OR REPLACE INTO dead_outcomes (claim_id, job_id, kind, body, created_at, died_at, last_error)
                 SELECT o.claim_id, c.job_id, o.kind, o.body, o.created_at, ?, ? FROM outbox o JOIN claims c USING (claim_id)
                 WHERE o.claim_id = ?",
                params![now, error, claim_id],
            )?;
            tx.execute("DELETE FROM outbox WHERE claim_id = ?", [claim_id])?;
            discard_in(tx, claim_id, &format!("outcome undeliverable: {error}"), "undeliverable")?;
            Ok(())
        })
    }

    pub fn dead_count(&self) -> Result<i64> {
        self.conn.query_row("SELECT count(*) FROM dead_outcomes", [], |r| r.get(0)).ctx("count dead outcomes")
    }

    /// When the oldest outcome still owed was written (ms), if one is.
    pub fn outbox_oldest(&self) -> Result<Option<i64>> {
        self.conn.query_row("SELECT min(created_at) FROM outbox", [], |r| r.get(0)).ctx("read the outbox's oldest")
    }
}
