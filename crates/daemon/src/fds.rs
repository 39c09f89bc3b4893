//! The descriptors a program keeps to itself: whatever it inherited beyond
//! stdio (from a supervisor, a shell, a pipe; a notification fd among
//! them) must not reach the programs it starts, judged programs least of
//! all.

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
    if libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
        return;
    }
    // Before Linux 5.11: one by one, up to the descriptor limit.
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 { rl.rlim_cur.min(1 << 16) } else { 1 << 16 };
    for fd in 3..max as libc::c_int {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
}
