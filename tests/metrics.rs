//! The runner's metrics and timings, end to end: a real `hubd`, a real
//! `runnerd` judging real submissions, `runnerd metrics` and `runnerd
//! status` reading the spool, and `--metrics-listen` serving them over HTTP;
//! and what both servers' pages say of themselves (their build, their
//! process, HEAD), linted by `promtool check metrics`.

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
    let (head, body) = exchange(addr, "GET", path);
    (head.lines().next().unwrap_or("").to_string(), body)
}

/// `METHOD path` on `addr`, the connection closed after the answer: its
/// head (status line and headers) and whatever followed it.
fn exchange(addr: &str, method: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head: {answer:?}"));
    (head.to_string(), body.to_string())
}

/// A header's value in an answer's head (names are case-insensitive).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `HEAD /metrics` on `addr` is answered as `GET` is, without the body.
fn assert_head_answered(addr: &str) {
    let (head, rest) = exchange(addr, "HEAD", "/metrics");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(header(&head, "content-type").is_some_and(|t| t.starts_with("text/plain; version=0.0.4")), "{head}");
    let length: usize = header(&head, "content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    assert!(length > 0, "the GET body's length: {head}");
    assert_eq!(rest, "", "no body");
}

/// The page says which process serves it, and that process is alive now:
/// started in the last hour, holding memory and descriptors.
fn assert_process_metrics(m: &BTreeMap<String, f64>, page: &str, whose: &str) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let start = value(m, "process_start_time_seconds");
    assert!(start > now - 3600.0 && start <= now + 2.0, "started at {start}, now {now}:\n{page}");
    assert!(value(m, "process_resident_memory_bytes") > 1e6, "{page}");
    assert!(value(m, "process_open_fds") >= 3.0, "{page}");
    assert!(page.contains(&format!("of {whose}, the process serving these metrics")), "{page}");
}

/// `promtool check metrics` finds no problem on `page`; false, said, when
/// there is no promtool (Debian: package `prometheus`).
fn promtool_lint(what: &str, page: &str) -> bool {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skip("no promtool (make deps installs prometheus)");
            return false;
        }
        Err(e) => panic!("promtool: {e}"),
    };
    child.stdin.take().unwrap().write_all(page.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool on {what}: {}\n{said}\n{page}", out.status);
    true
}

/// The address `runnerd --metrics-listen` logged it serves on.
fn served_at(s: &Scenario) -> String {
    wait_for("runnerd to serve its metrics", Duration::from_secs(60), || {
        let log = s.log();
        let at = log.find("metrics: serving http://")?;
        let rest = &log[at + "metrics: serving http://".len()..];
        Some(rest[..rest.find("/metrics")?].to_string())
    })
}

/// A runner of a new scenario named `tag` serving its page on a port of
/// its choosing; the address it serves at.
fn serving(tag: &str) -> (Scenario, Proc, String) {
    let s = scenario(tag, &[]);
    let listen = format!("{}:0", loopback());
    let runner = s.start_logged(&[("OJ_METRICS_LISTEN", &listen)]);
    let addr = served_at(&s);
    (s, runner, addr)
}

#[test]
fn judged_jobs_move_the_counters_the_verdicts_and_the_phase_histograms_served_and_printed() {
    let (s, runner, addr) = serving("metrics");
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

#[test]
fn the_runners_page_has_its_build_and_runnerds_process_and_head_is_answered() {
    let (s, runner, addr) = serving("metrics-build");
    let (status, page) = get(&addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    let m = parse(&page);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(m.get(&format!("ojrunner_build_info{{version=\"{version}\"}}")), Some(&1.0), "{page}");
    assert_process_metrics(&m, &page, "runnerd");
    // The process is the server's: `runnerd metrics` has none, its build the same.
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", &s.spool).arg("metrics").output().unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(!printed.contains("process_"), "{printed}");
    assert!(printed.contains(&format!("ojrunner_build_info{{version=\"{version}\"}} 1\n")), "{printed}");
    assert_head_answered(&addr);
    s.drain(runner);
}

/// A runner of a new scenario named `tag`, registered; its first page.
fn registered(tag: &str) -> (Scenario, Proc, BTreeMap<String, f64>) {
    let s = scenario(tag, &[]);
    let runner = s.start(&[]);
    wait_for("the runner to register", Duration::from_secs(60), || spool_runner_id(&s.spool));
    let m = runnerd_metrics(&s.spool);
    (s, runner, m)
}

/// Series known in advance are there at 0 before their first event, so
/// that `rate()` has a first point to start from.
#[test]
fn a_fresh_runners_page_has_every_known_series_at_0() {
    let (s, runner, m) = registered("metrics-zeros");
    for series in [
        "ojrunner_jobs_reported_total{outcome=\"abort\"}",
        "ojrunner_jobs_aborted_total{reason=\"prep_failed\"}",
        "ojrunner_jobs_discarded_total{reason=\"lease_lost\"}",
        "ojrunner_case_verdicts_total{verdict=\"TLE\"}",
        "ojrunner_hub_errors_total{call=\"heartbeat\",kind=\"http_5xx\"}",
        "ojrunner_hub_errors_total{call=\"complete\",kind=\"not_held\"}",
        "ojrunner_hub_errors_total{call=\"download\",kind=\"unusable\"}",
        "ojrunner_phase_seconds_count{phase=\"testdata\",cache=\"miss\"}",
        "ojrunner_phase_seconds_bucket{phase=\"case\",le=\"+Inf\"}",
        "ojrunner_phase_seconds_bucket{phase=\"code\",le=\"0.0005\"}",
        "ojrunner_phase_seconds_sum{phase=\"total\",outcome=\"complete\"}",
    ] {
        assert_eq!(m.get(series), Some(&0.0), "{series} at 0:\n{m:#?}");
    }
    // Only the pairs that can happen: a heartbeat is never held or not.
    assert_eq!(m.get("ojrunner_hub_errors_total{call=\"heartbeat\",kind=\"not_held\"}"), None);
    s.drain(runner);
}

/// Every stage at 0, then a stage killed is counted as its restart, and
/// no other's.
#[test]
fn a_stage_killed_and_started_again_is_counted_as_its_restart() {
    let (s, runner, m) = registered("metrics-restarts");
    for stage in ["leased", "reportd", "judge-exec", "claimd"] {
        let series = format!("ojrunner_stage_restarts_total{{stage=\"{stage}\"}}");
        assert_eq!(m.get(&series), Some(&0.0), "{series} at 0:\n{m:#?}");
    }
    kill_stage(&runner, "leased");
    let m = wait_for("the restart counted", Duration::from_secs(60), || {
        let m = runnerd_metrics(&s.spool);
        (value(&m, "ojrunner_stage_restarts_total{stage=\"leased\"}") == 1.0).then_some(m)
    });
    for stage in ["reportd", "judge-exec", "claimd"] {
        assert_eq!(value(&m, &format!("ojrunner_stage_restarts_total{{stage=\"{stage}\"}}")), 0.0, "{m:#?}");
    }
    s.drain(runner);
    let m = runnerd_metrics(&s.spool);
    assert_eq!(value(&m, "ojrunner_stage_restarts_total{stage=\"leased\"}"), 1.0, "a drain restarts none");
}

#[test]
fn the_hubs_page_has_its_build_and_hubds_process_and_head_is_answered() {
    let dir = TempDir::new("metrics-hub");
    let hub = Hub::start(dir.path(), &[]);
    let (status, page) = get(&hub.listen, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    let m = parse(&page);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(m.get(&format!("hubd_build_info{{version=\"{version}\"}}")), Some(&1.0), "{page}");
    assert_process_metrics(&m, &page, "hubd");
    assert_head_answered(&hub.listen);
    assert_eq!(hub.metric("hubd_requests_total"), 3.0, "HEAD is a request like another");
}

/// promtool's lint, on every page: the runner's served and printed after a
/// job judged (every kind of series then has samples), and the hub's.
#[test]
fn promtool_finds_no_problem_on_either_page() {
    if !promtool_lint("an empty page", "") {
        return;
    }
    let s = scenario("metrics-promtool", &[]);
    let listen = format!("{}:0", loopback());
    let runner = s.start_logged(&[("OJ_METRICS_LISTEN", &listen)]);
    let addr = served_at(&s);
    let sub = s.submit_ab();
    assert_eq!(s.judged(&sub, Duration::from_secs(120))["verdict"], "AC");
    let (_, served) = get(&addr, "/metrics");
    promtool_lint("the runner's page, served", &served);
    let out = Command::new(bin("runnerd")).env("OJ_SPOOL", &s.spool).arg("metrics").output().unwrap();
    promtool_lint("runnerd metrics", &String::from_utf8(out.stdout).unwrap());
    let (_, hub) = get(&s.hub.listen, "/metrics");
    promtool_lint("the hub's page", &hub);
    s.drain(runner);
}
