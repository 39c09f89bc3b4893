//! Judging one submission: compile it once, run it on each case under the
//! task's limits, decide each case's verdict.
//!
//! [`Judge`] turns a [`Language`] and a [`Task`] into sandbox [`Limits`],
//! runs [`sandbox::run`](crate::sandbox::run), hands the usage to
//! [`verdict::decide`](crate::verdict::decide) and, when the program ran
//! cleanly, lets the [`Checker`](crate::checker::Checker) compare its output
//! with the answer. [`Judge::judge_all`] is one job's judging, for
//! `judge-exec` and `judge-exec run` alike.
//!
//! # Parts
//!
//! - `job.rs`: [`Judge::judge_all`] (compile once, then every case, or the
//!   same result for every case) and [`Judge::run_cases`] (cases side by
//!   side on the slots a job holds and borrows).
//! - `compile.rs`: [`Judge::compile`].
//! - `case.rs`: [`Judge::run_case`], one case's runs and verdict, through a
//!   context that carries what they share; `interactive.rs`: a case against
//!   an interactor; `icpc.rs`: a case judged by an ICPC validator.
//! - `checker_program.rs`: [`Judge::prepare_checker`], checker programs
//!   compiled into their cache.
//! - `spec.rs`: the one description of a sandboxed run the judge makes
//!   (environment, `TMPDIR`, the directories a jail shows).
//! - `files.rs`: the files below, handed to slots and taken back;
//!   `capped.rs`: what is kept of a program's words.
//!
//! # Files and owners
//!
//! - `src` (a [`Workspace`](crate::workspace::Workspace), staged by
//!   [`Judge::judge_all`]: as root, a copy on the workspaces' tmpfs under a
//!   random name, so that no jailed process reads where the claim lies)
//!   holds the source. For the compile it is handed to the slot uid (the
//!   compiler writes the binary there) and afterwards taken back, with
//!   everything the compiler made: runs see it read-only, so no case can
//!   alter what the next case runs.
//! - `scratch` ([`Judge::run_cases`] gives each slot one, reused from case
//!   to case) is handed to the slot: it is the
//!   program's `TMPDIR` at the basic level (a jailed run does not see it).
//!   It is emptied before each case.
//! - A run's stdout and stderr go to memfds, the judge's alone and on no
//!   file system: the program writes to pipes the judge copies into them,
//!   capped at the output limit (`streams.rs`).
//! - The input is opened by the judge and handed as a sealed copy
//!   (`streams.rs`), so the slot uid needs no permission on the testdata and
//!   can change nothing of it. A jailed run sees no testdata at all, and its
//!   directory at [`SRC`], not at its host path.
//! - Every directory above `scratch` (and `src`, not root) must be searchable by
//!   others (`o+x`), or the slot uid cannot reach them.
//!
//! # Checker programs (special judges, interactors)
//!
//! [`Judge::prepare_checker`] compiles `checker.cpp`/`.c` or
//! `interactor.cpp`/`.c` of the testdata (with the built-in `cpp17`/`c11`
//! command, as the worker's slot, any `*.h` of the testdata beside it, so a
//! shipped `testlib.h` is found) once per testdata version, into
//! `cache/<key>/` (root-owned, 0755; `key` hashes the testdata path, the
//! sources and the compile command; a `flock` on `cache/<key>.lock` makes a
//! second worker wait for the first one's compile and then reuse it).
//!
//! They run sandboxed like a case, under [`Judge::checker_limits`], as the
//! worker's *auxiliary* slot ([`Slot::auxiliary`]: the base + 1000 + i), never as
//! the contestant's slot: an interactor runs while the program does, and two
//! runs on one slot would serialize on the slot lock (and deadlock the
//! pair); a distinct uid also keeps the program away from the answer. Each
//! case gets `<scratch>.judge/`, made by root, owned by the auxiliary uid,
//! mode 0700, with copies of the input, the answer (and, for a checker, the
//! program's output): the testdata stays root-only, the contestant's uid
//! cannot enter the directory, and the program's jail does not even show it.
//! The run sees that directory and the binary's directory, nothing else of
//! the host. It is removed after the case.

use crate::language::Language;
use crate::protocol::{CaseResult, Task};
use crate::sandbox::{Limits, UNLIMITED};
use std::time::Duration;

// Where a judge's slots come from (`sandbox/slot.rs`).
pub use crate::sandbox::slot::{parse_slot_uid_base, slot_uid_base, Slot, AUX_UID_OFFSET, SLOT_BASE_UID};

mod capped;
mod case;
mod checker_program;
mod compile;
mod files;
mod icpc;
mod interactive;
mod job;
mod spec;

pub use checker_program::PrepareError;
pub use job::{Case, Slots, Submission, Submitted, UnknownLanguage};

/// Where a jailed compile or run sees the submission's directory: a name
/// that tells nothing of the host (the spool, the claim).
pub const SRC: &str = "/src";

/// Where a jailed checker or interactor sees its case's files, and its binary.
pub const CHECK_DIR: &str = "/judge";
pub const CHECKER_DIR: &str = "/checker";

/// Address space a run may reserve beyond its memory limit (the `RLIMIT_AS`
/// backstop): room for what runtimes reserve and never touch.
pub const ADDRESS_SPACE_HEADROOM: u64 = 1 << 30;

/// The outcome of a compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compiled {
    /// Ready to run (or nothing to compile).
    Ready,
    /// CE: the compiler's message (capped to [`Judge::output_cap`]) and why.
    Failed { message: String },
    /// The judge could not compile (not the submission's fault).
    JudgeError(String),
}

/// One judged case and which limit stopped it (`cpu`, `wall`, `idle`,
/// `memory`, `output`, `syscall`; `None` if none did).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseRun {
    pub result: CaseResult,
    pub limit: Option<&'static str>,
    /// When it began and how long it took to run and check (wall time), set
    /// by [`Judge::run_cases`]; `None` for a result given without a run.
    pub timing: Option<CaseTiming>,
}

/// When a case began, and how long it ran and was checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseTiming {
    pub began: std::time::Instant,
    pub took: Duration,
}

impl CaseRun {
    /// The judge's own failure: JE, with why.
    fn judge_error(why: &str) -> CaseRun {
        CaseRun { result: CaseResult::judge_error(why), limit: None, timing: None }
    }
}

/// How to judge: limits that are the runner's, not the task's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judge {
    /// Bytes of stdout/stderr kept for the hub (and of a compiler's message).
    pub output_cap: usize,
    /// Bytes a program may write to stdout (or stderr) before OLE.
    pub output_limit: u64,
    /// Compile limits: CPU time of the compiler's process tree, wall time,
    /// resident memory, size of any file written (the binary), processes.
    pub compile_cpu: Duration,
    pub compile_wall: Duration,
    pub compile_memory: u64,
    pub compile_output: u64,
    pub compile_processes: u64,
    /// Where compiled submissions are kept (`compile_cache.rs`); `None`:
    /// every submission is compiled.
    pub compile_cache: Option<crate::compile_cache::CompileCache>,
    /// The idleness rule's window for a case's program
    /// ([`sandbox::Watch::idle`](crate::sandbox::Watch::idle)); zero: no
    /// such rule. Default: [`idle_window`] (judge-exec's `--idle-window`).
    pub idle_window: Duration,
    /// Whether a case's output is compared as it comes, the run stopped
    /// at the first byte that cannot match (the built-in checkers:
    /// [`Checker::stream`](crate::checker::Checker::stream)).
    pub stream_verdicts: bool,
}

/// The idleness rule's window by default: a sleeper under a 5 s limit is
/// ended 5 s and a look (10 ms) after its start, and a program that was
/// busy until past its limit's worth of wall time gets half a second more
/// to show a sign of life.
pub const IDLE_WINDOW: Duration = Duration::from_millis(500);

/// The process's idle window, in ms (judge-exec's `--idle-window`).
static IDLE_WINDOW_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(IDLE_WINDOW.as_millis() as u64);

/// Sets the idle window every [`Judge`] made from now on starts with (0:
/// no idleness rule); before any judging, as `--netns-per-run` is.
pub fn set_idle_window(window: Duration) {
    IDLE_WINDOW_MS.store(window.as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
}

/// The idle window a [`Judge`] starts with ([`set_idle_window`]).
pub fn idle_window() -> Duration {
    Duration::from_millis(IDLE_WINDOW_MS.load(std::sync::atomic::Ordering::Relaxed))
}

impl Default for Judge {
    fn default() -> Judge {
        Judge {
            output_cap: 64 * 1024,
            output_limit: 64 << 20,
            // Normal-OJ: 20 s, 1 GiB.
            compile_cpu: Duration::from_secs(20),
            compile_wall: Duration::from_secs(30),
            compile_memory: 1 << 30,
            compile_output: 256 << 20,
            compile_processes: 64,
            compile_cache: None,
            idle_window: idle_window(),
            stream_verdicts: true,
        }
    }
}

impl Judge {
    /// The limits of one run of `lang` under `task`.
    pub fn case_limits(&self, lang: &Language, task: &Task) -> Limits {
        let time = Duration::from_millis(task.time_limit.max(1) as u64);
        let memory = task.memory_limit.max(1) as u64 * 1024;
        Limits {
            cpu: time,
            // A sleeper (or a program blocked on a read) is TLE, and never
            // holds a worker for long.
            wall: 3 * time + Duration::from_secs(1),
            memory,
            address_space: lang.limit_address_space.then_some(memory + ADDRESS_SPACE_HEADROOM),
            // Deep recursion is legal up to the memory limit, and every
            // thread beside the main one gets the runtime's default stack.
            stack: Some(UNLIMITED),
            output: self.output_limit,
            processes: Some(lang.processes),
        }
    }

    /// The limits of a checker's or interactor's run: 10 s of CPU, 1 GiB;
    /// wall time 20 s, or (an interactor) the program's wall limit + 10 s,
    /// since it waits for the program.
    pub fn checker_limits(&self, program_wall: Option<Duration>) -> Limits {
        let memory = 1 << 30;
        Limits {
            cpu: Duration::from_secs(10),
            wall: program_wall.map_or(Duration::from_secs(20), |w| w + Duration::from_secs(10)),
            memory,
            address_space: Some(memory + ADDRESS_SPACE_HEADROOM),
            stack: Some(UNLIMITED),
            output: self.output_limit,
            processes: Some(16),
        }
    }

    /// The limits of a compile of `lang`.
    pub fn compile_limits(&self, lang: &Language) -> Limits {
        Limits {
            cpu: self.compile_cpu,
            wall: self.compile_wall,
            memory: self.compile_memory,
            address_space: lang.limit_address_space.then_some(self.compile_memory + ADDRESS_SPACE_HEADROOM),
            stack: Some(UNLIMITED),
            output: self.compile_output,
            processes: Some(self.compile_processes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::Languages;

    #[test]
    fn case_limits_follow_the_task() {
        let judge = Judge::default();
        let langs = Languages::builtin();
        let task = Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: 1 };
        let l = judge.case_limits(langs.by_name("c11").unwrap(), &task);
        assert_eq!(l.cpu, Duration::from_secs(1));
        assert_eq!(l.wall, Duration::from_secs(4));
        assert_eq!(l.memory, 64 << 20);
        assert_eq!(l.address_space, Some((64 << 20) + ADDRESS_SPACE_HEADROOM));
        assert_eq!(l.stack, Some(UNLIMITED), "threads get the runtime's default stack");
        assert_eq!(l.output, 64 << 20);
        assert_eq!(l.processes, Some(16));
        let java = judge.case_limits(langs.by_name("java").unwrap(), &task);
        assert_eq!(java.address_space, None);
    }
}
