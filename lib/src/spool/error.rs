//! What can go wrong with the spool, each kind with what a caller should do
//! about it ([`SpoolError::retry`]).

use std::fmt;

/// A spool error: what went wrong, by what a caller should do about it,
/// each with what was being done.
#[derive(Debug)]
pub enum SpoolError {
    /// Another connection held the database past the busy timeout.
    Busy(String),
    /// The disk is full, or the claim reserve cannot be made.
    Full(String),
    /// The spool was deleted or replaced under the runner, or is not the
    /// file the runner started with: nothing written would be read.
    Gone(String),
    /// No spool to use here: none made (only a runner's start makes one),
    /// an empty file, or a schema newer than this program's.
    Unusable(String),
    /// A row that cannot be read (a state, an identity's configuration):
    /// the rest of the spool is sound.
    Corrupt(String),
    /// Any other failure of SQLite or of the file system.
    Io(String),
}

/// What a caller does about a [`SpoolError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Try again later: the next pass of the loop, or the stage restarted
    /// (exit 111). Room may be made, the lock freed.
    Later,
    /// Leave the row aside (skip it, judge it again, log it) and go on:
    /// trying again reads the same bytes.
    Skip,
    /// Stop: trying again cannot help; the runner must be started again on
    /// a spool (exit 100).
    Stop,
}

impl SpoolError {
    /// The policy: what a caller should do about this error.
    pub fn retry(&self) -> Retry {
        match self {
            SpoolError::Busy(_) | SpoolError::Full(_) | SpoolError::Io(_) => Retry::Later,
            SpoolError::Corrupt(_) => Retry::Skip,
            SpoolError::Gone(_) | SpoolError::Unusable(_) => Retry::Stop,
        }
    }

    /// Whether the spool was deleted or replaced under the runner.
    pub fn is_gone(&self) -> bool {
        matches!(self, SpoolError::Gone(_))
    }

    /// What went wrong, and what was being done.
    pub fn message(&self) -> &str {
        match self {
            SpoolError::Busy(m)
            | SpoolError::Full(m)
            | SpoolError::Gone(m)
            | SpoolError::Unusable(m)
            | SpoolError::Corrupt(m)
            | SpoolError::Io(m) => m,
        }
    }
}

impl fmt::Display for SpoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for SpoolError {}

pub type Result<T> = std::result::Result<T, SpoolError>;

/// An error underneath the spool's, and which kind of [`SpoolError`] it is.
pub(super) trait Cause: fmt::Display {
    fn kind(&self) -> fn(String) -> SpoolError;
}

impl Cause for rusqlite::Error {
    fn kind(&self) -> fn(String) -> SpoolError {
        use rusqlite::ErrorCode as C;
        if matches!(self, rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..)) {
            // A field of a type no reader expects: that row's fault.
            return SpoolError::Corrupt;
        }
        match self.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => SpoolError::Busy,
            Some(C::DiskFull) => SpoolError::Full,
            Some(C::DatabaseCorrupt | C::NotADatabase) => SpoolError::Corrupt,
            _ => SpoolError::Io,
        }
    }
}

impl Cause for std::io::Error {
    fn kind(&self) -> fn(String) -> SpoolError {
        match self.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => SpoolError::Full,
            _ => SpoolError::Io,
        }
    }
}

impl Cause for serde_json::Error {
    fn kind(&self) -> fn(String) -> SpoolError {
        SpoolError::Corrupt
    }
}

/// Says what was being done when an error came up underneath.
pub(super) trait Context<T> {
    fn ctx(self, what: &str) -> Result<T>;
}

impl<T, E: Cause> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: &str) -> Result<T> {
        self.map_err(|e| e.kind()(format!("spool: {what}: {e}")))
    }
}
