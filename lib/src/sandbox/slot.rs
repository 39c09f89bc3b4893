//! Slots: the unprivileged identities runs take. Worker `i` runs programs
//! as uid and gid [`slot_uid_base`] + i, and its checkers and interactors as
//! [`Slot::auxiliary`]. A slot serves one run at a time, host-wide (a lock
//! file per uid, [`slot_lock_dir`]), because after each run every process
//! of its uid is killed (`sweep`); the [`SlotPool`] lends a runner's idle
//! slots to whichever claim can use them.

use super::cgroup::Hierarchy;
use super::limits::{Identity, SLOT_LOCK_DIR};
use super::procfs::parent_and_uid;
use super::sys::{annotate, reap};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The first uid (and gid) of the slots, when running as root, unless
/// [`slot_uid_base`] says otherwise.
pub const SLOT_BASE_UID: u32 = 60000;

/// The slot uids' base for this process: `OJ_SLOT_UID_BASE` (read once, so
/// `judge-exec --slot-uid-base`, which sets it, must come first), else
/// [`SLOT_BASE_UID`]. Two runners on one host, or two checkouts' test
/// suites, each need a range of their own: a slot's processes are swept by
/// uid after each run.
pub fn slot_uid_base() -> u32 {
    static BASE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        std::env::var("OJ_SLOT_UID_BASE").ok().and_then(|v| parse_slot_uid_base(&v).ok()).unwrap_or(SLOT_BASE_UID)
    })
}

/// A slot uid base as configured: from 1000 (above the system's users) to
/// 2^31 less the room the slots take.
pub fn parse_slot_uid_base(value: &str) -> Result<u32, BadSlotUidBase> {
    match value.trim().parse::<u32>() {
        Ok(b) if (1000..=(1u32 << 31) - 2 * AUX_UID_OFFSET).contains(&b) => Ok(b),
        _ => Err(BadSlotUidBase(value.to_string())),
    }
}

/// A slot uid base out of range, or not a number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a slot uid base (a number from 1000 to 2147481648)")]
pub struct BadSlotUidBase(pub String);

/// How far above a worker's slot uid its auxiliary slot is (checkers and
/// interactors): worker i's is the base + 1000 + i.
pub const AUX_UID_OFFSET: u32 = 1000;

/// The unprivileged identity one concurrent worker runs programs as. A slot
/// must be used by one run at a time: after each run every process of its uid
/// is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub uid: u32,
    pub gid: u32,
}

impl Slot {
    /// Worker `i`'s slot: uid = gid = [`slot_uid_base`] + i when running as root (the
    /// uids need no passwd entry, but nothing else may run as them); else the
    /// caller's own uid, and programs run as the caller.
    pub fn for_index(i: usize) -> Slot {
        if is_root() {
            let id = slot_uid_base() + i as u32;
            Slot { uid: id, gid: id }
        } else {
            Slot { uid: nix::unistd::getuid().as_raw(), gid: nix::unistd::getgid().as_raw() }
        }
    }

    /// The slot a worker's checker or interactor runs as: uid and gid
    /// [`AUX_UID_OFFSET`] above this one (when running as root; else the
    /// same caller). Its own uid, so that an interactor can run while the
    /// program does (each slot serves one run at a time) and so that nothing
    /// the checker may read is open to the contestant's uid.
    pub fn auxiliary(&self) -> Slot {
        if self.identity().is_some() {
            Slot { uid: self.uid + AUX_UID_OFFSET, gid: self.gid + AUX_UID_OFFSET }
        } else {
            *self
        }
    }

    /// Whom the sandbox switches to: nobody unless we are root (and uid 0
    /// means "don't switch").
    pub fn identity(&self) -> Option<Identity> {
        (is_root() && self.uid != 0).then_some(Identity { uid: self.uid, gid: self.gid })
    }
}

pub(crate) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

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
pub(super) fn lock_slot(dir: &Path, uid: u32) -> io::Result<File> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| annotate(e, dir))?;
    ojrunner_daemon::lock::exclusive(&dir.join(format!("slot-{uid}.lock")))
}

/// The slot lock files a helper has opened, held open from run to run: a
/// run's lock is one `flock` on a file already open (and a `stat` that it
/// is still the file at its path), not the directory made, the file
/// opened and closed each time.
#[derive(Default)]
pub(super) struct SlotLocks {
    open: Vec<(PathBuf, File)>,
}

/// A slot's lock, held until dropped (an `flock` released on its own
/// open file description, which the helper keeps open).
pub(super) struct SlotLock(File);

impl Drop for SlotLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl SlotLocks {
    /// Takes the host-wide lock of a slot uid, as [`lock_slot`] does.
    pub(super) fn lock(&mut self, dir: &Path, uid: u32) -> io::Result<SlotLock> {
        let path = dir.join(format!("slot-{uid}.lock"));
        if let Some(i) = self.open.iter().position(|(p, _)| *p == path) {
            let f = &self.open[i].1;
            f.lock().map_err(|e| annotate(e, &path))?;
            // Still the file at its path: a lock on a file since removed
            // or replaced would keep no other judge out.
            if is_at(f, &path) {
                return guard(f);
            }
            let _ = f.unlock();
            self.open.remove(i);
        }
        let f = lock_slot(dir, uid)?;
        let held = guard(&f);
        self.open.push((path, f));
        held
    }
}

/// A guard of `f`'s lock (a descriptor of the same open file description);
/// the lock is let go if none can be made.
fn guard(f: &File) -> io::Result<SlotLock> {
    f.try_clone().map(SlotLock).inspect_err(|_| {
        let _ = f.unlock();
    })
}

/// Whether `f` is the file at `path`.
fn is_at(f: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
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
pub(super) fn sweep(id: Identity) -> bool {
    // kill(-1) from a process of that uid reaches exactly that uid's processes.
    // SAFETY: the child makes system calls only and _exits, whatever locks other threads held at the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The forked child of a multi-threaded process: raw system calls only.
        // SAFETY: in the forked child: system calls with a null group list, no allocation, no lock.
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
                // SAFETY: waitpid writes only `status`, a live local.
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

/*** The pool ***/

/// A set of slot indices ([`crate::judge::Slot::for_index`]).
pub struct SlotPool {
    state: Mutex<State>,
    returned: Condvar,
}

struct State {
    free: Vec<usize>,
    /// Claims blocked in [`SlotPool::take`].
    waiting: usize,
}

impl SlotPool {
    pub fn new(indices: impl IntoIterator<Item = usize>) -> SlotPool {
        let mut free: Vec<usize> = indices.into_iter().collect();
        // Lowest index first out (`pop`), so a quiet runner uses slot 0.
        free.sort_unstable_by(|a, b| b.cmp(a));
        SlotPool { state: Mutex::new(State { free, waiting: 0 }), returned: Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a claim, waiting for one if none is free.
    pub fn take(&self) -> usize {
        let mut s = self.lock();
        s.waiting += 1;
        loop {
            if let Some(i) = s.free.pop() {
                s.waiting -= 1;
                return i;
            }
            s = self.returned.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A slot to borrow: only one that is free while no claim waits.
    pub fn lend(&self) -> Option<usize> {
        let mut s = self.lock();
        if s.waiting > 0 {
            return None;
        }
        s.free.pop()
    }

    /// Whether a claim waits for a slot (a borrower should give its back).
    pub fn wanted(&self) -> bool {
        self.lock().waiting > 0
    }

    pub fn give(&self, i: usize) {
        self.lock().free.push(i);
        self.returned.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_when_root() {
        if is_root() {
            let base = slot_uid_base();
            assert_eq!(Slot::for_index(3), Slot { uid: base + 3, gid: base + 3 });
            assert_eq!(Slot::for_index(3).auxiliary(), Slot { uid: base + 1003, gid: base + 1003 });
            assert!(Slot::for_index(0).identity().is_some());
        } else {
            assert!(Slot::for_index(3).identity().is_none());
        }
        assert!(Slot { uid: 0, gid: 0 }.identity().is_none());
        assert_eq!(parse_slot_uid_base("70000"), Ok(70000));
        assert!(parse_slot_uid_base("12").is_err() && parse_slot_uid_base("x").is_err());
    }
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn nothing_is_lent_while_a_claim_waits() {
        let pool = Arc::new(SlotPool::new([0, 1]));
        assert_eq!(pool.take(), 0);
        assert_eq!(pool.lend(), Some(1));
        assert_eq!(pool.lend(), None);
        let waiter = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || pool.take())
        };
        // The condition, not a guess: the waiter is counted.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !pool.wanted() {
            assert!(std::time::Instant::now() < deadline, "the waiter never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        pool.give(0);
        assert_eq!(waiter.join().unwrap(), 0);
        assert!(!pool.wanted());
        pool.give(1);
        assert_eq!(pool.lend(), Some(1));
    }
}
