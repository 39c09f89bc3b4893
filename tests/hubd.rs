//! The reference hub (`hubd`) against PROTOCOL.md: status codes, the lease
//! and attempt rules, currency, the testdata channel and its checksum,
//! restarts and injected faults. Each test runs its own hub on a loopback
//! port with a 3 s lease; waits are on conditions with deadlines.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::*;

/// Long enough for any lease in these tests to expire several times over.
const LIMIT: Duration = Duration::from_secs(30);

use testkit::http_exchange as call;

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// Registers a runner at `hub`.
fn runner(hub: &Hub) -> HandRunner {
    HandRunner::register(&hub.url, "hand")
}

fn id(job: &Value) -> &str {
    job["job_id"].as_str().unwrap()
}

/// A problem of two tasks: 40 points with one case, 60 with two.
fn problem_dir(dir: &Path, tag: &str) -> PathBuf {
    let p = dir.join(format!("problem-{tag}"));
    std::fs::create_dir_all(p.join("include")).unwrap();
    std::fs::write(
        p.join("meta.json"),
        r#"{"tasks": [{"taskScore": 40, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 1},
                      {"taskScore": 60, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 2}]}"#,
    )
    .unwrap();
    for case in ["0000", "0100", "0101"] {
        std::fs::write(p.join(format!("{case}.in")), format!("{tag} {case}\n")).unwrap();
        std::fs::write(p.join(format!("{case}.out")), format!("{tag} {case}\n")).unwrap();
    }
    std::fs::write(p.join("include/lib.h"), "int x;\n").unwrap();
    p
}

/// A hub with problem 1 and `n` python submissions to it, in a directory
/// tagged `tag`; the directory (which goes when dropped), the hub, the ids.
fn hub_with_submissions(tag: &str, n: usize) -> (TempDir, Hub, Vec<String>) {
    let dir = TempDir::new(tag);
    let hub = Hub::start(dir.path(), &[]);
    hub.add_problem(1, &problem_dir(dir.path(), "a"));
    let src = dir.path().join("main.py");
    std::fs::write(&src, "print(input())\n").unwrap();
    let subs = (0..n).map(|_| hub.submit(1, "python3", &src)).collect();
    (dir, hub, subs)
}

fn case(status: &str) -> Value {
    let stderr = "x".repeat(300);
    json!({"status": status, "execTime": 5, "memoryUsage": 1024, "exitCode": 0, "stdout": "", "stderr": stderr})
}

/// A result for the two-task problem: task 0 AC, task 1 with these statuses.
fn result(second: [&str; 2]) -> String {
    json!({"tasks": [[case("AC")], [case(second[0]), case(second[1])]]}).to_string()
}

/// Starts `hubd serve` with only `flags` (no tokens from the test kit).
fn bare_hub(db: &Path, flags: &[&str]) -> (Proc, String) {
    let mut child = Command::new(bin("hubd"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(flags)
        .env_remove("RUNNER_REGISTRATION_TOKEN")
        .env_remove("SANDBOX_TOKEN")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    (Proc::of(child, "hubd", None), line.trim().to_string())
}

#[test]
fn register_answers_201_and_refuses_bad_tokens_with_401() {
    let dir = TempDir::new("hubd-register");
    let hub = Hub::start(dir.path(), &[]);
    let register = format!("{}/runners/register", hub.url);
    let (code, body) = call(
        "POST",
        &register,
        None,
        Some(&json!({"registration_token": REGISTRATION_TOKEN, "name": "n"}).to_string()),
    );
    assert_eq!(code, 201);
    let reg = json_of(&body);
    assert!(reg["runner_id"].as_str().unwrap().starts_with("rn_"));
    assert!(reg["token"].as_str().unwrap().starts_with("rk_"));
    assert_eq!(reg["config"], json!({"heartbeat_interval_sec": 1, "poll_interval_sec": 1, "max_concurrent_jobs": 8}));
    let bad = json!({"registration_token": "nope", "name": "n"}).to_string();
    assert_eq!(call("POST", &register, None, Some(&bad)).0, 401);
    assert_eq!(call("POST", &register, None, Some("{}")).0, 401);
    assert_eq!(call("POST", &register, None, Some("not json")).0, 400);

    // The runner token must belong to the runner in the path.
    let a = runner(&hub);
    let b = runner(&hub);
    assert_eq!(a.heartbeat(&[]), 204);
    let forged = HandRunner { url: hub.url.clone(), id: a.id.clone(), token: b.token.clone() };
    assert_eq!(forged.heartbeat(&[]), 401);
    assert_eq!(forged.next_job(0).0, 401);
    assert_eq!(call("GET", &a.at("next-job"), None, None).0, 401);
    assert_eq!(call("POST", &a.at("heartbeat"), Some(&a.token), Some("[1]")).0, 400);

    // Routing.
    assert_eq!(call("GET", &format!("{}/nowhere", hub.url), None, None).0, 404);
    assert_eq!(call("GET", &register, None, None).0, 405);

    let runners: Vec<Value> = hub.cli(&["status", "--runners"]).lines().map(|l| json_of(l.as_bytes())).collect();
    assert_eq!(runners.len(), 3);
    assert!(runners.iter().any(|r| r["runner_id"] == a.id.as_str() && r["name"] == "hand"));

    // With no registration token configured, registration is closed.
    let (_proc, url) = bare_hub(&dir.path().join("closed.db"), &[]);
    let any = json!({"registration_token": "", "name": "n"}).to_string();
    assert_eq!(call("POST", &format!("{url}/runners/register"), None, Some(&any)).0, 401);
}

#[test]
fn next_job_hands_out_jobs_in_order_then_204_after_the_wait() {
    let (dir, hub, subs) = hub_with_submissions("hubd-next", 2);
    let r = runner(&hub);

    let first = r.next_job(0).1.expect("a job");
    assert_eq!(first["submission_id"], subs[0].as_str());
    assert_eq!(first["problem_id"], 1);
    assert_eq!(first["language"], 2);
    assert_eq!(first["checker"], "diff");
    assert_eq!(first["tasks"][1], json!({"taskScore": 60, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 2}));
    assert!(id(&first).starts_with("jb_"));
    // The code URL serves a zip holding main.py.
    let (code, zip) = call("GET", first["code_url"].as_str().unwrap(), None, None);
    assert_eq!(code, 200);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    assert_eq!(zip.len(), 1);
    assert_eq!(zip.by_index(0).unwrap().name(), "main.py");
    assert_eq!(call("GET", &format!("{}/code/jb_nope.zip", hub.url), None, None).0, 404);

    let second = r.next_job(0).1.expect("a second job");
    assert_eq!(second["submission_id"], subs[1].as_str());

    let started = Instant::now();
    assert_eq!(r.next_job(1).0, 204);
    assert!(started.elapsed() >= Duration::from_millis(900), "answered 204 before the wait was over");

    // A long poll answers as soon as work arrives.
    let poll = std::thread::spawn(move || {
        let started = Instant::now();
        (r.next_job(20), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300)); // let the poll start waiting first
    let third = hub.submit(1, "c11", &dir.path().join("main.py"));
    let ((code, job), took) = poll.join().unwrap();
    assert_eq!(code, 200);
    assert_eq!(job.unwrap()["submission_id"], third.as_str());
    assert!(took < Duration::from_secs(15), "the long poll took {took:?}");

    let s = hub.submission(&subs[0]);
    assert_eq!((s["state"].as_str(), s["attempts"].as_i64()), (Some("leased"), Some(1)));
    assert_eq!(s["job_id"], id(&first));
}

#[test]
fn a_lapsed_lease_is_reclaimed_with_one_more_attempt_and_the_third_lapse_is_je() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-lease", 1);
    let (a, b, c) = (runner(&hub), runner(&hub), runner(&hub));
    let job = a.claim(LIMIT);
    let jb = id(&job).to_string();
    assert_eq!(b.next_job(0).0, 204, "a live lease is not an orphan");

    let again = b.claim(LIMIT); // once A's 3 s lease lapses
    assert_eq!(id(&again), jb);
    let s = hub.submission(&subs[0]);
    assert_eq!((s["attempts"].as_i64(), s["leased_by"].as_str()), (Some(2), Some(b.id.as_str())));
    assert_eq!(a.complete(&jb, &result(["AC", "AC"])), 409, "A lost the job to B");
    assert_eq!(a.heartbeat(&[&jb]), 204); // renews nothing: A does not hold it

    assert_eq!(id(&c.claim(LIMIT)), jb);
    assert_eq!(hub.submission(&subs[0])["attempts"], 3);
    // The third lease lapses too: the next ask finalises the job as JE.
    let s = wait_for("the job to end as JE", LIMIT, || {
        assert_eq!(a.next_job(0).0, 204);
        let s = hub.submission(&subs[0]);
        (s["state"] == "done").then_some(s)
    });
    assert_eq!((s["verdict"].as_str(), s["score"].as_i64()), (Some("JE"), Some(0)));
    assert_eq!(s["tasks"], Value::Null);
    assert_eq!(c.complete(&jb, &result(["AC", "AC"])), 409, "a finalised job takes no late result");
}

#[test]
fn heartbeats_keep_listed_leases_alive() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-heartbeat", 2);
    let (a, b) = (runner(&hub), runner(&hub));
    let kept = id(&a.claim(LIMIT)).to_string();
    let dropped = id(&a.claim(LIMIT)).to_string();
    // Beat for twice the lease, listing only one job; B asks all along.
    let end = Instant::now() + Duration::from_secs(6);
    let mut reclaimed: Vec<String> = Vec::new();
    while Instant::now() < end {
        assert_eq!(a.heartbeat(&[&kept]), 204);
        let held: Vec<&str> = reclaimed.iter().map(String::as_str).collect();
        assert_eq!(b.heartbeat(&held), 204);
        if let (200, Some(job)) = b.next_job(0) {
            reclaimed.push(id(&job).to_string());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(reclaimed, [dropped], "only the unlisted job lapses");
    assert_eq!(hub.submission(&subs[0])["leased_by"], a.id.as_str());
    assert_eq!(a.complete(&kept, &result(["AC", "AC"])), 204);
}

/// Beats as `a` listing `listed` (and as `b` listing nothing) every 300 ms
/// while `b` asks for work; the job `b` gets once a lease lapses.
fn beat_until_b_reclaims(a: &HandRunner, listed: &[&str], b: &HandRunner) -> Value {
    wait_for("a lapsed lease to be reclaimed", LIMIT, || {
        assert_eq!(a.heartbeat(listed), 204);
        assert_eq!(b.heartbeat(&[]), 204);
        let got = b.next_job(0).1;
        if got.is_none() {
            std::thread::sleep(Duration::from_millis(300));
        }
        got
    })
}

#[test]
fn a_handout_its_live_runner_never_listed_was_lost_and_costs_no_attempt() {
    // A holder alive and beating, whose lists never named the job half a
    // lease after it was handed out, never got it: its lapse is refunded.
    let (_dir, hub, subs) = hub_with_submissions("hubd-lost", 1);
    let (a, b) = (runner(&hub), runner(&hub));
    let jb = id(&a.claim(LIMIT)).to_string(); // "lost": A acts as if it never came
    assert_eq!(id(&beat_until_b_reclaims(&a, &[], &b)), jb);
    let s = hub.submission(&subs[0]);
    assert_eq!(
        (s["attempts"].as_i64(), s["handouts"].as_i64(), s["lost"].as_i64()),
        (Some(1), Some(2), Some(1)),
        "{s}"
    );
    assert_eq!(a.complete(&jb, &result(["AC", "AC"])), 409, "a lost handout's holder no longer holds it");

    // A job its holder owned (listed once), then dropped, lapses as ever.
    assert_eq!(b.heartbeat(&[&jb]), 204);
    assert_eq!(id(&beat_until_b_reclaims(&b, &[], &runner(&hub))), jb);
    let s = hub.submission(&subs[0]);
    assert_eq!((s["attempts"].as_i64(), s["lost"].as_i64()), (Some(2), Some(1)), "{s}");
}

#[test]
fn a_dead_holders_lapse_counts_and_lost_handouts_are_refunded_only_up_to_the_attempt_limit() {
    // A payload that kills every claimd before it records would be "lost"
    // for ever: after max_attempts refunds (here 1), lapses count again.
    let dir = TempDir::new("hubd-lost-cap");
    let hub = Hub::start(dir.path(), &["--max-attempts", "1"]);
    hub.add_problem(1, &problem_dir(dir.path(), "a"));
    let src = write_file(dir.path(), "main.py", "print(input())\n");
    let sub = hub.submit(1, "python3", &src);
    let (a, b) = (runner(&hub), runner(&hub));
    let jb = id(&a.claim(LIMIT)).to_string();
    assert_eq!(id(&beat_until_b_reclaims(&a, &[], &b)), jb, "the first loss is refunded");
    let s = hub.submission(&sub);
    assert_eq!((s["attempts"].as_i64(), s["lost"].as_i64(), s["state"].as_str()), (Some(1), Some(1), Some("leased")));
    // B "loses" it too, while beating: no refund left, the job ends as JE.
    let s = wait_for("the job to end as JE", LIMIT, || {
        assert_eq!(b.heartbeat(&[]), 204);
        assert_eq!(a.next_job(0).0, 204);
        let s = hub.submission(&sub);
        (s["state"] == "done").then_some(s)
    });
    assert_eq!((s["verdict"].as_str(), s["attempts"].as_i64(), s["lost"].as_i64()), (Some("JE"), Some(1), Some(1)));

    // A holder that never beats proves nothing: its lapse is an attempt.
    let sub = hub.submit(1, "python3", &src);
    let jb = id(&a.claim(LIMIT)).to_string();
    let s = wait_for("the silent holder's job to end as JE", LIMIT, || {
        assert_eq!(b.heartbeat(&[]), 204);
        assert_eq!(b.next_job(0).0, 204);
        let s = hub.submission(&sub);
        (s["state"] == "done").then_some(s)
    });
    assert_eq!(
        (s["job_id"].as_str(), s["verdict"].as_str(), s["lost"].as_i64()),
        (Some(jb.as_str()), Some("JE"), Some(0))
    );
}

#[test]
fn abort_drain_refunds_the_attempt_and_counted_aborts_reach_je() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-abort", 1);
    let (a, b) = (runner(&hub), runner(&hub));
    let jb = id(&a.claim(LIMIT)).to_string();
    assert_eq!(a.abort(&jb, "bored"), 400);
    assert_eq!(b.abort(&jb, "drain"), 409, "B does not hold it");
    assert_eq!(a.abort("jb_nope", "drain"), 404);
    assert_eq!(a.abort(&jb, "drain"), 202);
    let s = hub.submission(&subs[0]);
    assert_eq!((s["state"].as_str(), s["attempts"].as_i64()), (Some("pending"), Some(0)));
    assert_eq!(a.abort(&jb, "drain"), 409, "no longer held");

    // The same job comes back to the same runner: a new claim.
    assert_eq!(id(&a.claim(LIMIT)), jb);
    assert_eq!(hub.submission(&subs[0])["attempts"], 1);
    assert_eq!(a.abort(&jb, "prep_failed"), 202);
    assert_eq!(hub.submission(&subs[0])["attempts"], 1, "prep_failed keeps the attempt");
    assert_eq!(id(&b.claim(LIMIT)), jb);
    assert_eq!(b.abort(&jb, "rejected"), 202);
    assert_eq!(id(&a.claim(LIMIT)), jb);
    assert_eq!(a.abort(&jb, "prep_failed"), 202);
    let s = hub.submission(&subs[0]);
    assert_eq!(
        (s["state"].as_str(), s["verdict"].as_str(), s["attempts"].as_i64()),
        (Some("done"), Some("JE"), Some(3))
    );
    let answers: Vec<(String, i64)> = s["aborts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["reason"].as_str().unwrap().to_string(), x["answer"].as_i64().unwrap()))
        .collect();
    let want =
        [("drain", 409), ("drain", 202), ("drain", 409), ("prep_failed", 202), ("rejected", 202), ("prep_failed", 202)];
    let want: Vec<(String, i64)> = want.iter().map(|(r, c)| (r.to_string(), *c)).collect();
    assert_eq!(answers, want, "every abort of a known job is recorded with its answer");
    assert!(s["aborts"][0]["runner_id"] == b.id.as_str() && s["aborts"][0]["job_id"] == jb.as_str());
}

#[test]
fn complete_lands_once_and_refuses_what_it_must() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-complete", 1);
    let (a, b) = (runner(&hub), runner(&hub));
    let jb = id(&a.claim(LIMIT)).to_string();
    assert_eq!(b.complete(&jb, &result(["AC", "AC"])), 409);
    assert_eq!(a.complete("jb_nope", &result(["AC", "AC"])), 404);
    let one_case = json!({"tasks": [[case("AC")], [case("AC")]]}).to_string();
    assert_eq!(a.complete(&jb, &one_case), 400, "task 1 has two cases");
    assert_eq!(a.complete(&jb, "{\"tasks\": 3}"), 400);
    assert_eq!(hub.submission(&subs[0])["state"], "leased", "a refused result changes nothing");

    assert_eq!(a.complete(&jb, &result(["AC", "TLE"])), 204);
    assert_eq!(a.complete(&jb, &result(["AC", "TLE"])), 204, "a resent result is answered again");
    assert_eq!(b.complete(&jb, &result(["AC", "AC"])), 409);
    let s = hub.submission(&subs[0]);
    assert_eq!(
        (s["state"].as_str(), s["verdict"].as_str(), s["score"].as_i64()),
        (Some("done"), Some("TLE"), Some(40))
    );
    assert_eq!((s["completes"].as_i64(), s["complete_calls"].as_i64()), (Some(1), Some(6)));
    assert_eq!(s["leased_by"], Value::Null);
    assert_eq!(s["tasks"][0]["status"], "AC");
    assert_eq!(s["tasks"][0]["score"], 40);
    assert_eq!(s["tasks"][1]["status"], "TLE");
    assert_eq!(s["tasks"][1]["score"], 0);
    let first = &s["tasks"][1]["cases"][0];
    assert_eq!((first["status"].as_str(), first["execTime"].as_i64()), (Some("AC"), Some(5)));
    assert_eq!(first["memoryUsage"], 1024);
    assert_eq!(first["stderr"].as_str().unwrap().len(), 200, "stderr is cut to 200 characters");
    assert_eq!(a.next_job(0).0, 204, "a finished job is never handed out again");
}

#[test]
fn a_rejudge_drops_the_old_jobs_result() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-rejudge", 1);
    let a = runner(&hub);
    let old = id(&a.claim(LIMIT)).to_string();
    let new = hub.cli(&["rejudge", &subs[0]]).trim().to_string();
    assert!(new.starts_with("jb_") && new != old);

    assert_eq!(a.complete(&old, &result(["AC", "AC"])), 204, "a stale result is accepted…");
    let s = hub.submission(&subs[0]);
    assert_eq!(s["job_id"], new.as_str());
    assert_eq!((s["state"].as_str(), s["verdict"].as_str()), (Some("pending"), None), "…and dropped");
    assert_eq!((s["completes"].as_i64(), s["complete_calls"].as_i64()), (Some(0), Some(1)));

    assert_eq!(id(&a.claim(LIMIT)), new);
    assert_eq!(a.complete(&new, &result(["AC", "AC"])), 204);
    let s = hub.submission(&subs[0]);
    assert_eq!((s["verdict"].as_str(), s["score"].as_i64(), s["completes"].as_i64()), (Some("AC"), Some(100), Some(1)));

    // A rejudge of a pending job supersedes it: only the newest runs.
    let first = hub.cli(&["rejudge", &subs[0]]).trim().to_string();
    let second = hub.cli(&["rejudge", &subs[0]]).trim().to_string();
    assert_eq!(id(&a.claim(LIMIT)), second);
    assert_ne!(first, second);
    assert_eq!(a.next_job(0).0, 204);
    let unknown = Command::new(bin("hubd")).arg("--db").arg(&hub.db).args(["rejudge", "s9999"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no submission s9999"));
}

#[test]
fn events_are_stored_per_job_at_most_200_a_batch() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-events", 1);
    let a = runner(&hub);
    let jb = id(&a.claim(LIMIT)).to_string();
    let post = |job: &str, n: usize| {
        let events: Vec<Value> = (0..n).map(|i| json!({"t": i, "kind": "case", "case": i})).collect();
        let body = json!({ "events": events }).to_string();
        call("POST", &a.at(&format!("jobs/{job}/events")), Some(&a.token), Some(&body)).0
    };
    assert_eq!(post(&jb, 2), 204);
    assert_eq!(post(&jb, 200), 204);
    assert_eq!(post(&jb, 201), 400);
    assert_eq!(post("jb_nope", 1), 404);
    assert_eq!(call("POST", &a.at(&format!("jobs/{jb}/events")), Some(&a.token), Some("{}")).0, 400);
    assert_eq!(hub.submission(&subs[0])["events"], 202);
}

#[test]
fn events_for_a_job_the_runner_no_longer_holds_are_404() {
    let (_dir, hub, subs) = hub_with_submissions("hubd-events-gone", 2);
    let (a, b) = (runner(&hub), runner(&hub));
    let post = |r: &HandRunner, job: &str| {
        let body = json!({"events": [{"t": 1, "kind": "case", "case": 0}]}).to_string();
        call("POST", &r.at(&format!("jobs/{job}/events")), Some(&r.token), Some(&body)).0
    };
    let done = id(&a.claim(LIMIT)).to_string();
    assert_eq!(post(&a, &done), 204);
    assert_eq!(post(&b, &done), 404, "another runner's job");
    assert_eq!(a.complete(&done, &result(["AC", "AC"])), 204);
    assert_eq!(post(&a, &done), 404, "a completed job");
    let handed_back = id(&a.claim(LIMIT)).to_string();
    assert_eq!(a.abort(&handed_back, "drain"), 202);
    assert_eq!(post(&a, &handed_back), 404, "a job handed back");
    assert_eq!(hub.submission(&subs[0])["events"], 1, "only the event sent while held is kept");
    assert_eq!(hub.submission(&subs[1])["events"], 0);
}

#[test]
fn metrics_follow_the_queue_and_the_polls() {
    let (dir, hub, _subs) = hub_with_submissions("hubd-metrics", 0);
    assert_eq!(hub.metric("hubd_jobs_pending"), 0.0);
    let src = dir.path().join("main.py");
    hub.submit(1, "python3", &src);
    hub.submit(1, "python3", &src);
    assert_eq!(hub.metric("hubd_jobs_pending"), 2.0, "queue depth up after a submit");
    assert!(hub.metric("hubd_oldest_pending_age_seconds") >= 0.0);
    let a = runner(&hub);
    assert_eq!(hub.metric("hubd_runners_registered"), 1.0);
    let jb = id(&a.claim(LIMIT)).to_string();
    let _other = a.claim(LIMIT);
    assert_eq!(hub.metric("hubd_jobs_pending"), 0.0);
    assert_eq!(hub.metric("hubd_jobs_leased"), 2.0);
    assert_eq!(hub.metric("hubd_claims_total"), 2.0, "attempts spent");
    assert_eq!(hub.metric("hubd_runners_seen"), 1.0);

    // A poll waiting shows; a lease lapsing (3 s) is counted when found.
    let poll = {
        let b = runner(&hub);
        std::thread::spawn(move || b.next_job(20))
    };
    wait_for("a poll waiting in the metrics", LIMIT, || (hub.metric("hubd_polls_waiting") == 1.0).then_some(()));
    assert_eq!(a.complete(&jb, &result(["AC", "AC"])), 204);
    assert_eq!(hub.metric("hubd_results_landed_total"), 1.0);
    let (code, _) = poll.join().unwrap();
    assert_eq!(code, 200, "A's other lease lapsed and was reclaimed by the waiting poll");
    assert_eq!(hub.metric("hubd_leases_lapsed_total"), 1.0);
    assert_eq!(hub.metric("hubd_claims_total"), 3.0);
    assert_eq!(hub.metric("hubd_polls_waiting"), 0.0);
}

#[test]
fn the_testdata_channel_serves_meta_zip_and_a_checksum_that_follows_changes() {
    let dir = TempDir::new("hubd-testdata");
    let hub = Hub::start(dir.path(), &[]);
    hub.add_problem(5, &problem_dir(dir.path(), "v1"));
    let get = |what: &str, pid: &str, token: &str| {
        call("GET", &format!("{}/problem/{pid}/{what}?token={token}", hub.url), None, None)
    };

    let (code, meta) = get("meta", "5", TESTDATA_TOKEN);
    assert_eq!(code, 200);
    let meta = String::from_utf8(meta).unwrap();
    let data = concat!(
        r#"{"tasks": [{"taskScore": 40, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 1}, "#,
        r#"{"taskScore": 60, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 2}]}"#
    );
    assert_eq!(
        meta,
        format!(r#"{{"status": "ok", "message": "", "data": {data}}}"#),
        "json.dumps form, file key order"
    );
    let (code, zip) = get("testdata", "5", TESTDATA_TOKEN);
    assert_eq!(code, 200);
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip.clone())).unwrap();
    let mut names: Vec<String> = (0..archive.len()).map(|i| archive.by_index(i).unwrap().name().into()).collect();
    names.sort();
    let want = ["0000.in", "0000.out", "0100.in", "0100.out", "0101.in", "0101.out", "include/", "include/lib.h"];
    assert_eq!(names, want);
    let (code, checksum) = get("checksum", "5", TESTDATA_TOKEN);
    assert_eq!(code, 200);
    let checksum = json_of(&checksum);
    assert_eq!(checksum["status"], "ok");
    let expected = ojrunner_hub::problem::md5_hex(&[zip, data.as_bytes().to_vec()].concat());
    assert_eq!(checksum["data"], expected.as_str(), "md5 of the zip followed by the meta");

    assert_eq!(get("meta", "5", "wrong").0, 401);
    assert_eq!(get("testdata", "5", "").0, 401);
    assert_eq!(get("meta", "6", TESTDATA_TOKEN).0, 404);
    assert_eq!(get("checksum", "five", TESTDATA_TOKEN).0, 404);

    // Re-adding the problem with other data changes the checksum.
    hub.add_problem(5, &problem_dir(dir.path(), "v2"));
    let again = json_of(&get("checksum", "5", TESTDATA_TOKEN).1);
    assert_ne!(again["data"], expected.as_str());
}

/// `hubd problem add` refuses what a runner would refuse (its tasks' rule,
/// its unpacker, its case check), naming the problem, and stores nothing.
#[test]
fn problem_add_refuses_what_a_runner_would_refuse() {
    let dir = TempDir::new("hubd-problem-refusals");
    let db = dir.path().join("hub.db");
    let add = |p: &Path| {
        let out = Command::new(bin("hubd")).arg("--db").arg(&db).args(["problem", "add", "--id", "9"]).arg(p).output();
        let out = out.unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let broken = |tag: &str, meta: Option<&str>| {
        let p = problem_dir(dir.path(), tag);
        if let Some(meta) = meta {
            std::fs::write(p.join("meta.json"), meta).unwrap();
        }
        p
    };
    let one = |task: &str| format!(r#"{{"tasks": [{{"taskScore": 100, {task}}}]}}"#);
    let cases: Vec<(&str, PathBuf, &str)> = vec![
        (
            "missing case",
            {
                let p = broken("missing", None);
                std::fs::remove_file(p.join("0101.out")).unwrap();
                p
            },
            "testdata has no 0101.out",
        ),
        (
            "caseCount 0",
            broken("c0", Some(&one(r#""memoryLimit": 65536, "timeLimit": 1000, "caseCount": 0"#))),
            "caseCount 0",
        ),
        (
            "negative time",
            broken("tneg", Some(&one(r#""memoryLimit": 65536, "timeLimit": -1, "caseCount": 1"#))),
            "timeLimit -1",
        ),
        (
            "memory 0",
            broken("m0", Some(&one(r#""memoryLimit": 0, "timeLimit": 1000, "caseCount": 1"#))),
            "memoryLimit 0",
        ),
        (
            "a link",
            {
                let p = broken("link", None);
                std::fs::rename(p.join("0101.out"), p.join("real.out")).unwrap();
                std::os::unix::fs::symlink(p.join("real.out"), p.join("0101.out")).unwrap();
                p
            },
            "0101.out is a symbolic link",
        ),
    ];
    // A problem a runner takes, first: the database exists, problem 1 in it.
    let first = problem_dir(dir.path(), "first");
    let out = Command::new(bin("hubd")).arg("--db").arg(&db).args(["problem", "add", "--id", "1"]).arg(first).output();
    assert!(out.unwrap().status.success());
    for (what, p, why) in cases {
        let (code, err) = add(&p);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(err.contains("problem 9") && err.contains(why), "{what}: {err}");
    }
    let stored =
        rusqlite::Connection::open(&db).unwrap().query_row("SELECT count(*) FROM problems", [], |r| r.get::<_, i64>(0));
    assert_eq!(stored.ok(), Some(1), "nothing but the first problem was stored");
    // And the same directory, mended, is taken.
    assert_eq!(add(&problem_dir(dir.path(), "fine")).0, Some(0));
}

#[test]
fn md5_matches_the_rfc_vectors() {
    assert_eq!(ojrunner_hub::problem::md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(ojrunner_hub::problem::md5_hex(b"message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
}

#[test]
fn a_hub_restart_costs_no_lease() {
    let (_dir, mut hub, subs) = hub_with_submissions("hubd-restart", 1);
    let (a, b) = (runner(&hub), runner(&hub));
    let jb = id(&a.claim(LIMIT)).to_string();
    let claimed = Instant::now();
    hub.stop();
    // Stay down past the 3 s lease, as a real outage would.
    wait_for("the lease to lapse while the hub is down", LIMIT, || {
        (claimed.elapsed() > Duration::from_millis(3500)).then_some(())
    });
    hub.start_again();
    assert_eq!(b.next_job(0).0, 204, "the lease was extended at start, not reclaimed");
    assert_eq!(a.heartbeat(&[&jb]), 204);
    assert_eq!(a.complete(&jb, &result(["AC", "AC"])), 204);
    let s = hub.submission(&subs[0]);
    assert_eq!((s["verdict"].as_str(), s["attempts"].as_i64()), (Some("AC"), Some(1)));
}

#[test]
fn fault_rules_answer_matching_requests_then_expire() {
    let (_dir, hub, _subs) = hub_with_submissions("hubd-fault", 1);
    let a = runner(&hub);
    hub.cli(&["fault", "--status", "503", "--count", "2", "--path-contains", "next-job"]);
    assert_eq!(a.heartbeat(&[]), 204, "other paths pass");
    assert_eq!(a.next_job(0).0, 503);
    assert_eq!(a.next_job(0).0, 503);
    assert_eq!(a.next_job(0).0, 200, "the rule is used up");

    hub.cli(&["fault", "--status", "500", "--count", "100"]);
    assert_eq!(a.heartbeat(&[]), 500);
    hub.cli(&["fault", "--clear"]);
    assert_eq!(a.heartbeat(&[]), 204);
}

#[test]
fn the_hub_names_languages_by_the_runners_table() {
    let (dir, hub, _subs) = hub_with_submissions("hubd-table", 0);
    // The shipped table, and one more language: a row of the table is all
    // it takes.
    let mut table: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("etc/languages.json")).unwrap()).unwrap();
    table["languages"].as_array_mut().unwrap().push(json!({
        "id": 6, "name": "c17", "source": "main.c",
        "compile": ["/usr/bin/gcc", "-O2", "-std=c17", "main.c", "-lm", "-o", "main"], "run": ["./main"]
    }));
    let path = dir.path().join("languages.json");
    std::fs::write(&path, table.to_string()).unwrap();
    let src = examples().join("submissions/ab_ok.c");
    let submit = |language: &str, env: Option<&Path>| {
        let mut cmd = Command::new(bin("hubd"));
        cmd.arg("--db").arg(&hub.db).env_remove("OJ_LANGUAGES");
        if let Some(p) = env {
            cmd.env("OJ_LANGUAGES", p);
        }
        cmd.args(["submit", "--problem", "1", "--language", language]).arg(&src).output().unwrap()
    };
    // --languages, or OJ_LANGUAGES as the runner reads it.
    let (table_arg, src_arg) = (path.to_str().unwrap(), src.to_str().unwrap());
    let by_flag = hub.cli(&["--languages", table_arg, "submit", "--problem", "1", "--language", "c17", src_arg]);
    assert_eq!(hub.submission(by_flag.trim())["language"], 6);
    let by_env = submit("c17", Some(&path));
    assert!(by_env.status.success(), "{}", String::from_utf8_lossy(&by_env.stderr));
    let job = runner(&hub).claim(LIMIT);
    let (code, zip) = call("GET", job["code_url"].as_str().unwrap(), None, None);
    assert_eq!(code, 200);
    let names: Vec<String> =
        zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap().file_names().map(String::from).collect();
    assert_eq!(names, ["main.c"], "the code zip's file is the table's");
    // Without the table it is not a language: refused, naming the table.
    let out = submit("c17", None);
    assert_eq!(out.status.code(), Some(2), "an unknown language name is a usage error");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("unknown language \"c17\"") && said.contains("built-in language table"), "{said}");
    let out = submit("cobol", Some(&path));
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&path.display().to_string()) && said.contains("c17"), "{said}");
    // A table that cannot be read is the configuration's (exit 100).
    let out = submit("c11", Some(&dir.path().join("none.json")));
    assert_eq!(out.status.code(), Some(100));
    assert!(String::from_utf8_lossy(&out.stderr).contains("none.json"));
}

#[test]
fn submissions_take_language_names_zips_and_raw_payloads() {
    let (dir, hub, _subs) = hub_with_submissions("hubd-submit", 0);
    let src = dir.path().join("main.py");
    let out = Command::new(bin("hubd"))
        .arg("--db")
        .arg(&hub.db)
        .args(["submit", "--problem", "1", "--language", "cobol"])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown language name is a usage error");

    // A zip is stored as given.
    let zip_path = dir.path().join("hostile.zip");
    std::fs::write(&zip_path, b"PK\x03\x04 not really a zip").unwrap();
    let zipped = hub.submit(1, "rust", &zip_path);
    let raw = r#"{"job_id": "{{job_id}}", "tasks": "nonsense"}"#;
    let rawsub = hub.cli(&["submit", "--problem", "1", "--language", "2", "--raw-job", raw, src.to_str().unwrap()]);
    let a = runner(&hub);
    let job = a.claim(LIMIT);
    assert_eq!(job["submission_id"], zipped.as_str());
    assert_eq!(job["language"], 4);
    assert_eq!(call("GET", job["code_url"].as_str().unwrap(), None, None).1, b"PK\x03\x04 not really a zip");
    let (code, body) = call("GET", &a.at("next-job"), Some(&a.token), None);
    assert_eq!(code, 200);
    let body = String::from_utf8(body).unwrap();
    let jb = hub.submission(rawsub.trim())["job_id"].as_str().unwrap().to_string();
    assert_eq!(body, raw.replace("{{job_id}}", &jb), "the raw payload is sent verbatim");
    assert_eq!(a.abort(&jb, "prep_failed"), 202);

    let s = hub.status();
    assert_eq!(s.len(), 2);
    let keys = [
        "submission_id",
        "problem_id",
        "language",
        "job_id",
        "state",
        "attempts",
        "verdict",
        "score",
        "tasks",
        "completes",
        "complete_calls",
        "aborts",
        "events",
        "leased_by",
    ];
    for k in keys {
        assert!(s[1].get(k).is_some(), "status has no {k}: {}", s[1]);
    }
}

#[test]
fn serve_stops_cleanly_and_refuses_bad_configuration() {
    let dir = TempDir::new("hubd-serve");
    let mut hub = Hub::start(dir.path(), &[]);
    // HUP and CONT change nothing: it still answers.
    hub.proc.signal(nix::sys::signal::Signal::SIGHUP);
    hub.proc.signal(nix::sys::signal::Signal::SIGCONT);
    let answers = |url: &str| match ureq::get(&format!("{url}/no-such-route")).call() {
        Err(ureq::Error::Status(code, _)) => Some(code),
        Ok(r) => Some(r.status()),
        Err(_) => None,
    };
    assert_eq!(answers(&hub.url), Some(404), "hubd survives HUP and CONT");
    assert!(hub.proc.running());
    hub.proc.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(hub.proc.wait_exit(LIMIT), 0);
    // QUIT stops at once, cleanly.
    std::fs::create_dir_all(dir.path().join("q")).unwrap();
    let mut hub = Hub::start(&dir.path().join("q"), &[]);
    hub.proc.signal(nix::sys::signal::Signal::SIGQUIT);
    assert_eq!(hub.proc.wait_exit(LIMIT), 0);

    let run = |args: &[&str]| {
        Command::new(bin("hubd")).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().code()
    };
    let db = dir.path().join("x.db");
    let db = db.to_str().unwrap();
    assert_eq!(
        run(&["--db", db, "serve", "--listen", "127.0.0.1:0", "--registration-token-file", "/nonexistent"]),
        Some(100)
    );
    assert_eq!(run(&["--db", "/nonexistent/dir/x.db", "status"]), Some(100));
    // Not a duration: bad configuration, as for every program (issue 14).
    assert_eq!(run(&["--db", db, "serve", "--lease-ttl", "zero"]), Some(100));

    // --notify-fd: readiness on a pipe, and the token read from a file.
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "from-file\nignored\n").unwrap();
    // (Other tests' children may inherit the write end too, so read one byte,
    // not to end of file, and see the fd closed in /proc.)
    let (r, w) = nix::unistd::pipe().unwrap();
    use std::os::fd::AsRawFd;
    let fd = w.as_raw_fd().to_string();
    let (mut proc, url) = bare_hub(
        &dir.path().join("n.db"),
        &["--notify-fd", &fd, "--registration-token-file", token_file.to_str().unwrap()],
    );
    drop(w);
    let mut ready = [0u8; 1];
    std::fs::File::from(r).read_exact(&mut ready).unwrap();
    assert_eq!(&ready, b"\n", "readiness is one newline");
    // Closed just after the newline is written: waited for, not raced.
    let notify = format!("/proc/{}/fd/{fd}", proc.pid());
    wait_for("the notify fd to be closed", LIMIT, || (!Path::new(&notify).exists()).then_some(()));
    let body = json!({"registration_token": "from-file", "name": "n"}).to_string();
    assert_eq!(call("POST", &format!("{url}/runners/register"), None, Some(&body)).0, 201);
    proc.signal(nix::sys::signal::Signal::SIGINT);
    assert_eq!(proc.wait_exit(LIMIT), 0);
}

/// Runs `hubd --db DB serve --listen 127.0.0.1:0 ARGS…`, which must exit
/// (a test that went wrong fails at [`LIMIT`], not hangs): its exit code
/// and what it said on stderr.
fn serve_that_exits(db: &Path, args: &[&str]) -> (i32, String) {
    let log = db.with_extension("serve.log");
    let child = Command::new(bin("hubd"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let code = Proc::of(child, format!("hubd serve {args:?}"), None).wait_exit(LIMIT);
    (code, std::fs::read_to_string(&log).unwrap())
}

/// One hub serves a database: a second `serve` of it exits 1 and names the
/// first, which goes on serving; the wake socket is writable by those who
/// may write the database, and no one else.
#[test]
fn one_hub_serves_a_database_and_only_its_writers_may_wake_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("hubd-one-serve");
    let hub = Hub::start(dir.path(), &[]);
    let (code, err) = serve_that_exits(&hub.db, &["--registration-token", "x"]);
    assert_eq!(code, 1, "a second serve of one database: {err}");
    assert!(err.contains("another hubd serves") && err.contains("hub.db-serve.lock"), "{err}");
    let status = |url: &str| match ureq::get(&format!("{url}/no-such-route")).call() {
        Err(ureq::Error::Status(code, _)) => Some(code),
        Ok(r) => Some(r.status()),
        Err(_) => None,
    };
    assert_eq!(status(&hub.url), Some(404), "the first hub serves on");
    // The lock comes before the database: a second serve creates or
    // migrates nothing (here, with the lock held, no database is made).
    let fresh = dir.path().join("fresh.db");
    let lock = std::fs::File::create(dir.path().join("fresh.db-serve.lock")).unwrap();
    lock.lock().unwrap();
    assert_eq!(serve_that_exits(&fresh, &["--registration-token", "x"]).0, 1);
    assert!(!fresh.exists(), "a hub that may not serve made the database");
    drop(lock);

    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let socket = dir.path().join("hub.db-wake");
    assert_eq!(mode(&socket), mode(&hub.db) & 0o666, "the wake socket's mode is the database's");
    assert_eq!(mode(&socket) & 0o022, 0, "no one but the database's owner may wake the hub");
}

#[test]
fn serve_takes_decimal_seconds_and_exits_100_naming_a_flag_that_is_not_a_duration() {
    let dir = TempDir::new("hubd-durations");
    // Decimal seconds: the lease in ms, the advertised intervals rounded up.
    let hub = Hub::start(dir.path(), &["--lease-ttl", "2.5", "--heartbeat-interval", "0.5", "--poll-interval", "1.5"]);
    let (code, body) = call(
        "POST",
        &format!("{}/runners/register", hub.url),
        None,
        Some(&json!({"registration_token": REGISTRATION_TOKEN, "name": "n"}).to_string()),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        json_of(&body)["config"],
        json!({"heartbeat_interval_sec": 1, "poll_interval_sec": 2, "max_concurrent_jobs": 8})
    );
    for (flag, value) in [("--lease-ttl", "2x"), ("--heartbeat-interval", "NaN"), ("--poll-interval", "0")] {
        let (code, said) = serve_that_exits(&dir.path().join("other.db"), &[flag, value]);
        assert_eq!(code, 100, "{flag} {value}: {said}");
        assert!(said.contains(flag) && said.contains(&format!("{value:?}")), "{flag} {value}: {said}");
    }
}
