//! ojrunner: a judge runner for online judges, wire-compatible with
//! Normal-OJ's pull-based dispatch protocol.
//!
//! The runner is a handful of cooperating processes (`claimd`, `judge-exec`,
//! `reportd`, `leased`, under the supervisor `runnerd`) sharing one SQLite
//! [`spool::Spool`]; `hubd` is the reference hub. Each binary is a thin
//! `main` calling into [`stage`]; everything else is here.

pub mod protocol;

// The runner's shared machinery.
pub mod answer;
pub mod archive;
pub mod claim;
pub mod config;
pub mod control;
pub mod daemon;
pub mod drain;
pub mod hub;
pub mod lease;
pub mod logger;
pub mod patience;
pub mod signals;
pub mod spool;
pub mod testdata;

// Judging.
pub mod cgroup;
pub mod checker;
pub mod helper;
pub mod jail;
pub mod judge;
pub mod language;
pub mod program_cache;
pub mod sandbox;
pub mod seccomp;
pub mod slot_pool;
pub mod standalone;
pub mod streams;
pub mod verdict;

// The reference hub.
pub mod hubd;

/// One module per executable: each holds that program's `main`.
pub mod stage {
    pub mod claimd;
    pub mod hubd;
    pub mod judge_exec;
    pub mod leased;
    pub mod reportd;
    pub mod runnerd;
}
