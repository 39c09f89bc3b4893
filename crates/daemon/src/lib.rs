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

/// Says that the calling unit test is skipped, and why (it then returns,
/// and the harness counts it as passed): a line on stderr and one in
/// `<target>/test-logs/skipped.log`, which `make test` counts, as the
/// integration tests' `testkit::skip` does (the `test-dir` feature).
#[cfg(any(test, feature = "test-dir"))]
pub fn skip_test(why: &str) {
    use std::io::Write;
    eprintln!("skipped: {why}");
    let test = std::thread::current().name().unwrap_or("?").to_string();
    // The test binary is <target>/<profile>/deps/<crate>-<hash>.
    let exe = std::env::current_exe().unwrap_or_default();
    let suite = exe.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let suite = suite.rsplit_once('-').map_or(suite.clone(), |(s, _)| s.to_string());
    let Some(target) = exe.ancestors().nth(3) else { return };
    let log = target.join("test-logs");
    let _ = std::fs::create_dir_all(&log);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log.join("skipped.log")) {
        let _ = writeln!(f, "unit-{suite}::{test}: {why}");
    }
}

/// What `f` returned on each of `n` threads started together: for the
/// unit tests of openers that must stand being raced (the `test-dir`
/// feature, as [`test_dir`]).
#[cfg(any(test, feature = "test-dir"))]
pub fn at_once<F>(n: usize, f: F) -> Vec<Result<(), String>>
where
    F: Fn() -> Result<(), String> + Clone + Send + 'static,
{
    let started: Vec<_> = (0..n).map(|_| std::thread::spawn(f.clone())).collect();
    started.into_iter().map(|t| t.join().unwrap_or_else(|_| Err("panicked".into()))).collect()
}
