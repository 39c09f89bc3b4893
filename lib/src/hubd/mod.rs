//! `hubd`, the reference hub: the other side of the hub protocol
//! (`PROTOCOL.md`) on an SQLite queue, so a runner can be tested end to end
//! on one machine, and a small deployment can run without Normal-OJ.
//!
//! It follows Normal-OJ's backend semantics (lease expiry as the only orphan
//! test, attempts counted by claims and counted aborts, `drain` refunded,
//! JE at the limit, results of superseded jobs dropped with 204) and records
//! every call it receives, so tests can assert what a runner did, not just
//! what it ended with.
//!
//! One module per concept: [`db`] (schema, migrations, clocks, ids),
//! [`queue`] (the job lifecycle transactions), [`result`] (a `complete` body
//! into a verdict), [`runners`] (identities), [`problem`] and [`submission`]
//! (what is judged), [`fault`] (injected outages), [`status`] (the report),
//! [`server`] (HTTP), [`md5`] and [`pyjson`] (Normal-OJ's checksum).

pub mod db;
pub mod fault;
pub mod md5;
pub mod problem;
pub mod pyjson;
pub mod queue;
pub mod result;
pub mod runners;
pub mod server;
pub mod status;
pub mod submission;

use std::fmt;

/// Why a `hubd` command failed; it decides the exit code. (Usage errors,
/// exit 2, are clap's.)
#[derive(Debug)]
pub enum Failure {
    /// The configuration is unusable: a token file, the database (exit 100).
    Config(String),
    /// Anything else that went wrong while working (exit 1).
    Runtime(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Config(_) => 100,
            Failure::Runtime(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Config(m) | Failure::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Failure {}

/// Adds what was being done to an error, as a runtime [`Failure`].
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, Failure>;
}

impl<T, E: fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, Failure> {
        self.map_err(|e| Failure::Runtime(format!("{}: {e}", what())))
    }
}
