//! A run as the judge describes it and as the sandbox reports it: what to
//! run ([`Spec`]), as whom, seeing which directories ([`Bind`]), under which
//! [`Limits`]; how it ended ([`Usage`]). The limits' one rule (`look`) and
//! the rlimits derived from them (`rlimits`) are here too, so that both
//! levels (the jail's init and the basic watchdog) apply the same.

use super::timeline::Timeline;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An rlimit's "no limit" (`RLIM_INFINITY`).
pub const UNLIMITED: u64 = libc::RLIM_INFINITY;

/// How often the watchdog samples the program.
pub const POLL: Duration = Duration::from_millis(10);

/// An unprivileged identity to run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Every limit of one run, by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU time (user + system) of the whole run; the watchdog kills past
    /// it. `RLIMIT_CPU` is set to ⌈this⌉ + 1 s as a backstop.
    pub cpu: Duration,
    /// Wall-clock time from spawn; the watchdog kills past it.
    pub wall: Duration,
    /// Memory of the whole run, bytes: the cgroup's hard limit is this +
    /// `cgroup::SLACK`; the watchdog kills past it (with a cgroup, what the
    /// group holds but file pages; without, the tree's resident memory).
    /// Also the size cap of the run's `/tmp`.
    pub memory: u64,
    /// `RLIMIT_AS` per process, bytes; `None`: unlimited. Only a backstop for
    /// memory the watchdog cannot see (allocated between two samples, or by
    /// an escapee outside the tree): the memory verdict comes from resident
    /// memory, so that reserving without touching (a big `vector` reserved
    /// but unused, Python's arenas, glibc's per-thread arenas, the JVM's
    /// heap) is not punished, and a program that touches too much is MLE
    /// rather than RE from a failed `malloc`. the judge (`judge/`) sets the memory
    /// limit + 1 GiB; the JVM gets none.
    pub address_space: Option<u64>,
    /// `RLIMIT_STACK`, bytes ([`UNLIMITED`]: none); `None`: inherited.
    /// The judge asks for none: glibc gives each new thread a default
    /// stack of this size (2 MiB when unlimited), so a limit as large as
    /// the memory limit would let only a thread or two fit under
    /// `RLIMIT_AS`, while the main thread's stack needs no limit of its
    /// own: its pages are memory, and the memory limit stops it.
    pub stack: Option<u64>,
    /// `RLIMIT_FSIZE`, bytes: how large any file the program writes (its
    /// stdout and stderr included) may grow.
    pub output: u64,
    /// Tasks (processes + threads): `RLIMIT_NPROC` of the slot uid and the
    /// cgroup's `pids.max`. Ignored without an identity (the count would
    /// include the caller's own processes).
    pub processes: Option<u64>,
}

/// A directory of the host the run sees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The host's directory.
    pub path: PathBuf,
    pub writable: bool,
    /// Where a jailed run sees it (`None`: at the same path). A neutral
    /// name keeps the host's layout (the spool, a claim's id) from the run.
    #[serde(default)]
    pub at: Option<PathBuf>,
}

impl Bind {
    /// The host's `path`, seen by a jailed run at `at`.
    pub fn at(path: &Path, at: &str, writable: bool) -> Bind {
        Bind { path: path.to_path_buf(), writable, at: Some(at.into()) }
    }

    /// Where a jailed run sees the directory.
    pub fn inside(&self) -> &Path {
        self.at.as_deref().unwrap_or(&self.path)
    }
}

/// `s` as a jailed run sees it: a host path at or below a bind's, moved to
/// where the run sees that bind; anything else as it is.
pub(super) fn seen_inside(binds: &[Bind], s: &str) -> String {
    let p = Path::new(s);
    for b in binds {
        if let Ok(rest) = p.strip_prefix(&b.path) {
            let inside = if rest.as_os_str().is_empty() { b.inside().to_path_buf() } else { b.inside().join(rest) };
            let mut inside = inside.to_string_lossy().into_owned();
            // A directory named with its slash keeps it (an ICPC validator
            // appends file names to its feedback directory as given).
            if s.ends_with('/') && !inside.ends_with('/') {
                inside.push('/');
            }
            return inside;
        }
    }
    s.to_string()
}

/// What to run.
#[derive(Debug)]
pub struct Spec {
    /// argv; a leading `./` in `argv[0]` is resolved against `cwd`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// Already open, so the program needs no permission on the files. The
    /// program gets a regular file's sealed copy (stdin) or a pipe into it
    /// (stdout, stderr), capped at [`Limits::output`]; pipes and devices as
    /// they are (`streams.rs`).
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
    /// Who to run as; `None`: as the caller (when not root).
    pub identity: Option<Identity>,
    pub limits: Limits,
    /// The host directories the jailed run sees (`cwd` must be among them
    /// or below one); ignored by the basic level, which sees the host.
    /// An argument, `cwd` or environment value that is a host path at or
    /// below a bind (the whole value) is given to a jailed run as it sees
    /// it ([`Bind::at`]).
    pub binds: Vec<Bind>,
}

impl Spec {
    /// A trial run of `argv` (an absolute path) in `/`, stdio on
    /// `/dev/null`, no environment, no binds, modest limits: 1 s of CPU, 5 s
    /// of wall time, 64 MiB, 16 tasks.
    pub fn trial(argv: &[&str], identity: Option<Identity>) -> io::Result<Spec> {
        let null = || File::options().read(true).write(true).open("/dev/null");
        Ok(Spec {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            cwd: "/".into(),
            env: vec![],
            stdin: null()?,
            stdout: null()?,
            stderr: null()?,
            identity,
            limits: Limits {
                cpu: Duration::from_secs(1),
                wall: Duration::from_secs(5),
                memory: 64 << 20,
                address_space: None,
                stack: None,
                output: 1 << 20,
                processes: Some(16),
            },
            binds: vec![],
        })
    }
}

/// Where the slot locks live by default: root's own directory, so no judged
/// program can hold or replace a lock file.
pub const SLOT_LOCK_DIR: &str = "/run/ojrunner";

/// What the judge asks the helper to run (the three stdio files travel
/// alongside, as file descriptors).
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub identity: Option<Identity>,
    pub limits: Limits,
    pub binds: Vec<Bind>,
    /// A network namespace of the run's own, not the helper's.
    #[serde(default)]
    pub fresh_netns: bool,
    /// Where the slot locks are (the judge's setting: a helper starts with
    /// no environment).
    #[serde(default = "default_slot_lock_dir")]
    pub slot_lock_dir: PathBuf,
    /// Whether the run's steps are stamped ([`Usage::steps`]).
    #[serde(default)]
    pub timed: bool,
    /// The core the program is pinned to (`cores.rs`), if any.
    #[serde(default)]
    pub core: Option<u32>,
    /// The idleness rule's window, if it applies ([`Watch::idle`](super::Watch::idle)).
    #[serde(default)]
    pub idle: Option<Duration>,
    /// The run's side of a dialogue, its board the fourth descriptor
    /// (`board.rs`).
    #[serde(default)]
    pub board: Option<super::board::Side>,
}

fn default_slot_lock_dir() -> PathBuf {
    SLOT_LOCK_DIR.into()
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// A wait status, as `waitpid` gives it.
    pub fn from_status(status: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }

    /// The shell's convention: the exit code, or 128 + the signal.
    pub fn code(self) -> i64 {
        match self {
            Exit::Code(c) => c as i64,
            Exit::Signal(s) => 128 + s as i64,
        }
    }
}

/// Which limit stopped the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fired {
    /// The watchdog: CPU time.
    Cpu,
    /// The watchdog: wall-clock time.
    Wall,
    /// The watchdog (resident memory) or the cgroup's OOM killer.
    Memory,
    /// The watchdog: the idleness rule (`look`): past its CPU limit in
    /// wall time, the run's CPU time stood still for the idle window.
    Idle,
    /// The judge: the program's output could no longer match the answer
    /// (`streams.rs`); not a limit, and so no `limit` of the case.
    Stopped,
}

impl Fired {
    pub fn as_str(self) -> &'static str {
        match self {
            Fired::Cpu => "cpu",
            Fired::Wall => "wall",
            Fired::Memory => "memory",
            Fired::Idle => "idle",
            Fired::Stopped => "stopped",
        }
    }
}

/// What one run used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub exit: Exit,
    /// The limit that killed it, if one did.
    pub fired: Option<Fired>,
    /// CPU time, user + system, of the whole run.
    pub cpu: Duration,
    pub wall: Duration,
    /// Peak memory, bytes (see the module doc).
    pub memory: u64,
    /// A denied system call the program attempted (the run was then
    /// killed, and `exit` is `SIGSYS`).
    pub denied: Option<String>,
    /// When each step of the run ended, if the judge asked
    /// ([`set_timed`](super::helper::set_timed)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Box<Timeline>>,
}

/// The watchdog's answer.
pub enum Watched {
    /// All within limits: look again after this long at most.
    Wait(Duration),
    /// This limit fired: stop the run.
    Stop(Fired),
}

/// What a run used so far, as a watchdog sees it at one look.
#[derive(Clone, Copy, Debug)]
pub(super) struct Used {
    pub cpu: Duration,
    pub memory: u64,
    /// Wall time since the run's start.
    pub elapsed: Duration,
    /// How long its CPU time has stood still ([`Stillness`]).
    pub still: Duration,
}

/// The limits' rule, for both watchdogs (the jail's init and the basic level's, `executor::watch`):
/// the limit that fired for what the run used so far (CPU time, memory,
/// time since its start, and with an idle window `idle` the idleness
/// rule), else how long until the next look: the next sample, or just
/// past the wall limit.
///
/// The idleness rule: once the run has had its CPU limit's worth of wall
/// time, a run whose CPU time has stood still for the window
/// ([`Stillness`]) is ended (TLE, `idle`). Before that, a program may
/// sleep or wait as it likes: it could still finish within its CPU limit.
pub(super) fn look(limits: &Limits, idle: Option<Duration>, used: Used) -> Watched {
    let idle = idle.filter(|w| !w.is_zero());
    if used.cpu > limits.cpu {
        Watched::Stop(Fired::Cpu)
    } else if used.memory > limits.memory {
        Watched::Stop(Fired::Memory)
    } else if used.elapsed > limits.wall {
        Watched::Stop(Fired::Wall)
    } else if idle.is_some_and(|w| used.elapsed >= limits.cpu && used.still >= w) {
        Watched::Stop(Fired::Idle)
    } else {
        Watched::Wait(POLL.min(limits.wall.saturating_sub(used.elapsed) + Duration::from_millis(1)))
    }
}

/// CPU time that advances by less than this over a whole idle window
/// stands still: a sleeping program's runtime may wake for a few
/// microseconds now and then (a JVM's threads, a timer), while a program
/// at work uses its core's whole time.
pub(super) const STILL_CPU_PER_WINDOW: u32 = 50;

/// How long a run's CPU time has stood still: since the last look at which
/// it had advanced by more than the window / [`STILL_CPU_PER_WINDOW`]
/// (10 ms of a 0.5 s window) over the last mark.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stillness {
    window: Duration,
    /// The CPU time at the last mark, and when (since the run's start).
    mark: (Duration, Duration),
}

impl Stillness {
    pub fn new(window: Option<Duration>) -> Stillness {
        Stillness { window: window.unwrap_or_default(), mark: (Duration::ZERO, Duration::ZERO) }
    }

    /// The run shows a sign of life at `elapsed` though its CPU time stood
    /// still: its stillness starts again from here.
    pub fn stir(&mut self, cpu: Duration, elapsed: Duration) {
        self.mark = (cpu, elapsed);
    }

    /// One look: the CPU time now, at `elapsed`; how long it has stood still.
    pub fn look(&mut self, cpu: Duration, elapsed: Duration) -> Duration {
        if cpu.saturating_sub(self.mark.0) > self.window / STILL_CPU_PER_WINDOW {
            self.mark = (cpu, elapsed);
        }
        elapsed.saturating_sub(self.mark.1)
    }
}

/// `(resource, soft, hard)` triples for the child.
pub(super) fn rlimits(l: &Limits, with_identity: bool) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
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

pub(super) fn rlimit_name(resource: libc::__rlimit_resource_t) -> &'static str {
    match resource {
        libc::RLIMIT_CPU => "CPU",
        libc::RLIMIT_FSIZE => "FSIZE",
        libc::RLIMIT_CORE => "CORE",
        libc::RLIMIT_AS => "AS",
        libc::RLIMIT_STACK => "STACK",
        libc::RLIMIT_NPROC => "NPROC",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_path_below_a_bind_is_moved_inside_and_keeps_its_trailing_slash() {
        let binds = [Bind::at(Path::new("/var/x.judge"), "/judge", true)];
        assert_eq!(seen_inside(&binds, "/var/x.judge/input"), "/judge/input");
        assert_eq!(seen_inside(&binds, "/var/x.judge/feedback/"), "/judge/feedback/");
        assert_eq!(seen_inside(&binds, "/var/x.judge"), "/judge");
        assert_eq!(seen_inside(&binds, "nonnegative"), "nonnegative");
    }

    fn limits() -> Limits {
        Limits {
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(16),
            memory: 64 << 20,
            address_space: None,
            stack: None,
            output: 1 << 20,
            processes: None,
        }
    }

    fn fired(w: Watched) -> Option<Fired> {
        match w {
            Watched::Stop(f) => Some(f),
            Watched::Wait(_) => None,
        }
    }

    #[test]
    fn the_idleness_rule_ends_a_still_run_only_past_its_cpu_limit_in_wall_time() {
        let (l, w) = (limits(), Some(Duration::from_millis(500)));
        let s = |secs: f64| Duration::from_secs_f64(secs);
        let used =
            |cpu: f64, elapsed: f64, still: f64| Used { cpu: s(cpu), memory: 0, elapsed: s(elapsed), still: s(still) };
        // A sleeper: still from the start, ended as soon as it has had its CPU limit of wall time.
        assert_eq!(fired(look(&l, w, used(0.0, 4.99, 4.99))), None);
        assert_eq!(fired(look(&l, w, used(0.0, 5.0, 5.0))), Some(Fired::Idle));
        // Past it, a run that was busy until just now still has the window.
        assert_eq!(fired(look(&l, w, used(2.0, 7.0, 0.49))), None);
        assert_eq!(fired(look(&l, w, used(2.0, 7.0, 0.5))), Some(Fired::Idle));
        // No window, or a window of 0: no rule; the wall limit stays.
        for off in [None, Some(Duration::ZERO)] {
            assert_eq!(fired(look(&l, off, used(0.0, 15.0, 15.0))), None);
            assert_eq!(fired(look(&l, off, used(0.0, 16.1, 16.1))), Some(Fired::Wall));
        }
        // The other limits come first.
        assert_eq!(fired(look(&l, w, used(5.1, 6.0, 1.0))), Some(Fired::Cpu));
    }

    #[test]
    fn cpu_time_stands_still_unless_it_advances_by_a_fiftieth_of_the_window() {
        let ms = Duration::from_millis;
        let mut st = Stillness::new(Some(ms(500)));
        assert_eq!(st.look(ms(0), ms(100)), ms(100));
        // A few microseconds now and then (a runtime's timer) do not count.
        assert_eq!(st.look(ms(5), ms(300)), ms(300));
        assert_eq!(st.look(ms(10), ms(400)), ms(400));
        // A busy run moves the mark at every look.
        assert_eq!(st.look(ms(11), ms(410)), ms(0));
        assert_eq!(st.look(ms(25), ms(430)), ms(0));
        assert_eq!(st.look(ms(30), ms(700)), ms(270));
    }
}
