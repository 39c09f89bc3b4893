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

#![forbid(unsafe_code)]

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

pub mod archive;
pub mod icpc;
pub mod languages;
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

/// The longest id (runner or job) a runner takes, in bytes: ids are
/// opaque, but one past this is a mistake or an attack (Normal-OJ's are 24
/// bytes, ULIDs 26), and each is logged, stored and sent on every call.
pub const MAX_ID_BYTES: usize = 256;

/// An id the runner cannot take (see [`check_id`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} {shown}: {why}")]
pub struct BadId {
    /// Which id (`job_id`, `runner_id`).
    pub what: &'static str,
    /// The id as a log shows it (quoted, cut to 80 characters).
    pub shown: String,
    /// Why it cannot be taken.
    pub why: &'static str,
    /// Whether it can still be carried in a URL path (so the hub can be
    /// told, say by `abort(prep_failed)`).
    pub carriable: bool,
}

/// The one rule for an id that goes into a URL path (`PROTOCOL.md`: ids
/// are opaque strings): any string of 1 to [`MAX_ID_BYTES`] bytes but `.`
/// and `..`, which no URL can carry as a segment (a client or proxy
/// removes them, even percent-encoded). Every other character is carried,
/// percent-encoded ([`segment`]).
pub fn check_id(what: &'static str, id: &str) -> Result<(), BadId> {
    let bad = |why, carriable| {
        let shown: String = id.chars().take(80).collect();
        Err(BadId { what, shown: format!("{shown:?}"), why, carriable })
    };
    match id {
        "" => bad("empty", false),
        "." | ".." => bad("a dot segment, which no URL path can carry", false),
        _ if id.len() > MAX_ID_BYTES => bad("longer than 256 bytes", true),
        _ => Ok(()),
    }
}

/// The longest runner token a runner sends, in bytes.
pub const MAX_TOKEN_BYTES: usize = 1024;

/// Why a runner token cannot be sent as `Authorization: Bearer <token>`;
/// never holds the token, which must reach no log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the runner token cannot be sent as a header: {0}")]
pub struct BadToken(pub &'static str);

/// The rule for a runner token: 1 to [`MAX_TOKEN_BYTES`] bytes of visible
/// ASCII (`!` to `~`), what a bearer token and a header value can both
/// carry. Anything else (CR, LF, other control characters, spaces,
/// non-ASCII) could not be sent, or would be sent as something else.
pub fn check_token(token: &str) -> Result<(), BadToken> {
    if token.is_empty() {
        Err(BadToken("it is empty"))
    } else if token.len() > MAX_TOKEN_BYTES {
        Err(BadToken("it is longer than 1024 bytes"))
    } else if token.bytes().any(|b| b.is_ascii_control()) {
        Err(BadToken("it holds a control character (CR, LF or another)"))
    } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
        Err(BadToken("it holds a space or a character that is not ASCII"))
    } else {
        Ok(())
    }
}

/// What [`segment`] leaves as it is: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `id` as one URL path segment: every byte but the unreserved ones
/// percent-encoded (so `/`, `?`, `#`, `%`, spaces, control characters and
/// non-ASCII stay inside the segment). A hub decodes it ([`unsegment`]).
pub fn segment(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// A path segment decoded, as [`segment`] wrote it; `None` when its bytes
/// are not UTF-8.
pub fn unsegment(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s).decode_utf8().ok().map(|c| c.into_owned())
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

/// How far into a body [`Job::scan_id`] looks for a job id.
pub const SCAN_BYTES: usize = 64 * 1024;

/// Whether `id` can be an id of PROTOCOL.md's as a lenient scan reads it
/// (opaque, but printable): 1 to [`MAX_ID_BYTES`] bytes of printable ASCII,
/// no white space, no quote or backslash (a JSON escape is not read by a
/// lenient scan).
pub fn plausible_id(id: &str) -> bool {
    (1..=MAX_ID_BYTES).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
}

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

    /// The job id named in the first [`SCAN_BYTES`] of a body no parser
    /// reads (not UTF-8, nested past any limit, cut at the body limit): the
    /// first `"job_id"`, a colon, and a string that [`plausible_id`]
    /// accepts, white space allowed between them. Lenient and bounded, so
    /// that a job the hub handed out is handed back rather than left to
    /// its lease; a body naming no such id is no claim.
    pub fn scan_id(raw: &[u8]) -> Option<String> {
        let raw = &raw[..raw.len().min(SCAN_BYTES)];
        let key = b"\"job_id\"";
        let at = raw.windows(key.len()).position(|w| w == key)?;
        let ws = |b: &u8| b" \t\r\n".contains(b);
        let mut rest = &raw[at + key.len()..];
        rest = &rest[rest.iter().take_while(|b| ws(b)).count()..];
        rest = rest.strip_prefix(b":")?;
        rest = &rest[rest.iter().take_while(|b| ws(b)).count()..];
        rest = rest.strip_prefix(b"\"")?;
        let end = rest.iter().take(MAX_ID_BYTES + 1).position(|b| *b == b'"')?;
        let id = std::str::from_utf8(&rest[..end]).ok()?;
        plausible_id(id).then(|| id.to_string())
    }

    pub fn validate(&self) -> Result<(), BadJob> {
        check_id("job_id", &self.job_id).map_err(|e| BadJob(e.to_string()))?;
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

/// What `register` gives the runner to obey. Each value is clamped to its
/// range ([`HEARTBEAT_INTERVAL_SEC`], [`POLL_INTERVAL_SEC`],
/// [`MAX_CONCURRENT_JOBS`]) as it is read, from the wire or the spool, so
/// no hub, however wrong, hands the runner a value it cannot compute with:
/// a number past the range is its nearest end, and one past `i64` is too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerConfig {
    #[serde(default = "d15", deserialize_with = "heartbeat_interval")]
    pub heartbeat_interval_sec: i64,
    #[serde(default = "d3", deserialize_with = "poll_interval")]
    pub poll_interval_sec: i64,
    #[serde(default = "d8", deserialize_with = "max_concurrent_jobs")]
    pub max_concurrent_jobs: i64,
}

/// The heartbeat interval a runner obeys, in seconds: at least 1 (a beat a
/// second is the most a hub may ask), at most 300 (a lease the runner
/// assumes is two intervals; past ten minutes a lost runner's jobs would
/// wait that long for another).
pub const HEARTBEAT_INTERVAL_SEC: std::ops::RangeInclusive<i64> = 1..=300;
/// The idle poll interval a runner obeys, in seconds: 1 to 60 (past a
/// minute an idle runner would seem gone).
pub const POLL_INTERVAL_SEC: std::ops::RangeInclusive<i64> = 1..=60;
/// The jobs a runner holds at once: 1 to 1024 (a count, not a time, but
/// read the same way).
pub const MAX_CONCURRENT_JOBS: std::ops::RangeInclusive<i64> = 1..=1024;

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

fn heartbeat_interval<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    clamped(d, HEARTBEAT_INTERVAL_SEC)
}
fn poll_interval<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    clamped(d, POLL_INTERVAL_SEC)
}
fn max_concurrent_jobs<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    clamped(d, MAX_CONCURRENT_JOBS)
}

/// An integer (a number or a numeric string, of any size, fractions cut)
/// clamped to `range`.
fn clamped<'de, D: Deserializer<'de>>(d: D, range: std::ops::RangeInclusive<i64>) -> Result<i64, D::Error> {
    use serde::de::Error;
    let v = serde_json::Value::deserialize(d)?;
    // Exact for every i64; past it, `as` saturates a float to i64's ends.
    let i = match &v {
        serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        serde_json::Value::String(s) => {
            let s = s.trim();
            s.parse::<i64>().ok().or_else(|| s.parse::<f64>().ok().filter(|f| !f.is_nan()).map(|f| f as i64))
        }
        _ => None,
    }
    .ok_or_else(|| D::Error::custom(format!("{v} is not a number")))?;
    Ok(i.clamp(*range.start(), *range.end()))
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
/// 2^63: the first float past i64's range (and -2^63 its least value).
const I64_EDGE: f64 = 9_223_372_036_854_775_808.0;

fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        // A whole float (`3.0`, as Python may write it) is taken only in
        // range: `as` would saturate 1e300 to i64::MAX without a word.
        serde_json::Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && (-I64_EDGE..I64_EDGE).contains(f)).map(|f| f as i64))
            .ok_or_else(|| D::Error::custom(format!("{n} is not an integer in range"))),
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
    #[test]
    fn a_job_id_is_found_in_a_body_no_parser_reads() {
        use super::Job;
        let mut bad_utf8 = br#"{"job_id": "jb_1", "submission_id": "6"#.to_vec();
        bad_utf8.extend([0xff, b'"', b'}']);
        assert_eq!(Job::scan_id(&bad_utf8).as_deref(), Some("jb_1"));
        let deep = format!(r#"{{"data": {{"job_id" :"jb_2", "x": {}}}}}"#, "[".repeat(100_000));
        assert_eq!(Job::scan_id(deep.as_bytes()).as_deref(), Some("jb_2"));
        let cut = format!(r#"{{"job_id":"jb_3","tasks":[{}"#, "0,".repeat(1 << 20));
        assert_eq!(Job::scan_id(&cut.as_bytes()[..cut.len().min(16 << 20)]).as_deref(), Some("jb_3"));
        for none in
            [&b"{}"[..], br#"{"job_id": 7}"#, br#"{"job_id": ""}"#, br#"{"job_id": "a b"}"#, br#"{"job_id": "a\"b"}"#]
        {
            assert_eq!(Job::scan_id(none), None, "{}", String::from_utf8_lossy(none));
        }
        let far = format!(r#"{{"pad": "{}", "job_id": "jb_4"}}"#, " ".repeat(super::SCAN_BYTES));
        assert_eq!(Job::scan_id(far.as_bytes()), None, "looked past SCAN_BYTES");
        let long = format!(r#"{{"job_id": "{}"}}"#, "x".repeat(super::MAX_ID_BYTES + 1));
        assert_eq!(Job::scan_id(long.as_bytes()), None);
    }

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
    fn a_whole_float_is_an_integer_only_in_range() {
        let with = |id: &str| Job::parse(&JOB.replace("\"42\"", id));
        assert_eq!(with("42.0").unwrap().problem_id, 42);
        assert_eq!(with("-9.223372036854775808e18").unwrap().problem_id, i64::MIN);
        for bad in ["1e300", "9.223372036854775808e18", "18446744073709551615", "-1e19", "4.5"] {
            let e = with(bad).unwrap_err();
            assert!(e.0.contains("not an integer"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_runner_config_is_clamped_to_its_ranges_as_it_is_read() {
        let read = |json: &str| serde_json::from_str::<RunnerConfig>(json).unwrap();
        let c = |h, p, m| RunnerConfig { heartbeat_interval_sec: h, poll_interval_sec: p, max_concurrent_jobs: m };
        assert_eq!(read("{}"), RunnerConfig::default());
        assert_eq!(read(r#"{"heartbeat_interval_sec": "20", "poll_interval_sec": 2.0}"#), c(20, 2, 8));
        let huge = r#"{"heartbeat_interval_sec": 9223372036854775807, "poll_interval_sec": 1e300,
                       "max_concurrent_jobs": "18446744073709551616"}"#;
        assert_eq!(read(huge), c(300, 60, 1024));
        let small = r#"{"heartbeat_interval_sec": 0, "poll_interval_sec": -9223372036854775808,
                        "max_concurrent_jobs": "-1"}"#;
        assert_eq!(read(small), c(1, 1, 1));
        assert!(serde_json::from_str::<RunnerConfig>(r#"{"poll_interval_sec": "soon"}"#).is_err());
        assert!(serde_json::from_str::<RunnerConfig>(r#"{"poll_interval_sec": null}"#).is_err());
    }

    #[test]
    fn ids_are_carried_as_one_segment_or_refused() {
        for id in ["jb_1#2", "jb_1/2", "jb_1?x", "jb_%", "jb 1", "jb_日本", "jb_\n", "jb_%2F", "jb_-._~"] {
            let s = segment(id);
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{id:?}: {s}");
            assert_eq!(unsegment(&s).as_deref(), Some(id));
            assert_eq!(check_id("job_id", id), Ok(()));
        }
        assert_eq!(segment("jb_1#2/3"), "jb_1%232%2F3");
        for (id, carriable) in [("", false), (".", false), ("..", false), (&*"x".repeat(257), true)] {
            let e = check_id("job_id", id).unwrap_err();
            assert_eq!(e.carriable, carriable, "{e}");
        }
        assert_eq!(check_id("job_id", &"x".repeat(256)), Ok(()));
        assert!(Job::parse(&JOB.replace("jb_1", "..")).unwrap_err().0.contains("dot segment"));
        assert_eq!(unsegment("%FF"), None);
    }

    #[test]
    fn a_token_is_visible_ascii_and_its_refusal_never_holds_it() {
        assert_eq!(check_token("rk_0123abcDEF-._~+/="), Ok(()));
        for bad in
            ["", "rk_x\r\nX-Injected: 1", "rk_x\n", "rk_\u{7f}", "rk_\u{0}", "rk x", "rk_\u{e9}", &"x".repeat(1025)]
        {
            let e = check_token(bad).unwrap_err();
            assert!(bad.is_empty() || !e.to_string().contains(bad), "{e}");
            assert!(!e.to_string().contains("rk_"), "{e}");
        }
    }

    #[test]
    fn statuses_order_by_severity() {
        assert_eq!(Verdict::AC.worst(Verdict::WA), Verdict::WA);
        assert_eq!(Verdict::OLE.worst(Verdict::JE), Verdict::OLE);
        assert_eq!(serde_json::to_string(&Verdict::TLE).unwrap(), "\"TLE\"");
    }
}
