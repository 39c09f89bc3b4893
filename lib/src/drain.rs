//! The drain order as one table: which stage each step stops, how much of
//! the drain's deadline it may take, when it is done, and what comes next.
//! `runnerd` walks it ([`crate::stage::runnerd`]); the rules are here so
//! they can be read, and tested, without a process.
//!
//! 1. `claimd`: claims nothing more; claims not started go back as
//!    `abort(drain)`. A capped share, so a hub that hangs cannot eat the
//!    time the jobs in flight need.
//! 2. `judge-exec`: finishes the claims in flight, up to the deadline less
//!    a reserve for reporting them.
//! 3. `reportd`: delivers everything queued, up to the deadline.
//! 4. `leased`, last: leases stay renewed until the final sends; it gets a
//!    few seconds even past the deadline to say goodbye.
//!
//! After the first two steps the spool is scanned again: anything claimed
//! or prepped late goes back as `abort(drain)` too.

use crate::patience;
use std::time::Duration;

/// A step of the drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Claimd,
    Judge,
    Report,
    Leased,
}

/// How long a step may run, measured from the drain's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// From the step's start, a capped share of the deadline ([`claimd_share`]).
    Capped,
    /// Up to the deadline less the reporting reserve ([`reserve`]).
    LessReserve,
    /// Up to the deadline.
    Deadline,
    /// Up to the deadline, but at least [`LAST_WORD`] from the step's start.
    LastWord,
}

/// When a step's work is done: its stage has exited, and…
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// …nothing more.
    Exited,
    /// …no claim is still being judged.
    NoneStarted,
    /// …the outbox is empty.
    OutboxEmpty,
}

/// One row of the drain table.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub step: Step,
    /// The stage this step stops (TERM).
    pub stage: &'static str,
    /// What the step does, for the log.
    pub does: &'static str,
    pub share: Share,
    pub done: Done,
    /// Whether the spool is scanned for unstarted claims after the step.
    pub scan_after: bool,
    /// The step after this one; None: the drain is over.
    pub next: Option<Step>,
}

/// The drain, in order.
pub const ORDER: [Row; 4] = [
    Row {
        step: Step::Claimd,
        stage: "claimd",
        does: "claimd (claiming nothing more, handing back what has not started)",
        share: Share::Capped,
        done: Done::Exited,
        scan_after: true,
        next: Some(Step::Judge),
    },
    Row {
        step: Step::Judge,
        stage: "judge-exec",
        does: "judge-exec (finishing claims in flight)",
        share: Share::LessReserve,
        done: Done::NoneStarted,
        scan_after: true,
        next: Some(Step::Report),
    },
    Row {
        step: Step::Report,
        stage: "reportd",
        does: "reportd (delivering what is queued)",
        share: Share::Deadline,
        done: Done::OutboxEmpty,
        scan_after: false,
        next: Some(Step::Leased),
    },
    Row {
        step: Step::Leased,
        stage: "leased",
        does: "leased",
        share: Share::LastWord,
        done: Done::Exited,
        scan_after: false,
        next: None,
    },
];

/// The stages in start order: the drain's reversed, so that what the drain
/// stops last (leased) runs before anything is claimed, and claimd, stopped
/// first, starts last (runnerd's start, its status, the restart counters).
pub const START_ORDER: [&str; ORDER.len()] = start_order();

/// [`ORDER`]'s stages, last first.
const fn start_order() -> [&'static str; ORDER.len()] {
    let mut order = [""; ORDER.len()];
    let mut i = 0;
    while i < order.len() {
        order[i] = ORDER[order.len() - 1 - i].stage;
        i += 1;
    }
    order
}

/// The time `leased` gets from its step's start, even past the deadline.
pub const LAST_WORD: Duration = Duration::from_secs(5);

/// The row of a step.
pub fn row(step: Step) -> &'static Row {
    ORDER.iter().find(|r| r.step == step).expect("every step has a row")
}

/// The share of the deadline kept for reporting: a sixth, at most 60 s.
pub fn reserve(total: Duration) -> Duration {
    (total / 6).min(Duration::from_secs(60))
}

/// claimd's share: a sixth of the deadline, at most 60 s (scaled) but never
/// capped below 20 s.
pub fn claimd_share(total: Duration) -> Duration {
    (total / 6).min(patience::scaled(60.0).max(Duration::from_secs(20)))
}

impl Row {
    /// Until when (from the drain's start) this step may run, given when
    /// it began (`step_at`, from the drain's start) and the deadline.
    pub fn until(&self, step_at: Duration, total: Duration) -> Duration {
        match self.share {
            Share::Capped => (step_at + claimd_share(total)).min(total),
            Share::LessReserve => total.saturating_sub(reserve(total)).max(step_at),
            Share::Deadline => total,
            Share::LastWord => total.max(step_at + LAST_WORD),
        }
    }

    /// Whether the step's work is done: its stage `running` or not, with
    /// `started` claims being judged and `outbox` outcomes queued.
    pub fn is_done(&self, running: bool, started: usize, outbox: i64) -> bool {
        !running
            && match self.done {
                Done::Exited => true,
                Done::NoneStarted => started == 0,
                Done::OutboxEmpty => outbox == 0,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_stops_claimd_then_judge_exec_then_reportd_and_leased_last() {
        let stages: Vec<&str> = ORDER.iter().map(|r| r.stage).collect();
        assert_eq!(stages, ["claimd", "judge-exec", "reportd", "leased"]);
        // Each row leads to the next, the last to the end.
        for pair in ORDER.windows(2) {
            assert_eq!(pair[0].next, Some(pair[1].step), "{:?}", pair[0]);
        }
        assert_eq!(ORDER[3].next, None);
        for r in &ORDER {
            assert_eq!(row(r.step).stage, r.stage);
        }
        // Claims not started are handed back after claimd and after
        // judge-exec (a late one), never after the leases go.
        let scans: Vec<bool> = ORDER.iter().map(|r| r.scan_after).collect();
        assert_eq!(scans, [true, true, false, false]);
    }

    #[test]
    fn each_step_gets_its_share_of_the_deadline() {
        let s = Duration::from_secs;
        let total = s(540);
        // claimd: a capped share from its start.
        assert_eq!(row(Step::Claimd).until(s(0), total), s(90).min(patience::scaled(60.0).max(s(20))));
        assert_eq!(row(Step::Claimd).until(s(0), s(12)), s(2), "a sixth of a short deadline");
        assert_eq!(row(Step::Claimd).until(s(539), total), total, "never past the deadline");
        // judge-exec: up to the deadline less the reporting reserve.
        assert_eq!(row(Step::Judge).until(s(10), total), s(480));
        assert_eq!(row(Step::Judge).until(s(10), s(12)), s(10), "no time left is no time, not a panic");
        assert_eq!(row(Step::Judge).until(s(1), s(12)), s(10));
        // reportd: the whole deadline; leased: a last word past it.
        assert_eq!(row(Step::Report).until(s(500), total), total);
        assert_eq!(row(Step::Leased).until(s(500), total), total);
        assert_eq!(row(Step::Leased).until(s(538), total), s(543));
    }

    #[test]
    fn a_step_is_done_when_its_stage_exited_and_its_work_is() {
        for r in &ORDER {
            assert!(!r.is_done(true, 0, 0), "{:?}: running", r.step);
            assert!(r.is_done(false, 0, 0), "{:?}: exited, nothing left", r.step);
        }
        assert!(!row(Step::Judge).is_done(false, 1, 0), "a claim still started: judge-exec again");
        assert!(row(Step::Judge).is_done(false, 0, 3), "the outbox is reportd's");
        assert!(!row(Step::Report).is_done(false, 0, 1), "an outcome still queued: reportd again");
        assert!(row(Step::Report).is_done(false, 1, 0));
        assert!(row(Step::Claimd).is_done(false, 2, 2) && row(Step::Leased).is_done(false, 2, 2));
    }
}
