//! The sandbox helper: a small process, started once per concurrent caller,
//! that spawns and measures every run (a jailed run is watched by its init,
//! which shares the helper's memory while the helper waits: `jail.rs`).
//!
//! Why: a process forked from the judge starts with the judge's resident
//! pages in its page tables, and `exec` records that size in the program's
//! `ru_maxrss` (a 1 MiB program forked from a 200 MiB judge reads 200 MiB).
//! The helper is a fresh `exec` of the judge's own binary (`/proc/self/exe`
//! with the hidden argument [`HELPER_ARG`]), whose `main` hands itself
//! over first thing ([`enter_if_asked`]: `judge-exec`, `ojrunner-bench`).
//! A binary whose `main` is not its own (a test harness's) execs
//! `judge-exec` of the same build instead (`program`). Its resident size
//! is the few pages it touched since its own `exec`, whatever the judge's
//! size.
//!
//! # Protocol
//!
//! One `SOCK_SEQPACKET` socket per helper (its stdin). The judge sends a
//! [`Request`] as JSON with the run's stdin, stdout and stderr attached
//! (`SCM_RIGHTS`); the helper answers with a [`Reply`] (`{"Ok": Usage}`,
//! `{"Err": "why"}` or `{"Lost": "why"}`) as soon as the result is known
//! (what is left to clean up, such as the jail's init exiting, is done
//! after the answer, before the next request). The helper exits when the
//! socket closes (the judge is gone); during a run the socket is watched
//! too (by the jail's init, or by the helper at the basic level), and the
//! run is killed first. A helper whose jail's init died mid-run answers
//! `Lost`, then exits without reading another request
//! (`executor::must_retire`); the judge reaps it. (A request a helper
//! never read, `ECONNRESET`, goes to a new helper.)
//!
//! # Pool
//!
//! [`run`] takes an idle helper (or starts one), so concurrent callers never
//! share one; a helper that fails is killed, reaped and replaced. A helper
//! that dies during a run takes the run with it (the jail's init has it as
//! its parent-death signal), and so does a jail's init that dies (`Lost`);
//! either way the run is started again once in a new helper when its
//! stdio are files that can be put back (`streams.rs`), so the judge's
//! fault does not become the submission's JE.

use super::board::Board;
use super::error::{Error, Step};
use super::executor::{Executor, FRESH_JAIL, STOP};
use super::limits::{Request, Usage};
use super::slot;
use super::streams::{Drained, Input, OutputWatch, Outputs};
use super::sys::{describe, recv, send};
use super::timeline::{now_ns, Mark};
use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The hidden argument that turns a process into a helper.
pub const HELPER_ARG: &str = "--ojrunner-sandbox-helper";

/// This build's sources (`lib/build.rs`): the argument after [`HELPER_ARG`],
/// which a helper of another build refuses.
const BUILD: &str = env!("OJ_SANDBOX_BUILD");

/// Whether this process's `main` called [`enter_if_asked`], so that a
/// fresh `exec` of its own binary becomes a helper.
static HOSTS_HELPERS: AtomicBool = AtomicBool::new(false);

/// Called first thing in the `main` of a binary that runs sandboxes: when
/// this process was started as a helper ([`HELPER_ARG`]), serves and exits,
/// never returning; otherwise notes that its binary can be the helper.
pub fn enter_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != HELPER_ARG) {
        HOSTS_HELPERS.store(true, Ordering::Relaxed);
        return;
    }
    if args.next().is_none_or(|b| b != BUILD) {
        let exe = std::env::current_exe().unwrap_or_default();
        eprintln!("ojrunner-sandbox-helper: {} is of another build than its judge: rebuild it (cargo build --workspace --bins)", exe.display());
        exit_now(OTHER_BUILD);
    }
    // Rust's runtime ignored SIGPIPE before `main`; the runs inherit the
    // helper's disposition, and must get the default.
    ojrunner_daemon::signals::default_sigpipe();
    exit_now(serve(0));
}

/// A helper's exit status when it is of another build than its judge.
const OTHER_BUILD: i32 = 2;

/// Ends the helper at once, as `_exit` (no exit handlers, nothing flushed).
fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` takes no pointer; nothing of the helper waits to be
    // flushed or dropped (its stdout is /dev/null, its runs are reaped).
    unsafe { libc::_exit(code) }
}

/// The binary a helper is a fresh `exec` of: this one when its `main`
/// enters helpers ([`enter_if_asked`]); else (a test harness) the
/// `judge-exec` beside it (in `$OJ_BIN_DIR` when set, as the tests'
/// binaries are found), which refuses to serve unless of this build.
fn program() -> io::Result<PathBuf> {
    if HOSTS_HELPERS.load(Ordering::Relaxed) {
        return Ok("/proc/self/exe".into());
    }
    let dir = match std::env::var_os("OJ_BIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe()?;
            let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
            // A test runs from target/<profile>/deps/.
            if dir.ends_with("deps") {
                dir.pop();
            }
            dir
        }
    };
    let judge = dir.join("judge-exec");
    if !judge.exists() {
        let why = format!("no sandbox helper: this program's main does not enter one, and {} is missing (cargo build --workspace --bins)", judge.display());
        return Err(io::Error::new(io::ErrorKind::NotFound, why));
    }
    Ok(judge)
}

/// The helper's answer to a [`Request`].
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// The run ended (whatever the program did).
    Ok(Usage),
    /// The judge's failure: the run could not be started or measured.
    Err(Error),
    /// The judge's failure during the run (its init died): the program was
    /// killed with it; the helper retires. Worth one more try.
    Lost(Error),
}

/// Runs lost through the judge's fault (a helper that died during the
/// run) since this process began; `judge-exec` counts them in the spool.
pub static RUNS_LOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `req` with `stdio` in an idle helper (started if none is idle);
/// the program gets its streams as `streams.rs` makes them. `watch`, if
/// any, reads its stdout as it comes; when it says no, the helper is asked
/// to stop the run (`executor::STOP`: [`Fired::Stopped`](super::Fired::Stopped)).
/// `board`, if any, travels as a fourth descriptor (`board.rs`).
pub fn run(
    req: &Request,
    stdio: [File; 3],
    board: Option<&Board>,
    mut watch: Option<&mut dyn OutputWatch>,
) -> Result<Usage, Error> {
    let called = now_ns();
    let msg = serde_json::to_vec(req).map_err(|e| Step::Request.failed(e))?;
    let [stdin, stdout, stderr] = stdio;
    let stdin = Input::seal(stdin).map_err(Step::Input.err())?;
    let outputs = Outputs::new(stdout, stderr, req.limits.output).map_err(Step::Outputs.err())?;
    // Tries that ran nothing (the helper never read the request), at most
    // two; and whether a run lost through the judge's fault is being run
    // again (once). After either, a newly started helper takes it.
    let (mut unread, mut rerun, mut fresh) = (0, false, false);
    loop {
        let pooled = if fresh { None } else { CLIENT.take_idle(req.identity.map(|i| i.uid)) };
        let helper = match pooled {
            Some(h) => h,
            None => Helper::start().map_err(Step::StartHelper.err())?,
        };
        // A helper that died while idle, or closed with the request unread
        // (it was retiring, see `executor::must_retire`): nothing ran.
        let mut unread_by = |helper: Helper, e: io::Error| {
            unread += 1;
            fresh = true;
            if unread <= 2 {
                helper.discard();
                Ok(())
            } else {
                // How the last one ended says why (another build, say).
                let how = helper.reap();
                Err(Step::HelperSocket.failed(io::Error::new(e.kind(), format!("{e}; the helper {how}"))))
            }
        };
        let ([out, err], mut drain) = outputs.open().map_err(Step::Outputs.err())?;
        if let Some(w) = watch.as_deref_mut() {
            drain.watch(w);
        }
        let sending = now_ns();
        let mut fds = vec![stdin.file().as_raw_fd(), out.as_raw_fd(), err.as_raw_fd()];
        fds.extend(board.map(|b| b.fd()));
        let sent = send(helper.sock.as_raw_fd(), &msg, &fds);
        // The program's ends are its own now: the pipes end when its do.
        drop((out, err));
        if let Err(e) = sent {
            unread_by(helper, e)?;
            continue;
        }
        let mut buf = vec![0u8; 64 * 1024];
        let answered = loop {
            match drain.until_readable(helper.sock.as_raw_fd()) {
                // Stopped at once; a helper gone meanwhile is seen at the reply.
                Ok(Drained::Mismatch) => _ = send(helper.sock.as_raw_fd(), STOP, &[]),
                Ok(Drained::Readable) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let reply = answered.and_then(|()| recv(helper.sock.as_raw_fd(), &mut buf, &mut []));
        let answered = now_ns();
        // The run is over (or its helper gone): its outputs are complete.
        let copied = drain.finish().map_err(Step::RecordOutput.err());
        // What was lost through the judge's fault during the run, if so.
        let lost = match reply {
            Ok(n) if n > 0 => match serde_json::from_slice(&buf[..n]) {
                Ok(Reply::Ok(mut u)) => {
                    CLIENT.give_back(helper, req);
                    if let Some(t) = &mut u.steps {
                        let ours = [(Mark::Called, called), (Mark::Sent, sending), (Mark::Answered, answered)];
                        for (m, at) in ours.into_iter().chain([(Mark::Returned, now_ns())]) {
                            t.at[m as usize] = at;
                        }
                    }
                    return copied.map(|()| u);
                }
                Ok(Reply::Err(e)) => {
                    CLIENT.give_back(helper, req);
                    return Err(e);
                }
                // The helper retires after this answer.
                Ok(Reply::Lost(why)) => Error::Lost { why: Box::new(why), how: helper.reap() },
                Err(e) => {
                    helper.discard();
                    return Err(Step::HelperReply.failed(e));
                }
            },
            Ok(_) => Error::HelperDied { how: helper.reap() },
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                unread_by(helper, e)?;
                continue;
            }
            Err(e) => {
                helper.discard();
                return Err(Step::HelperSocket.failed(e));
            }
        };
        RUNS_LOST.fetch_add(1, Ordering::Relaxed);
        // The judge's fault, never the program's: run it again once, in a
        // new helper, when nothing of the first run is left to touch its
        // files (a slot uid to sweep) and the files can be put back as they
        // were (not pipes).
        let swept = !rerun && req.identity.is_some_and(slot::clear_after_dead_helper);
        if swept && stdin.rewind() && outputs.rewind() {
            log::warn!("{lost}; running it again in a new helper");
            (rerun, fresh) = (true, true);
            // It read the lost run's output: the new run is not watched.
            watch = None;
            continue;
        }
        return Err(lost);
    }
}

/// The judge's side of the helpers, one per process: the idle helpers,
/// and the one setting its requests carry.
struct Client {
    idle: Mutex<Vec<Helper>>,
    /// Whether each jailed run gets a network namespace of its own.
    fresh_netns: AtomicBool,
    /// Whether runs are timed step by step ([`set_timed`]).
    timed: AtomicBool,
}

static CLIENT: Client =
    Client { idle: Mutex::new(Vec::new()), fresh_netns: AtomicBool::new(false), timed: AtomicBool::new(false) };

impl Client {
    /// An idle helper, the one that last served slot `uid` if there is one:
    /// then its jail's `passwd`, core and cgroup limits are already the
    /// run's (a helper that changes slot rewrites the first, moves to
    /// another core and sets the others).
    fn take_idle(&self, uid: Option<u32>) -> Option<Helper> {
        let mut idle = self.idle.lock().unwrap();
        match idle.iter().rposition(|h| uid.is_some() && h.served == uid) {
            Some(i) => Some(idle.remove(i)),
            None => idle.pop(),
        }
    }

    /// Puts `helper` back among the idle, after its run of `req`.
    fn give_back(&self, mut helper: Helper, req: &Request) {
        helper.served = req.identity.map(|i| i.uid);
        self.idle.lock().unwrap().push(helper);
    }
}

/// Has every run from now on stamp each of its steps (`timeline.rs`) and
/// carry them back in [`Usage::steps`]: `make bench`'s cost per step. Off
/// by default: then a step's stamp is one branch.
pub fn set_timed(on: bool) {
    CLIENT.timed.store(on, Ordering::Relaxed);
}

/// Whether runs are timed step by step ([`set_timed`]).
pub fn timed() -> bool {
    CLIENT.timed.load(Ordering::Relaxed)
}

/// Gives each jailed run from now on a new network namespace of its own
/// (`judge-exec --netns-per-run`), where runs otherwise share their
/// helper's, which is as empty (see `jail.rs`): the letter of issue 3, at
/// 0.4 ms of wall time and more of CPU a run (`make bench` prints both).
pub fn set_netns_per_run(on: bool) {
    CLIENT.fresh_netns.store(on, Ordering::Relaxed);
}

/// Whether runs get a network namespace of their own ([`set_netns_per_run`]).
pub fn netns_per_run() -> bool {
    CLIENT.fresh_netns.load(Ordering::Relaxed)
}

struct Helper {
    sock: OwnedFd,
    pid: libc::pid_t,
    /// The slot uid of its last run: a run of the same slot takes it first.
    served: Option<u32>,
}

impl Helper {
    fn start() -> io::Result<Helper> {
        let program = program()?;
        // The helper's mount namespace is a copy of ours: the workspaces'
        // file system must be in it.
        crate::workspace::root();
        let mut sv = [0; 2];
        // SAFETY: socketpair writes two descriptors into `sv`, a live two-element array.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) }
            != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just made by socketpair; nothing else owns them.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), File::from_raw_fd(sv[1])) };
        let child = Command::new(program)
            .arg0("ojrunner-sandbox-helper")
            .args([HELPER_ARG, BUILD])
            .env_clear()
            // The one setting a helper reads from its environment (`executor.rs`).
            .envs(std::env::var_os(FRESH_JAIL).map(|v| (FRESH_JAIL, v)))
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Helper { sock: ours, pid: child.id() as libc::pid_t, served: None })
    }

    /// Closes the socket (the helper exits), kills and reaps it.
    fn discard(self) {
        drop(self.sock);
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        let _ = waitpid(Pid::from_raw(self.pid), None);
    }

    /// Reaps a helper whose socket closed (killing it if it is still
    /// there after a second): how it ended, for the log.
    fn reap(self) -> String {
        drop(self.sock);
        let mut status = 0;
        for _ in 0..500 {
            // SAFETY: waitpid writes only `status`, a live local.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } != 0 {
                if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == OTHER_BUILD {
                    return "refused to serve: it is of another build than its judge (cargo build --workspace --bins)"
                        .into();
                }
                return describe(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        let _ = waitpid(Pid::from_raw(self.pid), None);
        "closed its socket and hung".into()
    }

    /// Closes the socket and lets the helper finish its cleanup (at most 5 s).
    fn close(self) {
        drop(self.sock);
        for _ in 0..2500 {
            match waitpid(Pid::from_raw(self.pid), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {}
                Ok(_) => return,
                Err(_) if !std::path::Path::new(&format!("/proc/{}", self.pid)).exists() => return,
                Err(_) => {}
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        eprintln!("ojrunner: sandbox helper {} did not exit; killing it", self.pid);
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        let _ = waitpid(Pid::from_raw(self.pid), None);
    }
}

/// The helper's loop on socket `fd`: one request, one run, one reply; exits
/// when the socket closes.
fn serve(fd: RawFd) -> i32 {
    // Its socket (stdin): not for the runs.
    let _ = fcntl(std::io::stdin(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    let mut executor = Executor::start();
    let mut buf = vec![0u8; 256 * 1024];
    let code = loop {
        let mut fds = [-1; 4];
        let n = match recv(fd, &mut buf, &mut fds) {
            Ok(0) => break 0,
            Ok(n) => n,
            Err(e) => {
                eprintln!("ojrunner-sandbox-helper: {e}");
                break 1;
            }
        };
        if &buf[..n] == STOP {
            // A stop for a run that was over when it came.
            continue;
        }
        let received = now_ns();
        // SAFETY: each was just received (SCM_RIGHTS) into this process; nothing else owns it.
        let files = fds.map(|f| (f >= 0).then(|| unsafe { File::from_raw_fd(f) }));
        let ran: Result<Usage, Error> = match (serde_json::from_slice::<Request>(&buf[..n]), files) {
            (Ok(req), [Some(i), Some(o), Some(e), board]) if req.board.is_some() == board.is_some() => {
                executor.run(req, [i, o, e], board.map(Board::from_file), fd, received)
            }
            (Err(e), _) => Err(Error::BadRequest(e.to_string())),
            _ => Err(Error::BadRequest("three files expected, and a board for a side of a dialogue".into())),
        };
        let reply = match ran {
            Ok(u) => Reply::Ok(u),
            Err(e) if executor.retiring() => Reply::Lost(e),
            Err(e) => Reply::Err(e),
        };
        let out = serde_json::to_vec(&reply).unwrap_or_default();
        if send(fd, &out, &[]).is_err() {
            break 0;
        }
        executor.after_reply();
        if executor.retiring() {
            break 1;
        }
    };
    executor.exit();
    code
}

/// Closes the idle helpers (they finish their cleanup and exit); the next
/// run starts new ones.
pub fn shutdown() {
    for h in CLIENT.idle.lock().unwrap().drain(..) {
        h.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_takes_the_idle_helper_that_last_served_its_slot() {
        let helper = |served| Helper { sock: File::open("/dev/null").unwrap().into(), pid: 0, served };
        let client =
            Client { idle: Mutex::new(Vec::new()), fresh_netns: AtomicBool::new(false), timed: AtomicBool::new(false) };
        client.idle.lock().unwrap().extend([helper(Some(7)), helper(Some(8)), helper(None)]);
        assert_eq!(client.take_idle(Some(7)).map(|h| h.served), Some(Some(7)));
        // None served this slot: the last one given back.
        assert_eq!(client.take_idle(Some(9)).map(|h| h.served), Some(None));
        assert_eq!(client.take_idle(None).map(|h| h.served), Some(Some(8)));
        assert!(client.take_idle(Some(8)).is_none());
    }
    use crate::sandbox::{Exit, Spec};

    #[test]
    // The sleeping child is reaped by `Helper::discard`, through its pid.
    #[allow(clippy::zombie_processes)]
    fn a_request_a_retiring_helper_left_unread_goes_to_a_fresh_one() {
        // A "helper" (a sleeping child for its pid) that closes its socket
        // once a request waits there, unread, as a retiring helper does.
        let mut sv = [0; 2];
        let r =
// SAFETY: socketpair writes two descriptors into `sv`, a live two-element array.
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) };
        assert_eq!(r, 0);
        // SAFETY: both descriptors were just made by socketpair; nothing else owns them.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let retiring = std::thread::spawn(move || {
            let mut p = libc::pollfd { fd: theirs.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: poll reads and writes `p`, a live local.
            let ready = unsafe { libc::poll(&mut p, 1, 10_000) };
            drop(theirs);
            ready
        });
        CLIENT.idle.lock().unwrap().push(Helper { sock: ours, pid: child.id() as libc::pid_t, served: None });
        let usage = crate::sandbox::run(Spec::trial(&["/bin/true"], None).unwrap());
        assert_eq!(retiring.join().unwrap(), 1, "the request never reached the retiring helper");
        assert_eq!(usage.map(|u| u.exit), Ok(Exit::Code(0)), "the request was not run by a fresh helper");
    }

    #[test]
    // The child is reaped by `Helper::reap`, through its pid.
    #[allow(clippy::zombie_processes)]
    fn a_helper_of_another_build_says_so() {
        // The real helper, told another build's name: it refuses before reading.
        let child = Command::new(program().unwrap())
            .args([HELPER_ARG, "another-build"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut sv = [0; 2];
        // SAFETY: socketpair writes two descriptors into `sv`, a live two-element array.
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, sv.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just made by socketpair; nothing else owns them.
        let (ours, _theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
        let how = Helper { sock: ours, pid: child.id() as libc::pid_t, served: None }.reap();
        assert!(how.contains("another build"), "{how}");
    }

    #[test]
    fn a_request_whose_descriptors_do_not_match_it_is_refused_and_the_helper_serves_on() {
        use crate::sandbox::board::{Board, Side};
        let helper = Helper::start().unwrap();
        let null = || File::options().read(true).write(true).open("/dev/null").unwrap();
        let (files, board) = ([null(), null(), null()], Board::new().unwrap());
        let spec = Spec::trial(&["/bin/true"], None).unwrap();
        let request = |side: Option<Side>| Request {
            argv: spec.argv.clone(),
            cwd: spec.cwd.clone(),
            env: vec![],
            identity: None,
            limits: spec.limits.clone(),
            binds: vec![],
            fresh_netns: false,
            slot_lock_dir: crate::sandbox::slot_lock_dir().to_path_buf(),
            timed: false,
            core: None,
            idle: None,
            board: side,
        };
        let stdio: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
        let with_board: Vec<RawFd> = stdio.iter().copied().chain([board.fd()]).collect();
        let ask = |req: &Request, fds: &[RawFd]| {
            send(helper.sock.as_raw_fd(), &serde_json::to_vec(req).unwrap(), fds).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            let n = recv(helper.sock.as_raw_fd(), &mut buf, &mut []).unwrap();
            serde_json::from_slice::<Reply>(&buf[..n]).unwrap()
        };
        // A side of a dialogue without its board, a board without a side, two files.
        for (req, fds) in
            [(request(Some(Side::Hears)), &stdio[..]), (request(None), &with_board[..]), (request(None), &stdio[..2])]
        {
            assert!(matches!(ask(&req, fds), Reply::Err(Error::BadRequest(_))), "{req:?} with {} files", fds.len());
        }
        // The same helper runs the next, well-formed, request.
        assert!(matches!(ask(&request(None), &stdio), Reply::Ok(u) if u.exit == Exit::Code(0)));
        assert!(matches!(ask(&request(Some(Side::Tells)), &with_board), Reply::Ok(u) if u.exit == Exit::Code(0)));
        helper.close();
    }
}
