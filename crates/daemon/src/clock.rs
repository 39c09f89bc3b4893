//! The one clock of both sides' records: wall time in milliseconds, as the
//! spool and the hub's database store it (integers, comparable across
//! processes and restarts).

/// Milliseconds since the epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
