//! cgroup v2 as users run it (issue #22): the runner keeps everything it
//! makes in the cgroup it was started in, shaped here as systemd delegates a
//! service's (`Delegate=yes`: the unit's cgroup, controllers enabled down to
//! it, marked `trusted.delegate`), and refuses, with exit 100, a unit's
//! cgroup that was not delegated. Started in the root, its groups are
//! below `/ojrunner`.
//!
//! This machine and CI are cgroup v1: there every test says "skipped", and
//! `make test-cgroup2` runs the suite in a qemu guest on cgroup v2
//! (`tests/cgroup2/run-in-guest`), where programs run 20 to 100 times
//! slower: limits here are generous, and only C is compiled.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use testkit::*;

const CG: &str = "/sys/fs/cgroup";

/// How long a slow guest may take for anything here.
const PATIENCE: Duration = Duration::from_secs(300);

/// Whether this is a cgroup v2 host whose root offers the controllers.
fn on_v2() -> bool {
    let v2 = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(CG) && l.split_whitespace().nth(2) == Some("cgroup2"));
    let offered = std::fs::read_to_string(Path::new(CG).join("cgroup.controllers")).unwrap_or_default();
    if v2 && is_root() && ["memory", "pids", "cpu"].iter().all(|c| offered.split_whitespace().any(|o| o == *c)) {
        return true;
    }
    skip("not root on cgroup v2 (make test-cgroup2 runs this suite in a cgroup v2 guest)");
    false
}

/// A scratch directory named `tag` where the suite can run ([`on_v2`]).
fn scratch_on_v2(tag: &str) -> Option<TempDir> {
    on_v2().then(|| TempDir::new(tag))
}

/// Every cgroup directory of the hierarchy, but those below `inside`.
fn cgroups_outside(inside: &[&Path]) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(e.path());
                walk(&e.path(), out);
            }
        }
    }
    let mut all = Vec::new();
    walk(Path::new(CG), &mut all);
    all.retain(|d| !inside.iter().any(|i| d.starts_with(i)));
    all.sort();
    all
}

/// A cgroup shaped as systemd makes a service's at each start of the unit:
/// `system.slice/<name>`, new (the last start's removed, as systemd removes
/// a stopped unit's), the controllers enabled down to it, and (when
/// `delegated`) marked as `Delegate=yes` marks it.
fn service_cgroup(name: &str, delegated: bool) -> PathBuf {
    let enable = "+memory +pids +cpu";
    std::fs::write(Path::new(CG).join("cgroup.subtree_control"), enable).unwrap();
    let slice = Path::new(CG).join("system.slice");
    let _ = std::fs::create_dir(&slice);
    std::fs::write(slice.join("cgroup.subtree_control"), enable).unwrap();
    let unit = slice.join(name);
    if unit.exists() {
        wait_for(&format!("{} to empty", unit.display()), PATIENCE, || remove_cgroup(&unit).then_some(()));
    }
    std::fs::create_dir(&unit).unwrap();
    if delegated {
        let path = std::ffi::CString::new(unit.to_str().unwrap()).unwrap();
        // SAFETY: NUL-terminated path and name, and a 1-byte value, all alive across the call.
        let set = unsafe { libc::setxattr(path.as_ptr(), c"trusted.delegate".as_ptr(), c"1".as_ptr().cast(), 1, 0) };
        assert_eq!(set, 0, "setxattr trusted.delegate on {}: {}", unit.display(), std::io::Error::last_os_error());
    }
    unit
}

/// Removes the cgroup `dir` and those below it; false while a process is
/// left in one.
fn remove_cgroup(dir: &Path) -> bool {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) && !remove_cgroup(&e.path()) {
            return false;
        }
    }
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// `program args` started inside the cgroup `unit` (as systemd starts a
/// unit's main process there).
fn in_cgroup(unit: &Path, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"").arg(unit).arg(program).args(args);
    cmd
}

/// `runnerd` (one worker) against `hub`, started in the cgroup `unit`.
fn runnerd_in(unit: &Path, hub: &Hub, spool: &Path) -> Proc {
    let mut cmd = in_cgroup(unit, &bin("runnerd"), &[]);
    cmd.envs(runner_env(hub, spool)).env("OJ_WORKERS", "1");
    Proc::spawn(&mut cmd, "runnerd")
}

/// The cgroup a process is in (the `0::` line).
fn cgroup_of(pid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("").to_string()
}

/// A tests directory of one case: `input`, `answer`.
fn one_case(dir: &Path, name: &str, input: &str, answer: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("0000.in"), input).unwrap();
    std::fs::write(d.join("0000.out"), answer).unwrap();
    d
}

/// `judge-exec run` of a C source, started by `cmd`'s prefix: the cases' statuses.
fn statuses(mut cmd: Command) -> Vec<String> {
    let out = cmd.stderr(if quiet() { Stdio::null() } else { Stdio::inherit() }).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("case").is_some())
        .map(|v| format!("{} {}", v["status"].as_str().unwrap_or("?"), v["stderr"].as_str().unwrap_or("")))
        .collect()
}

fn judge_args<'a>(src: &'a str, tests: &'a str) -> Vec<&'a str> {
    vec!["run", "--lang", "c11", "--time", "20000", "--mem", "65536", "--src", src, "--tests", tests]
}

#[test]
fn started_in_the_root_the_groups_are_below_ojrunner() {
    if !on_v2() {
        return;
    }
    let out = Command::new(bin("judge-exec")).arg("--probe").output().unwrap();
    let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(probe["cgroup"], "v2", "{probe}");
    if cgroup_of(std::process::id()) == "/" {
        assert_eq!(probe["cgroup_layout"]["layout"], "root", "{probe}");
        assert!(Path::new(CG).join("ojrunner").is_dir());
    }
    assert_eq!(probe["trial"]["ok"], true, "{probe}");
}

#[test]
fn a_delegated_service_keeps_every_group_and_process_of_the_judge() {
    let Some(work) = scratch_on_v2("cg2-judge") else { return };
    let unit = service_cgroup("ojrunner-test-judge.service", true);
    let before = cgroups_outside(&[&unit, &Path::new(CG).join("ojrunner")]);
    let ab = examples().join("submissions/ab_ok.c");
    let tests = one_case(work.path(), "ab", "1 2\n", "3\n");
    let judge = bin("judge-exec");
    // A+B, then a memory bomb and a group left full with no process of the
    // run alive (the helper outside the group: MLE, never JE).
    let ac = statuses(in_cgroup(&unit, &judge, &judge_args(ab.to_str().unwrap(), tests.to_str().unwrap())));
    assert_eq!(ac.len(), 1, "{ac:?}");
    assert!(ac[0].starts_with("AC"), "{ac:?}");
    for bomb in ["memory_bomb.c", "tmp_then_oom.c"] {
        let unit = service_cgroup("ojrunner-test-judge.service", true);
        let src = repo().join("tests/hostile").join(bomb);
        let got = statuses(in_cgroup(&unit, &judge, &judge_args(src.to_str().unwrap(), tests.to_str().unwrap())));
        assert!(got.len() == 1 && got[0].starts_with("MLE"), "{bomb}: {got:?}");
    }
    // While a run lives: its group beside the leaf, the judge in the leaf,
    // the helper in neither group of a run.
    let unit = service_cgroup("ojrunner-test-judge.service", true);
    let sleeper = write_file(work.path(), "sleeper.c", "#include <unistd.h>\nint main(void) { sleep(5); return 0; }\n");
    let mut child = in_cgroup(&unit, &judge, &judge_args(sleeper.to_str().unwrap(), tests.to_str().unwrap()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (group, tasks) = wait_for("a run in a group of the service's", PATIENCE, || {
        std::fs::read_dir(&unit).ok()?.flatten().find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let tasks = std::fs::read_to_string(e.path().join("cgroup.procs")).ok()?;
            (name.starts_with("helper-") && !tasks.trim().is_empty()).then(|| (e.path(), tasks))
        })
    });
    let helper = group.file_name().unwrap().to_str().unwrap().strip_prefix("helper-").unwrap().to_string();
    assert!(!tasks.split_whitespace().any(|t| t == helper), "the helper is in its run's group: {tasks}");
    let leaf = format!("{}/ojrunner-stages", unit.strip_prefix(CG).unwrap().display());
    assert_eq!(cgroup_of(child.id()), format!("/{leaf}"), "judge-exec is not in the service's leaf");
    assert_eq!(cgroup_of(helper.parse().unwrap()), format!("/{leaf}"), "the helper is not in the service's leaf");
    let _ = child.kill();
    let _ = child.wait();
    // Nothing made or moved outside the service's cgroup.
    assert_eq!(cgroups_outside(&[&unit, &Path::new(CG).join("ojrunner")]), before);
    let control = std::fs::read_to_string(unit.join("cgroup.subtree_control")).unwrap();
    assert!(["memory", "pids", "cpu"].iter().all(|c| control.contains(c)), "{control}");
}

#[test]
fn a_runner_in_a_delegated_service_judges_and_drains_inside_it() {
    let Some(dir) = scratch_on_v2("cg2-runner") else { return };
    // Leases and beats roomy enough for an emulated guest.
    let hub = Hub::start(dir.path(), &["--lease-ttl", "120", "--heartbeat-interval", "5"]);
    hub.add_problem(1, &one_case_problem(dir.path(), "p1", 20000, "1 2\n", "3\n"));
    let sub = hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"));
    let unit = service_cgroup("ojrunner-test-runnerd.service", true);
    let before = cgroups_outside(&[&unit, &Path::new(CG).join("ojrunner")]);
    let spool = dir.path().join("spool");
    let mut runner = runnerd_in(&unit, &hub, &spool);
    let done = wait_for("the submission to be judged", PATIENCE, || {
        hub.status().into_iter().find(|s| s["submission_id"] == sub.as_str() && s["state"] == "done")
    });
    assert_eq!(done["verdict"], "AC", "{done}");
    assert_eq!(done["attempts"], 1, "{done}");
    // runnerd and every stage in the leaf; the runs' groups beside it.
    let leaf = format!("/{}/ojrunner-stages", unit.strip_prefix(CG).unwrap().display());
    assert_eq!(cgroup_of(runner.pid() as u32), leaf);
    for stage in ["claimd", "leased", "reportd", "judge-exec"] {
        let pid = wait_for(&format!("{stage} to run"), PATIENCE, || child_pid(runner.pid(), stage_comm(stage)));
        assert_eq!(cgroup_of(pid as u32), leaf, "{stage}");
    }
    assert_eq!(cgroups_outside(&[&unit, &Path::new(CG).join("ojrunner")]), before);
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(runner.wait_exit(PATIENCE), 0, "the drain");

    // `systemctl kill` (every process of the unit, SIGKILL: cgroup.kill)
    // while a program is judged in it; the unit started again judges it.
    hub.add_problem(2, &one_case_problem(dir.path(), "p2", 20000, "", ""));
    let slow = write_file(dir.path(), "slow.c", "#include <unistd.h>\nint main(void) { sleep(4); return 0; }\n");
    let sub = hub.submit(2, "c11", &slow);
    let unit = service_cgroup("ojrunner-test-runnerd.service", true);
    let mut runner = runnerd_in(&unit, &hub, &spool);
    wait_for("the slow program to run in a group of the unit's", PATIENCE, || {
        std::fs::read_dir(&unit).ok()?.flatten().find(|e| {
            e.file_name().to_string_lossy().starts_with("helper-")
                && std::fs::read_to_string(e.path().join("cgroup.procs")).is_ok_and(|t| !t.trim().is_empty())
        })
    });
    std::fs::write(unit.join("cgroup.kill"), "1").unwrap();
    runner.wait_exit(PATIENCE);
    wait_for("every process of the unit to be gone", PATIENCE, || {
        let mut all = String::new();
        for e in std::fs::read_dir(&unit).unwrap().flatten().filter(|e| e.path().is_dir()) {
            all += &std::fs::read_to_string(e.path().join("cgroup.procs")).unwrap_or_default();
        }
        all.trim().is_empty().then_some(())
    });
    let unit = service_cgroup("ojrunner-test-runnerd.service", true);
    let mut runner = runnerd_in(&unit, &hub, &spool);
    let done = wait_for("the killed job to be judged", PATIENCE, || {
        hub.status().into_iter().find(|s| s["submission_id"] == sub.as_str() && s["state"] == "done")
    });
    assert_eq!(done["verdict"], "AC", "{done}");
    assert_eq!(done["completes"], 1, "{done}");
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(runner.wait_exit(PATIENCE), 0, "the drain");
}

#[test]
fn an_undelegated_units_cgroup_is_refused_with_exit_100_naming_delegate() {
    let Some(dir) = scratch_on_v2("cg2-refused") else { return };
    let unit = service_cgroup("ojrunner-test-undelegated.service", false);
    let out = in_cgroup(&unit, &bin("judge-exec"), &["--probe"]).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(100), "{said}");
    assert!(said.contains("Delegate=yes"), "{said}");
    let hub = Hub::start(dir.path(), &[]);
    let mut cmd = in_cgroup(&unit, &bin("runnerd"), &[]);
    cmd.envs(runner_env(&hub, &dir.path().join("spool")));
    let out = cmd.output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(100), "{said}");
    assert!(said.contains("Delegate=yes"), "{said}");
    // Nothing was made in it.
    assert!(!unit.join("ojrunner-stages").exists());
}
