//! ojrunner: a judge runner for online judges, wire-compatible with
//! Normal-OJ's pull-based dispatch protocol.
//!
//! The runner is a handful of cooperating processes (`claimd`, `judge-exec`,
//! `reportd`, `leased`, under the supervisor `runnerd`) sharing one SQLite
//! [`spool::Spool`]. Each binary's `main` holds its command line, logger,
//! signal handling and exit code, and calls its stage's `run(config,
//! shutdown)` in [`stage`]; everything else is here. The library installs
//! no signal handler: a stage stops through the
//! [`Shutdown`](signals::Shutdown) it is handed, and every stage runs in
//! the one loop of `ojrunner-daemon` (`ojrunner_daemon::stage::run`),
//! whose table decides what a stop does. The wire types are `ojrunner-protocol`'s and the
//! daemon plumbing is `ojrunner-daemon`'s, both shared with the reference
//! hub (`ojrunner-hub`), which this library does not contain; they are
//! re-exported under their old paths.

// Every unsafe block says why it is sound (`// SAFETY:`); raw libc only
// where no safe wrapper fits (between clone and exec: no allocation).
#![deny(clippy::undocumented_unsafe_blocks)]

pub use ojrunner_daemon::{control, logger, signals};
pub use ojrunner_protocol as protocol;
pub use ojrunner_protocol::archive;

// The runner's shared machinery.
pub mod answer;
pub mod claim;
pub mod config;
pub mod counter;
pub mod daemon;
pub mod drain;
pub mod hub;
pub mod lease;
pub mod metrics;
pub mod outcome;
pub mod patience;
pub mod phase;
pub mod scrape;
pub mod services;
pub mod spool;
pub mod testdata;

// Judging.
pub mod checker;
pub mod compile_cache;
pub mod judge;
pub mod language;
pub mod program_cache;
pub mod sandbox;
pub mod standalone;
pub mod verdict;
pub mod workspace;

/// One module per executable: each holds that program's `run`.
pub mod stage {
    pub mod claimd;
    pub mod judge_exec;
    pub mod leased;
    pub mod reportd;
    pub mod runnerd;
}
