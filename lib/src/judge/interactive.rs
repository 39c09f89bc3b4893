//! An interactive case: the program and the interactor at once, each
//! sandboxed as its own slot (the program as the case's, the interactor as
//! [`Slot::auxiliary`](super::Slot::auxiliary)), connected by two pipes;
//! the verdict is [`verdict::interactive`]'s.

use super::capped::read_back;
use super::case::{size, CaseContext, CheckError};
use super::files::{create_fresh, run_output, CheckDir};
use super::CaseRun;
use crate::checker::Program;
use crate::sandbox;
use crate::verdict;

impl CaseContext<'_> {
    /// Runs the program against the interactor `p`.
    pub(super) fn run_interactive(&self, p: &Program) -> CaseRun {
        let opened = (|| {
            self.hand_over()?;
            let stderr = run_output(&self.scratch.join("stderr"), self.slot.identity())?;
            let dir = CheckDir::new(self.scratch, self.input, self.answer)?;
            let log = create_fresh(&dir.path.join("interactor.log"), 0o600)?;
            dir.hand_to(&self.slot.auxiliary())?;
            // Interactor -> program, program -> interactor.
            let (to_prog_r, to_prog_w) = crate::sandbox::streams::pipe()?;
            let (from_prog_r, from_prog_w) = crate::sandbox::streams::pipe()?;
            Ok::<_, std::io::Error>((stderr, dir, log, [to_prog_r, to_prog_w, from_prog_r, from_prog_w]))
        })();
        let (mut stderr, dir, mut log, [to_prog_r, to_prog_w, from_prog_r, from_prog_w]) = match opened {
            Ok(x) => x,
            Err(e) => return CaseRun::judge_error(&format!("preparing the case: {e}")),
        };
        let limits = self.limits();
        // It waits for the program: its wall time is the program's and more.
        let ilimits = self.judge.checker_limits(Some(limits.wall));
        let (err_w, log_w) = match (stderr.try_clone(), log.try_clone()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return CaseRun::judge_error("cannot duplicate the output files"),
        };
        let program = match self.program(limits.clone()) {
            Ok(p) => p.stdio(to_prog_r, from_prog_w, err_w),
            Err(why) => return CaseRun::judge_error(&why),
        };
        let interactor = self.checker_program(p, &dir, ilimits, true).stdio(from_prog_r, to_prog_w, log_w);
        // Each run holds its pipe ends until it returns: the other side sees
        // EOF once a side has ended.
        let (usage, iusage) = std::thread::scope(|s| {
            let prog = s.spawn(|| sandbox::run(program));
            let i = sandbox::run(interactor);
            (prog.join().map_err(|_| "the program's run panicked"), i)
        });
        let usage = match usage {
            Ok(Ok(u)) => u,
            Ok(Err(e)) => return CaseRun::judge_error(&e.to_string()),
            Err(panicked) => return CaseRun::judge_error(panicked),
        };
        let interactor_verdict = match iusage {
            Ok(u) => self.checker_verdict("interactor", &u, &mut log),
            Err(e) => Err(CheckError::Run { what: "interactor", source: e }),
        };
        drop(dir);
        let own = verdict::decide(&usage, &limits, size(&stderr));
        let sigpipe = usage.exit == sandbox::Exit::Signal(libc::SIGPIPE) && usage.denied.is_none();
        let status = match verdict::interactive(own, sigpipe, interactor_verdict) {
            Ok(s) => s,
            Err(e) => return self.check_failed(e),
        };
        let stderr = read_back(&mut stderr, self.judge.output_cap);
        self.case_run(status, &usage, String::new(), stderr)
    }
}
