//! The lease: how the runner keeps a job it holds, and when it gives one up
//! for lost. `leased` beats ([`next_beat`]); every stage that acts on
//! claims first drops the lost ones ([`crate::spool::Spool::drop_lost`]),
//! which applies [`is_lost`]. The rules here are pure: the spool reads
//! them, they read no spool.
//!
//! The hub says nothing per job, so the lease-loss rule is the runner's
//! own: a claim is lost when no heartbeat was even attempted for it for
//! longer than the lease the runner assumes ([`assumed`]), that is, the
//! runner was down. A hub that is away or keeps a beat waiting does not
//! make a lease lost: the beat is attempted, and noted as it begins.

use crate::patience;
use std::time::Duration;

/// The spool's control key where an older `leased` kept when it last
/// attempted a beat (ms since the epoch); read beside the beat file.
pub const LAST_BEAT_AT: &str = "last_beat_at";

/// The lease the hub grants, as the runner assumes it: two heartbeats (the
/// protocol's 30 s for a 15 s heartbeat). The hub does not tell; assuming
/// two intervals keeps the runner on the safe side of any hub that follows
/// the protocol's ratio.
pub fn assumed(heartbeat_interval_sec: i64) -> Duration {
    interval(heartbeat_interval_sec).saturating_mul(2)
}

/// The heartbeat interval of a `heartbeat_interval_sec`, in its range
/// ([`crate::protocol::HEARTBEAT_INTERVAL_SEC`]) whatever was stored.
pub fn interval(heartbeat_interval_sec: i64) -> Duration {
    let range = crate::protocol::HEARTBEAT_INTERVAL_SEC;
    Duration::from_secs(heartbeat_interval_sec.clamp(*range.start(), *range.end()).unsigned_abs())
}

/// The lease-loss rule: a claim made at `claimed_at_ms` is lost at `now_ms`
/// when neither it nor the last beat attempted (`last_beat_ms`) is within
/// `lease` of now. All times in ms since the epoch; the sum saturates.
pub fn is_lost(claimed_at_ms: i64, last_beat_ms: i64, lease: Duration, now_ms: i64) -> bool {
    ojrunner_daemon::clock::after_ms(claimed_at_ms.max(last_beat_ms), lease) < now_ms
}

/// How long after a beat began the next is due: the interval, or sooner
/// after `failed` beats in a row got no 204 ([`patience::BEAT_AGAIN`]), but
/// never later than the interval.
pub fn next_beat(interval: Duration, failed: usize) -> Duration {
    match failed {
        0 => interval,
        n => patience::BEAT_AGAIN.delay(n).unwrap_or(interval).min(interval),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_lost_only_when_no_beat_was_attempted_for_longer_than_the_lease() {
        let lease = assumed(15);
        assert_eq!(lease, Duration::from_secs(30), "two heartbeats");
        assert_eq!(assumed(0), Duration::from_secs(2), "a hub's 0 is taken as 1 s");
        assert_eq!(assumed(i64::MAX), Duration::from_secs(600), "and a huge one as 300 s");
        assert_eq!(assumed(i64::MIN), Duration::from_secs(2));
        assert!(!is_lost(i64::MAX - 5, 0, Duration::MAX, 0), "a sum past i64 saturates, never wraps");
        let (claimed, ms) = (1_000_000, 30_000);
        // Never beaten for: the claim's own time counts as a beat.
        assert!(!is_lost(claimed, 0, lease, claimed + ms), "at the lease's end exactly, still held");
        assert!(is_lost(claimed, 0, lease, claimed + ms + 1), "past it, lost");
        // A beat attempted since (answered or not) renews it.
        let beat = claimed + 20_000;
        assert!(!is_lost(claimed, beat, lease, claimed + ms + 1), "a beat 20 s in keeps it");
        assert!(!is_lost(claimed, beat, lease, beat + ms));
        assert!(is_lost(claimed, beat, lease, beat + ms + 1), "and lapses a lease after that beat");
        // A beat older than the claim does not shorten its lease.
        assert!(!is_lost(claimed, claimed - 60_000, lease, claimed + ms));
    }

    #[test]
    fn a_failed_beat_is_tried_again_soon_never_later_than_the_interval() {
        let s = Duration::from_secs;
        assert_eq!(next_beat(s(15), 0), s(15));
        assert_eq!(next_beat(s(15), 1), patience::BEAT_AGAIN.delay(1).unwrap());
        assert!(next_beat(s(15), 1) < s(15) && next_beat(s(15), 9) < s(15), "{:?}", next_beat(s(15), 9));
        assert_eq!(next_beat(Duration::from_millis(500), 3), Duration::from_millis(500));
    }
}
