//! The runner's metrics and timings, end to end: a real `hubd`, a real
//! `runnerd` judging real submissions, `runnerd metrics` and `runnerd
//! status` reading the spool, and `--metrics-listen` serving them over HTTP.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use testkit::*;

/// Prometheus text as `name{labels}` → value (comments left out).
fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {l:?}"));
            (series.to_string(), value.parse().unwrap_or_else(|e| panic!("{l:?}: {e}")))
        })
        .collect()
}

/// `runnerd metrics` on `spool`: what it printed, parsed.
fn runnerd_metrics(spool: &Path) -> BTreeMap<String, f64> {
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", spool).arg("metrics").output().expect("run runnerd");
    assert!(out.status.success(), "runnerd metrics: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    parse(&String::from_utf8(out.stdout).expect("utf-8"))
}

/// A sample's value, 0 if absent.
fn value(m: &BTreeMap<String, f64>, series: &str) -> f64 {
    m.get(series).copied().unwrap_or(0.0)
}

/// `GET path` on `addr`: the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head: {answer:?}"));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

#[test]
fn judged_jobs_move_the_counters_the_verdicts_and_the_phase_histograms_served_and_printed() {
    let s = scenario("metrics", &[]);
    let listen = format!("{}:0", loopback());
    let runner = s.start_logged(&[("OJ_METRICS_LISTEN", &listen)]);
    let addr = wait_for("runnerd to serve its metrics", Duration::from_secs(60), || {
        let log = s.log();
        let at = log.find("metrics: serving http://")?;
        let rest = &log[at + "metrics: serving http://".len()..];
        Some(rest[..rest.find("/metrics")?].to_string())
    });
    wait_for("the runner to register", Duration::from_secs(60), || spool_runner_id(&s.spool));
    let before = runnerd_metrics(&s.spool);
    assert_eq!(value(&before, "ojrunner_jobs_claimed_total"), 0.0, "{before:?}");
    assert_eq!(value(&before, "ojrunner_jobs_judged_total"), 0.0);

    // One judged: a miss of the testdata cache. Then a second: a hit.
    for n in 1..=2 {
        let sub = s.submit_ab();
        assert_eq!(s.judged(&sub, Duration::from_secs(120))["verdict"], "AC");
        let reported = "ojrunner_jobs_reported_total{outcome=\"complete\"}";
        wait_for("the outcome to be settled in the spool", Duration::from_secs(60), || {
            (value(&runnerd_metrics(&s.spool), reported) == n as f64).then_some(())
        });
    }
    let m = runnerd_metrics(&s.spool);
    assert_eq!(value(&m, "ojrunner_jobs_claimed_total"), 2.0, "{m:?}");
    assert_eq!(value(&m, "ojrunner_jobs_judged_total"), 2.0);
    assert_eq!(value(&m, "ojrunner_case_verdicts_total{verdict=\"AC\"}"), 6.0, "three cases each");
    let count = |phase: &str| value(&m, &format!("ojrunner_phase_seconds_count{{{phase}}}"));
    assert_eq!(count("phase=\"case\""), 6.0);
    assert_eq!(count("phase=\"compile\""), 2.0);
    assert_eq!(count("phase=\"code\""), 2.0);
    assert_eq!(count("phase=\"testdata\",cache=\"miss\""), 1.0);
    assert_eq!(count("phase=\"testdata\",cache=\"hit\""), 1.0);
    assert_eq!(count("phase=\"total\",outcome=\"complete\""), 2.0);
    assert_eq!(value(&m, "ojrunner_phase_seconds_bucket{phase=\"case\",le=\"+Inf\"}"), 6.0);
    assert!(value(&m, "ojrunner_phase_seconds_sum{phase=\"compile\"}") > 0.0, "a compile takes time");
    assert_eq!(value(&m, "ojrunner_outbox_depth"), 0.0);
    assert_eq!(value(&m, "ojrunner_claims{state=\"reported\"}"), 2.0);

    // Served over HTTP, the same; a client that stalls does not stop it.
    let _stalled = TcpStream::connect(&addr).expect("connect");
    let (status, body) = get(&addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    let served = parse(&body);
    assert_eq!(value(&served, "ojrunner_jobs_judged_total"), 2.0, "{body}");
    assert_eq!(value(&served, "ojrunner_phase_seconds_count{phase=\"case\"}"), 6.0);
    assert!(get(&addr, "/").0.contains(" 404 "));

    // runnerd status: recent percentiles per phase.
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", &s.spool).arg("status").output().unwrap();
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let case = &first["phases"]["case"];
    assert_eq!(case["n"], 6, "{first}");
    let (p50, p99) = (case["p50_ms"].as_f64().unwrap(), case["p99_ms"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p99, "{case}");
    assert_eq!(first["phases"]["testdata:hit"]["n"], 1, "{first}");
    assert!(first["phases_window"].as_str().unwrap().contains("1000"), "{first}");

    // Stopped, the counters read the same.
    drain(runner);
    let after = runnerd_metrics(&s.spool);
    assert_eq!(value(&after, "ojrunner_jobs_claimed_total"), 2.0, "{after:?}");
    assert_eq!(value(&after, "ojrunner_case_verdicts_total{verdict=\"AC\"}"), 6.0);
}

#[test]
fn hub_errors_and_failed_lease_renewals_are_counted() {
    let s = scenario("metrics-hub-errors", &[]);
    let runner = s.start(&[]);
    wait_for("the runner to register", Duration::from_secs(60), || spool_runner_id(&s.spool));
    s.hub.cli(&["fault", "--status", "503", "--count", "3", "--path-contains", "heartbeat"]);
    let m = wait_for("three failed heartbeats counted", Duration::from_secs(60), || {
        let m = runnerd_metrics(&s.spool);
        (value(&m, "ojrunner_lease_renewals_failed_total") >= 3.0).then_some(m)
    });
    assert!(value(&m, "ojrunner_hub_errors_total{call=\"heartbeat\",kind=\"http_5xx\"}") >= 3.0, "{m:?}");
    s.drain(runner);
}

#[test]
fn a_metrics_address_that_is_not_host_port_is_bad_configuration() {
    let s = scenario("metrics-bad-listen", &[]);
    let mut runner = s.start(&[("OJ_METRICS_LISTEN", "not an address")]);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 100);
}
