//! Nothing lost to a bad hub, a bad configuration or a full disk (issue 13):
//! a hostile hub (redirects, foreign pages, bodies cut or stalled, a refused
//! testdata token, one problem's testdata failing), a spool on a small disk
//! that fills, a damaged spool, a second runnerd, zips the zip library
//! misreads. Real processes and a real `hubd` over loopback; at the hub,
//! each job gets one verdict, the right one, and no attempt is spent by the
//! runner's own trouble.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use testkit::*;

/// A hub with the example problems 1 and 2, in a directory tagged `tag`:
/// the directory (which goes when dropped) and the hub.
fn hub_with_problems(tag: &str) -> (TempDir, Hub) {
    let dir = TempDir::new(tag);
    let hub = Hub::start(dir.path(), &[]);
    hub.add_problem(1, &examples().join("problems/1"));
    hub.add_problem(2, &examples().join("problems/2"));
    (dir, hub)
}

/// A+B submitted, judged through whatever faults `hub` was given: AC, once.
fn ab_judged_once_through_the_faults(hub: &Hub, dir: &Path) {
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let runner = start_runner(hub, &dir.join("spool"), &[]);
    hub.wait_all_judged(Duration::from_secs(120));
    assert_clean_ac(&hub.submission(&sub));
    drain(runner);
}

fn log_text(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

// ---- 1. the answers to complete ------------------------------------------

#[test]
fn i13_1_redirects_and_foreign_answers_to_complete_never_drop_the_result() {
    let (dir, hub) = hub_with_problems("f-redirect");
    let elsewhere = format!("{}/elsewhere", hub.url);
    for rule in [
        vec!["--status", "301", "--location", &elsewhere],
        vec!["--status", "302", "--location", &elsewhere],
        vec!["--status", "308", "--location", &elsewhere],
        vec!["--status", "200", "--body", "<html><body>Welcome</body></html>"],
        vec!["--status", "404", "--body", "<html><body>Not Found</body></html>"],
        vec!["--status", "429"],
        vec!["--status", "408"],
    ] {
        let mut args = vec!["fault", "--count", "1", "--path-contains", "/complete"];
        args.extend(rule);
        hub.cli(&args);
    }
    ab_judged_once_through_the_faults(&hub, dir.path());
}

#[test]
fn i13_1_a_result_refused_as_too_large_keeps_its_evidence_and_goes_back_as_rejected() {
    let (dir, hub) = hub_with_problems("f-413");
    // A proxy's body limit answers with a page of its own.
    let page = "<html><body>413 Request Entity Too Large</body></html>";
    hub.cli(&["fault", "--count", "1", "--path-contains", "/complete", "--status", "413", "--body", page]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    let s = wait_for("the rejected result handed back", Duration::from_secs(60), || {
        let s = hub.submission(&sub);
        (!s["aborts"].as_array().unwrap().is_empty()).then_some(s)
    });
    assert_eq!(s["aborts"][0]["reason"], "rejected", "{s}");
    let evidence: Vec<_> = std::fs::read_dir(spool.join("evidence")).expect("evidence kept").flatten().collect();
    assert!(evidence.iter().any(|e| e.path().extension().is_some_and(|x| x == "json")), "the result is kept");
    hub.wait_all_judged(Duration::from_secs(120));
    let s = hub.submission(&sub);
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
    drain(runner);
}

// ---- 2. a wrong SANDBOX_TOKEN ---------------------------------------------

#[test]
fn i13_2_a_refused_testdata_token_stops_claiming_hands_back_and_exits_100() {
    let (dir, hub) = hub_with_problems("f-token");
    let judged = hub.submit(1, "python3", &slow_ab(dir.path(), 1.0));
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(&hub, &spool, &[], &log);
    wait_for("the first job judging", Duration::from_secs(60), || {
        spool_claims(&spool).iter().any(|c| c.state == "started").then_some(())
    });
    // From now on the testdata channel refuses the runner's token.
    hub.cli(&["fault", "--status", "401", "--count", "100000", "--path-contains", "/problem/"]);
    let others = [
        hub.submit(1, "c11", &examples().join("submissions/ab_ok.c")),
        hub.submit(2, "c11", &examples().join("submissions/sum_ok.c")),
    ];
    assert_eq!(runner.wait_exit(Duration::from_secs(90)), 100, "a permanent failure: fix the configuration");
    assert_clean_ac(&hub.submission(&judged));
    for id in &others {
        let s = hub.submission(id);
        assert_ne!(s["state"], "done", "not judged, and not JE: {s}");
        assert_eq!(s["attempts"], 0, "no attempt spent: {s}");
        assert!(s["aborts"].as_array().unwrap().iter().all(|a| a["reason"] == "drain"), "handed back as drain: {s}");
    }
    let text = log_text(&log);
    assert!(text.contains("refused SANDBOX_TOKEN"), "the log says why: {text}");
    assert!(!text.contains("prep_failed"), "no job was charged: {text}");
}

// ---- 3. downloads cut or stalled midway -----------------------------------

#[test]
fn i13_3_downloads_cut_or_stalled_midway_are_the_hub_away_not_the_job() {
    let (dir, hub) = hub_with_problems("f-cut");
    // More cuts than prep's three tries; the stall outlasts the idle timeout.
    hub.cli(&["fault", "--cut-after", "20", "--hang", "5", "--count", "1", "--path-contains", "/code/"]);
    hub.cli(&["fault", "--cut-after", "20", "--count", "2", "--path-contains", "/code/"]);
    hub.cli(&["fault", "--cut-after", "30", "--count", "4", "--path-contains", "/testdata"]);
    ab_judged_once_through_the_faults(&hub, dir.path());
}

// ---- 4. preps are independent ---------------------------------------------

#[test]
fn i13_4_a_prep_waiting_on_one_problem_never_holds_up_another() {
    let (dir, hub) = hub_with_problems("f-independent");
    hub.cli(&["fault", "--status", "500", "--count", "100000", "--path-contains", "/problem/1/"]);
    let stuck = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    wait_for("the first claim waiting in prep", Duration::from_secs(60), || {
        spool_claims(&spool).iter().any(|c| c.state == "claimed").then_some(())
    });
    let free = hub.submit(2, "c11", &examples().join("submissions/sum_ok.c"));
    wait_for("problem 2's job judged while problem 1 waits", Duration::from_secs(45), || {
        (hub.submission(&free)["state"] == "done").then_some(())
    });
    assert_ne!(hub.submission(&stuck)["state"], "done");
    hub.cli(&["fault", "--clear"]);
    hub.wait_all_judged(Duration::from_secs(120));
    assert_clean_ac(&hub.submission(&free));
    assert_clean_ac(&hub.submission(&stuck));
    drain(runner);
}

// ---- 5. and 6. a full disk -------------------------------------------------

#[test]
fn i13_5_a_full_disk_while_judging_is_never_read_as_a_lost_lease() {
    let dir = TempDir::new("f-beat");
    let hub = Hub::start(dir.path(), &[]);
    hub.add_problem(3, &one_case_problem(dir.path(), "one-case", 20000, "1 2\n", "3\n"));
    let disk = SmallDisk::mount(&dir.path().join("disk"), 32);
    let spool = disk.dir.join("spool");
    let sub = hub.submit(3, "python3", &slow_ab(dir.path(), 12.0));
    let runner = start_runner(&hub, &spool, &[]);
    wait_for("the job judging", Duration::from_secs(60), || {
        spool_claims(&spool).iter().any(|c| c.state == "started").then_some(())
    });
    disk.fill();
    let full_since = now_ms();
    // The lease the runner assumes is two 1 s heartbeats: beats noted well
    // past it, while the disk stays full.
    wait_for("heartbeats noted while the disk is full", Duration::from_secs(20), || {
        (spool_last_beat(&spool) >= full_since + 2500).then_some(())
    });
    assert!(spool_claims(&spool).iter().any(|c| c.state == "started"), "the claim is still judging");
    judged_once_when_freed(disk, &hub, &sub, runner);
}

/// Once the disk has room again, `sub` is judged AC, once; then the
/// runner drains.
fn judged_once_when_freed(disk: SmallDisk, hub: &Hub, sub: &str, runner: Proc) {
    disk.free();
    hub.wait_all_judged(Duration::from_secs(120));
    assert_clean_ac(&hub.submission(sub));
    drain(runner);
}

#[test]
fn i13_6_a_full_disk_pauses_claiming_and_status_still_reads_the_spool() {
    let (dir, hub) = hub_with_problems("f-claim-full");
    let disk = SmallDisk::mount(&dir.path().join("disk"), 32);
    let spool = disk.dir.join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    hub.wait_for_a_poll();
    disk.fill();
    let paused = wait_for("claimd to say claiming is paused", Duration::from_secs(30), || {
        stage_status(&spool, "claimd").filter(|s| s["paused"].is_string())
    });
    assert!(paused["paused"].as_str().unwrap().contains("full"), "{paused}");
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    // runnerd status reads the spool read-only, on a full disk too.
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", &spool).arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "runnerd status: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("\"paused\""), "{text}");
    // Nothing was asked for that could not be recorded.
    let s = hub.submission(&sub);
    assert_eq!((s["state"].as_str(), s["handouts"].as_i64()), (Some("pending"), Some(0)), "{s}");
    judged_once_when_freed(disk, &hub, &sub, runner);
}

// ---- 7. and 8. status and a second runnerd ---------------------------------

#[test]
fn i13_7_status_of_a_damaged_spool_says_so_and_fails() {
    let (dir, hub) = hub_with_problems("f-damaged");
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    wait_for("the runner registered", Duration::from_secs(30), || spool_runner_id(&spool));
    drain(runner);
    // Keep the header page (the schema version reads fine), spoil the rest.
    let db = spool.join("spool.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 4096, "a spool with tables past its first page");
    bytes[4096..].fill(0xa5);
    std::fs::write(&db, bytes).unwrap();
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", &spool).arg("status").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "runnerd status exited 0 on a damaged spool: {stdout}");
    assert!(stderr.contains("malformed") || stderr.contains("not a database"), "the error is printed: {stderr}");
    assert!(!stdout.contains("\"claims\""), "no empty runner printed: {stdout}");
}

#[test]
fn i13_8_a_refused_second_runnerd_writes_nothing() {
    let (dir, hub) = hub_with_problems("f-second");
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    wait_for("the runner ready", Duration::from_secs(30), || {
        stage_status(&spool, "runnerd").filter(|s| s["ready"] == true)
    });
    let latch = Command::new(bin("runnerd")).env("OJ_SPOOL", &spool).arg("latch").output().unwrap();
    assert!(latch.status.success());
    let mut second = start_stage(&hub, &spool, "runnerd", &[]);
    assert_ne!(second.wait_exit(Duration::from_secs(30)), 0, "the second runnerd is refused");
    assert_eq!(
        spool_int(&spool, "SELECT count(*) FROM control WHERE key = 'draining'"),
        Some(1),
        "the first runnerd's drain latch is still set"
    );
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", &spool).args(["latch", "--off"]).output().unwrap();
    assert!(out.status.success());
    drain(runner);
}

// ---- 9. zips the zip library misreads, refused at once ----------------------

/// Replaces problem `pid`'s testdata zip at the hub (and so its checksum).
fn serve_testdata(hub: &Hub, pid: i64, zip: &[u8]) {
    let c = rusqlite::Connection::open(&hub.db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c.execute(
        "UPDATE problems SET testdata = ?1, checksum = ?2 WHERE id = ?3",
        rusqlite::params![zip, format!("spoiled{}", zip.len()), pid],
    )
    .unwrap();
}

/// A testdata zip for problem 1 whose `0000.in` is there twice, the second
/// giving a different sum (the zip writer refuses a name twice, so the
/// second name is patched in).
fn zip_with_a_name_twice() -> Vec<u8> {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default();
    for (name, text) in [("0000.in", "1 2\n"), ("0000.out", "3\n"), ("0001.in", "2 2\n"), ("0001.out", "4\n")]
        .into_iter()
        .chain([("0002.in", "5 5\n"), ("0002.out", "10\n"), ("0000.xx", "50 50\n")])
    {
        z.start_file(name, o).unwrap();
        z.write_all(text.as_bytes()).unwrap();
    }
    let mut bytes = z.finish().unwrap().into_inner();
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(7).position(|w| w == b"0000.xx") {
        bytes[at + i..at + i + 7].copy_from_slice(b"0000.in");
        at += i + 7;
    }
    bytes
}

#[test]
fn i13_9_a_name_twice_in_a_zip_or_a_zip_that_is_none_is_refused_at_once() {
    let (dir, hub) = hub_with_problems("f-zip");
    serve_testdata(&hub, 1, &zip_with_a_name_twice());
    serve_testdata(&hub, 2, b"this is not a zip, it is a page from a proxy");
    let twice = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let none = hub.submit(2, "c11", &examples().join("submissions/sum_ok.c"));
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let runner = start_runner_logged(&hub, &spool, &[], &log);
    hub.wait_all_judged(Duration::from_secs(120));
    let text = log_text(&log);
    for (id, why) in
        [(&twice, "problem 1 testdata: entry \"0000.in\": appears twice"), (&none, "problem 2 testdata: not a zip")]
    {
        let s = hub.submission(id);
        assert_eq!(s["verdict"], "JE", "never judged against a misread zip: {s}");
        assert_eq!(s["completes"], 0, "{s}");
        assert!(s["aborts"].as_array().unwrap().iter().all(|a| a["reason"] == "prep_failed"), "{s}");
        assert!(text.contains(&format!("cannot be judged: {why}")), "the log says why ({why}): {text}");
    }
    assert!(!text.contains("prep try"), "a refused archive is not tried again: {text}");
    drain(runner);
}

// ---- 10. a next-job payload that does not parse ----------------------------

#[test]
fn i13_10_a_next_job_body_that_does_not_parse_says_what_is_wrong() {
    let (dir, hub) = hub_with_problems("f-payload");
    let numeric_id = r#"{"job_id": 42, "submission_id": "{{submission_id}}", "problem_id": 1, "language": 0,
        "code_url": "{{code_url}}", "tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 3}]}"#;
    let cut = r#"{"job_id": "{{job_id}}", "submission_id": "{{submission_id}}", "problem_id": 1, "tasks": [{"#;
    let code = examples().join("submissions/ab_ok.c");
    for raw in [numeric_id, cut] {
        hub.cli(&["submit", "--problem", "1", "--language", "c11", "--raw-job", raw, code.to_str().unwrap()]);
    }
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let runner = start_runner_logged(&hub, &spool, &[], &log);
    let text = wait_for("both payloads logged", Duration::from_secs(60), || {
        let t = log_text(&log);
        (t.contains("expected a string") && t.contains("EOF while parsing")).then_some(t)
    });
    assert!(!text.contains("without a job_id"), "{text}");
    drain(runner);
}

// ---- issue 23: a hub that lies ----------------------------------------------

/// A registration for a runner `hub` knows (its id and token are real), as
/// the answer the hub's next `register` sends instead of its own, with
/// `config` for the runner to obey.
fn lie_in_the_next_registration(hub: &Hub, name: &str, config: serde_json::Value) -> HandRunner {
    let me = HandRunner::register(&hub.url, name);
    let body = serde_json::json!({"runner_id": me.id, "token": me.token, "config": config}).to_string();
    hub.cli(&["fault", "--count", "1", "--path-contains", "/runners/register", "--status", "201", "--body", &body]);
    me
}

#[test]
fn i23_1_intervals_from_the_hub_past_any_sense_are_clamped_and_the_job_is_judged_once() {
    // The hub's lease is as long as its flag allows: only the runner's own
    // reading of the intervals can lose a job here.
    let dir = TempDir::new("f-intervals");
    let hub = Hub::start(dir.path(), &["--lease-ttl", "999999999999"]);
    hub.add_problem(1, &examples().join("problems/1"));
    let huge = i64::MAX;
    for (n, config) in [
        serde_json::json!({"heartbeat_interval_sec": huge, "poll_interval_sec": huge, "max_concurrent_jobs": huge}),
        serde_json::json!({"heartbeat_interval_sec": 0, "poll_interval_sec": 0, "max_concurrent_jobs": 0}),
        serde_json::json!({"heartbeat_interval_sec": -1, "poll_interval_sec": i64::MIN, "max_concurrent_jobs": -3}),
        serde_json::json!({"heartbeat_interval_sec": 1e300, "poll_interval_sec": "18446744073709551616"}),
    ]
    .into_iter()
    .enumerate()
    {
        lie_in_the_next_registration(&hub, &format!("liar-{n}"), config.clone());
        let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
        let log = dir.path().join(format!("runner-{n}.log"));
        let runner = start_runner_logged(&hub, &dir.path().join(format!("spool-{n}")), &[], &log);
        hub.wait_all_judged(Duration::from_secs(120));
        let s = hub.submission(&sub);
        assert_clean_ac(&hub.submission(&sub));
        let text = log_text(&log);
        assert!(!text.contains("lease lost"), "{config}: {s}\n{text}");
        drain(runner);
    }
}

#[test]
fn i23_3_a_job_id_holding_a_newline_forges_no_line_of_the_log() {
    let (dir, hub) = hub_with_problems("f-forge");
    let code = examples().join("submissions/ab_ok.c");
    // A newline, a carriage return, an ANSI escape and a C1 line break.
    let raw = r#"{"job_id": "{{job_id}}\nerror reportd: forged\r\u001b[2Jwarn claimd: forged\u0085", "submission_id": "{{submission_id}}",
        "problem_id": 1, "language": 0, "code_url": "{{code_url}}",
        "tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 3}]}"#;
    hub.cli(&["submit", "--problem", "1", "--language", "c11", "--raw-job", raw, code.to_str().unwrap()]);
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let runner = start_runner_logged(&hub, &spool, &[], &log);
    wait_for("the forged claim judged and its result sent", Duration::from_secs(90), || {
        spool_claims(&spool).iter().any(|c| c.state == "reported" || c.state == "discarded").then_some(())
    });
    drain(runner);
    let text = log_text(&log);
    assert!(text.contains("forged"), "the job id was logged: {text}");
    for line in text.lines() {
        assert!(!line.contains("forged") || line.contains("\\nerror reportd: forged\\r"), "a forged line: {line:?}");
        assert!(!line.contains(|c: char| c.is_control()), "a control character in {line:?}");
        let prefix = line.split_once(": ").map(|(p, _)| p).unwrap_or(line);
        let mut words = prefix.split(' ');
        assert!(
            matches!(words.next(), Some("error" | "warn" | "info" | "debug" | "trace")) && words.next().is_some(),
            "every line is a record of its own (level stage: message): {line:?}"
        );
    }
}

/// Gives the job of submission `sub` the id `new` at the hub (before any
/// runner sees it): a hub whose ids hold what URLs treat specially.
fn rename_job(hub: &Hub, sub: &str, new: &str) {
    let c = rusqlite::Connection::open(&hub.db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    let old: String = c.query_row("SELECT current_job FROM submissions WHERE id = ?1", [sub], |r| r.get(0)).unwrap();
    c.execute("UPDATE jobs SET id = ?1 WHERE id = ?2", [new, &old]).unwrap();
    c.execute("UPDATE submissions SET current_job = ?1 WHERE id = ?2", [new, sub]).unwrap();
}

#[test]
fn i23_2_job_ids_holding_what_urls_treat_specially_land_once() {
    let (dir, hub) = hub_with_problems("f-ids");
    let mut subs = Vec::new();
    for (n, tail) in ["#2", "/2", "?x=1", "%", "%2F..", " a b ", "日本\u{e9}", "/../../2", "\t\n"].iter().enumerate()
    {
        let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
        rename_job(&hub, &sub, &format!("jb_{n}{tail}"));
        subs.push(sub);
    }
    let runner = start_runner(&hub, &dir.path().join("spool"), &[]);
    hub.wait_all_judged(Duration::from_secs(180));
    for sub in &subs {
        assert_clean_ac(&hub.submission(sub));
    }
    drain(runner);
}

#[test]
fn i23_2_a_job_id_that_cannot_be_taken_is_refused_and_said_so() {
    let (dir, hub) = hub_with_problems("f-bad-ids");
    let long = format!("jb_{}", "x".repeat(300));
    let too_long = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    rename_job(&hub, &too_long, &long);
    let dots = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    rename_job(&hub, &dots, "..");
    let fine = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let log = dir.path().join("runner.log");
    let runner = start_runner_logged(&hub, &dir.path().join("spool"), &[], &log);
    hub.wait_all_judged(Duration::from_secs(120));
    assert_clean_ac(&hub.submission(&fine));
    // Carried, but refused: handed back at once as prep_failed, with why.
    let s = hub.submission(&too_long);
    assert_eq!(s["completes"], 0, "never judged: {s}");
    assert!(s["aborts"].as_array().unwrap().iter().all(|a| a["reason"] == "prep_failed"), "{s}");
    // No URL carries "..": not taken, and said so; the hub's lease ends it.
    let s = hub.submission(&dots);
    assert_eq!((s["completes"].as_i64(), s["aborts"].as_array().map(Vec::len)), (Some(0), Some(0)), "{s}");
    let text = log_text(&log);
    assert!(text.contains("longer than 256 bytes"), "{text}");
    assert!(text.contains("job_id \"..\": a dot segment"), "{text}");
    drain(runner);
}

#[test]
fn i23_4_a_token_no_header_can_carry_is_a_refused_registration_and_never_logged() {
    let (dir, hub) = hub_with_problems("f-token-header");
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    for (n, secret) in ["rk_x\r\nX-Injected: 1", "rk_secret\n", "rk_secret\u{1b}[31m", "rk_secr\u{e9}t", "rk_sec ret"]
        .iter()
        .enumerate()
    {
        let me = HandRunner::register(&hub.url, &format!("bad-token-{n}"));
        let body = serde_json::json!({"runner_id": me.id, "token": secret}).to_string();
        hub.cli(&["fault", "--count", "1", "--path-contains", "/runners/register", "--status", "201", "--body", &body]);
        let log = dir.path().join(format!("runner-{n}.log"));
        let mut runner = start_runner_logged(&hub, &dir.path().join(format!("spool-{n}")), &[], &log);
        assert_eq!(runner.wait_exit(Duration::from_secs(30)), 1, "{secret:?}: a refused registration exits 1");
        let text = log_text(&log);
        assert!(text.contains("cannot be sent as a header") && text.contains("taken as refused"), "{text}");
        assert!(!text.contains("rk_"), "{secret:?}: no token in the log: {text}");
        assert!(!text.contains("unreachable"), "{secret:?}: {text}");
    }
    let s = hub.submission(&sub);
    assert_eq!(s["handouts"], 0, "nothing claimed with an identity no call can use: {s}");
}

#[test]
fn i23_4_a_spool_whose_stored_token_no_header_can_carry_registers_again() {
    // A spool written before registrations were checked may hold such a
    // token: no call could carry it, so the runner forgets it and registers.
    let (dir, hub) = hub_with_problems("f-token-stored");
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    hub.wait_for_a_poll();
    drain(runner);
    let old = spool_runner_id(&spool).expect("registered");
    let db = rusqlite::Connection::open(spool.join("spool.db")).unwrap();
    db.execute("UPDATE identity SET token = 'rk_old\r\nX-Injected: 1'", []).unwrap();
    drop(db);
    let log = dir.path().join("runner.log");
    let runner = start_runner_logged(&hub, &spool, &[], &log);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let s = hub.wait_all_judged(Duration::from_secs(60));
    assert_eq!(s.iter().find(|s| s["submission_id"] == sub.as_str()).unwrap()["verdict"], "AC");
    assert_ne!(spool_runner_id(&spool).as_deref(), Some(old.as_str()), "a new identity");
    let text = log_text(&log);
    assert!(text.contains(&format!("the spool's identity {old} is unusable")), "{text}");
    assert!(!text.contains("rk_old"), "no token in the log: {text}");
    drain(runner);
}

// ---- issue 23, 6. a next-job body no parser reads, handed back at once ------

/// Three bodies that name a job and that no parser reads: a byte that is not
/// UTF-8 in `submission_id`, 100,000-deep nesting after the `job_id`, and a
/// 100 MB body (cut at the runner's 16 MiB). Each job is recorded and handed
/// back once as `abort(prep_failed)`, not left to its lease.
// See: issue 23, item 6.
#[test]
fn i23_6_a_next_job_body_no_parser_reads_is_handed_back_as_prep_failed_once() {
    let dir = TempDir::new("f-unreadable");
    let job = |id: &str, rest: &str| {
        format!(r#"{{"job_id": "{id}", "problem_id": 1, "language": 0, "code_url": "http://127.0.0.1:9/c.zip"{rest}"#)
    };
    let mut not_utf8 = job("jb_notutf8", r#", "submission_id": "65f"#).into_bytes();
    not_utf8.extend(b"\xff\"}");
    let deep = job("jb_deep", &format!(r#", "x": {}{}}}"#, "[".repeat(100_000), "]".repeat(100_000))).into_bytes();
    let mut huge = job("jb_huge", r#", "submission_id": "65f", "pad": ""#).into_bytes();
    huge.resize(100_000_000, b' ');
    huge.extend(b"\"}");
    let hub = ScriptedHub::start(vec![not_utf8, deep, huge]);
    let spool = dir.path().join("spool");
    let mut cmd = Command::new(bin("runnerd"));
    cmd.envs(runner_env_at(&hub.url, &spool));
    let log = dir.path().join("runner.log");
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let runner = Proc::of(cmd.spawn().unwrap(), "runnerd", None);
    let ids = ["jb_notutf8", "jb_deep", "jb_huge"];
    // Well inside a lease (30 s at a hub): handed back, not left to expire.
    wait_for("each job handed back", Duration::from_secs(30), || {
        ids.iter().all(|id| !hub.heard("PUT", &format!("/jobs/{id}/abort")).is_empty()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    for id in ids {
        let aborts = hub.heard("PUT", &format!("/jobs/{id}/abort"));
        assert_eq!(aborts.len(), 1, "{id}: handed back once: {aborts:?}");
        let body: serde_json::Value = serde_json::from_slice(&aborts[0].body).unwrap();
        assert_eq!(body["reason"], "prep_failed", "{id}: {body}");
        assert!(hub.heard("PUT", &format!("/jobs/{id}/complete")).is_empty(), "{id}: never judged");
    }
    let text = log_text(&log);
    for why in ["not UTF-8", "recursion limit", "over 16 MiB"] {
        assert!(text.contains(why), "the log says why ({why}): {text}");
    }
    assert!(!text.contains("no job recorded"), "{text}");
    drain(runner);
}

// ---- issue 23, 7. hostile files named by a user -----------------------------

/// Runs `cmd` for at most 20 s in at most 1 GiB of address space (a read of
/// `/dev/zero` to the end dies there); its exit code and stderr. A
/// program still running then (blocked on a FIFO) is killed and fails the
/// test, naming `what`.
fn bounded(what: &str, mut cmd: Command) -> (i32, String) {
    use std::os::unix::process::CommandExt;
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let gib = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            if libc::setrlimit(libc::RLIMIT_AS, &gib) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut proc = Proc::of(cmd.spawn().unwrap(), what, None);
    let mut err = proc.child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let started = std::time::Instant::now();
    while proc.running() {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}: still running after 20 s (hung)");
        std::thread::sleep(Duration::from_millis(50));
    }
    let code = proc.wait_exit(Duration::from_secs(1));
    (code, reader.join().unwrap())
}

/// Every file a user names is refused at once when it is a FIFO (nobody
/// writes it) or `/dev/zero`: the runner's token files and language table
/// (exit 100, a configuration to fix), hubd's token file (100), `hubd
/// submit` and `problem add` (1), `judge-exec run` (2).
// See: issue 23, item 7.
#[test]
fn i23_7_fifos_and_dev_zero_as_user_files_are_refused_at_once() {
    let dir = TempDir::new("f-userfiles");
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let zero = std::path::PathBuf::from("/dev/zero");
    for (n, hostile) in [&fifo, &zero].into_iter().enumerate() {
        let (h, kind) = (hostile.to_str().unwrap(), if n == 0 { "a FIFO" } else { "a character device" });
        for var in ["RUNNER_REGISTRATION_TOKEN_FILE", "SANDBOX_TOKEN_FILE", "OJ_LANGUAGES"] {
            let spool = dir.path().join(format!("spool-{n}-{var}"));
            let mut cmd = Command::new(bin("runnerd"));
            cmd.envs(runner_env_at("http://127.0.0.1:9", &spool)).env(var, h);
            let (code, err) = bounded(&format!("runnerd with {var}={h}"), cmd);
            assert_eq!(code, 100, "runnerd with {var}={h}: {err}");
            assert!(err.contains(h) && err.contains(kind), "runnerd with {var}={h} says why: {err}");
        }
        let db = dir.path().join(format!("hub-{n}.db"));
        let hubd = |args: &[&str]| {
            let mut cmd = Command::new(bin("hubd"));
            cmd.arg("--db").arg(&db).args(args);
            bounded(&format!("hubd {args:?}"), cmd)
        };
        let (code, err) = hubd(&["serve", "--listen", "127.0.0.1:0", "--registration-token-file", h]);
        assert_eq!(code, 100, "hubd serve: {err}");
        assert!(err.contains(kind), "hubd serve says why: {err}");
        let problem = dir.path().join(format!("problem-{n}"));
        std::fs::create_dir_all(&problem).unwrap();
        std::os::unix::fs::symlink(hostile, problem.join("meta.json")).unwrap();
        let (code, err) = hubd(&["problem", "add", "--id", "1", problem.to_str().unwrap()]);
        assert_eq!(code, 1, "hubd problem add: {err}");
        assert!(err.contains("meta.json") && err.contains(kind), "hubd problem add says why: {err}");
        let (code, err) = hubd(&["submit", "--problem", "1", "--language", "c11", h]);
        assert_eq!(code, 1, "hubd submit: {err}");
        assert!(err.contains(h) && err.contains(kind), "hubd submit says why: {err}");
        let mut cmd = Command::new(bin("judge-exec"));
        let tests = examples().join("problems/1");
        cmd.args(["run", "--lang", "c11", "--src", h, "--tests", tests.to_str().unwrap()]);
        let (code, err) = bounded("judge-exec run", cmd);
        assert_eq!(code, 2, "judge-exec run: {err}");
        assert!(err.contains(h) && err.contains(kind), "judge-exec run says why: {err}");
    }
}

// ---- a hub back from away takes a job's progress before its outcome -------

/// A claim's outcome is never sent while its progress events get no answer
/// at all: a hub coming back between the two would take the outcome first
/// and refuse the events after it (404). Past four failed tries of events
/// the hub did answer, the outcome goes anyway; unanswered, it waits.
#[test]
fn an_outcome_waits_while_its_events_get_no_answer_and_goes_after_them() {
    use ojrunner::protocol::{AbortReason, Registration, RunnerConfig};
    use std::sync::atomic::Ordering;
    let dir = TempDir::new("f-events-first");
    let spool_dir = dir.path().join("spool");
    let mut spool = ojrunner::spool::Spool::create(&spool_dir).unwrap();
    let me = Registration { runner_id: "rn_t".into(), token: "tk".into(), config: RunnerConfig::default() };
    spool.set_identity(&me).unwrap();
    let (claim, _) = spool.insert_claim("rn_t", "jb_t", "{}").unwrap();
    spool.add_event(claim, r#"{"t": 1, "kind": "note"}"#).unwrap();
    assert!(spool.abort(claim, AbortReason::Drain, "a test").unwrap());
    drop(spool);
    let hub = ScriptedHub::start(Vec::new());
    hub.events_unanswered.store(true, Ordering::SeqCst);
    let paths = || hub.heard.lock().unwrap().iter().map(|h| h.path.clone()).collect::<Vec<_>>();
    let log = dir.path().join("reportd.log");
    let mut cmd = Command::new(bin("reportd"));
    cmd.env("BACKEND_URL", &hub.url).env("OJ_SPOOL", &spool_dir).env("OJ_TIME_SCALE", "0.05");
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let reportd = Proc::of(cmd.spawn().unwrap(), "reportd", Some(&log));
    // Far past four tries of the events (1 + 2 + 4 + 8 s, scaled: 0.75 s),
    // or until the hub hears anything.
    wait_for("the events tried six times", Duration::from_secs(30), || {
        let tries = log_text(&log).matches("events: unreachable").count();
        (tries >= 6 || !paths().is_empty()).then_some(())
    });
    assert!(paths().is_empty(), "sent while its events got no answer: {:?}", paths());
    hub.events_unanswered.store(false, Ordering::SeqCst);
    let heard = wait_for("the outcome delivered", Duration::from_secs(30), || {
        let h = paths();
        h.iter().any(|p| p.ends_with("/abort")).then_some(h)
    });
    assert!(heard[0].ends_with("/events"), "the events first: {heard:?}");
    drop(reportd);
}
