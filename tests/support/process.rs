//! The test's child processes (hubs, runners, stages, supervisors): each
//! killed and reaped when its handle drops, its stderr kept in a log of its
//! own under `target/test-logs/daemons/` whose tail a failing test prints;
//! and what `/proc` says of processes a test did not start itself.

use super::layout::repo;
use super::wait::wait_for;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Whether the daemons' logs are silenced (`OJ_TEST_QUIET` set, not "0").
pub fn quiet() -> bool {
    std::env::var("OJ_TEST_QUIET").is_ok_and(|v| v != "0")
}

/// A child process killed (and reaped) on drop; if the test is failing
/// then, the last lines of its log are printed.
pub struct Proc {
    pub child: Child,
    pub name: String,
    /// Where its stderr goes, when that is a file.
    pub log: Option<PathBuf>,
}

/// How many lines of a daemon's log a failing test prints.
const LOG_TAIL: usize = 40;

impl Proc {
    /// Spawns `cmd` as one of the test's daemons: its stderr goes to a log
    /// of its own in `target/test-logs/daemons/` (kept), or to the terminal
    /// with `OJ_TEST_QUIET=0`.
    pub fn spawn(cmd: &mut Command, name: &str) -> Proc {
        let log = quiet().then(|| daemon_log(name));
        match &log {
            Some(path) => cmd.stderr(std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))),
            None => cmd.stderr(Stdio::inherit()),
        };
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc { child, name: name.into(), log }
    }

    /// A child whose stderr the caller placed (`log`: a file it writes).
    pub fn of(child: Child, name: impl Into<String>, log: Option<&Path>) -> Proc {
        Proc { child, name: name.into(), log: log.map(Path::to_path_buf) }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends a signal.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig);
    }

    /// Waits for the process to exit, at most `limit`; its exit code, or
    /// 128+signal.
    pub fn wait_exit(&mut self, limit: Duration) -> i32 {
        let name = self.name.clone();
        let st = wait_for(&format!("{name} to exit"), limit, || self.child.try_wait().unwrap());
        use std::os::unix::process::ExitStatusExt;
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// A fresh log file for a daemon named `name` (see [`Proc::spawn`]).
pub fn daemon_log(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    // The checkout may be read-only (the cgroup v2 guest mounts it so).
    let dir = [repo().join("target/test-logs/daemons"), std::env::temp_dir().join("ojrunner-test-logs")]
        .into_iter()
        .find(|d| std::fs::create_dir_all(d).is_ok() && tempfile_probe(d))
        .expect("a writable directory for the daemons' logs");
    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{name}-{}-{}.log", std::process::id(), N.fetch_add(1, Ordering::Relaxed)))
}

/// Whether a file can be made in `dir`.
fn tempfile_probe(dir: &Path) -> bool {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let made = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    made
}

impl Drop for Proc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(text) = self.log.as_ref().and_then(|l| std::fs::read(l).ok()) {
                let text = String::from_utf8_lossy(&text);
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
                eprintln!(
                    "---- the last {} lines of {}'s log ({}) ----",
                    tail.len(),
                    self.name,
                    self.log.as_ref().unwrap().display()
                );
                for l in tail {
                    eprintln!("{l}");
                }
            }
        }
        if self.running() {
            // Kill the whole process group a runnerd leads, then it.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The pid of `parent`'s child whose command name is `name`.
pub fn child_pid(parent: i32, name: &str) -> Option<i32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // comm is in parentheses and may hold spaces; ppid is the 2nd field after it.
        let Some(close) = stat.rfind(')') else { continue };
        let comm = &stat[stat.find('(').unwrap_or(0) + 1..close];
        let ppid = stat[close + 2..].split(' ').nth(1).and_then(|p| p.parse::<i32>().ok());
        if comm == name && ppid == Some(parent) {
            return Some(pid);
        }
    }
    None
}

/// Pids of live or zombie processes of `uid`.
pub fn processes_of(uid: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).ok().is_some_and(|s| {
                s.lines()
                    .any(|l| l.strip_prefix("Uid:").and_then(|v| v.split_whitespace().next()) == Some(&uid.to_string()))
            })
        })
        .collect()
}
