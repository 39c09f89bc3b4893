//! One run, in the helper: the slot's lock, the run's cgroup, the jail (or
//! the basic level), the watchdog and the measures, then the cleanup after
//! the reply.

use super::cgroup::{Group, Hierarchy};
use super::jail::{self, Jail};
use super::limits::{
    look, rlimit_name, rlimits, seen_inside, Bind, Exit, Fired, Identity, Limits, Request, Usage, Watched,
};
use super::mounts;
use super::procfs::{anon_of, sample_tree, schedstat_runtime};
use super::slot::{lock_slot, sweep};
use super::sys::{
    become_subreaper, describe, has_cap_sys_resource, has_exited, only_stdio_across_exec, own_cpu, pidfd_open, reap,
};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

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
                .and_then(|()| mounts::build_template().map_err(|e| format!("building the sandbox's root: {e}")));
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
    mounts::forget(binds);
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
    mounts::set_identity(id.uid, id.gid).map_err(|e| format!("the sandbox's passwd: {e}"))?;
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
    let watchdog = |pid: libc::pid_t| -> Watched {
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
        let how = reap(pid).map_or_else(|e| e.to_string(), |(status, _)| describe(status));
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
        Some(s) => Exit::from_status(s),
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
    Ok(Usage { exit: Exit::from_status(status), fired: watch.fired, cpu, wall, memory, denied: None })
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

/// What the watchdog saw.
struct Watch {
    fired: Option<Fired>,
    cpu: Duration,
    peak_memory: u64,
    /// The judge's socket closed: the run was abandoned.
    hangup: bool,
}

/// The basic level's watchdog: samples `pid`'s process tree every [`POLL`](super::POLL)
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
            Watched::Stop(limit) => {
                w.fired = Some(limit);
                return w;
            }
            Watched::Wait(d) => d.as_millis().max(1) as libc::c_int,
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

/// CPU time of the group less what the helper (which lives in it) used
/// since `own_at_reset`.
fn group_cpu(g: &Group, own_at_reset: Duration) -> Duration {
    g.cpu().saturating_sub(own_cpu().saturating_sub(own_at_reset))
}
