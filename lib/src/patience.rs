//! How long to wait, and how often to try again: every retry schedule and
//! deadline of the runner in one place, each with the protocol's numbers.
//!
//! `OJ_TIME_SCALE` (default 1) multiplies every delay, poll and deadline
//! here, so a test can live through a three-minute hub outage in eighteen
//! seconds without a single number being different in production. What
//! the hub sets (the heartbeat interval, its lease, its poll interval) and
//! the timeouts of a call are the hub's and the network's, not scaled.

use std::time::Duration;

/// The factor every delay and deadline is multiplied by (`OJ_TIME_SCALE`).
pub fn scale() -> f64 {
    std::env::var("OJ_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(1.0)
}

/// `secs` seconds, scaled.
pub fn scaled(secs: f64) -> Duration {
    Duration::from_secs_f64(secs * scale())
}

/// A retry schedule: the delays before the 2nd, 3rd, … try; the last one
/// repeats when `repeat_last`.
#[derive(Clone, Debug)]
pub struct Schedule {
    steps: &'static [f64],
    repeat_last: bool,
}

impl Schedule {
    /// The delay before try `n + 1` (n counts tries made, from 1), or None
    /// when the schedule is spent.
    pub fn delay(&self, tries_made: usize) -> Option<Duration> {
        let i = tries_made.checked_sub(1)?;
        match self.steps.get(i) {
            Some(s) => Some(scaled(*s)),
            None if self.repeat_last => self.steps.last().map(|s| scaled(*s)),
            None => None,
        }
    }
}

/// Registration: 1, 2, 4, 8, 16, 30, 30, … s, forever (a 401 ends it).
pub const REGISTER: Schedule = Schedule { steps: &[1.0, 2.0, 4.0, 8.0, 16.0, 30.0], repeat_last: true };

/// Preparing a claim: 3 tries spaced 1 and 2 s, then `abort(prep_failed)`.
pub const PREP: Schedule = Schedule { steps: &[1.0, 2.0], repeat_last: false };

/// A heartbeat that failed, tried again: after 1 s, then every 2 s (until
/// one lands; never later than the heartbeat interval).
pub const BEAT_AGAIN: Schedule = Schedule { steps: &[1.0, 2.0], repeat_last: true };

/// Delivering outcomes and events through a hub that is away: 1, 2, 4, 8,
/// then 15 s, for as long as the outcome is kept ([`outcome_kept`]).
pub const PATIENT: Schedule = Schedule { steps: &[1.0, 2.0, 4.0, 8.0, 15.0], repeat_last: true };

/// How many failed tries of a claim's progress events its outcome waits
/// for: a hub answers 404 to events sent after the outcome landed, so the
/// events go first while the hub may still take them; past these tries the
/// outcome goes anyway (a verdict outranks its progress lines), but never
/// while the events' last try got no answer at all (the hub is away).
pub const OUTCOME_WAITS_FOR_EVENTS: usize = 4;

/// How long an outcome is offered to the hub before it is moved aside.
pub fn outcome_kept() -> Duration {
    scaled(2.0 * 3600.0)
}

/// The timeout of one call to the hub.
pub fn request_timeout() -> Duration {
    Duration::from_secs(10)
}

/// Connecting to the testdata channel.
pub fn testdata_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

/// Idle time allowed between reads of a download (testdata, code), scaled:
/// a download that stalls midway is the hub away, tried again patiently.
pub fn testdata_idle_timeout() -> Duration {
    scaled(30.0)
}

/// How often a stage re-reads the spool when nobody wakes it, scaled: a
/// lost wake-up costs this much latency, never a job.
pub fn spool_poll() -> Duration {
    scaled(1.0)
}

/// How long a claim request long-polls the hub, given `OJ_CLAIM_WAIT`:
/// scaled, then rounded up to whole seconds (the wire's unit), at most 30.
pub fn claim_wait(asked: Duration) -> u64 {
    (asked.as_secs_f64() * scale()).ceil().min(30.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_have_the_protocols_numbers() {
        let secs = |s: &Schedule, n| s.delay(n).map(|d| d.as_secs_f64());
        assert_eq!(
            (1..=8).map(|n| secs(&REGISTER, n).unwrap()).collect::<Vec<_>>(),
            [1., 2., 4., 8., 16., 30., 30., 30.]
        );
        assert_eq!(secs(&PREP, 1), Some(1.0));
        assert_eq!(secs(&PREP, 2), Some(2.0));
        assert_eq!(secs(&PREP, 3), None, "three tries, then the claim is handed back");
        // Patience lasts at least three minutes before an outcome is only "kept".
        let total: f64 = (1..=16).map(|n| secs(&PATIENT, n).unwrap()).sum();
        assert!(total >= 180.0, "{total}");
    }

    #[test]
    fn the_claim_wait_is_whole_seconds_at_most_30() {
        // Unscaled here (OJ_TIME_SCALE is unset for unit tests).
        let s = Duration::from_secs_f64;
        assert_eq!(claim_wait(s(5.0)), (5.0 * scale()).ceil() as u64);
        assert_eq!(claim_wait(s(0.0)), 0, "0 stays plain polls");
        assert_eq!(claim_wait(s(0.01)), 1, "a wait never rounds down to a plain poll");
        assert_eq!(claim_wait(s(600.0)), 30);
    }
}
