//! State that outlives a run, and the host's quotas (issue #21): what a
//! judged program could leave in the kernel for a later run, read from a
//! concurrent one, or take from the host, where no namespace of the run
//! holds it (`sandbox::seccomp::SHARED_STATE` names each kind and its
//! rule). Each hostile program of `tests/hostile/` is judged through
//! `judge-exec run` and through a runner (`hubd` and `runnerd`); the host
//! checks, while the run holds all it can, that it still gets its own
//! share. And the OOM killer of a run's group, forced again and again in
//! runs and compiles, never reaches the judge: no JE.
//!
//! Isolation needs root: as another user each test says "skipped".

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::judge::{Compiled, Judge, Slot};
use ojrunner::language::Languages;
use ojrunner::workspace::Workspace;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use testkit::*;

/// A scratch directory named by `tag`; none (the test skipped) but as
/// root, the only user the sandbox isolates as.
fn scratch_as_root(tag: &str) -> Option<TempDir> {
    if is_root() {
        return Some(TempDir::new(tag));
    }
    skip("the sandbox isolates only as root");
    None
}

fn hostile(file: &str) -> PathBuf {
    repo().join("tests/hostile").join(file)
}

/// A tests directory of `n` cases, each `input` with `answer`.
fn cases(dir: &Path, name: &str, n: usize, input: &str, answer: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    for i in 0..n {
        std::fs::write(d.join(format!("{i:04}.in")), input).unwrap();
        std::fs::write(d.join(format!("{i:04}.out")), answer).unwrap();
    }
    d
}

/// `judge-exec run` started on `src` (C11) against `tests`.
fn judge_exec_run(src: &Path, tests: &Path, mem_kib: u64) -> std::process::Child {
    judge_exec_cmd("c11", src, tests)
        .args(["--time", "1000", "--mem", &mem_kib.to_string()])
        .stdout(Stdio::piped())
        .stderr(if quiet() { Stdio::null() } else { Stdio::inherit() })
        .spawn()
        .unwrap()
}

/// The per-case lines of a finished `judge-exec run`.
fn case_lines(child: std::process::Child) -> Vec<Value> {
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("case").is_some())
        .collect()
}

/// One hostile program of this suite: the verdict it must get and, for a
/// denied call, the call named in its `stderr`, or its answer when AC.
struct Hostile {
    file: &'static str,
    input: &'static str,
    verdict: &'static str,
    says: &'static str,
}

/// A file every run sees under `/usr` and no other test reads. The test
/// loads its pages itself, so they are charged to the test's own memory
/// group: a page first read by a compile is charged to that compile's
/// group, whose reclaim may evict it at any time, run or no run.
const SHARED_FILE: &str = SHARED_INPUT.trim_ascii_end();
/// [`SHARED_FILE`] as `page_cache.c` reads it, on a line of its own.
const SHARED_INPUT: &str = "/usr/share/common-licenses/GPL-3\n";

const HOSTILE: &[Hostile] = &[
    Hostile { file: "flowlabel.c", input: "", verdict: "RE", says: "system call setsockopt (IPV6_FLOWLABEL_MGR)" },
    Hostile { file: "inotify.c", input: "", verdict: "RE", says: "system call inotify_init1" },
    Hostile { file: "dnotify.c", input: "", verdict: "RE", says: "system call fcntl (F_NOTIFY)" },
    Hostile { file: "aio_quota.c", input: "", verdict: "RE", says: "system call io_setup" },
    Hostile { file: "flock_shared.c", input: "", verdict: "RE", says: "system call flock" },
    Hostile { file: "posix_lock.c", input: "", verdict: "RE", says: "system call fcntl (F_SETLK)" },
    Hostile { file: "page_cache.c", input: SHARED_INPUT, verdict: "AC", says: "nowait refused\n" },
    Hostile { file: "cgroup_seen.c", input: "", verdict: "AC", says: "root only\n" },
    // Its group left full with no process of it alive: the next task the
    // group's OOM killer finds must not be the judge's (no JE).
    Hostile { file: "tmp_then_oom.c", input: "", verdict: "MLE", says: "" },
];

/// Pages of `path` in the host's page cache, and of all (as root, who may
/// write it: `mincore` tells root of every page).
fn cached_pages(path: &str) -> (usize, usize) {
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    use std::os::fd::AsRawFd;
    let page = 4096;
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: a fresh read-only mapping of `f` (alive across it), unmapped here; mincore writes one byte a page into
    // `vec`, sized so.
    unsafe {
        let m = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(m, libc::MAP_FAILED);
        assert_eq!(libc::mincore(m, len, vec.as_mut_ptr()), 0);
        libc::munmap(m, len);
    }
    (vec.iter().filter(|&&b| b & 1 == 1).count(), pages)
}

/// Drops `path` from the page cache (root's advice) and reads it in again,
/// twice (the second read makes its pages active, the last the host's own
/// reclaim takes): the pages are then the test's, all cached.
fn load_as_host(path: &str) {
    uncache(Path::new(path));
    for _ in 0..2 {
        std::fs::read(path).unwrap();
    }
    let (cached, pages) = cached_pages(path);
    assert_eq!(cached, pages, "{path}: the host could not cache its own read");
}

/// What is wrong with a hostile program's judging; `stdout` where known
/// (the hub keeps none: its AC says the answer matched).
fn check_verdict(h: &Hostile, status: &str, stdout: Option<&str>, stderr: &str, how: &str) -> Option<String> {
    let mut wrong = Vec::new();
    if status != h.verdict {
        wrong.push(format!("got {status}, not {}", h.verdict));
    }
    if h.verdict == "RE" && !stderr.contains(h.says) {
        wrong.push(format!("stderr does not name {:?}: {stderr:?}", h.says));
    }
    if h.verdict == "AC" && stdout.is_some_and(|s| s != h.says) {
        wrong.push(format!("printed {stdout:?}"));
    }
    if stderr.contains("helper-") || stdout.unwrap_or("").contains("helper-") {
        wrong.push("the helper's cgroup (and pid) was seen".into());
    }
    (!wrong.is_empty()).then(|| format!("{} ({how}): {}", h.file, wrong.join("; ")))
}

/// What is wrong with the `n` case lines of a `judge-exec run` of `h`.
fn check_lines(h: &Hostile, lines: &[Value], n: usize, failures: &mut Vec<String>) {
    if lines.len() != n {
        failures.push(format!("{}: judge-exec run printed {} cases of {n}", h.file, lines.len()));
    }
    for r in lines {
        let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
        failures.extend(check_verdict(h, &s("status"), Some(&s("stdout")), &s("stderr"), "judge-exec run"));
        if h.file == "flowlabel.c" && !s("stderr").starts_with("found 0") {
            failures.push(format!("flowlabel.c: an earlier run's labels were listed: {:?}", s("stderr")));
        }
    }
}

#[test]
fn state_that_outlives_a_run_is_refused_through_judge_exec_run() {
    let Some(work) = scratch_as_root("state-run") else { return };
    let mut failures = Vec::new();
    for h in HOSTILE {
        // Cases one after another in a helper: what one leaves, the next finds.
        let n = 3;
        let tests = cases(work.path(), h.file, n, h.input, if h.verdict == "AC" { h.says } else { "x\n" });
        // The host's pages of a shared file, cached before: a run must not
        // evict them. The host's own reclaim might take one on a busy
        // machine; a run's advice takes them every time: judged again, up
        // to three times, before a loss is the run's.
        let mut losses = Vec::new();
        for attempt in 0..3 {
            load_as_host(SHARED_FILE);
            let lines = case_lines(judge_exec_run(&hostile(h.file), &tests, 65536));
            let (cached, pages) = cached_pages(SHARED_FILE);
            if attempt == 0 {
                check_lines(h, &lines, n, &mut failures);
            }
            if cached == pages {
                losses.clear();
                break;
            }
            losses.push(format!("{} of its {pages}", pages - cached));
        }
        if !losses.is_empty() {
            failures.push(format!("{}: {SHARED_FILE} lost cached pages each time: {}", h.file, losses.join(", ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn state_that_outlives_a_run_is_refused_through_a_runner() {
    let Some(dir) = scratch_as_root("state-runner") else { return };
    let hub = Hub::start(dir.path(), &[]);
    // Problem 1 reads a shared file's path; problem 2 reads nothing.
    hub.add_problem(1, &one_case_problem(dir.path(), "p1", 1000, SHARED_INPUT, "nowait refused\n"));
    hub.add_problem(2, &one_case_problem(dir.path(), "p2", 1000, "", "root only\n"));
    // flowlabel.c twice: a label the first left would be listed to the second.
    let mut subs = Vec::new();
    for h in HOSTILE.iter().chain(HOSTILE.iter().filter(|h| h.file == "flowlabel.c")) {
        let problem = if h.file == "cgroup_seen.c" { 2 } else { 1 };
        subs.push((hub.submit(problem, "c11", &hostile(h.file)), h));
    }
    let spool = dir.path().join("spool");
    let runner = start_runner(&hub, &spool, &[]);
    let status = hub.wait_all_judged(Duration::from_secs(300));
    let mut failures = Vec::new();
    for (id, h) in &subs {
        let got = status.iter().find(|s| s["submission_id"] == id.as_str()).unwrap();
        let case = &got["tasks"][0]["cases"][0];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let stderr = s(&case["stderr"]);
        failures.extend(check_verdict(h, &s(&got["verdict"]), None, &stderr, "runner"));
        if h.file == "flowlabel.c" && !stderr.starts_with("found 0") {
            failures.push(format!("flowlabel.c (runner): an earlier run's labels were listed: {stderr:?}"));
        }
        if got["attempts"] != 1 {
            failures.push(format!("{}: judged in {} attempts", h.file, got["attempts"]));
        }
    }
    drain(runner);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One of the host's quotas: what a run tries to take all of, and the
/// host's own try at one (as root, outside the jail). `Err` says why the
/// host could not.
struct Quota {
    name: &'static str,
    /// The call the sandbox denies, if it does (the run is RE at once).
    denied: Option<&'static str>,
    host_gets_one: fn() -> Result<(), String>,
}

fn last_error(what: &str) -> Result<(), String> {
    Err(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn host_aio() -> Result<(), String> {
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes only `ctx`, a live local.
    if unsafe { libc::syscall(libc::SYS_io_setup, 1, &mut ctx) } != 0 {
        return last_error("io_setup");
    }
    // SAFETY: io_destroy takes the context by value.
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    Ok(())
}

/// `struct in6_flowlabel_req`.
#[repr(C)]
struct FlowLabelReq {
    dst: [u8; 16],
    label: u32,
    action: u8,
    share: u8,
    flags: u16,
    expires: u16,
    linger: u16,
    pad: u32,
}

fn host_flowlabel() -> Result<(), String> {
    // SAFETY: socket takes no pointer.
    let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        // No IPv6 on this host: no table to fill either.
        return Ok(());
    }
    // A label of its own (below the stateless range): earlier tries'
    // labels linger for seconds, and a taken one is EEXIST, not a quota:
    // another label is tried then.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let first = nanos ^ std::process::id() << 12;
    let mut result = Ok(());
    for attempt in 0..8 {
        let label = (first.wrapping_add(attempt * 7919)) & 0x7_ffff | 1;
        // IPV6_FL_A_GET, IPV6_FL_S_EXCL, IPV6_FL_F_CREATE | IPV6_FL_F_EXCL.
        // A destination is required: ::1.
        let mut dst = [0; 16];
        dst[15] = 1;
        let r =
            FlowLabelReq { dst, label: label.to_be(), action: 0, share: 1, flags: 3, expires: 0, linger: 0, pad: 0 };
        let size = std::mem::size_of::<FlowLabelReq>() as libc::socklen_t;
        // SAFETY: `r` is a live repr(C) request, passed with its size.
        let got = unsafe {
            libc::setsockopt(fd, libc::SOL_IPV6, libc::IPV6_FLOWLABEL_MGR, &r as *const FlowLabelReq as *const _, size)
        };
        if got == 0 {
            result = Ok(());
            break;
        }
        let e = std::io::Error::last_os_error();
        result = Err(format!("a flow label: {e}"));
        if e.raw_os_error() != Some(libc::EEXIST) {
            break;
        }
    }
    // SAFETY: `fd` is the socket made above, used by nothing after.
    unsafe { libc::close(fd) };
    result
}

fn host_inotify() -> Result<(), String> {
    // SAFETY: inotify_init1 takes no pointer.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return last_error("inotify_init1");
    }
    // SAFETY: `fd` is the descriptor made above, used by nothing after.
    unsafe { libc::close(fd) };
    Ok(())
}

fn host_keys() -> Result<(), String> {
    // The thread's keyring: the key goes with the checking thread.
    // SAFETY: NUL-terminated literals and a 1-byte payload, alive across the call.
    let id = unsafe {
        libc::syscall(libc::SYS_add_key, c"user".as_ptr(), c"ojrunner-test".as_ptr(), c"x".as_ptr(), 1, -1i32)
    };
    if id < 0 {
        return last_error("add_key");
    }
    Ok(())
}

fn host_shm() -> Result<(), String> {
    // SAFETY: shmget takes no pointer.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        return last_error("shmget");
    }
    // SAFETY: IPC_RMID reads no buffer: a null one is allowed.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    Ok(())
}

fn host_msg() -> Result<(), String> {
    // SAFETY: msgget takes no pointer.
    let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        return last_error("msgget");
    }
    // SAFETY: IPC_RMID reads no buffer: a null one is allowed.
    unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    Ok(())
}

fn host_sem() -> Result<(), String> {
    // SAFETY: semget takes no pointer.
    let id = unsafe { libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        return last_error("semget");
    }
    // SAFETY: IPC_RMID takes no further argument.
    unsafe { libc::semctl(id, 0, libc::IPC_RMID) };
    Ok(())
}

fn host_mq() -> Result<(), String> {
    let name = std::ffi::CString::new(format!("/ojrunner-test-{}", std::process::id())).unwrap();
    // SAFETY: mq_attr is plain data: all zeroes is valid.
    let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
    attr.mq_maxmsg = 1;
    attr.mq_msgsize = 64;
    // SAFETY: `name` is NUL-terminated and `attr` a live mq_attr, both alive across the call.
    let q = unsafe { libc::mq_open(name.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o600, &attr) };
    if q < 0 {
        return last_error("mq_open");
    }
    // SAFETY: `q` is the queue opened above, `name` alive and NUL-terminated.
    unsafe {
        libc::mq_close(q);
        libc::mq_unlink(name.as_ptr());
    }
    Ok(())
}

fn host_pipes() -> Result<(), String> {
    let mut p = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `p`, a live two-element array.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return last_error("pipe2");
    }
    // SAFETY: F_SETPIPE_SZ takes an int.
    let size = unsafe { libc::fcntl(p[1], libc::F_SETPIPE_SZ, 1 << 20) };
    let result = if size >= 1 << 20 { Ok(()) } else { last_error("a 1 MiB pipe") };
    // SAFETY: the two ends made above, used by nothing after.
    unsafe {
        libc::close(p[0]);
        libc::close(p[1]);
    }
    result
}

const QUOTAS: &[Quota] = &[
    Quota { name: "aio", denied: Some("io_setup"), host_gets_one: host_aio },
    Quota { name: "flowlabel", denied: Some("setsockopt (IPV6_FLOWLABEL_MGR)"), host_gets_one: host_flowlabel },
    Quota { name: "inotify", denied: Some("inotify_init1"), host_gets_one: host_inotify },
    Quota { name: "keys", denied: Some("add_key"), host_gets_one: host_keys },
    Quota { name: "shm", denied: None, host_gets_one: host_shm },
    Quota { name: "msg", denied: None, host_gets_one: host_msg },
    Quota { name: "sem", denied: None, host_gets_one: host_sem },
    Quota { name: "mq", denied: None, host_gets_one: host_mq },
    Quota { name: "pipes", denied: None, host_gets_one: host_pipes },
];

#[test]
fn a_run_holding_all_it_can_of_a_quota_leaves_the_host_its_own() {
    let Some(work) = scratch_as_root("quotas") else { return };
    let mut failures = Vec::new();
    for q in QUOTAS {
        let tests = cases(work.path(), q.name, 1, &format!("{}\n", q.name), "x\n");
        let child = judge_exec_run(&hostile("quota_grabber.c"), &tests, 262144);
        // The host tries for its own while the run lives (it holds what it
        // took for two seconds): every try must succeed.
        let pid = child.id() as i32;
        let (tries, refused) = std::thread::scope(|s| {
            let checker = s.spawn(|| {
                let (mut tries, mut refused) = (0, Vec::new());
                while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| !st.contains(") Z")) {
                    tries += 1;
                    if let Err(e) = (q.host_gets_one)() {
                        refused.push(e);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                (tries, refused)
            });
            let lines = case_lines(child);
            let r = lines.first().cloned().unwrap_or_default();
            let (status, stderr) = (r["status"].as_str().unwrap_or("none"), r["stderr"].as_str().unwrap_or(""));
            match q.denied {
                Some(call) if status != "RE" || !stderr.contains(&format!("system call {call}")) => {
                    failures.push(format!("{}: {status}, stderr {stderr:?}, not RE naming {call}", q.name))
                }
                None if status == "JE" => failures.push(format!("{}: JE ({stderr:?})", q.name)),
                _ => {}
            }
            eprintln!("{:10} {status} stdout {:?}", q.name, r["stdout"]);
            checker.join().unwrap()
        });
        if let Some(e) = refused.first() {
            failures.push(format!(
                "{}: the host was refused {} of {tries} tries while the run held it: {e}",
                q.name,
                refused.len()
            ));
        }
        if let Err(e) = (q.host_gets_one)() {
            failures.push(format!("{}: the host is refused after the run: {e}", q.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_helper_is_ever_in_the_cgroup_of_its_runs() {
    let Some(work) = scratch_as_root("helper-group") else { return };
    // A run that lives a second, so that its group is seen with it inside.
    let src = write_file(work.path(), "sleeper.c", "#include <unistd.h>\nint main(void) { sleep(1); return 0; }\n");
    let tests = cases(work.path(), "t", 3, "", "x\n");
    let mut child = judge_exec_run(&src, &tests, 65536);
    let judge = child.id().to_string();
    // Only this judge's helpers: their parent is judge-exec.
    let ours = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.split(' ').nth(1) == Some(judge.as_str())))
            .unwrap_or(false)
    };
    let seen = wait_for("a run inside its helper's cgroup", Duration::from_secs(60), || {
        runs_cgroups().into_iter().find_map(|g| {
            let helper = g.file_name()?.to_str()?.strip_prefix("helper-")?.to_string();
            let tasks = std::fs::read_to_string(g.join("cgroup.procs")).ok()?;
            (ours(&helper) && !tasks.trim().is_empty()).then_some((g, helper, tasks))
        })
    });
    let _ = child.kill();
    let _ = child.wait();
    let (group, helper, tasks) = seen;
    assert!(
        !tasks.split_whitespace().any(|t| t == helper),
        "the helper {helper} is in {}, where a run's OOM killer would pick it: {tasks:?}",
        group.display()
    );
}

#[test]
fn fifty_ooms_in_runs_and_compiles_never_end_the_judge() {
    let Some(work) = scratch_as_root("ooms") else { return };
    // Runs: a group left full with no process of the run alive, 50 times
    // in one helper.
    let tests = cases(work.path(), "runs", 50, "", "x\n");
    let lines = case_lines(judge_exec_run(&hostile("tmp_then_oom.c"), &tests, 65536));
    assert_eq!(lines.len(), 50, "{lines:?}");
    let mut failures: Vec<String> = lines
        .iter()
        .filter(|l| l["status"] != "MLE")
        .map(|l| format!("run {}: {} {:?}", l["case"], l["status"], l["stderr"]))
        .collect();
    // Compiles: the compiler killed at the group's limit, 50 times (C
    // always; Rust, which the judge's host may lack, 10 of them when there).
    let langs = Languages::builtin();
    let judge = Judge { compile_memory: 64 << 20, ..Judge::default() };
    let slot = Slot::for_index(72);
    let rust = Path::new("/usr/bin/rustc").exists();
    for i in 0..50 {
        let (lang, text) = if rust && i % 5 == 0 {
            ("rust", "static Z: &[u8] = include_bytes!(\"/dev/zero\");\nfn main() { println!(\"{}\", Z.len()); }\n")
        } else {
            ("c11", "#include \"/dev/zero\"\nint main(void) { return 0; }\n")
        };
        let lang = langs.by_name(lang).unwrap();
        let dir = work.path().join(format!("compile-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(&lang.source), text).unwrap();
        let src = Workspace::stage(&dir).unwrap();
        match judge.compile(lang, &src, &slot) {
            Compiled::Failed { .. } => {}
            Compiled::Ready => failures.push(format!("compile {i} ({}): compiled", lang.name)),
            Compiled::JudgeError(why) => failures.push(format!("compile {i} ({}): JE: {why}", lang.name)),
        }
    }
    ojrunner::sandbox::helper::shutdown();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
