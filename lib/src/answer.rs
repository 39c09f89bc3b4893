//! What the hub said to a call, in the protocol's words: the typed
//! [`Answer`] every call of [`crate::hub::HubClient`] returns, read from
//! the status and body by the rows of `PROTOCOL.md` for that [`HubCall`].
//!
//! This module says what was said, not what to do about it: that is
//! [`crate::outcome::classify`]'s. It sits below both (it imports neither),
//! so the client and the classifier meet here and not in each other.
//!
//! A status is the hub's word only with the hub's kind of body (none, or
//! JSON; a zip for a download): a page from something in between (a
//! redirect, a proxy) is [`Answer::NoWord`], but for a 413, which a proxy's
//! body limit sends as its own page and which the same bytes would meet
//! again.

/// The calls a runner makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HubCall {
    Register,
    Heartbeat,
    NextJob,
    /// `DELETE /runners/{rn}/next-job` (an extension): end the waiting poll.
    CancelPoll,
    Complete,
    Abort,
    Events,
    /// `/problem/{pid}/meta|checksum|testdata` (the `SANDBOX_TOKEN` channel).
    Testdata,
    /// The job's `code_url`.
    Code,
}

impl HubCall {
    /// Every call, for the tables and tests that must cover each.
    pub const ALL: [HubCall; 9] = [
        HubCall::Register,
        HubCall::Heartbeat,
        HubCall::NextJob,
        HubCall::CancelPoll,
        HubCall::Complete,
        HubCall::Abort,
        HubCall::Events,
        HubCall::Testdata,
        HubCall::Code,
    ];
}

/// The most of a body a runner reads: hub bodies of interest are small; a
/// larger one is cut, never buffered whole, and read as no body of the hub's.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// What came back from the wire, before it is read as the hub's word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpReply {
    /// An answer with this status and body.
    Status(u16, String),
    /// An answer with this status whose body no parser reads (not UTF-8,
    /// or over [`MAX_BODY_BYTES`]): why, and its first bytes made text
    /// (each bad byte a U+FFFD), for a lenient scan and the logs.
    Unreadable(u16, String, String),
    /// No answer: refused connection, timeout, broken response.
    Unreachable(String),
}

impl HttpReply {
    /// For logs: `HTTP 503: <start of body>` or the transport error.
    pub fn describe(&self) -> String {
        match self {
            HttpReply::Status(c, b) => {
                let b: String = b.chars().take(200).collect();
                format!("HTTP {c}{}{b}", if b.is_empty() { "" } else { ": " })
            }
            HttpReply::Unreadable(c, why, b) => {
                let b: String = b.chars().take(200).collect();
                format!("HTTP {c}, a body {why}: {b}")
            }
            HttpReply::Unreachable(e) => format!("unreachable: {e}"),
        }
    }
}

/// The hub's answer to one call, by the protocol's row for that call.
/// Which call can hear which variant is said on each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The call's own success, with the body: register 201, next-job 200,
    /// abort 202, a download 200, and 204 for heartbeat, cancel-poll,
    /// complete and events. The status is kept for the logs.
    Done { status: u16, body: String },
    /// next-job 204: no work now.
    NoWork,
    /// The token was refused: register and heartbeat 401 (the hub's),
    /// next-job 401 (any), the testdata channel 401 or 403 (any).
    Unauthorized(HttpReply),
    /// complete, abort, events: 404 or 409 (the hub's): the job is not
    /// this runner's, or not there.
    NotHeld(HttpReply),
    /// complete, abort: 400 (the hub's) or 413 (any); events: 413 or
    /// another 4xx of the hub's (but 401, 408, 429): what was sent is
    /// refused, and would be again.
    Refused(HttpReply),
    /// A download's 4xx of the hub's (but 408, 429, and the token's);
    /// cancel-poll 404 or 405 (anyone's): the hub has no such extension.
    NotServed(HttpReply),
    /// The call's success status with a body that is not the hub's (a
    /// proxy's page where a job or a registration was due, a body no parser
    /// reads): why, and the body as far as it was read.
    Garbled { status: u16, body: String, why: String },
    /// Not the hub's word: no answer, 3xx, 5xx, 401 where it is not the
    /// token's last word, 408, 429, another 2xx, a proxy's page.
    NoWord(HttpReply),
}

impl Answer {
    /// Reads `reply` as the answer to `call`.
    pub fn of(call: HubCall, reply: HttpReply) -> Answer {
        use HubCall::*;
        let (code, hubs) = match &reply {
            HttpReply::Unreachable(_) => return Answer::NoWord(reply),
            HttpReply::Status(code, body) => (*code, is_hub_body(body)),
            HttpReply::Unreadable(code, ..) => (*code, false),
        };
        let done = |reply: HttpReply, garbled: bool| match reply {
            HttpReply::Status(status, body) if garbled => {
                let why = match serde_json::from_str::<serde::de::IgnoredAny>(body.trim()) {
                    Err(e) => format!("not JSON: {e}"),
                    Ok(_) => "not the hub's".into(),
                };
                Answer::Garbled { status, body, why }
            }
            HttpReply::Status(status, body) => Answer::Done { status, body },
            HttpReply::Unreadable(status, why, body) => Answer::Garbled { status, body, why },
            r @ HttpReply::Unreachable(_) => Answer::NoWord(r),
        };
        match (call, code) {
            (Register, 201) | (NextJob, 200) | (Abort, 202) => done(reply, !hubs),
            (Heartbeat | CancelPoll | Complete | Events, 204) | (Testdata | Code, 200) => done(reply, false),
            (CancelPoll, 404 | 405) => Answer::NotServed(reply),
            (NextJob, 204) => Answer::NoWork,
            (Register | Heartbeat, 401) if hubs => Answer::Unauthorized(reply),
            (NextJob, 401) | (Testdata, 401 | 403) => Answer::Unauthorized(reply),
            (Complete | Abort | Events, 404) if hubs => Answer::NotHeld(reply),
            (Complete | Abort, 409) if hubs => Answer::NotHeld(reply),
            (Complete | Abort | Events, 413) => Answer::Refused(reply),
            (Complete | Abort, 400) if hubs => Answer::Refused(reply),
            (Events, 400..=499) if hubs && !matches!(code, 401 | 408 | 429) => Answer::Refused(reply),
            (Testdata | Code, 408 | 429) => Answer::NoWord(reply),
            (Testdata | Code, 400..=499) if hubs => Answer::NotServed(reply),
            // Every other status, call by call: a new call is a compile
            // error here until its rows are written above.
            (Register | Heartbeat | NextJob | CancelPoll | Complete | Abort | Events | Testdata | Code, _) => {
                Answer::NoWord(reply)
            }
        }
    }

    /// For logs: what came back (see [`HttpReply::describe`]).
    pub fn describe(&self) -> String {
        match self {
            Answer::Done { status, body } => HttpReply::Status(*status, body.clone()).describe(),
            Answer::Garbled { status, body, why } => {
                HttpReply::Unreadable(*status, why.clone(), body.clone()).describe()
            }
            Answer::NoWork => "no work (HTTP 204)".into(),
            Answer::Unauthorized(r)
            | Answer::NotHeld(r)
            | Answer::Refused(r)
            | Answer::NotServed(r)
            | Answer::NoWord(r) => r.describe(),
        }
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

    #[test]
    fn hub_bodies_are_empty_or_json() {
        const JSON: &str = r#"{"error": "x"}"#;
        const HTML: &str = "<html><body><h1>Moved</h1></body></html>";
        assert!(is_hub_body("") && is_hub_body(" \n") && is_hub_body(JSON) && is_hub_body("\"ok\""));
        assert!(!is_hub_body(HTML) && !is_hub_body("{\"job_id\": \"jb_1\""));
    }

    #[test]
    fn a_reply_is_described_for_logs_by_its_status_and_the_start_of_its_body() {
        assert_eq!(HttpReply::Status(503, String::new()).describe(), "HTTP 503");
        assert_eq!(HttpReply::Status(400, "x".repeat(300)).describe(), format!("HTTP 400: {}", "x".repeat(200)));
        assert_eq!(HttpReply::Unreachable("refused".into()).describe(), "unreachable: refused");
    }
}
