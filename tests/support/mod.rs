//! The suites' test kit (`testkit`): real binaries, real processes, a real
//! `hubd` over loopback, and waits on conditions with deadlines (never a
//! sleep-and-hope). Every name is re-exported here, so a suite says
//! `use testkit::{scenario, Hub}`; each module below holds one concept
//! and says at its top why it is there.

// Where things are, and the files a test writes.
mod layout;
mod scratch;
pub use layout::{bin, bin_dir, examples, repo, suite};
pub use scratch::{source_dir, staged_source, uncache, write_file, TempDir};

// Waiting with deadlines.
mod wait;
pub use wait::{now_ms, wait_for};

// Processes: the test's daemons and their logs, and what /proc says.
mod process;
pub use process::{child_pid, daemon_log, processes_of, quiet, Proc};

// The two sides of the protocol: the reference hub, a runner, and each of
// them written by hand for what the real one never does.
mod hand_runner;
mod http;
mod hub;
mod runner;
mod scripted_hub;
pub use hand_runner::HandRunner;
pub use http::http_exchange;
pub use hub::{hub_cli, loopback, Hub, REGISTRATION_TOKEN, TESTDATA_TOKEN};
pub use runner::{
    drain, kill_stage, runner_env, runner_env_at, slot_env, stage_comm, stage_status, start_runner,
    start_runner_logged, start_stage,
};
pub use scripted_hub::{Heard, ScriptedHub};

// A runner's spool read from outside, and the restart tests' common shape.
mod scenario;
mod spool;
pub use scenario::{assert_clean_ac, scenario, Scenario};
pub use spool::{judging_claim, spool_claims, spool_int, spool_last_beat, spool_runner_id, wait_cases, SpoolClaim};

// Problems, testdata and submissions made for a test.
mod problems;
pub use problems::{one_case_problem, slow_ab, stream_menu, testdata_dir, Dish};

// The sandbox in this process, each suite's slot uids, a disk that fills.
mod disk;
mod lanes;
mod sandbox;
pub use disk::SmallDisk;
pub use sandbox::{built_hostile, judge_cases, judge_exec_cmd, judge_exec_run, runs_cgroups, slot_spec};

// Skips written down; dice; what the benchmarks share.
mod bench;
mod dice;
mod skip;
pub use bench::{env_usize, machine, stats, Report, Stats};
pub use dice::{seed_from, Dice};
pub use skip::{is_root, skip};
