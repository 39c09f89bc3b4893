//! The kernel calls the sandbox makes, each wrapped once: descriptors passed
//! over a socket, a child waited for or reaped, a pipe, a process's own CPU
//! time, the descriptors that may cross an `exec`.
//!
//! All of it is raw `libc`, on purpose: `send_fd`, `pipe`'s ends and
//! [`only_stdio_across_exec`] are used between `clone` and `exec`, in a
//! child that shares its parent's memory, where nothing may allocate or
//! take a lock (nix's `sendmsg` allocates its control buffer).

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Sends one message with `fds` attached.
pub(super) fn send(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain data: all zeroes is a valid, empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let len = std::mem::size_of_val(fds) as u32;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(len) } as usize;
        // SAFETY: `cbuf` (64 bytes, aligned) holds one header and the few descriptors sent (4 at most: 32 bytes), as
        // msg_controllen says.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(len) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
        }
    }
    loop {
        // SAFETY: `msg` points at `iov` (over `data`) and `cbuf`, all alive across the call.
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
    // SAFETY: msghdr is plain data: all zeroes is a valid, empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let n = loop {
        // SAFETY: `msg` points at `iov` (over `buf`) and `cbuf`, all alive; the kernel writes within their lengths.
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
    // SAFETY: the CMSG walk stays within what the kernel wrote to `cbuf` (msg_controllen); the descriptors read are ours,
    // just received.
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

/// A new, empty memfd named `name` (close-on-exec): a file of the judge's
/// own on no file system.
pub(crate) fn memfd(name: &std::ffi::CStr) -> io::Result<std::fs::File> {
    memfd_with(name, libc::MFD_CLOEXEC)
}

/// [`memfd`] with `flags` (`MFD_ALLOW_SEALING`, say).
pub(crate) fn memfd_with(name: &std::ffi::CStr, flags: libc::c_uint) -> io::Result<std::fs::File> {
    // SAFETY: `name` is NUL-terminated; memfd_create reads nothing else.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create; nothing else owns it.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Sends one file descriptor with a one-byte message.
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    send(sock, b"f", &[fd])
}

/// Receives one file descriptor; `None` if the peer closed without sending.
pub(crate) fn recv_fd(sock: RawFd) -> Option<OwnedFd> {
    let (mut buf, mut fds) = ([0u8; 1], [-1]);
    match recv(sock, &mut buf, &mut fds) {
        // SAFETY: just received (SCM_RIGHTS): this process's own; nothing else owns it.
        Ok(n) if n > 0 && fds[0] >= 0 => Some(unsafe { OwnedFd::from_raw_fd(fds[0]) }),
        _ => None,
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

/// The calling process's own CPU time (its threads, not its children).
pub(crate) fn own_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only `t`, a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

pub(super) fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes no pointer.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor pidfd_open just returned; nothing else owns it.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Whether the program has exited (it stays a zombie: `WNOWAIT`).
pub(crate) fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo_t is plain data: all zeroes is valid (si_pid 0: no child).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only `info`, a live local.
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: `info` is zeroed or filled by waitid for a child, whose si_pid is set.
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Reaps the program: its wait status and resource usage.
pub(crate) fn reap(pid: libc::pid_t) -> io::Result<(libc::c_int, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain data: all zeroes is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes only `status` and `ru`, live locals.
        if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } == pid {
            return Ok((status, ru));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(super) fn sysconf(name: libc::c_int) -> u64 {
    // SAFETY: sysconf takes no pointer.
    (unsafe { libc::sysconf(name) }).max(1) as u64
}

/// Makes the calling process the reaper of its orphaned descendants,
/// so that a judged program's background children, once killed, are reaped
/// by the slot's sweep (`slot::sweep`) rather than left as zombies under an init that may never reap
/// them (counting against the slot's `RLIMIT_NPROC` forever).
pub(super) fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Marks every descriptor above stderr close-on-exec (raw system calls
/// only, so sound between `clone` and `exec`).
pub use ojrunner_daemon::fds::only_stdio_across_exec;

/// Whether this process has `CAP_SYS_RESOURCE` in its effective set: it may
/// lower its `oom_score_adj` and raise a hard rlimit. Root in many
/// containers does not.
pub fn has_cap_sys_resource() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    effective.is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

/// The text of a kernel file held open (a cgroup's, a `/proc` one), read
/// again from its start: the kernel makes it anew for each read at 0.
pub(super) fn reread<'b>(f: &File, buf: &'b mut [u8]) -> Option<&'b str> {
    use std::os::unix::fs::FileExt;
    let n = f.read_at(buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()
}

/// `e`, naming the file it is about.
pub(super) fn annotate(e: io::Error, p: &std::path::Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// A pipe, both ends close-on-exec: (read, write).
pub(super) fn pipe() -> io::Result<(File, File)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((File::from(r), File::from(w)))
}
