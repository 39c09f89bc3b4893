//! The jail: the program, in the helper's kept namespaces (`kept.rs`),
//! supervised by the helper, or in a run's own under an init; as the slot
//! uid, under the filter (the processes are described in the sandbox's
//! theory of operation, `sandbox/mod.rs`).

use super::cgroup::Group;
use super::error::{Error, Starting, Step};
use super::limits::Watched;
use super::limits::{Bind, Fired};
use super::mounts;
use super::seccomp;
use super::sys::{has_exited, only_stdio_across_exec, own_cpu, pipe, reap, recv_fd, reread, send_fd};
use super::timeline::{Mark, Stamps};
use nix::sched::CloneFlags;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Everything a run needs, prepared by the helper (the program, until its
/// `exec`, only makes system calls with it; init also runs the watchdog).
pub struct Jail<'a> {
    pub program: CString,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    pub cwd: PathBuf,
    pub binds: &'a [Bind],
    /// The binds' trees, detached by the helper, when init is cloned from
    /// the jail's namespace (`mounts::JailRoot`).
    pub trees: Option<&'a [mounts::BindTree]>,
    /// The host's `/proc` (the helper's), held open: init's own
    /// `oom_score_adj` is set through it, wherever init's root is.
    pub host_proc: RawFd,
    /// The helper's descriptors that lead out of the jail (its mount
    /// namespaces, its directory): init closes its copies, and
    /// `host_proc`'s, before the program is cloned from it.
    pub way_out: &'a [RawFd],
    /// Bytes of `/tmp` (and so of `/dev/shm`, a link to it).
    pub tmp_size: u64,
    pub rlimits: &'a [(libc::__rlimit_resource_t, u64, u64)],
    /// The one core the program may run on (`cores.rs`).
    pub core: Option<libc::cpu_set_t>,
    pub uid: u32,
    pub gid: u32,
    /// A network namespace of the run's own (else the helper's).
    pub netns: bool,
    /// The helper's IPC, UTS and PID (for its children) namespaces were
    /// made for this run ([`Ahead`]): init is cloned into them, not into
    /// namespaces of its own `clone`.
    pub ahead: bool,
    /// The helper's kept jail (`kept.rs`), readied for the run. The helper
    /// supervises the run itself (no init): the program, born in the kept
    /// PID namespace (the helper's children's), joins the run's cgroup and
    /// the kept mount namespace before its `exec`.
    pub kept: Option<KeptRun>,
    /// In the kept jail, the helper's own stdio for the program, dropped
    /// once the program has its copies (`stdio` are their descriptors).
    pub handed: Option<&'a std::cell::Cell<Option<[File; 3]>>>,
    /// The run's cgroup, which init (or, kept, the program) joins first:
    /// the helper is not in it.
    pub group: Option<&'a Group>,
    /// init's own CPU time when it had joined the group: what the group
    /// counts of init is what it used since (`None`: no init in the group).
    pub joined_at: &'a std::cell::Cell<Option<std::time::Duration>>,
    pub stdio: [RawFd; 3],
    pub filter: &'a [libc::sock_filter],
    /// The helper's stacks for init and the program.
    pub stacks: &'a Stacks,
    /// The judge's socket: init stops the run if it closes.
    pub hangup: RawFd,
    /// The limits' watchdog, called by the run's supervisor with the
    /// program's pid (as the supervisor sees it) when it starts, at each
    /// wake-up and, without a cgroup, once after the program exited (that
    /// answer is not acted on).
    pub watchdog: &'a dyn Fn(libc::pid_t) -> Watched,
    /// The run's steps, stamped by init and the program (`timeline.rs`).
    pub stamps: &'a Stamps,
}

/// The kept jail, for a run in it.
#[derive(Clone, Copy, Debug)]
pub struct KeptRun {
    /// Its mount namespace, which the program joins.
    pub mount_namespace: RawFd,
    /// Its PID 1: killed, it takes every process of the namespace with it,
    /// at once and for good (none can be born there after), which a kill
    /// through the cgroup's list of tasks cannot promise against a `fork`.
    pub keeper: libc::pid_t,
}

/// What init leaves the helper, in their shared memory, once the run is
/// over: every process of it killed and reaped.
#[derive(Debug, Default)]
pub struct Report {
    /// The judge's failure: building the root, or starting the program.
    pub error: Option<Error>,
    /// The program's wait status, once it exited.
    pub status: Option<i32>,
    /// `ru_utime + ru_stime`, µs, of the program and the children it reaped.
    pub cpu_us: u64,
    /// `ru_maxrss`, KiB.
    pub maxrss_kib: u64,
    /// A denied system call, if one was attempted.
    pub denied: Option<seccomp::Call>,
    /// init's own CPU time, µs (from its `clone`; the group counts what it
    /// used since it joined, [`Jail::joined_at`]).
    pub init_cpu_us: u64,
    /// The limit the watchdog stopped the run for.
    pub fired: Option<Fired>,
    /// The judge's socket closed: the run was stopped, abandoned.
    pub hangup: bool,
    /// init got to the end (else it died on the way: the judge's fault).
    pub done: bool,
    /// The kept jail's keeper was killed to end the run's processes: the
    /// next run needs a new kept jail.
    pub keeper_killed: bool,
    /// The kept jail's keeper died during the run, not by the helper's
    /// hand (the host's OOM killer, say): the run was lost, the judge's fault.
    pub keeper_lost: bool,
    /// In the kept jail, the helper's descriptors of the run (its program's
    /// seccomp listener, their socket, the pidfd, the pipe): closed after
    /// the reply, where their release does not hold up the answer.
    pub spent: Vec<OwnedFd>,
}

/// The `oom_score_adj` of every process of a run: when the run's memory
/// cgroup is full, the kernel's OOM killer picks among the tasks in the
/// group, which are the run's and init (never a candidate: a vfork child
/// sharing the helper's memory). The helper is not in the group
/// (`cgroup.rs`), so no OOM of a run can pick it, whatever score it could
/// get (lowering one takes `CAP_SYS_RESOURCE`, which containers often
/// withhold). At 1000 the run's processes rank first in the host's own
/// OOM too. `/proc` is read-only in the jail: without `CAP_SYS_RESOURCE`
/// to pin this as its floor, a run could lower it.
pub const OOM_FIRST: &str = "1000";

/// The stacks init and the program run on, each made at its first use and
/// used again (`stack_top`).
#[derive(Debug, Default)]
pub struct Stacks {
    init: std::sync::OnceLock<usize>,
    program: std::sync::OnceLock<usize>,
}

/// Bytes of init's stack, and of the program's until its `exec` (each with
/// a guard page below it: an overflow must fault, not write over the heap
/// they share with the helper).
const INIT_STACK: usize = 1 << 20;
const PROGRAM_STACK: usize = 256 << 10;

/// Runs the whole run and returns its report, and the pid of its init (0
/// for none), to be reaped: its exit goes on. In the kept jail the helper
/// supervises the run itself, the program its child; in a fresh one, init
/// (new PID, mount, IPC, UTS namespaces) does:
///
/// init shares the helper's memory, and the helper waits while it runs
/// (`CLONE_VM | CLONE_VFORK`): no page tables to copy, no copy-on-write
/// faults on either side, no address space to tear down (0.3 ms a run).
/// So init, not the helper, watches the run; and it may use the helper's
/// heap and thread-local state, which nobody else touches meanwhile (a
/// panic is caught in init; an init that dies otherwise retires its helper).
///
/// What that costs: the helper waits in the kernel's killable vfork sleep,
/// counted in the load average (one per busy helper); and nothing watches
/// the few steps where init itself waits on the kernel: its mounts, the
/// program's `exec`, the last reaping (before, the helper could kill init
/// there; binds are local directories, so none blocks for long).
pub fn spawn(j: &Jail) -> io::Result<(libc::pid_t, Report)> {
    if j.kept.is_some() {
        j.stamps.mark(Mark::InitStarted);
        let mut report = Report::default();
        // No init: the helper is the run's supervisor (0: none to reap).
        match supervise(j, &mut report) {
            Ok(()) => {}
            Err(e) => report.error = Some(e),
        }
        report.done = true;
        return Ok((0, report));
    }
    struct Init<'a, 'b> {
        j: &'a Jail<'b>,
        report: Report,
    }
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is spawn's `&mut init`, which the helper leaves alone while init runs (CLONE_VFORK).
        let init = unsafe { &mut *(arg as *mut Init) };
        run_init(init.j, &mut init.report);
        0
    }
    let mut init = Init { j, report: Report::default() };
    let own =
        libc::CLONE_NEWNS | if j.ahead { 0 } else { libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS };
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | own | if j.netns { libc::CLONE_NEWNET } else { 0 } | libc::SIGCHLD;
    let stack = stack_top(&j.stacks.init, INIT_STACK)?;
    // SAFETY: `stack` tops a mapping of INIT_STACK bytes kept for the helper's life; `init` outlives the child's use of
    // it (CLONE_VFORK suspends the helper until init exits).
    let pid = unsafe { libc::clone(entry, stack, flags, &mut init as *mut Init as *mut libc::c_void) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((pid, init.report))
}

/// The top of a stack of `len` bytes with a guard page at its bottom, made
/// once (`top`, the helper's [`Stacks`], keeps it) and used again: init's and the program's stacks are
/// each used by one process at a time, the helper serving one run at a time.
/// (The helper is single-threaded: it shares its memory with init, and glibc
/// ≥ 2.25's `clone` leaves the caller's cached thread ids alone.)
fn stack_top(top: &std::sync::OnceLock<usize>, len: usize) -> io::Result<*mut libc::c_void> {
    if let Some(&t) = top.get() {
        return Ok(t as *mut libc::c_void);
    }
    // SAFETY: sysconf takes no pointer.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let total = len.next_multiple_of(page) + page;
    // SAFETY: a new anonymous mapping at an address of the kernel's choice: it aliases nothing.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the first page of the mapping just made, which nothing uses yet.
    if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
        let e = io::Error::last_os_error();
        // SAFETY: the mapping just made, never handed out.
        unsafe { libc::munmap(base, total) };
        return Err(e);
    }
    Ok(*top.get_or_init(|| (base as usize + total) & !15) as *mut libc::c_void)
}

fn run_init(j: &Jail, rep: &mut Report) {
    j.stamps.mark(Mark::InitStarted);
    // The helper's death kills the run: nobody else would ever stop it.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes no pointer.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    // A panic is caught here, in init: unwound through the clone it would
    // abort init with the helper's panic count raised.
    let supervised = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| supervise(j, rep)));
    match supervised {
        Ok(Ok(())) => {}
        Ok(Err(e)) => rep.error = Some(e),
        Err(_) => rep.error = Some(Error::InitPanicked),
    }
    rep.init_cpu_us = own_cpu().as_micros() as u64;
    rep.done = true;
}

/// init's (or, in the kept jail, the helper's) part of a run: the program
/// started, watched, ended, and everything it left killed and reaped.
fn supervise(j: &Jail, rep: &mut Report) -> Result<(), Error> {
    if j.kept.is_none() {
        enter_jail(j)?;
    }
    start_and_watch(j, rep)
}

/// In init: its cgroup, its `oom_score_adj`, its root.
fn enter_jail(j: &Jail) -> Result<(), Error> {
    // The run's cgroup, before anything is charged: the program is born in
    // it, the helper stays out of reach of its OOM killer. Then a cgroup
    // namespace rooted there: the run's `/proc/self/cgroup` says `/`, not
    // the host's path or the helper's pid.
    if let Some(g) = j.group {
        g.join().map_err(Step::JoinCgroup.err())?;
        j.joined_at.set(Some(own_cpu()));
        nix::sched::unshare(CloneFlags::CLONE_NEWCGROUP).map_err(|e| Step::JoinCgroup.failed(io::Error::from(e)))?;
    }
    j.stamps.mark(Mark::Joined);
    // Inherited by the program and its whole tree (init itself, a vfork
    // child the helper waits for, is never a candidate).
    let oom_score_set = set_oom_score_adj(j.host_proc);
    // init's own copies (the helper keeps its own): nothing of the run holds one.
    for &fd in j.way_out.iter().chain([&j.host_proc]) {
        // SAFETY: init's own copies (no CLONE_FILES: its table is its own), which nothing in init uses again.
        unsafe { libc::close(fd) };
    }
    oom_score_set.map_err(Step::OomScore.err())?;
    mounts::enter_root(j.binds, j.trees, j.tmp_size).map_err(Step::EnterRoot.err())?;
    j.stamps.mark(Mark::RootEntered);
    Ok(())
}

/// The program started (from init, or from the helper in the kept jail),
/// watched until it exits or a limit fires, then reaped with whatever it left.
fn start_and_watch(j: &Jail, rep: &mut Report) -> Result<(), Error> {
    let mut sv = [0; 2];
    // SAFETY: socketpair writes two descriptors into `sv`, a live two-element array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) } != 0 {
        return Err(Step::SocketPair.failed(io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just made by socketpair; nothing else owns them.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    let (mut err_r, err_w) = pipe().map_err(Step::Pipe.err())?;
    let pointers = |v: &[CString]| v.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    let launch = Launch {
        j,
        cwd: CString::new(j.cwd.as_os_str().as_bytes()).unwrap_or_default(),
        argv: pointers(&j.argv),
        envp: pointers(&j.env),
        sock: theirs.as_raw_fd(),
        err: err_w.as_raw_fd(),
        not_ours: ours.as_raw_fd(),
        parent: match j.kept {
            // The helper, in the PID namespace above the kept one's.
            Some(_) => 0,
            // SAFETY: getpid takes no pointer (the system call: no cached value).
            None => (unsafe { libc::syscall(libc::SYS_getpid) }) as libc::pid_t,
        },
    };
    // The program shares init's memory until its `exec` (init waits,
    // `CLONE_VFORK`): no page tables copied, no copy-on-write faults, no
    // copied address space torn down by the `exec` (fork cost 0.1 ms).
    let stack = stack_top(&j.stacks.program, PROGRAM_STACK).map_err(Step::ProgramStack.err())?;
    // SAFETY: `stack` tops a PROGRAM_STACK mapping one program uses at a time; `launch` lives until init resumes, after
    // the program's exec or exit (CLONE_VFORK).
    let pid = unsafe {
        libc::clone(
            launched,
            stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &launch as *const Launch as *mut libc::c_void,
        )
    };
    if pid < 0 {
        return Err(Step::CloneProgram.failed(io::Error::last_os_error()));
    }
    drop(theirs);
    drop(err_w);
    // init's copies of the program's stdio (or the helper's, in the kept
    // jail): a pipe's reader (an interactor) sees its end when the
    // program's copies are gone, not at the end of the run.
    match j.handed {
        Some(handed) => drop(handed.take()),
        None => {
            for fd in j.stdio {
                // SAFETY: init's own copies of the program's stdio (no CLONE_FILES), which nothing in init uses again.
                unsafe { libc::close(fd) };
            }
        }
    }
    let listener = recv_fd(ours.as_raw_fd());
    let mut errno = [0u8; 4];
    if err_r.read(&mut errno).unwrap_or(0) == 4 {
        let (during, e) = match i32::from_ne_bytes(errno) {
            n if n >= 1000 => (Starting::Setup, io::Error::from_raw_os_error(n / 1000)),
            n => (Starting::Exec, io::Error::from_raw_os_error(n)),
        };
        let _ = reap(pid);
        let program = j.program.to_string_lossy().into_owned();
        return Err(Error::CannotStart { program, during: Some(during), why: e.to_string() });
    }
    j.stamps.mark(Mark::Execed);
    let pidfd_owned = super::sys::pidfd_open(pid);
    let pidfd = pidfd_owned.as_ref().map_or(-1, |f| f.as_raw_fd());
    let mut listening = listener.as_ref().map_or(-1, |l| l.as_raw_fd());
    let mut hangup = j.hangup;
    loop {
        let wait = match (j.watchdog)(pid) {
            Watched::Wait(d) => d.as_millis().clamp(1, i32::MAX as u128) as libc::c_int,
            Watched::Stop(limit) => {
                rep.fired.get_or_insert(limit);
                kill_run(j, pid, rep);
                -1
            }
        };
        // Without a pidfd, the program's exit is looked for every 10 ms.
        let wait = if pidfd < 0 && !(0..=10).contains(&wait) { 10 } else { wait };
        let mut fds = [
            libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: listening, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: hangup, events: libc::POLLRDHUP, revents: 0 },
        ];
        // SAFETY: poll reads and writes the three entries of `fds`, a live local array.
        if unsafe { libc::poll(fds.as_mut_ptr(), 3, wait) } < 0 {
            continue;
        }
        if fds[2].revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            rep.hangup = true;
            hangup = -1;
            kill_run(j, pid, rep);
        }
        if fds[1].revents & libc::POLLIN != 0 {
            if let Some(call) = seccomp::receive(fds[1].fd) {
                rep.denied.get_or_insert(call);
                kill_run(j, pid, rep);
            }
        } else if fds[1].revents != 0 {
            // Hung up: no process uses the filter any more (the program is
            // exiting). Polled again, it would wake this loop at once,
            // again and again, until the program's exit is through.
            listening = -1;
        }
        // Without a pidfd (pidfd_open failed), a look at each wake-up.
        if fds[0].revents != 0 || (pidfd < 0 && has_exited(pid)) {
            break;
        }
    }
    j.stamps.mark(Mark::Exited);
    // The last look, for what the program's tree used (not acted on):
    // without a cgroup only, whose counts the measure reads itself.
    if j.group.is_none() {
        let _ = (j.watchdog)(pid);
    }
    let (status, ru) = reap(pid).map_err(Step::WaitProgram.err())?;
    // Whatever the program left behind (background children) is killed and
    // reaped here, before the report: once the helper has it, nothing of
    // the run is alive, and init's own exit (the namespaces' teardown) need
    // not hold up the answer. Killed again after each reaped one: a child
    // forked while the first kill went round is not waited for in vain.
    // (In the kept jail, what the program left is ended by killing the
    // keeper, which reaps it: `end_what_is_left`.)
    if let Some(kept) = j.kept {
        // The keeper's death kills the program: only a program killed by
        // SIGKILL that the helper did not end is looked into.
        let killed = libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL;
        rep.keeper_lost = killed && !rep.keeper_killed && super::kept::keeper_dying(kept.keeper);
        end_what_is_left(kept, j.group, rep);
    }
    while j.kept.is_none() {
        kill_run(j, pid, rep);
        // SAFETY: a null status pointer is allowed: nothing is written.
        if unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::__WALL) } < 0
            && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted
        {
            break;
        }
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    if j.kept.is_some() {
        rep.spent.extend([Some(ours), listener, pidfd_owned, Some(OwnedFd::from(err_r))].into_iter().flatten());
    }
    rep.status = Some(status);
    rep.cpu_us = tv(ru.ru_utime) + tv(ru.ru_stime);
    rep.maxrss_kib = ru.ru_maxrss as u64;
    j.stamps.mark(Mark::Reaped);
    Ok(())
}

/// In init: its `oom_score_adj` (the program's and its tree's) set to
/// [`OOM_FIRST`], through `host_proc` (`self` there is init).
fn set_oom_score_adj(host_proc: RawFd) -> io::Result<()> {
    // SAFETY: a NUL-terminated literal, relative to `host_proc`, which init closes only after this.
    let fd = unsafe { libc::openat(host_proc, c"self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened; nothing else owns it.
    let mut f = unsafe { File::from_raw_fd(fd) };
    io::Write::write_all(&mut f, OOM_FIRST.as_bytes())
}

/// Kills every process of the run: from init, its PID namespace's, init
/// itself aside; from the helper in the kept jail, the program and the
/// keeper, whose death ends every process of the kept PID namespace (the
/// next run gets a new kept jail).
fn kill_run(j: &Jail, program: libc::pid_t, rep: &mut Report) {
    match j.kept {
        // Never kill(-1) here: the helper's is the host's PID namespace.
        Some(kept) => {
            // SAFETY: kill takes no pointer; `program` and the keeper are the helper's children, not yet reaped.
            unsafe {
                libc::kill(program, libc::SIGKILL);
                libc::kill(kept.keeper, libc::SIGKILL);
            }
            rep.keeper_killed = true;
        }
        None => {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-1), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// In the helper, the kept jail's program reaped: if it left anything in
/// the run's cgroup, the keeper is killed (the namespace's processes go
/// with it), and the helper reaps any child of its own but the keeper (a
/// second belt: `clone(CLONE_PARENT)` is denied) until the group holds no
/// task: 2 s at most, then the helper retires after its reply.
fn end_what_is_left(kept: KeptRun, group: Option<&Group>, rep: &mut Report) {
    let Some(g) = group else { return };
    if g.tasks() == 0 {
        return;
    }
    if !rep.keeper_killed {
        // SAFETY: kill takes no pointer; the keeper is the helper's child, not yet reaped.
        unsafe { libc::kill(kept.keeper, libc::SIGKILL) };
        rep.keeper_killed = true;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        reap_all_but(kept.keeper);
        if g.tasks() == 0 || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Reaps every child of the helper that has exited, but `keep` (reaped
/// with the kept jail it held).
fn reap_all_but(keep: libc::pid_t) {
    loop {
        // SAFETY: a zeroed siginfo_t is valid for waitid to write into; it is a live local.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only `info`; WNOWAIT leaves the child to be reaped below.
        let r = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
        // SAFETY: si_pid is valid for a SIGCHLD siginfo waitid filled (0 when none has exited).
        let pid = unsafe { info.si_pid() };
        if r != 0 || pid == 0 || pid == keep {
            return;
        }
        let _ = reap(pid);
    }
}

/// What the program's side needs, made before the `clone`: sharing init's
/// memory until `exec`, it must not allocate.
struct Launch<'a> {
    j: &'a Jail<'a>,
    cwd: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// The program's end of the socket it sends its seccomp listener on.
    sock: RawFd,
    /// The close-on-exec pipe a failure before `exec` is written to.
    err: RawFd,
    /// Init's end of that socket.
    not_ours: RawFd,
    /// The program's parent's PID, as the program sees it: init's (1), or
    /// 0 for the helper, outside the kept jail's PID namespace.
    parent: libc::pid_t,
}

extern "C" fn launched(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is supervise's `&launch`, alive while init waits for this exec (CLONE_VFORK).
    let l = unsafe { &*(arg as *const Launch) };
    // SAFETY: the program's copy of init's end (no CLONE_FILES: its table is its own), unused here.
    unsafe { libc::close(l.not_ours) };
    program(l)
}

/// The program's side: from init's `clone` to `exec`. On failure, writes
/// `errno` (+ 1000 × errno for a setup step) on `err` and exits 127.
fn program(l: &Launch) -> ! {
    let (j, sock, err) = (l.j, l.sock, l.err);
    let fail = |code: i32| -> ! {
        // SAFETY: write reads 4 bytes of a live local; _exit ends the child at once, allocating nothing.
        unsafe {
            libc::write(err, code.to_ne_bytes().as_ptr().cast(), 4);
            libc::_exit(127)
        }
    };
    let os = || io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) * 1000;
    let check = |r: libc::c_long| {
        if r < 0 {
            fail(os())
        }
    };
    // SAFETY: between clone and exec, in init's memory: system calls only, on locals and on what init made before the
    // clone (alive: init waits); nothing allocates or locks.
    unsafe {
        // The run's cgroup: init's, which it joined (`enter_jail`); in the
        // kept jail, the program joins it here, then the jail's mount
        // namespace, and sets its own `oom_score_adj` (a vfork child's is
        // its own: the helper's does not change).
        if let Some(KeptRun { mount_namespace: mnt, .. }) = j.kept {
            if let Some(g) = j.group {
                if g.join().is_err() {
                    fail(os());
                }
            }
            let netns = if j.netns { libc::CLONE_NEWNET } else { 0 };
            check(libc::syscall(libc::SYS_unshare, libc::CLONE_NEWCGROUP | netns));
            j.stamps.mark(Mark::Joined);
            check(libc::syscall(libc::SYS_setns, mnt, libc::CLONE_NEWNS));
            let fd = libc::openat(j.host_proc, c"self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            check(fd as libc::c_long);
            if libc::write(fd, OOM_FIRST.as_ptr().cast(), OOM_FIRST.len()) != OOM_FIRST.len() as isize {
                fail(os());
            }
            libc::close(fd);
            j.stamps.mark(Mark::RootEntered);
        }
        j.stamps.mark(Mark::ProgramStarted);
        // stdio: first out of the way (they may sit on 0-2), then into place.
        let mut high = [0; 3];
        for (i, &fd) in j.stdio.iter().enumerate() {
            high[i] = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
            check(high[i] as libc::c_long);
        }
        for (i, &fd) in high.iter().enumerate() {
            check(libc::dup2(fd, i as RawFd) as libc::c_long);
        }
        check(libc::chdir(l.cwd.as_ptr()) as libc::c_long);
        for &(resource, soft, hard) in j.rlimits {
            let rl = libc::rlimit { rlim_cur: soft, rlim_max: hard };
            check(libc::setrlimit(resource, &rl) as libc::c_long);
        }
        if let Some(set) = &j.core {
            // Best effort: a CPU taken offline since the judge read its
            // affinity must not stop every run of its slot (JE).
            let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
        }
        libc::umask(0o022);
        // The bounding set is empty (the helper's, inherited); the uid
        // change below clears the permitted, effective and ambient sets.
        if libc::prctl(libc::PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0 {
            fail(libc::EPERM * 1000);
        }
        check(libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()));
        check(libc::syscall(libc::SYS_setresgid, j.gid, j.gid, j.gid));
        check(libc::syscall(libc::SYS_setresuid, j.uid, j.uid, j.uid));
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long);
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) as libc::c_long);
        // A session and process group of its own: a kill(0) of the run's
        // reaches the run alone, not the judge's process group.
        check(libc::setsid() as libc::c_long);
        if libc::getppid() != l.parent {
            fail(libc::ESRCH * 1000);
        }
        j.stamps.mark(Mark::Credentials);
        match seccomp::install(j.filter) {
            Ok(listener) => {
                if send_fd(sock, listener.as_raw_fd()).is_err() {
                    fail(os());
                }
            }
            Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO) * 1000),
        }
        j.stamps.mark(Mark::Filtered);
        only_stdio_across_exec();
        libc::execve(j.program.as_ptr(), l.argv.as_ptr(), l.envp.as_ptr());
        fail(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
}

/*** The next run's namespaces, made ahead ***/

/// A run's IPC, UTS and PID namespaces, made by the helper for the next
/// run once the last one has its reply (`executor.rs`, after the reply),
/// rather than by init's `clone` on the run's path: making the three took
/// about a third of init's `clone`. Each run still gets its own, new and
/// never used: the helper makes them for one run, init is cloned into
/// them ([`Jail::ahead`]), and the helper leaves them for new ones before
/// the next run (the IPC and UTS namespaces the helper itself is in, which
/// it does not use: the hostname is set in them ahead too; the PID one is
/// the namespace its next child is born in, where the helper's own PID
/// namespace does not change).
pub struct Ahead {
    /// The helper's own PID namespace: its children's is set back to it
    /// before a new one is made (the kernel makes one only below the
    /// caller's own).
    own_pid: OwnedFd,
    /// The namespaces are made and no run was cloned into them yet.
    ready: bool,
}

impl Ahead {
    /// Makes the first run's namespaces (`Err`: the helper's runs make
    /// theirs at their `clone`, as before).
    pub fn start() -> io::Result<Ahead> {
        // SAFETY: a NUL-terminated literal; the descriptor returned is owned at once.
        let fd = unsafe { libc::open(c"/proc/self/ns/pid".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened; nothing else owns it.
        let mut ahead = Ahead { own_pid: unsafe { OwnedFd::from_raw_fd(fd) }, ready: false };
        ahead.prepare()?;
        Ok(ahead)
    }

    /// Makes the next run's namespaces, unless made and unused.
    pub fn prepare(&mut self) -> io::Result<()> {
        if self.ready {
            return Ok(());
        }
        nix::sched::setns(&self.own_pid, CloneFlags::CLONE_NEWPID)?;
        nix::sched::unshare(CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWPID)?;
        nix::unistd::sethostname("sandbox")?;
        self.ready = true;
        Ok(())
    }

    /// Gives the namespaces up before a run at the basic level, whose
    /// program the helper forks itself: it must be born in the helper's
    /// own PID namespace (it would be the init of the one made, and the
    /// helper's next child could be born in none). The next jailed run's
    /// are made anew.
    pub fn release(&mut self) -> io::Result<()> {
        self.ready = false;
        Ok(nix::sched::setns(&self.own_pid, CloneFlags::CLONE_NEWPID)?)
    }

    /// Takes the namespaces for a run: true if they are made (init is to
    /// be cloned into them), false if not (init makes its own).
    pub fn take(&mut self) -> bool {
        std::mem::replace(&mut self.ready, false)
    }

    /// The descriptors it holds (each leads out of a run's jail).
    pub fn descriptor(&self) -> RawFd {
        self.own_pid.as_raw_fd()
    }
}

/*** The helper's network namespace ***/

/// Before a run that shares its helper's network namespace: a new
/// namespace for the helper if the last run left a socket in this one.
/// A run's sockets die with its processes, except those that hold each
/// other alive in flight (an `SCM_RIGHTS` cycle): garbage the kernel's
/// collector frees only when some later close of a socket in flight wakes
/// it, and until then a name bound to one (an abstract address) answers
/// the next run's `connect`. The helper itself holds no socket there, so
/// any counted is a run's; the old namespace goes with its last socket.
/// (A netlink socket, as `getaddrinfo` opens, is freed an RCU grace period
/// after its close: a run that used one may cost a needless renewal, 0.4
/// ms. Before Linux 4.16 the count is the host's, and every run would.)
///
/// `sockstat` is the namespace's `sockstat`, held open from run to run (a
/// file of `/proc/<pid>/net` stays its namespace's): opened at the first
/// call after the helper's start or a renewal.
pub fn renew_netns_if_used(sockstat: &mut Option<File>) -> io::Result<()> {
    if sockstat.is_none() {
        *sockstat = File::open(SOCKSTAT).ok();
    }
    if sockstat.as_ref().and_then(|f| sockets_in_netns(f).ok()) == Some(0) {
        return Ok(());
    }
    *sockstat = None;
    Ok(nix::sched::unshare(CloneFlags::CLONE_NEWNET)?)
}

/// The calling thread's network namespace's socket counts.
const SOCKSTAT: &str = "/proc/thread-self/net/sockstat";

/// The sockets alive in the network namespace of `sockstat`
/// (`sockets: used`: a count kept per namespace), read anew.
fn sockets_in_netns(sockstat: &File) -> io::Result<u64> {
    let mut buf = [0u8; 512];
    let text = reread(sockstat, &mut buf).ok_or_else(|| io::Error::other("sockstat: unreadable"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("sockets: used "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "sockstat: no 'sockets: used' line"))
}

/*** The root file system ***/

/// `CAP_SYS_ADMIN`, the capability the bounding set is checked for.
const CAP_SYS_ADMIN: libc::c_ulong = 21;

/// Empties the calling helper's capability bounding set, once: its runs
/// inherit it, and none can regain a capability (`exec` of a set-uid or
/// file-capability binary included). The helper keeps its own effective
/// set. Per run, the 41 `prctl`s cost 30 µs.
pub fn drop_bounding_set() -> io::Result<()> {
    let last: libc::c_ulong = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("cap_last_cap: {e}")))?;
    for cap in 0..=last {
        // SAFETY: prctl(PR_CAPBSET_DROP) takes no pointer.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
