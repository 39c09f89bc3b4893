//! The spool's metric rows: the counters and the timings of phases, each
//! written in the transaction of what it counts (the `/metrics` text made
//! of them is [`crate::metrics`]).

use super::{Context, Result, Spool};
use crate::counter::{self, Counter};
use crate::phase::{self, Phase, Timing};
use rusqlite::params;

impl Spool {
    /// Adds `by` to a counter for an event the spool records nothing else
    /// for (a hub's error, a lost sandbox run). `labels` as
    /// [`counter::labels`] writes them.
    pub fn bump(&mut self, counter: Counter, labels: &str, by: i64) -> Result<()> {
        self.write(&format!("count {}", counter.name()), |tx| bump_in(tx, counter, labels, by))
    }

    /// Every counter: name, labels, value (none in a spool older than them).
    pub fn counters(&self) -> Result<Vec<(String, String, i64)>> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let mut st =
            self.conn.prepare("SELECT name, labels, value FROM counters ORDER BY name, labels").ctx("read counters")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).ctx("read counters")?;
        rows.collect::<rusqlite::Result<_>>().ctx("read counters")
    }

    /// The most recent `limit` timings of `phase` with `label` (µs), newest
    /// first.
    pub fn recent_timings(&self, phase: Phase, label: &str, limit: usize) -> Result<Vec<i64>> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT took_us FROM phases WHERE phase = ? AND label = ? ORDER BY ended_at DESC LIMIT ?")
            .ctx("read timings")?;
        let rows = st.query_map(params![phase.as_str(), label, limit as i64], |r| r.get(0)).ctx("read timings")?;
        rows.collect::<rusqlite::Result<_>>().ctx("read timings")
    }
}

/// Adds `by` to a counter (`labels` as [`counter::labels`] writes them).
pub(super) fn bump_in(tx: &rusqlite::Transaction, counter: Counter, labels: &str, by: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO counters (name, labels, value) VALUES (?, ?, ?)
         ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value",
        params![counter.name(), labels, by],
    )?;
    Ok(())
}

/// Records one timing of a claim's phase, ended at `now` (ms), and counts
/// it in its histogram: once, however often a restarted stage records it.
pub(super) fn time_in(tx: &rusqlite::Transaction, claim_id: i64, now: i64, t: &Timing) -> rusqlite::Result<()> {
    let fresh = tx.execute(
        "INSERT OR IGNORE INTO phases (claim_id, phase, item, label, ended_at, took_us) VALUES (?, ?, ?, ?, ?, ?)",
        params![claim_id, t.phase.as_str(), t.item, t.label, now, t.took_us],
    )? == 1;
    if fresh {
        let series = counter::phase_series(t.phase, t.label);
        let bucket = format!("{series},le=\"{}\"", phase::le(phase::bucket_of(t.took_us)));
        bump_in(tx, Counter::PhaseBucket, &bucket, 1)?;
        bump_in(tx, Counter::PhaseSumMicros, &series, t.took_us)?;
    }
    Ok(())
}
