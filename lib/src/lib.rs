//! ojrunner: a judge runner for online judges, wire-compatible with
//! Normal-OJ's pull-based dispatch protocol.
//!
//! The runner is a handful of cooperating processes (`claimd`, `judge-exec`,
//! `reportd`, `leased`, under the supervisor `runnerd`) sharing one SQLite
//! [`spool::Spool`]. Each binary is a thin `main` calling into [`stage`];
//! everything else is here. The wire types are `ojrunner-protocol`'s and the
//! daemon plumbing is `ojrunner-daemon`'s, both shared with the reference
//! hub (`ojrunner-hub`), which this library does not contain; they are
//! re-exported under their old paths.

pub use ojrunner_daemon::{control, logger, signals};
pub use ojrunner_protocol as protocol;

// The runner's shared machinery.
pub mod answer;
pub mod archive;
pub mod config;
pub mod daemon;
pub mod hub;
pub mod patience;
pub mod spool;
pub mod testdata;

// Judging.
pub mod checker;
pub mod judge;
pub mod language;
pub mod program_cache;
pub mod sandbox;
pub use sandbox::{cgroup, helper, jail, seccomp, slot as slot_pool, streams};
pub mod standalone;
pub mod verdict;
pub mod workspace;

/// One module per executable: each holds that program's `main`.
pub mod stage {
    /// Discards, and logs, the claims whose lease the runner lost while it
    /// was down (see [`crate::spool::Spool::drop_lost_claims`]).
    pub fn drop_lost_claims(spool: &mut crate::spool::Spool) {
        match spool.drop_lost_claims() {
            Ok(lost) => {
                for c in lost {
                    log::warn!(
                        "job {} claim {}: {}; dropped without reporting (the hub has reclaimed it)",
                        c.job_id,
                        c.id,
                        c.note
                    );
                    let _ = std::fs::remove_dir_all(spool.claim_dir(c.id));
                }
            }
            Err(e) => log::error!("{e}"),
        }
    }

    pub mod claimd;
    pub mod judge_exec;
    pub mod leased;
    pub mod reportd;
    pub mod runnerd;
}
