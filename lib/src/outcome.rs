//! What an outcome is, how it is assembled, and what the hub's answer to
//! any call means.
//!
//! An outcome is a claim's last word to the hub: `complete` with the
//! result of every case, or `abort` with a reason ([`OutcomeKind`]).
//! `judge-exec` assembles the result from the case results it stored
//! ([`assemble`]: every case of every task, in order, a missing one JE);
//! the spool stores its body ([`complete_body`], [`abort_body`]) in the
//! transaction that ends the claim; `reportd` delivers it and does what
//! [`delivery`] says.
//!
//! What an answer means is one table, [`classify`], for every call the
//! runner makes, so that no stage reads a status code on its own. Four
//! meanings. [`Meaning::Settled`]: the call did what it asked.
//! [`Meaning::Rejected`]: the hub refused what the runner sent, and would
//! refuse it again (a result: keep the evidence and send
//! `abort(rejected)`; a testdata token: stop claiming and exit 100; a
//! runner token: the identity is gone). [`Meaning::Final`]: the hub's last
//! word on this call (the job is not ours or not there): drop it.
//! [`Meaning::Retry`]: no answer from the hub yet: try again, patiently.
//! What is not the hub's word ([`Answer::NoWord`]) is `Retry`: waiting
//! costs a job nothing where a wrong drop costs it a judging.

use crate::answer::{Answer, HubCall};
use crate::protocol::{AbortReason, CaseResult, Outcome, Task};
use std::collections::BTreeMap;

// ---- the classification ------------------------------------------------------

/// What an answer means for the call it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    Settled,
    Rejected,
    Final,
    Retry,
}

/// The table: what `answer` means for `call`.
pub fn classify(call: HubCall, answer: &Answer) -> Meaning {
    match answer {
        Answer::Done { .. } | Answer::NoWork => Meaning::Settled,
        Answer::Unauthorized(_) => match call {
            // next-job 401: idle and ask again; the heartbeat decides.
            HubCall::NextJob => Meaning::Retry,
            HubCall::Register
            | HubCall::Heartbeat
            | HubCall::CancelPoll
            | HubCall::Complete
            | HubCall::Abort
            | HubCall::Events
            | HubCall::Testdata
            | HubCall::Code => Meaning::Rejected,
        },
        Answer::Refused(_) => Meaning::Rejected,
        Answer::NotHeld(_) | Answer::NotServed(_) => Meaning::Final,
        Answer::Garbled { .. } | Answer::NoWord(_) => Meaning::Retry,
    }
}

// ---- the outcome -------------------------------------------------------------

/// What an outcome asks the hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    Complete,
    Abort(AbortReason),
}

impl OutcomeKind {
    /// The call that delivers it.
    pub fn call(self) -> HubCall {
        match self {
            OutcomeKind::Complete => HubCall::Complete,
            OutcomeKind::Abort(_) => HubCall::Abort,
        }
    }

    /// The last word of the call's path (`/jobs/{jb}/complete`).
    pub fn verb(self) -> &'static str {
        match self {
            OutcomeKind::Complete => "complete",
            OutcomeKind::Abort(_) => "abort",
        }
    }

    /// How the spool's outbox keeps it (`kind`): `complete`, `abort:drain`.
    pub fn row(self) -> String {
        match self {
            OutcomeKind::Complete => "complete".into(),
            OutcomeKind::Abort(r) => format!("abort:{}", r.as_str()),
        }
    }

    /// Reads [`OutcomeKind::row`] back; `None` for a kind it never writes.
    pub fn from_row(row: &str) -> Option<OutcomeKind> {
        match row {
            "complete" => Some(OutcomeKind::Complete),
            _ => row.strip_prefix("abort:").and_then(AbortReason::parse).map(OutcomeKind::Abort),
        }
    }

    /// For logs: `complete`, `abort(drain)`.
    pub fn shown(self) -> String {
        match self {
            OutcomeKind::Complete => "complete".into(),
            OutcomeKind::Abort(r) => format!("abort({})", r.as_str()),
        }
    }
}

/// The cases of `tasks` that have no result in `done` yet, as (task,
/// case), in order: what a judge restarted after a crash still runs.
pub fn cases_left(tasks: &[Task], done: &BTreeMap<(usize, usize), CaseResult>) -> Vec<(usize, usize)> {
    tasks
        .iter()
        .enumerate()
        .flat_map(|(t, task)| (0..task.case_count.max(0) as usize).map(move |c| (t, c)))
        .filter(|tc| !done.contains_key(tc))
        .collect()
}

/// The result of a judged claim: one list per task, every case in order.
/// A case with no result (the judge lost it) is JE rather than missing:
/// the hub reads the lists by position.
pub fn assemble(tasks: &[Task], mut done: BTreeMap<(usize, usize), CaseResult>) -> Outcome {
    let tasks = tasks
        .iter()
        .enumerate()
        .map(|(t, task)| {
            (0..task.case_count.max(0) as usize)
                .map(|c| done.remove(&(t, c)).unwrap_or_else(|| CaseResult::judge_error("case result missing")))
                .collect()
        })
        .collect();
    Outcome { tasks }
}

/// The body of a `complete` call.
pub fn complete_body(outcome: &Outcome) -> String {
    serde_json::to_string(outcome).expect("an outcome always serializes")
}

/// The body of an `abort` call.
pub fn abort_body(reason: AbortReason) -> String {
    serde_json::json!({ "reason": reason.as_str() }).to_string()
}

// ---- delivery ----------------------------------------------------------------

/// What `reportd` does with an outcome after the hub answered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Landed: the claim is reported.
    Delivered,
    /// The hub no longer holds the job for this runner: dropped, reported.
    NotHeld,
    /// The hub rejected the result: keep the evidence, send
    /// `abort(rejected)` instead.
    Reject,
    /// The hub refused an abort: a few bytes it cannot take; sending them
    /// again cannot help, and the lease lapses on its own: dropped.
    AbortRefused,
    /// No word from the hub: offered again later.
    Again,
}

/// What to do with an outcome of `kind` the hub answered with `answer`.
pub fn delivery(kind: OutcomeKind, answer: &Answer) -> Delivery {
    match (classify(kind.call(), answer), kind) {
        (Meaning::Settled, _) => Delivery::Delivered,
        (Meaning::Final, _) => Delivery::NotHeld,
        (Meaning::Rejected, OutcomeKind::Complete) => Delivery::Reject,
        (Meaning::Rejected, OutcomeKind::Abort(_)) => Delivery::AbortRefused,
        (Meaning::Retry, _) => Delivery::Again,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::HttpReply;
    use crate::protocol::Verdict;
    use HubCall::*;
    use Meaning::*;

    const JSON: &str = r#"{"error": "x"}"#;
    const HTML: &str = "<html><body><h1>Moved</h1></body></html>";

    fn at(call: HubCall, code: u16, body: &str) -> Meaning {
        classify(call, &Answer::of(call, HttpReply::Status(code, body.to_string())))
    }

    /// Every status from 100 to 599, with an empty, a JSON and an HTML
    /// body, and no answer at all, against the protocol's rows for `call`:
    /// `rows` lists what is not `Retry`.
    fn check(call: HubCall, rows: &[(u16, &str, Meaning)]) {
        let none = Answer::of(call, HttpReply::Unreachable("refused".into()));
        assert_eq!(classify(call, &none), Retry, "{call:?}: no answer");
        for code in 100..600 {
            for body in ["", JSON, HTML] {
                let want = rows
                    .iter()
                    .find(|(c, b, _)| *c == code && (*b == "*" || *b == body || (*b == "hub" && body != HTML)))
                    .map_or(Retry, |r| r.2);
                assert_eq!(at(call, code, body), want, "{call:?} answered {code} with {body:?}");
            }
        }
    }

    #[test]
    fn complete_lands_only_on_204_and_abort_on_202() {
        // PROTOCOL.md, complete: 204 landed, and only 204; 409, 404 final;
        // 400 and 413 rejected; 401, 408, 429, 5xx, 3xx, other 2xx, a body
        // not the hub's, no connection: retry. "The same rules hold for
        // abort with 202" (a 202 is the hub's only with the hub's body).
        for (call, landed, body) in [(Complete, 204, "*"), (Abort, 202, "hub")] {
            let rows = [
                (landed, body, Settled),
                (404, "hub", Final),
                (409, "hub", Final),
                (400, "hub", Rejected),
                (413, "*", Rejected),
            ];
            check(call, &rows);
        }
    }

    #[test]
    fn events_settle_on_204_and_a_404_ends_the_jobs_events() {
        // A 4xx but 401 (and 408, 429: "try again later") ends the batch.
        let mut rows = vec![(204, "*", Settled), (404, "hub", Final), (413, "*", Rejected)];
        rows.extend((400..500).filter(|c| ![401, 404, 408, 413, 429].contains(c)).map(|c| (c, "hub", Rejected)));
        check(Events, &rows);
    }

    #[test]
    fn heartbeat_register_and_next_job_follow_their_rows() {
        check(Heartbeat, &[(204, "*", Settled), (401, "hub", Rejected)]);
        check(Register, &[(201, "hub", Settled), (401, "hub", Rejected)]);
        // 401 on next-job: idle and ask again (the heartbeat owns fail-fast).
        check(NextJob, &[(200, "hub", Settled), (204, "*", Settled)]);
        // Cancelling a poll: a hub without the extension is asked no more.
        check(CancelPoll, &[(204, "*", Settled), (404, "*", Final), (405, "*", Final)]);
    }

    #[test]
    fn the_testdata_channel_refusing_the_token_is_the_runners_configuration() {
        let mut rows = vec![(200, "*", Settled), (401, "*", Rejected), (403, "*", Rejected)];
        let answered: Vec<u16> = (400..500).filter(|c| ![401, 403, 408, 429].contains(c)).collect();
        rows.extend(answered.iter().map(|c| (*c, "hub", Final)));
        check(Testdata, &rows);
        let mut rows = vec![(200, "*", Settled)];
        rows.extend((400..500).filter(|c| ![408, 429].contains(c)).map(|c| (c, "hub", Final)));
        check(Code, &rows);
    }

    #[test]
    fn an_outcome_kind_is_kept_as_the_spool_page_says_and_read_back() {
        let kinds = [
            (OutcomeKind::Complete, "complete"),
            (OutcomeKind::Abort(AbortReason::Drain), "abort:drain"),
            (OutcomeKind::Abort(AbortReason::PrepFailed), "abort:prep_failed"),
            (OutcomeKind::Abort(AbortReason::Rejected), "abort:rejected"),
        ];
        for (kind, row) in kinds {
            assert_eq!(kind.row(), row);
            assert_eq!(OutcomeKind::from_row(row), Some(kind));
        }
        assert_eq!(OutcomeKind::from_row("abort:later"), None);
        assert_eq!(OutcomeKind::from_row("abort"), None);
    }

    #[test]
    fn what_reportd_does_follows_the_meaning_and_the_kind() {
        let drain = OutcomeKind::Abort(AbortReason::Drain);
        let of = |kind: OutcomeKind, code: u16, body: &str| {
            delivery(kind, &Answer::of(kind.call(), HttpReply::Status(code, body.into())))
        };
        assert_eq!(of(OutcomeKind::Complete, 204, ""), Delivery::Delivered);
        assert_eq!(of(drain, 202, ""), Delivery::Delivered);
        assert_eq!(of(drain, 204, ""), Delivery::Again, "an abort lands on 202 only");
        assert_eq!(of(OutcomeKind::Complete, 409, JSON), Delivery::NotHeld);
        assert_eq!(of(OutcomeKind::Complete, 400, JSON), Delivery::Reject);
        assert_eq!(of(drain, 400, JSON), Delivery::AbortRefused);
        assert_eq!(of(OutcomeKind::Complete, 503, ""), Delivery::Again);
        assert_eq!(delivery(drain, &Answer::of(Abort, HttpReply::Unreachable("timeout".into()))), Delivery::Again);
    }

    fn task(cases: i64) -> Task {
        Task { task_score: 50, memory_limit: 65536, time_limit: 1000, case_count: cases }
    }

    fn ac() -> CaseResult {
        CaseResult {
            status: Verdict::AC,
            exec_time: 1,
            memory_usage: 2,
            exit_code: 0,
            stdout: String::new(),
            stderr: String::new(),
        }
    }

    #[test]
    fn an_outcome_has_every_case_in_order_and_a_missing_one_is_je() {
        let tasks = [task(2), task(1)];
        let mut done = BTreeMap::new();
        done.insert((0, 0), ac());
        done.insert((1, 0), CaseResult::compile_error("x"));
        assert_eq!(cases_left(&tasks, &done), vec![(0, 1)], "what a restarted judge still runs");
        // A result for a case no task has is not the hub's business.
        done.insert((5, 5), ac());
        let o = assemble(&tasks, done);
        assert_eq!(o.tasks.len(), 2);
        assert_eq!(o.tasks[0].len(), 2);
        assert_eq!(o.tasks[1].len(), 1);
        assert_eq!(o.tasks[0][0], ac());
        assert_eq!(o.tasks[0][1].status, Verdict::JE, "missing: JE");
        assert_eq!(o.tasks[0][1].stderr, "case result missing");
        assert_eq!(o.tasks[1][0].status, Verdict::CE);
        // All present: nothing left, nothing invented.
        let all: BTreeMap<_, _> = [((0, 0), ac()), ((0, 1), ac()), ((1, 0), ac())].into_iter().collect();
        assert!(cases_left(&tasks, &all).is_empty());
        assert_eq!(assemble(&tasks, all).tasks, vec![vec![ac(), ac()], vec![ac()]]);
    }

    #[test]
    fn bodies_are_what_the_protocol_says() {
        assert_eq!(abort_body(AbortReason::Drain), r#"{"reason":"drain"}"#);
        assert_eq!(abort_body(AbortReason::PrepFailed), r#"{"reason":"prep_failed"}"#);
        assert_eq!(abort_body(AbortReason::Rejected), r#"{"reason":"rejected"}"#);
        let body = complete_body(&Outcome { tasks: vec![vec![ac()]] });
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["tasks"][0][0]["status"], "AC");
        assert_eq!(v["tasks"][0][0]["execTime"], 1);
        assert_eq!(v["tasks"][0][0]["memoryUsage"], 2);
    }
}
