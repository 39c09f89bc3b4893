//! The hostile suite: programs written to harm the host, each with the
//! verdict it must get, then a check that the host is unharmed.
//!
//! The programs are in `tests/hostile/`. Each runs once as a judged case
//! (1 s CPU, 64 MiB, 1 MiB of output), as root with slot uids 70–71, through
//! `Judge` exactly as `judge-exec` runs them. Isolation needs root: as
//! another user the suite is skipped.

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::checker::Checker;
use ojrunner::judge::{self, Compiled, Judge, Slot, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{CaseResult, Task, Verdict};
use ojrunner::workspace::Workspace;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::{is_root, processes_of, repo, TempDir};

use Verdict::*;

/// One hostile program: its file, the verdicts it may get, the output it
/// must print when AC (the answer), and words its `stderr` must contain.
struct Case {
    file: &'static str,
    expect: &'static [Verdict],
    answer: &'static str,
    stderr: Option<&'static str>,
}

const fn case(file: &'static str, expect: &'static [Verdict], answer: &'static str) -> Case {
    Case { file, expect, answer, stderr: None }
}

const fn denied(file: &'static str, call: &'static str) -> Case {
    Case { file, expect: &[RE], answer: "", stderr: Some(call) }
}

const CASES: &[Case] = &[
    // Resources. A bomb's failed forks are charged to the run until the
    // kernel frees their stacks (after an RCU grace period): on a busy
    // machine that fills the group first, MLE.
    case("fork_bomb.c", &[TLE, MLE], ""),
    case("fork_bomb.py", &[TLE, MLE], ""),
    case("thread_bomb.cpp", &[TLE, MLE], ""),
    case("memory_bomb.c", &[MLE], ""),
    case("memory_bomb.cpp", &[MLE], ""),
    case("memory_split.c", &[MLE], ""),
    case("stack_overflow.c", &[RE, MLE], ""),
    case("busy_loop.c", &[TLE], ""),
    case("busy_threads.c", &[TLE], ""),
    case("sleeper.py", &[TLE], ""),
    // Stopped at its first byte, which no answer here has (WA; OLE
    // without the stream, as stderr_flood.py below still is).
    case("output_flood.c", &[WA], ""),
    case("stderr_flood.py", &[OLE], ""),
    case("tmp_filler.py", &[MLE], ""),
    case("shm_filler.py", &[MLE], ""),
    case("unmapped_memory.c", &[MLE], ""),
    case("huge_mmap.c", &[AC, MLE], "refused"),
    // The network.
    case("connect_loopback.py", &[AC], "blocked"),
    case("udp_out.c", &[AC], "blocked"),
    // Twice: the second may share the first's helper, and so its network
    // namespace (helpers.rs makes sure of it, one run after another).
    case("socket_in_flight.c", &[AC], "clean"),
    case("socket_in_flight.c", &[AC], "clean"),
    // The outputs and the input (the host checks their files after).
    case("fallocate_output.c", &[AC], "blocked"),
    case("mmap_output.c", &[AC], "blocked"),
    case("input_rewrite.c", &[AC], "blocked"),
    // Descriptors the judge inherited (the test leaves one open).
    case("inherited_fd.c", &[AC], "none"),
    // What a program can learn (the host searches its stderr too).
    case("what_it_sees.c", &[AC], "cmdline hidden\nlocal config hidden\n/memfd:stdin (deleted)\n/src\nown proc only"),
    // Files.
    case("read_shadow.c", &[AC], "blocked"),
    case("write_outside.py", &[AC], "blocked"),
    case("other_run.py", &[AC], "blocked"),
    case("devices.c", &[AC], "blocked"),
    case("sysrq.py", &[AC], "blocked"),
    // Processes and privileges.
    case("kill_all.c", &[AC], "alive"),
    case("outlive.py", &[AC], "bye"),
    case("proc_snoop.py", &[AC], "alone"),
    case("setuid_binary.py", &[AC], "blocked\neuid True"),
    case("capabilities.py", &[AC], "none"),
    case("oom_score.py", &[AC], "blocked\n1000"),
    case("setuid_self.c", &[AC], "blocked"),
    case("chmod_suid.c", &[AC], "blocked"),
    case("sysv_shm.c", &[AC], "clean"),
    case("sysv_shm.c", &[AC], "clean"),
    // Denied system calls: RE, the call named.
    denied("ptrace.c", "ptrace"),
    denied("clone_parent.c", "clone (CLONE_PARENT)"),
    denied("mount.c", "mount"),
    denied("unshare_user.c", "unshare"),
    denied("clone_newuser.c", "clone"),
    denied("bpf.c", "bpf"),
    denied("perf_event.c", "perf_event_open"),
    denied("keyctl.c", "keyctl"),
    denied("io_uring.c", "io_uring_setup"),
    denied("userfaultfd.c", "userfaultfd"),
    denied("reboot.c", "reboot"),
    denied("vsock.c", "socket (family AF_VSOCK)"),
    denied("dccp.c", "socket (family AF_INET, type 6, protocol 33)"),
    denied("newer_calls.c", "listmount"),
    case("int80.c", &[RE], ""),
    // State that outlives a run, host quotas (tests/hostile_state.rs tries
    // each through judge-exec run and a runner, and the host's share).
    denied("flowlabel.c", "setsockopt (IPV6_FLOWLABEL_MGR)"),
    denied("inotify.c", "inotify_init1"),
    denied("dnotify.c", "fcntl (F_NOTIFY)"),
    denied("aio_quota.c", "io_setup"),
    denied("flock_shared.c", "flock"),
    denied("posix_lock.c", "fcntl (F_SETLK)"),
    case("page_cache.c", &[AC], "nowait refused"),
    case("cgroup_seen.c", &[AC], "root only"),
];

fn language_of(file: &str) -> &'static str {
    match file.rsplit('.').next() {
        Some("c") => "c11",
        Some("cpp") => "cpp17",
        _ => "python3",
    }
}

/// Judges one hostile program with `input` on stdin.
fn judge(c: &Case, input: &str, slot: usize, work: &Path) -> CaseResult {
    let langs = Languages::builtin();
    let lang = langs.by_name(language_of(c.file)).unwrap();
    let dir = work.join(format!("{}-{slot}-{}", c.file, std::process::id()));
    let (src, scratch) = (dir.join("src"), dir.join("scratch"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::copy(repo().join("tests/hostile").join(c.file), src.join(&lang.source)).unwrap();
    for (name, text) in [("in", input.to_string()), ("out", format!("{}\n", c.answer))] {
        std::fs::write(dir.join(name), text).unwrap();
        // A world-writable input, as an operator may hand `judge-exec run`.
        let mode = if name == "in" && c.file == "input_rewrite.c" { 0o666 } else { 0o600 };
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Some wait on purpose past their 1 s limit (su's delay after a failed
    // login): the idleness rule is tests/early_verdicts.rs's.
    let judge = Judge { output_limit: 1 << 20, idle_window: Duration::ZERO, ..Judge::default() };
    let slot = Slot::for_index(slot);
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: 1 };
    let src = Workspace::stage(&src).unwrap();
    match judge.compile(lang, &src, &slot) {
        Compiled::Ready => {
            let sub = Submission { lang, src: &src, tasks: &[task], checker: &Checker::Diff };
            let case = judge::Case { task: 0, case: 0, input: dir.join("in"), answer: dir.join("out") };
            judge.run_case(&sub, &case, &slot, &scratch).result
        }
        Compiled::Failed { message } => CaseResult::compile_error(&message),
        Compiled::JudgeError(why) => CaseResult::judge_error(&why),
    }
}

/// The `helper-<pid>` cgroups left behind by helpers that exited.
fn leftover_cgroups() -> Vec<PathBuf> {
    let mut left = Vec::new();
    for e in testkit::runs_cgroups() {
        // Other judges on this machine may have live helpers: only the
        // groups of helpers that are gone (or zombies) are leftovers.
        let name = e.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let Some(pid) = ojrunner::sandbox::cgroup::helper_of(&name) else { continue };
        let state = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if state.is_empty() || state.contains("State:\tZ") {
            left.push(e);
        }
    }
    left
}

#[test]
fn hostile_programs_get_their_verdicts_and_the_host_is_unharmed() {
    if !is_root() {
        testkit::skip("the sandbox isolates only as root");
        return;
    }
    assert!(CASES.len() >= 30);
    let work = TempDir::new("hostile");
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).unwrap();

    // Things on the host the programs try to reach.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let victim = work.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("secret"), "the other run's secret\n").unwrap();
    std::fs::set_permissions(victim.join("secret"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // A process of another slot uid, which kill(-1) must not reach.
    let bystander_uid = Slot::for_index(79).uid;
    let mut bystander = std::process::Command::new("/bin/sleep");
    use std::os::unix::process::CommandExt;
    bystander.arg("120").uid(bystander_uid).gid(bystander_uid);
    let mut bystander = bystander.spawn().unwrap();
    // A root-only file left open without close-on-exec, as a careless
    // supervisor may leave one to the runner: no judged program may read it.
    let inherited = work.path().join("inherited");
    std::fs::write(&inherited, "the inherited secret\n").unwrap();
    std::fs::set_permissions(&inherited, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = std::ffi::CString::new(inherited.to_str().unwrap()).unwrap();
    // SAFETY: `path` is NUL-terminated and lives across the call.
    let leaked_fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    // SAFETY: F_GETFD takes no pointer.
    assert!(leaked_fd >= 0 && unsafe { libc::fcntl(leaked_fd, libc::F_GETFD) } & libc::FD_CLOEXEC == 0);
    let host_cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default().trim().to_string();

    let queue = std::sync::Mutex::new(CASES.iter().collect::<std::collections::VecDeque<_>>());
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let start = Instant::now();
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (queue, failures, work) = (&queue, &failures, work.path());
            let (victim, port, host_cmdline) = (&victim, port, &host_cmdline);
            s.spawn(move || loop {
                let Some(c) = queue.lock().unwrap().pop_front() else { return };
                let input = match c.file {
                    "connect_loopback.py" => format!("{port}\n"),
                    "other_run.py" => format!("{}\n", victim.join("secret").display()),
                    "page_cache.c" => "/usr/include/stdio.h\n".to_string(),
                    _ => String::new(),
                };
                let t = Instant::now();
                let r = judge(c, &input, 70 + worker, work);
                eprintln!(
                    "{:20} {} {}ms {}KiB exit {} in {:?}; stdout {:?} stderr {:?}",
                    c.file,
                    r.status,
                    r.exec_time,
                    r.memory_usage,
                    r.exit_code,
                    t.elapsed(),
                    &r.stdout[..r.stdout.len().min(60)],
                    &r.stderr[r.stderr.len().saturating_sub(80)..]
                );
                let mut wrong = Vec::new();
                if !c.expect.contains(&r.status) {
                    wrong.push(format!("got {}, expected one of {:?}", r.status, c.expect));
                }
                if let Some(call) = c.stderr {
                    if !r.stderr.contains(&format!("system call {call}")) {
                        wrong.push(format!("stderr does not name {call}: {:?}", r.stderr));
                    }
                }
                if r.stdout.contains("the other run's secret")
                    || r.stdout.contains("root:")
                    || r.stdout.contains("the inherited secret")
                {
                    wrong.push("a secret leaked to stdout".into());
                }
                let case_dir = work.join(format!("{}-{}-{}", c.file, 70 + worker, std::process::id()));
                let said = format!("{}{}", r.stdout, r.stderr);
                // The input's host path names the problem and the case.
                let input_path = case_dir.join("in");
                if said.contains(input_path.to_str().unwrap()) {
                    wrong.push(format!("the input's host path was seen: {}", input_path.display()));
                }
                // The program's directory's host name (the claim's, on a
                // runner), anywhere: argv, cwd, environment, mountinfo.
                let dir_name = case_dir.file_name().unwrap().to_str().unwrap();
                if said.contains(dir_name) {
                    wrong.push(format!("the host name of the program's directory was seen: {dir_name}"));
                }
                if !host_cmdline.is_empty() && said.contains(host_cmdline.as_str()) {
                    wrong.push("the host kernel's command line was seen".into());
                }
                if c.file == "input_rewrite.c" && std::fs::read_to_string(&input_path).unwrap() != input {
                    wrong.push("the test input was changed on the host".into());
                }
                if t.elapsed() > Duration::from_secs(20) {
                    wrong.push(format!("took {:?}", t.elapsed()));
                }
                if !wrong.is_empty() {
                    failures.lock().unwrap().push(format!("{}: {}", c.file, wrong.join("; ")));
                }
            });
        }
    });
    eprintln!("{} hostile programs judged in {:?}", CASES.len(), start.elapsed());

    // The host is unharmed.
    let mut harm = Vec::new();
    for slot in [70, 71] {
        let left = processes_of(Slot::for_index(slot).uid);
        if !left.is_empty() {
            harm.push(format!("processes of slot {slot} left: {left:?}"));
        }
    }
    if bystander.try_wait().unwrap().is_some() {
        harm.push("a process of another uid was killed".into());
    }
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((mut conn, _)) => {
            let mut said = String::new();
            let _ = conn.read_to_string(&mut said);
            harm.push(format!("the loopback port was connected to: {said:?}"));
        }
        Err(e) => harm.push(format!("accept: {e}")),
    }
    for p in ["/etc/ojrunner-pwned", "/usr/ojrunner-pwned", "/ojrunner-pwned", "/tmp/fill0", "/tmp/id"] {
        if Path::new(p).exists() {
            harm.push(format!("{p} was written"));
        }
    }
    // SAFETY: `leaked_fd` is this test's own descriptor (opened above), used by nothing after.
    unsafe { libc::close(leaked_fd) };
    for e in walk(work.path()) {
        use std::os::unix::fs::MetadataExt;
        // Disk held, whatever the size says (`fallocate` with KEEP_SIZE).
        let held = std::fs::symlink_metadata(&e).map(|m| m.blocks() * 512).unwrap_or(0);
        if held > 8 << 20 {
            harm.push(format!("{} holds {} MiB of the host's disk", e.display(), held >> 20));
        }
        let name = e.file_name().unwrap().to_string_lossy().to_string();
        if name == "pwned" || name.starts_with("fill") {
            harm.push(format!("{} was written", e.display()));
        }
    }
    let shm = std::fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default();
    if shm.split_whitespace().any(|k| k == (0x0bad_cafe_i64).to_string()) {
        harm.push("a System V segment reached the host's IPC namespace".into());
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    if mounts.contains("/run/ojrunner/root") {
        harm.push("the jail's root is mounted on the host".into());
    }
    // Each helper removes a run's cgroup right after its reply.
    ojrunner::sandbox::helper::shutdown();
    let cgroups = leftover_cgroups();
    if !cgroups.is_empty() {
        harm.push(format!("cgroups left: {cgroups:?}"));
    }
    let _ = bystander.kill();
    let _ = bystander.wait();

    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty() && harm.is_empty(), "verdicts:\n{}\nharm:\n{}", failures.join("\n"), harm.join("\n"));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
