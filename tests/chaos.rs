//! Chaos: a stream of submissions while stages are SIGKILLed at random, the
//! runner is drained and started again, and the hub is stopped and started
//! again. At the end every submission has exactly one verdict, the right
//! one; every drain handed its unstarted jobs back as `abort(drain)` and
//! left none leased. `OJ_CHAOS_SEED=N` replays a run; `OJ_CHAOS_SECS`
//! sets how long the blows go on (60 s; `make soak`: 600).

use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use testkit::*;

/// After a drain: the runner holds nothing (every claim reported, the
/// outbox empty), and every hand-back the hub saw was a drain. (A job the
/// hub handed to a connection killed mid-claim is leased at the hub but
/// unknown to the runner: lease expiry returns it, by the protocol.)
fn check_drain(hub: &Hub, spool: &std::path::Path) {
    let held = spool_int(
        spool,
        "SELECT count(*) FROM claims WHERE state IN ('claimed','prepped','started','judged','aborted')",
    );
    assert_eq!(held, Some(0), "a drain left claims held: {:?}", spool_claims(spool));
    assert_eq!(spool_int(spool, "SELECT count(*) FROM outbox"), Some(0), "a drain left outcomes unsent");
    for s in hub.status() {
        for a in s["aborts"].as_array().unwrap() {
            assert_eq!(a["reason"], "drain", "{s}");
            assert_eq!(a["answer"], 202, "{s}");
        }
    }
}

#[test]
fn chaos_costs_no_submission_anything() {
    let seed = seed_from("OJ_CHAOS_SEED");
    eprintln!("chaos: OJ_CHAOS_SEED={seed}");
    let mut dice = Dice(seed);
    let dir = TempDir::new("chaos");
    // Killing the hub mid-claim loses that handout (a claim is never
    // retried), and a lapse with no beat from its holder since counts as an
    // attempt, so the hub allows more of them here; drains cost none.
    let mut hub = Hub::start(dir.path(), &["--max-attempts", "20"]);
    let menu = stream_menu(&hub, dir.path(), 0.3);
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    let mut expected = Vec::new();
    let (mut kills, mut drains, mut outages) = (0, 0, 0);
    // A minute in `make test`; longer in `make soak` (OJ_CHAOS_SECS).
    let secs = std::env::var("OJ_CHAOS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        // The stream: a few submissions between two blows.
        for _ in 0..1 + dice.below(3) {
            let (p, lang, file, verdict, score) = &menu[dice.below(menu.len() as u64) as usize];
            expected.push((hub.submit(*p, lang, file), *verdict, *score));
        }
        std::thread::sleep(dice.millis(300, 1200)); // the pace of the chaos, not a wait for anything
        match dice.below(10) {
            0..=4 => {
                let stage = ["claimd", "judge-exec", "reportd", "leased"][dice.below(4) as usize];
                if child_pid(runner.pid(), stage_comm(stage)).is_some() {
                    kill_stage(&runner, stage);
                    kills += 1;
                }
            }
            5 | 6 => {
                runner.signal(Signal::SIGTERM);
                assert_eq!(runner.wait_exit(Duration::from_secs(90)), 0, "a drain ends cleanly (seed {seed})");
                check_drain(&hub, &spool);
                drains += 1;
                runner = start_runner(&hub, &spool, &[]);
            }
            7 | 8 => {
                hub.stop();
                std::thread::sleep(dice.millis(300, 2500)); // the length of the outage
                hub.start_again();
                outages += 1;
            }
            _ => {}
        }
    }
    eprintln!("chaos: {} submissions, {kills} kills, {drains} drains, {outages} hub outages", expected.len());
    let status = hub.wait_all_judged(Duration::from_secs(300));
    for (id, verdict, score) in &expected {
        let s = status.iter().find(|s| s["submission_id"] == id.as_str()).unwrap();
        assert_eq!(s["verdict"], *verdict, "seed {seed}: {s}");
        assert_eq!(s["score"], *score, "seed {seed}: {s}");
        assert_eq!(s["completes"], 1, "exactly one verdict landed (seed {seed}): {s}");
        for a in s["aborts"].as_array().unwrap() {
            assert_eq!(a["reason"], "drain", "only drains hand jobs back (seed {seed}): {s}");
        }
        // The hub's books: each handout was either judged, handed back by
        // a drain (refunded), lost on its way (refunded, while the runner
        // beat) or lost to a kill of the whole runner; drains spent nothing.
        let drained = s["aborts"].as_array().unwrap().len() as i64;
        assert_eq!(
            s["attempts"].as_i64().unwrap(),
            s["handouts"].as_i64().unwrap() - drained - s["lost"].as_i64().unwrap(),
            "every drain was refunded (seed {seed}): {s}"
        );
    }
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(90)), 0);
    check_drain(&hub, &spool);
}
