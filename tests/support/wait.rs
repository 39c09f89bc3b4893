//! Waiting on a condition with a deadline, never a sleep-and-hope: a
//! deadline bounds liveness (how long before the test gives up), it does
//! not measure speed, so every limit here is generous.

use std::time::{Duration, Instant};

/// Waits until `cond` returns `Some`, polling every 50 ms, or panics with
/// `what` once `limit` has passed. Limits are generous: they bound liveness,
/// they do not measure speed.
pub fn wait_for<T>(what: &str, limit: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() > end {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}
