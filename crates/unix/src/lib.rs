//! The raw Unix calls of the daemon plumbing (`ojrunner-daemon`) that no
//! safe API offers, so that the daemon, protocol and hub crates forbid
//! `unsafe` and the hub still links none of the runner: a descriptor
//! inherited by number (I/O safety has no safe way to claim one), every
//! descriptor close-on-exec (also between `clone` and `exec`, in the
//! sandbox), and SIGPIPE's default disposition.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::io::{Error, ErrorKind, Write};
use std::os::fd::FromRawFd;

/// Marks every descriptor this process inherited beyond stdio
/// close-on-exec. Called first thing by every program; the sandbox makes
/// sure of it again in each judged program's child.
pub fn keep_inherited_fds_private() {
    // SAFETY: only sets FD_CLOEXEC, on every descriptor above 2, before any thread starts.
    unsafe { only_stdio_across_exec() }
}

/// Marks every descriptor above stderr close-on-exec, whatever this process
/// inherited: nothing but 0, 1 and 2 crosses an `exec`. Raw system calls
/// only (the sandbox calls it between `clone` and `exec`).
///
/// # Safety
/// Changes descriptor flags of the whole descriptor table: call it before
/// threads that open descriptors of their own start, or in a child just
/// before `exec`.
pub unsafe fn only_stdio_across_exec() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range takes no pointers; the caller vouches for the table (above).
    if unsafe { libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) } == 0 {
        return;
    }
    // Before Linux 5.11: one by one, up to the descriptor limit.
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only `rl`, a live local.
    let max =
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0 { rl.rlim_cur.min(1 << 16) } else { 1 << 16 };
    for fd in 3..max as libc::c_int {
        // SAFETY: F_SETFD takes no pointer; a descriptor not open is EBADF, ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// Writes `bytes` to descriptor `fd`, which this process inherited for
/// that alone (a supervisor's notification fd, named on the command line),
/// and closes it. An `fd` that is not open is an error, never a write to
/// whatever opens as `fd` later.
pub fn write_inherited_fd(fd: i32, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: F_GETFD takes no pointer: it only asks whether fd is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(Error::new(ErrorKind::InvalidInput, "not an open file descriptor"));
    }
    // SAFETY: the supervisor handed us this fd for exactly this; nothing
    // else in the process owns it, and we own it from here.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(bytes)
}

/// Restores the default SIGPIPE (Rust's runtime ignores it before `main`).
pub fn default_sigpipe() {
    // SAFETY: SIG_DFL installs no handler of ours, so no code runs in signal context.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
