//! The plumbing every ojrunner program shares, the runner's stages and the
//! reference hub alike: what a supervisor sees of a daemon (its [`exit`]
//! codes, its [`logger`] lines, its [`readiness`], how it takes
//! [`signals`]), its [`control`] socket, the descriptors it keeps to
//! itself ([`fds`]), and the small things both sides need the same way
//! (a [`Failure`] and its exit code, [`token_file`]s, the [`clock`], a
//! [`duration`] in seconds).
//!
//! Nothing here knows the hub protocol, the spool or the sandbox, so the
//! hub can link it without the runner, and the runner without the hub.

pub mod clock;
pub mod control;
pub mod duration;
pub mod exit;
pub mod failure;
pub mod fds;
pub mod logger;
pub mod readiness;
pub mod signals;
pub mod token_file;

pub use exit::ExitCode;
pub use failure::{exit_code, Context, Failure};
