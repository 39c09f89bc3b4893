//! The runner's side of the hub protocol: one method per call, each bounded
//! in time, each returning what the hub answered (or that it could not be
//! reached) and deciding nothing. Retries, patience and what an answer means
//! for a claim belong to the stage that makes the call.

use crate::patience;
use crate::protocol::{unwrap_envelope, Registration};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// What a call came back with.
#[derive(Debug)]
pub enum Answer {
    /// The hub answered with this status and body.
    Status(u16, String),
    /// No answer: refused connection, timeout, broken response.
    Unreachable(String),
}

impl Answer {
    /// For logs: `HTTP 503: <start of body>` or the transport error.
    pub fn describe(&self) -> String {
        match self {
            Answer::Status(c, b) => {
                let b: String = b.chars().take(200).collect();
                format!("HTTP {c}{}{b}", if b.is_empty() { "" } else { ": " })
            }
            Answer::Unreachable(e) => format!("unreachable: {e}"),
        }
    }
}

/// A failure fetching code or testdata.
#[derive(Debug)]
pub struct FetchError(pub String, pub Reach);

/// Whether a failed fetch reached the hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// It answered (4xx), or the failure was ours: trying again soon is
    /// worth a couple of tries at most.
    Answered,
    /// No connection, or a 5xx: the hub is away, maybe for minutes, and the
    /// job is not at fault.
    Away,
}

impl FetchError {
    /// A failure on the runner's side or a hub's clear answer.
    pub fn new(why: String) -> FetchError {
        FetchError(why, Reach::Answered)
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A client for one hub.
#[derive(Clone)]
pub struct Hub {
    agent: ureq::Agent,
    downloads: ureq::Agent,
    base: String,
    testdata_base: String,
    sandbox_token: String,
}

impl Hub {
    pub fn new(base: &str, testdata_base: &str, sandbox_token: &str) -> Hub {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(patience::request_timeout())
            .timeout(patience::request_timeout())
            .user_agent(concat!("ojrunner/", env!("CARGO_PKG_VERSION")))
            .build();
        // A download may be long; what is bounded is the connect and each
        // pause between reads (a slow drip is cut by the caller's size cap).
        let downloads = ureq::AgentBuilder::new()
            .timeout_connect(patience::testdata_connect_timeout())
            .timeout_read(patience::testdata_idle_timeout())
            .timeout_write(patience::request_timeout())
            .user_agent(concat!("ojrunner/", env!("CARGO_PKG_VERSION")))
            .build();
        Hub {
            agent,
            downloads,
            base: base.trim_end_matches('/').to_string(),
            testdata_base: testdata_base.trim_end_matches('/').to_string(),
            sandbox_token: sandbox_token.to_string(),
        }
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        timeout: Option<Duration>,
    ) -> Answer {
        let mut req = self.agent.request(method, &format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let r = match body {
            Some(b) => req.set("Content-Type", "application/json").send_string(b),
            None => req.call(),
        };
        match r {
            Ok(resp) => {
                let code = resp.status();
                Answer::Status(code, read_body(resp))
            }
            Err(ureq::Error::Status(code, resp)) => Answer::Status(code, read_body(resp)),
            Err(ureq::Error::Transport(t)) => Answer::Unreachable(t.to_string()),
        }
    }

    /// `POST /runners/register`.
    pub fn register(&self, registration_token: &str, name: &str) -> Answer {
        let body = serde_json::json!({"registration_token": registration_token, "name": name}).to_string();
        self.call("POST", "/runners/register", None, Some(&body), None)
    }

    /// `POST /runners/{rn}/heartbeat`.
    pub fn heartbeat(&self, runner_id: &str, token: &str, jobs: &[String]) -> Answer {
        let body = serde_json::json!({ "active_job_ids": jobs }).to_string();
        self.call("POST", &format!("/runners/{runner_id}/heartbeat"), Some(token), Some(&body), None)
    }

    /// `GET /runners/{rn}/next-job?wait=S`.
    pub fn next_job(&self, runner_id: &str, token: &str, wait_sec: u64) -> Answer {
        let path = if wait_sec > 0 {
            format!("/runners/{runner_id}/next-job?wait={wait_sec}")
        } else {
            format!("/runners/{runner_id}/next-job")
        };
        let timeout = patience::request_timeout() + Duration::from_secs(wait_sec);
        self.call("GET", &path, Some(token), None, Some(timeout))
    }

    /// `PUT /runners/{rn}/jobs/{jb}/complete` or `/abort`, with a body already made.
    pub fn outcome(&self, runner_id: &str, token: &str, job_id: &str, verb: &str, body: &str) -> Answer {
        self.call("PUT", &format!("/runners/{runner_id}/jobs/{job_id}/{verb}"), Some(token), Some(body), None)
    }

    /// `POST /runners/{rn}/jobs/{jb}/events`.
    pub fn events(&self, runner_id: &str, token: &str, job_id: &str, body: &str) -> Answer {
        self.call("POST", &format!("/runners/{runner_id}/jobs/{job_id}/events"), Some(token), Some(body), None)
    }

    fn problem_url(&self, pid: i64, what: &str) -> String {
        format!("{}/problem/{pid}/{what}?token={}", self.testdata_base, urlencode(&self.sandbox_token))
    }

    /// `GET /problem/{pid}/checksum`: opaque to the runner.
    pub fn checksum(&self, pid: i64) -> Result<String, FetchError> {
        let v = self.problem_json(pid, "checksum")?;
        v.as_str()
            .map(String::from)
            .ok_or_else(|| FetchError::new(format!("problem {pid}: checksum is not a string: {v}")))
    }

    /// `GET /problem/{pid}/meta`.
    pub fn meta(&self, pid: i64) -> Result<serde_json::Value, FetchError> {
        self.problem_json(pid, "meta")
    }

    fn problem_json(&self, pid: i64, what: &str) -> Result<serde_json::Value, FetchError> {
        let url = self.problem_url(pid, what);
        let shown = format!("problem {pid} {what}");
        let resp = self.agent.get(&url).call().map_err(|e| fetch_error(&shown, e))?;
        let v: serde_json::Value =
            serde_json::from_str(&read_body(resp)).map_err(|e| FetchError::new(format!("{shown}: not JSON: {e}")))?;
        Ok(unwrap_envelope(v))
    }

    /// `GET /problem/{pid}/testdata` into `dest`, at most `max` bytes.
    pub fn testdata(&self, pid: i64, dest: &Path, max: u64) -> Result<u64, FetchError> {
        self.download(&self.problem_url(pid, "testdata"), &format!("problem {pid} testdata"), dest, max)
    }

    /// Downloads `url` into `dest`, refusing more than `max` bytes. `shown`
    /// names it in errors (URLs may carry tokens: never logged).
    pub fn download(&self, url: &str, shown: &str, dest: &Path, max: u64) -> Result<u64, FetchError> {
        let resp = self.downloads.get(url).call().map_err(|e| fetch_error(shown, e))?;
        let mut f =
            std::fs::File::create(dest).map_err(|e| FetchError::new(format!("{shown}: {}: {e}", dest.display())))?;
        let mut r = resp.into_reader().take(max + 1);
        let n = std::io::copy(&mut r, &mut f).map_err(|e| FetchError::new(format!("{shown}: download: {e}")))?;
        if n > max {
            return Err(FetchError::new(format!("{shown}: larger than {max} bytes")));
        }
        f.flush().map_err(|e| FetchError::new(format!("{shown}: {e}")))?;
        Ok(n)
    }
}

/// Reads a registration from a 201 body (bare or wrapped).
pub fn parse_registration(body: &str) -> Result<Registration, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    serde_json::from_value(unwrap_envelope(v)).map_err(|e| e.to_string())
}

fn read_body(resp: ureq::Response) -> String {
    let mut s = String::new();
    // Hub bodies of interest are small; a large one is cut, not buffered whole.
    let _ = resp.into_reader().take(16 * 1024 * 1024).read_to_string(&mut s);
    s
}

fn fetch_error(shown: &str, e: ureq::Error) -> FetchError {
    match e {
        ureq::Error::Status(code, resp) => {
            let b: String = read_body(resp).chars().take(200).collect();
            let reach = if code >= 500 { Reach::Away } else { Reach::Answered };
            FetchError(format!("{shown}: HTTP {code} {b}"), reach)
        }
        ureq::Error::Transport(t) => FetchError(format!("{shown}: {}", t.kind()), Reach::Away),
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
