//! The kept jail: a helper's PID, mount, IPC and UTS namespaces, made once
//! and cleaned after each run, in place of a new set per run.
//!
//! Making and tearing down a run's namespaces was most of what a jailed run
//! cost the kernel (`make bench`, `tests/bench/floor.c`): a mount namespace
//! copied and unmounted, a tmpfs and a `/proc` mounted and unmounted (each
//! unmount waiting for an expedited RCU grace period), PID, IPC and UTS
//! namespaces made and freed; and an init to be their PID 1, cloned and
//! exited. Kept, a run finds them as a fresh set would be, because what a
//! run can leave in them is taken away before the next:
//!
//! - **processes**: a run that left one (its cgroup counts them), or that
//!   a limit ended, is ended by killing the keeper, PID 1 of the
//!   namespace: every process of the namespace dies with it, and none can
//!   be born there after (a kill through the cgroup's list could miss a
//!   `fork`); the helper waits (2 s at most) for the group to be empty
//!   before it answers (`jail.rs`), and makes a new kept jail after. The keeper is root
//!   and invisible to the run (`hidepid`). No run without a cgroup is kept;
//! - **`/tmp`** (and `/dev/shm`, a link to it): a new tmpfs in place of one
//!   a run changed at all: a block or an inode in use (a file unlinked but
//!   held open in flight counts), or its root's times moved (a file made
//!   and removed); its root is root's, mode 1777;
//! - **System V objects and POSIX message queues**: removed, found by the
//!   namespace's own counts (the helper is in the IPC namespace: it makes
//!   none);
//! - **binds**: the same host directory (same device and inode) stays
//!   attached from run to run, any other change moves them;
//! - the hostname: a run cannot set it (no `CAP_SYS_ADMIN`).
//!
//! What is left from run to run, and a run can read: the namespaces'
//! counters. PIDs go on counting (a run's program is not PID 2), and so do
//! System V ids: a run learns how many processes and objects the runs
//! before it on this helper made: a few bits, which a run could set on
//! purpose. The program's parent, the helper, is outside the PID
//! namespace: `getppid()` says 0 (a fresh jail's init is PID 1).

use super::limits::Bind;
use super::mounts::{self, JailNs};
use nix::sched::CloneFlags;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;

/// Where the helper mounts its IPC namespace's message queues, in its own
/// mount namespace (the host sees an empty directory), to find a run's.
const MQUEUE: &str = "/run/ojrunner/mqueue";

/// A helper's kept jail.
pub struct Kept {
    /// PID 1 of the kept PID namespace: it reaps whatever is left to it and
    /// holds the namespace alive (it dies with the helper, `PDEATHSIG`); 0
    /// once it is reaped.
    keeper: libc::pid_t,
    mnt: OwnedFd,
    pid: OwnedFd,
    /// The helper's own PID namespace (its children's for a run of the
    /// basic level, [`Kept::outside`]).
    own_pid: OwnedFd,
    /// The kept `/tmp`, to see whether a run left anything in it, and its
    /// state when new ([`Pristine`]).
    tmp: OwnedFd,
    tmp_new: Pristine,
    tmp_size: u64,
    /// The helper's IPC namespace's message queues (`MQUEUE`).
    mqueue: OwnedFd,
    /// The binds attached in the kept namespace now.
    attached: Vec<Attached>,
}

/// A bind attached in the kept namespace, with the identity of its host
/// directory when it was: a directory removed and made again at the same
/// path is another one.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Attached {
    bind: Bind,
    id: (u64, u64),
}

impl Kept {
    /// Makes the kept namespaces: the helper's own IPC and UTS namespaces,
    /// then the keeper, forked into a new PID namespace from the jail's
    /// mount namespace, where it makes its copy with a `/tmp` and a `/proc`.
    pub fn make(ns: &JailNs, tmp_size: u64) -> io::Result<Kept> {
        let own_pid = mounts::open_path(c"/proc/self/ns/pid", libc::O_RDONLY)?;
        nix::sched::unshare(CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS)?;
        nix::unistd::sethostname("sandbox")?;
        let mqueue = mount_mqueue()?;
        let (ready_r, ready_w) = super::sys::pipe()?;
        let helper = super::sys::pidfd_open(std::process::id() as libc::pid_t)
            .ok_or_else(|| io::Error::other("no pidfd of the helper for its keeper"))?;
        nix::sched::unshare(CloneFlags::CLONE_NEWPID)?;
        // From here the helper's children are born in the new PID namespace:
        // the keeper first (its PID 1), then the runs' programs (the basic
        // level's go back out, `Kept::outside`). On a failure, they are
        // born in the helper's own again.
        let made = Self::start_keeper(ns, ready_w, &ready_r, &helper, tmp_size);
        drop(helper);
        let kept = made.and_then(|keeper| {
            let at = |what: &str| std::ffi::CString::new(format!("/proc/{keeper}/{what}")).map_err(io::Error::other);
            let opened = (|| {
                Ok::<_, io::Error>((
                    mounts::open_path(&at("ns/mnt")?, libc::O_RDONLY)?,
                    mounts::open_path(&at("ns/pid")?, libc::O_RDONLY)?,
                    mounts::open_path(&at("root/tmp")?, libc::O_RDONLY | libc::O_DIRECTORY)?,
                ))
            })()
            .and_then(|(mnt, pid, tmp)| Ok((mnt, pid, Pristine::of(&tmp)?, tmp)));
            opened
                .inspect_err(|_| {
                    // SAFETY: kill and waitpid take no pointer but a null status.
                    unsafe {
                        libc::kill(keeper, libc::SIGKILL);
                        libc::waitpid(keeper, std::ptr::null_mut(), 0);
                    }
                })
                .map(|(mnt, pid, tmp_new, tmp)| (keeper, mnt, pid, tmp_new, tmp))
        });
        match kept {
            Ok((keeper, mnt, pid, tmp_new, tmp)) => {
                Ok(Kept { keeper, mnt, pid, own_pid, tmp, tmp_new, tmp_size, mqueue, attached: Vec::new() })
            }
            Err(e) => {
                nix::sched::setns(&own_pid, CloneFlags::CLONE_NEWPID)?;
                Err(e)
            }
        }
    }

    /// Forks the keeper from the jail's mount namespace and waits until it
    /// has made its own: its PID.
    fn start_keeper(
        ns: &JailNs,
        ready_w: std::fs::File,
        ready_r: &std::fs::File,
        helper: &OwnedFd,
        tmp_size: u64,
    ) -> io::Result<libc::pid_t> {
        ns.enter()?;
        // SAFETY: the helper is single-threaded: the child may run any code.
        let keeper = unsafe { libc::fork() };
        if keeper == 0 {
            keep(ready_w.as_raw_fd(), helper.as_raw_fd(), tmp_size);
        }
        let forked = io::Error::last_os_error();
        let back = ns.leave();
        drop(ready_w);
        if keeper < 0 {
            return Err(forked);
        }
        let mut byte = [0u8; 1];
        let started = back.and_then(|()| match io::Read::read(&mut &*ready_r, &mut byte)? {
            1 => Ok(keeper),
            _ => Err(io::Error::other("the keeper of the kept jail died making it")),
        });
        started.inspect_err(|_| {
            // SAFETY: kill and waitpid take no pointer but a null status.
            unsafe {
                libc::kill(keeper, libc::SIGKILL);
                libc::waitpid(keeper, std::ptr::null_mut(), 0);
            }
        })
    }

    /// Readies the kept jail for a run with `binds` and a `/tmp` of
    /// `tmp_size` bytes: the binds attached (if they are not those attached
    /// now: the same host directories, by device and inode) and `/tmp`
    /// resized, by the helper in the kept mount namespace. `Err`: what is
    /// mounted there is not known, and the helper serves no more runs.
    pub fn prepare(&mut self, ns: &JailNs, binds: &[Bind], tmp_size: u64) -> io::Result<()> {
        let wanted = identify(binds)?;
        let rebind = wanted != self.attached || binds.iter().any(under_tmp);
        let resize = tmp_size != self.tmp_size;
        if !rebind && !resize {
            return Ok(());
        }
        let trees = if rebind { mounts::detach_binds(binds)? } else { Vec::new() };
        if rebind {
            let old: Vec<Bind> = std::mem::take(&mut self.attached).into_iter().map(|a| a.bind).collect();
            self.enter()?;
            let detached = old.iter().rev().try_for_each(|b| mounts::detach_at(b.inside()));
            self.leave(ns)?;
            detached?;
            mounts::forget(&old);
            for b in binds.iter().filter(|b| !under_tmp(b)) {
                mounts::make_template_mount_point(b)?;
            }
        }
        self.enter()?;
        let changed = (|| {
            for (b, t) in binds.iter().zip(&trees) {
                match under_tmp(b) {
                    // Its mount point in the run's `/tmp`, gone with it.
                    true => mounts::attach(t, b.inside())?,
                    false => mounts::attach_at(t, b.inside())?,
                }
            }
            if resize {
                mounts::resize_tmp(tmp_size)?;
            }
            Ok::<_, io::Error>(())
        })();
        self.leave(ns)?;
        changed?;
        if rebind {
            // Those below `/tmp` go with it after the run (`clean`).
            self.attached = wanted.into_iter().filter(|a| !under_tmp(&a.bind)).collect();
        }
        self.tmp_size = tmp_size;
        Ok(())
    }

    /// Whether the keeper lives (a PID namespace whose PID 1 died takes no
    /// new process: an OOM kill of the host's could end it).
    pub fn alive(&mut self) -> bool {
        // SAFETY: waitpid with a null status writes nothing.
        if self.keeper > 0 && unsafe { libc::waitpid(self.keeper, std::ptr::null_mut(), libc::WNOHANG) } != 0 {
            // Reaped (or not ours): its PID is no longer one to signal.
            self.keeper = 0;
        }
        self.keeper > 0
    }

    /// The binds attached in it, whose mount points it made in the
    /// template: to be taken out once it is gone (`mounts::forget`).
    pub fn attached(&self) -> Vec<Bind> {
        self.attached.iter().map(|a| a.bind.clone()).collect()
    }

    /// The size its `/tmp` was last given.
    pub fn tmp_size(&self) -> u64 {
        self.tmp_size
    }

    /// Moves the helper into the kept mount namespace, to change its mounts.
    fn enter(&self) -> io::Result<()> {
        Ok(nix::sched::setns(&self.mnt, CloneFlags::CLONE_NEWNS)?)
    }

    /// Back from [`Kept::enter`].
    fn leave(&self, ns: &JailNs) -> io::Result<()> {
        ns.leave()
    }

    /// What a run in it needs: the mount namespace its program joins, and
    /// the keeper, whose death ends the run's processes.
    pub fn run_info(&self) -> super::jail::KeptRun {
        super::jail::KeptRun { mount_namespace: self.mnt.as_raw_fd(), keeper: self.keeper }
    }

    /// The helper's next children are born in its own PID namespace (a
    /// run of the basic level), not the kept one; `false`: in the kept one
    /// again. `Err`: the helper serves no more runs.
    pub fn outside(&self, out: bool) -> io::Result<()> {
        let ns = if out { &self.own_pid } else { &self.pid };
        Ok(nix::sched::setns(ns, CloneFlags::CLONE_NEWPID)?)
    }

    /// After a run (its processes gone): takes away what it left in the kept
    /// namespaces. `Err`: the helper serves no more runs.
    pub fn clean(&mut self, ns: &JailNs) -> io::Result<()> {
        self.clean_ipc()?;
        if Pristine::of(&self.tmp)? != self.tmp_new {
            self.enter()?;
            let fresh = mounts::fresh_tmp(self.tmp_size);
            let back = self.leave(ns);
            fresh?;
            back?;
            let at = std::ffi::CString::new(format!("/proc/{}/root/tmp", self.keeper)).map_err(io::Error::other)?;
            // (A keeper gone since the run: its namespace's `/tmp` is not
            // found, and the helper retires.)
            self.tmp = mounts::open_path(&at, libc::O_RDONLY | libc::O_DIRECTORY)?;
            self.tmp_new = Pristine::of(&self.tmp)?;
        }
        Ok(())
    }

    /// Removes the System V objects and message queues of the helper's IPC
    /// namespace (a run of the basic level is in it too).
    pub fn clean_ipc(&self) -> io::Result<()> {
        remove_ipc_objects()?;
        remove_mqueues(&self.mqueue)
    }

    /// The descriptors it holds (each leads out of a run's jail).
    pub fn descriptors(&self) -> [RawFd; 5] {
        [
            self.mnt.as_raw_fd(),
            self.pid.as_raw_fd(),
            self.own_pid.as_raw_fd(),
            self.tmp.as_raw_fd(),
            self.mqueue.as_raw_fd(),
        ]
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        let _ = nix::sched::setns(&self.own_pid, CloneFlags::CLONE_NEWPID);
        // Its IPC namespace's queues: a new kept jail mounts its own.
        let _ = nix::mount::umount2(MQUEUE, nix::mount::MntFlags::MNT_DETACH);
        if self.keeper <= 0 {
            return;
        }
        // SAFETY: kill takes no pointer; the keeper is the helper's child, not reaped (`alive` zeroes it then).
        unsafe { libc::kill(self.keeper, libc::SIGKILL) };
        // Reaped within 2 s (its namespace's last tasks exit first); one
        // stuck in the kernel longer is left to the helper's own exit.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        // SAFETY: waitpid with a null status writes nothing.
        while unsafe { libc::waitpid(self.keeper, std::ptr::null_mut(), libc::WNOHANG) } == 0
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
    }
}

/// Whether the keeper `pid` has died or is dying (its namespace's
/// processes with it): read from its `/proc/<pid>/stat` (`PF_EXITING`),
/// as it may not be a zombie yet when the run it ended is over.
pub(super) fn keeper_dying(pid: libc::pid_t) -> bool {
    const PF_EXITING: u64 = 0x4;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let state = fields.first().copied().unwrap_or("X");
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(PF_EXITING);
    pid <= 0 || matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0
}

/// The keeper, from its `fork`: PID 1 of the kept PID namespace. Makes its
/// mount namespace (a copy of the jail's) with the runs' `/tmp` and
/// `/proc`, and an empty network namespace, says so on `ready`, then reaps
/// whatever is left to it until the helper dies.
fn keep(ready: RawFd, helper: RawFd, tmp_size: u64) -> ! {
    // SAFETY: prctl, poll of a live local and close take no other pointer; the keeper keeps no descriptor of the
    // helper's but `ready` (the others would hold the judge's socket open, among others).
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // The helper died before the line above: nobody would end the keeper.
        let mut gone = libc::pollfd { fd: helper, events: libc::POLLIN, revents: 0 };
        if libc::poll(&mut gone, 1, 0) != 0 {
            libc::_exit(1);
        }
        for fd in 0..1024 {
            if fd != ready {
                libc::close(fd);
            }
        }
        libc::close_range(1024, libc::c_uint::MAX, 0);
    }
    // A network namespace of its own too: the keeper must not hold the
    // helper's alive once the helper moves to a new one (`jail.rs`'s
    // `renew_netns_if_used`), with the sockets in flight that made it move.
    let made = nix::sched::unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWNET)
        .map_err(io::Error::from)
        .and_then(|()| mounts::enter_root(&[], Some(&[]), tmp_size));
    if made.is_err() {
        // SAFETY: _exit ends the keeper at once.
        unsafe { libc::_exit(1) };
    }
    // SAFETY: a one-byte write of a live local; then `ready` is the keeper's own, closed once.
    unsafe {
        libc::write(ready, b"k".as_ptr().cast(), 1);
        libc::close(ready);
    }
    // SAFETY: a zeroed sigset_t is valid for sigemptyset/sigaddset, which write into it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: the set is a live local; SIGCHLD is blocked, then waited for.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    loop {
        // SAFETY: waitpid with a null status and sigwaitinfo with a null info write nothing of ours.
        unsafe {
            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG | libc::__WALL) > 0 {}
            libc::sigwaitinfo(&set, std::ptr::null_mut());
        }
    }
}

/// A bind seen below `/tmp` (a test's directory, at its host path): its
/// mount point is in the run's `/tmp`, made anew for each run.
fn under_tmp(b: &Bind) -> bool {
    b.inside().starts_with("/tmp")
}

/// Each bind with its host directory's identity, now.
fn identify(binds: &[Bind]) -> io::Result<Vec<Attached>> {
    binds
        .iter()
        .map(|b| {
            let m = std::fs::metadata(&b.path).map_err(|e| super::sys::annotate(e, &b.path))?;
            Ok(Attached { bind: b.clone(), id: (m.dev(), m.ino()) })
        })
        .collect()
}

/// `<sys/shm.h>`'s, which the libc crate lacks.
const SHM_STAT: libc::c_int = 13;
const SHM_INFO: libc::c_int = 14;
#[repr(C)]
struct ShmInfo {
    used_ids: libc::c_int,
    shm_tot: libc::c_ulong,
    shm_rss: libc::c_ulong,
    shm_swp: libc::c_ulong,
    swap_attempts: libc::c_ulong,
    swap_successes: libc::c_ulong,
}

/// Removes every System V object of the caller's IPC namespace: each kind
/// counted first (one call when there are none, as after most runs).
fn remove_ipc_objects() -> io::Result<()> {
    // SAFETY: each *ctl INFO call writes at most the size of the info struct, into a zeroed local of that type, and
    // each STAT call into a zeroed local of the kind's ds struct; RMID takes no buffer.
    unsafe {
        let mut shm: ShmInfo = std::mem::zeroed();
        let max = libc::shmctl(0, SHM_INFO, (&mut shm as *mut ShmInfo).cast());
        if max >= 0 && shm.used_ids > 0 {
            for i in 0..=max {
                let mut ds: libc::shmid_ds = std::mem::zeroed();
                let id = libc::shmctl(i, SHM_STAT, &mut ds);
                if id >= 0 {
                    libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
                }
            }
        }
        let mut sem: libc::seminfo = std::mem::zeroed();
        let max = libc::semctl(0, 0, libc::SEM_INFO, &mut sem as *mut libc::seminfo);
        if max >= 0 && sem.semusz > 0 {
            for i in 0..=max {
                let mut ds: libc::semid_ds = std::mem::zeroed();
                let id = libc::semctl(i, 0, libc::SEM_STAT, &mut ds as *mut libc::semid_ds);
                if id >= 0 {
                    libc::semctl(id, 0, libc::IPC_RMID);
                }
            }
        }
        let mut msg: libc::msginfo = std::mem::zeroed();
        let max = libc::msgctl(0, libc::MSG_INFO, (&mut msg as *mut libc::msginfo).cast());
        if max >= 0 && msg.msgpool > 0 {
            for i in 0..=max {
                let mut ds: libc::msqid_ds = std::mem::zeroed();
                let id = libc::msgctl(i, libc::MSG_STAT, &mut ds);
                if id >= 0 {
                    libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut());
                }
            }
        }
    }
    Ok(())
}

/// The helper's IPC namespace's message queues, mounted at [`MQUEUE`] in
/// its own mount namespace.
fn mount_mqueue() -> io::Result<OwnedFd> {
    std::fs::create_dir_all(MQUEUE)?;
    nix::mount::mount(
        Some("mqueue"),
        MQUEUE,
        Some("mqueue"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV | nix::mount::MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("mount {MQUEUE}: {e}")))?;
    mounts::open_path(&std::ffi::CString::new(MQUEUE).map_err(io::Error::other)?, libc::O_RDONLY | libc::O_DIRECTORY)
}

/// Unlinks every message queue a run left.
fn remove_mqueues(dir: &OwnedFd) -> io::Result<()> {
    for name in entries(dir)? {
        // SAFETY: `name` is NUL-terminated and lives across the call; `dir` is open.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What a run could change of a tmpfs and leave readable to the next: its
/// blocks and inodes in use (a file unlinked but held open, say by a
/// descriptor in flight in a socket cycle, lists no entry and still takes
/// its space), and its root's times (a file made and removed moves them).
#[derive(Debug, PartialEq, Eq)]
struct Pristine {
    blocks_used: u64,
    inodes_used: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
}

impl Pristine {
    fn of(dir: &OwnedFd) -> io::Result<Pristine> {
        let fs = nix::sys::statfs::fstatfs(dir)?;
        let st = nix::sys::stat::fstat(dir)?;
        Ok(Pristine {
            blocks_used: (fs.blocks() - fs.blocks_free()) as u64,
            inodes_used: (fs.files() - fs.files_free()) as u64,
            ctime: (st.st_ctime, st.st_ctime_nsec),
            mtime: (st.st_mtime, st.st_mtime_nsec),
        })
    }
}

/// The names in `dir` but `.` and `..`, read anew.
fn entries(dir: &OwnedFd) -> io::Result<Vec<std::ffi::CString>> {
    // Opened anew: a position of its own, at the start.
    let flags = nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC;
    let mut d = nix::dir::Dir::openat(dir, ".", flags, nix::sys::stat::Mode::empty())?;
    d.iter()
        .filter_map(|e| match e {
            Ok(e) if matches!(e.file_name().to_bytes(), b"." | b"..") => None,
            Ok(e) => Some(Ok(e.file_name().to_owned())),
            Err(e) => Some(Err(io::Error::from(e))),
        })
        .collect()
}
