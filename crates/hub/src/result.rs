//! A `complete` body into a verdict, as Normal-OJ's `process_result` does:
//! a task's status is its worst case, a task scores its `taskScore` only if
//! every case is AC, the submission's status is its worst task and its score
//! the sum. The body must fit the problem's meta exactly, or it is refused
//! (400): a result for other cases than the ones asked for judges nothing.

use ojrunner_protocol::{Outcome, Task, Verdict};
use serde_json::json;

/// How much of each case's stderr `status` keeps.
const STDERR_KEPT: usize = 200;

/// A landed result, scored.
#[derive(Debug, PartialEq)]
pub struct Scored {
    pub status: Verdict,
    pub score: i64,
    /// `[{"status","score","cases":[{"status","execTime","memoryUsage","stderr"}]}]`.
    pub tasks: serde_json::Value,
}

/// Why a `complete` body is refused (answered 400 with these words).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotAResult(pub String);

/// Checks `body` against `tasks` and scores it; the error says why not.
pub fn judge(body: &str, tasks: &[Task]) -> Result<Scored, NotAResult> {
    let outcome: Outcome = serde_json::from_str(body).map_err(|e| NotAResult(format!("not a result payload: {e}")))?;
    if outcome.tasks.len() != tasks.len() {
        return Err(NotAResult(format!("{} task lists for {} tasks", outcome.tasks.len(), tasks.len())));
    }
    let mut status = Verdict::AC;
    let mut score = 0;
    let mut summary = Vec::new();
    for (i, (cases, task)) in outcome.tasks.iter().zip(tasks).enumerate() {
        if cases.len() as i64 != task.case_count {
            return Err(NotAResult(format!("task {i}: {} cases for caseCount {}", cases.len(), task.case_count)));
        }
        let task_status = cases.iter().fold(Verdict::AC, |worst, c| worst.worst(c.status));
        let task_score = if cases.iter().all(|c| c.status == Verdict::AC) { task.task_score } else { 0 };
        status = status.worst(task_status);
        score += task_score;
        let cases: Vec<_> = cases
            .iter()
            .map(|c| {
                let stderr: String = c.stderr.chars().take(STDERR_KEPT).collect();
                json!({"status": c.status, "execTime": c.exec_time, "memoryUsage": c.memory_usage, "stderr": stderr})
            })
            .collect();
        summary.push(json!({"status": task_status, "score": task_score, "cases": cases}));
    }
    Ok(Scored { status, score, tasks: serde_json::Value::Array(summary) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(score: i64, cases: i64) -> Task {
        Task { task_score: score, memory_limit: 65536, time_limit: 1000, case_count: cases }
    }

    fn case(status: &str) -> String {
        format!(r#"{{"status":"{status}","execTime":1,"memoryUsage":2,"exitCode":0,"stdout":"","stderr":"e"}}"#)
    }

    #[test]
    fn tasks_score_only_when_every_case_is_ac() {
        let tasks = [task(40, 2), task(60, 1)];
        let body = format!(r#"{{"tasks":[[{},{}],[{}]]}}"#, case("AC"), case("TLE"), case("AC"));
        let v = judge(&body, &tasks).unwrap();
        assert_eq!((v.status, v.score), (Verdict::TLE, 60));
        assert_eq!(v.tasks[0]["status"], "TLE");
        assert_eq!(v.tasks[1]["cases"][0]["stderr"], "e");
    }

    #[test]
    fn a_result_that_does_not_fit_the_meta_is_refused() {
        let tasks = [task(100, 2)];
        let one = format!(r#"{{"tasks":[[{}]]}}"#, case("AC"));
        assert!(judge(&one, &tasks).unwrap_err().0.contains("1 cases for caseCount 2"));
        assert!(judge(r#"{"tasks":[]}"#, &tasks).is_err());
        assert!(judge("{", &tasks).is_err());
        let unknown = format!(r#"{{"tasks":[[{},{}]]}}"#, case("AC"), case("XX"));
        assert!(judge(&unknown, &tasks).is_err());
    }
}
