//! One sandboxed run: spawn a command under named limits, watch it, measure
//! it, and leave nothing behind.
//!
//! This is the basic level, built from rlimits, a process group, an
//! unprivileged uid and a watchdog in the parent. A later issue adds
//! namespaces, seccomp and cgroups; they slot into [`Limits`] (what to
//! enforce), [`run`] (the child's setup in `pre_exec`, the watchdog loop) and
//! [`Usage`] (what was measured, which limit fired) without changing the shape.
//!
//! # The child's setup, in order (`pre_exec`: async-signal-safe calls only)
//!
//! | step | why |
//! |---|---|
//! | own process group (`setpgid(0, 0)`, by std's `process_group(0)`) | so the parent can kill the program and every child it forked with one `killpg` |
//! | `RLIMIT_CPU` = ⌈cpu⌉ + 1 s (hard + 1 s more) | a backstop only: the watchdog kills at the limit itself |
//! | `RLIMIT_AS` (optional) | a per-process backstop against memory the watchdog cannot see (see [`Limits::address_space`]) |
//! | `RLIMIT_STACK` | a large stack, as Normal-OJ gives (deep recursion is legal) |
//! | `RLIMIT_FSIZE` = output limit | writing past it raises `SIGXFSZ`: OLE |
//! | `RLIMIT_NPROC` (only with an identity) | processes + threads of the slot uid: no fork bomb |
//! | `RLIMIT_CORE` = 0 | no core files |
//! | `umask(022)` | what the program (or compiler) creates is readable by the judge and later runs |
//! | `setgroups([])`, `setresgid`, `setresuid` to the slot (when given) | the program runs as nobody in particular |
//! | `PR_SET_NO_NEW_PRIVS` | no set-uid binary can give privileges back |
//! | `PR_SET_PDEATHSIG(SIGKILL)` | if the judge dies, so does the program (set after the uid change, which clears it; it fires when the spawning *thread* ends, and the caller's thread is blocked in [`run`] throughout) |
//!
//! The environment is exactly what the caller passes (`env_clear` first).
//!
//! # The watchdog (the parent, every [`POLL`])
//!
//! It samples the process tree under the program (`/proc/<pid>/task/*/children`,
//! recursively): CPU time (utime + stime + reaped children's, per process) and
//! resident memory (summed). It kills the process group with `SIGKILL` when the
//! CPU time passes [`Limits::cpu`] (so a busy loop with a 1 s limit dies at
//! ~1 s, not at the 2 s `RLIMIT_CPU`), the resident memory passes
//! [`Limits::memory`], or the wall clock passes [`Limits::wall`] (a sleeper is
//! TLE, not a hung judge). Between samples it sleeps on a pidfd, so a program
//! that exits is reaped at once.
//!
//! # Cleanup
//!
//! After every run the whole process group is killed (a background child does
//! not outlive its run) and the program is reaped with `wait4`. A child that
//! called `setsid` has left the group; with an identity, a helper running as
//! the slot uid then sends `SIGKILL` to every process of that uid
//! (`kill(-1)`), and the calling process, which makes itself a child
//! subreaper, reaps the ones reparented to it (an init that never reaps would
//! otherwise keep them as zombies, counted against the slot's `RLIMIT_NPROC`
//! for good). So **a slot serves one run at a time** (a run holds the slot's
//! host-wide lock, `flock` on [`SLOT_LOCK_DIR`]`/slot-<uid>.lock`, from spawn
//! to sweep: two judge processes that share slot uids take turns rather than
//! kill each other's programs), **nothing else may run as a slot uid, and the
//! calling process must not reap with `waitpid(-1)`.** While the run lasts an escapee is outside the watchdog's
//! view (bounded by its own rlimits and killed at the end); without an
//! identity (not root) it survives the run. The cgroup issue closes both.
//!
//! # Measuring
//!
//! CPU time is `ru_utime + ru_stime` from `wait4` (or the watchdog's figure
//! for the tree, when larger). Peak memory is `ru_maxrss`, which has a catch:
//! the child is forked from the judge, and at `exec` the kernel records the
//! forked copy's resident size (the judge's anonymous memory, whose page
//! tables `fork` copied) into the child's high-water mark, so `ru_maxrss` is
//! never below that (measured: a parent holding 500 MiB makes `/bin/true`
//! report 500 MiB). Small programs therefore report at least the judge's
//! anonymous size (about 1–3 MiB for `judge-exec`), and where that figure
//! would make a run MLE, the watchdog's samples decide instead
//! ([`Usage::memory`] has the rule). The judge should stay small (the
//! checker streams), and a later issue spawns from a small helper, which
//! removes the catch.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How often the watchdog samples the program.
pub const POLL: Duration = Duration::from_millis(10);

/// An unprivileged identity to run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Every limit of one run, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// CPU time (user + system) of the process tree; the watchdog kills past
    /// it. `RLIMIT_CPU` is set to ⌈this⌉ + 1 s as a backstop.
    pub cpu: Duration,
    /// Wall-clock time from spawn; the watchdog kills past it.
    pub wall: Duration,
    /// Resident memory of the process tree, bytes; the watchdog kills past it.
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
    /// `RLIMIT_NPROC`: processes + threads of the identity's uid. Ignored
    /// without an identity (the count would include the caller's own
    /// processes).
    pub processes: Option<u64>,
}

/// What to run.
#[derive(Debug)]
pub struct Spec {
    /// argv; a leading `./` in `argv[0]` is resolved against `cwd`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// Already open, so the program needs no permission on the files.
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
    /// Who to run as; `None`: as the caller (when not root).
    pub identity: Option<Identity>,
    pub limits: Limits,
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Which watchdog limit killed the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fired {
    Cpu,
    Wall,
    Memory,
}

/// What one run used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    pub exit: Exit,
    /// The watchdog limit that killed it, if one did.
    pub fired: Option<Fired>,
    /// CPU time, user + system.
    pub cpu: Duration,
    pub wall: Duration,
    /// Peak memory, bytes: the larger of `ru_maxrss` and the largest resident
    /// size the watchdog saw for the whole tree; but when `ru_maxrss` is over
    /// the memory limit and yet within [`INHERITED_SLACK`] of the judge's
    /// anonymous resident size at the fork (so it may be the judge's size, not
    /// the program's), the watchdog's figure alone: a judge larger than a
    /// task's memory limit must not make every run MLE.
    pub memory: u64,
}

/// How far above the judge's anonymous resident size `ru_maxrss` must be to be
/// believed as the program's own (the forked copy touches a few pages before
/// `exec`).
pub const INHERITED_SLACK: u64 = 1 << 20;

/// Runs `spec` to the end. `Err` only for the judge's own failures (the
/// program could not be started, the kernel refused a call): the caller's JE.
pub fn run(spec: Spec) -> Result<Usage, String> {
    let Spec { argv, cwd, env, stdin, stdout, stderr, identity, limits } = spec;
    let program = match argv.first() {
        Some(p) if p.starts_with("./") => cwd.join(&p[2..]),
        Some(p) => PathBuf::from(p),
        None => return Err("empty command".into()),
    };
    // Held until the sweep is done: another judge process using the same
    // slot uid waits instead of having its program swept away.
    let _slot_lock = match identity {
        Some(id) => {
            become_subreaper();
            Some(lock_slot(id.uid).map_err(|e| format!("locking slot uid {}: {e}", id.uid))?)
        }
        None => None,
    };

    // Everything the child needs is computed here: `pre_exec` must not allocate.
    let rlimits = rlimits(&limits, identity.is_some());
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

    let inherited = own_anonymous_resident();
    let start = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let pid = child.id() as libc::pid_t;
    // From here on the child is reaped with wait4 below, never by `child`.
    drop(child);

    let watch = watch(pid, &limits, start);
    // Kill the group: the program if a limit fired, and any background child.
    // The group exists until the leader is reaped, so this cannot hit a reused pid.
    unsafe { libc::killpg(pid, libc::SIGKILL) };
    let (status, ru) = reap(pid).map_err(|e| format!("wait4({pid}): {e}"))?;
    let wall = start.elapsed();
    if let Some(id) = identity {
        sweep(id);
    }

    let exit = if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = (tv(ru.ru_utime) + tv(ru.ru_stime)).max(watch.cpu);
    let maxrss = ru.ru_maxrss as u64 * 1024;
    // ru_maxrss may be the judge's own size (see the module doc): distrust it
    // only where that matters, when it alone would make the run MLE.
    let suspect = maxrss > limits.memory && maxrss <= inherited + INHERITED_SLACK && watch.samples > 0;
    let memory = if suspect { watch.peak_memory } else { maxrss.max(watch.peak_memory) };
    Ok(Usage { exit, fired: watch.fired, cpu, wall, memory })
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
    }
    Ok(())
}

/// What the watchdog saw.
struct Watch {
    fired: Option<Fired>,
    cpu: Duration,
    peak_memory: u64,
    samples: u32,
}

/// Samples the program every [`POLL`] until it exits or a limit fires. Does
/// not reap it.
fn watch(pid: libc::pid_t, limits: &Limits, start: Instant) -> Watch {
    let pidfd = pidfd_open(pid);
    let mut w = Watch { fired: None, cpu: Duration::ZERO, peak_memory: 0, samples: 0 };
    loop {
        let exited = has_exited(pid);
        if let Some(s) = sample_tree(pid) {
            w.samples += 1;
            w.cpu = w.cpu.max(s.cpu);
            w.peak_memory = w.peak_memory.max(s.resident);
        }
        if exited {
            return w;
        }
        w.fired = if w.cpu > limits.cpu {
            Some(Fired::Cpu)
        } else if w.peak_memory > limits.memory {
            Some(Fired::Memory)
        } else if start.elapsed() > limits.wall {
            Some(Fired::Wall)
        } else {
            None
        };
        if w.fired.is_some() {
            return w;
        }
        match &pidfd {
            // Readable as soon as the program exits.
            Some(fd) => {
                let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                unsafe { libc::poll(&mut p, 1, POLL.as_millis() as libc::c_int) };
            }
            None => std::thread::sleep(POLL),
        }
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Whether the program has exited (it stays a zombie: `WNOWAIT`).
fn has_exited(pid: libc::pid_t) -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Reaps the program: its wait status and resource usage.
fn reap(pid: libc::pid_t) -> io::Result<(libc::c_int, libc::rusage)> {
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

/// The calling process's anonymous (and shared-memory) resident size, bytes:
/// what `fork` copies into the child's page tables, hence into its
/// `ru_maxrss`. (File-backed pages of read-only mappings are not copied.)
fn own_anonymous_resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (kib("RssAnon:") + kib("RssShmem:")) * 1024
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

/// Where the slot locks live: root's own directory, so no judged program can
/// hold or replace a lock file.
pub const SLOT_LOCK_DIR: &str = "/run/ojrunner";

/// Takes the host-wide lock of a slot uid (`flock` on
/// `SLOT_LOCK_DIR/slot-<uid>.lock`), waiting while another process holds it.
/// Released when the returned file is dropped (or its holder dies).
fn lock_slot(uid: u32) -> io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(SLOT_LOCK_DIR)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(format!("{SLOT_LOCK_DIR}/slot-{uid}.lock"))?;
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(file)
}

/// Kills every process running as `id` (the ones that left the process group
/// with `setsid` included) and reaps those reparented to us.
fn sweep(id: Identity) {
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
        return;
    }
    let status = reap(pid).map(|(s, _)| s).unwrap_or(-1);
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => reap_orphans(id.uid, Duration::from_secs(2)),
        Some(1) => {} // nothing was left
        _ => log::warn!("sandbox: the sweep of uid {} failed (status {status})", id.uid),
    }
}

/// Waits (at most `within`) until no process of `uid` is left, reaping the
/// ones whose parent is now us.
fn reap_orphans(uid: u32, within: Duration) {
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
            return;
        }
        if Instant::now() > end {
            log::warn!("sandbox: {left} process(es) of uid {uid} survived the sweep");
            return;
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
    fn writing_past_the_output_limit_raises_sigxfsz() {
        let (u, out) = sh("exec yes", "", limits());
        assert_eq!(u.exit, Exit::Signal(libc::SIGXFSZ));
        assert_eq!(out.len(), 1 << 20);
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
        assert!(u.memory < 64 << 20, "charged {} MiB", u.memory >> 20);
        drop(ballast);
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
