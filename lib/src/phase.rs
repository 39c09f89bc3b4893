//! The phases of a claim, timed: what each one spans, the buckets its
//! histogram counts in, and the percentile rule `runnerd status` reads
//! recent timings by.
//!
//! Each phase ends in a stage's transaction that moves the claim (the spool
//! records it there: [`crate::spool::Spool`]), so a timing is written once,
//! with the event it times, and survives every restart. The spool keeps one
//! row per phase of a claim (per case for [`Phase::Case`]) for as long as
//! it keeps the claim, and a histogram per phase that only ever grows.
//!
//! ```text
//! hub's answer read ──code──▶ code unpacked ──testdata──▶ prepped ──queued──▶ started
//! started ──compile──▶ first case runs ──case (each, run and checked)──▶ … ──▶ judged
//! judged or aborted ──report──▶ reported;   hub's answer read ──total──▶ reported
//! ```
//! `judge` spans started to judged. Waiting at the hub is not a phase:
//! Normal-OJ's payload does not say when the job was submitted.

/// A phase of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// The hub's answer read to the submission's code downloaded and
    /// unpacked (prep tries that failed included).
    Code,
    /// The code unpacked to the testdata ready; labelled cache `hit` or `miss`.
    Testdata,
    /// Prepped to started: waiting for a free worker.
    Queued,
    /// Started to the first case running: staging, the checker, the compile.
    Compile,
    /// One case run and checked (wall time), per case.
    Case,
    /// Started to judged: every case, and the outcome written.
    Judge,
    /// Judged (or aborted) to the hub's final answer to the outcome;
    /// labelled by outcome, `complete` or `abort`.
    Report,
    /// The hub's answer read to the hub's final answer to the outcome;
    /// labelled by outcome.
    Total,
}

impl Phase {
    pub const ALL: [Phase; 8] = [
        Phase::Code,
        Phase::Testdata,
        Phase::Queued,
        Phase::Compile,
        Phase::Case,
        Phase::Judge,
        Phase::Report,
        Phase::Total,
    ];

    /// Its name, in the spool and in the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Code => "code",
            Phase::Testdata => "testdata",
            Phase::Queued => "queued",
            Phase::Compile => "compile",
            Phase::Case => "case",
            Phase::Judge => "judge",
            Phase::Report => "report",
            Phase::Total => "total",
        }
    }

    /// The name of its label and the values it takes (`None`: unlabelled).
    pub fn label(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            Phase::Testdata => Some(("cache", &["hit", "miss"])),
            Phase::Report | Phase::Total => Some(("outcome", &["complete", "abort"])),
            _ => None,
        }
    }
}

/// One timing of a phase, as a stage hands it to the spool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    pub phase: Phase,
    /// Which one, when a claim has several (a case: `TTCC`); else empty.
    pub item: String,
    /// The label's value ([`Phase::label`]); else empty.
    pub label: &'static str,
    /// How long it took, in microseconds.
    pub took_us: i64,
}

impl Timing {
    pub fn new(phase: Phase, took_us: i64) -> Timing {
        Timing { phase, item: String::new(), label: "", took_us: took_us.max(0) }
    }

    pub fn labelled(phase: Phase, label: &'static str, took_us: i64) -> Timing {
        Timing { label, ..Timing::new(phase, took_us) }
    }

    /// A case's timing; `item` is `TTCC`, as its files are named.
    pub fn case(task: usize, case: usize, took: std::time::Duration) -> Timing {
        Timing { item: format!("{task:02}{case:02}"), ..Timing::new(Phase::Case, took.as_micros() as i64) }
    }
}

/// The upper bounds of the histogram's buckets, in microseconds (the
/// Prometheus `le`, in seconds, is these over a million), from a fast case
/// to a download waited out; one more bucket, `+Inf`, takes the rest.
#[rustfmt::skip]
pub const BUCKETS_US: [i64; 18] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000, 300_000_000, 1_800_000_000,
];

/// The bucket a duration is counted in: the first whose bound it does not
/// exceed (a bound is inclusive, as Prometheus' `le` says), or
/// `BUCKETS_US.len()` for `+Inf`.
pub fn bucket_of(took_us: i64) -> usize {
    BUCKETS_US.iter().position(|&le| took_us <= le).unwrap_or(BUCKETS_US.len())
}

/// A bucket's `le` as Prometheus writes it: seconds, or `+Inf`.
pub fn le(bucket: usize) -> String {
    match BUCKETS_US.get(bucket) {
        Some(us) => seconds(*us),
        None => "+Inf".into(),
    }
}

/// Microseconds as seconds, exactly, without trailing zeros.
pub fn seconds(us: i64) -> String {
    let (s, frac) = (us / 1_000_000, (us % 1_000_000).abs());
    if frac == 0 {
        return s.to_string();
    }
    let f = format!("{frac:06}");
    format!("{}{s}.{}", if us < 0 && s == 0 { "-" } else { "" }, f.trim_end_matches('0'))
}

/// How many of the most recent timings of each phase `runnerd status`
/// reads its percentiles from.
pub const RECENT: usize = 1000;

/// The nearest-rank percentile `p` (0 < p ≤ 100) of `values`: the smallest
/// value that at least `p`% of them do not exceed. `None` if there are none.
pub fn percentile(values: &mut [i64], p: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_is_the_nearest_rank() {
        let mut v: Vec<i64> = (1..=100).rev().collect();
        assert_eq!(percentile(&mut v, 50.0), Some(50));
        assert_eq!(percentile(&mut v, 99.0), Some(99));
        assert_eq!(percentile(&mut v, 100.0), Some(100));
        // Few values: p99 of ten is the largest, p50 the fifth.
        let mut ten: Vec<i64> = vec![7, 1, 9, 3, 5, 2, 8, 10, 4, 6];
        assert_eq!(percentile(&mut ten, 50.0), Some(5));
        assert_eq!(percentile(&mut ten, 99.0), Some(10));
        assert_eq!(percentile(&mut [42], 1.0), Some(42));
        assert_eq!(percentile(&mut [], 50.0), None);
    }

    #[test]
    fn a_duration_is_counted_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(500), 0, "a bound is inclusive");
        assert_eq!(bucket_of(501), 1);
        assert_eq!(bucket_of(1_000_000), 10);
        assert_eq!(BUCKETS_US[bucket_of(1_000_001)], 2_500_000);
        assert_eq!(bucket_of(i64::MAX), BUCKETS_US.len(), "past the last bound: +Inf");
        assert!(BUCKETS_US.windows(2).all(|w| w[0] < w[1]), "bounds increase");
        assert_eq!(le(0), "0.0005");
        assert_eq!(le(10), "1");
        assert_eq!(le(BUCKETS_US.len()), "+Inf");
        assert_eq!(seconds(1_250_000), "1.25");
        assert_eq!(seconds(0), "0");
    }
}
