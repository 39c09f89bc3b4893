//! The run's root file system, built from mount rules: a template once per
//! helper ([`build_template`]) and the namespace around it ([`JailRoot`]),
//! the rest per run (`enter_root`). The table of what a run sees is in the
//! sandbox's theory of operation (`sandbox/mod.rs`).

use super::limits::Bind;
use nix::fcntl::OFlag;
use nix::mount::{umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use nix::unistd::{chdir, fchdir, pivot_root};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Where the helper builds the template root, in its own mount namespace
/// (the host sees an empty directory), and where each run's init, in its
/// copy of that namespace, finishes it before `pivot_root`.
pub const ROOT: &str = "/run/ojrunner/root";

/// The options of a run's `/proc` (see `enter_root`).
pub const PROC_OPTIONS: &str = "subset=pid,hidepid=invisible";

/// Directories below `/usr` a run sees empty: where a host keeps local
/// configuration (an installed runner's env file and its tokens).
pub const MASKED: &[&str] = &["usr/local/etc"];

/// The entries of the host's `/etc` a run sees (a trailing `*` is a prefix).
pub const ETC: &[&str] =
    &["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "java-*", "python3*", "ssl"];

/// The top-level names of the template; whatever else a run's binds create
/// at the top is removed after the run ([`forget`]).
const TEMPLATE_NAMES: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "tmp", "proc"];

/// Builds the part of the root that is the same for every run (all of the
/// table above but `/tmp`, `/proc` and the binds), once, at
/// [`ROOT`] in the calling helper's own mount namespace (made private here).
/// Each run's init gets a copy of that namespace and adds only its own
/// mounts: about 40 mount calls less per run.
pub fn build_template() -> io::Result<()> {
    let root = Path::new(ROOT);
    std::fs::create_dir_all(root)?;
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    // Not `nodev`: `/dev`'s few nodes are made in it (the root a run sees is
    // read-only, and its writable mounts are `nodev`).
    mount(Some("tmpfs"), root, Some("tmpfs"), libc::MS_NOSUID, Some("size=1m,nr_inodes=4096,mode=755"))?;
    for d in ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = Path::new("/").join(d);
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                std::os::unix::fs::symlink(std::fs::read_link(&host)?, root.join(d))?
            }
            Ok(m) if m.is_dir() => bind(&host, &root.join(d), false)?,
            _ => {}
        }
    }
    for m in MASKED {
        let at = root.join(m);
        if at.is_dir() {
            mount(Some("tmpfs"), &at, Some("tmpfs"), MASK_FLAGS, Some("size=4k,nr_inodes=1,mode=755"))?;
        }
    }
    std::fs::create_dir(root.join("etc"))?;
    for entry in std::fs::read_dir("/etc")?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let wanted = ETC.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *p,
        });
        if wanted {
            bind(&entry.path(), &root.join("etc").join(&*name), false)?;
        }
    }
    std::fs::write(root.join("etc/hosts"), "127.0.0.1 localhost\n")?;
    let dev = root.join("dev");
    std::fs::create_dir(&dev)?;
    for (n, minor) in [("null", 3), ("zero", 5), ("full", 7), ("random", 8), ("urandom", 9)] {
        mknod(&dev.join(n), SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), makedev(1, minor))?;
        // Whatever the helper's umask.
        std::fs::set_permissions(dev.join(n), std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("shm", "/tmp"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(link))?;
    }
    for d in [root.join("tmp"), root.join("proc")] {
        std::fs::create_dir(d)?;
    }
    Ok(())
}

/// An empty, read-only tmpfs over each of [`MASKED`].
const MASK_FLAGS: libc::c_ulong = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// Writes the template's `passwd` and `group` for the slot identity (the
/// executor calls it when the identity changes).
pub fn set_identity(uid: u32, gid: u32) -> io::Result<()> {
    let root = Path::new(ROOT);
    std::fs::write(
        root.join("etc/passwd"),
        format!("root:x:0:0::/:/bin/false\njudge:x:{uid}:{gid}::/tmp:/bin/false\n"),
    )?;
    std::fs::write(root.join("etc/group"), format!("root:x:0:\njudge:x:{gid}:\n"))
}

/// Removes from the template the mount points a run's binds created there
/// (below `/tmp` they were in the run's own tmpfs, gone with it).
pub fn forget(binds: &[Bind]) {
    for b in binds {
        let rel = b.inside().strip_prefix("/").unwrap_or(b.inside());
        match rel.components().next() {
            Some(top) if !TEMPLATE_NAMES.iter().any(|n| top.as_os_str() == *n) => {}
            _ => continue,
        }
        let mut p = Path::new(ROOT).join(rel);
        while p != Path::new(ROOT) {
            if std::fs::remove_dir(&p).or_else(|_| std::fs::remove_file(&p)).is_err() {
                break;
            }
            match p.parent() {
                Some(parent) => p = parent.to_path_buf(),
                None => break,
            }
        }
    }
}

/// Where a helper's runs get their root from, decided once per helper.
pub enum JailRoot {
    /// A mount namespace whose root is the template ([`JailNs`]): a run's
    /// init is cloned from it, so it copies the template's dozen mounts and
    /// no host mount, and needs no `pivot_root` and no unmount of the host's
    /// tree (each of which, with the namespace's teardown, waits for an
    /// expedited RCU grace period that signals every CPU). Its binds are
    /// trees the helper detached ([`detach_binds`]).
    Namespace(JailNs),
    /// Before Linux 5.12 (no `mount_setattr`), or in a user namespace
    /// (where `/proc` may be mounted only beside a full one): init copies
    /// the helper's whole namespace, mounts its binds from the host's
    /// paths, `pivot_root`s into the template and unmounts the rest.
    Pivot,
}

impl JailRoot {
    /// Readies the runs' root once the template is built at [`ROOT`]: the
    /// namespace where the kernel has the calls and this is the host's user
    /// namespace, else [`JailRoot::Pivot`].
    pub fn make() -> io::Result<JailRoot> {
        let Some(trial) = initial_userns().then(|| mount_api_works(Path::new(ROOT))).flatten() else {
            return Ok(JailRoot::Pivot);
        };
        let ns = JailNs::make()?;
        Ok(if ns.binds_work(&trial)? { JailRoot::Namespace(ns) } else { JailRoot::Pivot })
    }
}

/// Whether this is the host's user namespace (every uid mapped as itself).
fn initial_userns() -> bool {
    std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

/// Whether the calls each run makes with its binds work here: tried, not
/// guessed from the kernel's version, since a container's filter may answer
/// `EPERM` for calls the kernel has (every run would end in an error). The
/// tree of `probe` it detached, if they do, for [`JailNs::binds_work`].
fn mount_api_works(probe: &Path) -> Option<BindTree> {
    let tree = detach_binds(&[Bind { path: probe.to_path_buf(), writable: false, at: None }]).ok()?.pop()?;
    // With no tree to move, nor a place: EBADF where the call may be made.
    let empty = libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH;
    // SAFETY: NUL-terminated literals and no descriptor (-1): the kernel moves nothing.
    let r = unsafe { libc::syscall(libc::SYS_move_mount, -1, c"".as_ptr(), -1, c"".as_ptr(), empty) };
    (r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)).then_some(tree)
}

/// The jail's mount namespace (its root the template, nothing of the host
/// below it), and the way back to the helper's own. The helper is in it
/// only from [`JailNs::enter`] to [`JailNs::leave`], around init's `clone`.
pub struct JailNs {
    jail: OwnedFd,
    helper: OwnedFd,
    /// The helper's working directory (`setns` moves it to the root).
    cwd: OwnedFd,
}

impl JailNs {
    /// Makes the namespace: a copy of the helper's that `pivot_root`s into
    /// the template and lets go of every host mount, once per helper. The
    /// helper is single-threaded, as `setns` into a mount namespace needs.
    fn make() -> io::Result<JailNs> {
        let helper = open_path(c"/proc/self/ns/mnt", libc::O_RDONLY)?;
        let cwd = open_path(c".", libc::O_PATH | libc::O_DIRECTORY)?;
        unshare(CloneFlags::CLONE_NEWNS).map_err(|e| context("unshare the jail's mount namespace", e.into()))?;
        let jail = open_path(c"/proc/self/ns/mnt", libc::O_RDONLY);
        let built = jail.and_then(|jail| {
            pivot_into_template().map_err(|e| context("pivot into the template", e))?;
            Ok(jail)
        });
        match built {
            Ok(jail) => {
                let ns = JailNs { jail, helper, cwd };
                ns.leave()?;
                Ok(ns)
            }
            Err(e) => {
                // Back where the helper was; if even that fails, it serves no run.
                return_to(&helper, &cwd).map_err(|back| context(&e.to_string(), back))?;
                Err(e)
            }
        }
    }

    /// Whether a run's binds can be made: `trial`, a tree detached in the
    /// helper's namespace, attached in the jail's and let go, as each run
    /// does (a security module may refuse a call the kernel has, or a place).
    fn binds_work(&self, trial: &BindTree) -> io::Result<bool> {
        self.enter()?;
        let attached = attach(trial, Path::new("/tmp")).is_ok();
        let let_go = attached && umount2("/tmp", MntFlags::MNT_DETACH).is_ok();
        self.leave()?;
        Ok(let_go)
    }

    /// Moves the helper into the jail's namespace: the `clone` of init that
    /// follows copies it.
    pub fn enter(&self) -> io::Result<()> {
        setns(&self.jail).map_err(|e| context("enter the jail's mount namespace", e))
    }

    /// The descriptors it holds (each leads out of a run's root).
    pub fn descriptors(&self) -> [RawFd; 3] {
        [self.jail.as_raw_fd(), self.helper.as_raw_fd(), self.cwd.as_raw_fd()]
    }

    /// Moves the helper back to its own namespace and working directory.
    pub fn leave(&self) -> io::Result<()> {
        return_to(&self.helper, &self.cwd)
    }
}

fn return_to(helper: &OwnedFd, cwd: &OwnedFd) -> io::Result<()> {
    setns(helper).map_err(|e| context("return to the helper's mount namespace", e))?;
    fchdir(cwd).map_err(|e| context("return to the helper's directory", e.into()))
}

fn setns(ns: &OwnedFd) -> io::Result<()> {
    Ok(nix::sched::setns(ns, CloneFlags::CLONE_NEWNS)?)
}

pub(super) fn open_path(path: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let flags = OFlag::from_bits_retain(flags) | OFlag::O_CLOEXEC;
    nix::fcntl::open(path, flags, Mode::empty())
        .map_err(|e| context(&format!("open {}", path.to_string_lossy()), e.into()))
}

fn context(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A bind's tree, detached from the helper's namespace with its flags set
/// (`open_tree` + `mount_setattr`): init attaches it where the bind says
/// (`move_mount`), in a namespace where the host's path does not exist.
pub struct BindTree {
    tree: OwnedFd,
    /// Whether its root is a directory (else the mount point is a file).
    dir: bool,
}

/// Detaches a copy of each bind's tree (with what is mounted below it),
/// read-only unless writable, `nosuid` and `nodev` throughout: the
/// helper's half of [`JailRoot::Namespace`]'s binds.
pub fn detach_binds(binds: &[Bind]) -> io::Result<Vec<BindTree>> {
    binds
        .iter()
        .map(|b| {
            let err = |e| context(&format!("bind {}", b.path.display()), e);
            let dir = std::fs::metadata(&b.path).map_err(err)?.is_dir();
            let path = CString::new(b.path.as_os_str().as_bytes()).map_err(io::Error::other)?;
            let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as libc::c_uint;
            // SAFETY: `path` is NUL-terminated and lives across the call.
            let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
            if fd < 0 {
                return Err(err(io::Error::last_os_error()));
            }
            // SAFETY: `fd` was just returned by open_tree; nothing else owns it.
            let tree = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
            let mut set = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
            if !b.writable {
                set |= libc::MOUNT_ATTR_RDONLY;
            }
            let attr = libc::mount_attr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: 0 };
            // SAFETY: a NUL-terminated literal and `attr`, a live mount_attr passed with its size.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_mount_setattr,
                    tree.as_raw_fd(),
                    c"".as_ptr(),
                    libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
                    &attr as *const libc::mount_attr,
                    std::mem::size_of::<libc::mount_attr>(),
                )
            };
            if r != 0 {
                return Err(err(io::Error::last_os_error()));
            }
            Ok(BindTree { tree, dir })
        })
        .collect()
}

/// In init: the run's own `/tmp`, `/proc` and binds, then the root made
/// read-only. With `trees` (made by [`detach_binds`]), init was cloned
/// from the jail's namespace ([`JailRoot::Namespace`]) and its root is the
/// template already; without, it is in a copy of the helper's namespace,
/// the template at [`ROOT`], and it `pivot_root`s into it
/// ([`JailRoot::Pivot`]).
pub(super) fn enter_root(binds: &[Bind], trees: Option<&[BindTree]>, tmp_size: u64) -> io::Result<()> {
    let root = Path::new(if trees.is_some() { "/" } else { ROOT });
    mount_tmp(&root.join("tmp"), tmp_size)?;
    // Read-only: a run may not lower its `oom_score_adj` (see [`OOM_FIRST`]).
    // Only the run's processes (`subset=pid`: no `/proc/cmdline`, `meminfo`,
    // `sys`), and of them only its own uid's (`hidepid`: not init's); both
    // since Linux 5.8, a plain mount before.
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY;
    mount(Some("proc"), &root.join("proc"), Some("proc"), flags, Some(PROC_OPTIONS))
        .or_else(|_| mount(Some("proc"), &root.join("proc"), Some("proc"), flags, None))?;
    for (i, b) in binds.iter().enumerate() {
        let at = b.inside();
        let dst = root.join(at.strip_prefix("/").unwrap_or(at));
        match trees {
            Some(trees) => attach(&trees[i], &dst)?,
            None => bind_as(&b.path, &dst, !b.writable, false)?,
        }
    }
    let _ = nix::unistd::sethostname("sandbox");
    if trees.is_none() {
        pivot_into_template()?;
    }
    // Per mount: the helper's template stays writable for the next run.
    mount(None, Path::new("/"), None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID, None)
}

/// A run's `/tmp`: a tmpfs of `size` bytes (1 MiB at least), 16,384 inodes.
fn mount_tmp(at: &Path, size: u64) -> io::Result<()> {
    let tmpfs = format!("size={},nr_inodes=16384,mode=1777", size.max(1 << 20));
    mount(Some("tmpfs"), at, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(&tmpfs))
}

/// In the kept jail's mount namespace (`kept.rs`): a new `/tmp` in place
/// of the one a run left something in.
pub(super) fn fresh_tmp(size: u64) -> io::Result<()> {
    umount2("/tmp", MntFlags::MNT_DETACH).map_err(|e| context("unmount /tmp", e.into()))?;
    mount_tmp(Path::new("/tmp"), size)
}

/// In the kept jail's mount namespace: its `/tmp` (empty) given a new size.
pub(super) fn resize_tmp(size: u64) -> io::Result<()> {
    let opts = format!("size={}", size.max(1 << 20));
    mount(None, Path::new("/tmp"), None, libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV, Some(&opts))
}

/// The mount point of `b` in the template, made in the helper's namespace
/// (the kept jail's root is read-only, the template it shows is not).
pub(super) fn make_template_mount_point(b: &Bind) -> io::Result<()> {
    let rel = b.inside().strip_prefix("/").unwrap_or(b.inside());
    make_mount_point(&Path::new(ROOT).join(rel), std::fs::metadata(&b.path)?.is_dir())
}

/// Lets go of the bind at `at` (a kept jail's, `kept.rs`), with what is
/// mounted below it.
pub(super) fn detach_at(at: &Path) -> io::Result<()> {
    umount2(at, MntFlags::MNT_DETACH).map_err(|e| context(&format!("unmount {}", at.display()), e.into()))
}

/// Attaches a detached bind tree at `dst`, whose mount point exists.
pub(super) fn attach_at(t: &BindTree, dst: &Path) -> io::Result<()> {
    let dst_c = CString::new(dst.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: NUL-terminated paths that live across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            t.tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            dst_c.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r != 0 {
        return Err(context(&format!("mount {}", dst.display()), io::Error::last_os_error()));
    }
    Ok(())
}

/// Makes the template at [`ROOT`] this mount namespace's root and lets go
/// of the old root, with every host mount below it.
fn pivot_into_template() -> io::Result<()> {
    chdir(ROOT)?;
    pivot_root(".", ".")?;
    umount2(".", MntFlags::MNT_DETACH)?;
    Ok(chdir("/")?)
}

/// Attaches a detached bind tree at `dst` (created, as a directory or an
/// empty file).
pub(super) fn attach(t: &BindTree, dst: &Path) -> io::Result<()> {
    make_mount_point(dst, t.dir)?;
    attach_at(t, dst)
}

fn make_mount_point(dst: &Path, dir: bool) -> io::Result<()> {
    if dir {
        std::fs::create_dir_all(dst)
    } else {
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p)?;
        }
        File::create(dst).map(drop)
    }
}

/// Bind-mounts `src` on `dst` (created, as a directory or an empty file),
/// then makes it read-only (unless `writable`), `nosuid` and `nodev` (unless
/// `device`: the device nodes of `/dev`).
fn bind(src: &Path, dst: &Path, device: bool) -> io::Result<()> {
    bind_as(src, dst, !device, device)
}

fn bind_as(src: &Path, dst: &Path, read_only: bool, device: bool) -> io::Result<()> {
    make_mount_point(dst, std::fs::metadata(src)?.is_dir())?;
    mount(Some(&src.to_string_lossy()), dst, None, libc::MS_BIND | libc::MS_REC, None)?;
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID;
    if read_only {
        flags |= libc::MS_RDONLY;
    }
    if !device {
        flags |= libc::MS_NODEV;
    }
    mount(None, dst, None, flags, None)
}

fn mount(
    src: Option<&str>,
    dst: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    nix::mount::mount(src, dst, fstype, MsFlags::from_bits_retain(flags), data).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("mount {}: {e}", dst.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter that answers `EPERM` to `call`, as a container's may,
    /// installed on this thread only (no `TSYNC`).
    fn refuse_on_this_thread(call: libc::c_long) {
        let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let prog = [
            ins((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0, 0, 0), // the call's number
            ins((libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, 0, 1, call as u32),
            ins(libc::BPF_RET as u16, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
            ins(libc::BPF_RET as u16, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes no pointer.
        assert_eq!(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }, 0);
        super::super::seccomp::install(&prog).expect("install the filter");
    }

    /// The probe says yes where the calls work, and no where a filter
    /// refuses one of them: the helper then takes the pivot, not a JE a run.
    #[test]
    fn the_mount_api_is_tried_not_guessed() {
        // SAFETY: no descriptor (-1) and no attributes: the kernel changes nothing, it only says whether it has the call.
        let has_calls = unsafe { libc::syscall(libc::SYS_mount_setattr, -1, c"".as_ptr(), 0, 0, 0) } != 0
            && io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS);
        if !nix::unistd::geteuid().is_root() || !initial_userns() || !has_calls {
            return ojrunner_daemon::skip_test(
                "the mount API needs root in the host's user namespace, Linux 5.12 or later",
            );
        }
        let dir = std::env::temp_dir();
        assert!(mount_api_works(&dir).is_some(), "the calls work on this machine (Linux 5.12 or later, root)");
        for call in [libc::SYS_open_tree, libc::SYS_mount_setattr, libc::SYS_move_mount] {
            let dir = dir.clone();
            let works = std::thread::spawn(move || {
                refuse_on_this_thread(call);
                mount_api_works(&dir).is_some()
            })
            .join()
            .unwrap();
            assert!(!works, "call {call} refused, yet the probe said the calls work");
        }
    }
}
