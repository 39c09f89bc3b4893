//! What the benchmarks (`make bench`, `make bench-e2e`) share: percentiles
//! of a sample, targets printed PASS or MISS, settings from the
//! environment, the machine's description.

use std::time::Duration;

/// The figures of a sample of times: nearest-rank percentiles (with 20
/// samples, p99 is the largest), as `ojrunner::phase` takes them.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub p50: Duration,
    pub p99: Duration,
    pub min: Duration,
    pub max: Duration,
}

/// The [`Stats`] of `v` (not empty).
pub fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    Stats { p50: at(0.50), p99: at(0.99), min: v[0], max: v[v.len() - 1] }
}

/// A benchmark's targets, each printed PASS or MISS as it is checked; the
/// misses are counted for the last line.
#[derive(Default)]
pub struct Report {
    pub misses: usize,
}

impl Report {
    pub fn target(&mut self, name: &str, measured: String, ok: bool) {
        if !ok {
            self.misses += 1;
        }
        println!("  {:<4}  {name:<52} {measured}", if ok { "PASS" } else { "MISS" });
    }
}

/// A benchmark's setting from the environment, or its default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The machine a benchmark ran on, for the first line of its report: CPU
/// model, cores, kernel.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}", kernel.trim())
}
