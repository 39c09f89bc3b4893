//! The one clock of both sides' records: wall time in milliseconds, as the
//! spool and the hub's database store it (integers, comparable across
//! processes and restarts).

/// Milliseconds since the epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    ms(since_epoch())
}

/// Microseconds since the epoch, for a phase timed from a stored moment.
pub fn now_us() -> i64 {
    i64::try_from(since_epoch().as_micros()).unwrap_or(i64::MAX)
}

/// A duration in whole milliseconds, as stored times are computed with:
/// `i64::MAX` past it (never wrapped negative).
pub fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `at_ms` plus `d`, saturating: a moment `d` after a stored one.
pub fn after_ms(at_ms: i64, d: std::time::Duration) -> i64 {
    at_ms.saturating_add(ms(d))
}

/// `Instant::now()` plus `d`, or a moment a century on when that is past
/// what an `Instant` holds: a deadline no duration can overflow.
pub fn deadline(d: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(d).or_else(|| now.checked_add(std::time::Duration::from_secs(100 * 365 * 86400))).unwrap_or(now)
}

fn since_epoch() -> std::time::Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn durations_saturate_and_never_wrap() {
        assert_eq!(super::ms(Duration::from_millis(1500)), 1500);
        assert_eq!(super::ms(Duration::MAX), i64::MAX);
        assert_eq!(super::after_ms(i64::MAX - 1, Duration::from_secs(1)), i64::MAX);
        assert_eq!(super::after_ms(1000, Duration::from_secs(2)), 3000);
        assert!(super::deadline(Duration::MAX) > std::time::Instant::now());
    }
}
