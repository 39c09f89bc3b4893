//! The one clock of both sides' records: wall time in milliseconds, as the
//! spool and the hub's database store it (integers, comparable across
//! processes and restarts).

/// Milliseconds since the epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    since_epoch().as_millis() as i64
}

/// Microseconds since the epoch, for a phase timed from a stored moment.
pub fn now_us() -> i64 {
    since_epoch().as_micros() as i64
}

fn since_epoch() -> std::time::Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
}
