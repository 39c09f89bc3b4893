//! A runner written by hand: the protocol's calls one by one (register,
//! poll, beat, complete, abort), for the hub's own suites.

use super::http::http_exchange;
use super::hub::REGISTRATION_TOKEN;
use super::wait::wait_for;
use std::time::Duration;

/// A runner identity speaking the protocol by hand (one fresh connection a
/// call), for the hub's own suites.
#[derive(Clone)]
pub struct HandRunner {
    pub url: String,
    pub id: String,
    pub token: String,
}

impl HandRunner {
    /// Registers at the hub at `url` under `name`.
    pub fn register(url: &str, name: &str) -> HandRunner {
        let body = serde_json::json!({"registration_token": REGISTRATION_TOKEN, "name": name}).to_string();
        let (code, reply) = http_exchange("POST", &format!("{url}/runners/register"), None, Some(&body));
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&reply));
        let reply: serde_json::Value = serde_json::from_slice(&reply).expect("a JSON registration");
        HandRunner {
            url: url.to_string(),
            id: reply["runner_id"].as_str().unwrap().into(),
            token: reply["token"].as_str().unwrap().into(),
        }
    }

    /// The URL of this runner's `rest` (`heartbeat`, `jobs/{jb}/…`).
    pub fn at(&self, rest: &str) -> String {
        format!("{}/runners/{}/{rest}", self.url, self.id)
    }

    fn send(&self, method: &str, rest: &str, body: Option<&str>) -> (u16, Vec<u8>) {
        http_exchange(method, &self.at(rest), Some(&self.token), body)
    }

    /// `next-job?wait=S`: the status and the payload when 200.
    pub fn next_job(&self, wait: u32) -> (u16, Option<serde_json::Value>) {
        let (code, body) = self.send("GET", &format!("next-job?wait={wait}"), None);
        (code, (code == 200).then(|| serde_json::from_slice(&body).expect("a JSON job")))
    }

    /// A job, asking until one comes (at most `limit`).
    pub fn claim(&self, limit: Duration) -> serde_json::Value {
        wait_for("a job to claim", limit, || self.next_job(1).1)
    }

    pub fn heartbeat(&self, jobs: &[&str]) -> u16 {
        self.send("POST", "heartbeat", Some(&serde_json::json!({"active_job_ids": jobs}).to_string())).0
    }

    /// `DELETE next-job`: ends this runner's waiting poll.
    pub fn cancel_poll(&self) -> u16 {
        self.send("DELETE", "next-job", None).0
    }

    pub fn complete(&self, job: &str, body: &str) -> u16 {
        self.send("PUT", &format!("jobs/{job}/complete"), Some(body)).0
    }

    pub fn abort(&self, job: &str, reason: &str) -> u16 {
        self.send("PUT", &format!("jobs/{job}/abort"), Some(&serde_json::json!({ "reason": reason }).to_string())).0
    }
}
