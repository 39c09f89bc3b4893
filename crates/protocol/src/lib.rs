//! The wire types of the hub protocol (`PROTOCOL.md`): what `next-job`
//! hands out, what `complete` carries, and the verdict codes.
//! Both sides use these very types, the runner (`ojrunner`, which
//! re-exports them as `ojrunner::protocol`) and the reference hub
//! (`ojrunner-hub`), so they cannot drift apart.
//!
//! Parsing is tolerant where Normal-OJ's backend is loose (numbers that may
//! arrive as numeric strings, bodies that may or may not be wrapped in
//! `{"status","message","data"}`) and strict where a mistake would judge the
//! wrong thing (task scores must sum to 100, at least one task).

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

pub mod archive;
pub mod testdata;

/// A verdict, in the hub's order: the numeric code is the severity, so a
/// task's status is the case status with the largest code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Verdict {
    AC,
    WA,
    CE,
    TLE,
    MLE,
    RE,
    JE,
    OLE,
}

impl Verdict {
    /// The hub's integer code (Normal-OJ's `status2code`).
    pub fn code(self) -> u8 {
        match self {
            Verdict::AC => 0,
            Verdict::WA => 1,
            Verdict::CE => 2,
            Verdict::TLE => 3,
            Verdict::MLE => 4,
            Verdict::RE => 5,
            Verdict::JE => 6,
            Verdict::OLE => 7,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::AC => "AC",
            Verdict::WA => "WA",
            Verdict::CE => "CE",
            Verdict::TLE => "TLE",
            Verdict::MLE => "MLE",
            Verdict::RE => "RE",
            Verdict::JE => "JE",
            Verdict::OLE => "OLE",
        }
    }

    /// The worse of two verdicts, by the hub's severity order.
    pub fn worst(self, other: Verdict) -> Verdict {
        if other.code() > self.code() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict name that is none of the protocol's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown status {0:?}")]
pub struct UnknownVerdict(pub String);

impl std::str::FromStr for Verdict {
    type Err = UnknownVerdict;
    fn from_str(s: &str) -> Result<Self, UnknownVerdict> {
        Ok(match s {
            "AC" => Verdict::AC,
            "WA" => Verdict::WA,
            "CE" => Verdict::CE,
            "TLE" => Verdict::TLE,
            "MLE" => Verdict::MLE,
            "RE" => Verdict::RE,
            "JE" => Verdict::JE,
            "OLE" => Verdict::OLE,
            _ => return Err(UnknownVerdict(s.to_string())),
        })
    }
}

/// One task of a problem: its limits and how many cases it has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    #[serde(rename = "taskScore", deserialize_with = "int")]
    pub task_score: i64,
    /// KiB.
    #[serde(rename = "memoryLimit", deserialize_with = "int")]
    pub memory_limit: i64,
    /// Milliseconds of CPU time.
    #[serde(rename = "timeLimit", deserialize_with = "int")]
    pub time_limit: i64,
    #[serde(rename = "caseCount", deserialize_with = "int")]
    pub case_count: i64,
}

/// A job as `next-job` hands it out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub job_id: String,
    #[serde(deserialize_with = "string")]
    pub submission_id: String,
    #[serde(deserialize_with = "int")]
    pub problem_id: i64,
    #[serde(deserialize_with = "int")]
    pub language: i64,
    pub code_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker: Option<String>,
    pub tasks: Vec<Task>,
}

/// Why a job payload cannot be judged (the claim ends as `abort(prep_failed)`).
#[derive(Clone, Debug, thiserror::Error)]
#[error("malformed job payload: {0}")]
pub struct BadJob(pub String);

/// Limits past which a task is not a mistake but an attack or a typo.
const MAX_CASES_PER_TASK: i64 = 100;
const MAX_TASKS: usize = 100;

/// Why a problem (its tasks or its testdata) cannot be judged: a runner
/// ends such a job as `abort(prep_failed)`; `hubd problem add` refuses it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadProblem(pub String);

/// The one rule for a problem's tasks, the runner's and the hub's: what
/// Normal-OJ's `Meta` checks (at least one task, scores summing to 100)
/// and limits a sandbox can honour.
pub fn check_tasks(tasks: &[Task]) -> Result<(), BadProblem> {
    let bad = |m: String| Err(BadProblem(m));
    if tasks.is_empty() {
        return bad("no tasks".into());
    }
    if tasks.len() > MAX_TASKS {
        return bad(format!("{} tasks (at most {MAX_TASKS})", tasks.len()));
    }
    // Summed wide: at most MAX_TASKS scores of any i64 cannot overflow it.
    let sum: i128 = tasks.iter().map(|t| i128::from(t.task_score)).sum();
    if sum != 100 {
        return bad(format!("task scores sum to {sum}, not 100"));
    }
    for (i, t) in tasks.iter().enumerate() {
        if t.task_score < 0 {
            return bad(format!("task {i}: negative taskScore"));
        }
        if t.case_count < 1 || t.case_count > MAX_CASES_PER_TASK {
            return bad(format!("task {i}: caseCount {} out of 1..={MAX_CASES_PER_TASK}", t.case_count));
        }
        if t.time_limit < 1 || t.time_limit > 60_000 {
            return bad(format!("task {i}: timeLimit {} ms out of 1..=60000", t.time_limit));
        }
        if t.memory_limit < 1024 || t.memory_limit > 16 * 1024 * 1024 {
            return bad(format!("task {i}: memoryLimit {} KiB out of 1024..=16777216", t.memory_limit));
        }
    }
    Ok(())
}

impl Job {
    /// Parses a `next-job` body (bare or wrapped) and checks what Normal-OJ's
    /// `Meta` checks: at least one task, scores summing to 100, sane limits.
    pub fn parse(body: &str) -> Result<Job, BadJob> {
        let v: serde_json::Value = serde_json::from_str(body).map_err(|e| BadJob(format!("not JSON: {e}")))?;
        let job: Job = serde_json::from_value(unwrap_envelope(v)).map_err(|e| BadJob(e.to_string()))?;
        job.validate()?;
        Ok(job)
    }

    /// The job id alone, from a payload too broken to parse whole: enough to
    /// hand the job back with `abort(prep_failed)`.
    pub fn id_of(body: &str) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(body).ok()?;
        unwrap_envelope(v).get("job_id")?.as_str().filter(|s| !s.is_empty()).map(String::from)
    }

    pub fn validate(&self) -> Result<(), BadJob> {
        if self.job_id.is_empty() {
            return Err(BadJob("empty job_id".into()));
        }
        check_tasks(&self.tasks).map_err(|e| BadJob(e.0))
    }

    /// The number of cases over all tasks.
    pub fn case_count(&self) -> usize {
        self.tasks.iter().map(|t| t.case_count as usize).sum()
    }
}

/// The result of one case, as the `complete` body carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseResult {
    pub status: Verdict,
    /// Milliseconds of CPU time (-1 when not measured).
    #[serde(rename = "execTime")]
    pub exec_time: i64,
    /// KiB (-1 when not measured).
    #[serde(rename = "memoryUsage")]
    pub memory_usage: i64,
    #[serde(rename = "exitCode")]
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
}

impl CaseResult {
    /// A case the judge itself could not judge.
    pub fn judge_error(why: &str) -> CaseResult {
        CaseResult {
            status: Verdict::JE,
            exec_time: -1,
            memory_usage: -1,
            exit_code: -1,
            stdout: String::new(),
            stderr: why.to_string(),
        }
    }
}

impl CaseResult {
    /// A case of a submission that did not compile: CE, with the compiler's
    /// message where the hub shows it.
    pub fn compile_error(message: &str) -> CaseResult {
        CaseResult {
            status: Verdict::CE,
            exec_time: -1,
            memory_usage: -1,
            exit_code: -1,
            stdout: String::new(),
            stderr: message.to_string(),
        }
    }
}

/// The `complete` body: one list per task, cases in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub tasks: Vec<Vec<CaseResult>>,
}

/// Why a claim is handed back (`abort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortReason {
    /// The runner is stopping; the job costs no attempt.
    Drain,
    /// The job could not be prepared (bad payload, code or testdata).
    PrepFailed,
    /// The hub refused the result (400).
    Rejected,
}

impl AbortReason {
    pub fn as_str(self) -> &'static str {
        match self {
            AbortReason::Drain => "drain",
            AbortReason::PrepFailed => "prep_failed",
            AbortReason::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<AbortReason> {
        match s {
            "drain" => Some(AbortReason::Drain),
            "prep_failed" => Some(AbortReason::PrepFailed),
            "rejected" => Some(AbortReason::Rejected),
            _ => None,
        }
    }
}

/// What `register` gives the runner to obey.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerConfig {
    #[serde(default = "d15", deserialize_with = "int")]
    pub heartbeat_interval_sec: i64,
    #[serde(default = "d3", deserialize_with = "int")]
    pub poll_interval_sec: i64,
    #[serde(default = "d8", deserialize_with = "int")]
    pub max_concurrent_jobs: i64,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig { heartbeat_interval_sec: 15, poll_interval_sec: 3, max_concurrent_jobs: 8 }
    }
}

fn d15() -> i64 {
    15
}
fn d3() -> i64 {
    3
}
fn d8() -> i64 {
    8
}

/// The `register` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub runner_id: String,
    pub token: String,
    #[serde(default)]
    pub config: RunnerConfig,
}

/// Strips Normal-OJ's `{"status","message","data"}` envelope when present.
pub fn unwrap_envelope(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(mut m) if m.contains_key("data") && m.contains_key("status") => {
            m.remove("data").unwrap_or(serde_json::Value::Null)
        }
        other => other,
    }
}

/// Wraps a value as Normal-OJ's backend does for `/problem/*`.
pub fn envelope(data: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"status": "ok", "message": "", "data": data})
}

/// An integer that may arrive as a number or a numeric string.
fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| D::Error::custom(format!("{n} is not an integer"))),
        serde_json::Value::String(s) => {
            s.trim().parse().map_err(|_| D::Error::custom(format!("{s:?} is not an integer")))
        }
        other => Err(D::Error::custom(format!("{other} is not an integer"))),
    }
}

/// A string that may arrive as a number.
fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Ok(s),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(D::Error::custom(format!("{other} is not a string"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = r#"{"job_id": "jb_1", "submission_id": "65f", "problem_id": "42", "language": 0,
        "code_url": "http://hub/code/65f.zip", "checker": "diff",
        "tasks": [{"taskScore": 40, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 3},
                  {"taskScore": "60", "memoryLimit": 65536, "timeLimit": 2000, "caseCount": 5}]}"#;

    #[test]
    fn a_job_parses_with_numeric_strings_and_an_envelope() {
        let j = Job::parse(JOB).unwrap();
        assert_eq!(j.problem_id, 42);
        assert_eq!(j.tasks[1].task_score, 60);
        assert_eq!(j.case_count(), 8);
        let wrapped = format!(r#"{{"status":"ok","message":"","data":{JOB}}}"#);
        assert_eq!(Job::parse(&wrapped).unwrap(), j);
    }

    #[test]
    fn a_job_whose_scores_do_not_sum_to_100_is_refused() {
        let bad = JOB.replace("\"60\"", "59");
        let e = Job::parse(&bad).unwrap_err();
        assert!(e.0.contains("sum to 99"), "{e}");
        assert_eq!(Job::id_of(&bad).as_deref(), Some("jb_1"));
        assert!(Job::parse("{not json").is_err());
        assert!(Job::parse(&JOB.replace("\"tasks\"", "\"tusks\"")).is_err());
    }

    // See: issue 23, fuzz/regressions/hub_next_job (scores past i64 once
    // overflowed their sum, a panic in a debug build).
    #[test]
    fn scores_whose_sum_overflows_an_i64_are_refused() {
        let bad = JOB.replace("\"60\"", &i64::MAX.to_string());
        let e = Job::parse(&bad).unwrap_err();
        assert!(e.0.contains(&format!("sum to {}", i128::from(i64::MAX) + 40)), "{e}");
    }

    #[test]
    fn statuses_order_by_severity() {
        assert_eq!(Verdict::AC.worst(Verdict::WA), Verdict::WA);
        assert_eq!(Verdict::OLE.worst(Verdict::JE), Verdict::OLE);
        assert_eq!(serde_json::to_string(&Verdict::TLE).unwrap(), "\"TLE\"");
    }
}
