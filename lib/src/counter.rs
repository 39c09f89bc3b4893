//! The runner's counters as the spool keeps them: each counter's name and
//! meaning, and how its labels are written. The spool bumps them in the
//! transaction of the event each counts; [`crate::metrics`] renders them.

use crate::phase::Phase;
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
    /// One bucket of a phase's histogram, not cumulative (rendered
    /// cumulative): its labels are the series' and `le`.
    PhaseBucket,
    /// A phase histogram's sum, in microseconds.
    PhaseSumMicros,
}

impl Counter {
    /// The counters rendered as Prometheus counters, in order.
    pub const EXPORTED: [Counter; 9] = [
        Counter::JobsClaimed,
        Counter::JobsJudged,
        Counter::JobsReported,
        Counter::JobsAborted,
        Counter::JobsDiscarded,
        Counter::CaseVerdicts,
        Counter::HubErrors,
        Counter::LeaseRenewalsFailed,
        Counter::SandboxRunsLost,
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
            Counter::PhaseBucket | Counter::PhaseSumMicros => "",
        }
    }

    /// Whether it has labels (an unlabelled counter is shown as 0 before
    /// its first event).
    pub fn labelled(self) -> bool {
        !matches!(
            self,
            Counter::JobsClaimed | Counter::JobsJudged | Counter::LeaseRenewalsFailed | Counter::SandboxRunsLost
        )
    }
}

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
