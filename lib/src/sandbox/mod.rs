//! The sandbox: one run of an untrusted program under named limits,
//! watched, measured, and leaving nothing behind. [`run`] is the whole
//! interface; this page is the whole theory (as isolate's manual is).
//!
//! # Theory of operation
//!
//! The judge never forks a program itself. [`run`] hands the run to a small
//! helper process (`helper.rs`: a fresh `exec` of the judge's own binary, one
//! per concurrent caller), so nothing of the judge's size reaches the
//! program's `ru_maxrss`. The helper, in its executor (`executor.rs`):
//!
//! 1. takes the slot's host-wide lock (`flock` on
//!    [`slot_lock_dir`]`/slot-<uid>.lock`): a slot serves one run at a time;
//! 2. makes the run's cgroup (`cgroup.rs`: memory limit, tasks limit, CPU
//!    accounting), when the machine has one;
//! 3. runs it in its jail (`jail.rs`: the PID, mount, IPC and UTS
//!    namespaces the helper keeps and cleans after each run (`kept.rs`),
//!    the helper's empty network namespace, a read-only root of
//!    bind mounts, a private `/tmp`, the slot uid and its core (`cores.rs`),
//!    no capabilities, `no_new_privs`, the seccomp deny list of
//!    `seccomp.rs`). The helper itself is the watchdog in the kept jail (a
//!    fresh jail's init, which shares the helper's memory while the helper
//!    waits, in a fresh one): every [`POLL`] (and at once when the program
//!    exits, through a pidfd) it checks the CPU time (the cgroup's, else the
//!    run's own `/proc`), the resident memory when there is no cgroup to
//!    enforce it, the wall clock and the judge's socket, and on a limit
//!    kills every process of the run (its cgroup's; init: its PID
//!    namespace's); a judged program's
//!    run ([`Watch`]) may also be ended by the idleness rule (`limits.rs`)
//!    or by the judge, whose drain found its output can no longer match
//!    (`streams.rs`: a stop on the socket, taken at the next look);
//! 4. measures ([`Usage`]) and answers as soon as the run is over: every
//!    process the program left is killed (and reaped) first, so nothing of
//!    the run outlives the answer (in the kept jail, by killing its keeper:
//!    a task still in the group 2 s later, stuck in the kernel, retires the
//!    helper after its reply); the kept jail's cleaning (a fresh one's
//!    teardown) and the slot's lock wait until after the reply.
//!
//! The mechanisms in use are decided once per helper ([`Mechanisms`];
//! `judge-exec --probe` prints them). Without root (no slot identity) or
//! without namespaces, the run is the basic level: the program is forked by
//! the helper in its own process group, under rlimits and the `/proc`
//! watchdog, and cleaned up by `killpg` and a sweep of the slot uid
//! (`run_direct`).
//!
//! ## The helper
//!
//! Why: a process forked from the judge starts with the judge's resident
//! pages in its page tables, and `exec` records that size in the program's
//! `ru_maxrss` (a 1 MiB program forked from a 200 MiB judge reads 200 MiB).
//! The helper is a fresh `exec` of the judge's own binary (`/proc/self/exe`
//! with the hidden argument [`HELPER_ARG`](helper::HELPER_ARG)), whose `main` hands itself
//! over first thing ([`enter_if_asked`]: `judge-exec`, `ojrunner-bench`);
//! a test harness, whose `main` is not its own, execs `judge-exec` of the
//! same build instead. Its resident size is the few pages it touched since
//! its own `exec`, whatever the judge's size.
//!
//! ## The jail's processes
//!
//! One process per run below the helper (`helper.rs`), the program, and
//! the keeper of the helper's kept jail; two per run in a fresh jail, init
//! and the program. The helper is root in
//! the host's namespaces except the network: it made one empty network
//! namespace for itself at startup, which its runs (one at a time) share.
//! No interface is up in it, so no run reaches any socket of the host, and
//! a run, without `CAP_NET_ADMIN`, can change nothing in it but its own
//! sockets, which die with its processes, or else (alive in flight) move
//! the helper to a new namespace ([`renew_netns_if_used`](jail::renew_netns_if_used)): the next run
//! finds nothing of it (`tests/helpers.rs`). A network namespace per run
//! ([`Jail::netns`](jail::Jail::netns), `judge-exec --netns-per-run`) costs 0.4 ms to make
//! (the kernel registers the sysctls and `lo` of every protocol) and more
//! CPU again for its workers to tear down: `make bench` prints the price.
//!
//! - **the kept jail** ([`Kept`](kept::Kept)): the helper's PID, mount,
//!   IPC and UTS namespaces, made once per helper with a **keeper** as
//!   their PID 1 (it reaps what is left to it, and dies with the helper),
//!   and cleaned after each run of what a run can leave in them (`/tmp`,
//!   System V objects, message queues). The helper's children are born in
//!   its PID namespace. A run that left a process behind, or was ended by
//!   a limit, is ended by killing the keeper, which takes every process of
//!   the namespace with it at once (none can be born there after): the
//!   next run gets a new kept jail. Making and tearing down a set of namespaces per run
//!   cost the kernel more than the program's own `exec`, and init's clone
//!   and exit most of the rest (`make bench` shows both, with
//!   `OJ_FRESH_JAIL=1`). In the kept jail the helper is the run's
//!   supervisor, as init is below, and the program's parent.
//! - **init** (a fresh jail's: where the kept jail cannot be made, no
//!   cgroup, or `OJ_FRESH_JAIL=1`): cloned into new PID, mount, IPC and UTS
//!   namespaces, and a network one with [`Jail::netns`](jail::Jail::netns);
//!   PID 1 of its own; root; sharing the helper's memory while the helper
//!   waits, [`spawn`](jail::spawn); on the core of its run's slot, as the
//!   helper is for the run, so that the run's hand-offs are wake-ups on one
//!   core. Its PID, IPC and UTS namespaces are made by the helper after the
//!   last run's reply ([`Ahead`](jail::Ahead)), its mount one is a copy of
//!   the jail's. init joins the run's cgroup and makes a cgroup
//!   namespace there (the helper is never in the group: its OOM killer
//!   cannot pick the judge, `cgroup.rs`), finishes the root file system (`enter_root`),
//!   starts the program, receives its seccomp listener, and supervises it:
//!   a denied call is named and kills the run; the watchdog the helper
//!   gave it (`executor.rs`) is asked at every wake-up, and a limit kills
//!   the run; so does the judge's socket closing. When the program has
//!   exited, init kills and reaps whatever it left (a background child
//!   cannot outlive its run, `setsid` or not), leaves its [`Report`](jail::Report) in the
//!   memory it shares with the helper, and exits; the helper goes on.
//! - **program** (the helper's child in the kept jail, init's in a fresh
//!   one; `clone` with `CLONE_VM | CLONE_VFORK`: it shares its parent's
//!   memory until `exec`, so it only makes system calls): in the kept jail
//!   it joins the run's cgroup, a cgroup namespace rooted there, the kept
//!   mount namespace, and sets its own `oom_score_adj` of 1000
//!   ([`OOM_FIRST`](jail::OOM_FIRST)) (a fresh jail's is born in init's
//!   and inherits init's); its parent is outside its PID namespace
//!   (`getppid()` says 0; a fresh jail's says 1). It takes its stdio, limits,
//!   becomes the slot uid (which drops every capability: the bounding set
//!   is empty since the helper's start, [`drop_bounding_set`](jail::drop_bounding_set)), sets `no_new_privs`,
//!   installs the filter (`seccomp.rs`), passes the listener to its
//!   supervisor and
//!   `exec`s. A failure before `exec` is written as an `errno` to a
//!   close-on-exec pipe: the judge's error, not the program's.
//!
//! ## The root file system (a 1 MiB tmpfs, read-only to the run)
//!
//! Built in two steps: once per helper, the template ([`build_template`](mounts::build_template):
//! everything below but `/tmp`, `/proc` and the binds) in the
//! helper's own mount namespace, and a mount namespace of the jail's whose
//! root it is, with nothing of the host's tree below it
//! ([`JailRoot`](mounts::JailRoot): a copy of the helper's namespace that
//! `pivot_root`ed into the template and let the rest go); then the kept
//! jail's copy of that namespace gets the rest once, a `/tmp` and a `/proc`
//! (the keeper's, [`Kept::make`](kept::Kept::make)), and the binds when a
//! run's differ from the last run's ([`Kept::prepare`](kept::Kept::prepare);
//! a fresh jail's init gets all three per run, `enter_root`). Building it all per
//! run took 0.6 ms; copying the helper's namespace per run (the host's
//! two dozen mounts with the template's) and unmounting the host's part
//! after a `pivot_root`, 0.045 ms more at p50 and 0.2 ms at p99 on the
//! Intel host of BENCHMARKS.md, and more where an RCU grace period costs
//! more (the unmount waits for an expedited one, which signals every CPU).
//!
//! The helper enters the jail's namespace (`setns`) only around init's
//! `clone`, and returns to its own at once. The binds' host paths are not
//! in the jail's namespace: the helper detaches a copy of each bind's tree
//! beforehand (`open_tree`, its flags set with `mount_setattr`), and init
//! attaches it where the bind says (`move_mount`). init sets its
//! `oom_score_adj` through the helper's `/proc`, held open, and closes its
//! copies of every descriptor that leads out of the jail (the namespaces',
//! that `/proc`'s) before the program is cloned from it. Before Linux 5.12
//! (no `mount_setattr`) or in a user namespace other than the host's (where
//! a `/proc` may be mounted only beside a full one), each run's init copies
//! the helper's namespace, mounts the binds from their host paths,
//! `pivot_root`s into the template and unmounts the rest, as before.
//!
//! | path | what |
//! |---|---|
//! | `/usr` | the host's, bind-mounted read-only, `nosuid`, `nodev`, with each of [`MASKED`](mounts::MASKED) (`/usr/local/etc`) an empty tmpfs; `/bin`, `/lib*`, `/sbin` as the host has them (symbolic links into `/usr` on a merged-/usr system, else read-only binds) |
//! | `/etc` | only [`ETC`](mounts::ETC): the dynamic loader's cache, `alternatives`, the JVM's and Python's configuration, `localtime`; a `passwd`, `group` and `hosts` of its own |
//! | `/dev` | `null`, `zero`, `full`, `random`, `urandom` (nodes made in the template), `fd`, `stdin`, `stdout`, `stderr` links, `shm` (a link to `/tmp`: POSIX shared memory and semaphores share its cap) |
//! | `/proc` | the jail's PID namespace only, read-only, [`PROC_OPTIONS`](mounts::PROC_OPTIONS): the run's processes and nothing else of the kernel's (`/proc/self/net` for its network; the keeper and init are root's, hidden) |
//! | `/tmp` | a private tmpfs, capped at the run's memory limit (its pages count as the run's memory), empty at each run's start (one a run left anything in is replaced) |
//! | each [`Bind`] | the work directories, where [`Bind::inside`](limits::Bind::inside) says (the judge's are `/src`, `/judge`, `/checker`: no host path), read-only unless writable |
//!
//! The program's stdio are a sealed copy and pipes (`streams.rs`); nothing
//! above descriptor 2 crosses its `exec` (`sandbox::only_stdio_across_exec`).
//! `/proc/self/mountinfo` shows each bind's path within its host file
//! system (the mount's root): the judge's `/src` is a workspace, whose
//! path says nothing of the host (`workspace.rs`).
//!
//! ## The rlimits (both levels)
//!
//! | limit | why |
//! |---|---|
//! | `RLIMIT_CPU` = ⌈cpu⌉ + 1 s (hard + 1 s more) | a backstop only: the watchdog kills at the limit itself |
//! | `RLIMIT_AS` (optional) | a per-process backstop against memory the watchdog cannot see (see [`Limits::address_space`](limits::Limits::address_space)) |
//! | `RLIMIT_STACK` = unlimited (the judge's runs) | deep recursion is legal: the main thread's stack may grow to the memory limit, which stops it; and new threads get the runtime's default (glibc's: 2 MiB), not a stack the size of the limit each (see [`Limits::stack`](limits::Limits::stack)) |
//! | `RLIMIT_FSIZE` = output limit | for files the program writes (its `/tmp`, a compile's output): past it, `SIGXFSZ`. stdout and stderr are pipes the judge caps itself (`streams.rs`) |
//! | `RLIMIT_NPROC` (only with an identity) | processes + threads of the slot uid: no fork bomb (the cgroup's `pids.max` says the same per run) |
//! | `RLIMIT_CORE` = 0 | no core files |
//!
//! ## Measuring
//!
//! CPU time: the cgroup's (every task of the run, user + system), else
//! `ru_utime + ru_stime` of the program and what it reaped, or the
//! watchdog's figure for the tree when larger. Peak memory: the cgroup's
//! peak less the file cache charged to it (see `cgroup.rs`; never below the
//! program's anonymous memory at the watchdog's looks, as the kernel charges
//! a group in batches of 64 pages a CPU), else the larger
//! of `ru_maxrss` and the watchdog's largest sample of the tree's resident
//! size. `ru_maxrss` is honest here because the program descends from the
//! helper, whose own resident size is small, not from the judge.
//!
//! # The layers
//!
//! Each module uses only those above it in this list:
//!
//! | module | what |
//! |---|---|
//! | `error` | [`Error`]: why a run could not be made (the judge's failure, typed across the helper's socket) |
//! | `sys` | the kernel calls, each wrapped once: descriptors over a socket, waiting, pipes (raw: some run between `clone` and `exec`) |
//! | `timeline` | a run's steps stamped, when the judge asks (`make bench`'s cost per step) |
//! | `procfs` | what `/proc` says of a process tree |
//! | `board` | a dialogue's board: the interactor's CPU time, read by the program's watchdog (an interactive case's idleness rule) |
//! | `limits` | [`Spec`], [`Limits`], [`Bind`], [`Identity`], [`Usage`], the [`Request`] a helper gets; the limits' one rule |
//! | `delegation` | where the runner's v2 groups live (the cgroup it was started in, or the root) and the move that makes it its own |
//! | `cgroup`, `seccomp`, `mounts`, `slot`, `streams` | the mechanisms: control groups, the system call filter, the root file system, the slots (identities, locks, sweep, pool), the program's stdio |
//! | `cores` | the core each slot's runs are pinned to |
//! | `kept` | the helper's kept jail: its namespaces, made once, readied for each run and cleaned after it |
//! | `jail` | init and the program: namespaces, credentials, the filter's listener |
//! | `executor` | one run in the helper, and the one state a helper keeps between runs |
//! | `helper` | the helper process: its server loop and the judge's client |
//! | this module | the interface: [`run`] |

pub mod board;
pub mod cgroup;
pub mod cores;
pub mod delegation;
pub mod error;
pub mod executor;
pub mod helper;
pub mod jail;
pub mod kept;
pub mod limits;
pub mod mounts;
pub mod procfs;
pub mod seccomp;
pub mod slot;
pub mod streams;
pub mod sys;
pub mod timeline;

pub use error::Error;
pub use executor::{helper_oom_score_adj, probe_mechanisms, probe_namespaces, Mechanisms};
pub use helper::{enter_if_asked, netns_per_run, set_netns_per_run, set_timed};
pub use limits::SLOT_LOCK_DIR;
pub use limits::{Bind, Exit, Fired, Identity, Limits, Request, Spec, Usage, POLL, UNLIMITED};
pub use slot::slot_lock_dir;
pub use streams::OutputWatch;
pub use sys::{has_cap_sys_resource, only_stdio_across_exec};

/// At a program's start, before it starts stages or helpers: makes the
/// cgroup layout its runs need (v2: `delegation.rs`, the move into
/// `ojrunner-stages` included) and says which, or why there is none to
/// make. A `Refused` is the configuration's fault: the caller exits 100
/// rather than judge with a limit it cannot enforce.
pub fn place_cgroups() -> Result<Option<cgroup::Hierarchy>, delegation::Refused> {
    let h = cgroup::Hierarchy::find()?;
    if let Some(h) = &h {
        match &h.layout {
            Some(delegation::Layout::Delegated { cgroup }) => {
                log::info!(
                    "cgroup v2: the runs' groups below {cgroup}, this runner's processes in {cgroup}/{}",
                    delegation::STAGES_LEAF
                )
            }
            Some(delegation::Layout::Root) => log::info!("cgroup v2: the runs' groups below /ojrunner"),
            None => {}
        }
    }
    Ok(h)
}

/// Runs `spec` to the end, in a sandbox helper. `Err` only for the judge's
/// own failures (the program could not be started, the kernel refused a
/// call): the caller's JE.
pub fn run(spec: Spec) -> Result<Usage, Error> {
    run_watched(spec, Watch::default())
}

/// What a judged program's run adds to its [`Spec`]: the rules that may
/// end it before its limits do.
#[derive(Default)]
pub struct Watch<'a> {
    /// The idleness rule's window ([`Fired::Idle`]; `limits.rs`'s `look`):
    /// past its CPU limit in wall time, a run whose CPU time stood still
    /// this long is ended. `None` (or zero): no such rule.
    pub idle: Option<std::time::Duration>,
    /// What reads its stdout as it comes: when it says no, the run is
    /// stopped ([`Fired::Stopped`]; `streams.rs`).
    pub stdout: Option<&'a mut dyn OutputWatch>,
    /// The run's part in a dialogue (`board.rs`): the interactor tells its
    /// CPU time on the board, the program's idleness is the dialogue's.
    pub board: Option<(&'a board::Board, board::Side)>,
}

/// [`run`], under the rules of `watch` too.
pub fn run_watched(spec: Spec, watch: Watch<'_>) -> Result<Usage, Error> {
    let Spec { argv, cwd, env, stdin, stdout, stderr, identity, limits, binds } = spec;
    let slot_lock_dir = slot_lock_dir().to_path_buf();
    let (fresh_netns, timed, core) = (netns_per_run(), helper::timed(), cores::core_of(identity));
    let idle = watch.idle.filter(|w| !w.is_zero());
    let board = watch.board.map(|(_, side)| side);
    let req = Request { argv, cwd, env, identity, limits, binds, fresh_netns, slot_lock_dir, timed, core, idle, board };
    helper::run(&req, [stdin, stdout, stderr], watch.board.map(|(b, _)| b), watch.stdout)
}

#[cfg(test)]
mod tests {
    use super::limits::rlimits;
    use super::procfs::parent_and_uid;
    use super::*;
    use std::fs::File;
    use std::io::{Read, Seek, Write};
    use std::path::Path;
    use std::time::{Duration, Instant};

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
            binds: vec![],
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
        let (u, _) = sh("while :; do :; done", "", Limits { cpu: Duration::from_millis(300), ..limits() });
        assert_eq!(u.fired, Some(Fired::Cpu));
        assert!(u.cpu >= Duration::from_millis(300) && u.cpu < Duration::from_millis(900), "{u:?}");
    }

    #[test]
    fn a_sleeper_is_killed_at_the_wall_limit() {
        let (u, _) = sh("sleep 30", "", Limits { wall: Duration::from_millis(300), ..limits() });
        assert_eq!(u.fired, Some(Fired::Wall));
        assert!(u.wall < Duration::from_secs(3), "{u:?}");
    }

    /// Runs `sh -c script` as [`sh`] does, under `watch`.
    fn sh_watched(script: &str, limits: Limits, watch: Watch<'_>) -> Usage {
        let spec = Spec {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            cwd: "/".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin: scratch("win"),
            stdout: scratch("wout"),
            stderr: scratch("werr"),
            identity: None,
            limits,
            binds: vec![],
        };
        run_watched(spec, watch).unwrap()
    }

    #[test]
    fn a_sleeper_is_ended_as_idle_past_its_cpu_limit_and_a_busy_program_is_not() {
        let l = Limits { cpu: Duration::from_millis(300), wall: Duration::from_secs(20), ..limits() };
        let idle = || Watch { idle: Some(Duration::from_millis(200)), ..Watch::default() };
        let u = sh_watched("sleep 30", l.clone(), idle());
        assert_eq!(u.fired, Some(Fired::Idle), "{u:?}");
        assert!(u.wall < Duration::from_secs(10), "not ended long before its wall limit: {u:?}");
        // Busy past the window (in CPU time and in wall time): the CPU limit ends it.
        let u = sh_watched("while :; do :; done", l.clone(), idle());
        assert_eq!(u.fired, Some(Fired::Cpu), "{u:?}");
        // Without the rule, the wall limit.
        let u = sh_watched("sleep 30", Limits { wall: Duration::from_millis(800), ..l }, Watch::default());
        assert_eq!(u.fired, Some(Fired::Wall), "{u:?}");
    }

    /// A watch that says no at the first `!`.
    struct NoBang;

    impl OutputWatch for NoBang {
        fn feed(&mut self, chunk: &[u8]) -> bool {
            !chunk.contains(&b'!')
        }
    }

    #[test]
    fn a_run_whose_output_the_watch_refuses_is_stopped_and_one_it_accepts_is_not() {
        let l = Limits { cpu: Duration::from_secs(20), wall: Duration::from_secs(60), ..limits() };
        let watched =
            |script: &str| sh_watched(script, l.clone(), Watch { stdout: Some(&mut NoBang), ..Watch::default() });
        let u = watched("echo wrong!; sleep 30");
        assert_eq!((u.fired, u.exit), (Some(Fired::Stopped), Exit::Signal(libc::SIGKILL)), "{u:?}");
        assert!(u.wall < Duration::from_secs(20), "not stopped long before its end: {u:?}");
        let u = watched("echo fine; sleep 0.3; echo fine again");
        assert_eq!((u.fired, u.exit), (None, Exit::Code(0)), "{u:?}");
    }

    #[test]
    fn output_past_the_limit_is_cut_there_and_the_writer_gets_sigpipe() {
        let (u, out) = sh("exec yes", "", limits());
        assert_eq!(u.exit, Exit::Signal(libc::SIGPIPE));
        assert_eq!(out.len(), 1 << 20);
    }

    #[test]
    fn outputs_cannot_be_grown_or_mapped_and_the_input_cannot_be_written() {
        // The shell's stdout is a pipe; its input a sealed copy.
        let script = "test -p /dev/stdout && echo pipe; \
            (echo x > /proc/self/fd/0) 2>/dev/null && echo wrote-input; \
            readlink /proc/self/fd/0";
        let (u, out) = sh(script, "input\n", limits());
        assert_eq!(u.exit, Exit::Code(0), "{out}");
        assert!(out.starts_with("pipe\n/memfd:stdin"), "{out}");
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
            binds: vec![],
        };
        assert!(run(spec).unwrap_err().to_string().contains("/no-such-program"));
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
        // The helper, not this process, forks the program: not even a few MiB leak in.
        assert!(u.memory < 8 << 20, "charged {} KiB", u.memory >> 10);
        drop(ballast);
    }

    #[test]
    fn without_a_slot_a_helper_dying_mid_run_is_the_judges_error_naming_how() {
        // Without a slot uid nothing can sweep what the run left (it runs as
        // the caller), so it is not run again: that is judging.rs's test.
        let marker = format!("helper-death-{}", std::process::id());
        let killer = {
            let marker = marker.clone();
            std::thread::spawn(move || {
                // The run's shell, found by its marker; its parent is the helper.
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    for e in std::fs::read_dir("/proc").unwrap().flatten() {
                        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                        if !String::from_utf8_lossy(&cmdline).contains(&marker) {
                            continue;
                        }
                        let Some((ppid, _)) = e.file_name().to_str().and_then(|p| parent_and_uid(p.parse().ok()?))
                        else {
                            continue;
                        };
                        // SAFETY: kill takes no pointer.
                        unsafe { libc::kill(ppid, libc::SIGKILL) };
                        return ppid;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                panic!("the run never started");
            })
        };
        let spec = Spec {
            argv: vec!["/bin/sh".into(), "-c".into(), format!("sleep 1; echo done # {marker}")],
            cwd: "/".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin: scratch("in3"),
            stdout: scratch("out3"),
            stderr: scratch("err3"),
            identity: None,
            limits: limits(),
            binds: vec![],
        };
        let e = run(spec).unwrap_err().to_string();
        let killed = killer.join().unwrap();
        assert!(!Path::new(&format!("/proc/{killed}")).exists(), "the dead helper was not reaped");
        assert!(e.contains("killed by signal 9"), "{e}");
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
