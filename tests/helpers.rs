//! The sandbox helpers seen from outside: what a run leaves in its helper's
//! network namespace (sockets in flight included), cgroup and kept jail, a
//! namespace per run, what the probe says
//! of the helpers. These tests look at every helper of this process, or
//! change a setting the whole process shares: a binary of their own (a
//! plain `cargo test` runs the tests of one binary side by side, each
//! taking whichever helper is idle), and one test at a time.

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::sandbox;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use testkit::{is_root, skip, slot_spec, TempDir};

/// A test's turn, held for its whole length (one test at a time): `None`
/// without root, where there is no jail, cgroup or slot identity to look
/// at, and the test is skipped.
fn root_turn() -> Option<MutexGuard<'static, ()>> {
    static ONE: Mutex<()> = Mutex::new(());
    // A test that failed holding it poisons it; the next may still run.
    let one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        skip("the jail, the helpers' namespaces and cgroups and the slots' identities need root");
        return None;
    }
    Some(one)
}

#[test]
fn a_run_leaves_nothing_in_its_helpers_network_namespace_or_cgroup() {
    let Some(_one) = root_turn() else { return };
    use ojrunner::sandbox::Exit;
    let dir = TempDir::new("netns");
    // The first run listens on an abstract socket (it lives in the network
    // namespace) from a child that tries to outlive the run, and checks that
    // the namespace has no interface but a loopback that is down.
    let listen = r#"
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0ojrunner-netns-probe")
s.listen(1)
if os.fork() == 0:
    os.setsid()
    time.sleep(60)
    os._exit(0)
names = [l.split(":")[0].strip() for l in open("/proc/self/net/dev").read().splitlines()[2:]]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.connect(("127.0.0.1", 9))
    sys.exit(3)
except OSError as e:
    sys.exit(0 if names == ["lo"] and e.errno == 101 else 4)
"#;
    let connect = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0ojrunner-netns-probe")
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(5)
"#;
    let run = |script: &str| sandbox::run(slot_spec(&["/usr/bin/python3", "-c", script], dir.path(), 72, 64, 16));
    let first = run(listen).unwrap();
    assert_eq!(first.exit, Exit::Code(0), "a network in the jail (3: loopback up, 4: interfaces): {first:?}");
    let second = run(connect).unwrap();
    assert_eq!(second.exit, Exit::Code(0), "the next run reached the last one's socket (5): {second:?}");
    // An idle helper's cgroup is empty (the helper is never in it: each
    // run's init joins it), and goes with the helper (one test at a time in
    // a binary of its own: every helper here is idle).
    let groups = helper_groups();
    if sandbox::probe_mechanisms().cgroup.is_some() {
        assert!(!groups.is_empty(), "no helper cgroup of this process was found");
    }
    for (group, _) in &groups {
        // The helper reaps the run's init just after its answer.
        let empty = || std::fs::read_to_string(group.join("cgroup.procs")).unwrap().trim().is_empty().then_some(());
        testkit::wait_for(&format!("{} to be empty", group.display()), Duration::from_secs(10), empty);
    }
    ojrunner::sandbox::helper::shutdown();
    for (group, _) in &groups {
        assert!(!group.exists(), "{} outlived its helper", group.display());
    }
}

#[test]
fn a_socket_kept_alive_in_flight_is_not_left_to_the_next_run() {
    let Some(_one) = root_turn() else { return };
    use ojrunner::sandbox::Exit;
    let dir = TempDir::new("inflight");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    testkit::built_hostile("socket_in_flight.c", dir.path());
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    // One after another, in one helper (the idle ones are taken last in,
    // first out): each leaves its socket, and must find none left. Whether
    // a run's socket is still there when the next starts is the kernel's
    // collector's doing (Linux 6.1 often frees it as the run exits; 6.18
    // keeps it): either way the next run must not meet it, which is the
    // guarantee. Where it is kept (here), the helper moved to a new
    // namespace, and without that the second run prints "found".
    for n in 0..3 {
        let mut spec = slot_spec(&["./prog"], dir.path(), 72, 64, 16);
        spec.stdout = std::fs::File::create(&out).unwrap();
        spec.stderr = std::fs::File::create(&err).unwrap();
        let run = sandbox::run(spec).unwrap();
        let said = std::fs::read_to_string(&err).unwrap();
        assert_eq!(run.exit, Exit::Code(0), "{run:?} {said}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "clean\n", "run {n} met an earlier run's socket: {said}");
    }
}

#[test]
fn a_jailed_program_starts_with_sigpipe_at_its_default() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("sigign");
    let out = dir.path().join("out");
    // Ignored signals cross `exec`: a helper's (Rust ignores SIGPIPE before
    // `main`) would reach every program, which would outlive a closed pipe.
    let mut spec = slot_spec(&["/bin/grep", "^SigIgn:", "/proc/self/status"], dir.path(), 77, 64, 16);
    spec.stdout = std::fs::File::create(&out).unwrap();
    assert_eq!(sandbox::run(spec).unwrap().exit, sandbox::Exit::Code(0));
    let said = std::fs::read_to_string(&out).unwrap();
    let ignored = u64::from_str_radix(said.trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(ignored & 1 << (libc::SIGPIPE - 1), 0, "the program starts with SIGPIPE ignored: {said}");
}

#[test]
fn with_netns_per_run_each_run_has_a_network_namespace_of_its_own() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("netnsperrun");
    let out = dir.path().join("out");
    let netns_of_a_run = || {
        let mut spec = slot_spec(&["/bin/readlink", "/proc/self/ns/net"], dir.path(), 77, 64, 16);
        spec.stdout = std::fs::File::create(&out).unwrap();
        assert_eq!(sandbox::run(spec).unwrap().exit, sandbox::Exit::Code(0));
        std::fs::read_to_string(&out).unwrap()
    };
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    // By default, a run is in its helper's (the same for the next run).
    let (a, b) = (netns_of_a_run(), netns_of_a_run());
    assert_eq!(a, b, "two runs of one helper");
    assert_ne!(a.trim(), own.to_str().unwrap(), "a run in the judge's network namespace");
    // Off again when this test ends, passed or not: the next tests want
    // the default.
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            ojrunner::sandbox::set_netns_per_run(false);
        }
    }
    let _off = Off;
    sandbox::set_netns_per_run(true);
    let (c, d) = (netns_of_a_run(), netns_of_a_run());
    assert!(c != d && c != a && d != a, "not one namespace per run: {a} {c} {d}");
    assert_ne!(c.trim(), own.to_str().unwrap(), "a run in the judge's network namespace");
}

#[test]
fn the_probe_tells_what_the_helper_and_a_run_get() {
    let Some(_one) = root_turn() else { return };
    use ojrunner::sandbox::Exit;
    // `judge-exec --probe` with OJ_NETNS_PER_RUN set to `netns`, or unset.
    let probe_with = |netns: Option<&str>| {
        let mut c = std::process::Command::new(testkit::bin("judge-exec"));
        c.arg("--probe");
        match netns {
            Some(v) => c.env("OJ_NETNS_PER_RUN", v),
            None => c.env_remove("OJ_NETNS_PER_RUN"),
        };
        c.output().unwrap()
    };
    let out = probe_with(None);
    assert!(out.status.success(), "{out:?}");
    let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(probe["trial"]["ok"], true, "{probe}");
    // Every language of the table, its toolchain found or missing.
    use ojrunner::language::Toolchain;
    let table = ojrunner::language::Languages::builtin();
    let listed = probe["languages"].as_array().unwrap_or_else(|| panic!("no languages: {probe}"));
    assert_eq!(listed.len(), table.all().len(), "{probe}");
    for (l, p) in table.all().iter().zip(listed) {
        assert_eq!(p["name"], l.name.as_str(), "{p}");
        assert_eq!(p["toolchain"], if l.missing().is_empty() { "found" } else { "missing" }, "{p}");
    }
    if probe["network_namespace"] != serde_json::Value::Null {
        assert_eq!(probe["network_namespace"], "per helper, empty", "{probe}");
        let per_run: serde_json::Value = serde_json::from_slice(&probe_with(Some("1")).stdout).unwrap();
        assert_eq!(per_run["network_namespace"], "per run", "{per_run}");
        assert_eq!(per_run["trial"]["ok"], true, "{per_run}");
        // A value that is no boolean is a usage error, named, not a default.
        let out = probe_with(Some("perhaps"));
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--netns-per-run"), "{out:?}");
    }
    let m = sandbox::probe_mechanisms();
    assert_eq!(probe["cgroup"].is_null(), m.cgroup.is_none(), "{probe}");
    if !m.namespaces || m.cgroup.is_none() {
        assert!(probe["oom_score_adj"].is_null(), "{probe}");
        return;
    }
    // What the probe says is what a run and this process's helper have.
    let dir = TempDir::new("probe");
    let script = "read a < /proc/self/oom_score_adj; test \"$a\" = 1000";
    let run = sandbox::run(slot_spec(&["/bin/sh", "-c", script], dir.path(), 73, 64, 16)).unwrap();
    assert_eq!(run.exit, Exit::Code(0), "a run's oom_score_adj is not 1000");
    assert_eq!(probe["oom_score_adj"]["runs"], 1000, "{probe}");
    let helpers = helper_groups();
    assert!(!helpers.is_empty(), "no helper of this process was found");
    for (_, pid) in helpers {
        let adj = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).unwrap();
        assert_eq!(adj.trim(), probe["oom_score_adj"]["helper"].to_string(), "helper {pid}: {probe}");
    }
}

/// The cgroups of this process's sandbox helpers (v1: one controller's,
/// every task being in all; v2: the one), each with the helper's pid.
fn helper_groups() -> Vec<(PathBuf, u32)> {
    let me = std::process::id();
    let parent_of = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(") ").and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
    };
    let mut groups: Vec<(PathBuf, u32)> = testkit::runs_cgroups()
        .into_iter()
        .filter_map(|g| {
            let pid: u32 = g.file_name()?.to_str()?.strip_prefix("helper-")?.parse().ok()?;
            (parent_of(pid) == Some(me)).then_some((g, pid))
        })
        .collect();
    groups.sort_by_key(|&(_, pid)| pid);
    groups.dedup_by_key(|&mut (_, pid)| pid);
    groups
}

#[test]
fn the_slot_uid_base_and_lock_directory_are_settings() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("slotsettings");
    let locks = dir.path().join("locks");
    let probe = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = std::process::Command::new(testkit::bin("judge-exec"));
        c.env_remove("OJ_SLOT_UID_BASE").env_remove("OJ_SLOT_LOCK_DIR").args(args).arg("--probe");
        c.envs(env.iter().copied());
        c.output().unwrap()
    };
    let base = 1_234_000u32;
    let locks_s = locks.to_str().unwrap();
    for (env, args) in [
        (vec![("OJ_SLOT_UID_BASE", "1234000"), ("OJ_SLOT_LOCK_DIR", locks_s)], vec![]),
        (vec![], vec!["--slot-uid-base", "1234000", "--slot-lock-dir", locks_s]),
    ] {
        let out = probe(&env, &args);
        assert!(out.status.success(), "{out:?}");
        let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(p["identity"], base, "{p}");
        assert_eq!(p["trial"]["ok"], true, "{p}");
        // The trial run took its slot's lock in the directory given.
        assert!(locks.join(format!("slot-{base}.lock")).exists(), "no lock in {}", locks.display());
        std::fs::remove_dir_all(&locks).unwrap();
    }
    let out = probe(&[("OJ_SLOT_UID_BASE", "12")], &[]);
    assert_eq!(out.status.code(), Some(2), "a base among the system's users is refused: {out:?}");
}

/// A program blocked on a full stdout waits on its reader (a judge slow on
/// a loaded host), not on itself: the idleness rule never ends it, jailed
/// (init looks at the pipe through the run's /proc) or at the basic level.
#[test]
fn a_program_blocked_on_output_nobody_has_read_yet_is_not_idle() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("unread");
    for jailed in [true, false] {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let slow_reader = std::thread::spawn(move || {
            // The reader comes back well past the CPU limit and the window.
            std::thread::sleep(Duration::from_millis(1500));
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut reader, &mut all).unwrap();
            all.len()
        });
        let mut spec = slot_spec(&["/usr/bin/head", "-c", "300000", "/dev/zero"], dir.path(), 77, 64, 16);
        if !jailed {
            spec.identity = None;
        }
        spec.stdout = std::fs::File::from(std::os::fd::OwnedFd::from(writer));
        spec.limits.cpu = Duration::from_millis(300);
        spec.limits.wall = Duration::from_secs(20);
        let watch = sandbox::Watch { idle: Some(Duration::from_millis(200)), ..sandbox::Watch::default() };
        let u = sandbox::run_watched(spec, watch).unwrap();
        assert_eq!((u.fired, u.exit), (None, sandbox::Exit::Code(0)), "jailed {jailed}: {u:?}");
        assert_eq!(slow_reader.join().unwrap(), 300_000, "jailed {jailed}");
    }
}

/// A run of `argv` as slot 70 (its own helper's, one at a time), its
/// directory `dir` seen at `/work`: its exit and its stdout.
fn run_at_work(dir: &std::path::Path, argv: &[&str]) -> (sandbox::Exit, String) {
    use std::io::{Read, Seek};
    let out = dir.join(format!("out-{}", argv.join("-").replace('/', "")));
    let file = std::fs::File::options().read(true).write(true).create(true).truncate(true).open(&out).unwrap();
    let mut spec = sandbox::Spec { stdout: file.try_clone().unwrap(), ..slot_spec(argv, dir, 70, 64, 16) };
    spec.binds[0].at = Some("/work".into());
    let u = sandbox::run(spec).unwrap();
    let (mut file, mut s) = (file, String::new());
    file.rewind().unwrap();
    file.read_to_string(&mut s).unwrap();
    (u.exit, s)
}

#[test]
fn what_a_run_leaves_in_its_helpers_kept_jail_is_gone_at_the_next_run() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("kept");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = testkit::repo().join("tests/hostile/kept_leftovers.c");
    let built =
        std::process::Command::new("cc").arg("-O2").arg("-o").arg(dir.path().join("leftovers")).arg(&src).status();
    assert!(built.unwrap().success(), "cc {}", src.display());
    let (exit, left) = run_at_work(dir.path(), &["./leftovers", "leave"]);
    assert_eq!(exit, sandbox::Exit::Code(0), "{left}");
    let (exit, seen) = run_at_work(dir.path(), &["./leftovers", "look"]);
    assert_eq!(exit, sandbox::Exit::Code(0), "{seen}");
    // The same IPC namespace (the kept jail, not a fresh one), and nothing
    // of the first run in it: /tmp's entries and space, System V objects,
    // message queues, processes.
    assert!(left.starts_with("ipc:["), "{left}");
    assert_eq!(seen, left, "the second run found the first's leftovers, or another jail");

    // A bind's directory removed and made again at the same path is the
    // new one in the next run, not the one the kept jail had attached.
    let data = dir.path().join("data");
    for mark in ["one", "two"] {
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(data.join("mark"), mark).unwrap();
        let (exit, said) = run_at_work(&data, &["/bin/cat", "/work/mark"]);
        assert_eq!((exit, said.as_str()), (sandbox::Exit::Code(0), mark));
    }
}

#[test]
fn a_helper_whose_keeper_was_killed_makes_a_new_kept_jail() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("keeper");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(run_at_work(dir.path(), &["/bin/true"]).0, sandbox::Exit::Code(0));
    // The keepers of this process's helpers: their children, PID 1 of a
    // namespace below the host's.
    let field = status_field;
    let me = std::process::id().to_string();
    let keepers: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|pid| {
            let helper = field(pid, "PPid:");
            helper.is_some_and(|h| field(&h, "PPid:") == Some(me.clone()))
                && field(pid, "NSpid:").is_some_and(|n| n.split_whitespace().collect::<Vec<_>>()[1..] == ["1"])
        })
        .collect();
    assert!(!keepers.is_empty(), "no keeper found below this process's helpers");
    for k in &keepers {
        // SAFETY: kill takes no pointer.
        unsafe { libc::kill(k.parse().unwrap(), libc::SIGKILL) };
    }
    testkit::wait_for("the keepers to die", Duration::from_secs(10), || {
        keepers.iter().all(|k| field(k, "State:").is_none_or(|s| s.starts_with('Z'))).then_some(())
    });
    // The next run, in the same helper, gets a new kept jail: not a JE.
    let (exit, said) = run_at_work(dir.path(), &["/bin/echo", "again"]);
    assert_eq!((exit, said.as_str()), (sandbox::Exit::Code(0), "again\n"));
}

#[test]
fn nothing_a_run_left_behind_is_alive_when_its_answer_comes() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("left-behind");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let uid = ojrunner::judge::Slot::for_index(70).uid;
    for _ in 0..5 {
        // Two sleepers left in the background, one in a session of its own.
        let (exit, said) = run_at_work(dir.path(), &["/bin/sh", "-c", "sleep 100 & setsid sleep 100 & echo left"]);
        // Looked at at once: not after the helper's cleanup that follows its reply.
        let alive = testkit::processes_of(uid);
        assert_eq!((exit, said.as_str()), (sandbox::Exit::Code(0), "left\n"));
        assert_eq!(alive, Vec::<i32>::new(), "processes of the run alive at its answer");
    }
}

#[test]
fn a_helper_that_served_many_runs_still_ends_a_busy_loop_at_its_cpu_limit() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("aged");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The helper's own CPU time grows with every run it serves: none of it
    // is the program's, nor may it delay the limit.
    for _ in 0..600 {
        assert_eq!(run_at_work(dir.path(), &["/bin/true"]).0, sandbox::Exit::Code(0));
    }
    let mut spec = slot_spec(&["/bin/sh", "-c", "while :; do :; done"], dir.path(), 70, 64, 16);
    spec.limits.cpu = Duration::from_millis(300);
    spec.binds[0].at = Some("/work".into());
    let u = sandbox::run(spec).unwrap();
    assert_eq!(u.fired, Some(sandbox::Fired::Cpu), "{u:?}");
    // Generous (a loaded host's ticks, a late watchdog), yet well under
    // what the helper's own time since its start (600 runs) would add.
    assert!(u.cpu <= Duration::from_millis(500), "killed at {:?} of CPU for a 300 ms limit", u.cpu);
}

#[test]
fn a_keeper_killed_during_a_run_is_the_judges_fault_not_the_programs() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("keeper-mid-run");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let field = status_field;
    let uid = ojrunner::judge::Slot::for_index(70).uid;
    let killer = std::thread::spawn(move || {
        // The sleeper's keeper: PID 1 of the sleeper's PID namespace, a child
        // of the sleeper's parent (the helper).
        let (sleeper, helper) = testkit::wait_for("the sleeper", Duration::from_secs(30), || {
            let pid = testkit::processes_of(uid).into_iter().next()?.to_string();
            Some((pid.clone(), field(&pid, "PPid:")?))
        });
        let keeper = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid = e.file_name().into_string().ok()?;
            let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
            let first = field(&pid, "NSpid:")?.split_whitespace().nth(1) == Some("1");
            (first && field(&pid, "PPid:")? == helper && ns(&pid) == ns(&sleeper)).then_some(pid)
        });
        let keeper = keeper.expect("the sleeper's keeper");
        // SAFETY: kill takes no pointer.
        unsafe { libc::kill(keeper.parse().unwrap(), libc::SIGKILL) };
    });
    // The run loses its jail mid-sleep: not the program's verdict (killed)
    // but the judge's error, which the judge tries once more (judging.rs).
    let mut spec = slot_spec(&["/bin/sh", "-c", "sleep 1; echo slept"], dir.path(), 70, 64, 16);
    spec.binds[0].at = Some("/work".into());
    let got = sandbox::run(spec);
    killer.join().unwrap();
    match got {
        Err(sandbox::Error::Lost { why, .. }) if matches!(*why, sandbox::Error::InitDied { .. }) => {}
        other => panic!("a run whose keeper died: {other:?}"),
    }
    // The next run, in a new helper with a new kept jail, is served.
    let (exit, said) = run_at_work(dir.path(), &["/bin/echo", "served"]);
    assert_eq!((exit, said.as_str()), (sandbox::Exit::Code(0), "served\n"));
}

#[test]
fn the_run_after_one_that_ended_its_kept_jail_is_served() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("after-keeper");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for _ in 0..20 {
        // Leftovers end the kept jail (its keeper killed); the next run at
        // once, in the same helper, must not meet the dying one.
        let (exit, _) = run_at_work(dir.path(), &["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 100 & done"]);
        assert_eq!(exit, sandbox::Exit::Code(0));
        let (exit, said) = run_at_work(dir.path(), &["/bin/echo", "next"]);
        assert_eq!((exit, said.as_str()), (sandbox::Exit::Code(0), "next\n"));
    }
}

#[test]
fn a_bind_point_goes_with_the_kept_jail_that_made_it() {
    let Some(_one) = root_turn() else { return };
    let dir = TempDir::new("bind-point");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |at: &str, argv: &[&str]| {
        let mut spec = slot_spec(argv, dir.path(), 70, 64, 16);
        spec.binds[0].at = Some(at.into());
        sandbox::run(spec).unwrap().exit
    };
    // A run with its bind at /leftover-point that leaves a process: its kept
    // jail ends, and a new one is made.
    assert_eq!(run("/leftover-point", &["/bin/sh", "-c", "sleep 100 &"]), sandbox::Exit::Code(0));
    // The next run's root has no /leftover-point.
    assert_eq!(run("/work", &["/bin/sh", "-c", "test ! -e /leftover-point"]), sandbox::Exit::Code(0));
}

/// The value of `key` (as `"PPid:"`) in `/proc/<pid>/status`.
fn status_field(pid: &str, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
}
