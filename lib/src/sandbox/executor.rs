//! One run, in the helper: the slot's lock, the run's cgroup, the jail (or
//! the basic level), the watchdog and the measures, then the cleanup after
//! the reply.

use super::board::{self, Board, Part};
use super::cgroup::{Baseline, Group, Hierarchy};
use super::cores;
use super::error::{Error, Step};
use super::jail::{self, Jail};
use super::kept::Kept;
use super::limits::{
    look, rlimit_name, rlimits, seen_inside, Bind, Exit, Fired, Identity, Limits, Request, Stillness, Usage, Used,
    Watched, UNLIMITED,
};
use super::mounts::{self, JailRoot};
use super::procfs::{anon_of, sample_tree};
use super::seccomp;
use super::slot::{sweep, SlotLock, SlotLocks};
use super::sys::{
    become_subreaper, describe, has_cap_sys_resource, has_exited, only_stdio_across_exec, own_cpu, pidfd_open, reap,
};
use super::timeline::{now_ns, Mark, Stamps};
use nix::sched::CloneFlags;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::cell::Cell;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Which isolation and accounting the helper uses.
#[derive(Debug)]
pub struct Mechanisms {
    /// Runs are jailed (namespaces, bind-mounted root, seccomp): root only.
    pub namespaces: bool,
    /// The cgroup hierarchy runs get groups in, if any.
    pub cgroup: Option<Hierarchy>,
}

/// The `oom_score_adj` a helper started now gets: the caller's own, which
/// it inherits (no run's OOM killer can pick it whatever it is: the helper
/// is not in its runs' cgroup, `cgroup.rs`).
pub fn helper_oom_score_adj() -> i32 {
    std::fs::read_to_string("/proc/self/oom_score_adj").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// The mechanisms a helper started now would use, without changing this
/// process (for `judge-exec --probe`).
pub fn probe_mechanisms() -> Mechanisms {
    let root = nix::unistd::geteuid().is_root();
    Mechanisms { namespaces: probe_namespaces(), cgroup: if root { Hierarchy::detect() } else { None } }
}

/// Whether helpers started now will jail their runs (root, and the
/// namespaces can be made).
pub fn probe_namespaces() -> bool {
    let root = nix::unistd::geteuid().is_root();
    root && {
        // SAFETY: the child only calls unshare and _exit (async-signal-safe), whatever locks other threads held at the fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let f =
                libc::CLONE_NEWNET | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
            // SAFETY: in the forked child: two system calls, no allocation, no lock.
            unsafe { libc::_exit(if libc::unshare(f) == 0 { 0 } else { 1 }) };
        }
        pid > 0 && reap(pid).map(|(s, _)| s == 0).unwrap_or(false)
    }
}

/// What is left of a jailed run once its result is known: init, which
/// killed and reaped every process of the run before its report, still has
/// to exit (its namespaces' teardown, 0.2 ms the judge need not wait for)
/// and be reaped; the template's mount points go; the slot's lock is held
/// until then.
struct Leftover {
    /// init, to reap (none in the kept jail: the helper supervised the run).
    init: Option<libc::pid_t>,
    /// The run's descriptors the helper still holds ([`jail::Report::spent`]).
    _spent: Vec<std::os::fd::OwnedFd>,
    /// The kept jail's keeper was killed to end the run: a new kept jail
    /// is made after the reply.
    remake_kept: bool,
    binds: Vec<Bind>,
    _slot_lock: Option<SlotLock>,
}

/// Everything a helper keeps from run to run: the one state of the sandbox
/// that lives longer than a run. The helper serves one run at a time, on
/// one thread, so it is a plain value its loop owns (`helper.rs`).
pub(super) struct Executor {
    mechanisms: Mechanisms,
    /// The jail (with namespaces), if it could be readied: its bounding set
    /// emptied, the template root built and where runs get it from
    /// (`mounts.rs`).
    jail_ready: Option<Result<JailReady, Error>>,
    /// The helper's runs' cgroup, made at its first jailed run and reset
    /// for each (each run's program or init joins it; the helper never does).
    group: Option<Group>,
    leftover: Option<Leftover>,
    /// This helper must serve no more runs (see [`Executor::run_jailed`]).
    retiring: bool,
    /// The slot identity the template's `passwd` names now.
    passwd_for: Option<Identity>,
    filter: Vec<libc::sock_filter>,
    stacks: jail::Stacks,
    /// Whether the helper may raise a hard rlimit (`CAP_SYS_RESOURCE`), and
    /// the ones it warned it could not.
    privileged: bool,
    warned: Vec<libc::__rlimit_resource_t>,
    /// The helper's network namespace's `sockstat`, held open
    /// ([`jail::renew_netns_if_used`]).
    sockstat: Option<File>,
    /// This run's steps, stamped by the helper, init and the program
    /// (`timeline.rs`), and the last run's cleanup after its reply.
    stamps: Stamps,
    last_teardown: [u64; 3],
    /// The core the helper (and so each run's init) is on, when pinned
    /// ([`Executor::follow_core`]), and the affinity it started with.
    on_core: Option<u32>,
    started_on: Option<libc::cpu_set_t>,
    /// The slot lock files, held open (`slot.rs`).
    slot_locks: SlotLocks,
    /// The next run's IPC, UTS and PID namespaces, made after each reply
    /// (`jail::Ahead`); `None` where they cannot be (init makes its own).
    ahead: Option<jail::Ahead>,
    /// The kept jail (`kept.rs`), where the kernel allows one: every jailed
    /// run's namespaces; then there are none to make ahead.
    kept: Option<Kept>,
}

impl Executor {
    /// Readies a helper that starts: its own network namespace (empty:
    /// every run's) and mount namespace (where the runs' template root
    /// lives), the cgroup parents; it adopts orphans (for the basic level).
    pub(super) fn start() -> Executor {
        become_subreaper();
        let root = nix::unistd::geteuid().is_root();
        let namespaces = root && nix::sched::unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWNS).is_ok();
        let jail_ready = namespaces
            .then(|| jail::drop_bounding_set().map_err(Step::BoundingSet.err()).and_then(|()| JailReady::make()));
        let cgroup = if root { Hierarchy::detect() } else { None };
        if let Some(h) = &cgroup {
            h.remove_stale();
        }
        let kept = match &jail_ready {
            Some(Ok(JailReady { root: JailRoot::Namespace(ns), .. })) if kept_jail() && cgroup.is_some() => {
                Kept::make(ns, KEPT_TMP)
                    .map_err(|e| eprintln!("ojrunner-sandbox-helper: no kept jail (a new one per run): {e}"))
                    .ok()
            }
            _ => None,
        };
        let ahead = (matches!(jail_ready, Some(Ok(_))) && kept.is_none()).then(|| jail::Ahead::start().ok()).flatten();
        Executor {
            mechanisms: Mechanisms { namespaces, cgroup },
            jail_ready,
            group: None,
            leftover: None,
            retiring: false,
            passwd_for: None,
            filter: seccomp::program(),
            stacks: jail::Stacks::default(),
            privileged: has_cap_sys_resource(),
            warned: Vec::new(),
            sockstat: None,
            stamps: Stamps::default(),
            last_teardown: [0; 3],
            on_core: None,
            started_on: None,
            slot_locks: SlotLocks::default(),
            ahead,
            kept,
        }
    }

    /// Puts the helper on the core its run's program is pinned to (the
    /// program's slot's, `cores.rs`), or back where it started for a run
    /// not pinned. init is cloned from the helper and inherits it: the
    /// helper, init and the program then hand the run to each other on one
    /// core (each wake-up a local one, where a wake-up across cores costs
    /// an interrupt, and a virtual machine's idle CPU far more), and the
    /// program no longer migrates to its core between `clone` and `exec`.
    /// Best effort, as the program's own pinning: a core gone offline
    /// leaves the helper where it is.
    fn follow_core(&mut self, core: Option<u32>) {
        if core == self.on_core {
            return;
        }
        let set = match core {
            Some(c) => {
                if self.started_on.is_none() {
                    // SAFETY: a zeroed cpu_set_t is an empty set; the kernel writes at most its size.
                    let mut own: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                    // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes, into `own`, a live local.
                    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut own) } != 0 {
                        return;
                    }
                    self.started_on = Some(own);
                }
                cores::only(c)
            }
            None => match self.started_on {
                Some(set) => set,
                None => return,
            },
        };
        // SAFETY: sched_setaffinity reads `set`, a live cpu_set_t, of the size given.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } == 0 {
            self.on_core = core;
        }
    }

    /// A new kept jail in place of the one whose keeper is dead or killed:
    /// the old one let go of first (its keeper reaped), then its binds'
    /// mount points taken from the template. `Err`: the helper retires.
    fn renew_kept(&mut self, tmp_size: u64) -> io::Result<()> {
        let Some(Ok(JailReady { root: JailRoot::Namespace(ns), .. })) = &self.jail_ready else { return Ok(()) };
        let binds = self.kept.take().map(|k| k.attached()).unwrap_or_default();
        mounts::forget(&binds);
        let made = Kept::make(ns, tmp_size);
        self.retiring |= made.is_err();
        self.kept = Some(made?);
        Ok(())
    }

    /// Whether the helper must exit after its answer: a fresh one serves next.
    pub(super) fn retiring(&self) -> bool {
        self.retiring
    }

    /// Work left for after the reply (so the judge does not wait for it):
    /// finishes the last jailed run, if that is left to do.
    pub(super) fn after_reply(&mut self) {
        let Some(left) = self.leftover.take() else { return };
        let replied = now_ns();
        if let Some(init) = left.init {
            let _ = reap(init);
        }
        let reaped = now_ns();
        tidy_after_init(self.group.as_ref(), &left.binds);
        // A task that outlived every kill (stuck in the kernel) would be the
        // next run's: a fresh helper, with a fresh group, serves next.
        if self.kept.is_some() && self.group.as_ref().is_some_and(|g| g.tasks() != 0) {
            eprintln!("ojrunner-sandbox-helper: a task of the last run is still in its cgroup");
            self.retiring = true;
        }
        let remake = left.remake_kept && !self.retiring;
        if remake {
            // Its keeper was killed: a new kept jail, here rather than on the
            // next run's path (the old one is let go of once its keeper is
            // reaped: a dying namespace takes no new process).
            let size = self.kept.as_ref().map_or(KEPT_TMP, Kept::tmp_size);
            if let Err(e) = self.renew_kept(size) {
                eprintln!("ojrunner-sandbox-helper: a new kept jail: {e}");
            }
        } else if let (false, Some(k), Some(Ok(JailReady { root: JailRoot::Namespace(ns), .. }))) =
            (left.remake_kept, self.kept.as_mut(), &self.jail_ready)
        {
            if let Err(e) = k.clean(ns) {
                eprintln!("ojrunner-sandbox-helper: cleaning the kept jail: {e}");
                self.retiring = true;
            }
        }
        // A failure is tried again on the next run's path (`run_jailed`).
        if let Some(a) = self.ahead.as_mut() {
            let _ = a.prepare();
        }
        self.last_teardown = [replied, reaped, now_ns()];
    }

    /// When the helper exits: its cgroup goes.
    pub(super) fn exit(mut self) {
        self.after_reply();
        if let Some(g) = self.group.take() {
            g.kill_all();
            if let Err(e) = g.remove() {
                eprintln!("ojrunner-sandbox-helper: removing its cgroup: {e}");
            }
        }
    }

    /// Runs one request (`hangup` is the judge's socket: if it closes, the
    /// run is killed).
    pub(super) fn run(
        &mut self,
        req: Request,
        stdio: [File; 3],
        board: Option<Board>,
        hangup: RawFd,
        received: u64,
    ) -> Result<Usage, Error> {
        let program = match req.argv.first() {
            Some(p) if p.starts_with("./") => req.cwd.join(&p[2..]),
            Some(p) => PathBuf::from(p),
            None => return Err(Error::EmptyCommand),
        };
        self.after_reply();
        self.stamps.begin(req.timed);
        self.stamps.set(Mark::Received, received);
        let last = [Mark::LastReplied, Mark::LastInitReaped, Mark::LastTidied];
        for (m, at) in last.into_iter().zip(std::mem::take(&mut self.last_teardown)) {
            self.stamps.set(m, at);
        }
        // Held until the run is cleaned up: another judge process using the
        // same slot uid waits instead of having its program swept away.
        let slot_lock = match req.identity {
            Some(id) => Some(self.slot_locks.lock(&req.slot_lock_dir, id.uid).map_err(Step::LockSlot(id.uid).err())?),
            None => None,
        };
        self.stamps.mark(Mark::SlotLocked);
        let part = req.board.zip(board.as_ref()).map(|(side, board)| Part { board, side });
        let ran = match req.identity {
            Some(id) if self.mechanisms.namespaces => {
                self.run_jailed(req, program, id, Handed { stdio, part }, hangup, slot_lock)
            }
            // The basic level's program is born in the helper's own PID
            // namespace, not in one made for a jail.
            _ => match self.ahead.as_mut().map(|a| a.release()) {
                Some(Err(e)) => {
                    self.retiring = true;
                    Err(Step::Ahead.failed(e))
                }
                _ if self.kept.as_ref().is_some_and(|k| k.outside(true).is_err()) => {
                    self.retiring = true;
                    Err(Step::Ahead.failed("the helper's own PID namespace"))
                }
                _ => {
                    let ran = self.run_direct(req, program, Handed { stdio, part }, hangup);
                    // Back in the kept PID namespace; the IPC namespace it
                    // shares with the jail's runs emptied.
                    if self.kept.as_ref().is_some_and(|k| k.outside(false).and_then(|()| k.clean_ipc()).is_err()) {
                        self.retiring = true;
                    }
                    ran
                }
            },
        };
        ran.map(|mut usage| {
            self.stamps.mark(Mark::Measured);
            usage.steps = self.stamps.timeline().map(Box::new);
            usage
        })
    }

    /// Makes the helper's runs' cgroup at its first run (each run's init
    /// joins it, `jail.rs`).
    fn make_group(&mut self, limits: &Limits) {
        if self.group.is_none() {
            let Some(h) = self.mechanisms.cgroup.as_ref() else { return };
            let name = format!("helper-{}", std::process::id());
            self.group = h
                .create(&name, limits.memory, limits.processes)
                .map_err(|e| eprintln!("ojrunner-sandbox-helper: no cgroup: {e}"))
                .ok();
        }
    }

    fn run_jailed(
        &mut self,
        req: Request,
        program: PathBuf,
        id: Identity,
        handed: Handed<'_>,
        hangup: RawFd,
        slot_lock: Option<SlotLock>,
    ) -> Result<Usage, Error> {
        let Handed { stdio, part } = handed;
        let (host_proc, way_out) = match &self.jail_ready {
            Some(Ok(ready)) => (
                ready.host_proc.as_raw_fd(),
                match &ready.root {
                    JailRoot::Namespace(ns) => Some(ns.descriptors()),
                    JailRoot::Pivot => None,
                },
            ),
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(Step::Template.failed(io::Error::other("no namespaces"))),
        };
        if self.passwd_for != Some(id) {
            mounts::set_identity(id.uid, id.gid).map_err(Step::Passwd.err())?;
            self.passwd_for = Some(id);
        }
        if !req.fresh_netns {
            if let Err(e) = jail::renew_netns_if_used(&mut self.sockstat) {
                // Its namespace holds a run's socket still: no more runs here.
                self.retiring = true;
                return Err(Step::RenewNetns.failed(e));
            }
        }
        self.follow_core(req.core);
        // Made after the last run's reply; made here if that failed.
        let ahead = match self.ahead.as_mut() {
            Some(a) => {
                if let Err(e) = a.prepare() {
                    self.retiring = true;
                    return Err(Step::Ahead.failed(e));
                }
                a.take()
            }
            None => false,
        };
        self.stamps.mark(Mark::Checked);
        let limits = &req.limits;
        if self.kept.as_mut().is_some_and(|k| !k.alive()) {
            // Its keeper was killed: the next runs need a new one.
            self.renew_kept(limits.memory).map_err(Step::EnterRoot.err())?;
        }
        let rlimits = self.within_own(rlimits(limits, true));
        self.make_group(limits);
        let group = self.group.as_ref();
        let baseline = match group.map(|g| g.reset(limits.memory, limits.processes)).transpose() {
            Ok(b) => b.unwrap_or_default(),
            Err(e) => return Err(Step::ResetCgroup.failed(e)),
        };
        self.stamps.mark(Mark::CgroupReset);
        let watchdog = Watchdog::new(group, limits, req.idle, part, hangup, baseline.resident);
        let cs = |b: &[u8]| CString::new(b).map_err(|_| Error::NulByte);
        // Host paths in the command, the environment and the directory, as the run sees them.
        let inside = |s: &str| seen_inside(&req.binds, s);
        let look = |pid| watchdog.look(pid);
        // The kept jail's runs are killed and counted through their cgroup:
        // without one (it could not be made), the run gets a fresh jail.
        let kept = match (&mut self.kept, &self.jail_ready) {
            (Some(k), Some(Ok(JailReady { root: JailRoot::Namespace(ns), .. }))) if self.group.is_some() => {
                if let Err(e) = k.prepare(ns, &req.binds, limits.memory) {
                    self.retiring = true;
                    return Err(Step::EnterRoot.failed(e));
                }
                true
            }
            _ => false,
        };
        let trees = match way_out {
            Some(_) if !kept => Some(mounts::detach_binds(&req.binds).map_err(Step::EnterRoot.err())?),
            _ => None,
        };
        // In the kept jail the helper's own, handed over: the helper closes
        // them once the program has its own (`jail.rs`); else init's copies.
        let stdio_fds = [stdio[0].as_raw_fd(), stdio[1].as_raw_fd(), stdio[2].as_raw_fd()];
        let handed = Cell::new(Some(stdio));
        let jail = Jail {
            program: cs(inside(&program.to_string_lossy()).as_bytes())?,
            argv: req.argv.iter().map(|a| cs(inside(a).as_bytes())).collect::<Result<_, _>>()?,
            env: req.env.iter().map(|(k, v)| cs(format!("{k}={}", inside(v)).as_bytes())).collect::<Result<_, _>>()?,
            cwd: inside(&req.cwd.to_string_lossy()).into(),
            binds: &req.binds,
            trees: trees.as_deref(),
            host_proc,
            way_out: &way_out
                .iter()
                .flatten()
                .copied()
                .chain(self.ahead.as_ref().map(|a| a.descriptor()))
                .chain(self.kept.iter().flat_map(|k| k.descriptors()))
                .collect::<Vec<_>>(),
            tmp_size: limits.memory,
            rlimits: &rlimits,
            // Inherited from the helper when it is on that core already.
            core: req.core.filter(|&c| self.on_core != Some(c)).map(cores::only),
            uid: id.uid,
            gid: id.gid,
            netns: req.fresh_netns,
            ahead,
            kept: self.kept.as_ref().filter(|_| kept).map(Kept::run_info),
            handed: kept.then_some(&handed),
            group,
            joined_at: &watchdog.joined_at,
            stdio: stdio_fds,
            filter: &self.filter,
            stacks: &self.stacks,
            hangup,
            watchdog: &look,
            stamps: &self.stamps,
        };
        self.stamps.mark(Mark::Prepared);
        let jail_ns = match &self.jail_ready {
            Some(Ok(JailReady { root: JailRoot::Namespace(ns), .. })) => Some(ns),
            _ => None,
        };
        // init is cloned from the jail's namespace (a fresh jail's); the
        // kept jail's program joins its own.
        let jail_ns = jail_ns.filter(|_| !kept);
        // A fresh jail beside a kept one (no cgroup this run): init's new
        // PID namespace is made below the helper's own, not the kept one's.
        let beside = (!kept).then_some(self.kept.as_ref()).flatten();
        if let Some(k) = beside {
            if let Err(e) = k.outside(true) {
                self.retiring = true;
                return Err(Step::Clone.failed(e));
            }
        }
        if let Some(ns) = jail_ns {
            if let Err(e) = ns.enter() {
                self.retiring = true;
                return Err(Step::Clone.failed(e));
            }
        }
        watchdog.start.set(Instant::now());
        let spawned = jail::spawn(&jail).map_err(Step::Clone.err());
        let wall = watchdog.start.get().elapsed();
        // Back in the helper's namespace, where its paths are (else it
        // serves no more runs).
        let returned = jail_ns.map_or(Ok(()), |ns| ns.leave()).and(beside.map_or(Ok(()), |k| k.outside(false)));
        self.stamps.mark(Mark::Resumed);
        drop(handed.take());
        if let Err(e) = returned {
            self.retiring = true;
            if let Ok((pid, _)) = spawned {
                let _ = reap(pid);
            }
            return Err(Step::Clone.failed(e));
        }
        let (pid, mut rep) = spawned?;
        let init = (!kept).then_some(pid);
        if rep.keeper_lost {
            // The keeper died during the run (the host's OOM killer, say),
            // and the run's processes with it: the judge's fault, not the
            // program's; the next run, in a new helper, is judged again.
            self.retiring = true;
            return Err(Error::InitDied { how: "lost its kept jail (its keeper died)".into() });
        }
        if !rep.done {
            // init died on the way (its PID namespace went with it): say how.
            // What it shared with this helper (heap, locks, glibc's state) may
            // be half-changed: the helper answers, then exits.
            let how = match init {
                Some(init) => reap(init).map_or_else(|e| e.to_string(), |(status, _)| describe(status)),
                None => "ended".to_string(),
            };
            tidy_after_init(group, &req.binds);
            self.retiring = true;
            return Err(Error::InitDied { how });
        }
        let usage = watchdog.usage(&rep, &baseline, wall);
        let spent = std::mem::take(&mut rep.spent);
        drop(trees);
        // The kept jail's binds stay for the next run.
        let binds = if kept { Vec::new() } else { req.binds };
        // Every process of the run was ended before the report (by init, or
        // by the keeper's death in the kept jail): only init's own exit (the
        // namespaces' teardown) is left, reaped later.
        let remake_kept = rep.keeper_killed;
        self.leftover = Some(Leftover { init, binds, _spent: spent, remake_kept, _slot_lock: slot_lock });
        if rep.hangup {
            return Err(Error::JudgeGone);
        }
        match rep.error {
            Some(e) => Err(e),
            None => Ok(usage),
        }
    }
}

/// A helper's jail, readied at its start.
struct JailReady {
    /// Where runs get their root from.
    root: JailRoot,
    /// The host's `/proc`, for init (`Jail::host_proc`).
    host_proc: File,
}

impl JailReady {
    /// The template, then the namespace around it (the helper's own mount
    /// namespace is private by then).
    fn make() -> Result<JailReady, Error> {
        mounts::build_template().map_err(Step::Template.err())?;
        let host_proc = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open("/proc")
            .map_err(Step::Template.err())?;
        let root = JailRoot::make().map_err(Step::Template.err())?;
        Ok(JailReady { root, host_proc })
    }
}

/// What comes with a request: the program's stdio, and its part in a
/// dialogue, if any (`board.rs`).
struct Handed<'a> {
    stdio: [File; 3],
    part: Option<Part<'a>>,
}

/// A jailed run's watchdog and measures. It runs in the run's supervisor:
/// the helper in the kept jail, or a fresh jail's init while the helper
/// waits (they share memory: hence the cells). The CPU time is the group's,
/// less init's own since it joined the group (none in the kept jail).
struct Watchdog<'a> {
    group: Option<&'a Group>,
    limits: &'a Limits,
    /// The idleness rule's window, if it applies.
    idle: Option<Duration>,
    /// The judge's socket, where it may ask to stop the run ([`STOP`]):
    /// looked at with the limits (init wakes for the socket's hangup, not
    /// its messages: a stop waits for the next look, 10 ms at most).
    judge: RawFd,
    start: Cell<Instant>,
    /// init's own CPU time when it joined the group (set by init; `None`
    /// in the kept jail, where no supervisor is in the group).
    joined_at: Cell<Option<Duration>>,
    /// The largest CPU time and (without a cgroup) resident memory seen.
    seen: Cell<(Duration, u64)>,
    /// How long the CPU time has stood still (the idleness rule): the
    /// dialogue's, for a side of one (`board.rs`).
    still: Cell<Stillness>,
    part: Option<Part<'a>>,
    /// With a cgroup, the program's own anonymous memory at each look: a
    /// floor for its peak (see [`Watchdog::usage`]).
    anon: Cell<u64>,
    /// With a cgroup, what the group held at the reset that is not the
    /// run's ([`Baseline::resident`]).
    resident: u64,
}

impl<'a> Watchdog<'a> {
    fn new(
        group: Option<&'a Group>,
        limits: &'a Limits,
        idle: Option<Duration>,
        part: Option<Part<'a>>,
        judge: RawFd,
        resident: u64,
    ) -> Watchdog<'a> {
        let (start, seen, anon) = (Cell::new(Instant::now()), Cell::new((Duration::ZERO, 0)), Cell::new(0));
        let (still, joined_at) = (Cell::new(Stillness::new(idle)), Cell::new(None));
        Watchdog { group, limits, idle, judge, start, joined_at, seen, still, part, anon, resident }
    }

    /// One look, by the supervisor, at the program `pid` (as it sees it).
    fn look(&self, pid: libc::pid_t) -> Watched {
        let (mut cpu, mut memory) = self.seen.get();
        match self.group {
            Some(g) => {
                // init's own time since it joined, where init is the one
                // looking (the kept jail's helper is not in the group).
                let own = self.joined_at.get().map_or(Duration::ZERO, |at| own_cpu().saturating_sub(at));
                cpu = cpu.max(g.cpu().saturating_sub(own));
                self.anon.set(self.anon.get().max(anon_of(pid)));
                // At the group's hard limit the kernel evicts the group's
                // file cache before it ends anything: a program reading its
                // own files back in (an interpreter's, on a cold host) would
                // thrash there until its CPU limit. Past the limit with its
                // files aside, it is stopped here (the stat read only then).
                let now = g.memory_now();
                if now > self.limits.memory.saturating_add(self.resident) {
                    memory = memory.max(now.saturating_sub(g.file_pages().0 + self.resident));
                }
            }
            // No cgroup: the program's tree, in the run's own /proc.
            None => {
                if let Some(s) = sample_tree(pid) {
                    cpu = cpu.max(s.cpu);
                    memory = memory.max(s.resident);
                }
            }
        }
        self.seen.set((cpu, memory));
        if stop_asked(self.judge) && !has_exited(pid) {
            return Watched::Stop(Fired::Stopped);
        }
        let elapsed = self.start.get().elapsed();
        let mut still = self.still.get();
        let progress = board::progress(self.part.as_ref(), cpu);
        let used = Used { cpu, memory, elapsed, still: still.look(progress, elapsed) };
        let watched = look_at(self.limits, self.idle, &mut still, pid, used, progress);
        self.still.set(still);
        watched
    }

    /// What the run used, from init's report, the group and the looks.
    fn usage(&self, rep: &jail::Report, baseline: &Baseline, wall: Duration) -> Usage {
        let mut exit = rep.status.map_or(Exit::Signal(libc::SIGKILL), Exit::from_status);
        let denied = rep.denied.map(seccomp::name_of);
        if denied.is_some() {
            exit = Exit::Signal(libc::SIGSYS);
        }
        let rusage_cpu = Duration::from_micros(rep.cpu_us);
        let maxrss = rep.maxrss_kib * 1024;
        let (watched_cpu, watched_memory) = self.seen.get();
        let (cpu, memory, oom) = match self.group {
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
                        peak.saturating_sub(cache + resident).max(self.anon.get())
                    }
                    None => maxrss.max(watched_memory),
                };
                // The group's time less init's since it joined (building the
                // root, supervising): the program's tree.
                let init = self
                    .joined_at
                    .get()
                    .map_or(Duration::ZERO, |at| Duration::from_micros(rep.init_cpu_us).saturating_sub(at));
                let theirs = g.cpu().saturating_sub(init);
                (theirs.max(rusage_cpu), memory, g.oom_kills() > baseline.oom_kills)
            }
            None => (rusage_cpu.max(watched_cpu), maxrss.max(watched_memory), false),
        };
        let fired = rep.fired.or(oom.then_some(Fired::Memory));
        Usage { exit, fired, cpu, wall, memory, denied, steps: None }
    }
}

/// After init is gone: a second belt for the group, the template as it was.
fn tidy_after_init(group: Option<&Group>, binds: &[Bind]) {
    if let Some(g) = group {
        // Nothing is left after init's death; this is a second belt.
        if !g.is_empty() {
            g.kill_all();
        }
    }
    mounts::forget(binds);
}

/// The size of a new kept jail's `/tmp` before its first run gives its own.
const KEPT_TMP: u64 = 64 << 20;

/// Whether jailed runs share the helper's kept jail (the default) or each
/// gets namespaces of its own (`OJ_FRESH_JAIL=1`, for `make bench` to
/// measure against).
fn kept_jail() -> bool {
    std::env::var_os(FRESH_JAIL).is_none_or(|v| v != "1")
}

/// The environment variable that gives each jailed run namespaces of its
/// own (the helper gets it from its judge).
pub(super) const FRESH_JAIL: &str = "OJ_FRESH_JAIL";

impl Executor {
    /// The basic level: the program forked by the helper, in its own process
    /// group, cleaned up by `killpg` and a sweep of the slot uid.
    fn run_direct(
        &mut self,
        req: Request,
        program: PathBuf,
        handed: Handed<'_>,
        hangup: RawFd,
    ) -> Result<Usage, Error> {
        let Handed { stdio, part } = handed;
        let Request { argv, cwd, env, identity, limits, core, idle, .. } = req;
        let core = core.map(cores::only);
        let [stdin, stdout, stderr] = stdio;
        // Everything the child needs is computed here: `pre_exec` must not allocate.
        let rlimits = self.within_own(rlimits(&limits, identity.is_some()));
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
            cmd.pre_exec(move || child_setup(&rlimits, core.as_ref(), identity, parent));
        }
        self.stamps.mark(Mark::Prepared);
        let start = Instant::now();
        let child = cmd.spawn().map_err(|e| Error::CannotStart {
            program: program.display().to_string(),
            during: None,
            why: e.to_string(),
        })?;
        let pid = child.id() as libc::pid_t;
        // From here on the child is reaped with wait4 below, never by `child`.
        drop(child);
        drop(cmd);

        let watch = watch(pid, &limits, idle, part.as_ref(), start, hangup);
        self.stamps.mark(Mark::Exited);
        // Kill the group: the program if a limit fired, and any background child.
        // The group exists until the leader is reaped, so this cannot hit a reused pid.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        let (status, ru) = reap(pid).map_err(Step::WaitProgram.err())?;
        let wall = start.elapsed();
        if let Some(id) = identity {
            sweep(id);
        }
        self.stamps.mark(Mark::Reaped);
        if watch.hangup {
            return Err(Error::JudgeGone);
        }
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        let cpu = (tv(ru.ru_utime) + tv(ru.ru_stime)).max(watch.cpu);
        let memory = (ru.ru_maxrss as u64 * 1024).max(watch.peak_memory);
        Ok(Usage { exit: Exit::from_status(status), fired: watch.fired, cpu, wall, memory, denied: None, steps: None })
    }

    /// The rlimits as this process can set them. Without `CAP_SYS_RESOURCE` no
    /// hard limit can be raised: each is capped at the helper's own (the
    /// judge's, inherited), with a warning the first time, where the run would
    /// otherwise never start ("setting up the program: Operation not permitted").
    fn within_own(
        &mut self,
        mut v: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    ) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
        if self.privileged {
            return v;
        }
        for (resource, soft, hard) in &mut v {
            let mut own = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: getrlimit writes only `own`, a live local.
            if unsafe { libc::getrlimit(*resource, &mut own) } != 0 || own.rlim_max >= *hard {
                continue;
            }
            if !self.warned.contains(resource) {
                self.warned.push(*resource);
                let asked = if *hard == UNLIMITED { "unlimited".to_string() } else { hard.to_string() };
                eprintln!(
                    "ojrunner-sandbox-helper: RLIMIT_{} capped at {} (asked {asked}): the judge's own hard limit, \
                 which cannot be raised without CAP_SYS_RESOURCE",
                    rlimit_name(*resource),
                    own.rlim_max,
                );
            }
            *hard = own.rlim_max;
            *soft = (*soft).min(own.rlim_max);
        }
        v
    }
}

/// The child between fork and exec. Async-signal-safe: raw system calls only.
fn child_setup(
    rlimits: &[(libc::__rlimit_resource_t, u64, u64)],
    core: Option<&libc::cpu_set_t>,
    identity: Option<Identity>,
    parent: libc::pid_t,
) -> io::Result<()> {
    let check = |r: libc::c_long| if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
    // SAFETY: between fork and exec: system calls only, on locals and on what the parent made before the fork; nothing
    // allocates or locks.
    unsafe {
        for &(resource, soft, hard) in rlimits {
            let rl = libc::rlimit { rlim_cur: soft, rlim_max: hard };
            check(libc::setrlimit(resource, &rl) as libc::c_long)?;
        }
        if let Some(set) = core {
            // Best effort, as in the jail: a CPU gone offline runs unpinned.
            let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
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

/// [`look`] at the program `pid`, but an idleness that is the judge's is
/// none: a program blocked on a stdout or stderr holding output the judge
/// has not read yet (a judge busy or starved on a loaded host) waits on
/// the judge, not on itself, and its stillness starts again. The pipes are
/// looked at only when the rule would end the run.
/// `progress` is what its stillness is measured by (its CPU time, or its
/// dialogue's).
fn look_at(
    limits: &Limits,
    idle: Option<Duration>,
    still: &mut Stillness,
    pid: libc::pid_t,
    used: Used,
    progress: Duration,
) -> Watched {
    match look(limits, idle, used) {
        Watched::Stop(Fired::Idle) if [1, 2].into_iter().any(|fd| unread_output(pid, fd)) => {
            still.stir(progress, used.elapsed);
            look(limits, idle, Used { still: Duration::ZERO, ..used })
        }
        watched => watched,
    }
}

/// Whether `pid`'s descriptor `fd` is a pipe holding bytes nobody has read
/// (opened again through `/proc`, for reading, without blocking; a file,
/// or a descriptor this process may not open, is not).
fn unread_output(pid: libc::pid_t, fd: i32) -> bool {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let Ok(pipe) =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(format!("/proc/{pid}/fd/{fd}"))
    else {
        return false;
    };
    if !pipe.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
        return false;
    }
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points to `unread`.
    let asked = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut unread) };
    asked == 0 && unread > 0
}

/// The basic level's watchdog: samples `pid`'s process tree every [`POLL`](super::POLL)
/// (sooner when the wall limit is nearer) until `pid` exits, a limit fires,
/// the judge asks to stop ([`STOP`]) or hangs up. Does not reap. (A jailed
/// run is watched by its init: `run_jailed`.)
fn watch(
    pid: libc::pid_t,
    limits: &Limits,
    idle: Option<Duration>,
    part: Option<&Part<'_>>,
    start: Instant,
    hangup: RawFd,
) -> Watch {
    let pidfd = pidfd_open(pid);
    let mut w = Watch { fired: None, cpu: Duration::ZERO, peak_memory: 0, hangup: false };
    let mut still = Stillness::new(idle);
    loop {
        let exited = has_exited(pid);
        if let Some(s) = sample_tree(pid) {
            w.cpu = w.cpu.max(s.cpu);
            w.peak_memory = w.peak_memory.max(s.resident);
        }
        if exited {
            return w;
        }
        if stop_asked(hangup) {
            w.fired = Some(Fired::Stopped);
            return w;
        }
        // Wake at the next look, or at once when the run ends (the pidfd)
        // or the judge speaks or goes (its socket).
        let elapsed = start.elapsed();
        let progress = board::progress(part, w.cpu);
        let used = Used { cpu: w.cpu, memory: w.peak_memory, elapsed, still: still.look(progress, elapsed) };
        let wait = match look_at(limits, idle, &mut still, pid, used, progress) {
            Watched::Stop(limit) => {
                w.fired = Some(limit);
                return w;
            }
            Watched::Wait(d) => d.as_millis().max(1) as libc::c_int,
        };
        let mut fds = [
            libc::pollfd { fd: pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: hangup, events: libc::POLLRDHUP | libc::POLLIN, revents: 0 },
        ];
        // SAFETY: poll reads and writes the two entries of `fds`, a live local array.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) };
        if fds[1].revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            w.hangup = true;
            return w;
        }
    }
}

/// What the judge sends on a helper's socket during a run to have it
/// stopped (the program's output can no longer match its answer,
/// `streams.rs`). Sent at most once a run; one that comes after its run
/// is over is read as such by the helper's loop, and dropped.
pub(super) const STOP: &[u8] = b"stop";

/// Whether the judge asked, on its socket `judge`, to stop the run: takes
/// its [`STOP`] if it is there. Never waits.
fn stop_asked(judge: RawFd) -> bool {
    let mut buf = [0u8; 8];
    // SAFETY: recv writes at most buf.len() bytes into `buf`, a live local array.
    let n = unsafe { libc::recv(judge, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    n > 0 && &buf[..n as usize] == STOP
}
