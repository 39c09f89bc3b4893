//! Why a program stops early: an [`exit`] code and the one
//! line it logs. Setup code returns a [`Failure`] and `main` turns it into
//! the exit code with [`exit_code`], so the reason is printed once, where
//! the program ends.

use crate::exit;
use std::fmt;

/// Why a program stops early: its exit code and the line it logs.
#[derive(Debug)]
pub struct Failure(pub i32, pub String);

impl Failure {
    /// The configuration is unusable: a token file, a database, a flag
    /// ([`exit::CONFIG`]: do not restart until it is fixed).
    pub fn config(message: impl Into<String>) -> Failure {
        Failure(exit::CONFIG, message.into())
    }

    /// Something went wrong while working ([`exit::FAILURE`]).
    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure(exit::FAILURE, message.into())
    }

    pub fn exit_code(&self) -> i32 {
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
pub fn exit_code(r: Result<i32, Failure>) -> i32 {
    match r {
        Ok(code) => code,
        Err(Failure(code, msg)) => {
            log::error!("{msg}");
            code
        }
    }
}
