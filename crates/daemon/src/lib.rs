//! The plumbing every ojrunner program shares, the runner's stages and the
//! reference hub alike: what a supervisor sees of a daemon (its [`exit`]
//! codes, its [`logger`] lines, its [`readiness`], how it takes
//! [`signals`]), the one loop every stage runs in and its stop policy
//! ([`stage`]), its [`control`] socket, the descriptors it keeps to
//! itself ([`fds`]), and the small things both sides need the same way
//! (a [`Failure`] and its exit code, [`token_file`]s, every [`user_file`] read with a bound, [`lock`] files, the
//! [`clock`], a [`duration`] in seconds, a database in WAL mode:
//! [`sqlite`]), and what a server says of itself on its metrics page
//! ([`process`]).
//!
//! Nothing here knows the hub protocol, the spool or the sandbox, so the
//! hub can link it without the runner, and the runner without the hub.

#![forbid(unsafe_code)]

pub mod clock;
pub mod control;
pub mod duration;
pub mod exit;
pub mod failure;
pub mod fds;
pub mod lock;
pub mod logger;
pub mod process;
pub mod readiness;
pub mod signals;
pub mod sqlite;
pub mod stage;
pub mod token_file;
pub mod user_file;

pub use exit::ExitCode;
pub use failure::{exit_code, Context, Failure};

/// A program's first steps, the same in every one that runs as a stage:
/// keep the descriptors it inherited to itself ([`fds`]), start the
/// [`logger`] under its name, then parse its command line with `parse`
/// (clap's `Cli::parse`, which exits on a usage error).
pub fn start<Cli>(name: &str, parse: impl FnOnce() -> Cli) -> Cli {
    fds::keep_inherited_fds_private();
    logger::init(name);
    parse()
}

/// A fresh, empty directory for a unit test: `tag` and the process id name
/// it under the temp directory, and what a last run left there is gone.
/// For the unit tests of this crate and of those that use it (the
/// `test-dir` feature, which their dev-dependency turns on), so that one
/// copy serves them all.
#[cfg(any(test, feature = "test-dir"))]
pub fn test_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
