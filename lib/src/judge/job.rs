//! One job's judging, as `judge-exec` (`stage/judge_exec.rs`) and `judge-exec
//! run` (`standalone.rs`) both do it: [`Judge::judge_all`] compiles once and
//! runs the cases side by side ([`Judge::run_cases`]), or gives every case
//! the same result when there is nothing to run (CE, JE).

use super::checker_program::PrepareError;
use super::files::{annotate, clear_scratch};
use super::{CaseRun, Compiled, Judge, Slot};
use crate::checker::Checker;
use crate::language::Language;
use crate::protocol::{CaseResult, Task};
use crate::sandbox::slot::SlotPool;
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};

/// One case of a job.
#[derive(Clone, Debug)]
pub struct Case {
    /// Task and case index.
    pub task: usize,
    pub case: usize,
    pub input: PathBuf,
    pub answer: PathBuf,
}

/// A submission as it comes to [`Judge::judge_all`]: not yet compiled.
pub struct Submitted<'a> {
    /// Its language; `Err`: it is not in this runner's table (every case JE).
    pub lang: Result<&'a Language, UnknownLanguage>,
    /// Its directory: staged into a [`Workspace`] before the compile.
    pub src: &'a Path,
    /// The job's tasks: each case's limits.
    pub tasks: &'a [Task],
    /// The job's checker, prepared ([`Judge::prepare_checker`]); `Err`: why
    /// not (every case JE, and nothing is compiled).
    pub checker: Result<Checker, PrepareError>,
}

/// A job's language id that this runner's table does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("language {0} is not in this runner's table")]
pub struct UnknownLanguage(pub i64);

/// A compiled submission: what every case of it shares.
pub struct Submission<'a> {
    pub lang: &'a Language,
    /// The workspace it was compiled in (and runs in, read-only).
    pub src: &'a Workspace,
    /// The job's tasks: each case's limits.
    pub tasks: &'a [Task],
    pub checker: &'a Checker,
}

/// Where a job's cases run: the claim's own slot, whatever idle slots
/// `pool` lends, each in its own scratch directory below `scratch`
/// (`slot-<uid>`, reused from case to case).
pub struct Slots<'a> {
    pub own: Slot,
    pub pool: Option<&'a SlotPool>,
    pub scratch: &'a Path,
}

impl Judge {
    /// Judges `cases` of `job`: compiles it once, as `slots.own`, in a
    /// workspace of its own (or finds it in the judge's compile cache),
    /// then runs them ([`Judge::run_cases`]). When there is nothing to run
    /// (no checker, no language, a CE, the judge's own failure) `record`
    /// gets the same result for every case, in order, until it returns
    /// false. Nothing is compiled when no case is left to
    /// run. Returns how the compile went.
    pub fn judge_all(
        &self,
        job: &Submitted<'_>,
        cases: &[Case],
        slots: &Slots<'_>,
        record: impl FnMut(&Case, CaseRun) -> bool,
    ) -> Compiled {
        let (lang, checker) = match (&job.lang, &job.checker) {
            (_, Err(why)) => return record_all(cases, Compiled::JudgeError(why.to_string()), record),
            (Err(why), _) => return record_all(cases, Compiled::JudgeError(why.to_string()), record),
            (Ok(lang), Ok(checker)) => (*lang, checker),
        };
        if cases.is_empty() {
            return Compiled::Ready;
        }
        // Judged where no path of the host shows (`workspace.rs`).
        let src = match Workspace::stage(job.src) {
            Ok(w) => w,
            Err(e) => return record_all(cases, Compiled::JudgeError(format!("staging the submission: {e}")), record),
        };
        match self.compile_with(lang, &src, &slots.own, self.compile_cache.as_ref()) {
            Compiled::Ready => {
                let sub = Submission { lang, src: &src, tasks: job.tasks, checker };
                self.run_cases(&sub, cases, slots, record);
                Compiled::Ready
            }
            failed => record_all(cases, failed, record),
        }
    }

    /// Runs `cases` of one compiled submission on the claim's own slot and
    /// on whatever idle slots the pool lends, side by side (see [`Slots`]);
    /// `record` gets each result (and which limit stopped the program), in
    /// this thread, as it comes, and stops the job by returning false (the
    /// cases already running finish, unrecorded). A borrowed slot goes back
    /// after its case as soon as another claim waits for one ([`SlotPool`]).
    pub fn run_cases(
        &self,
        sub: &Submission<'_>,
        cases: &[Case],
        slots: &Slots<'_>,
        mut record: impl FnMut(&Case, CaseRun) -> bool,
    ) {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let pool = slots.pool;
        let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<(usize, CaseRun)>();
        /// Gives a borrowed slot back however its thread ends (a panic too).
        struct Borrowed<'p>(Option<(usize, &'p SlotPool)>);
        impl Drop for Borrowed<'_> {
            fn drop(&mut self) {
                if let Some((i, pool)) = self.0 {
                    pool.give(i);
                }
            }
        }
        let work = |slot: Slot, lent: Option<usize>, tx: std::sync::mpsc::Sender<(usize, CaseRun)>| {
            let _borrowed = Borrowed(lent.zip(pool));
            let dir = slots.scratch.join(format!("slot-{}", slot.uid));
            let made = std::fs::create_dir_all(&dir).map_err(|e| annotate(e, &dir).to_string());
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = cases.get(i) else { break };
                // What the last case left there (its TMPDIR at the basic level) goes.
                let began = std::time::Instant::now();
                let cleared = made.clone().and_then(|()| clear_scratch(&dir).map_err(|e| e.to_string()));
                let mut r = match cleared {
                    Ok(()) => self.run_case(sub, c, &slot, &dir),
                    Err(e) => CaseRun::judge_error(&format!("scratch directory: {e}")),
                };
                r.timing = Some(super::CaseTiming { began, took: began.elapsed() });
                if tx.send((i, r)).is_err() || (lent.is_some() && pool.is_some_and(|p| p.wanted())) {
                    break;
                }
            }
        };
        std::thread::scope(|s| {
            let mut borrowed = 0;
            while let Some(i) = pool.filter(|_| borrowed + 1 < cases.len()).and_then(|p| p.lend()) {
                let tx = tx.clone();
                let work = &work;
                s.spawn(move || work(Slot::for_index(i), Some(i), tx));
                borrowed += 1;
            }
            let own_tx = tx.clone();
            s.spawn(|| work(slots.own, None, own_tx));
            drop(tx);
            for (i, r) in rx {
                if !stop.load(Ordering::Relaxed) && !record(&cases[i], r) {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        });
    }
}

/// Gives every case the result `compiled` means (CE with the compiler's
/// message, JE with why), until `record` returns false; returns `compiled`.
fn record_all(cases: &[Case], compiled: Compiled, mut record: impl FnMut(&Case, CaseRun) -> bool) -> Compiled {
    let result = match &compiled {
        Compiled::Failed { message } => CaseResult::compile_error(message),
        Compiled::JudgeError(why) => CaseResult::judge_error(why),
        Compiled::Ready => return compiled,
    };
    for c in cases {
        if !record(c, CaseRun { result: result.clone(), limit: None, timing: None }) {
            break;
        }
    }
    compiled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::Languages;
    use crate::protocol::Verdict;

    #[test]
    fn with_nothing_to_run_every_case_gets_the_same_result_until_record_stops() {
        let langs = Languages::builtin();
        let tasks = [Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: 3 }];
        let cases: Vec<Case> =
            (0..3).map(|c| Case { task: 0, case: c, input: "in".into(), answer: "out".into() }).collect();
        let slots = Slots { own: Slot { uid: 0, gid: 0 }, pool: None, scratch: Path::new("/nonexistent") };
        let job = |lang, checker| Submitted { lang, src: Path::new("/nonexistent"), tasks: &tasks, checker };
        let c11 = langs.by_name("c11").unwrap();
        let judge = Judge::default();
        let judged = |job: &Submitted, stop_after: usize| {
            let mut got = Vec::new();
            let compiled = judge.judge_all(job, &cases, &slots, |c, r| {
                got.push((c.case, r.result.status, r.result.stderr));
                got.len() < stop_after
            });
            (compiled, got)
        };
        // No checker: JE with why, and the checker's failure wins over the language's.
        let broken = || Err(PrepareError::NoSource { stem: "checker" });
        let no_checker = job(Err(UnknownLanguage(9)), broken());
        let (compiled, got) = judged(&no_checker, 9);
        let why = "checker: no checker.cpp or checker.c in the testdata";
        assert_eq!(compiled, Compiled::JudgeError(why.into()));
        let je = |c| (c, Verdict::JE, why.to_string());
        assert_eq!(got, [je(0), je(1), je(2)]);
        // Recording stops when `record` says so.
        assert_eq!(judged(&no_checker, 2).1.len(), 2);
        // No language.
        let (compiled, got) = judged(&job(Err(UnknownLanguage(9)), Ok(Checker::Diff)), 9);
        assert_eq!(compiled, Compiled::JudgeError("language 9 is not in this runner's table".into()));
        assert_eq!(got.len(), 3);
        // No case left: nothing compiled, nothing recorded (the source is not even read).
        let done = judge.judge_all(&job(Ok(c11), Ok(Checker::Diff)), &[], &slots, |_, _| panic!("recorded"));
        assert_eq!(done, Compiled::Ready);
    }
}
