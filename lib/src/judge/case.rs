//! One case: the program's run under the task's limits, its verdict
//! ([`verdict::decide`]) and, when it ran cleanly, the checker's.
//!
//! A [`CaseContext`] holds all that one case's runs need (the submission,
//! the task, the case's files, the slot and its scratch directory), so that
//! the program's run, the checker's and the interactor's
//! (`interactive.rs`) take nothing but it.

use super::capped::{cap_string, message_after, read_back};
use super::files::{annotate, create_fresh, run_output, set_mode, CheckDir};
use super::spec::RunSpec;
use super::{Case, CaseRun, Judge, Slot, Submission, CHECKER_DIR, CHECK_DIR, SRC};
use crate::checker::{Checker, Program};
use crate::language::Toolchain;
use crate::protocol::{CaseResult, Task, Verdict};
use crate::sandbox::{self, Bind, Fired, Limits, OutputWatch};
use crate::verdict;
use std::fs::File;
use std::io::Seek;
use std::path::Path;

impl Judge {
    /// Runs `case` of `sub` as `slot`: `lang.run` in the workspace, stdin
    /// from the case's input, stdout and stderr to memfds (`files.rs`),
    /// under its task's limits; decides the verdict
    /// ([`verdict::decide`]) and, if the program ran cleanly, lets the
    /// submission's checker compare its stdout with the answer.
    ///
    /// `exec_time` is CPU ms (user + system), `memory_usage` peak KiB,
    /// `exit_code` the exit code or 128 + the signal; `stdout`/`stderr` are
    /// the first [`Judge::output_cap`] bytes, lossily decoded as UTF-8. The
    /// judge's own failures are JE with the reason in `stderr`.
    pub fn run_case(&self, sub: &Submission<'_>, case: &Case, slot: &Slot, scratch: &Path) -> CaseRun {
        let Some(task) = sub.tasks.get(case.task) else { return CaseRun::judge_error("a case of no task") };
        let ctx =
            CaseContext { judge: self, sub, task, input: &case.input, answer: &case.answer, slot: *slot, scratch };
        match sub.checker {
            Checker::Interactive(p) => ctx.run_interactive(p),
            Checker::IcpcInteractive(v) => ctx.run_icpc_interactive(v),
            Checker::Unprepared => {
                CaseRun::judge_error(&Checker::Unprepared.check(&b""[..], &b""[..]).unwrap_err().to_string())
            }
            _ => ctx.run(),
        }
    }
}

/// Everything one case's runs need.
pub(super) struct CaseContext<'a> {
    pub(super) judge: &'a Judge,
    pub(super) sub: &'a Submission<'a>,
    pub(super) task: &'a Task,
    pub(super) input: &'a Path,
    pub(super) answer: &'a Path,
    pub(super) slot: Slot,
    /// The slot's scratch directory: its stdout and stderr files, the
    /// program's `TMPDIR` at the basic level.
    pub(super) scratch: &'a Path,
}

impl CaseContext<'_> {
    /// The program's run with a checker that reads its output afterwards.
    fn run(&self) -> CaseRun {
        let opened = (|| {
            self.hand_over()?;
            let stdin = File::open(self.input).map_err(|e| annotate(e, self.input))?;
            Ok::<_, std::io::Error>((stdin, run_output(c"stdout")?, run_output(c"stderr")?))
        })();
        let (stdin, mut stdout, mut stderr) = match opened {
            Ok(files) => files,
            Err(e) => return CaseRun::judge_error(&format!("preparing the case: {e}")),
        };
        let limits = self.limits();
        let (out_w, err_w) = match (stdout.try_clone(), stderr.try_clone()) {
            (Ok(o), Ok(e)) => (o, e),
            _ => return CaseRun::judge_error("cannot duplicate the output files"),
        };
        let program = match self.program(limits.clone()) {
            Ok(p) => p,
            Err(why) => return CaseRun::judge_error(&why),
        };
        // The built-in checkers compare as the output comes; an answer that
        // cannot be opened is the whole comparison's JE, after the run.
        let mut stream = match self.judge.stream_verdicts {
            true => self.sub.checker.stream(self.answer).ok().flatten(),
            false => None,
        };
        let watch = sandbox::Watch {
            idle: Some(self.judge.idle_window),
            stdout: stream.as_mut().map(|s| s as &mut dyn OutputWatch),
            board: None,
        };
        let usage = match sandbox::run_watched(program.stdio(stdin, out_w, err_w), watch) {
            Ok(u) => u,
            Err(e) => return CaseRun::judge_error(&e.to_string()),
        };
        let (mut message, mut stopped) = (None, None);
        let status = match verdict::decide(&usage, &limits, size(&stdout).max(size(&stderr))) {
            Some(Verdict::WA) => {
                let at = stream.as_ref().and_then(|s| s.diverged()).map_or(String::new(), |d| format!(" at {d}"));
                stopped = Some(format!("[judge] stopped: the output cannot match the answer{at}\n"));
                Verdict::WA
            }
            Some(s) => s,
            None => match self.sub.checker {
                Checker::Special(p) => match self.run_checker(p, &mut stdout) {
                    Ok(s) => s,
                    Err(e) => return self.check_failed(e),
                },
                Checker::Icpc(v) => match self.run_validator(v, &mut stdout) {
                    Ok((s, said)) => {
                        message = said;
                        s
                    }
                    Err(e) => return self.check_failed(e),
                },
                checker => match checker.check_output(&mut stdout, self.answer) {
                    Ok(true) => Verdict::AC,
                    Ok(false) => Verdict::WA,
                    Err(e) => return CaseRun::judge_error(&format!("checker: {e}")),
                },
            },
        };
        let cap = self.judge.output_cap;
        let (out, mut err) = (read_back(&mut stdout, cap), read_back(&mut stderr, cap));
        if let Some(note) = stopped {
            err = with_note(err, &note, cap);
        }
        with_message(self.case_run(status, &usage, out, err), message, cap)
    }

    /// The program's limits under its task.
    pub(super) fn limits(&self) -> Limits {
        self.judge.case_limits(self.sub.lang, self.task)
    }

    /// Makes the workspace readable and the scratch directory the slot's.
    pub(super) fn hand_over(&self) -> std::io::Result<()> {
        set_mode(self.sub.src.path(), 0o755)?;
        if let Some(id) = self.slot.identity() {
            std::os::unix::fs::chown(self.scratch, Some(id.uid), Some(id.gid))?;
        }
        Ok(())
    }

    /// The program's run, as the slot, in the workspace (read-only: jailed,
    /// the program writes only to its private `/tmp`, so nothing on the
    /// host's disk but the stdout and stderr the judge opened).
    /// `Err`: its command cannot be filled (the judge's error: see
    /// [`Placeholders::fill`](crate::language::Placeholders::fill)).
    pub(super) fn program(&self, limits: Limits) -> Result<RunSpec, String> {
        let lang = self.sub.lang;
        let plain;
        let placeholders = match self.sub.src.placeholders() {
            Some(p) => p,
            None => {
                plain = lang.plain_placeholders();
                &plain
            }
        };
        let argv = placeholders.fill(&lang.run).map_err(|why| format!("the run command: {why}"))?;
        let home = Bind::at(self.sub.src.path(), SRC, false);
        Ok(RunSpec::new(argv, self.slot.identity(), limits, home).tmp(self.scratch))
    }

    /// A checker program's run (`p input output answer`) in the case's
    /// `dir`, as the auxiliary slot; an interactor may write there.
    pub(super) fn checker_program(&self, p: &Program, dir: &CheckDir, limits: Limits, writable: bool) -> RunSpec {
        let arg = |n: &str| dir.path.join(n).to_string_lossy().into_owned();
        let argv = vec![p.binary.to_string_lossy().into_owned(), arg("input"), arg("output"), arg("answer")];
        let home = Bind::at(&dir.path, CHECK_DIR, writable);
        RunSpec::new(argv, self.slot.auxiliary().identity(), limits, home).bind(p.dir(), CHECKER_DIR)
    }

    /// A checker program's verdict ([`verdict::checker_program`]), with what
    /// it said (its `log`) when it failed.
    pub(super) fn checker_verdict(
        &self,
        what: &'static str,
        usage: &sandbox::Usage,
        log: &mut File,
    ) -> Result<Verdict, CheckError> {
        verdict::checker_program(what, usage).map_err(|failed| {
            let said = read_back(log, self.judge.output_cap).trim_end().to_string();
            CheckError::Failed { failed, said }
        })
    }

    /// Runs a special checker on a finished case: `checker input output
    /// answer` in `<scratch>.judge/`, as the auxiliary slot. Exit 0 AC, 1 or
    /// 2 WA; `Err` (JE) for anything else, with the checker's stderr.
    fn run_checker(&self, p: &Program, output: &mut File) -> Result<Verdict, CheckError> {
        let aux = self.slot.auxiliary();
        let prepared = (|| {
            let dir = CheckDir::new(self.scratch, self.input, self.answer)?;
            output.rewind()?;
            let mut copy = create_fresh(&dir.path.join("output"), 0o444)?;
            std::io::copy(output, &mut copy)?;
            let log = create_fresh(&dir.path.join("checker.log"), 0o600)?;
            dir.hand_to(&aux)?;
            Ok::<_, std::io::Error>((dir, log))
        })();
        let (dir, mut log) = prepared.map_err(|e| CheckError::Preparing { what: "checker", source: e })?;
        let spec = self.checker_program(p, &dir, self.judge.checker_limits(None), false);
        let spec = spec.logged(&log).map_err(|e| CheckError::Preparing { what: "checker", source: e })?;
        let usage = sandbox::run(spec).map_err(|e| CheckError::Run { what: "checker", source: e })?;
        self.checker_verdict("checker", &usage, &mut log)
    }

    /// A JE: the checker or interactor failed, said as capped as a stream.
    pub(super) fn check_failed(&self, e: impl std::fmt::Display) -> CaseRun {
        CaseRun::judge_error(&cap_string(e.to_string(), self.judge.output_cap))
    }

    /// The case's result from the program's usage and its (capped) streams.
    pub(super) fn case_run(
        &self,
        status: Verdict,
        usage: &sandbox::Usage,
        stdout: String,
        mut stderr: String,
    ) -> CaseRun {
        let cap = self.judge.output_cap;
        if let Some(call) = &usage.denied {
            stderr = with_note(stderr, &format!("\n[judge] system call {call} denied by the sandbox\n"), cap);
        }
        // A stop for the output is no limit: the status says the rest.
        let limit = match (usage.fired.filter(|f| *f != Fired::Stopped), &usage.denied) {
            (Some(f), _) => Some(f.as_str()),
            (None, Some(_)) => Some("syscall"),
            _ if status == Verdict::OLE => Some("output"),
            _ if status == Verdict::TLE => Some("cpu"),
            _ if status == Verdict::MLE => Some("memory"),
            _ => None,
        };
        let result = CaseResult {
            status,
            exec_time: usage.cpu.as_millis() as i64,
            memory_usage: (usage.memory / 1024) as i64,
            exit_code: usage.exit.code(),
            stdout,
            stderr,
        };
        CaseRun { result, limit, timing: None }
    }
}

/// Why a checker or interactor gave no verdict: the judge's fault (JE,
/// with this as its reason, cut to the output cap). `what` names the
/// program: `checker` or `interactor`.
#[derive(Debug, thiserror::Error)]
pub(super) enum CheckError {
    #[error("{what}: preparing: {source}")]
    Preparing { what: &'static str, source: std::io::Error },
    #[error("{what}: {source}")]
    Run { what: &'static str, source: sandbox::Error },
    /// It ran, and failed: why, and what it said (its log).
    #[error("{failed}{}", if said.is_empty() { String::new() } else { format!(": {said}") })]
    Failed { failed: verdict::CheckerFailed, said: String },
}

/// `stderr` with the judge's `note` at its end: the note must fit, so the
/// program's own words are cut first.
fn with_note(stderr: String, note: &str, cap: usize) -> String {
    let mut stderr = cap_string(stderr, cap.saturating_sub(note.len()));
    if !stderr.is_empty() && !stderr.ends_with('\n') && !note.starts_with('\n') {
        stderr.push('\n');
    }
    stderr.push_str(note);
    cap_string(stderr, cap)
}

/// The case's run with a validator's `message` after the program's own
/// stderr ([`message_after`]).
pub(super) fn with_message(mut run: CaseRun, message: Option<String>, output_cap: usize) -> CaseRun {
    run.result.stderr = message_after(std::mem::take(&mut run.result.stderr), message, output_cap);
    run
}

/// How many bytes a run's output file holds.
pub(super) fn size(f: &File) -> u64 {
    f.metadata().map(|m| m.len()).unwrap_or(0)
}
