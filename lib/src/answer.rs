//! What the hub's answer to a call means: one table for every call the
//! runner makes, written from `PROTOCOL.md`'s rows, so that no stage reads a
//! status code on its own.
//!
//! Four meanings. [`Meaning::Settled`]: the call did what it asked.
//! [`Meaning::Rejected`]: the hub refused what the runner sent, and would
//! refuse it again (a result: keep the evidence and send `abort(rejected)`;
//! a testdata token: stop claiming and exit 100; a runner token: the
//! identity is gone). [`Meaning::Final`]: the hub's last word on this call
//! (the job is not ours or not there): drop it. [`Meaning::Retry`]: no
//! answer from the hub yet: try again, patiently. Anything the table does
//! not name is `Retry`: a status the protocol does not give is not the hub's
//! word (a redirect, a proxy's page, a 200 where 204 is due), and waiting
//! costs a job nothing where a wrong drop costs it a judging.

use crate::hub::Answer;

/// The calls a runner makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Register,
    Heartbeat,
    NextJob,
    Complete,
    Abort,
    Events,
    /// `/problem/{pid}/meta|checksum|testdata` (the `SANDBOX_TOKEN` channel).
    Testdata,
    /// The job's `code_url`.
    Code,
}

/// What an answer means for the call it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    Settled,
    Rejected,
    Final,
    Retry,
}

/// The table. A status is the hub's word only with the hub's kind of body
/// (none, or JSON; a zip for a download); a page from something in between
/// is retried, but for a 413, which a proxy's body limit sends as its own
/// page and which the same bytes would meet again.
pub fn classify(call: Call, answer: &Answer) -> Meaning {
    use Call::*;
    use Meaning::*;
    let (code, body) = match answer {
        Answer::Unreachable(_) => return Retry,
        Answer::Status(code, body) => (*code, body.as_str()),
    };
    let hubs = is_hub_body(body);
    match (call, code) {
        (Register, 201) if hubs => Settled,
        (Register, 401) if hubs => Rejected,
        (Heartbeat, 204) => Settled,
        (Heartbeat, 401) if hubs => Rejected,
        (NextJob, 200) if hubs => Settled,
        (NextJob, 204) => Settled,
        // next-job 401: idle and ask again; the heartbeat decides.
        (Complete, 204) => Settled,
        (Abort, 202) if hubs => Settled,
        (Complete | Abort, 404 | 409) if hubs => Final,
        (Complete | Abort, 400) if hubs => Rejected,
        (Complete | Abort, 413) => Rejected,
        (Events, 204) => Settled,
        (Events, 404) if hubs => Final,
        // Patience: "a 4xx other than 401 is final for that call" (the batch).
        (Events, 413) => Rejected,
        (Events, 400..=499) if hubs && !matches!(code, 401 | 408 | 429) => Rejected,
        // Downloads: the body is a zip (or JSON), read by its own parser.
        (Testdata | Code, 200) => Settled,
        (Testdata, 401 | 403) => Rejected,
        (Testdata | Code, 408 | 429) => Retry,
        (Testdata | Code, 400..=499) if hubs => Final,
        _ => Retry,
    }
}

/// Whether a body is of the hub's kind: empty, or JSON.
pub fn is_hub_body(body: &str) -> bool {
    let body = body.trim();
    body.is_empty() || serde_json::from_str::<serde::de::IgnoredAny>(body).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Call::*;
    use Meaning::*;

    const JSON: &str = r#"{"error": "x"}"#;
    const HTML: &str = "<html><body><h1>Moved</h1></body></html>";

    fn at(call: Call, code: u16, body: &str) -> Meaning {
        classify(call, &Answer::Status(code, body.to_string()))
    }

    /// Every status from 100 to 599, with an empty, a JSON and an HTML
    /// body, and no answer at all, against the protocol's rows for `call`:
    /// `rows` lists what is not `Retry`.
    fn check(call: Call, rows: &[(u16, &str, Meaning)]) {
        assert_eq!(classify(call, &Answer::Unreachable("refused".into())), Retry, "{call:?}: no answer");
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
        // not the hub's, no connection: retry.
        check(
            Complete,
            &[
                (204, "*", Settled),
                (404, "hub", Final),
                (409, "hub", Final),
                (400, "hub", Rejected),
                (413, "*", Rejected),
            ],
        );
        // "The same rules hold for abort with 202."
        check(
            Abort,
            &[
                (202, "hub", Settled),
                (404, "hub", Final),
                (409, "hub", Final),
                (400, "hub", Rejected),
                (413, "*", Rejected),
            ],
        );
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
    fn hub_bodies_are_empty_or_json() {
        assert!(is_hub_body("") && is_hub_body(" \n") && is_hub_body(JSON) && is_hub_body("\"ok\""));
        assert!(!is_hub_body(HTML) && !is_hub_body("{\"job_id\": \"jb_1\""));
    }
}
