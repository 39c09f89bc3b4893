//! The common shape of a restart or drain test: a scratch directory, a hub
//! with the A+B problem, a spool for the runner the test starts; what the
//! test does in the middle is its own.

use super::hub::Hub;
use super::layout::examples;
use super::problems::slow_ab;
use super::process::Proc;
use super::runner::{drain, start_runner, start_runner_logged};
use super::scratch::TempDir;
use super::spool::{judging_claim, spool_int, wait_cases, SpoolClaim};
use super::wait::wait_for;
use std::path::PathBuf;
use std::time::Duration;

/// One process-level scenario of the restart and drain cases: a scratch
/// directory, a hub with the A+B problem (`examples/problems/1`), and a
/// spool for the runner the test starts ([`Scenario::start`]); what the
/// test does in the middle (a kill, an outage, a drain) is its own.
pub struct Scenario {
    pub dir: TempDir,
    pub hub: Hub,
    pub spool: PathBuf,
}

/// A new [`Scenario`] in a directory tagged `tag`, its hub started with
/// `hub_flags`.
pub fn scenario(tag: &str, hub_flags: &[&str]) -> Scenario {
    let dir = TempDir::new(tag);
    let hub = Hub::start(dir.path(), hub_flags);
    hub.add_problem(1, &examples().join("problems/1"));
    let spool = dir.path().join("spool");
    Scenario { dir, hub, spool }
}

impl Scenario {
    /// Submits the C A+B that is AC; its id.
    pub fn submit_ab(&self) -> String {
        self.hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"))
    }

    /// Submits a Python A+B that sleeps `secs` per case (AC, slowly); its id.
    pub fn submit_slow_ab(&self, secs: f64) -> String {
        self.hub.submit(1, "python3", &slow_ab(self.dir.path(), secs))
    }

    /// Starts a runner (`runnerd`) on the scenario's spool.
    pub fn start(&self, env: &[(&str, &str)]) -> Proc {
        start_runner(&self.hub, &self.spool, env)
    }

    /// Starts a runner with its log in `runner.log` (see [`Scenario::log`]).
    pub fn start_logged(&self, env: &[(&str, &str)]) -> Proc {
        start_runner_logged(&self.hub, &self.spool, env, &self.dir.path().join("runner.log"))
    }

    /// What a runner of [`Scenario::start_logged`] has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("runner.log")).unwrap_or_default()
    }

    /// Waits (at most `limit`) until every submission is judged; `sub`'s status.
    pub fn judged(&self, sub: &str, limit: Duration) -> serde_json::Value {
        let all = self.hub.wait_all_judged(limit);
        all.into_iter().find(|s| s["submission_id"] == sub).unwrap_or_else(|| panic!("no submission {sub}"))
    }

    /// [`Scenario::judged`], and judged as if nothing had happened: AC,
    /// once, on one handout, so nothing was handed back ([`assert_clean_ac`]).
    pub fn judged_clean(&self, sub: &str, limit: Duration) -> serde_json::Value {
        let s = self.judged(sub, limit);
        assert_clean_ac(&s);
        s
    }

    /// Waits (at most a minute) until the runner is judging a claim; that claim.
    pub fn judging_claim(&self) -> SpoolClaim {
        judging_claim(&self.spool)
    }

    /// Waits (at most a minute) until `n` cases are judged.
    pub fn wait_cases(&self, n: i64) {
        wait_cases(&self.spool, n)
    }

    /// Waits (at most a minute) until an outcome has been tried `n` times.
    pub fn wait_outbox_tries(&self, what: &str, n: i64) {
        wait_for(what, Duration::from_secs(60), || {
            (spool_int(&self.spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= n).then_some(())
        });
    }

    /// Drains `runner` (TERM) and checks that it exits 0 ([`drain`]).
    pub fn drain(&self, runner: Proc) {
        drain(runner)
    }
}

/// Checks a submission ended AC, judged once, on one handout, and nothing
/// was handed back.
pub fn assert_clean_ac(s: &serde_json::Value) {
    assert_eq!(s["verdict"], "AC", "{s}");
    assert_eq!(s["completes"], 1, "{s}");
    assert_eq!(s["handouts"], 1, "the job was never reclaimed: {s}");
    assert_eq!(s["attempts"], 1, "{s}");
    assert!(s["aborts"].as_array().is_some_and(|a| a.is_empty()), "nothing was handed back: {s}");
}
