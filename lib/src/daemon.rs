//! What every stage does to start and to end: open the spool, listen to
//! signals and to its control socket (one inbox for both), and turn a
//! failure into its exit code with one log line.

use crate::config::{exit, ConfigError};
use crate::control::{self, Inbox};
use crate::signals::{self, Stops};
use crate::spool::Spool;
use std::path::Path;

/// Why a stage stops early: its exit code and the line it logs.
pub struct Failure(pub i32, pub String);

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure(exit::CONFIG, e.0)
    }
}

impl From<crate::spool::SpoolError> for Failure {
    fn from(e: crate::spool::SpoolError) -> Failure {
        Failure(exit::TEMPORARY, e.0)
    }
}

/// A running stage's plumbing.
pub struct Daemon {
    pub spool: Spool,
    pub inbox: Inbox,
    pub stops: Stops,
}

impl Daemon {
    /// Opens the spool in `dir` and listens as `stage`.
    pub fn start(stage: &str, dir: &Path) -> Result<Daemon, Failure> {
        let spool = Spool::open(dir)?;
        let inbox = Inbox::new();
        let stops =
            signals::forward(inbox.tx.clone()).map_err(|e| Failure(exit::TEMPORARY, format!("signals: {e}")))?;
        control::listen(dir, stage, inbox.tx.clone())
            .map_err(|e| Failure(exit::TEMPORARY, format!("control socket: {e}")))?;
        Ok(Daemon { spool, inbox, stops })
    }
}

/// The language table: `path`, or the built-in copy of etc/languages.json.
pub fn languages(path: Option<&Path>) -> Result<crate::language::Languages, Failure> {
    match path {
        Some(p) => crate::language::Languages::load(p)
            .map_err(|e| Failure(exit::CONFIG, format!("languages {}: {e}", p.display()))),
        None => Ok(crate::language::Languages::builtin()),
    }
}

/// The exit code of a stage's run, logging why it failed.
pub fn exit_code(r: Result<i32, Failure>) -> i32 {
    match r {
        Ok(code) => code,
        Err(Failure(code, msg)) => {
            log::error!("{msg}");
            code
        }
    }
}
