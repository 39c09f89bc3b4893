//! An interactive case: the program and the interactor at once, each
//! sandboxed as its own slot (the program as the case's, the interactor as
//! [`Slot::auxiliary`](super::Slot::auxiliary)), connected by two pipes;
//! the verdict is [`verdict::interactive`]'s.
//!
//! A program may leave before the interactor has said all it means to: the
//! judge holds a read end of the interactor's output until the interactor
//! ends, and after the program's end reads and drops what comes, so that
//! the interactor's writes never meet a closed pipe (no `SIGPIPE`, no
//! `EPIPE`, as problemtools keeps the pipe open): it goes on to read the
//! end of the program's output and says WA, and the early exit is the
//! program's fault, never the judge's.
//!
//! The idleness rule is the dialogue's: the program's run is ended as idle
//! only when neither its CPU time nor the interactor's has moved for the
//! window (a deadlock, both reading; a sleep), past its CPU limit's worth
//! of wall time. The interactor's run tells its CPU time on a board the
//! program's run reads (`sandbox/board.rs`): a program waiting on a busy
//! interactor is never idle.
//!
//! Which side ended first decides some verdicts: the judge notes when each
//! run came back, and only then lets go of its own copies of that side's
//! ends (the write end the other side reads, the read end it writes), so
//! that the other side cannot see the end (its input's end, `SIGPIPE`)
//! before it is noted: an end the other's caused always comes back second.

use super::capped::read_back;
use super::case::{size, CaseContext, CheckError};
use super::files::{create_fresh, run_output, CheckDir};
use super::spec::RunSpec;
use super::CaseRun;
use crate::checker::Program;
use crate::protocol::Verdict;
use crate::sandbox::board::{Board, Side};
use crate::sandbox::{self, Limits, Usage, Watch};
use crate::verdict::{self, FirstEnded};
use std::fs::File;
use std::time::Instant;

/// An interactive case's two runs, over: the program's, the interactor's
/// (or why it could not run), which ended first, the program's stderr and
/// limits. Any interactor's: a testlib one here, an ICPC one (`icpc.rs`).
pub(super) struct Dialogue {
    pub usage: Usage,
    pub interactor: Result<Usage, sandbox::Error>,
    pub first: FirstEnded,
    pub stderr: File,
    pub limits: Limits,
}

impl CaseContext<'_> {
    /// Runs the program against the interactor `p`.
    pub(super) fn run_interactive(&self, p: &Program) -> CaseRun {
        let opened = (|| {
            let dir = CheckDir::new(self.scratch, self.input, self.answer)?;
            let log = create_fresh(&dir.path.join("interactor.log"), 0o600)?;
            dir.hand_to(&self.slot.auxiliary())?;
            Ok::<_, std::io::Error>((dir, log))
        })();
        let (dir, mut log) = match opened {
            Ok(x) => x,
            Err(e) => return CaseRun::judge_error(&format!("preparing the case: {e}")),
        };
        let d = match self.converse(&log, |limits| self.checker_program(p, &dir, limits, true)) {
            Ok(d) => d,
            Err(why) => return CaseRun::judge_error(&why),
        };
        let interactor = match &d.interactor {
            Ok(u) => self.checker_verdict("interactor", u, &mut log),
            Err(e) => Err(CheckError::Run { what: "interactor", source: e.clone() }),
        };
        drop(dir);
        self.conclude(d, interactor)
    }

    /// Runs the program beside the interactor that `interactor` makes (from
    /// its limits; it writes what it says to `log`), each its own slot,
    /// connected by two pipes, the judge holding its own copies of their
    /// ends as the module doc says. `Err`: why the case is JE.
    pub(super) fn converse(&self, log: &File, interactor: impl FnOnce(Limits) -> RunSpec) -> Result<Dialogue, String> {
        let opened = (|| {
            self.hand_over()?;
            let stderr = run_output(c"stderr")?;
            // Interactor -> program, program -> interactor.
            let (to_prog_r, to_prog_w) = crate::sandbox::streams::pipe()?;
            let (from_prog_r, from_prog_w) = crate::sandbox::streams::pipe()?;
            let (err_w, log_w) = (stderr.try_clone()?, log.try_clone()?);
            let board = Board::new()?;
            Ok::<_, std::io::Error>((stderr, board, [to_prog_r, to_prog_w, from_prog_r, from_prog_w, err_w, log_w]))
        })();
        let (stderr, board, [to_prog_r, to_prog_w, from_prog_r, from_prog_w, err_w, log_w]) =
            opened.map_err(|e| format!("preparing the case: {e}"))?;
        // The judge's own copies of the pipes' ends (see the module doc).
        let held = (|| {
            let interactor_ends = [to_prog_w.try_clone()?, from_prog_r.try_clone()?];
            Ok::<_, std::io::Error>((to_prog_r.try_clone()?, from_prog_w.try_clone()?, interactor_ends))
        })();
        let (mut unread, program_end, interactor_ends) =
            held.map_err(|e| format!("duplicating the interactor's pipes: {e}"))?;
        let limits = self.limits();
        // It waits for the program: its wall time is the program's and more;
        // and it reads all the program writes: its CPU time is too, so that a
        // flood cannot make it fail first (JE) under a long limit.
        let mut ilimits = self.judge.checker_limits(Some(limits.wall));
        ilimits.cpu = ilimits.cpu.max(limits.cpu + std::time::Duration::from_secs(10));
        let program = self.program(limits.clone())?;
        let program = program.stdio(to_prog_r, from_prog_w, err_w);
        let interactor = interactor(ilimits).stdio(from_prog_r, to_prog_w, log_w);
        let idle = Some(self.judge.idle_window);
        let board = &board;
        let (usage, iusage, first) = std::thread::scope(|s| {
            let prog = s.spawn(move || {
                let usage =
                    sandbox::run_watched(program, Watch { idle, board: Some((board, Side::Hears)), stdout: None });
                let back = Instant::now();
                drop(program_end);
                // Nobody reads it now: what the interactor still says goes nowhere,
                // until it ends (its write end closes).
                let _ = std::io::copy(&mut unread, &mut std::io::sink());
                (usage, back)
            });
            let i = sandbox::run_watched(interactor, Watch { board: Some((board, Side::Tells)), ..Watch::default() });
            let i_back = Instant::now();
            drop(interactor_ends);
            let prog = prog.join().map_err(|_| "the program's run panicked");
            let first = match &prog {
                Ok((_, back)) if i_back < *back => FirstEnded::Interactor,
                _ => FirstEnded::Program,
            };
            (prog.map(|(u, _)| u), i, first)
        });
        let usage = match usage {
            Ok(Ok(u)) => u,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(panicked) => return Err(panicked.into()),
        };
        Ok(Dialogue { usage, interactor: iusage, first, stderr, limits })
    }

    /// The case's run, from the dialogue and the interactor's verdict
    /// ([`verdict::interactive`]'s rules).
    pub(super) fn conclude(&self, d: Dialogue, interactor: Result<Verdict, CheckError>) -> CaseRun {
        let Dialogue { usage, first, mut stderr, limits, .. } = d;
        let own = verdict::decide(&usage, &limits, size(&stderr));
        let sigpipe = usage.exit == sandbox::Exit::Signal(libc::SIGPIPE) && usage.denied.is_none();
        let status = match verdict::interactive(own, sigpipe, interactor, first) {
            Ok(s) => s,
            Err(e) => return self.check_failed(e),
        };
        let stderr = read_back(&mut stderr, self.judge.output_cap);
        self.case_run(status, &usage, String::new(), stderr)
    }
}
