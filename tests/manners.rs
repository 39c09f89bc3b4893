//! Daemon manners a supervisor relies on: readiness on a notification fd,
//! HUP reloads what can be reloaded, CONT is harmless, `runnerd status`
//! tells the runner's state.

#![deny(clippy::undocumented_unsafe_blocks)]

use nix::sys::signal::Signal;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use testkit::*;

/// The shipped language table without `name`.
fn table_without(name: &str) -> String {
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("etc/languages.json")).unwrap()).unwrap();
    t["languages"].as_array_mut().unwrap().retain(|l| l["name"] != name);
    t.to_string()
}

#[test]
fn sighup_reloads_the_language_table_sigcont_changes_nothing_and_no_secret_is_logged() {
    let Scenario { dir, hub, spool } = scenario("m-hup", &[]);
    let table = write_file(dir.path(), "languages.json", &table_without("python3"));
    let log = dir.path().join("runner.log");
    let table_env = table.to_str().unwrap().to_string();
    let mut runner = start_runner_logged(&hub, &spool, &[("OJ_LANGUAGES", &table_env)], &log);
    let before = hub.submit(1, "python3", &examples().join("submissions/ab_ok.py"));
    wait_for("python3 refused by the table", Duration::from_secs(60), || {
        (!hub.submission(&before)["aborts"].as_array().unwrap().is_empty()).then_some(())
    });
    // The operator adds python3 and says so.
    std::fs::copy(repo().join("etc/languages.json"), &table).unwrap();
    runner.signal(Signal::SIGHUP);
    wait_for("both stages to reload", Duration::from_secs(30), || {
        (std::fs::read_to_string(&log).unwrap_or_default().matches("language table").count() >= 2).then_some(())
    });
    runner.signal(Signal::SIGCONT);
    let after = hub.submit(1, "python3", &examples().join("submissions/ab_ok.py"));
    let s = wait_for("the new submission judged", Duration::from_secs(60), || {
        let s = hub.submission(&after);
        (s["state"] == "done").then_some(s)
    });
    assert_eq!(s["verdict"], "AC", "{s}");
    assert!(runner.running(), "HUP and CONT stopped nothing");
    // A testdata fetch that fails (its URL carries the token) is logged
    // without it; no secret is ever logged.
    hub.cli(&["fault", "--status", "500", "--count", "1", "--path-contains", "/checksum"]);
    let again = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    wait_for("the next submission judged", Duration::from_secs(60), || {
        (hub.submission(&again)["state"] == "done").then_some(())
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("prep again in"), "the failure was logged:\n{text}");
    let token: String = rusqlite::Connection::open(spool.join("spool.db"))
        .unwrap()
        .query_row("SELECT token FROM identity", [], |r| r.get(0))
        .unwrap();
    for secret in [REGISTRATION_TOKEN, TESTDATA_TOKEN, token.as_str()] {
        assert!(!text.contains(secret), "a secret in the log: {secret}");
    }
    drain(runner);
}

/// `runnerd status`: the spool's line, then one line per stage, parsed;
/// `None` if it failed (say, no spool yet).
fn runnerd_status(spool: &Path) -> Option<Vec<serde_json::Value>> {
    let out = Command::new(bin("runnerd")).arg("status").env("OJ_SPOOL", spool).output().unwrap();
    let lines = String::from_utf8(out.stdout).unwrap();
    out.status.success().then(|| lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

#[test]
fn every_stage_reports_readiness_on_its_notification_fd() {
    let dir = TempDir::new("m-ready");
    let hub = Hub::start(dir.path(), &[]);
    let spool = dir.path().join("spool");
    for stage in ["claimd", "leased", "reportd", "judge-exec", "runnerd"] {
        let (mut rd, wr) = std::io::pipe().unwrap();
        let fd = wr.as_raw_fd();
        let mut cmd = Command::new(bin(stage));
        cmd.envs(runner_env(&hub, &spool)).args(["--notify-fd", "3"]).stderr(Stdio::null());
        // SAFETY: dup2 in the child before exec, async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(wr);
        let mut p = Proc::of(child, stage, None);
        let mut got = Vec::new();
        // Ready is a newline, then the fd is closed: read to the end.
        let reader = std::thread::spawn(move || {
            let _ = rd.read_to_end(&mut got);
            got
        });
        wait_for(&format!("{stage} to report ready"), Duration::from_secs(30), || reader.is_finished().then_some(()));
        assert_eq!(reader.join().unwrap(), b"\n", "{stage} wrote one newline and closed the fd");
        assert!(p.running(), "{stage} is up when it says so");
        p.signal(Signal::SIGTERM);
        assert_eq!(p.wait_exit(Duration::from_secs(60)), 0, "{stage} stops cleanly");
    }
}

#[test]
fn claimd_answers_status_while_it_waits_on_the_hubs_long_poll() {
    // Idle, claimd spends nearly all its time in `next-job?wait=6`: a
    // status asked meanwhile must not wait for the poll to end (runnerd
    // gives each stage 3 s, so the polls are unscaled and longer).
    let dir = TempDir::new("m-longpoll");
    let hub = Hub::start(dir.path(), &[]);
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[("OJ_CLAIM_WAIT", "6"), ("OJ_TIME_SCALE", "1")]);
    let status = || runnerd_status(&spool)?.into_iter().find(|l| l["stage"] == "claimd");
    // Registered and polling: claimd says who it is.
    let first =
        wait_for("claimd registered", Duration::from_secs(60), || status().filter(|l| l["runner_id"].is_string()));
    assert!(first.get("error").is_none(), "{first}");
    for _ in 0..3 {
        // Asked while a poll has more than runnerd's 3 s to go (a status, ms).
        hub.wait_for_a_poll_lasting(Duration::from_millis(3500));
        let line = status().expect("no claimd line");
        assert!(line.get("error").is_none(), "claimd did not answer during its long poll: {line}");
        assert_eq!(line["draining"], false, "{line}");
    }
    // The drain reads the poll in flight to its end (6 s at most).
    drain(runner);
}

#[test]
fn sigquit_during_a_long_poll_stops_claimd_once_the_job_handed_out_is_recorded() {
    // The hub may hand a job to a poll in flight whether or not anyone still
    // reads the answer: claimd reads it, records the claim (the next claimd
    // prepares it), then stops; a poll is not cut short to lose a job.
    let Scenario { dir: _dir, hub, spool } = scenario("m-quitpoll", &[]);
    // Real time, and time to spare: were the poll to end while the fault is
    // set, the next poll's GET would take the 405 meant for the DELETE.
    let mut claimd = start_stage(&hub, &spool, "claimd", &[("OJ_CLAIM_WAIT", "30"), ("OJ_TIME_SCALE", "1")]);
    hub.wait_for_a_poll_lasting(Duration::from_secs(20));
    // A hub that cannot end the poll (claimd's DELETE is answered 405).
    hub.cli(&["fault", "--status", "405", "--count", "1", "--path-contains", "next-job"]);
    claimd.signal(Signal::SIGQUIT);
    // Still answering while it waits for the poll's end.
    let status = stage_status(&spool, "claimd").expect("claimd answers its control socket");
    assert_eq!(status["stage"], "claimd", "{status}");
    // The refusal is counted among the hub's errors, before there is a job
    // (else the poll could end with it before the cancel was sent).
    let refused = || -> i64 {
        rusqlite::Connection::open(spool.join("spool.db"))
            .and_then(|c| {
                c.query_row(
                    "SELECT value FROM counters WHERE name = 'ojrunner_hub_errors_total' AND labels = ?",
                    [r#"call="cancel_poll",kind="not_served""#],
                    |r| r.get(0),
                )
            })
            .unwrap_or(0)
    };
    testkit::wait_for("the hub's 405 to the cancel, counted", Duration::from_secs(20), || {
        (refused() == 1).then_some(())
    });
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    // The poll ends with the job (not 30 s later), and claimd stops.
    assert_eq!(claimd.wait_exit(Duration::from_secs(20)), 0, "claimd exits 0 once the poll is answered");
    assert_eq!(hub.submission(&sub)["handouts"], 1);
    let claims = spool_claims(&spool);
    assert_eq!(claims.len(), 1, "the job handed out is in the spool: {claims:?}");
    assert_eq!(claims[0].state, "claimed", "for the next claimd to prepare: {claims:?}");
    assert_eq!(refused(), 1, "the hub's 405 to the cancel, counted once");
}

#[test]
fn sigquit_during_a_long_poll_asks_the_hub_to_end_it() {
    let Scenario { dir: _dir, hub, spool } = scenario("m-quitcancel", &[]);
    let mut claimd = start_stage(&hub, &spool, "claimd", &[("OJ_CLAIM_WAIT", "30"), ("OJ_TIME_SCALE", "1")]);
    hub.wait_for_a_poll_lasting(Duration::from_secs(20));
    let asked = std::time::Instant::now();
    claimd.signal(Signal::SIGQUIT);
    assert_eq!(claimd.wait_exit(Duration::from_secs(60)), 0);
    // Liveness only: far below the 20 s the poll had left.
    assert!(asked.elapsed() < Duration::from_secs(10), "claimd waited the poll out: {:?}", asked.elapsed());
}

#[test]
fn runnerd_status_tells_the_identity_claims_leases_outbox_and_last_contact() {
    let Scenario { dir: _dir, hub, spool } = scenario("m-status", &[]);
    let runner = start_runner(&hub, &spool, &[]);
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    wait_for("the submission judged", Duration::from_secs(60), || {
        (hub.submission(&sub)["state"] == "done").then_some(())
    });
    // The hub has the outcome before reportd marks its claim reported.
    let lines = wait_for("the claim reported in the spool", Duration::from_secs(30), || {
        let lines = runnerd_status(&spool).expect("runnerd status failed");
        (lines[0]["claims"]["reported"] == 1).then_some(lines)
    });
    let spool_line = &lines[0];
    assert!(spool_line["runner_id"].as_str().unwrap().starts_with("rn_"), "{spool_line}");
    assert_eq!(spool_line["claims"]["reported"], 1, "{spool_line}");
    assert_eq!(spool_line["outbox"], 0, "{spool_line}");
    assert!(spool_line["held_jobs"].as_array().unwrap().is_empty(), "{spool_line}");
    assert!(spool_line["last_beat_at_ms"].as_i64().is_some(), "{spool_line}");
    let stage = |n: &str| lines.iter().find(|l| l["stage"] == n).unwrap_or_else(|| panic!("no {n} line")).clone();
    assert_eq!(stage("runnerd")["ready"], true);
    assert!(stage("leased")["last_beat"].as_str().unwrap().contains("204"), "{}", stage("leased"));
    assert_eq!(stage("reportd")["sent"], 1);
    drain(runner);
}

#[test]
fn leased_and_reportd_answer_and_stop_at_once_while_the_hub_hangs() {
    // A hub that takes connections and never answers (stopped): each request
    // waits out its 10 s timeout. Meanwhile leased and reportd answer their
    // control sockets (runnerd gives each 3 s), and a stop at once is at once.
    // Leases of minutes: however long the hub is stopped, the job stays ours.
    let Scenario { dir: _dir, hub, spool } = scenario("m-hang", &["--lease-ttl", "600", "--heartbeat-interval", "300"]);
    let start = |stage: &str| start_stage(&hub, &spool, stage, &[]);
    // Without reportd, the job is judged and its outcome waits in the outbox;
    // claimd goes before the hub stops, so that nothing claims it again.
    let (claimd, _judge) = (start("claimd"), start("judge-exec"));
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let queued = || spool_int(&spool, "SELECT COUNT(*) FROM outbox");
    wait_for("the outcome in the outbox", Duration::from_secs(60), || (queued() == Some(1)).then_some(()));
    drop(claimd);
    hub.proc.signal(Signal::SIGSTOP);
    let (mut reportd, mut leased) = (start("reportd"), start("leased"));
    let status = |stage: &str| stage_status(&spool, stage);
    // (The job's events go first, then its complete.)
    let r = wait_for("reportd to say a request is in flight", Duration::from_secs(30), || {
        status("reportd").filter(|s| !s["in_flight"].is_null())
    });
    assert!(r["in_flight"]["what"].as_str().unwrap().contains("claim 1"), "{r}");
    wait_for("leased to say a beat is in flight", Duration::from_secs(30), || {
        status("leased").filter(|s| !s["beat_in_flight_ms"].is_null())
    });
    // Not 10 s later, when the request times out: 5 s is for a slow machine.
    reportd.signal(Signal::SIGQUIT);
    assert_eq!(reportd.wait_exit(Duration::from_secs(5)), 0, "reportd stops at once");
    leased.signal(Signal::SIGTERM);
    // (Two signals sent at once may arrive as one: the second after the first.)
    wait_for("leased to say it is stopping", Duration::from_secs(10), || {
        status("leased").filter(|s| s["stopping"] == true && !s["beat_in_flight_ms"].is_null())
    });
    leased.signal(Signal::SIGTERM);
    assert_eq!(leased.wait_exit(Duration::from_secs(5)), 0, "leased stops at once on a second TERM");
    // The outcome stays in the spool; the hub back, the next reportd
    // delivers it, and the hub has it once (the abandoned request may have
    // reached it too: the second is a duplicate there).
    assert_eq!(queued(), Some(1), "the outcome left the spool undelivered");
    hub.proc.signal(Signal::SIGCONT);
    let _reportd = start("reportd");
    wait_for("the outbox to empty", Duration::from_secs(60), || (queued() == Some(0)).then_some(()));
    let claims = spool_claims(&spool);
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(claims[0].state, "reported", "delivered, not dropped: {claims:?}");
    assert_eq!(status("reportd").unwrap()["sent"], 1);
    let s = hub.submission(&sub);
    assert_eq!((s["verdict"].as_str(), s["completes"].as_i64()), (Some("AC"), Some(1)), "{s}");
}

#[test]
fn durations_are_decimal_seconds_and_a_bad_one_exits_100_naming_it() {
    let dir = TempDir::new("durations");
    let spool = dir.path().join("spool");
    // `runnerd drain` reads DRAIN_TIMEOUT_SEC, then asks a runnerd that is
    // not there: exit 1 once the value is taken, 100 if it is not.
    let drain = |value: &str| {
        let out = Command::new(bin("runnerd"))
            .args(["--spool", spool.to_str().unwrap(), "drain", "--wait"])
            .env("DRAIN_TIMEOUT_SEC", value)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for good in ["60", "60.0", "0.5"] {
        let (code, err) = drain(good);
        assert_eq!(code, Some(1), "DRAIN_TIMEOUT_SEC={good}: {err}");
    }
    for bad in ["sixty", "-1", "1e3"] {
        let (code, err) = drain(bad);
        assert_eq!(code, Some(100), "DRAIN_TIMEOUT_SEC={bad}: {err}");
        assert!(err.contains("DRAIN_TIMEOUT_SEC") && err.contains(&format!("{bad:?}")), "{err}");
    }
}
