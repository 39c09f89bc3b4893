//! One sandboxed run: spawn a command under named limits, watch it, measure
//! it, and leave nothing behind.
//!
//! # Theory of operation
//!
//! The judge never forks a program itself. [`run`] hands the run to a small
//! helper process (`helper.rs`: a fresh `exec` of the judge's own binary, one
//! per concurrent caller), so nothing of the judge's size reaches the
//! program's `ru_maxrss`. The helper, in `run_here`:
//!
//! 1. takes the slot's host-wide lock (`flock` on
//!    [`slot_lock_dir`]`/slot-<uid>.lock`): a slot serves one run at a time;
//! 2. makes the run's cgroup (`cgroup.rs`: memory limit, tasks limit, CPU
//!    accounting), when the machine has one;
//! 3. runs it in its jail (`jail.rs`: new PID, mount, IPC and UTS
//!    namespaces, the helper's empty network namespace, a read-only root of
//!    bind mounts, a private `/tmp`, the slot uid, no capabilities,
//!    `no_new_privs`, the seccomp deny list of `seccomp.rs`). The jail's
//!    init shares the helper's memory and the helper waits while it runs,
//!    so init is the watchdog: every [`POLL`] (and at once when the program
//!    exits, through a pidfd) it checks the CPU time (the cgroup's, else the
//!    run's own `/proc`), the resident memory when there is no cgroup to
//!    enforce it, the wall clock and the judge's socket, and on a limit
//!    kills every process of the run's PID namespace;
//! 4. measures ([`Usage`]) and answers as soon as init is done: init kills
//!    and reaps whatever the program left before it is, so the answer need
//!    not wait for init's own exit (the namespaces' teardown): that, init's
//!    reaping and the slot's lock wait until after the reply.
//!
//! The mechanisms in use are decided once per helper ([`Mechanisms`];
//! `judge-exec --probe` prints them). Without root (no slot identity) or
//! without namespaces, the run is the basic level: the program is forked by
//! the helper in its own process group, under rlimits and the `/proc`
//! watchdog, and cleaned up by `killpg` and a sweep of the slot uid
//! (`run_direct`).
//!
//! # The rlimits (both levels)
//!
//! | limit | why |
//! |---|---|
//! | `RLIMIT_CPU` = ⌈cpu⌉ + 1 s (hard + 1 s more) | a backstop only: the watchdog kills at the limit itself |
//! | `RLIMIT_AS` (optional) | a per-process backstop against memory the watchdog cannot see (see [`Limits::address_space`]) |
//! | `RLIMIT_STACK` | a large stack, as Normal-OJ gives (deep recursion is legal) |
//! | `RLIMIT_FSIZE` = output limit | for files the program writes (its `/tmp`, a compile's output): past it, `SIGXFSZ`. stdout and stderr are pipes the judge caps itself (`streams.rs`) |
//! | `RLIMIT_NPROC` (only with an identity) | processes + threads of the slot uid: no fork bomb (the cgroup's `pids.max` says the same per run) |
//! | `RLIMIT_CORE` = 0 | no core files |
//!
//! # Measuring
//!
//! CPU time: the cgroup's (every task of the run, user + system), else
//! `ru_utime + ru_stime` of the program and what it reaped, or the
//! watchdog's figure for the tree when larger. Peak memory: the cgroup's
//! peak less the file cache charged to it (see `cgroup.rs`; never below the
//! program's anonymous memory at the watchdog's looks, as the kernel charges
//! a group in batches of 64 pages a CPU), else the larger
//! of `ru_maxrss` and the watchdog's largest sample of the tree's resident
//! size. `ru_maxrss` is honest here because the program descends from the
//! helper, whose own resident size is small, not from the judge.

use crate::cgroup::{Group, Hierarchy};
use crate::helper::Request;
use crate::jail::{self, Jail};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often the watchdog samples the program.
pub const POLL: Duration = Duration::from_millis(10);

/// An unprivileged identity to run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Every limit of one run, by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU time (user + system) of the whole run; the watchdog kills past
    /// it. `RLIMIT_CPU` is set to ⌈this⌉ + 1 s as a backstop.
    pub cpu: Duration,
    /// Wall-clock time from spawn; the watchdog kills past it.
    pub wall: Duration,
    /// Memory of the whole run, bytes: the cgroup's hard limit is this +
    /// `cgroup::SLACK`; without a cgroup the watchdog kills past it. Also
    /// the size cap of the run's `/tmp`.
    pub memory: u64,
    /// `RLIMIT_AS` per process, bytes; `None`: unlimited. Only a backstop for
    /// memory the watchdog cannot see (allocated between two samples, or by
    /// an escapee outside the tree): the memory verdict comes from resident
    /// memory, so that reserving without touching (a big `vector` reserved
    /// but unused, Python's arenas, glibc's per-thread arenas, the JVM's
    /// heap) is not punished, and a program that touches too much is MLE
    /// rather than RE from a failed `malloc`. `judge.rs` sets the memory
    /// limit + 1 GiB; the JVM gets none.
    pub address_space: Option<u64>,
    /// `RLIMIT_STACK`, bytes; `None`: inherited.
    pub stack: Option<u64>,
    /// `RLIMIT_FSIZE`, bytes: how large any file the program writes (its
    /// stdout and stderr included) may grow.
    pub output: u64,
    /// Tasks (processes + threads): `RLIMIT_NPROC` of the slot uid and the
    /// cgroup's `pids.max`. Ignored without an identity (the count would
    /// include the caller's own processes).
    pub processes: Option<u64>,
}

/// A directory of the host the run sees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The host's directory.
    pub path: PathBuf,
    pub writable: bool,
    /// Where a jailed run sees it (`None`: at the same path). A neutral
    /// name keeps the host's layout (the spool, a claim's id) from the run.
    #[serde(default)]
    pub at: Option<PathBuf>,
}

impl Bind {
    /// The host's `path`, seen by a jailed run at `at`.
    pub fn at(path: &Path, at: &str, writable: bool) -> Bind {
        Bind { path: path.to_path_buf(), writable, at: Some(at.into()) }
    }

    /// Where a jailed run sees the directory.
    pub fn inside(&self) -> &Path {
        self.at.as_deref().unwrap_or(&self.path)
    }
}

/// `s` as a jailed run sees it: a host path at or below a bind's, moved to
/// where the run sees that bind; anything else as it is.
fn seen_inside(binds: &[Bind], s: &str) -> String {
    let p = Path::new(s);
    for b in binds {
        if let Ok(rest) = p.strip_prefix(&b.path) {
            let inside = if rest.as_os_str().is_empty() { b.inside().to_path_buf() } else { b.inside().join(rest) };
            return inside.to_string_lossy().into_owned();
        }
    }
    s.to_string()
}

/// What to run.
#[derive(Debug)]
pub struct Spec {
    /// argv; a leading `./` in `argv[0]` is resolved against `cwd`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// Already open, so the program needs no permission on the files. The
    /// program gets a regular file's sealed copy (stdin) or a pipe into it
    /// (stdout, stderr), capped at [`Limits::output`]; pipes and devices as
    /// they are (`streams.rs`).
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
    /// Who to run as; `None`: as the caller (when not root).
    pub identity: Option<Identity>,
    pub limits: Limits,
    /// The host directories the jailed run sees (`cwd` must be among them
    /// or below one); ignored by the basic level, which sees the host.
    /// An argument, `cwd` or environment value that is a host path at or
    /// below a bind (the whole value) is given to a jailed run as it sees
    /// it ([`Bind::at`]).
    pub binds: Vec<Bind>,
}

impl Spec {
    /// A trial run of `argv` (an absolute path) in `/`, stdio on
    /// `/dev/null`, no environment, no binds, modest limits: 1 s of CPU, 5 s
    /// of wall time, 64 MiB, 16 tasks.
    pub fn trial(argv: &[&str], identity: Option<Identity>) -> io::Result<Spec> {
        let null = || File::options().read(true).write(true).open("/dev/null");
        Ok(Spec {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            cwd: "/".into(),
            env: vec![],
            stdin: null()?,
            stdout: null()?,
            stderr: null()?,
            identity,
            limits: Limits {
                cpu: Duration::from_secs(1),
                wall: Duration::from_secs(5),
                memory: 64 << 20,
                address_space: None,
                stack: None,
                output: 1 << 20,
                processes: Some(16),
            },
            binds: vec![],
        })
    }
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// The shell's convention: the exit code, or 128 + the signal.
    pub fn code(self) -> i64 {
        match self {
            Exit::Code(c) => c as i64,
            Exit::Signal(s) => 128 + s as i64,
        }
    }
}

/// Which limit stopped the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fired {
    /// The watchdog: CPU time.
    Cpu,
    /// The watchdog: wall-clock time.
    Wall,
    /// The watchdog (resident memory) or the cgroup's OOM killer.
    Memory,
}

impl Fired {
    pub fn as_str(self) -> &'static str {
        match self {
            Fired::Cpu => "cpu",
            Fired::Wall => "wall",
            Fired::Memory => "memory",
        }
    }
}

/// What one run used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub exit: Exit,
    /// The limit that killed it, if one did.
    pub fired: Option<Fired>,
    /// CPU time, user + system, of the whole run.
    pub cpu: Duration,
    pub wall: Duration,
    /// Peak memory, bytes (see the module doc).
    pub memory: u64,
    /// A denied system call the program attempted (the run was then
    /// killed, and `exit` is `SIGSYS`).
    pub denied: Option<String>,
}

/// Runs `spec` to the end, in a sandbox helper. `Err` only for the judge's
/// own failures (the program could not be started, the kernel refused a
/// call): the caller's JE.
pub fn run(spec: Spec) -> Result<Usage, String> {
    let Spec { argv, cwd, env, stdin, stdout, stderr, identity, limits, binds } = spec;
    let slot_lock_dir = slot_lock_dir().to_path_buf();
    let req = Request { argv, cwd, env, identity, limits, binds, fresh_netns: netns_per_run(), slot_lock_dir };
    crate::helper::run(&req, [stdin, stdout, stderr])
}

/// Whether each jailed run gets a network namespace of its own.
static NETNS_PER_RUN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Gives each jailed run from now on a new network namespace of its own
/// (`judge-exec --netns-per-run`), where runs otherwise share their
/// helper's, which is as empty (see `jail.rs`): the letter of issue 3, at
/// 0.4 ms of wall time and more of CPU a run (`make bench` prints both).
pub fn set_netns_per_run(on: bool) {
    NETNS_PER_RUN.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether runs get a network namespace of their own ([`set_netns_per_run`]).
pub fn netns_per_run() -> bool {
    NETNS_PER_RUN.load(std::sync::atomic::Ordering::Relaxed)
}

/*** The mechanisms (decided once per helper) ***/

/// Which isolation and accounting the helper uses.
#[derive(Debug)]
pub struct Mechanisms {
    /// Runs are jailed (namespaces, bind-mounted root, seccomp): root only.
    pub namespaces: bool,
    /// The cgroup hierarchy runs get groups in, if any.
    pub cgroup: Option<Hierarchy>,
}

static MECHANISMS: OnceLock<Mechanisms> = OnceLock::new();

/// Called once when a helper starts: its own network namespace, the jail's
/// mount point, the cgroup parents; adopts orphans (for the basic level).
pub(crate) fn helper_init() {
    become_subreaper();
    MECHANISMS.get_or_init(|| {
        let root = unsafe { libc::geteuid() } == 0;
        // Its own network namespace (empty: every run's) and mount namespace
        // (where the runs' template root lives).
        let namespaces = root && unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) } == 0;
        if namespaces {
            let ready = jail::drop_bounding_set()
                .map_err(|e| format!("emptying the capability bounding set: {e}"))
                .and_then(|()| jail::build_template().map_err(|e| format!("building the sandbox's root: {e}")));
            let _ = JAIL_READY.set(ready);
        }
        let cgroup = if root { Hierarchy::detect() } else { None };
        if let Some(h) = &cgroup {
            h.remove_stale();
            // The helper lives in its run's cgroup (see `cgroup.rs`): the
            // memory controller's OOM killer must never pick it. Refused
            // without CAP_SYS_RESOURCE; runs rank first anyway
            // (`jail::OOM_FIRST`).
            let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
        }
        Mechanisms { namespaces, cgroup }
    });
}

/// The `oom_score_adj` a helper started now gets: -1000 where the process
/// may lower its score (`CAP_SYS_RESOURCE` in its effective set), else the
/// caller's own, which the helper inherits.
pub fn helper_oom_score_adj() -> i32 {
    if has_cap_sys_resource() {
        return -1000;
    }
    std::fs::read_to_string("/proc/self/oom_score_adj").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Whether this process has `CAP_SYS_RESOURCE` in its effective set: it may
/// lower its `oom_score_adj` and raise a hard rlimit. Root in many
/// containers does not.
pub fn has_cap_sys_resource() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    effective.is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

/// The mechanisms a helper started now would use, without changing this
/// process (for `judge-exec --probe`).
pub fn probe_mechanisms() -> Mechanisms {
    let root = unsafe { libc::geteuid() } == 0;
    Mechanisms { namespaces: probe_namespaces(), cgroup: if root { Hierarchy::detect() } else { None } }
}

/// Whether helpers started now will jail their runs (root, and the
/// namespaces can be made).
pub fn probe_namespaces() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    root && {
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let f =
                libc::CLONE_NEWNET | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
            unsafe { libc::_exit(if libc::unshare(f) == 0 { 0 } else { 1 }) };
        }
        pid > 0 && reap(pid).map(|(s, _)| s == 0).unwrap_or(false)
    }
}

/// Whether the helper could ready its runs' jail: its bounding set emptied,
/// the template root built (see `jail.rs`).
static JAIL_READY: OnceLock<Result<(), String>> = OnceLock::new();

fn mechanisms() -> &'static Mechanisms {
    MECHANISMS.get_or_init(|| Mechanisms { namespaces: false, cgroup: None })
}

/// The helper's cgroup (made at its first jailed run).
static GROUP: Mutex<Option<Group>> = Mutex::new(None);

/// What is left of a jailed run once its result is known: init, which
/// killed and reaped every process of the run before its report, still has
/// to exit (its namespaces' teardown, 0.2 ms the judge need not wait for)
/// and be reaped; the template's mount points go; the slot's lock is held
/// until then.
struct Leftover {
    init: libc::pid_t,
    binds: Vec<Bind>,
    _slot_lock: Option<File>,
}

static LEFTOVER: Mutex<Option<Leftover>> = Mutex::new(None);

/// Work left for after the reply (so the judge does not wait for it).
pub(crate) fn after_reply() {
    clean_up();
}

/// Set when this helper must serve no more runs (see `run_jailed`).
static RETIRE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the helper must exit after its answer: a fresh one serves next.
pub(crate) fn must_retire() -> bool {
    RETIRE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Finishes the last jailed run, if that is left to do.
fn clean_up() {
    let Some(left) = LEFTOVER.lock().unwrap().take() else { return };
    let _ = reap(left.init);
    finish(GROUP.lock().unwrap().as_ref(), &left.binds);
}

/// After init is gone: a second belt for the group, the template as it was.
fn finish(group: Option<&Group>, binds: &[Bind]) {
    if let Some(g) = group {
        // Nothing is left after init's death; this is a second belt.
        if !g.is_empty() {
            g.kill_all();
        }
    }
    jail::forget(binds);
}

/// When the helper exits: its cgroup goes.
pub(crate) fn helper_exit() {
    clean_up();
    if let Some(g) = GROUP.lock().unwrap().take() {
        g.kill_all();
        let _ = g.leave();
        if let Err(e) = g.remove() {
            eprintln!("ojrunner-sandbox-helper: removing its cgroup: {e}");
        }
    }
}

/*** One run, in the helper ***/

/// Runs one request (in the helper; `hangup` is the judge's socket: if it
/// closes, the run is killed).
pub(crate) fn run_here(req: Request, stdio: [File; 3], hangup: RawFd) -> Result<Usage, String> {
    let program = match req.argv.first() {
        Some(p) if p.starts_with("./") => req.cwd.join(&p[2..]),
        Some(p) => PathBuf::from(p),
        None => return Err("empty command".into()),
    };
    // Held until the run is cleaned up: another judge process using the same
    // slot uid waits instead of having its program swept away.
    clean_up();
    let slot_lock = match req.identity {
        Some(id) => {
            Some(lock_slot(&req.slot_lock_dir, id.uid).map_err(|e| format!("locking slot uid {}: {e}", id.uid))?)
        }
        None => None,
    };
    match req.identity {
        Some(id) if mechanisms().namespaces => run_jailed(req, program, id, stdio, hangup, slot_lock),
        _ => run_direct(req, program, stdio, hangup),
    }
}

fn run_jailed(
    req: Request,
    program: PathBuf,
    id: Identity,
    stdio: [File; 3],
    hangup: RawFd,
    slot_lock: Option<File>,
) -> Result<Usage, String> {
    static FILTER: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    if let Some(Err(e)) = JAIL_READY.get() {
        return Err(e.clone());
    }
    jail::set_identity(id.uid, id.gid).map_err(|e| format!("the sandbox's passwd: {e}"))?;
    if !req.fresh_netns {
        if let Err(e) = jail::renew_netns_if_used() {
            // Its namespace holds a run's socket still: no more runs here.
            RETIRE.store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(format!("a new network namespace for the helper: {e}"));
        }
    }
    let limits = &req.limits;
    let mut slot = GROUP.lock().unwrap();
    if slot.is_none() {
        if let Some(h) = mechanisms().cgroup.as_ref() {
            let name = format!("helper-{}", std::process::id());
            // The helper joins its group once and stays: the run's processes
            // are born in it, and no run pays for a migration.
            *slot = h
                .create(&name, limits.memory, limits.processes)
                .and_then(|g| match g.join() {
                    Ok(()) => Ok(g),
                    Err(e) => {
                        let _ = g.leave();
                        let _ = g.remove();
                        Err(e)
                    }
                })
                .map_err(|e| eprintln!("ojrunner-sandbox-helper: no cgroup: {e}"))
                .ok();
        }
    }
    let group = slot.as_ref();
    let baseline = match group.map(|g| g.reset(limits.memory, limits.processes)).transpose() {
        Ok(b) => b.unwrap_or_default(),
        Err(e) => return Err(format!("resetting the run's cgroup: {e}")),
    };
    // The helper's own CPU time is counted by the group too: subtracted.
    let own_cpu = own_cpu();
    // The watchdog runs in init, while the helper waits: the group's time
    // less the helper's since the reset (its `clone` of init included, read
    // from its schedstat, held open: init has its own /proc) and init's own.
    let seen = std::cell::Cell::new((Duration::ZERO, 0u64));
    let start = std::cell::Cell::new(Instant::now());
    static HELPER_CLOCK: OnceLock<Option<File>> = OnceLock::new();
    let helper_clock = HELPER_CLOCK.get_or_init(|| File::open(format!("/proc/{}/schedstat", std::process::id())).ok());
    let helper_spent = || {
        let now = helper_clock.as_ref().and_then(schedstat_runtime).unwrap_or(own_cpu);
        now.saturating_sub(own_cpu)
    };
    // With a cgroup, the program's own anonymous memory at each look: a
    // floor for its peak (see below).
    let anon = std::cell::Cell::new(0u64);
    let watchdog = |pid: libc::pid_t| -> jail::Watched {
        let (mut cpu, mut memory) = seen.get();
        match group {
            Some(g) => {
                cpu = cpu.max(g.cpu().saturating_sub(helper_spent()).saturating_sub(self::own_cpu()));
                anon.set(anon.get().max(anon_of(pid)));
            }
            // No cgroup: the program's tree, in the run's own /proc.
            None => {
                if let Some(s) = sample_tree(pid) {
                    cpu = cpu.max(s.cpu);
                    memory = memory.max(s.resident);
                }
            }
        }
        seen.set((cpu, memory));
        look(limits, cpu, memory, start.get().elapsed())
    };
    let cs = |b: &[u8]| CString::new(b).map_err(|_| "a NUL byte in the command or environment".to_string());
    // Host paths in the command, the environment and the directory, as the run sees them.
    let inside = |s: &str| seen_inside(&req.binds, s);
    let rlimits = within_own(rlimits(limits, true));
    let jail = Jail {
        program: cs(inside(&program.to_string_lossy()).as_bytes())?,
        argv: req.argv.iter().map(|a| cs(inside(a).as_bytes())).collect::<Result<_, _>>()?,
        env: req.env.iter().map(|(k, v)| cs(format!("{k}={}", inside(v)).as_bytes())).collect::<Result<_, _>>()?,
        cwd: inside(&req.cwd.to_string_lossy()).into(),
        binds: &req.binds,
        tmp_size: limits.memory,
        rlimits: &rlimits,
        uid: id.uid,
        gid: id.gid,
        netns: req.fresh_netns,
        group,
        stdio: [stdio[0].as_raw_fd(), stdio[1].as_raw_fd(), stdio[2].as_raw_fd()],
        filter: FILTER.get_or_init(crate::seccomp::program),
        hangup,
        watchdog: &watchdog,
    };
    start.set(Instant::now());
    let (pid, rep) = jail::spawn(&jail).map_err(|e| format!("cannot start the jail: {e}"))?;
    let wall = start.get().elapsed();
    drop(stdio);
    if !rep.done {
        // init died on the way (its PID namespace went with it): say how.
        // What it shared with this helper (heap, locks, glibc's state) may
        // be half-changed: the helper answers, then exits.
        let how = reap(pid).map_or_else(|e| e.to_string(), |(status, _)| crate::helper::describe(status));
        finish(group, &req.binds);
        RETIRE.store(true, std::sync::atomic::Ordering::Relaxed);
        return Err(format!("the sandbox's init {how} during the run"));
    }
    // init killed and reaped every process of the run before it was done:
    // only its own exit (the namespaces' teardown) is left, reaped later.
    *LEFTOVER.lock().unwrap() = Some(Leftover { init: pid, binds: req.binds.clone(), _slot_lock: slot_lock });
    if rep.hangup {
        return Err("the judge went away".into());
    }
    if let Some(e) = rep.error {
        return Err(e);
    }
    let mut exit = match rep.status {
        Some(s) => decode(s),
        None => Exit::Signal(libc::SIGKILL),
    };
    let denied = rep.denied.map(crate::seccomp::name_of);
    if denied.is_some() {
        exit = Exit::Signal(libc::SIGSYS);
    }
    let rusage_cpu = Duration::from_micros(rep.cpu_us);
    let maxrss = rep.maxrss_kib * 1024;
    let (watched_cpu, watched_memory) = seen.get();
    let (cpu, memory, oom) = match group {
        Some(g) => {
            let memory = match g.memory_peak() {
                Some(peak) => {
                    // The helper's charge at the reset may still hold kernel
                    // memory of the last run (its namespaces, its /tmp) that
                    // was freed during this one, hiding as much of this
                    // run's peak: what is charged now, the run gone, is
                    // taken when it is less.
                    let cache = g.file_cache();
                    let resident = baseline.resident.min(g.memory_now().saturating_sub(cache));
                    // The kernel charges a group in batches (64 pages a
                    // CPU, taken ahead): a small program can live on what
                    // was charged before the reset and not move the peak.
                    peak.saturating_sub(cache + resident).max(anon.get())
                }
                None => maxrss.max(watched_memory),
            };
            // The group's time less the helper's and init's (building the
            // root, supervising): the program's tree.
            let theirs = group_cpu(g, own_cpu).saturating_sub(Duration::from_micros(rep.init_cpu_us));
            (theirs.max(rusage_cpu), memory, g.oom_kills() > baseline.oom_kills)
        }
        None => (rusage_cpu.max(watched_cpu), maxrss.max(watched_memory), false),
    };
    let fired = rep.fired.or(oom.then_some(Fired::Memory));
    Ok(Usage { exit, fired, cpu, wall, memory, denied })
}

/// The basic level: the program forked by the helper, in its own process
/// group, cleaned up by `killpg` and a sweep of the slot uid.
fn run_direct(req: Request, program: PathBuf, stdio: [File; 3], hangup: RawFd) -> Result<Usage, String> {
    let Request { argv, cwd, env, identity, limits, .. } = req;
    let [stdin, stdout, stderr] = stdio;
    // Everything the child needs is computed here: `pre_exec` must not allocate.
    let rlimits = within_own(rlimits(&limits, identity.is_some()));
    let parent = std::process::id() as libc::pid_t;
    let mut cmd = Command::new(&program);
    cmd.args(&argv[1..])
        .current_dir(&cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    // SAFETY: the closure only makes raw system calls (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || child_setup(&rlimits, identity, parent));
    }
    let start = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let pid = child.id() as libc::pid_t;
    // From here on the child is reaped with wait4 below, never by `child`.
    drop(child);
    drop(cmd);

    let watch = watch(pid, &limits, start, hangup);
    // Kill the group: the program if a limit fired, and any background child.
    // The group exists until the leader is reaped, so this cannot hit a reused pid.
    unsafe { libc::killpg(pid, libc::SIGKILL) };
    let (status, ru) = reap(pid).map_err(|e| format!("wait4({pid}): {e}"))?;
    let wall = start.elapsed();
    if let Some(id) = identity {
        sweep(id);
    }
    if watch.hangup {
        return Err("the judge went away".into());
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = (tv(ru.ru_utime) + tv(ru.ru_stime)).max(watch.cpu);
    let memory = (ru.ru_maxrss as u64 * 1024).max(watch.peak_memory);
    Ok(Usage { exit: decode(status), fired: watch.fired, cpu, wall, memory, denied: None })
}

fn decode(status: libc::c_int) -> Exit {
    if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    }
}

/// The rlimits as this process can set them. Without `CAP_SYS_RESOURCE` no
/// hard limit can be raised: each is capped at the helper's own (the
/// judge's, inherited), with a warning the first time, where the run would
/// otherwise never start ("setting up the program: Operation not permitted").
fn within_own(mut v: Vec<(libc::__rlimit_resource_t, u64, u64)>) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
    static PRIVILEGED: OnceLock<bool> = OnceLock::new();
    if *PRIVILEGED.get_or_init(has_cap_sys_resource) {
        return v;
    }
    static WARNED: Mutex<Vec<libc::__rlimit_resource_t>> = Mutex::new(Vec::new());
    for (resource, soft, hard) in &mut v {
        let mut own = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if unsafe { libc::getrlimit(*resource, &mut own) } != 0 || own.rlim_max >= *hard {
            continue;
        }
        let mut warned = WARNED.lock().unwrap();
        if !warned.contains(resource) {
            warned.push(*resource);
            eprintln!(
                "ojrunner-sandbox-helper: RLIMIT_{} capped at {} (asked {}): the judge's own hard limit, \
                 which cannot be raised without CAP_SYS_RESOURCE",
                rlimit_name(*resource),
                own.rlim_max,
                hard
            );
        }
        *hard = own.rlim_max;
        *soft = (*soft).min(own.rlim_max);
    }
    v
}

fn rlimit_name(resource: libc::__rlimit_resource_t) -> &'static str {
    match resource {
        libc::RLIMIT_CPU => "CPU",
        libc::RLIMIT_FSIZE => "FSIZE",
        libc::RLIMIT_CORE => "CORE",
        libc::RLIMIT_AS => "AS",
        libc::RLIMIT_STACK => "STACK",
        libc::RLIMIT_NPROC => "NPROC",
        _ => "?",
    }
}

/// `(resource, soft, hard)` triples for the child.
fn rlimits(l: &Limits, with_identity: bool) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
    let cpu_secs = l.cpu.as_secs() + u64::from(l.cpu.subsec_nanos() > 0) + 1;
    let mut v = vec![
        (libc::RLIMIT_CPU, cpu_secs, cpu_secs + 1),
        (libc::RLIMIT_FSIZE, l.output, l.output),
        (libc::RLIMIT_CORE, 0, 0),
    ];
    if let Some(a) = l.address_space {
        v.push((libc::RLIMIT_AS, a, a));
    }
    if let Some(s) = l.stack {
        v.push((libc::RLIMIT_STACK, s, s));
    }
    if let (Some(n), true) = (l.processes, with_identity) {
        v.push((libc::RLIMIT_NPROC, n, n));
    }
    v
}

/// The child between fork and exec. Async-signal-safe: raw system calls only.
fn child_setup(
    rlimits: &[(libc::__rlimit_resource_t, u64, u64)],
    identity: Option<Identity>,
    parent: libc::pid_t,
) -> io::Result<()> {
    let check = |r: libc::c_long| if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
    unsafe {
        for &(resource, soft, hard) in rlimits {
            let rl = libc::rlimit { rlim_cur: soft, rlim_max: hard };
            check(libc::setrlimit(resource, &rl) as libc::c_long)?;
        }
        libc::umask(0o022);
        if let Some(Identity { uid, gid }) = identity {
            // Raw system calls: they change this (only) thread's credentials,
            // with none of libc's cross-thread machinery.
            check(libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()))?;
            check(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
            check(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) as libc::c_long)?;
        if libc::getppid() != parent {
            // The judge died before PDEATHSIG was armed.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        only_stdio_across_exec();
    }
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec (raw system calls
/// only, so sound between `clone` and `exec`).
pub use ojrunner_daemon::fds::only_stdio_across_exec;

/// What the watchdog saw.
struct Watch {
    fired: Option<Fired>,
    cpu: Duration,
    peak_memory: u64,
    /// The judge's socket closed: the run was abandoned.
    hangup: bool,
}

/// The limits' rule, for both watchdogs (the jail's init and [`watch`]):
/// the limit that fired for what the run used so far (CPU time, memory,
/// time since its start), else how long until the next look: the next
/// sample, or just past the wall limit.
fn look(limits: &Limits, cpu: Duration, memory: u64, elapsed: Duration) -> jail::Watched {
    if cpu > limits.cpu {
        jail::Watched::Stop(Fired::Cpu)
    } else if memory > limits.memory {
        jail::Watched::Stop(Fired::Memory)
    } else if elapsed > limits.wall {
        jail::Watched::Stop(Fired::Wall)
    } else {
        jail::Watched::Wait(POLL.min(limits.wall.saturating_sub(elapsed) + Duration::from_millis(1)))
    }
}

/// The basic level's watchdog: samples `pid`'s process tree every [`POLL`]
/// (sooner when the wall limit is nearer) until `pid` exits, a limit fires
/// or the judge hangs up. Does not reap. (A jailed run is watched by its
/// init: `run_jailed`.)
fn watch(pid: libc::pid_t, limits: &Limits, start: Instant, hangup: RawFd) -> Watch {
    let pidfd = pidfd_open(pid);
    let mut w = Watch { fired: None, cpu: Duration::ZERO, peak_memory: 0, hangup: false };
    loop {
        let exited = has_exited(pid);
        if let Some(s) = sample_tree(pid) {
            w.cpu = w.cpu.max(s.cpu);
            w.peak_memory = w.peak_memory.max(s.resident);
        }
        if exited {
            return w;
        }
        // Wake at the next look, or at once when the run ends (the pidfd)
        // or the judge goes (its socket).
        let wait = match look(limits, w.cpu, w.peak_memory, start.elapsed()) {
            jail::Watched::Stop(limit) => {
                w.fired = Some(limit);
                return w;
            }
            jail::Watched::Wait(d) => d.as_millis().max(1) as libc::c_int,
        };
        let mut fds = [
            libc::pollfd { fd: pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: hangup, events: libc::POLLRDHUP, revents: 0 },
        ];
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) };
        if fds[1].revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            w.hangup = true;
            return w;
        }
    }
}

/// The calling process's own CPU time (its threads, not its children).
pub(crate) fn own_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Bytes of anonymous memory `pid` has now (`/proc/<pid>/statm`: resident
/// less shared pages); 0 if it is gone.
fn anon_of(pid: libc::pid_t) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages: Vec<u64> = statm.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    match pages[..] {
        [_, resident, shared, ..] => resident.saturating_sub(shared) * sysconf(libc::_SC_PAGESIZE),
        _ => 0,
    }
}

/// The run time of a task so far, from its `/proc/<pid>/schedstat` (held
/// open: read again from the start).
fn schedstat_runtime(f: &File) -> Option<Duration> {
    let ns = crate::cgroup::reread(f, &mut [0u8; 128])?.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// CPU time of the group less what the helper (which lives in it) used
/// since `own_at_reset`.
fn group_cpu(g: &Group, own_at_reset: Duration) -> Duration {
    g.cpu().saturating_sub(own_cpu().saturating_sub(own_at_reset))
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Whether the program has exited (it stays a zombie: `WNOWAIT`).
pub(crate) fn has_exited(pid: libc::pid_t) -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Reaps the program: its wait status and resource usage.
pub(crate) fn reap(pid: libc::pid_t) -> io::Result<(libc::c_int, libc::rusage)> {
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } == pid {
            return Ok((status, ru));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One look at a process tree.
struct Sample {
    cpu: Duration,
    /// Bytes, summed over the tree's live processes.
    resident: u64,
}

/// CPU time and resident memory of `root` and its descendants. Each live
/// process counts its own time plus its reaped children's (`cutime`,
/// `cstime`), so nothing is counted twice. `None` if `root` is gone.
fn sample_tree(root: libc::pid_t) -> Option<Sample> {
    let (tick, page) = (sysconf(libc::_SC_CLK_TCK), sysconf(libc::_SC_PAGESIZE));
    let (mut ticks, mut pages, mut seen) = (0u64, 0u64, 0usize);
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let Some((t, p)) = stat_of(pid) else {
            if pid == root {
                return None;
            }
            continue;
        };
        ticks += t;
        pages += p;
        seen += 1;
        if seen > 4096 {
            break;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            if let Ok(kids) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(kids.split_whitespace().filter_map(|k| k.parse::<libc::pid_t>().ok()));
            }
        }
    }
    let cpu = Duration::from_micros(ticks * 1_000_000 / tick);
    Some(Sample { cpu, resident: pages * page })
}

/// `(utime + stime + cutime + cstime` in ticks, `rss` in pages) of one process.
fn stat_of(pid: libc::pid_t) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid …": comm may hold anything, so split after the last ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split_whitespace().collect();
    // Field N of proc(5) is fields[N - 3]: utime 14 … cstime 17, rss 24.
    let num = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some((num(14)? + num(15)? + num(16)? + num(17)?, num(24)?))
}

fn sysconf(name: libc::c_int) -> u64 {
    (unsafe { libc::sysconf(name) }).max(1) as u64
}

/// Makes the calling process the reaper of its orphaned descendants (once),
/// so that a judged program's background children, once killed, are reaped
/// by [`sweep`] rather than left as zombies under an init that may never reap
/// them (counting against the slot's `RLIMIT_NPROC` forever).
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    });
}

/// Where the slot locks live by default: root's own directory, so no judged
/// program can hold or replace a lock file.
pub const SLOT_LOCK_DIR: &str = "/run/ojrunner";

/// The slot locks' directory for this process: `OJ_SLOT_LOCK_DIR` (read
/// once; `judge-exec --slot-lock-dir` sets it first), else
/// [`SLOT_LOCK_DIR`]. Every runner sharing slot uids must share it.
pub fn slot_lock_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("OJ_SLOT_LOCK_DIR").filter(|d| !d.is_empty()).map_or(SLOT_LOCK_DIR.into(), PathBuf::from)
    })
}

/// Takes the host-wide lock of a slot uid (`flock` on
/// `<dir>/slot-<uid>.lock`, [`slot_lock_dir`]), waiting while another
/// process holds it. Released when the returned file is dropped (or its
/// holder dies).
fn lock_slot(dir: &Path, uid: u32) -> io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(format!("slot-{uid}.lock")))?;
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(file)
}

/// After a helper died during a run: kills what is left of the run (its
/// jail, through the dead helper's cgroup; every process of the slot uid)
/// and waits until it is gone. False if a process of the uid survived.
pub(crate) fn clear_after_dead_helper(id: Identity) -> bool {
    // Taken once the dead run's init (which holds a copy) is gone; no other
    // judge's run on this uid is swept away.
    let _slot_lock = lock_slot(slot_lock_dir(), id.uid).ok();
    if let Some(h) = Hierarchy::detect() {
        h.remove_stale();
    }
    sweep(id)
}

/// Kills every process running as `id` (the ones that left the process group
/// with `setsid` included) and reaps those reparented to us. False if one
/// survived (or the sweep could not run).
fn sweep(id: Identity) -> bool {
    // kill(-1) from a process of that uid reaches exactly that uid's processes.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The forked child of a multi-threaded process: raw system calls only.
        unsafe {
            let ok = libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) == 0
                && libc::syscall(libc::SYS_setresgid, id.gid, id.gid, id.gid) == 0
                && libc::syscall(libc::SYS_setresuid, id.uid, id.uid, id.uid) == 0;
            if !ok {
                libc::_exit(2);
            }
            // Linux spares the caller itself; 0 means it found someone.
            libc::_exit(if libc::kill(-1, libc::SIGKILL) == 0 { 0 } else { 1 });
        }
    }
    if pid < 0 {
        log::warn!("sandbox: cannot fork to sweep uid {}: {}", id.uid, io::Error::last_os_error());
        return false;
    }
    let status = reap(pid).map(|(s, _)| s).unwrap_or(-1);
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => reap_orphans(id.uid, Duration::from_secs(2)),
        Some(1) => true, // nothing was left
        _ => {
            log::warn!("sandbox: the sweep of uid {} failed (status {status})", id.uid);
            false
        }
    }
}

/// Waits (at most `within`) until no process of `uid` is left, reaping the
/// ones whose parent is now us. False if some are still there.
fn reap_orphans(uid: u32, within: Duration) -> bool {
    let me = std::process::id() as libc::pid_t;
    let end = Instant::now() + within;
    loop {
        let mut left = 0;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<libc::pid_t>().ok()) else { continue };
            let Some((ppid, ruid)) = parent_and_uid(pid) else { continue };
            if ruid != uid {
                continue;
            }
            left += 1;
            if ppid == me {
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            }
        }
        if left == 0 {
            return true;
        }
        if Instant::now() > end {
            log::warn!("sandbox: {left} process(es) of uid {uid} survived the sweep");
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A process's parent and real uid, from `/proc/<pid>/status` (its owner in
/// `/proc` is root when it is not dumpable, so the file's owner won't do).
fn parent_and_uid(pid: libc::pid_t) -> Option<(libc::pid_t, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().next();
    Some((field("PPid:")?.parse().ok()?, field("Uid:")?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::path::Path;

    fn limits() -> Limits {
        Limits {
            cpu: Duration::from_secs(1),
            wall: Duration::from_secs(4),
            memory: 256 << 20,
            address_space: None,
            stack: Some(64 << 20),
            output: 1 << 20,
            processes: Some(16),
        }
    }

    fn scratch(name: &str) -> File {
        let p = std::env::temp_dir().join(format!("ojsb-{}-{name}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        f
    }

    /// Runs `sh -c script` as the caller with `input` on stdin: usage and stdout.
    fn sh(script: &str, input: &str, limits: Limits) -> (Usage, String) {
        let mut stdin = scratch("in");
        stdin.write_all(input.as_bytes()).unwrap();
        stdin.rewind().unwrap();
        let mut stdout = scratch("out");
        let spec = Spec {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            cwd: "/".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin,
            stdout: stdout.try_clone().unwrap(),
            stderr: scratch("err"),
            identity: None,
            limits,
            binds: vec![],
        };
        let usage = run(spec).unwrap();
        let mut out = String::new();
        stdout.rewind().unwrap();
        stdout.read_to_string(&mut out).unwrap();
        (usage, out)
    }

    #[test]
    fn a_program_reads_stdin_and_its_exit_is_reported() {
        let (u, out) = sh("read a b; echo $((a + b)); exit 3", "1 2\n", limits());
        assert_eq!(out, "3\n");
        assert_eq!(u.exit, Exit::Code(3));
        assert_eq!(u.exit.code(), 3);
        assert_eq!(u.fired, None);
        let (u, _) = sh("kill -SEGV $$", "", limits());
        assert_eq!(u.exit, Exit::Signal(libc::SIGSEGV));
        assert_eq!(u.exit.code(), 128 + 11);
    }

    #[test]
    fn the_environment_is_only_what_is_given() {
        let (_, out) = sh("env | sort", "", limits());
        assert!(
            out.lines().all(|l| l.starts_with("PATH=")
                || l.starts_with("PWD=")
                || l.starts_with("SHLVL=")
                || l.starts_with("_=")),
            "{out}"
        );
    }

    #[test]
    fn a_busy_loop_is_killed_at_the_cpu_limit_not_the_rlimit() {
        let mut l = limits();
        l.cpu = Duration::from_millis(300);
        let (u, _) = sh("while :; do :; done", "", l);
        assert_eq!(u.fired, Some(Fired::Cpu));
        assert!(u.cpu >= Duration::from_millis(300) && u.cpu < Duration::from_millis(900), "{u:?}");
    }

    #[test]
    fn a_sleeper_is_killed_at_the_wall_limit() {
        let mut l = limits();
        l.wall = Duration::from_millis(300);
        let (u, _) = sh("sleep 30", "", l);
        assert_eq!(u.fired, Some(Fired::Wall));
        assert!(u.wall < Duration::from_secs(3), "{u:?}");
    }

    #[test]
    fn output_past_the_limit_is_cut_there_and_the_writer_gets_sigpipe() {
        let (u, out) = sh("exec yes", "", limits());
        assert_eq!(u.exit, Exit::Signal(libc::SIGPIPE));
        assert_eq!(out.len(), 1 << 20);
    }

    #[test]
    fn outputs_cannot_be_grown_or_mapped_and_the_input_cannot_be_written() {
        // The shell's stdout is a pipe; its input a sealed copy.
        let script = "test -p /dev/stdout && echo pipe; \
            (echo x > /proc/self/fd/0) 2>/dev/null && echo wrote-input; \
            readlink /proc/self/fd/0";
        let (u, out) = sh(script, "input\n", limits());
        assert_eq!(u.exit, Exit::Code(0), "{out}");
        assert!(out.starts_with("pipe\n/memfd:stdin"), "{out}");
    }

    #[test]
    fn a_missing_program_is_an_error_not_a_usage() {
        let spec = Spec {
            argv: vec!["./no-such-program".into()],
            cwd: "/".into(),
            env: vec![],
            stdin: scratch("in2"),
            stdout: scratch("out2"),
            stderr: scratch("err2"),
            identity: None,
            limits: limits(),
            binds: vec![],
        };
        assert!(run(spec).unwrap_err().contains("/no-such-program"));
    }

    #[test]
    fn a_judge_bigger_than_the_limit_does_not_make_a_small_program_mle() {
        // 200 MiB of the judge's own, touched: fork copies it into the child's
        // high-water mark, so /bin/true's ru_maxrss is about 200 MiB.
        let ballast = std::hint::black_box(vec![1u8; 200 << 20]);
        let mut l = limits();
        l.memory = 64 << 20;
        let (u, _) = sh("exec /bin/true", "", l);
        assert_eq!(u.exit, Exit::Code(0));
        // The helper, not this process, forks the program: not even a few MiB leak in.
        assert!(u.memory < 8 << 20, "charged {} KiB", u.memory >> 10);
        drop(ballast);
    }

    #[test]
    fn without_a_slot_a_helper_dying_mid_run_is_the_judges_error_naming_how() {
        // Without a slot uid nothing can sweep what the run left (it runs as
        // the caller), so it is not run again: that is judging.rs's test.
        let marker = format!("helper-death-{}", std::process::id());
        let killer = {
            let marker = marker.clone();
            std::thread::spawn(move || {
                // The run's shell, found by its marker; its parent is the helper.
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    for e in std::fs::read_dir("/proc").unwrap().flatten() {
                        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                        if !String::from_utf8_lossy(&cmdline).contains(&marker) {
                            continue;
                        }
                        let Some((ppid, _)) = e.file_name().to_str().and_then(|p| parent_and_uid(p.parse().ok()?))
                        else {
                            continue;
                        };
                        unsafe { libc::kill(ppid, libc::SIGKILL) };
                        return ppid;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                panic!("the run never started");
            })
        };
        let spec = Spec {
            argv: vec!["/bin/sh".into(), "-c".into(), format!("sleep 1; echo done # {marker}")],
            cwd: "/".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin: scratch("in3"),
            stdout: scratch("out3"),
            stderr: scratch("err3"),
            identity: None,
            limits: limits(),
            binds: vec![],
        };
        let e = run(spec).unwrap_err();
        let killed = killer.join().unwrap();
        assert!(!Path::new(&format!("/proc/{killed}")).exists(), "the dead helper was not reaped");
        assert!(e.contains("killed by signal 9"), "{e}");
    }

    #[test]
    fn the_rlimits_are_derived_from_the_limits() {
        let mut l = limits();
        l.cpu = Duration::from_millis(1500);
        let r = rlimits(&l, false);
        assert!(r.contains(&(libc::RLIMIT_CPU, 3, 4)));
        assert!(!r.iter().any(|x| x.0 == libc::RLIMIT_NPROC), "no NPROC without an identity");
        assert!(!r.iter().any(|x| x.0 == libc::RLIMIT_AS));
        l.cpu = Duration::from_secs(2);
        l.address_space = Some(1 << 30);
        let r = rlimits(&l, true);
        assert!(r.contains(&(libc::RLIMIT_CPU, 3, 4)));
        assert!(r.contains(&(libc::RLIMIT_NPROC, 16, 16)));
        assert!(r.contains(&(libc::RLIMIT_AS, 1 << 30, 1 << 30)));
    }
}
