//! Why a program stops early: an [`ExitCode`] and the one
//! line it logs. Setup code returns a [`Failure`] and `main` turns it into
//! the exit code with [`exit_code`], so the reason is printed once, where
//! the program ends.

use crate::exit::ExitCode;
use std::fmt;

/// Why a program stops early: its exit code and the line it logs.
#[derive(Debug)]
pub struct Failure(pub ExitCode, pub String);

impl Failure {
    /// The configuration is unusable: a token file, a database, a flag
    /// ([`ExitCode::Config`]: do not restart until it is fixed).
    pub fn config(message: impl Into<String>) -> Failure {
        Failure(ExitCode::Config, message.into())
    }

    /// Something went wrong while working ([`ExitCode::Failure`]).
    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure(ExitCode::Failure, message.into())
    }

    pub fn exit_code(&self) -> ExitCode {
        self.0
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.1)
    }
}

impl std::error::Error for Failure {}

/// Adds what was being done to an error, as a runtime [`Failure`].
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, Failure>;
}

impl<T, E: fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, Failure> {
        self.map_err(|e| Failure::runtime(format!("{}: {e}", what())))
    }
}

/// The exit code of a program's run, logging why it failed.
pub fn exit_code(r: Result<ExitCode, Failure>) -> ExitCode {
    match r {
        Ok(code) => code,
        Err(Failure(code, msg)) => {
            log::error!("{msg}");
            code
        }
    }
}
