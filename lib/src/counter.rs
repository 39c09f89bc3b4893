//! The runner's counters as the spool keeps them: each counter's name and
//! meaning, and how its labels are written. The spool bumps them in the
//! transaction of the event each counts; [`crate::metrics`] renders them.

use crate::outcome::OutcomeKind;
use crate::phase::Phase;
use ojrunner_protocol::{AbortReason, Verdict};
use std::fmt::Write;

/// The counters the spool keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    JobsClaimed,
    JobsJudged,
    JobsReported,
    JobsAborted,
    JobsDiscarded,
    CaseVerdicts,
    HubErrors,
    LeaseRenewalsFailed,
    SandboxRunsLost,
    StageRestarts,
    /// One bucket of a phase's histogram, not cumulative (rendered
    /// cumulative): its labels are the series' and `le`.
    PhaseBucket,
    /// A phase histogram's sum, in microseconds.
    PhaseSumMicros,
}

impl Counter {
    /// The counters rendered as Prometheus counters, in order.
    pub const EXPORTED: [Counter; 10] = [
        Counter::JobsClaimed,
        Counter::JobsJudged,
        Counter::JobsReported,
        Counter::JobsAborted,
        Counter::JobsDiscarded,
        Counter::CaseVerdicts,
        Counter::HubErrors,
        Counter::LeaseRenewalsFailed,
        Counter::SandboxRunsLost,
        Counter::StageRestarts,
    ];

    /// Its name in the spool (the metric's, for an exported counter).
    pub fn name(self) -> &'static str {
        match self {
            Counter::JobsClaimed => "ojrunner_jobs_claimed_total",
            Counter::JobsJudged => "ojrunner_jobs_judged_total",
            Counter::JobsReported => "ojrunner_jobs_reported_total",
            Counter::JobsAborted => "ojrunner_jobs_aborted_total",
            Counter::JobsDiscarded => "ojrunner_jobs_discarded_total",
            Counter::CaseVerdicts => "ojrunner_case_verdicts_total",
            Counter::HubErrors => "ojrunner_hub_errors_total",
            Counter::LeaseRenewalsFailed => "ojrunner_lease_renewals_failed_total",
            Counter::SandboxRunsLost => "ojrunner_sandbox_runs_lost_total",
            Counter::StageRestarts => "ojrunner_stage_restarts_total",
            Counter::PhaseBucket => "phase_bucket",
            Counter::PhaseSumMicros => "phase_sum_us",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            Counter::JobsClaimed => "Jobs the hub handed to this runner (claims recorded).",
            Counter::JobsJudged => "Claims judged: every case run, the complete queued.",
            Counter::JobsReported => "Outcomes the hub answered finally, by outcome (complete, abort).",
            Counter::JobsAborted => "Claims handed back, by reason (drain, prep_failed, rejected).",
            Counter::JobsDiscarded => {
                "Claims ended unreported, by reason (superseded, lease_lost, identity, undeliverable)."
            }
            Counter::CaseVerdicts => "Cases judged, by verdict.",
            Counter::HubErrors => "Calls to the hub that did not get their success, by call and kind.",
            Counter::LeaseRenewalsFailed => "Heartbeats that did not get the hub's 204.",
            Counter::SandboxRunsLost => "Sandbox runs lost through the judge's fault (the helper died).",
            Counter::StageRestarts => "Stages runnerd started again after they exited, by stage.",
            Counter::PhaseBucket | Counter::PhaseSumMicros => "",
        }
    }

    /// The label sets it is known to count under, each shown at 0 before
    /// its first event so that `rate()` has a first point (the empty set
    /// for an unlabelled counter). A set counted that is not here is shown
    /// too, once counted.
    pub fn known(self) -> Vec<String> {
        let each = |name: &str, values: &[&str]| values.iter().map(|v| labels(&[(name, v)])).collect();
        match self {
            Counter::JobsReported => {
                each("outcome", &[OutcomeKind::Complete.verb(), OutcomeKind::Abort(AbortReason::Drain).verb()])
            }
            Counter::JobsAborted => each(
                "reason",
                &[AbortReason::Drain, AbortReason::PrepFailed, AbortReason::Rejected].map(|r| r.as_str()),
            ),
            Counter::JobsDiscarded => each("reason", &DISCARD_REASONS),
            Counter::CaseVerdicts => each("verdict", &VERDICTS.map(Verdict::as_str)),
            Counter::StageRestarts => each("stage", &crate::drain::START_ORDER),
            Counter::HubErrors => HUB_ERRORS
                .iter()
                .flat_map(|(call, kinds)| kinds.iter().map(move |kind| labels(&[("call", call), ("kind", kind)])))
                .collect(),
            Counter::PhaseBucket | Counter::PhaseSumMicros => Vec::new(),
            _ => vec![String::new()],
        }
    }
}

/// Why a claim is ended unreported (`ojrunner_jobs_discarded_total`).
pub const DISCARD_REASONS: [&str; 4] = ["superseded", "lease_lost", "identity", "undeliverable"];

/// Every verdict a case can get.
pub const VERDICTS: [Verdict; 8] =
    [Verdict::AC, Verdict::WA, Verdict::TLE, Verdict::MLE, Verdict::RE, Verdict::OLE, Verdict::CE, Verdict::JE];

/// The calls `ojrunner_hub_errors_total` counts, each with the kinds of
/// error it can meet ([`crate::answer::Answer::of`]): every call those
/// that are not the hub's word (`unreachable`, `http_*`), some the hub's
/// own. `download` is code and testdata
/// ([`crate::metrics::count_fetch_error`]).
pub const HUB_ERRORS: [(&str, &[&str]); 8] = [
    ("register", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "unauthorized", "garbled"]),
    ("heartbeat", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "unauthorized"]),
    ("next_job", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "unauthorized", "garbled"]),
    ("cancel_poll", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "not_served"]),
    ("complete", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "not_held", "refused"]),
    ("abort", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "not_held", "refused", "garbled"]),
    ("events", &["unreachable", "http_3xx", "http_4xx", "http_5xx", "http_other", "not_held", "refused"]),
    ("download", &["answered_no", "unreachable", "unauthorized", "unusable"]),
];

/// Labels as the spool keeps them and Prometheus reads them:
/// `name="value",…`, values escaped.
pub fn labels(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let _ = write!(out, "{k}=\"{v}\"");
    }
    out
}

/// The labels of a phase's histogram series: its name, and its own label
/// ([`Phase::label`]) if it has one.
pub fn phase_series(phase: Phase, label: &str) -> String {
    match phase.label() {
        Some((name, _)) => labels(&[("phase", phase.as_str()), (name, label)]),
        None => labels(&[("phase", phase.as_str())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_written_as_prometheus_reads_them() {
        assert_eq!(labels(&[]), "");
        assert_eq!(labels(&[("a", "b"), ("c", "d")]), "a=\"b\",c=\"d\"");
        assert_eq!(labels(&[("a", "x\"y\\z\n")]), "a=\"x\\\"y\\\\z\\n\"");
        assert_eq!(phase_series(Phase::Testdata, "hit"), "phase=\"testdata\",cache=\"hit\"");
        assert_eq!(phase_series(Phase::Case, ""), "phase=\"case\"");
    }
}
