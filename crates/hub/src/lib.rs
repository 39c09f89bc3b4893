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
//! [`server`] (HTTP, stopped through the `Shutdown` its caller hands it),
//! [`store`] (the server's database access: a group-committing writer and
//! readers), [`polls`] (waiting long polls and their wakes), [`wake`] (the
//! hint `submit` sends the server), [`limits`] (what one client may cost),
//! [`metrics`] (the Prometheus page) and [`pyjson`] (Normal-OJ's checksum). The `hubd` program's command
//! line, signals and exit code are `bins/hubd`'s.
//!
//! It shares the wire types and the language table with the runner
//! (`ojrunner-protocol`) and the daemon plumbing too (`ojrunner-daemon`:
//! exit codes, logging, readiness, signals), and nothing else: no sandbox,
//! no spool.

#![forbid(unsafe_code)]

pub mod db;
pub mod fault;
pub mod limits;
pub mod metrics;
pub mod polls;
pub mod problem;
pub mod pyjson;
pub mod queue;
pub mod result;
pub mod runners;
pub mod server;
pub mod status;
pub mod store;
pub mod submission;
pub mod wake;

/// Why a `hubd` command failed: [`Failure::config`] (exit 100) for an
/// unusable token file or database, [`Failure::runtime`] (exit 1) for
/// anything else. (Usage errors, exit 2, are clap's.)
pub use ojrunner_daemon::{Context, Failure};
