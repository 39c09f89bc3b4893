//! A runner as the suites start it: `runnerd`, or one stage alone, with the
//! environment that points it at a test hub and a spool of its own and
//! gives it this suite's slot uids ([`super::lanes`]); a stage's status,
//! a stage killed, a runner drained.

use super::hub::{Hub, REGISTRATION_TOKEN, TESTDATA_TOKEN};
use super::lanes;
use super::layout::bin;
use super::process::{child_pid, Proc};
use super::wait::wait_for;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The environment a runner needs to talk to `hub`, spooling in `spool`.
pub fn runner_env(hub: &Hub, spool: &Path) -> Vec<(String, String)> {
    runner_env_at(&hub.url, spool)
}

/// The environment a runner needs to talk to the hub at `url`.
pub fn runner_env_at(url: &str, spool: &Path) -> Vec<(String, String)> {
    vec![
        ("BACKEND_URL".into(), url.to_string()),
        ("RUNNER_REGISTRATION_TOKEN".into(), REGISTRATION_TOKEN.into()),
        ("SANDBOX_TOKEN".into(), TESTDATA_TOKEN.into()),
        ("RUNNER_NAME".into(), "test-runner".into()),
        ("OJ_SPOOL".into(), spool.to_str().unwrap().into()),
        // Retry delays and deadlines in tenths, so faults resolve in seconds.
        ("OJ_TIME_SCALE".into(), "0.1".into()),
        // The suites hold jobs in flight with programs that sleep past their
        // time limit (slow_ab): no idleness rule (tests/early_verdicts.rs has it).
        ("OJ_IDLE_WINDOW_MS".into(), "0".into()),
        ("RUST_LOG".into(), std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
    ]
    .into_iter()
    .chain(slot_env())
    .collect()
}

/// This suite's slot uids, and the locks every runner of the checkout
/// shares: given to every runner (a supervisor may clear the environment).
pub fn slot_env() -> [(String, String); 2] {
    [
        ("OJ_SLOT_UID_BASE".into(), lanes::slot_uid_base().to_string()),
        ("OJ_SLOT_LOCK_DIR".into(), ojrunner::sandbox::slot_lock_dir().to_string_lossy().into_owned()),
    ]
}

/// Starts `runnerd` (a whole runner) against `hub`.
pub fn start_runner(hub: &Hub, spool: &Path, extra_env: &[(&str, &str)]) -> Proc {
    start_stage(hub, spool, "runnerd", extra_env)
}

/// Starts one program of a runner (`runnerd`, or a stage alone) against `hub`.
pub fn start_stage(hub: &Hub, spool: &Path, program: &str, extra_env: &[(&str, &str)]) -> Proc {
    let mut cmd = Command::new(bin(program));
    cmd.envs(runner_env(hub, spool)).envs(extra_env.iter().map(|(a, b)| (a.to_string(), b.to_string())));
    Proc::spawn(&mut cmd, program)
}

/// A stage's answer to `status` on its control socket, within the 3 s
/// runnerd gives each; `None` if it gave none.
pub fn stage_status(spool: &Path, stage: &str) -> Option<serde_json::Value> {
    ojrunner::control::request(spool, stage, &serde_json::json!({"cmd": "status"}), Duration::from_secs(3)).ok()
}

/// Starts `runnerd` with its stderr (every stage's log) in `log`.
pub fn start_runner_logged(hub: &Hub, spool: &Path, extra_env: &[(&str, &str)], log: &Path) -> Proc {
    let mut cmd = Command::new(bin("runnerd"));
    cmd.envs(runner_env(hub, spool)).envs(extra_env.iter().map(|(a, b)| (a.to_string(), b.to_string())));
    cmd.stderr(std::fs::File::create(log).expect("runner log"));
    Proc::of(cmd.spawn().expect("spawn runnerd"), "runnerd", Some(log))
}

/// Kills a stage of a runner (SIGKILL): a crash.
pub fn kill_stage(runner: &Proc, stage: &str) -> i32 {
    let pid =
        wait_for(&format!("{stage} to run"), Duration::from_secs(30), || child_pid(runner.pid(), stage_comm(stage)));
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    pid
}

/// The kernel's name of a stage's process (comm is cut at 15 bytes).
pub fn stage_comm(stage: &str) -> &str {
    &stage[..stage.len().min(15)]
}

/// Drains `runner` (TERM) and checks that it exits 0 within a minute.
pub fn drain(mut runner: Proc) {
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0, "the runner drained cleanly");
}
