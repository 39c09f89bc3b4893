//! Progress events waiting to be sent, bounded per claim.

use super::{Context, Result, Spool};
use rusqlite::{params, OptionalExtension};

/// Event lines kept per claim while the hub cannot take them.
pub const MAX_EVENTS_PER_CLAIM: i64 = 50_000;

/// One progress event waiting to be sent.
#[derive(Clone, Debug)]
pub struct EventRow {
    pub id: i64,
    pub claim_id: i64,
    pub body: String,
}

impl Spool {
    /// Queues a progress event for a claim still held.
    pub fn add_event(&mut self, claim_id: i64, body: &str) -> Result<()> {
        self.add_events(claim_id, &[body])
    }

    /// Queues several progress events in one transaction.
    pub fn add_events(&mut self, claim_id: i64, bodies: &[&str]) -> Result<()> {
        self.write("queue events", |tx| bodies.iter().try_for_each(|b| push_event(tx, claim_id, b)))
    }

    /// Claims with events waiting.
    pub fn event_claims(&self) -> Result<Vec<(i64, String, String)>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT DISTINCT e.claim_id, c.job_id, c.runner_id FROM events e JOIN claims c USING (claim_id) ORDER BY e.claim_id",
            )
            .ctx("list event claims")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).ctx("list event claims")?;
        rows.collect::<rusqlite::Result<_>>().ctx("list event claims")
    }

    /// The next batch of a claim's events (oldest first) and how many were
    /// dropped for lack of room since the last batch went.
    pub fn events(&self, claim_id: i64, limit: usize) -> Result<(Vec<EventRow>, i64)> {
        let mut st = self
            .conn
            .prepare("SELECT id, claim_id, body FROM events WHERE claim_id = ? ORDER BY id LIMIT ?")
            .ctx("read events")?;
        let rows = st
            .query_map(params![claim_id, limit as i64], |r| {
                Ok(EventRow { id: r.get(0)?, claim_id: r.get(1)?, body: r.get(2)? })
            })
            .ctx("read events")?;
        let rows = rows.collect::<rusqlite::Result<Vec<_>>>().ctx("read events")?;
        let lost: i64 = self
            .conn
            .query_row("SELECT events_lost FROM claims WHERE claim_id = ?", [claim_id], |r| r.get(0))
            .optional()
            .ctx("read events lost")?
            .unwrap_or(0);
        Ok((rows, lost))
    }

    /// The hub took events up to `last_id` (and the lost-count line).
    pub fn events_sent(&mut self, claim_id: i64, last_id: i64) -> Result<()> {
        self.write("delete sent events", |tx| {
            tx.execute("DELETE FROM events WHERE claim_id = ? AND id <= ?", params![claim_id, last_id])?;
            tx.execute("UPDATE claims SET events_lost = 0 WHERE claim_id = ?", [claim_id])?;
            Ok(())
        })
    }

    /// The hub has no events channel for this job: drop its events.
    pub fn events_drop(&mut self, claim_id: i64) -> Result<()> {
        self.write("drop events", |tx| tx.execute("DELETE FROM events WHERE claim_id = ?", [claim_id]))?;
        Ok(())
    }
}

pub(super) fn push_event(tx: &rusqlite::Transaction, claim_id: i64, body: &str) -> rusqlite::Result<()> {
    tx.execute("INSERT INTO events (claim_id, body) VALUES (?, ?)", params![claim_id, body])?;
    // Cheap test first: the count is only taken once the rowid says it may be over.
    let first: i64 = tx
        .query_row("SELECT min(id) FROM events WHERE claim_id = ?", [claim_id], |r| r.get::<_, Option<i64>>(0))?
        .unwrap_or(0);
    if tx.last_insert_rowid() - first < MAX_EVENTS_PER_CLAIM {
        return Ok(());
    }
    let n: i64 = tx.query_row("SELECT count(*) FROM events WHERE claim_id = ?", [claim_id], |r| r.get(0))?;
    if n > MAX_EVENTS_PER_CLAIM {
        // The oldest go first; a line in the next batch says how many.
        let over = n - MAX_EVENTS_PER_CLAIM;
        tx.execute(
            "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE claim_id = ? ORDER BY id LIMIT ?)",
            params![claim_id, over],
        )?;
        tx.execute("UPDATE claims SET events_lost = events_lost + ? WHERE claim_id = ?", params![over, claim_id])?;
    }
    Ok(())
}
