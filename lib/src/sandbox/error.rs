//! Why a run could not be made or measured: the judge's failure (the
//! caller's JE), never the program's. It crosses the helper's socket as it
//! is (`helper.rs`), so its causes are the kernel's words, not `io::Error`s.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;

/// A sandbox run that failed through the judge's fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Error {
    #[error("empty command")]
    EmptyCommand,
    #[error("a NUL byte in the command or environment")]
    NulByte,
    #[error("bad request: {0}")]
    BadRequest(String),
    /// A step of the run (or of the helper's) the kernel refused.
    #[error("{step}: {why}")]
    Os { step: Step, why: String },
    /// The program could not be started: `during` says at which step, when
    /// the jail's program knows it (`exec`, or the setup before it).
    #[error("cannot start {program}: {}{why}", during.map_or(String::new(), |d| format!("{d}: ")))]
    CannotStart { program: String, during: Option<Starting>, why: String },
    /// The jail's init died before its report (`how`: its wait status).
    #[error("the sandbox's init {how} during the run")]
    InitDied { how: String },
    #[error("the sandbox's init panicked")]
    InitPanicked,
    /// The judge's socket closed: the run was stopped, abandoned.
    #[error("the judge went away")]
    JudgeGone,
    /// The helper died during the run (`how`: its wait status): the
    /// judge's fault, worth one more try.
    #[error("the sandbox helper {how} during the run")]
    HelperDied { how: String },
    /// The helper's init died during the run (`why`), and the helper
    /// retired (`how`: its wait status): worth one more try.
    #[error("{why} (the sandbox helper {how})")]
    Lost { why: Box<Error>, how: String },
}

/// The steps of a run (and of the helper around it) whose failure is the
/// kernel's refusal, each named as the message says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// The judge's side.
    Request,
    Input,
    Outputs,
    RecordOutput,
    StartHelper,
    HelperSocket,
    HelperReply,
    /// The helper's.
    BoundingSet,
    Template,
    LockSlot(u32),
    Passwd,
    RenewNetns,
    /// The next run's IPC, UTS and PID namespaces, made ahead (`jail::Ahead`).
    Ahead,
    ResetCgroup,
    Clone,
    WaitProgram,
    /// init's.
    JoinCgroup,
    OomScore,
    EnterRoot,
    SocketPair,
    Pipe,
    ProgramStack,
    CloneProgram,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Request => f.write_str("the request to the sandbox helper"),
            Step::Input => f.write_str("the program's input"),
            Step::Outputs => f.write_str("the program's outputs"),
            Step::RecordOutput => f.write_str("recording the program's output"),
            Step::StartHelper => f.write_str("cannot start the sandbox helper"),
            Step::HelperSocket => f.write_str("sandbox helper"),
            Step::HelperReply => f.write_str("sandbox helper: a reply that does not parse"),
            Step::BoundingSet => f.write_str("emptying the capability bounding set"),
            Step::Template | Step::EnterRoot => f.write_str("building the sandbox's root"),
            Step::LockSlot(uid) => write!(f, "locking slot uid {uid}"),
            Step::Passwd => f.write_str("the sandbox's passwd"),
            Step::JoinCgroup => f.write_str("joining the run's cgroup"),
            Step::RenewNetns => f.write_str("a new network namespace for the helper"),
            Step::Ahead => f.write_str("the next run's namespaces, made ahead"),
            Step::ResetCgroup => f.write_str("resetting the run's cgroup"),
            Step::Clone => f.write_str("cannot start the jail"),
            Step::WaitProgram => f.write_str("waiting for the program"),
            Step::OomScore => f.write_str("setting the run's oom_score_adj"),
            Step::SocketPair => f.write_str("socketpair"),
            Step::Pipe => f.write_str("pipe"),
            Step::ProgramStack => f.write_str("the program's stack"),
            Step::CloneProgram => f.write_str("clone"),
        }
    }
}

/// Where the jail's program failed before running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Starting {
    /// Its stdio, directory, rlimits, identity or filter.
    Setup,
    Exec,
}

impl fmt::Display for Starting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Starting::Setup => "setting up the program",
            Starting::Exec => "exec",
        })
    }
}

impl Step {
    /// This step's failure with the kernel's word for it.
    pub fn failed(self, e: impl fmt::Display) -> Error {
        Error::Os { step: self, why: e.to_string() }
    }

    /// `map_err` for an `io::Result` of this step.
    pub fn err(self) -> impl FnOnce(io::Error) -> Error {
        move |e| self.failed(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_the_step_and_cross_the_socket_unchanged() {
        let init = Box::new(Error::InitDied { how: "was killed by signal 9".into() });
        let lost = Error::Lost { why: init, how: "exited with status 1".into() };
        assert_eq!(
            lost.to_string(),
            "the sandbox's init was killed by signal 9 during the run (the sandbox helper exited with status 1)"
        );
        let died = Error::HelperDied { how: "was killed by signal 9".into() };
        assert_eq!(died.to_string(), "the sandbox helper was killed by signal 9 during the run");
        let start =
            Error::CannotStart { program: "./a".into(), during: Some(Starting::Exec), why: "No such file".into() };
        assert_eq!(start.to_string(), "cannot start ./a: exec: No such file");
        assert_eq!(Step::LockSlot(7).failed("busy").to_string(), "locking slot uid 7: busy");
        for e in [lost, died, start, Error::JudgeGone] {
            let json = serde_json::to_vec(&e).unwrap();
            assert_eq!(serde_json::from_slice::<Error>(&json).unwrap(), e);
        }
    }
}
