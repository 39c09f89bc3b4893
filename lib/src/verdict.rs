//! Verdict rules: from what a run used to a status. All of them are here, in
//! [`decide`] (a judged run), [`compile_failure`] (a compile),
//! [`checker_program`] (a special judge's or an interactor's exit),
//! [`icpc_validator`] (an ICPC output validator's or interactor's exit) and
//! [`interactive`] (an interactive case: the program's and the interactor's
//! verdicts together, and which ended first).

use crate::protocol::Verdict;
use crate::sandbox::{Exit, Fired, Limits, Usage};

/// What a judged run earns before its output is looked at, first match wins:
///
/// | # | verdict | when |
/// |---|---|---|
/// | 1 | TLE | the watchdog killed it for CPU or wall time, or by the idleness rule (`idle`: past its CPU limit in wall time, its CPU time stood still for the idle window, `sandbox/limits.rs`); or it died of `SIGXCPU` (the `RLIMIT_CPU` backstop); or its CPU time (user + system) exceeds the limit, however it ended |
/// | 2 | OLE | its stdout or stderr reached the output limit (the judge stops reading there, `streams.rs`: the program's next write gets `SIGPIPE`, or `EPIPE` when it ignores the signal, as Python does); or it died of `SIGXFSZ` (a file in its `/tmp` past `RLIMIT_FSIZE`) |
/// | 3 | MLE | the watchdog killed it for resident memory; or its peak memory exceeds the limit, however it ended (a crash after the limit was passed is the limit's doing) |
/// | 4 | WA | the judge stopped it ([`Fired::Stopped`]) because its output could no longer match the answer (the built-in checkers' streaming comparison, `checker.rs`), and it died of that stop (`SIGKILL`) |
/// | 5 | RE | a non-zero exit code, or any other signal; a denied system call (the run is killed with `SIGSYS`, the call is named in `stderr` by `judge/case.rs`) |
/// | 6 | — (`None`) | it exited 0 within every limit: the checker decides AC or WA |
///
/// The order is Normal-OJ's (TLE → OLE → MLE → RE). Two consequences:
/// a program that dies because an allocation failed at the `RLIMIT_AS`
/// backstop while its resident memory was still under the limit is RE (as in
/// Normal-OJ, whose only memory limit is `RLIMIT_AS`); and CPU time counts
/// user + system time (Normal-OJ counts user time only).
///
/// Row 4, a stopped run: what the program would have done had it gone on
/// is unknown, and no longer matters to its output. A limit it had
/// already passed when it was stopped wins (rows 1 to 3: those are
/// verdicts it had earned), as the first rule to match wins everywhere
/// here; a program that had ended on its own as the stop came (a crash,
/// an exit: not `SIGKILL`) is judged as it ended, and one that exited 0
/// goes to the checker, which says WA (the streaming comparison never
/// says no to an output the checker would accept).
pub fn decide(usage: &Usage, limits: &Limits, output_bytes: u64) -> Option<Verdict> {
    let signal = match usage.exit {
        Exit::Signal(s) => Some(s),
        Exit::Code(_) => None,
    };
    if matches!(usage.fired, Some(Fired::Cpu | Fired::Wall | Fired::Idle))
        || signal == Some(libc::SIGXCPU)
        || usage.cpu > limits.cpu
    {
        Some(Verdict::TLE)
    } else if signal == Some(libc::SIGXFSZ) || output_bytes >= limits.output {
        Some(Verdict::OLE)
    } else if usage.fired == Some(Fired::Memory) || usage.memory > limits.memory {
        Some(Verdict::MLE)
    } else if usage.fired == Some(Fired::Stopped) && signal == Some(libc::SIGKILL) {
        Some(Verdict::WA)
    } else if usage.exit != Exit::Code(0) {
        Some(Verdict::RE)
    } else {
        None
    }
}

/// Why a compile failed.
#[derive(Debug, PartialEq, Eq)]
pub struct CompileFailure {
    pub why: String,
    /// A limit stopped it: `why` names the limit, and is said after the
    /// compiler's own words (which may read as the compiler's crash).
    pub limit: bool,
}

/// The words a compiler reports a tool's file-size stop in: `strsignal`
/// of `SIGXFSZ` (gcc: "internal compiler error: File size limit exceeded
/// signal terminated program as") and `strerror` of `EFBIG` (ld, a JVM that
/// ignores the signal: "File too large"), in the C locale compiles run in.
const FILE_SIZE_WORDS: &[&str] = &["File size limit exceeded signal terminated program", "failed: File too large"];

/// Why a compile failed, or `None` if it succeeded (exited 0 within every
/// limit). Every failure is CE, the compiler's own message (`said`) first: a
/// compile that ran out of time, memory or file size is the submission's
/// problem, not the judge's. The file-size limit stops the tool that wrote
/// past it (an assembler, a linker), not the compiler: the compiler's exit
/// and its words tell.
///
/// `said_bytes` is how much the compiler said: at the output limit the
/// judge stopped reading, and the compiler's next message killed it
/// (`SIGPIPE`), whatever it then managed to say.
pub fn compile_failure(usage: &Usage, limits: &Limits, said: &str, said_bytes: u64) -> Option<CompileFailure> {
    let size = |l: u64| if l >= 1 << 20 { format!("{} MiB", l >> 20) } else { format!("{} KiB", l >> 10) };
    let file_size =
        || format!("compilation stopped by the file size limit ({}): a file it wrote reached it", size(limits.output));
    let messages = || format!("compilation stopped: its messages reached the output limit ({})", size(limits.output));
    let (why, limit) = match (usage.fired, usage.exit) {
        (Some(Fired::Cpu), _) | (_, Exit::Signal(libc::SIGXCPU)) => {
            (format!("compilation exceeded the time limit ({} s of CPU time)", limits.cpu.as_secs()), true)
        }
        (Some(Fired::Wall), _) => (format!("compilation exceeded the time limit ({} s)", limits.wall.as_secs()), true),
        (Some(Fired::Memory), _) => {
            (format!("compilation exceeded the memory limit ({} MiB)", limits.memory >> 20), true)
        }
        // A compile is watched by neither rule (`sandbox::Watch`); said all the same.
        (Some(f @ (Fired::Idle | Fired::Stopped)), _) => (format!("compilation stopped ({})", f.as_str()), true),
        (None, Exit::Signal(libc::SIGXFSZ)) => (file_size(), true),
        (None, Exit::Code(0)) => return None,
        (None, _) if said_bytes >= limits.output => (messages(), true),
        (None, _) if FILE_SIZE_WORDS.iter().any(|w| said.contains(w)) => (file_size(), true),
        (None, Exit::Signal(s)) => (format!("the compiler was killed by signal {s}"), false),
        (None, Exit::Code(c)) => (format!("the compiler exited with code {c}"), false),
    };
    Some(CompileFailure { why, limit })
}

/// A checker program's verdict (testlib's exit codes): 0 AC, 1 (WA) or 2
/// (PE) WA; `Err`, why not, for any other exit, a signal, a limit or a
/// denied system call: the judge's fault (JE), not the program's. `what`
/// names the program in the reason (`checker`, `interactor`).
pub fn checker_program(what: &'static str, usage: &Usage) -> Result<Verdict, CheckerFailed> {
    Err(match (usage.fired, &usage.denied, usage.exit) {
        (None, None, Exit::Code(0)) => return Ok(Verdict::AC),
        (None, None, Exit::Code(1 | 2)) => return Ok(Verdict::WA),
        (Some(limit), _, _) => CheckerFailed::Limit { what, limit },
        (None, Some(call), _) => CheckerFailed::Denied { what, call: call.clone() },
        (None, None, Exit::Code(code)) => CheckerFailed::Exit { what, code },
        (None, None, Exit::Signal(signal)) => CheckerFailed::Signal { what, signal },
    })
}

/// An ICPC output validator's or interactor's verdict (the problem package
/// format's exit codes): 42 AC, 43 WA; `Err`, why not, for any other exit,
/// a signal, a limit or a denied system call, as [`checker_program`]'s.
/// `what` names the program in the reason (`validator`).
pub fn icpc_validator(what: &'static str, usage: &Usage) -> Result<Verdict, CheckerFailed> {
    Err(match (usage.fired, &usage.denied, usage.exit) {
        (None, None, Exit::Code(ICPC_AC)) => return Ok(Verdict::AC),
        (None, None, Exit::Code(ICPC_WA)) => return Ok(Verdict::WA),
        (Some(limit), _, _) => CheckerFailed::Limit { what, limit },
        (None, Some(call), _) => CheckerFailed::Denied { what, call: call.clone() },
        (None, None, Exit::Code(code)) => CheckerFailed::Exit { what, code },
        (None, None, Exit::Signal(signal)) => CheckerFailed::Signal { what, signal },
    })
}

/// The exit codes of an ICPC validator that judged: accepted, wrong answer.
pub const ICPC_AC: i32 = 42;
pub const ICPC_WA: i32 = 43;

/// Why a checker program's run is no verdict ([`checker_program`]): the
/// judge's fault. `what` names the program (`checker`, `interactor`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckerFailed {
    #[error("{what} exceeded its {} limit", limit.as_str())]
    Limit { what: &'static str, limit: Fired },
    #[error("{what}: system call {call} denied by the sandbox")]
    Denied { what: &'static str, call: String },
    #[error("{what} failed (exit {code})")]
    Exit { what: &'static str, code: i32 },
    #[error("{what} died of signal {signal}")]
    Signal { what: &'static str, signal: i32 },
}

/// Which side of an interactive case ended first: the run the judge had
/// back first ([`interactive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstEnded {
    Program,
    Interactor,
}

/// An interactive case's verdict, from the program's own ([`decide`]),
/// whether it died of `SIGPIPE` (for no denied call), the interactor's
/// ([`checker_program`], or why it could not run: any error `E`), and which
/// of the two ended first; `Err` is JE, with why.
/// First match wins:
///
/// | # | program | interactor | ended first | verdict |
/// |---|---|---|---|---|
/// | 1 | RE by `SIGPIPE` | WA | either | WA: the interactor stopped reading a wrong dialogue, and the program's next write killed it (the signal says the interactor was gone) |
/// | 2 | TLE, OLE, MLE, RE | WA | the interactor | WA |
/// | 3 | RE | failed | either | JE: a failed interactor (testlib's `_fail`) is the judge's fault, even when the program then failed for want of a dialogue |
/// | 4 | TLE, OLE, MLE | failed | the interactor | JE |
/// | 5 | TLE, OLE, MLE, RE | any | — | the program's |
/// | 6 | clean | AC, WA | — | the interactor's |
/// | 7 | clean | failed | — | JE |
///
/// Rows 2 and 4, who spoke first (issue #24): once the interactor has ended
/// with its verdict, the program's input is at its end and its output goes
/// nowhere; what it does next (dies reading past the end, or waits on it
/// until its limit) is no verdict of its own: the interactor's WA stands
/// (DOMjudge and problemtools judge so), and its failure is JE. The other
/// way round, a program that died or ran out of time first keeps its
/// verdict, though the interactor then said WA on the end of its output.
///
/// The order is the order in which the judge had the two runs back: it
/// notes each run's return before it lets go of its own copies of that
/// side's pipe ends (`judge/interactive.rs`), so a side sees the other's
/// end (the end of its input, `SIGPIPE`) only after the other's return was
/// noted, and an end the other's caused is always second. Two ends that do
/// not cause each other are ordered as they happened, give or take the
/// milliseconds a run takes to be measured.
pub fn interactive<E>(
    program: Option<Verdict>,
    sigpipe: bool,
    interactor: Result<Verdict, E>,
    first: FirstEnded,
) -> Result<Verdict, E> {
    let interactor_first = first == FirstEnded::Interactor;
    match (program, interactor) {
        (Some(Verdict::RE), Ok(Verdict::WA)) if sigpipe => Ok(Verdict::WA),
        (Some(_), Ok(Verdict::WA)) if interactor_first => Ok(Verdict::WA),
        (Some(Verdict::RE), Err(e)) => Err(e),
        (Some(_), Err(e)) if interactor_first => Err(e),
        (Some(s), _) => Ok(s),
        (None, i) => i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            cpu: Duration::from_millis(1000),
            wall: Duration::from_millis(4000),
            memory: 64 << 20,
            address_space: None,
            stack: None,
            output: 1 << 20,
            processes: None,
        }
    }

    fn usage(exit: Exit, fired: Option<Fired>, cpu_ms: u64, memory_mib: u64) -> Usage {
        Usage {
            exit,
            fired,
            cpu: Duration::from_millis(cpu_ms),
            wall: Duration::from_millis(cpu_ms + 5),
            memory: memory_mib << 20,
            denied: None,
            steps: None,
        }
    }

    const OK: Exit = Exit::Code(0);
    const KILLED: Exit = Exit::Signal(libc::SIGKILL);

    #[test]
    fn the_table() {
        let l = limits();
        let d = |u: Usage, out: u64| decide(&u, &l, out);
        // 5: clean.
        assert_eq!(d(usage(OK, None, 10, 1), 0), None);
        assert_eq!(d(usage(OK, None, 1000, 64), (1 << 20) - 1), None, "at the limits is within them");
        // 1: TLE.
        assert_eq!(d(usage(KILLED, Some(Fired::Cpu), 1010, 1), 0), Some(Verdict::TLE));
        assert_eq!(d(usage(KILLED, Some(Fired::Wall), 5, 1), 0), Some(Verdict::TLE), "a sleeper");
        assert_eq!(d(usage(Exit::Signal(libc::SIGXCPU), None, 999, 1), 0), Some(Verdict::TLE));
        assert_eq!(d(usage(OK, None, 1001, 1), 0), Some(Verdict::TLE), "over the CPU limit though it finished");
        // 2: OLE.
        assert_eq!(d(usage(Exit::Signal(libc::SIGXFSZ), None, 50, 1), 1 << 20), Some(Verdict::OLE));
        assert_eq!(d(usage(Exit::Code(1), None, 50, 1), 1 << 20), Some(Verdict::OLE), "SIGXFSZ ignored");
        // 3: MLE.
        assert_eq!(d(usage(KILLED, Some(Fired::Memory), 50, 60), 0), Some(Verdict::MLE));
        assert_eq!(d(usage(Exit::Signal(libc::SIGSEGV), None, 50, 65), 0), Some(Verdict::MLE));
        assert_eq!(d(usage(OK, None, 50, 65), 0), Some(Verdict::MLE));
        // 4: RE.
        assert_eq!(d(usage(Exit::Code(3), None, 5, 1), 0), Some(Verdict::RE));
        assert_eq!(d(usage(Exit::Signal(libc::SIGSEGV), None, 5, 1), 0), Some(Verdict::RE));
        assert_eq!(d(usage(Exit::Signal(libc::SIGABRT), None, 5, 1), 0), Some(Verdict::RE));
    }

    #[test]
    fn an_idle_run_is_tle() {
        let l = limits();
        assert_eq!(decide(&usage(KILLED, Some(Fired::Idle), 3, 1), &l, 0), Some(Verdict::TLE));
    }

    #[test]
    fn a_run_stopped_for_its_output_is_wa_unless_it_had_passed_a_limit_or_ended_on_its_own() {
        let l = limits();
        let stopped = |exit: Exit, cpu_ms: u64, memory_mib: u64, out: u64| {
            decide(&usage(exit, Some(Fired::Stopped), cpu_ms, memory_mib), &l, out)
        };
        // Row 4: killed by the stop.
        assert_eq!(stopped(KILLED, 10, 1, 3), Some(Verdict::WA));
        // Rows 1-3 first: a limit already passed when it was stopped.
        assert_eq!(stopped(KILLED, 1001, 1, 3), Some(Verdict::TLE));
        assert_eq!(stopped(KILLED, 10, 1, 1 << 20), Some(Verdict::OLE), "OLE at the output limit");
        assert_eq!(stopped(KILLED, 10, 65, 3), Some(Verdict::MLE));
        // Ended on its own as the stop came: as it ended.
        assert_eq!(stopped(Exit::Signal(libc::SIGSEGV), 10, 1, 3), Some(Verdict::RE));
        assert_eq!(stopped(Exit::Code(2), 10, 1, 3), Some(Verdict::RE));
        assert_eq!(stopped(OK, 10, 1, 3), None, "the checker says WA");
    }

    #[test]
    fn the_order_is_normal_ojs() {
        let l = limits();
        // TLE beats OLE beats MLE beats RE.
        assert_eq!(
            decide(&usage(Exit::Signal(libc::SIGXFSZ), Some(Fired::Cpu), 1100, 100), &l, 1 << 20),
            Some(Verdict::TLE)
        );
        assert_eq!(decide(&usage(Exit::Signal(libc::SIGXFSZ), None, 10, 100), &l, 1 << 20), Some(Verdict::OLE));
        assert_eq!(decide(&usage(Exit::Code(1), None, 10, 100), &l, 0), Some(Verdict::MLE));
        // Stopped for its output: after the limits, before RE.
        assert_eq!(decide(&usage(KILLED, Some(Fired::Stopped), 10, 100), &l, 0), Some(Verdict::MLE));
    }

    #[test]
    fn compile_failures_say_why() {
        let l = limits();
        let why = |u: Usage, said: &str| compile_failure(&u, &l, said, said.len() as u64).map(|f| (f.why, f.limit));
        assert_eq!(why(usage(OK, None, 10, 1), ""), None);
        let said = |u: Usage, said: &str, words: &str, limit: bool| {
            let (w, l) = why(u, said).unwrap();
            assert!(w.contains(words) && l == limit, "{w:?} {l}");
        };
        said(usage(Exit::Code(1), None, 10, 1), "main.c:1: error", "code 1", false);
        said(usage(KILLED, Some(Fired::Cpu), 10, 1), "", "time limit", true);
        said(usage(KILLED, Some(Fired::Wall), 10, 1), "", "time limit", true);
        said(usage(KILLED, Some(Fired::Memory), 10, 1), "", "memory limit", true);
        said(usage(Exit::Signal(libc::SIGXFSZ), None, 10, 1), "", "file size limit (1 MiB)", true);
        said(usage(Exit::Signal(libc::SIGSEGV), None, 10, 1), "", "signal 11", false);
        // A tool of the compiler stopped by the limit: the compiler's words tell.
        let ice = "gcc: internal compiler error: File size limit exceeded signal terminated program as";
        said(usage(Exit::Code(4), None, 10, 1), ice, "file size limit", true);
        said(usage(Exit::Code(1), None, 10, 1), "/usr/bin/ld: final link failed: File too large", "file size", true);
        // A source cannot pass for a stop: the words are the tools' own.
        said(usage(Exit::Code(1), None, 10, 1), "main.c:1:2: error: #error File too large", "code 1", false);
        // Messages that reached the limit: the judge stopped reading them.
        let flood = compile_failure(&usage(Exit::Code(4), None, 10, 1), &l, "error: …", 1 << 20).unwrap();
        assert!(flood.why.contains("messages reached the output limit (1 MiB)") && flood.limit, "{}", flood.why);
    }

    #[test]
    fn checker_programs_speak_testlib() {
        let v = |u: Usage| checker_program("checker", &u).map_err(|e| e.to_string());
        assert_eq!(v(usage(OK, None, 10, 1)), Ok(Verdict::AC));
        assert_eq!(v(usage(Exit::Code(1), None, 10, 1)), Ok(Verdict::WA));
        assert_eq!(v(usage(Exit::Code(2), None, 10, 1)), Ok(Verdict::WA), "PE is WA");
        assert_eq!(v(usage(Exit::Code(3), None, 10, 1)), Err("checker failed (exit 3)".into()));
        assert_eq!(v(usage(Exit::Signal(libc::SIGSEGV), None, 10, 1)), Err("checker died of signal 11".into()));
        assert_eq!(v(usage(KILLED, Some(Fired::Wall), 10, 1)), Err("checker exceeded its wall limit".into()));
        let denied = Usage { denied: Some("ptrace".into()), ..usage(Exit::Signal(libc::SIGSYS), None, 10, 1) };
        assert_eq!(v(denied), Err("checker: system call ptrace denied by the sandbox".into()));
        // A limit wins over a clean exit: the run was killed.
        assert!(v(usage(OK, Some(Fired::Memory), 10, 1)).is_err());
    }

    #[test]
    fn icpc_validators_speak_42_and_43() {
        let v = |u: Usage| icpc_validator("validator", &u).map_err(|e| e.to_string());
        assert_eq!(v(usage(Exit::Code(42), None, 10, 1)), Ok(Verdict::AC));
        assert_eq!(v(usage(Exit::Code(43), None, 10, 1)), Ok(Verdict::WA));
        // testlib's codes mean nothing here: the validator failed.
        assert_eq!(v(usage(OK, None, 10, 1)), Err("validator failed (exit 0)".into()));
        assert_eq!(v(usage(Exit::Code(1), None, 10, 1)), Err("validator failed (exit 1)".into()));
        assert_eq!(v(usage(Exit::Signal(libc::SIGSEGV), None, 10, 1)), Err("validator died of signal 11".into()));
        assert!(v(usage(Exit::Code(42), Some(Fired::Wall), 10, 1)).is_err(), "a limit wins over its exit");
        let denied = Usage { denied: Some("ptrace".into()), ..usage(Exit::Signal(libc::SIGSYS), None, 10, 1) };
        assert_eq!(v(denied), Err("validator: system call ptrace denied by the sandbox".into()));
    }

    #[test]
    fn the_interactive_table() {
        let failed = || Err::<Verdict, _>("interactor failed (exit 3)".to_string());
        let (program, interactor) = (FirstEnded::Program, FirstEnded::Interactor);
        let i = interactive;
        // Row 1: the interactor said WA and stopped reading; the program's next write died.
        for first in [program, interactor] {
            assert_eq!(i(Some(Verdict::RE), true, Ok(Verdict::WA), first), Ok(Verdict::WA));
        }
        assert_eq!(i(Some(Verdict::RE), false, Ok(Verdict::WA), program), Ok(Verdict::RE), "a crash of its own");
        assert_eq!(i(Some(Verdict::RE), true, Ok(Verdict::AC), program), Ok(Verdict::RE));
        // Row 2: the interactor said WA first; whatever the program did after is WA.
        for s in [Verdict::TLE, Verdict::OLE, Verdict::MLE, Verdict::RE] {
            assert_eq!(i(Some(s), false, Ok(Verdict::WA), interactor), Ok(Verdict::WA), "{s:?}");
            assert_eq!(i(Some(s), false, Ok(Verdict::WA), program), Ok(s), "{s:?} first");
        }
        // Row 3: a failed interactor is JE, whatever became of the program.
        for first in [program, interactor] {
            assert_eq!(i(Some(Verdict::RE), true, failed(), first), failed());
            assert_eq!(i(Some(Verdict::RE), false, failed(), first), failed());
        }
        // Rows 4 and 5: the program's own limits win, unless the interactor had failed first.
        for s in [Verdict::TLE, Verdict::OLE, Verdict::MLE] {
            assert_eq!(i(Some(s), false, failed(), interactor), failed(), "{s:?}");
            assert_eq!(i(Some(s), false, failed(), program), Ok(s), "{s:?} first");
            for first in [program, interactor] {
                assert_eq!(i(Some(s), false, Ok(Verdict::AC), first), Ok(s));
            }
            assert_eq!(i(Some(s), true, Ok(Verdict::WA), program), Ok(s));
        }
        // Row 5: the interactor accepted first, then the program crashed: its own RE.
        for first in [program, interactor] {
            assert_eq!(i(Some(Verdict::RE), false, Ok(Verdict::AC), first), Ok(Verdict::RE));
        }
        // Rows 6 and 7: a clean program; the interactor decides.
        for first in [program, interactor] {
            assert_eq!(i(None, false, Ok(Verdict::AC), first), Ok(Verdict::AC));
            assert_eq!(i(None, false, Ok(Verdict::WA), first), Ok(Verdict::WA));
            assert_eq!(i(None, false, failed(), first), failed());
        }
    }
}
