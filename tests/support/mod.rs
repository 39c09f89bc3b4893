//! Support for the end-to-end suite: real binaries, real processes, a real
//! `hubd` over loopback, and waits on conditions with deadlines (never a
//! sleep-and-hope).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The directory holding the workspace's built binaries (`target/debug`).
/// `make test` builds them first; the suite never builds on its own.
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OJ_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // A test runs from target/debug/deps/, the demo from target/debug/.
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    assert!(dir.join("hubd").exists(), "{} has no hubd: build the workspace first (make test does)", dir.display());
    dir
}

/// The path of one built binary.
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// The repository's top directory.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the daemons' logs are silenced (`OJ_TEST_QUIET` set, not "0").
pub fn quiet() -> bool {
    std::env::var("OJ_TEST_QUIET").is_ok_and(|v| v != "0")
}

/// A scratch directory removed on drop (unless `OJ_KEEP_TMP` is set).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::var_os("OJ_TEST_TMP").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let p = base.join(format!("ojt-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        // Judged programs run as unprivileged users and must reach their
        // work directories below this one.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("OJ_KEEP_TMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Waits until `cond` returns `Some`, polling every 50 ms, or panics with
/// `what` once `limit` has passed. Limits are generous: they bound liveness,
/// they do not measure speed.
pub fn wait_for<T>(what: &str, limit: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() > end {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process killed (and reaped) on drop; if the test is failing
/// then, the last lines of its log are printed.
pub struct Proc {
    pub child: Child,
    pub name: String,
    /// Where its stderr goes, when that is a file.
    pub log: Option<PathBuf>,
}

/// How many lines of a daemon's log a failing test prints.
const LOG_TAIL: usize = 40;

impl Proc {
    /// Spawns `cmd` as one of the test's daemons: its stderr goes to a log
    /// of its own in `target/test-logs/daemons/` (kept), or to the terminal
    /// with `OJ_TEST_QUIET=0`.
    pub fn spawn(cmd: &mut Command, name: &str) -> Proc {
        let log = quiet().then(|| daemon_log(name));
        match &log {
            Some(path) => cmd.stderr(std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))),
            None => cmd.stderr(Stdio::inherit()),
        };
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc { child, name: name.into(), log }
    }

    /// A child whose stderr the caller placed (`log`: a file it writes).
    pub fn of(child: Child, name: impl Into<String>, log: Option<&Path>) -> Proc {
        Proc { child, name: name.into(), log: log.map(Path::to_path_buf) }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends a signal.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig);
    }

    /// Waits for the process to exit, at most `limit`; its exit code, or
    /// 128+signal.
    pub fn wait_exit(&mut self, limit: Duration) -> i32 {
        let name = self.name.clone();
        let st = wait_for(&format!("{name} to exit"), limit, || self.child.try_wait().unwrap());
        use std::os::unix::process::ExitStatusExt;
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// A fresh log file for a daemon named `name` (see [`Proc::spawn`]).
pub fn daemon_log(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    // The checkout may be read-only (the cgroup v2 guest mounts it so).
    let dir = [repo().join("target/test-logs/daemons"), std::env::temp_dir().join("ojrunner-test-logs")]
        .into_iter()
        .find(|d| std::fs::create_dir_all(d).is_ok() && tempfile_probe(d))
        .expect("a writable directory for the daemons' logs");
    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{name}-{}-{}.log", std::process::id(), N.fetch_add(1, Ordering::Relaxed)))
}

/// Whether a file can be made in `dir`.
fn tempfile_probe(dir: &Path) -> bool {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let made = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    made
}

impl Drop for Proc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(text) = self.log.as_ref().and_then(|l| std::fs::read(l).ok()) {
                let text = String::from_utf8_lossy(&text);
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
                eprintln!(
                    "---- the last {} lines of {}'s log ({}) ----",
                    tail.len(),
                    self.name,
                    self.log.as_ref().unwrap().display()
                );
                for l in tail {
                    eprintln!("{l}");
                }
            }
        }
        if self.running() {
            // Kill the whole process group a runnerd leads, then it.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// A loopback address of this hub's own (127.0.0.0/8 is all loopback): a
/// port is only ever taken on it by this hub, so a hub stopped for an
/// outage gets its port back, whatever the tests running beside it (in
/// this process, or another suite's, or another checkout's) bind meanwhile.
pub fn loopback() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    // pid_max is 32768 here; above it, two processes may share an address.
    let pid = std::process::id() & 0x7fff;
    let n = N.fetch_add(1, Ordering::SeqCst) % 250;
    format!("127.{}.{}.{}", pid >> 8, pid & 0xff, n + 2)
}

/// Tokens the suite's hubs and runners share.
pub const REGISTRATION_TOKEN: &str = "test-registration-token";
pub const TESTDATA_TOKEN: &str = "test-testdata-token";

/// A reference hub (`hubd serve`) on a loopback port, with its database.
pub struct Hub {
    pub proc: Proc,
    pub url: String,
    pub db: PathBuf,
    pub listen: String,
    pub extra: Vec<String>,
}

impl Hub {
    /// Starts `hubd serve` on a fresh port with a 3 s lease and a 1 s
    /// heartbeat (so lease expiry fits in a test), plus `extra` flags
    /// (which may set those too).
    pub fn start(dir: &Path, extra: &[&str]) -> Hub {
        let db = dir.join("hub.db");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Hub::start_on(db, format!("{}:0", loopback()), extra)
    }

    fn start_on(db: PathBuf, listen: String, extra: Vec<String>) -> Hub {
        let mut cmd = Command::new(bin("hubd"));
        cmd.arg("--db")
            .arg(&db)
            .arg("serve")
            .args(["--listen", &listen])
            .args(["--registration-token", REGISTRATION_TOKEN])
            .args(["--testdata-token", TESTDATA_TOKEN]);
        for (flag, value) in [("--lease-ttl", "3"), ("--heartbeat-interval", "1"), ("--poll-interval", "1")] {
            if !extra.iter().any(|e| e == flag) {
                cmd.args([flag, value]);
            }
        }
        cmd.args(&extra).stdout(Stdio::piped());
        let mut proc = Proc::spawn(&mut cmd, "hubd");
        // hubd prints its base URL as the first line of stdout once it listens.
        let mut out = BufReader::new(proc.child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("read hubd's address");
        let url = line.trim().to_string();
        assert!(url.starts_with("http://"), "hubd printed {line:?}, not its URL");
        std::thread::spawn(move || for _ in out.lines() {});
        let listen = url.trim_start_matches("http://").to_string();
        Hub { proc, url, db, listen, extra }
    }

    /// Stops the hub (SIGKILL: an outage, not a goodbye) and starts it again
    /// on the same port and database.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// Kills the hub; `start_again` brings it back on the same port.
    pub fn stop(&mut self) {
        self.proc.signal(nix::sys::signal::Signal::SIGKILL);
        self.proc.wait_exit(Duration::from_secs(10));
    }

    pub fn start_again(&mut self) {
        wait_for("the hub's port to be free again", Duration::from_secs(20), || {
            std::net::TcpListener::bind(&self.listen).ok().map(|_| true)
        });
        let h = Hub::start_on(self.db.clone(), self.listen.clone(), self.extra.clone());
        let old = std::mem::replace(self, h);
        drop(old);
    }

    /// Runs a `hubd --db DB …` command and returns its stdout; panics on failure.
    pub fn cli(&self, args: &[&str]) -> String {
        hub_cli(&self.db, args)
    }

    /// Adds a problem from a directory (meta.json + TTCC.in/out).
    pub fn add_problem(&self, id: i64, dir: &Path) {
        self.cli(&["problem", "add", "--id", &id.to_string(), dir.to_str().unwrap()]);
    }

    /// Submits a source file; the new submission's id.
    pub fn submit(&self, problem: i64, language: &str, file: &Path) -> String {
        self.cli(&["submit", "--problem", &problem.to_string(), "--language", language, file.to_str().unwrap()])
            .trim()
            .to_string()
    }

    /// `hubd status`, one JSON value per submission.
    pub fn status(&self) -> Vec<serde_json::Value> {
        self.cli(&["status"])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("hubd status line {l:?}: {e}")))
            .collect()
    }

    /// Waits (at most 30 s) until a runner's long poll waits at the hub.
    pub fn wait_for_a_poll(&self) {
        wait_for("a runner's long poll to wait at the hub", Duration::from_secs(30), || {
            self.cli(&["status", "--runners"]).lines().any(|l| l.contains("\"polling\":true")).then_some(())
        });
    }

    /// One figure of the hub's `/metrics`, by its name (panics without it).
    pub fn metric(&self, name: &str) -> f64 {
        let (code, page) = http_exchange("GET", &format!("{}/metrics", self.url), None, None);
        assert_eq!(code, 200);
        let page = String::from_utf8(page).unwrap();
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{page}"))
    }

    /// Waits (at most 30 s) until a runner's long poll waits at the hub
    /// with at least `left` to go: time for a test to act while it waits
    /// (polls are short under the suite's `OJ_TIME_SCALE`).
    pub fn wait_for_a_poll_lasting(&self, left: Duration) {
        let db = self.db.clone();
        wait_for("a runner's long poll with time left to wait", Duration::from_secs(30), || {
            let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
            let _ = c.busy_timeout(Duration::from_secs(10));
            let until: Option<i64> =
                c.query_row("SELECT max(polling_until) FROM runners", [], |r| r.get(0)).ok().flatten();
            until.filter(|t| *t >= now_ms() + left.as_millis() as i64).map(|_| ())
        });
    }

    /// The status of one submission.
    pub fn submission(&self, id: &str) -> serde_json::Value {
        self.status()
            .into_iter()
            .find(|s| s["submission_id"] == id)
            .unwrap_or_else(|| panic!("no submission {id} in hubd status"))
    }

    /// Waits until every submission is finished (has a verdict).
    pub fn wait_all_judged(&self, limit: Duration) -> Vec<serde_json::Value> {
        wait_for("every submission to be judged", limit, || {
            let s = self.status();
            s.iter().all(|x| x["state"] == "done").then_some(s)
        })
    }
}

/// Runs `hubd --db DB args…`, returning stdout; panics with stderr on failure.
pub fn hub_cli(db: &Path, args: &[&str]) -> String {
    let out = Command::new(bin("hubd")).arg("--db").arg(db).args(args).output().expect("run hubd");
    assert!(out.status.success(), "hubd {args:?} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The environment a runner needs to talk to `hub`, spooling in `spool`.
pub fn runner_env(hub: &Hub, spool: &Path) -> Vec<(String, String)> {
    runner_env_at(&hub.url, spool)
}

/// The environment a runner needs to talk to the hub at `url`.
pub fn runner_env_at(url: &str, spool: &Path) -> Vec<(String, String)> {
    vec![
        ("BACKEND_URL".into(), url.to_string()),
        ("RUNNER_REGISTRATION_TOKEN".into(), REGISTRATION_TOKEN.into()),
        ("SANDBOX_TOKEN".into(), TESTDATA_TOKEN.into()),
        ("RUNNER_NAME".into(), "test-runner".into()),
        ("OJ_SPOOL".into(), spool.to_str().unwrap().into()),
        // Retry delays and deadlines in tenths, so faults resolve in seconds.
        ("OJ_TIME_SCALE".into(), "0.1".into()),
        ("RUST_LOG".into(), std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
    ]
}

/// Starts `runnerd` (a whole runner) against `hub`.
pub fn start_runner(hub: &Hub, spool: &Path, extra_env: &[(&str, &str)]) -> Proc {
    start_stage(hub, spool, "runnerd", extra_env)
}

/// Starts one program of a runner (`runnerd`, or a stage alone) against `hub`.
pub fn start_stage(hub: &Hub, spool: &Path, program: &str, extra_env: &[(&str, &str)]) -> Proc {
    let mut cmd = Command::new(bin(program));
    cmd.envs(runner_env(hub, spool)).envs(extra_env.iter().map(|(a, b)| (a.to_string(), b.to_string())));
    Proc::spawn(&mut cmd, program)
}

/// A stage's answer to `status` on its control socket, within the 3 s
/// runnerd gives each; `None` if it gave none.
pub fn stage_status(spool: &Path, stage: &str) -> Option<serde_json::Value> {
    ojrunner::control::request(spool, stage, &serde_json::json!({"cmd": "status"}), Duration::from_secs(3)).ok()
}

/// The example problems and submissions shipped in `examples/`.
pub fn examples() -> PathBuf {
    repo().join("examples")
}

/// Starts `runnerd` with its stderr (every stage's log) in `log`.
pub fn start_runner_logged(hub: &Hub, spool: &Path, extra_env: &[(&str, &str)], log: &Path) -> Proc {
    let mut cmd = Command::new(bin("runnerd"));
    cmd.envs(runner_env(hub, spool)).envs(extra_env.iter().map(|(a, b)| (a.to_string(), b.to_string())));
    cmd.stderr(std::fs::File::create(log).expect("runner log"));
    Proc::of(cmd.spawn().expect("spawn runnerd"), "runnerd", Some(log))
}

/// One row of a runner's spool, as a test sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolClaim {
    pub claim_id: i64,
    pub job_id: String,
    pub state: String,
    pub note: String,
}

/// The claims in a runner's spool (read-only; empty if there is no spool yet).
pub fn spool_claims(spool: &Path) -> Vec<SpoolClaim> {
    let db = spool.join("spool.db");
    if !db.exists() {
        return Vec::new();
    }
    let Ok(c) = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Vec::new();
    };
    let _ = c.busy_timeout(Duration::from_secs(10));
    let Ok(mut st) = c.prepare("SELECT claim_id, job_id, state, note FROM claims ORDER BY claim_id") else {
        return Vec::new();
    };
    st.query_map([], |r| Ok(SpoolClaim { claim_id: r.get(0)?, job_id: r.get(1)?, state: r.get(2)?, note: r.get(3)? }))
        .map(|rows| rows.flatten().collect())
        .unwrap_or_default()
}

/// The pid of `parent`'s child whose command name is `name`.
pub fn child_pid(parent: i32, name: &str) -> Option<i32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // comm is in parentheses and may hold spaces; ppid is the 2nd field after it.
        let Some(close) = stat.rfind(')') else { continue };
        let comm = &stat[stat.find('(').unwrap_or(0) + 1..close];
        let ppid = stat[close + 2..].split(' ').nth(1).and_then(|p| p.parse::<i32>().ok());
        if comm == name && ppid == Some(parent) {
            return Some(pid);
        }
    }
    None
}

/// A+B in Python that sleeps `secs` before answering: AC, slowly.
pub fn slow_ab(dir: &Path, secs: f64) -> PathBuf {
    write_file(
        dir,
        &format!("slow{secs}.py"),
        &format!("import sys, time\na, b = map(int, sys.stdin.read().split())\ntime.sleep({secs})\nprint(a + b)\n"),
    )
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A problem directory `dir/name` of one task of one case: `input` and its
/// `answer`, under a time limit of `time_limit_ms`.
pub fn one_case_problem(dir: &Path, name: &str, time_limit_ms: u64, input: &str, answer: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    let meta = serde_json::json!({"tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": time_limit_ms, "caseCount": 1}]});
    write_file(&p, "meta.json", &meta.to_string());
    write_file(&p, "0000.in", input);
    write_file(&p, "0000.out", answer);
    p
}

/// A fresh `dir/src` holding one source file, `name` with `text` (what a
/// judge stages as a submission); its path.
pub fn source_dir(dir: &Path, name: &str, text: &str) -> PathBuf {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join(name), text).unwrap();
    src
}

/// One integer from a runner's spool (`SELECT count(*) …`, say); None if
/// the spool is not there yet.
pub fn spool_int(spool: &Path, sql: &str) -> Option<i64> {
    let db = spool.join("spool.db");
    let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    let _ = c.busy_timeout(Duration::from_secs(10));
    c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0)).ok().flatten()
}

/// The runner id in a spool.
pub fn spool_runner_id(spool: &Path) -> Option<String> {
    let db = spool.join("spool.db");
    let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    let _ = c.busy_timeout(Duration::from_secs(10));
    c.query_row("SELECT runner_id FROM identity", [], |r| r.get(0)).ok()
}

/// Kills a stage of a runner (SIGKILL): a crash.
pub fn kill_stage(runner: &Proc, stage: &str) -> i32 {
    let pid =
        wait_for(&format!("{stage} to run"), Duration::from_secs(30), || child_pid(runner.pid(), stage_comm(stage)));
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    pid
}

/// The kernel's name of a stage's process (comm is cut at 15 bytes).
pub fn stage_comm(stage: &str) -> &str {
    &stage[..stage.len().min(15)]
}

/// Pids of live or zombie processes of `uid`.
pub fn processes_of(uid: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).ok().is_some_and(|s| {
                s.lines()
                    .any(|l| l.strip_prefix("Uid:").and_then(|v| v.split_whitespace().next()) == Some(&uid.to_string()))
            })
        })
        .collect()
}

/// A run in `dir` (its cwd and only bind, read-only) as slot `slot`, stdio
/// on /dev/null, with a memory and a task limit and roomy times.
pub fn slot_spec(argv: &[&str], dir: &Path, slot: usize, memory_mib: u64, processes: u64) -> ojrunner::sandbox::Spec {
    use ojrunner::sandbox::{Bind, Limits, Spec};
    let null = || std::fs::File::options().read(true).write(true).open("/dev/null").unwrap();
    Spec {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        cwd: dir.to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        stdin: null(),
        stdout: null(),
        stderr: null(),
        identity: ojrunner::judge::Slot::for_index(slot).identity(),
        limits: Limits {
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(10),
            memory: memory_mib << 20,
            address_space: None,
            stack: None,
            output: 1 << 20,
            processes: Some(processes),
        },
        binds: vec![Bind { path: dir.to_path_buf(), writable: false, at: None }],
    }
}

/// The runs' groups (`helper-<pid>`) of every sandbox helper of this
/// machine's layout (v1: per controller; v2: where `delegation.rs` puts
/// them), found as the sandbox finds its own.
pub fn runs_cgroups() -> Vec<PathBuf> {
    let Some(h) = ojrunner::sandbox::cgroup::Hierarchy::detect() else { return Vec::new() };
    h.parents()
        .into_iter()
        .flat_map(|parent| std::fs::read_dir(parent).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("helper-"))
        .map(|e| e.path())
        .collect()
}

/// A small tmpfs mounted for a test (a spool on a disk that can fill up),
/// unmounted on drop. Needs root, as the suite does.
pub struct SmallDisk {
    pub dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB at `dir` (created).
    pub fn mount(dir: &Path, mib: u64) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0755"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(out.status.success(), "mount a tmpfs at {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
        SmallDisk { dir: dir.to_path_buf() }
    }

    /// Fills the disk until a write fails with ENOSPC (a file `filler`).
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.dir.join("filler")).expect("create the filler");
        let block = vec![0u8; 64 * 1024];
        let mut size = block.len();
        // Large blocks first, then smaller, to the last page.
        while size >= 512 {
            match f.write_all(&block[..size]) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => size /= 2,
                Err(e) => panic!("filling {}: {e}", self.dir.display()),
            }
        }
        let _ = f.sync_all();
    }

    /// Frees what [`SmallDisk::fill`] took.
    pub fn free(&self) {
        std::fs::remove_file(self.dir.join("filler")).expect("remove the filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a process of the test may still hold a file there.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// When the runner last noted a heartbeat attempted (ms since the epoch),
/// read as `Spool::last_beat` reads it: the beat file's time, or the
/// [`ojrunner::lease::LAST_BEAT_AT`] control value, whichever is later.
pub fn spool_last_beat(spool: &Path) -> i64 {
    let file = std::fs::metadata(spool.join("beat"))
        .and_then(|m| m.modified())
        .map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64)
        .unwrap_or(0);
    let db = spool.join("spool.db");
    let row = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()
        .and_then(|c| {
            let sql = "SELECT value FROM control WHERE key = ?";
            c.query_row(sql, [ojrunner::lease::LAST_BEAT_AT], |r| r.get::<_, String>(0)).ok()
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    file.max(row)
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One process-level scenario of the restart and drain cases: a scratch
/// directory, a hub with the A+B problem (`examples/problems/1`), and a
/// spool for the runner the test starts ([`Scenario::start`]); what the
/// test does in the middle (a kill, an outage, a drain) is its own.
pub struct Scenario {
    pub dir: TempDir,
    pub hub: Hub,
    pub spool: PathBuf,
}

/// A new [`Scenario`] in a directory tagged `tag`, its hub started with
/// `hub_flags`.
pub fn scenario(tag: &str, hub_flags: &[&str]) -> Scenario {
    let dir = TempDir::new(tag);
    let hub = Hub::start(dir.path(), hub_flags);
    hub.add_problem(1, &examples().join("problems/1"));
    let spool = dir.path().join("spool");
    Scenario { dir, hub, spool }
}

impl Scenario {
    /// Submits the C A+B that is AC; its id.
    pub fn submit_ab(&self) -> String {
        self.hub.submit(1, "c11", &examples().join("submissions/ab_ok.c"))
    }

    /// Submits a Python A+B that sleeps `secs` per case (AC, slowly); its id.
    pub fn submit_slow_ab(&self, secs: f64) -> String {
        self.hub.submit(1, "python3", &slow_ab(self.dir.path(), secs))
    }

    /// Starts a runner (`runnerd`) on the scenario's spool.
    pub fn start(&self, env: &[(&str, &str)]) -> Proc {
        start_runner(&self.hub, &self.spool, env)
    }

    /// Starts a runner with its log in `runner.log` (see [`Scenario::log`]).
    pub fn start_logged(&self, env: &[(&str, &str)]) -> Proc {
        start_runner_logged(&self.hub, &self.spool, env, &self.dir.path().join("runner.log"))
    }

    /// What a runner of [`Scenario::start_logged`] has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("runner.log")).unwrap_or_default()
    }

    /// Waits (at most `limit`) until every submission is judged; `sub`'s status.
    pub fn judged(&self, sub: &str, limit: Duration) -> serde_json::Value {
        let all = self.hub.wait_all_judged(limit);
        all.into_iter().find(|s| s["submission_id"] == sub).unwrap_or_else(|| panic!("no submission {sub}"))
    }

    /// Waits (at most a minute) until the runner is judging a claim; that claim.
    pub fn judging_claim(&self) -> SpoolClaim {
        judging_claim(&self.spool)
    }

    /// Waits (at most a minute) until `n` cases are judged.
    pub fn wait_cases(&self, n: i64) {
        wait_cases(&self.spool, n)
    }

    /// Waits (at most a minute) until an outcome has been tried `n` times.
    pub fn wait_outbox_tries(&self, what: &str, n: i64) {
        wait_for(what, Duration::from_secs(60), || {
            (spool_int(&self.spool, "SELECT max(tries) FROM outbox").unwrap_or(0) >= n).then_some(())
        });
    }

    /// Drains `runner` (TERM) and checks that it exits 0 ([`drain`]).
    pub fn drain(&self, runner: Proc) {
        drain(runner)
    }
}

/// Drains `runner` (TERM) and checks that it exits 0 within a minute.
pub fn drain(mut runner: Proc) {
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(runner.wait_exit(Duration::from_secs(60)), 0, "the runner drained cleanly");
}

/// Waits (at most a minute) until a runner on `spool` is judging a claim;
/// that claim.
pub fn judging_claim(spool: &Path) -> SpoolClaim {
    wait_for("the job to be judging", Duration::from_secs(60), || {
        spool_claims(spool).into_iter().find(|c| c.state == "started")
    })
}

/// Waits (at most a minute) until `spool` holds `n` case results.
pub fn wait_cases(spool: &Path, n: i64) {
    wait_for(&format!("{n} case(s) judged"), Duration::from_secs(60), || {
        (spool_int(spool, "SELECT count(*) FROM case_results").unwrap_or(0) >= n).then_some(())
    });
}

/// Checks a submission ended AC, judged once, on one handout.
pub fn assert_clean_ac(s: &serde_json::Value) {
    assert_eq!(s["verdict"], "AC", "{s}");
    assert_eq!(s["completes"], 1, "{s}");
    assert_eq!(s["handouts"], 1, "the job was never reclaimed: {s}");
    assert_eq!(s["attempts"], 1, "{s}");
}

/// One HTTP exchange on a fresh connection: the status and the body,
/// whatever the status (a transport error panics, naming the call).
pub fn http_exchange(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, Vec<u8>) {
    use std::io::Read;
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build();
    let mut req = agent.request(method, url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => req.set("Content-Type", "application/json").send_string(b),
        None => req.call(),
    };
    let res = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let code = res.status();
    let mut bytes = Vec::new();
    res.into_reader().read_to_end(&mut bytes).unwrap();
    (code, bytes)
}

/// One request a [`ScriptedHub`] heard: method, path, body.
#[derive(Clone, Debug)]
pub struct Heard {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// A hub written by hand, for answers `hubd` never gives: it registers any
/// runner (`rn_scripted`, a 1 s heartbeat and poll), answers heartbeats 204,
/// answers each `next-job` with the next of its scripted bodies as a 200
/// (then 204), completes 204, aborts 202, and keeps every request it heard.
pub struct ScriptedHub {
    pub url: String,
    pub heard: std::sync::Arc<std::sync::Mutex<Vec<Heard>>>,
}

impl ScriptedHub {
    /// Starts on a loopback port, handing out `jobs` in order.
    pub fn start(jobs: Vec<Vec<u8>>) -> ScriptedHub {
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind(format!("{}:0", loopback())).expect("bind a scripted hub");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heard: Arc<Mutex<Vec<Heard>>> = Arc::default();
        let jobs = Arc::new(Mutex::new(std::collections::VecDeque::from(jobs)));
        let log = heard.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, jobs) = (log.clone(), jobs.clone());
                std::thread::spawn(move || ScriptedHub::serve(conn, &log, &jobs));
            }
        });
        ScriptedHub { url, heard }
    }

    fn serve(
        mut conn: std::net::TcpStream,
        log: &std::sync::Mutex<Vec<Heard>>,
        jobs: &std::sync::Mutex<std::collections::VecDeque<Vec<u8>>>,
    ) {
        use std::io::{Read, Write};
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let mut words = head.split_whitespace();
        let (method, path) = (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
        let length = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
            .unwrap_or(0usize);
        let mut body = vec![0u8; length];
        if conn.read_exact(&mut body).is_err() {
            return;
        }
        log.lock().unwrap().push(Heard { method: method.clone(), path: path.clone(), body });
        let (status, answer): (&str, Vec<u8>) = if path == "/runners/register" {
            let reg = r#"{"runner_id": "rn_scripted", "token": "rk_scripted", "config": {"heartbeat_interval_sec": 1, "poll_interval_sec": 1, "max_concurrent_jobs": 4}}"#;
            ("201 Created", reg.as_bytes().to_vec())
        } else if path.contains("/next-job") && method == "GET" {
            match jobs.lock().unwrap().pop_front() {
                Some(job) => ("200 OK", job),
                None => {
                    std::thread::sleep(Duration::from_millis(500));
                    ("204 No Content", Vec::new())
                }
            }
        } else if path.ends_with("/abort") {
            ("202 Accepted", b"{}".to_vec())
        } else {
            ("204 No Content", Vec::new())
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            answer.len()
        );
        // A runner may stop reading a body it will not take whole.
        let _ = conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(&answer));
    }

    /// The requests heard so far whose method is `method` and whose path ends with `tail`.
    pub fn heard(&self, method: &str, tail: &str) -> Vec<Heard> {
        self.heard.lock().unwrap().iter().filter(|h| h.method == method && h.path.ends_with(tail)).cloned().collect()
    }
}

/// A runner identity speaking the protocol by hand (one fresh connection a
/// call), for the hub's own suites.
#[derive(Clone)]
pub struct HandRunner {
    pub url: String,
    pub id: String,
    pub token: String,
}

impl HandRunner {
    /// Registers at the hub at `url` under `name`.
    pub fn register(url: &str, name: &str) -> HandRunner {
        let body = serde_json::json!({"registration_token": REGISTRATION_TOKEN, "name": name}).to_string();
        let (code, reply) = http_exchange("POST", &format!("{url}/runners/register"), None, Some(&body));
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&reply));
        let reply: serde_json::Value = serde_json::from_slice(&reply).expect("a JSON registration");
        HandRunner {
            url: url.to_string(),
            id: reply["runner_id"].as_str().unwrap().into(),
            token: reply["token"].as_str().unwrap().into(),
        }
    }

    /// The URL of this runner's `rest` (`heartbeat`, `jobs/{jb}/…`).
    pub fn at(&self, rest: &str) -> String {
        format!("{}/runners/{}/{rest}", self.url, self.id)
    }

    fn send(&self, method: &str, rest: &str, body: Option<&str>) -> (u16, Vec<u8>) {
        http_exchange(method, &self.at(rest), Some(&self.token), body)
    }

    /// `next-job?wait=S`: the status and the payload when 200.
    pub fn next_job(&self, wait: u32) -> (u16, Option<serde_json::Value>) {
        let (code, body) = self.send("GET", &format!("next-job?wait={wait}"), None);
        (code, (code == 200).then(|| serde_json::from_slice(&body).expect("a JSON job")))
    }

    /// A job, asking until one comes (at most `limit`).
    pub fn claim(&self, limit: Duration) -> serde_json::Value {
        wait_for("a job to claim", limit, || self.next_job(1).1)
    }

    pub fn heartbeat(&self, jobs: &[&str]) -> u16 {
        self.send("POST", "heartbeat", Some(&serde_json::json!({"active_job_ids": jobs}).to_string())).0
    }

    /// `DELETE next-job`: ends this runner's waiting poll.
    pub fn cancel_poll(&self) -> u16 {
        self.send("DELETE", "next-job", None).0
    }

    pub fn complete(&self, job: &str, body: &str) -> u16 {
        self.send("PUT", &format!("jobs/{job}/complete"), Some(body)).0
    }

    pub fn abort(&self, job: &str, reason: &str) -> u16 {
        self.send("PUT", &format!("jobs/{job}/abort"), Some(&serde_json::json!({ "reason": reason }).to_string())).0
    }
}

/// The figures of a sample of times: nearest-rank percentiles (with 20
/// samples, p99 is the largest), as `ojrunner::phase` takes them.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub p50: Duration,
    pub p99: Duration,
    pub min: Duration,
    pub max: Duration,
}

/// The [`Stats`] of `v` (not empty).
pub fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    Stats { p50: at(0.50), p99: at(0.99), min: v[0], max: v[v.len() - 1] }
}

/// A benchmark's targets, each printed PASS or MISS as it is checked; the
/// misses are counted for the last line.
#[derive(Default)]
pub struct Report {
    pub misses: usize,
}

impl Report {
    pub fn target(&mut self, name: &str, measured: String, ok: bool) {
        if !ok {
            self.misses += 1;
        }
        println!("  {:<4}  {name:<52} {measured}", if ok { "PASS" } else { "MISS" });
    }
}

/// A benchmark's setting from the environment, or its default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The machine a benchmark ran on, for the first line of its report: CPU
/// model, cores, kernel.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}", kernel.trim())
}

/// A small deterministic generator (xorshift64*) for the suites that deal
/// blows at random: no crate for a dice. Seed it with [`seed_from`].
pub struct Dice(pub u64);

impl Dice {
    pub fn roll(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.roll() % n
    }

    /// A duration from `lo` (included) to `hi` (excluded) milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo))
    }
}

/// The seed in the variable `name` (to replay a run), else one from the
/// clock; never 0, which xorshift would keep.
pub fn seed_from(name: &str) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    }) | 1
}

/// Says that the calling test is skipped, and why (it then returns: the
/// harness counts it as passed). Each skip is also a line of
/// `target/test-logs/skipped.log`, which `make test` counts and names in
/// its last line, so a skip is never taken for a pass.
pub fn skip(why: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let suite = std::env::current_exe()
        .ok()
        .and_then(|e| {
            e.file_name().map(|n| {
                n.to_string_lossy().rsplit_once('-').map_or(n.to_string_lossy().into_owned(), |(s, _)| s.to_string())
            })
        })
        .unwrap_or_default();
    eprintln!("skipped: {why}");
    let log = repo().join("target/test-logs");
    let _ = std::fs::create_dir_all(&log);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log.join("skipped.log")) {
        let _ = writeln!(f, "{suite}::{test}: {why}");
    }
}

/// Judges `source` in the language `lang` on every case of task 0 in `td`
/// (`00CC.in` with `00CC.out`) with the checker `checker` (a job's name;
/// `None` is diff), as worker `slot` would below `judge-exec`: prepares
/// the checker, compiles, runs each case in `work/cases/00CC/` under
/// `time_ms` of CPU. For the suites of checkers and interactors.
pub fn judge_cases(
    work: &Path,
    lang: &str,
    source: &str,
    td: &Path,
    checker: Option<&str>,
    time_ms: i64,
    slot: usize,
) -> Vec<ojrunner::judge::CaseRun> {
    use ojrunner::judge::{Case, Compiled, Judge, Slot, Submission};
    use ojrunner::protocol::Task;
    let j = Judge::default();
    let langs = ojrunner::language::Languages::builtin();
    let lang = langs.by_name(lang).unwrap();
    let slot = Slot::for_index(slot);
    let checker =
        j.prepare_checker(checker, td, &work.join("cache"), &slot).unwrap_or_else(|e| panic!("{checker:?}: {e}"));
    let src = source_dir(work, &lang.source, source);
    let src = ojrunner::workspace::Workspace::stage(&src).unwrap();
    assert_eq!(j.compile(lang, &src, &slot), Compiled::Ready);
    let count = std::fs::read_dir(td)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "in"))
        .count();
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: time_ms, case_count: count as i64 };
    (0..count)
        .map(|c| {
            let scratch = work.join("cases").join(format!("00{c:02}"));
            let _ = std::fs::remove_dir_all(&scratch);
            std::fs::create_dir_all(&scratch).unwrap();
            let (input, answer) = (td.join(format!("00{c:02}.in")), td.join(format!("00{c:02}.out")));
            let sub = Submission { lang, src: &src, tasks: std::slice::from_ref(&task), checker: &checker };
            j.run_case(&sub, &Case { task: 0, case: c, input, answer }, &slot, &scratch)
        })
        .collect()
}

/// One submission of a stream and what it must get: problem, language,
/// source, verdict, score.
pub type Dish = (i64, &'static str, PathBuf, &'static str, i64);

/// Example problems 1 and 2 added to `hub`, and a stream's menu of their
/// submissions with the verdict each must get; one of them, `slow.py` in
/// `dir`, sleeps `slow_secs` (a job held that long).
pub fn stream_menu(hub: &Hub, dir: &Path, slow_secs: f64) -> Vec<Dish> {
    hub.add_problem(1, &examples().join("problems/1"));
    hub.add_problem(2, &examples().join("problems/2"));
    let slow = write_file(
        dir,
        "slow.py",
        &format!(
            "import sys, time\na, b = map(int, sys.stdin.read().split())\ntime.sleep({slow_secs})\nprint(a + b)\n"
        ),
    );
    let ex = |f: &str| examples().join("submissions").join(f);
    vec![
        (1, "c11", ex("ab_ok.c"), "AC", 100),
        (1, "python3", ex("ab_ok.py"), "AC", 100),
        (1, "python3", slow, "AC", 100),
        (1, "c11", ex("ab_wa.c"), "WA", 0),
        (1, "c11", ex("ab_re_exit.c"), "RE", 0),
        (1, "c11", ex("ab_ce.c"), "CE", 0),
        (2, "c11", ex("sum_int32.c"), "WA", 40),
        (2, "python3", ex("sum_ok.py"), "AC", 100),
    ]
}

/// A testdata directory as claimd unpacks one (root's, mode 0700) under
/// `work`: cases `00CC.in` with `00CC.out`, and `extra` files (a relative
/// name, its bytes).
pub fn testdata_dir(work: &Path, cases: &[(&str, &str)], extra: &[(&str, Vec<u8>)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = work.join("testdata");
    std::fs::create_dir(&dir).unwrap();
    for (c, (input, answer)) in cases.iter().enumerate() {
        std::fs::write(dir.join(format!("00{c:02}.in")), input).unwrap();
        std::fs::write(dir.join(format!("00{c:02}.out")), answer).unwrap();
    }
    for (name, bytes) in extra {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}
