//! The runner's side of the hub protocol: one method per call, each bounded
//! in time, each returning what the hub said as a typed [`Answer`] (read by
//! the call's row of `PROTOCOL.md`, [`Answer::of`]) and deciding nothing.
//! What an answer means is [`crate::outcome::classify`]'s; retries and
//! patience belong to the stage that makes the call. Redirects are never
//! followed: a redirect would turn a `PUT` into a `GET` without its body or
//! token, and its answer would be taken for the hub's.

use crate::answer::{Answer, HttpReply, HubCall, MAX_BODY_BYTES};
use crate::patience;
use crate::protocol::{segment, unwrap_envelope, Registration};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// A failure fetching code or testdata.
#[derive(Debug)]
pub struct FetchError(pub String, pub Reach);

/// Whether a failed fetch reached the hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// It answered no (a 4xx that is not about the token), or something
    /// else the hub may mend soon: worth a couple of tries at most.
    Answered,
    /// No answer from the hub (no connection, a 5xx, a redirect, a page
    /// from a proxy, a body cut or stalled midway): the hub is away, maybe
    /// for minutes, and the job is not at fault.
    Away,
    /// The testdata channel refused the runner's `SANDBOX_TOKEN` (401,
    /// 403): the runner's configuration is wrong; no job is at fault.
    Refused,
    /// What came can never be used (a hostile or broken archive, a
    /// download past its cap): the same bytes would come again.
    Unusable,
    /// The runner's own failure (its disk full, say): not the job's fault.
    Ours,
}

impl FetchError {
    /// The runner's own failure (see [`Reach::Ours`]).
    pub fn ours(why: String) -> FetchError {
        FetchError(why, Reach::Ours)
    }

    /// What came can never be used (see [`Reach::Unusable`]).
    pub fn unusable(why: String) -> FetchError {
        FetchError(why, Reach::Unusable)
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A client for one hub (the server is `ojrunner-hub`'s).
#[derive(Clone)]
pub struct HubClient {
    agent: ureq::Agent,
    downloads: ureq::Agent,
    base: String,
    testdata_base: String,
    sandbox_token: String,
}

impl HubClient {
    pub fn new(base: &str, testdata_base: &str, sandbox_token: &str) -> HubClient {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(patience::request_timeout())
            .timeout(patience::request_timeout())
            .redirects(0)
            .user_agent(concat!("ojrunner/", env!("CARGO_PKG_VERSION")))
            .build();
        // A download may be long; what is bounded is the connect and each
        // pause between reads (a slow drip is cut by the caller's size cap).
        let downloads = ureq::AgentBuilder::new()
            .timeout_connect(patience::testdata_connect_timeout())
            .timeout_read(patience::testdata_idle_timeout())
            .timeout_write(patience::request_timeout())
            .redirects(0)
            .user_agent(concat!("ojrunner/", env!("CARGO_PKG_VERSION")))
            .build();
        HubClient {
            agent,
            downloads,
            base: base.trim_end_matches('/').to_string(),
            testdata_base: testdata_base.trim_end_matches('/').to_string(),
            sandbox_token: sandbox_token.to_string(),
        }
    }

    /// Makes `call` and reads what came back as its [`Answer`].
    fn send(
        &self,
        call: HubCall,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        timeout: Option<Duration>,
    ) -> Answer {
        let mut req = self.agent.request(method, &format!("{}{path}", self.base));
        if let Some(t) = token {
            // Never sent, and never logged: a token that cannot be a header
            // (a registration checks it; this is for a spool written
            // before that) is no answer of the hub's.
            if let Err(e) = crate::protocol::check_token(t) {
                return Answer::of(call, HttpReply::Unreachable(format!("not sent: {e}")));
            }
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let r = match body {
            Some(b) => req.set("Content-Type", "application/json").send_string(b),
            None => req.call(),
        };
        let reply = match r {
            Ok(resp) | Err(ureq::Error::Status(_, resp)) => reply_of(resp),
            Err(ureq::Error::Transport(t)) => HttpReply::Unreachable(transport(&t)),
        };
        Answer::of(call, reply)
    }

    /// `POST /runners/register`.
    pub fn register(&self, registration_token: &str, name: &str) -> Answer {
        let body = serde_json::json!({"registration_token": registration_token, "name": name}).to_string();
        self.send(HubCall::Register, "POST", "/runners/register", None, Some(&body), None)
    }

    /// `POST /runners/{rn}/heartbeat`.
    pub fn heartbeat(&self, runner_id: &str, token: &str, jobs: &[String]) -> Answer {
        let body = serde_json::json!({ "active_job_ids": jobs }).to_string();
        self.send(
            HubCall::Heartbeat,
            "POST",
            &format!("/runners/{}/heartbeat", segment(runner_id)),
            Some(token),
            Some(&body),
            None,
        )
    }

    /// `GET /runners/{rn}/next-job?wait=S`.
    pub fn next_job(&self, runner_id: &str, token: &str, wait_sec: u64) -> Answer {
        let path = if wait_sec > 0 {
            format!("/runners/{}/next-job?wait={wait_sec}", segment(runner_id))
        } else {
            format!("/runners/{}/next-job", segment(runner_id))
        };
        let timeout = patience::request_timeout().saturating_add(Duration::from_secs(wait_sec));
        self.send(HubCall::NextJob, "GET", &path, Some(token), None, Some(timeout))
    }

    /// `DELETE /runners/{rn}/next-job` (an extension): the hub ends this
    /// runner's waiting poll, which then answers 204 having handed out no
    /// job (or its job, if one was already in its answer).
    pub fn cancel_next_job(&self, runner_id: &str, token: &str) -> Answer {
        let path = format!("/runners/{}/next-job", segment(runner_id));
        self.send(HubCall::CancelPoll, "DELETE", &path, Some(token), None, None)
    }

    /// `PUT /runners/{rn}/jobs/{jb}/complete`, with a body already made.
    pub fn complete(&self, runner_id: &str, token: &str, job_id: &str, body: &str) -> Answer {
        let path = jobs_path(runner_id, job_id, "complete");
        self.send(HubCall::Complete, "PUT", &path, Some(token), Some(body), None)
    }

    /// `PUT /runners/{rn}/jobs/{jb}/abort`, with a body already made.
    pub fn abort(&self, runner_id: &str, token: &str, job_id: &str, body: &str) -> Answer {
        let path = jobs_path(runner_id, job_id, "abort");
        self.send(HubCall::Abort, "PUT", &path, Some(token), Some(body), None)
    }

    /// `POST /runners/{rn}/jobs/{jb}/events`.
    pub fn events(&self, runner_id: &str, token: &str, job_id: &str, body: &str) -> Answer {
        let path = jobs_path(runner_id, job_id, "events");
        self.send(HubCall::Events, "POST", &path, Some(token), Some(body), None)
    }

    /// The testdata channel's URL for `what`, the token in its query
    /// (encoded by ureq).
    fn problem_url(&self, pid: i64, what: &str) -> String {
        let req = self.agent.get(&format!("{}/problem/{pid}/{what}", self.testdata_base));
        req.query("token", &self.sandbox_token).url().to_string()
    }

    /// `GET /problem/{pid}/checksum`: opaque to the runner.
    pub fn checksum(&self, pid: i64) -> Result<String, FetchError> {
        let v = self.problem_json(pid, "checksum")?;
        v.as_str()
            .map(String::from)
            .ok_or_else(|| FetchError(format!("problem {pid}: checksum is not a string: {v}"), Reach::Answered))
    }

    /// `GET /problem/{pid}/meta`.
    pub fn meta(&self, pid: i64) -> Result<serde_json::Value, FetchError> {
        self.problem_json(pid, "meta")
    }

    fn problem_json(&self, pid: i64, what: &str) -> Result<serde_json::Value, FetchError> {
        let url = self.problem_url(pid, what);
        let shown = format!("problem {pid} {what}");
        let resp = self.get(&self.agent, &url, &shown, HubCall::Testdata)?;
        let body = read_body(resp)
            .map_err(|e| FetchError(format!("{shown}: reading the body: {e}"), Reach::Away))?
            .map_err(|(why, body)| {
                FetchError(format!("{shown}: the answer is not the hub's ({why}): {}", start(&body)), Reach::Away)
            })?;
        // Not JSON: a page from something in between, not the hub's answer.
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
            FetchError(format!("{shown}: the answer is not the hub's (not JSON: {e}): {}", start(&body)), Reach::Away)
        })?;
        Ok(unwrap_envelope(v))
    }

    /// `GET /problem/{pid}/testdata` into `dest`, at most `max` bytes.
    pub fn testdata(&self, pid: i64, dest: &Path, max: u64) -> Result<u64, FetchError> {
        self.fetch(&self.problem_url(pid, "testdata"), &format!("problem {pid} testdata"), HubCall::Testdata, dest, max)
    }

    /// Downloads the job's code from `url` into `dest`, refusing more than
    /// `max` bytes. `shown` names it in errors (URLs may carry tokens:
    /// never logged).
    pub fn download(&self, url: &str, shown: &str, dest: &Path, max: u64) -> Result<u64, FetchError> {
        self.fetch(url, shown, HubCall::Code, dest, max)
    }

    fn fetch(&self, url: &str, shown: &str, call: HubCall, dest: &Path, max: u64) -> Result<u64, FetchError> {
        let resp = self.get(&self.downloads, url, shown, call)?;
        let mut f =
            std::fs::File::create(dest).map_err(|e| FetchError::ours(format!("{shown}: {}: {e}", dest.display())))?;
        let mut r = resp.into_reader().take(max + 1);
        // A read that fails midway (a timeout, a connection closed early) is
        // the hub away; a write that fails is ours.
        let mut buf = vec![0u8; 64 * 1024];
        let mut n: u64 = 0;
        loop {
            let got = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(got) => got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FetchError(format!("{shown}: download cut after {n} bytes: {e}"), Reach::Away)),
            };
            f.write_all(&buf[..got]).map_err(|e| FetchError::ours(format!("{shown}: {}: {e}", dest.display())))?;
            n += got as u64;
        }
        if n > max {
            return Err(FetchError::unusable(format!("{shown}: larger than {max} bytes")));
        }
        f.flush().map_err(|e| FetchError::ours(format!("{shown}: {e}")))?;
        Ok(n)
    }

    /// A GET answered 200, or the failure its [`Answer`] is.
    fn get(&self, agent: &ureq::Agent, url: &str, shown: &str, call: HubCall) -> Result<ureq::Response, FetchError> {
        let resp = match agent.get(url).call() {
            Ok(resp) if resp.status() == 200 => return Ok(resp),
            Ok(resp) | Err(ureq::Error::Status(_, resp)) => resp,
            Err(ureq::Error::Transport(t)) => return Err(FetchError(format!("{shown}: {}", t.kind()), Reach::Away)),
        };
        let answer = Answer::of(call, reply_of(resp));
        let reach = match answer {
            Answer::Unauthorized(_) => Reach::Refused,
            Answer::NotServed(_) => Reach::Answered,
            // What is left of a download's answers (not 200) is no word of
            // the hub's: waited out. The others never answer a download.
            Answer::NoWord(_)
            | Answer::Garbled { .. }
            | Answer::Done { .. }
            | Answer::NoWork
            | Answer::NotHeld(_)
            | Answer::Refused(_) => Reach::Away,
        };
        Err(FetchError(format!("{shown}: {}", answer.describe()), reach))
    }
}

/// `/runners/{rn}/jobs/{jb}/{what}`, each id one percent-encoded segment.
fn jobs_path(runner_id: &str, job_id: &str, what: &str) -> String {
    format!("/runners/{}/jobs/{}/{what}", segment(runner_id), segment(job_id))
}

/// A 201 body that is not a registration the runner can use; says why
/// (never with the token).
#[derive(Debug, thiserror::Error)]
pub enum BadRegistration {
    /// It could not be read (not JSON, a field missing): the hub is asked
    /// again, as for any other failure.
    #[error("{0}")]
    Unreadable(String),
    /// It was read, but its runner id or token cannot be carried (an id no
    /// URL path holds, a token no header holds): the hub gave an identity
    /// no call can use, the same as refusing the registration (final).
    #[error("{0}")]
    Unusable(String),
}

/// Reads a registration from a 201 body (bare or wrapped), and checks its
/// runner id ([`crate::protocol::check_id`]) and token
/// ([`crate::protocol::check_token`]).
pub fn parse_registration(body: &str) -> Result<Registration, BadRegistration> {
    let unreadable = BadRegistration::Unreadable;
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| unreadable(format!("not JSON: {e}")))?;
    // serde's message may quote a value: the token is never in it, as no
    // type error can be about a string field holding a string.
    let reg: Registration = serde_json::from_value(unwrap_envelope(v)).map_err(|e| unreadable(e.to_string()))?;
    crate::protocol::check_id("runner_id", &reg.runner_id).map_err(|e| BadRegistration::Unusable(e.to_string()))?;
    crate::protocol::check_token(&reg.token).map_err(|e| BadRegistration::Unusable(e.to_string()))?;
    Ok(reg)
}

/// A transport error for a log line. ureq's own text for a header it
/// refuses quotes the header line, value and all (a token): that kind is
/// named, never quoted.
fn transport(t: &ureq::Transport) -> String {
    match t.kind() {
        ureq::ErrorKind::BadHeader => "a header could not be sent (its value withheld)".into(),
        _ => t.to_string(),
    }
}

/// The start of a body, for a log line.
fn start(body: &str) -> String {
    body.chars().take(200).collect()
}

/// A response as a [`HttpReply`]: a body cut or stalled midway is no answer
/// (the hub is away); a body read whole that no parser reads is
/// [`HttpReply::Unreadable`].
fn reply_of(resp: ureq::Response) -> HttpReply {
    let code = resp.status();
    match read_body(resp) {
        Ok(Ok(body)) => HttpReply::Status(code, body),
        Ok(Err((why, body))) => HttpReply::Unreadable(code, why, body),
        Err(e) => HttpReply::Unreachable(format!("HTTP {code}, then reading the body: {e}")),
    }
}

/// Reads an answer, at most [`MAX_BODY_BYTES`] of it: the text, or why it
/// is none and its start made text.
fn read_body(resp: ureq::Response) -> std::io::Result<Result<String, (String, String)>> {
    let mut raw = Vec::new();
    resp.into_reader().take(MAX_BODY_BYTES as u64 + 1).read_to_end(&mut raw)?;
    if raw.len() > MAX_BODY_BYTES {
        raw.truncate(MAX_BODY_BYTES);
        return Ok(Err((format!("over {} MiB, cut", MAX_BODY_BYTES >> 20), String::from_utf8_lossy(&raw).into())));
    }
    Ok(String::from_utf8(raw).map_err(|e| {
        let why = format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to());
        (why, String::from_utf8_lossy(e.as_bytes()).into_owned())
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_token_no_header_can_carry_is_never_sent_nor_shown() {
        let hub = super::HubClient::new("http://127.0.0.1:9", "http://127.0.0.1:9", "t");
        let said = hub.heartbeat("rn_1", "rk_x\r\nX-Injected: 1", &[]).describe();
        assert!(said.contains("not sent") && !said.contains("rk_x"), "{said}");
        let reg = r#"{"runner_id": "rn_1", "token": "rk_x\r\n"}"#;
        match super::parse_registration(reg) {
            Err(super::BadRegistration::Unusable(why)) => assert!(!why.contains("rk_x"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(super::parse_registration("{"), Err(super::BadRegistration::Unreadable(_))));
    }

    #[test]
    fn the_testdata_token_is_encoded_in_the_query() {
        let hub = super::HubClient::new("http://hub", "http://hub/api/", "a+b c&d=\u{e9}/~");
        assert_eq!(hub.problem_url(7, "meta"), "http://hub/api/problem/7/meta?token=a%2Bb+c%26d%3D%C3%A9%2F%7E");
        let plain = super::HubClient::new("http://hub", "http://hub", "KoNoSandboxDa");
        assert_eq!(plain.problem_url(1, "testdata"), "http://hub/problem/1/testdata?token=KoNoSandboxDa");
    }
}
