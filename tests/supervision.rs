//! The service files in `etc/` under real supervisors: a real `runsvdir`
//! (runit) and a real `s6-svscan` (s6), each with the whole runner as one
//! service (`runnerd`) and with the split layout (one service per stage and
//! a drain script), plus systemd's notify protocol against a socket the test
//! opens itself (PID 1 here is not systemd), and `make install`.
//!
//! Every test copies the shipped files as they are into a scratch directory
//! and configures them the way an operator would: an envdir (`env/`) or an
//! env file made from `etc/ojrunner.env`, the programs from PATH (the built
//! ones first). Needs `runit` and `s6` (Debian packages; `.ci/run` installs
//! them).

use nix::sys::signal::Signal;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use testkit::*;

/// Every file in `etc/`, and the test that exercises it (checked below:
/// a file added to `etc/` without a test fails the suite).
const EXERCISED: &[(&str, &str)] = &[
    ("etc/hubd.env", "systemd_units_run_as_systemd_would_with_readiness_and_stopping_over_notify_socket"),
    ("etc/languages.json", "tests/manpages.rs and crates/protocol/src/languages.rs (compiled in)"),
    ("etc/ojrunner.env", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/ojrunner.env", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/ojrunner.env", "systemd_units_run_as_systemd_would_with_readiness_and_stopping_over_notify_socket"),
    ("etc/runit/runnerd/check", "runit_runnerd_judges_reports_readiness_by_check_and_drains_on_sv_down"),
    ("etc/runit/runnerd/finish", "runit_runnerd_with_a_bad_configuration_is_kept_down_by_finish"),
    ("etc/runit/runnerd/log/run", "runit_runnerd_judges_reports_readiness_by_check_and_drains_on_sv_down"),
    ("etc/runit/runnerd/run", "runit_runnerd_judges_reports_readiness_by_check_and_drains_on_sv_down"),
    ("etc/runit/shutdown", "runit_shutdown_hook_drains_runnerd_before_stage_3s_force_stop"),
    ("etc/runit/split/drain", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-claimd/finish", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-claimd/log/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-claimd/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-judge-exec/finish", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-judge-exec/log/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-judge-exec/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-leased/finish", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-leased/log/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-leased/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-reportd/finish", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-reportd/log/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/runit/split/ojrunner-reportd/run", "runit_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/runnerd/finish", "s6_runnerd_with_a_bad_configuration_is_kept_down_by_finish"),
    ("etc/s6/runnerd/log/run", "s6_runnerd_judges_reports_readiness_on_its_notification_fd_and_drains_on_svc_d"),
    (
        "etc/s6/runnerd/notification-fd",
        "s6_runnerd_judges_reports_readiness_on_its_notification_fd_and_drains_on_svc_d",
    ),
    ("etc/s6/runnerd/run", "s6_runnerd_judges_reports_readiness_on_its_notification_fd_and_drains_on_svc_d"),
    ("etc/s6/runnerd/timeout-kill", "stop_timeouts_are_longer_than_the_drain_timeout"),
    ("etc/s6/shutdown", "s6_shutdown_hook_drains_runnerd_before_the_final_kill"),
    ("etc/s6/split/drain", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-claimd/finish", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-claimd/log/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-claimd/notification-fd", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-claimd/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-claimd/timeout-kill", "stop_timeouts_are_longer_than_the_drain_timeout"),
    ("etc/s6/split/ojrunner-judge-exec/finish", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-judge-exec/log/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-judge-exec/notification-fd", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-judge-exec/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-judge-exec/timeout-kill", "stop_timeouts_are_longer_than_the_drain_timeout"),
    ("etc/s6/split/ojrunner-leased/finish", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-leased/log/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-leased/notification-fd", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-leased/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-leased/timeout-kill", "stop_timeouts_are_longer_than_the_drain_timeout"),
    ("etc/s6/split/ojrunner-reportd/finish", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-reportd/log/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-reportd/notification-fd", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-reportd/run", "s6_split_layout_drains_in_order_with_its_drain_script"),
    ("etc/s6/split/ojrunner-reportd/timeout-kill", "stop_timeouts_are_longer_than_the_drain_timeout"),
    ("etc/systemd/hubd.service", "systemd_units_run_as_systemd_would_with_readiness_and_stopping_over_notify_socket"),
    (
        "etc/systemd/runnerd.service",
        "systemd_units_run_as_systemd_would_with_readiness_and_stopping_over_notify_socket",
    ),
];

/// The split layout's services, in the order the drain stops them.
const SPLIT: [&str; 4] = ["claimd", "judge-exec", "reportd", "leased"];

/// Generous bounds on liveness (not measurements of speed).
const LIMIT: Duration = Duration::from_secs(60);

// ---- helpers -------------------------------------------------------------

fn etc() -> PathBuf {
    repo().join("etc")
}

/// PATH with the built binaries first: the service files take the
/// programs from PATH.
fn path_env() -> String {
    let rest = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into());
    format!("{}:{rest}", bin_dir().display())
}

/// Panics unless every tool is installed: the suite must not pass by
/// skipping what it is for.
fn need(tools: &[&str]) {
    for t in tools {
        let found = std::env::split_paths(&path_env()).any(|d| d.join(t).is_file());
        assert!(found, "{t} is not installed: apt-get install --no-install-recommends runit s6 (.ci/run does)");
    }
}

/// Runs a command with PATH set; its exit code and its output (stdout, then stderr).
fn run(cmd: &mut Command) -> (i32, String) {
    let out = cmd.env("PATH", path_env()).stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn sh(program: &str, args: &[&str]) -> (i32, String) {
    run(Command::new(program).args(args))
}

/// Copies a tree, keeping permission bits (the scripts stay executable).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Every file below `dir`, relative to `base`, sorted.
fn files_below(dir: &Path, base: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_below(&e.path(), base));
        } else {
            out.push(e.path().strip_prefix(base).unwrap().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// A scan directory in a new scratch directory named `tag`, holding the
/// service `tree` of etc/ with a configuration it must refuse (exit 100):
/// the scratch directory, the scan's path and the service's.
fn badly_configured(tag: &str, tree: &str) -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new(tag);
    let scan = dir.path().join("service");
    let svc = scan.join("runnerd");
    copy_tree(&etc().join(tree), &svc);
    let spool = dir.path().join("spool").to_string_lossy().into_owned();
    write_envdir(
        &svc.join("env"),
        &[
            ("BACKEND_URL".into(), "ftp://nowhere".into()),
            ("OJ_SPOOL".into(), spool),
            ("RUNNER_REGISTRATION_TOKEN".into(), "x".into()),
        ],
    );
    (dir, scan, svc)
}

/// An envdir: one file per variable (chpst -e, s6-envdir).
fn write_envdir(dir: &Path, vars: &[(String, String)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (k, v) in vars {
        std::fs::write(dir.join(k), format!("{v}\n")).unwrap();
    }
}

/// An env file made from a shipped example: each variable of `vars` must be
/// in the example (set or commented out) and gets the given value; the rest
/// of the example stays as it is.
fn env_file_from(example: &Path, vars: &[(String, String)], out: &Path) {
    let text = std::fs::read_to_string(example).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (k, v) in vars {
        let at = lines
            .iter()
            .position(|l| l.trim_start_matches('#').split_once('=').is_some_and(|(name, _)| name == k))
            .unwrap_or_else(|| panic!("{} has no {k}=", example.display()));
        lines[at] = format!("{k}={v}");
    }
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A runner's configuration for the service files, against `hub`.
fn runner_vars(hub: &Hub, spool: &Path) -> Vec<(String, String)> {
    let mut v = runner_env(hub, spool);
    v.push(("DRAIN_TIMEOUT_SEC".into(), "60".into()));
    // One job judging, the next waiting: a drain finds both kinds.
    v.push(("OJ_WORKERS".into(), "1".into()));
    v
}

/// The same, as an env file made from `etc/ojrunner.env`, with the
/// registration token in a file of its own (as the example suggests).
fn runner_env_file(hub: &Hub, spool: &Path, dir: &Path) -> PathBuf {
    let token = write_file(dir, "registration-token", &format!("{REGISTRATION_TOKEN}\n"));
    let mut vars: Vec<(String, String)> =
        runner_vars(hub, spool).into_iter().filter(|(k, _)| k != "RUNNER_REGISTRATION_TOKEN").collect();
    vars.push(("RUNNER_REGISTRATION_TOKEN_FILE".into(), token.to_string_lossy().into_owned()));
    // Not in the example: appended by hand, as an operator would.
    let by_hand = |k: &str| ["OJ_TIME_SCALE", "OJ_WORKERS", "OJ_SLOT_UID_BASE", "OJ_SLOT_LOCK_DIR"].contains(&k);
    let extra: Vec<(String, String)> = vars.iter().filter(|(k, _)| by_hand(k)).cloned().collect();
    vars.retain(|(k, _)| !by_hand(k));
    let out = dir.join("ojrunner.env");
    env_file_from(&etc().join("ojrunner.env"), &vars, &out);
    let mut text = std::fs::read_to_string(&out).unwrap();
    for (k, v) in extra {
        text.push_str(&format!("{k}={v}\n"));
    }
    std::fs::write(&out, text).unwrap();
    out
}

/// A Python program that sleeps, then prints nothing (WA): a job that is
/// surely in flight when the test stops the runner.
fn sleeper(dir: &Path, name: &str) -> PathBuf {
    write_file(dir, name, "import time\ntime.sleep(1.5)\n")
}

/// A scratch directory named `tag`, a hub in it with problem 1 and one
/// submission to be judged first, and the runner's spool's path.
fn hub_with_problem(tag: &str) -> (TempDir, Hub, String, PathBuf) {
    let sc = scenario(tag, &[]);
    let ok = sc.submit_ab();
    (sc.dir, sc.hub, ok, sc.spool)
}

/// The runner is up: the first submission is judged, once.
fn first_judged(hub: &Hub, ok: &str) {
    hub.wait_all_judged(LIMIT);
    assert_judged_once(hub, ok);
}

/// runnerd's log in `svc` once finish has logged its exit, after a drain:
/// it drained on SIGTERM and exited 0.
fn drained_log(svc: &Path) -> String {
    wait_for("finish to log runnerd's exit", LIMIT, || log_of(svc).contains("finish: runnerd exited").then_some(()));
    let log = log_of(svc);
    assert!(log.contains("runnerd: SIGTERM: draining"), "{log}");
    assert!(log.contains("drained: every job held was finished and reported"), "{log}");
    assert!(log.contains("finish: runnerd exited 0 (signal 0)"), "exit 0 after a drain: {log}");
    log
}

/// The first submission was judged AC, with exactly one complete.
fn assert_judged_once(hub: &Hub, id: &str) {
    let s = hub.submission(id);
    assert_eq!((s["state"].as_str(), s["verdict"].as_str()), (Some("done"), Some("AC")), "{s}");
    assert_eq!(s["complete_calls"], 1, "exactly one complete: {s}");
}

/// Two slow submissions; waits until one is judging and the other waits
/// (OJ_WORKERS=1), so that a stop now must finish one and hand back the other.
fn one_in_flight_one_waiting(hub: &Hub, dir: &Path, spool: &Path) -> (String, String) {
    let a = hub.submit(1, "python3", &sleeper(dir, "slow-a.py"));
    let b = hub.submit(1, "python3", &sleeper(dir, "slow-b.py"));
    wait_for("one claim judging and one waiting", LIMIT, || {
        let c = spool_claims(spool);
        let started = c.iter().filter(|c| c.state == "started").count();
        let waiting = c.iter().filter(|c| c.state == "prepped" || c.state == "claimed").count();
        (started == 1 && waiting == 1).then_some(())
    });
    (a, b)
}

/// After a drain: the job in flight was finished and reported once, the one
/// waiting went back as abort(drain) at no cost; nothing is lost or held.
fn assert_drained(hub: &Hub, spool: &Path, a: &str, b: &str) {
    let status = hub.status();
    let done: Vec<_> = status.iter().filter(|s| s["submission_id"] == a || s["submission_id"] == b).collect();
    let finished: Vec<_> = done.iter().filter(|s| s["state"] == "done").collect();
    let back: Vec<_> = done.iter().filter(|s| s["state"] == "pending").collect();
    assert_eq!((finished.len(), back.len()), (1, 1), "one finished, one handed back: {status:?}");
    assert_eq!(finished[0]["complete_calls"], 1, "{}", finished[0]);
    let aborts = back[0]["aborts"].as_array().unwrap();
    assert!(!aborts.is_empty() && aborts.iter().all(|x| x["reason"] == "drain"), "abort(drain): {}", back[0]);
    assert_eq!(back[0]["attempts"], 0, "a drain costs no attempt: {}", back[0]);
    for s in &status {
        assert!(s["leased_by"].is_null(), "nothing left leased to the runner: {s}");
    }
    let held: Vec<_> = spool_claims(spool)
        .into_iter()
        .filter(|c| ["claimed", "prepped", "started", "judged"].contains(&c.state.as_str()))
        .collect();
    assert!(held.is_empty(), "nothing held in the spool: {held:?}");
}

/// After the runner is back: every submission judged, each completed once.
fn assert_all_judged_once(hub: &Hub) {
    for s in hub.wait_all_judged(Duration::from_secs(120)) {
        assert_eq!(s["complete_calls"], 1, "exactly one complete each: {s}");
    }
}

/// `runnerd status`'s first line (the spool's view), parsed.
fn spool_status(spool: &Path) -> serde_json::Value {
    let (code, out) = run(Command::new("runnerd").args(["status"]).env("OJ_SPOOL", spool));
    assert_eq!(code, 0, "runnerd status: {out}");
    serde_json::from_str(out.lines().next().unwrap()).unwrap()
}

/// Whether every stage listens on its control socket (a connection is
/// accepted; claimd answers only between claim requests, so an answer is
/// not asked for). Err: what does not.
fn stages_listen(spool: &Path) -> Result<(), String> {
    let deaf: Vec<&str> = ["leased", "reportd", "judge-exec", "claimd"]
        .into_iter()
        .filter(|st| std::os::unix::net::UnixStream::connect(spool.join(format!("{st}.sock"))).is_err())
        .collect();
    if deaf.is_empty() {
        Ok(())
    } else {
        Err(format!("not listening: {deaf:?}"))
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The text of a service's log (svlogd's `current` or s6-log's).
fn log_of(service: &Path) -> String {
    read(&service.join("log/main/current"))
}

fn pids_of_children(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(close) = stat.rfind(')') else { continue };
        if stat[close + 2..].split(' ').nth(1).and_then(|p| p.parse::<i32>().ok()) == Some(parent) {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !read(Path::new(&format!("/proc/{pid}/stat"))).contains(") Z ")
}

// ---- runit -----------------------------------------------------------------

/// A `runsvdir` on a scratch directory, torn down on drop (every service
/// stopped and killed if need be, then runsvdir and its runsv children).
struct Runit {
    scan: PathBuf,
    proc: Proc,
}

impl Runit {
    fn start(scan: &Path, env: &[(&str, &str)]) -> Runit {
        need(&["runsvdir", "runsv", "sv", "svlogd", "chpst"]);
        let mut cmd = Command::new("runsvdir");
        cmd.arg(scan).env_clear().env("PATH", path_env()).envs(env.iter().copied());
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let proc = Proc::of(cmd.spawn().expect("spawn runsvdir"), "runsvdir", None);
        Runit { scan: scan.to_path_buf(), proc }
    }

    fn sv(&self, args: &[&str]) -> (i32, String) {
        run(Command::new("sv").args(args).env("SVDIR", &self.scan))
    }

    /// Waits until runsv supervises `svc` (and its log).
    fn wait_supervised(&self, svc: &str) {
        let d = self.scan.join(svc);
        wait_for(&format!("runsv to supervise {svc}"), LIMIT, || {
            (d.join("supervise/ok").exists() && d.join("log/supervise/ok").exists()).then_some(())
        });
    }

    /// runsv's want byte (`u` or `d`) and whether the service runs.
    fn state(&self, svc: &str) -> (char, bool) {
        let st = std::fs::read(self.scan.join(svc).join("supervise/status")).unwrap();
        let pid = u32::from_le_bytes([st[12], st[13], st[14], st[15]]);
        (st[17] as char, pid != 0)
    }
}

impl Drop for Runit {
    fn drop(&mut self) {
        // Each service moved out of the scan directory first (so runsvdir
        // does not start its runsv again), then stopped (killed after 10 s)
        // with its runsv; runsvdir reaps them; then runsvdir goes.
        let runsvs = pids_of_children(self.proc.pid());
        let attic = self.scan.with_extension("stopped");
        let _ = std::fs::create_dir_all(&attic);
        let services: Vec<PathBuf> = std::fs::read_dir(&self.scan)
            .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        for s in &services {
            let moved = attic.join(s.file_name().unwrap());
            let at = if std::fs::rename(s, &moved).is_ok() { moved } else { s.clone() };
            let _ = run(Command::new("sv").args(["-w", "10", "force-shutdown"]).arg(&at));
        }
        let reaped = |p: &i32| !Path::new(&format!("/proc/{p}")).exists();
        let end = std::time::Instant::now() + Duration::from_secs(15);
        while !runsvs.iter().all(reaped) && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        for p in runsvs.iter().filter(|p| alive(**p)) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), Signal::SIGKILL);
        }
        self.proc.signal(Signal::SIGTERM);
        let _ = self.proc.child.wait();
    }
}

#[test]
fn runit_runnerd_judges_reports_readiness_by_check_and_drains_on_sv_down() {
    let (dir, hub, ok, spool) = hub_with_problem("sup-runit");
    let (scan, svc) = runnerd_service("runit", &hub, &spool, dir.path());
    // Held down at first, so that ./check is seen failing, then passing.
    std::fs::write(svc.join("down"), "").unwrap();
    let runit = Runit::start(&scan, &[("OJRUNNER_ENV_FILE", "/nonexistent")]);
    runit.wait_supervised("runnerd");

    let check = || run(Command::new("./check").current_dir(&svc)).0;
    assert_eq!(check(), 1, "./check fails while runnerd does not run");
    // sv start runs ./check until it passes (runit's only readiness).
    let (code, out) = runit.sv(&["-w", "60", "start", "runnerd"]);
    assert_eq!(code, 0, "sv start: {out}");
    assert!(out.starts_with("ok: run:"), "{out}");
    assert_eq!(check(), 0, "./check passes once runnerd runs with every stage");
    assert_eq!(runit.sv(&["check", "runnerd"]).0, 0);

    first_judged(&hub, &ok);
    let (a, b) = one_in_flight_one_waiting(&hub, dir.path(), &spool);

    // sv down: TERM (then CONT) to runnerd, which drains and exits 0.
    let (code, out) = runit.sv(&["-w", "60", "down", "runnerd"]);
    assert_eq!(code, 0, "sv down: {out}");
    let log = drained_log(&svc);
    // svlogd stamps each line (-tt: 2026-11-29_20:02:59.06925).
    let first = log.lines().next().unwrap();
    assert!(first.as_bytes().get(10) == Some(&b'_') && first.starts_with("20"), "svlogd's stamp: {first}");
    assert_eq!(runit.state("runnerd"), ('d', false));
    assert_eq!(check(), 1, "./check fails once runnerd is down");
    assert_drained(&hub, &spool, &a, &b);

    // Up again: the runner takes what the drain handed back.
    assert_eq!(runit.sv(&["-w", "60", "start", "runnerd"]).0, 0);
    assert_all_judged_once(&hub);
}

#[test]
fn runit_runnerd_with_a_bad_configuration_is_kept_down_by_finish() {
    let (_dir, scan, svc) = badly_configured("sup-runit-bad", "runit/runnerd");
    let runit = Runit::start(&scan, &[("OJRUNNER_ENV_FILE", "/nonexistent")]);
    runit.wait_supervised("runnerd");
    wait_for("finish to take runnerd down", LIMIT, || (runit.state("runnerd") == ('d', false)).then_some(()));
    let log = log_of(&svc);
    assert!(log.contains("finish: runnerd exited 100"), "{log}");
    assert!(log.contains("keeping runnerd down"), "{log}");
    assert_eq!(log.matches("finish: runnerd exited").count(), 1, "run once, not restarted: {log}");
    let (_, out) = runit.sv(&["status", "runnerd"]);
    assert!(out.starts_with("down:") && out.contains("normally up") && !out.contains("want up"), "{out}");
}

#[test]
fn runit_split_layout_drains_in_order_with_its_drain_script() {
    let (dir, hub, ok, spool) = hub_with_problem("sup-runit-split");
    let (scan, conf) = split_layout("runit", &hub, &spool, dir.path());
    let runit = Runit::start(&scan, &[("OJRUNNER_ENV_FILE", &conf)]);
    for st in SPLIT {
        runit.wait_supervised(&format!("ojrunner-{st}"));
    }
    wait_for("every stage to answer", LIMIT, || stages_listen(&spool).ok());
    first_judged(&hub, &ok);
    let (a, b) = one_in_flight_one_waiting(&hub, dir.path(), &spool);

    run_drain_script("runit", &scan, &conf);
    for st in SPLIT {
        let svc = format!("ojrunner-{st}");
        assert_eq!(runit.state(&svc), ('d', false), "{svc} left down");
        let log = log_of(&scan.join(&svc));
        assert!(log.contains(&format!("finish: {st} exited 0 (signal 0)")), "{svc}: {log}");
    }
    assert!(log_of(&scan.join("ojrunner-claimd")).contains("claims not started go back"));
    assert_eq!(spool_status(&spool)["draining"], true, "the latch stays until claimd starts again");
    assert_drained(&hub, &spool, &a, &b);

    // Up again (claimd lifts the latch): the rest is judged.
    for st in SPLIT {
        assert_eq!(runit.sv(&["up", &format!("ojrunner-{st}")]).0, 0);
    }
    assert_all_judged_once(&hub);
    assert_eq!(spool_status(&spool)["draining"], false);
}

/// A reboot under runit: a job judging, then the shutdown hook as stage 3
/// would run it first, then stage 3's own `sv force-stop` (7 s, then KILL).
/// The hook drains: the job is judged and reported once, on one hand-out.
#[test]
fn runit_shutdown_hook_drains_runnerd_before_stage_3s_force_stop() {
    let (dir, hub, ok, spool) = hub_with_problem("sup-runit-shutdown");
    let (scan, svc) = runnerd_service("runit", &hub, &spool, dir.path());
    let runit = Runit::start(&scan, &[("OJRUNNER_ENV_FILE", "/nonexistent")]);
    runit.wait_supervised("runnerd");
    assert_eq!(runit.sv(&["-w", "60", "start", "runnerd"]).0, 0);
    first_judged(&hub, &ok);
    let sub = job_outlasting_force_stop(&hub, dir.path(), &spool);

    let took = run_shutdown_hook("runit", &scan);
    assert_eq!(runit.state("runnerd"), ('d', false), "down once the hook returns");
    let (code, out) = run(Command::new("sv").args(["-w", "7", "force-stop"]).arg(&svc));
    assert_eq!((code, out.starts_with("ok: down:")), (0, true), "nothing left to kill: {out}");
    drained_log(&svc);
    assert_clean_ac(&hub.submission(&sub));
    assert!(took > Duration::from_secs(7), "the hook waited {took:?}: force-stop alone would have cut the drain");
}

/// A job that judges longer than stage 3's 7 s (three cases of 2.5 s, one
/// worker), once it is judging; its submission id.
fn job_outlasting_force_stop(hub: &Hub, dir: &Path, spool: &Path) -> String {
    let sub = hub.submit(1, "python3", &slow_ab(dir, 2.5));
    judging_claim(spool);
    sub
}

/// Runs `supervisor`'s shutdown hook on `scan`, as the init's shutdown
/// would (its configuration in each service's env/); checks that it said
/// what it drained; how long it took.
fn run_shutdown_hook(supervisor: &str, scan: &Path) -> Duration {
    let begun = std::time::Instant::now();
    let mut hook = Command::new(etc().join(format!("{supervisor}/shutdown")));
    hook.arg(scan).env("OJRUNNER_ENV_FILE", "/nonexistent");
    let (code, out) = run(&mut hook);
    assert_eq!(code, 0, "the shutdown hook: {out}");
    assert!(out.contains(&format!("ojrunner: draining {}/runnerd (at most 60 s)", scan.display())), "{out}");
    begun.elapsed()
}

/// The runnerd service of `supervisor` (`runit` or `s6`) laid out for a
/// test in `dir`: copied from etc/ into a scan directory, its env/ made
/// from the runner's settings; the scan directory and the service's.
fn runnerd_service(supervisor: &str, hub: &Hub, spool: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let scan = dir.join("service");
    let svc = scan.join("runnerd");
    copy_tree(&etc().join(format!("{supervisor}/runnerd")), &svc);
    write_envdir(&svc.join("env"), &runner_vars(hub, spool));
    (scan, svc)
}

/// The split layout of `supervisor` (`runit` or `s6`) laid out for a test
/// in `dir`: a scan directory with a service per stage, copied from etc/,
/// and the configuration the services read as a file, made from the
/// shipped example; both paths.
fn split_layout(supervisor: &str, hub: &Hub, spool: &Path, dir: &Path) -> (PathBuf, String) {
    let scan = dir.join("service");
    for st in SPLIT {
        copy_tree(&etc().join(format!("{supervisor}/split/ojrunner-{st}")), &scan.join(format!("ojrunner-{st}")));
    }
    (scan, runner_env_file(hub, spool, dir).to_string_lossy().into_owned())
}

/// Runs the drain script of `supervisor`'s split layout on `scan`: it
/// exits 0 and says what it did, in the drain's order.
fn run_drain_script(supervisor: &str, scan: &Path, conf: &str) {
    let mut drain = Command::new(etc().join(format!("{supervisor}/split/drain")));
    drain.arg(scan).env("OJRUNNER_ENV_FILE", conf);
    let (code, out) = run(&mut drain);
    assert_eq!(code, 0, "the drain script: {out}");
    assert_drain_order(&out);
}

/// The drain script said what it did, in the drain's order.
fn assert_drain_order(out: &str) {
    let steps = [
        "latched",
        "claimd down",
        "no claim in flight",
        "judge-exec down",
        "outbox empty",
        "reportd down",
        "leased down",
        "drained",
    ];
    let mut at = 0;
    for s in steps {
        let i = out[at..]
            .find(&format!("drain: {s}"))
            .unwrap_or_else(|| panic!("no {s:?} after the steps before it: {out}"));
        at += i + 1;
    }
}

// ---- s6 --------------------------------------------------------------------

/// An `s6-svscan` on a scratch directory, torn down on drop.
struct S6 {
    scan: PathBuf,
    proc: Proc,
}

impl S6 {
    fn start(scan: &Path, env: &[(&str, &str)]) -> S6 {
        need(&["s6-svscan", "s6-supervise", "s6-svc", "s6-svwait", "s6-svstat", "s6-log", "s6-envdir", "s6-svscanctl"]);
        let mut cmd = Command::new("s6-svscan");
        cmd.arg(scan).env_clear().env("PATH", path_env()).envs(env.iter().copied());
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let proc = Proc::of(cmd.spawn().expect("spawn s6-svscan"), "s6-svscan", None);
        S6 { scan: scan.to_path_buf(), proc }
    }

    /// s6-svstat -o FIELDS.
    fn stat(&self, svc: &str, fields: &str) -> String {
        let (code, out) = sh("s6-svstat", &["-o", fields, self.scan.join(svc).to_str().unwrap()]);
        assert_eq!(code, 0, "s6-svstat: {out}");
        out.trim().to_string()
    }

    /// The runnerd service of etc/s6 under a new s6-svscan, up and ready:
    /// runnerd writes to fd 3 once every stage listens (s6-svwait -U). The
    /// scan directory and the service's.
    fn runnerd(hub: &Hub, spool: &Path, dir: &Path) -> (S6, PathBuf, PathBuf) {
        let (scan, svc) = runnerd_service("s6", hub, spool, dir);
        let s6 = S6::start(&scan, &[("OJRUNNER_ENV_FILE", "/nonexistent")]);
        s6.wait_supervised("runnerd");
        let (code, out) = sh("s6-svwait", &["-U", "-t", "60000", svc.to_str().unwrap()]);
        assert_eq!(code, 0, "s6-svwait -U: {out}");
        (s6, scan, svc)
    }

    fn wait_supervised(&self, svc: &str) {
        let d = self.scan.join(svc);
        wait_for(&format!("s6-supervise to supervise {svc}"), LIMIT, || {
            (d.join("supervise/status").exists() && d.join("log/supervise/status").exists()).then_some(())
        });
    }
}

impl Drop for S6 {
    fn drop(&mut self) {
        if let Ok(r) = std::fs::read_dir(&self.scan) {
            for s in r.flatten().map(|e| e.path()).filter(|p| p.is_dir() && !p.ends_with(".s6-svscan")) {
                let _ = run(Command::new("s6-svc").args(["-d", "-k"]).arg(&s));
            }
        }
        let _ = run(Command::new("s6-svscanctl").arg("-t").arg(&self.scan));
        let end = std::time::Instant::now() + Duration::from_secs(15);
        while self.proc.running() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn s6_runnerd_judges_reports_readiness_on_its_notification_fd_and_drains_on_svc_d() {
    let (dir, hub, ok, spool) = hub_with_problem("sup-s6");
    let (s6, _, svc) = S6::runnerd(&hub, &spool, dir.path());
    assert_eq!(s6.stat("runnerd", "up,ready"), "true true");
    if let Err(out) = stages_listen(&spool) {
        panic!("ready means every stage listens: {out}");
    }
    first_judged(&hub, &ok);
    let (a, b) = one_in_flight_one_waiting(&hub, dir.path(), &spool);

    // s6-svc -d: TERM (then CONT) to runnerd, which drains and exits 0.
    let (code, out) = sh("s6-svc", &["-T", "60000", "-wD", "-d", svc.to_str().unwrap()]);
    assert_eq!(code, 0, "s6-svc -wD -d: {out}");
    assert_eq!(s6.stat("runnerd", "up,wantedup,exitcode"), "false false 0", "down after a clean drain");
    let log = drained_log(&svc);
    // s6-log's T: an ISO 8601 stamp.
    let first = log.lines().next().unwrap();
    assert!(
        first.as_bytes().get(10) == Some(&b' ') && first.as_bytes().get(4) == Some(&b'-'),
        "s6-log's stamp: {first}"
    );
    assert_drained(&hub, &spool, &a, &b);

    let (code, out) = sh("s6-svc", &["-T", "60000", "-wU", "-u", svc.to_str().unwrap()]);
    assert_eq!(code, 0, "s6-svc -wU -u: {out}");
    assert_all_judged_once(&hub);
}

/// A shutdown under s6-linux-init: a job judging, then the shutdown hook
/// as the first line of rc.shutdown, then what follows rc.shutdown (TERM,
/// and KILL after the grace time). The hook drains: the job is judged and
/// reported once, on one hand-out.
#[test]
fn s6_shutdown_hook_drains_runnerd_before_the_final_kill() {
    let (dir, hub, ok, spool) = hub_with_problem("sup-s6-shutdown");
    let (s6, scan, svc) = S6::runnerd(&hub, &spool, dir.path());
    first_judged(&hub, &ok);
    let sub = job_outlasting_force_stop(&hub, dir.path(), &spool);

    let took = run_shutdown_hook("s6", &scan);
    assert_eq!(s6.stat("runnerd", "up,wantedup,exitcode"), "false false 0", "drained and down");
    let (code, out) = sh("s6-svc", &["-T", "2000", "-wD", "-k", "-d", svc.to_str().unwrap()]);
    assert_eq!(code, 0, "nothing left to kill: {out}");
    assert_clean_ac(&hub.submission(&sub));
    assert!(took > Duration::from_secs(7), "the hook waited {took:?}: past the 2 s before the KILL below");
}

#[test]
fn s6_runnerd_with_a_bad_configuration_is_kept_down_by_finish() {
    let (_dir, scan, svc) = badly_configured("sup-s6-bad", "s6/runnerd");
    let s6 = S6::start(&scan, &[("OJRUNNER_ENV_FILE", "/nonexistent")]);
    s6.wait_supervised("runnerd");
    // finish exits 125: s6-supervise does not restart, and wants it down.
    wait_for("finish to keep runnerd down", LIMIT, || {
        (s6.stat("runnerd", "up,wantedup") == "false false").then_some(())
    });
    assert_eq!(s6.stat("runnerd", "exitcode"), "100");
    wait_for("the log to have the finish line", LIMIT, || log_of(&svc).contains("keeping runnerd down").then_some(()));
    let log = log_of(&svc);
    assert_eq!(log.matches("finish: runnerd exited 100").count(), 1, "run once, not restarted: {log}");
}

#[test]
fn s6_split_layout_drains_in_order_with_its_drain_script() {
    let (dir, hub, ok, spool) = hub_with_problem("sup-s6-split");
    let (scan, conf) = split_layout("s6", &hub, &spool, dir.path());
    let s6 = S6::start(&scan, &[("OJRUNNER_ENV_FILE", &conf)]);
    let dirs: Vec<String> =
        SPLIT.iter().map(|st| scan.join(format!("ojrunner-{st}")).to_string_lossy().into_owned()).collect();
    for st in SPLIT {
        s6.wait_supervised(&format!("ojrunner-{st}"));
    }
    // Each stage reports its own readiness on fd 3.
    let mut args = vec!["-U", "-a", "-t", "60000"];
    args.extend(dirs.iter().map(String::as_str));
    let (code, out) = sh("s6-svwait", &args);
    assert_eq!(code, 0, "s6-svwait -U -a: {out}");
    if let Err(out) = stages_listen(&spool) {
        panic!("ready means every stage listens: {out}");
    }
    first_judged(&hub, &ok);
    let (a, b) = one_in_flight_one_waiting(&hub, dir.path(), &spool);

    run_drain_script("s6", &scan, &conf);
    for st in SPLIT {
        let svc = format!("ojrunner-{st}");
        assert_eq!(s6.stat(&svc, "up,wantedup,exitcode"), "false false 0", "{svc} drained and left down");
        wait_for("the log to have the finish line", LIMIT, || {
            log_of(&scan.join(&svc)).contains("finish:").then_some(())
        });
        let log = log_of(&scan.join(&svc));
        assert!(log.contains(&format!("finish: {st} exited 0 (signal 0)")), "{svc}: {log}");
    }
    assert_drained(&hub, &spool, &a, &b);

    let mut args = vec!["-T", "60000", "-wU", "-u"];
    for d in &dirs {
        args.push(d);
        let (code, out) = sh("s6-svc", &args);
        assert_eq!(code, 0, "s6-svc -wU -u {d}: {out}");
        args.pop();
    }
    assert_all_judged_once(&hub);
    assert_eq!(spool_status(&spool)["draining"], false, "claimd lifted the latch");
}

// ---- systemd ---------------------------------------------------------------

/// A unit file's `[Service]` section: (key, value) in order.
fn service_section(unit: &Path) -> Vec<(String, String)> {
    let text = read(unit);
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[Service]" {
            let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("{}: {line:?}", unit.display()));
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

fn directive<'a>(svc: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    svc.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
}

/// An EnvironmentFile= as systemd reads it (KEY=value lines, # comments).
fn read_env_file(path: &Path) -> Vec<(String, String)> {
    read(path)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{}: {l:?}", path.display()));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// What systemd would run for a unit: Environment=, then each
/// EnvironmentFile= (its path mapped by `files`), then ExecStart= with
/// ${VAR} expanded, the program looked up in PATH.
fn exec_start(unit: &Path, files: &[(&str, &Path)]) -> Command {
    let svc = service_section(unit);
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in &svc {
        match k.as_str() {
            "Environment" => {
                for a in v.split_whitespace() {
                    let (k, v) = a.split_once('=').unwrap();
                    env.push((k.into(), v.into()));
                }
            }
            "EnvironmentFile" => {
                let name = v.trim_start_matches('-');
                let (_, local) =
                    files.iter().find(|(f, _)| *f == name).unwrap_or_else(|| panic!("no stand-in for {name}"));
                env.extend(read_env_file(local));
            }
            _ => {}
        }
    }
    let line = directive(&svc, "ExecStart");
    assert_eq!(line.len(), 1, "one ExecStart=");
    let words: Vec<String> = line[0]
        .split_whitespace()
        .map(|w| {
            let mut w = w.to_string();
            for (k, v) in env.iter().rev() {
                w = w.replace(&format!("${{{k}}}"), v);
            }
            assert!(!w.contains('$'), "{w}: unset variable in ExecStart");
            w
        })
        .collect();
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..]).env_clear().env("PATH", path_env()).envs(env);
    cmd
}

/// systemd's side of the notify protocol: a datagram socket of our own.
struct NotifySocket {
    sock: std::os::unix::net::UnixDatagram,
    path: PathBuf,
}

impl NotifySocket {
    fn new(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        NotifySocket { sock, path }
    }

    /// Reads messages until one holds `want` (others, EXTEND_TIMEOUT_USEC
    /// say, are kept); panics after `limit`.
    fn expect(&self, want: &str, limit: Duration, seen: &mut Vec<String>) {
        let end = std::time::Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "no {want} within {limit:?}; got {seen:?}");
            self.sock.set_read_timeout(Some(left)).unwrap();
            let mut buf = [0u8; 4096];
            match self.sock.recv(&mut buf) {
                Ok(n) => {
                    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let hit = msg.lines().any(|l| l == want);
                    seen.push(msg);
                    if hit {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("notify socket: {e}"),
            }
        }
    }
}

#[test]
fn systemd_units_run_as_systemd_would_with_readiness_and_stopping_over_notify_socket() {
    let dir = TempDir::new("sup-systemd");
    let runnerd_unit = etc().join("systemd/runnerd.service");
    let hubd_unit = etc().join("systemd/hubd.service");
    let r = service_section(&runnerd_unit);
    for (k, v) in [
        ("Type", "notify"),
        ("NotifyAccess", "main"),
        ("KillMode", "mixed"),
        ("KillSignal", "SIGTERM"),
        ("Restart", "always"),
        ("RestartPreventExitStatus", "100"),
        ("EnvironmentFile", "/etc/ojrunner/ojrunner.env"),
        ("ExecStart", "runnerd"),
    ] {
        assert_eq!(directive(&r, k), [v], "runnerd.service: {k}=");
    }
    if let Some(verify) = std::env::split_paths(&path_env()).map(|d| d.join("systemd-analyze")).find(|p| p.is_file()) {
        // Offline lint; the programs are not installed, which it may say.
        let (_, out) = run(Command::new(verify).args(["verify", "--man=no"]).arg(&runnerd_unit).arg(&hubd_unit));
        let bad: Vec<_> = out.lines().filter(|l| !l.contains("is not executable")).collect();
        assert!(bad.is_empty(), "systemd-analyze verify: {out}");
    }

    // hubd.service, its secrets from etc/hubd.env; a port of the system's choosing.
    let db = dir.path().join("hub.db");
    let hub_env = dir.path().join("hubd.env");
    let vars =
        [("HUBD_DB".to_string(), db.to_string_lossy().into_owned()), ("HUBD_LISTEN".into(), "127.0.0.1:0".into())];
    env_file_from(&etc().join("hubd.env"), &vars, &hub_env);
    let h = service_section(&hubd_unit);
    assert_eq!(directive(&h, "Type"), ["notify"]);
    hub_cli(&db, &["problem", "add", "--id", "1", examples().join("problems/1").to_str().unwrap()]);
    let hub_notify_dir = dir.path().join("hubd-notify");
    std::fs::create_dir_all(&hub_notify_dir).unwrap();
    let hub_notify = NotifySocket::new(&hub_notify_dir);
    let mut cmd = exec_start(&hubd_unit, &[("/etc/ojrunner/hubd.env", &hub_env)]);
    cmd.env("NOTIFY_SOCKET", &hub_notify.path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut hubd = Proc::of(cmd.spawn().expect("hubd per hubd.service"), "hubd", None);
    hub_notify.expect("READY=1", LIMIT, &mut Vec::new());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(hubd.child.stdout.take().unwrap()), &mut line).unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://"), "{line:?}");

    // runnerd.service, its configuration from etc/ojrunner.env; the
    // secrets of the two examples agree, so the runner registers with
    // hubd.env's token.
    let hub_secrets: std::collections::HashMap<_, _> = read_env_file(&hub_env).into_iter().collect();
    let token = write_file(dir.path(), "registration-token", &hub_secrets["RUNNER_REGISTRATION_TOKEN"]);
    let spool = dir.path().join("spool");
    let conf = dir.path().join("ojrunner.env");
    let vars = [
        ("BACKEND_URL".to_string(), url.clone()),
        ("RUNNER_REGISTRATION_TOKEN_FILE".into(), token.to_string_lossy().into_owned()),
        ("OJ_SPOOL".into(), spool.to_string_lossy().into_owned()),
        ("DRAIN_TIMEOUT_SEC".into(), "60".into()),
    ];
    env_file_from(&etc().join("ojrunner.env"), &vars, &conf);
    let notify = NotifySocket::new(dir.path());
    let mut cmd = exec_start(&runnerd_unit, &[("/etc/ojrunner/ojrunner.env", &conf)]);
    cmd.env("NOTIFY_SOCKET", &notify.path).env("OJ_WORKERS", "1").env("OJ_TIME_SCALE", "0.1");
    // The suite's slot uids and the checkout's locks, as the other
    // supervisors' tests give them: never the host's defaults.
    cmd.envs(slot_env());
    let mut runner = Proc::of(cmd.spawn().expect("runnerd per runnerd.service"), "runnerd", None);
    let mut seen = Vec::new();
    notify.expect("READY=1", LIMIT, &mut seen);
    if let Err(out) = stages_listen(&spool) {
        panic!("READY=1 means every stage listens: {out}");
    }
    let hubdb = |args: &[&str]| hub_cli(&db, args);
    hubdb(&["submit", "--problem", "1", "--language", "c11", examples().join("submissions/ab_ok.c").to_str().unwrap()]);
    let status =
        || -> Vec<serde_json::Value> { hubdb(&["status"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect() };
    wait_for("the submission to be judged", LIMIT, || status().iter().all(|s| s["state"] == "done").then_some(()));
    hubdb(&["submit", "--problem", "1", "--language", "python3", sleeper(dir.path(), "slow.py").to_str().unwrap()]);
    wait_for("a claim judging", LIMIT, || spool_claims(&spool).iter().any(|c| c.state == "started").then_some(()));

    // KillMode=mixed: TERM to the main process alone.
    runner.signal(Signal::SIGTERM);
    notify.expect("STOPPING=1", Duration::from_secs(10), &mut seen);
    let timeout_stop: u64 = directive(&r, "TimeoutStopSec")[0].parse().unwrap();
    assert_eq!(runner.wait_exit(Duration::from_secs(timeout_stop)), 0, "a clean drain within TimeoutStopSec");
    assert_eq!(seen.iter().filter(|m| m.lines().any(|l| l == "READY=1")).count(), 1, "{seen:?}");
    for s in status() {
        assert_eq!((s["state"].as_str(), s["complete_calls"].as_i64()), (Some("done"), Some(1)), "judged once: {s}");
    }

    // A bad configuration exits 100, which the unit does not restart.
    let mut bad = exec_start(&runnerd_unit, &[("/etc/ojrunner/ojrunner.env", &conf)]);
    bad.env("BACKEND_URL", "ftp://nowhere").stderr(Stdio::null());
    assert_eq!(bad.status().unwrap().code(), Some(100));

    hubd.signal(Signal::SIGTERM);
    let hub_stop: u64 = directive(&h, "TimeoutStopSec")[0].parse().unwrap();
    assert_eq!(hubd.wait_exit(Duration::from_secs(hub_stop)), 0, "hubd stops cleanly on TERM");
}

// ---- the rest --------------------------------------------------------------

#[test]
fn stop_timeouts_are_longer_than_the_drain_timeout() {
    let drain: u64 = read_env_file(&etc().join("ojrunner.env"))
        .into_iter()
        .find(|(k, _)| k == "DRAIN_TIMEOUT_SEC")
        .map(|(_, v)| v.parse().unwrap())
        .expect("ojrunner.env sets DRAIN_TIMEOUT_SEC");
    assert_eq!(drain, 540, "the example shows the default");
    let unit = service_section(&etc().join("systemd/runnerd.service"));
    let stop: u64 = directive(&unit, "TimeoutStopSec")[0].parse().unwrap();
    assert!(stop > drain, "TimeoutStopSec={stop} must pass DRAIN_TIMEOUT_SEC={drain}");
    let mut dirs = vec![etc().join("s6/runnerd")];
    dirs.extend(SPLIT.iter().map(|st| etc().join(format!("s6/split/ojrunner-{st}"))));
    for d in dirs {
        let ms: u64 = read(&d.join("timeout-kill")).trim().parse().unwrap();
        assert!(ms > drain * 1000, "{}: timeout-kill {ms} ms must pass {drain} s", d.display());
        assert_eq!(read(&d.join("notification-fd")).trim(), "3");
        assert!(read(&d.join("run")).contains("--notify-fd 3"), "{}: run passes fd 3", d.display());
    }
}

#[test]
fn every_file_in_etc_is_exercised_by_a_test_and_every_script_is_executable_sh() {
    let listed: std::collections::BTreeSet<&str> = EXERCISED.iter().map(|(f, _)| *f).collect();
    let present: std::collections::BTreeSet<String> =
        files_below(&etc(), &repo()).into_iter().filter(|f| !f.ends_with('~')).collect();
    let present_ref: std::collections::BTreeSet<&str> = present.iter().map(String::as_str).collect();
    assert_eq!(present_ref, listed, "etc/ and the list of what the tests exercise differ");
    let me = include_str!("supervision.rs");
    for (file, by) in EXERCISED {
        if by.contains('/') {
            for f in by.split(" and ").map(|p| p.split_whitespace().next().unwrap()) {
                assert!(
                    read(&repo().join(f)).contains(file.trim_start_matches("etc/"))
                        || read(&repo().join(f)).contains(file),
                    "{f} uses {file}"
                );
            }
        } else {
            assert!(me.contains(&format!("fn {by}(")), "{file}: no test {by}");
        }
    }
    // Scripts: executable, POSIX sh that parses.
    for f in &present {
        let p = repo().join(f);
        let text = read(&p);
        if text.starts_with("#!") {
            assert!(text.starts_with("#!/bin/sh\n"), "{f}: #!/bin/sh");
            assert!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o111 == 0o111, "{f}: executable");
            let (code, out) = sh("sh", &["-n", p.to_str().unwrap()]);
            assert_eq!(code, 0, "{f}: {out}");
        }
    }
}

#[test]
fn the_readmes_two_commands_install_what_a_fresh_machine_lacks_first() {
    // `make demo` and `make test` run `make deps` before anything else.
    for target in ["demo", "test"] {
        let (code, plan) = run(Command::new("make").current_dir(repo()).args(["-n", target]));
        assert_eq!(code, 0, "make -n {target}: {plan}");
        let deps =
            plan.find("dpkg-query").unwrap_or_else(|| panic!("make {target} does not check the packages: {plan}"));
        assert!(plan.find("cargo").is_some_and(|c| c > deps), "make {target} builds before its deps: {plan}");
        for p in ["mandoc", "rustc", "runit", "s6"] {
            assert!(plan.contains(p), "make {target} does not install {p}: {plan}");
        }
    }
    // CI runs the README's test command, then the cgroup v2 guest's
    // (make test-cgroup2), then the lints, and nothing else; it installs
    // nothing itself.
    let ci = read(&repo().join(".ci/run"));
    let lines: Vec<&str> = ci.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
    assert_eq!(lines[lines.len().saturating_sub(3)..], ["make test", "make test-cgroup2", "make lint"], "{ci}");
    assert!(!ci.contains("apt-get"), ".ci/run installs on its own: {ci}");
}

/// What `make install PREFIX=/usr` writes for a shipped file of etc/: the
/// scripts' fallback PATH and the units' ExecStart= name PREFIX's programs.
fn installed_as(shipped: &str) -> String {
    shipped
        .replace(
            "PATH=$PATH:/usr/local/sbin:/usr/local/libexec/ojrunner\n",
            "PATH=$PATH:/usr/sbin:/usr/libexec/ojrunner\n",
        )
        .replace("\nExecStart=", "\nExecStart=/usr/sbin/")
}

#[test]
fn make_install_lays_out_programs_pages_examples_and_service_files_and_uninstall_removes_them() {
    // What it installs by default: release builds.
    let (code, plan) = run(Command::new("make").current_dir(repo()).args(["-n", "install", "DESTDIR=/nonexistent"]));
    assert_eq!(code, 0, "make -n install: {plan}");
    assert!(plan.contains("build --release") && plan.contains("target/release/$b"), "not release builds: {plan}");
    let dir = TempDir::new("sup-install");
    let dest = dir.path().join("dest");
    // CARGO=true: the suite runs on built binaries and never builds.
    let make = |target: &str| {
        run(Command::new("make")
            .current_dir(repo())
            .args(["-s", target, "PREFIX=/usr", "CARGO=true", "BUILT=target/debug"])
            .arg(format!("DESTDIR={}", dest.display())))
    };
    let (code, out) = make("install");
    assert_eq!(code, 0, "make install: {out}");
    let root = dest.join("usr");
    let executable = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o111 == 0o111).unwrap_or(false);
    // The daemons in sbin; the stages runnerd starts in libexec/ojrunner.
    for b in ["runnerd", "hubd"] {
        assert!(executable(&root.join("sbin").join(b)), "sbin/{b}");
    }
    for b in ["claimd", "judge-exec", "reportd", "leased"] {
        assert!(executable(&root.join("libexec/ojrunner").join(b)), "libexec/ojrunner/{b}");
    }
    assert!(!root.join("bin").exists(), "nothing in bin");
    // judge-exec is also run by hand: a link in sbin.
    let link = std::fs::read_link(root.join("sbin/judge-exec")).expect("sbin/judge-exec is a link");
    assert_eq!(link, Path::new("/usr/libexec/ojrunner/judge-exec"));
    for m in std::fs::read_dir(repo().join("man")).unwrap().flatten() {
        let name = m.file_name().to_string_lossy().into_owned();
        let section = name.rsplit('.').next().unwrap();
        assert!(root.join(format!("share/man/man{section}/{name}")).is_file(), "man page {name}");
    }
    let share = root.join("share/ojrunner");
    assert!(share.join("examples/problems/1/meta.json").is_file(), "examples");
    for unit in ["runnerd.service", "hubd.service"] {
        let installed = read(&root.join("lib/systemd/system").join(unit));
        assert_eq!(installed, installed_as(&read(&etc().join("systemd").join(unit))), "{unit}");
        let program = unit.trim_end_matches(".service");
        assert!(installed.contains(&format!("\nExecStart=/usr/sbin/{program}")), "{unit}: {installed}");
    }
    // Every other file of etc/, as shipped but for PREFIX's paths,
    // executable bits kept.
    for f in files_below(&etc(), &etc()).into_iter().filter(|f| !f.starts_with("systemd/")) {
        let (src, dst) = (etc().join(&f), share.join(&f));
        assert_eq!(read(&dst), installed_as(&read(&src)), "{f} installed in share/ojrunner");
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o111).unwrap_or(9);
        assert_eq!(mode(&dst), mode(&src), "{f}: mode");
    }

    // Installed runnerd finds its stages in ../libexec/ojrunner, with no
    // stage in PATH.
    let hub = Hub::start(dir.path(), &[]);
    let spool = dir.path().join("spool");
    let mut cmd = Command::new(root.join("sbin/runnerd"));
    cmd.envs(runner_env(&hub, &spool)).env("PATH", "/usr/bin:/bin").env_remove("OJ_LIBEXEC");
    let mut runner = Proc::spawn(&mut cmd, "runnerd");
    wait_for("every stage to listen", LIMIT, || stages_listen(&spool).ok());
    let stages: Vec<PathBuf> = pids_of_children(runner.pid())
        .iter()
        .filter_map(|p| std::fs::read_link(format!("/proc/{p}/exe")).ok())
        .collect();
    assert_eq!(stages.len(), 4, "{stages:?}");
    assert!(stages.iter().all(|e| e.starts_with(root.join("libexec/ojrunner"))), "{stages:?}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit(LIMIT), 0, "drained");

    // Uninstall leaves no file behind.
    let (code, out) = make("uninstall");
    assert_eq!(code, 0, "make uninstall: {out}");
    let left = files_below(&dest, &dest);
    assert!(left.is_empty(), "left by make uninstall: {left:?}");
    assert!(!share.exists() && !root.join("libexec/ojrunner").exists(), "ojrunner's own directories removed");
}
