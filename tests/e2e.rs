//! The runner end to end: a real `hubd` over loopback, a real `runnerd` with
//! its four stages, real sandboxes, real signals.

use nix::sys::signal::Signal;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use testkit::*;
use zip::result::ZipResult;
use zip::write::SimpleFileOptions;
use zip::ZipWriter;

/// A Python program that sleeps `secs` and prints nothing (so: WA, or TLE
/// if `secs` passes the wall limit).
fn sleeper(dir: &Path, name: &str, secs: f64) -> std::path::PathBuf {
    write_file(dir, name, &format!("import time\ntime.sleep({secs})\n"))
}

#[test]
fn the_examples_are_judged_end_to_end_each_with_exactly_one_complete() {
    let dir = TempDir::new("e2e-examples");
    let hub = Hub::start(dir.path(), &[]);
    for e in std::fs::read_dir(examples().join("problems")).unwrap().flatten() {
        hub.add_problem(e.file_name().to_str().unwrap().parse().unwrap(), &e.path());
    }
    let list: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(examples().join("submissions.json")).unwrap()).unwrap();
    assert!(list.len() >= 10, "examples cover every verdict");
    let subs: Vec<(String, &serde_json::Value)> = list
        .iter()
        .map(|s| {
            let file = examples().join("submissions").join(s["file"].as_str().unwrap());
            (hub.submit(s["problem"].as_i64().unwrap(), s["language"].as_str().unwrap(), &file), s)
        })
        .collect();
    let spool = dir.path().join("spool");
    let mut runner = start_runner(&hub, &spool, &[]);
    // Exactly once is checked all along, not only at the end.
    let status = wait_for("every submission to be judged", Duration::from_secs(600), || {
        let s = hub.status();
        for x in &s {
            assert!(x["complete_calls"].as_i64() <= Some(1), "a complete was sent twice: {x}");
        }
        s.iter().all(|x| x["state"] == "done").then_some(s)
    });
    let mut verdicts = std::collections::BTreeSet::new();
    for (id, want) in &subs {
        let got = status.iter().find(|s| s["submission_id"] == id.as_str()).unwrap();
        let file = want["file"].as_str().unwrap();
        assert_eq!(got["verdict"], want["expect"], "{file}: verdict ({got})");
        assert_eq!(got["score"], want["score"], "{file}: score ({got})");
        assert_eq!(got["completes"], 1, "{file}: exactly one complete landed ({got})");
        assert_eq!(got["complete_calls"], 1, "{file}: exactly one complete sent ({got})");
        assert_eq!(got["attempts"], 1, "{file}: judged on the first attempt ({got})");
        if want["expect"] == "CE" {
            let stderr = got["tasks"][0]["cases"][0]["stderr"].as_str().unwrap_or("");
            assert!(stderr.contains("error"), "{file}: the compiler's message reaches the hub: {stderr:?}");
        }
        verdicts.insert(want["expect"].as_str().unwrap().to_string());
    }
    for v in ["AC", "WA", "TLE", "MLE", "RE", "OLE", "CE"] {
        assert!(verdicts.contains(v), "the examples include a {v}");
    }
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0, "an idle runner drains and exits 0");
    let claims = spool_claims(&spool);
    assert!(claims.iter().all(|c| c.state == "reported"), "every claim reported: {claims:?}");
}

#[test]
fn a_job_claimed_again_is_a_new_claim_and_the_old_claims_late_results_are_never_sent() {
    let Scenario { dir, hub, spool } = scenario("e2e-generation", &[]);
    // Three cases, each a sleeper killed at the wall limit: judging takes a while.
    let sub = hub.submit(1, "python3", &sleeper(dir.path(), "sleep.py", 30.0));
    let runner = start_runner(&hub, &spool, &[("OJ_WORKERS", "2")]);
    let first = wait_for("the job to be judging", Duration::from_secs(60), || {
        spool_claims(&spool).into_iter().find(|c| c.state == "started")
    });
    // The hub stops taking heartbeats (503): its 3 s lease runs out, and
    // the runner's own next claim request gets the same job back. The
    // runner did attempt its beats, so only the new claim can tell it that
    // the old one is gone.
    hub.cli(&["fault", "--status", "503", "--count", "1000", "--path-contains", "heartbeat"]);
    let second = wait_for("the job to be claimed again", Duration::from_secs(60), || {
        spool_claims(&spool).into_iter().find(|c| c.job_id == first.job_id && c.claim_id > first.claim_id)
    });
    hub.cli(&["fault", "--clear"]);
    let old = spool_claims(&spool).into_iter().find(|c| c.claim_id == first.claim_id).unwrap();
    assert_eq!(old.state, "discarded", "the old claim is superseded at once: {old:?}");
    wait_for("the new claim to run in its own directory", Duration::from_secs(60), || {
        spool.join("claims").join(second.claim_id.to_string()).join("src/main.py").exists().then_some(())
    });
    let status = hub.wait_all_judged(Duration::from_secs(180));
    let s = status.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap();
    assert_eq!(s["verdict"], "TLE", "{s}");
    assert_eq!(s["attempts"], 2, "claimed, lease lost, reclaimed: {s}");
    assert_eq!(s["complete_calls"], 1, "the superseded claim's results were never sent: {s}");
    assert_eq!(s["completes"], 1, "{s}");
    // The hub has the result a moment before the runner has its answer.
    let claims = wait_for("the new claim reported", Duration::from_secs(30), || {
        let claims = spool_claims(&spool);
        claims.iter().any(|c| c.claim_id == second.claim_id && c.state == "reported").then_some(claims)
    });
    assert_eq!(claims.iter().find(|c| c.claim_id == first.claim_id).unwrap().state, "discarded", "{claims:?}");
    assert_eq!(claims.iter().find(|c| c.claim_id == second.claim_id).unwrap().state, "reported", "{claims:?}");
    drain(runner);
}

/// A zip at `path` written by `build`, which may write what no honest zip
/// holds.
fn zip_file(path: &Path, build: impl FnOnce(&mut ZipWriter<std::fs::File>, SimpleFileOptions) -> ZipResult<()>) {
    let mut z = ZipWriter::new(std::fs::File::create(path).unwrap());
    build(&mut z, SimpleFileOptions::default()).unwrap();
    z.finish().unwrap();
}

#[test]
fn bad_input_ends_in_prep_failed_with_a_logged_reason_and_the_runner_keeps_working() {
    let Scenario { dir, hub, spool } = scenario("e2e-bad", &[]);
    let d = dir.path();
    let ok_src = examples().join("submissions/ab_ok.c");
    // A payload whose task scores do not sum to 100.
    let raw = r#"{"job_id":"{{job_id}}","submission_id":"{{submission_id}}","problem_id":1,"language":0,
        "code_url":"{{code_url}}","tasks":[{"taskScore":90,"memoryLimit":65536,"timeLimit":1000,"caseCount":3}]}"#;
    let ok = ok_src.to_str().unwrap();
    let malformed =
        hub.cli(&["submit", "--problem", "1", "--language", "c11", "--raw-job", raw, ok]).trim().to_string();
    zip_file(&d.join("climb.zip"), |z, o| {
        z.start_file("../main.c", o)?;
        Ok(z.write_all(b"int main(){return 0;}")?)
    });
    let climb = hub.submit(1, "c11", &d.join("climb.zip"));
    zip_file(&d.join("link.zip"), |z, o| z.add_symlink("main.c", "/etc/shadow", o));
    let link = hub.submit(1, "c11", &d.join("link.zip"));
    let big = format!("/*{}*/\nint main(){{return 0;}}\n", "x".repeat(10_500_000));
    let big = hub.submit(1, "c11", &write_file(d, "big.c", &big));
    let good = hub.submit(1, "c11", &ok_src);
    let log = d.join("runner.log");
    let runner = start_runner_logged(&hub, &spool, &[], &log);
    let status = hub.wait_all_judged(Duration::from_secs(240));
    let by_id = |id: &str| status.iter().find(|s| s["submission_id"] == id).unwrap().clone();
    for (what, id) in
        [("malformed payload", &malformed), ("'../' zip", &climb), ("symlink zip", &link), ("10 MB source", &big)]
    {
        let s = by_id(id);
        let aborts = s["aborts"].as_array().unwrap();
        assert!(!aborts.is_empty(), "{what}: handed back: {s}");
        assert!(aborts.iter().all(|a| a["reason"] == "prep_failed"), "{what}: as prep_failed: {s}");
        assert_eq!(s["verdict"], "JE", "{what}: JE once its attempts are spent: {s}");
        assert_eq!(s["complete_calls"], 0, "{what}: never judged: {s}");
    }
    let g = by_id(&good);
    assert_eq!((g["verdict"].as_str(), g["score"].as_i64()), (Some("AC"), Some(100)), "the runner keeps working: {g}");
    let text = std::fs::read_to_string(&log).unwrap();
    for reason in ["sum to 90", "climbs out", "symbolic link", "more than 10000000 bytes"] {
        assert!(text.contains(reason), "the log names the reason {reason:?}");
    }
    // runnerd says at start which languages the machine judges.
    assert!(
        text.lines().any(|l| l.contains("runnerd") && l.contains("languages this runner judges: c11, cpp17, python3")),
        "runnerd did not say which languages it judges"
    );
    drain(runner);
}

#[test]
fn a_drain_hands_back_claims_not_started_as_drain_and_finishes_those_in_flight() {
    let Scenario { dir, hub, spool } = scenario("e2e-drain", &[]);
    let subs: Vec<String> =
        (0..6).map(|i| hub.submit(1, "python3", &sleeper(dir.path(), &format!("s{i}.py"), 1.0))).collect();
    let mut runner = start_runner(&hub, &spool, &[("OJ_WORKERS", "2")]);
    wait_for("two claims judging and more waiting", Duration::from_secs(60), || {
        let c = spool_claims(&spool);
        let started = c.iter().filter(|c| c.state == "started").count();
        let waiting = c.iter().filter(|c| c.state == "prepped" || c.state == "claimed").count();
        (started == 2 && waiting >= 1).then_some(())
    });
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(120)), 0, "the drain ends cleanly");
    let status = hub.status();
    let done: Vec<_> = status.iter().filter(|s| s["state"] == "done").collect();
    let back: Vec<_> = status.iter().filter(|s| s["state"] == "pending").collect();
    assert_eq!(done.len(), 2, "the two in flight were finished: {status:?}");
    assert!(!back.is_empty(), "the others went back: {status:?}");
    for s in &status {
        assert!(s["aborts"].as_array().unwrap().iter().all(|a| a["reason"] == "drain"), "never prep_failed: {s}");
    }
    for s in &back {
        assert_eq!(s["attempts"], 0, "a drain costs no attempt: {s}");
    }
    // A new runner on the same spool takes the rest: each job it handed
    // back is claimed again as a new claim, with its own row and directory.
    let drained: Vec<String> = back
        .iter()
        .filter(|s| !s["aborts"].as_array().unwrap().is_empty())
        .map(|s| s["job_id"].as_str().unwrap().to_string())
        .collect();
    assert!(!drained.is_empty(), "some claims were handed back: {back:?}");
    let runner = start_runner(&hub, &spool, &[("OJ_WORKERS", "2")]);
    let status = hub.wait_all_judged(Duration::from_secs(180));
    for id in &subs {
        let s = status.iter().find(|s| s["submission_id"] == id.as_str()).unwrap();
        assert_eq!(s["completes"], 1, "{s}");
        assert_eq!(s["complete_calls"], 1, "{s}");
        assert_eq!(s["attempts"], 1, "{s}");
    }
    // The hub has the outcome before reportd marks its claim reported.
    let claims = wait_for("every claim reported in the spool", Duration::from_secs(60), || {
        let claims = spool_claims(&spool);
        claims.iter().all(|c| c.state == "reported").then_some(claims)
    });
    for job in &drained {
        let mine: Vec<_> = claims.iter().filter(|c| &c.job_id == job).collect();
        assert_eq!(mine.len(), 2, "the aborted claim and a new one: {mine:?}");
        assert_ne!(mine[0].claim_id, mine[1].claim_id, "each its own claim (and directory)");
        assert!(mine.iter().all(|c| c.state == "reported"), "{mine:?}");
    }
    drain(runner);
}
