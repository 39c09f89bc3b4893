//! The sandbox helper: a small process, started once per concurrent caller,
//! that spawns and measures every run (a jailed run is watched by its init,
//! which shares the helper's memory while the helper waits: `jail.rs`).
//!
//! Why: a process forked from the judge starts with the judge's resident
//! pages in its page tables, and `exec` records that size in the program's
//! `ru_maxrss` (a 1 MiB program forked from a 200 MiB judge reads 200 MiB).
//! The helper is a fresh `exec` of the judge's own binary (`/proc/self/exe`
//! with the hidden argument [`HELPER_ARG`]), taken over before `main` by a
//! constructor in `.init_array` (`hook`), so it works the same in
//! `judge-exec` and in every test binary. Its resident size is the few pages
//! it touched since its own `exec`, whatever the judge's size.
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
//! (`sandbox::must_retire`); the judge reaps it. (A request a helper
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

use crate::sandbox::{self, Bind, Identity, Limits, Usage};
use crate::streams::{Input, Outputs};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The hidden argument that turns a process into a helper.
pub const HELPER_ARG: &str = "--ojrunner-sandbox-helper";

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
}

fn default_slot_lock_dir() -> PathBuf {
    sandbox::SLOT_LOCK_DIR.into()
}

/// The helper's answer to a [`Request`].
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// The run ended (whatever the program did).
    Ok(Usage),
    /// The judge's failure: the run could not be started or measured.
    Err(String),
    /// The judge's failure during the run (its init died): the program was
    /// killed with it; the helper retires. Worth one more try.
    Lost(String),
}

/// Runs `req` with `stdio` in an idle helper (started if none is idle);
/// the program gets its streams as `streams.rs` makes them.
pub fn run(req: &Request, stdio: [File; 3]) -> Result<Usage, String> {
    let msg = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    let [stdin, stdout, stderr] = stdio;
    let stdin = Input::seal(stdin).map_err(|e| format!("the program's input: {e}"))?;
    let outputs = Outputs::new(stdout, stderr, req.limits.output).map_err(|e| format!("the program's outputs: {e}"))?;
    // Tries that ran nothing (the helper never read the request), at most
    // two; and whether a run lost through the judge's fault is being run
    // again (once). After either, a newly started helper takes it.
    let (mut unread, mut rerun, mut fresh) = (0, false, false);
    loop {
        let pooled = if fresh { None } else { POOL.lock().unwrap().pop() };
        let helper = match pooled {
            Some(h) => h,
            None => Helper::start().map_err(|e| format!("cannot start the sandbox helper: {e}"))?,
        };
        // A helper that died while idle, or closed with the request unread
        // (it was retiring, see `sandbox::must_retire`): nothing ran.
        let mut unread_by = |helper: Helper, e: io::Error| {
            helper.discard();
            unread += 1;
            fresh = true;
            if unread <= 2 {
                Ok(())
            } else {
                Err(format!("sandbox helper: {e}"))
            }
        };
        let ([out, err], mut drain) = outputs.open().map_err(|e| format!("the program's outputs: {e}"))?;
        let sent = send(helper.sock.as_raw_fd(), &msg, &[stdin.file().as_raw_fd(), out.as_raw_fd(), err.as_raw_fd()]);
        // The program's ends are its own now: the pipes end when its do.
        drop((out, err));
        if let Err(e) = sent {
            unread_by(helper, e)?;
            continue;
        }
        let mut buf = vec![0u8; 64 * 1024];
        let answered = drain.until_readable(helper.sock.as_raw_fd());
        let reply = answered.and_then(|()| recv(helper.sock.as_raw_fd(), &mut buf, &mut []));
        // The run is over (or its helper gone): its outputs are complete.
        let copied = drain.finish().map_err(|e| format!("recording the program's output: {e}"));
        // What was lost through the judge's fault during the run, if so.
        let lost = match reply {
            Ok(n) if n > 0 => match serde_json::from_slice(&buf[..n]) {
                Ok(Reply::Ok(u)) => {
                    POOL.lock().unwrap().push(helper);
                    return copied.map(|()| u);
                }
                Ok(Reply::Err(e)) => {
                    POOL.lock().unwrap().push(helper);
                    return Err(e);
                }
                // The helper retires after this answer.
                Ok(Reply::Lost(why)) => format!("{why} (the helper {})", helper.reap()),
                Err(e) => {
                    helper.discard();
                    return Err(format!("sandbox helper: a reply that does not parse: {e}"));
                }
            },
            Ok(_) => format!("the sandbox helper {} during the run", helper.reap()),
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                unread_by(helper, e)?;
                continue;
            }
            Err(e) => {
                helper.discard();
                return Err(format!("sandbox helper: {e}"));
            }
        };
        // The judge's fault, never the program's: run it again once, in a
        // new helper, when nothing of the first run is left to touch its
        // files (a slot uid to sweep) and the files can be put back as they
        // were (not pipes).
        let swept = !rerun && req.identity.is_some_and(sandbox::clear_after_dead_helper);
        if swept && stdin.rewind() && outputs.rewind() {
            log::warn!("{lost}; running it again in a new helper");
            (rerun, fresh) = (true, true);
            continue;
        }
        return Err(lost);
    }
}

static POOL: Mutex<Vec<Helper>> = Mutex::new(Vec::new());

struct Helper {
    sock: OwnedFd,
    pid: libc::pid_t,
}

impl Helper {
    fn start() -> io::Result<Helper> {
        // Keeps the constructor (and its section) in every binary that runs sandboxes.
        std::hint::black_box(&HOOK);
        // The helper's mount namespace is a copy of ours: the workspaces'
        // file system must be in it.
        crate::workspace::root();
        let mut sv = [0; 2];
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) }
            != 0
        {
            return Err(io::Error::last_os_error());
        }
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), File::from_raw_fd(sv[1])) };
        let child = Command::new("/proc/self/exe")
            .arg0("ojrunner-sandbox-helper")
            .arg(HELPER_ARG)
            .env_clear()
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Helper { sock: ours, pid: child.id() as libc::pid_t })
    }

    /// Closes the socket (the helper exits), kills and reaps it.
    fn discard(self) {
        drop(self.sock);
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }

    /// Reaps a helper whose socket closed (killing it if it is still
    /// there after a second): how it ended, for the log.
    fn reap(self) -> String {
        drop(self.sock);
        let mut status = 0;
        for _ in 0..500 {
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } != 0 {
                return describe(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, &mut status, 0);
        }
        "closed its socket and hung".into()
    }

    /// Closes the socket and lets the helper finish its cleanup (at most 5 s).
    fn close(self) {
        drop(self.sock);
        for _ in 0..2500 {
            let r = unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) };
            if r == self.pid || (r < 0 && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        eprintln!("ojrunner: sandbox helper {} did not exit; killing it", self.pid);
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// A wait status in words.
pub(crate) fn describe(status: libc::c_int) -> String {
    if libc::WIFSIGNALED(status) {
        format!("was killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    }
}

/// The constructor: runs before `main` in every process of a binary linked
/// with this library; takes over the process when `argv[1]` is [`HELPER_ARG`].
extern "C" fn hook(argc: libc::c_int, argv: *const *const libc::c_char, _envp: *const *const libc::c_char) {
    if argc < 2 || argv.is_null() {
        return;
    }
    let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(1)) };
    if arg.to_bytes() == HELPER_ARG.as_bytes() {
        let code = serve(0);
        unsafe { libc::_exit(code) };
    }
}

#[used]
#[link_section = ".init_array"]
static HOOK: extern "C" fn(libc::c_int, *const *const libc::c_char, *const *const libc::c_char) = hook;

/// The helper's loop on socket `fd`: one request, one run, one reply; exits
/// when the socket closes.
fn serve(fd: RawFd) -> i32 {
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    sandbox::helper_init();
    let mut buf = vec![0u8; 256 * 1024];
    let code = loop {
        let mut fds = [-1; 3];
        let n = match recv(fd, &mut buf, &mut fds) {
            Ok(0) => break 0,
            Ok(n) => n,
            Err(e) => {
                eprintln!("ojrunner-sandbox-helper: {e}");
                break 1;
            }
        };
        let stdio = fds.map(|f| (f >= 0).then(|| unsafe { File::from_raw_fd(f) }));
        let ran: Result<Usage, String> = match (serde_json::from_slice::<Request>(&buf[..n]), stdio) {
            (Ok(req), [Some(i), Some(o), Some(e)]) => sandbox::run_here(req, [i, o, e], fd),
            (Err(e), _) => Err(format!("bad request: {e}")),
            _ => Err("bad request: three files expected".into()),
        };
        let reply = match ran {
            Ok(u) => Reply::Ok(u),
            Err(e) if sandbox::must_retire() => Reply::Lost(e),
            Err(e) => Reply::Err(e),
        };
        let out = serde_json::to_vec(&reply).unwrap_or_default();
        if send(fd, &out, &[]).is_err() {
            break 0;
        }
        sandbox::after_reply();
        if sandbox::must_retire() {
            break 1;
        }
    };
    sandbox::helper_exit();
    code
}

/// Sends one message with `fds` attached.
fn send(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
    let mut cbuf = [0u64; 8];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let len = std::mem::size_of_val(fds) as u32;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(len) } as usize;
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(len) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
        }
    }
    loop {
        if unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) } >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives one message (its length; 0 at end of stream) and up to
/// `fds.len()` attached descriptors (close-on-exec).
pub(crate) fn recv(sock: RawFd, buf: &mut [u8], fds: &mut [RawFd]) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = [0u64; 8];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let n = loop {
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut got = 0;
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c) as *const RawFd;
                for i in 0..count {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    if got < fds.len() {
                        fds[got] = fd;
                        got += 1;
                    } else {
                        libc::close(fd);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "message too long"));
    }
    Ok(n)
}

/// Sends one file descriptor with a one-byte message.
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    send(sock, b"f", &[fd])
}

/// Receives one file descriptor; `None` if the peer closed without sending.
pub(crate) fn recv_fd(sock: RawFd) -> Option<OwnedFd> {
    let (mut buf, mut fds) = ([0u8; 1], [-1]);
    match recv(sock, &mut buf, &mut fds) {
        Ok(n) if n > 0 && fds[0] >= 0 => Some(unsafe { OwnedFd::from_raw_fd(fds[0]) }),
        _ => None,
    }
}

/// Closes the idle helpers (they finish their cleanup and exit); the next
/// run starts new ones.
pub fn shutdown() {
    for h in POOL.lock().unwrap().drain(..) {
        h.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Exit, Spec};

    #[test]
    // The sleeping child is reaped by `Helper::discard`, through its pid.
    #[allow(clippy::zombie_processes)]
    fn a_request_a_retiring_helper_left_unread_goes_to_a_fresh_one() {
        // A "helper" (a sleeping child for its pid) that closes its socket
        // once a request waits there, unread, as a retiring helper does.
        let mut sv = [0; 2];
        let r =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) };
        assert_eq!(r, 0);
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let retiring = std::thread::spawn(move || {
            let mut p = libc::pollfd { fd: theirs.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ready = unsafe { libc::poll(&mut p, 1, 10_000) };
            drop(theirs);
            ready
        });
        POOL.lock().unwrap().push(Helper { sock: ours, pid: child.id() as libc::pid_t });
        let usage = crate::sandbox::run(Spec::trial(&["/bin/true"], None).unwrap());
        assert_eq!(retiring.join().unwrap(), 1, "the request never reached the retiring helper");
        assert_eq!(usage.map(|u| u.exit), Ok(Exit::Code(0)), "the request was not run by a fresh helper");
    }
}
