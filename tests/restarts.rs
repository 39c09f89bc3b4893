//! A restart costs no job: stages killed at awkward moments, the whole
//! runner killed, the hub away, the identity gone, drains cut short. Real
//! processes, real signals, a real `hubd` over loopback.

use nix::sys::signal::Signal;
use std::path::Path;
use std::time::Duration;
use testkit::*;

#[test]
fn judge_exec_killed_mid_job_resumes_only_the_unfinished_cases() {
    let sc = scenario("r-judge", &[]);
    let sub = sc.submit_slow_ab(1.0);
    let runner = sc.start(&[]);
    sc.wait_cases(1);
    kill_stage(&runner, "judge-exec");
    let s = sc.judged_clean(&sub, Duration::from_secs(120));
    // One event per case judged: a rerun case would have sent a fourth.
    assert_eq!(s["events"], 3, "no finished case was judged again: {s}");
    sc.drain(runner);
}

#[test]
fn a_hub_away_while_a_claim_is_prepped_costs_the_job_nothing() {
    let sc = scenario("r-prep-away", &[]);
    // More failures than prep's three tries: an outage, not a bad job.
    sc.hub.cli(&["fault", "--status", "503", "--count", "8", "--path-contains", "/code/"]);
    let sub = sc.submit_ab();
    let runner = sc.start(&[]);
    sc.judged_clean(&sub, Duration::from_secs(120));
    sc.drain(runner);
}

#[test]
fn claimd_killed_during_prep_prepares_the_claim_again() {
    let sc = scenario("r-claimd", &[]);
    // The testdata channel fails once: prep waits 1 s (unscaled) before
    // trying again, long enough to be caught in the act.
    sc.hub.cli(&["fault", "--status", "503", "--count", "1", "--path-contains", "/testdata"]);
    let sub = sc.submit_ab();
    let runner = sc.start_logged(&[("OJ_TIME_SCALE", "1")]);
    wait_for("the claim waiting in prep", Duration::from_secs(60), || {
        (sc.log().contains("prep again in") && spool_claims(&sc.spool).iter().any(|c| c.state == "claimed"))
            .then_some(())
    });
    kill_stage(&runner, "claimd");
    sc.judged_clean(&sub, Duration::from_secs(60));
    assert_eq!(spool_claims(&sc.spool).len(), 1, "the same claim was prepared again, not a new one");
    sc.drain(runner);
}

#[test]
fn reportd_killed_with_an_outcome_queued_sends_it_after_its_restart() {
    let sc = scenario("r-reportd", &[]);
    sc.hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/complete"]);
    let sub = sc.submit_ab();
    let runner = sc.start(&[]);
    sc.wait_outbox_tries("the outcome to be retried", 2);
    kill_stage(&runner, "reportd");
    sc.hub.cli(&["fault", "--clear"]);
    sc.judged_clean(&sub, Duration::from_secs(60));
    sc.drain(runner);
}

#[test]
fn leased_killed_again_and_again_keeps_the_lease() {
    let sc = scenario("r-leased", &[]);
    let sub = sc.submit_slow_ab(1.5);
    let runner = sc.start(&[]);
    sc.judging_claim();
    for n in 1..=3 {
        kill_stage(&runner, "leased");
        sc.wait_cases(n);
    }
    sc.judged_clean(&sub, Duration::from_secs(60));
    sc.drain(runner);
}

#[test]
fn the_whole_runner_killed_and_started_within_the_lease_finishes_its_job_as_itself() {
    let sc = scenario("r-whole", &[]);
    let sub = sc.submit_slow_ab(1.0);
    let runner = sc.start(&[]);
    sc.wait_cases(1);
    let id = spool_runner_id(&sc.spool).unwrap();
    drop(runner); // SIGKILL: its stages die with it
    let runner = sc.start(&[]);
    sc.judged_clean(&sub, Duration::from_secs(60));
    assert_eq!(spool_runner_id(&sc.spool).as_deref(), Some(id.as_str()), "the same identity");
    assert_eq!(sc.hub.cli(&["status", "--runners"]).lines().count(), 1, "no second registration");
    sc.drain(runner);
}

#[test]
fn a_runner_back_after_its_leases_are_gone_drops_its_jobs_without_sending_them() {
    let sc = scenario("r-late", &[]);
    let (dir, hub) = (&sc.dir, &sc.hub);
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let (spool_a, spool_b) = (dir.path().join("spool-a"), dir.path().join("spool-b"));
    // Plain polls: a long poll in flight when the runner is killed would
    // have the hub hand the reclaimed job to the dead connection (a lost
    // handout: the protocol's price, never retried), not to runner B.
    let plain = [("OJ_CLAIM_WAIT", "0")];
    let runner = start_runner(hub, &spool_a, &plain);
    wait_cases(&spool_a, 1);
    drop(runner);
    // Another runner reclaims the job once the lease has run out.
    let b = start_runner(hub, &spool_b, &[]);
    wait_for("the job to be reclaimed", Duration::from_secs(60), || {
        (hub.submission(&sub)["handouts"] == 2).then_some(())
    });
    let a = start_runner(hub, &spool_a, &plain);
    let s = hub.wait_all_judged(Duration::from_secs(60));
    let s = s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
    wait_for("the old claim to be dropped", Duration::from_secs(30), || {
        spool_claims(&spool_a).iter().all(|c| c.state == "discarded" && c.note.contains("lease lost")).then_some(())
    });
    assert_eq!(hub.submission(&sub)["complete_calls"], 1, "the stale result was never sent");
    for r in [a, b] {
        drain(r);
    }
}

#[test]
fn two_401_heartbeats_stop_the_runner_at_once_without_a_drain() {
    let sc = scenario("r-401", &[]);
    let (dir, hub) = (&sc.dir, &sc.hub);
    let spool = sc.spool.clone();
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(hub, &spool, &[], &log);
    wait_for("registration", Duration::from_secs(30), || spool_runner_id(&spool));
    hub.cli(&["fault", "--status", "401", "--count", "100000", "--path-contains", "/heartbeat"]);
    assert_eq!(runner.wait_exit(Duration::from_secs(30)), 1, "identity gone: exit 1");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("draining"), "no drain:\n{text}");
    assert_eq!(spool_runner_id(&spool), None, "the identity is forgotten: a restart registers again");
}

#[test]
fn outcomes_and_events_outlast_a_hub_that_is_away() {
    let mut sc = scenario("r-away", &[]);
    let sub = sc.submit_slow_ab(1.0);
    let runner = sc.start(&[]);
    sc.judging_claim();
    sc.hub.stop();
    // The job finishes while the hub is away; its outcome waits, retried.
    sc.wait_outbox_tries("the outcome retried while the hub is away", 4);
    sc.hub.start_again();
    let s = sc.judged_clean(&sub, Duration::from_secs(60));
    assert_eq!(s["events"], 3, "the progress sent while away arrived too: {s}");
    // And through server errors.
    sc.hub.cli(&["fault", "--status", "503", "--count", "6"]);
    let sub2 = sc.submit_ab();
    assert_eq!(sc.judged(&sub2, Duration::from_secs(60))["completes"], 1);
    sc.drain(runner);
}

#[test]
fn progress_past_the_spools_bound_loses_the_oldest_lines_and_says_how_many() {
    use ojrunner::spool::{Spool, MAX_EVENTS_PER_CLAIM};
    let mut sc = scenario("r-lost", &[]);
    let (dir, spool) = (&sc.dir, sc.spool.clone());
    let hub = &mut sc.hub;
    let sub = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let runner = start_runner(hub, &spool, &[]);
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
    drain(runner);
}

#[test]
fn an_outcome_undeliverable_for_too_long_is_moved_aside_and_logged() {
    let mut sc = scenario("r-dead", &[]);
    sc.submit_ab();
    // Two hours become 7 seconds.
    let runner = sc.start_logged(&[("OJ_TIME_SCALE", "0.001")]);
    wait_for("the job to be judging", Duration::from_secs(60), || {
        spool_claims(&sc.spool).iter().any(|c| c.state == "started" || c.state == "judged").then_some(())
    });
    sc.hub.stop();
    wait_for("the outcome to be moved aside", Duration::from_secs(60), || {
        (spool_int(&sc.spool, "SELECT count(*) FROM dead_outcomes") == Some(1)).then_some(())
    });
    assert!(sc.log().contains("moved aside to dead_outcomes"));
    assert_eq!(spool_int(&sc.spool, "SELECT count(*) FROM outbox"), Some(0));
    sc.drain(runner);
}

#[test]
fn a_second_term_stops_every_stage_at_once() {
    let sc = scenario("r-twice", &[]);
    let (dir, hub) = (&sc.dir, &sc.hub);
    hub.submit(1, "python3", &write_file(dir.path(), "long.py", "import time\ntime.sleep(30)\n"));
    let spool = sc.spool.clone();
    let mut runner = start_runner(hub, &spool, &[]);
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
    let sc = scenario("r-drain-cmd", &[]);
    let sub = sc.submit_slow_ab(1.0);
    let mut runner = sc.start(&[]);
    sc.judging_claim();
    let out = std::process::Command::new(bin("runnerd"))
        .args(["drain", "--wait"])
        .env("OJ_SPOOL", &sc.spool)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(runner.wait_exit(Duration::from_secs(10)), 0);
    assert_clean_ac(&sc.hub.submission(&sub));
}

#[test]
fn a_drain_past_its_deadline_is_cut_and_leaves_the_job_to_lease_expiry() {
    let sc = scenario("r-cut", &[]);
    let (dir, hub) = (&sc.dir, &sc.hub);
    let sub = hub.submit(1, "python3", &write_file(dir.path(), "long.py", "import time\ntime.sleep(30)\n"));
    let spool = sc.spool.clone();
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(hub, &spool, &[("DRAIN_TIMEOUT_SEC", "3")], &log);
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
    let sc = scenario("r-drain-lease", &[]);
    sc.hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/complete"]);
    let sub = sc.submit_ab();
    let mut runner = sc.start(&[]);
    sc.wait_outbox_tries("the outcome to wait for the hub", 1);
    runner.signal(Signal::SIGTERM);
    // Six tries take 4.5 s (scaled): longer than the hub's 3 s lease, which
    // must stay renewed all along.
    wait_for("the drain to outlast the lease", Duration::from_secs(60), || {
        let s = sc.hub.submission(&sub);
        assert!(s["lease_left_ms"].as_i64().is_some_and(|ms| ms > 0), "the lease ran out during the drain: {s}");
        (spool_int(&sc.spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= 6).then_some(())
    });
    sc.hub.cli(&["fault", "--clear"]);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0);
    let s = sc.hub.submission(&sub);
    assert_clean_ac(&s);
    assert_eq!(s["complete_calls"], 1, "landed on its first answer, not refused as reclaimed: {s}");
}

#[test]
fn a_claim_request_in_flight_when_the_drain_begins_is_read_to_the_end_and_handed_back() {
    // (On a hub that cannot end a poll: see the two tests below for one that can.)
    let sc = scenario("r-inflight-claim", &[]);
    let hub = &sc.hub;
    let spool = sc.spool.clone();
    let mut runner = start_runner(hub, &spool, &[("OJ_CLAIM_WAIT", "30")]);
    hub.wait_for_a_poll_lasting(Duration::from_secs(2));
    // A hub without the poll's cancel: the DELETE sent at the drain's start
    // is answered 405, and the poll is waited out.
    hub.cli(&["fault", "--status", "405", "--count", "1", "--path-contains", "next-job"]);
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
    let sc = scenario("r-late-outcome", &[]);
    let hub = &sc.hub;
    // Outcomes wait behind 503s, and so do heartbeats: the hub's lease runs out.
    hub.cli(&["fault", "--status", "503", "--count", "100000", "--path-contains", "/complete"]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = sc.spool.clone();
    let runner = start_runner(hub, &spool, &[]);
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
    drain(runner);
}

#[test]
fn a_beat_the_hub_keeps_waiting_keeps_the_runners_claims() {
    // A hub that hangs (stopped) keeps each beat waiting for the request's
    // 10 s timeout: longer than the lease the runner assumes here (two 1 s
    // heartbeats). A beat in flight is still an attempt, and a claim is lost
    // only when none was attempted (the runner was down): the claim stays,
    // and its outcome is delivered once the hub is back. (The hub's own
    // lease is long: its clock runs while it is stopped.)
    let sc = scenario("r-hang", &["--lease-ttl", "600"]);
    let (hub, spool) = (&sc.hub, sc.spool.clone());
    let start = |stage: &str| start_stage(hub, &spool, stage, &[]);
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

/// An idle runner's drain does not wait out its long poll: claimd asks the
/// hub to end it (`DELETE .../next-job`). The poll here is 30 s, unscaled.
#[test]
fn an_idle_runner_drains_without_waiting_out_its_long_poll() {
    let sc = scenario("r-idle-drain", &[]);
    let runner = sc.start(&[("OJ_CLAIM_WAIT", "30"), ("OJ_TIME_SCALE", "1")]);
    sc.hub.wait_for_a_poll_lasting(Duration::from_secs(20));
    let began = std::time::Instant::now();
    sc.drain(runner);
    let took = began.elapsed();
    // Liveness only (the target, 0.5 s, is make bench-e2e's): far below the
    // 20 s the poll had left.
    assert!(took < Duration::from_secs(10), "the drain waited for the poll: {took:?}");
}

/// A drain's cancel racing a hand-out, again and again: a job in the poll's
/// answer is recorded and handed back as drain (no attempt spent); a job
/// not handed out stays pending; none is lost.
#[test]
fn a_cancel_racing_a_hand_out_never_loses_the_job_nor_spends_an_attempt() {
    let sc = scenario("r-cancel-race", &[]);
    let source = examples().join("submissions/ab_ok.c");
    let mut subs = Vec::new();
    for round in 0..6u64 {
        let mut runner = sc.start(&[("OJ_CLAIM_WAIT", "30"), ("OJ_TIME_SCALE", "1")]);
        sc.hub.wait_for_a_poll_lasting(Duration::from_secs(20));
        // The submission and the drain at once, a little apart each round.
        let hub = &sc.hub;
        let sub = std::thread::scope(|s| {
            let submitted = s.spawn(|| hub.submit(1, "c11", &source));
            std::thread::sleep(Duration::from_millis(round * 3));
            runner.signal(Signal::SIGTERM);
            submitted.join().unwrap()
        });
        assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0, "round {round}: drained cleanly");
        let s = sc.hub.submission(&sub);
        if s["state"] == "done" {
            // Handed out and started before the drain's latch: judged, once.
            assert_clean_ac(&s);
            continue;
        }
        assert_eq!(s["attempts"], 0, "round {round}: no attempt spent: {s}");
        assert_eq!(s["state"], "pending", "round {round}: the job waits for the next runner: {s}");
        let drains = s["aborts"].as_array().unwrap().iter().filter(|a| a["reason"] == "drain").count() as i64;
        assert_eq!(s["handouts"].as_i64(), Some(drains), "round {round}: each hand-out came back as drain: {s}");
        subs.push(sub);
    }
    // None lost: a runner that stays judges every one, once.
    let runner = sc.start(&[]);
    for sub in &subs {
        let s = sc.judged(sub, Duration::from_secs(120));
        assert_eq!((&s["verdict"], &s["completes"], &s["attempts"]), (&"AC".into(), &1.into(), &1.into()), "{s}");
    }
    sc.drain(runner);
}

/// A hub answers 404 to events sent after a job's outcome landed: when a
/// claim's events fail, its outcome waits for their next try, and the hub
/// gets every case's progress and then the verdict.
#[test]
fn an_outcome_waits_for_its_claims_events_that_the_hub_could_not_take_yet() {
    let sc = scenario("r-events-first", &[]);
    let (hub, spool) = (&sc.hub, sc.spool.clone());
    let start = |stage: &str| start_stage(hub, &spool, stage, &[]);
    let (_claimd, _judge, _leased) = (start("claimd"), start("judge-exec"), start("leased"));
    let sub = sc.submit_ab();
    let queued = || spool_int(&spool, "SELECT COUNT(*) FROM outbox");
    wait_for("the outcome in the outbox", Duration::from_secs(60), || (queued() == Some(1)).then_some(()));
    // The first two tries of the events fail; the outcome's would not.
    hub.cli(&["fault", "--status", "503", "--count", "2", "--path-contains", "/events"]);
    let _reportd = start("reportd");
    wait_for("the outbox to empty", Duration::from_secs(60), || (queued() == Some(0)).then_some(()));
    let s = hub.submission(&sub);
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
    assert_eq!(s["events"], 3, "every case's progress reached the hub before the verdict: {s}");
}

/// Progress lines that are large together go in batches a hub takes (hubd
/// refuses a body over 64 KiB, and a refused batch is dropped), counted as
/// sent: `1e9` is stored in 3 bytes and sent in 12.
#[test]
fn large_progress_goes_in_batches_the_hub_takes() {
    use ojrunner::spool::Spool;
    let sc = scenario("r-big-events", &[]);
    let sub = sc.submit_slow_ab(1.0);
    let runner = sc.start(&[]);
    let claim = sc.judging_claim();
    let pad = "x".repeat(1000);
    let grows = vec!["1e9"; 100].join(",");
    let lines: Vec<String> = (0..300)
        .map(|i| match i % 2 {
            0 => format!(r#"{{"t": 1, "kind": "note", "i": {i}, "pad": "{pad}"}}"#),
            _ => format!(r#"{{"t": 1, "kind": "note", "i": {i}, "grows": [{grows}]}}"#),
        })
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    Spool::open(&sc.spool).unwrap().add_events(claim.claim_id, &lines).unwrap();
    sc.judged_clean(&sub, Duration::from_secs(120));
    let db = rusqlite::Connection::open(&sc.hub.db).unwrap();
    let notes: i64 = db
        .query_row("SELECT count(*) FROM events WHERE job_id = ? AND body LIKE '%\"note\"%'", [&claim.job_id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(notes, 300, "every line reached the hub");
    sc.drain(runner);
}

/// The spool's files deleted mid-job (`spool.db`, `-wal`, `-shm`): no stage
/// makes a new empty spool; each sees its spool gone and stops, leased
/// first handing back every job held as `abort(drain)`; runnerd exits 100
/// naming the spool, and `runnerd status` fails. A fresh runner judges
/// both jobs: none lost, none charged.
// See: issue 23, item 5.
#[test]
fn i23_5_a_spool_deleted_mid_job_stops_the_runner_and_hands_its_jobs_back() {
    let sc = scenario("r-spool-gone", &[]);
    let subs = [sc.submit_slow_ab(1.0), sc.submit_slow_ab(1.0)];
    // One worker: one claim judging, the other prepped and waiting.
    let mut runner = sc.start_logged(&[("OJ_WORKERS", "1")]);
    sc.wait_cases(1);
    wait_for("both jobs claimed", Duration::from_secs(60), || (spool_claims(&sc.spool).len() == 2).then_some(()));
    for f in ["spool.db", "spool.db-wal", "spool.db-shm"] {
        let _ = std::fs::remove_file(sc.spool.join(f));
    }
    assert_eq!(runner.wait_exit(Duration::from_secs(40)), 100, "a spool gone is fatal: {}", sc.log());
    let log = sc.log();
    assert!(log.contains(&format!("spool {}/spool.db was deleted", sc.spool.display())), "{log}");
    assert!(!sc.spool.join("spool.db").exists(), "no stage made a new spool: {log}");
    for sub in &subs {
        let s = sc.hub.submission(sub);
        assert_ne!(s["state"], "done", "{s}");
        assert!(s["aborts"].as_array().unwrap().iter().any(|a| a["reason"] == "drain"), "handed back: {s}");
    }
    let status = std::process::Command::new(bin("runnerd"))
        .arg("status")
        .envs(runner_env(&sc.hub, &sc.spool))
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_ne!(status.status.code(), Some(0), "runnerd status on a spool that is gone fails");
    let fresh = start_runner(&sc.hub, &sc.dir.path().join("spool-2"), &[]);
    for s in sc.hub.wait_all_judged(Duration::from_secs(90)) {
        assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
        assert_eq!(s["attempts"], 1, "the handback cost no attempt: {s}");
    }
    drain(fresh);
}
