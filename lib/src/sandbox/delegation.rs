//! Where the runner's cgroups live on cgroup v2, and the one move that makes
//! that place its own.
//!
//! v2 lets a process make groups only below a cgroup it may write, and
//! enable controllers for its children only in a group with no process of
//! its own ("no internal processes"). A service manager owns every cgroup
//! but the ones it delegates: under systemd, the unit's own cgroup with
//! `Delegate=yes` (marked by the `trusted.delegate` extended attribute).
//! So the runner keeps everything it makes in the cgroup it was started in:
//!
//! | started in | layout | groups |
//! |---|---|---|
//! | the hierarchy's real root (no systemd, a container sharing the host's cgroups) | [`Layout::Root`] | `/ojrunner/helper-<pid>`, the root's controllers enabled |
//! | a cgroup of its own (a unit with `Delegate=yes`, a container's cgroup namespace) | [`Layout::Delegated`] | its processes moved into `<cgroup>/ojrunner-stages`, each helper's runs in `<cgroup>/helper-<pid>` beside it, `memory pids cpu` enabled in `<cgroup>` |
//! | a unit's cgroup without `Delegate=` | refused ([`Refused::NotDelegated`]) | none: the runner exits 100 at start |
//!
//! A stage started alone (the split layout: judge-exec as a unit of its own)
//! does the same in its own cgroup; under runnerd, runnerd makes the move
//! before it starts its stages, and a stage that finds itself in
//! `ojrunner-stages` takes the cgroup above as its own. v1 is unchanged:
//! per controller, below the judge's own cgroup (`cgroup.rs`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The leaf the runner's own processes (runnerd, its stages, the helpers)
/// move into, in a delegated cgroup.
pub const STAGES_LEAF: &str = "ojrunner-stages";

/// The controllers every run's group needs.
pub const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// Where the runner's v2 groups live.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "layout")]
pub enum Layout {
    /// Started in the hierarchy's real root: `/ojrunner`, made and
    /// controlled from the root.
    Root,
    /// Started in a cgroup of its own (its path in the hierarchy, as
    /// `/proc/self/cgroup` names it): everything below it.
    Delegated { cgroup: String },
}

impl Layout {
    /// The layout for a process whose cgroup is `own` (the `0::` line of
    /// `/proc/self/cgroup`), where the mount's root is the hierarchy's
    /// real root or not (a cgroup namespace's).
    pub fn of(own: &str, real_root: bool) -> Layout {
        let own = own.trim().trim_end_matches('/');
        if own.is_empty() && real_root {
            return Layout::Root;
        }
        // Moved there by runnerd (or an earlier stage): the cgroup above.
        let base = match own.rsplit_once('/') {
            Some((parent, leaf)) if leaf == STAGES_LEAF => parent,
            _ => own,
        };
        Layout::Delegated { cgroup: if base.is_empty() { "/".into() } else { base.into() } }
    }

    /// Why this layout, in words (`judge-exec --probe`).
    pub fn why(&self) -> &'static str {
        match self {
            Layout::Root => "started in the hierarchy's root: its groups in /ojrunner",
            Layout::Delegated { .. } => {
                "started in a cgroup of its own: its processes in ojrunner-stages, its runs' groups beside it"
            }
        }
    }
}

/// Why the runner cannot keep its groups where it was started; each names
/// the setting that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "cgroup v2: {cgroup} is a systemd unit's and was not delegated to the runner: set Delegate=yes in the \
         unit (etc/systemd/runnerd.service has it)"
    )]
    NotDelegated { cgroup: String },
    #[error(
        "cgroup v2: {cgroup} offers the controllers [{offered}]; the runner needs memory, pids and cpu: delegate \
         them (Delegate=yes in a systemd unit; a container: enable them in its cgroup's parent)"
    )]
    Controllers { cgroup: String, offered: String },
    #[error(
        "cgroup v2: {what} {path}: {why} (the runner needs the cgroup it was started in to be its own: \
         Delegate=yes in a systemd unit; in a container, a cgroup namespace with /sys/fs/cgroup writable)"
    )]
    Io { what: &'static str, path: PathBuf, why: String },
}

fn io_refused<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Refused + 'a {
    move |e| Refused::Io { what, path: path.to_path_buf(), why: e.to_string() }
}

/// Whether a cgroup path is one systemd manages (a slice, service or
/// scope on the way), so that only a delegation makes it the runner's.
fn systemds(cgroup: &str) -> bool {
    cgroup.split('/').any(|c| c.ends_with(".slice") || c.ends_with(".service") || c.ends_with(".scope"))
}

/// Whether systemd marked `dir` as delegated (`trusted.delegate`, since
/// systemd 246; `user.delegate` for a user's manager).
fn marked_delegated(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    [c"trusted.delegate", c"user.delegate"].iter().any(|name| {
        let mut value = [0u8; 8];
        // SAFETY: path and name are NUL-terminated and live across the call; at most value.len() bytes are written to
        // `value`.
        let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
        n > 0 && value[0] == b'1'
    })
}

/// Makes `layout` the runner's, under the cgroup2 mount `mount`: for
/// [`Layout::Delegated`], moves every process of the cgroup into
/// [`STAGES_LEAF`] and enables [`CONTROLLERS`] in it (idempotent: the
/// stages and helpers that come later find it done). The directory the
/// runs' groups are made in.
pub fn prepare(mount: &Path, layout: &Layout) -> Result<PathBuf, Refused> {
    let enable = CONTROLLERS.map(|c| format!("+{c}")).join(" ");
    match layout {
        Layout::Root => {
            let base = mount.join("ojrunner");
            let control = mount.join("cgroup.subtree_control");
            fs::write(&control, &enable).map_err(io_refused("enabling the controllers in", &control))?;
            match fs::create_dir(&base) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(io_refused("making", &base)(e)),
                _ => {}
            }
            let control = base.join("cgroup.subtree_control");
            fs::write(&control, &enable).map_err(io_refused("enabling the controllers in", &control))?;
            Ok(base)
        }
        Layout::Delegated { cgroup } => {
            let dir = mount.join(cgroup.trim_start_matches('/'));
            if systemds(cgroup) && !marked_delegated(&dir) {
                return Err(Refused::NotDelegated { cgroup: cgroup.clone() });
            }
            let controllers = dir.join("cgroup.controllers");
            let offered = fs::read_to_string(&controllers).map_err(io_refused("reading", &controllers))?;
            if !CONTROLLERS.iter().all(|c| offered.split_whitespace().any(|o| o == *c)) {
                return Err(Refused::Controllers { cgroup: cgroup.clone(), offered: offered.trim().to_string() });
            }
            let leaf = dir.join(STAGES_LEAF);
            match fs::create_dir(&leaf) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(io_refused("making", &leaf)(e)),
                _ => {}
            }
            let control = dir.join("cgroup.subtree_control");
            // A process forked meanwhile is born in the cgroup: move again.
            let mut last = None;
            for _ in 0..100 {
                move_all(&dir, &leaf)?;
                match fs::write(&control, &enable) {
                    Ok(()) => return Ok(dir),
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => last = Some(e),
                    Err(e) => return Err(io_refused("enabling the controllers in", &control)(e)),
                }
            }
            Err(io_refused("enabling the controllers in", &control)(last.unwrap_or_else(|| io::Error::other("busy"))))
        }
    }
}

/// Moves every process of `from` into `to`.
fn move_all(from: &Path, to: &Path) -> Result<(), Refused> {
    let procs = from.join("cgroup.procs");
    let target = to.join("cgroup.procs");
    let list = fs::read_to_string(&procs).map_err(io_refused("reading", &procs))?;
    for pid in list.split_whitespace() {
        match fs::write(&target, pid) {
            // Gone meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(io_refused("moving a process into", &target)(e)),
            Ok(()) => {}
        }
    }
    Ok(())
}

/// The process's own v2 cgroup (the `0::` line of `/proc/self/cgroup`).
pub fn own_cgroup(proc_self_cgroup: &str) -> Option<&str> {
    proc_self_cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Whether a cgroup2 mount's root is the hierarchy's real root (only a
/// non-root cgroup, such as a cgroup namespace's root, has `cgroup.type`).
pub fn is_real_root(mount: &Path) -> bool {
    !mount.join("cgroup.type").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delegated(c: &str) -> Layout {
        Layout::Delegated { cgroup: c.into() }
    }

    #[test]
    fn the_layout_follows_where_the_runner_was_started() {
        assert_eq!(Layout::of("/", true), Layout::Root);
        assert_eq!(Layout::of("/\n", true), Layout::Root);
        // A cgroup namespace's root is a cgroup of the runner's own.
        assert_eq!(Layout::of("/", false), delegated("/"));
        let unit = "/system.slice/runnerd.service";
        assert_eq!(Layout::of(unit, true), delegated(unit));
        // A stage or helper started by runnerd, already in the leaf.
        assert_eq!(Layout::of(&format!("{unit}/{STAGES_LEAF}"), true), delegated(unit));
        assert_eq!(Layout::of(&format!("/{STAGES_LEAF}"), false), delegated("/"));
        // A leaf of another name is a cgroup of its own.
        assert_eq!(Layout::of(&format!("{unit}/other"), true), delegated(&format!("{unit}/other")));
    }

    #[test]
    fn only_systemds_cgroups_need_its_mark() {
        assert!(systemds("/system.slice/runnerd.service"));
        assert!(systemds("/user.slice/user-1000.slice/session-2.scope"));
        assert!(!systemds("/"));
        assert!(!systemds("/docker/abc"));
    }

    #[test]
    fn the_own_cgroup_is_the_unified_line() {
        let text = "12:pids:/x\n0::/system.slice/runnerd.service\n";
        assert_eq!(own_cgroup(text), Some("/system.slice/runnerd.service"));
        assert_eq!(own_cgroup("4:memory:/\n"), None);
    }

    /// The whole preparation, on a directory shaped as a delegated cgroup
    /// (plain files: the kernel's rules are the guest's tests', `make
    /// test-cgroup2`).
    #[test]
    fn a_refusal_names_the_setting_that_fixes_it() {
        let dir = std::env::temp_dir().join(format!("ojrunner-delegation-{}", std::process::id()));
        let unit = dir.join("system.slice/runnerd.service");
        fs::create_dir_all(&unit).unwrap();
        let layout = delegated("/system.slice/runnerd.service");
        let e = prepare(&dir, &layout).unwrap_err();
        assert!(matches!(e, Refused::NotDelegated { .. }), "{e}");
        assert!(e.to_string().contains("Delegate=yes"), "{e}");
        // Not systemd's: the controllers decide.
        let own = dir.join("mine");
        fs::create_dir_all(&own).unwrap();
        fs::write(own.join("cgroup.controllers"), "cpu io\n").unwrap();
        let e = prepare(&dir, &delegated("/mine")).unwrap_err();
        assert!(matches!(e, Refused::Controllers { .. }) && e.to_string().contains("memory, pids and cpu"), "{e}");
        // One it cannot read or write: the setting named too.
        let e = prepare(&dir, &delegated("/gone")).unwrap_err();
        assert!(matches!(e, Refused::Io { .. }) && e.to_string().contains("Delegate=yes"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
