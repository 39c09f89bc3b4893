//! The run's root file system, built from mount rules: a template once per
//! helper ([`build_template`]), the rest per run (`enter_root`). The table
//! of what a run sees is in the sandbox's theory of operation
//! (`sandbox/mod.rs`).

use super::limits::Bind;
use std::ffi::CString;
use std::fs::File;
use std::io;
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
        let path = CString::new(dev.join(n).as_os_str().as_bytes()).map_err(io::Error::other)?;
        if unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, minor)) } != 0 {
            return Err(io::Error::last_os_error());
        }
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

/// In init (a copy of the helper's mount namespace, the template at
/// [`ROOT`]): the run's own `/tmp`, `/proc` and binds; then the
/// template becomes `/`, read-only.
pub(super) fn enter_root(binds: &[Bind], tmp_size: u64) -> io::Result<()> {
    let root = Path::new(ROOT);
    let tmpfs = format!("size={},nr_inodes=16384,mode=1777", tmp_size.max(1 << 20));
    mount(Some("tmpfs"), &root.join("tmp"), Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(&tmpfs))?;
    // Read-only: a run may not lower its `oom_score_adj` (see [`OOM_FIRST`]).
    // Only the run's processes (`subset=pid`: no `/proc/cmdline`, `meminfo`,
    // `sys`), and of them only its own uid's (`hidepid`: not init's); both
    // since Linux 5.8, a plain mount before.
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY;
    mount(Some("proc"), &root.join("proc"), Some("proc"), flags, Some(PROC_OPTIONS))
        .or_else(|_| mount(Some("proc"), &root.join("proc"), Some("proc"), flags, None))?;
    for b in binds {
        let at = b.inside();
        bind_as(&b.path, &root.join(at.strip_prefix("/").unwrap_or(at)), !b.writable, false)?;
    }
    let host = b"sandbox";
    unsafe { libc::sethostname(host.as_ptr().cast(), host.len()) };
    // Swap the roots, drop the old one, freeze the new one.
    let c = |p: &str| CString::new(p).unwrap();
    unsafe {
        if libc::chdir(c(ROOT).as_ptr()) != 0
            || libc::syscall(libc::SYS_pivot_root, c(".").as_ptr(), c(".").as_ptr()) != 0
            || libc::umount2(c(".").as_ptr(), libc::MNT_DETACH) != 0
            || libc::chdir(c("/").as_ptr()) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    // Per mount: the helper's template stays writable for the next run.
    mount(None, Path::new("/"), None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID, None)
}

/// Bind-mounts `src` on `dst` (created, as a directory or an empty file),
/// then makes it read-only (unless `writable`), `nosuid` and `nodev` (unless
/// `device`: the device nodes of `/dev`).
fn bind(src: &Path, dst: &Path, device: bool) -> io::Result<()> {
    bind_as(src, dst, !device, device)
}

fn bind_as(src: &Path, dst: &Path, read_only: bool, device: bool) -> io::Result<()> {
    if std::fs::metadata(src)?.is_dir() {
        std::fs::create_dir_all(dst)?;
    } else {
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p)?;
        }
        File::create(dst)?;
    }
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
    let cs = |s: &str| CString::new(s).unwrap();
    let (src, fstype, data) = (src.map(cs), fstype.map(cs), data.map(cs));
    let dst_c = CString::new(dst.as_os_str().as_bytes()).unwrap();
    let ptr = |o: &Option<CString>| o.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    let r = unsafe { libc::mount(ptr(&src), dst_c.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("mount {}: {e}", dst.display())));
    }
    Ok(())
}
