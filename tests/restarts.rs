//! A restart costs no job: stages killed at awkward moments, the whole
//! runner killed, the hub away, the identity gone, drains cut short. Real
//! processes, real signals, a real `hubd` over loopback.

use nix::sys::signal::Signal;
use std::path::Path;
use std::time::Duration;
use testkit::*;

/// Waits (at most a minute) until the runner is judging a claim; that claim.
fn judging_claim(spool: &Path) -> SpoolClaim {
    wait_for("the job to be judging", Duration::from_secs(60), || {
        spool_claims(spool).into_iter().find(|c| c.state == "started")
    })
}

fn hub_with_ab(dir: &Path) -> Hub {
    let hub = Hub::start(dir, &[]);
    hub.add_problem(1, &examples().join("problems/1"));
    hub
}

/// Checks a submission ended AC, judged once, on one handout.
fn assert_clean_ac(s: &serde_json::Value) {
    assert_eq!(s["verdict"], "AC", "{s}");
    assert_eq!(s["completes"], 1, "{s}");
    assert_eq!(s["handouts"], 1, "the job was never reclaimed: {s}");
    assert_eq!(s["attempts"], 1, "{s}");
}

fn case_results(spool: &Path) -> i64 {
    spool_int(spool, "SELECT count(*) FROM case_results").unwrap_or(0)
}

#[test]
fn judge_exec_killed_mid_job_resumes_only_the_unfinished_cases() {
    let dir = TempDir::new("r-judge");
    let hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    wait_for("a first case judged", Duration::from_secs(60), || (case_results(&spool) >= 1).then_some(()));
    kill_stage(&runner, "judge-exec");
    let s = hub.wait_all_judged(Duration::from_secs(120));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_clean_ac(s);
    // One event per case judged: a rerun case would have sent a fourth.
    assert_eq!(s["events"], 3, "no finished case was judged again: {s}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn a_hub_away_while_a_claim_is_prepped_costs_the_job_nothing() {
    let dir = TempDir::new("r-prep-away");
    let hub = hub_with_ab(dir.path());
    // More failures than prep's three tries: an outage, not a bad job.
    hub.cli(&["fault", "--status", "503", "--count", "8", "--path-contains", "/code/"]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    let s = hub.wait_all_judged(Duration::from_secs(120));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_clean_ac(s);
    assert!(s["aborts"].as_array().unwrap().is_empty(), "nothing was handed back: {s}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn claimd_killed_during_prep_prepares_the_claim_again() {
    let dir = TempDir::new("r-claimd");
    let hub = hub_with_ab(dir.path());
    // The testdata channel fails once: prep waits 1 s (unscaled) before
    // trying again, long enough to be caught in the act.
    hub.cli(&["fault", "--status", "503", "--count", "1", "--path-contains", "/testdata"]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(&hub, &spool, &[("OJ_TIME_SCALE", "1")], &log);
    wait_for("the claim waiting in prep", Duration::from_secs(60), || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (text.contains("prep again in") && spool_claims(&spool).iter().any(|c| c.state == "claimed")).then_some(())
    });
    kill_stage(&runner, "claimd");
    let s = hub.wait_all_judged(Duration::from_secs(60));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_clean_ac(s);
    assert!(s["aborts"].as_array().unwrap().is_empty(), "nothing was handed back: {s}");
    assert_eq!(spool_claims(&spool).len(), 1, "the same claim was prepared again, not a new one");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn reportd_killed_with_an_outcome_queued_sends_it_after_its_restart() {
    let dir = TempDir::new("r-reportd");
    let hub = hub_with_ab(dir.path());
    hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/complete"]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    wait_for("the outcome to be retried", Duration::from_secs(60), || {
        (spool_int(&spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= 2).then_some(())
    });
    kill_stage(&runner, "reportd");
    hub.cli(&["fault", "--clear"]);
    let s = hub.wait_all_judged(Duration::from_secs(60));
    assert_clean_ac(s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap());
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn leased_killed_again_and_again_keeps_the_lease() {
    let dir = TempDir::new("r-leased");
    let hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.5));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    judging_claim(&spool);
    for n in 1..=3 {
        kill_stage(&runner, "leased");
        wait_for(&format!("{n} case(s) judged"), Duration::from_secs(60), || (case_results(&spool) >= n).then_some(()));
    }
    let s = hub.wait_all_judged(Duration::from_secs(60));
    assert_clean_ac(s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap());
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn the_whole_runner_killed_and_started_within_the_lease_finishes_its_job_as_itself() {
    let dir = TempDir::new("r-whole");
    let hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    wait_for("a first case judged", Duration::from_secs(60), || (case_results(&spool) >= 1).then_some(()));
    let id = spool_runner_id(&spool).unwrap();
    drop(runner); // SIGKILL: its stages die with it
    let mut runner = start_runner(&hub, &spool, &[]);
    let s = hub.wait_all_judged(Duration::from_secs(60));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_clean_ac(s);
    assert_eq!(spool_runner_id(&spool).as_deref(), Some(id.as_str()), "the same identity");
    assert_eq!(hub.cli(&["status", "--runners"]).lines().count(), 1, "no second registration");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn a_runner_back_after_its_leases_are_gone_drops_its_jobs_without_sending_them() {
    let dir = TempDir::new("r-late");
    let hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let (spool_a, spool_b) = (dir.path().join("spool-a"), dir.path().join("spool-b"));
    // Plain polls: a long poll in flight when the runner is killed would
    // have the hub hand the reclaimed job to the dead connection (a lost
    // handout: the protocol's price, never retried), not to runner B.
    let plain = [("OJ_CLAIM_WAIT", "0")];
    let runner = start_runner(&hub, &spool_a, &plain);
    wait_for("a first case judged", Duration::from_secs(60), || (case_results(&spool_a) >= 1).then_some(()));
    drop(runner);
    // Another runner reclaims the job once the lease has run out.
    let mut b = start_runner(&hub, &spool_b, &[]);
    wait_for("the job to be reclaimed", Duration::from_secs(60), || {
        (hub.submission(&sub)["handouts"] == 2).then_some(())
    });
    let mut a = start_runner(&hub, &spool_a, &plain);
    let s = hub.wait_all_judged(Duration::from_secs(60));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
    wait_for("the old claim to be dropped", Duration::from_secs(30), || {
        spool_claims(&spool_a).iter().all(|c| c.state == "discarded" && c.note.contains("lease lost")).then_some(())
    });
    assert_eq!(hub.submission(&sub)["complete_calls"], 1, "the stale result was never sent");
    for r in [&mut a, &mut b] {
        r.signal(Signal::SIGTERM);
        assert_eq!(r.wait_exit(Duration::from_secs(60)), 0);
    }
}

#[test]
fn two_401_heartbeats_stop_the_runner_at_once_without_a_drain() {
    let dir = TempDir::new("r-401");
    let hub = hub_with_ab(dir.path());
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(&hub, &spool, &[], &log);
    wait_for("registration", Duration::from_secs(30), || spool_runner_id(&spool));
    hub.cli(&["fault", "--status", "401", "--count", "100000", "--path-contains", "/heartbeat"]);
    assert_eq!(runner.wait_exit(Duration::from_secs(30)), 1, "identity gone: exit 1");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("draining"), "no drain:\n{text}");
    assert_eq!(spool_runner_id(&spool), None, "the identity is forgotten: a restart registers again");
}

#[test]
fn outcomes_and_events_outlast_a_hub_that_is_away() {
    let dir = TempDir::new("r-away");
    let mut hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    judging_claim(&spool);
    hub.stop();
    // The job finishes while the hub is away; its outcome waits, retried.
    wait_for("the outcome retried while the hub is away", Duration::from_secs(60), || {
        (spool_int(&spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= 4).then_some(())
    });
    hub.start_again();
    let s = hub.wait_all_judged(Duration::from_secs(60));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_clean_ac(s);
    assert_eq!(s["events"], 3, "the progress sent while away arrived too: {s}");
    // And through server errors.
    hub.cli(&["fault", "--status", "503", "--count", "6"]);
    let sub2 = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let s = hub.wait_all_judged(Duration::from_secs(60));
    assert_eq!(s.iter().find(|s| s["submission_id"] == sub2.as_str()).unwrap()["completes"], 1);
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn progress_past_the_spools_bound_loses_the_oldest_lines_and_says_how_many() {
    use ojrunner::spool::{Spool, MAX_EVENTS_PER_CLAIM};
    let dir = TempDir::new("r-lost");
    let mut hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    let claim = judging_claim(&spool);
    hub.stop();
    // While the hub is away, more progress than the spool keeps for a claim
    // (numbered lines written beside judge-exec's own). In batches, each
    // after leased has recorded a heartbeat: the stages judge a lease lost
    // when no beat was attempted for 2 s (the test's lease), and a writer
    // that held the spool's lock for long would keep leased from saying so.
    let extra = 10;
    let lines: Vec<String> =
        (0..MAX_EVENTS_PER_CLAIM + extra).map(|i| format!(r#"{{"t": 1, "kind": "note", "i": {i}}}"#)).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let last_beat = || spool_last_beat(&spool);
    let mut writer = Spool::open(&spool).unwrap();
    for batch in lines.chunks(5000) {
        let before = last_beat();
        wait_for("a heartbeat between two batches", Duration::from_secs(20), || (last_beat() != before).then_some(()));
        writer.add_events(claim.claim_id, batch).unwrap();
    }
    drop(writer);
    hub.start_again();
    let all = hub.wait_all_judged(Duration::from_secs(120));
    let s = all.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_clean_ac(s);
    // The hub got the newest lines, in order, and one line saying how many
    // went (the oldest: ours, perhaps a case line or two of judge-exec's).
    let db = rusqlite::Connection::open(&hub.db).unwrap();
    let bodies: Vec<serde_json::Value> = db
        .prepare("SELECT body FROM events WHERE job_id = ? ORDER BY seq")
        .unwrap()
        .query_map([&claim.job_id], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|b| serde_json::from_str(&b.unwrap()).unwrap())
        .collect();
    let notes: Vec<i64> = bodies.iter().filter(|b| b["kind"] == "note").map(|b| b["i"].as_i64().unwrap()).collect();
    let lost: Vec<&serde_json::Value> = bodies.iter().filter(|b| b["kind"] == "lost").collect();
    assert_eq!(lost.len(), 1, "one line says what was lost: {lost:?}");
    let count = lost[0]["count"].as_i64().unwrap();
    let dropped_notes = MAX_EVENTS_PER_CLAIM + extra - notes.len() as i64;
    assert!(dropped_notes >= extra, "{} of our lines arrived, past the bound", notes.len());
    assert!((dropped_notes..=dropped_notes + 3).contains(&count), "lost {count}, of which {dropped_notes} ours");
    let newest: Vec<i64> = (dropped_notes..MAX_EVENTS_PER_CLAIM + extra).collect();
    assert!(notes == newest, "not the newest lines in order: {:?}…{:?}", notes.first(), notes.last());
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn an_outcome_undeliverable_for_too_long_is_moved_aside_and_logged() {
    let dir = TempDir::new("r-dead");
    let mut hub = hub_with_ab(dir.path());
    hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    // Two hours become 7 seconds.
    let mut runner = start_runner_logged(&hub, &spool, &[("OJ_TIME_SCALE", "0.001")], &log);
    wait_for("the job to be judging", Duration::from_secs(60), || {
        spool_claims(&spool).iter().any(|c| c.state == "started" || c.state == "judged").then_some(())
    });
    hub.stop();
    wait_for("the outcome to be moved aside", Duration::from_secs(60), || {
        (spool_int(&spool, "SELECT count(*) FROM dead_outcomes") == Some(1)).then_some(())
    });
    assert!(std::fs::read_to_string(&log).unwrap().contains("moved aside to dead_outcomes"));
    assert_eq!(spool_int(&spool, "SELECT count(*) FROM outbox"), Some(0));
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn a_second_term_stops_every_stage_at_once() {
    let dir = TempDir::new("r-twice");
    let hub = hub_with_ab(dir.path());
    hub.submit(1, "python3", &write_file(dir.path(), "long.py", "import time\ntime.sleep(30)\n"));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    judging_claim(&spool);
    let judge = child_pid(runner.pid(), "judge-exec").unwrap();
    runner.signal(Signal::SIGTERM);
    wait_for("the drain to begin", Duration::from_secs(10), || {
        (spool_int(&spool, "SELECT count(*) FROM control WHERE key = 'draining'") == Some(1)).then_some(())
    });
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(10)), 1, "stopped at once: exit 1");
    wait_for("judge-exec to be gone", Duration::from_secs(10), || {
        (!Path::new(&format!("/proc/{judge}")).exists()).then_some(())
    });
}

#[test]
fn runnerd_drain_drains_without_a_signal() {
    let dir = TempDir::new("r-drain-cmd");
    let hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    judging_claim(&spool);
    let out =
        std::process::Command::new(bin("runnerd")).args(["drain", "--wait"]).env("OJ_SPOOL", &spool).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(runner.wait_exit(Duration::from_secs(10)), 0);
    assert_clean_ac(&hub.submission(&sub));
}

#[test]
fn a_drain_past_its_deadline_is_cut_and_leaves_the_job_to_lease_expiry() {
    let dir = TempDir::new("r-cut");
    let hub = hub_with_ab(dir.path());
    let sub = hub.submit(1, "python3", &write_file(dir.path(), "long.py", "import time\ntime.sleep(30)\n"));
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(&hub, &spool, &[("DRAIN_TIMEOUT_SEC", "3")], &log);
    judging_claim(&spool);
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(30)), 1, "a cut drain exits 1");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("did not finish in time"), "what is left is logged:\n{text}");
    let s = hub.submission(&sub);
    assert_eq!(s["complete_calls"], 0, "{s}");
    assert!(s["aborts"].as_array().unwrap().is_empty(), "an in-flight job is not handed back: {s}");
}

#[test]
fn a_drain_keeps_the_leases_until_its_last_outcome_is_delivered() {
    let dir = TempDir::new("r-drain-lease");
    let hub = hub_with_ab(dir.path());
    hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/complete"]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    wait_for("the outcome to wait for the hub", Duration::from_secs(60), || {
        (spool_int(&spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= 1).then_some(())
    });
    runner.signal(Signal::SIGTERM);
    // Six tries take 4.5 s (scaled): longer than the hub's 3 s lease, which
    // must stay renewed all along.
    wait_for("the drain to outlast the lease", Duration::from_secs(60), || {
        let s = hub.submission(&sub);
        assert!(s["lease_left_ms"].as_i64().is_some_and(|ms| ms > 0), "the lease ran out during the drain: {s}");
        (spool_int(&spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= 6).then_some(())
    });
    hub.cli(&["fault", "--clear"]);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
    let s = hub.submission(&sub);
    assert_clean_ac(&s);
    assert_eq!(s["complete_calls"], 1, "landed on its first answer, not refused as reclaimed: {s}");
}

#[test]
fn a_claim_request_in_flight_when_the_drain_begins_is_read_to_the_end_and_handed_back() {
    let dir = TempDir::new("r-inflight-claim");
    let hub = hub_with_ab(dir.path());
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[("OJ_CLAIM_WAIT", "30")]);
    hub.wait_for_a_poll_lasting(Duration::from_secs(2));
    runner.signal(Signal::SIGTERM);
    wait_for("the drain to begin", Duration::from_secs(10), || {
        (spool_int(&spool, "SELECT count(*) FROM control WHERE key = 'draining'") == Some(1)).then_some(())
    });
    // The hub answers the poll already sent with this job.
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
    let s = hub.submission(&sub);
    assert_eq!(s["handouts"], 1, "the poll in flight got the job: {s}");
    assert_eq!(s["state"], "pending", "and the drain handed it back: {s}");
    let aborts = s["aborts"].as_array().unwrap();
    assert_eq!((aborts.len(), &aborts[0]["reason"]), (1, &serde_json::json!("drain")), "{s}");
    assert_eq!(s["attempts"], 0, "costing no attempt: {s}");
}

#[test]
fn an_old_claims_outcome_still_queued_when_its_job_is_claimed_again_is_never_sent() {
    let dir = TempDir::new("r-late-outcome");
    let hub = hub_with_ab(dir.path());
    // Outcomes wait behind 503s, and so do heartbeats: the hub's lease runs out.
    hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/complete"]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    let first = wait_for("the first claim's outcome to be queued", Duration::from_secs(60), || {
        spool_claims(&spool).into_iter().find(|c| c.state == "judged")
    });
    hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/heartbeat"]);
    wait_for("the job to be claimed again", Duration::from_secs(60), || {
        spool_claims(&spool).iter().any(|c| c.job_id == first.job_id && c.claim_id > first.claim_id).then_some(())
    });
    hub.cli(&["fault", "--clear"]);
    let s = hub.wait_all_judged(Duration::from_secs(60));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
    assert_eq!(s["complete_calls"], 1, "only the new claim's outcome reached the hub: {s}");
    let old = spool_claims(&spool).into_iter().find(|c| c.claim_id == first.claim_id).unwrap();
    assert_eq!(old.state, "discarded", "{old:?}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
}

#[test]
fn a_beat_the_hub_keeps_waiting_keeps_the_runners_claims() {
    // A hub that hangs (stopped) keeps each beat waiting for the request's
    // 10 s timeout: longer than the lease the runner assumes here (two 1 s
    // heartbeats). A beat in flight is still an attempt, and a claim is lost
    // only when none was attempted (the runner was down): the claim stays,
    // and its outcome is delivered once the hub is back. (The hub's own
    // lease is long: its clock runs while it is stopped.)
    let dir = TempDir::new("r-hang");
    let hub = Hub::start(dir.path(), &["--lease-ttl", "600"]);
    hub.add_problem(1, &examples().join("problems/1"));
    let spool = dir.path().join("spool");
    let start = |stage: &str| start_stage(&hub, &spool, stage, &[]);
    let (claimd, _judge, _leased) = (start("claimd"), start("judge-exec"), start("leased"));
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let queued = || spool_int(&spool, "SELECT COUNT(*) FROM outbox");
    wait_for("the outcome in the outbox", Duration::from_secs(60), || (queued() == Some(1)).then_some(()));
    drop(claimd);
    hub.proc.signal(Signal::SIGSTOP);
    let status = |stage: &str| stage_status(&spool, stage);
    wait_for("a beat in flight for twice the assumed lease", Duration::from_secs(30), || {
        status("leased").filter(|s| s["beat_in_flight_ms"].as_u64() >= Some(4000))
    });
    let _reportd = start("reportd");
    let r = wait_for("reportd to send claim 1's outcome", Duration::from_secs(30), || {
        status("reportd").filter(|s| !s["in_flight"].is_null())
    });
    assert!(r["in_flight"]["what"].as_str().unwrap().contains("claim 1"), "{r}");
    assert_eq!(spool_claims(&spool)[0].state, "judged", "the claim was dropped while a beat was in flight");
    hub.proc.signal(Signal::SIGCONT);
    wait_for("the outbox to empty", Duration::from_secs(60), || (queued() == Some(0)).then_some(()));
    assert_eq!(spool_claims(&spool)[0].state, "reported");
    let s = hub.submission(&sub);
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
}
