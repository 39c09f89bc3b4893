//! Durations as operators write them: seconds, whole or decimal (`60`,
//! `60.0`, `0.5`: an env file written for a Python runner says either), on
//! every program's command line and in its environment alike.

use std::time::Duration;

/// A value that is not a duration in seconds; it names the setting and the
/// value as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadDuration(pub String);

/// `value`, a duration in seconds; anything else (a unit, a sign, `NaN`,
/// `inf`, an empty string) is an error naming `what` and the value, for the
/// caller to exit 100 with (never a default in its place).
pub fn seconds(what: &str, value: &str) -> Result<Duration, BadDuration> {
    let v = value.trim();
    let (whole, fraction) = v.split_once('.').unwrap_or((v, "0"));
    let digits = |s: &str| !s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit());
    let parsed = (digits(whole) && digits(fraction)).then(|| v.parse::<f64>().ok()).flatten();
    parsed
        .map(Duration::from_secs_f64)
        .ok_or_else(|| BadDuration(format!("{what}={value:?} is not a duration in seconds (such as 60, 60.0 or 0.5)")))
}

/// Whole seconds, rounded up, at least 1: what the hub protocol's
/// `*_interval_sec` fields can carry.
pub fn whole_seconds(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_and_decimal_seconds_are_durations_and_nothing_else_is() {
        assert_eq!(seconds("X", "60"), Ok(Duration::from_secs(60)));
        assert_eq!(seconds("X", "60.0"), Ok(Duration::from_secs(60)));
        assert_eq!(seconds("X", " 0.5 "), Ok(Duration::from_millis(500)));
        for bad in ["", "-1", "1e3", "NaN", "inf", "5s", ".5", "5.", "1.2.3", "9999999999999"] {
            let e = seconds("OJ_THING", bad).unwrap_err();
            assert!(e.0.contains("OJ_THING") && e.0.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        assert_eq!(whole_seconds(Duration::from_millis(500)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(whole_seconds(Duration::ZERO), 1);
    }
}
